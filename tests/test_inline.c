/* Waits without memory for a fiber (inline waits), driven as a hostile program would: a
   bound thread whose allocator refuses runs tasks nested on its own stack, each waiting
   on something of its own. A wake-all given in one hold of its list's lock ends every
   nested waiter with FSCHED_OK; a nested wait whose task cannot go on until a caller
   below it returns, and that may wait for what that caller gives, ends (for want of
   memory) instead of hanging; a failed wait leaves the primitives as it found them. */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <stdint.h>

/* ---- the scheduler: a bound thread whose allocator refuses on demand ---- */

static uint64_t live_blocks; /* atomic */
static int refuse;           /* atomic: every allocation fails while set */

static void *refusing_alloc(size_t size, size_t align, void *user) {
    void *p;
    (void)user;
    if (LOAD(&refuse)) return NULL;
    p = fsched__default_alloc(size, align, NULL);
    if (p) ADD(&live_blocks, 1);
    return p;
}

static void counted_free(void *ptr, size_t size, size_t align, void *user) {
    (void)user;
    if (!ptr) return;
    SUB(&live_blocks, 1);
    fsched__default_free(ptr, size, align, NULL);
}

static void blocker(void *arg) { CHECK_OK(fsched_event_wait((fsched_event *)arg)); }

/* A scheduler bound to the calling thread, with `workers` worker threads, whose fibers
   come from the refusing allocator; its loop fiber is held by a blocked task, so that
   once `refuse` is set no wait of the bound thread has a fiber to switch to. */
typedef struct rig {
    fsched_sched *s;
    fsched_event hold;
} rig;

static void rig_up(rig *r, uint32_t workers) {
    fsched_desc d;
    test_desc_init(&d);
    d.single_threaded = workers == 0;
    d.workers = workers;
    d.allocator.alloc = refusing_alloc;
    d.allocator.free = counted_free;
    d.stack_kind = FSCHED_STACK_HEAP;
    CHECK_OK(fsched_create(&d, &r->s));
    CHECK_OK(fsched_bind(r->s));
    CHECK_OK(fsched_event_init(&r->hold, 1, 0));
    fsched_sleep_for(1000); /* the timer heap, and a loop fiber ... */
    CHECK_OK(fsched_spawn(r->s, blocker, &r->hold));
    fsched_yield(); /* ... which the blocker now holds: none is idle */
}

static void rig_down(rig *r) {
    STORE(&refuse, 0);
    CHECK_OK(fsched_event_set(&r->hold));
    fsched_sleep_for(1000); /* the blocker ends */
    CHECK_OK(fsched_unbind());
    CHECK_OK(fsched_destroy(r->s));
    CHECK_OK(fsched_event_destroy(&r->hold));
    CHECK(LOAD(&live_blocks) == 0);
}

/* Spins about ns nanoseconds without yielding. */
static void spin_for(uint64_t ns) {
    uint64_t until = fsched_clock_ns() + ns;
    while (fsched_clock_ns() < until) {
    }
}

#if TEST_THREADS

/* ---- wake-alls reach every nested waiter ---- */

#define NESTED 3 /* the nesting bound on a thread's own stack is 4 */

enum { BY_EVENT, BY_SEMA, BY_GROUP, BY_COND, BY_COND_FOR, BY_KINDS };
static const char *const by_name[BY_KINDS] = {"event", "sema", "group", "cond", "cond_for"};

typedef struct nested {
    int kind;
    fsched_event ev;
    fsched_sema sem;
    fsched_wait_group wg;
    fsched_mutex m;
    fsched_cond c;
    int go;        /* BY_COND: the predicate, under m */
    int waiting;   /* atomic: waiters that began their wait */
    fsched_sema done;
    fsched_result results[NESTED];
    int n;
} nested;

