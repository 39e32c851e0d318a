/* Shared benchmark helpers: a monotonic clock, medians, and table output. Benchmarks
   compare candidates side by side in one run: every repetition runs each candidate once,
   in rotating order, and the table reports the median of the repetitions. */
#ifndef FIBERSCHED_BENCH_UTIL_H
#define FIBERSCHED_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

#endif
