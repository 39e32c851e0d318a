/* The default scheduler: fork-join calls from threads outside every scheduler (main, many
   plain threads at once) run on it, made once however many threads race to make it; its
   configuration and installation, refused once it exists, and a failure to make it;
   calls from tasks and bound threads of other schedulers keep to those; calls from hooks
   are refused; an exit with the default made (idle, busy, from a task) releases it or
   leaves it, never hangs; fork(). Scenarios that need a process of their own run in
   children forked before this process starts any thread (their exit is checked, under
   Valgrind and the sanitizers too). Also built with FIBERSCHED_NO_THREADS and
   FIBERSCHED_NO_OS, where the default runs each call on the calling thread. */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/wait.h>
#include <unistd.h>
#define TEST_FORK 1
#else
#define TEST_FORK 0
#endif
/* helpers of the scenarios that run in children: unused where there is no fork() */
#if defined(__GNUC__)
#define FORK_HELPER __attribute__((unused))
#else
#define FORK_HELPER
#endif

#define N_ITEMS 10000u

/* ---- what the calls run, and where they saw themselves run ---- */

/* Where a body ran: the scheduler every call of it saw (the first one kept, the others
   compared with it), and the calls that saw none. */
typedef struct place {
    fsched_sched *seen;
    uint32_t differed;
    uint32_t outside;
} place;

static void place_note(place *p) {
    fsched_sched *here = fsched_current(), *none = NULL;
    if (!here) {
        ADD(&p->outside, 1u);
        return;
    }
    if (!__atomic_compare_exchange_n(&p->seen, &none, here, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE) &&
        none != here)
        ADD(&p->differed, 1u);
}

/* The place's calls all ran on `s`. */
static void place_check(const place *p, fsched_sched *s) {
    CHECK(s != NULL);
    CHECK(LOAD(&p->outside) == 0);
    CHECK(LOAD(&p->differed) == 0);
    CHECK(p->seen == s);
}

typedef struct cover {
    uint32_t hits[N_ITEMS];
    place where;
} cover;

static void cover_body(void *ctx, size_t lo, size_t hi) {
    cover *c = (cover *)ctx;
    size_t i;
    place_note(&c->where);
    for (i = lo; i < hi; i++) ADD(&c->hits[i], 1u);
}

static void cover_check(const cover *c, size_t n) {
    size_t i;
    for (i = 0; i < N_ITEMS; i++) CHECK_EQ_U64(c->hits[i], i < n ? 1 : 0);
}

static void sum_init(void *ctx, void *acc) {
    (void)ctx;
    *(uint64_t *)acc = 0;
}

static void sum_body(void *ctx, size_t lo, size_t hi, void *acc) {
    size_t i;
    place_note((place *)ctx);
    for (i = lo; i < hi; i++) *(uint64_t *)acc += (uint64_t)i * i;
}

static void sum_combine(void *ctx, void *acc, const void *other) {
    (void)ctx;
    *(uint64_t *)acc += *(const uint64_t *)other;
}

static uint64_t squares_below(uint64_t n) { return (n - 1) * n * (2 * n - 1) / 6; }

typedef struct side {
    place *where;
    uint32_t ran;
} side;

static void side_run(void *p) {
    side *s = (side *)p;
    place_note(s->where);
    ADD(&s->ran, 1u);
}

FSCHED_TASK(long, fib, int, n) {
    long x, y;
    if (n < 2) return n;
    FSCHED_SPAWN(fib, n - 1);
    y = FSCHED_CALL(fib, n - 2);
    x = FSCHED_SYNC(fib);
    return x + y;
}

/* The scheduler a tree's root ran on. */
FSCHED_TASK(fsched_sched *, tree_place, int, unused) {
    (void)unused;
    return fsched_current();
}

/* A linear pipeline: 1..n in, squared in parallel, summed in order. */
typedef struct lp_case {
    uint64_t next, n, sum, last;
    place where;
} lp_case;

static void *lp_input(void *user, void *item, int *stop) {
    lp_case *c = (lp_case *)user;
    (void)item;
    if (c->next == c->n) {
        *stop = 1;
        return NULL;
    }
    return (void *)(uintptr_t)++c->next;
}

static void *lp_square(void *user, void *item, int *stop) {
    uintptr_t v = (uintptr_t)item;
    (void)stop;
    place_note(&((lp_case *)user)->where);
    return (void *)(v * v);
}