static void nested_waiter(void *arg) {
    nested *nw = (nested *)arg;
    int i = nw->n++;
    fsched_result r = FSCHED_OK;
    switch (nw->kind) {
    case BY_EVENT:
        ADD(&nw->waiting, 1);
        r = fsched_event_wait(&nw->ev); /* runs the next one inline, above */
        break;
    case BY_SEMA:
        ADD(&nw->waiting, 1);
        r = fsched_sema_acquire(&nw->sem);
        break;
    case BY_GROUP:
        ADD(&nw->waiting, 1);
        r = fsched_wait_group_wait(&nw->wg);
        break;
    default:
        CHECK_OK(fsched_mutex_lock(&nw->m));
        ADD(&nw->waiting, 1);
        while (!nw->go) {
            r = nw->kind == BY_COND ? fsched_cond_wait(&nw->c, &nw->m)
                                    : fsched_cond_wait_for(&nw->c, &nw->m, 5000000000u);
            if (r != FSCHED_OK) break;
        }
        if (r == FSCHED_OK) CHECK_OK(fsched_mutex_unlock(&nw->m));
        break;
    }
    nw->results[i] = r;
    CHECK_OK(fsched_sema_release(&nw->done, 1));
}

/* From a plain thread: once every waiter waits, wakes them all in one call. */
static void waker(void *arg) {
    nested *nw = (nested *)arg;
    while (LOAD(&nw->waiting) < NESTED) fsched__os_sleep(100000);
    spin_for(2000000); /* the top one finds nothing to run and looks below */
    switch (nw->kind) {
    case BY_EVENT: CHECK_OK(fsched_event_set(&nw->ev)); break;
    case BY_SEMA: CHECK_OK(fsched_sema_release(&nw->sem, NESTED)); break;
    case BY_GROUP: CHECK_OK(fsched_wait_group_done(&nw->wg)); break;
    default: /* the usual way: under the mutex, which it keeps a while */
        CHECK_OK(fsched_mutex_lock(&nw->m));
        nw->go = 1;
        CHECK_OK(fsched_cond_broadcast(&nw->c));
        spin_for(2000000);
        CHECK_OK(fsched_mutex_unlock(&nw->m));
        break;
    }
}

static void test_nested_wake_all(int kind, unsigned rounds) {
    rig r;
    nested nw;
    unsigned round, i;
    rig_up(&r, 0);
    for (round = 0; round < rounds; round++) {
        test_thread t;
        memset(&nw, 0, sizeof nw);
        nw.kind = kind;
        CHECK_OK(fsched_event_init(&nw.ev, 1, 0));
        CHECK_OK(fsched_sema_init(&nw.sem, 0));
        CHECK_OK(fsched_wait_group_init(&nw.wg));
        if (kind == BY_GROUP) CHECK_OK(fsched_wait_group_add(&nw.wg, 1));
        CHECK_OK(fsched_mutex_init(&nw.m));
        CHECK_OK(fsched_cond_init(&nw.c));
        CHECK_OK(fsched_sema_init(&nw.done, 0));
        for (i = 0; i < NESTED; i++) CHECK_OK(fsched_spawn(r.s, nested_waiter, &nw));
        STORE(&refuse, 1);
        t = thread_run(waker, &nw);
        for (i = 0; i < NESTED; i++) /* runs them inline, nested */
            CHECK_OK(fsched_sema_acquire_for(&nw.done, 10000000000u));
        thread_join(t);
        STORE(&refuse, 0);
        CHECK(nw.n == NESTED);
        for (i = 0; i < NESTED; i++) {
            if (nw.results[i] != FSCHED_OK)
                fprintf(stderr, "test_inline: %s, round %u, waiter %u: %s\n", by_name[kind],
                        round, i, fsched_result_string(nw.results[i]));
        }
        for (i = 0; i < NESTED; i++) CHECK_OK(nw.results[i]);
        CHECK_OK(fsched_event_destroy(&nw.ev));
        CHECK_OK(fsched_sema_destroy(&nw.sem));
        CHECK_OK(fsched_wait_group_destroy(&nw.wg));
        CHECK_OK(fsched_mutex_destroy(&nw.m));
        CHECK_OK(fsched_cond_destroy(&nw.c));
        CHECK_OK(fsched_sema_destroy(&nw.done));
    }
    rig_down(&r);
}
/* ---- a condition variable's wait that fails inline: who holds the mutex ----
   fsched_cond_wait takes the mutex back after its wait, also after a timeout. When it
   cannot (it would wait for ever above a caller that could go on: out of memory), or
   when its wait itself gave up for want of memory, it returns FSCHED_ERR_OUT_OF_MEMORY
   without the mutex; any other result, with it. */
