/* Fork-join overhead: fib(n) with a fork and a join at every level, no serial cutoff, so
   nearly all the time goes to the scheduler. Candidates, side by side in one run:

   serial            the same recursion as a plain function, one call per node as in the
                     scheduled version (the floor the targets use), and for scale the
                     same function left to GCC, which inlines it into itself several
                     levels deep and so makes about half the calls; and the shape of a
                     plain C task (argument and result in a struct passed by pointer),
                     serially: the floor of fsched_join's version
   fibersched        fsched_join(fib(n - 2), fib(n - 1)) at every level; the root runs as a
                     task of a scheduler created once per process with `workers` worker
                     threads, spawned from the main thread, which waits on a wait group
   spawn/sync        fib as an FSCHED_TASK: FSCHED_SPAWN(fib, n - 1), FSCHED_CALL(fib,
                     n - 2), FSCHED_SYNC; FSCHED_RUN from a task of the same scheduler
   oneTBB            tbb::task_group run/wait at every level, in a task_arena of `workers`
                     threads (bench_fib_tbb.cpp), when available
   OpenMP tasks      `omp task` / `omp taskwait` at every level inside one `single` region
                     of `workers` threads (bench_fib_omp.c), when available
   Lace              SPAWN / CALL / SYNC at every level (bench_lace.c), when meson's
                     lace_source option names a Lace source tree

   Every candidate runs with 1 worker and with 2 (--workers=N for another count). Each
   repetition runs every candidate once, in rotating order, after a short sleep that lets
   the previous runtime's threads go idle. Reported: median and minimum milliseconds.
   Usage: bench_fib [--quick] [--n=N] [--workers=N] [--reps=N] [--pin=1]
   (n: 35, 27 with --quick; --pin=1: fibersched's workers pinned, desc.pin_workers) */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"

#if defined(FSCHED_BENCH_TBB)
long bench_fib_tbb(int n, int workers); /* bench_fib_tbb.cpp */
#endif
#if defined(FSCHED_BENCH_OPENMP)
long bench_fib_omp(int n, int workers); /* bench_fib_omp.c */
#endif
#if defined(FSCHED_BENCH_LACE)
#include "bench_lace.h"
#endif

typedef struct fib_ctx {
    int n, workers;
    fsched_sched *sched;
} fib_ctx;

/* The known answer, by iteration. */
static long fib_known(int n) {
    long a = 0, b = 1;
    int i;
    for (i = 0; i < n; i++) {
        long t = a + b;
        a = b;
        b = t;
    }
    return a;
}

static void check(const char *who, const fib_ctx *c, long got) {
    if (got != fib_known(c->n))
        bench_fail("%s, %d worker(s): fib(%d) = %ld, expected %ld", who, c->workers, c->n, got,
                   fib_known(c->n));
}

/* ---- serial ---- */

/* The floor: one call per node, as fib_task below makes (it reaches itself through
   fsched_join, so it is never inlined into itself). */
__attribute__((noinline)) static long fib_serial(int n) {
    return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2);
}

/* For scale only: the same function left to the compiler (GCC -O2 inlines it into itself
   several levels deep, leaving about half as many calls as nodes). */
static long fib_serial_inlined(int n) {
    return n < 2 ? n : fib_serial_inlined(n - 1) + fib_serial_inlined(n - 2);
}

static double run_serial(void *ctx) {
    fib_ctx *c = (fib_ctx *)ctx;
    double t0 = bench_now();
    long r = fib_serial(c->n);
    double t1 = bench_now();
    check("serial", c, r);
    return t1 - t0;
}

static double run_serial_inlined(void *ctx) {
    fib_ctx *c = (fib_ctx *)ctx;
    double t0 = bench_now();
    long r = fib_serial_inlined(c->n);
    double t1 = bench_now();
    check("serial, self-inlined", c, r);
    return t1 - t0;
}

typedef struct fib_arg {
    int n;
    long r;
} fib_arg;

/* The floor of a plain C task's shape: fsched_join's fib below without the join, its
   argument and result in a struct that the callee reads and writes through a pointer. */
__attribute__((noinline)) static void fib_serial_shape(fib_arg *a) {
    fib_arg x, y;
    if (a->n < 2) {
        a->r = a->n;
        return;
    }
    x.n = a->n - 1;
    y.n = a->n - 2;
    fib_serial_shape(&y);
    fib_serial_shape(&x);
    a->r = x.r + y.r;
}

static double run_serial_shape(void *ctx) {
    fib_ctx *c = (fib_ctx *)ctx;
    fib_arg a;
    double t0, t1;
    a.n = c->n;
    t0 = bench_now();
    fib_serial_shape(&a);
    t1 = bench_now();
    check("serial, void * shape", c, a.r);
    return t1 - t0;
}

