/* Lace (a work-stealing library for C with typed tasks in a per-worker task stack) as a
   peer of bench_fib and bench_skynet (and, through bench_lace_resume, of bench_cilk and
   bench_uts), built only when meson's lace_source option names a Lace 1.4 source tree.
   The same recursions as ours, written with Lace's macros. */
#include <lace.h>

#include "bench_lace.h"

TASK_1(long, lace_fib, int, n) {
    long x, y;
    if (n < 2) return n;
    SPAWN(lace_fib, n - 1);
    y = CALL(lace_fib, n - 2);
    x = SYNC(lace_fib);
    return x + y;
}

TASK_2(long, lace_skynet, long, num, long, size) {
    long step, sum = 0;
    int i;
    if (size == 1) return num;
    step = size / 10;
    for (i = 0; i < 10; i++) SPAWN(lace_skynet, num + i * step, step);
    for (i = 0; i < 10; i++) sum += SYNC(lace_skynet);
    return sum;
}

static unsigned started;

void bench_lace_resume(int workers) {
    if (started != (unsigned)workers) {
        if (started) {
            lace_resume();
            lace_stop();
        }
        lace_start((unsigned)workers, 0);
        started = (unsigned)workers;
    } else {
        lace_resume();
    }
}

long bench_fib_lace(int n, int workers) {
    long r;
    bench_lace_resume(workers);
    r = RUN(lace_fib, n);
    lace_suspend();
    return r;
}

long bench_skynet_lace(long leaves, int workers) {
    long r;
    bench_lace_resume(workers);
    r = RUN(lace_skynet, 0, leaves);
    lace_suspend();
    return r;
}

void bench_lace_suspend(void) { lace_suspend(); }

int bench_lace_workers(void) { return (int)started; }
