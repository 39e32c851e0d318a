# fibersched-gdb.py - gdb commands for programs built with fibersched.h - MIT license
#
#   info fibers            every fiber of every live scheduler: id, where it runs, its
#                          state, what it waits on, the task it runs
#   fiber bt ID [ARGS]     the backtrace of fiber ID (ARGS as for bt: full, a count...)
#
# Load it with `source tools/fibersched-gdb.py`, or build the program with
# -DFIBERSCHED_GDB_SCRIPT: fibersched.h then embeds this text in the program's
# .debug_gdb_scripts section, and gdb runs it when it loads the program, from a live
# process or a core file, once `auto-load safe-path` allows that program.
#
# It needs the program's debug information (-g) for the scheduler's records. The Task
# column names what the scheduler says the fiber runs: the name the task was given, and
# the function it was started with (a loop's body, a join's function, a graph task's...).
# A backtrace of a suspended fiber needs the assembly context switch (the default): the
# fiber's saved stack pointer leads, through the switch's unwind information, to the code
# that was suspended. It reads memory only, so it works on a core file as on a live
# process: `fiber bt` shows the selected thread's innermost frame as the caller of the
# fiber's context, and hides that frame and those newer than it.
#
# (Written without double quotes and backslashes: fibersched.h embeds it line by line.)

import gdb
from gdb.FrameDecorator import FrameDecorator
from gdb.unwinder import Unwinder, register_unwinder

SCHED_LIVE = 0x46534348  # fsched_sched.magic while the scheduler lives ('FSCH')
TASK_SUFFIX = '_fsched_run'  # a spawn/sync task NAME runs as NAME_fsched_run
# the names of pc and sp, generic and per architecture (ppc64's sp is r1)
PC_SP_NAMES = ('pc', 'sp', 'rip', 'rsp', 'eip', 'esp', 'r1')


def _int(value):
    return int(value.cast(gdb.lookup_type('unsigned long long')))


def _pointer(address):
    return gdb.Value(address).cast(gdb.lookup_type('void').pointer())


def _string(value):
    if _int(value) == 0:
        return None
    try:
        # names are the program's bytes: shown whatever they hold
        return value.string(errors='replace')
    except gdb.error:
        return None


def _symbol(address):
    '''The symbol table's name for address: (name, offset), or (None, 0).'''
    text = gdb.execute('info symbol 0x%x' % address, to_string=True)
    if text.startswith('No symbol'):
        return None, 0
    name = text.split(' in section')[0].strip()
    if ' + ' in name:
        name, offset = name.rsplit(' + ', 1)
        return name, int(offset)
    return name, 0


def function_name(address):
    '''The name of the function that begins at address: the outermost function of its
    block (at -O2 a callee inlined at its start owns the innermost block there), else its
    symbol. A spawn/sync task is named as its FSCHED_TASK was.'''
    name = None
    try:
        find = getattr(gdb.current_progspace(), 'block_for_pc', None) or gdb.block_for_pc
        block = find(address)
        while block is not None and not (block.is_global or block.is_static):
            if block.function is not None:
                name = block.function.print_name
            block = block.superblock
    except RuntimeError:
        pass
    if name is None:
        symbol, offset = _symbol(address)
        name = symbol if symbol and not offset else '0x%x' % address
    if name.endswith(TASK_SUFFIX):
        name = name[:-len(TASK_SUFFIX)]
    return name


def _statics(name):
    '''The static variables of that name: one per translation unit holding the
    implementation (several with FIBERSCHED_STATIC).'''
    lookup = getattr(gdb, 'lookup_static_symbols', None)
    if lookup is not None:
        return lookup(name)
    return [gdb.lookup_static_symbol(name)]


def _live_objects():
    '''The addresses of the objects in each registry of live objects: a hash set of
    pointers (slots and mask), or without an OS a list through the objects.'''
    for s, m in zip(_statics('fsched__live_slots'), _statics('fsched__live_mask')):
        if s is None or m is None:
            continue
        slots = s.value()
        if _int(slots) == 0:
            continue
        for i in range(int(m.value()) + 1):
            if _int(slots[i]):
                yield slots[i]
    for head in _statics('fsched__live_list'):
        if head is None:
            continue
        entry = head.value()
        while _int(entry):
            yield entry['object']
            entry = entry['next']


