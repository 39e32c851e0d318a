/* Task-parallel patterns, each with fibersched and its peers side by side in one run:

   (a) n-queens(12): a task per queen placed (the board copied into the task), a wait for
       the children in each task; 14,200 solutions
       fibersched: fsched_wait_group_spawn per child into a wait group on the parent's
       stack, then fsched_wait_group_wait; oneTBB: a task_group per node; OpenMP: `omp
       task` per child, `omp taskwait`
   (b) an unbalanced tree in the style of UTS (bench_parallel.h): a task per node, a wait
       per parent, the same three candidates; the node count is computed serially first
   (c) a compute-bound loop over 16M elements (about 30 floating-point operations each),
       summed: fibersched's fsched_parallel_for over 256 fixed chunks, each summed into
       its own partial, the partials added in order at the end; fsched_parallel_reduce;
       OpenMP `parallel for schedule(static) reduction(+:sum)`; oneTBB parallel_reduce;
       and the plain loop (serial) for scale. Sums are compared with the serial sum to a
       relative 1e-9 (the order of the additions differs)

   The fibersched candidates run as tasks of one scheduler created once per process; every
   candidate uses `workers` threads (default: one per CPU). Each repetition runs every
   candidate of a problem once, in rotating order, after a short sleep that lets the
   previous runtime's threads go idle.
   Usage: bench_parallel [--quick] [--workers=N] [--reps=N]
   (--quick: 9 queens, a smaller tree, 1M elements) */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"
#include "bench_parallel.h"

#include <math.h>

#if defined(FSCHED_BENCH_TBB)
long bench_nqueens_tbb(int n, int workers);        /* bench_parallel_tbb.cpp */
long bench_uts_tbb(unsigned max_depth, int workers);
double bench_loop_tbb(size_t n, int workers);
#endif
#if defined(FSCHED_BENCH_OPENMP)
long bench_nqueens_omp(int n, int workers);        /* bench_parallel_omp.c */
long bench_uts_omp(unsigned max_depth, int workers);
double bench_loop_omp(size_t n, int workers);
#endif

typedef struct par_ctx {
    fsched_sched *sched;
    int workers;
    int queens;
    long queens_expected;
    unsigned uts_depth;
    long uts_expected;
    size_t loop_n;
    double loop_expected;
} par_ctx;

static par_ctx ctx;

/* Runs fn(arg) as a task of the scheduler and waits for it from this (outside) thread. */
static void run_root(void (*fn)(void *), void *arg) { (void)bench_run_task(ctx.sched, fn, arg); }

static void check_count(const char *who, const char *what, long got, long expected) {
    if (got != expected) bench_fail("%s: %s = %ld, expected %ld", who, what, got, expected);
}

/* ---- (a) n-queens ---- */

/* Serially: the solutions, and in *tasks the placements (the tasks the others create). */
static long nq_serial(int row, const unsigned char *cols, long *tasks) {
    unsigned char next[NQ_MAX];
    long total = 0;
    int c;
    ++*tasks;
    if (row == ctx.queens) return 1;
    memcpy(next, cols, (size_t)row);
    for (c = 0; c < ctx.queens; c++)
        if (nq_fits(cols, row, c)) {
            next[row] = (unsigned char)c;
            total += nq_serial(row + 1, next, tasks);
        }
    return total;
}

typedef struct nq_arg {
    int row;
    long count;
    unsigned char cols[NQ_MAX];
} nq_arg;

static void nq_task(void *p) {
    nq_arg *a = (nq_arg *)p, kids[NQ_MAX];
    fsched_wait_group wg;
    long total = 0;
    int c, nk = 0, i;
    if (a->row == ctx.queens) {
        a->count = 1;
        return;
    }
    fsched_wait_group_init(&wg);
    for (c = 0; c < ctx.queens; c++) {
        fsched_result r;
        if (!nq_fits(a->cols, a->row, c)) continue;
        memcpy(kids[nk].cols, a->cols, (size_t)a->row);
        kids[nk].cols[a->row] = (unsigned char)c;
        kids[nk].row = a->row + 1;
        kids[nk].count = 0;
        r = fsched_wait_group_spawn(&wg, ctx.sched, nq_task, &kids[nk]);
        if (r != FSCHED_OK) bench_fail("fsched_wait_group_spawn: %s", fsched_result_string(r));
        nk++;
    }
    fsched_wait_group_wait(&wg);
    for (i = 0; i < nk; i++) total += kids[i].count;
    a->count = total;
}

static double run_nq_fsched(void *unused) {
    nq_arg root;
    double t0, t1;
    (void)unused;
    memset(&root, 0, sizeof root);
    t0 = bench_now();
    run_root(nq_task, &root);
    t1 = bench_now();
    check_count("fibersched", "n-queens", root.count, ctx.queens_expected);
    return t1 - t0;
}

