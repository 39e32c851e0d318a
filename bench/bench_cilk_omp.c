/* The Cilk-style kernels of bench_cilk.c with OpenMP tasks: the same recursions as the
   fibersched variant, with the same cut-offs and leaves (bench_cilk.h). A spawn is a task
   (no if or final clause: the cut-offs are the shared ones), a sync a taskwait, a call a
   plain call. A spawned task's argument is computed by the parent before the task, as the
   other variants' spawns do. Each run is one single region of a parallel region of
   `workers` threads. */
#include <omp.h>
#include <stdlib.h>

#include "bench_cilk.h"

static void omp_merge(cilk_merge_job job) {
    cilk_merge_job low, high;
    if (!cilk_merge_split(&job, &low, &high)) {
        cilk_merge_leaf(&job);
        return;
    }
#pragma omp task firstprivate(low)
    omp_merge(low);
    omp_merge(high);
#pragma omp taskwait
}

static void omp_sort(cilk_sort_job job) {
    cilk_sort_job quarter[4];
    cilk_merge_job merge[3];
    int i;
    if (job.n < CILK_SORT_CUTOFF) {
        cilk_sort_leaf(job.keys, job.n);
        return;
    }
    cilk_sort_split(&job, quarter, merge);
    for (i = 0; i < 3; i++) {
        cilk_sort_job q = quarter[i];
#pragma omp task firstprivate(q)
        omp_sort(q);
    }
    omp_sort(quarter[3]);
#pragma omp taskwait
    {
        cilk_merge_job m = merge[0];
#pragma omp task firstprivate(m)
        omp_merge(m);
    }
    omp_merge(merge[1]);
#pragma omp taskwait
    omp_merge(merge[2]);
}

static long long omp_queens(cilk_queens_job job) {
    long long counts[32], count = 0; /* one per free column: at most the 32 bits of a row */
    uint32_t avail = cilk_queens_free(&job);
    int spawned = 0, i;
    if (job.row >= CILK_QUEENS_SPAWN_ROWS)
        return cilk_queens_leaf(job.all, job.cols, job.left, job.right);
    while (avail) {
        uint32_t bit = avail & (0u - avail);
        cilk_queens_job kid = cilk_queens_place(&job, bit);
        avail ^= bit;
#pragma omp task shared(counts) firstprivate(kid, spawned)
        counts[spawned] = omp_queens(kid);
        spawned++;
    }
#pragma omp taskwait
    for (i = 0; i < spawned; i++) count += counts[i];
    return count;
}

static void omp_knapsack(cilk_knapsack_node node) {
    cilk_knapsack_node take, skip;
    switch (cilk_knapsack_expand(&node, &take, &skip)) {
    case 2:
#pragma omp task firstprivate(skip)
        omp_knapsack(skip);
        omp_knapsack(take);
#pragma omp taskwait
        break;
    case 1: omp_knapsack(skip); break;
    default: break;
    }
}

static long long omp_uts(cilk_uts_node node) {
    long long counts[CILK_UTS_CHILDREN], count = 1;
    int n = cilk_uts_children(node.tree, node.id), i;
    if (n == 0) return count; /* a leaf: nothing to wait for */
    for (i = 0; i < n; i++) {
        cilk_uts_node kid = cilk_uts_kid(&node, i);
#pragma omp task shared(counts) firstprivate(kid, i)
        counts[i] = omp_uts(kid);
    }
#pragma omp taskwait
    for (i = 0; i < n; i++) count += counts[i];
    return count;
}

static long long omp_uts_roots(cilk_uts_roots roots) {
    cilk_uts_roots low, high;
    long long low_count = 0, count;
    if (roots.end - roots.first == 1) return omp_uts(cilk_uts_root_kid(roots.tree, roots.first));
    cilk_uts_halve(&roots, &low, &high);
#pragma omp task shared(low_count) firstprivate(low)
    low_count = omp_uts_roots(low);
    count = omp_uts_roots(high);
#pragma omp taskwait
    return count + low_count;
}

static int omp_strassen(cilk_mm_job job) {
    cilk_strassen_level level;
    int oks[7], ok = 1, p;
    if (job.n <= CILK_STRASSEN_CUTOFF) {
        cilk_strassen_base(&job);
        return 1;
    }
    if (!cilk_strassen_begin(&job, &level)) return 0;
    for (p = 0; p < 6; p++) {
        cilk_mm_job product = level.product[p];
#pragma omp task shared(oks) firstprivate(product, p)
        oks[p] = omp_strassen(product);
    }
    oks[6] = omp_strassen(level.product[6]);
#pragma omp taskwait
    for (p = 0; p < 7; p++) ok &= oks[p];
    cilk_strassen_end(&job, &level);
    return ok;
}

