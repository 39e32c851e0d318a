/* What a wake across threads costs: two plain threads (no scheduler) ping-pong, each
   setting an event the other waits on, side by side in one run:

   fibersched    two auto-reset fsched_event: the main thread sets `ping` and waits on
                 `pong`, the partner waits on `ping` and sets `pong`; a plain thread that
                 waits blocks on its own futex (elsewhere a mutex and condition variable)
   pthread       the reference: the same handshake with a pthread mutex, a condition
                 variable per direction and a turn flag

   in two configurations: both threads pinned to one CPU (the first the process may use,
   normally CPU 0: every wake hands the processor to the woken thread, and the waker may be
   preempted anywhere, inside its lock too, so a woken thread that spun on the waker's lock
   would spin out its time slice), and unpinned (the CPUs the process was started with).
   Each repetition runs both candidates once, in rotating order, after a warm-up run of
   each. Reported: microseconds per round trip (two wakes), the median, minimum and maximum
   of the repetitions, and the ratio to pthread. Every round trip is counted on both sides;
   a wrong count, a wake left over, a failed call, or no round trip for 10 s (a lost wake)
   ends the program with an error. Target: at most 100 us per round trip on one CPU.

   Then what a fork-join call from a thread outside every scheduler costs: main calls
   fsched_join (two empty halves) or fsched_parallel_for (two elements, one per call) on
   the default scheduler, which runs the call as one task while main blocks, against the
   same calls from a task of the default; back to back (the workers still look for work
   between the calls), and after 2 ms of sleep each (the workers sleep: the call wakes
   one, and its end wakes main). Unpinned only: the default's workers keep the CPUs they
   were started with. Reported: microseconds per call, and what a call from main adds to
   the same call from a task, in wakes: halves of the unpinned fibersched round trip
   above (a round trip is two wakes).
   Usage: bench_wake [--quick] [--reps=N] [--trips=N] */
#define _GNU_SOURCE 1
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

static long trips;
static int pinned;
#if defined(__linux__)
static cpu_set_t start_cpus; /* the CPUs the process was started with */
static int pin_cpu;          /* the first of them */
#endif

/* Gives the calling thread the CPUs of the configuration: the one CPU when `pinned`, those
   the process was started with otherwise. Threads started after inherit them. */
static void set_cpus(void) {
#if defined(__linux__)
    cpu_set_t set = start_cpus;
    if (pinned) {
        CPU_ZERO(&set);
        CPU_SET(pin_cpu, &set);
    }
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
        bench_fail("cannot set a thread's CPUs (CPU %d)", pin_cpu);
#endif
}

/* ---- watchdog: a lost wake would leave both threads blocked for good ---- */

static atomic_long progress;  /* round trips completed, over all runs */
static atomic_int stage;      /* 2 * pinned + candidate (0: fibersched, 1: pthread) */
static atomic_int watch_stop;
static const char *const stage_names[4] = {"fibersched, unpinned", "pthread, unpinned",
                                           "fibersched, one CPU", "pthread, one CPU"};

static void *watchdog(void *arg) {
    long last = -1;
    int still = 0;
    (void)arg;
    while (!atomic_load(&watch_stop)) {
        long now = atomic_load_explicit(&progress, memory_order_relaxed);
        if (now != last) {
            last = now;
            still = 0;
        } else if (++still >= 40) { /* 40 x 250 ms */
            bench_fail("%s: no round trip completed for 10 s (a lost wake?)",
                       stage_names[atomic_load(&stage)]);
        }
        bench_sleep_ms(250);
    }
    return NULL;
}

