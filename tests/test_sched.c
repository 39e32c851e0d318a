/* The work-stealing scheduler: known answers under heavy concurrency (fib, nqueens, a
   parallel sort, an unbalanced tree), every task exactly once, parallel loops and
   reductions, blocking tasks, shutdown with work in flight and spawns during shutdown,
   several schedulers at once, bound threads, the single-threaded mode, and bad input.
   Also built with FIBERSCHED_NO_THREADS, where the parts that need threads are left out. */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <stdint.h>
#include <stdlib.h>

#if !defined(FIBERSCHED_NO_THREADS) && (defined(__unix__) || defined(__APPLE__))
#include <pthread.h>
#define TEST_PTHREADS 1
#endif

static uint64_t counter_add(uint64_t *p, uint64_t v) {
    return FSCHED__FETCH_ADD(p, v, FSCHED__RELAXED) + v;
}

/* Runs fn(arg) as a task of s and waits for it from the calling (outside) thread. */
typedef struct run_ctx {
    void (*fn)(void *);
    void *arg;
} run_ctx;

static void run_in_task(fsched_sched *s, void (*fn)(void *), void *arg) {
    fsched_wait_group wg;
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, fn, arg));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

#if defined(FIBERSCHED_NO_OS)
/* Without an OS the application provides the clock: here one that advances by a
   microsecond each time it is read. */
static uint64_t test_clock(void *user) {
    return FSCHED__FETCH_ADD((uint64_t *)user, 1000u, FSCHED__RELAXED) + 1000u;
}
static uint64_t test_clock_now;
#endif

static fsched_sched *make_sched(uint32_t workers) {
    fsched_sched *s = NULL;
    fsched_desc d;
    memset(&d, 0, sizeof d);
    d.workers = workers;
#if defined(FIBERSCHED_NO_OS)
    d.clock = test_clock;
    d.clock_user = &test_clock_now;
#endif
    CHECK_OK(fsched_create(&d, &s));
    CHECK(s != NULL);
#if defined(FIBERSCHED_NO_THREADS)
    CHECK(fsched_worker_count(s) == 0); /* single-threaded: this thread runs the tasks */
    CHECK_OK(fsched_bind(s));
#endif
    return s;
}

/* ---- fib with join ---- */

typedef struct fib_arg {
    int n;
    long long result;
} fib_arg;

static long long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

static void fib_join(void *p) {
    fib_arg *a = (fib_arg *)p, x, y;
    if (a->n < 2) {
        a->result = a->n;
        return;
    }
    x.n = a->n - 1;
    y.n = a->n - 2;
    CHECK_OK(fsched_join(fib_join, &x, fib_join, &y));
    a->result = x.result + y.result;
}

static void test_fib(uint32_t workers, int n) {
    fsched_sched *s = make_sched(workers);
    fib_arg a;
    a.n = n;
    a.result = -1;
    run_in_task(s, fib_join, &a);
    CHECK_EQ_U64(a.result, fib_serial(n));
    CHECK_OK(fsched_destroy(s));
}

/* ---- spawn and sync (frame stacks) ---- */

FSCHED_TASK(long long, fib_frames, int, n) {
    long long x, y;
    if (n < 2) return n;
    FSCHED_SPAWN(fib_frames, n - 1);
    y = FSCHED_CALL(fib_frames, n - 2);
    x = FSCHED_SYNC(fib_frames);
    return x + y;
}

/* A range of leaves, each counted once in `hits`, split ten ways at every level (many
   children offered at once, synced newest first); results carry the sum of the indices
   and how many leaves were counted, to check that every child's result comes back. */
typedef struct leaves {
    uint32_t *hits;
    uint32_t lo, hi;
    uint32_t spin; /* work per leaf, so that thieves find the tree busy */
} leaves;

typedef struct leaves_sum {
    uint64_t sum, count;
} leaves_sum;

FSCHED_TASK(leaves_sum, count_leaves, leaves, r) {
    leaves_sum total;
    uint32_t k, parts, step;
    total.sum = total.count = 0;
    if (r.hi - r.lo <= 4) {
        uint32_t i, j;
        for (i = r.lo; i < r.hi; i++) {
            for (j = 0; j < r.spin; j++) fsched__cpu_relax();
            FSCHED__FETCH_ADD(&r.hits[i], 1u, FSCHED__RELAXED);
            total.sum += i;
            total.count++;
        }
        return total;
    }
    parts = r.hi - r.lo < 10 ? r.hi - r.lo : 10;
    step = (r.hi - r.lo + parts - 1) / parts;
    for (k = 0; k < parts; k++) {
        leaves child = r;
        child.lo = r.lo + k * step;
        child.hi = child.lo + step < r.hi ? child.lo + step : r.hi;
        if (child.lo >= child.hi) break;
        FSCHED_SPAWN(count_leaves, child);
    }
    while (k-- > 0) {
        leaves_sum part = FSCHED_SYNC(count_leaves);
        total.sum += part.sum;
        total.count += part.count;
    }
    return total;
}

/* A void task: the child spawned first sets an event that the second waits for, so a
   tree that blocks must offer what it spawned (with one worker, its other fibers run it). */
typedef struct setter_waiter {
    fsched_event *event;
    int role; /* 0: set, 1: wait, 2: nothing */
    uint64_t *done;
} setter_waiter;

FSCHED_VOID_TASK(set_or_wait, setter_waiter, a) {
    if (a.role == 0) {
        CHECK_OK(fsched_event_set(a.event));
    } else if (a.role == 1) {
        CHECK_OK(fsched_event_wait(a.event));
    }
    FSCHED__FETCH_ADD(a.done, (uint64_t)1, FSCHED__RELAXED);
}

FSCHED_VOID_TASK(blocking_pair, uint64_t *, done) {
    fsched_event e;
    setter_waiter set, wait, nothing;
    CHECK_OK(fsched_event_init(&e, 1, 0));
    set.event = wait.event = nothing.event = &e;
    set.done = wait.done = nothing.done = done;
    set.role = 0;
    wait.role = 1;
    nothing.role = 2;
    FSCHED_SPAWN(set_or_wait, nothing); /* a tree's first spawn is offered at once ... */
    FSCHED_SPAWN(set_or_wait, set);     /* ... later ones when asked, or when it blocks */
    FSCHED_CALL(set_or_wait, wait);     /* blocks until the setter ran */
    FSCHED_SYNC(set_or_wait);
    FSCHED_SYNC(set_or_wait);
    CHECK_OK(fsched_event_destroy(&e));
}

/* A tree that starts another tree on the same fiber (a second frame stack), from inside
   a spawned child. */
FSCHED_TASK(long long, nested_fib, int, n) {
    long long inner = -1, x;
    CHECK_OK(FSCHED_RUN(fib_frames, n, &inner));
    FSCHED_SPAWN(fib_frames, n);
    x = FSCHED_SYNC(fib_frames);
    return inner + x;
}

typedef struct frames_case {
    int n;
    long long fib, nested;
    leaves tree;
    leaves_sum counted;
    uint64_t blocked;
} frames_case;

static void frames_root(void *p) {
    frames_case *c = (frames_case *)p;
    int i;
    CHECK_OK(FSCHED_RUN(fib_frames, c->n, &c->fib));
    CHECK_OK(FSCHED_RUN(count_leaves, c->tree, &c->counted));
    for (i = 0; i < 20; i++) CHECK_OK(FSCHED_RUN(blocking_pair, &c->blocked, NULL));
    CHECK_OK(FSCHED_RUN(nested_fib, c->n - 5, &c->nested));
}

static void test_spawn_sync(uint32_t workers) {
    const uint32_t n = 100000 / TEST_SCALE;
    fsched_sched *s = make_sched(workers);
    frames_case c;
    uint32_t i;
    long long r = 0;
    memset(&c, 0, sizeof c);
    c.n = TEST_SCALE > 1 ? 18 : 25;
    c.tree.hits = (uint32_t *)calloc(n, sizeof *c.tree.hits);
    CHECK(c.tree.hits != NULL);
    c.tree.lo = 0;
    c.tree.hi = n;
    c.tree.spin = 20;
    run_in_task(s, frames_root, &c);
    CHECK_EQ_U64(c.fib, fib_serial(c.n));
    CHECK_EQ_U64(c.nested, 2 * fib_serial(c.n - 5));
    CHECK_EQ_U64(c.counted.count, n);
    CHECK_EQ_U64(c.counted.sum, (uint64_t)n * (n - 1) / 2);
    for (i = 0; i < n; i++) CHECK(c.tree.hits[i] == 1);
    CHECK_EQ_U64(c.blocked, 60);
    free(c.tree.hits);
    /* not from a task: on the default scheduler (tests/test_default.c; without threads
       this thread is bound to s) */
    CHECK_OK(FSCHED_RUN(fib_frames, 10, &r));
    CHECK(r == 55);
    CHECK_OK(fsched_destroy(s));
}

/* ---- nqueens(1..12) ---- */

typedef struct queens {
    int n, row;
    uint32_t cols, diag1, diag2;
    long long count;
} queens;

static void queens_solve(void *p);

/* Places queens in rows row..n-1, splitting the columns of this row in two halves. */
typedef struct queens_range {
    const queens *q;
    int lo, hi;
    long long count;
} queens_range;

static void queens_columns(void *p) {
    queens_range *r = (queens_range *)p;
    const queens *q = r->q;
    if (r->hi - r->lo > 1) {
        queens_range left = *r, right = *r;
        left.hi = right.lo = r->lo + (r->hi - r->lo) / 2;
        left.count = right.count = 0;
        CHECK_OK(fsched_join(queens_columns, &left, queens_columns, &right));
        r->count = left.count + right.count;
        return;
    }
    r->count = 0;
    if (r->lo < r->hi) {
        int c = r->lo;
        uint32_t d1 = 1u << (q->row + c), d2 = 1u << (q->row - c + q->n - 1);
        if (!(q->cols & (1u << c)) && !(q->diag1 & d1) && !(q->diag2 & d2)) {
            queens next = *q;
            next.row = q->row + 1;
            next.cols |= 1u << c;
            next.diag1 |= d1;
            next.diag2 |= d2;
            queens_solve(&next);
            r->count = next.count;
        }
    }
}

static void queens_solve(void *p) {
    queens *q = (queens *)p;
    queens_range r;
    if (q->row == q->n) {
        q->count = 1;
        return;
    }
    r.q = q;
    r.lo = 0;
    r.hi = q->n;
    r.count = 0;
    queens_columns(&r);
    q->count = r.count;
}

static void test_nqueens(fsched_sched *s) {
    static const long long known[13] = {0, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200};
    int n, top = TEST_SCALE > 1 ? 10 : 12;
    for (n = 1; n <= top; n++) {
        queens q;
        memset(&q, 0, sizeof q);
        q.n = n;
        run_in_task(s, queens_solve, &q);
        CHECK_EQ_U64(q.count, known[n]);
    }
}

/* ---- parallel sort, checked against qsort ---- */

typedef struct sort_arg {
    int *a;
    size_t n;
} sort_arg;

