# Run inside gdb on tests/gdb/blocked.c with tools/fibersched-gdb.py loaded:
#   gdb -batch -x tools/fibersched-gdb.py -x tests/gdb/check.py PROGRAM
# (or with the extension auto-loaded from the program's .debug_gdb_scripts section, or
# connected to a program under qemu-user's gdb stub with `target remote` first).
# Stops the program where its tasks are blocked, checks `info fibers` and `fiber bt` for
# each, checks that the thread's registers are as before, lets the program finish, and
# quits gdb with status 0 only if everything held.

import re

import gdb

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("check failed: " + what)


def names(trace, function):
    """Whether a backtrace has a frame of function (inlined frames show no address)."""
    return re.search(r"^#\d+\s+(0x[0-9a-f]+ in )?%s \(" % function, trace, re.M) is not None


def registers():
    return (int(gdb.parse_and_eval("(unsigned long long)$pc")),
            int(gdb.parse_and_eval("(unsigned long long)$sp")))


def main():
    gdb.execute("set pagination off")
    gdb.execute("set confirm off")
    gdb.execute("break fibers_ready")
    # started here, or already there (attached to qemu-user's gdb stub)
    gdb.execute("continue" if gdb.selected_inferior().pid else "run")
    listing = gdb.execute("info fibers", to_string=True)
    print(listing)
    rows = {}
    for line in listing.splitlines()[1:]:
        fields = re.split(r"\s{2,}", line.strip())
        rows.setdefault(fields[-1], []).append((fields[0], line))

    def fiber(task, state, waits):
        found = [(ident, line) for ident, line in rows.get(task, []) if state in line]
        check(len(found) == 1, "one %s fiber running %s (got %r)" % (state, task, found))
        if found:
            check(re.search(waits, found[0][1]) is not None,
                  "%s waits on %r: %r" % (task, waits, found[0][1]))
            return found[0][0]
        return None

    wanted = [
        ("event-waiter", r"event 0x[0-9a-f]+ \(ready_go\)", "waits_on_event"),
        ("mutex-waiter", r"mutex 0x[0-9a-f]+ \(held\)", "waits_on_mutex"),
        ("sleeper", r"blocked\s+sleep", "sleeps_long"),
        ("group-waiter", r"wait group 0x[0-9a-f]+ \(group\)", "waits_on_group"),
        ("joins_halves", r"join 0x[0-9a-f]+", "joins_halves"),
    ]
    before = registers()
    for task, waits, function in wanted:
        ident = fiber(task, "blocked", waits)
        if ident is None:
            continue
        trace = gdb.execute("fiber bt " + ident, to_string=True)
        check(names(trace, function), "the backtrace of %s names %s:\n%s" % (task, function, trace))
        check(not names(trace, "main"), "the backtrace of %s is its own:\n%s" % (task, trace))
    # the second half of the join, on a fiber of its own with no task of its own
    halves = [line for line in listing.splitlines() if "(half_go)" in line]
    check(len(halves) == 1, "one fiber waits on half_go")
    if halves:
        trace = gdb.execute("fiber bt " + halves[0].split()[0], to_string=True)
        check(names(trace, "second_half"), "the half's backtrace names second_half:\n" + trace)
    # the worker threads' own contexts, parked while their loops run on fibers
    roots = rows.get("(the thread's own stack)", [])
    check(len(roots) == 2, "two worker threads' own contexts: %r" % roots)
    for ident, line in roots:
        trace = gdb.execute("fiber bt " + ident, to_string=True)
        check(names(trace, "fsched__worker_main"), "a worker's own stack:\n" + trace)
    check(registers() == before, "the selected thread's pc and sp are as before")
    try:
        gdb.execute("fiber bt 9999", to_string=True)
        check(False, "an unknown fiber is refused")
    except gdb.error as e:
        check("No fiber 9999" in str(e), "an unknown fiber is refused: " + str(e))
    gdb.execute("delete")
    gdb.execute("continue")
    check(int(gdb.parse_and_eval("$_exitcode")) == 0, "the program ends well once continued")


try:
    main()
except gdb.error as e:
    failures.append(str(e))
    print("error: " + str(e))
if failures:
    print("gdb check: %d failed" % len(failures))
    gdb.execute("quit 1")
print("gdb check: ok")
gdb.execute("quit 0")