static void *lp_sum(void *user, void *item, int *stop) {
    lp_case *c = (lp_case *)user;
    (void)stop;
    c->sum += (uintptr_t)item;
    c->last++;
    return NULL;
}

static fsched_result lp_run(lp_case *c, uint64_t n) {
    fsched_stage st[3];
    memset(st, 0, sizeof st);
    memset(c, 0, sizeof *c);
    c->n = n;
    st[0].fn = lp_input;
    st[0].user = c;
    st[1].mode = FSCHED_STAGE_PARALLEL;
    st[1].fn = lp_square;
    st[1].user = c;
    st[2].fn = lp_sum;
    st[2].user = c;
    return fsched_parallel_pipeline(0, st, 3);
}

/* Every kind of fork-join call, from the calling thread, and where each ran: all on s
   (NULL: the default, made by the first of them if there is none yet). */
static void every_call(fsched_sched *s, size_t n) {
    cover *c = (cover *)calloc(1, sizeof *c);
    place reduce_where, join_where;
    side a, b;
    lp_case lp;
    uint64_t sum = 7;
    long r = 0;
    fsched_sched *root = NULL;
    CHECK(c != NULL);
    memset(&reduce_where, 0, sizeof reduce_where);
    memset(&join_where, 0, sizeof join_where);
    CHECK_OK(fsched_parallel_for(0, n, 16, cover_body, c));
    cover_check(c, n);
    if (!s) CHECK_OK(fsched_default_get(&s));
    place_check(&c->where, s);
    CHECK_OK(fsched_parallel_reduce(0, n, 16, sizeof sum, sum_init, sum_body, sum_combine,
                                    &reduce_where, &sum));
    CHECK_EQ_U64(sum, squares_below(n));
    place_check(&reduce_where, s);
    a.where = b.where = &join_where;
    a.ran = b.ran = 0;
    CHECK_OK(fsched_join(side_run, &a, side_run, &b));
    CHECK(a.ran == 1 && b.ran == 1);
    place_check(&join_where, s);
    CHECK_OK(FSCHED_RUN(fib, 20, &r));
    CHECK(r == 6765);
    CHECK_OK(FSCHED_RUN(tree_place, 0, &root));
    CHECK(root == s);
    CHECK_OK(lp_run(&lp, 200));
    CHECK_EQ_U64(lp.sum, squares_below(201));
    CHECK_EQ_U64(lp.last, 200);
    place_check(&lp.where, s);
    free(c);
}

/* ---- in this process: calls from main, from many threads, nested, from other
   schedulers, graph runs ---- */

