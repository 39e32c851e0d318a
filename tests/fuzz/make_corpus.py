#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz harnesses: tests/fuzz/corpus/<harness>/seed-*.

Each seed is a few bytes that reach one operation (or a short sequence) of a harness,
in the byte layout its source reads (see op_read and the header in each fuzz_*.c).
Files named crash-* (inputs that once failed, kept for ever) are left alone.

    python3 tests/fuzz/make_corpus.py
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# timeouts, as fz_timeout reads them: one byte (and a second one for 4)
T0, T1, T1US, T50US, TMAX, TMAX1, T2_63 = [0], [1], [2], [3], [5], [6], [7]
TMS = [4, 1]


def write(harness, seeds):
    d = os.path.join(HERE, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith("seed-"):
            os.remove(os.path.join(d, f))
    for i, data in enumerate(seeds):
        with open(os.path.join(d, "seed-%03d" % i), "wb") as f:
            f.write(bytes(data))


def core():
    # header: shape (workers, single, bound slots), stack, extra (overflow handler,
    # pinning, clock), allocator (mode, n, seed), start hook op?, stop hook op?; then how
    # the driver binds, then operations: code, context, variant, x, timeout
    OPS, CTXS = 29, 6
    multi = [0x0A, 0, 0x02, 4, 0, 0, 0, 0]      # one worker per CPU, plain driver...
    single = [0x02, 0, 0x02, 4, 0, 0, 0, 0]     # single-threaded, bound driver
    seeds = []

    def op(code, ctx, variant=0, x=0, t=T1US):
        return [code, ctx, variant, x] + t

    for code in range(OPS):
        for ctx in (0, 1, 3) if code % 3 == 0 else (code % CTXS,):
            seeds.append(multi + [1] + op(code, ctx, code * 37 % 256, code * 11 % 256))
        seeds.append(single + [0] + op(code, 0, code * 13 % 256, code * 5 % 256))
    # waits with every kind of timeout, ended by a set, a release, a broadcast
    for t in (T0, T1, TMS, TMAX, TMAX1, T2_63):
        seeds.append(multi + [0] + op(8, 3, 2, 0, t) + op(6, 1) + op(19, 1, 2, 0, t) +
                     op(20, 0, 0, 1) + op(16, 3, 1, 0, t) + op(18, 0))
    # bound driver, tasks that block, a destroy in the middle
    seeds.append(multi + [0] + op(8, 1) + op(12, 4) + op(28, 0) + op(0, 0) + op(28, 0))
    # worker hooks: an event wait in the start hook, a join in the stop hook
    seeds.append([0x0A, 0, 0x02, 4, 0, 0, 1] + op(8, 0, 2, 0, T50US) + [1] + op(2, 0, 1) + [1])
    # an allocator that fails from the tenth allocation, heap stacks
    seeds.append([0x0A, 0x22, 0x02, 1, 9, 0, 0, 0, 0] + op(0, 1) + op(3, 1, 1, 9) + op(4, 1))
    # the poll hook runs operations; replaced from inside it
    seeds.append(multi + [1] + op(26, 0, 0, 2) + op(6, 5) + op(26, 5, 1) + op(20, 5, 0, 1))
    # a clock of the scheduler's own, half as fast, far from zero
    seeds.append([0x0A, 0, 0xF2, 4, 0, 0, 0, 0, 0] + op(21, 1, 0, 0, TMS) + op(14, 1, 0, 0, TMS))
    # tiny and odd stacks
    for stack in (1, 4, 5, 6, 7, 0x13, 0x23):
        seeds.append([0x0A, stack, 0x02, 4, 0, 0, 0, 0, 1] + op(3, 1, 1, 12) + op(1, 1, 3, 3))
    # movable tasks (first byte 0x4D): fsched_task_set_movable from every context with
    # each value and wait; bursts woken at once, beside waits, joins, loops and stats
    MOVE, MOVABLE, BURST = [0x4D], 29, 30
    two = [0x0C, 0, 0x02, 4, 0, 0, 0, 0]  # two workers, plain driver
    for ctx in range(CTXS):
        seeds.append(MOVE + two + [1] + op(MOVABLE, ctx, ctx * 9, 3, TMS))
    for variant in (0, 8, 16, 24, 5, 29):
        seeds.append(MOVE + two + [1] + op(MOVABLE, 1, variant, variant, T50US) +
                     op(MOVABLE, 2, variant + 1, 1, T1))
    for x in (1, 7, 22):
        seeds.append(MOVE + two + [1] + op(BURST, 1, x % 8 + 8, x) + op(BURST, 3, 19, x) +
                     op(24, 1) + op(2, 1, 1, 9) + op(4, 1) + op(24, 0))
    # a burst beside blocked waits that the rescuer ends, then a destroy while they move
    seeds.append(MOVE + multi + [1] + op(8, 1, 2, 0, TMAX) + op(BURST, 0, 11, 23) +
                 op(16, 1, 1, 0, TMS) + op(BURST, 1, 17, 12) + op(28, 0))
    # single-threaded, bound driver: tasks may say so, and never move
    seeds.append(MOVE + single + [0] + op(MOVABLE, 1, 3, 3, T1US) + op(BURST, 0, 2, 5))
    write("core", seeds)


def fd():
    # header: shape (workers, single, bound driver), allocator (3 bytes); operations:
    # code, context, slot, end (+ events), variant, timeout
    OPS, CTXS = 14, 4
    multi, single = [0x11, 4, 0, 0], [0x12, 4, 0, 0]
    seeds = []

    def op(code, ctx, slot=0, end=0, variant=0, t=T1US):
        return [code, ctx, slot, end, variant] + t

    for code in range(OPS):
        for ctx in range(CTXS):
            if code in (5, 6) or ctx == code % CTXS:
                seeds.append(multi + op(0, 0) + op(code, ctx, 0, code * 3 % 8, code * 7 % 256))
    for t in (T0, T1, TMS, TMAX, TMAX1):
        # a reader that waits, a writer; a waiter cancelled by fsched_close_fd
        seeds.append(multi + op(0, 0) + op(5, 1, 0, 0, 0, t) + op(1, 2) + op(5, 1, 0, 0, 0, t) +
                     op(4, 0, 0, 0))
        seeds.append(single + op(0, 0, 1, 0, 1) + op(5, 1, 1, 2, 0, t) + op(1, 0, 1))
    # a full pipe waited on for room, drained by another
    seeds.append(multi + op(0, 0) + op(2, 0) + op(5, 1, 0, 3, 0, TMS) + op(3, 2))
    # a number reused after fsched_close_fd: waits on the new pipe
    seeds.append(multi + op(0, 0) + op(4, 0, 0, 0) + op(4, 0, 0, 1) + op(0, 0, 1) +
                 op(5, 1, 1) + op(1, 0, 1))
    # the device: requests completed by the poll hook, intervals at the edges
    for v in range(6):
        seeds.append(multi + op(9, 0, 0, 0, v) + op(8, 1, 0, 0, v, TMAX) + op(8, 2, 0, 0, 1))
    # a destroy while fds are waited on
    seeds.append(multi + op(0, 0) + op(5, 1, 0, 0, 0, TMAX) + op(5, 1, 0, 0, 0, TMS) + op(13, 0))
    # FSCHED_EDGE inputs (first byte 0xED): edge waits on slots, the shared pair, a
    # number reused under edge waits, bogus and own fds with the flag, from each context
    EDGE, WAIT_EDGE, SHARED, REUSE = [0xED], 14, 15, 16
    for head in (multi, single, [0x10, 4, 0, 0]):
        for ctx in range(CTXS):
            seeds.append(EDGE + head + op(0, 0) + op(WAIT_EDGE, ctx, 0, 0, 1, TMS) + op(1, 0) +
                         op(WAIT_EDGE, ctx, 0, 0, 3, TMAX) + op(1, 2))
            for how in range(6):  # fsched_close_fd, close, dup2; a dup kept or not
                seeds.append(EDGE + head + op(REUSE, ctx, 0, 0, how, TMAX))
    for t in (T0, T1, TMS, TMAX):
        # two edge waits for one direction on the shared pair (a broken promise), one
        # level wait after; a socket slot waited on both ways, with and without EAGAIN
        seeds.append(EDGE + multi + op(SHARED, 1, 0, 0, 2, t) + op(SHARED, 1, 0, 0, 0, t) +
                     op(SHARED, 2, 0, 0, 8, t) + op(SHARED, 0, 0, 2, 5, t))
        seeds.append(EDGE + multi + op(0, 0, 1, 0, 1) + op(WAIT_EDGE, 1, 1, 0, 1, t) +
                     op(5, 1, 1, 0, 0, t) + op(WAIT_EDGE, 1, 1, 2, 0, t) + op(1, 0, 1) +
                     op(4, 0, 1, 0) + op(12, 0, 1, 1, 1))
    # bogus fds and events with the flag; the scheduler's own fds; waits of more than a
    # look from the poll hook
    for v in (0x80, 0x81, 0x83, 0x86, 0x70, 0xF0, 0x88):
        seeds.append(EDGE + multi + op(9, 0) + op(6, 0, 0, 3, v, TMS) + op(6, 3, 0, 2, v, TMS) +
                     op(6, 1, 0, 1, v, TMAX))
    seeds.append(EDGE + multi + op(9, 0) + op(0, 0) + op(WAIT_EDGE, 3, 0, 0, 2, TMS) +
                 op(WAIT_EDGE, 3, 0, 0, 3, T0))
    # edge waits in flight through fsched_close_fd, a plain reuse and a destroy
    seeds.append(EDGE + multi + op(0, 0, 0, 0, 1) + op(WAIT_EDGE, 1, 0, 0, 0, TMAX) +
                 op(SHARED, 1, 0, 0, 0, TMAX) + op(4, 0, 0, 0) + op(12, 0, 0, 1, 0) +
                 op(REUSE, 1, 0, 0, 5, TMAX) + op(13, 0) + op(WAIT_EDGE, 0, 0, 0, 0, TMS))
    # the promise kept by a short read (variant 0x10): data and the writer's end together,
    # the end left unread, on a pipe and on a socket slot; the shared pair written first
    for ctx in (0, 1, 2):
        seeds.append(EDGE + multi + op(0, 0) + op(1, 0) + op(4, 0, 0, 1) +
                     op(WAIT_EDGE, ctx, 0, 0, 0x11, TMS) + op(WAIT_EDGE, ctx, 0, 0, 0x11, TMS) +
                     op(WAIT_EDGE, ctx, 0, 0, 0x11, TMAX))
        seeds.append(EDGE + multi + op(0, 0, 1, 0, 1) + op(1, 0, 1) + op(WAIT_EDGE, ctx, 1, 0, 0x11, TMS) +
                     op(4, 0, 1, 1) + op(WAIT_EDGE, ctx, 1, 0, 0x11, TMAX) +
                     op(SHARED, ctx, 0, 0, 0x13, TMS) + op(SHARED, ctx, 0, 0, 0x1B, TMAX))
    write("fd", seeds)


def graph():
    # header: shape (workers, single, policy, bound driver), allocator (3 bytes);
    # operations: code, then the bytes that operation reads
    seeds = []
    multi = [0x05, 4, 0, 0]
    failfast = [0x15, 4, 0, 0]
    bound = [0x25, 4, 0, 0]
    single = [0x00, 4, 0, 0]
    ADD, PRE, RUN, WAIT, CANCEL, DESTROY, DOT, QUERY, PIPE, LINEAR, DSCHED = range(11)

    def add(how=0, behaviour=0):
        return [ADD, how, behaviour] + ([0] if how & 8 else [])

    def diamond(b0=0, b1=0, b2=0, b3=0):
        return (add(0, b0) + add(0, b1) + add(2, b2) + add(4, b3) +
                [PRE, 0, 1, PRE, 0, 2, PRE, 1, 3, PRE, 2, 3, PRE, 3, 0])

    for head in (multi, failfast, bound, single):
        seeds.append(head + diamond() + [RUN, WAIT, 0])
        seeds.append(head + diamond(1, 3, 8, 4) + [RUN, WAIT, 2, 4, 1, RUN, WAIT, 0])
        seeds.append(head + diamond(64, 0, 0, 0) + [RUN, CANCEL, 0, WAIT, 1])
        seeds.append(head + diamond(32, 32, 32, 32) + [RUN, CANCEL, 1, WAIT, 0, DOT, QUERY])
    seeds.append(multi + add(1, 0) + add(8, 0, ) + [RUN, WAIT, 0])
    seeds.append(multi + add(0x10, 0) + [RUN, WAIT, 0])  # a worker s lacks
    seeds.append(multi + add(6, 0) + [RUN, WAIT, 0])     # a priority out of range
    seeds.append(multi + diamond() + [RUN, ADD, 0, 0, PRE, 0, 1, DESTROY, WAIT, 0, DESTROY])
    seeds.append(multi + diamond(16, 16, 16, 16) + [RUN, DSCHED, WAIT, 0, RUN])
    # pipelines: shapes, envelopes, inline or late completion, each scheduler
    for shape in (0, 1, 2, 3, 4, 9):
        for how in (0x00, 0x41, 0x80, 0xE1):
            seeds.append(multi + [PIPE, shape, how, 7, 3])
    seeds.append(single + [PIPE, 2, 0x80, 5] + [PIPE, 1, 0xC0, 0])
    # linear pipelines: modes and max_in_flight
    for how in (0x00, 0x15, 0x2A, 0x3F, 0x44, 0x09, 0xFD):
        seeds.append(multi + [LINEAR, how, 25])
    seeds.append(single + [LINEAR, 0x15, 10])
    seeds.append([0x05, 1, 20, 0] + diamond(1, 1, 1, 1) + [RUN, WAIT, 0, PIPE, 1, 0, 4])
    # a plain thread that begins its wait only when joined, during a later run
    for head in (multi, single):
        seeds.append(head + diamond() + [RUN, WAIT, 5, 0, RUN, DESTROY])
    write("graph", seeds)


def cpp():
    # header: shape (workers, single, bound driver); operations: code, v, x, in a task
    seeds = []
    heads = [[0x05], [0x15], [0x00]]
    for code in range(10):
        for v in (0, 1, 2, 3, 0x0D, 0x12, 0x1F):
            seeds.append(heads[(code + v) % 3] + [code, v, v * 7 % 256, v & 1])
    # spawns into the group that throw, a wait; throws nobody waits for
    seeds.append([0x05, 1, 3, 0, 0, 1, 5, 0, 0, 2, 0, 0, 0, 0, 1, 0, 0])
    seeds.append([0x15, 1, 3, 0, 0, 0, 1, 0, 1])
    write("cpp", seeds)


if __name__ == "__main__":
    core()
    fd()
    graph()
    cpp()
