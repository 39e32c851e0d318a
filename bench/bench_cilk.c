/* Cilk-style kernels: the classic divide-and-conquer programs of the Cilk papers, each
   written as a recursion of spawns and syncs, compared across schedulers with the same
   cut-offs and the same serial code at the leaves (bench_cilk.h):

   cilksort   merge sort of 32-bit keys: quarters sorted in parallel, then parallel merges
              (split the larger run at its middle, binary-search the other)
   nqueens    solutions of the n-queens board: one child per safe column in the first rows
   knapsack   0/1 knapsack, branch and bound: every node spawns its two branches, pruned by
              a fractional bound against a shared best value (a node is a few nanoseconds
              of work, so that this one measures mostly spawn and sync)
   uts        an implicit unbalanced binomial tree, counted: one task per node
   strassen   C = A B by Strassen's 7 products per level, in parallel
   matmul     C += A B by quadrants: 4 products in parallel, then the other 4
   dfs        a full tree of breadth 8 with a small fixed work at each leaf
   pi         Monte-Carlo pi: the samples halved down to chunks of their own generator

   Candidates, for each kernel:
   serial        the recursion with the spawns left out (1 thread)
   fibersched    FSCHED_TASK / FSCHED_SPAWN / FSCHED_CALL / FSCHED_SYNC; the root is
                 FSCHED_RUN from a task of a scheduler created once per worker count
   Lace          SPAWN / CALL / SYNC (bench_cilk_lace.c), when meson's lace_source option
                 names a Lace source tree; its workers are resumed before each run and
                 suspended after it, out of the time (bench_cilk.h says why)
   oneTBB        tbb::task_group run / wait, in a task_arena per worker count
                 (bench_cilk_tbb.cpp), when available
   OpenMP tasks  `omp task` / `omp taskwait` in one `single` region (bench_cilk_omp.c), when
                 available

   Each runs with 1 worker and with N (--workers=N, default one per CPU). Every candidate
   checks its result; time is from the call to its return (inputs are reset before, out of
   the time). Each repetition runs every candidate once, in rotating order, after a short
   sleep that lets the previous runtime's threads go idle. Reported: median and minimum
   milliseconds, and the ratio to fibersched at the same worker count.
   Usage: bench_cilk [--quick] [--workers=N] [--reps=N] [--kernel=name] */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"
#include "bench_cilk.h"
#if defined(FSCHED_BENCH_LACE)
#include "bench_lace.h"
#endif

enum { CILKSORT, NQUEENS, KNAPSACK, UTS, STRASSEN, MATMUL, DFS, PI, KERNELS };
static const char *const kernel_names[KERNELS] = {"cilksort", "nqueens", "knapsack", "uts",
                                                  "strassen", "matmul",  "dfs",      "pi"};

CILK_DECLARE_VARIANT(serial)
CILK_DECLARE_VARIANT(fsched)

/* ---- serial: the elisions of bench_cilk.h ---- */

void cilk_sort_serial(uint32_t *keys, uint32_t *tmp, size_t n, int workers) {
    cilk_sort_job job;
    (void)workers;
    job.keys = keys;
    job.tmp = tmp;
    job.n = n;
    cilk_sort_elision(&job);
}

long long cilk_queens_serial(int n, int workers) {
    (void)workers;
    return cilk_queens_elision(cilk_queens_root(n));
}

long long cilk_knapsack_serial(const cilk_item *items, int n, long long capacity, int workers) {
    (void)workers;
    return cilk_knapsack_elision(items, n, capacity);
}

long long cilk_uts_serial(const cilk_uts *tree, int workers) {
    (void)workers;
    return cilk_uts_elision(tree);
}

int cilk_strassen_serial(const double *a, const double *b, double *c, int n, int workers) {
    cilk_mm_job job = cilk_mm_whole(a, b, c, n);
    (void)workers;
    return cilk_strassen_elision(&job);
}

void cilk_matmul_serial(const double *a, const double *b, double *c, int n, int workers) {
    cilk_mm_job job = cilk_mm_whole(a, b, c, n);
    (void)workers;
    cilk_matmul_elision(&job);
}

long long cilk_dfs_serial(int depth, int breadth, int workers) {
    (void)workers;
    return cilk_dfs_elision(cilk_dfs_root(depth, breadth));
}

