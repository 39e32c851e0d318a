/* Out of memory at every allocation site in turn: a workload of tasks, a dependency graph
   and a pipeline of nodes runs once per allocation it makes, with that allocation (and
   only that one) failing. Every call returns FSCHED_OK or FSCHED_ERR_OUT_OF_MEMORY, never
   crashes or hangs; what a failed call would have produced is skipped; at the end nothing
   is left allocated, and the scheduler, with memory back, runs tasks as before. The
   allocator is the one every desc takes (the scheduler's, for its stacks too). */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <stdint.h>

typedef struct counting_alloc {
    uint64_t calls;   /* atomic: allocations attempted since armed */
    uint64_t live;    /* atomic: blocks not yet freed */
    uint64_t fail_at; /* fail the allocation with this number (1-based); 0: never */
    int armed;        /* atomic: count (and fail) only between arm and disarm */
} counting_alloc;

static void *counting_alloc_fn(size_t size, size_t align, void *user) {
    counting_alloc *a = (counting_alloc *)user;
    void *p;
    if (LOAD(&a->armed)) {
        uint64_t n = ADD(&a->calls, 1);
        if (n == a->fail_at) return NULL;
    }
    p = fsched__default_alloc(size, align, NULL);
    if (p) ADD(&a->live, 1);
    return p;
}

static void counting_free_fn(void *ptr, size_t size, size_t align, void *user) {
    counting_alloc *a = (counting_alloc *)user;
    if (!ptr) return;
    SUB(&a->live, 1);
    fsched__default_free(ptr, size, align, NULL);
}

static fsched_allocator allocator_of(counting_alloc *a) {
    fsched_allocator al;
    memset(&al, 0, sizeof al);
    al.alloc = counting_alloc_fn;
    al.free = counting_free_fn;
    al.user = a;
    return al;
}

