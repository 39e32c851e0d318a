# Run inside gdb on tests/gdb/blocked.c with tools/fibersched-gdb.py loaded:
#   gdb -batch -x tools/fibersched-gdb.py -x tests/gdb/check.py PROGRAM
# (or with the extension auto-loaded from the program's .debug_gdb_scripts section, or
# connected to a program under qemu-user's gdb stub with `target remote` first, or on a
# core file of the program stopped there: gdb ... PROGRAM CORE).
# Stops the program where its tasks are blocked, checks `info fibers` (the Task column
# names each task's own function, and its name when it has one) and `fiber bt` for each
# fiber, checks that the thread's registers are as before, writes a core file there when
# the environment variable FIBERSCHED_GDB_CORE names one, lets the program finish, and
# quits gdb with status 0 only if everything held. On a core file it checks the same,
# but for the ending.

import os
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


def on_core():
    connection = getattr(gdb.selected_inferior(), "connection", None)
    if connection is not None:
        return connection.type == "core"
    return "core dump" in gdb.execute("info target", to_string=True)


# Task column, what the fiber waits on, a function its backtrace must show
WANTED = [
    ("waits_on_event", r"event 0x[0-9a-f]+ \(ready_go\)", "waits_on_event"),
    ("waits_on_mutex", r"mutex 0x[0-9a-f]+ \(held\)", "waits_on_mutex"),
    ("sleeper (sleeps_long)", r"blocked\s+sleep", "sleeps_long"),
    ("bytes \ufffd\ufffd (sleeps_long)", r"blocked\s+sleep", "sleeps_long"),
    ("group-waiter (waits_on_group)", r"wait group 0x[0-9a-f]+ \(group\)", "waits_on_group"),
    ("joins_halves", r"join 0x[0-9a-f]+", "joins_halves"),
    ("second_half", r"event 0x[0-9a-f]+ \(half_go\)", "second_half"),  # the join's half
    ("loops", r"join 0x[0-9a-f]+", "loops"),
    ("loop_body", r"event 0x[0-9a-f]+ \(piece_go\)", "loop_body"),  # the loop's piece
    ("runs_tree", r"join 0x[0-9a-f]+", "runs_tree"),
    ("child_waits", r"event 0x[0-9a-f]+ \(child_go\)", "child_waits_fsched_(run|body)"),
]


def main():
    gdb.execute("set pagination off")
    gdb.execute("set confirm off")
    core = on_core()
    if not core:
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

    before = registers()
    for task, waits, function in WANTED:
        ident = fiber(task, "blocked", waits)
        if ident is None:
            continue
        trace = gdb.execute("fiber bt " + ident, to_string=True)
        check(names(trace, function), "the backtrace of %s names %s:\n%s" % (task, function, trace))
        check(names(trace, "fsched__asm_switch"), "%s is suspended in the switch:\n%s" % (task, trace))
        for other in ("main", "fibers_ready"):
            check(not names(trace, other), "the backtrace of %s is its own:\n%s" % (task, trace))
    # the worker threads' own contexts, parked while their loops run on fibers
    roots = rows.get("(the thread's own stack)", [])
    check(len(roots) == 2, "two worker threads' own contexts: %r" % roots)
    for ident, line in roots:
        trace = gdb.execute("fiber bt " + ident, to_string=True)
        check(names(trace, "fsched__worker_main"), "a worker's own stack:\n" + trace)
    # a running fiber's backtrace is its thread's (when gdb can tell which thread that is:
    # not through qemu-user's stub, which reads no thread-local variable)
    running = [line for line in listing.splitlines() if " running" in line]
    check(len(running) == 2, "two running fibers: %r" % running)
    for line in running:
        try:
            trace = gdb.execute("fiber bt " + line.split()[0], to_string=True)
            check(names(trace, "fsched__loop_main"), "a running worker loop:\n" + trace)
        except gdb.error as e:
            check("(thread" not in line and "is running, on no thread gdb knows" in str(e),
                  "a running fiber without its thread: %s: %s" % (line, e))
    check(registers() == before, "the selected thread's pc and sp are as before")
    trace = gdb.execute("bt", to_string=True)
    check(names(trace, "fibers_ready") and names(trace, "main"),
          "bt is the thread's own again:\n" + trace)
    try:
        gdb.execute("fiber bt 9999", to_string=True)
        check(False, "an unknown fiber is refused")
    except gdb.error as e:
        check("No fiber 9999" in str(e), "an unknown fiber is refused: " + str(e))
    if core:
        return
    core_file = os.environ.get("FIBERSCHED_GDB_CORE")
    if core_file:
        gdb.execute("gcore " + core_file)
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