static void test_from_main(void) {
    fsched_sched *s = NULL, *again = NULL;
    every_call(NULL, N_ITEMS);
    CHECK_OK(fsched_default_get(&s));
    CHECK_OK(fsched_default_get(&again));
    CHECK(s == again);
    every_call(s, 1); /* a range of one, no split */
    CHECK(fsched_current() == NULL); /* the caller took no slot, or gave it back */
    CHECK(fsched_worker_index() == -1);
#if TEST_THREADS
    CHECK(fsched_worker_count(s) >= 1);
#else
    CHECK(fsched_worker_count(s) == 0); /* single-threaded: the caller ran the calls */
#endif
    /* bad input is refused as from a task, running nothing */
    CHECK_RESULT(fsched_parallel_for(10, 0, 1, cover_body, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_parallel_for(0, 10, 1, NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_join(side_run, NULL, NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_parallel_pipeline(0, NULL, 0), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_default_get(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    /* once it exists it is no longer configured or replaced */
    CHECK_RESULT(fsched_default_configure(NULL), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_default_set(s), FSCHED_ERR_WRONG_STATE);
}

/* A loop from main whose body joins, runs trees and loops of its own: all on the default,
   nested on its workers' slots. */
typedef struct nest_case {
    place where;
    uint64_t fibs;
    uint32_t inner_hits[64];
} nest_case;

static void nest_inner(void *ctx, size_t lo, size_t hi) {
    nest_case *c = (nest_case *)ctx;
    place_note(&c->where);
    for (; lo < hi; lo++) ADD(&c->inner_hits[lo], 1u);
}

static void nest_body(void *ctx, size_t lo, size_t hi) {
    nest_case *c = (nest_case *)ctx;
    side a, b;
    for (; lo < hi; lo++) {
        long r = 0;
        a.where = b.where = &c->where;
        a.ran = b.ran = 0;
        CHECK_OK(fsched_join(side_run, &a, side_run, &b));
        CHECK(a.ran == 1 && b.ran == 1);
        CHECK_OK(FSCHED_RUN(fib, 12, &r));
        ADD(&c->fibs, (uint64_t)r);
        CHECK_OK(fsched_parallel_for(0, 64, 1, nest_inner, c));
    }
}

static void test_nested(void) {
    nest_case *c = (nest_case *)calloc(1, sizeof *c);
    fsched_sched *s;
    uint32_t i;
    CHECK(c != NULL);
    CHECK_OK(fsched_parallel_for(0, 32, 1, nest_body, c));
    CHECK_OK(fsched_default_get(&s));
    place_check(&c->where, s);
    CHECK_EQ_U64(c->fibs, 32u * 144u);
    for (i = 0; i < 64; i++) CHECK_EQ_U64(c->inner_hits[i], 32);
    free(c);
}

/* A task of a scheduler of the program's, and a thread bound to one: their calls run on
   that scheduler, never on the default. */
typedef struct own_case {
    fsched_sched *s;
} own_case;

static void own_task(void *p) {
    own_case *o = (own_case *)p;
    every_call(o->s, 3000);
}

#if TEST_THREADS
static void own_bound_thread(void *p) {
    own_case *o = (own_case *)p;
    CHECK_OK(fsched_bind(o->s));
    every_call(o->s, 3000);
    CHECK_OK(fsched_unbind());
    every_call(NULL, 100); /* unbound again: on the default */
}
#endif

static void test_own_scheduler(void) {
    own_case o;
    fsched_wait_group wg;
    o.s = test_sched_new(2);
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, o.s, own_task, &o));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
#if TEST_THREADS
    thread_join(thread_run(own_bound_thread, &o));
#else
    every_call(o.s, 3000); /* bound by test_sched_new */
#endif
    test_sched_free(o.s);
}

/* Many plain threads, each making calls of every kind at once. */
#if TEST_THREADS
#define CROWD 8
static void crowd_thread(void *p) {
    unsigned i, rounds = test_rounds(40);
    (void)p;
    for (i = 0; i < rounds; i++) every_call(NULL, 500 + 97 * (i % 10));
}

static void test_crowd(void) {
    test_thread t[CROWD];
    int i;
    for (i = 0; i < CROWD; i++) t[i] = thread_run(crowd_thread, NULL);
    for (i = 0; i < CROWD; i++) thread_join(t[i]);
}
#endif

/* fsched_graph_run with no scheduler: the default from main, the caller's own from a
   task of another scheduler. */
static int graph_note(fsched_graph_task *self, void *arg) {
    (void)self;
    place_note((place *)arg);
    return 0;
}

static void graph_on_null(place *where) {
    fsched_graph *g;
    fsched_graph_task *a, *b;
    CHECK_OK(fsched_graph_create(NULL, &g));
    CHECK_OK(fsched_graph_add(g, graph_note, where, NULL, &a));
    CHECK_OK(fsched_graph_add(g, graph_note, where, NULL, &b));
    CHECK_OK(fsched_graph_precede(g, a, b));
    CHECK_OK(fsched_graph_run(g, NULL));
    CHECK_OK(fsched_graph_wait(g, NULL));
    CHECK_OK(fsched_graph_destroy(g));
}

static void graph_task(void *p) { graph_on_null((place *)p); }

static void test_graph_null(void) {
    place where;
    fsched_sched *s, *dflt;
    fsched_wait_group wg;
    memset(&where, 0, sizeof where);
#if TEST_THREADS /* without threads, a run on the default waits for a bound thread */
    graph_on_null(&where);
    CHECK_OK(fsched_default_get(&dflt));
    place_check(&where, dflt);
    memset(&where, 0, sizeof where);
#else
    (void)dflt;
#endif
    s = test_sched_new(2);
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, graph_task, &where));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    place_check(&where, s);
    test_sched_free(s);
}

/* ---- children: scenarios that need a process of their own ---- */

/* Bytes the counting allocator handed out and did not get back. */
static int64_t live_bytes;
static uint32_t workers_started, workers_stopped;

static void *counting_alloc(size_t size, size_t align, void *user) {
    unsigned char *raw, *p;
    (void)user;
    if (align < sizeof(void *)) align = sizeof(void *);
    raw = (unsigned char *)malloc(size + align + sizeof(void *));
    if (!raw) return NULL;
    p = (unsigned char *)(((uintptr_t)raw + sizeof(void *) + align - 1) & ~(uintptr_t)(align - 1));
    memcpy(p - sizeof(void *), &raw, sizeof raw);
    ADD(&live_bytes, (int64_t)size);
    return p;
}

static void counting_free(void *ptr, size_t size, size_t align, void *user) {
    void *raw;
    (void)align;
    (void)user;
    memcpy(&raw, (unsigned char *)ptr - sizeof(void *), sizeof raw);
    free(raw);
    SUB(&live_bytes, (int64_t)size);
}

FORK_HELPER static void *failing_alloc(size_t size, size_t align, void *user) {
    (void)size;
    (void)align;
    (void)user;
    return NULL;
}

static void count_start(void *user, uint32_t worker) {
    (void)user;
    (void)worker;
    ADD(&workers_started, 1u);
}

static void count_stop(void *user, uint32_t worker) {
    (void)user;
    (void)worker;
    ADD(&workers_stopped, 1u);
}

static char last_log[256];
FORK_HELPER static void keep_log(fsched_log_level level, const char *message, void *user) {
    (void)level;
    (void)user;
    strncpy(last_log, message, sizeof last_log - 1);
}

/* A desc that counts the default's memory and its workers' starts and stops. */
FORK_HELPER static void counted_desc(fsched_desc *d, uint32_t workers) {
    test_desc_init(d);
    d->workers = workers;
    d->allocator.alloc = counting_alloc;
    d->allocator.free = counting_free;
    d->worker_start = count_start;
    d->worker_stop = count_stop;
}

/* Sleeps about a millisecond, the thread outside every scheduler. */
FORK_HELPER static void nap(void) { fsched_sleep_for(1000000u); }

#if TEST_FORK
/* Runs fn in a child process, which then exits through exit() (its atexit handlers, and
   under Valgrind or the sanitizers their leak checks, run), and checks that it exited
   with 0, within its watchdog. */
static void in_child(const char *name, void (*fn)(void)) {
    pid_t pid;
    int status = 0;
    fflush(stdout);
    fflush(stderr);
    CHECK((pid = fork()) >= 0);
    if (pid == 0) {
        test_watchdog(120);
        fn();
        exit(0);
    }
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child '%s' ended with status %d\n", name, status);
        CHECK(!"a child failed");
    }
    printf("ok %s (child)\n", name);
}

