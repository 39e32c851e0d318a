/* Two tasks taking turns on one thread, side by side in one run:

   yield       each of two tasks calls yield n times: every yield hands the thread to the
               other task. Reported: nanoseconds per yield.
   ping-pong   one task sets an event and waits on a second one, n times; the other waits
               on the first and sets the second: every wait hands the thread to the other
               task. Reported: nanoseconds per hand-off (2n of them).

   Candidates:
   fibersched     two tasks on a scheduler of one worker: fsched_yield; two auto-reset
                  fsched_events
   Boost.Fiber    two fibers on the main thread's round-robin scheduler:
                  boost::this_fiber::yield; two unbuffered_channels (bench_yield_boost.cpp),
                  when Boost.Fiber is installed
   Go             two goroutines with GOMAXPROCS 1: runtime.Gosched; two unbuffered channels
                  (bench_go.go, run as a child process that times itself), when Go was
                  found at configure time

   Each repetition runs every candidate once, in rotating order, after a warm-up run of
   each. Reported: the median and minimum over the repetitions, and the ratio to
   fibersched. Usage: bench_yield [--quick] [--reps=N] [--n=N]   (n: 1,000,000) */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"

#if defined(FSCHED_BENCH_BOOST_FIBER)
double bench_yield_boost(long n);    /* bench_yield_boost.cpp */
double bench_pingpong_boost(long n);
#endif

static long rounds;
static fsched_sched *sched;

static void fail_if(fsched_result r, const char *what) {
    if (r != FSCHED_OK) bench_fail("%s: %s", what, fsched_result_string(r));
}

/* ---- fibersched ---- */

static void yielder(void *unused) {
    long i;
    (void)unused;
    for (i = 0; i < rounds; i++) fsched_yield();
}

typedef struct pingpong {
    fsched_event ping, pong;
    long out_of_turn;
} pingpong;

static void pinger(void *arg) {
    pingpong *p = (pingpong *)arg;
    long i;
    for (i = 0; i < rounds; i++) {
        fail_if(fsched_event_set(&p->ping), "fsched_event_set");
        fail_if(fsched_event_wait(&p->pong), "fsched_event_wait");
    }
}

static void ponger(void *arg) {
    pingpong *p = (pingpong *)arg;
    long i;
    for (i = 0; i < rounds; i++) {
        fail_if(fsched_event_wait(&p->ping), "fsched_event_wait");
        if (fsched_event_is_set(&p->ping)) p->out_of_turn++; /* consumed by this wait */
        fail_if(fsched_event_set(&p->pong), "fsched_event_set");
    }
}

/* Runs a and b as two tasks of the one-worker scheduler; seconds per step (2n steps). */
static double pair(void (*a)(void *), void (*b)(void *), void *arg) {
    fsched_wait_group wg;
    double t0, t1;
    fsched_wait_group_init(&wg);
    t0 = bench_now();
    fail_if(fsched_wait_group_spawn(&wg, sched, a, arg), "fsched_wait_group_spawn");
    fail_if(fsched_wait_group_spawn(&wg, sched, b, arg), "fsched_wait_group_spawn");
    fail_if(fsched_wait_group_wait(&wg), "fsched_wait_group_wait");
    t1 = bench_now();
    fsched_wait_group_destroy(&wg);
    return (t1 - t0) / (2.0 * (double)rounds);
}

static double run_yield(void *unused) {
    (void)unused;
    return pair(yielder, yielder, NULL);
}

static double run_pingpong(void *unused) {
    pingpong p;
    double t;
    memset(&p, 0, sizeof p);
    fail_if(fsched_event_init(&p.ping, 0, 0), "fsched_event_init");
    fail_if(fsched_event_init(&p.pong, 0, 0), "fsched_event_init");
    (void)unused;
    t = pair(pinger, ponger, &p);
    if (p.out_of_turn) bench_fail("fibersched ping-pong: %ld signals out of turn", p.out_of_turn);
    fsched_event_destroy(&p.ping);
    fsched_event_destroy(&p.pong);
    return t;
}

/* ---- Boost.Fiber ---- */