def schedulers():
    try:
        sched_type = gdb.lookup_type('struct fsched_sched').pointer()
    except gdb.error:
        raise gdb.GdbError('fibersched: the program has no debug information about '
                           'fibersched (build the file that defines '
                           'FIBERSCHED_IMPLEMENTATION with -g)')
    word = gdb.lookup_type('unsigned int').pointer()
    for p in _live_objects():
        if int(p.cast(word).dereference()) == SCHED_LIVE:
            yield p.cast(sched_type)


class Fiber(object):
    def __init__(self, sched_number, sched, slot, record, is_root):
        self.sched_number = sched_number
        self.sched = sched
        self.slot = slot
        self.record = record
        self.is_root = is_root
        self.number = int(record['id'])

    def ident(self, many):
        return '%d.%d' % (self.sched_number, self.number) if many else str(self.number)

    def saved_sp(self):
        return _int(self.record['ctx']['sp'])

    def state(self, idle, threads):
        if self.slot is None:
            return 'ready (moving)'  # woken, between the worker that shed it and another
        if self.saved_sp() == 0:
            thread = threads.get(_int(self.slot['thread']))
            return 'running' + (' (thread %d)' % thread if thread else '')
        if _string(self.record['wait_what']):
            return 'blocked'
        if self.is_root and int(self.slot['root_parked']):
            return 'parked'  # the thread runs its slot's loop on another fiber
        if _int(self.record.address) in idle:
            return 'idle'
        return 'ready'

    def waits_on(self):
        what = _string(self.record['wait_what'])
        if not what or self.slot is None:
            return ''
        obj = _int(self.record['wait_object'])
        if not obj:
            return what
        name, offset = _symbol(obj)
        if name and offset:
            name = '%s+%d' % (name, offset)
        return '%s 0x%x%s' % (what, obj, ' (%s)' % name if name else '')

    def task(self):
        '''What the scheduler says the fiber runs: the task's name and the function it
        was started with (the fiber's record holds both while it runs it).'''
        code = _int(self.record['task_code'])
        name = _string(self.record['task_name'])
        function = function_name(code) if code else None
        if name and function and name != function:
            return '%s (%s)' % (name, function)
        if name or function:
            return name or function
        if self.is_root:
            return '(the thread' + chr(39) + 's own stack)'
        return ''


def fibers():
    '''Every fiber of every live scheduler, slot by slot: the root (the thread's own
    context) first, then the slot's fibers; then the movable tasks woken on one worker
    and on their way to another (in no slot's list meanwhile).'''
    for n, s in enumerate(schedulers(), 1):
        for i in range(int(s['n_slots'])):
            w = s['slots'][i]
            if _int(w) == 0:
                continue
            if _int(w['root']):
                yield Fiber(n, s, w, w['root'].dereference(), True)
            f = w['live']
            while _int(f):
                yield Fiber(n, s, w, f.dereference(), False)
                f = f['live_next']
        f = s['transit']
        while _int(f):
            yield Fiber(n, s, None, f.dereference(), False)
            f = f['live_next']


def _idle_records(slot):
    found = set()
    f = slot['idle']
    while _int(f):
        found.add(_int(f))
        f = f['link']
    return found


def _thread_numbers():
    '''The address of each gdb thread's fibersched thread record -> its gdb number.'''
    found = {}
    selected = gdb.selected_thread()
    try:
        for thread in gdb.selected_inferior().threads():
            try:
                thread.switch()
                found[_int(gdb.parse_and_eval('&fsched__tls_thread'))] = thread.num
            except gdb.error:
                pass
    finally:
        if selected is not None:
            selected.switch()
    return found


def _slot_name(fiber):
    w = fiber.slot
    if w is None:
        return 'in transit'
    kind = 'bound' if int(w['bound']) else 'worker'
    return '%s %d' % (kind, int(w['index']))