/* A failed make, then a configured one; no configuration or replacement after. */
static void child_configure(void) {
    fsched_desc d;
    fsched_sched *s = NULL, *other;
    cover *c = (cover *)calloc(1, sizeof *c);
    uint32_t spins;
    side a, b;
    CHECK(c != NULL);
    a.where = b.where = &c->where;
    a.ran = b.ran = 0;
    test_desc_init(&d);
    d.allocator.alloc = failing_alloc;
    d.allocator.free = counting_free;
    d.logger.func = keep_log;
    CHECK_OK(fsched_default_configure(&d));
    CHECK_RESULT(fsched_parallel_for(0, 100, 1, cover_body, c), FSCHED_ERR_OUT_OF_MEMORY);
#if !defined(NDEBUG)
    CHECK(strstr(last_log, "fsched_parallel_for: the default scheduler cannot be made") != NULL);
#endif
    CHECK_RESULT(fsched_join(side_run, &a, side_run, &b), FSCHED_ERR_OUT_OF_MEMORY); /* again */
    CHECK_RESULT(fsched_default_get(&s), FSCHED_ERR_OUT_OF_MEMORY);
    CHECK(s == NULL);
    cover_check(c, 0);
    CHECK(a.ran == 0 && b.ran == 0);
    /* none was made: it may still be configured */
    counted_desc(&d, 3);
    CHECK_OK(fsched_default_configure(&d));
    CHECK_OK(fsched_parallel_for(0, 100, 1, cover_body, c));
    cover_check(c, 100);
    CHECK_OK(fsched_default_get(&s));
    place_check(&c->where, s);
    CHECK(LOAD(&live_bytes) > 0); /* made with the configured allocator */
#if TEST_THREADS
    CHECK(fsched_worker_count(s) == 3);
    for (spins = 0; LOAD(&workers_started) < 3 && spins < 10000; spins++) nap();
    CHECK(LOAD(&workers_started) == 3);
#else
    (void)spins;
    CHECK(fsched_worker_count(s) == 0);
#endif
    /* refused from now on */
    CHECK_RESULT(fsched_default_configure(&d), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_default_configure(NULL), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_create(NULL, &other));
    CHECK_RESULT(fsched_default_set(other), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_destroy(other));
    CHECK_OK(fsched_default_get(&other));
    CHECK(other == s);
    free(c);
}