#if defined(FSCHED_BENCH_BOOST_FIBER)
static double run_boost_yield(void *unused) {
    (void)unused;
    return bench_yield_boost(rounds);
}

static double run_boost_pingpong(void *unused) {
    (void)unused;
    return bench_pingpong_boost(rounds);
}
#endif

/* ---- Go: a child process that prints its own nanoseconds per step ---- */

#if defined(BENCH_GO)
static double run_go(void *mode) {
    char n_arg[32], *argv[4];
    double ns = 0;
    pid_t pid;
    FILE *out;
    snprintf(n_arg, sizeof n_arg, "--n=%ld", rounds);
    argv[0] = (char *)BENCH_GO;
    argv[1] = (char *)mode;
    argv[2] = n_arg;
    argv[3] = NULL;
    out = bench_child_start(argv, &pid);
    if (fscanf(out, "%lf", &ns) != 1) bench_fail("Go %s: no result", (char *)mode);
    if (!bench_child_end(out, pid)) bench_fail("Go %s failed", (char *)mode);
    return ns * 1e-9;
}
#endif

/* ---- the table ---- */

static void table(const char *what, bench_case *c, int nc, int reps) {
    char buf[16];
    int i;
    bench_run_cases(c, nc, reps, 10, 1);
    printf("%s: %ld per task, 2 tasks on one thread; median of %d repetitions\n\n", what,
           rounds, reps);
    printf("| %-40s | %10s | %10s | %13s |\n", "candidate", "median ns", "min ns",
           "vs fibersched");
    printf("|------------------------------------------|------------|------------|"
           "---------------|\n");
    for (i = 0; i < nc; i++)
        printf("| %-40s | %10.1f | %10.1f | %13s |\n", c[i].name, c[i].median * 1e9,
               c[i].min * 1e9, bench_ratio(buf, sizeof buf, &c[i], &c[0]));
    printf("\n");
}

static int add(bench_case *c, int nc, const char *name, double (*run)(void *), void *ctx) {
    c[nc].name = name;
    c[nc].run = run;
    c[nc].ctx = ctx;
    c[nc].workers = 1;
    return nc + 1;
}

int main(int argc, char **argv) {
    int quick = bench_quick(argc, argv);
    int reps = bench_reps(argc, argv, quick ? 3 : 9);
    bench_case y[3], p[3];
    int ny = 0, np = 0, i;
    fsched_desc d;
    rounds = bench_option(argc, argv, "--n=", quick ? 20000 : 1000000);
    if (rounds < 1) bench_fail("--n must be at least 1");
    memset(&d, 0, sizeof d);
    d.workers = 1;
    fail_if(fsched_create(&d, &sched), "fsched_create");
    memset(y, 0, sizeof y);
    memset(p, 0, sizeof p);
    ny = add(y, ny, "fibersched: fsched_yield", run_yield, NULL);
    np = add(p, np, "fibersched: fsched_event", run_pingpong, NULL);
#if defined(FSCHED_BENCH_BOOST_FIBER)
    ny = add(y, ny, "Boost.Fiber: this_fiber::yield", run_boost_yield, NULL);
    np = add(p, np, "Boost.Fiber: unbuffered_channel", run_boost_pingpong, NULL);
#endif
#if defined(BENCH_GO)
    ny = add(y, ny, "Go: runtime.Gosched", run_go, (void *)"yield");
    np = add(p, np, "Go: unbuffered channels", run_go, (void *)"pingpong");
#endif
    table("yield", y, ny, reps);
    table("ping-pong", p, np, reps);
    bench_quick_note(quick);
    for (i = 1; i < ny; i++) {
        char what[96];
        snprintf(what, sizeof what, "fibersched yield / %s", y[i].name);
        bench_target(what, y[0].median / y[i].median, "<=", 1.0, "x");
    }
    for (i = 1; i < np; i++) {
        char what[96];
        snprintf(what, sizeof what, "fibersched ping-pong / %s", p[i].name);
        bench_target(what, p[0].median / p[i].median, "<=", 1.0, "x");
    }
    fail_if(fsched_destroy(sched), "fsched_destroy");
    return 0;
}
