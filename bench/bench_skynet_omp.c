/* Skynet with OpenMP tasks, the peer of bench_skynet.c: each parent creates its 10
   children as tasks and waits for them with taskwait, inside one single region. */
#include <omp.h>

long bench_skynet_omp(long leaves, int workers);

static long skynet(long num, long size) {
    long sums[10], total = 0, step;
    int i;
    if (size == 1) return num;
    step = size / 10;
    for (i = 0; i < 10; i++) {
#pragma omp task shared(sums) firstprivate(i, num, step)
        sums[i] = skynet(num + i * step, step);
    }
#pragma omp taskwait
    for (i = 0; i < 10; i++) total += sums[i];
    return total;
}

long bench_skynet_omp(long leaves, int workers) {
    long r = 0;
#pragma omp parallel num_threads(workers)
#pragma omp single
    r = skynet(0, leaves);
    return r;
}
