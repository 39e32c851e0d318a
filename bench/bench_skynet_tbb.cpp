// Skynet with oneTBB, the peer of bench_skynet.c: each parent runs its 10 children in a
// task_group and waits for them. Runs in a task_arena of `workers` threads.
#include <tbb/task_group.h>

#include "bench_tbb.h"

extern "C" long bench_skynet_tbb(long leaves, int workers);

static long skynet(long num, long size) {
    if (size == 1) return num;
    long sums[10], total = 0, step = size / 10;
    tbb::task_group g;
    for (int i = 0; i < 10; i++)
        g.run([&sums, i, num, step] { sums[i] = skynet(num + i * step, step); });
    g.wait();
    for (int i = 0; i < 10; i++) total += sums[i];
    return total;
}

extern "C" long bench_skynet_tbb(long leaves, int workers) {
    long r = 0;
    bench_tbb_arena(workers).execute([&r, leaves] { r = skynet(0, leaves); });
    return r;
}