long long cilk_pi_serial(long long chunks, int workers) {
    (void)workers;
    return cilk_pi_elision(cilk_pi_root(chunks));
}

/* ---- fibersched: spawn and sync ---- */

FSCHED_VOID_TASK(fs_merge, cilk_merge_job, job) {
    cilk_merge_job low, high;
    if (!cilk_merge_split(&job, &low, &high)) {
        cilk_merge_leaf(&job);
        return;
    }
    FSCHED_SPAWN(fs_merge, low);
    FSCHED_CALL(fs_merge, high);
    FSCHED_SYNC(fs_merge);
}

FSCHED_VOID_TASK(fs_sort, cilk_sort_job, job) {
    cilk_sort_job quarter[4];
    cilk_merge_job merge[3];
    if (job.n < CILK_SORT_CUTOFF) {
        cilk_sort_leaf(job.keys, job.n);
        return;
    }
    cilk_sort_split(&job, quarter, merge);
    FSCHED_SPAWN(fs_sort, quarter[0]);
    FSCHED_SPAWN(fs_sort, quarter[1]);
    FSCHED_SPAWN(fs_sort, quarter[2]);
    FSCHED_CALL(fs_sort, quarter[3]);
    FSCHED_SYNC(fs_sort);
    FSCHED_SYNC(fs_sort);
    FSCHED_SYNC(fs_sort);
    FSCHED_SPAWN(fs_merge, merge[0]);
    FSCHED_CALL(fs_merge, merge[1]);
    FSCHED_SYNC(fs_merge);
    FSCHED_CALL(fs_merge, merge[2]);
}

FSCHED_TASK(long long, fs_queens, cilk_queens_job, job) {
    uint32_t avail = cilk_queens_free(&job);
    long long count = 0;
    int spawned = 0;
    if (job.row >= CILK_QUEENS_SPAWN_ROWS)
        return cilk_queens_leaf(job.all, job.cols, job.left, job.right);
    while (avail) {
        uint32_t bit = avail & (0u - avail);
        avail ^= bit;
        FSCHED_SPAWN(fs_queens, cilk_queens_place(&job, bit));
        spawned++;
    }
    while (spawned--) count += FSCHED_SYNC(fs_queens);
    return count;
}

FSCHED_VOID_TASK(fs_knapsack, cilk_knapsack_node, node) {
    cilk_knapsack_node take, skip;
    switch (cilk_knapsack_expand(&node, &take, &skip)) {
    case 2:
        FSCHED_SPAWN(fs_knapsack, skip);
        FSCHED_CALL(fs_knapsack, take);
        FSCHED_SYNC(fs_knapsack);
        break;
    case 1:
        FSCHED_CALL(fs_knapsack, skip);
        break;
    default:
        break;
    }
}

FSCHED_TASK(long long, fs_uts, cilk_uts_node, node) {
    int n = cilk_uts_children(node.tree, node.id), i;
    long long count = 1;
    for (i = 0; i < n; i++) FSCHED_SPAWN(fs_uts, cilk_uts_kid(&node, i));
    for (i = 0; i < n; i++) count += FSCHED_SYNC(fs_uts);
    return count;
}

FSCHED_TASK(long long, fs_uts_roots, cilk_uts_roots, roots) {
    cilk_uts_roots low, high;
    long long count;
    if (roots.end - roots.first == 1)
        return FSCHED_CALL(fs_uts, cilk_uts_root_kid(roots.tree, roots.first));
    cilk_uts_halve(&roots, &low, &high);
    FSCHED_SPAWN(fs_uts_roots, low);
    count = FSCHED_CALL(fs_uts_roots, high);
    return count + FSCHED_SYNC(fs_uts_roots);
}

FSCHED_TASK(int, fs_strassen, cilk_mm_job, job) {
    cilk_strassen_level level;
    int p, ok;
    if (job.n <= CILK_STRASSEN_CUTOFF) {
        cilk_strassen_base(&job);
        return 1;
    }
    if (!cilk_strassen_begin(&job, &level)) return 0;
    for (p = 0; p < 6; p++) FSCHED_SPAWN(fs_strassen, level.product[p]);
    ok = FSCHED_CALL(fs_strassen, level.product[6]);
    for (p = 0; p < 6; p++) ok &= FSCHED_SYNC(fs_strassen);
    cilk_strassen_end(&job, &level);
    return ok;
}

