// fib(n) with oneTBB, the peer of bench_fib.c: a task_group at every level, no cutoff;
// fib(n - 1) is run as a task, fib(n - 2) inline, then wait. Runs in a task_arena of
// `workers` threads (the calling thread and workers - 1 of TBB's), made once per count.
#include <tbb/task_group.h>

#include "bench_tbb.h"

extern "C" long bench_fib_tbb(int n, int workers);

static long fib(int n) {
    if (n < 2) return n;
    long x = 0, y;
    tbb::task_group g;
    g.run([&x, n] { x = fib(n - 1); });
    y = fib(n - 2);
    g.wait();
    return x + y;
}

extern "C" long bench_fib_tbb(int n, int workers) {
    long r = 0;
    bench_tbb_arena(workers).execute([&r, n] { r = fib(n); });
    return r;
}
