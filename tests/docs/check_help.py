#!/usr/bin/env python3
"""README.md's copy of `./mnist_train --help` against the program's own.

    check_help.py README.md HELP.txt

README shows the help of examples/mnist.net's program, indented, after the
line "From `./mnist_train --help`:"; HELP.txt is what that program prints.
Every line must be the same: a flag, a default or a limit changed in
runtime/flags.c and not in README (or the other way) fails, naming the first
line that differs. Exit 0 when they agree, 1 when not, 2 on a wrong command.
"""
import sys

MARK = "From `./mnist_train --help`:"


def readme_block(path):
    """The lines of README's indented help block, less their 4 spaces."""
    lines = open(path, encoding="utf-8").read().split("\n")
    try:
        start = lines.index(MARK) + 1
    except ValueError:
        sys.exit(f"check_help: {path}: no line '{MARK}'")
    block = []
    for line in lines[start:]:
        if line and not line.startswith("    "):
            break
        block.append(line[4:])
    while block and not block[0]:
        block.pop(0)
    while block and not block[-1]:
        block.pop()
    return block


def main():
    if len(sys.argv) != 3:
        print("usage: check_help.py README.md HELP.txt", file=sys.stderr)
        return 2
    readme = readme_block(sys.argv[1])
    help_lines = open(sys.argv[2], encoding="utf-8").read().rstrip("\n").split("\n")
    for i in range(max(len(readme), len(help_lines))):
        ours = readme[i] if i < len(readme) else "(none)"
        theirs = help_lines[i] if i < len(help_lines) else "(none)"
        if ours != theirs:
            print(f"check_help: line {i + 1} of the help differs:\n  README:  {ours}\n  --help:  {theirs}")
            return 1
    print(f"check_help: README's --help block is the program's, {len(help_lines)} lines: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
