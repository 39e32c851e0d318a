/* fsched_join across a program's units: the implementation in a unit of its own
   (impl.c), this unit and a C++ one (cpp.cpp) on the inline path, and one that asks for
   the plain call (call.c), their joins nested in one another. The inline path reads the
   calling thread's ring from the implementation's thread-local state: the checks below
   hold it to the call's behaviour where that state changes (a worker's hooks, a poll
   hook, binding and unbinding) and where the path gives way to the call (a half another
   worker took, a full ring). */
#define _DEFAULT_SOURCE 1 /* check.h: MAP_ANONYMOUS */
#include "fibersched.h"

#include <stdint.h>
#include <string.h>

#include "../check.h"
#include "units.h"

#if (defined(__GNUC__) || defined(__clang__)) && defined(__ELF__) &&                        \
    !defined(FIBERSCHED_NO_INLINE_JOIN) && !defined(FSCHED__JOIN_INLINE)
#error "this unit should take fsched_join's inline path"
#endif

static long fib_known(int n) {
    long a = 0, b = 1;
    while (n-- > 0) {
        long t = a + b;
        a = b;
        b = t;
    }
    return a;
}

void units_fib_inline(void *p) {
    units_fib *f = (units_fib *)p;
#if defined(JOIN_UNITS_CPP)
    if (f->n % 3 == 0) {
        UNITS_FIB(f, units_fib_cpp, units_fib_call);
        return;
    }
#endif
    UNITS_FIB(f, units_fib_inline, units_fib_call);
}

/* Whether the inline path would queue on the calling thread's ring: a worker thread's,
   not where a join must go to the call (outside every scheduler, in a hook, on a bound
   thread, whose own calls are counted). Without the inline path (other targets), what
   the thread's state would say. */
static int has_join_ring(void) {
#if defined(FSCHED__JOIN_RING)
    return fsched__join_ring != NULL;
#else
    return fsched_current() != NULL && fsched_worker_index() < (int)fsched_worker_count(fsched_current());
#endif
}

static fsched_sched *make_sched(uint32_t workers) {
    fsched_sched *s = NULL;
    fsched_desc d;
    memset(&d, 0, sizeof d);
    d.workers = workers;
    CHECK_OK(fsched_create(&d, &s));
    return s;
}

static void run_in_task(fsched_sched *s, void (*fn)(void *), void *arg) {
    fsched_wait_group wg;
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, fn, arg));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

/* ---- the units' joins nested in one another, halves taken by the other worker ---- */

static void test_units_mixed(void) {
    fsched_sched *s = make_sched(2);
    int round;
    CHECK(!units_join_is_inline_here()); /* call.c asked for the call */
    for (round = 0; round < 60; round++) {
        units_fib f;
        f.n = 16 + round % 8;
        f.r = -1;
        run_in_task(s, units_fib_inline, &f);
        CHECK_OK(f.status);
        CHECK_EQ_U64(f.r, fib_known(f.n));
    }
    CHECK_OK(fsched_destroy(s));
}

/* ---- a half another worker took: the inline path's end waits for it ---- */

typedef struct taken {
    int joiner;        /* the joiner's worker */
    int ran_on;        /* where b ran */
    int b_done;        /* b has run (atomic) */
    int nested_rounds; /* joins a made while it waited */
} taken;

static void taken_b(void *p) {
    taken *t = (taken *)p;
    t->ran_on = fsched_worker_index();
    __atomic_store_n(&t->b_done, 1, __ATOMIC_RELEASE); /* release: ran_on before it */
}

static void nothing(void *p) { (void)p; }

/* Joins (on the inline path) until the other worker has taken b and run it: its pushes
   answer the other worker's request by sharing the oldest private job, which is b. */
static void taken_a(void *p) {
    taken *t = (taken *)p;
    while (!__atomic_load_n(&t->b_done, __ATOMIC_ACQUIRE)) { /* acquire: ran_on */
        CHECK_OK(fsched_join(nothing, NULL, nothing, NULL));
        t->nested_rounds++;
    }
}

