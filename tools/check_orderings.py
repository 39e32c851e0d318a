#!/usr/bin/env python3
"""Holds fibersched.h to its word on atomics: every atomic operation with an ordering
weaker than seq_cst carries the argument why that ordering suffices, in the declarations'
macros, the implementation and the C++ layer alike.

An atomic operation is a call with a memory ordering among its arguments: the header's
wrappers (FSCHED__LOAD, FSCHED__STORE, FSCHED__CAS, FSCHED__FENCE, ...: every macro of
the implementation with a parameter `mo` or `succ`), a builtin (__ATOMIC_*) and, in the
C++ layer after the implementation, a member of std::atomic or a fence
(std::memory_order_*). Its orderings are the ones among its arguments (a CAS has two); it
needs an argument when one of them is relaxed, acquire, release or acq_rel.

An argument is a comment that names one of those weak orderings as a word
(case-insensitive: "relaxed: a hint", "acquire: pairs with ...", "Acq_rel, ..."), and
stands where it covers the operation:

  - on a line of the statement that holds it, from the end of the statement before to
    its own ";" (or, for a condition, to the "{" after it), a comment at its end too; or
  - in a comment block (lines of comments only) above it, which covers its paragraph:
    the lines below it up to the first that is blank, the next comment block, or the
    "}" or #elif, #else, #endif that ends the block or branch the comment stands in; and
    when the code right below the comment opens a block (a function's body, a loop, an
    if), that whole block as well, blank lines, comments and all. So a comment right
    above a function's definition covers the function.

One comment argues for a group: the statements of a paragraph, a loop, a function.

Fails (exit 1) on an operation without an argument, and on a wrapper whose ordering is not
one of the constants (which could not be judged), printed as

    fibersched.h:LINE: FSCHED__LOAD (relaxed) has no argument for its ordering

    python3 tools/check_orderings.py           # the header beside tools/
    python3 tools/check_orderings.py --list    # every operation, its orderings, its argument

Every branch of every #if is read. Standard library only.
"""

import argparse
import signal
import re
import sys

from check_layers import HEADER, TOKEN, blank, implementation

# the spellings of each ordering: the header's, the builtins', C++'s
ORDERINGS = {}
for name in ("relaxed", "acquire", "release", "acq_rel", "seq_cst"):
    for spelling in ("FSCHED__" + name.upper(), "__ATOMIC_" + name.upper(),
                     "memory_order_" + name):
        ORDERINGS[spelling] = name
WEAK = ("relaxed", "acquire", "release", "acq_rel")
NAMES_ORDERING = dict((name, re.compile(r"\b%s\b" % name, re.IGNORECASE)) for name in WEAK)
BRANCH = re.compile(r"^\s*#\s*(elif|else|endif)\b")
WRAPPER = re.compile(r"^\s*#\s*define\s+(FSCHED__\w+)\(([^)]*)\)")


class Operation:
    def __init__(self, name, line, orderings, first, last):
        self.name, self.line, self.orderings = name, line, orderings  # orderings: names
        self.first, self.last = first, last  # the lines of its statement
        self.argument = None  # the line of the comment that argues for it

    def weak(self):
        return [o for o in self.orderings if o in WEAK]


class Report:
    def __init__(self):
        self.operations = []
        self.errors = []  # (line, message)


# ---- reading the text ----

def wrappers(lines, begin, end):
    """The implementation's macros that take an ordering: a parameter `mo` or `succ`."""
    found = set()
    for number in range(begin, end + 1):
        m = WRAPPER.match(lines[number - 1])
        if m and set(p.strip() for p in m.group(2).split(",")) & {"mo", "succ"}:
            found.add(m.group(1))
    return found


def tokens_of(code, begin, end):
    """The tokens of blanked lines begin..end as (token, line); a directive, with its
    continuation lines, is a statement of its own: it ends in a ";" of line -1."""
    out = []
    number = begin
    while number <= end:
        directive = code[number - 1].lstrip().startswith("#")
        while True:
            out += [(t, number) for t in TOKEN.findall(code[number - 1])]
            if not (directive and code[number - 1].rstrip().endswith("\\") and number < end):
                break
            number += 1
        if directive:
            out.append((";", -1))
        number += 1
    return out


