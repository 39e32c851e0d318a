/* The Cilk-style kernels of bench_cilk.c with Lace (a peer, built only when meson's
   lace_source option names a Lace 1.4 source tree): the same recursions as the
   fibersched variant, with the same cut-offs and leaves (bench_cilk.h), written with
   Lace's macros. Lace's workers are started once per worker count. */
#include <lace.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_cilk.h"
#include "bench_lace.h"

VOID_TASK_1(lace_merge, cilk_merge_job, job) {
    cilk_merge_job low, high;
    if (!cilk_merge_split(&job, &low, &high)) {
        cilk_merge_leaf(&job);
        return;
    }
    SPAWN(lace_merge, low);
    CALL(lace_merge, high);
    SYNC(lace_merge);
}

VOID_TASK_1(lace_sort, cilk_sort_job, job) {
    cilk_sort_job quarter[4];
    cilk_merge_job merge[3];
    if (job.n < CILK_SORT_CUTOFF) {
        cilk_sort_leaf(job.keys, job.n);
        return;
    }
    cilk_sort_split(&job, quarter, merge);
    SPAWN(lace_sort, quarter[0]);
    SPAWN(lace_sort, quarter[1]);
    SPAWN(lace_sort, quarter[2]);
    CALL(lace_sort, quarter[3]);
    SYNC(lace_sort);
    SYNC(lace_sort);
    SYNC(lace_sort);
    SPAWN(lace_merge, merge[0]);
    CALL(lace_merge, merge[1]);
    SYNC(lace_merge);
    CALL(lace_merge, merge[2]);
}

TASK_1(long long, lace_queens, cilk_queens_job, job) {
    uint32_t avail = cilk_queens_free(&job);
    long long count = 0;
    int spawned = 0;
    if (job.row >= CILK_QUEENS_SPAWN_ROWS)
        return cilk_queens_leaf(job.all, job.cols, job.left, job.right);
    while (avail) {
        uint32_t bit = avail & (0u - avail);
        avail ^= bit;
        SPAWN(lace_queens, cilk_queens_place(&job, bit));
        spawned++;
    }
    while (spawned--) count += SYNC(lace_queens);
    return count;
}

VOID_TASK_1(lace_knapsack, cilk_knapsack_node, node) {
    cilk_knapsack_node take, skip;
    switch (cilk_knapsack_expand(&node, &take, &skip)) {
    case 2:
        SPAWN(lace_knapsack, skip);
        CALL(lace_knapsack, take);
        SYNC(lace_knapsack);
        break;
    case 1:
        CALL(lace_knapsack, skip);
        break;
    default:
        break;
    }
}

TASK_1(long long, lace_uts, cilk_uts_node, node) {
    int n = cilk_uts_children(node.tree, node.id), i;
    long long count = 1;
    for (i = 0; i < n; i++) SPAWN(lace_uts, cilk_uts_kid(&node, i));
    for (i = 0; i < n; i++) count += SYNC(lace_uts);
    return count;
}

TASK_1(long long, lace_uts_roots, cilk_uts_roots, roots) {
    cilk_uts_roots low, high;
    long long count;
    if (roots.end - roots.first == 1)
        return CALL(lace_uts, cilk_uts_root_kid(roots.tree, roots.first));
    cilk_uts_halve(&roots, &low, &high);
    SPAWN(lace_uts_roots, low);
    count = CALL(lace_uts_roots, high);
    return count + SYNC(lace_uts_roots);
}

TASK_1(int, lace_strassen, cilk_mm_job, job) {
    cilk_strassen_level level;
    int p, ok;
    if (job.n <= CILK_STRASSEN_CUTOFF) {
        cilk_strassen_base(&job);
        return 1;
    }
    if (!cilk_strassen_begin(&job, &level)) return 0;
    for (p = 0; p < 6; p++) SPAWN(lace_strassen, level.product[p]);
    ok = CALL(lace_strassen, level.product[6]);
    for (p = 0; p < 6; p++) ok &= SYNC(lace_strassen);
    cilk_strassen_end(&job, &level);
    return ok;
}

VOID_TASK_1(lace_matmul, cilk_mm_job, job) {
    cilk_mm_job quarter[4];
    int phase;
    if (job.n <= CILK_MATMUL_CUTOFF) {
        cilk_mm_base(&job);
        return;
    }
    for (phase = 0; phase < 2; phase++) {
        cilk_matmul_split(&job, phase, quarter);
        SPAWN(lace_matmul, quarter[0]);
        SPAWN(lace_matmul, quarter[1]);
        SPAWN(lace_matmul, quarter[2]);
        CALL(lace_matmul, quarter[3]);
        SYNC(lace_matmul);
        SYNC(lace_matmul);
        SYNC(lace_matmul);
    }
}

TASK_1(long long, lace_dfs, cilk_dfs_job, job) {
    long long sum = 0;
    int i;
    if (job.depth == 0) return cilk_dfs_leaf(job.leaf);
    for (i = 0; i < job.breadth; i++) SPAWN(lace_dfs, cilk_dfs_kid(&job, i));
    for (i = 0; i < job.breadth; i++) sum += SYNC(lace_dfs);
    return sum;
}

TASK_1(long long, lace_pi, cilk_pi_job, job) {
    cilk_pi_job low, high;
    long long hits;
    if (job.end - job.first == 1) return cilk_pi_leaf(job.first);
    cilk_pi_halve(&job, &low, &high);
    SPAWN(lace_pi, low);
    hits = CALL(lace_pi, high);
    return hits + SYNC(lace_pi);
}

/* ---- entry points ----
   The harness resumes Lace's workers before each timed call and suspends them after it
   (bench_cilk.h says why); a call runs on the workers that the last resume started. */

static void lace_running(int workers) {
    if (bench_lace_workers() != workers) {
        fprintf(stderr, "bench_cilk: Lace runs %d worker(s), not %d\n", bench_lace_workers(),
                workers);
        abort();
    }
}

void cilk_sort_lace(uint32_t *keys, uint32_t *tmp, size_t n, int workers) {
    cilk_sort_job job;
    job.keys = keys;
    job.tmp = tmp;
    job.n = n;
    lace_running(workers);
    RUN(lace_sort, job);
}

long long cilk_queens_lace(int n, int workers) {
    lace_running(workers);
    return RUN(lace_queens, cilk_queens_root(n));
}

long long cilk_knapsack_lace(const cilk_item *items, int n, long long capacity, int workers) {
    cilk_knapsack problem;
    lace_running(workers);
    RUN(lace_knapsack, cilk_knapsack_root(&problem, items, n, capacity));
    return problem.best;
}

long long cilk_uts_lace(const cilk_uts *tree, int workers) {
    lace_running(workers);
    return 1 + RUN(lace_uts_roots, cilk_uts_all_roots(tree)); /* and the root */
}

int cilk_strassen_lace(const double *a, const double *b, double *c, int n, int workers) {
    lace_running(workers);
    return RUN(lace_strassen, cilk_mm_whole(a, b, c, n));
}

void cilk_matmul_lace(const double *a, const double *b, double *c, int n, int workers) {
    lace_running(workers);
    RUN(lace_matmul, cilk_mm_whole(a, b, c, n));
}

long long cilk_dfs_lace(int depth, int breadth, int workers) {
    lace_running(workers);
    return RUN(lace_dfs, cilk_dfs_root(depth, breadth));
}

long long cilk_pi_lace(long long chunks, int workers) {
    lace_running(workers);
    return RUN(lace_pi, cilk_pi_root(chunks));
}
