#!/usr/bin/env python3
"""Holds fibersched.h's implementation to its layers: a function calls only functions of
its own layer or of the layers below it.

The implementation declares its layers once, at its top, in a comment of lines

    LAYER name: banner; banner; ...
    LAYER name (beside other): banner; ...

bottom to top; a line that goes on continues on the next, more indented, lines. A banner
is named by its title ("/* ---- the core latch ---- */"), or by the part of its title
before a colon ("platform" for "platform: atomics, ..."), and must be named once. A
function lies in the layer of the banner above it; a "----" banner that no LAYER line
names lies in the layer of the "====" banner above it. A layer beside another stands on
its level: neither may call the other. The file reads bottom up: no banner comes after
one of a higher layer. The C++ layer, after the implementation, stands
above all and calls public functions (fsched_*) only, and the private ones the
declarations declare for their macros (its helpers of those macros share them).

Fails (exit 1) on a function that calls one of a higher layer, or of another layer on
its level; a private function (fsched__*) that nothing uses; a banner in no layer, or
after one of a higher layer; and a table that does not hold together. A use that breaks the layers is printed once per
caller and callee, at its first line:

    fibersched.h:LINE: caller (layer) calls callee (layer, defined at LINE)

    python3 tools/check_layers.py            # the header beside tools/
    python3 tools/check_layers.py --list     # the layer of every function
    python3 tools/check_layers.py --table    # the table, and the banners of each layer
    python3 tools/check_layers.py --longest 10  # the longest functions

What counts as a use: the name of a function the implementation defines, in a function
body or an initializer at file scope, outside comments and strings, and not after "." or
"->". Followed by "(" it is a call; otherwise (a function passed or stored as a pointer)
a reference, held to the layers the same way, since it needs the same prototype. A macro
stands for the functions its body names, through the macros it names: a use of it is a
call of each. Every branch of every #if is read, as if all were compiled. Not seen:
functions that a macro defines or whose names it pastes together, and calls through
pointers (the way a lower layer reaches up, which is allowed).

Standard library only.
"""

import argparse
import signal
import os
import re
import sys

HEADER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "fibersched.h")

IMPLEMENTATION_BEGIN = \
    "#if defined(FIBERSCHED_IMPLEMENTATION) && !defined(FIBERSCHED_IMPLEMENTATION_ONCE)"
IMPLEMENTATION_END = "#endif /* FIBERSCHED_IMPLEMENTATION */"
CPP_LAYER = "C++"

LAYER_LINE = re.compile(r"^(\s*)LAYER\s+([^:()]+?)\s*(?:\(beside\s+([^)]+?)\s*\))?\s*:(.*)$")
PART_BANNER = re.compile(r"^/\* ---- (.*?)[\s-]*(?:\*/)?\s*$")
SECTION_RULE = re.compile(r"^/\* =+ \*/\s*$")
SECTION_TITLE = re.compile(r"^/\*\s+(.*?)\s*\*/\s*$")
TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\w.]*|->|[-+*/%&|^!=<>]=|&&|\|\||<<|>>|\S")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*$")

# a parenthesised group after these is not a parameter list
NOT_FUNCTION_NAMES = {"__attribute__", "__declspec", "__asm__", "asm", "if", "while", "for",
                      "switch", "return", "sizeof", "_Alignof", "__typeof__", "defined"}


class Layer:
    def __init__(self, name, level, line, text):
        self.name, self.level, self.line = name, level, line
        self.text = text  # the banners it names, as written
        self.entries = []


class Banner:
    def __init__(self, line, title, section):
        self.line, self.title = line, title
        self.section = section  # the "====" banner above a "----" one
        self.layer = None


class Function:
    """A function, or an object at file scope whose initializer names functions."""

    def __init__(self, name, line, body):
        self.name, self.line, self.body = name, line, body  # body: [(token, line)]
        self.layer = None


class Use:
    """A function naming another: a call when `called`, else a reference."""

    def __init__(self, caller, callee, line, called, macro):
        self.caller, self.callee, self.line = caller, callee, line
        self.called, self.macro = called, macro