enum { RELOCK_AFTER_TIMEOUT, GIVE_UP_FREE_MUTEX };

typedef struct relock {
    int mode;
    uint64_t unit; /* ns: the timed-out wait's timeout; the sleep below and the hold scale */
    fsched_mutex m;
    fsched_cond c;
    int t_waiting, p_inside, p_done; /* atomic */
    fsched_sema done;
    fsched_result result;
} relock;

/* A plain thread that takes the mutex once the task's wait released it, and keeps it. */
static void relock_holder(void *arg) {
    relock *x = (relock *)arg;
    while (!LOAD(&x->t_waiting)) fsched__os_sleep(50000);
    CHECK_OK(fsched_mutex_lock(&x->m));
    STORE(&x->p_inside, 1);
    spin_for(30 * x->unit);
    STORE(&x->p_inside, 0);
    CHECK_OK(fsched_mutex_unlock(&x->m));
    STORE(&x->p_done, 1);
}

static void relock_waiter(void *arg) {
    relock *x = (relock *)arg;
    CHECK_OK(fsched_mutex_lock(&x->m));
    STORE(&x->t_waiting, 1);
    x->result = fsched_cond_wait_for(&x->c, &x->m, x->mode == RELOCK_AFTER_TIMEOUT
                                                       ? x->unit : 2000000000u);
    if (x->result != FSCHED_ERR_OUT_OF_MEMORY) { /* it holds the mutex, alone */
        CHECK(!LOAD(&x->p_inside));
        CHECK_OK(fsched_mutex_unlock(&x->m));
    }
    CHECK_OK(fsched_sema_release(&x->done, 1));
}

/* Below the waiter: a sleep that runs it inline, over before (or after) its wait. */
static void relock_sleeper(void *arg) {
    relock *x = (relock *)arg;
    fsched_sleep_for(x->mode == RELOCK_AFTER_TIMEOUT ? 5 * x->unit : 1000000u);
    CHECK_OK(fsched_sema_release(&x->done, 1));
}

/* One round; the waiter's result. A timed-out waiter's relock gives up only if the
   plain thread took the mutex before the timeout: else the relock took it first, and the
   waiter held it alone (checked), which a later round with a longer timeout retries. */
static fsched_result cond_relock_round(int mode, uint64_t unit) {
    rig r;
    relock x;
    test_thread p;
    memset(&x, 0, sizeof x);
    memset(&p, 0, sizeof p);
    x.mode = mode;
    x.unit = unit;
    rig_up(&r, 0);
    CHECK_OK(fsched_mutex_init(&x.m));
    CHECK_OK(fsched_cond_init(&x.c));
    CHECK_OK(fsched_sema_init(&x.done, 0));
    if (mode == RELOCK_AFTER_TIMEOUT) p = thread_run(relock_holder, &x);
    CHECK_OK(fsched_spawn(r.s, relock_waiter, &x));
    CHECK_OK(fsched_spawn(r.s, relock_sleeper, &x)); /* the newest runs first */
    STORE(&refuse, 1);
    CHECK_OK(fsched_sema_acquire_for(&x.done, 10000000000u)); /* runs them inline */
    CHECK_OK(fsched_sema_acquire_for(&x.done, 10000000000u));
    STORE(&refuse, 0);
    if (mode == RELOCK_AFTER_TIMEOUT) thread_join(p);
    CHECK_OK(fsched_mutex_try_lock(&x.m)); /* nobody kept it */
    CHECK_OK(fsched_mutex_unlock(&x.m));
    CHECK_OK(fsched_mutex_destroy(&x.m));
    CHECK_OK(fsched_cond_destroy(&x.c));
    CHECK_OK(fsched_sema_destroy(&x.done));
    rig_down(&r);
    return x.result;
}