#define CHECK_OK_OR_OOM(expr)                                                             \
    do {                                                                                  \
        fsched_result check_r_ = (expr);                                                  \
        if (check_r_ != FSCHED_OK && check_r_ != FSCHED_ERR_OUT_OF_MEMORY) {              \
            fprintf(stderr, "%s:%d: %s returned %s\n", __FILE__, __LINE__, #expr,         \
                    fsched_result_string(check_r_));                                      \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

/* ---- the workload ---- */

static void count_task(void *arg) { ADD((uint32_t *)arg, 1); }

static int graph_body(fsched_graph_task *self, void *arg) {
    (void)self;
    ADD((uint32_t *)arg, 1);
    return 0;
}

typedef struct source {
    fsched_link *out;
    uint32_t left;
} source;

static int source_can(fsched_node *n, void *user) {
    source *s = (source *)user;
    if (!s->left) return FSCHED_NODE_FINISHED;
    return fsched_node_is_served(n);
}

static void source_advance(fsched_node *n, void *user) {
    source *s = (source *)user;
    fsched_link_envelope(s->out)->size = 0;
    s->left--;
    CHECK_OK(fsched_node_complete(n, 1));
}

static void sink_advance(fsched_node *n, void *user) {
    ADD((uint32_t *)user, 1);
    CHECK_OK(fsched_node_complete(n, 1));
}

/* Tasks in a wait group; returns how many ran (all of those spawned). */
static void tasks_part(fsched_sched *s) {
    fsched_wait_group wg;
    uint32_t ran = 0, spawned = 0, i;
    CHECK_OK(fsched_wait_group_init(&wg));
    for (i = 0; i < 20; i++) {
        fsched_result r = fsched_wait_group_spawn(&wg, s, count_task, &ran);
        CHECK_OK_OR_OOM(r);
        if (r == FSCHED_OK) spawned++;
    }
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_EQ_U64(LOAD(&ran), spawned);
}

/* A graph of a chain and a fan; every task added runs once when the run is OK. */
static void graph_part(fsched_sched *s, counting_alloc *a) {
    fsched_graph_desc gd;
    fsched_graph *g;
    fsched_graph_task *t[12];
    fsched_graph_outcome o;
    uint32_t ran = 0, added = 0, i;
    fsched_result r;
    memset(&gd, 0, sizeof gd);
    gd.allocator = allocator_of(a);
    r = fsched_graph_create(&gd, &g);
    CHECK_OK_OR_OOM(r);
    if (r != FSCHED_OK) return;
    for (i = 0; i < 12; i++) {
        r = fsched_graph_add(g, graph_body, &ran, NULL, &t[added]);
        CHECK_OK_OR_OOM(r);
        if (r != FSCHED_OK) continue;
        if (added) CHECK_OK_OR_OOM(fsched_graph_precede(g, t[added / 2], t[added]));
        added++;
    }
    r = fsched_graph_run(g, s);
    CHECK_OK_OR_OOM(r);
    if (r == FSCHED_OK) {
        r = fsched_graph_wait(g, &o);
        CHECK_OK_OR_OOM(r);
        if (r == FSCHED_OK) CHECK_EQ_U64(LOAD(&ran), added);
    }
    CHECK_OK(fsched_graph_destroy(g));
}

/* source -> hub -> sink; when everything was made and the run is OK, every envelope
   reached the sink. */
static void pipeline_part(fsched_sched *s, counting_alloc *a) {
    fsched_pipeline_desc pd;
    fsched_hub_desc hd;
    fsched_node_desc nd;
    fsched_pipeline *p = NULL;
    fsched_hub *h = NULL;
    fsched_node *src = NULL, *snk = NULL;
    source so;
    uint32_t sunk = 0;
    int complete = 0;
    fsched_result r;
    memset(&so, 0, sizeof so);
    so.left = 10;
    memset(&hd, 0, sizeof hd);
    hd.name = "hub";
    hd.envelopes = 2;
    hd.capacity = 8;
    hd.allocator = allocator_of(a);
    memset(&pd, 0, sizeof pd);
    pd.allocator = allocator_of(a);
    memset(&nd, 0, sizeof nd);
    nd.allocator = allocator_of(a);
    r = fsched_hub_create(&hd, &h);
    CHECK_OK_OR_OOM(r);
    if (r != FSCHED_OK) return;
    r = fsched_pipeline_create(&pd, &p);
    CHECK_OK_OR_OOM(r);
    if (r == FSCHED_OK) {
        nd.label = "source";
        nd.user = &so;
        nd.can_advance = source_can;
        nd.advance = source_advance;
        CHECK_OK_OR_OOM(fsched_node_create(&nd, &src));
        nd.label = "sink";
        nd.user = &sunk;
        nd.can_advance = NULL;
        nd.advance = sink_advance;
        CHECK_OK_OR_OOM(fsched_node_create(&nd, &snk));
        complete = src && snk;
        if (src) {
            r = fsched_node_link(src, h, FSCHED_LINK_PRODUCE, &so.out);
            CHECK_OK_OR_OOM(r);
            complete = complete && r == FSCHED_OK;
            r = fsched_pipeline_add(p, src);
            CHECK_OK_OR_OOM(r);
            if (r == FSCHED_OK) src = NULL; /* the pipeline's now */
            else complete = 0;
        }
        if (snk) {
            r = fsched_node_link(snk, h, FSCHED_LINK_CONSUME, NULL);
            CHECK_OK_OR_OOM(r);
            complete = complete && r == FSCHED_OK;
            r = fsched_pipeline_add(p, snk);
            CHECK_OK_OR_OOM(r);
            if (r == FSCHED_OK) snk = NULL;
            else complete = 0;
        }
        if (complete) {
            r = fsched_pipeline_run(p, s);
            CHECK_OK_OR_OOM(r);
            if (r == FSCHED_OK) CHECK_EQ_U64(LOAD(&sunk), 10);
        }
        CHECK_OK(fsched_pipeline_destroy(p));
    }
    if (src) CHECK_OK(fsched_node_destroy(src));
    if (snk) CHECK_OK(fsched_node_destroy(snk));
    CHECK_OK(fsched_hub_destroy(h));
}

/* Runs the workload with allocation `fail_at` failing (0: none); returns how many
   allocations it made. */
static uint64_t run_workload(counting_alloc *a, uint64_t fail_at) {
    fsched_desc d;
    fsched_sched *s;
    uint32_t ran = 0;
    uint64_t calls;
    memset(a, 0, sizeof *a);
    test_desc_init(&d);
    d.workers = 2;
    d.stack_kind = FSCHED_STACK_HEAP; /* stacks from the allocator too */
    d.stack_size = 32 * 1024;
    d.allocator = allocator_of(a);
    CHECK_OK(fsched_create(&d, &s)); /* creation fails cleanly: see test_sched */
#if !TEST_THREADS
    CHECK_OK(fsched_bind(s));
#endif
    a->fail_at = fail_at;
    STORE(&a->armed, 1);
    tasks_part(s);
    graph_part(s, a);
    pipeline_part(s, a);
    STORE(&a->armed, 0);
    calls = LOAD(&a->calls);
    /* memory back: the scheduler works as before */
    {
        fsched_wait_group wg;
        uint32_t i;
        CHECK_OK(fsched_wait_group_init(&wg));
        for (i = 0; i < 10; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, count_task, &ran));
        CHECK_OK(fsched_wait_group_wait(&wg));
        CHECK_OK(fsched_wait_group_destroy(&wg));
        CHECK_EQ_U64(LOAD(&ran), 10);
    }
#if !TEST_THREADS
    CHECK_OK(fsched_unbind());
#endif
    CHECK_OK(fsched_destroy(s));
    CHECK_EQ_U64(LOAD(&a->live), 0);
    return calls;
}

/* A bound thread whose wait finds no memory for a fiber runs a queued task on its own
   stack: that task is still a task. Its fsched_unbind and fsched_destroy are refused
   (they were taken for the bound thread's own calls, and unbound or destroyed the
   scheduler under the task that ran them). */
typedef struct inline_misuse {
    fsched_sched *s;
    fsched_result unbind, destroy;
    int ran;
} inline_misuse;

static void misuse_task(void *arg) {
    inline_misuse *m = (inline_misuse *)arg;
    m->unbind = fsched_unbind();
    m->destroy = fsched_destroy(m->s);
    m->ran++;
}

/* The counting allocator with every allocation failing while `refuse` is set. */
static int refuse;
static void *refusing_alloc_fn(size_t size, size_t align, void *user) {
    return LOAD(&refuse) ? NULL : counting_alloc_fn(size, align, user);
}

/* A scheduler with `workers` worker threads (0: single-threaded) whose allocator refuses
   while `refuse` is set, fibers included (heap stacks), bound to the calling thread. */
static fsched_sched *bound_refusing_sched(counting_alloc *a, uint32_t workers) {
    fsched_desc d;
    fsched_sched *s;
    test_desc_init(&d);
    d.single_threaded = workers == 0;
    d.workers = workers;
    d.allocator = allocator_of(a);
    d.allocator.alloc = refusing_alloc_fn;
    d.stack_kind = FSCHED_STACK_HEAP; /* fibers from the allocator too */
    CHECK_OK(fsched_create(&d, &s));
    CHECK_OK(fsched_bind(s));
    return s;
}

static void test_unbind_from_an_inline_task(void) {
    counting_alloc a;
    fsched_desc d;
    inline_misuse m;
    memset(&a, 0, sizeof a);
    memset(&m, 0, sizeof m);
    test_desc_init(&d);
    d.single_threaded = 1;
    d.allocator = allocator_of(&a);
    d.allocator.alloc = refusing_alloc_fn;
    d.stack_kind = FSCHED_STACK_HEAP; /* fibers from the allocator too */
    CHECK_OK(fsched_create(&d, &m.s));
    CHECK_OK(fsched_bind(m.s));
    CHECK_OK(fsched_spawn(m.s, misuse_task, &m));
    STORE(&refuse, 1);
    fsched_yield(); /* no fiber to switch to: runs the task here, on the thread's stack */
    STORE(&refuse, 0);
    CHECK(m.ran == 1);
    CHECK_RESULT(m.unbind, FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(m.destroy, FSCHED_ERR_WRONG_STATE);
    CHECK(fsched_current() == m.s); /* still bound */
    CHECK_OK(fsched_unbind());
    CHECK_OK(fsched_destroy(m.s));
    CHECK(LOAD(&a.live) == 0);
}

/* A timed wait inline (no memory for a fiber) runs a task on the thread's stack whose
   own wait finds a fiber (memory came back): the loop runs on that fiber meanwhile, and
   fires the inline wait's timer, which ends that wait without a fiber to resume (it
   queued none: the task's wait resumes the thread's stack). */
static void inline_sleeper(void *arg) {
    STORE(&refuse, 0);
    fsched_sleep_for(20000000); /* on a fiber of its own: the loop runs meanwhile */
    ADD((int *)arg, 1);
}

static void blocker(void *arg) { CHECK_OK(fsched_event_wait((fsched_event *)arg)); }

/* bound_refusing_sched's single-threaded scheduler, whose loop fiber a task blocked on
   `hold` keeps: once `refuse` is set, no wait of the thread has a fiber to switch to. */
static fsched_sched *held_loop_sched(counting_alloc *a, fsched_event *hold) {
    fsched_sched *s = bound_refusing_sched(a, 0);
    CHECK_OK(fsched_event_init(hold, 1, 0));
    fsched_sleep_for(1000); /* the timer heap, and a loop fiber ... */
    CHECK_OK(fsched_spawn(s, blocker, hold));
    fsched_yield(); /* ... which the blocker now holds: none is idle */
    return s;
}

/* Memory again: the blocker ends, then the scheduler; nothing it allocated is left. */
static void held_loop_end(fsched_sched *s, fsched_event *hold, const counting_alloc *a) {
    STORE(&refuse, 0);
    CHECK_OK(fsched_event_set(hold));
    fsched_sleep_for(1000); /* the blocker ends */
    CHECK_OK(fsched_unbind());
    CHECK_OK(fsched_destroy(s));
    CHECK_OK(fsched_event_destroy(hold));
    CHECK(LOAD(&a->live) == 0);
}

static void test_timer_of_an_inline_wait(void) {
    counting_alloc a;
    fsched_sched *s;
    fsched_sema sem;
    fsched_event ev;
    int ran = 0, tries;
    memset(&a, 0, sizeof a);
    s = held_loop_sched(&a, &ev);
    CHECK_OK(fsched_sema_init(&sem, 0));
    CHECK_OK(fsched_spawn(s, inline_sleeper, &ran));
    STORE(&refuse, 1);
    /* again while the wait ran nothing: on a loaded machine or under an emulator its
       1 ms can pass before it looks for the task (which then stays queued) */
    for (tries = 0; LOAD(&ran) == 0 && tries < 100; tries++)
        CHECK_RESULT(fsched_sema_acquire_for(&sem, 1000000), FSCHED_ERR_TIMEOUT);
    CHECK(LOAD(&ran) == 1);
    held_loop_end(s, &ev, &a);
    CHECK_OK(fsched_sema_destroy(&sem));
}

/* A bound thread with no memory for a fiber fires its slot's timers itself: a task that
   sleeps on a fiber of the slot resumes while the thread yields, or waits inline for
   what the task provides after its sleep (the loop, which fires timers, cannot run for
   want of a fiber). */
enum { TIMED_YIELD, TIMED_WAIT };

static void timed_releaser(void *arg) {
    fsched_sleep_for(1000000); /* 1 ms, on the loop fiber: a timer of the slot */
    CHECK_OK(fsched_sema_release((fsched_sema *)arg, 1));
}

static void test_timers_without_memory(int mode) {
    counting_alloc a;
    fsched_sched *s;
    fsched_sema sem;
    uint64_t until;
    memset(&a, 0, sizeof a);
    s = bound_refusing_sched(&a, 0);
    CHECK_OK(fsched_sema_init(&sem, 0));
    fsched_sleep_for(1000); /* the slot's timer heap and one loop fiber, made while memory lasts */
    CHECK_OK(fsched_spawn(s, timed_releaser, &sem));
    fsched_yield(); /* the task runs on the loop fiber, and sleeps */
    STORE(&refuse, 1); /* from now on no fiber for this slot */
    until = fsched_clock_ns() + 2000000000u;
    if (mode == TIMED_YIELD) {
        while (fsched_sema_try_acquire(&sem) != FSCHED_OK && fsched_clock_ns() < until)
            fsched_yield();
        CHECK(fsched_clock_ns() < until);
    } else {
        CHECK_OK(fsched_sema_acquire_for(&sem, 2000000000u));
    }
    STORE(&refuse, 0);
    CHECK_OK(fsched_unbind());
    CHECK_OK(fsched_destroy(s));
    CHECK_OK(fsched_sema_destroy(&sem));
    CHECK(LOAD(&a.live) == 0);
}

/* Tasks run inline, nested on one stack (no memory for a fiber), where the upper one
   waits, untimed, for a mutex that the lower one holds while it sleeps: the lower one
   cannot go on until the upper one returns, so once the lower one's sleep is over the
   upper wait fails for want of memory, rather than wait for ever (it yielded, as if
   another thread could end it). */
typedef struct nested_lockers {
    fsched_mutex m;
    fsched_sema done;
    int locked; /* tasks that took the mutex so far */
    fsched_result results[2];
    int n;
} nested_lockers;

static void nested_locker(void *arg) {
    nested_lockers *nl = (nested_lockers *)arg;
    fsched_result r = fsched_mutex_lock(&nl->m);
    nl->results[nl->n++] = r;
    if (r == FSCHED_OK) {
        /* the holder's timed wait runs the other task inline, above it */
        if (nl->locked++ == 0) fsched_sleep_for(1000000);
        CHECK_OK(fsched_mutex_unlock(&nl->m));
    }
    CHECK_OK(fsched_sema_release(&nl->done, 1));
}

static void test_nested_inline_deadlock(void) {
    counting_alloc a;
    fsched_sched *s;
    fsched_event ev;
    nested_lockers nl;
    memset(&a, 0, sizeof a);
    memset(&nl, 0, sizeof nl);
    s = held_loop_sched(&a, &ev);
    CHECK_OK(fsched_mutex_init(&nl.m));
    CHECK_OK(fsched_sema_init(&nl.done, 0));
    CHECK_OK(fsched_spawn(s, nested_locker, &nl));
    CHECK_OK(fsched_spawn(s, nested_locker, &nl));
    STORE(&refuse, 1);
    CHECK_OK(fsched_sema_acquire_for(&nl.done, 5000000000u)); /* runs them inline */
    CHECK_OK(fsched_sema_acquire_for(&nl.done, 5000000000u));
    CHECK(nl.n == 2);
    CHECK(nl.locked == 1); /* one held it; the other's wait failed */
    CHECK_RESULT(nl.results[0], FSCHED_OK);
    CHECK_RESULT(nl.results[1], FSCHED_ERR_OUT_OF_MEMORY);
    held_loop_end(s, &ev, &a);
    CHECK_OK(fsched_mutex_destroy(&nl.m));
    CHECK_OK(fsched_sema_destroy(&nl.done));
}

/* The same below a yield: a task that yields with no fiber to switch to runs a job
   inline, above it, and that job waits, untimed, for what the yielder gives once its
   yield returns (fuzz_core: a wait for a wait group that counts the yielder). */
typedef struct nested_yield {
    fsched_sema given, done;
    fsched_result result;
} nested_yield;

static void nested_yielder(void *arg) {
    nested_yield *ny = (nested_yield *)arg;
    fsched_yield(); /* runs the taker inline */
    CHECK_OK(fsched_sema_release(&ny->given, 1));
    CHECK_OK(fsched_sema_release(&ny->done, 1));
}

static void nested_taker(void *arg) {
    nested_yield *ny = (nested_yield *)arg;
    ny->result = fsched_sema_acquire(&ny->given);
    CHECK_OK(fsched_sema_release(&ny->done, 1));
}

static void test_nested_inline_above_a_yield(void) {
    counting_alloc a;
    fsched_sched *s;
    fsched_event ev;
    nested_yield ny;
    memset(&a, 0, sizeof a);
    memset(&ny, 0, sizeof ny);
    ny.result = FSCHED_ERR_SYSTEM; /* not run */
    s = held_loop_sched(&a, &ev);
    CHECK_OK(fsched_sema_init(&ny.given, 0));
    CHECK_OK(fsched_sema_init(&ny.done, 0));
    /* the newest job runs first: the yielder, then the taker above it */
    CHECK_OK(fsched_spawn(s, nested_taker, &ny));
    CHECK_OK(fsched_spawn(s, nested_yielder, &ny));
    STORE(&refuse, 1);
    CHECK_OK(fsched_sema_acquire_for(&ny.done, 5000000000u)); /* runs them inline */
    CHECK_OK(fsched_sema_acquire_for(&ny.done, 5000000000u));
    CHECK_RESULT(ny.result, FSCHED_ERR_OUT_OF_MEMORY);
    CHECK_OK(fsched_sema_acquire(&ny.given)); /* the yielder's, which nobody took */
    held_loop_end(s, &ev, &a);
    CHECK_OK(fsched_sema_destroy(&ny.given));
    CHECK_OK(fsched_sema_destroy(&ny.done));
}

#if TEST_THREADS
/* The other side of the rule above: waiters nested inline on one stack, for one event
   that another thread sets, are all woken. The set ends them lowest first; the upper
   ones, seeing a wait below them over, must not give up before the set reaches them. */
#define NESTED_WAITERS 3 /* the nesting bound on a thread's own stack is 4 */

typedef struct nested_waiters {
    fsched_event ev;
    fsched_sema done;
    fsched_result results[NESTED_WAITERS];
    int n;
} nested_waiters;

static void nested_waiter(void *arg) {
    nested_waiters *nw = (nested_waiters *)arg;
    int i = nw->n++;
    nw->results[i] = fsched_event_wait(&nw->ev); /* runs the next one inline, above */
    CHECK_OK(fsched_sema_release(&nw->done, 1));
}

static void delayed_setter(void *arg) {
    fsched_event *ev = (fsched_event *)arg;
    uint64_t until = fsched_clock_ns() + 5000000u;
    while (fsched_clock_ns() < until) {
    }
    CHECK_OK(fsched_event_set(ev));
}

static void test_nested_inline_wake_all(void) {
    counting_alloc a;
    fsched_sched *s;
    fsched_event block;
    nested_waiters nw;
    test_thread setter;
    unsigned round, rounds = test_rounds(200), i;
    memset(&a, 0, sizeof a);
    s = held_loop_sched(&a, &block);
    for (round = 0; round < rounds; round++) {
        memset(&nw, 0, sizeof nw);
        CHECK_OK(fsched_event_init(&nw.ev, 1, 0));
        CHECK_OK(fsched_sema_init(&nw.done, 0));
        for (i = 0; i < NESTED_WAITERS; i++) CHECK_OK(fsched_spawn(s, nested_waiter, &nw));
        STORE(&refuse, 1);
        setter = thread_run(delayed_setter, &nw.ev);
        for (i = 0; i < NESTED_WAITERS; i++) /* runs them inline, nested */
            CHECK_OK(fsched_sema_acquire_for(&nw.done, 5000000000u));
        thread_join(setter);
        STORE(&refuse, 0);
        CHECK(nw.n == NESTED_WAITERS);
        for (i = 0; i < NESTED_WAITERS; i++) CHECK_OK(nw.results[i]);
        CHECK_OK(fsched_event_destroy(&nw.ev));
        CHECK_OK(fsched_sema_destroy(&nw.done));
    }
    held_loop_end(s, &block, &a);
}
#endif

#if TEST_THREADS
/* A bound thread with no memory for a fiber still resumes the task fibers of its slot
   that other threads woke. They wait in the slot's inbox, which the scheduling loop
   empties; a thread that can have no loop fiber must empty it itself, whether it yields,
   sleeps, or waits inline for what such a task provides. */
enum { STRANDED_YIELD, STRANDED_SLEEP, STRANDED_WAIT };

typedef struct stranded {
    int mode;
    fsched_sema task_sem;  /* the task, on a fiber of the bound slot, waits for it */
    fsched_sema bound_sem; /* STRANDED_WAIT: the bound thread waits for the task on it */
    int holder_started, go, holder_done; /* atomic */
    int task_slot, task_done;            /* atomic */
} stranded;

/* Keeps the only worker thread (never yielding) until told, then wakes the task from
   there: the task's fiber goes to the bound slot's inbox. STRANDED_WAIT: only once the
   bound thread waits. */
static void stranded_holder(void *arg) {
    stranded *st = (stranded *)arg;
    STORE(&st->holder_started, 1);
    while (!LOAD(&st->go)) fsched__os_sleep(50000);
    if (st->mode == STRANDED_WAIT)
        while (LOAD(&st->bound_sem.waiters.count) == 0) fsched__os_sleep(50000);
    CHECK_OK(fsched_sema_release(&st->task_sem, 1));
    STORE(&st->holder_done, 1);
}

static void stranded_task(void *arg) {
    stranded *st = (stranded *)arg;
    STORE(&st->task_slot, fsched_worker_index());
    CHECK_OK(fsched_sema_acquire(&st->task_sem));
    if (st->mode == STRANDED_WAIT) CHECK_OK(fsched_sema_release(&st->bound_sem, 1));
    STORE(&st->task_done, 1);
}

static void test_woken_fibers_without_memory(int mode) {
    counting_alloc a;
    fsched_sched *s;
    stranded st;
    uint64_t until;
    memset(&a, 0, sizeof a);
    memset(&st, 0, sizeof st);
    st.mode = mode;
    s = bound_refusing_sched(&a, 1);
    CHECK_OK(fsched_sema_init(&st.task_sem, 0));
    CHECK_OK(fsched_sema_init(&st.bound_sem, 0));
    fsched_sleep_for(1000); /* the slot's timer heap and one loop fiber, made while memory lasts */
    CHECK_OK(fsched_spawn(s, stranded_holder, &st));
    while (!LOAD(&st.holder_started)) fsched__os_sleep(50000); /* the worker took it */
    CHECK_OK(fsched_spawn(s, stranded_task, &st));
    fsched_yield(); /* the worker being held, the task runs here, on the loop fiber, and waits */
    CHECK(LOAD(&st.task_slot) >= 1 && !LOAD(&st.task_done));
    STORE(&refuse, 1); /* from now on no fiber for this slot */
    STORE(&st.go, 1);
    until = fsched_clock_ns() + 2000000000u;
    switch (mode) {
    case STRANDED_YIELD:
        while (!LOAD(&st.task_done) && fsched_clock_ns() < until) fsched_yield();
        break;
    case STRANDED_SLEEP: /* the fiber is in the inbox before the first sleep begins */
        while (!LOAD(&st.holder_done)) fsched__os_sleep(50000);
        while (!LOAD(&st.task_done) && fsched_clock_ns() < until) fsched_sleep_for(100000);
        break;
    default: /* woken while this thread waits inline, for what the task releases */
        CHECK_OK(fsched_sema_acquire_for(&st.bound_sem, 2000000000u));
        break;
    }
    CHECK(LOAD(&st.task_done));
    STORE(&refuse, 0);
    while (!LOAD(&st.holder_done)) fsched__os_sleep(50000);
    CHECK_OK(fsched_unbind());
    CHECK_OK(fsched_destroy(s));
    CHECK_OK(fsched_sema_destroy(&st.task_sem));
    CHECK_OK(fsched_sema_destroy(&st.bound_sem));
    CHECK(LOAD(&a.live) == 0);
}
#endif

int main(void) {
    counting_alloc a;
    uint64_t k, total;
    test_watchdog(600);
    test_unbind_from_an_inline_task();
    test_timer_of_an_inline_wait();
    test_timers_without_memory(TIMED_YIELD);
    test_timers_without_memory(TIMED_WAIT);
    test_nested_inline_deadlock();
    test_nested_inline_above_a_yield();
#if TEST_THREADS
    test_nested_inline_wake_all();
    test_woken_fibers_without_memory(STRANDED_YIELD);
    test_woken_fibers_without_memory(STRANDED_SLEEP);
    test_woken_fibers_without_memory(STRANDED_WAIT);
#endif
    total = run_workload(&a, 0);
    CHECK(total > 0);
    /* with more workers, allocations may differ from run to run: go until a run makes
       no more than the failure's number */
    for (k = 1; k <= total + 64; k++) {
        uint64_t calls = run_workload(&a, k);
        if (calls < k) break;
    }
    printf("test_alloc: ok (%llu allocations, each failed in turn)\n", (unsigned long long)total);
    return 0;
}