static int cmp_int(const void *x, const void *y) {
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

static void psort(void *p) {
    sort_arg *s = (sort_arg *)p, left, right;
    int *a = s->a, pivot, t;
    size_t i, j;
    if (s->n < 512) {
        qsort(a, s->n, sizeof *a, cmp_int);
        return;
    }
    pivot = a[s->n / 2];
    i = 0;
    j = s->n - 1;
    for (;;) { /* Hoare partition */
        while (a[i] < pivot) i++;
        while (a[j] > pivot) j--;
        if (i >= j) break;
        t = a[i];
        a[i] = a[j];
        a[j] = t;
        i++;
        j--;
    }
    left.a = a;
    left.n = j + 1;
    right.a = a + j + 1;
    right.n = s->n - j - 1;
    CHECK_OK(fsched_join(psort, &left, psort, &right));
}

static void test_sort(fsched_sched *s) {
    size_t n = 1000000 / TEST_SCALE, i;
    int *a = (int *)malloc(n * sizeof *a), *b = (int *)malloc(n * sizeof *b);
    uint64_t x = 88172645463325252ull;
    sort_arg arg;
    CHECK(a && b);
    for (i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        a[i] = b[i] = (int)(x % 1000000); /* with duplicates */
    }
    arg.a = a;
    arg.n = n;
    run_in_task(s, psort, &arg);
    qsort(b, n, sizeof *b, cmp_int);
    CHECK(memcmp(a, b, n * sizeof *a) == 0);
    free(a);
    free(b);
}

/* ---- an unbalanced tree (UTS-like) with a known node count ---- */

static uint64_t tree_hash(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Children of a node: mostly none or few, sometimes many, never below depth 0. */
static int tree_children(uint64_t id, int depth) {
    uint64_t h = tree_hash(id);
    if (depth <= 0) return 0;
    if (h % 100 < 3) return 8;      /* a rare wide node */
    return (int)(h % 4 == 0 ? 0 : 1 + (h >> 8) % 3);
}

static uint64_t tree_serial(uint64_t id, int depth) {
    uint64_t count = 1;
    int c, n = tree_children(id, depth);
    for (c = 0; c < n; c++) count += tree_serial(id * 31 + (uint64_t)c + 1, depth - 1);
    return count;
}

typedef struct tree_node {
    uint64_t id;
    int depth;
    uint64_t *count;
    fsched_sched *s;
} tree_node;

static void tree_visit(void *p) {
    tree_node *t = (tree_node *)p;
    fsched_wait_group wg;
    tree_node kids[8];
    int c, n = tree_children(t->id, t->depth);
    counter_add(t->count, 1);
    if (!n) return;
    CHECK_OK(fsched_wait_group_init(&wg));
    for (c = 0; c < n; c++) {
        kids[c].id = t->id * 31 + (uint64_t)c + 1;
        kids[c].depth = t->depth - 1;
        kids[c].count = t->count;
        kids[c].s = t->s;
        CHECK_OK(fsched_wait_group_spawn(&wg, t->s, tree_visit, &kids[c]));
    }
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

static void test_tree(fsched_sched *s) {
    tree_node root;
    uint64_t count = 0;
    int depth = TEST_SCALE > 1 ? 13 : 16;
    uint64_t expected = tree_serial(7, depth);
    root.id = 7;
    root.depth = depth;
    root.count = &count;
    root.s = s;
    CHECK(expected > 1000);
    run_in_task(s, tree_visit, &root);
    CHECK_EQ_U64(count, expected);
}

/* ---- every task runs exactly once ---- */

typedef struct once_ctx {
    fsched_sched *s;
    uint32_t *runs;
    uint32_t n;
    fsched_wait_group wg;
} once_ctx;

typedef struct once_item {
    once_ctx *ctx;
    uint32_t index;
} once_item;

static void once_task(void *p) {
    once_item *it = (once_item *)p;
    FSCHED__FETCH_ADD(&it->ctx->runs[it->index], 1u, FSCHED__RELAXED);
    /* every 7th task spawns two more, copying its argument into the task */
    if (it->index % 7 == 0 && it->index * 2 + 2 < it->ctx->n) {
        once_item kid;
        kid.ctx = it->ctx;
        kid.index = it->index * 2 + 1;
        CHECK_OK(fsched_wait_group_add(&it->ctx->wg, 2));
        CHECK_OK(fsched_spawn_copy(it->ctx->s, once_task, &kid, sizeof kid));
        kid.index++;
        CHECK_OK(fsched_spawn_copy(it->ctx->s, once_task, &kid, sizeof kid));
    }
    CHECK_OK(fsched_wait_group_done(&it->ctx->wg));
}

/* Task i (i % 7 == 0) spawns 2i+1 and 2i+2 when 2i+2 < n. */
static int spawned_by_a_task(uint32_t k, uint32_t n) {
    uint32_t parent = (k - 1) / 2;
    return k > 0 && parent % 7 == 0 && 2 * parent + 2 < n;
}

static void test_exactly_once(fsched_sched *s) {
    uint32_t n = 200000 / TEST_SCALE, i;
    once_ctx ctx;
    once_item *items;
    ctx.s = s;
    ctx.n = n;
    ctx.runs = (uint32_t *)calloc(n, sizeof *ctx.runs);
    items = (once_item *)malloc(n * sizeof *items);
    CHECK(ctx.runs && items);
    CHECK_OK(fsched_wait_group_init(&ctx.wg));
    /* from this outside thread, every index that no task spawns */
    for (i = 0; i < n; i++) {
        items[i].ctx = &ctx;
        items[i].index = i;
        if (spawned_by_a_task(i, n)) continue;
        CHECK_OK(fsched_wait_group_add(&ctx.wg, 1));
        CHECK_OK(fsched_spawn(s, once_task, &items[i]));
    }
    CHECK_OK(fsched_wait_group_wait(&ctx.wg));
    for (i = 0; i < n; i++)
        if (ctx.runs[i] != 1) {
            fprintf(stderr, "task %lu ran %lu times\n", (unsigned long)i, (unsigned long)ctx.runs[i]);
            CHECK(!"every task runs exactly once");
        }
    CHECK_OK(fsched_wait_group_destroy(&ctx.wg));
    free(ctx.runs);
    free(items);
}

/* ---- parallel for and reduce ---- */

typedef struct pfor_ctx {
    uint32_t *hits;
    uint64_t calls;
    size_t grain;
} pfor_ctx;

static void pfor_body(void *p, size_t lo, size_t hi) {
    pfor_ctx *c = (pfor_ctx *)p;
    size_t i;
    CHECK(lo < hi);
    CHECK(hi - lo >= 1);
    for (i = lo; i < hi; i++) FSCHED__FETCH_ADD(&c->hits[i], 1u, FSCHED__RELAXED);
    counter_add(&c->calls, 1);
}

typedef struct sum_acc {
    uint64_t sum;
    uint64_t lo, hi; /* the range folded, to check combine's order */
    uint64_t pad[40]; /* larger than nothing, smaller than the inline limit */
} sum_acc;

static void sum_init(void *ctx, void *acc) {
    sum_acc *a = (sum_acc *)acc;
    (void)ctx;
    memset(a, 0, sizeof *a);
    a->lo = a->hi = UINT64_MAX;
}

static void sum_body(void *ctx, size_t lo, size_t hi, void *acc) {
    sum_acc *a = (sum_acc *)acc;
    size_t i;
    (void)ctx;
    for (i = lo; i < hi; i++) a->sum += (uint64_t)i * i;
    if (a->lo == UINT64_MAX) a->lo = lo;
    else CHECK(a->hi == lo); /* folds arrive in order */
    a->hi = hi;
}

static void sum_combine(void *ctx, void *acc, const void *other) {
    sum_acc *a = (sum_acc *)acc;
    const sum_acc *b = (const sum_acc *)other;
    (void)ctx;
    if (b->lo == UINT64_MAX) return;
    if (a->lo == UINT64_MAX) {
        *a = *b;
        return;
    }
    CHECK(a->hi == b->lo); /* left then right, adjacent */
    a->sum += b->sum;
    a->hi = b->hi;
}

/* A larger accumulator: allocated, not on the stack. */
typedef struct big_acc {
    uint64_t sum;
    unsigned char bytes[1000];
} big_acc;

static void big_init(void *ctx, void *acc) {
    (void)ctx;
    memset(acc, 0, sizeof(big_acc));
}
static void big_body(void *ctx, size_t lo, size_t hi, void *acc) {
    (void)ctx;
    for (; lo < hi; lo++) ((big_acc *)acc)->sum += lo;
}
static void big_combine(void *ctx, void *acc, const void *other) {
    (void)ctx;
    ((big_acc *)acc)->sum += ((const big_acc *)other)->sum;
}

typedef struct loops_ctx {
    int dummy;
} loops_ctx;

static void loops_task(void *p) {
    static const size_t grains[] = {0, 1, 7, 1000};
    size_t n = 300000 / TEST_SCALE, i, g;
    pfor_ctx c;
    sum_acc total;
    big_acc big;
    uint64_t expected = 0;
    (void)p;
    c.hits = (uint32_t *)calloc(n, sizeof *c.hits);
    CHECK(c.hits);
    for (g = 0; g < sizeof grains / sizeof grains[0]; g++) {
        memset(c.hits, 0, n * sizeof *c.hits);
        c.calls = 0;
        CHECK_OK(fsched_parallel_for(0, n, grains[g], pfor_body, &c));
        for (i = 0; i < n; i++) CHECK(c.hits[i] == 1);
        CHECK(c.calls >= 1);
        /* offset ranges, and the empty range */
        CHECK_OK(fsched_parallel_for(10, 10, grains[g], pfor_body, &c));
        CHECK_OK(fsched_parallel_for(n / 2, n, grains[g], pfor_body, &c));
        for (i = 0; i < n; i++) CHECK(c.hits[i] == (i >= n / 2 ? 2u : 1u));
    }
    for (i = 0; i < n; i++) expected += (uint64_t)i * i;
    CHECK_OK(fsched_parallel_reduce(0, n, 100, sizeof total, sum_init, sum_body, sum_combine, NULL,
                                    &total));
    CHECK_EQ_U64(total.sum, expected);
    CHECK(total.lo == 0 && total.hi == n);
    CHECK_OK(fsched_parallel_reduce(0, n, 0, sizeof big, big_init, big_body, big_combine, NULL, &big));
    CHECK_EQ_U64(big.sum, (uint64_t)n * (n - 1) / 2);
    free(c.hits);
}

static void test_loops(fsched_sched *s) {
    loops_ctx c;
    run_in_task(s, loops_task, &c);
}

/* ---- tasks that block: events, joins across blocking, sleeps ---- */

typedef struct block_ctx {
    fsched_event go;
    fsched_wait_group started, finished;
    uint64_t after;
} block_ctx;

static void blocker(void *p) {
    block_ctx *b = (block_ctx *)p;
    CHECK_OK(fsched_wait_group_done(&b->started));
    CHECK_OK(fsched_event_wait(&b->go));
    counter_add(&b->after, 1);
    CHECK_OK(fsched_wait_group_done(&b->finished));
}

static void test_blocking(fsched_sched *s, uint32_t tasks) {
    block_ctx b;
    uint32_t i;
    CHECK_OK(fsched_event_init(&b.go, 1, 0));
    CHECK_OK(fsched_wait_group_init(&b.started));
    CHECK_OK(fsched_wait_group_init(&b.finished));
    b.after = 0;
    CHECK_OK(fsched_wait_group_add(&b.started, tasks));
    CHECK_OK(fsched_wait_group_add(&b.finished, tasks));
    for (i = 0; i < tasks; i++) CHECK_OK(fsched_spawn(s, blocker, &b));
    CHECK_OK(fsched_wait_group_wait(&b.started)); /* all suspended (or about to) */
    CHECK(b.after == 0);
    CHECK_OK(fsched_event_set(&b.go));
    CHECK_OK(fsched_wait_group_wait(&b.finished));
    CHECK_EQ_U64(b.after, tasks);
    CHECK_OK(fsched_event_destroy(&b.go));
    CHECK_OK(fsched_wait_group_destroy(&b.started));
    CHECK_OK(fsched_wait_group_destroy(&b.finished));
}

/* Joins whose halves block and sleep at random: the joiner suspends on a stolen half. */
typedef struct rj {
    int depth;
    uint64_t seed;
    uint64_t *leaves;
    size_t *deepest; /* if not NULL: the most stack bytes a node found in use below it */
} rj;

static void random_join(void *p) {
    rj *r = (rj *)p, x, y;
    uint64_t h = tree_hash(r->seed);
    if (r->deepest) {
        fsched_fiber *f = fsched__tls_thread.current;
        char here;
        size_t used = (size_t)(f->stack_hi - (unsigned char *)&here);
        if (f->stack_hi > f->stack_lo && used > *r->deepest) *r->deepest = used;
    }
    if (r->depth == 0) {
        if (h % 16 == 0) fsched_sleep_for(1000 * (h % 200));
        else if (h % 16 == 1) fsched_yield();
        counter_add(r->leaves, 1);
        return;
    }
    x = *r;
    y = *r;
    x.depth = y.depth = r->depth - 1;
    x.seed = r->seed * 2 + 1;
    y.seed = r->seed * 2 + 2;
    CHECK_OK(fsched_join(random_join, &x, random_join, &y));
}

static void test_random_join(fsched_sched *s) {
    uint64_t leaves = 0;
    rj r;
    r.depth = TEST_SCALE > 1 ? 10 : 13;
    r.seed = 1;
    r.leaves = &leaves;
    r.deepest = NULL;
    run_in_task(s, random_join, &r);
    CHECK_EQ_U64(leaves, 1ull << r.depth);
}

/* A joiner whose taken half is not done waits without running other jobs nested on its
   stack. When it ran the jobs of fibers that had run while it was suspended, each of which
   could do the same in turn, with nodes slow against their sleeps (a clock that advances
   100 us a read, one thread running tasks), such chains grew without bound and overflowed
   a 64 KiB stack of the random joins. */
static uint64_t slow_clock(void *user) {
    return FSCHED__FETCH_ADD((uint64_t *)user, (uint64_t)100000, FSCHED__RELAXED) + 100000;
}

static void test_helping_bounded(void) {
    static uint64_t now;
    fsched_desc d;
    fsched_sched *s;
    uint64_t leaves = 0;
    size_t deepest = 0;
    rj r;
    memset(&d, 0, sizeof d);
    d.workers = 1;
    d.stack_size = 64 * 1024;
    d.clock = slow_clock;
    d.clock_user = &now;
    CHECK_OK(fsched_create(&d, &s));
#if defined(FIBERSCHED_NO_THREADS)
    CHECK_OK(fsched_bind(s));
#endif
    r.depth = 13;
    r.seed = 1;
    r.leaves = &leaves;
    r.deepest = &deepest;
    run_in_task(s, random_join, &r);
    CHECK_EQ_U64(leaves, 1ull << r.depth);
    /* half of the stack, then one job's own tree of 13 levels */
    CHECK(deepest < d.stack_size * 3 / 4);
    CHECK_OK(fsched_destroy(s));
}

/* ---- a waiting joiner runs nested only what it waits for ----
   A joiner whose second half is not done must not run other jobs nested on its stack: a
   job that blocks there holds the joiner's continuation beneath it. Here that job waits
   for an event the joiner sets after the join, which deadlocked (the job's wait timed
   out) when the joiner ran it nested: a task queued after the second half, popped by the
   joiner from its own deque (one worker), or a task another worker queued, taken by a
   joiner helping while the second half runs there (two workers). */
typedef struct unrelated {
    fsched_event half_begun, joined; /* the second half began; the joiner went on */
    fsched_wait_group tasks;
    fsched_sched *s;
    int spawn_in_a;    /* the first half queues the task, once the second began */
    uint32_t task_queued, task_begun; /* atomic */
    fsched_result task_wait;
} unrelated;

/* Computes, calling no scheduler function, until *flag is set by another worker (10 s at
   most). Yields the processor now and then: a Valgrind run holds one thread at a time. */
static void unrelated_spin_until(const uint32_t *flag) {
    uint64_t limit = fsched_clock_ns() + 10ull * 1000 * 1000 * 1000;
    unsigned spins = 0;
    while (!FSCHED__LOAD(flag, FSCHED__ACQUIRE)) {
        CHECK(fsched_clock_ns() < limit);
#if TEST_THREADS
        if (++spins % 64 == 0) fsched__os_yield();
#else
        (void)spins;
#endif
    }
}

static void unrelated_task(void *p) {
    unrelated *u = (unrelated *)p;
    FSCHED__STORE(&u->task_begun, 1u, FSCHED__RELEASE);
    u->task_wait = fsched_event_wait_for(&u->joined, 5ull * 1000 * 1000 * 1000);
}

static void unrelated_first(void *p) {
    unrelated *u = (unrelated *)p;
    if (!u->spawn_in_a) { /* returns when the task is there to be taken */
        unrelated_spin_until(&u->task_queued);
        return;
    }
    CHECK_OK(fsched_event_wait(&u->half_begun)); /* the half runs on another fiber */
    CHECK_OK(fsched_wait_group_spawn(&u->tasks, u->s, unrelated_task, u)); /* the newest job */
}

static void unrelated_second(void *p) {
    unrelated *u = (unrelated *)p;
    CHECK_OK(fsched_event_set(&u->half_begun));
    if (u->spawn_in_a) return;
    /* queued on this worker, which computes until someone else took the task: the
       joiner, waiting for this half, is the only one that can */
    CHECK_OK(fsched_wait_group_spawn(&u->tasks, u->s, unrelated_task, u));
    FSCHED__STORE(&u->task_queued, 1u, FSCHED__RELEASE);
    unrelated_spin_until(&u->task_begun);
}

static void unrelated_joiner(void *p) {
    unrelated *u = (unrelated *)p;
    CHECK_OK(fsched_join(unrelated_first, u, unrelated_second, u));
    CHECK_OK(fsched_event_set(&u->joined));
}

static void test_join_runs_no_unrelated_job(uint32_t workers, int spawn_in_a) {
    fsched_sched *s = make_sched(workers);
    int round;
    for (round = 0; round < 20; round++) {
        unrelated u;
        memset(&u, 0, sizeof u);
        u.s = s;
        u.spawn_in_a = spawn_in_a;
        CHECK_OK(fsched_event_init(&u.half_begun, 1, 0));
        CHECK_OK(fsched_event_init(&u.joined, 1, 0));
        CHECK_OK(fsched_wait_group_init(&u.tasks));
        run_in_task(s, unrelated_joiner, &u);
        CHECK_OK(fsched_wait_group_wait(&u.tasks));
        CHECK_RESULT(u.task_wait, FSCHED_OK);
        CHECK_OK(fsched_event_destroy(&u.half_begun));
        CHECK_OK(fsched_event_destroy(&u.joined));
        CHECK_OK(fsched_wait_group_destroy(&u.tasks));
    }
    CHECK_OK(fsched_destroy(s));
}

/* ---- work queued before a long computation is offered to the other workers ----
   A task queues work and then computes without calling the scheduler until that work has
   run: only another worker can run it. A scheduler that kept the work private until the
   task's next call would never finish (the computation gives up after a long limit, so
   the test fails with a message rather than by the watchdog). */

#if defined(TEST_PTHREADS)
#include <sched.h>
#include <time.h>

typedef struct offered {
    uint64_t done;   /* pieces of work that ran */
    uint64_t wanted;
} offered;

static double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Computes until o->wanted pieces ran, touching no scheduler function. */
static void compute_until_done(offered *o) {
    double limit = wall_seconds() + 60.0;
    unsigned spins = 0;
    while (FSCHED__LOAD(&o->done, FSCHED__ACQUIRE) < o->wanted) {
        CHECK(wall_seconds() < limit); /* the queued work never ran */
        if (++spins % 1024 == 0) sched_yield(); /* an oversubscribed machine */
    }
}

/* release: the computing task's acquire load then orders this before its return */
static void offered_piece(void *p) {
    FSCHED__FETCH_ADD(&((offered *)p)->done, (uint64_t)1, FSCHED__RELEASE);
}

static void offered_spawner(void *p) {
    offered *o = (offered *)p;
    uint64_t i;
    for (i = 0; i < o->wanted; i++) CHECK_OK(fsched_spawn(fsched_current(), offered_piece, o));
    compute_until_done(o);
}

static void offered_first_half(void *p) { compute_until_done((offered *)p); }

/* A group's task is queued as a join's second half: offered at once when none of the
   spawner's work is public (its deque answers the request its empty public part makes). */
static void offered_group_spawner(void *p) {
    offered *o = (offered *)p;
    fsched_wait_group wg;
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, fsched_current(), offered_piece, o));
    compute_until_done(o);
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

static void offered_joiner(void *p) {
    CHECK_OK(fsched_join(offered_first_half, p, offered_piece, p));
}

static void test_offered_while_computing(void) {
    fsched_sched *s = make_sched(2);
    int round;
    for (round = 0; round < 50; round++) {
        offered o;
        memset(&o, 0, sizeof o);
        o.wanted = 1 + (uint64_t)round % 5;
        run_in_task(s, offered_spawner, &o);
        CHECK_EQ_U64(o.done, o.wanted);
        memset(&o, 0, sizeof o);
        o.wanted = 1;
        run_in_task(s, offered_joiner, &o);
        CHECK_EQ_U64(o.done, 1);
        memset(&o, 0, sizeof o);
        o.wanted = 1;
        run_in_task(s, offered_group_spawner, &o);
        CHECK_EQ_U64(o.done, 1);
        if (round % 10 == 9) fsched_sleep_for(2000000); /* let the other worker fall asleep */
    }
    CHECK_OK(fsched_destroy(s));
}

/* ---- a group's tasks are never stranded in a deque nobody looks at ----
   A task's spawns into a group stay on its worker's private ring until a thief asks;
   a bound thread's own code, which may block in the OS, queues them where other workers
   take them at once; a task that polls its group with a zero timeout runs them itself.
   The group's count stays exact while tasks leave the ring for other workers (many
   spawns before one wait; two spawners on one group, one of them holding its lease). */

static void group_piece(void *p) { counter_add((uint64_t *)p, 1); }

static void group_wait_from_thread(void *p) {
    CHECK_OK(fsched_wait_group_wait_for((fsched_wait_group *)p, 30ull * 1000000000ull));
}

static void group_polling_spawner(void *p) {
    uint64_t *ran = (uint64_t *)p;
    fsched_wait_group wg;
    double limit = wall_seconds() + 30.0;
    int i;
    CHECK_OK(fsched_wait_group_init(&wg));
    for (i = 0; i < 8; i++) CHECK_OK(fsched_wait_group_spawn(&wg, fsched_current(), group_piece, ran));
    while (fsched_wait_group_wait_for(&wg, 0) == FSCHED_ERR_TIMEOUT)
        CHECK(wall_seconds() < limit); /* the group's tasks never ran */
    CHECK_EQ_U64(FSCHED__LOAD(ran, FSCHED__RELAXED), 8);
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

typedef struct group_many {
    fsched_wait_group *wg;
    uint64_t ran;
    int spawns;
} group_many;

static void group_many_spawner(void *p) {
    group_many *g = (group_many *)p;
    int i;
    for (i = 0; i < g->spawns; i++)
        CHECK_OK(fsched_wait_group_spawn(g->wg, fsched_current(), group_piece, &g->ran));
}

static void group_many_waiter(void *p) {
    group_many *g = (group_many *)p;
    fsched_wait_group wg;
    CHECK_OK(fsched_wait_group_init(&wg));
    g->wg = &wg;
    group_many_spawner(g);
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_EQ_U64(FSCHED__LOAD(&g->ran, FSCHED__RELAXED), (uint64_t)g->spawns);
    CHECK_OK(fsched_wait_group_destroy(&wg)); /* nothing counted any more */
}

/* A task on a bound thread's fiber spawns into a group; the thread then returns to its
   own code and blocks in the OS while a plain thread waits for the group. */
typedef struct group_bound {
    fsched_sched *s;
    fsched_wait_group wg;
    fsched_event ran_here;
    uint64_t ran;
    uint32_t bound_index;
    int on_bound;
} group_bound;

static void group_bound_task(void *p) {
    group_bound *b = (group_bound *)p;
    int i;
    if (fsched_worker_index() == (int)b->bound_index) {
        b->on_bound = 1;
        for (i = 0; i < 10; i++) CHECK_OK(fsched_wait_group_spawn(&b->wg, b->s, group_piece, &b->ran));
    }
    CHECK_OK(fsched_event_set(&b->ran_here));
}

static void test_group_spawned_on_bound_fiber(void) {
    group_bound b;
    int tries;
    memset(&b, 0, sizeof b);
    b.s = make_sched(1);
    CHECK_OK(fsched_bind(b.s));
    b.bound_index = (uint32_t)fsched_worker_index();
    CHECK_OK(fsched_wait_group_init(&b.wg));
    CHECK_OK(fsched_event_init(&b.ran_here, 0, 0));
    for (tries = 0; !b.on_bound; tries++) { /* until the bound thread's loop runs it */
        CHECK(tries < 100000);
        CHECK_OK(fsched_wait_group_add(&b.wg, 1)); /* the group is not done meanwhile */
        CHECK_OK(fsched_spawn(b.s, group_bound_task, &b));
        CHECK_OK(fsched_event_wait(&b.ran_here));
        CHECK_OK(fsched_wait_group_done(&b.wg));
    }
    thread_join(thread_run(group_wait_from_thread, &b.wg)); /* this thread blocks in the OS */
    CHECK_EQ_U64(b.ran, 10);
    CHECK_OK(fsched_wait_group_destroy(&b.wg));
    CHECK_OK(fsched_event_destroy(&b.ran_here));
    CHECK_OK(fsched_unbind());
    CHECK_OK(fsched_destroy(b.s));
}

/* A chain of tasks, each spawning the next into one group and polling it once: a poll
   runs nothing, so the chain never nests on one stack. */
typedef struct group_chain {
    fsched_wait_group *wg;
    uint64_t left;
} group_chain;

static void group_chain_link(void *p) {
    group_chain *c = (group_chain *)p;
    if (c->left == 0) return;
    c->left--;
    CHECK_OK(fsched_wait_group_spawn(c->wg, fsched_current(), group_chain_link, c));
    (void)fsched_wait_group_wait_for(c->wg, 0);
}

/* A group whose count the program took to INT64_MAX while a slot's tasks are leased:
   those tasks still run, and leave the ring counted past it, without failing. A spawn
   made while the slot holds the lease counts nothing and runs; once the lease went back
   (its last task left the ring or ran), a spawn must count its own unit and is refused
   with FSCHED_ERR_INVALID_ARGUMENT. Either way, no task is lost and none runs twice. */
static void group_near_max(void *p) {
    uint64_t *ran = (uint64_t *)p;
    fsched_wait_group wg;
    int64_t big;
    uint64_t spawned = 10;
    int i;
    CHECK_OK(fsched_wait_group_init(&wg));
    for (i = 0; i < 10; i++) CHECK_OK(fsched_wait_group_spawn(&wg, fsched_current(), group_piece, ran));
    /* up to INT64_MAX (the count only falls meanwhile: tasks that left end elsewhere) */
    big = INT64_MAX - (int64_t)FSCHED__LOAD(&wg.count, FSCHED__RELAXED);
    CHECK_OK(fsched_wait_group_add(&wg, big));
    for (i = 0; i < 1000; i++) { /* past the ring: most leave it */
        fsched_result r = fsched_wait_group_spawn(&wg, fsched_current(), group_piece, ran);
        if (r != FSCHED_OK) { /* the lease went back: the count is full from now on */
            CHECK_RESULT(r, FSCHED_ERR_INVALID_ARGUMENT);
            break;
        }
        spawned++;
    }
    CHECK_OK(fsched_wait_group_add(&wg, -big));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_EQ_U64(FSCHED__LOAD(ran, FSCHED__RELAXED), spawned);
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

static void test_group_spawns_not_stranded(void) {
    fsched_sched *s = make_sched(2);
    int round;
    for (round = 0; round < 20; round++) {
        uint64_t ran = 0;
        fsched_wait_group wg;
        group_many g[2];
        int i;
        /* a bound thread spawns, then blocks in the OS until a plain thread's wait ends */
        CHECK_OK(fsched_bind(s));
        CHECK_OK(fsched_wait_group_init(&wg));
        for (i = 0; i < 4; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, group_piece, &ran));
        thread_join(thread_run(group_wait_from_thread, &wg));
        CHECK_EQ_U64(ran, 4);
        CHECK_OK(fsched_unbind());
        CHECK_OK(fsched_wait_group_destroy(&wg));
        ran = 0;
        run_in_task(s, group_polling_spawner, &ran);
        memset(g, 0, sizeof g);
        g[0].spawns = 1000 + 500 * (round % 20); /* past the ring: tasks leave it */
        run_in_task(s, group_many_waiter, &g[0]);
        /* two spawners on one group, waited for from outside */
        CHECK_OK(fsched_wait_group_init(&wg));
        for (i = 0; i < 2; i++) {
            g[i].wg = &wg;
            g[i].ran = 0;
            g[i].spawns = 3000;
            CHECK_OK(fsched_wait_group_spawn(&wg, s, group_many_spawner, &g[i]));
        }
        CHECK_OK(fsched_wait_group_wait(&wg));
        CHECK_EQ_U64(g[0].ran + g[1].ran, 6000);
        CHECK_OK(fsched_wait_group_destroy(&wg));
        ran = 0;
        run_in_task(s, group_near_max, &ran);
    }
    CHECK_OK(fsched_destroy(s));
    test_group_spawned_on_bound_fiber();
    {
        group_chain c;
        fsched_wait_group wg;
        s = make_sched(1);
        CHECK_OK(fsched_wait_group_init(&wg));
        c.wg = &wg;
        c.left = 100000; /* nested, they would overflow the fiber's stack */
        CHECK_OK(fsched_wait_group_spawn(&wg, s, group_chain_link, &c));
        CHECK_OK(fsched_wait_group_wait(&wg));
        CHECK_EQ_U64(c.left, 0);
        CHECK_OK(fsched_wait_group_destroy(&wg));
        CHECK_OK(fsched_destroy(s));
    }
}
#endif

/* ---- shutdown with work in flight, and tasks spawning during it ---- */

typedef struct flight {
    fsched_sched *s;
    uint64_t *done;
    int generations;
} flight;

static void flight_task(void *p) {
    flight f = *(flight *)p;
    if (f.generations > 0) { /* spawns while fsched_destroy drains */
        f.generations--;
        CHECK_OK(fsched_spawn_copy(f.s, flight_task, &f, sizeof f));
        CHECK_OK(fsched_spawn_copy(f.s, flight_task, &f, sizeof f));
    }
    if (tree_hash((uint64_t)(uintptr_t)p) % 8 == 0) fsched_sleep_for(100000);
    counter_add(f.done, 1);
}

static void test_shutdown_in_flight(uint32_t workers) {
    fsched_sched *s = make_sched(workers);
    uint64_t done = 0;
    flight f;
    int i;
    f.s = s;
    f.done = &done;
    f.generations = 6;
    for (i = 0; i < 20; i++) CHECK_OK(fsched_spawn_copy(s, flight_task, &f, sizeof f));
    CHECK_OK(fsched_destroy(s)); /* returns once all of them, and their children, ran */
    CHECK_EQ_U64(done, 20ull * ((1u << 7) - 1));
}

/* ---- several schedulers at once, and bound threads ---- */

#if defined(TEST_PTHREADS)
typedef struct multi {
    fsched_sched *s;
    int n;
} multi;

static void *multi_thread(void *p) {
    multi *m = (multi *)p;
    fib_arg a;
    a.n = m->n;
    a.result = 0;
    run_in_task(m->s, fib_join, &a);
    CHECK_EQ_U64(a.result, fib_serial(m->n));
    return NULL;
}

static void test_several_schedulers(void) {
    multi m[3];
    pthread_t th[3];
    int i;
    for (i = 0; i < 3; i++) {
        m[i].s = make_sched((uint32_t)i + 1);
        m[i].n = 20 + i;
        CHECK(pthread_create(&th[i], NULL, multi_thread, &m[i]) == 0);
    }
    for (i = 0; i < 3; i++) CHECK(pthread_join(th[i], NULL) == 0);
    for (i = 0; i < 3; i++) CHECK_OK(fsched_destroy(m[i].s));
}

/* A thread binds, joins and waits as a participant, and unbinds. */
typedef struct bound_ctx {
    fsched_sched *s;
    uint64_t leaves;
} bound_ctx;

static void *bound_thread(void *p) {
    bound_ctx *b = (bound_ctx *)p;
    fib_arg a;
    rj r;
    CHECK_OK(fsched_bind(b->s));
    CHECK(fsched_current() == b->s);
    CHECK(fsched_worker_index() >= (int)fsched_worker_count(b->s));
    CHECK_RESULT(fsched_bind(b->s), FSCHED_ERR_WRONG_STATE);
    a.n = 18;
    fib_join(&a); /* joins from a bound thread, outside any task */
    CHECK_EQ_U64(a.result, fib_serial(18));
    r.depth = 8;
    r.seed = 99;
    r.leaves = &b->leaves;
    r.deepest = NULL;
    random_join(&r);
    test_blocking(b->s, 50);
    CHECK_OK(fsched_unbind());
    CHECK(fsched_current() == NULL);
    CHECK_RESULT(fsched_unbind(), FSCHED_ERR_WRONG_STATE);
    return NULL;
}

/* A task that blocked on a bound thread's fibers resumes there, at the thread's next wait,
   or when the thread unbinds: it is delayed while the thread runs code of its own, never
   lost. (Single-threaded, so that the bound thread is the only one that runs tasks.) */
typedef struct stranded {
    fsched_event go;
    fsched_wait_group wg;
    int blocked, done;
} stranded;

static void stranded_task(void *p) {
    stranded *x = (stranded *)p;
    __atomic_store_n(&x->blocked, 1, __ATOMIC_RELEASE);
    CHECK_OK(fsched_event_wait(&x->go));
    __atomic_store_n(&x->done, 1, __ATOMIC_RELEASE);
}

static void *stranded_setter(void *p) {
    CHECK_OK(fsched_event_set(&((stranded *)p)->go));
    return NULL;
}

static void test_bound_thread_blocked_tasks(void) {
    fsched_desc d;
    fsched_sched *s;
    stranded x;
    pthread_t t;
    int unbind_first;
    memset(&d, 0, sizeof d);
    d.single_threaded = 1;
    for (unbind_first = 0; unbind_first < 2; unbind_first++) {
        memset(&x, 0, sizeof x);
        CHECK_OK(fsched_create(&d, &s));
        CHECK_OK(fsched_bind(s));
        CHECK_OK(fsched_event_init(&x.go, 0, 0));
        CHECK_OK(fsched_wait_group_init(&x.wg));
        CHECK_OK(fsched_wait_group_spawn(&x.wg, s, stranded_task, &x));
        while (!__atomic_load_n(&x.blocked, __ATOMIC_ACQUIRE)) fsched_yield(); /* runs it */
        CHECK(pthread_create(&t, NULL, stranded_setter, &x) == 0);
        CHECK(pthread_join(t, NULL) == 0); /* ready now, but this thread is away */
        CHECK(!__atomic_load_n(&x.done, __ATOMIC_ACQUIRE));
        if (unbind_first) CHECK_OK(fsched_unbind()); /* runs what is left on its slot */
        else CHECK_OK(fsched_wait_group_wait(&x.wg));  /* the next wait runs it */
        CHECK(__atomic_load_n(&x.done, __ATOMIC_ACQUIRE));
        if (!unbind_first) CHECK_OK(fsched_unbind());
        CHECK_OK(fsched_destroy(s));
        CHECK_OK(fsched_wait_group_destroy(&x.wg));
        CHECK_OK(fsched_event_destroy(&x.go));
    }
}

static void test_bound_threads(void) {
    fsched_sched *s = make_sched(2);
    bound_ctx b[3];
    pthread_t th[3];
    int i;
    for (i = 0; i < 3; i++) {
        b[i].s = s;
        b[i].leaves = 0;
        CHECK(pthread_create(&th[i], NULL, bound_thread, &b[i]) == 0);
    }
    for (i = 0; i < 3; i++) {
        CHECK(pthread_join(th[i], NULL) == 0);
        CHECK_EQ_U64(b[i].leaves, 256);
    }
    CHECK_OK(fsched_destroy(s));
}

/* Outside threads spawn while the scheduler is destroyed: each spawn either runs or is
   refused with FSCHED_ERR_WRONG_STATE, and nothing is lost. A task holds the drain open
   until every racer has seen the refusal, since a scheduler must not be touched once
   fsched_destroy has returned. */
typedef struct racer_shared {
    fsched_sched *s;
    uint64_t ran;
    uint64_t racing;
    fsched_event all_refused;
} racer_shared;

typedef struct racer {
    racer_shared *sh;
    uint64_t accepted;
} racer;

static void racer_task(void *p) { counter_add(&((racer_shared *)p)->ran, 1); }

static void racer_holder(void *p) {
    CHECK_OK(fsched_event_wait(&((racer_shared *)p)->all_refused));
}

static void *racer_thread(void *p) {
    racer *r = (racer *)p;
    for (;;) {
        fsched_result res = fsched_spawn(r->sh->s, racer_task, r->sh);
        if (res == FSCHED_OK) {
            r->accepted++;
            continue;
        }
        CHECK(res == FSCHED_ERR_WRONG_STATE);
        break;
    }
    if (FSCHED__FETCH_SUB(&r->sh->racing, 1u, FSCHED__ACQ_REL) == 1)
        CHECK_OK(fsched_event_set(&r->sh->all_refused));
    return NULL;
}

static void test_destroy_race(void) {
    racer_shared sh;
    racer r[2];
    pthread_t th[2];
    int i;
    sh.s = make_sched(2);
    sh.ran = 0;
    sh.racing = 2;
    CHECK_OK(fsched_event_init(&sh.all_refused, 1, 0));
    CHECK_OK(fsched_spawn(sh.s, racer_holder, &sh));
    for (i = 0; i < 2; i++) {
        r[i].sh = &sh;
        r[i].accepted = 0;
        CHECK(pthread_create(&th[i], NULL, racer_thread, &r[i]) == 0);
    }
    while (FSCHED__LOAD(&sh.ran, FSCHED__RELAXED) < 1000) fsched_sleep_for(100000);
    CHECK_OK(fsched_destroy(sh.s));
    for (i = 0; i < 2; i++) CHECK(pthread_join(th[i], NULL) == 0);
    CHECK_EQ_U64(sh.ran, r[0].accepted + r[1].accepted);
    CHECK_OK(fsched_event_destroy(&sh.all_refused));
}
#endif

/* ---- single-threaded mode: tasks run on the bound thread's fibers while it waits ---- */

typedef struct st_ctx {
    fsched_event ping, pong;
    int rounds;
    int log[8];
    int n;
} st_ctx;

static void st_ponger(void *p) {
    st_ctx *c = (st_ctx *)p;
    int i;
    for (i = 0; i < c->rounds; i++) {
        CHECK_OK(fsched_event_wait(&c->ping));
        if (c->n < 8) c->log[c->n++] = 2;
        CHECK_OK(fsched_event_set(&c->pong));
    }
}

/* Keeps the last message logged, for checks of what a refusal says. */
static char last_logged[256];
static void keep_message(fsched_log_level level, const char *message, void *user) {
    (void)level;
    ++*(int *)user;
    strncpy(last_logged, message, sizeof last_logged - 1);
}

#if TEST_THREADS
/* A single-threaded scheduler that no thread is bound to: a wait on a group whose tasks
   wait there, from a thread not bound to it, is refused (it would hang: nothing runs
   them); with a thread bound and waiting, the same wait ends; and the group, reused for
   tasks of a scheduler with workers, is waited for as any other. */
typedef struct unattended {
    fsched_sched *s;
    fsched_event bound, done;
    int ran; /* atomic */
} unattended;

static void unattended_task(void *arg) { FSCHED__FETCH_ADD(&((unattended *)arg)->ran, 1, FSCHED__RELAXED); }

static void unattended_slow_task(void *arg) {
    fsched_sleep_for(100000000u);
    unattended_task(arg);
}

static void unattended_binder(void *arg) {
    unattended *u = (unattended *)arg;
    CHECK_OK(fsched_bind(u->s));
    CHECK_OK(fsched_event_set(&u->bound));
    CHECK_OK(fsched_event_wait(&u->done)); /* runs queued tasks meanwhile */
    CHECK_OK(fsched_unbind());
}

static void test_unattended(void) {
    unattended u;
    fsched_sched *pool;
    fsched_desc d;
    fsched_wait_group wg;
    test_thread t;
    int logged = 0;
    uint64_t t0;
    memset(&u, 0, sizeof u);
    test_desc_init(&d);
    d.single_threaded = 1;
    d.logger.func = keep_message;
    d.logger.user = &logged;
    CHECK_OK(fsched_create(&d, &u.s));
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, u.s, unattended_task, &u));
#if FSCHED__DEBUG
    CHECK(logged == 1 && strstr(last_logged, "no thread is bound")); /* said at the spawn */
#endif
    t0 = fsched_clock_ns();
    CHECK_RESULT(fsched_wait_group_wait(&wg), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_wait_group_wait_for(&wg, 10000000000ull), FSCHED_ERR_WRONG_STATE);
    CHECK(fsched_clock_ns() - t0 < 5000000000ull); /* at once, not at the timeout */
#if FSCHED__DEBUG
    CHECK(logged == 3 && strstr(last_logged, "nothing would run them"));
#endif
    CHECK(LOAD(&u.ran) == 0);
    /* a thread bound and waiting runs them: the same wait ends */
    CHECK_OK(fsched_event_init(&u.bound, 1, 0));
    CHECK_OK(fsched_event_init(&u.done, 1, 0));
    t = thread_run(unattended_binder, &u);
    CHECK_OK(fsched_event_wait(&u.bound));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK(LOAD(&u.ran) == 1);
    CHECK_OK(fsched_event_set(&u.done));
    thread_join(t);
    /* unbound again; a group whose tasks all ran waits for nothing */
    CHECK_OK(fsched_wait_group_wait(&wg));
    /* the group reused for a scheduler with workers: its wait is not refused for the
       single-threaded one (the task is still counted when the wait begins) */
    test_desc_init(&d);
    d.workers = 1;
    CHECK_OK(fsched_create(&d, &pool));
    CHECK_OK(fsched_wait_group_spawn(&wg, pool, unattended_slow_task, &u));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK(LOAD(&u.ran) == 2);
    CHECK_OK(fsched_destroy(pool));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_event_destroy(&u.bound));
    CHECK_OK(fsched_event_destroy(&u.done));
    CHECK_OK(fsched_destroy(u.s));
}
#endif

