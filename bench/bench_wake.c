/* What a wake across threads costs: two plain threads (no scheduler) ping-pong, each
   setting an event the other waits on, side by side in one run:

   fibersched    two auto-reset fsched_event: a plain thread that waits blocks on its own
                 futex (elsewhere a mutex and condition variable)
   pthread       the reference: a pthread mutex, a condition variable per direction and
                 a turn flag

   in two configurations: both threads pinned to one CPU (every wake hands the processor
   to the woken thread, and the waker may be preempted anywhere, inside its lock too),
   and unpinned. Reported: microseconds per round trip (two wakes), the median of the
   repetitions, and fibersched's ratio to pthread. Target: at most 100 us per round trip
   on one CPU.
   Usage: bench_wake [--quick] [--reps=N] [--trips=N] */
#define _GNU_SOURCE 1
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"

#include <pthread.h>
#include <sched.h>

static long trips;
static int pinned;

/* Pins the calling thread to CPU 0 when `pinned` (Linux), so that both threads share it. */
static void maybe_pin(void) {
#if defined(__linux__)
    if (pinned) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(0, &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
            bench_fail("cannot pin a thread to CPU 0");
    }
#endif
}

/* ---- fibersched: two events ---- */

static fsched_event fs_ping, fs_pong;

static void *fs_partner(void *arg) {
    long i;
    (void)arg;
    maybe_pin();
    for (i = 0; i < trips; i++) {
        if (fsched_event_wait(&fs_ping) != FSCHED_OK) bench_fail("fibersched: wait failed");
        if (fsched_event_set(&fs_pong) != FSCHED_OK) bench_fail("fibersched: set failed");
    }
    return NULL;
}

static double fs_run(void *ctx) {
    pthread_t t;
    double t0, t1;
    long i;
    (void)ctx;
    if (fsched_event_init(&fs_ping, 0, 0) != FSCHED_OK || fsched_event_init(&fs_pong, 0, 0) != FSCHED_OK)
        bench_fail("fibersched: event init failed");
    if (pthread_create(&t, NULL, fs_partner, NULL) != 0) bench_fail("cannot start a thread");
    t0 = bench_now();
    for (i = 0; i < trips; i++) {
        if (fsched_event_set(&fs_ping) != FSCHED_OK) bench_fail("fibersched: set failed");
        if (fsched_event_wait(&fs_pong) != FSCHED_OK) bench_fail("fibersched: wait failed");
    }
    t1 = bench_now();
    pthread_join(t, NULL);
    if (fsched_event_is_set(&fs_ping) || fsched_event_is_set(&fs_pong))
        bench_fail("fibersched: a wake was left over");
    if (fsched_event_destroy(&fs_ping) != FSCHED_OK || fsched_event_destroy(&fs_pong) != FSCHED_OK)
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
    maybe_pin();
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
    }
    t1 = bench_now();
    pthread_join(t, NULL);
    if (pt_answered != trips) bench_fail("pthread: %ld answers for %ld trips", pt_answered, trips);
    return t1 - t0;
}

int main(int argc, char **argv) {
    int quick = bench_quick(argc, argv), reps = bench_reps(argc, argv, quick ? 3 : 9);
    double one_cpu = 0;
    trips = bench_option(argc, argv, "--trips=", quick ? 200 : 2000);
    printf("ping-pong between two plain threads through events, %ld round trips; median of %d "
           "repetitions\n\n",
           trips, reps);
    printf("| threads      | candidate            |  median us/trip |  min us |  max us | vs pthread |\n");
    printf("|--------------|----------------------|-----------------|---------|---------|------------|\n");
    for (pinned = 1; pinned >= 0; pinned--) {
        bench_case c[2];
        int i;
        memset(c, 0, sizeof c);
        c[0].name = "fibersched events";
        c[0].run = fs_run;
        c[1].name = "pthread mutex+cond";
        c[1].run = pt_run;
        /* the main thread pins itself too (and is released for the unpinned round) */
#if defined(__linux__)
        {
            cpu_set_t set;
            int cpu, n = bench_cpu_count();
            CPU_ZERO(&set);
            if (pinned) CPU_SET(0, &set);
            else
                for (cpu = 0; cpu < n && cpu < CPU_SETSIZE; cpu++) CPU_SET(cpu, &set);
            if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
                bench_fail("cannot set the main thread's CPUs");
        }
#endif
        bench_run_cases(c, 2, reps, 5, 1);
        for (i = 0; i < 2; i++)
            printf("| %-12s | %-20s | %15.2f | %7.2f | %7.2f | %10.2fx |\n",
                   pinned ? "one CPU" : "unpinned", c[i].name, c[i].median / (double)trips * 1e6,
                   c[i].min / (double)trips * 1e6, c[i].max / (double)trips * 1e6,
                   c[i].median / c[1].median);
        if (pinned) one_cpu = c[0].median / (double)trips * 1e6;
    }
    printf("\n");
    bench_quick_note(quick);
    bench_target("fibersched round trip on one CPU, us", one_cpu, "<=", 100, "");
    return 0;
}
