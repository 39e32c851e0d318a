/* The builds without threads (FIBERSCHED_NO_THREADS) and without an OS (FIBERSCHED_NO_OS)
   at their edges: the registry of live objects (a list through the objects without an
   OS) under creation and destruction in every order, twice, from a task and after
   destruction; a wait group at 0, 1, INT64_MAX and past them; a slot's public jobs (a
   stack linked through the jobs) with many thousands queued at once, from the thread's
   own code and from tasks, some of them waiting; a stack pool whose cached blocks (a
   list through their records) are reused by fibers of every stack size it allows and
   outlive their pool. Built natively without an OS, "interrupts" are signals: the
   macros mask them with a flag, and one that comes while they are masked is delivered
   when they are restored, as a processor's pending interrupt would be. */
#define _DEFAULT_SOURCE 1
#include <signal.h>
#include <stdint.h>
#include <sys/time.h>
#include <time.h>

#if defined(FIBERSCHED_NO_OS) && !defined(FIBERSCHED_TEST_BOARD) && defined(__unix__)
#define LEAN_SIGNALS 1
static volatile sig_atomic_t irq_masked, irq_pending, irq_active;
static void irq_deliver(void);
static unsigned long irq_mask(void) {
    unsigned long old = (unsigned long)irq_masked;
    irq_masked = 1;
    return old;
}
static void irq_restore(unsigned long s) {
    irq_masked = (sig_atomic_t)s;
    /* pending: taken as the mask lifts, unless a handler runs (no nesting: it is taken
       when that one returns) */
    if (!irq_masked && irq_pending && !irq_active) irq_deliver();
}
#define FIBERSCHED_INTERRUPTS_MASK() irq_mask()
#define FIBERSCHED_INTERRUPTS_RESTORE(s) irq_restore(s)
#define FIBERSCHED_IN_INTERRUPT() irq_active
#endif

#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#if TEST_THREADS
int main(void) {
    printf("test_lean: skipped (a build without threads)\n");
    return TEST_SKIP;
}
#else