class InfoFibers(gdb.Command):
    '''Lists every fiber of every live fibersched scheduler.
Columns: the fiber's id (for `fiber bt`; SCHEDULER.ID when there are several schedulers),
the slot it belongs to (a worker thread, a bound thread, or none while a woken movable task
is in transit to another worker), its state (running, blocked, ready, idle, or parked: a
thread's own context while the thread runs its slot's loop),
what it waits on, and the task it runs: its name, if it was given one, and the function
it was started with (a spawned task's, a loop's body, a join's half, a graph task's...).'''

    def __init__(self):
        super(InfoFibers, self).__init__('info fibers', gdb.COMMAND_STATUS)

    def invoke(self, arg, from_tty):
        all_fibers = list(fibers())
        if not all_fibers:
            print('No fibersched scheduler is live.')
            return
        many = len(set(f.sched_number for f in all_fibers)) > 1
        threads = _thread_numbers()
        idle = {}
        rows = []
        for f in all_fibers:
            key = _int(f.slot) if f.slot is not None else 0
            if key not in idle:
                idle[key] = _idle_records(f.slot) if f.slot is not None else set()
            rows.append((f.ident(many), _slot_name(f), f.state(idle[key], threads),
                         f.waits_on(), f.task()))
        head = ('Id', 'Slot', 'State', 'Waits on', 'Task')
        widths = [max(len(r[i]) for r in rows + [head]) for i in range(4)]
        for r in [head] + rows:
            print(('  '.join(r[i].ljust(widths[i]) for i in range(4)) + '  ' + r[4]).rstrip())


def find_fiber(ident):
    all_fibers = list(fibers())
    many = len(set(f.sched_number for f in all_fibers)) > 1
    for f in all_fibers:
        if f.ident(many) == ident or (not many and ident == '1.%d' % f.number):
            return f
    raise gdb.GdbError('No fiber %s (see `info fibers`).' % ident)


# ---- a suspended fiber's backtrace, from memory alone ----

class _FrameId(object):
    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


class FiberUnwinder(Unwinder):
    '''While `fiber bt` runs: the first frame gdb unwinds (the selected thread's innermost
    real frame) is given the fiber's context as its caller: sp the saved stack pointer, pc
    the switch's resume label, where the switch's unwind information describes the
    registers the fiber saved. The frame's own id takes the fiber's stack address, so
    that gdb does not stop at a caller on another stack as at a corrupt one.'''

    def __init__(self):
        super(FiberUnwinder, self).__init__('fibersched fiber')
        self.context = None  # (sp, pc) while armed
        self.level = 0  # the frame's level: the innermost that is not inlined

    def __call__(self, pending_frame):
        context = self.context
        if context is None:
            return None
        if hasattr(pending_frame, 'level'):  # asked again whenever gdb rebuilds its frames
            if pending_frame.level() != self.level:
                return None
        else:
            self.context = None  # gdb before 11: the first frame asked about, once
        sp, pc = context
        info = pending_frame.create_unwind_info(
            _FrameId(_pointer(sp), pending_frame.read_register('pc')))
        info.add_saved_register('pc', _pointer(pc))
        info.add_saved_register('sp', _pointer(sp))
        # the other registers as in this frame (the status register tells Arm's unwinder
        # the instruction set); the switch's unwind information restores those it saved
        registers = getattr(pending_frame.architecture(), 'registers', None)
        for register in registers('general') if registers else ():
            if register.name in PC_SP_NAMES:
                continue
            try:
                value = pending_frame.read_register(register.name)
                # gdb fails the whole frame for a register the core file has not (a
                # register set cut short): those are left out
                if str(value) != '<unavailable>':
                    info.add_saved_register(register.name, value)
            except (gdb.error, ValueError):
                pass
        return info


class FiberFrameFilter(object):
    '''While `fiber bt` runs: hides the thread's own frames, those before the fiber's
    context.'''

    def __init__(self):
        self.name = 'fibersched fiber'
        self.priority = 100
        self.enabled = True
        self.context = None  # (sp, pc) while armed

    def filter(self, frames):
        if self.context is None:
            return frames
        return self._fiber_frames(frames, self.context)

    @staticmethod
    def _fiber_frames(frames, context):
        found = False
        for decorator in frames:
            frame = decorator.inferior_frame()
            found = found or (frame.pc() == context[1] and
                              _int(frame.read_register('sp')) == context[0])
            if found:
                yield FiberFrame(decorator)


