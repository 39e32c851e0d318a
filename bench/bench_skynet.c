/* Skynet: a tree of tasks, 10 children per task, whose leaves return their number; each
   parent spawns its 10 children, waits for them and returns their sum. With 1,000,000
   leaves (6 levels) that is 1,111,111 tasks and the sum 499999500000. Candidates, side by
   side in one run:

   fibersched        each parent counts its children in a wait group on its own stack:
                     fsched_wait_group_spawn for each child, then fsched_wait_group_wait;
                     the root runs as a task of a scheduler created once per process
   spawn/sync        the same tree as FSCHED_TASKs: FSCHED_SPAWN x10, then FSCHED_SYNC x10
                     (child records in the worker's frame stack, no allocation); the root
                     is FSCHED_RUN from a task of the same scheduler
   oneTBB            a tbb::task_group per parent, run x10 then wait (bench_skynet_tbb.cpp),
                     in a task_arena of the same thread count, when available
   OpenMP tasks      `omp task` x10 then `omp taskwait` per parent, in one `single` region
                     (bench_skynet_omp.c), when available
   Lace              SPAWN x10 then SYNC x10 per parent (bench_lace.c), when meson's
                     lace_source option names a Lace source tree

   All use `workers` threads (default: one per CPU). Each repetition runs every candidate
   once, in rotating order, after a short sleep that lets the previous runtime go idle.
   Usage: bench_skynet [--quick] [--workers=N] [--reps=N]   (--quick: 10,000 leaves) */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"

#if defined(FSCHED_BENCH_TBB)
long bench_skynet_tbb(long leaves, int workers); /* bench_skynet_tbb.cpp */
#endif
#if defined(FSCHED_BENCH_OPENMP)
long bench_skynet_omp(long leaves, int workers); /* bench_skynet_omp.c */
#endif
#if defined(FSCHED_BENCH_LACE)
#include "bench_lace.h"
#endif

typedef struct sky_ctx {
    long leaves, expected;
    int workers;
    fsched_sched *sched;
} sky_ctx;

static void check(const char *who, const sky_ctx *c, long got) {
    if (got != c->expected)
        bench_fail("%s: skynet over %ld leaves = %ld, expected %ld", who, c->leaves, got,
                   c->expected);
}

/* ---- fibersched ---- */

static fsched_sched *sky_sched;

typedef struct sky_arg {
    long num, size, sum;
} sky_arg;

static void sky_task(void *p) {
    sky_arg *a = (sky_arg *)p, kids[10];
    fsched_wait_group wg;
    long step, sum = 0;
    int i;
    if (a->size == 1) {
        a->sum = a->num;
        return;
    }
    step = a->size / 10;
    fsched_wait_group_init(&wg);
    for (i = 0; i < 10; i++) {
        fsched_result r;
        kids[i].num = a->num + i * step;
        kids[i].size = step;
        r = fsched_wait_group_spawn(&wg, sky_sched, sky_task, &kids[i]);
        if (r != FSCHED_OK) bench_fail("fsched_wait_group_spawn: %s", fsched_result_string(r));
    }
    fsched_wait_group_wait(&wg);
    for (i = 0; i < 10; i++) sum += kids[i].sum;
    a->sum = sum;
}

static double run_fsched(void *ctx) {
    sky_ctx *c = (sky_ctx *)ctx;
    sky_arg root;
    double t;
    root.num = 0;
    root.size = c->leaves;
    root.sum = -1;
    sky_sched = c->sched;
    t = bench_run_task(c->sched, sky_task, &root);
    check("fibersched", c, root.sum);
    return t;
}

/* ---- fibersched: spawn and sync ---- */

typedef struct sky_range {
    long num, size;
} sky_range;

FSCHED_TASK(long, sky_frames, sky_range, a) {
    long step, sum = 0;
    int i;
    if (a.size == 1) return a.num;
    step = a.size / 10;
    for (i = 0; i < 10; i++) {
        sky_range kid;
        kid.num = a.num + i * step;
        kid.size = step;
        FSCHED_SPAWN(sky_frames, kid);
    }
    for (i = 0; i < 10; i++) sum += FSCHED_SYNC(sky_frames);
    return sum;
}

typedef struct sky_root {
    sky_range range;
    long sum;
    fsched_result r;
} sky_root;

static void sky_frames_root(void *p) {
    sky_root *root = (sky_root *)p;
    root->r = FSCHED_RUN(sky_frames, root->range, &root->sum);
}

static double run_frames(void *ctx) {
    sky_ctx *c = (sky_ctx *)ctx;
    sky_root root;
    double t;
    root.range.num = 0;
    root.range.size = c->leaves;
    root.sum = -1;
    root.r = FSCHED_OK;
    t = bench_run_task(c->sched, sky_frames_root, &root);
    if (root.r != FSCHED_OK) bench_fail("FSCHED_RUN: %s", fsched_result_string(root.r));
    check("fibersched spawn/sync", c, root.sum);
    return t;
}

/* ---- peers ---- */