static void test_single_threaded(void) {
    fsched_sched *s;
    fsched_desc d;
    st_ctx c;
    fib_arg a;
    int i;
    memset(&d, 0, sizeof d);
    d.single_threaded = 1;
    CHECK_OK(fsched_create(&d, &s));
    CHECK(fsched_worker_count(s) == 0);
    CHECK_OK(fsched_bind(s));
    CHECK_OK(fsched_event_init(&c.ping, 0, 0));
    CHECK_OK(fsched_event_init(&c.pong, 0, 0));
    c.rounds = 100;
    c.n = 0;
    CHECK_OK(fsched_spawn(s, st_ponger, &c));
    for (i = 0; i < c.rounds; i++) { /* the task runs only while this thread waits */
        if (c.n < 8) c.log[c.n++] = 1;
        CHECK_OK(fsched_event_set(&c.ping));
        CHECK_OK(fsched_event_wait(&c.pong));
    }
    CHECK(c.log[0] == 1 && c.log[1] == 2 && c.log[2] == 1 && c.log[3] == 2);
    a.n = 20;
    fib_join(&a); /* joins in sequence on one thread, through the same deque */
    CHECK_EQ_U64(a.result, fib_serial(20));
    test_nqueens(s);
    test_tree(s);
    test_blocking(s, TEST_SCALE > 4 ? 100 : 300); /* each holds a fiber stack meanwhile */
    CHECK_OK(fsched_event_destroy(&c.ping));
    CHECK_OK(fsched_event_destroy(&c.pong));
    CHECK_OK(fsched_destroy(s)); /* the bound thread destroys: allowed, it is unbound after */
    CHECK(fsched_current() == NULL);
}