#if defined(FSCHED_BENCH_TBB)
static double run_nq_tbb(void *unused) {
    double t0 = bench_now(), t1;
    long r = bench_nqueens_tbb(ctx.queens, ctx.workers);
    (void)unused;
    t1 = bench_now();
    check_count("oneTBB", "n-queens", r, ctx.queens_expected);
    return t1 - t0;
}
#endif

#if defined(FSCHED_BENCH_OPENMP)
static double run_nq_omp(void *unused) {
    double t0 = bench_now(), t1;
    long r = bench_nqueens_omp(ctx.queens, ctx.workers);
    (void)unused;
    t1 = bench_now();
    check_count("OpenMP tasks", "n-queens", r, ctx.queens_expected);
    return t1 - t0;
}
#endif

/* ---- (b) the unbalanced tree ---- */

static long uts_serial(uint64_t state, unsigned depth) {
    unsigned n = uts_children(state, depth, ctx.uts_depth), i;
    long total = 1;
    for (i = 0; i < n; i++) total += uts_serial(uts_child(state, i), depth + 1);
    return total;
}

typedef struct uts_arg {
    uint64_t state;
    unsigned depth;
    long count;
} uts_arg;

static void uts_task(void *p) {
    uts_arg *a = (uts_arg *)p, kids[UTS_MAX_CHILDREN];
    unsigned n = uts_children(a->state, a->depth, ctx.uts_depth), i;
    fsched_wait_group wg;
    long total = 1;
    if (n == 0) {
        a->count = 1;
        return;
    }
    fsched_wait_group_init(&wg);
    for (i = 0; i < n; i++) {
        fsched_result r;
        kids[i].state = uts_child(a->state, i);
        kids[i].depth = a->depth + 1;
        kids[i].count = 0;
        r = fsched_wait_group_spawn(&wg, ctx.sched, uts_task, &kids[i]);
        if (r != FSCHED_OK) bench_fail("fsched_wait_group_spawn: %s", fsched_result_string(r));
    }
    fsched_wait_group_wait(&wg);
    for (i = 0; i < n; i++) total += kids[i].count;
    a->count = total;
}

static double run_uts_fsched(void *unused) {
    uts_arg root;
    double t0, t1;
    (void)unused;
    root.state = uts_root();
    root.depth = 0;
    root.count = 0;
    t0 = bench_now();
    run_root(uts_task, &root);
    t1 = bench_now();
    check_count("fibersched", "tree nodes", root.count, ctx.uts_expected);
    return t1 - t0;
}

#if defined(FSCHED_BENCH_TBB)
static double run_uts_tbb(void *unused) {
    double t0 = bench_now(), t1;
    long r = bench_uts_tbb(ctx.uts_depth, ctx.workers);
    (void)unused;
    t1 = bench_now();
    check_count("oneTBB", "tree nodes", r, ctx.uts_expected);
    return t1 - t0;
}
#endif

#if defined(FSCHED_BENCH_OPENMP)
static double run_uts_omp(void *unused) {
    double t0 = bench_now(), t1;
    long r = bench_uts_omp(ctx.uts_depth, ctx.workers);
    (void)unused;
    t1 = bench_now();
    check_count("OpenMP tasks", "tree nodes", r, ctx.uts_expected);
    return t1 - t0;
}
#endif

/* ---- (c) the loop ---- */

#define LOOP_CHUNKS 256
static double loop_partials[LOOP_CHUNKS];

static void check_sum(const char *who, double got) {
    if (!(fabs(got - ctx.loop_expected) <= 1e-9 * fabs(ctx.loop_expected)))
        bench_fail("%s: loop sum = %.17g, expected %.17g", who, got, ctx.loop_expected);
}

static double loop_serial(size_t lo, size_t hi) {
    double sum = 0;
    size_t i;
    for (i = lo; i < hi; i++) sum += pf_kernel(i);
    return sum;
}

static double run_loop_serial(void *unused) {
    double t0 = bench_now(), t1, sum;
    (void)unused;
    sum = loop_serial(0, ctx.loop_n);
    t1 = bench_now();
    check_sum("serial", sum);
    return t1 - t0;
}

/* parallel_for over chunk numbers: chunk k covers [k * n / CHUNKS, (k + 1) * n / CHUNKS) */
static void loop_chunks(void *unused, size_t lo, size_t hi) {
    size_t k;
    (void)unused;
    for (k = lo; k < hi; k++) {
        size_t b = k * ctx.loop_n / LOOP_CHUNKS, e = (k + 1) * ctx.loop_n / LOOP_CHUNKS, i;
        double sum = 0;
        for (i = b; i < e; i++) sum += pf_kernel(i);
        loop_partials[k] = sum;
    }
}

