/* The trees of the Unbalanced Tree Search benchmark (UTS), as its reference defines them:
   a node's id is a SHA-1 digest (the root's of 16 zero bytes and the seed, child i's of
   its parent's id and i, both big-endian), and its number of children follows from the
   id's last 31 bits, read as a probability. Two shapes: binomial (the root has b0
   children, every other node m children with probability q, else none) and geometric
   with a fixed branching factor (a geometric number of children of mean b0 up to depth
   d, none below). Known trees:

     T1  geometric, b0 4, d 10, seed 19:         4,130,071 nodes, depth 10
     T3  binomial, b0 2000, q 0.124875, m 8, seed 42: 4,112,897 nodes, depth 1,572

   Shared by tests/test_deep.c and bench/bench_uts.c. */
#ifndef FIBERSCHED_TEST_UTS_H
#define FIBERSCHED_TEST_UTS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ---- SHA-1 (FIPS 180-4) of a short message ---- */

/* Round i of SHA-1 on the five working words in their order for that round (rotated by
   naming, not by moving), with the message schedule kept in a ring of 16 words. Macros,
   not functions: unoptimised builds call every inline function. */
#define UTS_ROTL(x, n) ((uint32_t)((x) << (n)) | ((x) >> (32 - (n))))
#define UTS_W(i)                                                                       \
    ((i) < 16 ? w[i]                                                                   \
              : (t = w[((i) + 13) & 15] ^ w[((i) + 8) & 15] ^ w[((i) + 2) & 15] ^       \
                     w[(i) & 15],                                                      \
                 w[(i) & 15] = UTS_ROTL(t, 1)))
#define UTS_ROUND(a, b, c, d, e, f, k, wi) \
    ((e) += UTS_ROTL(a, 5) + (f) + (k) + (wi), (b) = UTS_ROTL(b, 30))
#define UTS_F0(b, c, d) ((d) ^ ((b) & ((c) ^ (d))))
#define UTS_F1(b, c, d) ((b) ^ (c) ^ (d))
#define UTS_F2(b, c, d) (((b) & (c)) | ((d) & ((b) | (c))))
#define UTS_FIVE(F, k, i)                                        \
    (UTS_ROUND(a, b, c, d, e, F(b, c, d), k, UTS_W(i)),          \
     UTS_ROUND(e, a, b, c, d, F(a, b, c), k, UTS_W((i) + 1)),    \
     UTS_ROUND(d, e, a, b, c, F(e, a, b), k, UTS_W((i) + 2)),    \
     UTS_ROUND(c, d, e, a, b, F(d, e, a), k, UTS_W((i) + 3)),    \
     UTS_ROUND(b, c, d, e, a, F(c, d, e), k, UTS_W((i) + 4)))

/* Unoptimised builds of the tests hash millions of ids per tree: GCC optimises this one
   function anyway. */
#if defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__)
#define UTS_OPTIMIZED __attribute__((optimize("O2")))
#else
#define UTS_OPTIMIZED
#endif

/* SHA-1 of a message of whole 32-bit words, at most 13 of them: one block. */
UTS_OPTIMIZED static inline void uts_sha1(const unsigned char *msg, size_t len,
                                          unsigned char digest[20]) {
    uint32_t w[16], t, a = 0x67452301u, b = 0xefcdab89u, c = 0x98badcfeu, d = 0x10325476u,
                       e = 0xc3d2e1f0u;
    int i, n = (int)(len / 4);
    for (i = 0; i < n; i++)
        w[i] = (uint32_t)msg[4 * i] << 24 | (uint32_t)msg[4 * i + 1] << 16 |
               (uint32_t)msg[4 * i + 2] << 8 | msg[4 * i + 3];
    w[n] = 0x80000000u; /* the padding's one bit, then zeros, then the length in bits */
    for (i = n + 1; i < 15; i++) w[i] = 0;
    w[15] = (uint32_t)len * 8;
    for (i = 0; i < 20; i += 5) UTS_FIVE(UTS_F0, 0x5a827999u, i);
    for (; i < 40; i += 5) UTS_FIVE(UTS_F1, 0x6ed9eba1u, i);
    for (; i < 60; i += 5) UTS_FIVE(UTS_F2, 0x8f1bbcdcu, i);
    for (; i < 80; i += 5) UTS_FIVE(UTS_F1, 0xca62c1d6u, i);
    a += 0x67452301u, b += 0xefcdab89u, c += 0x98badcfeu, d += 0x10325476u, e += 0xc3d2e1f0u;
    for (i = 0; i < 4; i++) {
        int s = 24 - 8 * i;
        digest[i] = (unsigned char)(a >> s), digest[4 + i] = (unsigned char)(b >> s);
        digest[8 + i] = (unsigned char)(c >> s), digest[12 + i] = (unsigned char)(d >> s);
        digest[16 + i] = (unsigned char)(e >> s);
    }
}