#if TEST_THREADS
/* ---- work from outside is not starved by a worker's own stream of work ----
   The only thread of a single-threaded scheduler runs a task that spawns a task of its own
   and yields, again and again: each yield finds that new task first. A task spawned from
   another thread meanwhile must still run. */

typedef struct starve_ctx {
    fsched_sched *s;
    uint32_t outside_ran;
    uint32_t rounds;
} starve_ctx;

static void starve_noop(void *p) { (void)p; }

static void starve_outside_task(void *p) { STORE(&((starve_ctx *)p)->outside_ran, 1u); }

static void starve_busy(void *p) {
    starve_ctx *c = (starve_ctx *)p;
    while (!LOAD(&c->outside_ran) && c->rounds < 2000000u) {
        CHECK_OK(fsched_spawn(c->s, starve_noop, NULL));
        fsched_yield();
        c->rounds++;
    }
}

static void starve_spawner(void *p) {
    starve_ctx *c = (starve_ctx *)p;
    CHECK_OK(fsched_spawn(c->s, starve_outside_task, c));
}

static void test_outside_not_starved(void) {
    fsched_desc d;
    starve_ctx c;
    fsched_wait_group wg;
    test_thread t;
    test_desc_init(&d);
    d.single_threaded = 1;
    memset(&c, 0, sizeof c);
    CHECK_OK(fsched_create(&d, &c.s));
    CHECK_OK(fsched_bind(c.s));
    CHECK_OK(fsched_wait_group_init(&wg));
    t = thread_run(starve_spawner, &c);
    thread_join(t); /* queued from outside before the busy task starts */
    CHECK_OK(fsched_wait_group_spawn(&wg, c.s, starve_busy, &c));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK(LOAD(&c.outside_ran) == 1u);
    CHECK(c.rounds < 1000u); /* it ran within a few dozen of the busy task's rounds */
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_destroy(c.s));
}
#endif