static void loop_for_task(void *out) {
    double sum = 0;
    int k;
    fsched_result r = fsched_parallel_for(0, LOOP_CHUNKS, 1, loop_chunks, NULL);
    if (r != FSCHED_OK) bench_fail("fsched_parallel_for: %s", fsched_result_string(r));
    for (k = 0; k < LOOP_CHUNKS; k++) sum += loop_partials[k];
    *(double *)out = sum;
}

static double run_loop_for(void *unused) {
    double t0, t1, sum = 0;
    (void)unused;
    t0 = bench_now();
    run_root(loop_for_task, &sum);
    t1 = bench_now();
    check_sum("fibersched parallel_for", sum);
    return t1 - t0;
}

static void red_init(void *unused, void *acc) {
    (void)unused;
    *(double *)acc = 0;
}
static void red_body(void *unused, size_t lo, size_t hi, void *acc) {
    double sum = *(double *)acc;
    size_t i;
    (void)unused;
    for (i = lo; i < hi; i++) sum += pf_kernel(i);
    *(double *)acc = sum;
}
static void red_combine(void *unused, void *acc, const void *other) {
    (void)unused;
    *(double *)acc += *(const double *)other;
}

static void loop_reduce_task(void *out) {
    fsched_result r = fsched_parallel_reduce(0, ctx.loop_n, 4096, sizeof(double), red_init,
                                             red_body, red_combine, NULL, out);
    if (r != FSCHED_OK) bench_fail("fsched_parallel_reduce: %s", fsched_result_string(r));
}

static double run_loop_reduce(void *unused) {
    double t0, t1, sum = 0;
    (void)unused;
    t0 = bench_now();
    run_root(loop_reduce_task, &sum);
    t1 = bench_now();
    check_sum("fibersched parallel_reduce", sum);
    return t1 - t0;
}

#if defined(FSCHED_BENCH_TBB)
static double run_loop_tbb(void *unused) {
    double t0 = bench_now(), t1, sum;
    (void)unused;
    sum = bench_loop_tbb(ctx.loop_n, ctx.workers);
    t1 = bench_now();
    check_sum("oneTBB parallel_reduce", sum);
    return t1 - t0;
}
#endif

#if defined(FSCHED_BENCH_OPENMP)
static double run_loop_omp(void *unused) {
    double t0 = bench_now(), t1, sum;
    (void)unused;
    sum = bench_loop_omp(ctx.loop_n, ctx.workers);
    t1 = bench_now();
    check_sum("OpenMP parallel for", sum);
    return t1 - t0;
}
#endif

/* ---- the tables ---- */

static void add(bench_case *c, int *nc, const char *name, double (*run)(void *)) {
    c[*nc].name = name;
    c[*nc].run = run;
    c[*nc].ctx = NULL;
    c[*nc].workers = ctx.workers;
    (*nc)++;
}

static void table(const char *title, bench_case *c, int nc, const bench_case *base,
                  const char *base_label, double units, const char *unit_label) {
    char buf[16];
    int i;
    printf("%s\n\n", title);
    printf("| %-44s | %10s | %10s | %12s | %13s |\n", "candidate", "median ms", "min ms",
           unit_label, base_label);
    printf("|%s|%s|%s|%s|%s|\n", "----------------------------------------------",
           "------------", "------------", "--------------", "---------------");
    for (i = 0; i < nc; i++)
        printf("| %-44s | %10.1f | %10.1f | %12.1f | %13s |\n", c[i].name, c[i].median * 1e3,
               c[i].min * 1e3, c[i].median * 1e9 / units,
               bench_ratio(buf, sizeof buf, &c[i], base));
    printf("\n");
}

static void peers(bench_case *c, int nc, const bench_case *f) {
    char buf[16];
    int i;
    for (i = 0; i < nc; i++)
        if (&c[i] != f)
            printf("peer: %s / %s = %s\n", c[i].name, f->name,
                   bench_ratio(buf, sizeof buf, &c[i], f));
    printf("\n");
}