static void test_cond_relock_without_memory(int mode) {
    uint64_t unit = 1000000u;
    fsched_result r = cond_relock_round(mode, unit);
    while (mode == RELOCK_AFTER_TIMEOUT && r == FSCHED_ERR_TIMEOUT && unit < 64000000u)
        r = cond_relock_round(mode, unit *= 2); /* the thread came late: more time */
    /* the wait gave up: a caller below it could go on */
    CHECK_RESULT(r, FSCHED_ERR_OUT_OF_MEMORY);
}
#endif

/* ---- deadlocks nested inline that must end ----
   A lower task L takes the mutex (and is counted by the group), then waits inline with a
   timeout that expires: it runs the upper task T on its stack, whose wait would need L
   to go on. T's wait ends with FSCHED_ERR_OUT_OF_MEMORY once L's is over; L then goes on.
   DL_JOIN_STOLEN: T's join computes long enough for a worker thread to ask for its
   second half; the half stays on T's thread, where its wait can give up (taken, it waited
   inline on the worker, with nothing below it, while T's join waited for it for ever). */
enum { DL_LOCK, DL_LOCK_FOR_FOREVER, DL_GROUP, DL_JOIN, DL_JOIN_STOLEN, DL_KINDS };

typedef struct deadlock {
    int kind;
    fsched_mutex m;
    fsched_event never;
    fsched_wait_group wg;
    fsched_sema done;
    fsched_result upper, join_b;
    int lower_went_on;
    int occupied, go; /* atomic: DL_JOIN_STOLEN's worker thread is kept busy until T's join */
} deadlock;

/* Keeps the worker thread from taking T or L: it spins until T's join has begun. */
static void occupier(void *arg) {
    deadlock *x = (deadlock *)arg;
    STORE(&x->occupied, 1);
    while (!LOAD(&x->go)) {
    }
}

static void join_nothing(void *arg) { (void)arg; }

static void join_spin(void *arg) {
    STORE(&((deadlock *)arg)->go, 1); /* the worker thread goes idle, and asks for work */
    spin_for(20000000);
}

static void join_locker(void *arg) {
    deadlock *x = (deadlock *)arg;
    x->join_b = fsched_mutex_lock(&x->m);
    if (x->join_b == FSCHED_OK) CHECK_OK(fsched_mutex_unlock(&x->m));
}

static void dl_upper(void *arg) {
    deadlock *x = (deadlock *)arg;
    switch (x->kind) {
    case DL_LOCK: x->upper = fsched_mutex_lock(&x->m); break;
    case DL_LOCK_FOR_FOREVER: x->upper = fsched_mutex_lock_for(&x->m, FSCHED_FOREVER); break;
    case DL_GROUP: x->upper = fsched_wait_group_wait(&x->wg); break;
    default: /* a join whose second half waits for the mutex */
        x->upper = fsched_join(x->kind == DL_JOIN ? join_nothing : join_spin, x, join_locker, x);
        CHECK_RESULT(x->join_b, FSCHED_ERR_OUT_OF_MEMORY);
        break;
    }
    if ((x->kind == DL_LOCK || x->kind == DL_LOCK_FOR_FOREVER) && x->upper == FSCHED_OK)
        CHECK_OK(fsched_mutex_unlock(&x->m));
    CHECK_OK(fsched_sema_release(&x->done, 1));
}

static void dl_lower(void *arg) {
    deadlock *x = (deadlock *)arg;
    CHECK_OK(fsched_mutex_lock(&x->m));
    /* times out; runs the upper task inline meanwhile */
    CHECK_RESULT(fsched_event_wait_for(&x->never, 1000000u), FSCHED_ERR_TIMEOUT);
    x->lower_went_on = 1;
    CHECK_OK(fsched_mutex_unlock(&x->m));
    CHECK_OK(fsched_sema_release(&x->done, 1));
}