static void omp_matmul(cilk_mm_job job) {
    cilk_mm_job quarter[4];
    int phase, q;
    if (job.n <= CILK_MATMUL_CUTOFF) {
        cilk_mm_base(&job);
        return;
    }
    for (phase = 0; phase < 2; phase++) {
        cilk_matmul_split(&job, phase, quarter);
        for (q = 0; q < 3; q++) {
            cilk_mm_job part = quarter[q];
#pragma omp task firstprivate(part)
            omp_matmul(part);
        }
        omp_matmul(quarter[3]);
#pragma omp taskwait
    }
}

/* The children's sums go to slots on the stack up to this breadth (the harness's is 8),
   to the heap beyond. */
enum { OMP_DFS_STACK_BREADTH = 16 };

static long long omp_dfs(cilk_dfs_job job) {
    long long local[OMP_DFS_STACK_BREADTH], *sums = local, sum = 0;
    int i;
    if (job.depth == 0) return cilk_dfs_leaf(job.leaf);
    if (job.breadth > OMP_DFS_STACK_BREADTH &&
        !(sums = (long long *)malloc((size_t)job.breadth * sizeof *sums)))
        abort(); /* no way to report it from inside the tree */
    for (i = 0; i < job.breadth; i++) {
        cilk_dfs_job kid = cilk_dfs_kid(&job, i);
        long long *slot = &sums[i];
#pragma omp task firstprivate(kid, slot)
        *slot = omp_dfs(kid);
    }
#pragma omp taskwait
    for (i = 0; i < job.breadth; i++) sum += sums[i];
    if (sums != local) free(sums);
    return sum;
}

static long long omp_pi(cilk_pi_job job) {
    cilk_pi_job low, high;
    long long low_hits = 0, hits;
    if (job.end - job.first == 1) return cilk_pi_leaf(job.first);
    cilk_pi_halve(&job, &low, &high);
#pragma omp task shared(low_hits) firstprivate(low)
    low_hits = omp_pi(low);
    hits = omp_pi(high);
#pragma omp taskwait
    return hits + low_hits;
}

/* ---- entry points: the root runs in the single region; the others take its tasks ---- */

void cilk_sort_omp(uint32_t *keys, uint32_t *tmp, size_t n, int workers) {
    cilk_sort_job job;
    job.keys = keys;
    job.tmp = tmp;
    job.n = n;
#pragma omp parallel num_threads(workers)
#pragma omp single
    omp_sort(job);
}

long long cilk_queens_omp(int n, int workers) {
    long long r = 0;
#pragma omp parallel num_threads(workers)
#pragma omp single
    r = omp_queens(cilk_queens_root(n));
    return r;
}

long long cilk_knapsack_omp(const cilk_item *items, int n, long long capacity, int workers) {
    cilk_knapsack problem;
    cilk_knapsack_node root = cilk_knapsack_root(&problem, items, n, capacity);
#pragma omp parallel num_threads(workers)
#pragma omp single
    omp_knapsack(root);
    return problem.best;
}

long long cilk_uts_omp(const cilk_uts *tree, int workers) {
    long long r = 0;
#pragma omp parallel num_threads(workers)
#pragma omp single
    r = omp_uts_roots(cilk_uts_all_roots(tree));
    return 1 + r; /* and the root */
}

int cilk_strassen_omp(const double *a, const double *b, double *c, int n, int workers) {
    int ok = 0;
    cilk_mm_job job = cilk_mm_whole(a, b, c, n);
#pragma omp parallel num_threads(workers)
#pragma omp single
    ok = omp_strassen(job);
    return ok;
}

void cilk_matmul_omp(const double *a, const double *b, double *c, int n, int workers) {
    cilk_mm_job job = cilk_mm_whole(a, b, c, n);
#pragma omp parallel num_threads(workers)
#pragma omp single
    omp_matmul(job);
}

long long cilk_dfs_omp(int depth, int breadth, int workers) {
    long long r = 0;
#pragma omp parallel num_threads(workers)
#pragma omp single
    r = omp_dfs(cilk_dfs_root(depth, breadth));
    return r;
}

long long cilk_pi_omp(long long chunks, int workers) {
    long long r = 0;
#pragma omp parallel num_threads(workers)
#pragma omp single
    r = omp_pi(cilk_pi_root(chunks));
    return r;
}