int main(int argc, char **argv) {
    int quick = bench_quick(argc, argv);
    int reps = bench_reps(argc, argv, quick ? 3 : 11);
    bench_case c[8];
    int nc;
    fsched_desc d;
    fsched_result r;
    double t0;
    long nq_tasks = 0;
    char title[256];

    memset(&ctx, 0, sizeof ctx);
    ctx.workers = (int)bench_option(argc, argv, "--workers=", bench_cpu_count());
    if (ctx.workers < 1) bench_fail("--workers must be at least 1");
    ctx.queens = quick ? 9 : 12;
    ctx.queens_expected = quick ? 352 : 14200;
    ctx.uts_depth = quick ? 7 : 10;
    ctx.loop_n = quick ? (size_t)1 << 20 : (size_t)1 << 24;
    memset(&d, 0, sizeof d);
    d.workers = (uint32_t)ctx.workers;
    r = fsched_create(&d, &ctx.sched);
    if (r != FSCHED_OK) bench_fail("fsched_create: %s", fsched_result_string(r));
    printf("%d worker(s) for every candidate; median of %d repetitions\n\n", ctx.workers, reps);

    /* (a) */
    {
        unsigned char none[NQ_MAX] = {0};
        long solutions;
        t0 = bench_now();
        solutions = nq_serial(0, none, &nq_tasks);
        t0 = bench_now() - t0;
        check_count("serial", "n-queens", solutions, ctx.queens_expected);
    }
    nc = 0;
    memset(c, 0, sizeof c);
    add(c, &nc, "fibersched: fsched_wait_group_spawn", run_nq_fsched);
#if defined(FSCHED_BENCH_TBB)
    add(c, &nc, "oneTBB: task_group", run_nq_tbb);
#endif
#if defined(FSCHED_BENCH_OPENMP)
    add(c, &nc, "OpenMP tasks", run_nq_omp);
#endif
    bench_run_cases(c, nc, reps, 20, 1);
    snprintf(title, sizeof title,
             "(a) n-queens(%d) = %ld solutions, a task per queen placed: %ld tasks "
             "(serial search: %.1f ms)", ctx.queens, ctx.queens_expected, nq_tasks, t0 * 1e3);
    table(title, c, nc, &c[0], "vs fibersched", (double)nq_tasks, "ns/task");
    peers(c, nc, &c[0]);

    /* (b) */
    t0 = bench_now();
    ctx.uts_expected = uts_serial(uts_root(), 0);
    t0 = bench_now() - t0;
    nc = 0;
    memset(c, 0, sizeof c);
    add(c, &nc, "fibersched: fsched_wait_group_spawn", run_uts_fsched);
#if defined(FSCHED_BENCH_TBB)
    add(c, &nc, "oneTBB: task_group", run_uts_tbb);
#endif
#if defined(FSCHED_BENCH_OPENMP)
    add(c, &nc, "OpenMP tasks", run_uts_omp);
#endif
    bench_run_cases(c, nc, reps, 20, 1);
    snprintf(title, sizeof title,
             "(b) unbalanced tree (geometric, mean 4 children, depth limit %u, root %u "
             "children): %ld nodes, a task per node (serial count: %.1f ms)",
             ctx.uts_depth, UTS_ROOT_CHILDREN, ctx.uts_expected, t0 * 1e3);
    table(title, c, nc, &c[0], "vs fibersched", (double)ctx.uts_expected, "ns/node");
    peers(c, nc, &c[0]);

    /* (c) */
    ctx.loop_expected = loop_serial(0, ctx.loop_n);
    nc = 0;
    memset(c, 0, sizeof c);
    add(c, &nc, "fibersched: fsched_parallel_for, 256 chunks", run_loop_for);
    add(c, &nc, "fibersched: fsched_parallel_reduce", run_loop_reduce);
#if defined(FSCHED_BENCH_OPENMP)
    add(c, &nc, "OpenMP parallel for, static, reduction", run_loop_omp);
#endif
#if defined(FSCHED_BENCH_TBB)
    add(c, &nc, "oneTBB: parallel_reduce", run_loop_tbb);
#endif
    add(c, &nc, "serial loop", run_loop_serial);
    c[nc - 1].workers = 1;
    bench_run_cases(c, nc, reps, 20, 1);
    {
        bench_case *omp = NULL;
        int i;
        for (i = 0; i < nc; i++)
            if (strncmp(c[i].name, "OpenMP", 6) == 0) omp = &c[i];
        snprintf(title, sizeof title,
                 "(c) loop over %zu elements, ~30 flops each, summed (%d threads; serial: 1)",
                 ctx.loop_n, ctx.workers);
        table(title, c, nc, omp ? omp : &c[0], omp ? "vs OpenMP" : "vs fibersched",
              (double)ctx.loop_n, "ns/element");
        bench_quick_note(quick);
        if (omp) {
            bench_target("fibersched parallel_for / OpenMP parallel for",
                         c[0].median / omp->median, "<=", 1.1, "x");
            bench_target("fibersched parallel_reduce / OpenMP parallel for",
                         c[1].median / omp->median, "<=", 1.1, "x");
        } else {
            printf("target: fibersched parallel_for / OpenMP: not measured (OpenMP not "
                   "available)\n");
        }
        printf("speed-up of fsched_parallel_for over the serial loop: %.2fx\n",
               c[nc - 1].median / c[0].median);
    }
    fsched_destroy(ctx.sched);
    return 0;
}
