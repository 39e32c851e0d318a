# fibersched-gdb.py - gdb commands for programs built with fibersched.h - MIT license
#
#   info fibers            every fiber of every live scheduler: id, where it runs, its
#                          state, what it waits on, the task it runs
#   fiber bt ID [ARGS]     the backtrace of fiber ID (ARGS as for bt: full, a count...)
#
# Load it with `source tools/fibersched-gdb.py`, or let gdb load it from the program: built
# with -DFIBERSCHED_GDB_SCRIPT, the program names this file in its .debug_gdb_scripts
# section, and gdb looks for it in the current directory, the source path (`directory`)
# and its auto-load directories, once `set auto-load safe-path` allows it.
#
# It needs the program's debug information (-g) for the scheduler's records. A backtrace of
# a suspended fiber needs the assembly switch and a live process: it points the selected
# thread's stack and program counters at the fiber's saved context for the time of `bt`,
# where the switch's unwind information leads gdb on to the code that was suspended.
# (32-bit Arm's switch has no such information; its fibers are listed, not walked.)

import gdb

SCHED_LIVE = 0x46534348  # fsched_sched.magic while the scheduler lives ("FSCH")


def _int(value):
    return int(value.cast(gdb.lookup_type("unsigned long long")))


def _string(value):
    if _int(value) == 0:
        return None
    try:
        return value.string()
    except gdb.error:
        return None


def _symbol_at(address):
    """The name of the function or variable at address, or None."""
    if not address:
        return None
    try:
        block = gdb.block_for_pc(address)
        if block is not None and block.function is not None:
            return block.function.print_name
    except RuntimeError:
        pass
    text = gdb.execute("info symbol 0x%x" % address, to_string=True)
    if text.startswith("No symbol"):
        return None
    return text.split(" in section")[0].strip()


def _registries():
    """(slots, mask) of each registry of live objects: one per translation unit holding
    the implementation (several with FIBERSCHED_STATIC)."""
    lookup = getattr(gdb, "lookup_static_symbols", None)
    if lookup is not None:
        slots = lookup("fsched__live_slots")
        masks = lookup("fsched__live_mask")
    else:
        slots = [gdb.lookup_static_symbol("fsched__live_slots")]
        masks = [gdb.lookup_static_symbol("fsched__live_mask")]
    for s, m in zip(slots, masks):
        if s is not None and m is not None:
            yield s.value(), int(m.value())


def schedulers():
    sched_type = gdb.lookup_type("struct fsched_sched").pointer()
    word = gdb.lookup_type("unsigned int").pointer()
    for slots, mask in _registries():
        if _int(slots) == 0:
            continue
        for i in range(mask + 1):
            p = slots[i]
            if _int(p) and int(p.cast(word).dereference()) == SCHED_LIVE:
                yield p.cast(sched_type)


class Fiber(object):
    def __init__(self, sched_number, sched, slot, record, is_root):
        self.sched_number = sched_number
        self.sched = sched
        self.slot = slot
        self.record = record
        self.is_root = is_root
        self.number = int(record["id"])

    def ident(self, many):
        return "%d.%d" % (self.sched_number, self.number) if many else str(self.number)

    def saved_sp(self):
        return _int(self.record["ctx"]["sp"])

    def state(self, idle, threads):
        if self.saved_sp() == 0:
            thread = threads.get(_int(self.slot["thread"]))
            return "running" + (" (thread %d)" % thread if thread else "")
        if _string(self.record["wait_what"]):
            return "blocked"
        if self.is_root and int(self.slot["root_parked"]):
            return "parked"  # the thread runs its slot's loop on another fiber
        if _int(self.record.address) in idle:
            return "idle"
        return "ready"

    def waits_on(self):
        what = _string(self.record["wait_what"])
        if not what:
            return ""
        obj = _int(self.record["wait_object"])
        if not obj:
            return what
        name = _symbol_at(obj)
        return "%s 0x%x%s" % (what, obj, " (%s)" % name if name else "")

    def task(self):
        r = self.record
        name = _string(r["task_name"])
        if name:
            return name
        fn = _int(r["task_code"])
        if fn:
            return _symbol_at(fn) or "0x%x" % fn
        graph_task = _int(r["graph_task"])
        if graph_task:
            t = r["graph_task"].cast(gdb.lookup_type("struct fsched_graph_task").pointer())
            fn = _int(t["fn"])
            return "graph task %s" % (_symbol_at(fn) or "0x%x" % fn)
        if self.is_root:
            return "(the thread's own stack)"
        return ""


