// The Cilk-style kernels of bench_cilk.c with oneTBB: the same recursions as the
// fibersched variant, with the same cut-offs and leaves (bench_cilk.h). A spawn is a
// task_group's run, a sync its wait, a call a plain call. A spawned task's argument is
// computed by the parent before run, as the other variants' spawns do. Each run happens
// in a task_arena of `workers` threads, created once per worker count.
#include <tbb/task_group.h>

#include "bench_cilk.h"
#include "bench_tbb.h"

static void tbb_merge(const cilk_merge_job &job) {
    cilk_merge_job low, high;
    if (!cilk_merge_split(&job, &low, &high)) {
        cilk_merge_leaf(&job);
        return;
    }
    tbb::task_group g;
    g.run([low] { tbb_merge(low); });
    tbb_merge(high);
    g.wait();
}

static void tbb_sort(const cilk_sort_job &job) {
    cilk_sort_job quarter[4];
    cilk_merge_job merge[3];
    if (job.n < CILK_SORT_CUTOFF) {
        cilk_sort_leaf(job.keys, job.n);
        return;
    }
    cilk_sort_split(&job, quarter, merge);
    tbb::task_group g; // waited on, so reused for the merges
    for (int i = 0; i < 3; i++) {
        cilk_sort_job q = quarter[i];
        g.run([q] { tbb_sort(q); });
    }
    tbb_sort(quarter[3]);
    g.wait();
    cilk_merge_job m = merge[0];
    g.run([m] { tbb_merge(m); });
    tbb_merge(merge[1]);
    g.wait();
    tbb_merge(merge[2]);
}

static long long tbb_queens(const cilk_queens_job &job) {
    if (job.row >= CILK_QUEENS_SPAWN_ROWS)
        return cilk_queens_leaf(job.all, job.cols, job.left, job.right);
    long long counts[32]; // one per free column: at most the 32 bits of a row
    long long count = 0;
    uint32_t avail = cilk_queens_free(&job);
    int spawned = 0;
    tbb::task_group g;
    while (avail) {
        uint32_t bit = avail & (0u - avail);
        avail ^= bit;
        cilk_queens_job kid = cilk_queens_place(&job, bit);
        long long *slot = &counts[spawned++];
        g.run([kid, slot] { *slot = tbb_queens(kid); });
    }
    g.wait();
    for (int i = 0; i < spawned; i++) count += counts[i];
    return count;
}

static void tbb_knapsack(const cilk_knapsack_node &node) {
    cilk_knapsack_node take, skip;
    switch (cilk_knapsack_expand(&node, &take, &skip)) {
    case 2: {
        tbb::task_group g;
        g.run([skip] { tbb_knapsack(skip); });
        tbb_knapsack(take);
        g.wait();
        break;
    }
    case 1: tbb_knapsack(skip); break;
    default: break;
    }
}

static long long tbb_uts(const cilk_uts_node &node) {
    int n = cilk_uts_children(node.tree, node.id);
    if (n == 0) return 1; // a leaf: no group to make
    long long counts[CILK_UTS_CHILDREN], count = 1;
    tbb::task_group g;
    for (int i = 0; i < n; i++) {
        cilk_uts_node kid = cilk_uts_kid(&node, i);
        long long *slot = &counts[i];
        g.run([kid, slot] { *slot = tbb_uts(kid); });
    }
    g.wait();
    for (int i = 0; i < n; i++) count += counts[i];
    return count;
}

static long long tbb_uts_roots(const cilk_uts_roots &roots) {
    if (roots.end - roots.first == 1) return tbb_uts(cilk_uts_root_kid(roots.tree, roots.first));
    cilk_uts_roots low, high;
    cilk_uts_halve(&roots, &low, &high);
    long long low_count = 0, count;
    tbb::task_group g;
    g.run([low, &low_count] { low_count = tbb_uts_roots(low); });
    count = tbb_uts_roots(high);
    g.wait();
    return count + low_count;
}

static int tbb_strassen(const cilk_mm_job &job) {
    if (job.n <= CILK_STRASSEN_CUTOFF) {
        cilk_strassen_base(&job);
        return 1;
    }
    cilk_strassen_level level;
    int oks[7], ok = 1;
    if (!cilk_strassen_begin(&job, &level)) return 0;
    tbb::task_group g;
    for (int p = 0; p < 6; p++) {
        cilk_mm_job product = level.product[p];
        int *slot = &oks[p];
        g.run([product, slot] { *slot = tbb_strassen(product); });
    }
    oks[6] = tbb_strassen(level.product[6]);
    g.wait();
    for (int p = 0; p < 7; p++) ok &= oks[p];
    cilk_strassen_end(&job, &level);
    return ok;
}

