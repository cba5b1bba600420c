#!/usr/bin/python3
"""Release mode, checked: `looptool` and the Python module `_core` link no LibTorch (libtorch*,
libc10*) and no MPI, and none is loaded by `looptool --help`, `looptool tune` or
`import looptune; looptune.tune(...)` (LD_DEBUG=libs lists every library a process loads,
dlopen included). Only `looptool train`'s executable, looptool-train, may load them. Run by
CTest as `NoLibTorch`.

Usage: scripts/check_no_libtorch.py LOOPTOOL CORE_MODULE PYTHONPATH   (exit 1 listing each)
"""
import os
import re
import subprocess
import sys
import tempfile

FORBIDDEN = re.compile(r'\b(libtorch[\w.-]*\.so[\w.]*|libc10[\w.-]*\.so[\w.]*|libmpi[\w.-]*\.so[\w.]*)')


def linked(path):
    """The libraries ldd says `path` needs, transitively, that are forbidden."""
    out = subprocess.run(['ldd', path], capture_output=True, text=True, check=True).stdout
    return sorted(set(FORBIDDEN.findall(out)))


def loaded(cmd, env=None):
    """The forbidden libraries a run of `cmd` loads (LD_DEBUG=libs), and its exit code."""
    env = dict(env or os.environ, LD_DEBUG='libs')
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    found = set()
    for line in r.stderr.splitlines():
        # "find library=NAME" when it is looked for, "calling init: PATH" once loaded.
        m = re.search(r'(?:find library=|calling init: )(\S+)', line)
        if m and FORBIDDEN.search(os.path.basename(m.group(1))):
            found.add(os.path.basename(m.group(1)))
    return sorted(found), r.returncode


def main():
    looptool, core, pythonpath = sys.argv[1:4]
    problems = []
    for path in (looptool, core):
        for lib in linked(path):
            problems.append(f'{path} links {lib}')
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([looptool, 'generate', '--dimA', '32,48', '--dimB', '48,16', '--out', tmp],
                       check=True, capture_output=True)
        bench = os.path.join(tmp, sorted(os.listdir(tmp))[0])
        runs = {
            'looptool --help': [looptool, '--help'],
            'looptool tune': [looptool, 'tune', '--greedy', '--bench', bench],
            'looptune.tune': [
                '/usr/bin/python3', '-c',
                f'import looptune; looptune.tune({bench!r}, greedy=True)'],
        }
        env = dict(os.environ, PYTHONPATH=pythonpath)
        for name, cmd in runs.items():
            libs, code = loaded(cmd, env)
            if code != 0:
                problems.append(f'{name}: exit code {code}')
            for lib in libs:
                problems.append(f'{name} loads {lib}')
    for p in problems:
        print(p)
    print(f'{len(problems)} problem(s)' if problems else
          'release mode: no LibTorch or MPI linked or loaded outside looptool-train')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
