/* fib(n) with OpenMP tasks, the peer of bench_fib.c: a task and a taskwait at every level,
   no cutoff, inside one single region of a parallel region of `workers` threads. */
#include <omp.h>

long bench_fib_omp(int n, int workers);

static long fib(int n) {
    long x = 0, y;
    if (n < 2) return n;
#pragma omp task shared(x) firstprivate(n)
    x = fib(n - 1);
    y = fib(n - 2);
#pragma omp taskwait
    return x + y;
}

long bench_fib_omp(int n, int workers) {
    long r = 0;
#pragma omp parallel num_threads(workers)
#pragma omp single
    r = fib(n);
    return r;
}