static void tbb_matmul(const cilk_mm_job &job) {
    if (job.n <= CILK_MATMUL_CUTOFF) {
        cilk_mm_base(&job);
        return;
    }
    cilk_mm_job quarter[4];
    tbb::task_group g;
    for (int phase = 0; phase < 2; phase++) {
        cilk_matmul_split(&job, phase, quarter);
        for (int q = 0; q < 3; q++) {
            cilk_mm_job part = quarter[q];
            g.run([part] { tbb_matmul(part); });
        }
        tbb_matmul(quarter[3]);
        g.wait();
    }
}

// The children's sums go to slots on the stack up to this breadth (the harness's is 8),
// to the heap beyond.
enum { TBB_DFS_STACK_BREADTH = 16 };

static long long tbb_dfs(const cilk_dfs_job &job) {
    if (job.depth == 0) return cilk_dfs_leaf(job.leaf);
    long long local[TBB_DFS_STACK_BREADTH], sum = 0;
    std::unique_ptr<long long[]> heap;
    long long *sums = local;
    if (job.breadth > TBB_DFS_STACK_BREADTH) {
        heap.reset(new long long[(size_t)job.breadth]);
        sums = heap.get();
    }
    tbb::task_group g;
    for (int i = 0; i < job.breadth; i++) {
        cilk_dfs_job kid = cilk_dfs_kid(&job, i);
        long long *slot = &sums[i];
        g.run([kid, slot] { *slot = tbb_dfs(kid); });
    }
    g.wait();
    for (int i = 0; i < job.breadth; i++) sum += sums[i];
    return sum;
}

static long long tbb_pi(const cilk_pi_job &job) {
    if (job.end - job.first == 1) return cilk_pi_leaf(job.first);
    cilk_pi_job low, high;
    cilk_pi_halve(&job, &low, &high);
    long long low_hits = 0, hits;
    tbb::task_group g;
    g.run([low, &low_hits] { low_hits = tbb_pi(low); });
    hits = tbb_pi(high);
    g.wait();
    return hits + low_hits;
}

// ---- entry points ----

extern "C" void cilk_sort_tbb(uint32_t *keys, uint32_t *tmp, size_t n, int workers) {
    cilk_sort_job job;
    job.keys = keys;
    job.tmp = tmp;
    job.n = n;
    bench_tbb_arena(workers).execute([&job] { tbb_sort(job); });
}

extern "C" long long cilk_queens_tbb(int n, int workers) {
    long long r = 0;
    bench_tbb_arena(workers).execute([&r, n] { r = tbb_queens(cilk_queens_root(n)); });
    return r;
}

extern "C" long long cilk_knapsack_tbb(const cilk_item *items, int n, long long capacity,
                                       int workers) {
    cilk_knapsack problem;
    cilk_knapsack_node root = cilk_knapsack_root(&problem, items, n, capacity);
    bench_tbb_arena(workers).execute([&root] { tbb_knapsack(root); });
    return problem.best;
}

extern "C" long long cilk_uts_tbb(const cilk_uts *tree, int workers) {
    long long r = 0;
    bench_tbb_arena(workers).execute([&r, tree] { r = tbb_uts_roots(cilk_uts_all_roots(tree)); });
    return 1 + r; // and the root
}

extern "C" int cilk_strassen_tbb(const double *a, const double *b, double *c, int n,
                                 int workers) {
    int ok = 0;
    cilk_mm_job job = cilk_mm_whole(a, b, c, n);
    bench_tbb_arena(workers).execute([&ok, &job] { ok = tbb_strassen(job); });
    return ok;
}

extern "C" void cilk_matmul_tbb(const double *a, const double *b, double *c, int n,
                                int workers) {
    cilk_mm_job job = cilk_mm_whole(a, b, c, n);
    bench_tbb_arena(workers).execute([&job] { tbb_matmul(job); });
}

extern "C" long long cilk_dfs_tbb(int depth, int breadth, int workers) {
    long long r = 0;
    bench_tbb_arena(workers).execute(
        [&r, depth, breadth] { r = tbb_dfs(cilk_dfs_root(depth, breadth)); });
    return r;
}

extern "C" long long cilk_pi_tbb(long long chunks, int workers) {
    long long r = 0;
    bench_tbb_arena(workers).execute([&r, chunks] { r = tbb_pi(cilk_pi_root(chunks)); });
    return r;
}