FSCHED_VOID_TASK(fs_matmul, cilk_mm_job, job) {
    cilk_mm_job quarter[4];
    int phase;
    if (job.n <= CILK_MATMUL_CUTOFF) {
        cilk_mm_base(&job);
        return;
    }
    for (phase = 0; phase < 2; phase++) {
        cilk_matmul_split(&job, phase, quarter);
        FSCHED_SPAWN(fs_matmul, quarter[0]);
        FSCHED_SPAWN(fs_matmul, quarter[1]);
        FSCHED_SPAWN(fs_matmul, quarter[2]);
        FSCHED_CALL(fs_matmul, quarter[3]);
        FSCHED_SYNC(fs_matmul);
        FSCHED_SYNC(fs_matmul);
        FSCHED_SYNC(fs_matmul);
    }
}

FSCHED_TASK(long long, fs_dfs, cilk_dfs_job, job) {
    long long sum = 0;
    int i;
    if (job.depth == 0) return cilk_dfs_leaf(job.leaf);
    for (i = 0; i < job.breadth; i++) FSCHED_SPAWN(fs_dfs, cilk_dfs_kid(&job, i));
    for (i = 0; i < job.breadth; i++) sum += FSCHED_SYNC(fs_dfs);
    return sum;
}

FSCHED_TASK(long long, fs_pi, cilk_pi_job, job) {
    cilk_pi_job low, high;
    long long hits;
    if (job.end - job.first == 1) return cilk_pi_leaf(job.first);
    cilk_pi_halve(&job, &low, &high);
    FSCHED_SPAWN(fs_pi, low);
    hits = FSCHED_CALL(fs_pi, high);
    return hits + FSCHED_SYNC(fs_pi);
}

/* The schedulers, one per worker count, created by main. */
static fsched_sched *fs_scheds[2];
static int fs_workers[2];

/* A root: the kernel's FSCHED_RUN, run as a task of the scheduler of `workers`. */
typedef struct fs_root {
    int kernel;
    union {
        cilk_sort_job sort;
        cilk_queens_job queens;
        cilk_knapsack_node knapsack;
        cilk_uts_roots uts;
        cilk_mm_job mm;
        cilk_dfs_job dfs;
        cilk_pi_job pi;
    } arg;
    long long result;
    int ok;
    fsched_result e;
} fs_root;

static void fs_root_task(void *p) {
    fs_root *r = (fs_root *)p;
    switch (r->kernel) {
    case CILKSORT: r->e = FSCHED_RUN(fs_sort, r->arg.sort, NULL); break;
    case NQUEENS: r->e = FSCHED_RUN(fs_queens, r->arg.queens, &r->result); break;
    case KNAPSACK: r->e = FSCHED_RUN(fs_knapsack, r->arg.knapsack, NULL); break;
    case UTS: r->e = FSCHED_RUN(fs_uts_roots, r->arg.uts, &r->result); break;
    case STRASSEN: r->e = FSCHED_RUN(fs_strassen, r->arg.mm, &r->ok); break;
    case MATMUL: r->e = FSCHED_RUN(fs_matmul, r->arg.mm, NULL); break;
    case DFS: r->e = FSCHED_RUN(fs_dfs, r->arg.dfs, &r->result); break;
    case PI: r->e = FSCHED_RUN(fs_pi, r->arg.pi, &r->result); break;
    default: r->e = FSCHED_ERR_INVALID_ARGUMENT; break;
    }
}

static void fs_run(fs_root *r, int kernel, int workers) {
    int i;
    for (i = 0; i < 2 && fs_workers[i] != workers; i++) {
    }
    if (i == 2) bench_fail("fibersched: no scheduler of %d worker(s)", workers);
    r->kernel = kernel;
    r->e = FSCHED_OK;
    bench_run_task(fs_scheds[i], fs_root_task, r);
    if (r->e != FSCHED_OK) bench_fail("FSCHED_RUN: %s", fsched_result_string(r->e));
}