/* ---- fibersched ---- */

static void fib_task(void *p) {
    fib_arg *a = (fib_arg *)p, x, y;
    if (a->n < 2) {
        a->r = a->n;
        return;
    }
    x.n = a->n - 1;
    y.n = a->n - 2;
    if (fsched_join(fib_task, &y, fib_task, &x) != FSCHED_OK) bench_fail("fsched_join failed");
    a->r = x.r + y.r;
}

static double run_fsched(void *ctx) {
    fib_ctx *c = (fib_ctx *)ctx;
    fib_arg a;
    double t;
    a.n = c->n;
    a.r = -1;
    t = bench_run_task(c->sched, fib_task, &a);
    check("fibersched", c, a.r);
    return t;
}

/* ---- fibersched: spawn and sync ---- */

FSCHED_TASK(long, fib_frames, int, n) {
    long x, y;
    if (n < 2) return n;
    FSCHED_SPAWN(fib_frames, n - 1);
    y = FSCHED_CALL(fib_frames, n - 2);
    x = FSCHED_SYNC(fib_frames);
    return x + y;
}

typedef struct fib_root {
    int n;
    long r;
    fsched_result e;
} fib_root;

static void fib_frames_root(void *p) {
    fib_root *root = (fib_root *)p;
    root->e = FSCHED_RUN(fib_frames, root->n, &root->r);
}

static double run_frames(void *ctx) {
    fib_ctx *c = (fib_ctx *)ctx;
    fib_root root;
    double t;
    root.n = c->n;
    root.r = -1;
    root.e = FSCHED_OK;
    t = bench_run_task(c->sched, fib_frames_root, &root);
    if (root.e != FSCHED_OK) bench_fail("FSCHED_RUN: %s", fsched_result_string(root.e));
    check("fibersched spawn/sync", c, root.r);
    return t;
}

/* ---- peers ---- */

#if defined(FSCHED_BENCH_TBB)
static double run_tbb(void *ctx) {
    fib_ctx *c = (fib_ctx *)ctx;
    double t0 = bench_now();
    long r = bench_fib_tbb(c->n, c->workers);
    double t1 = bench_now();
    check("oneTBB", c, r);
    return t1 - t0;
}
#endif

#if defined(FSCHED_BENCH_LACE)
static double run_lace(void *ctx) {
    fib_ctx *c = (fib_ctx *)ctx;
    double t0 = bench_now();
    long r = bench_fib_lace(c->n, c->workers);
    double t1 = bench_now();
    check("Lace", c, r);
    return t1 - t0;
}
#endif

#if defined(FSCHED_BENCH_OPENMP)
static double run_omp(void *ctx) {
    fib_ctx *c = (fib_ctx *)ctx;
    double t0 = bench_now();
    long r = bench_fib_omp(c->n, c->workers);
    double t1 = bench_now();
    check("OpenMP tasks", c, r);
    return t1 - t0;
}
#endif

/* ---- the table ---- */

enum { SERIALS = 3 }; /* the serial candidates, first in the table */

