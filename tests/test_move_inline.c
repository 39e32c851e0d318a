/* The library inlined into movable tasks. Built with FIBERSCHED_STATIC: every function of
   the API is static here, and the compiler inlines what it sees fit into the tasks, as
   it may in any unit that defines the implementation (-O3, link-time optimisation).
   Where the thread pointer is a register (AArch64, ppc64le, riscv64) a compiler reads
   it once per function and keeps it across calls, so that code of the library inlined
   into a task after a wait could read the state of the thread that ran the task before
   it: a movable task may have moved to another thread meanwhile. Natively (x86) each
   thread-local is read through a segment register and the test proves little; under
   qemu-aarch64 it is the check.

   I1. Tasks of each kind loop: a wait on an event (a driver thread wakes them in rounds
       while they queue on one worker, so that they move), then one operation of the
       library, inlined: a yield, a spawn, a join, a tree (FSCHED_RUN), a parallel loop,
       a wait group's spawn and wait, a sleep, the clock, a contended mutex, an event set,
       a wait for a readable pipe. Tasks moved; every operation ran, every spawned task,
       join half, tree leaf and loop element once; nothing hung or crashed. */
#ifndef FIBERSCHED_STATIC /* as every test is built (tests/meson.build) */
#define FIBERSCHED_STATIC
#endif
#define FIBERSCHED_IMPLEMENTATION
#include "fibersched.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#if !TEST_THREADS
int main(void) {
    printf("test_move_inline: skipped (needs threads)\n");
    return TEST_SKIP;
}
#else

#if defined(__unix__) || defined(__APPLE__)
#include <time.h>
#include <unistd.h>
#define TEST_POSIX 1
#endif

enum {
    OP_YIELD,
    OP_SPAWN,
    OP_JOIN,
    OP_TREE,
    OP_FOR,
    OP_GROUP,
    OP_SLEEP,
    OP_CLOCK,
    OP_MUTEX,
    OP_EVENT,
    OP_FD,
    OPS
};

#define PER_OP 4
#define TASKS (OPS * PER_OP)
#define ROUNDS 40
#define RANGE 64

typedef struct inl_case {
    unsigned ops;         /* a mask of the kinds that run (1 << OP_...) */
    int tasks;            /* of them */
    uint32_t work_us;     /* each wake computes this long first: wakes queue up */
    fsched_event go[TASKS];
    fsched_event side;    /* a manual-reset event set by OP_EVENT */
    fsched_event never;   /* never set */
    fsched_mutex mutex;
    fsched_wait_group wg; /* the tasks */
    int blocked, done, moved;
    int ran[OPS];         /* operations that ran, by kind */
    int children;         /* spawned tasks that ran */
    int halves;           /* join halves that ran */
    int leaves;           /* tree leaves that ran */
    int elements;         /* elements the parallel loops covered */
    int counter;          /* under the mutex */
    int stop;             /* the pinned joiners stop */
    int pinned_joins;     /* joins of the pinned joiners ... */
    int pinned_halves;    /* ... and their halves that ran */
    int fd;               /* a pipe's read end with a byte to read */
} inl_case;

#include "move_common.h"

static void child(void *p) { ADD(&((inl_case *)p)->children, 1); }

static void half(void *p) { ADD(&((inl_case *)p)->halves, 1); }

static void pinned_half(void *p) { ADD(&((inl_case *)p)->pinned_halves, 1); }

/* With joins: a task that stays where it is joins on its worker's ring all the while,
   beside the movable tasks that join: a movable task's join that queued on this ring
   from another thread would race with it. It pauses now and then (its worker idles
   meanwhile: the others shed to it), in a wait that no operation below uses: each of
   those is called once in this unit, so that the compiler inlines it into its task as
   it does a static function called once. */
static void pinned_joiner(void *p) {
    inl_case *c = (inl_case *)p;
    int n = 0;
    CHECK_OK(fsched_task_set_movable(0));
    while (!LOAD(&c->stop)) {
        CHECK_OK(fsched_join(pinned_half, c, pinned_half, c));
        if (++n % 16 == 0)
            CHECK_RESULT(fsched_event_wait_for(&c->never, 100000u), FSCHED_ERR_TIMEOUT);
    }
    ADD(&c->pinned_joins, n);
}

