/* What an idle or lightly loaded scheduler costs:

   (a) idle CPU: a scheduler with the default worker count; a plain thread outside it
       spawns an empty task every millisecond for 2 s (0.3 s with --quick). The process's
       CPU time (getrusage RUSAGE_SELF, user + system) over that window, minus the spawning
       thread's own (RUSAGE_THREAD), is what the workers burn: reported as a percentage of
       one core (and, as a cross-check, the same from CLOCK_PROCESS_CPUTIME_ID minus
       CLOCK_THREAD_CPUTIME_ID). Peer: oneTBB, the same tasks enqueued from the outside
       thread (task_arena::enqueue) into an arena of as many TBB worker threads, when
       available.
   (b) wake latency: with every worker asleep (10 ms between spawns), the outside thread
       spawns a task that reads fsched_clock_ns() (CLOCK_MONOTONIC) when it starts; the
       latency is that minus the clock read just before fsched_spawn. Median and 99th
       percentile of 1,000 samples (50 with --quick); oneTBB's enqueue alongside.

   Many tasks blocked at once, and their memory, are bench_blocked's.

   Candidates of (a) and (b) alternate: each repetition or sample runs every candidate
   once, in rotating order. Usage: bench_idle [--quick] [--reps=N] [--samples=N] */
#define _GNU_SOURCE 1
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>

#if defined(FSCHED_BENCH_TBB)
void bench_idle_tbb_init(int workers); /* bench_idle_tbb.cpp */
void bench_idle_tbb_spawn_empty(void);
long bench_idle_tbb_executed(void);
void bench_idle_tbb_spawn_stamp(uint64_t *slot);
#endif

static fsched_sched *sched;

static double cputime_seconds(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double rusage_seconds(const struct rusage *r) {
    return (double)r->ru_utime.tv_sec + (double)r->ru_utime.tv_usec * 1e-6 +
           (double)r->ru_stime.tv_sec + (double)r->ru_stime.tv_usec * 1e-6;
}

/* ---- the candidates: spawn an empty task, count completions, spawn a stamping task ---- */

static atomic_long fs_executed;

static void empty_task(void *unused) {
    (void)unused;
    atomic_fetch_add_explicit(&fs_executed, 1, memory_order_relaxed);
}

static void fs_spawn_empty(void) {
    fsched_result r = fsched_spawn(sched, empty_task, NULL);
    if (r != FSCHED_OK) bench_fail("fsched_spawn: %s", fsched_result_string(r));
}

static long fs_executed_count(void) { return atomic_load(&fs_executed); }

static void stamp_task(void *slot) {
    __atomic_store_n((uint64_t *)slot, fsched_clock_ns(), __ATOMIC_RELEASE);
}

static void fs_spawn_stamp(uint64_t *slot) {
    fsched_result r = fsched_spawn(sched, stamp_task, slot);
    if (r != FSCHED_OK) bench_fail("fsched_spawn: %s", fsched_result_string(r));
}

typedef struct idle_peer {
    const char *name;
    void (*spawn_empty)(void);
    long (*executed)(void);
    void (*spawn_stamp)(uint64_t *slot);
    double cpu[BENCH_MAX_REPS];    /* (a) workers' CPU, % of one core */
    double spawner[BENCH_MAX_REPS]; /* (a) the spawning thread's CPU, % of one core */
    double per_task[BENCH_MAX_REPS]; /* (a) workers' CPU per task spawned, microseconds */
    double clk[BENCH_MAX_REPS];     /* (a) workers' CPU, % of one core, by clock_gettime */
    double *lat;                   /* (b) latencies, microseconds */
} idle_peer;

/* ---- (a) ---- */

typedef struct spawner_args {
    idle_peer *p;
    double seconds;
    double cpu;     /* the thread's own CPU seconds (getrusage) */
    double cpu_clk; /* the same by CLOCK_THREAD_CPUTIME_ID */
    long spawned;
} spawner_args;

static void *spawner_main(void *arg) {
    spawner_args *a = (spawner_args *)arg;
    struct rusage r0, r1;
    struct timespec next;
    double end, c0, c1;
    getrusage(RUSAGE_THREAD, &r0);
    c0 = cputime_seconds(CLOCK_THREAD_CPUTIME_ID);
    clock_gettime(CLOCK_MONOTONIC, &next);
    end = bench_now() + a->seconds;
    while (bench_now() < end) {
        a->p->spawn_empty();
        a->spawned++;
        next.tv_nsec += 1000000;
        if (next.tv_nsec >= 1000000000) {
            next.tv_nsec -= 1000000000;
            next.tv_sec++;
        }
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) != 0) {
        }
    }
    c1 = cputime_seconds(CLOCK_THREAD_CPUTIME_ID);
    getrusage(RUSAGE_THREAD, &r1);
    a->cpu = rusage_seconds(&r1) - rusage_seconds(&r0);
    a->cpu_clk = c1 - c0;
    return NULL;
}