def find_operations(tokens, wrapper_names, report):
    """The calls among `tokens` with an ordering among their arguments; a wrapper without
    one is an error."""
    depth, depths = 0, []  # the parentheses open before each token
    for token, _ in tokens:
        depth -= token == ")"
        depths.append(depth)
        depth += token == "("
    for k, (token, line) in enumerate(tokens):
        if k + 1 >= len(tokens) or tokens[k + 1][0] != "(" or not re.match(r"[A-Za-z_]", token):
            continue
        if k and tokens[k - 1][0] == "define":
            continue  # a wrapper's definition
        inside = depths[k + 1] + 1
        close = k + 2
        while close < len(tokens) and not (tokens[close][0] == ")" and
                                           depths[close] == inside - 1):
            close += 1
        args = [t for (t, _), d in zip(tokens[k + 2:close], depths[k + 2:close]) if d == inside]
        orderings = [ORDERINGS[t] for t in args if t in ORDERINGS]
        if not orderings:
            if token in wrapper_names:
                report.errors.append((line, "%s: its ordering is not one of the constants"
                                      % token))
            continue
        first, last = statement_of(tokens, depths, k, close)
        report.operations.append(Operation(token, line, orderings, first, last))


def statement_of(tokens, depths, k, close):
    """The first and last lines of the statement holding the call from token k to the
    ")" at `close`."""
    start = k
    while start > 0 and not ends_statement(tokens[start - 1][0], depths[start - 1]):
        start -= 1
    stop = close
    while stop + 1 < len(tokens) and not ends_statement(tokens[stop][0], depths[stop]):
        stop += 1
    lines = [line for _, line in tokens[start:stop + 1] if line > 0]
    return min(lines), max(lines)


def ends_statement(token, depth):
    return token in ("{", "}") or (token == ";" and depth == 0)


# ---- comments ----

def comments_by_line(text, code):
    """Per line, the words of its comments (and strings): what blanking took away."""
    return [" ".join("".join(c if c != b else " " for c, b in zip(original, blanked)).split())
            for original, blanked in zip(text.split("\n"), code)]


def comment_blocks(lines, code, comments, begin, end):
    """The comment blocks of lines begin..end: runs of lines that hold comments and no
    code, as (first, last, text)."""
    blocks, first = [], None
    for number in range(begin, end + 2):
        only = number <= end and comments[number - 1].strip() and not code[number - 1].strip()
        if only and first is None:
            first = number
        elif not only and first is not None:
            blocks.append((first, number - 1,
                           " ".join(comments[n - 1] for n in range(first, number))))
            first = None
    return blocks


def covered_lines(block, starts, lines, tokens, depths, end):
    """The lines a comment block covers (see the docstring); `starts`: the first lines of
    all blocks; `depths`: per line, the braces (the lowest on it, at its end) and the
    #ifs open before it."""
    last = block[1]
    braces, ifs = depths[last][1], depths[last + 1][2]
    covered = set()
    number = last + 1
    while number <= end and lines[number - 1].strip() and number not in starts and \
            depths[number][0] >= braces and \
            not (BRANCH.match(lines[number - 1]) and depths[number][2] <= ifs):
        covered.add(number)
        number += 1
    opened = block_below(tokens, last)
    if opened:
        covered |= set(range(last + 1, opened + 1))
    return covered


def depths_of(lines, tokens, begin, end):
    """Per line begin..end + 1: the lowest brace depth on it, the depth at its end, and
    the #ifs open before it."""
    depths, depth, ifs = {}, 0, 0
    k = 0
    for number in range(begin, end + 2):
        low = depth
        while k < len(tokens) and tokens[k][1] <= number:
            if tokens[k][1] == number:
                depth += {"{": 1, "}": -1}.get(tokens[k][0], 0)
                low = min(low, depth)
            k += 1
        depths[number] = (low, depth, ifs)
        directive = re.match(r"\s*#\s*(\w+)", lines[number - 1]) if number <= end else None
        if directive and directive.group(1) in ("if", "ifdef", "ifndef"):
            ifs += 1
        elif directive and directive.group(1) == "endif":
            ifs -= 1
    return depths