void cilk_sort_fsched(uint32_t *keys, uint32_t *tmp, size_t n, int workers) {
    fs_root r;
    r.arg.sort.keys = keys;
    r.arg.sort.tmp = tmp;
    r.arg.sort.n = n;
    fs_run(&r, CILKSORT, workers);
}

long long cilk_queens_fsched(int n, int workers) {
    fs_root r;
    r.arg.queens = cilk_queens_root(n);
    fs_run(&r, NQUEENS, workers);
    return r.result;
}

long long cilk_knapsack_fsched(const cilk_item *items, int n, long long capacity, int workers) {
    cilk_knapsack problem;
    fs_root r;
    r.arg.knapsack = cilk_knapsack_root(&problem, items, n, capacity);
    fs_run(&r, KNAPSACK, workers);
    return problem.best;
}

long long cilk_uts_fsched(const cilk_uts *tree, int workers) {
    fs_root r;
    r.arg.uts = cilk_uts_all_roots(tree);
    fs_run(&r, UTS, workers);
    return 1 + r.result; /* the root */
}

int cilk_strassen_fsched(const double *a, const double *b, double *c, int n, int workers) {
    fs_root r;
    r.arg.mm = cilk_mm_whole(a, b, c, n);
    fs_run(&r, STRASSEN, workers);
    return r.ok;
}

void cilk_matmul_fsched(const double *a, const double *b, double *c, int n, int workers) {
    fs_root r;
    r.arg.mm = cilk_mm_whole(a, b, c, n);
    fs_run(&r, MATMUL, workers);
}

long long cilk_dfs_fsched(int depth, int breadth, int workers) {
    fs_root r;
    r.arg.dfs = cilk_dfs_root(depth, breadth);
    fs_run(&r, DFS, workers);
    return r.result;
}

long long cilk_pi_fsched(long long chunks, int workers) {
    fs_root r;
    r.arg.pi = cilk_pi_root(chunks);
    fs_run(&r, PI, workers);
    return r.result;
}

/* ---- the candidates ---- */

typedef struct variant {
    const char *name;
    void (*sort)(uint32_t *keys, uint32_t *tmp, size_t n, int workers);
    long long (*queens)(int n, int workers);
    long long (*knapsack)(const cilk_item *items, int n, long long capacity, int workers);
    long long (*uts)(const cilk_uts *tree, int workers);
    int (*strassen)(const double *a, const double *b, double *c, int n, int workers);
    void (*matmul)(const double *a, const double *b, double *c, int n, int workers);
    long long (*dfs)(int depth, int breadth, int workers);
    long long (*pi)(long long chunks, int workers);
    /* called before and after each run, out of its time (NULL: nothing to call) */
    void (*resume)(int workers);
    void (*suspend)(void);
} variant;

#define VARIANT_AROUND(name, v, resume, suspend)                                            \
    {                                                                                       \
        name, cilk_sort_##v, cilk_queens_##v, cilk_knapsack_##v, cilk_uts_##v,              \
            cilk_strassen_##v, cilk_matmul_##v, cilk_dfs_##v, cilk_pi_##v, resume, suspend  \
    }
#define VARIANT(name, v) VARIANT_AROUND(name, v, NULL, NULL)

#define FSCHED_NAME "fibersched: FSCHED_SPAWN/SYNC"
#define LACE_NAME "Lace: SPAWN/SYNC"
static const variant serial_variant = VARIANT("serial", serial);
static const variant parallel_variants[] = {
    VARIANT(FSCHED_NAME, fsched),
#if defined(FSCHED_BENCH_LACE)
    VARIANT_AROUND(LACE_NAME, lace, bench_lace_resume, bench_lace_suspend),
#endif
#if defined(FSCHED_BENCH_TBB)
    VARIANT("oneTBB: task_group", tbb), /* bench_cilk_tbb.cpp */
#endif
#if defined(FSCHED_BENCH_OPENMP)
    VARIANT("OpenMP tasks", omp), /* bench_cilk_omp.c */
#endif
};
#define PARALLEL_VARIANTS (sizeof parallel_variants / sizeof parallel_variants[0])

/* The inputs and the expected results of every kernel. */
typedef struct problem {
    cilk_sizes size;
    uint32_t *input, *keys, *tmp;
    uint64_t input_hash;
    cilk_item *items;
    long long capacity, knapsack_best;
    cilk_uts tree;
    long long uts_nodes;
    double *strassen_a, *strassen_b, *strassen_c, *matmul_a, *matmul_b, *matmul_c;
    long long dfs_sum, pi_hits;
} problem;