#if defined(FSCHED_BENCH_TBB)
static double run_tbb(void *ctx) {
    sky_ctx *c = (sky_ctx *)ctx;
    double t0 = bench_now();
    long r = bench_skynet_tbb(c->leaves, c->workers);
    double t1 = bench_now();
    check("oneTBB", c, r);
    return t1 - t0;
}
#endif

#if defined(FSCHED_BENCH_LACE)
static double run_lace(void *ctx) {
    sky_ctx *c = (sky_ctx *)ctx;
    double t0 = bench_now();
    long r = bench_skynet_lace(c->leaves, c->workers);
    double t1 = bench_now();
    check("Lace", c, r);
    return t1 - t0;
}
#endif

#if defined(FSCHED_BENCH_OPENMP)
static double run_omp(void *ctx) {
    sky_ctx *c = (sky_ctx *)ctx;
    double t0 = bench_now();
    long r = bench_skynet_omp(c->leaves, c->workers);
    double t1 = bench_now();
    check("OpenMP tasks", c, r);
    return t1 - t0;
}
#endif

/* ---- the table ---- */

int main(int argc, char **argv) {
    int quick = bench_quick(argc, argv);
    int reps = bench_reps(argc, argv, quick ? 3 : 15);
    int i, nc = 0;
    long tasks = 0, level;
    sky_ctx ctx;
    bench_case c[6];
    bench_case *f, *tbb, *lace;
    fsched_desc d;
    fsched_result r;
    char buf1[16], buf2[16];

    memset(&ctx, 0, sizeof ctx);
    ctx.leaves = quick ? 10000 : 1000000;
    ctx.expected = ctx.leaves * (ctx.leaves - 1) / 2;
    ctx.workers = (int)bench_option(argc, argv, "--workers=", bench_cpu_count());
    if (ctx.workers < 1) bench_fail("--workers must be at least 1");
    for (level = ctx.leaves; level >= 1; level /= 10) tasks += level;
    memset(&d, 0, sizeof d);
    d.workers = (uint32_t)ctx.workers;
    r = fsched_create(&d, &ctx.sched);
    if (r != FSCHED_OK) bench_fail("fsched_create: %s", fsched_result_string(r));

    memset(c, 0, sizeof c);
    c[nc].name = "fibersched: fsched_wait_group_spawn";
    c[nc].run = run_fsched;
    c[nc].ctx = &ctx;
    c[nc++].workers = ctx.workers;
    c[nc].name = "fibersched: FSCHED_SPAWN/SYNC";
    c[nc].run = run_frames;
    c[nc].ctx = &ctx;
    c[nc++].workers = ctx.workers;
#if defined(FSCHED_BENCH_TBB)
    c[nc].name = "oneTBB: task_group";
    c[nc].run = run_tbb;
    c[nc].ctx = &ctx;
    c[nc++].workers = ctx.workers;
#endif
#if defined(FSCHED_BENCH_OPENMP)
    c[nc].name = "OpenMP tasks";
    c[nc].run = run_omp;
    c[nc].ctx = &ctx;
    c[nc++].workers = ctx.workers;
#endif
#if defined(FSCHED_BENCH_LACE)
    c[nc].name = "Lace: SPAWN/SYNC";
    c[nc].run = run_lace;
    c[nc].ctx = &ctx;
    c[nc++].workers = ctx.workers;
#endif

    bench_run_cases(c, nc, reps, 20, 1);

    f = &c[0];
    tbb = bench_find(c, nc, "oneTBB: task_group", ctx.workers);
    printf("skynet: %ld leaves, %ld tasks, 10 children per task, sum %ld; %d worker(s); "
           "median of %d repetitions\n\n", ctx.leaves, tasks, ctx.expected, ctx.workers, reps);
    printf("| %-36s | %10s | %10s | %10s | %13s |\n", "candidate", "median ms", "min ms",
           "ns/task", "vs fibersched");
    printf("|%s|%s|%s|%s|%s|\n", "--------------------------------------", "------------",
           "------------", "------------", "---------------");
    for (i = 0; i < nc; i++)
        printf("| %-36s | %10.1f | %10.1f | %10.1f | %13s |\n", c[i].name, c[i].median * 1e3,
               c[i].min * 1e3, c[i].median * 1e9 / (double)tasks,
               bench_ratio(buf1, sizeof buf1, &c[i], f));
    printf("\n");
    bench_quick_note(quick);
    if (tbb) bench_target("fibersched / oneTBB", f->median / tbb->median, "<=", 1.5, "x");
    else printf("target: fibersched / oneTBB: not measured (oneTBB not available)\n");
    lace = bench_find(c, nc, "Lace: SPAWN/SYNC", ctx.workers);
    if (lace) bench_target("fibersched / Lace", f->median / lace->median, "<=", 3.0, "x");
    else printf("target: fibersched / Lace: not measured (meson's lace_source option is not set)\n");
    for (i = 1; i < nc; i++)
        printf("peer: %s / fibersched = %s\n", c[i].name, bench_ratio(buf2, sizeof buf2, &c[i], f));
    fsched_destroy(ctx.sched);
    return 0;
}