/* An allocator that gives a freed block back for the next request of its size and
   alignment: a scheduler made after another was destroyed gets its address. Small
   blocks only: a heap stack (FIBERSCHED_NO_OS) keeps what Valgrind marked while it was
   a stack, which only a free and a new allocation reset. */
#define RECYCLED 256
static struct { void *p; size_t size, align; } recycled[RECYCLED];
static int recycled_lock;

static void recycled_take(void) {
    while (__atomic_exchange_n(&recycled_lock, 1, __ATOMIC_ACQUIRE)) {
    }
}

static void recycled_give(void) { __atomic_store_n(&recycled_lock, 0, __ATOMIC_RELEASE); }

static void *recycling_alloc(size_t size, size_t align, void *user) {
    void *p = NULL;
    int k;
    recycled_take();
    for (k = 0; k < RECYCLED && !p; k++)
        if (recycled[k].p && recycled[k].size == size && recycled[k].align == align) {
            p = recycled[k].p;
            recycled[k].p = NULL;
        }
    recycled_give();
    return p ? p : counting_alloc(size, align, user);
}

static void recycling_free(void *ptr, size_t size, size_t align, void *user) {
    int k;
    recycled_take();
    for (k = 0; k < RECYCLED && ptr && size < 65536; k++)
        if (!recycled[k].p) {
            recycled[k].p = ptr;
            recycled[k].size = size;
            recycled[k].align = align;
            ptr = NULL;
        }
    recycled_give();
    if (ptr) counting_free(ptr, size, align, user);
}

static void recycling_drop(void) {
    int k;
    for (k = 0; k < RECYCLED; k++)
        if (recycled[k].p) counting_free(recycled[k].p, recycled[k].size, 0, NULL);
}

/* The program's own scheduler installed as the default, then destroyed: calls from
   outside are refused, also once another scheduler took its address. */
