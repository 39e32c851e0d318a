// The oneTBB peers of bench_parallel.c: n-queens and the unbalanced tree with a task_group
// per node (a task per child, then wait); the loop with parallel_reduce over a
// blocked_range (auto partitioner). All run in a task_arena of `workers` threads.
#include <tbb/blocked_range.h>
#include <tbb/parallel_reduce.h>
#include <tbb/task_group.h>

#include <cstring>
#include <functional>

#include "bench_parallel.h"
#include "bench_tbb.h"

extern "C" long bench_nqueens_tbb(int n, int workers);
extern "C" long bench_uts_tbb(unsigned max_depth, int workers);
extern "C" double bench_loop_tbb(size_t n, int workers);

static long nqueens(int n, int row, const unsigned char *cols) {
    if (row == n) return 1;
    long counts[NQ_MAX] = {0}, total = 0;
    tbb::task_group g;
    for (int c = 0; c < n; c++)
        if (nq_fits(cols, row, c))
            g.run([&counts, c, row, n, cols] {
                unsigned char next[NQ_MAX];
                std::memcpy(next, cols, (size_t)row);
                next[row] = (unsigned char)c;
                counts[c] = nqueens(n, row + 1, next);
            });
    g.wait();
    for (int c = 0; c < n; c++) total += counts[c];
    return total;
}

extern "C" long bench_nqueens_tbb(int n, int workers) {
    long r = 0;
    bench_tbb_arena(workers).execute([&r, n] {
        unsigned char cols[NQ_MAX] = {0};
        r = nqueens(n, 0, cols);
    });
    return r;
}

static long uts(uint64_t state, unsigned depth, unsigned max_depth) {
    unsigned n = uts_children(state, depth, max_depth);
    long counts[UTS_MAX_CHILDREN], total = 1;
    if (n == 0) return 1;
    tbb::task_group g;
    for (unsigned i = 0; i < n; i++)
        g.run([&counts, i, state, depth, max_depth] {
            counts[i] = uts(uts_child(state, i), depth + 1, max_depth);
        });
    g.wait();
    for (unsigned i = 0; i < n; i++) total += counts[i];
    return total;
}

extern "C" long bench_uts_tbb(unsigned max_depth, int workers) {
    long r = 0;
    bench_tbb_arena(workers).execute([&r, max_depth] { r = uts(uts_root(), 0, max_depth); });
    return r;
}

extern "C" double bench_loop_tbb(size_t n, int workers) {
    double r = 0;
    bench_tbb_arena(workers).execute([&r, n] {
        r = tbb::parallel_reduce(
            tbb::blocked_range<size_t>(0, n, 4096), 0.0,
            [](const tbb::blocked_range<size_t> &range, double sum) {
                for (size_t i = range.begin(); i != range.end(); i++) sum += pf_kernel(i);
                return sum;
            },
            std::plus<double>());
    });
    return r;
}