/* ---- every task runs on a fiber of the chosen size, never on a thread's own stack ---- */

typedef struct probe_counts {
    uint64_t ran, off_fiber;
    size_t min_size;
} probe_counts;

static void stack_probe(void *p) {
    probe_counts *o = (probe_counts *)p;
    volatile char here = 0;
    void *lo;
    size_t size;
    if (fsched_fiber_stack(fsched_fiber_current(), &lo, &size) != FSCHED_OK ||
        size < o->min_size || (const char *)&here < (const char *)lo ||
        (const char *)&here >= (const char *)lo + size)
        counter_add(&o->off_fiber, 1);
    counter_add(&o->ran, 1);
    (void)here;
}

static void test_tasks_on_fibers(void) {
    fsched_desc d;
    fsched_sched *s;
    fsched_wait_group wg;
    probe_counts o;
    uint32_t i;
    memset(&d, 0, sizeof d);
    memset(&o, 0, sizeof o);
    d.stack_size = o.min_size = 96 * 1024;
    d.workers = 2;
#if defined(FIBERSCHED_NO_OS)
    d.clock = test_clock;
    d.clock_user = &test_clock_now;
#endif
    CHECK_OK(fsched_create(&d, &s));
    CHECK_OK(fsched_wait_group_init(&wg));
#if !defined(FIBERSCHED_NO_THREADS)
    /* the first tasks of fresh workers */
    for (i = 0; i < 200; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, stack_probe, &o));
    CHECK_OK(fsched_wait_group_wait(&wg));
#endif
    /* tasks a bound thread runs while it waits */
    CHECK_OK(fsched_bind(s));
    for (i = 0; i < 200; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, stack_probe, &o));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_unbind());
    /* tasks fsched_destroy runs while it drains */
    for (i = 0; i < 200; i++) CHECK_OK(fsched_spawn(s, stack_probe, &o));
    CHECK_OK(fsched_destroy(s));
    CHECK_EQ_U64(o.ran, TEST_THREADS ? 600 : 400);
    CHECK_EQ_U64(o.off_fiber, 0);
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

/* ---- deep recursion through wait groups, on the default stacks ----
   A chain of tasks, each waiting for its child in a wait group: a wait runs its own
   child inline, so a whole chain can nest on one fiber (the depth of the binomial UTS
   tree T3, 1,572, on the defaults of 64-bit targets, 1 MiB and more; where the default
   is smaller, as on 32-bit ones, a depth in proportion, with a margin; test_deep.c
   counts the whole tree). */

#if FIBERSCHED_DEFAULT_STACK_SIZE >= 1024u * 1024u && TEST_SCALE > 1
#define DEEP_CHAIN 400 /* sanitizers' frames are several times larger */
#elif FIBERSCHED_DEFAULT_STACK_SIZE >= 1024u * 1024u
#define DEEP_CHAIN 1572
#else
#define DEEP_CHAIN ((long)(1572ull * FIBERSCHED_DEFAULT_STACK_SIZE / (1024u * 1024u) * 3 / 4))
#endif

static void deep_chain(void *p) {
    long depth = (long)(intptr_t)p;
    fsched_wait_group wg;
    if (depth == 0) return;
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, fsched_current(), deep_chain,
                                     (void *)(intptr_t)(depth - 1)));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

static void test_deep_chain(uint32_t workers) {
    fsched_sched *s = make_sched(workers);
    run_in_task(s, deep_chain, (void *)(intptr_t)DEEP_CHAIN);
    CHECK_OK(fsched_destroy(s));
}

/* ---- bad input ---- */

static void bad_task(void *p) { (void)p; }

