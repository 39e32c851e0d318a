/* Cilk-style kernels (bench_cilk.c): what every variant shares, so that each variant
   (fibersched, Lace, oneTBB, OpenMP tasks) writes only its recursion skeleton.

   Here: the problem sizes (full and --quick), the deterministic inputs, the cut-offs, the
   serial leaf and base routines, the serial elisions (each recursion with its spawns left
   out: the serial candidate), and the references and checks of the results. Every
   function is static inline and compiles as C11 and as C++ (the oneTBB variant), with GCC
   or Clang (__atomic builtins).

   A variant `v` provides, per kernel, a function taking the problem parameters and the
   worker count and returning the result to check: CILK_DECLARE_VARIANT(v) below declares
   them, for each variant whose build define is set. */
#ifndef FIBERSCHED_BENCH_CILK_H
#define FIBERSCHED_BENCH_CILK_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- cut-offs: the same in every variant (the point is the schedulers) ---- */

#define CILK_SORT_CUTOFF 2048      /* keys: below, one serial quicksort */
#define CILK_MERGE_CUTOFF 2048     /* keys in both runs: below, one serial merge */
#define CILK_QUEENS_SPAWN_ROWS 3   /* rows placed by tasks; the rest serially */
#define CILK_STRASSEN_CUTOFF 64    /* order: at or below, the plain multiply */
#define CILK_MATMUL_CUTOFF 32      /* order: at or below, the plain multiply */
#define CILK_PI_CHUNK 4096         /* samples per leaf (one generator seed each) */
#define CILK_DFS_LEAF_WORK 48      /* generator steps per dfs leaf */
#define CILK_UTS_CHILDREN 8        /* children of a non-root node that has any */
#define CILK_UTS_HASH_ROUNDS 12    /* hash rounds per node id: the work per node */
/* probability q that a non-root node has children: q * 8 = 0.992, just under 1 (a
   subtree has 1 / (1 - 0.992) = 125 nodes on average, with a very long tail) */
#define CILK_UTS_Q 0.124

/* ---- sizes ---- */

typedef struct cilk_sizes {
    size_t sort_keys;
    int queens;           /* board order */
    int knapsack_items;
    int uts_root_children;
    int strassen_order;   /* halves evenly down to CILK_STRASSEN_CUTOFF or below */
    int matmul_order;     /* halves evenly down to CILK_MATMUL_CUTOFF or below */
    int dfs_depth, dfs_breadth;
    long long pi_chunks;  /* of CILK_PI_CHUNK samples */
} cilk_sizes;

/* Full sizes take roughly 100-300 ms serially at -O2 on a current x86-64 core; the quick
   ones a few milliseconds (a smoke test). */
static inline cilk_sizes cilk_sizes_for(int quick) {
    cilk_sizes s;
    s.sort_keys = quick ? 100000 : 3000000;
    s.queens = quick ? 11 : 14;
    s.knapsack_items = quick ? 22 : 30;
    s.uts_root_children = quick ? 1000 : 30000;
    s.strassen_order = quick ? 128 : 1024;
    s.matmul_order = quick ? 96 : 768;
    s.dfs_depth = quick ? 5 : 7;
    s.dfs_breadth = 8;
    s.pi_chunks = quick ? 512 : 16384;
    return s;
}

/* ---- deterministic pseudo-random numbers ---- */