static void taken_joiner(void *p) {
    taken *t = (taken *)p;
    t->joiner = fsched_worker_index();
    CHECK_OK(fsched_join(taken_a, t, taken_b, t));
    CHECK(__atomic_load_n(&t->b_done, __ATOMIC_ACQUIRE));
}

static void test_taken_half(void) {
    fsched_sched *s = make_sched(2);
    int round;
    for (round = 0; round < 200; round++) {
        taken t;
        memset(&t, 0, sizeof t);
        run_in_task(s, taken_joiner, &t);
        CHECK(t.ran_on != t.joiner); /* a never returns before another worker ran b */
        CHECK(t.ran_on >= 0);
    }
    CHECK_OK(fsched_destroy(s));
}

/* ---- more nested joins than the ring holds: the path gives way to the call ---- */

typedef struct chain {
    int depth;
    long *visits;
} chain;

static void chain_leaf(void *p) { ++*(long *)p; }

static void chain_link(void *p) {
    chain *c = (chain *)p, next;
    if (c->depth == 0) return;
    next.depth = c->depth - 1;
    next.visits = c->visits;
    CHECK_OK(fsched_join(chain_link, &next, chain_leaf, c->visits));
}

static void test_deeper_than_ring(void) {
    fsched_sched *s = make_sched(1);
    long visits = 0;
    chain c;
    c.depth = 3 * (int)FSCHED__RING_SIZE + 5;
    c.visits = &visits;
    run_in_task(s, chain_link, &c);
    CHECK_EQ_U64(visits, c.depth);
    CHECK_OK(fsched_destroy(s));
}

/* ---- where the thread's state changes ---- */

typedef struct where {
    fsched_sched *s;
    fsched_sched *a_ran_in; /* fsched_current() in a */
    int a_runs, b_runs;
} where;

static void where_a(void *p) {
    where *w = (where *)p;
    w->a_ran_in = fsched_current();
    w->a_runs++;
}

static void where_b(void *p) { ((where *)p)->b_runs++; }

/* A bound thread joins on its slot's ring; unbound, the same thread's join runs on the
   default scheduler, not on the ring of the slot it left. */
static void test_bound_then_unbound(void) {
    fsched_sched *s = make_sched(1);
    where w;
    memset(&w, 0, sizeof w);
    CHECK(!has_join_ring());
    CHECK_OK(fsched_bind(s));
    CHECK(!has_join_ring()); /* a bound thread's joins take the call */
    CHECK_OK(fsched_join(where_a, &w, where_b, &w));
    CHECK(w.a_ran_in == s);
    CHECK_OK(fsched_unbind());
    CHECK(!has_join_ring());
    w.a_ran_in = NULL;
    CHECK_OK(fsched_join(where_a, &w, where_b, &w));
    CHECK(w.a_ran_in != NULL && w.a_ran_in != s); /* a task of the default scheduler */
    CHECK(w.a_runs == 2 && w.b_runs == 2);
    CHECK_OK(fsched_destroy(s));
}

/* A bound thread's own fork-join calls keep it on its slot: fsched_unbind and
   fsched_destroy inside one are refused (the call's records on the thread's stack are
   queued there), and work again after it. */
typedef struct leaving {
    fsched_sched *s;
    fsched_result unbind, destroy;
    int b_runs;
} leaving;

static void leave_inside(void *p) {
    leaving *l = (leaving *)p;
    l->unbind = fsched_unbind();
    l->destroy = fsched_destroy(l->s);
}

/* both halves of a join may run it at once; relaxed: read after the join */
static void leave_b(void *p) { __atomic_fetch_add(&((leaving *)p)->b_runs, 1, __ATOMIC_RELAXED); }

static void leave_in_body(void *ctx, size_t lo, size_t hi) {
    (void)lo;
    (void)hi;
    leave_inside(ctx);
}

