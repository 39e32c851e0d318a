/* UTS, the Unbalanced Tree Search benchmark: the trees T1 (geometric, 4,130,071 nodes,
   depth 10) and T3 (binomial, 4,112,897 nodes, depth 1,572), node ids hashed with SHA-1
   as the UTS reference does (tests/uts.h), counted with a task per node. Candidates, side
   by side in one run, for each tree:

   serial            the plain recursion, on the main thread (the floor)
   fibersched        each node spawns its children in a wait group of its own and waits
                     for them (the wait runs those no other worker took on its own stack,
                     so T3 nests 1,572 levels deep on one stack); default stacks; the root
                     runs as a task of a scheduler created once per process
   Lace              SPAWN per child, then SYNC per child (bench_uts_lace.c), when meson's
                     lace_source option names a Lace source tree

   The parallel candidates use `workers` threads (default: one per CPU). Each repetition
   runs every candidate once, in rotating order, after a short sleep that lets the
   previous runtime go idle; every run checks the node count and the depth. Reported:
   median and minimum milliseconds, nanoseconds per node.
   Usage: bench_uts [--quick] [--workers=N] [--reps=N]
   (--quick: a geometric tree of depth 6 and a binomial one of 50,125 nodes) */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"

#include "../tests/uts.h"

#if defined(FSCHED_BENCH_LACE)
#include "bench_lace.h"
#endif

typedef struct uts_ctx {
    const uts_tree *tree;
    int workers;
    fsched_sched *sched;
} uts_ctx;

static void check(const char *who, const uts_ctx *c, uint64_t nodes, int max_depth) {
    if (nodes != c->tree->nodes || max_depth != c->tree->max_depth)
        bench_fail("%s: %llu nodes of depth %d, expected %llu of depth %d", who,
                   (unsigned long long)nodes, max_depth, (unsigned long long)c->tree->nodes,
                   c->tree->max_depth);
}

/* ---- serial ---- */

static double run_serial(void *ctx) {
    uts_ctx *c = (uts_ctx *)ctx;
    uts_node root;
    int depth = 0;
    double t0 = bench_now();
    uint64_t nodes;
    uts_root(c->tree, &root);
    nodes = uts_count_serial(c->tree, &root, &depth);
    check("serial", c, nodes, depth);
    return bench_now() - t0;
}

/* ---- fibersched: a wait group per node ---- */

typedef struct uts_visit {
    const uts_tree *tree;
    uts_node node;
    uint64_t nodes; /* of the subtree, written by the visit */
    int max_depth;
} uts_visit;

#define UTS_FEW 8 /* a binomial node's children, on the node's stack; more on the heap */

static void uts_task(void *p) {
    uts_visit *v = (uts_visit *)p, few[UTS_FEW], *kids = few;
    int k = uts_children(v->tree, &v->node), i;
    fsched_wait_group wg;
    v->nodes = 1;
    v->max_depth = v->node.depth;
    if (!k) return;
    if (k > UTS_FEW && !(kids = (uts_visit *)malloc((size_t)k * sizeof *kids)))
        bench_fail("out of memory");
    fsched_wait_group_init(&wg);
    for (i = 0; i < k; i++) {
        fsched_result r;
        kids[i].tree = v->tree;
        uts_child(&v->node, i, &kids[i].node);
        r = fsched_wait_group_spawn(&wg, fsched_current(), uts_task, &kids[i]);
        if (r != FSCHED_OK) bench_fail("fsched_wait_group_spawn: %s", fsched_result_string(r));
    }
    fsched_wait_group_wait(&wg);
    fsched_wait_group_destroy(&wg);
    for (i = 0; i < k; i++) {
        v->nodes += kids[i].nodes;
        if (kids[i].max_depth > v->max_depth) v->max_depth = kids[i].max_depth;
    }
    if (kids != few) free(kids);
}

static double run_fsched(void *ctx) {
    uts_ctx *c = (uts_ctx *)ctx;
    uts_visit root;
    double t;
    root.tree = c->tree;
    uts_root(c->tree, &root.node);
    t = bench_run_task(c->sched, uts_task, &root);
    check("fibersched", c, root.nodes, root.max_depth);
    return t;
}

/* ---- peers ---- */

#if defined(FSCHED_BENCH_LACE)
static double run_lace(void *ctx) {
    uts_ctx *c = (uts_ctx *)ctx;
    int depth = 0;
    double t0 = bench_now();
    uint64_t nodes = bench_uts_lace(c->tree, c->workers, &depth);
    double t1 = bench_now();
    check("Lace", c, nodes, depth);
    return t1 - t0;
}
#endif