/* ---- trees ---- */

typedef enum uts_shape { UTS_BINOMIAL, UTS_GEOMETRIC } uts_shape;

typedef struct uts_tree {
    uts_shape shape;
    double b0;      /* children of the root (binomial), mean children (geometric) */
    double q;       /* binomial: probability that a node has m children */
    int m;
    int depth;      /* geometric: nodes at this depth and below have no children */
    int seed;
    uint64_t nodes; /* the known answer */
    int max_depth;
} uts_tree;

static const uts_tree uts_t1 = {UTS_GEOMETRIC, 4.0, 0.0, 0, 10, 19, 4130071u, 10};
static const uts_tree uts_t3 = {UTS_BINOMIAL, 2000.0, 0.124875, 8, 0, 42, 4112897u, 1572};

typedef struct uts_node {
    unsigned char id[20];
    int depth;
} uts_node;

#define UTS_MAX_CHILDREN 100 /* the reference's cap, for all but a binomial root */

static inline void uts_root(const uts_tree *t, uts_node *root) {
    unsigned char msg[20];
    memset(msg, 0, sizeof msg);
    msg[16] = (unsigned char)((uint32_t)t->seed >> 24);
    msg[17] = (unsigned char)((uint32_t)t->seed >> 16);
    msg[18] = (unsigned char)((uint32_t)t->seed >> 8);
    msg[19] = (unsigned char)t->seed;
    uts_sha1(msg, sizeof msg, root->id);
    root->depth = 0;
}

static inline void uts_child(const uts_node *parent, int i, uts_node *child) {
    unsigned char msg[24];
    memcpy(msg, parent->id, 20);
    msg[20] = (unsigned char)((uint32_t)i >> 24);
    msg[21] = (unsigned char)((uint32_t)i >> 16);
    msg[22] = (unsigned char)((uint32_t)i >> 8);
    msg[23] = (unsigned char)i;
    uts_sha1(msg, sizeof msg, child->id);
    child->depth = parent->depth + 1;
}

/* The node's id as a probability in [0, 1): its last 31 bits over 2^31. */
static inline double uts_probability(const uts_node *n) {
    uint32_t v = (uint32_t)n->id[16] << 24 | (uint32_t)n->id[17] << 16 |
                 (uint32_t)n->id[18] << 8 | n->id[19];
    return (double)(v & 0x7fffffffu) / 2147483648.0;
}

static inline int uts_children(const uts_tree *t, const uts_node *n) {
    int k;
    if (t->shape == UTS_BINOMIAL) {
        if (n->depth == 0) return (int)floor(t->b0);
        k = uts_probability(n) < t->q ? t->m : 0;
    } else {
        /* geometric of mean b: P(k children) = p (1-p)^k with p = 1 / (1 + b), drawn by
           inverting its distribution function */
        double b = n->depth < t->depth ? t->b0 : 0.0, p = 1.0 / (1.0 + b);
        if (b <= 0.0) return 0;
        k = (int)floor(log(1.0 - uts_probability(n)) / log(1.0 - p));
    }
    return k > UTS_MAX_CHILDREN ? UTS_MAX_CHILDREN : k;
}

/* Nodes and depth of the subtree under n, by plain recursion (the reference answer). */
static inline uint64_t uts_count_serial(const uts_tree *t, const uts_node *n, int *max_depth) {
    int k = uts_children(t, n), i;
    uint64_t nodes = 1;
    if (n->depth > *max_depth) *max_depth = n->depth;
    for (i = 0; i < k; i++) {
        uts_node c;
        uts_child(n, i, &c);
        nodes += uts_count_serial(t, &c, max_depth);
    }
    return nodes;
}

#endif
