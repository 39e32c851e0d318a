/* The default stacks, deep and many. Deep: the UTS tree T3 (depth 1,572), a task per
   node, each node waiting for its children in a wait group of its own (whose wait runs
   them on its own stack), and the same tree through nested fsched_join; nodes and depth
   counted exactly, at 1 and 2 workers. Many: more tasks blocked at once than guarded
   stacks fit in Linux's memory mappings, each on a fiber of its own (64-bit). */
#define FIBERSCHED_IMPLEMENTATION
#include "fibersched.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "uts.h"

static const uts_tree *tree;

/* How far below the root's frame the deepest node's lay, in a run on one worker (where
   every node runs on the root's stack): the stack a level of the recursion costs. */
static int measuring;
static uintptr_t frame_top, frame_low;

static void note_frame(uintptr_t a) {
    if (!measuring) return;
    if (!frame_top) frame_top = frame_low = a;
    if (a < frame_low) frame_low = a;
}

/* ---- a wait group per node ---- */

typedef struct visit {
    uts_node node;
    uint64_t nodes; /* of the subtree, written by the visit */
    int max_depth;
} visit;

#define INLINE_KIDS 8 /* a binomial node's children; the root's are on the heap */

static void visit_wg(void *p) {
    visit *v = (visit *)p, few[INLINE_KIDS], *kids = few;
    int k = uts_children(tree, &v->node), i;
    fsched_wait_group wg;
    note_frame((uintptr_t)&wg);
    v->nodes = 1;
    v->max_depth = v->node.depth;
    if (!k) return;
    if (k > INLINE_KIDS) CHECK((kids = (visit *)malloc((size_t)k * sizeof *kids)) != NULL);
    CHECK_OK(fsched_wait_group_init(&wg));
    for (i = 0; i < k; i++) {
        uts_child(&v->node, i, &kids[i].node);
        CHECK_OK(fsched_wait_group_spawn(&wg, fsched_current(), visit_wg, &kids[i]));
    }
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    for (i = 0; i < k; i++) {
        v->nodes += kids[i].nodes;
        if (kids[i].max_depth > v->max_depth) v->max_depth = kids[i].max_depth;
    }
    if (kids != few) free(kids);
}

/* ---- nested fsched_join: a node's children split in halves ---- */

typedef struct kids {
    const uts_node *parent;
    int lo, hi;
    uint64_t nodes;
    int max_depth;
} kids;

static void visit_join(void *p);

static void visit_kids(void *p) {
    kids *r = (kids *)p;
    if (r->hi - r->lo == 1) {
        visit v;
        uts_child(r->parent, r->lo, &v.node);
        visit_join(&v);
        r->nodes = v.nodes;
        r->max_depth = v.max_depth;
    } else {
        int mid = r->lo + (r->hi - r->lo) / 2;
        kids a = {r->parent, r->lo, mid, 0, 0}, b = {r->parent, mid, r->hi, 0, 0};
        CHECK_OK(fsched_join(visit_kids, &a, visit_kids, &b));
        r->nodes = a.nodes + b.nodes;
        r->max_depth = a.max_depth > b.max_depth ? a.max_depth : b.max_depth;
    }
}

static void visit_join(void *p) {
    visit *v = (visit *)p;
    kids all;
    note_frame((uintptr_t)&all);
    all.parent = &v->node;
    all.lo = 0;
    all.hi = uts_children(tree, &v->node);
    v->nodes = 1;
    v->max_depth = v->node.depth;
    if (!all.hi) return;
    visit_kids(&all);
    v->nodes += all.nodes;
    if (all.max_depth > v->max_depth) v->max_depth = all.max_depth;
}

/* ---- runs ---- */

/* The runs' stacks: the default where it is a thread's (8 MiB on 64-bit POSIX systems),
   which the tree must fit; elsewhere, where it is smaller than the tree needs (1 MiB on
   64-bit Windows, 64 KiB on 32-bit targets), 8 MiB asked for. */
#if FIBERSCHED_DEFAULT_STACK_SIZE >= 8u * 1024u * 1024u
#define DEEP_STACK 0u
#else
#define DEEP_STACK (8u * 1024u * 1024u)
#endif

static void run_tree(const uts_tree *t, uint32_t workers, void (*visit_fn)(void *),
                     const char *how) {
    fsched_sched *s;
    fsched_desc d;
    fsched_wait_group wg;
    visit root;
    test_desc_init(&d);
    d.workers = workers;
    d.stack_size = DEEP_STACK;
    CHECK_OK(fsched_create(&d, &s));
#if !TEST_THREADS
    CHECK_OK(fsched_bind(s));
#endif
    tree = t;
    measuring = workers <= 1;
    frame_top = frame_low = 0;
    uts_root(t, &root.node);
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, visit_fn, &root));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_EQ_U64(root.nodes, t->nodes);
    CHECK_EQ_U64(root.max_depth, t->max_depth);
    if (measuring)
        printf("%lu nodes, depth %d, %s, %u worker(s): %lu bytes of stack per level\n",
               (unsigned long)root.nodes, root.max_depth, how, (unsigned)workers,
               (unsigned long)((frame_top - frame_low) / (uintptr_t)t->max_depth));