class FiberFrame(FrameDecorator):
    '''A frame of a fiber. The switch's functions, assembly without debug information,
    are named as written (gdb would decode fsched__asm_switch as an Ada name).'''

    def function(self):
        function = super(FiberFrame, self).function()
        if isinstance(function, str):
            return function
        name = self.inferior_frame().name()  # the symbol table's, decoded
        if name and name.startswith('fsched.'):
            return 'fsched__' + name[len('fsched.'):]
        return function


_unwinder = FiberUnwinder()
_filter = FiberFrameFilter()
register_unwinder(None, _unwinder, replace=True)
gdb.frame_filters[_filter.name] = _filter


def _innermost_real_level():
    frame, level = gdb.newest_frame(), 0
    while frame.type() == gdb.INLINE_FRAME and frame.older() is not None:
        frame, level = frame.older(), level + 1
    return level


def _selected_depth():
    '''How many frames are newer than the selected one (to select it again).'''
    depth = 0
    try:
        frame = gdb.selected_frame()
        while frame.newer() is not None:
            frame = frame.newer()
            depth += 1
    except gdb.error:
        pass
    return depth


def _select_depth(depth):
    try:
        frame = gdb.newest_frame()
        while depth and frame.older() is not None:
            frame = frame.older()
            depth -= 1
        frame.select()
    except gdb.error:
        pass


def suspended_backtrace(fiber, ident, args, from_tty):
    sp = fiber.saved_sp()
    try:
        resume = _int(gdb.parse_and_eval('&fsched__asm_resume'))
    except gdb.error:
        raise gdb.GdbError('Fiber %s is suspended, but `fiber bt` needs the assembly '
                           'context switch (fsched__asm_resume: the default on x86-64, i386, '
                           'AArch64, Arm, RISC-V 64 and ppc64le), and this program saves '
                           'contexts with ucontext or Windows fibers.' % ident)
    try:
        gdb.selected_inferior().read_memory(sp, 8)
    except gdb.MemoryError:
        raise gdb.GdbError('Fiber %s saved its registers at 0x%x, which this process or '
                           'core file does not hold: a core needs the fibers%s stacks '
                           '(anonymous private memory: bit 0 of /proc/PID/coredump_filter, '
                           'on by default; gcore writes them).' % (ident, chr(39), sp))
    depth = _selected_depth()
    _unwinder.level = _innermost_real_level()
    _unwinder.context = _filter.context = (sp, resume)
    gdb.invalidate_cached_frames()
    try:
        gdb.execute('backtrace %s' % args, from_tty)
    finally:
        _unwinder.context = _filter.context = None
        gdb.invalidate_cached_frames()
        _select_depth(depth)


class FiberPrefix(gdb.Command):
    '''Commands on one fibersched fiber: fiber bt ID.'''

    def __init__(self):
        super(FiberPrefix, self).__init__('fiber', gdb.COMMAND_STACK, prefix=True)


class FiberBacktrace(gdb.Command):
    '''Backtrace of a fibersched fiber: fiber bt ID [bt arguments].
A running fiber's backtrace is its thread's. A suspended fiber's is read from its saved
context (in a live process or a core file), its frames numbered after the selected
thread's innermost one, which `bt` hides.'''

    def __init__(self):
        super(FiberBacktrace, self).__init__('fiber bt', gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        words = arg.split(None, 1)
        if not words:
            raise gdb.GdbError('usage: fiber bt ID [bt arguments]')
        fiber = find_fiber(words[0])
        rest = words[1] if len(words) > 1 else ''
        if fiber.saved_sp() != 0:
            suspended_backtrace(fiber, words[0], rest, from_tty)
            return
        thread = _thread_numbers().get(_int(fiber.slot['thread']))
        if thread is None:
            raise gdb.GdbError('Fiber %s is running, on no thread gdb knows.' % words[0])
        gdb.execute('thread apply %d backtrace %s' % (thread, rest), from_tty)


InfoFibers()
FiberPrefix()
FiberBacktrace()