static void *alloc_or_fail(size_t bytes) {
    void *p = malloc(bytes);
    if (!p) bench_fail("out of memory (%lu bytes)", (unsigned long)bytes);
    return p;
}

static double *matrix_or_fail(int n, uint64_t seed) {
    double *m = cilk_matrix_input(n, seed);
    if (!m) bench_fail("out of memory (matrix of order %d)", n);
    return m;
}

/* Sets up the inputs of `kernel` and its expected result (by the serial references). */
static void problem_setup(problem *p, int kernel) {
    const cilk_sizes *s = &p->size;
    switch (kernel) {
    case CILKSORT:
        p->input = (uint32_t *)alloc_or_fail(s->sort_keys * sizeof *p->input);
        p->keys = (uint32_t *)alloc_or_fail(s->sort_keys * sizeof *p->keys);
        p->tmp = (uint32_t *)alloc_or_fail(s->sort_keys * sizeof *p->tmp);
        cilk_sort_input(p->input, s->sort_keys);
        p->input_hash = cilk_keys_hash(p->input, s->sort_keys);
        break;
    case KNAPSACK:
        p->items = (cilk_item *)alloc_or_fail((size_t)s->knapsack_items * sizeof *p->items);
        p->capacity = cilk_knapsack_input(p->items, s->knapsack_items);
        p->knapsack_best = cilk_knapsack_reference(p->items, s->knapsack_items, p->capacity);
        if (p->knapsack_best < 0) bench_fail("knapsack reference: out of memory");
        break;
    case UTS:
        p->tree = cilk_uts_input(s->uts_root_children);
        p->uts_nodes = cilk_uts_elision(&p->tree);
        break;
    case STRASSEN:
        p->strassen_a = matrix_or_fail(s->strassen_order, 11);
        p->strassen_b = matrix_or_fail(s->strassen_order, 12);
        p->strassen_c = (double *)alloc_or_fail((size_t)s->strassen_order *
                                                (size_t)s->strassen_order * sizeof(double));
        break;
    case MATMUL:
        p->matmul_a = matrix_or_fail(s->matmul_order, 21);
        p->matmul_b = matrix_or_fail(s->matmul_order, 22);
        p->matmul_c = (double *)alloc_or_fail((size_t)s->matmul_order *
                                              (size_t)s->matmul_order * sizeof(double));
        break;
    case DFS: p->dfs_sum = cilk_dfs_reference(s->dfs_depth, s->dfs_breadth); break;
    case PI: p->pi_hits = cilk_pi_reference(s->pi_chunks); break;
    default: break;
    }
}

static void problem_free(problem *p) {
    free(p->input);
    free(p->keys);
    free(p->tmp);
    free(p->items);
    free(p->strassen_a);
    free(p->strassen_b);
    free(p->strassen_c);
    free(p->matmul_a);
    free(p->matmul_b);
    free(p->matmul_c);
}

typedef struct candidate {
    const variant *v;
    int kernel, workers;
    problem *p;
} candidate;

static void check_count(const candidate *c, const char *what, long long got, long long want) {
    if (got != want)
        bench_fail("%s, %s, %d worker(s): %s %lld, expected %lld", kernel_names[c->kernel],
                   c->v->name, c->workers, what, got, want);
}

static void check_that(const candidate *c, int ok, const char *what) {
    if (!ok)
        bench_fail("%s, %s, %d worker(s): %s", kernel_names[c->kernel], c->v->name, c->workers,
                   what);
}

