#!/usr/bin/python3
"""Size limits outside tests: a source file at most 500 lines, a function at most 80 (from its
signature to its closing brace). Run by CTest as `Sizes`.

Usage: scripts/check_sizes.py [ROOT]   (exit 1 listing every file or function over its limit)
"""
import pathlib
import re
import subprocess
import sys

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80
SKIP = ('tests/', 'fuzz/seeds/', 'docs/')
CONTROL = re.compile(r'\b(if|for|while|switch|catch|do|else|try)\s*(\(.*)?$', re.S)
FUNCTION_TAIL = re.compile(
    r'\)\s*(const|noexcept|override|final|mutable|&|->\s*[\w:<>,\s*&]+|\s)*'
    r'(:\s*[\w:]+\s*[({].*)?$', re.S)


def strip(text):
    """The text with comments, strings and character literals blanked, lines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            i = n if j < 0 else j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(')' + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c and text[j] != '\n':
                j += 2 if text[j] == '\\' else 1
            out.append(c + ' ' * (j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def long_functions(text):
    """(first line, lines) of each function body longer than the limit, outermost only."""
    code = strip(text)
    found, stack, header_start = [], [], 0
    for i, c in enumerate(code):
        if c == '{':
            header = code[header_start:i]
            in_function = any(kind == 'function' for kind, _ in stack)
            is_function = (not in_function and FUNCTION_TAIL.search(header.strip()) is not None
                           and not CONTROL.search(header.strip())
                           and not re.search(r'\b(namespace|class|struct|enum|union)\b|=\s*$',
                                             header))
            first = header_start + len(header) - len(header.lstrip())
            stack.append(('function' if is_function else 'block', first))
            header_start = i + 1
        elif c == '}':
            if stack:
                kind, first = stack.pop()
                if kind == 'function':
                    start = code.count('\n', 0, first) + 1
                    end = code.count('\n', 0, i) + 1
                    if end - start + 1 > MAX_FUNCTION_LINES:
                        found.append((start, end - start + 1))
            header_start = i + 1
        elif c == ';':
            header_start = i + 1
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    files = subprocess.run(['git', '-C', str(root), 'ls-files', '--cached', '--others',
                            '--exclude-standard', '*.cpp', '*.h'],
                           capture_output=True, text=True, check=True).stdout.split()
    problems = []
    for rel in files:
        path = root / rel
        if rel.startswith(SKIP) or not path.is_file():
            continue
        text = path.read_text(errors='replace')
        lines = text.count('\n')
        if lines > MAX_FILE_LINES:
            problems.append(f'{rel}: {lines} lines (at most {MAX_FILE_LINES})')
        for start, length in long_functions(text):
            problems.append(f'{rel}:{start}: a function of {length} lines '
                            f'(at most {MAX_FUNCTION_LINES})')
    for p in problems:
        print(p)
    print(f'{len(problems)} over the limits' if problems else 'sizes: every file and function within the limits')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