def first_token_after(tokens, line):
    """The index of the first token on a line after `line`, or None."""
    low, high = 0, len(tokens)
    while low < high:  # directives' ";" (line -1) break the order: skip them
        mid = (low + high) // 2
        k = mid
        while k > 0 and tokens[k][1] < 0:
            k -= 1
        if tokens[k][1] <= line:
            low = mid + 1
        else:
            high = mid
    return low if low < len(tokens) else None


def block_below(tokens, last):
    """When the code right below line `last` opens a block before its statement ends: the
    line of the "}" that closes it."""
    k = first_token_after(tokens, last)
    if k is None or tokens[k][1] != last + 1:
        return None
    depth = 0
    while k < len(tokens):
        token = tokens[k][0]
        depth += {"(": 1, ")": -1}.get(token, 0)
        if token in (";", "}") and depth <= 0:
            return None
        if token == "{":
            break
        k += 1
    if k >= len(tokens):
        return None
    braces = 0
    for token, line in tokens[k:]:
        braces += {"{": 1, "}": -1}.get(token, 0)
        if braces == 0:
            return line
    return None


# ---- the check ----

def check(text):
    """Reads a header: its atomic operations, the argument of each, and the errors, each a
    (line, message), in the order of their lines."""
    report = Report()
    lines = text.split("\n")
    begin, end = implementation(lines, report.errors)
    if begin is None:
        return report
    code = blank(text).split("\n")
    comments = comments_by_line(text, code)
    names = wrappers(lines, begin, end)
    # the declarations (their macros), the implementation, then the C++ layer
    for first, last in ((1, begin - 1), (begin, end), (end + 1, len(lines))):
        tokens = tokens_of(code, first, last)
        found = len(report.operations)
        find_operations(tokens, names, report)
        operations = [op for op in report.operations[found:] if op.weak()]
        if operations:
            argue(operations, lines, code, comments, tokens, first, last)
    for op in report.operations:
        if op.weak() and op.argument is None:
            report.errors.append((op.line, "%s (%s) has no argument for its ordering"
                                  % (op.name, "/".join(op.orderings))))
    report.errors.sort(key=lambda e: e[0])
    return report


def argue(operations, lines, code, comments, tokens, begin, end):
    """Finds each operation's argument: a comment on its statement, else the nearest block
    above that covers it."""
    def names(text, op):
        return any(NAMES_ORDERING[o].search(text) for o in op.weak())

    found = comment_blocks(lines, code, comments, begin, end)
    starts = set(block[0] for block in found)
    depths = depths_of(lines, tokens, begin, end)
    blocks = []  # (the block's last line, the lines it covers, its text)
    for block in found:
        blocks.append((block[1], covered_lines(block, starts, lines, tokens, depths, end),
                       block[2]))
    for op in operations:
        own = [n for n in range(op.first, op.last + 1) if names(comments[n - 1], op)]
        if own:
            op.argument = own[0]
            continue
        for last, covered, text in reversed(blocks):
            if last < op.first and op.first in covered and names(text, op):
                op.argument = last
                break


def main(argv=None):
    if hasattr(signal, "SIGPIPE"):  # piped into head: stop quietly
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("header", nargs="?", help="the header (default: fibersched.h)")
    parser.add_argument("--list", action="store_true",
                        help="print every atomic operation, its orderings and its argument")
    args = parser.parse_args(argv)
    with open(args.header or HEADER, encoding="utf-8") as f:
        report = check(f.read())
    where = args.header or "fibersched.h"
    if args.list:
        for op in report.operations:
            print("%s:%d: %s (%s)%s" % (
                where, op.line, op.name, "/".join(op.orderings),
                "" if not op.weak() else ": no argument" if op.argument is None
                else ": argued at %d" % op.argument))
    for line, message in report.errors:
        print("%s:%d: %s" % (where, line, message))
    weak = [op for op in report.operations if op.weak()]
    if report.errors:
        print("%s: %d error%s: %d of %d operations weaker than seq_cst have no argument"
              % (where, len(report.errors), "s" if len(report.errors) > 1 else "",
                 sum(1 for op in weak if op.argument is None), len(weak)))
        return 1
    print("%s: %d atomic operations, %d weaker than seq_cst: each has its argument"
          % (where, len(report.operations), len(weak)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