/* One timed run: resets the kernel's input (untimed), runs it and checks the result. */
static double run_candidate(void *ctx) {
    const candidate *c = (const candidate *)ctx;
    problem *p = c->p;
    const cilk_sizes *s = &p->size;
    const variant *v = c->v;
    long long got = 0;
    int ok = 1;
    double t0, t1;
    if (c->kernel == CILKSORT) memcpy(p->keys, p->input, s->sort_keys * sizeof *p->keys);
    if (c->kernel == STRASSEN) /* garbage, so that a missed entry shows */
        memset(p->strassen_c, 0xff, (size_t)s->strassen_order * (size_t)s->strassen_order *
                                        sizeof *p->strassen_c);
    if (c->kernel == MATMUL)
        memset(p->matmul_c, 0, (size_t)s->matmul_order * (size_t)s->matmul_order *
                                   sizeof *p->matmul_c);
    if (v->resume) v->resume(c->workers);
    t0 = bench_now();
    switch (c->kernel) {
    case CILKSORT: v->sort(p->keys, p->tmp, s->sort_keys, c->workers); break;
    case NQUEENS: got = v->queens(s->queens, c->workers); break;
    case KNAPSACK: got = v->knapsack(p->items, s->knapsack_items, p->capacity, c->workers); break;
    case UTS: got = v->uts(&p->tree, c->workers); break;
    case STRASSEN:
        ok = v->strassen(p->strassen_a, p->strassen_b, p->strassen_c, s->strassen_order,
                         c->workers);
        break;
    case MATMUL:
        v->matmul(p->matmul_a, p->matmul_b, p->matmul_c, s->matmul_order, c->workers);
        break;
    case DFS: got = v->dfs(s->dfs_depth, s->dfs_breadth, c->workers); break;
    case PI: got = v->pi(s->pi_chunks, c->workers); break;
    default: break;
    }
    t1 = bench_now();
    if (v->suspend) v->suspend();
    switch (c->kernel) {
    case CILKSORT:
        check_that(c, cilk_sort_check(p->keys, s->sort_keys, p->input_hash),
                   "keys not sorted, or not the input's");
        break;
    case NQUEENS: check_count(c, "solutions", got, cilk_queens_known(s->queens)); break;
    case KNAPSACK: check_count(c, "best value", got, p->knapsack_best); break;
    case UTS: check_count(c, "nodes", got, p->uts_nodes); break;
    case STRASSEN:
        check_that(c, ok, "out of memory");
        check_that(c, cilk_matrix_check(p->strassen_a, p->strassen_b, p->strassen_c,
                                        s->strassen_order),
                   "C differs from A B");
        break;
    case MATMUL:
        check_that(c, cilk_matrix_check(p->matmul_a, p->matmul_b, p->matmul_c, s->matmul_order),
                   "C differs from A B");
        break;
    case DFS: check_count(c, "sum", got, p->dfs_sum); break;
    case PI: check_count(c, "hits", got, p->pi_hits); break;
    default: break;
    }
    return t1 - t0;
}

/* The kernel's size, for the table's heading. */
static void describe(const problem *p, int kernel, char *buf, size_t size) {
    const cilk_sizes *s = &p->size;
    switch (kernel) {
    case CILKSORT: snprintf(buf, size, "%lu keys", (unsigned long)s->sort_keys); break;
    case NQUEENS: snprintf(buf, size, "n = %d", s->queens); break;
    case KNAPSACK:
        snprintf(buf, size, "%d items, capacity %lld", s->knapsack_items, p->capacity);
        break;
    case UTS: snprintf(buf, size, "%lld nodes", p->uts_nodes); break;
    case STRASSEN: snprintf(buf, size, "order %d", s->strassen_order); break;
    case MATMUL: snprintf(buf, size, "order %d", s->matmul_order); break;
    case DFS:
        snprintf(buf, size, "breadth %d, depth %d", s->dfs_breadth, s->dfs_depth);
        break;
    case PI: snprintf(buf, size, "%lld samples", s->pi_chunks * CILK_PI_CHUNK); break;
    default: snprintf(buf, size, "-"); break;
    }
}

/* The value of `--kernel=name`, or NULL. */
static const char *kernel_option(int argc, char **argv) {
    int i;
    for (i = 1; i < argc; i++)
        if (strncmp(argv[i], "--kernel=", 9) == 0) return argv[i] + 9;
    return NULL;
}

#define MAX_CASES (1 + 2 * PARALLEL_VARIANTS)

