/* The OpenMP peers of bench_parallel.c: n-queens and the unbalanced tree with a task per
   node and a taskwait per parent inside one single region; the loop with
   `parallel for schedule(static) reduction(+:sum)`. */
#include <omp.h>
#include <string.h>

#include "bench_parallel.h"

long bench_nqueens_omp(int n, int workers);
long bench_uts_omp(unsigned max_depth, int workers);
double bench_loop_omp(size_t n, int workers);

static long nqueens(int n, int row, const unsigned char *cols) {
    long counts[NQ_MAX], total = 0;
    int c;
    if (row == n) return 1;
    for (c = 0; c < n; c++) {
        counts[c] = 0;
        if (nq_fits(cols, row, c)) {
#pragma omp task shared(counts) firstprivate(c, row, n, cols)
            {
                unsigned char next[NQ_MAX];
                memcpy(next, cols, (size_t)row);
                next[row] = (unsigned char)c;
                counts[c] = nqueens(n, row + 1, next);
            }
        }
    }
#pragma omp taskwait
    for (c = 0; c < n; c++) total += counts[c];
    return total;
}

long bench_nqueens_omp(int n, int workers) {
    long r = 0;
    unsigned char cols[NQ_MAX] = {0};
#pragma omp parallel num_threads(workers)
#pragma omp single
    r = nqueens(n, 0, cols);
    return r;
}

static long uts(uint64_t state, unsigned depth, unsigned max_depth) {
    long counts[UTS_MAX_CHILDREN], total = 1;
    unsigned n = uts_children(state, depth, max_depth), i;
    if (n == 0) return 1;
    for (i = 0; i < n; i++) {
#pragma omp task shared(counts) firstprivate(i, state, depth, max_depth)
        counts[i] = uts(uts_child(state, i), depth + 1, max_depth);
    }
#pragma omp taskwait
    for (i = 0; i < n; i++) total += counts[i];
    return total;
}

long bench_uts_omp(unsigned max_depth, int workers) {
    long r = 0;
#pragma omp parallel num_threads(workers)
#pragma omp single
    r = uts(uts_root(), 0, max_depth);
    return r;
}

double bench_loop_omp(size_t n, int workers) {
    double sum = 0;
    size_t i;
#pragma omp parallel for schedule(static) reduction(+ : sum) num_threads(workers)
    for (i = 0; i < n; i++) sum += pf_kernel(i);
    return sum;
}