#if !TEST_THREADS
    CHECK_OK(fsched_unbind());
#endif
    CHECK_OK(fsched_destroy(s));
}

/* ---- more blocked tasks than guarded stacks fit in vm.max_map_count ----
   Each guarded stack costs two memory mappings, and once the process has none left,
   everything that maps fails; past a bound below that, stacks come from slabs. Every
   task still gets a fiber of its own (none is run nested in another's wait for want of
   a stack, and no wait fails). Linux, natively. */

#if TEST_THREADS && defined(__linux__) && UINTPTR_MAX > 0xffffffffu
#define TEST_CROWD 1
typedef struct crowd {
    fsched_event go;
    fsched_wait_group started, ended;
} crowd;

static void crowd_task(void *p) {
    crowd *c = (crowd *)p;
    CHECK_OK(fsched_wait_group_done(&c->started));
    CHECK_OK(fsched_event_wait(&c->go));
}

static void count_log(fsched_log_level level, const char *message, void *user) {
    (void)level;
    (void)message;
    ADD((int *)user, 1);
}

static void test_crowd(void) {
    fsched_sched *s;
    fsched_desc d;
    fsched_stats st;
    crowd c;
    long maps = 0, n, i;
    int logged = 0;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (f) {
        if (fscanf(f, "%ld", &maps) != 1) maps = 0;
        fclose(f);
    }
    /* not under the sanitizers, which keep shadow memory in proportion to each stack's
       size (AddressSanitizer about an eighth of it), nor under Valgrind */
    if (maps <= 0 || maps > 1000000 || TEST_SCALE > 1 || test_under_valgrind()) {
        printf("blocked tasks past vm.max_map_count: skipped\n");
        return;
    }
    n = maps / 2 + 1000; /* more than guarded stacks can have mappings */
    test_desc_init(&d);
    d.workers = 2;
    d.logger.func = count_log;
    d.logger.user = &logged;
    CHECK_OK(fsched_create(&d, &s));
    CHECK_OK(fsched_event_init(&c.go, 1, 0));
    CHECK_OK(fsched_wait_group_init(&c.started));
    CHECK_OK(fsched_wait_group_init(&c.ended));
    CHECK_OK(fsched_wait_group_add(&c.started, n));
    for (i = 0; i < n; i++) CHECK_OK(fsched_wait_group_spawn(&c.ended, s, crowd_task, &c));
    CHECK_OK(fsched_wait_group_wait(&c.started));
    CHECK_OK(fsched_get_stats(s, &st));
    printf("%ld tasks blocked at once (vm.max_map_count %ld): %lu fibers\n", n, maps,
           (unsigned long)st.fibers);
    CHECK(st.fibers >= (uint64_t)n);
    CHECK(LOAD(&logged) == 1); /* that stacks come from slabs now, said once */
    CHECK_OK(fsched_event_set(&c.go));
    CHECK_OK(fsched_wait_group_wait(&c.ended));
    CHECK_OK(fsched_wait_group_destroy(&c.ended));
    CHECK_OK(fsched_wait_group_destroy(&c.started));
    CHECK_OK(fsched_event_destroy(&c.go));
    CHECK_OK(fsched_destroy(s));
}
#endif

/* Under Valgrind, ThreadSanitizer, schedule fuzzing and emulators (the cross builds'
   tests), whose every step is many times slower: a tree of the same binomial kind with a
   root of 4 children (seed 7975), 50,125 nodes deep 301. */
static const uts_tree small_tree = {UTS_BINOMIAL, 4.0, 0.124875, 8, 0, 7975, 50125u, 301};

static const uts_tree *tree_to_count(void) {
    const char *emulated = getenv("FIBERSCHED_TEST_EMULATED");
    int slow = test_under_valgrind() || (emulated && *emulated && strcmp(emulated, "0") != 0);
#if defined(FSCHED__TSAN) || (defined(FIBERSCHED_CHAOS) && FIBERSCHED_CHAOS)
    slow = 1;
#endif
    return slow ? &small_tree : &uts_t3;
}

int main(void) {
    const uts_tree *t = tree_to_count();
    uint32_t workers;
    setvbuf(stdout, NULL, _IONBF, 0);
    test_watchdog(600);
    for (workers = 1; workers <= (TEST_THREADS ? 2u : 1u); workers++) {
        run_tree(t, workers, visit_wg, "a wait group per node");
        run_tree(t, workers, visit_join, "nested joins");
    }
#if defined(TEST_CROWD)
    test_crowd();
#endif
    return 0;
}