int main(int argc, char **argv) {
    int quick = bench_quick(argc, argv);
    int reps = bench_reps(argc, argv, quick ? 3 : 7);
    const char *only = kernel_option(argc, argv);
    int counts[2], nw, wi, k, i;
    problem prob;
    candidate cands[KERNELS][MAX_CASES];
    bench_case cases[KERNELS][MAX_CASES];
    int ncases[KERNELS];
    char buf[64];

    counts[0] = 1;
    counts[1] = (int)bench_option(argc, argv, "--workers=", bench_cpu_count());
    if (counts[1] < 1) bench_fail("--workers must be at least 1");
    nw = counts[1] > 1 ? 2 : 1;
    if (only) {
        for (k = 0; k < KERNELS && strcmp(only, kernel_names[k]) != 0; k++) {
        }
        if (k == KERNELS) bench_fail("--kernel=%s: no such kernel", only);
    }
    for (wi = 0; wi < nw; wi++) {
        fsched_desc d;
        fsched_result r;
        memset(&d, 0, sizeof d);
        d.workers = (uint32_t)counts[wi];
        fs_workers[wi] = counts[wi];
        r = fsched_create(&d, &fs_scheds[wi]);
        if (r != FSCHED_OK) bench_fail("fsched_create: %s", fsched_result_string(r));
    }
    memset(&prob, 0, sizeof prob);
    prob.size = cilk_sizes_for(quick);

    memset(cases, 0, sizeof cases);
    for (k = 0; k < KERNELS; k++) {
        int n = 0;
        ncases[k] = 0;
        if (only && strcmp(only, kernel_names[k]) != 0) continue;
        problem_setup(&prob, k);
        cands[k][n].v = &serial_variant;
        cands[k][n++].workers = 1;
        for (wi = 0; wi < nw; wi++)
            for (i = 0; i < (int)PARALLEL_VARIANTS; i++) {
                cands[k][n].v = &parallel_variants[i];
                cands[k][n++].workers = counts[wi];
            }
        for (i = 0; i < n; i++) {
            cands[k][i].kernel = k;
            cands[k][i].p = &prob;
            cases[k][i].name = cands[k][i].v->name;
            cases[k][i].run = run_candidate;
            cases[k][i].ctx = &cands[k][i];
            cases[k][i].workers = cands[k][i].workers;
        }
        ncases[k] = n;
        /* --quick is a smoke test: no warm-up, and a shorter settling sleep */
        bench_run_cases(cases[k], n, reps, quick ? 2 : 20, !quick);
    }

    printf("Cilk-style kernels: median of %d repetitions; ratios to fibersched at the same "
           "worker count\n\n", reps);
    printf("| %-8s | %-28s | %7s | %-29s | %10s | %10s | %13s |\n", "kernel", "size", "workers",
           "candidate", "median ms", "min ms", "vs fibersched");
    printf("|%s|%s|%s|%s|%s|%s|%s|\n", "----------", "------------------------------",
           "---------", "-------------------------------", "------------", "------------",
           "---------------");
    for (k = 0; k < KERNELS; k++) {
        char size[64];
        if (!ncases[k]) continue;
        describe(&prob, k, size, sizeof size);
        for (i = 0; i < ncases[k]; i++) {
            bench_case *f = bench_find(cases[k], ncases[k], FSCHED_NAME, cases[k][i].workers);
            printf("| %-8s | %-28s | %7d | %-29s | %10.1f | %10.1f | %13s |\n", kernel_names[k],
                   size, cases[k][i].workers, cases[k][i].name, cases[k][i].median * 1e3,
                   cases[k][i].min * 1e3, bench_ratio(buf, sizeof buf, &cases[k][i], f));
        }
    }
    printf("\n");
    bench_quick_note(quick);
#if defined(FSCHED_BENCH_LACE)
    for (k = 0; k < KERNELS; k++) {
        if (!ncases[k]) continue;
        for (wi = 0; wi < nw; wi++) {
            bench_case *f = bench_find(cases[k], ncases[k], FSCHED_NAME, counts[wi]);
            bench_case *lace = bench_find(cases[k], ncases[k], LACE_NAME, counts[wi]);
            char what[80];
            snprintf(what, sizeof what, "%s, %d worker(s): fibersched / Lace", kernel_names[k],
                     counts[wi]);
            bench_target(what, f->median / lace->median, "<=", 1.25, "x");
        }
    }
#else
    printf("target: fibersched / Lace: not measured (Lace not available)\n");
#endif
    problem_free(&prob);
    for (wi = 0; wi < nw; wi++) fsched_destroy(fs_scheds[wi]);
    return 0;
}
