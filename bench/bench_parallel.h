/* The problems of bench_parallel, shared by every candidate (C and C++): the same code
   decides what each task computes, so only the scheduling differs. */
#ifndef FIBERSCHED_BENCH_PARALLEL_H
#define FIBERSCHED_BENCH_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

/* ---- (a) n-queens: one task per queen placed; a task copies its board ---- */

#define NQ_MAX 16

/* Whether a queen fits in column `col` of row `row`, given the columns of rows 0..row-1. */
static inline int nq_fits(const unsigned char *cols, int row, int col) {
    int r;
    for (r = 0; r < row; r++) {
        int d = (int)cols[r] - col;
        if (d == 0 || d == row - r || d == r - row) return 0;
    }
    return 1;
}

/* ---- (b) an unbalanced tree in the style of UTS ----
   A node is a 64-bit state; its children's states are hashes of it. The root has
   UTS_ROOT_CHILDREN children; below it, a node at depth d < depth limit has a geometric
   number of children with mean 4 (the base-5 digits of its state, counted up to the first
   zero, at most UTS_MAX_CHILDREN); nodes at the depth limit are leaves. Subtrees of the
   root differ in size by orders of magnitude, and so do subtrees further down. */

#define UTS_ROOT_CHILDREN 8u
#define UTS_MAX_CHILDREN 27u
#define UTS_SEED 5u

static inline uint64_t uts_mix(uint64_t x) { /* splitmix64's finaliser */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static inline uint64_t uts_root(void) { return uts_mix(UTS_SEED); }

static inline uint64_t uts_child(uint64_t state, unsigned i) {
    return uts_mix(state ^ (0x9e3779b97f4a7c15ull * (uint64_t)(i + 1)));
}

static inline unsigned uts_children(uint64_t state, unsigned depth, unsigned max_depth) {
    unsigned k = 0;
    if (depth == 0) return UTS_ROOT_CHILDREN;
    if (depth >= max_depth) return 0;
    while (k < UTS_MAX_CHILDREN && state % 5u != 0) {
        k++;
        state /= 5u;
    }
    return k;
}

/* ---- (c) a compute-bound loop: per element, a Newton iteration for 1/sqrt(x), six
   steps of five floating-point operations each ---- */

static inline double pf_kernel(size_t i) {
    double x = 0.5 + (double)(i & 0xfffffu) * (1.0 / 1048576.0); /* [0.5, 1.5) */
    double y = 1.0;
    int k;
    for (k = 0; k < 6; k++) y = y * (1.5 - 0.5 * x * y * y);
    return y;
}

#endif
