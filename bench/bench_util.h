/* Shared benchmark helpers: a monotonic clock, medians, options, and running candidates.
   Benchmarks compare candidates side by side in one run: every repetition runs each
   candidate once, in rotating order, and the table reports the median of the repetitions.
   POSIX: include after a definition of _DEFAULT_SOURCE or _GNU_SOURCE (fibersched's
   implementation defines _DEFAULT_SOURCE itself). */
#ifndef FIBERSCHED_BENCH_UTIL_H
#define FIBERSCHED_BENCH_UTIL_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of n values (sorts them). */
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Sorted value at fraction q (0..1) of n values, e.g. q = 0.99. */
static inline double bench_quantile(double *v, int n, double q) {
    int i = (int)(q * (n - 1) + 0.5);
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* True when the program was started with --quick (CI: fewer repetitions). */
static inline int bench_quick(int argc, char **argv) {
    int i;
    for (i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0) return 1;
    return 0;
}

/* ---- candidates run side by side ----
   A candidate's run() performs one timed repetition and returns its duration in seconds;
   it checks its own result and calls bench_fail() when the result is wrong. */

#define BENCH_MAX_REPS 64

typedef struct bench_case {
    const char *name;
    double (*run)(void *ctx);
    void *ctx;
    int workers; /* threads the candidate uses (0: not applicable) */
    double samples[BENCH_MAX_REPS];
    double median, min, max;
} bench_case;

/* Ends the program with a message: a candidate computed a wrong result or failed. */
static inline void bench_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
static inline void bench_fail(const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fputs("bench: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

/* Sleeps ms milliseconds (lets the idle threads of the previous candidate's runtime stop
   spinning before the next candidate starts). */
static inline void bench_sleep_ms(int ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The value of an option `--name=N` (e.g. "--workers="), or def when absent. */
static inline long bench_option(int argc, char **argv, const char *prefix, long def) {
    size_t n = strlen(prefix);
    int i;
    for (i = 1; i < argc; i++)
        if (strncmp(argv[i], prefix, n) == 0) return strtol(argv[i] + n, NULL, 10);
    return def;
}

/* Repetitions: --reps=N, or def; between 1 and BENCH_MAX_REPS. */
static inline int bench_reps(int argc, char **argv, int def) {
    long n = bench_option(argc, argv, "--reps=", def);
    return n < 1 ? 1 : n > BENCH_MAX_REPS ? BENCH_MAX_REPS : (int)n;
}

/* Online processors (1 when unknown). */
static inline int bench_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Runs `reps` repetitions (after a warm-up run of every candidate when `warm_up` is set);
   each repetition runs every candidate once, starting one further in the list each time,
   with settle_ms of sleep before each run. Fills median, min and max (in seconds). */
static inline void bench_run_cases(bench_case *c, int nc, int reps, int settle_ms, int warm_up) {
    int r, i;
    if (reps > BENCH_MAX_REPS) reps = BENCH_MAX_REPS;
    for (i = 0; i < nc && warm_up; i++) {
        if (settle_ms) bench_sleep_ms(settle_ms);
        c[i].run(c[i].ctx);
    }
    for (r = 0; r < reps; r++)
        for (i = 0; i < nc; i++) {
            int k = (i + r) % nc; /* rotate the order between repetitions */
            if (settle_ms) bench_sleep_ms(settle_ms);
            c[k].samples[r] = c[k].run(c[k].ctx);
        }
    for (i = 0; i < nc; i++) {
        c[i].median = bench_median(c[i].samples, reps); /* sorts */
        c[i].min = c[i].samples[0];
        c[i].max = c[i].samples[reps - 1];
    }
}

/* The candidate named `name` that uses `workers` threads, or NULL. */
static inline bench_case *bench_find(bench_case *c, int nc, const char *name, int workers) {
    int i;
    for (i = 0; i < nc; i++)
        if (strcmp(c[i].name, name) == 0 && c[i].workers == workers) return &c[i];
    return NULL;
}

/* "1.23x" of a / b into buf, or "-" when either is missing. */
static inline const char *bench_ratio(char *buf, size_t size, const bench_case *a,
                                      const bench_case *b) {
    if (a && b && b->median > 0) snprintf(buf, size, "%.2fx", a->median / b->median);
    else snprintf(buf, size, "-");
    return buf;
}

/* Printed before the targets of a --quick run. */
static inline void bench_quick_note(int quick) {
    if (quick)
        printf("note: --quick runs small sizes as a smoke test; the targets apply to full runs\n");
}

/* One line of the target summary, e.g. "target: fibersched / serial = 3.21x (target <= 4x):
   met". unit follows each number: "x" for ratios, "%" for percentages. */
static inline void bench_target(const char *what, double value, const char *op, double limit,
                                const char *unit) {
    int met = strcmp(op, "<=") == 0 ? value <= limit : value >= limit;
    printf("target: %s = %.2f%s (target %s %g%s): %s\n", what, value, unit, op, limit, unit,
           met ? "met" : "MISSED");
}

/* ---- peers in child processes (Go's programs, candidates that need a fresh process) ---- */

/* Starts argv[0] with the arguments argv (NULL-terminated) as a child process; returns a
   stream of its standard output, and its id in *pid. */
static inline FILE *bench_child_start(char *const *argv, pid_t *pid) {
    int fds[2];
    FILE *out;
    fflush(stdout);
    if (pipe(fds) != 0) bench_fail("pipe failed");
    *pid = fork();
    if (*pid < 0) bench_fail("fork failed");
    if (*pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    out = fdopen(fds[0], "r");
    if (!out) bench_fail("fdopen failed");
    return out;
}

/* Closes the child's output and waits for it: whether it exited with status 0. */
static inline int bench_child_end(FILE *out, pid_t pid) {
    int status;
    fclose(out);
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

#if defined(FIBERSCHED_H)
/* Runs fn(arg) as a task of s and waits for it from this (outside) thread: the seconds
   from the spawn to the end of the wait. */
static inline double bench_run_task(fsched_sched *s, void (*fn)(void *), void *arg) {
    fsched_wait_group wg;
    fsched_result r;
    double t0, t1;
    fsched_wait_group_init(&wg);
    t0 = bench_now();
    r = fsched_wait_group_spawn(&wg, s, fn, arg);
    if (r != FSCHED_OK) bench_fail("fsched_wait_group_spawn: %s", fsched_result_string(r));
    fsched_wait_group_wait(&wg);
    t1 = bench_now();
    fsched_wait_group_destroy(&wg);
    return t1 - t0;
}
#endif

#endif