#if defined(FIBERSCHED_NO_OS) && !defined(FIBERSCHED_TEST_BOARD)
static uint64_t native_clock_ns(void *user) {
    struct timespec ts;
    (void)user;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif

static void lean_desc(fsched_desc *d) {
    test_desc_init(d);
#if defined(FIBERSCHED_NO_OS) && !defined(FIBERSCHED_TEST_BOARD)
    d->clock = native_clock_ns;
#endif
}

static fsched_sched *lean_sched(void) {
    fsched_desc d;
    fsched_sched *s;
    lean_desc(&d);
    CHECK_OK(fsched_create(&d, &s));
    CHECK_OK(fsched_bind(s));
    return s;
}

static void lean_free(fsched_sched *s) {
    CHECK_OK(fsched_unbind());
    CHECK_OK(fsched_destroy(s));
}

/* ---- the registry of live objects ---- */

#define OBJECTS 24

static int noop_task(fsched_graph_task *self, void *arg) {
    (void)self;
    ADD((uint32_t *)arg, 1);
    return 0;
}

typedef struct destroy_in_task {
    fsched_graph *g;
    fsched_sched *other;
    fsched_result graph_r, sched_r;
} destroy_in_task;

static void destroyer(void *p) {
    destroy_in_task *x = (destroy_in_task *)p;
    x->graph_r = fsched_graph_destroy(x->g);
    x->sched_r = fsched_destroy(x->other); /* from a task: refused */
}

static void test_registry(void) {
    fsched_sched *s[OBJECTS], *bound;
    fsched_graph *g[OBJECTS];
    fsched_pipeline *p[OBJECTS];
    fsched_desc d;
    fsched_graph_desc gd;
    fsched_graph_task *t;
    fsched_wait_group wg;
    destroy_in_task x;
    uint32_t ran = 0, i, k;
    static const uint32_t order[OBJECTS] = {12, 0, 23, 5, 6, 11, 13, 1, 22, 7, 18, 3,
                                            2, 19, 4, 21, 8, 14, 9, 20, 10, 15, 17, 16};
    printf("test_lean: registry\n");
    lean_desc(&d);
    memset(&gd, 0, sizeof gd);
    for (i = 0; i < OBJECTS; i++) {
        CHECK_OK(fsched_create(&d, &s[i]));
        CHECK_OK(fsched_graph_create(&gd, &g[i]));
        CHECK_OK(fsched_pipeline_create(NULL, &p[i]));
    }
    /* destroyed in an order that takes from the middle, both ends, neighbours */
    for (k = 0; k < OBJECTS; k++) {
        i = order[k];
        CHECK_OK(fsched_pipeline_destroy(p[i]));
        CHECK_OK(fsched_graph_destroy(g[i]));
        CHECK_OK(fsched_destroy(s[i]));
        /* twice: found gone, whatever the list holds around it */
        CHECK_RESULT(fsched_destroy(s[i]), FSCHED_ERR_INVALID_ARGUMENT);
        CHECK_RESULT(fsched_graph_destroy(g[i]), FSCHED_ERR_INVALID_ARGUMENT);
        CHECK_RESULT(fsched_pipeline_destroy(p[i]), FSCHED_ERR_INVALID_ARGUMENT);
        /* the others still live: every third is used */
        if (k + 1 < OBJECTS && k % 3 == 0) {
            uint32_t j = order[k + 1];
            CHECK_OK(fsched_graph_add(g[j], noop_task, &ran, NULL, &t));
            CHECK_OK(fsched_bind(s[j]));
            CHECK_OK(fsched_graph_run(g[j], s[j]));
            CHECK_OK(fsched_graph_wait(g[j], NULL));
            CHECK_OK(fsched_unbind());
        }
        /* created anew after a destroy (often at the same address), then gone again */
        if (k % 5 == 0) {
            fsched_sched *again;
            CHECK_OK(fsched_create(&d, &again));
            CHECK_OK(fsched_destroy(again));
            CHECK_RESULT(fsched_destroy(again), FSCHED_ERR_INVALID_ARGUMENT);
        }
    }
    CHECK(ran > 0);

    /* a graph destroyed from a task of another scheduler, which is refused its own
       scheduler's destroy; both live on */
    bound = lean_sched();
    CHECK_OK(fsched_create(&d, &x.other));
    CHECK_OK(fsched_graph_create(&gd, &x.g));
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, bound, destroyer, &x));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(x.graph_r);
    CHECK_RESULT(x.sched_r, FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_graph_destroy(x.g), FSCHED_ERR_INVALID_ARGUMENT);
    lean_free(bound);
    CHECK_RESULT(fsched_destroy(bound), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_destroy(x.other));
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

/* ---- wait group counts at their edges ---- */

static void test_wait_group_edges(void) {
    fsched_wait_group wg;
    printf("test_lean: wait group edges\n");
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_add(&wg, 0));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_RESULT(fsched_wait_group_done(&wg), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_wait_group_add(&wg, -1), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_wait_group_add(&wg, INT64_MIN), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_wait_group_add(&wg, INT64_MAX));
    CHECK_RESULT(fsched_wait_group_add(&wg, 1), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_wait_group_add(&wg, INT64_MAX), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_wait_group_add(&wg, INT64_MIN), FSCHED_ERR_WRONG_STATE);
    CHECK_EQ_U64(wg.count, (uint64_t)INT64_MAX); /* refused adds left it alone */
    CHECK_RESULT(fsched_wait_group_wait_for(&wg, 0), FSCHED_ERR_TIMEOUT);
    CHECK_RESULT(fsched_wait_group_destroy(&wg), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_wait_group_add(&wg, -(INT64_MAX - 1)));
    CHECK_EQ_U64(wg.count, 1);
    CHECK_OK(fsched_wait_group_done(&wg));
    CHECK_OK(fsched_wait_group_wait(&wg));
    /* across 2^32: a count kept in 32 bits would read zero here */
    CHECK_OK(fsched_wait_group_add(&wg, (int64_t)1 << 32));
    CHECK_RESULT(fsched_wait_group_wait_for(&wg, 0), FSCHED_ERR_TIMEOUT);
    CHECK_OK(fsched_wait_group_add(&wg, -(((int64_t)1 << 32) - 1)));
    CHECK_RESULT(fsched_wait_group_wait_for(&wg, 0), FSCHED_ERR_TIMEOUT);
    CHECK_OK(fsched_wait_group_done(&wg));
    CHECK_OK(fsched_wait_group_wait_for(&wg, 0));
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