static void idle_cost(idle_peer *p, double seconds, double *cpu_pct, double *spawner_pct,
                      double *per_task_us, double *clk_pct) {
    struct rusage r0, r1;
    spawner_args a;
    pthread_t t;
    double t0, t1, until, c0, c1;
    long before = p->executed();
    memset(&a, 0, sizeof a);
    a.p = p;
    a.seconds = seconds;
    getrusage(RUSAGE_SELF, &r0);
    c0 = cputime_seconds(CLOCK_PROCESS_CPUTIME_ID);
    t0 = bench_now();
    if (pthread_create(&t, NULL, spawner_main, &a) != 0) bench_fail("pthread_create failed");
    pthread_join(t, NULL);
    t1 = bench_now();
    c1 = cputime_seconds(CLOCK_PROCESS_CPUTIME_ID);
    getrusage(RUSAGE_SELF, &r1);
    *clk_pct = (c1 - c0 - a.cpu_clk) / (t1 - t0) * 100.0;
    *cpu_pct = (rusage_seconds(&r1) - rusage_seconds(&r0) - a.cpu) / (t1 - t0) * 100.0;
    *per_task_us = (rusage_seconds(&r1) - rusage_seconds(&r0) - a.cpu) / (double)a.spawned * 1e6;
    *spawner_pct = a.cpu / (t1 - t0) * 100.0;
    until = bench_now() + 5.0; /* every task must have run */
    while (p->executed() - before != a.spawned) {
        if (bench_now() > until)
            bench_fail("%s: %ld of %ld empty tasks ran", p->name, p->executed() - before,
                       a.spawned);
        bench_sleep_ms(1);
    }
}

/* ---- (b) ---- */

static double wake_sample(idle_peer *p) {
    uint64_t slot = 0, before, start;
    double until;
    bench_sleep_ms(10); /* every worker goes to sleep */
    before = fsched_clock_ns();
    p->spawn_stamp(&slot);
    until = bench_now() + 5.0;
    while ((start = __atomic_load_n(&slot, __ATOMIC_ACQUIRE)) == 0) {
        if (bench_now() > until) bench_fail("%s: the stamping task did not run", p->name);
        bench_sleep_ms(1);
    }
    if (start < before) bench_fail("%s: the task started before it was spawned", p->name);
    return (double)(start - before) * 1e-3;
}

/* ---- main ---- */