static void child_set(void) {
    fsched_desc d;
    fsched_sched *s, *got, *again;
    cover *c = (cover *)calloc(1, sizeof *c);
    side a, b;
    CHECK(c != NULL);
    test_desc_init(&d);
    d.workers = 2;
    d.allocator.alloc = recycling_alloc;
    d.allocator.free = recycling_free;
    CHECK_OK(fsched_create(&d, &s));
    CHECK_RESULT(fsched_default_set(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_default_configure(NULL)); /* still free to choose */
    CHECK_OK(fsched_default_set(s));
    CHECK_RESULT(fsched_default_set(s), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_default_configure(NULL), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_default_get(&got));
    CHECK(got == s);
    every_call(s, 2000);
    CHECK_OK(fsched_destroy(s));
    /* the default is gone with it: calls from outside are refused, running nothing */
    a.where = b.where = &c->where;
    a.ran = b.ran = 0;
    CHECK_RESULT(fsched_parallel_for(0, 100, 1, cover_body, c), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_join(side_run, &a, side_run, &b), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_default_get(&got), FSCHED_ERR_WRONG_STATE);
    CHECK(got == NULL);
    /* a scheduler at the same address is not the default */
    CHECK_OK(fsched_create(&d, &again));
    CHECK(again == s);
    CHECK_RESULT(fsched_parallel_for(0, 100, 1, cover_body, c), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_join(side_run, &a, side_run, &b), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_default_get(&got), FSCHED_ERR_WRONG_STATE);
    cover_check(c, 0);
    CHECK(a.ran == 0 && b.ran == 0);
    CHECK_OK(fsched_destroy(again));
    recycling_drop();
    CHECK_EQ_U64(LOAD(&live_bytes), 0);
    free(c);
}

/* Threads that race to make the default: exactly one is made. */
#if TEST_THREADS
#define RACERS 16
static uint32_t racers_ready;
static fsched_sched *racer_saw[RACERS];

static void racer(void *p) {
    uint32_t k = (uint32_t)(uintptr_t)p;
    fsched_sched *s = NULL;
    place where;
    side a, b;
    memset(&where, 0, sizeof where);
    a.where = b.where = &where;
    a.ran = b.ran = 0;
    ADD(&racers_ready, 1u);
    while (LOAD(&racers_ready) < RACERS) fsched_yield();
    switch (k % 4) {
    case 0: CHECK_OK(fsched_join(side_run, &a, side_run, &b)); break;
    case 1: CHECK_OK(FSCHED_RUN(tree_place, 0, &where.seen)); break;
    case 2: CHECK_OK(fsched_default_get(&where.seen)); break;
    default: {
        cover *c = (cover *)calloc(1, sizeof *c);
        CHECK(c != NULL);
        CHECK_OK(fsched_parallel_for(0, 1000, 1, cover_body, c));
        cover_check(c, 1000);
        where = c->where;
        free(c);
    }
    }
    CHECK(LOAD(&where.differed) == 0 && LOAD(&where.outside) == 0);
    s = where.seen;
    CHECK(s != NULL);
    racer_saw[k] = s;
}

/* The first allocation of the default's making takes 20 ms: every racer arrives while
   the default is being made. */
static uint32_t race_allocs;
static void *slow_first_alloc(size_t size, size_t align, void *user) {
    if (ADD(&race_allocs, 1u) == 1u) {
        uint32_t i;
        for (i = 0; i < 20; i++) nap();
    }
    return counting_alloc(size, align, user);
}

static void child_race(void) {
    fsched_desc d;
    test_thread t[RACERS];
    uint32_t k;
    counted_desc(&d, 2);
    d.allocator.alloc = slow_first_alloc;
    CHECK_OK(fsched_default_configure(&d));
    for (k = 0; k < RACERS; k++) t[k] = thread_run(racer, (void *)(uintptr_t)k);
    for (k = 0; k < RACERS; k++) thread_join(t[k]);
    for (k = 1; k < RACERS; k++) CHECK(racer_saw[k] == racer_saw[0]);
    /* one scheduler of two workers: a second one would have started two more */
    for (k = 0; LOAD(&workers_started) < 2 && k < 10000; k++) nap();
    for (k = 0; k < 20; k++) nap();
    CHECK_EQ_U64(LOAD(&workers_started), 2);
}
#endif

/* An exit with the default made and idle: it is released (after what was spawned onto
   it), and calls made after that are refused. Checked by an exit handler registered
   before the default was made, which runs after the library's. */
static uint32_t late_ran;

static void late_task(void *p) {
    (void)p;
    nap();
    STORE(&late_ran, 1u);
}

static void after_idle_exit(void) {
    fsched_sched *s = NULL;
    fsched_graph *g;
    cover *c = (cover *)calloc(1, sizeof *c);
    CHECK(c != NULL);
    CHECK(LOAD(&late_ran) == 1);     /* what was spawned onto it ran */
    CHECK_EQ_U64(LOAD(&live_bytes), 0); /* everything it allocated was freed */
#if TEST_THREADS
    CHECK_EQ_U64(LOAD(&workers_stopped), 2); /* its workers ended */
#endif
    CHECK_RESULT(fsched_parallel_for(0, 100, 1, cover_body, c), FSCHED_ERR_WRONG_STATE);
    cover_check(c, 0);
    CHECK_RESULT(fsched_default_get(&s), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_default_configure(NULL), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_graph_create(NULL, &g));
    CHECK_RESULT(fsched_graph_run(g, NULL), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_graph_destroy(g));
    free(c);
}

static void child_exit_idle(void) {
    fsched_desc d;
    fsched_sched *s;
    CHECK(atexit(after_idle_exit) == 0);
    counted_desc(&d, 2);
    CHECK_OK(fsched_default_configure(&d));
    every_call(NULL, 1000);
    CHECK_OK(fsched_default_get(&s));
    CHECK_OK(fsched_spawn(s, late_task, NULL)); /* detached: the exit finishes it */
}

/* No default at all, configured or not: an exit with nothing to release. */
static void child_exit_none(void) { CHECK_OK(fsched_default_configure(NULL)); }

#if TEST_THREADS
/* An exit while another thread's call runs on the default: left to the process's end
   (never waited for: the call does not end), and no hang. */
static uint32_t in_call;

static void endless_body(void *ctx, size_t lo, size_t hi) {
    (void)ctx;
    (void)lo;
    (void)hi;
    STORE(&in_call, 1u);
    for (;;) nap();
}

static void endless_caller(void *p) {
    (void)p;
    (void)fsched_parallel_for(0, 1, 1, endless_body, NULL);
}

static void after_busy_exit(void) { CHECK(LOAD(&live_bytes) > 0); /* left alone */ }

static void child_exit_busy(void) {
    fsched_desc d;
    CHECK(atexit(after_busy_exit) == 0);
    counted_desc(&d, 2);
    CHECK_OK(fsched_default_configure(&d));
    (void)thread_run(endless_caller, NULL);
    while (!LOAD(&in_call)) nap();
    exit(0);
}

/* exit() from a task of the default, while main waits for the call: no hang. */
static void exiting_body(void *ctx, size_t lo, size_t hi) {
    (void)ctx;
    (void)lo;
    (void)hi;
    exit(0);
}

static void child_exit_in_task(void) {
    (void)fsched_parallel_for(0, 1, 1, exiting_body, NULL);
    CHECK(!"exit returned");
}
#endif

/* A fork with the default made: the child makes one of its own (the parent's workers
   are not there), the parent keeps its own. Not under ThreadSanitizer, which stops a
   child of a threaded process that starts threads. */
#if !defined(FSCHED__TSAN)
static void child_fork(void) {
    fsched_sched *parent_default, *s;
    pid_t pid;
    int status = 0;
    every_call(NULL, 1000);
    CHECK_OK(fsched_default_get(&parent_default));
    fflush(stdout);
    CHECK((pid = fork()) >= 0);
    if (pid == 0) {
        test_watchdog(60);
        every_call(NULL, 1000);
        CHECK_OK(fsched_default_get(&s));
#if !defined(FIBERSCHED_NO_OS) /* no fork handlers without an OS: it keeps the parent's */
        CHECK(s != parent_default);
#endif
        exit(0);
    }
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    every_call(parent_default, 1000);
}
#endif

/* Calls from hooks, which must not wait: refused, running nothing and making no
   default. */
#if TEST_THREADS
typedef struct hook_case {
    fsched_result results[4];
    long tree;
    uint32_t done;
    cover c;
    side a, b;
    lp_case lp;
} hook_case;

static void hook_calls(hook_case *h) {
    h->a.where = h->b.where = &h->c.where;
    h->results[0] = fsched_parallel_for(0, 100, 1, cover_body, &h->c);
    h->results[1] = fsched_join(side_run, &h->a, side_run, &h->b);
    h->results[2] = FSCHED_RUN(fib, 10, &h->tree);
    h->results[3] = lp_run(&h->lp, 10);
    STORE(&h->done, 1u);
}

static void hook_check(hook_case *h) {
    int i;
    while (!LOAD(&h->done)) nap();
    for (i = 0; i < 4; i++) CHECK_RESULT(h->results[i], FSCHED_ERR_WRONG_STATE);
    CHECK(h->tree == 0);
    cover_check(&h->c, 0);
    CHECK(h->a.ran == 0 && h->b.ran == 0);
    CHECK(h->lp.next == 0);
}

static void start_hook(void *user, uint32_t worker) {
    if (worker == 0) hook_calls((hook_case *)user);
}

#if !defined(FIBERSCHED_NO_OS)
static int poll_hook(void *user) {
    hook_case *h = (hook_case *)user;
    if (!LOAD(&h->done)) hook_calls(h);
    return 0;
}
#endif

static void child_hooks(void) {
    hook_case *h = (hook_case *)calloc(1, sizeof *h);
    fsched_desc d;
    fsched_sched *s;
    CHECK(h != NULL);
    test_desc_init(&d);
    d.workers = 1;
    d.worker_start = start_hook;
    d.worker_user = h;
    CHECK_OK(fsched_create(&d, &s));
    hook_check(h);
#if !defined(FIBERSCHED_NO_OS)
    memset(h, 0, sizeof *h);
    CHECK_OK(fsched_set_poll(s, poll_hook, h, 0)); /* an idle worker calls it */
    hook_check(h);
    CHECK_OK(fsched_set_poll(s, NULL, NULL, 0));
#endif
    CHECK_OK(fsched_destroy(s));
    CHECK_OK(fsched_default_configure(NULL)); /* no default was made */
    free(h);
}
#endif

#if TEST_THREADS
/* A single-threaded default with two bound slots, and six times as many threads calling
   at once: each call takes a slot for its length, and callers beyond the slots take
   turns (they failed with FSCHED_ERR_OUT_OF_MEMORY). A thread bound for good is not
   waited for: with every slot so taken, a call fails at once. */
#define TURNS 12
static uint32_t turns_go;

static void napping_body(void *ctx, size_t lo, size_t hi) {
    nap(); /* every caller holds its slot a while: they overlap */
    cover_body(ctx, lo, hi);
}

static void turn_thread(void *p) {
    cover *c = (cover *)p;
    while (!LOAD(&turns_go)) nap();
    CHECK_OK(fsched_parallel_for(0, 20, 1, napping_body, c));
    cover_check(c, 20);
    every_call(NULL, 300);
}

static void bound_for_good(void *p) {
    CHECK_OK(fsched_bind((fsched_sched *)p));
    ADD(&workers_started, 1u);
    while (LOAD(&workers_stopped) == 0) nap();
    CHECK_OK(fsched_unbind());
}

static void child_single_threaded_turns(void) {
    fsched_desc d;
    fsched_sched *s;
    test_thread t[TURNS];
    cover *c = (cover *)calloc(TURNS, sizeof *c);
    int i;
    CHECK(c != NULL);
    memset(&d, 0, sizeof d);
    d.single_threaded = 1;
    d.max_bound_threads = 2;
    CHECK_OK(fsched_default_configure(&d));
    for (i = 0; i < TURNS; i++) t[i] = thread_run(turn_thread, &c[i]);
    STORE(&turns_go, 1u);
    for (i = 0; i < TURNS; i++) thread_join(t[i]);
    memset(c, 0, sizeof *c);
    /* both slots bound for good: the call has no turn to wait for */
    CHECK_OK(fsched_default_get(&s));
    t[0] = thread_run(bound_for_good, s);
    t[1] = thread_run(bound_for_good, s);
    while (LOAD(&workers_started) < 2) nap();
    CHECK_RESULT(fsched_parallel_for(0, 100, 1, cover_body, c), FSCHED_ERR_OUT_OF_MEMORY);
    STORE(&workers_stopped, 1);
    thread_join(t[0]);
    thread_join(t[1]);
    CHECK_OK(fsched_parallel_for(0, 100, 1, cover_body, c));
    cover_check(c, 100);
    free(c);
}
#endif

static void run_children(void) {
    in_child("configure", child_configure);
    in_child("set", child_set);
    in_child("exit, idle", child_exit_idle);
    in_child("exit, never made", child_exit_none);
#if TEST_THREADS
    in_child("first-use race", child_race);
    in_child("exit, a call in flight", child_exit_busy);
    in_child("exit from a task", child_exit_in_task);
    in_child("hooks", child_hooks);
    in_child("single-threaded, callers take turns", child_single_threaded_turns);
#endif
#if defined(FSCHED__TSAN)
    printf("fork: skipped under ThreadSanitizer\n");
#else
    /* qemu-user aborts in a forked child of a threaded process that starts threads */
    if (test_emulated()) printf("fork: skipped under an emulator\n");
    else in_child("fork", child_fork);
#endif
}
#endif /* TEST_FORK */

int main(void) {
    test_watchdog(300);
#if TEST_FORK
    run_children(); /* first: this process has no thread yet */
#endif
    test_from_main();
    printf("ok from main\n");
    test_nested();
    printf("ok nested\n");
    test_own_scheduler();
    printf("ok own scheduler\n");
#if TEST_THREADS
    test_crowd();
    printf("ok many threads\n");
#endif
    test_graph_null();
    printf("ok graph run with no scheduler\n");
    return 0; /* the default is released at exit */
}