static void test_unbind_inside_calls(void) {
    int round;
    for (round = 0; round < 2; round++) {
        leaving l;
        memset(&l, 0, sizeof l);
        l.s = make_sched(1);
        CHECK_OK(fsched_bind(l.s));
        if (round == 0) {
            CHECK_OK(fsched_join(leave_inside, &l, leave_b, &l));
            CHECK(l.b_runs == 1);
        } else {
            CHECK_OK(fsched_parallel_for(0, 1, 1, leave_in_body, &l));
        }
        CHECK_RESULT(l.unbind, FSCHED_ERR_WRONG_STATE);
        CHECK_RESULT(l.destroy, FSCHED_ERR_WRONG_STATE);
        CHECK(fsched_current() == l.s); /* still bound */
        CHECK_OK(fsched_join(leave_b, &l, leave_b, &l)); /* and joins on its slot */
        CHECK_OK(fsched_unbind());
        CHECK_OK(fsched_destroy(l.s));
    }
}

typedef struct hooked {
    where w;
    fsched_result in_start, in_poll;
    int ring_in_start, ring_in_poll; /* has_join_ring() there */
    int start_calls, poll_calls; /* atomic */
} hooked;

static void start_hook(void *user, uint32_t worker) {
    hooked *h = (hooked *)user;
    (void)worker;
    h->ring_in_start = has_join_ring();
    h->in_start = fsched_join(where_a, &h->w, where_b, &h->w);
    __atomic_store_n(&h->start_calls, 1, __ATOMIC_RELEASE); /* release: in_start */
}

static int poll_hook(void *user) {
    hooked *h = (hooked *)user;
    if (__atomic_load_n(&h->poll_calls, __ATOMIC_RELAXED)) return 0; /* relaxed: one thread */
    h->ring_in_poll = has_join_ring();
    h->in_poll = fsched_join(where_a, &h->w, where_b, &h->w);
    __atomic_store_n(&h->poll_calls, 1, __ATOMIC_RELEASE); /* release: in_poll */
    return 0;
}

/* A worker's start hook and a poll hook must not wait: a join there is refused and runs
   nothing, and the worker's joins work again after either. */
static void test_hooks_refused(void) {
    fsched_sched *s = NULL;
    fsched_desc d;
    hooked h;
    units_fib f;
    memset(&h, 0, sizeof h);
    memset(&d, 0, sizeof d);
    d.workers = 1;
    d.worker_start = start_hook;
    d.worker_user = &h;
    h.in_start = h.in_poll = FSCHED_OK;
    CHECK_OK(fsched_create(&d, &s));
    CHECK_OK(fsched_set_poll(s, poll_hook, &h, 1000));
    f.n = 20;
    while (!__atomic_load_n(&h.poll_calls, __ATOMIC_ACQUIRE)) { /* acquire: in_poll */
        run_in_task(s, units_fib_inline, &f); /* the worker calls the hook between tasks */
        CHECK_OK(f.status);
        CHECK_EQ_U64(f.r, fib_known(20));
    }
    CHECK(__atomic_load_n(&h.start_calls, __ATOMIC_ACQUIRE));
    CHECK_RESULT(h.in_start, FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(h.in_poll, FSCHED_ERR_WRONG_STATE);
    CHECK(h.w.a_runs == 0 && h.w.b_runs == 0);
#if defined(FSCHED__JOIN_RING) /* elsewhere has_join_ring() only guesses from the slot */
    CHECK(!h.ring_in_start && !h.ring_in_poll);
#endif
    run_in_task(s, units_fib_inline, &f); /* after the hook, the worker joins again */
    CHECK_OK(f.status);
    CHECK_EQ_U64(f.r, fib_known(20));
    CHECK_OK(fsched_set_poll(s, NULL, NULL, 0));
    CHECK_OK(fsched_destroy(s));
}

int main(void) {
    test_watchdog(120);
    test_units_mixed();
    test_taken_half();
    test_deeper_than_ring();
    test_bound_then_unbound();
    test_unbind_inside_calls();
    test_hooks_refused();
    puts("test_join_units: ok");
    return 0;
}