static void bad_in_task(void *p) {
    fsched_sched *s = (fsched_sched *)p;
    CHECK_RESULT(fsched_destroy(s), FSCHED_ERR_WRONG_STATE); /* not from its own task */
    CHECK_RESULT(fsched_bind(s), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_unbind(), FSCHED_ERR_WRONG_STATE); /* workers cannot unbind */
    CHECK_RESULT(fsched_join(NULL, NULL, bad_task, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_parallel_for(5, 4, 1, pfor_body, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK(fsched_current() == s);
    CHECK(fsched_worker_index() >= 0);
}

static void quiet(fsched_log_level level, const char *message, void *user) {
    (void)level;
    (void)message;
    ++*(int *)user;
}

/* An allocator that refuses what no machine has, instead of asking malloc (which a
   sanitizer may answer by stopping the program). */
static void *modest_alloc(size_t size, size_t align, void *user) {
    (void)user;
    return size > ((size_t)1 << 30) ? NULL : fsched__default_alloc(size, align, NULL);
}
static void modest_free(void *ptr, size_t size, size_t align, void *user) {
    (void)user;
    fsched__default_free(ptr, size, align, NULL);
}

/* A desc out of range is refused at creation, with a log line (debug builds) saying why. */
static void test_bad_desc(void) {
    fsched_sched *s = NULL;
    fsched_desc d;
    int logged = 0;
    memset(&d, 0, sizeof d);
    d.logger.func = keep_message;
    d.logger.user = &logged;
    d.allocator.alloc = modest_alloc; /* heap stacks (no OS) come from it */
    d.allocator.free = modest_free;
    d.single_threaded = 1;
    d.workers = 4; /* a contradiction, not a request to ignore */
    CHECK_RESULT(fsched_create(&d, &s), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK(s == NULL);
#if FSCHED__DEBUG
    CHECK(logged == 1 && strstr(last_logged, "single_threaded"));
#endif
    d.single_threaded = 0;
    d.workers = 0;
    d.max_bound_threads = FSCHED_MAX_WORKERS + 1;
    CHECK_RESULT(fsched_create(&d, &s), FSCHED_ERR_INVALID_ARGUMENT);
#if FSCHED__DEBUG
    CHECK(logged == 2 && strstr(last_logged, "4096"));
#endif
    d.max_bound_threads = 0;
    /* more than an address space: refused at creation, not at the first spawn */
    d.workers = 1;
    d.stack_size = sizeof(size_t) == 8 ? (size_t)1 << (sizeof(size_t) * 8 - 17) : (size_t)0xc0000000u;
    {
        fsched_result r = fsched_create(&d, &s);
        CHECK(r == FSCHED_ERR_OUT_OF_MEMORY || r == FSCHED_ERR_INVALID_ARGUMENT);
        CHECK(s == NULL);
    }
#if FSCHED__DEBUG
    CHECK(logged == 3 && strstr(last_logged, "stack"));
#endif
    d.workers = 0;
    d.single_threaded = 1; /* a scheduler without workers takes its stack at creation too */
    CHECK(fsched_create(&d, &s) != FSCHED_OK && s == NULL);
#if FSCHED__DEBUG
    CHECK(logged == 4 && strstr(last_logged, "stack"));
#endif
}

/* A destroyed scheduler: every call is refused with a code, without reading its memory
   (which faults once freed: the allocator makes it inaccessible). */
static void test_use_after_destroy(void) {
#if defined(TEST_GUARD_ALLOCATOR)
    fsched_sched *s;
    fsched_desc d;
    int logged = 0;
    uint64_t n;
    memset(&d, 0, sizeof d);
    d.workers = 1;
    d.allocator.alloc = test_guard_alloc;
    d.allocator.free = test_guard_free;
    d.logger.func = quiet;
    d.logger.user = &logged;
    CHECK_OK(fsched_create(&d, &s));
    CHECK_OK(fsched_destroy(s));
    CHECK_RESULT(fsched_destroy(s), FSCHED_ERR_INVALID_ARGUMENT); /* twice */
    CHECK_RESULT(fsched_spawn(s, bad_task, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_spawn_copy(s, bad_task, &n, sizeof n), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_bind(s), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK(fsched_worker_count(s) == 0);
    CHECK_RESULT(fsched_trace_count(s, &n, NULL), FSCHED_ERR_INVALID_ARGUMENT);
#endif
}

static void test_bad_input(void) {
    fsched_sched *s;
    fsched_desc d;
    int logged = 0;
    sum_acc acc;
    memset(&d, 0, sizeof d);
    d.logger.func = quiet;
    d.logger.user = &logged;
    CHECK_RESULT(fsched_create(&d, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    d.max_bound_threads = 100000;
    CHECK_RESULT(fsched_create(&d, &s), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK(s == NULL);
    d.max_bound_threads = 0;
    d.workers = 2;
    CHECK_OK(fsched_create(&d, &s));
    CHECK_RESULT(fsched_spawn(NULL, bad_task, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_spawn(s, NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_spawn_copy(s, bad_task, NULL, 8), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_wait_group_spawn(NULL, s, bad_task, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    /* outside any scheduler: on the default scheduler (tests/test_default.c) */
    CHECK(fsched_current() == NULL);
    CHECK(fsched_worker_index() == -1);
    CHECK_OK(fsched_join(bad_task, NULL, bad_task, NULL));
    CHECK_RESULT(fsched_join(bad_task, NULL, NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_parallel_for(10, 0, 1, pfor_body, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_parallel_for(0, 10, 1, NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_parallel_reduce(0, 10, 1, sizeof acc, sum_init, sum_body, sum_combine, NULL,
                                    &acc));
    CHECK_EQ_U64(acc.sum, 285);
    CHECK_RESULT(fsched_parallel_reduce(0, 10, 1, 0, sum_init, sum_body, sum_combine, NULL, &acc),
                 FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_unbind(), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_bind(NULL), FSCHED_ERR_INVALID_ARGUMENT);
#if defined(FIBERSCHED_NO_THREADS)
    {   /* without threads, a wait outside the scheduler could never end: it says so */
        fsched_wait_group wg;
        CHECK_OK(fsched_wait_group_init(&wg));
        CHECK_OK(fsched_wait_group_spawn(&wg, s, bad_task, NULL));
        CHECK_RESULT(fsched_wait_group_wait(&wg), FSCHED_ERR_WRONG_STATE);
        CHECK_OK(fsched_bind(s));
        CHECK_OK(fsched_wait_group_wait(&wg)); /* bound: the task runs while we wait */
        CHECK_OK(fsched_wait_group_destroy(&wg));
    }
#endif
    run_in_task(s, bad_in_task, s);
    CHECK(fsched_worker_count(NULL) == 0);
    CHECK_OK(fsched_destroy(NULL));
#if FSCHED__DEBUG
    CHECK(logged >= 5); /* misuse was reported through the scheduler's logger */
#endif
    CHECK_OK(fsched_destroy(s));
}

/* ---- out of memory: an error code, never an abort, a hang or lost work ---- */

typedef struct oom_alloc {
    uint64_t calls;      /* allocations attempted */
    uint64_t live;       /* blocks not yet freed */
    uint64_t fail_at;    /* fail the allocation with this number (1-based); 0: never */
    size_t fail_from;    /* fail every allocation of at least this size; 0: never */
} oom_alloc;

static void *oom_alloc_fn(size_t size, size_t align, void *user) {
    oom_alloc *o = (oom_alloc *)user;
    void *p;
    uint64_t n = FSCHED__FETCH_ADD(&o->calls, 1u, FSCHED__RELAXED) + 1;
    if ((o->fail_at && n == o->fail_at) ||
        (FSCHED__LOAD(&o->fail_from, FSCHED__RELAXED) &&
         size >= FSCHED__LOAD(&o->fail_from, FSCHED__RELAXED)))
        return NULL;
    p = fsched__default_alloc(size, align, NULL);
    if (p) FSCHED__FETCH_ADD(&o->live, 1u, FSCHED__RELAXED);
    return p;
}

static void oom_free_fn(void *ptr, size_t size, size_t align, void *user) {
    oom_alloc *o = (oom_alloc *)user;
    FSCHED__FETCH_SUB(&o->live, 1u, FSCHED__RELAXED);
    fsched__default_free(ptr, size, align, NULL);
}

typedef struct oom_wait {
    fsched_event go;
    fsched_wait_group done;
    uint64_t woke;
} oom_wait;

static void oom_waiter(void *p) {
    oom_wait *o = (oom_wait *)p;
    CHECK_OK(fsched_event_wait(&o->go));
    counter_add(&o->woke, 1);
    CHECK_OK(fsched_wait_group_done(&o->done));
}

static void oom_setter(void *p) {
    oom_wait *o = (oom_wait *)p;
    CHECK_OK(fsched_event_set(&o->go));
    CHECK_OK(fsched_wait_group_done(&o->done));
}

typedef struct bounded_wait {
    fsched_event go;
    fsched_wait_group done;
    uint64_t n, started, woke, refused;
} bounded_wait;

/* The last task to start sets the event, whatever order they run in. */
static void bounded_waiter(void *p) {
    bounded_wait *b = (bounded_wait *)p;
    fsched_result r;
    if (counter_add(&b->started, 1) == b->n) CHECK_OK(fsched_event_set(&b->go));
    r = fsched_event_wait(&b->go);
    CHECK(r == FSCHED_OK || r == FSCHED_ERR_OUT_OF_MEMORY);
    counter_add(r == FSCHED_OK ? &b->woke : &b->refused, 1);
    CHECK_OK(fsched_wait_group_done(&b->done));
}

static void bounded_setter(void *p) {
    bounded_wait *b = (bounded_wait *)p;
    CHECK_OK(fsched_event_set(&b->go));
    CHECK_OK(fsched_wait_group_done(&b->done));
}

/* A parallel loop whose split cannot be queued (the deque full, and no memory to grow it)
   runs both halves on the caller, in order. It ran only the right half: the left one was
   lost. The loop is called under 300 nested joins, each leaving its second half queued,
   with every allocation failing. */
typedef struct oom_loop {
    oom_alloc *o;
    uint32_t depth;
    unsigned char seen[1000]; /* calls per index */
} oom_loop;

static void oom_loop_body(void *ctx, size_t lo, size_t hi) {
    oom_loop *l = (oom_loop *)ctx;
    for (; lo < hi; lo++) l->seen[lo]++;
}

static void oom_loop_nothing(void *p) { (void)p; }

static void oom_loop_deep(void *p) {
    oom_loop *l = (oom_loop *)p;
    if (l->depth-- > 0) {
        CHECK_OK(fsched_join(oom_loop_deep, l, oom_loop_nothing, NULL));
        return;
    }
    CHECK_OK(fsched_parallel_for(0, sizeof l->seen, 1, oom_loop_body, l));
}

static void oom_loop_start(void *p) {
    oom_loop *l = (oom_loop *)p;
    FSCHED__STORE(&l->o->fail_from, (size_t)1, FSCHED__RELAXED); /* nothing more */
    oom_loop_deep(l);
    FSCHED__STORE(&l->o->fail_from, (size_t)0, FSCHED__RELAXED);
}

static void test_loop_split_without_memory(void) {
    fsched_desc d;
    fsched_sched *s;
    oom_alloc o;
    static oom_loop l;
    size_t i;
    test_desc_init(&d);
    memset(&o, 0, sizeof o);
    memset(&l, 0, sizeof l);
    d.workers = 1;
    d.stack_size = 1024 * 1024; /* 300 nested joins, with a sanitizer's larger frames */
    d.allocator.alloc = oom_alloc_fn;
    d.allocator.free = oom_free_fn;
    d.allocator.user = &o;
    CHECK_OK(fsched_create(&d, &s));
#if defined(FIBERSCHED_NO_THREADS)
    CHECK_OK(fsched_bind(s));
#endif
    l.o = &o;
    l.depth = 300; /* more than the deque's private ring holds */
    run_in_task(s, oom_loop_start, &l);
    for (i = 0; i < sizeof l.seen; i++) CHECK_EQ_U64(l.seen[i], 1);
    CHECK_OK(fsched_destroy(s));
    CHECK_EQ_U64(o.live, 0);
}

/* Thousands of tasks wait on one event while no fiber stack can be had: each wait runs
   the next task inline, nested on the same small stack, but only while half of that
   stack is free; a wait that could nest no further fails with FSCHED_ERR_OUT_OF_MEMORY
   (nested without a bound, they overflowed the stack). Every task ends, those that
   waited are woken, and with memory back the scheduler works as before. */
static void test_inline_waits_bounded(void) {
    const uint64_t n = TEST_SCALE > 4 ? 1000 : 3000;
    fsched_desc d;
    fsched_sched *s;
    oom_alloc o;
    bounded_wait b;
    uint64_t i;
    test_desc_init(&d);
    memset(&o, 0, sizeof o);
    memset(&b, 0, sizeof b);
    d.workers = 2;
    d.stack_kind = FSCHED_STACK_HEAP;
    d.stack_size = 16 * 1024;
    d.allocator.alloc = oom_alloc_fn;
    d.allocator.free = oom_free_fn;
    d.allocator.user = &o;
    CHECK_OK(fsched_create(&d, &s));
#if !TEST_THREADS
    CHECK_OK(fsched_bind(s)); /* the only thread runs the tasks while it waits */
#endif
    FSCHED__STORE(&o.fail_from, (size_t)16 * 1024, FSCHED__RELAXED); /* no more stacks */
    CHECK_OK(fsched_event_init(&b.go, 1, 0));
    CHECK_OK(fsched_wait_group_init(&b.done));
    CHECK_OK(fsched_wait_group_add(&b.done, (int64_t)n));
    b.n = n;
    for (i = 0; i < n; i++) CHECK_OK(fsched_spawn(s, bounded_waiter, &b));
    CHECK_OK(fsched_wait_group_wait(&b.done));
    CHECK_EQ_U64(LOAD(&b.woke) + LOAD(&b.refused), n);
    CHECK(LOAD(&b.refused) > 0);   /* the bound was reached */
    CHECK(LOAD(&b.woke) > 0);      /* and the nested waits were woken */
    FSCHED__STORE(&o.fail_from, (size_t)0, FSCHED__RELAXED);
    CHECK_OK(fsched_event_reset(&b.go));
    CHECK_OK(fsched_wait_group_add(&b.done, 2));
    b.woke = 0;
    b.n = 0; /* no waiter sets it: the setter does */
    CHECK_OK(fsched_spawn(s, bounded_waiter, &b));
    CHECK_OK(fsched_spawn(s, bounded_setter, &b));
    CHECK_OK(fsched_wait_group_wait(&b.done));
    CHECK_EQ_U64(LOAD(&b.woke), 1);
#if !TEST_THREADS
    CHECK_OK(fsched_unbind());
#endif
    CHECK_OK(fsched_destroy(s));
    CHECK_EQ_U64(o.live, 0);
    CHECK_OK(fsched_event_destroy(&b.go));
    CHECK_OK(fsched_wait_group_destroy(&b.done));
}

/* Many tasks blocked at once on slab stacks (no mapping per stack), or small ones (several
   to a page): every one is released and runs to its end; the next burst reuses the
   stacks. A task's record goes back while it runs, unless its argument lives there (a
   copy, kept in the record or beside it): the copies of the later bursts are intact
   after the wait. */
typedef struct blocked_many {
    fsched_event go;
    fsched_wait_group started, done;
    uint64_t woke;
} blocked_many;

static void blocked_many_task(void *arg) {
    blocked_many *b = (blocked_many *)arg;
    CHECK_OK(fsched_wait_group_done(&b->started));
    CHECK_OK(fsched_event_wait(&b->go));
    FSCHED__FETCH_ADD(&b->woke, (uint64_t)1, FSCHED__RELAXED);
    CHECK_OK(fsched_wait_group_done(&b->done));
}

/* The argument of a copying spawn: `words` words of a pattern after the shared state. */
typedef struct blocked_copy {
    blocked_many *b;
    uint64_t id, words[12];
} blocked_copy;

static void blocked_copy_task(void *arg, size_t words) {
    const blocked_copy *c = (const blocked_copy *)arg;
    size_t i;
    blocked_many_task(c->b);
    for (i = 0; i < words; i++) CHECK(c->words[i] == c->id * 31u + i);
}

static void blocked_inline_task(void *arg) { blocked_copy_task(arg, 4); } /* in the record */
static void blocked_heap_task(void *arg) { blocked_copy_task(arg, 12); }  /* beside it */

/* Spawns burst `round` of tasks: by reference, then copies of either kind. */
static void blocked_spawn(fsched_sched *s, blocked_many *b, int round, uint64_t id) {
    blocked_copy c;
    size_t i;
    c.b = b;
    c.id = id;
    for (i = 0; i < 12; i++) c.words[i] = id * 31u + i;
    if (round == 0) CHECK_OK(fsched_spawn(s, blocked_many_task, b));
    else if (round == 1)
        CHECK_OK(fsched_spawn_copy(s, blocked_inline_task, &c, offsetof(blocked_copy, words[4])));
    else CHECK_OK(fsched_spawn_copy(s, blocked_heap_task, &c, sizeof c));
}

/* Small stacks of the smallest size: enough for these tasks and the scheduler's frames
   in any build but the sanitizers' (whose frames at -O0 outgrow even the largest small
   stack: test_fiber runs small stacks there). */
#if defined(FSCHED__ASAN) || defined(FSCHED__TSAN)
#define TEST_SMALL_STACKS 0
#else
#define TEST_SMALL_STACKS 1
#endif

/* On two workers, and on six: the setter gathers the fibers of more workers than it
   batches for at a time. */
static void test_blocked_on_stacks(uint32_t workers, fsched_stack_kind kind) {
    const uint64_t n = TEST_SCALE > 4 ? 500 : 20000 / TEST_SCALE / TEST_FIBER_SCALE;
    fsched_desc d;
    fsched_sched *s;
    blocked_many b;
    uint64_t i;
    int round;
    test_desc_init(&d);
    d.workers = workers;
    d.stack_kind = kind;
    d.stack_size = kind == FSCHED_STACK_SMALL ? 0 : 16 * 1024;
    if (kind == FSCHED_STACK_SMALL && !TEST_SMALL_STACKS) return;
#if !defined(FSCHED__HAVE_PAGES)
    CHECK_RESULT(fsched_create(&d, &s), FSCHED_ERR_UNSUPPORTED);
    return;
#endif
    CHECK_OK(fsched_create(&d, &s));
#if !TEST_THREADS
    CHECK_OK(fsched_bind(s));
#endif
    memset(&b, 0, sizeof b);
    CHECK_OK(fsched_wait_group_init(&b.started));
    CHECK_OK(fsched_wait_group_init(&b.done));
    for (round = 0; round < 3; round++) {
        CHECK_OK(fsched_event_init(&b.go, 1, 0));
        FSCHED__STORE(&b.woke, (uint64_t)0, FSCHED__RELAXED);
        CHECK_OK(fsched_wait_group_add(&b.started, (int64_t)n));
        CHECK_OK(fsched_wait_group_add(&b.done, (int64_t)n));
        for (i = 0; i < n; i++) blocked_spawn(s, &b, round, i);
        CHECK_OK(fsched_wait_group_wait(&b.started)); /* all of them blocked, or about to */
        CHECK_EQ_U64(LOAD(&b.woke), 0);
        CHECK_OK(fsched_event_set(&b.go));
        CHECK_OK(fsched_wait_group_wait(&b.done));
        CHECK_EQ_U64(LOAD(&b.woke), n);
        CHECK_OK(fsched_event_destroy(&b.go));
    }
#if !TEST_THREADS
    CHECK_OK(fsched_unbind());
#endif
    CHECK_OK(fsched_destroy(s));
    CHECK_OK(fsched_wait_group_destroy(&b.started));
    CHECK_OK(fsched_wait_group_destroy(&b.done));
}

static void test_out_of_memory(void) {
    fsched_desc d;
    fsched_sched *s;
    oom_alloc o;
    oom_wait w;
    uint64_t k, i;
    memset(&d, 0, sizeof d);
    d.workers = 2;
    d.stack_kind = FSCHED_STACK_HEAP; /* stacks from the allocator too */
    d.stack_size = 256 * 1024; /* waits run tasks inline, nested, when no fiber can be had */
    d.allocator.alloc = oom_alloc_fn;
    d.allocator.free = oom_free_fn;
    d.allocator.user = &o;
    /* creation fails cleanly at each of its allocations, leaving nothing behind */
    for (k = 1;; k++) {
        fsched_result r;
        memset(&o, 0, sizeof o);
        o.fail_at = k;
        r = fsched_create(&d, &s);
        if (r == FSCHED_OK) {
            CHECK(o.calls < k); /* no allocation left to fail */
            CHECK_OK(fsched_destroy(s));
            CHECK_EQ_U64(o.live, 0);
            break;
        }
        CHECK(r == FSCHED_ERR_OUT_OF_MEMORY);
        CHECK(s == NULL);
        CHECK_EQ_U64(o.live, 0);
        CHECK(k < 1000);
    }
    /* blocking tasks that cannot get a fiber wait by running other tasks inline */
    memset(&o, 0, sizeof o);
    CHECK_OK(fsched_create(&d, &s));
#if defined(FIBERSCHED_NO_THREADS)
    CHECK_OK(fsched_bind(s)); /* the only thread runs the tasks while it waits */
#endif
    FSCHED__STORE(&o.fail_from, (size_t)16 * 1024, FSCHED__RELAXED); /* no more stacks */
    CHECK_OK(fsched_event_init(&w.go, 1, 0));
    CHECK_OK(fsched_wait_group_init(&w.done));
    w.woke = 0;
    CHECK_OK(fsched_wait_group_add(&w.done, 41));
    for (i = 0; i < 40; i++) CHECK_OK(fsched_spawn(s, oom_waiter, &w));
    CHECK_OK(fsched_spawn(s, oom_setter, &w));
    CHECK_OK(fsched_wait_group_wait(&w.done));
    CHECK_EQ_U64(w.woke, 40);
    /* spawning with no memory at all fails with a code (a task-slab refill from a bound
       thread, or a task from an outside thread) */
    FSCHED__STORE(&o.fail_from, (size_t)1, FSCHED__RELAXED);
    for (i = 0; i < 200; i++) {
        fsched_result r = fsched_spawn(s, bad_task, NULL);
        if (r == FSCHED_ERR_OUT_OF_MEMORY) break;
        CHECK_OK(r); /* a bound thread may still have free task records */
    }
    CHECK(i < 200);
    FSCHED__STORE(&o.fail_from, (size_t)0, FSCHED__RELAXED);
    CHECK_OK(fsched_destroy(s));
    CHECK_EQ_U64(o.live, 0);
    CHECK_OK(fsched_event_destroy(&w.go));
    CHECK_OK(fsched_wait_group_destroy(&w.done));
}

#if TEST_THREADS
/* ---- worker threads: start and stop hooks, names ---- */

#if defined(__linux__)
#include <sys/syscall.h>
#endif

static FSCHED__THREAD_LOCAL int hook_index = -1; /* set by the start hook */

typedef struct hook_seen {
    int started[4], stopped[4]; /* atomic: hook calls per worker */
    int stop_elsewhere;         /* atomic: a stop hook on a thread another start named */
    int task_unset;             /* atomic: a task on a worker whose start hook had not run */
    char names[4][16];          /* the threads' names, as their start hooks read them */
} hook_seen;

static void hook_start(void *user, uint32_t worker) {
    hook_seen *h = (hook_seen *)user;
    if (worker >= 4) return;
    FSCHED__FETCH_ADD(&h->started[worker], 1, FSCHED__RELAXED);
    hook_index = (int)worker;
#if defined(__linux__)
    syscall(SYS_prctl, 16 /* PR_GET_NAME */, h->names[worker], 0, 0, 0);
#endif
}

static void hook_stop(void *user, uint32_t worker) {
    hook_seen *h = (hook_seen *)user;
    if (worker >= 4) return;
    FSCHED__FETCH_ADD(&h->stopped[worker], 1, FSCHED__RELAXED);
    if (hook_index != (int)worker) FSCHED__STORE(&h->stop_elsewhere, 1, FSCHED__RELAXED);
}

static void hook_task(void *arg) {
    hook_seen *h = (hook_seen *)arg;
    if (hook_index != fsched_worker_index()) FSCHED__STORE(&h->task_unset, 1, FSCHED__RELAXED);
}

/* Runs tasks on a scheduler of `workers` workers named `name`; checks that each worker's
   start hook ran once, before its tasks, on its own thread, and its stop hook once, on
   the same thread; returns what was seen. */
static hook_seen *hooks_run(uint32_t workers, const char *name) {
    static hook_seen h;
    fsched_desc d;
    fsched_sched *s;
    fsched_wait_group wg;
    uint32_t i;
    memset(&h, 0, sizeof h);
    test_desc_init(&d);
    d.workers = workers;
    d.worker_start = hook_start;
    d.worker_stop = hook_stop;
    d.worker_user = &h;
    d.worker_name = name;
    CHECK_OK(fsched_create(&d, &s));
    CHECK_OK(fsched_wait_group_init(&wg));
    for (i = 0; i < 200; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, hook_task, &h));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_destroy(s));
    for (i = 0; i < 4; i++) {
        CHECK(LOAD(&h.started[i]) == (i < workers));
        CHECK(LOAD(&h.stopped[i]) == (i < workers));
    }
    CHECK(!LOAD(&h.stop_elsewhere));
    CHECK(!LOAD(&h.task_unset));
    return &h;
}

/* ---- counts: fsched_get_stats ---- */

typedef struct stats_block {
    fsched_event go;
    fsched_wait_group started;
} stats_block;

static void stats_blocked_task(void *arg) {
    stats_block *b = (stats_block *)arg;
    CHECK_OK(fsched_wait_group_done(&b->started));
    CHECK_OK(fsched_event_wait(&b->go));
}

static void stats_empty_task(void *arg) { (void)arg; }

static void test_stats(void) {
    fsched_desc d;
    fsched_sched *s;
    fsched_stats a, b;
    fsched_wait_group wg;
    stats_block blk;
    int i, round;
    test_desc_init(&d);
    d.workers = 2;
    CHECK_OK(fsched_create(&d, &s));
    CHECK_RESULT(fsched_get_stats(s, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_get_stats(NULL, &a), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_get_stats(s, &a));
    /* 200 tasks blocked at once hold 200 fibers */
    CHECK_OK(fsched_event_init(&blk.go, 1, 0));
    CHECK_OK(fsched_wait_group_init(&blk.started));
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_add(&blk.started, 200));
    for (i = 0; i < 200; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, stats_blocked_task, &blk));
    CHECK_OK(fsched_wait_group_wait(&blk.started));
    CHECK_OK(fsched_get_stats(s, &b));
    CHECK(b.fibers >= 200);
    CHECK(b.jobs_run >= a.jobs_run + 200);
    CHECK(b.stacks_allocated >= 200);
    CHECK_OK(fsched_event_set(&blk.go));
    CHECK_OK(fsched_wait_group_wait(&wg));
    /* idle workers sleep; work from outside wakes one. Whether a given spawn finds a
       worker asleep depends on timing: a few rounds make it certain enough */
    for (round = 0; round < 50; round++) {
        CHECK_OK(fsched_get_stats(s, &a));
        if (a.sleeps > b.sleeps && a.wakeups > b.wakeups) break;
        fsched_sleep_for(20000000); /* 20 ms: long enough for both workers to sleep */
        for (i = 0; i < 10; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, stats_empty_task, NULL));
        CHECK_OK(fsched_wait_group_wait(&wg));
    }
    CHECK(a.sleeps > b.sleeps && a.wakeups > b.wakeups);
    CHECK(a.fibers < b.fibers); /* the blocked ones ended */
    CHECK(a.stacks_cached > 0);  /* and the stacks beyond what slots keep wait in the pool */
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_wait_group_destroy(&blk.started));
    CHECK_OK(fsched_event_destroy(&blk.go));
    CHECK_OK(fsched_destroy(s));
}

static void test_worker_hooks(void) {
    hook_seen *h = hooks_run(3, "pool-");
#if defined(__linux__)
    CHECK(!strcmp(h->names[0], "pool-0") && !strcmp(h->names[2], "pool-2"));
#endif
    h = hooks_run(1, NULL);
#if defined(__linux__)
    CHECK(!strcmp(h->names[0], "fsched-w0"));
#endif
    h = hooks_run(2, "a-prefix-of-20-bytes"); /* cut to what a name holds */
#if defined(__linux__)
    CHECK(!strcmp(h->names[1], "a-prefix-of-20-"));
#endif
    (void)h;
}

/* A stop hook that spawns into its own scheduler, which is being destroyed: the spawn
   must be refused, not queued on a worker whose loop has ended (where it never ran). */
typedef struct stop_spawn {
    fsched_sched *s;
    int refused, other; /* atomic: spawns refused, and any other answer */
    int ran;            /* atomic: tasks of those spawns that ran */
} stop_spawn;

static void stop_spawn_task(void *arg) { FSCHED__FETCH_ADD(&((stop_spawn *)arg)->ran, 1, FSCHED__RELAXED); }

static void stop_spawn_hook(void *user, uint32_t worker) {
    stop_spawn *st = (stop_spawn *)user;
    fsched_result r = fsched_spawn(LOAD(&st->s), stop_spawn_task, st);
    (void)worker;
    FSCHED__FETCH_ADD(r == FSCHED_ERR_WRONG_STATE ? &st->refused : &st->other, 1, FSCHED__RELAXED);
    if (fsched_current()) FSCHED__FETCH_ADD(&st->other, 1, FSCHED__RELAXED);
}

/* A start hook that spawns while the scheduler may already be draining (destroyed right
   after its creation): the task runs, or the spawn is refused; never accepted and lost. */
static void start_spawn_hook(void *user, uint32_t worker) {
    stop_spawn *st = (stop_spawn *)user;
    fsched_sched *s;
    fsched_result r;
    if (worker != 0) return;
    while (!(s = LOAD(&st->s))) {
    }
    r = fsched_spawn(s, stop_spawn_task, st);
    FSCHED__FETCH_ADD(r == FSCHED_OK ? &st->other : &st->refused, 1, FSCHED__RELAXED);
    if (fsched_current()) FSCHED__FETCH_ADD(&st->other, 10, FSCHED__RELAXED);
}

static void test_spawn_from_start_hook(void) {
    static stop_spawn st;
    fsched_desc d;
    fsched_sched *s;
    int round;
    for (round = 0; round < 100; round++) {
        memset(&st, 0, sizeof st);
        test_desc_init(&d);
        d.workers = 2;
        d.worker_start = start_spawn_hook;
        d.worker_user = &st;
        CHECK_OK(fsched_create(&d, &s));
        FSCHED__STORE(&st.s, s, FSCHED__RELEASE);
        CHECK_OK(fsched_destroy(s));
        CHECK_EQ_U64(LOAD(&st.other) + LOAD(&st.refused), 1); /* one spawn, from the thread */
        CHECK_EQ_U64(LOAD(&st.ran), LOAD(&st.other));      /* accepted: it ran */
    }
}

static void test_spawn_from_stop_hook(void) {
    static stop_spawn st;
    fsched_desc d;
    fsched_sched *s;
    int round;
    for (round = 0; round < 20; round++) {
        memset(&st, 0, sizeof st);
        test_desc_init(&d);
        d.workers = 2;
        d.worker_stop = stop_spawn_hook;
        d.worker_user = &st;
        CHECK_OK(fsched_create(&d, &s));
        FSCHED__STORE(&st.s, s, FSCHED__RELEASE);
        CHECK_OK(fsched_destroy(s));
        CHECK_EQ_U64(LOAD(&st.refused), 2);
        CHECK_EQ_U64(LOAD(&st.other), 0);
        CHECK_EQ_U64(LOAD(&st.ran), 0);
    }
}

/* The worker hooks run on a thread that is the scheduler's worker all the same: a destroy
   of its own scheduler there would free what the thread goes on to use (it returned
   FSCHED_OK, then the worker's loop ran on freed memory), and a bind would be overwritten
   as the worker starts, or outlive the thread (either scheduler could never be destroyed
   again). Both are refused; another scheduler may still be destroyed from there. */
typedef struct hook_misuse {
    fsched_sched *s, *other, *doomed;
    int wrong; /* atomic: answers other than the expected */
    int done;  /* atomic: hooks that ran their calls */
} hook_misuse;

static void hook_misuse_expect(hook_misuse *m, fsched_result got, fsched_result want) {
    if (got != want) {
        fprintf(stderr, "a worker hook's call: %s, not %s\n", fsched_result_string(got),
                fsched_result_string(want));
        FSCHED__FETCH_ADD(&m->wrong, 1, FSCHED__RELAXED);
    }
}

static void misusing_start(void *user, uint32_t worker) {
    hook_misuse *m = (hook_misuse *)user;
    fsched_sched *s;
    if (worker != 0) return;
    while (!(s = LOAD(&m->s))) fsched__os_yield();
    hook_misuse_expect(m, fsched_destroy(s), FSCHED_ERR_WRONG_STATE);
    hook_misuse_expect(m, fsched_bind(s), FSCHED_ERR_WRONG_STATE);
    hook_misuse_expect(m, fsched_bind(m->other), FSCHED_ERR_WRONG_STATE);
    hook_misuse_expect(m, fsched_destroy(m->doomed), FSCHED_OK); /* not its own */
    FSCHED__FETCH_ADD(&m->done, 1, FSCHED__RELAXED);
}

static void misusing_stop(void *user, uint32_t worker) {
    hook_misuse *m = (hook_misuse *)user;
    if (worker != 0) return;
    hook_misuse_expect(m, fsched_destroy(m->s), FSCHED_ERR_WRONG_STATE);
    hook_misuse_expect(m, fsched_bind(m->other), FSCHED_ERR_WRONG_STATE);
    FSCHED__FETCH_ADD(&m->done, 1, FSCHED__RELAXED);
}

static void test_worker_hook_misuse(void) {
    static hook_misuse m;
    fsched_desc d;
    fsched_sched *s;
    int round;
    for (round = 0; round < 10; round++) {
        memset(&m, 0, sizeof m);
        CHECK_OK(fsched_create(NULL, &m.other));
        CHECK_OK(fsched_create(NULL, &m.doomed));
        test_desc_init(&d);
        d.workers = 2;
        d.worker_start = misusing_start;
        d.worker_stop = misusing_stop;
        d.worker_user = &m;
        CHECK_OK(fsched_create(&d, &s));
        FSCHED__STORE(&m.s, s, FSCHED__RELEASE);
        while (LOAD(&m.done) < 1) fsched__os_yield();
        CHECK_OK(fsched_destroy(s));
        CHECK_EQ_U64(LOAD(&m.done), 2);
        CHECK_EQ_U64(LOAD(&m.wrong), 0);
        CHECK_OK(fsched_destroy(m.other)); /* nothing left bound to it */
    }
}
#endif

#if defined(__linux__) && TEST_THREADS
#include <sys/syscall.h>
#include <unistd.h>

/* ---- workers pinned to CPUs ---- */

#define PIN_WORDS (1024 / (8 * sizeof(unsigned long)))

/* The CPUs the calling thread may run on: how many, and the lowest n of them in cpus. */
static int pin_mask(uint32_t *cpus, int max) {
    unsigned long mask[PIN_WORDS];
    long bytes;
    int n = 0;
    uint32_t c;
    memset(mask, 0, sizeof mask);
    bytes = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
    CHECK(bytes > 0);
    for (c = 0; c < (uint32_t)bytes * 8u; c++)
        if ((mask[c / (8 * sizeof(unsigned long))] >> (c % (8 * sizeof(unsigned long)))) & 1u) {
            if (n < max) cpus[n] = c;
            n++;
        }
    return n;
}

typedef struct pin_seen {
    uint32_t expected[8]; /* the CPU of worker i */
    int seen[8];          /* atomic: a task ran on worker i */
    int wrong;            /* atomic: a task ran where its worker may not */
} pin_seen;

static void pin_probe(void *arg) {
    pin_seen *p = (pin_seen *)arg;
    uint32_t cpu = 0;
    int i = fsched_worker_index();
    if (i < 0 || i >= 8 || pin_mask(&cpu, 1) != 1 || cpu != p->expected[i])
        FSCHED__STORE(&p->wrong, 1, FSCHED__RELAXED);
    else
        FSCHED__STORE(&p->seen[i], 1, FSCHED__RELAXED);
    /* busy, not suspended: the worker stays in this probe for a while, so that the other
       workers take the next ones (however late the kernel runs them) */
    {
        uint64_t until = fsched_clock_ns() + 500000;
        while (fsched_clock_ns() < until) {
        }
    }
}

/* Runs probes on s until every one of its `workers` workers has run one (each checks
   that its worker may run on exactly the expected CPU). */
static void pin_check(fsched_sched *s, uint32_t workers, pin_seen *p) {
    int all = 0;
    uint32_t i;
    uint64_t limit = fsched_clock_ns() + 20ull * 1000 * 1000 * 1000;
    while (!all && fsched_clock_ns() < limit) {
        fsched_wait_group wg;
        CHECK_OK(fsched_wait_group_init(&wg));
        for (i = 0; i < 4 * workers; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, pin_probe, p));
        CHECK_OK(fsched_wait_group_wait(&wg));
        CHECK_OK(fsched_wait_group_destroy(&wg));
        for (all = 1, i = 0; i < workers; i++) all &= FSCHED__LOAD(&p->seen[i], FSCHED__RELAXED);
    }
    CHECK(!FSCHED__LOAD(&p->wrong, FSCHED__RELAXED));
    CHECK(all);
}

/* pin_workers: worker i on the i-th CPU this thread may use, wrapping around (three
   workers on a two-CPU machine); worker_cpus: the CPUs named; CPUs the thread may not
   use and an empty list are refused. */
static void test_pinned_workers(void) {
    uint32_t allowed[8], one, bad[1] = {1000000};
    int n = pin_mask(allowed, 8), i;
    fsched_desc d;
    fsched_sched *s;
    pin_seen p;
    memset(&d, 0, sizeof d);
    d.workers = 3;
    d.pin_workers = 1;
    memset(&p, 0, sizeof p);
    for (i = 0; i < 3; i++) p.expected[i] = allowed[i % (n < 8 ? n : 8)];
    CHECK_OK(fsched_create(&d, &s));
    pin_check(s, 3, &p);
    CHECK_OK(fsched_destroy(s));

    one = allowed[n > 1 ? 1 : 0];
    d.workers = 2;
    d.pin_workers = 0;
    d.worker_cpus = &one; /* implies pinning */
    d.worker_cpu_count = 1;
    memset(&p, 0, sizeof p);
    p.expected[0] = p.expected[1] = one;
    CHECK_OK(fsched_create(&d, &s));
    pin_check(s, 2, &p);
    CHECK_OK(fsched_destroy(s));

    d.worker_cpus = bad;
    CHECK_RESULT(fsched_create(&d, &s), FSCHED_ERR_INVALID_ARGUMENT);
    d.worker_cpus = allowed;
    d.worker_cpu_count = 0;
    CHECK_RESULT(fsched_create(&d, &s), FSCHED_ERR_INVALID_ARGUMENT);
}
#endif

int main(void) {
    uint32_t w;
    test_watchdog(900);
    test_bad_input();
    test_bad_desc();
    test_use_after_destroy();
    for (w = 1; w <= 4; w *= 2) test_fib(w, TEST_SCALE > 1 ? 20 : 24);
    for (w = 1; w <= 4; w *= 2) test_spawn_sync(w);
    {
        fsched_sched *s = make_sched(4); /* more workers than cores: real preemption */
        test_nqueens(s);
        test_sort(s);
        test_tree(s);
        test_exactly_once(s);
        test_loops(s);
        test_blocking(s, 2000 / TEST_SCALE);
        test_random_join(s);
        CHECK_OK(fsched_destroy(s));
    }
    test_shutdown_in_flight(3);
    test_shutdown_in_flight(1);
#if defined(TEST_PTHREADS)
    test_offered_while_computing();
    test_group_spawns_not_stranded();
    test_several_schedulers();
    test_bound_threads();
    test_bound_thread_blocked_tasks();
    test_destroy_race();
#endif
    test_single_threaded();
#if TEST_THREADS
    test_outside_not_starved();
    test_unattended();
#endif
    test_tasks_on_fibers();
    test_deep_chain(1);
    test_deep_chain(2);
    test_out_of_memory();
    test_inline_waits_bounded();
    test_loop_split_without_memory();
    test_helping_bounded();
    test_join_runs_no_unrelated_job(1, 1);
#if TEST_THREADS
    test_join_runs_no_unrelated_job(2, 0);
#endif
    test_blocked_on_stacks(2, FSCHED_STACK_SLAB);
    test_blocked_on_stacks(6, FSCHED_STACK_SLAB);
    test_blocked_on_stacks(2, FSCHED_STACK_SMALL);
    test_blocked_on_stacks(6, FSCHED_STACK_SMALL);
#if defined(__linux__) && TEST_THREADS
    test_pinned_workers();
#endif
#if TEST_THREADS
    test_worker_hooks();
    test_spawn_from_stop_hook();
    test_spawn_from_start_hook();
    test_worker_hook_misuse();
    test_stats();
#endif
    printf("test_sched: ok\n");
    return 0;
}
