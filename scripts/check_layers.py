#!/usr/bin/python3
"""The layering rule, checked: a source file includes only headers of its own folder or of
folders below it in LAYERS, and LibTorch headers only in rl/. rl/ is the LibTorch library: above
it only the training side (TRAIN_SIDE, linked into looptool-train) includes its headers, so
`tune`, `looptool` and the Python module run without LibTorch. Run by CTest as `Layers`.

Usage: scripts/check_layers.py [ROOT]   (exit 1 listing every violation)
"""
import pathlib
import re
import sys

# Bottom up; a folder may include from itself and from anything before it.
LAYERS = [
    'util', 'looptool/ir', 'looptool/actions', 'looptool/formats', 'looptool/lower',
    'looptool/jit', 'looptool/check', 'looptool/measure', 'looptool/gen', 'env/store', 'env',
    'search', 'policy', 'rl', 'rl/mpi', 'tune', 'lib', 'baselines', 'experiments', 'benchmarks', 'cli',
    'python',
]
# Folders that may include anything (they test or fuzz every layer).
FREE = ['tests', 'fuzz']
TORCH_FOLDERS = ['rl', 'rl/mpi']
# Files and folders above rl/ that may include its headers: the training side.
TRAIN_SIDE = ['benchmarks', 'cli/cmd_train.cpp', 'cli/cmd_policy.cpp']
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def folder_of(path):
    """The deepest LAYERS (or FREE) folder holding a path, or None."""
    parts = pathlib.PurePosixPath(path).parts[:-1]
    for n in range(len(parts), 0, -1):
        candidate = '/'.join(parts[:n])
        if candidate in LAYERS or candidate in FREE:
            return candidate
    return None


def violations(root):
    found = []
    rank = {name: i for i, name in enumerate(LAYERS)}
    for f in sorted(root.rglob('*')):
        if f.suffix not in ('.h', '.cpp') or 'build' in f.relative_to(root).parts[:1]:
            continue
        rel = f.relative_to(root).as_posix()
        here = folder_of(rel)
        if here is None:
            found.append(f'{rel}: not in any layer folder')
            continue
        for n, line in enumerate(f.read_text(errors='replace').splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            kind, header = m.groups()
            if kind == '<' and header.split('/')[0] in ('torch', 'ATen', 'c10'):
                if here not in TORCH_FOLDERS and here not in FREE:
                    found.append(f'{rel}:{n}: LibTorch header <{header}> outside rl/')
                continue
            if kind != '"' or here in FREE:
                continue
            there = folder_of(header)
            if there is None or there in FREE:
                found.append(f'{rel}:{n}: "{header}" is in no layer folder')
            elif rank[there] > rank[here]:
                found.append(f'{rel}:{n}: {here} includes "{header}" from {there}, a layer above it')
            elif (there in TORCH_FOLDERS and here not in TORCH_FOLDERS and here not in TRAIN_SIDE
                  and rel not in TRAIN_SIDE):
                found.append(f'{rel}:{n}: "{header}" is in rl/, the LibTorch library, which only '
                             'the training side (TRAIN_SIDE) may include')
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    found = violations(root.resolve())
    for v in found:
        print(v)
    print(f'{len(found)} layering violation(s)' if found else 'layers: every include points down')
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