static void test_nested_deadlock_ends(int kind) {
    rig r;
    deadlock x;
    memset(&x, 0, sizeof x);
    x.kind = kind;
    x.upper = x.join_b = FSCHED_ERR_SYSTEM; /* not run */
    rig_up(&r, kind == DL_JOIN_STOLEN); /* with a worker thread, to ask for the half */
    CHECK_OK(fsched_mutex_init(&x.m));
    CHECK_OK(fsched_event_init(&x.never, 1, 0));
    CHECK_OK(fsched_wait_group_init(&x.wg));
    CHECK_OK(fsched_sema_init(&x.done, 0));
    if (kind == DL_JOIN_STOLEN) {
        CHECK_OK(fsched_spawn(r.s, occupier, &x));
        while (!LOAD(&x.occupied)) {
        }
    }
    CHECK_OK(fsched_spawn(r.s, dl_upper, &x));
    CHECK_OK(fsched_wait_group_spawn(&x.wg, r.s, dl_lower, &x)); /* the newest runs first */
    STORE(&refuse, 1);
    CHECK_OK(fsched_sema_acquire_for(&x.done, 10000000000u)); /* runs them inline */
    CHECK_OK(fsched_sema_acquire_for(&x.done, 10000000000u));
    STORE(&refuse, 0);
    CHECK(x.lower_went_on);
    if (kind >= DL_JOIN) CHECK_OK(x.upper); /* its half that waited failed instead */
    else CHECK_RESULT(x.upper, FSCHED_ERR_OUT_OF_MEMORY);
    CHECK_OK(fsched_wait_group_wait(&x.wg));
    CHECK_OK(fsched_mutex_destroy(&x.m));
    CHECK_OK(fsched_event_destroy(&x.never));
    CHECK_OK(fsched_wait_group_destroy(&x.wg));
    CHECK_OK(fsched_sema_destroy(&x.done));
    rig_down(&r);
}

/* ---- timeouts at the edges, inline ---- */
static void edge_timeouts(void *arg) {
    fsched_event ev;
    fsched_sema sem;
    (void)arg;
    CHECK_OK(fsched_event_init(&ev, 0, 0));
    CHECK_OK(fsched_sema_init(&sem, 0));
    CHECK_RESULT(fsched_event_wait_for(&ev, 0), FSCHED_ERR_TIMEOUT);
    CHECK_RESULT(fsched_event_wait_for(&ev, 1), FSCHED_ERR_TIMEOUT);
    CHECK_RESULT(fsched_sema_acquire_for(&sem, 1), FSCHED_ERR_TIMEOUT);
    fsched_sleep_for(1);
    CHECK_OK(fsched_event_destroy(&ev));
    CHECK_OK(fsched_sema_destroy(&sem));
    ADD((int *)arg, 1);
}

/* Above a yield (a caller that can go on at once), a wait for ever gives up. */
static void forever_above_a_yield(void *arg) {
    fsched_sema sem;
    CHECK_OK(fsched_sema_init(&sem, 0));
    CHECK_RESULT(fsched_sema_acquire_for(&sem, FSCHED_FOREVER), FSCHED_ERR_OUT_OF_MEMORY);
#if TEST_THREADS /* (without threads a timed inline wait has no such rule: it sleeps) */
    fsched_sleep_for(FSCHED_FOREVER); /* gives up as well: returns */
#endif
    CHECK_OK(fsched_sema_destroy(&sem));
    ADD((int *)arg, 1);
}

static void test_edge_timeouts(void) {
    rig r;
    int ran = 0;
    rig_up(&r, 0);
    CHECK_OK(fsched_spawn(r.s, edge_timeouts, &ran));
    STORE(&refuse, 1);
    fsched_yield(); /* runs it inline */
    CHECK_OK(fsched_spawn(r.s, forever_above_a_yield, &ran));
    fsched_yield();
    STORE(&refuse, 0);
    CHECK(ran == 2);
    rig_down(&r);
}

int main(void) {
    test_watchdog(600);
#if TEST_THREADS
    {
        int kind;
        for (kind = 0; kind < BY_KINDS; kind++) test_nested_wake_all(kind, test_rounds(20));
    }
    test_cond_relock_without_memory(RELOCK_AFTER_TIMEOUT);
    test_cond_relock_without_memory(GIVE_UP_FREE_MUTEX);
#endif
    {
        int kind;
        for (kind = 0; kind < DL_KINDS; kind++)
            if (TEST_THREADS || kind != DL_JOIN_STOLEN) test_nested_deadlock_ends(kind);
    }
    test_edge_timeouts();
    printf("test_inline: ok\n");
    return 0;
}