static void body(void *ctx, size_t lo, size_t hi) {
    ADD(&((inl_case *)ctx)->elements, (int)(hi - lo));
}

FSCHED_VOID_TASK(leaf, inl_case *, c) { ADD(&c->leaves, 1); }

FSCHED_VOID_TASK(tree, inl_case *, c) {
    FSCHED_SPAWN(leaf, c);
    FSCHED_CALL(leaf, c);
    FSCHED_SYNC(leaf);
}

typedef struct inl_arg {
    inl_case *c;
    int i;
} inl_arg;

/* The wait that may move the task: the first one announces itself. */
static void await_wake(inl_case *c, int i, int r) {
    uint64_t end;
    if (r == 0) ADD(&c->blocked, 1);
    CHECK_OK(fsched_event_wait(&c->go[i]));
    end = fsched_clock_ns() + (uint64_t)c->work_us * 1000u;
    while (fsched_clock_ns() < end) fsched__cpu_relax();
}

/* Each kind of task, its operation after every wake, in a loop of its own: the loop
   is where a compiler keeps a thread pointer across the wait. */
#define KIND(name, op, stmt)                                    \
    static void name(void *p) {                                 \
        const inl_arg *a = (const inl_arg *)p;                  \
        inl_case *c = a->c;                                     \
        int first = fsched_worker_index(), r, moved = 0;        \
        for (r = 0; r < ROUNDS; r++) {                          \
            await_wake(c, a->i, r);                             \
            if (fsched_worker_index() != first) moved = 1;      \
            stmt;                                               \
            ADD(&c->ran[op], 1);                                \
            ADD(&c->done, 1);                                   \
        }                                                       \
        if (moved) ADD(&c->moved, 1);                           \
        fsched_wait_group_done(&c->wg);                         \
    }

KIND(task_yield, OP_YIELD, fsched_yield())
KIND(task_spawn, OP_SPAWN, CHECK_OK(fsched_spawn(fsched_current(), child, c)))
KIND(task_join, OP_JOIN, CHECK_OK(fsched_join(half, c, half, c)))
KIND(task_tree, OP_TREE, CHECK_OK(FSCHED_RUN(tree, c, NULL)))
KIND(task_for, OP_FOR, CHECK_OK(fsched_parallel_for(0, RANGE, 8, body, c)))
KIND(task_group, OP_GROUP, {
    fsched_wait_group wg;
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, fsched_current(), child, c));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
})
KIND(task_sleep, OP_SLEEP, fsched_sleep_for(1000))
KIND(task_clock, OP_CLOCK, CHECK(fsched_clock_ns() > 0))
KIND(task_mutex, OP_MUTEX, {
    CHECK_OK(fsched_mutex_lock(&c->mutex));
    c->counter++;
    CHECK_OK(fsched_mutex_unlock(&c->mutex));
})
KIND(task_event, OP_EVENT, CHECK_OK(fsched_event_set(&c->side)))
#if defined(TEST_POSIX)
KIND(task_fd, OP_FD, CHECK_OK(fsched_wait_fd(c->fd, FSCHED_READABLE, FSCHED_FOREVER, NULL)))
#else
KIND(task_fd, OP_FD, (void)0)
#endif

static void (*const kinds[OPS])(void *) = {task_yield, task_spawn, task_join, task_tree,
                                            task_for,   task_group, task_sleep, task_clock,
                                            task_mutex, task_event, task_fd};

/* ---- a worker held while the tasks start on the other ---- */

typedef struct hold {
    int started, release;
} hold;

static void hog(void *p) {
    hold *h = (hold *)p;
    STORE(&h->started, 1);
    while (!LOAD(&h->release)) fsched__cpu_relax();
}

static void drive(void *p) {
    inl_case *c = (inl_case *)p;
    int r, i;
    for (r = 0; r < ROUNDS; r++) {
        for (i = 0; i < c->tasks; i++) CHECK_OK(fsched_event_set(&c->go[i]));
        await_count(&c->done, c->tasks * (r + 1));
    }
}