class Report:
    def __init__(self):
        self.layers, self.banners, self.functions, self.uses = [], [], [], []
        self.errors = []  # (line, message)


# ---- reading the text ----

def blank(text):
    """The text with comments, strings and character literals made spaces, so that
    nothing in them looks like code; lines keep their numbers."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
        elif c in "\"'":
            # a literal ends at its quote, or at the line's end (an apostrophe in #error)
            end = i + 1
            while end < n and text[end] not in (c, "\n"):
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1 if end < n and text[end] == c else end, n)
        else:
            i += 1
            continue
        for k in range(i, end):
            if out[k] != "\n":
                out[k] = " "
        i = end
    return "".join(out)


def directives_and_tokens(lines, begin, end):
    """Blanked lines begin..end as ("#", line, directive) and (token, line); a directive
    takes its continuation lines with it."""
    number = begin
    while number <= end:
        line = lines[number - 1]
        if line.lstrip().startswith("#"):
            first, text = number, line.rstrip()
            while text.endswith("\\") and number < end:
                number += 1
                text = text[:-1] + " " + lines[number - 1].rstrip()
            yield "#", first, text.strip()[1:].strip()
        else:
            for token in TOKEN.findall(line):
                yield token, number
        number += 1


def read_macros(lines):
    """Per macro: the identifiers its bodies name (of all its definitions), and the line
    of its first definition."""
    macros = {}
    for item in directives_and_tokens(lines, 1, len(lines)):
        m = item[0] == "#" and re.match(r"define\s+([A-Za-z_]\w*)(\([^)]*\))?(.*)$", item[2])
        if m:
            names = set(t for t in TOKEN.findall(m.group(3)) if IDENTIFIER.match(t))
            macros.setdefault(m.group(1), (set(), item[1]))[0].update(names)
    return macros


# ---- the table and the banners ----

def read_table(lines, begin, end):
    """The layers the LAYER lines of lines begin..end declare, bottom to top, and the
    errors in them."""
    layers, errors, table = [], [], None
    indent = None  # the indentation of the LAYER line that later lines may continue
    for number in range(begin, end + 1):
        line = lines[number - 1]
        m = LAYER_LINE.match(line)
        if not m:
            deeper = indent is not None and len(line) - len(line.lstrip()) > indent
            if deeper and line.strip():
                layers[-1].text += " " + line.strip()
            else:
                indent = None
            continue
        indent = None
        comment = comment_start(lines, number)
        table = table or comment
        if comment != table:
            errors.append((number, "a second layer table (the first begins at line %d)"
                           % table))
            continue
        space, name, beside, text = m.groups()
        if any(layer.name == name for layer in layers):
            errors.append((number, "layer %s is declared twice" % name))
            continue
        top = layers[-1].level if layers else -1
        level = top + 1
        if beside and any(layer.name == beside and layer.level == top for layer in layers):
            level = top
        elif beside:  # an error; the layer stands above the others, as if not beside
            errors.append((number, "layer %s: beside %s, which is not a layer of the level "
                           "below" % (name, beside)))
        layers.append(Layer(name, level, number, text))
        indent = len(space)
    for layer in layers:
        text = layer.text.strip()
        text = text[:-2] if text.endswith("*/") else text  # the comment ends on its line
        layer.entries = [e.strip() for e in text.split(";") if e.strip()]
        if not layer.entries:
            errors.append((layer.line, "layer %s names no banner" % layer.name))
    if not layers:
        errors.append((begin, "no layer table (lines \"LAYER name: banner; ...\")"))
    return layers, errors


def comment_start(lines, number):
    while number > 1 and "/*" not in lines[number - 1]:
        number -= 1
    return number


def find_banners(lines, begin, end):
    """The banners of lines begin..end: "/* ---- title" and the "====" boxes (a title
    line between two rules)."""
    banners, section = [], None
    for number in range(begin, end + 1):
        line = lines[number - 1]
        m = PART_BANNER.match(line)
        if m:
            banners.append(Banner(number, m.group(1), section))
        elif SECTION_RULE.match(line) and number + 1 < len(lines) and \
                SECTION_RULE.match(lines[number + 1]):
            m = SECTION_TITLE.match(lines[number])
            if m:
                section = Banner(number + 1, m.group(1), None)
                banners.append(section)
    return banners


def names_banner(entry, title):
    return title == entry or (title.startswith(entry) and title[len(entry):][:1] == ":")


def map_banners(layers, banners):
    """Gives each banner its layer; the errors: a banner in none or in two, a table entry
    that names no banner or several."""
    errors = []
    for layer in layers:
        for entry in layer.entries:
            named = [b for b in banners if names_banner(entry, b.title)]
            if len(named) != 1:
                errors.append((layer.line, "layer %s: \"%s\" names %s" % (
                    layer.name, entry, "%d banners (lines %s)" % (
                        len(named), ", ".join(str(b.line) for b in named))
                    if named else "no banner")))
            elif named[0].layer:
                errors.append((named[0].line, "banner \"%s\" is in layers %s and %s" % (
                    named[0].title, named[0].layer.name, layer.name)))
            else:
                named[0].layer = layer
    for banner in banners:
        if banner.layer is None and banner.section is not None:
            banner.layer = banner.section.layer
        if banner.layer is None:
            errors.append((banner.line, "banner \"%s\" maps to no layer" % banner.title))
    highest = None  # the file reads bottom up: no banner of a layer below one already seen
    for banner in sorted(banners, key=lambda b: b.line):
        if banner.layer is None:
            continue
        if highest and banner.layer.level < highest.level:
            errors.append((banner.line, "banner \"%s\" (%s) comes after layer %s: the file "
                           "reads bottom up" % (banner.title, banner.layer.name, highest.name)))
        elif not highest or banner.layer.level > highest.level:
            highest = banner.layer
    return errors


# ---- functions and their uses ----

def find_functions(lines, begin, end):
    """The functions defined in lines begin..end with their bodies' tokens; the objects
    at file scope with an initializer (as Functions, the initializer for a body); and the
    braces still open at the end.

    Every branch of an #if is read. Where a branch opens or closes a brace the other does
    not (two heads for one body), the braces are counted as if only the first branch were
    there."""
    functions, objects = [], []
    stack = []       # per open brace: the Function it opened, "initializer" or None
    statement = []   # tokens at file scope since the last ";" or "}"
    conditions = []  # per open #if: the state at its start, and at the end of its first branch
    for item in directives_and_tokens(lines, begin, end):
        if item[0] == "#":
            word = re.match(r"\w*", item[2]).group(0)
            state = (list(stack), list(statement))
            if word in ("if", "ifdef", "ifndef"):
                conditions.append([state, None])
            elif word in ("elif", "else") and conditions:
                if conditions[-1][1] is None:
                    conditions[-1][1] = state
                stack, statement = map(list, conditions[-1][0])
            elif word == "endif" and conditions:
                first = conditions.pop()[1]
                if first is not None and len(first[0]) != len(stack):
                    stack, statement = first
            continue
        token, line = item
        function = next((f for f in stack if isinstance(f, Function)), None)
        if function is not None:
            if token == "}" and stack[-1] is function:
                stack.pop()
                functions.append(function)
            else:
                function.body.append(item)
                if token == "{":
                    stack.append(None)
                elif token == "}":
                    stack.pop()
        elif token == "{":
            opened = opened_by(statement)
            stack.append(opened)
            statement = statement + [item] if opened == "initializer" else []
        elif token == "}":
            if stack and stack.pop() == "initializer":
                statement.append(item)
            else:
                statement = []
        elif token == ";" and "initializer" not in stack:
            if any(t == "=" for t, _ in statement):
                objects.append(object_of(statement))
            statement = []
        else:
            statement.append(item)
    return functions, objects, stack


def object_of(statement):
    """An object defined with an initializer, as a Function: its name (the first one
    followed by "=" or "[", or inside "(*name)"), its line, its initializer."""
    k = statement.index(next(item for item in statement if item[0] == "="))
    head = [t for t, _ in statement[:k]] + ["="]
    for i, t in enumerate(head[:-1]):
        if IDENTIFIER.match(t) and (head[i + 1] in ("=", "[") or
                                    (head[i + 1] == ")" and head[i - 1] in ("*", "const"))):
            return Function(t, statement[i][1], statement[k + 1:])
    return Function(head[-2], statement[k - 1][1], statement[k + 1:])


def opened_by(statement):
    """What a "{" outside functions after `statement` opens: a Function after a
    function's head, "initializer" after "=", else None (the members of a struct, or
    extern "C")."""
    tokens = [t for t, _ in statement]
    if "=" in tokens:
        return "initializer"
    close = len(tokens) - 1
    while close > 0 and tokens[close] == ")":
        depth, k = 0, close
        while k >= 0:
            depth += {")": 1, "(": -1}.get(tokens[k], 0)
            if depth == 0:
                break
            k -= 1
        name = tokens[k - 1] if k > 0 else ""
        if name == ")" and k > 2 and tokens[k - 3] == "(":
            k -= 1  # "(name)(...)": the name in parentheses, kept from a macro of its own
            name = tokens[k - 1]
        if name not in NOT_FUNCTION_NAMES:
            return Function(name, statement[k - 1][1], []) if IDENTIFIER.match(name) else None
        close = k - 2  # an attribute after the parameters: the list is before it
    return None


def uses_in(tokens, caller, functions, macros):
    """The uses of `functions` among `tokens`: names, and macros that stand for them."""
    uses = []
    for k, (token, line) in enumerate(tokens):
        if k and tokens[k - 1][0] in (".", "->"):
            continue  # a member
        if token in functions:
            called = k + 1 < len(tokens) and tokens[k + 1][0] == "("
            uses.append(Use(caller, token, line, called, None))
        elif token in macros:
            for name in sorted(expand(token, functions, macros, set())):
                uses.append(Use(caller, name, line, True, token))
    return uses


def expand(macro, functions, macros, seen):
    """The functions a macro's bodies name, through the macros they name."""
    seen.add(macro)
    found = set()
    for name in macros[macro][0]:
        if name in functions:
            found.add(name)
        elif name in macros and name not in seen:
            found |= expand(name, functions, macros, seen)
    return found