/* ---- the table ---- */

#define TREES 2

int main(int argc, char **argv) {
    int quick = bench_quick(argc, argv);
    int reps = bench_reps(argc, argv, quick ? 3 : 9);
    int workers = (int)bench_option(argc, argv, "--workers=", bench_cpu_count());
    static uts_tree quick_trees[TREES];
    const uts_tree *trees[TREES];
    const char *names[TREES] = {"T1", "T3"};
    uts_ctx ctx[TREES];
    bench_case c[3 * TREES];
    int nc = 0, t, i;
    fsched_sched *s;
    fsched_desc d;
    fsched_result r;
    char buf[16];

    if (workers < 1) bench_fail("--workers must be at least 1");
    trees[0] = &uts_t1;
    trees[1] = &uts_t3;
    if (quick) { /* smaller trees of the same kinds, their answers counted here */
        quick_trees[0] = uts_t1;
        quick_trees[0].depth = 6;
        quick_trees[1] = uts_t3;
        quick_trees[1].b0 = 4.0;
        quick_trees[1].seed = 7975;
        for (t = 0; t < TREES; t++) {
            uts_node root;
            quick_trees[t].max_depth = 0;
            uts_root(&quick_trees[t], &root);
            quick_trees[t].nodes = uts_count_serial(&quick_trees[t], &root,
                                                    &quick_trees[t].max_depth);
            trees[t] = &quick_trees[t];
        }
    }
    memset(&d, 0, sizeof d);
    d.workers = (uint32_t)workers;
    r = fsched_create(&d, &s);
    if (r != FSCHED_OK) bench_fail("fsched_create: %s", fsched_result_string(r));

    memset(c, 0, sizeof c);
    for (t = 0; t < TREES; t++) {
        ctx[t].tree = trees[t];
        ctx[t].workers = workers;
        ctx[t].sched = s;
        c[nc].name = names[t];
        c[nc].run = run_serial;
        c[nc].ctx = &ctx[t];
        c[nc++].workers = 1;
        c[nc].name = names[t];
        c[nc].run = run_fsched;
        c[nc].ctx = &ctx[t];
        c[nc++].workers = workers;
#if defined(FSCHED_BENCH_LACE)
        c[nc].name = names[t];
        c[nc].run = run_lace;
        c[nc].ctx = &ctx[t];
        c[nc++].workers = workers;
#endif
    }

    bench_run_cases(c, nc, reps, 20, 1);

    printf("uts: T1 %llu nodes of depth %d, T3 %llu nodes of depth %d; a task per node; "
           "%d worker(s); median of %d repetitions\n\n",
           (unsigned long long)trees[0]->nodes, trees[0]->max_depth,
           (unsigned long long)trees[1]->nodes, trees[1]->max_depth, workers, reps);
    printf("| tree | %-31s | %7s | %10s | %10s | %8s | %13s |\n", "candidate", "workers",
           "median ms", "min ms", "ns/node", "vs fibersched");
    printf("|------|---------------------------------|---------|------------|------------|"
           "----------|---------------|\n");
    for (i = 0; i < nc; i++) {
        const uts_ctx *x = (const uts_ctx *)c[i].ctx;
        const bench_case *f = &c[i - i % (nc / TREES) + 1]; /* this tree's fibersched */
        const char *who = c[i].run == run_serial ? "serial"
                          : c[i].run == run_fsched ? "fibersched: wait group per node"
                                                   : "Lace: SPAWN/SYNC";
        printf("| %-4s | %-31s | %7d | %10.1f | %10.1f | %8.1f | %13s |\n", c[i].name, who,
               c[i].workers, c[i].median * 1e3, c[i].min * 1e3,
               c[i].median * 1e9 / (double)x->tree->nodes, bench_ratio(buf, sizeof buf, &c[i], f));
    }
    printf("\n");
    bench_quick_note(quick);
#if defined(FSCHED_BENCH_LACE)
    for (t = 0; t < TREES; t++) {
        char what[64];
        snprintf(what, sizeof what, "%s, fibersched / Lace", names[t]);
        bench_target(what, c[t * 3 + 1].median / c[t * 3 + 2].median, "<=", 1.1, "x");
    }
#else
    printf("peer: Lace: not measured (meson's lace_source option is not set)\n");
#endif
    fsched_destroy(s);
    return 0;
}