/* ---- many public jobs ---- */

#define MANY (20000u / TEST_SCALE)

typedef struct many {
    fsched_wait_group wg;
    fsched_event go;
    uint32_t ran, woke, depth;
    unsigned char seen[MANY];
} many;

static many M;

static void many_task(void *p) {
    uint32_t i = (uint32_t)(uintptr_t)p;
    CHECK(M.seen[i] == 0);
    M.seen[i]++;
    M.ran++;
    /* one in 64 waits, while the rest are still queued beneath it */
    if (i % 64 == 0) {
        CHECK_OK(fsched_event_wait(&M.go));
        M.woke++;
    }
}

static void many_spawner(void *p) {
    uint32_t i, n = (uint32_t)(uintptr_t)p;
    for (i = 0; i < n; i++)
        CHECK_OK(fsched_wait_group_spawn(&M.wg, fsched_current(), many_task, (void *)(uintptr_t)i));
}

/* Spawns the rest one level deeper each time, through spawn_copy, from a task that waits
   for the group with its own jobs queued: its wait runs them nested. */
static void nested_spawner(void *p) {
    uint32_t lo = *(const uint32_t *)p, i, hi = lo + 200 <= MANY ? lo + 200 : MANY;
    for (i = lo; i < hi; i++)
        CHECK_OK(fsched_wait_group_spawn(&M.wg, fsched_current(), many_task, (void *)(uintptr_t)i));
    if (hi < MANY) {
        CHECK_OK(fsched_wait_group_add(&M.wg, 1));
        CHECK_OK(fsched_spawn_copy(fsched_current(), nested_spawner, &hi, sizeof hi));
    }
    CHECK_OK(fsched_wait_group_done(&M.wg)); /* this spawner's unit */
}

static void waker(void *p) {
    (void)p;
    while (M.woke < (MANY + 63) / 64) {
        CHECK_OK(fsched_event_set(&M.go));
        fsched_yield();
    }
}

static void many_check(void) {
    uint32_t i;
    CHECK_EQ_U64(M.ran, MANY);
    CHECK_EQ_U64(M.woke, (MANY + 63) / 64);
    for (i = 0; i < MANY; i++) CHECK(M.seen[i] == 1);
}

static void many_reset(void) {
    memset(&M, 0, sizeof M);
    CHECK_OK(fsched_wait_group_init(&M.wg));
    CHECK_OK(fsched_event_init(&M.go, 1, 0)); /* auto-reset: one waiter per set */
}