int main(int argc, char **argv) {
    int quick = bench_quick(argc, argv);
    int n = (int)bench_option(argc, argv, "--n=", quick ? 27 : 35);
    int reps = bench_reps(argc, argv, quick ? 3 : 7);
    int pin = (int)bench_option(argc, argv, "--pin=", 0);
    int counts[2], nw, wi, i, nc = 0;
    long expected;
    if (n < 1 || n > 45) bench_fail("--n: from 1 to 45");
    expected = fib_known(n);
    fib_ctx ctx[2];
    bench_case c[16];
    bench_case *serial, *f1, *f2;
    char buf1[16], buf2[16];

    counts[0] = 1;
    counts[1] = (int)bench_option(argc, argv, "--workers=", 2);
    if (counts[1] < 1) bench_fail("--workers must be at least 1");
    nw = counts[1] > 1 ? 2 : 1;
    memset(c, 0, sizeof c);
    for (wi = 0; wi < nw; wi++) {
        fsched_desc d;
        fsched_result r;
        memset(&d, 0, sizeof d);
        d.workers = (uint32_t)counts[wi];
        d.pin_workers = pin;
        ctx[wi].n = n;
        ctx[wi].workers = counts[wi];
        r = fsched_create(&d, &ctx[wi].sched);
        if (r != FSCHED_OK) bench_fail("fsched_create: %s", fsched_result_string(r));
    }
    c[nc].name = "serial";
    c[nc].run = run_serial;
    c[nc].ctx = &ctx[0];
    c[nc++].workers = 1;
    c[nc].name = "serial, self-inlined (scale)";
    c[nc].run = run_serial_inlined;
    c[nc].ctx = &ctx[0];
    c[nc++].workers = 1;
    c[nc].name = "serial, struct through void *";
    c[nc].run = run_serial_shape;
    c[nc].ctx = &ctx[0];
    c[nc++].workers = 1;
    for (wi = 0; wi < nw; wi++) {
        c[nc].name = "fibersched: fsched_join";
        c[nc].run = run_fsched;
        c[nc].ctx = &ctx[wi];
        c[nc++].workers = counts[wi];
        c[nc].name = "fibersched: FSCHED_SPAWN/SYNC";
        c[nc].run = run_frames;
        c[nc].ctx = &ctx[wi];
        c[nc++].workers = counts[wi];
#if defined(FSCHED_BENCH_TBB)
        c[nc].name = "oneTBB: task_group";
        c[nc].run = run_tbb;
        c[nc].ctx = &ctx[wi];
        c[nc++].workers = counts[wi];
#endif
#if defined(FSCHED_BENCH_OPENMP)
        c[nc].name = "OpenMP tasks";
        c[nc].run = run_omp;
        c[nc].ctx = &ctx[wi];
        c[nc++].workers = counts[wi];
#endif
#if defined(FSCHED_BENCH_LACE)
        c[nc].name = "Lace: SPAWN/SYNC";
        c[nc].run = run_lace;
        c[nc].ctx = &ctx[wi];
        c[nc++].workers = counts[wi];
#endif
    }

    /* warm up at the --quick size (thread pools started, memory touched): the slowest
       peers take seconds per run at the full size */
    for (wi = 0; wi < nw; wi++) ctx[wi].n = 27;
    for (i = 0; i < nc; i++) c[i].run(c[i].ctx);
    for (wi = 0; wi < nw; wi++) ctx[wi].n = n;
    bench_run_cases(c, nc, reps, 20, 0);

    serial = &c[0];
    f1 = bench_find(c, nc, "fibersched: fsched_join", 1);
    f2 = nw > 1 ? bench_find(c, nc, "fibersched: fsched_join", counts[1]) : NULL;
    printf("fib(%d) = %ld, a fork and a join at every level (no cutoff): median of %d "
           "repetitions%s\n\n", n, expected, reps,
           pin ? "; fibersched's workers pinned, one CPU each" : "");
    printf("| %-30s | %7s | %10s | %10s | %9s | %13s |\n", "candidate", "workers", "median ms",
           "min ms", "vs serial", "vs fibersched");
    printf("|%s|%s|%s|%s|%s|%s|\n", "--------------------------------", "---------", "------------",
           "------------", "-----------", "---------------");
    for (i = 0; i < nc; i++) {
        bench_case *f = bench_find(c, nc, "fibersched: fsched_join", c[i].workers);
        printf("| %-30s | %7d | %10.3f | %10.3f | %9s | %13s |\n", c[i].name, c[i].workers,
               c[i].median * 1e3, c[i].min * 1e3, bench_ratio(buf1, sizeof buf1, &c[i], serial),
               i < SERIALS ? "-" : bench_ratio(buf2, sizeof buf2, &c[i], f));
    }
    printf("\n");
    bench_quick_note(quick);
    bench_target("fibersched 1 worker / serial", f1->median / serial->median, "<=", 4.0, "x");
    printf("for scale: fibersched 1 worker / serial, self-inlined = %.2fx\n",
           f1->median / c[1].median);
    if (f2) {
        char what[64];
        snprintf(what, sizeof what, "fibersched speed-up, %d workers over 1", counts[1]);
        bench_target(what, f1->median / f2->median, ">=", 1.7, "x");
    }
    printf("for scale: fibersched 1 worker / serial, struct through void * = %.2fx\n",
           f1->median / c[2].median);
    for (wi = 0; wi < nw; wi++) {
        bench_case *f = bench_find(c, nc, "fibersched: fsched_join", counts[wi]);
        bench_case *lace = bench_find(c, nc, "Lace: SPAWN/SYNC", counts[wi]);
        char what[64];
        if (!lace) continue;
        snprintf(what, sizeof what, "fsched_join / Lace, %d worker(s)", counts[wi]);
        bench_target(what, f->median / lace->median, "<=", 1.5, "x");
    }
    for (i = SERIALS; i < nc; i++) {
        bench_case *f = bench_find(c, nc, "fibersched: fsched_join", c[i].workers);
        if (&c[i] == f) continue;
        printf("peer: %s / fibersched, %d worker(s) = %s\n", c[i].name, c[i].workers,
               bench_ratio(buf1, sizeof buf1, &c[i], f));
    }
    for (wi = 0; wi < nw; wi++) fsched_destroy(ctx[wi].sched);
    return 0;
}
