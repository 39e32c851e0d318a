/* UTS with Lace (a peer of bench_uts, built only when meson's lace_source option names a
   Lace 1.4 source tree): the same trees and node ids (tests/uts.h), a Lace task per node
   that spawns its children, each record on the node's stack as in fibersched's, and
   syncs them. Lace's workers are started once per worker count (bench_lace.c). */
#include <lace.h>
#include <stdio.h>
#include <stdlib.h>

#include "../tests/uts.h"
#include "bench_lace.h"

typedef struct lace_uts_count {
    uint64_t nodes;
    int max_depth;
} lace_uts_count;

#define LACE_UTS_FEW 8

TASK_2(lace_uts_count, lace_uts, const uts_tree *, tree, const uts_node *, node) {
    lace_uts_count r, c;
    uts_node few[LACE_UTS_FEW], *kids = few;
    int k = uts_children(tree, node), i;
    r.nodes = 1;
    r.max_depth = node->depth;
    if (k > LACE_UTS_FEW && !(kids = (uts_node *)malloc((size_t)k * sizeof *kids))) abort();
    for (i = 0; i < k; i++) {
        uts_child(node, i, &kids[i]);
        SPAWN(lace_uts, tree, &kids[i]);
    }
    for (i = 0; i < k; i++) {
        c = SYNC(lace_uts);
        r.nodes += c.nodes;
        if (c.max_depth > r.max_depth) r.max_depth = c.max_depth;
    }
    if (kids != few) free(kids);
    return r;
}

unsigned long long bench_uts_lace(const uts_tree *tree, int workers, int *max_depth) {
    uts_node root;
    lace_uts_count r;
    uts_root(tree, &root);
    bench_lace_resume(workers);
    r = RUN(lace_uts, tree, &root);
    bench_lace_suspend();
    *max_depth = r.max_depth;
    return r.nodes;
}