static void test_many_public_jobs(void) {
    fsched_sched *s = lean_sched();
    fsched_wait_group w;
    uint32_t zero = 0;
    printf("test_lean: %u public jobs\n", (unsigned)MANY);
    CHECK_OK(fsched_wait_group_init(&w));

    /* from the thread's own code: every one published */
    many_reset();
    many_spawner((void *)(uintptr_t)MANY);
    CHECK_OK(fsched_wait_group_spawn(&w, s, waker, NULL));
    CHECK_OK(fsched_wait_group_wait(&M.wg));
    CHECK_OK(fsched_wait_group_wait(&w));
    many_check();

    /* from a task: the ring fills and shares, over and over */
    many_reset();
    CHECK_OK(fsched_wait_group_spawn(&w, s, many_spawner, (void *)(uintptr_t)MANY));
    CHECK_OK(fsched_wait_group_spawn(&w, s, waker, NULL));
    CHECK_OK(fsched_wait_group_wait(&w));
    CHECK_OK(fsched_wait_group_wait(&M.wg));
    many_check();

    /* nested: spawners that spawn spawners, each waiting */
    many_reset();
    CHECK_OK(fsched_wait_group_add(&M.wg, 1));
    CHECK_OK(fsched_spawn_copy(s, nested_spawner, &zero, sizeof zero));
    CHECK_OK(fsched_wait_group_spawn(&w, s, waker, NULL));
    CHECK_OK(fsched_wait_group_wait(&M.wg));
    CHECK_OK(fsched_wait_group_wait(&w));
    many_check();

    CHECK_OK(fsched_wait_group_destroy(&M.wg));
    CHECK_OK(fsched_event_destroy(&M.go));
    CHECK_OK(fsched_wait_group_destroy(&w));
    lean_free(s);
}

/* ---- stack pool reuse ---- */

static void fiber_body(void *p) {
    volatile unsigned char buf[512];
    size_t i;
    for (i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)i;
    ADD((uint32_t *)p, buf[100]);
}

static void test_pool_reuse(void) {
    static const size_t sizes[] = {0, 1, FIBERSCHED_MIN_STACK_SIZE, 16384, 65536};
    size_t si, cached;
    uint32_t sum = 0, expect = 0, round;
    printf("test_lean: stack pools\n");
    for (si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (cached = 1; cached <= 3; cached++) {
            fsched_stack_pool_desc pd;
            fsched_stack_pool *pool;
            fsched_fiber_desc fd;
            fsched_fiber *f[6];
            fsched_stack_pool_stats st;
            fsched_result r;
            size_t i;
            memset(&pd, 0, sizeof pd);
            pd.stack_size = sizes[si];
            pd.max_cached = cached;
            r = fsched_stack_pool_create(&pd, &pool);
            if (sizes[si] && sizes[si] < FIBERSCHED_MIN_STACK_SIZE) {
                CHECK_RESULT(r, FSCHED_ERR_INVALID_ARGUMENT);
                continue;
            }
            CHECK_OK(r);
            memset(&fd, 0, sizeof fd);
            fd.pool = pool;
            for (round = 0; round < 4; round++) {
                /* take more than the cache holds, run some, destroy in a mixed order */
                for (i = 0; i < 6; i++) CHECK_OK(fsched_fiber_create(&fd, fiber_body, &sum, &f[i]));
                for (i = 0; i < 6; i += 2) {
                    CHECK_OK(fsched_fiber_switch(f[i]));
                    expect += 100;
                }
                for (i = 0; i < 6; i++) {
                    size_t j = (i * 5 + round) % 6;
                    CHECK_OK(fsched_fiber_destroy(f[j]));
                    /* twice, while its block is cached (readable) */
                    if (i < cached)
                        CHECK_RESULT(fsched_fiber_destroy(f[j]), FSCHED_ERR_INVALID_ARGUMENT);
                }
                CHECK_OK(fsched_stack_pool_get_stats(pool, &st));
                CHECK_EQ_U64(st.cached, cached);
                CHECK_EQ_U64(st.in_use, 0);
            }
            /* fibers outlive the pool: their blocks are freed as they go */
            CHECK_OK(fsched_fiber_create(&fd, fiber_body, &sum, &f[0]));
            CHECK_OK(fsched_fiber_create(&fd, fiber_body, &sum, &f[1]));
            fsched_stack_pool_destroy(pool);
            CHECK_OK(fsched_fiber_switch(f[1]));
            expect += 100;
            CHECK_OK(fsched_fiber_destroy(f[1]));
            CHECK_OK(fsched_fiber_destroy(f[0]));
        }
    }
    CHECK_EQ_U64(sum, expect);
}

/* ---- tasks whose waits nothing could end, under an unbind and a destroy ---- */