# ---- the check ----

def implementation(lines, errors):
    """The first and last lines (from 1) of the implementation, or (None, None) with the
    error in `errors`."""
    begin = next((i + 1 for i, line in enumerate(lines)
                  if line.startswith(IMPLEMENTATION_BEGIN)), None)
    end = next((i + 1 for i, line in enumerate(lines)
                if line.startswith(IMPLEMENTATION_END)), None)
    if begin is None or end is None or end < begin:
        errors.append((1, "no implementation (from \"%s\" to \"%s\")"
                       % (IMPLEMENTATION_BEGIN, IMPLEMENTATION_END)))
        return None, None
    return begin, end


def check(text):
    """Reads a header: its layers, banners, functions and uses, and the errors, each a
    (line, message), in the order of their lines."""
    report = Report()
    lines = text.split("\n")
    begin, end = implementation(lines, report.errors)
    if begin is None:
        return report
    report.layers, errors = read_table(lines, begin, end)
    report.errors += errors
    report.banners = find_banners(lines, begin, end)
    report.errors += map_banners(report.layers, report.banners)

    code = blank(text).split("\n")
    functions, objects, unclosed = find_functions(code, begin, end)
    if unclosed:
        report.errors.append((end, "%d braces still open where the implementation ends"
                              % len(unclosed)))
    report.functions = functions
    defined = {}
    for f in functions:
        defined.setdefault(f.name, f)  # the first of the definitions an #if chooses from
    macros = read_macros(code)
    for f in functions + objects:
        place(f, report)
        report.uses += uses_in(f.body, f, defined, macros)

    used = set(u.callee for u in report.uses if u.caller.name != u.callee)
    # the declarations' macros are used by the programs that include the header
    used |= set(name for names, line in macros.values() if line < begin for name in names)
    # the private functions the declarations declare: their macros' plumbing
    plumbing = set(item[0] for item in directives_and_tokens(code, 1, begin - 1)
                   if item[0] in defined)
    cpp = [t for t in directives_and_tokens(code, end + 1, len(code)) if t[0] != "#"]
    for use in uses_in(cpp, None, defined, macros):
        used.add(use.callee)
        if use.callee.startswith("fsched__") and use.callee not in plumbing:
            callee = defined[use.callee]
            report.errors.append((use.line, "%s calls %s (%s, defined at %d), which is "
                                  "private" % (CPP_LAYER, callee.name, layer_name(callee),
                                               callee.line)))

    wrong = {}  # (caller, callee, called, macro): [first use, count]
    for use in report.uses:
        if not keeps_to_layers(use.caller, defined[use.callee]):
            key = (use.caller.name, use.callee, use.called, use.macro)
            wrong.setdefault(key, [use, 0])[1] += 1
    for use, count in wrong.values():
        report.errors.append((use.line, describe(use, defined[use.callee], count)))
    for name, f in defined.items():
        if name.startswith("fsched__") and name not in used:
            report.errors.append((f.line, "%s (%s) is defined but used from nowhere"
                                  % (name, layer_name(f))))
    report.errors.sort(key=lambda e: e[0])
    return report