def fibers():
    """Every fiber of every live scheduler, slot by slot: the root (the thread's own
    context) first, then the slot's fibers."""
    for n, s in enumerate(schedulers(), 1):
        for i in range(int(s["n_slots"])):
            w = s["slots"][i]
            if _int(w) == 0:
                continue
            if _int(w["root"]):
                yield Fiber(n, s, w, w["root"].dereference(), True)
            f = w["live"]
            while _int(f):
                yield Fiber(n, s, w, f.dereference(), False)
                f = f["live_next"]


def _idle_records(slot):
    found = set()
    f = slot["idle"]
    while _int(f):
        found.add(_int(f))
        f = f["link"]
    return found


def _thread_numbers():
    """The address of each gdb thread's fibersched thread record -> its gdb number."""
    found = {}
    selected = gdb.selected_thread()
    try:
        for thread in gdb.selected_inferior().threads():
            try:
                thread.switch()
                found[_int(gdb.parse_and_eval("&fsched__tls_thread"))] = thread.num
            except gdb.error:
                pass
    finally:
        if selected is not None:
            selected.switch()
    return found


def _slot_name(fiber):
    w = fiber.slot
    kind = "bound" if int(w["bound"]) else "worker"
    return "%s %d" % (kind, int(w["index"]))


class InfoFibers(gdb.Command):
    """Lists every fiber of every live fibersched scheduler.
Columns: the fiber's id (for `fiber bt`; SCHEDULER.ID when there are several schedulers),
the slot it belongs to (a worker thread, or a bound thread), its state (running, blocked,
ready, idle, or parked: a thread's own context while the thread runs its slot's loop),
what it waits on, and the task it runs."""

    def __init__(self):
        super(InfoFibers, self).__init__("info fibers", gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        all_fibers = list(fibers())
        if not all_fibers:
            print("No fibersched scheduler is live.")
            return
        many = len(set(f.sched_number for f in all_fibers)) > 1
        threads = _thread_numbers()
        idle = {}
        rows = []
        for f in all_fibers:
            key = _int(f.slot)
            if key not in idle:
                idle[key] = _idle_records(f.slot)
            rows.append((f.ident(many), _slot_name(f), f.state(idle[key], threads),
                         f.waits_on(), f.task()))
        head = ("Id", "Slot", "State", "Waits on", "Task")
        widths = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
        for r in [head] + rows:
            print("  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4])


def find_fiber(ident):
    all_fibers = list(fibers())
    many = len(set(f.sched_number for f in all_fibers)) > 1
    for f in all_fibers:
        if f.ident(many) == ident or (not many and ident == "1.%d" % f.number):
            return f
    raise gdb.GdbError("No fiber %s (see `info fibers`)." % ident)


class FiberPrefix(gdb.Command):
    """Commands on one fibersched fiber: fiber bt ID."""

    def __init__(self):
        super(FiberPrefix, self).__init__("fiber", gdb.COMMAND_STACK, prefix=True)


class FiberBacktrace(gdb.Command):
    """Backtrace of a fibersched fiber: fiber bt ID [bt arguments].
A running fiber's backtrace is its thread's. A suspended fiber's is taken from its saved
context: the selected thread's sp and pc point there while `bt` runs, then are restored."""

    def __init__(self):
        super(FiberBacktrace, self).__init__("fiber bt", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        words = arg.split(None, 1)
        if not words:
            raise gdb.GdbError("usage: fiber bt ID [bt arguments]")
        fiber = find_fiber(words[0])
        rest = words[1] if len(words) > 1 else ""
        sp = fiber.saved_sp()
        if sp == 0:
            thread = _thread_numbers().get(_int(fiber.slot["thread"]))
            if thread is None:
                raise gdb.GdbError("Fiber %s is running, on no thread gdb knows." % words[0])
            gdb.execute("thread apply %d bt %s" % (thread, rest), from_tty)
            return
        try:
            resume = _int(gdb.parse_and_eval("&fsched__asm_resume"))
        except gdb.error:
            raise gdb.GdbError("The program does not use the assembly switch (its saved "
                               "contexts are not stack pointers).")
        frame = gdb.newest_frame()
        frame.select()  # registers are written in frame 0, never in a caller's save area
        old_sp = _int(gdb.parse_and_eval("$sp"))
        old_pc = _int(gdb.parse_and_eval("$pc"))
        try:
            gdb.execute("set $sp = 0x%x" % sp)
            gdb.execute("set $pc = 0x%x" % resume)
            gdb.execute("bt %s" % rest, from_tty)
        finally:
            gdb.execute("set $pc = 0x%x" % old_pc)
            gdb.execute("set $sp = 0x%x" % old_sp)


InfoFibers()
FiberPrefix()
FiberBacktrace()