static fsched_event never;
static fsched_mutex held;
static fsched_sema none;
static fsched_result never_r[3];

static void never_waiter(void *p) { never_r[0] = fsched_event_wait(&never); (void)p; }

static void holder(void *p) {
    (void)p;
    CHECK_OK(fsched_mutex_lock(&held));
    never_r[1] = fsched_sema_acquire(&none);
    CHECK_OK(fsched_mutex_unlock(&held));
}

static void locker(void *p) {
    (void)p;
    never_r[2] = fsched_mutex_lock(&held);
    if (never_r[2] == FSCHED_OK) CHECK_OK(fsched_mutex_unlock(&held));
}

/* Without threads such a wait returns FSCHED_ERR_WRONG_STATE rather than hang: a task's
   too, where the thread waits for the tasks to end (it spun for ever). */
static void test_deadlocked_tasks(void) {
    fsched_desc d;
    fsched_sched *s;
    int round, i;
    printf("test_lean: tasks deadlocked under unbind and destroy\n");
    CHECK_OK(fsched_event_init(&never, 0, 0));
    CHECK_OK(fsched_mutex_init(&held));
    CHECK_OK(fsched_sema_init(&none, 0));
    for (round = 0; round < 2; round++) {
        lean_desc(&d);
        CHECK_OK(fsched_create(&d, &s));
        for (i = 0; i < 3; i++) never_r[i] = FSCHED_ERR_SYSTEM;
        if (round) CHECK_OK(fsched_bind(s)); /* spawned to the slot, then unbound */
        CHECK_OK(fsched_spawn(s, never_waiter, NULL));
        CHECK_OK(fsched_spawn(s, holder, NULL));
        CHECK_OK(fsched_spawn(s, locker, NULL));
        if (round) CHECK_OK(fsched_unbind());
        CHECK_OK(fsched_destroy(s));
        CHECK_RESULT(never_r[0], FSCHED_ERR_WRONG_STATE);
        CHECK_RESULT(never_r[1], FSCHED_ERR_WRONG_STATE);
        CHECK(never_r[2] == FSCHED_OK || never_r[2] == FSCHED_ERR_WRONG_STATE);
    }
    CHECK_OK(fsched_sema_destroy(&none));
    CHECK_OK(fsched_mutex_destroy(&held));
    CHECK_OK(fsched_event_destroy(&never));
}

/* ---- a poll hook that waits for something, with or without a clock ---- */

/* A "device" the hook polls: ready at the hook's DEVICE_CALLS-th call, which ends the
   wait for it; until then the hook says that something is outstanding. */
#define DEVICE_CALLS 5u
static fsched_event device_ready;
static uint32_t device_calls;

#if defined(LEAN_SIGNALS)
/* An "interrupt" that comes while the hook runs, whose handler would replace the hook:
   refused (it would wait for the hook, which it interrupted, for ever) */
static void device_interrupted(fsched_sched *s) {
    irq_active = 1;
    CHECK_RESULT(fsched_set_poll(s, NULL, NULL, 0), FSCHED_ERR_WRONG_STATE);
    irq_active = 0;
}
#endif

static int device_hook(void *user) {
#if defined(LEAN_SIGNALS)
    if (device_calls == 1) device_interrupted((fsched_sched *)user);
#endif
    (void)user;
    if (++device_calls < DEVICE_CALLS) return 1;
    if (device_calls == DEVICE_CALLS) CHECK_OK(fsched_event_set(&device_ready));
    return 0;
}

static void device_waiter(void *p) {
    (void)p;
    CHECK_OK(fsched_event_wait(&device_ready));
}

/* Never lets its worker go idle while the device is not ready: only the calls between
   tasks can reach the hook. */
static void device_spinner(void *p) {
    (void)p;
    while (device_calls < DEVICE_CALLS) fsched_yield();
}