/* The timed thread counts its round trips (a plain store: only this thread writes). */
static void count_trip(void) {
    atomic_store_explicit(&progress, atomic_load_explicit(&progress, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* ---- fibersched: two events ---- */

static fsched_event fs_ping, fs_pong;
static long fs_answered;

static void *fs_partner(void *arg) {
    long i;
    (void)arg;
    for (i = 0; i < trips; i++) {
        fsched_result r = fsched_event_wait(&fs_ping);
        if (r != FSCHED_OK) bench_fail("fibersched: wait: %s", fsched_result_string(r));
        fs_answered++;
        r = fsched_event_set(&fs_pong);
        if (r != FSCHED_OK) bench_fail("fibersched: set: %s", fsched_result_string(r));
    }
    return NULL;
}

static double fs_run(void *ctx) {
    pthread_t t;
    double t0, t1;
    long i;
    (void)ctx;
    atomic_store(&stage, 2 * pinned);
    fs_answered = 0;
    if (fsched_event_init(&fs_ping, 0, 0) != FSCHED_OK ||
        fsched_event_init(&fs_pong, 0, 0) != FSCHED_OK)
        bench_fail("fibersched: event init failed");
    if (pthread_create(&t, NULL, fs_partner, NULL) != 0) bench_fail("cannot start a thread");
    t0 = bench_now();
    for (i = 0; i < trips; i++) {
        fsched_result r = fsched_event_set(&fs_ping);
        if (r != FSCHED_OK) bench_fail("fibersched: set: %s", fsched_result_string(r));
        r = fsched_event_wait(&fs_pong);
        if (r != FSCHED_OK) bench_fail("fibersched: wait: %s", fsched_result_string(r));
        count_trip();
    }
    t1 = bench_now();
    pthread_join(t, NULL);
    if (fs_answered != trips)
        bench_fail("fibersched: %ld answers for %ld trips", fs_answered, trips);
    if (fsched_event_is_set(&fs_ping) || fsched_event_is_set(&fs_pong))
        bench_fail("fibersched: a wake was left over");
    if (fsched_event_destroy(&fs_ping) != FSCHED_OK ||
        fsched_event_destroy(&fs_pong) != FSCHED_OK)
        bench_fail("fibersched: event destroy failed");
    return t1 - t0;
}

/* ---- pthread: a mutex, two condition variables, a turn ---- */

static pthread_mutex_t pt_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pt_ping = PTHREAD_COND_INITIALIZER, pt_pong = PTHREAD_COND_INITIALIZER;
static int pt_turn; /* 1: the partner's turn, 0: the main thread's */
static long pt_answered;

static void *pt_partner(void *arg) {
    long i;
    (void)arg;
    for (i = 0; i < trips; i++) {
        pthread_mutex_lock(&pt_lock);
        while (pt_turn != 1) pthread_cond_wait(&pt_ping, &pt_lock);
        pt_turn = 0;
        pt_answered++;
        pthread_cond_signal(&pt_pong);
        pthread_mutex_unlock(&pt_lock);
    }
    return NULL;
}

static double pt_run(void *ctx) {
    pthread_t t;
    double t0, t1;
    long i;
    (void)ctx;
    atomic_store(&stage, 2 * pinned + 1);
    pt_turn = 0;
    pt_answered = 0;
    if (pthread_create(&t, NULL, pt_partner, NULL) != 0) bench_fail("cannot start a thread");
    t0 = bench_now();
    for (i = 0; i < trips; i++) {
        pthread_mutex_lock(&pt_lock);
        pt_turn = 1;
        pthread_cond_signal(&pt_ping);
        while (pt_turn != 0) pthread_cond_wait(&pt_pong, &pt_lock);
        pthread_mutex_unlock(&pt_lock);
        count_trip();
    }
    t1 = bench_now();
    pthread_join(t, NULL);
    if (pt_answered != trips) bench_fail("pthread: %ld answers for %ld trips", pt_answered, trips);
    return t1 - t0;
}

/* ---- fork-join calls from main on the default scheduler, and from a task ---- */

typedef struct outside_case {
    int use_loop;   /* fsched_parallel_for instead of fsched_join */
    int in_task;    /* the calls from a task of the default instead of from main */
    int asleep;     /* 2 ms of sleep before each call (timed apart) */
    long calls;
    long ran;       /* halves or elements run: checked */
    double elapsed; /* set by the task */
} outside_case;

static void outside_half(void *p) { __atomic_fetch_add((long *)p, 1, __ATOMIC_RELAXED); }

static void outside_body(void *p, size_t lo, size_t hi) {
    __atomic_fetch_add((long *)p, (long)(hi - lo), __ATOMIC_RELAXED);
}

/* The case's calls from the calling thread: the seconds they took (sleeps left out). */
static double outside_calls(outside_case *c) {
    double total = 0;
    long i;
    for (i = 0; i < c->calls; i++) {
        double t0;
        fsched_result r;
        if (c->asleep) bench_sleep_ms(2);
        t0 = bench_now();
        r = c->use_loop ? fsched_parallel_for(0, 2, 1, outside_body, &c->ran)
                        : fsched_join(outside_half, &c->ran, outside_half, &c->ran);
        total += bench_now() - t0;
        if (r != FSCHED_OK) bench_fail("a call on the default: %s", fsched_result_string(r));
        if (!c->asleep && i % 64 == 63) count_trip();
    }
    return total;
}

static void outside_task(void *p) {
    outside_case *c = (outside_case *)p;
    c->elapsed = outside_calls(c);
}

static double outside_run(void *ctx) {
    outside_case *c = (outside_case *)ctx;
    double elapsed;
    c->ran = 0;
    if (c->in_task) {
        fsched_sched *s;
        fsched_wait_group wg;
        if (fsched_default_get(&s) != FSCHED_OK || fsched_wait_group_init(&wg) != FSCHED_OK ||
            fsched_wait_group_spawn(&wg, s, outside_task, c) != FSCHED_OK ||
            fsched_wait_group_wait(&wg) != FSCHED_OK || fsched_wait_group_destroy(&wg) != FSCHED_OK)
            bench_fail("cannot run a task on the default scheduler");
        elapsed = c->elapsed;
    } else {
        elapsed = outside_calls(c);
    }
    if (c->ran != 2 * c->calls) bench_fail("%ld halves or elements ran for %ld calls", c->ran, c->calls);
    return elapsed;
}

/* The table of calls from main; `wake` is the time of one wake, in microseconds. */
static void outside_table(int reps, double wake) {
    static const char *const names[8] = {
        "join, main",        "join, task",        "parallel_for, main", "parallel_for, task",
        "join, main, asleep", "join, task, asleep", "parallel_for, main, asleep",
        "parallel_for, task, asleep"};
    outside_case oc[8];
    bench_case c[8];
    int i;
    memset(oc, 0, sizeof oc);
    memset(c, 0, sizeof c);
    atomic_store(&stage, 0);
    for (i = 0; i < 8; i++) {
        oc[i].use_loop = (i / 2) % 2;
        oc[i].in_task = i % 2;
        oc[i].asleep = i >= 4;
        oc[i].calls = oc[i].asleep ? (trips / 10 > 0 ? trips / 10 : 1) : trips;
        c[i].name = names[i];
        c[i].run = outside_run;
        c[i].ctx = &oc[i];
    }
    printf("\nfork-join calls on the default scheduler (%u workers), from main (blocked until "
           "the call is done) and from a task; median of %d repetitions\n\n",
           (unsigned)bench_cpu_count(), reps);
    printf("| %-8s | %-26s | %12s | %8s | %8s | %16s |\n", "threads", "candidate",
           "median us/call", "min us", "max us", "main adds, wakes");
    printf("|%s|%s|%s|%s|%s|%s|\n", "----------", "----------------------------",
           "----------------", "----------", "----------", "------------------");
    bench_run_cases(c, 8, reps, 5, 1);
    for (i = 0; i < 8; i++) {
        double per = c[i].median / (double)oc[i].calls * 1e6;
        char added[32] = "-";
        if (!oc[i].in_task) {
            double task = c[i + 1].median / (double)oc[i + 1].calls * 1e6;
            snprintf(added, sizeof added, "%.2f", (per - task) / wake);
        }
        printf("| %-8s | %-26s | %14.2f | %8.2f | %8.2f | %16s |\n", "unpinned", c[i].name, per,
               c[i].min / (double)oc[i].calls * 1e6, c[i].max / (double)oc[i].calls * 1e6, added);
    }
    printf("\n(a wake: %.2f us, half the unpinned fibersched round trip)\n", wake);
}

int main(int argc, char **argv) {
    int quick = bench_quick(argc, argv), reps = bench_reps(argc, argv, quick ? 3 : 9);
    int ncpus = bench_cpu_count();
    double one_cpu = 0, unpinned = 0;
    pthread_t dog;
    trips = bench_option(argc, argv, "--trips=", quick ? 200 : 2000);
    if (trips < 1) bench_fail("--trips must be at least 1");
#if defined(__linux__)
    if (pthread_getaffinity_np(pthread_self(), sizeof start_cpus, &start_cpus) != 0)
        bench_fail("cannot read the process's CPUs");
    for (pin_cpu = 0; pin_cpu < CPU_SETSIZE && !CPU_ISSET(pin_cpu, &start_cpus); pin_cpu++) {
    }
    if (pin_cpu == CPU_SETSIZE) bench_fail("no CPU in the process's affinity mask");
    ncpus = CPU_COUNT(&start_cpus);
#endif
    /* started before any pinning: the watchdog keeps the process's CPUs */
    if (pthread_create(&dog, NULL, watchdog, NULL) != 0) bench_fail("cannot start a thread");

    printf("ping-pong between two plain threads, each waking the other, %ld round trips; "
           "median of %d repetitions (one CPU: both threads on CPU %d; unpinned: %d CPU(s))\n\n",
           trips, reps,
#if defined(__linux__)
           pin_cpu,
#else
           0,
#endif
           ncpus);
    printf("| %-8s | %-24s | %12s | %8s | %8s | %10s |\n", "threads", "candidate",
           "median us/trip", "min us", "max us", "vs pthread");
    printf("|%s|%s|%s|%s|%s|%s|\n", "----------", "--------------------------",
           "----------------", "----------", "----------", "------------");
    for (pinned = 1; pinned >= 0; pinned--) {
        bench_case c[2];
        char ratio[32];
        int i;
        memset(c, 0, sizeof c);
        c[0].name = "fibersched: fsched_event";
        c[0].run = fs_run;
        c[1].name = "pthread: mutex + condvar";
        c[1].run = pt_run;
        set_cpus(); /* the main thread; the partners inherit its CPUs */
        bench_run_cases(c, 2, reps, 5, 1);
        for (i = 0; i < 2; i++)
            printf("| %-8s | %-24s | %14.2f | %8.2f | %8.2f | %10s |\n",
                   pinned ? "one CPU" : "unpinned", c[i].name, c[i].median / (double)trips * 1e6,
                   c[i].min / (double)trips * 1e6, c[i].max / (double)trips * 1e6,
                   bench_ratio(ratio, sizeof ratio, &c[i], &c[1]));
        if (pinned) one_cpu = c[0].median / (double)trips * 1e6;
        else unpinned = c[0].median / (double)trips * 1e6;
    }
    outside_table(reps, unpinned / 2); /* unpinned: the CPUs the process started with */
    atomic_store(&watch_stop, 1);
    pthread_join(dog, NULL);
    printf("\n");
    bench_quick_note(quick);
    bench_target("fibersched round trip on one CPU, us", one_cpu, "<=", 100, "");
    return 0;
}