/* One run; returns how many tasks moved. */
static int run_inlined(unsigned ops) {
    static inl_case c;
    fsched_desc d;
    fsched_sched *s;
    inl_arg a;
    hold h;
    test_thread driver;
    int i, k, per_task = ROUNDS;
#if defined(TEST_POSIX)
    int fds[2];
    CHECK(pipe(fds) == 0);
    CHECK(write(fds[1], "x", 1) == 1);
#endif
    memset(&d, 0, sizeof d);
    d.workers = 2;
    d.movable_tasks = 1;
    CHECK_OK(fsched_create(&d, &s));
    memset(&c, 0, sizeof c);
    c.ops = ops;
    c.work_us = test_emulated() ? 2000u : 100u; /* a backlog even under an emulator */
#if defined(TEST_POSIX)
    c.fd = fds[0];
#endif
    for (k = 0; k < OPS; k++)
        if (ops & (1u << k)) c.tasks += PER_OP;
    for (i = 0; i < c.tasks; i++) CHECK_OK(fsched_event_init(&c.go[i], 0, 0));
    CHECK_OK(fsched_event_init(&c.side, 1, 0));
    CHECK_OK(fsched_event_init(&c.never, 0, 0));
    CHECK_OK(fsched_mutex_init(&c.mutex));
    CHECK_OK(fsched_wait_group_init(&c.wg));
    CHECK_OK(fsched_wait_group_add(&c.wg, (uint32_t)c.tasks));
    memset(&h, 0, sizeof h);
    CHECK_OK(fsched_spawn(s, hog, &h));
    await_count(&h.started, 1);
    a.c = &c;
    a.i = 0;
    for (i = 0; i < PER_OP; i++)
        for (k = 0; k < OPS; k++)
            if (ops & (1u << k)) {
                CHECK_OK(fsched_spawn_copy(s, kinds[k], &a, sizeof a));
                a.i++;
            }
    await_count(&c.blocked, c.tasks);
    pause_us(20000); /* the last one suspends */
    if (ops & (1u << OP_JOIN))
        for (i = 0; i < 2; i++) CHECK_OK(fsched_spawn(s, pinned_joiner, &c));
    STORE(&h.release, 1);
    driver = thread_run(drive, &c);
    CHECK_OK(fsched_wait_group_wait(&c.wg));
    thread_join(driver);
    STORE(&c.stop, 1);
    CHECK_OK(fsched_destroy(s)); /* every task they spawned has ended */
    printf("I1 (ops %#x): %d of %d tasks moved\n", ops, c.moved, c.tasks);
    fflush(stdout);
    CHECK(c.done == c.tasks * ROUNDS);
    for (k = 0; k < OPS; k++) CHECK(c.ran[k] == ((ops & (1u << k)) ? PER_OP * per_task : 0));
    CHECK(c.children == c.ran[OP_SPAWN] + c.ran[OP_GROUP]);
    CHECK(c.halves == 2 * c.ran[OP_JOIN]);
    CHECK(c.pinned_halves == 2 * c.pinned_joins);
    CHECK(c.leaves == 2 * c.ran[OP_TREE]);
    CHECK(c.elements == RANGE * c.ran[OP_FOR]);
    CHECK(c.counter == c.ran[OP_MUTEX]);
    for (i = 0; i < c.tasks; i++) CHECK_OK(fsched_event_destroy(&c.go[i]));
    CHECK_OK(fsched_event_destroy(&c.side));
    CHECK_OK(fsched_event_destroy(&c.never));
    CHECK_OK(fsched_mutex_destroy(&c.mutex));
    CHECK_OK(fsched_wait_group_destroy(&c.wg));
#if defined(TEST_POSIX)
    close(fds[0]);
    close(fds[1]);
#endif
    return c.moved;
}

/* A run where no task moved proves nothing (a loaded machine, or one processor, may
   serve every wake where it came): up to 5 runs until one moves some. */
static void test_inlined(unsigned ops) {
    int run, moved = 0;
    for (run = 0; run < 5 && !moved; run++) moved = run_inlined(ops);
    CHECK(moved > 0);
}

/* `test-move-inline MASK`: only the kinds of that mask (bits 1 << OP_...) */
int main(int argc, char **argv) {
    test_watchdog(300);
    test_inlined(argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : (1u << OPS) - 1);
    printf("test_move_inline: ok\n");
    return 0;
}
#endif