/* The hook is called again while it says something is outstanding: by an idle worker (a
   task waits for the device) and between tasks (a task yields until it is ready). The
   scheduler has the tests' clock: natively without an OS none, where no interval can be
   measured (an idle worker spun for ever waiting for one to end, and a busy one never
   called the hook again). */
static void test_poll_hook(void) {
    int busy;
    printf("test_lean: a poll hook that waits for something\n");
    for (busy = 0; busy < 2; busy++) {
        fsched_desc d;
        fsched_sched *s;
        fsched_wait_group wg;
        test_desc_init(&d);
        CHECK_OK(fsched_create(&d, &s));
        CHECK_OK(fsched_bind(s));
        CHECK_OK(fsched_event_init(&device_ready, 0, 0));
        device_calls = 0;
        CHECK_OK(fsched_set_poll(s, device_hook, s, 0));
        CHECK_OK(fsched_wait_group_init(&wg));
        CHECK_OK(fsched_wait_group_spawn(&wg, s, busy ? device_spinner : device_waiter, NULL));
        CHECK_OK(fsched_wait_group_wait(&wg));
        CHECK(device_calls >= DEVICE_CALLS);
        CHECK_OK(fsched_wait_group_destroy(&wg));
        CHECK_OK(fsched_set_poll(s, NULL, NULL, 0));
        CHECK_OK(fsched_event_destroy(&device_ready));
        lean_free(s);
    }
}

/* ---- "interrupts" from a signal ---- */

#if defined(LEAN_SIGNALS)
#if !defined(TICKS)
#define TICKS 3000u
#endif
static fsched_sched *irq_sched;
static fsched_sema irq_sema, irq_empty;
static fsched_event irq_event;
static fsched_wait_group irq_spawned, irq_counted;
static volatile uint32_t irq_ticks, irq_spawn_ok, irq_spawn_failed, irq_done;
static uint32_t irq_ran, irq_acquired;

static void irq_counted_task(void *p) {
    (void)p;
    irq_ran++;
}

static void irq_stop_timer(void) {
    struct itimerval it;
    memset(&it, 0, sizeof it);
    setitimer(ITIMER_REAL, &it, NULL);
}

static void irq_work(void) {
    fsched_result r;
    uint32_t k = irq_ticks + 1;
    if (irq_done) return;
    irq_ticks = k;
    CHECK_OK(fsched_sema_release(&irq_sema, 1));
    CHECK_OK(fsched_event_set(&irq_event));
    CHECK_OK(fsched_wait_group_add(&irq_counted, 1));
    CHECK_OK(fsched_wait_group_done(&irq_counted));
    r = k % 2 ? fsched_wait_group_spawn(&irq_spawned, irq_sched, irq_counted_task, NULL)
              : fsched_spawn_copy(irq_sched, irq_counted_task, &k, sizeof k);
    if (r == FSCHED_OK) {
        irq_spawn_ok++;
    } else {
        CHECK_RESULT(r, FSCHED_ERR_OUT_OF_MEMORY);
        irq_spawn_failed++;
    }
    CHECK(fsched_current() == NULL);
    CHECK_RESULT(fsched_sema_acquire(&irq_empty), FSCHED_ERR_WRONG_STATE); /* may not wait */
    if (k == TICKS) {
        irq_done = 1;
        irq_stop_timer();
    }
}

static void irq_deliver(void) {
    do {
        irq_pending = 0;
        irq_active = 1;
        irq_work();
        irq_active = 0;
    } while (irq_pending); /* one that came meanwhile, at once */
}

static void irq_signal(int sig) {
    (void)sig;
    if (irq_masked || irq_active) irq_pending = 1;
    else irq_deliver();
}

/* Waits "for an interrupt", with them masked: a pending one ends the wait at once. */
static void irq_idle(void *user) {
    struct timespec ts = {0, 20000};
    (void)user;
    if (!irq_pending) nanosleep(&ts, NULL);
}

static void irq_consumer(void *p) {
    (void)p;
    while (irq_acquired < TICKS) {
        CHECK_OK(fsched_sema_acquire_for(&irq_sema, 20000000000ull));
        irq_acquired++;
    }
}