/* The splitmix64 finalizer: a bijective mix of 64 bits. */
static inline uint64_t cilk_mix64(uint64_t x) {
    x += UINT64_C(0x9e3779b97f4a7c15);
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* The next number of the sequence whose state is *s. */
static inline uint64_t cilk_next(uint64_t *s) {
    *s += UINT64_C(0x9e3779b97f4a7c15);
    return cilk_mix64(*s);
}

/* A double in [0, 1) from the top 53 bits. */
static inline double cilk_unit(uint64_t x) {
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- cilksort: merge sort of 32-bit keys ---- */

typedef struct cilk_sort_job {
    uint32_t *keys, *tmp; /* sorts keys[0, n) in place; tmp has n keys of scratch */
    size_t n;
} cilk_sort_job;

typedef struct cilk_merge_job {
    const uint32_t *a, *b; /* two sorted runs */
    uint32_t *dest;        /* receives the na + nb keys, sorted */
    size_t na, nb;
} cilk_merge_job;

static inline void cilk_sort_input(uint32_t *keys, size_t n) {
    uint64_t s = 1;
    size_t i;
    for (i = 0; i < n; i++) keys[i] = (uint32_t)(cilk_next(&s) >> 32);
}

static inline void cilk_insertion_sort(uint32_t *a, size_t n) {
    size_t i, j;
    for (i = 1; i < n; i++) {
        uint32_t v = a[i];
        for (j = i; j > 0 && a[j - 1] > v; j--) a[j] = a[j - 1];
        a[j] = v;
    }
}

/* The serial leaf: quicksort (median of three, Hoare partition), insertion sort below 16
   keys; it recurses into the smaller part and loops on the larger, so its depth is
   logarithmic. */
static inline void cilk_sort_leaf(uint32_t *a, size_t n) {
    while (n > 16) {
        uint32_t x = a[0], y = a[n / 2], z = a[n - 1], pivot, t;
        size_t i = 0, j = n - 1;
        pivot = x < y ? (y < z ? y : x < z ? z : x) : (x < z ? x : y < z ? z : y);
        for (;;) { /* [0, i) <= pivot <= (j, n); the pivot's value stops both scans */
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i >= j) break;
            t = a[i];
            a[i++] = a[j];
            a[j--] = t;
        }
        /* [0, j] <= pivot <= [j + 1, n), both parts non-empty */
        if (j + 1 < n - j - 1) {
            cilk_sort_leaf(a, j + 1);
            a += j + 1;
            n -= j + 1;
        } else {
            cilk_sort_leaf(a + j + 1, n - j - 1);
            n = j + 1;
        }
    }
    cilk_insertion_sort(a, n);
}

static inline void cilk_merge_leaf(const cilk_merge_job *m) {
    const uint32_t *a = m->a, *b = m->b, *a_end = m->a + m->na, *b_end = m->b + m->nb;
    uint32_t *d = m->dest;
    while (a < a_end && b < b_end) *d++ = *b < *a ? *b++ : *a++;
    memcpy(d, a, (size_t)(a_end - a) * sizeof *a);
    memcpy(d + (a_end - a), b, (size_t)(b_end - b) * sizeof *b);
}

/* Splits a merge in two independent merges: the larger run at its middle key, the other
   where that key would go (binary search). 0: the merge is small, do it serially. */
static inline int cilk_merge_split(const cilk_merge_job *m, cilk_merge_job *low,
                                   cilk_merge_job *high) {
    const uint32_t *big = m->na >= m->nb ? m->a : m->b, *small = m->na >= m->nb ? m->b : m->a;
    size_t nbig = m->na >= m->nb ? m->na : m->nb, nsmall = m->na >= m->nb ? m->nb : m->na;
    size_t half = nbig / 2, lo = 0, hi = nsmall;
    uint32_t key;
    if (m->na + m->nb < CILK_MERGE_CUTOFF) return 0;
    key = big[half];
    while (lo < hi) { /* the first small key not below key */
        size_t mid = lo + (hi - lo) / 2;
        if (small[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    low->a = big;
    low->na = half;
    low->b = small;
    low->nb = lo;
    low->dest = m->dest;
    high->a = big + half;
    high->na = nbig - half;
    high->b = small + lo;
    high->nb = nsmall - lo;
    high->dest = m->dest + half + lo;
    return 1;
}

/* Splits a sort of at least CILK_SORT_CUTOFF keys: quarter[0..3] sort in parallel, then
   merge[0] and merge[1] (quarters into tmp) in parallel, then merge[2] (back into keys). */
static inline void cilk_sort_split(const cilk_sort_job *s, cilk_sort_job quarter[4],
                                   cilk_merge_job merge[3]) {
    size_t q = s->n / 4, i;
    for (i = 0; i < 4; i++) {
        quarter[i].keys = s->keys + i * q;
        quarter[i].tmp = s->tmp + i * q;
        quarter[i].n = i < 3 ? q : s->n - 3 * q;
    }
    merge[0].a = s->keys;
    merge[0].na = q;
    merge[0].b = s->keys + q;
    merge[0].nb = q;
    merge[0].dest = s->tmp;
    merge[1].a = s->keys + 2 * q;
    merge[1].na = q;
    merge[1].b = s->keys + 3 * q;
    merge[1].nb = s->n - 3 * q;
    merge[1].dest = s->tmp + 2 * q;
    merge[2].a = s->tmp;
    merge[2].na = 2 * q;
    merge[2].b = s->tmp + 2 * q;
    merge[2].nb = s->n - 2 * q;
    merge[2].dest = s->keys;
}

static inline void cilk_merge_elision(const cilk_merge_job *m) {
    cilk_merge_job low, high;
    if (!cilk_merge_split(m, &low, &high)) {
        cilk_merge_leaf(m);
        return;
    }
    cilk_merge_elision(&low);
    cilk_merge_elision(&high);
}

static inline void cilk_sort_elision(const cilk_sort_job *s) {
    cilk_sort_job quarter[4];
    cilk_merge_job merge[3];
    int i;
    if (s->n < CILK_SORT_CUTOFF) {
        cilk_sort_leaf(s->keys, s->n);
        return;
    }
    cilk_sort_split(s, quarter, merge);
    for (i = 0; i < 4; i++) cilk_sort_elision(&quarter[i]);
    for (i = 0; i < 3; i++) cilk_merge_elision(&merge[i]);
}

/* An order-independent hash of a multiset of keys (a sum of mixed keys). */
static inline uint64_t cilk_keys_hash(const uint32_t *keys, size_t n) {
    uint64_t h = 0;
    size_t i;
    for (i = 0; i < n; i++) h += cilk_mix64(keys[i]);
    return h;
}

/* 1 when keys are sorted and hold the multiset whose hash is input_hash. */
static inline int cilk_sort_check(const uint32_t *keys, size_t n, uint64_t input_hash) {
    size_t i;
    for (i = 1; i < n; i++)
        if (keys[i - 1] > keys[i]) return 0;
    return cilk_keys_hash(keys, n) == input_hash;
}

/* ---- n-queens: solutions of the n x n board ---- */

typedef struct cilk_queens_job {
    uint32_t all;          /* n low bits: the board's columns */
    uint32_t cols, left, right; /* attacked: by column, and by the two diagonals, in this row */
    int row;
} cilk_queens_job;

static inline cilk_queens_job cilk_queens_root(int n) {
    cilk_queens_job j;
    j.all = (uint32_t)((1u << n) - 1u);
    j.cols = j.left = j.right = 0;
    j.row = 0;
    return j;
}

/* The free columns of the job's row, as bits. */
static inline uint32_t cilk_queens_free(const cilk_queens_job *j) {
    return j->all & ~(j->cols | j->left | j->right);
}

/* The job for the next row, with a queen on column `bit` of this one. */
static inline cilk_queens_job cilk_queens_place(const cilk_queens_job *j, uint32_t bit) {
    cilk_queens_job k;
    k.all = j->all;
    k.cols = j->cols | bit;
    k.left = (j->left | bit) << 1;
    k.right = (j->right | bit) >> 1;
    k.row = j->row + 1;
    return k;
}

/* The serial leaf: the bitmask recursion. */
static inline long long cilk_queens_leaf(uint32_t all, uint32_t cols, uint32_t left,
                                         uint32_t right) {
    uint32_t avail = all & ~(cols | left | right);
    long long count = 0;
    if (cols == all) return 1;
    while (avail) {
        uint32_t bit = avail & (0u - avail);
        avail ^= bit;
        count += cilk_queens_leaf(all, cols | bit, (left | bit) << 1, (right | bit) >> 1);
    }
    return count;
}

static inline long long cilk_queens_elision(cilk_queens_job j) {
    uint32_t avail = cilk_queens_free(&j);
    long long count = 0;
    if (j.row >= CILK_QUEENS_SPAWN_ROWS) return cilk_queens_leaf(j.all, j.cols, j.left, j.right);
    while (avail) {
        uint32_t bit = avail & (0u - avail);
        avail ^= bit;
        count += cilk_queens_elision(cilk_queens_place(&j, bit));
    }
    return count;
}

/* Solutions for n = 1..15 (-1: not tabled). */
static inline long long cilk_queens_known(int n) {
    static const long long known[16] = {-1,    1,     0,     0,      2,      10,
                                        4,     40,    92,    352,    724,    2680,
                                        14200, 73712, 365596, 2279184};
    return n >= 1 && n <= 15 ? known[n] : -1;
}

/* ---- knapsack: 0/1, branch and bound ---- */

typedef struct cilk_item {
    long long value, weight;
} cilk_item;

typedef struct cilk_knapsack {
    const cilk_item *items; /* by decreasing value per weight */
    int n;
    long long best;         /* the best value found so far: raised with cilk_knapsack_record */
} cilk_knapsack;

typedef struct cilk_knapsack_node {
    cilk_knapsack *problem;
    int next;               /* items [0, next) are decided */
    long long room, value;  /* capacity left; value taken */
} cilk_knapsack_node;

static inline int cilk_item_denser(const void *x, const void *y) {
    const cilk_item *a = (const cilk_item *)x, *b = (const cilk_item *)y;
    long long l = a->value * b->weight, r = b->value * a->weight;
    return l > r ? -1 : l < r;
}

/* Strongly correlated items of similar weights (1000 to 1099, value = weight + 10), a hard
   kind for branch and bound, sorted by decreasing value per weight; returns the capacity
   (half the total weight). */
static inline long long cilk_knapsack_input(cilk_item *items, int n) {
    uint64_t s = 3;
    long long total = 0;
    int i;
    for (i = 0; i < n; i++) {
        items[i].weight = 1000 + (long long)(cilk_next(&s) % 100);
        items[i].value = items[i].weight + 10;
        total += items[i].weight;
    }
    qsort(items, (size_t)n, sizeof *items, cilk_item_denser);
    return total / 2;
}

/* relaxed: the best value only prunes, so a stale one prunes less and never wrongly; the
   final value is read after the root's sync, which orders every write before it */
static inline long long cilk_knapsack_best(cilk_knapsack *p) {
    return __atomic_load_n(&p->best, __ATOMIC_RELAXED);
}

static inline void cilk_knapsack_record(cilk_knapsack *p, long long value) {
    long long cur = __atomic_load_n(&p->best, __ATOMIC_RELAXED);
    while (value > cur &&
           !__atomic_compare_exchange_n(&p->best, &cur, value, 1, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED)) {
    }
}

/* The fractional (linear relaxation) bound of what the node can still reach. */
static inline long long cilk_knapsack_bound(const cilk_knapsack_node *nd) {
    const cilk_item *it = nd->problem->items;
    long long room = nd->room, value = nd->value;
    int i;
    for (i = nd->next; i < nd->problem->n; i++) {
        if (it[i].weight > room) return value + room * it[i].value / it[i].weight;
        room -= it[i].weight;
        value += it[i].value;
    }
    return value;
}

/* Expands a node: 0 when it is a leaf or cannot beat the best value (nothing to do), 1
   when only `skip` (without the next item) is worth exploring, 2 when `take` (with it)
   and `skip` are. Taking an item records the new value. */
static inline int cilk_knapsack_expand(const cilk_knapsack_node *nd, cilk_knapsack_node *take,
                                       cilk_knapsack_node *skip) {
    const cilk_item *item;
    if (nd->next == nd->problem->n ||
        cilk_knapsack_bound(nd) <= cilk_knapsack_best(nd->problem))
        return 0;
    item = &nd->problem->items[nd->next];
    *skip = *nd;
    skip->next++;
    if (item->weight > nd->room) return 1;
    *take = *skip;
    take->room -= item->weight;
    take->value += item->value;
    cilk_knapsack_record(nd->problem, take->value);
    return 2;
}

/* The root node; sets the best value to 0 (the empty knapsack). */
static inline cilk_knapsack_node cilk_knapsack_root(cilk_knapsack *p, const cilk_item *items,
                                                   int n, long long capacity) {
    cilk_knapsack_node nd;
    p->items = items;
    p->n = n;
    p->best = 0;
    nd.problem = p;
    nd.next = 0;
    nd.room = capacity;
    nd.value = 0;
    return nd;
}

/* The serial elision: taking the item first (it finds good values early). */
static inline void cilk_knapsack_node_elision(const cilk_knapsack_node *nd) {
    cilk_knapsack_node take, skip;
    int n = cilk_knapsack_expand(nd, &take, &skip);
    if (n == 2) cilk_knapsack_node_elision(&take);
    if (n >= 1) cilk_knapsack_node_elision(&skip);
}

static inline long long cilk_knapsack_elision(const cilk_item *items, int n, long long capacity) {
    cilk_knapsack p;
    cilk_knapsack_node root = cilk_knapsack_root(&p, items, n, capacity);
    cilk_knapsack_node_elision(&root);
    return p.best;
}

/* The reference: dynamic programming over capacities. -1: out of memory. */
static inline long long cilk_knapsack_reference(const cilk_item *items, int n,
                                                long long capacity) {
    long long *best = (long long *)calloc((size_t)capacity + 1, sizeof *best), r;
    long long c;
    int i;
    if (!best) return -1;
    for (i = 0; i < n; i++)
        for (c = capacity; c >= items[i].weight; c--)
            if (best[c - items[i].weight] + items[i].value > best[c])
                best[c] = best[c - items[i].weight] + items[i].value;
    r = best[capacity];
    free(best);
    return r;
}

/* ---- UTS: unbalanced tree search over an implicit binomial tree ---- */

typedef struct cilk_uts {
    uint64_t root;        /* the root's id */
    uint64_t threshold;   /* a non-root node has children when mix(id) < threshold (q 2^64) */
    int root_children;
} cilk_uts;

typedef struct cilk_uts_node {
    const cilk_uts *tree;
    uint64_t id;
} cilk_uts_node;

typedef struct cilk_uts_roots {
    const cilk_uts *tree;
    int first, end;       /* the root's children [first, end) */
} cilk_uts_roots;

static inline cilk_uts cilk_uts_input(int root_children) {
    cilk_uts t;
    t.root = 42;
    t.threshold = (uint64_t)(CILK_UTS_Q * 18446744073709551616.0);
    t.root_children = root_children;
    return t;
}

/* The id of child i of `parent`: CILK_UTS_HASH_ROUNDS rounds of mixing, the work a node
   costs (UTS proper hashes with SHA-1). */
static inline uint64_t cilk_uts_child(uint64_t parent, int i) {
    uint64_t x = parent + (uint64_t)(i + 1) * UINT64_C(0xd1b54a32d192ed03);
    int r;
    for (r = 0; r < CILK_UTS_HASH_ROUNDS; r++) x = cilk_mix64(x);
    return x;
}

/* Children of a non-root node. */
static inline int cilk_uts_children(const cilk_uts *t, uint64_t id) {
    return cilk_mix64(id ^ UINT64_C(0x5555555555555555)) < t->threshold ? CILK_UTS_CHILDREN : 0;
}

static inline cilk_uts_node cilk_uts_kid(const cilk_uts_node *nd, int i) {
    cilk_uts_node k;
    k.tree = nd->tree;
    k.id = cilk_uts_child(nd->id, i);
    return k;
}

/* The subtree under the root's child `i`. */
static inline cilk_uts_node cilk_uts_root_kid(const cilk_uts *t, int i) {
    cilk_uts_node k;
    k.tree = t;
    k.id = cilk_uts_child(t->root, i);
    return k;
}

/* The root's children, halved until one is left (the root has thousands: spawning them
   in one loop would queue thousands of children in one task). */
static inline cilk_uts_roots cilk_uts_all_roots(const cilk_uts *t) {
    cilk_uts_roots r;
    r.tree = t;
    r.first = 0;
    r.end = t->root_children;
    return r;
}

static inline void cilk_uts_halve(const cilk_uts_roots *r, cilk_uts_roots *low,
                                  cilk_uts_roots *high) {
    *low = *high = *r;
    low->end = high->first = r->first + (r->end - r->first) / 2;
}

static inline long long cilk_uts_node_elision(cilk_uts_node nd) {
    int n = cilk_uts_children(nd.tree, nd.id), i;
    long long count = 1;
    for (i = 0; i < n; i++) count += cilk_uts_node_elision(cilk_uts_kid(&nd, i));
    return count;
}

static inline long long cilk_uts_roots_elision(cilk_uts_roots r) {
    cilk_uts_roots low, high;
    if (r.end - r.first == 1) return cilk_uts_node_elision(cilk_uts_root_kid(r.tree, r.first));
    cilk_uts_halve(&r, &low, &high);
    return cilk_uts_roots_elision(low) + cilk_uts_roots_elision(high);
}

/* Nodes in the tree, the root included. */
static inline long long cilk_uts_elision(const cilk_uts *t) {
    return 1 + cilk_uts_roots_elision(cilk_uts_all_roots(t));
}

/* ---- matrices: Strassen and divide-and-conquer multiplication ---- */

/* C = A B (Strassen) or C += A B (matmul) for order-n blocks of row-major matrices with
   row strides lda, ldb, ldc. */
typedef struct cilk_mm_job {
    const double *a, *b;
    double *c;
    int lda, ldb, ldc, n;
} cilk_mm_job;

/* A random n x n matrix with entries in [-1, 1). */
static inline double *cilk_matrix_input(int n, uint64_t seed) {
    double *m = (double *)malloc((size_t)n * (size_t)n * sizeof *m);
    size_t i;
    if (m)
        for (i = 0; i < (size_t)n * (size_t)n; i++) m[i] = 2.0 * cilk_unit(cilk_next(&seed)) - 1.0;
    return m;
}

static inline cilk_mm_job cilk_mm_whole(const double *a, const double *b, double *c, int n) {
    cilk_mm_job j;
    j.a = a;
    j.b = b;
    j.c = c;
    j.lda = j.ldb = j.ldc = j.n = n;
    return j;
}

/* The plain multiply, C += A B. Each row of C is taken 8 entries at a time, kept in
   registers over the whole k loop (the summation order is still k = 0, 1, ...). With a
   store to C in the inner loop (the i-k-j order), loads of B waited on stores to C whose
   addresses matched modulo 4 KiB (4K aliasing): the time then followed where malloc had
   put each temporary, which differs from thread to thread (Strassen of order 1024, the
   same code: 255 to 450 ms). */
static inline void cilk_mm_base(const cilk_mm_job *j) {
    const int n = j->n;
    int i, k, x;
    for (i = 0; i < n; i++) {
        double *c = j->c + (size_t)i * (size_t)j->ldc;
        const double *a = j->a + (size_t)i * (size_t)j->lda;
        for (x = 0; x + 8 <= n; x += 8) {
            double s0 = c[x], s1 = c[x + 1], s2 = c[x + 2], s3 = c[x + 3], s4 = c[x + 4],
                   s5 = c[x + 5], s6 = c[x + 6], s7 = c[x + 7];
            for (k = 0; k < n; k++) {
                const double aik = a[k], *b = j->b + (size_t)k * (size_t)j->ldb + x;
                s0 += aik * b[0];
                s1 += aik * b[1];
                s2 += aik * b[2];
                s3 += aik * b[3];
                s4 += aik * b[4];
                s5 += aik * b[5];
                s6 += aik * b[6];
                s7 += aik * b[7];
            }
            c[x] = s0;
            c[x + 1] = s1;
            c[x + 2] = s2;
            c[x + 3] = s3;
            c[x + 4] = s4;
            c[x + 5] = s5;
            c[x + 6] = s6;
            c[x + 7] = s7;
        }
        for (; x < n; x++) {
            double sum = c[x];
            for (k = 0; k < n; k++) sum += a[k] * j->b[(size_t)k * (size_t)j->ldb + (size_t)x];
            c[x] = sum;
        }
    }
}

/* The quadrant products of phase 0 or 1 of C += A B: C_ij += A_ik B_kj with k = phase,
   as quarter[2i + j]. The four of a phase write different quadrants of C. */
static inline void cilk_matmul_split(const cilk_mm_job *j, int phase, cilk_mm_job quarter[4]) {
    size_t h = (size_t)(j->n / 2);
    int q;
    for (q = 0; q < 4; q++) {
        size_t i = (size_t)(q >> 1), c = (size_t)(q & 1), k = (size_t)phase;
        quarter[q] = *j;
        quarter[q].n = j->n / 2;
        quarter[q].a = j->a + i * h * (size_t)j->lda + k * h;
        quarter[q].b = j->b + k * h * (size_t)j->ldb + c * h;
        quarter[q].c = j->c + i * h * (size_t)j->ldc + c * h;
    }
}

static inline void cilk_matmul_elision(const cilk_mm_job *j) {
    cilk_mm_job quarter[4];
    int phase, q;
    if (j->n <= CILK_MATMUL_CUTOFF) {
        cilk_mm_base(j);
        return;
    }
    for (phase = 0; phase < 2; phase++) {
        cilk_matmul_split(j, phase, quarter);
        for (q = 0; q < 4; q++) cilk_matmul_elision(&quarter[q]);
    }
}

/* Strassen's base case: C = A B. */
static inline void cilk_strassen_base(const cilk_mm_job *j) {
    int i;
    for (i = 0; i < j->n; i++)
        memset(j->c + (size_t)i * (size_t)j->ldc, 0, (size_t)j->n * sizeof *j->c);
    cilk_mm_base(j);
}

/* One level of Strassen's algorithm: the operands of the 7 products (10 sums of
   quadrants) and the products, in temporaries of this level; product[0..6] are
   independent. */
typedef struct cilk_strassen_level {
    double *mem;
    cilk_mm_job product[7];
} cilk_strassen_level;

/* d = x + sign y over h x h blocks (d has stride h). */
static inline void cilk_block_sum(double *d, const double *x, int ldx, const double *y, int ldy,
                                  double sign, int h) {
    int i, k;
    for (i = 0; i < h; i++) {
        double *dr = d + (size_t)i * (size_t)h;
        const double *xr = x + (size_t)i * (size_t)ldx, *yr = y + (size_t)i * (size_t)ldy;
        for (k = 0; k < h; k++) dr[k] = xr[k] + sign * yr[k];
    }
}

static inline void cilk_mm_operands(cilk_mm_job *p, const double *a, int lda, const double *b,
                                    int ldb) {
    p->a = a;
    p->lda = lda;
    p->b = b;
    p->ldb = ldb;
}

/* Sets up the level's products of an order-n job (n > CILK_STRASSEN_CUTOFF). 0: out of
   memory. */
static inline int cilk_strassen_begin(const cilk_mm_job *j, cilk_strassen_level *l) {
    int h = j->n / 2, p;
    size_t hh = (size_t)h * (size_t)h;
    const double *a11 = j->a, *a12 = j->a + h, *a21 = j->a + (size_t)h * (size_t)j->lda,
                 *a22 = a21 + h;
    const double *b11 = j->b, *b12 = j->b + h, *b21 = j->b + (size_t)h * (size_t)j->ldb,
                 *b22 = b21 + h;
    double *s, *m;
    if (!(l->mem = (double *)malloc(17 * hh * sizeof *l->mem))) return 0;
    s = l->mem;        /* the 10 sums */
    m = l->mem + 10 * hh; /* the 7 products */
    cilk_block_sum(s + 0 * hh, a11, j->lda, a22, j->lda, 1.0, h);
    cilk_block_sum(s + 1 * hh, b11, j->ldb, b22, j->ldb, 1.0, h);
    cilk_block_sum(s + 2 * hh, a21, j->lda, a22, j->lda, 1.0, h);
    cilk_block_sum(s + 3 * hh, b12, j->ldb, b22, j->ldb, -1.0, h);
    cilk_block_sum(s + 4 * hh, b21, j->ldb, b11, j->ldb, -1.0, h);
    cilk_block_sum(s + 5 * hh, a11, j->lda, a12, j->lda, 1.0, h);
    cilk_block_sum(s + 6 * hh, a21, j->lda, a11, j->lda, -1.0, h);
    cilk_block_sum(s + 7 * hh, b11, j->ldb, b12, j->ldb, 1.0, h);
    cilk_block_sum(s + 8 * hh, a12, j->lda, a22, j->lda, -1.0, h);
    cilk_block_sum(s + 9 * hh, b21, j->ldb, b22, j->ldb, 1.0, h);
    for (p = 0; p < 7; p++) {
        l->product[p].c = m + (size_t)p * hh;
        l->product[p].ldc = l->product[p].n = h;
    }
    /* M1 = (A11 + A22)(B11 + B22)   M2 = (A21 + A22) B11   M3 = A11 (B12 - B22)
       M4 = A22 (B21 - B11)          M5 = (A11 + A12) B22   M6 = (A21 - A11)(B11 + B12)
       M7 = (A12 - A22)(B21 + B22) */
    cilk_mm_operands(&l->product[0], s + 0 * hh, h, s + 1 * hh, h);
    cilk_mm_operands(&l->product[1], s + 2 * hh, h, b11, j->ldb);
    cilk_mm_operands(&l->product[2], a11, j->lda, s + 3 * hh, h);
    cilk_mm_operands(&l->product[3], a22, j->lda, s + 4 * hh, h);
    cilk_mm_operands(&l->product[4], s + 5 * hh, h, b22, j->ldb);
    cilk_mm_operands(&l->product[5], s + 6 * hh, h, s + 7 * hh, h);
    cilk_mm_operands(&l->product[6], s + 8 * hh, h, s + 9 * hh, h);
    return 1;
}

/* Combines the level's products into C and frees its temporaries:
   C11 = M1 + M4 - M5 + M7, C12 = M3 + M5, C21 = M2 + M4, C22 = M1 - M2 + M3 + M6. */
static inline void cilk_strassen_end(const cilk_mm_job *j, cilk_strassen_level *l) {
    int h = j->n / 2, i, k;
    for (i = 0; i < h; i++) {
        double *c1 = j->c + (size_t)i * (size_t)j->ldc, *c2 = c1 + (size_t)h * (size_t)j->ldc;
        for (k = 0; k < h; k++) {
            size_t x = (size_t)i * (size_t)h + (size_t)k;
            double m1 = l->product[0].c[x], m2 = l->product[1].c[x], m3 = l->product[2].c[x],
                   m4 = l->product[3].c[x], m5 = l->product[4].c[x], m6 = l->product[5].c[x],
                   m7 = l->product[6].c[x];
            c1[k] = m1 + m4 - m5 + m7;
            c1[h + k] = m3 + m5;
            c2[k] = m2 + m4;
            c2[h + k] = m1 - m2 + m3 + m6;
        }
    }
    free(l->mem);
}

/* 0: out of memory. */
static inline int cilk_strassen_elision(const cilk_mm_job *j) {
    cilk_strassen_level l;
    int p, ok = 1;
    if (j->n <= CILK_STRASSEN_CUTOFF) {
        cilk_strassen_base(j);
        return 1;
    }
    if (!cilk_strassen_begin(j, &l)) return 0;
    for (p = 0; p < 7; p++) ok &= cilk_strassen_elision(&l.product[p]);
    cilk_strassen_end(j, &l);
    return ok;
}

/* 1 when sampled entries of c match A B computed directly (c = A B, for C initially 0). */
static inline int cilk_matrix_check(const double *a, const double *b, const double *c, int n) {
    uint64_t s = 7;
    int t;
    for (t = 0; t < 256; t++) {
        size_t i = (size_t)(cilk_next(&s) % (uint64_t)n), x = (size_t)(cilk_next(&s) % (uint64_t)n);
        double want = 0.0, diff;
        int k;
        for (k = 0; k < n; k++) want += a[i * (size_t)n + (size_t)k] * b[(size_t)k * (size_t)n + x];
        diff = c[i * (size_t)n + x] - want;
        /* entries are sums of n products of numbers below 1: rounding errs far below this */
        if (diff > 1e-9 * n || diff < -1e-9 * n || diff != diff) return 0;
    }
    return 1;
}

/* ---- dfs: a full tree with work at the leaves ---- */

typedef struct cilk_dfs_job {
    long long leaf;       /* the index of the subtree's first leaf */
    int depth, breadth;   /* levels below this node; children per node */
} cilk_dfs_job;

/* A leaf's fixed work: CILK_DFS_LEAF_WORK xorshift steps from a seed of its index. */
static inline long long cilk_dfs_leaf(long long leaf) {
    uint64_t x = (uint64_t)leaf * UINT64_C(0x9e3779b97f4a7c15) + 1;
    int i;
    for (i = 0; i < CILK_DFS_LEAF_WORK; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return (long long)(x >> 48);
}

static inline cilk_dfs_job cilk_dfs_kid(const cilk_dfs_job *j, int i) {
    cilk_dfs_job k = *j;
    k.depth--;
    k.leaf = j->leaf * j->breadth + i;
    return k;
}

static inline long long cilk_dfs_elision(cilk_dfs_job j) {
    long long sum = 0;
    int i;
    if (j.depth == 0) return cilk_dfs_leaf(j.leaf);
    for (i = 0; i < j.breadth; i++) sum += cilk_dfs_elision(cilk_dfs_kid(&j, i));
    return sum;
}

static inline cilk_dfs_job cilk_dfs_root(int depth, int breadth) {
    cilk_dfs_job j;
    j.leaf = 0;
    j.depth = depth;
    j.breadth = breadth;
    return j;
}

/* The reference: the leaves in one loop (leaf indices run from 0 to breadth^depth - 1). */
static inline long long cilk_dfs_reference(int depth, int breadth) {
    long long leaves = 1, sum = 0, i;
    int d;
    for (d = 0; d < depth; d++) leaves *= breadth;
    for (i = 0; i < leaves; i++) sum += cilk_dfs_leaf(i);
    return sum;
}

/* ---- pi: Monte-Carlo, points of the unit square inside the quarter circle ---- */

typedef struct cilk_pi_job {
    long long first, end; /* chunks [first, end) */
} cilk_pi_job;

/* The hits among the CILK_PI_CHUNK samples of a chunk, from a generator seeded by the
   chunk's index (so the total does not depend on how the chunks are split). */
static inline long long cilk_pi_leaf(long long chunk) {
    uint64_t s = cilk_mix64((uint64_t)chunk);
    long long hits = 0;
    int i;
    for (i = 0; i < CILK_PI_CHUNK; i++) {
        double x = cilk_unit(cilk_next(&s)), y = cilk_unit(cilk_next(&s));
        hits += x * x + y * y <= 1.0;
    }
    return hits;
}

static inline cilk_pi_job cilk_pi_root(long long chunks) {
    cilk_pi_job j;
    j.first = 0;
    j.end = chunks;
    return j;
}

static inline void cilk_pi_halve(const cilk_pi_job *j, cilk_pi_job *low, cilk_pi_job *high) {
    low->first = j->first;
    low->end = high->first = j->first + (j->end - j->first) / 2;
    high->end = j->end;
}

static inline long long cilk_pi_elision(cilk_pi_job j) {
    cilk_pi_job low, high;
    if (j.end - j.first == 1) return cilk_pi_leaf(j.first);
    cilk_pi_halve(&j, &low, &high);
    return cilk_pi_elision(low) + cilk_pi_elision(high);
}

/* The reference: the chunks in one loop. */
static inline long long cilk_pi_reference(long long chunks) {
    long long sum = 0, i;
    for (i = 0; i < chunks; i++) sum += cilk_pi_leaf(i);
    return sum;
}

/* ---- the variants' entry points ----
   Each runs one kernel on `workers` threads and returns what the harness checks:
   sort      sorts keys[0, n) in place (tmp: n keys of scratch)
   queens    the number of solutions on the n x n board
   knapsack  the best value of items[0, n) (by decreasing density) within capacity
   uts       the nodes of the tree, root included
   strassen  c = a b (order n, halving evenly down to the cut-off); 0: out of memory
   matmul    c += a b (order n, halving evenly down to the cut-off)
   dfs       the sum of the leaves' values
   pi        the hits of `chunks` chunks */
#define CILK_DECLARE_VARIANT(v)                                                             \
    void cilk_sort_##v(uint32_t *keys, uint32_t *tmp, size_t n, int workers);               \
    long long cilk_queens_##v(int n, int workers);                                          \
    long long cilk_knapsack_##v(const cilk_item *items, int n, long long capacity,          \
                                int workers);                                               \
    long long cilk_uts_##v(const cilk_uts *tree, int workers);                              \
    int cilk_strassen_##v(const double *a, const double *b, double *c, int n, int workers); \
    void cilk_matmul_##v(const double *a, const double *b, double *c, int n, int workers);  \
    long long cilk_dfs_##v(int depth, int breadth, int workers);                            \
    long long cilk_pi_##v(long long chunks, int workers);

#ifdef __cplusplus
extern "C" {
#endif
#if defined(FSCHED_BENCH_LACE)
CILK_DECLARE_VARIANT(lace) /* bench_cilk_lace.c */
/* Lace's workers are suspended between runs (bench_lace.h). Waking them is left out of
   the time: on a machine with few processors, a woken worker that spins where the caller
   ran keeps the caller off until the next scheduler tick (about 4 ms each way here), a
   cost of the harness around Lace, not of the kernels. The harness resumes them before
   each run and suspends them after it. */
#endif
#if defined(FSCHED_BENCH_TBB)
CILK_DECLARE_VARIANT(tbb) /* bench_cilk_tbb.cpp */
#endif
#if defined(FSCHED_BENCH_OPENMP)
CILK_DECLARE_VARIANT(omp) /* bench_cilk_omp.c */
#endif
#ifdef __cplusplus
}
#endif

#endif