int main(int argc, char **argv) {
    int quick = bench_quick(argc, argv);
    int reps = bench_reps(argc, argv, quick ? 1 : 3);
    int samples = (int)bench_option(argc, argv, "--samples=", quick ? 50 : 1000);
    double seconds = quick ? 0.3 : 2.0;
    idle_peer peers[2];
    int np = 0, i, r, workers;
    double wake_median = 0;
    fsched_result res;

    if (samples < 1) bench_fail("--samples must be at least 1");
    res = fsched_create(NULL, &sched);
    if (res != FSCHED_OK) bench_fail("fsched_create: %s", fsched_result_string(res));
    workers = (int)fsched_worker_count(sched);
    memset(peers, 0, sizeof peers);
    peers[np].name = "fibersched: fsched_spawn from outside";
    peers[np].spawn_empty = fs_spawn_empty;
    peers[np].executed = fs_executed_count;
    peers[np++].spawn_stamp = fs_spawn_stamp;
#if defined(FSCHED_BENCH_TBB)
    bench_idle_tbb_init(workers);
    peers[np].name = "oneTBB: task_arena::enqueue";
    peers[np].spawn_empty = bench_idle_tbb_spawn_empty;
    peers[np].executed = bench_idle_tbb_executed;
    peers[np++].spawn_stamp = bench_idle_tbb_spawn_stamp;
#endif
    for (i = 0; i < np; i++) {
        peers[i].lat = (double *)calloc((size_t)samples, sizeof(double));
        if (!peers[i].lat) bench_fail("out of memory");
    }

    /* (a) */
    for (i = 0; i < np; i++) { /* warm up: threads started, task memory allocated */
        double a, b, c, e;
        idle_cost(&peers[i], 0.05, &a, &b, &c, &e);
    }
    for (r = 0; r < reps; r++)
        for (i = 0; i < np; i++) {
            int k = (i + r) % np;
            bench_sleep_ms(50);
            idle_cost(&peers[k], seconds, &peers[k].cpu[r], &peers[k].spawner[r],
                      &peers[k].per_task[r], &peers[k].clk[r]);
        }
    printf("(a) idle cost: %d worker(s); an empty task spawned from an outside thread every "
           "1 ms for %.1f s; workers' CPU = process CPU - the spawning thread's CPU, in %% "
           "of one core; %d repetition(s)\n\n", workers, seconds, reps);
    printf("| %-38s | %11s | %8s | %8s | %15s | %13s | %17s |\n", "candidate", "median CPU%",
           "min", "max", "CPU us per task", "spawner CPU%", "CPU% by cputime");
    printf("|%s|%s|%s|%s|%s|%s|%s|\n", "----------------------------------------",
           "-------------", "----------", "----------", "-----------------", "---------------",
           "-------------------");
    for (i = 0; i < np; i++) {
        double med_sp = bench_median(peers[i].spawner, reps);
        double med_pt = bench_median(peers[i].per_task, reps);
        double med_clk = bench_median(peers[i].clk, reps);
        double med = bench_median(peers[i].cpu, reps); /* sorts: cpu[0] is the minimum */
        printf("| %-38s | %10.2f%% | %7.2f%% | %7.2f%% | %15.1f | %12.2f%% | %16.2f%% |\n",
               peers[i].name, med, peers[i].cpu[0], peers[i].cpu[reps - 1], med_pt, med_sp,
               med_clk);
    }
    printf("\n(CPU%% by cputime: the same from CLOCK_PROCESS_CPUTIME_ID and "
           "CLOCK_THREAD_CPUTIME_ID, as a cross-check of getrusage's accounting)\n");
    printf("\n");

    /* (b) */
    for (r = 0; r < samples; r++)
        for (i = 0; i < np; i++) {
            int k = (i + r) % np;
            peers[k].lat[r] = wake_sample(&peers[k]);
        }
    printf("(b) wake latency: a task spawned from an outside thread while every worker "
           "sleeps (10 ms apart); from just before the spawn to the task's start; %d "
           "samples\n\n", samples);
    printf("| %-38s | %10s | %10s | %10s | %10s |\n", "candidate", "median us", "p99 us",
           "min us", "max us");
    printf("|%s|%s|%s|%s|%s|\n", "----------------------------------------", "------------",
           "------------", "------------", "------------");
    for (i = 0; i < np; i++) {
        double med = bench_median(peers[i].lat, samples); /* sorts */
        double p99 = bench_quantile(peers[i].lat, samples, 0.99);
        printf("| %-38s | %10.1f | %10.1f | %10.1f | %10.1f |\n", peers[i].name, med, p99,
               peers[i].lat[0], peers[i].lat[samples - 1]);
        if (i == 0) wake_median = med;
    }
    printf("\n");
    fsched_destroy(sched);

    bench_quick_note(quick);
    bench_target("fibersched idle workers' CPU, of one core", bench_median(peers[0].cpu, reps),
                 "<=", 2.0, "%");
    bench_target("fibersched wake latency, median", wake_median, "<=", 50.0, " us");
    for (i = 0; i < np; i++) free(peers[i].lat);
    return 0;
}