def place(f, report):
    """Gives a function the layer of the banner above it."""
    above = [b for b in report.banners if b.line < f.line]
    if above:
        f.layer = above[-1].layer
    else:
        report.errors.append((f.line, "%s lies under no banner" % f.name))


def keeps_to_layers(caller, callee):
    """Whether a use runs down or stays in its layer (or cannot be judged, which another
    error says)."""
    if caller.layer is None or callee.layer is None or caller.layer is callee.layer:
        return True
    return callee.layer.level < caller.layer.level


def describe(use, callee, count):
    return "%s (%s) %s %s (%s, defined at %d)%s%s" % (
        use.caller.name, layer_name(use.caller), "calls" if use.called else "refers to",
        callee.name, layer_name(callee), callee.line,
        " through " + use.macro if use.macro else "",
        ", %d times" % count if count > 1 else "")


def layer_name(f):
    return f.layer.name if f.layer else "no layer"


def length(f):
    """Lines from a function's head to its closing brace."""
    return (f.body[-1][1] if f.body else f.line) - f.line + 1


def print_longest(report, where, n):
    functions = [f for f in report.functions if f.body]
    lengths = sorted(length(f) for f in functions)
    print("%s: %d functions, median %d lines, %d over 80" % (
        where, len(functions), lengths[len(lengths) // 2] if lengths else 0,
        sum(1 for x in lengths if x > 80)))
    for f in sorted(functions, key=lambda f: (-length(f), f.line))[:n]:
        print("%s:%d: %s (%s): %d lines" % (where, f.line, f.name, layer_name(f), length(f)))


def main(argv=None):
    if hasattr(signal, "SIGPIPE"):  # piped into head: stop quietly
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("header", nargs="?", help="the header (default: fibersched.h)")
    parser.add_argument("--list", action="store_true", help="print the layer of every function")
    parser.add_argument("--table", action="store_true",
                        help="print the layers read and the banners of each")
    parser.add_argument("--longest", type=int, metavar="N",
                        help="print the N longest functions, and the median length")
    args = parser.parse_args(argv)
    with open(args.header or HEADER, encoding="utf-8") as f:
        report = check(f.read())
    where = args.header or "fibersched.h"
    if args.table:
        for layer in report.layers:
            print("%s (level %d): %s" % (layer.name, layer.level, "; ".join(layer.entries)))
            for banner in report.banners:
                if banner.layer is layer:
                    print("    %s:%d: %s" % (where, banner.line, banner.title))
    if args.list:
        for f in report.functions:
            print("%s:%d: %s (%s)" % (where, f.line, f.name, layer_name(f)))
    if args.longest:
        print_longest(report, where, args.longest)
    for line, message in report.errors:
        print("%s:%d: %s" % (where, line, message))
    if report.errors:
        count = len(report.errors)
        print("%s: %d error%s in the layering" % (where, count, "s" if count > 1 else ""))
        return 1
    print("%s: %d functions, %d calls, %d layers: every call runs down or within its layer"
          % (where, len(set(f.name for f in report.functions)),
             sum(1 for u in report.uses if u.called), len(report.layers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
