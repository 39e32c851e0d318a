#!/usr/bin/env python3
"""Embeds tools/fibersched-gdb.py in fibersched.h, for FIBERSCHED_GDB_SCRIPT.

    python3 tools/embed-gdb-script.py           rewrites the embedded text in fibersched.h
    python3 tools/embed-gdb-script.py --check   fails when it differs from the script

A program built with FIBERSCHED_GDB_SCRIPT carries the script's text in its
.debug_gdb_scripts section, as an entry of kind 4 (a Python script inline: a byte 4, the
script's name on the first line, then its text, ending with a NUL), which gdb runs when it
loads the program. The header holds that text as assembly, one .ascii string per line of
the script: the script is written without double quotes and backslashes so that each line
goes in as it is, and the strings are grouped in statements shorter than the 4095
characters a C compiler must accept (-Woverlength-strings). Python standard library only.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tools", "fibersched-gdb.py")
HEADER = os.path.join(ROOT, "fibersched.h")
BEGIN = "#if defined(FSCHED__GDB_SCRIPT)\n"
END = "#endif /* FSCHED__GDB_SCRIPT */\n"
NAME = "fibersched-gdb.py"  # the entry's name: gdb runs a script of a given name once
CHUNK = 3000  # characters of assembly per statement, under C's 4095


def script_lines(text):
    for number, line in enumerate(text.splitlines(), 1):
        for bad in ('"', "\\", "??", "\t"):
            if bad in line:
                raise ValueError("%s:%d: %r cannot be embedded as it is"
                                 % (os.path.relpath(SCRIPT, ROOT), number, bad))
    return text.splitlines()


def block(text):
    """The header's text from BEGIN to END, for the script `text`."""
    lines = [NAME] + script_lines(text)
    out = [BEGIN, "#define FSCHED__GDB_LINE(text) \".ascii \\\"\" text \"\\\\n\\\"\\n\"\n"]
    statements, current, size = [], [], 0
    for line in lines:
        item = '    FSCHED__GDB_LINE("%s")\n' % line
        if current and size + len(line) + 12 > CHUNK:
            statements.append(current)
            current, size = [], 0
        current.append(item)
        size += len(line) + 12
    statements.append(current)
    for k, statement in enumerate(statements):
        head = '.pushsection \\".debug_gdb_scripts\\", \\"MS\\", %progbits, 1\\n'
        out.append('__asm__("%s"\n' % head)
        if k == 0:
            out.append('    ".byte 4\\n"\n')
        out.extend(statement)
        if k == len(statements) - 1:
            out.append('    ".byte 0\\n"\n')
        out.append('    ".popsection\\n");\n')
    out.append("#undef FSCHED__GDB_LINE\n")
    out.append(END)
    return "".join(out)


def main(argv):
    check = argv[1:] == ["--check"]
    if argv[1:] and not check:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(SCRIPT, encoding="utf-8") as f:
        script = f.read()
    with open(HEADER, encoding="utf-8", newline="") as f:
        header = f.read()
    start = header.find(BEGIN)
    end = header.find(END, start)
    if start < 0 or end < 0:
        print("%s: no embedded script (%r ... %r)" % (HEADER, BEGIN.strip(), END.strip()),
              file=sys.stderr)
        return 1
    try:
        wanted = block(script)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 1
    current = header[start:end + len(END)]
    if check:
        if current != wanted:
            print("fibersched.h: the embedded gdb script differs from tools/fibersched-gdb.py:"
                  " run python3 tools/embed-gdb-script.py", file=sys.stderr)
            return 1
        print("embedded gdb script: ok (%d lines)" % len(script.splitlines()))
        return 0
    if current != wanted:
        with open(HEADER, "w", encoding="utf-8", newline="") as f:
            f.write(header[:start] + wanted + header[end + len(END):])
        print("fibersched.h: embedded gdb script updated")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