static void irq_hammer(void *p) {
    uint32_t i = 0;
    (void)p;
    while (!irq_done) {
        CHECK_OK(fsched_sema_release(&irq_sema, 1));
        CHECK_OK(fsched_sema_acquire_for(&irq_sema, 20000000000ull));
        CHECK_OK(fsched_wait_group_add(&irq_counted, 2));
        CHECK_OK(fsched_wait_group_add(&irq_counted, -2));
        if (++i % 16 == 0) fsched_yield();
    }
}

static void irq_event_waiter(void *p) {
    (void)p;
    while (!irq_done) {
        fsched_result r = fsched_event_wait_for(&irq_event, 100000000ull);
        CHECK(r == FSCHED_OK || (r == FSCHED_ERR_TIMEOUT && irq_done));
    }
}

static void test_signals(void) {
    fsched_desc d;
    fsched_wait_group w;
    struct sigaction sa;
    struct itimerval it;
    printf("test_lean: %u signals as interrupts\n", (unsigned)TICKS);
    lean_desc(&d);
    d.idle = irq_idle;
    d.interrupt_tasks = 8;
    CHECK_OK(fsched_create(&d, &irq_sched));
    CHECK_OK(fsched_bind(irq_sched));
    CHECK_OK(fsched_sema_init(&irq_sema, 0));
    CHECK_OK(fsched_sema_init(&irq_empty, 0));
    CHECK_OK(fsched_event_init(&irq_event, 0, 0));
    CHECK_OK(fsched_wait_group_init(&irq_spawned));
    CHECK_OK(fsched_wait_group_init(&irq_counted));
    CHECK_OK(fsched_wait_group_init(&w));
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = irq_signal;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
    memset(&it, 0, sizeof it);
    it.it_interval.tv_usec = 100;
    it.it_value.tv_usec = 100;
    CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
    CHECK_OK(fsched_wait_group_spawn(&w, irq_sched, irq_consumer, NULL));
    CHECK_OK(fsched_wait_group_spawn(&w, irq_sched, irq_hammer, NULL));
    CHECK_OK(fsched_wait_group_spawn(&w, irq_sched, irq_event_waiter, NULL));
    CHECK_OK(fsched_wait_group_wait(&w));
    CHECK(irq_done);
    CHECK_OK(fsched_wait_group_wait(&irq_spawned));
    CHECK_OK(fsched_unbind());
    CHECK_OK(fsched_destroy(irq_sched)); /* runs what the handler spawned outside the group */
    CHECK_EQ_U64(irq_acquired, TICKS);
    CHECK_EQ_U64(irq_spawn_ok + irq_spawn_failed, TICKS);
    CHECK(irq_spawn_ok > 0);
    CHECK_EQ_U64(irq_ran, irq_spawn_ok);
    CHECK_RESULT(fsched_sema_try_acquire(&irq_sema), FSCHED_ERR_TIMEOUT);
    CHECK_OK(fsched_sema_destroy(&irq_empty));
    CHECK_OK(fsched_sema_destroy(&irq_sema));
    CHECK_OK(fsched_event_destroy(&irq_event));
    CHECK_OK(fsched_wait_group_destroy(&irq_counted));
    CHECK_OK(fsched_wait_group_destroy(&irq_spawned));
    CHECK_OK(fsched_wait_group_destroy(&w));
    printf("test_lean: %u spawns from the handler ran, %u found no record\n",
           (unsigned)irq_spawn_ok, (unsigned)irq_spawn_failed);
}
#endif

int main(void) {
    test_watchdog(120);
    test_registry();
    test_wait_group_edges();
    test_many_public_jobs();
    test_pool_reuse();
    test_deadlocked_tasks();
    test_poll_hook();
#if defined(LEAN_SIGNALS)
    test_signals();
#endif
    printf("test_lean: ok\n");
    return 0;
}
#endif
