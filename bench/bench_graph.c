/* Dependency graphs: building a graph of ~100,000 tasks and running it, in four shapes:

   wide        100,000 independent tasks
   chain       100,000 tasks in sequence
   tree        a complete binary tree of depth 17 (131,071 tasks), edges parent -> children
   wavefront   a 316 x 316 grid (99,856 tasks), task (i,j) after (i-1,j) and (i,j-1)

   each with an empty body and with a small one (rounds of integer hashing, a few hundred
   nanoseconds, accumulated into the task's slot). Both bodies also check the run: a task
   finds its own count of executions one behind the run's number (else it ran twice) and
   each predecessor's count already at it (else the order was broken), then counts itself;
   after every run all counts must equal the run's number. Every candidate calls the same
   body function, bench_graph_task, with the task's index. Candidates, side by side:

   fibersched   fsched_graph_add per task, fsched_graph_precede per edge; a run is
                fsched_graph_run + fsched_graph_wait from the main thread, in two ways:
                bound   the main thread bound to a scheduler of `workers` - 1 worker
                        threads (fsched_bind), so that it runs tasks while it waits: the
                        same threads and the same model as oneTBB below (the target)
                outside the main thread outside a scheduler of `workers` worker
                        threads: it queues the run and blocks, and a sleeping worker
                        first has to wake up
                both schedulers are created once per process
   oneTBB       tbb::flow::graph, a continue_node<continue_msg> per task, make_edge per
                edge; a run is try_put to each source + wait_for_all, inside a task_arena
                of `workers` threads (bench_graph_tbb.cpp), when available; the main
                thread is one of those threads and works while it waits

   Reported separately: build time (creating the graph, its tasks and its edges) and run
   time (one run of an already-built graph). Each repetition runs every candidate once, in
   rotating order, after a short sleep that lets the other runtime go idle: it builds a
   graph, runs it once untimed (warm-up), then `runs` timed runs, then destroys it. The
   table gives the median build over the repetitions and the median over all timed runs.
   For scale, each title also gives the bodies alone, called in index order (a topological
   order for every shape) on the main thread. A last table times re-running a graph of
   20,000 tasks after a run that added 1,000 (see rerun_measure).
   Targets, for every shape and body, against oneTBB with the same number of workers: a
   build in at most oneTBB's time, a run in at most 0.9 of it (fibersched's bound main
   thread); run once with --workers=1 and once with --workers=2 for both counts.
   Usage: bench_graph [--quick] [--workers=N] [--reps=N] [--runs=N]
   (--quick: about 10,000 tasks per shape and fewer repetitions) */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"

#include <stdatomic.h>

#if defined(__GNUC__)
#define BENCH_NOINLINE __attribute__((noinline))
#else
#define BENCH_NOINLINE
#endif

#if defined(FSCHED_BENCH_TBB)
void *bench_graph_tbb_build(uint32_t tasks, const uint32_t *pred_start, const uint32_t *preds,
                            int workers); /* bench_graph_tbb.cpp */
void bench_graph_tbb_run(void *graph, int workers);
void bench_graph_tbb_destroy(void *graph);
#endif

/* Timed runs per repetition at most. */
#define MAX_RUNS 16
/* Rounds of the small body: a dependent multiply-xorshift chain, about 1.5 ns a round. */
#define SMALL_BODY_ROUNDS 200

/* ---- the shapes, as predecessor lists ---- */

typedef enum shape_kind { SHAPE_WIDE, SHAPE_CHAIN, SHAPE_TREE, SHAPE_WAVEFRONT } shape_kind;

typedef struct graph_shape {
    shape_kind kind;
    const char *name;
    char description[96];
    uint32_t tasks, edges, side; /* side: of the wavefront's square */
    /* the predecessors of task i: preds[pred_start[i] .. pred_start[i + 1]); every edge
       goes from a lower index to a higher one, so the index order is a topological one */
    uint32_t *pred_start, *preds;
} graph_shape;

static uint32_t shape_preds_of(const graph_shape *s, uint32_t i, uint32_t out[2]) {
    uint32_t n = 0;
    switch (s->kind) {
    case SHAPE_WIDE:
        break;
    case SHAPE_CHAIN:
        if (i) out[n++] = i - 1;
        break;
    case SHAPE_TREE:
        if (i) out[n++] = (i - 1) / 2; /* heap order: the children of k are 2k+1, 2k+2 */
        break;
    case SHAPE_WAVEFRONT:
        if (i >= s->side) out[n++] = i - s->side; /* (row - 1, col) */
        if (i % s->side) out[n++] = i - 1;        /* (row, col - 1) */
        break;
    }
    return n;
}

static void shape_init(graph_shape *s, shape_kind kind, uint32_t size) {
    uint32_t i, k, p[2];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    switch (kind) {
    case SHAPE_WIDE:
        s->name = "wide";
        s->tasks = size;
        snprintf(s->description, sizeof s->description, "%u independent tasks", size);
        break;
    case SHAPE_CHAIN:
        s->name = "chain";
        s->tasks = size;
        snprintf(s->description, sizeof s->description, "%u tasks in sequence", size);
        break;
    case SHAPE_TREE: /* size: the depth */
        s->name = "tree";
        s->tasks = (1u << size) - 1;
        snprintf(s->description, sizeof s->description,
                 "complete binary tree of depth %u, parent before children", size);
        break;
    case SHAPE_WAVEFRONT: /* size: the side */
        s->name = "wavefront";
        s->side = size;
        s->tasks = size * size;
        snprintf(s->description, sizeof s->description,
                 "%u x %u grid, (i,j) after (i-1,j) and (i,j-1)", size, size);
        break;
    }
    s->pred_start = (uint32_t *)malloc(((size_t)s->tasks + 1) * sizeof *s->pred_start);
    s->preds = (uint32_t *)malloc(2 * (size_t)s->tasks * sizeof *s->preds + 1);
    if (!s->pred_start || !s->preds) bench_fail("out of memory for the shape %s", s->name);
    for (i = 0; i < s->tasks; i++) {
        uint32_t n = shape_preds_of(s, i, p);
        s->pred_start[i] = s->edges;
        for (k = 0; k < n; k++) s->preds[s->edges++] = p[k];
    }
    s->pred_start[s->tasks] = s->edges;
}

static void shape_free(graph_shape *s) {
    free(s->pred_start);
    free(s->preds);
}

/* ---- the task body, shared by every candidate ---- */

/* A cache line per task: tasks that run at once on different threads do not share one. */
#define SLOT_SIZE 64

typedef struct task_slot {
    _Alignas(SLOT_SIZE) atomic_uint executions; /* bodies run since the slots were cleared */
    uint64_t sum;                               /* what the small body accumulates */
} task_slot;

/* The run in progress; set by the main thread before it starts the run. */
static struct {
    const graph_shape *shape;
    task_slot *slots;
    unsigned run; /* its number: 1 for the first run after the slots were cleared */
    int small_body;
    atomic_ulong repeated;     /* bodies that found themselves already run in this run */
    atomic_ulong out_of_order; /* predecessors found not yet run */
} cur;

static uint64_t small_body(uint64_t x) {
    int round;
    for (round = 0; round < SMALL_BODY_ROUNDS; round++) {
        x ^= x >> 31;
        x *= UINT64_C(0x9e3779b97f4a7c15);
        x ^= x >> 29;
    }
    return x;
}

/* The body of task `index`, called by every candidate (not inlined into any of them).
   Relaxed accesses suffice: the graph's edges order a task after its predecessors. */
BENCH_NOINLINE void bench_graph_task(uint32_t index);
BENCH_NOINLINE void bench_graph_task(uint32_t index) {
    const graph_shape *s = cur.shape;
    task_slot *slot = &cur.slots[index];
    unsigned run = cur.run;
    uint32_t k;
    if (atomic_load_explicit(&slot->executions, memory_order_relaxed) != run - 1)
        atomic_fetch_add_explicit(&cur.repeated, 1, memory_order_relaxed);
    for (k = s->pred_start[index]; k < s->pred_start[index + 1]; k++)
        if (atomic_load_explicit(&cur.slots[s->preds[k]].executions, memory_order_relaxed) != run)
            atomic_fetch_add_explicit(&cur.out_of_order, 1, memory_order_relaxed);
    if (cur.small_body) slot->sum += small_body((uint64_t)index << 32 | run);
    atomic_store_explicit(&slot->executions, run, memory_order_relaxed);
}

/* Starts counting anew: before a candidate's new graph runs for the first time. */
static void clear_slots(void) {
    memset(cur.slots, 0, cur.shape->tasks * sizeof *cur.slots);
    cur.run = 0;
    atomic_store(&cur.repeated, 0);
    atomic_store(&cur.out_of_order, 0);
}

/* After a run: every body ran exactly once in it, after its predecessors. */
static void check_run(const char *who) {
    uint32_t i;
    unsigned long repeated = atomic_load(&cur.repeated);
    unsigned long out_of_order = atomic_load(&cur.out_of_order);
    if (repeated || out_of_order)
        bench_fail("%s, %s: run %u: %lu task(s) ran twice, %lu predecessor(s) had not run", who,
                   cur.shape->name, cur.run, repeated, out_of_order);
    for (i = 0; i < cur.shape->tasks; i++) {
        unsigned n = atomic_load_explicit(&cur.slots[i].executions, memory_order_relaxed);
        if (n != cur.run)
            bench_fail("%s, %s: task %u ran %u time(s) in %u run(s)", who, cur.shape->name, i, n,
                       cur.run);
    }
}

/* ---- candidates ---- */

typedef struct graph_candidate {
    const char *name;
    void *(*build)(const graph_shape *s);
    void (*run)(void *graph); /* one run; fails the benchmark when the library reports one */
    void (*destroy)(void *graph);
    double build_samples[BENCH_MAX_REPS];
    double run_samples[BENCH_MAX_REPS * MAX_RUNS];
    int n_build, n_run;
    double build_median, run_median;
} graph_candidate;

static fsched_sched *sched;       /* `workers` worker threads; the main thread outside */
static fsched_sched *sched_bound; /* `workers` - 1 worker threads and the main thread */
static int workers;

static int fs_task(fsched_graph_task *self, void *index) {
    (void)self;
    bench_graph_task((uint32_t)(uintptr_t)index);
    return 0;
}

static void *fs_build(const graph_shape *s) {
    fsched_graph *g;
    fsched_graph_task **handles;
    fsched_result r;
    uint32_t i, k;
    handles = (fsched_graph_task **)malloc(s->tasks * sizeof *handles);
    if (!handles) bench_fail("out of memory");
    if ((r = fsched_graph_create(NULL, &g)) != FSCHED_OK)
        bench_fail("fsched_graph_create: %s", fsched_result_string(r));
    for (i = 0; i < s->tasks; i++)
        if ((r = fsched_graph_add(g, fs_task, (void *)(uintptr_t)i, NULL, &handles[i])) != FSCHED_OK)
            bench_fail("fsched_graph_add: %s", fsched_result_string(r));
    for (i = 0; i < s->tasks; i++)
        for (k = s->pred_start[i]; k < s->pred_start[i + 1]; k++)
            if ((r = fsched_graph_precede(g, handles[s->preds[k]], handles[i])) != FSCHED_OK)
                bench_fail("fsched_graph_precede: %s", fsched_result_string(r));
    free(handles);
    return g;
}

static void fs_run(void *graph) {
    fsched_graph *g = (fsched_graph *)graph;
    fsched_graph_outcome outcome;
    fsched_result r = fsched_graph_run(g, sched);
    if (r != FSCHED_OK) bench_fail("fsched_graph_run: %s", fsched_result_string(r));
    r = fsched_graph_wait(g, &outcome);
    if (r != FSCHED_OK || outcome.finished != cur.shape->tasks)
        bench_fail("fsched_graph_wait: %s, %zu of %u tasks finished", fsched_result_string(r),
                   outcome.finished, cur.shape->tasks);
}

/* The same run with the main thread bound to sched_bound for its duration. */
static void fs_run_bound(void *graph) {
    fsched_graph *g = (fsched_graph *)graph;
    fsched_graph_outcome outcome;
    fsched_result r = fsched_bind(sched_bound);
    if (r != FSCHED_OK) bench_fail("fsched_bind: %s", fsched_result_string(r));
    if ((r = fsched_graph_run(g, sched_bound)) != FSCHED_OK)
        bench_fail("fsched_graph_run: %s", fsched_result_string(r));
    r = fsched_graph_wait(g, &outcome);
    if (r != FSCHED_OK || outcome.finished != cur.shape->tasks)
        bench_fail("fsched_graph_wait: %s, %zu of %u tasks finished", fsched_result_string(r),
                   outcome.finished, cur.shape->tasks);
    if ((r = fsched_unbind()) != FSCHED_OK)
        bench_fail("fsched_unbind: %s", fsched_result_string(r));
}

static void fs_destroy(void *graph) {
    fsched_result r = fsched_graph_destroy((fsched_graph *)graph);
    if (r != FSCHED_OK) bench_fail("fsched_graph_destroy: %s", fsched_result_string(r));
}

#if defined(FSCHED_BENCH_TBB)
static void *tbb_build(const graph_shape *s) {
    return bench_graph_tbb_build(s->tasks, s->pred_start, s->preds, workers);
}
static void tbb_run(void *graph) { bench_graph_tbb_run(graph, workers); }
static void tbb_destroy(void *graph) { bench_graph_tbb_destroy(graph); }
#endif

/* One repetition of a candidate: build, a warm-up run, `runs` timed runs, destroy. */
static void measure(graph_candidate *c, int runs) {
    void *g;
    double t0;
    int i;
    clear_slots();
    t0 = bench_now();
    g = c->build(cur.shape);
    c->build_samples[c->n_build++] = bench_now() - t0;
    for (i = 0; i <= runs; i++) {
        cur.run++;
        t0 = bench_now();
        c->run(g);
        if (i > 0) c->run_samples[c->n_run++] = bench_now() - t0;
        check_run(c->name);
    }
    c->destroy(g);
}

/* The bodies alone, in index order on this thread: median of a few passes, in seconds. */
static double serial_bodies(void) {
    double samples[5];
    uint32_t i;
    int pass;
    clear_slots();
    for (pass = 0; pass < 5; pass++) {
        double t0 = bench_now();
        cur.run++;
        for (i = 0; i < cur.shape->tasks; i++) bench_graph_task(i);
        samples[pass] = bench_now() - t0;
        check_run("serial");
    }
    return bench_median(samples, 5);
}

static const char *ratio(char *buf, size_t size, double a, double b) {
    if (b > 0) snprintf(buf, size, "%.2fx", a / b);
    else snprintf(buf, size, "-");
    return buf;
}

/* ---- re-running after a run added tasks ----
   A graph of RERUN_TASKS tasks with cost hints, each before two tasks added earlier
   (picked at random: the order of adding is not the order of running), one of which adds
   RERUN_ADDED tasks while it runs, each after a task that finished before. The first run of a freshly built graph is timed, then the second,
   which must first undo the additions (and, were it done naively, rank the graph anew).
   Reported: the median of each over the repetitions, per task run. */

#define RERUN_TASKS 20000u
#define RERUN_ADDED 1000u

typedef struct rerun_graph {
    fsched_graph *g;
    fsched_graph_task **handles;
    atomic_ulong ran;
} rerun_graph;

static rerun_graph rerun;

static int rerun_body(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    atomic_fetch_add_explicit(&rerun.ran, 1, memory_order_relaxed);
    return 0;
}

/* The last task's successor: adds RERUN_ADDED tasks, each after the last task, which
   has finished. */
static int rerun_adder(fsched_graph_task *self, void *arg) {
    fsched_graph *g = fsched_graph_task_graph(self);
    fsched_graph_task_desc td;
    uint32_t i;
    (void)arg;
    memset(&td, 0, sizeof td);
    td.cost = 3;
    for (i = 0; i < RERUN_ADDED; i++) {
        fsched_graph_task *t;
        fsched_result r = fsched_graph_add(g, rerun_body, NULL, &td, &t);
        if (r == FSCHED_OK) r = fsched_graph_precede(g, rerun.handles[RERUN_TASKS - 1], t);
        if (r != FSCHED_OK) bench_fail("adding while running: %s", fsched_result_string(r));
    }
    atomic_fetch_add_explicit(&rerun.ran, 1, memory_order_relaxed);
    return 0;
}

static void rerun_build(void) {
    fsched_graph_task_desc td;
    fsched_result r;
    uint64_t seed = 42;
    uint32_t i;
    rerun.handles = (fsched_graph_task **)malloc(RERUN_TASKS * sizeof *rerun.handles);
    if (!rerun.handles) bench_fail("out of memory");
    if ((r = fsched_graph_create(NULL, &rerun.g)) != FSCHED_OK)
        bench_fail("fsched_graph_create: %s", fsched_result_string(r));
    memset(&td, 0, sizeof td);
    for (i = 0; i < RERUN_TASKS; i++) {
        td.cost = 1 + i % 7;
        r = fsched_graph_add(rerun.g, i == RERUN_TASKS - 2 ? rerun_adder : rerun_body, NULL,
                             &td, &rerun.handles[i]);
        if (r != FSCHED_OK) bench_fail("fsched_graph_add: %s", fsched_result_string(r));
    }
    r = fsched_graph_precede(rerun.g, rerun.handles[RERUN_TASKS - 1],
                             rerun.handles[RERUN_TASKS - 2]);
    if (r != FSCHED_OK) bench_fail("fsched_graph_precede: %s", fsched_result_string(r));
    for (i = 1; i < RERUN_TASKS - 2; i++) {
        uint32_t k;
        for (k = 0; k < 2; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            r = fsched_graph_precede(rerun.g, rerun.handles[i], rerun.handles[(seed >> 33) % i]);
            if (r != FSCHED_OK) bench_fail("fsched_graph_precede: %s", fsched_result_string(r));
        }
    }
}

static double rerun_once(void) {
    fsched_graph_outcome o;
    double t0 = bench_now();
    fsched_result r;
    atomic_store(&rerun.ran, 0);
    if ((r = fsched_graph_run(rerun.g, sched)) != FSCHED_OK)
        bench_fail("fsched_graph_run: %s", fsched_result_string(r));
    r = fsched_graph_wait(rerun.g, &o);
    t0 = bench_now() - t0;
    if (r != FSCHED_OK || o.finished != RERUN_TASKS + RERUN_ADDED ||
        atomic_load(&rerun.ran) != RERUN_TASKS + RERUN_ADDED)
        bench_fail("re-run graph: %s, %zu tasks finished", fsched_result_string(r), o.finished);
    return t0;
}

/* Returns the re-run's time per task over the first run's. */
static double rerun_measure(int reps) {
    double first[BENCH_MAX_REPS], second[BENCH_MAX_REPS], f, s2;
    int rep;
    for (rep = 0; rep < reps; rep++) {
        bench_sleep_ms(20);
        rerun_build();
        first[rep] = rerun_once();
        second[rep] = rerun_once();
        fs_destroy(rerun.g);
        free(rerun.handles);
    }
    f = bench_median(first, reps);
    s2 = bench_median(second, reps);
    printf("re-running a graph of %u tasks with cost hints, one of which adds %u tasks while "
           "it runs (fibersched, main thread outside; median of %d)\n\n", RERUN_TASKS,
           RERUN_ADDED, reps);
    printf("| %-40s | %9s | %13s |\n", "run", "ms", "ns/task");
    printf("|------------------------------------------|-----------|---------------|\n");
    printf("| %-40s | %9.2f | %13.1f |\n", "first run of the built graph", f * 1e3,
           f * 1e9 / (RERUN_TASKS + RERUN_ADDED));
    printf("| %-40s | %9.2f | %13.1f |\n\n", "second run (the additions undone first)",
           s2 * 1e3, s2 * 1e9 / (RERUN_TASKS + RERUN_ADDED));
    return s2 / f;
}

/* ---- the tables ---- */

#define MAX_RESULTS 8

typedef struct target_line {
    const char *shape, *body;
    double fs_run, tbb_run, fs_build, tbb_build; /* medians; tbb 0 when not measured */
} target_line;

/* Every shape in one table, fibersched (the bound main thread) against oneTBB. */
static void print_summary(const target_line *t, int n) {
    char b[16];
    int i;
    printf("summary: every shape, run and build medians, fibersched's bound main thread "
           "against oneTBB\n\n");
    printf("| %-16s | %17s | %13s | %19s | %19s | %15s |\n", "shape, body", "fibersched run ms",
           "oneTBB run ms", "fibersched / oneTBB", "fibersched build ms", "oneTBB build ms");
    printf("|------------------|-------------------|---------------|---------------------|"
           "---------------------|-----------------|\n");
    for (i = 0; i < n; i++) {
        char name[32], tbb_run[16] = "-", tbb_build[16] = "-";
        snprintf(name, sizeof name, "%s, %s", t[i].shape, t[i].body);
        if (t[i].tbb_run > 0) {
            snprintf(tbb_run, sizeof tbb_run, "%.2f", t[i].tbb_run * 1e3);
            snprintf(tbb_build, sizeof tbb_build, "%.2f", t[i].tbb_build * 1e3);
        }
        printf("| %-16s | %17.2f | %13s | %19s | %19.2f | %15s |\n", name, t[i].fs_run * 1e3,
               tbb_run, ratio(b, sizeof b, t[i].fs_run, t[i].tbb_run), t[i].fs_build * 1e3,
               tbb_build);
    }
    printf("\n");
}

int main(int argc, char **argv) {
    int quick = bench_quick(argc, argv);
    int reps = bench_reps(argc, argv, quick ? 3 : 7);
    int runs = (int)bench_option(argc, argv, "--runs=", quick ? 3 : 5);
    shape_kind kinds[4] = {SHAPE_WIDE, SHAPE_CHAIN, SHAPE_TREE, SHAPE_WAVEFRONT};
    uint32_t sizes[4];
    target_line targets[MAX_RESULTS];
    int n_targets = 0, kind, body, i, r, nc;
    graph_candidate c[3];
    fsched_desc d;
    fsched_result res;
    char b1[16], b2[16];
    double rerun_ratio;

    workers = (int)bench_option(argc, argv, "--workers=", bench_cpu_count());
    if (workers < 1) bench_fail("--workers must be at least 1");
    if (runs < 1) runs = 1;
    if (runs > MAX_RUNS) runs = MAX_RUNS;
    sizes[0] = quick ? 10000 : 100000; /* wide: tasks */
    sizes[1] = quick ? 10000 : 100000; /* chain: tasks */
    sizes[2] = quick ? 13 : 17;        /* tree: depth */
    sizes[3] = quick ? 100 : 316;      /* wavefront: side */
    memset(&d, 0, sizeof d);
    d.workers = (uint32_t)workers;
    res = fsched_create(&d, &sched);
    if (res != FSCHED_OK) bench_fail("fsched_create: %s", fsched_result_string(res));
    d.workers = (uint32_t)workers - 1;
    d.single_threaded = workers == 1; /* the main thread alone */
    res = fsched_create(&d, &sched_bound);
    if (res != FSCHED_OK) bench_fail("fsched_create: %s", fsched_result_string(res));
    printf("dependency graphs: %d worker(s) for every candidate; build: median of %d "
           "repetitions; run: median of %d runs (%d per repetition, after a warm-up run)\n\n",
           workers, reps, reps * runs, runs);

    for (kind = 0; kind < 4; kind++) {
        graph_shape shape;
        shape_init(&shape, kinds[kind], sizes[kind]);
        cur.shape = &shape;
        cur.slots = (task_slot *)aligned_alloc(SLOT_SIZE, shape.tasks * sizeof *cur.slots);
        if (!cur.slots) bench_fail("out of memory");
        for (body = 0; body < 2; body++) {
            double serial;
            cur.small_body = body;
            serial = serial_bodies();
            memset(c, 0, sizeof c);
            nc = 0;
            c[nc].name = "fibersched: bound main thread";
            c[nc].build = fs_build;
            c[nc].run = fs_run_bound;
            c[nc++].destroy = fs_destroy;
            c[nc].name = "fibersched: main thread outside";
            c[nc].build = fs_build;
            c[nc].run = fs_run;
            c[nc++].destroy = fs_destroy;
#if defined(FSCHED_BENCH_TBB)
            c[nc].name = "oneTBB: flow::graph continue_node";
            c[nc].build = tbb_build;
            c[nc].run = tbb_run;
            c[nc++].destroy = tbb_destroy;
#endif
            for (r = 0; r < reps; r++)
                for (i = 0; i < nc; i++) {
                    bench_sleep_ms(20);
                    measure(&c[(i + r) % nc], runs); /* rotate the order */
                }
            for (i = 0; i < nc; i++) {
                c[i].build_median = bench_median(c[i].build_samples, c[i].n_build);
                c[i].run_median = bench_median(c[i].run_samples, c[i].n_run);
            }

            printf("%s, %s body: %s (%u tasks, %u edges); the bodies alone, serially: "
                   "%.2f ms (%.0f ns/task)\n\n", shape.name, body ? "small" : "empty",
                   shape.description, shape.tasks, shape.edges, serial * 1e3,
                   serial * 1e9 / shape.tasks);
            printf("| %-34s | %9s | %9s | %13s | %19s | %17s |\n", "candidate", "build ms",
                   "run ms", "ns/task (run)", "build vs fibersched", "run vs fibersched");
            printf("|%s|%s|%s|%s|%s|%s|\n", "------------------------------------",
                   "-----------", "-----------", "---------------", "---------------------",
                   "-------------------");
            for (i = 0; i < nc; i++)
                printf("| %-34s | %9.2f | %9.2f | %13.1f | %19s | %17s |\n", c[i].name,
                       c[i].build_median * 1e3, c[i].run_median * 1e3,
                       c[i].run_median * 1e9 / shape.tasks,
                       ratio(b1, sizeof b1, c[i].build_median, c[0].build_median),
                       ratio(b2, sizeof b2, c[i].run_median, c[0].run_median));
            printf("\n");
            targets[n_targets].shape = shape.name;
            targets[n_targets].body = body ? "small" : "empty";
            targets[n_targets].fs_run = c[0].run_median;
            targets[n_targets].fs_build = c[0].build_median;
            targets[n_targets].tbb_build = nc > 2 ? c[2].build_median : 0;
            targets[n_targets++].tbb_run = nc > 2 ? c[2].run_median : 0;
        }
        free(cur.slots);
        shape_free(&shape);
    }

    print_summary(targets, n_targets);
    rerun_ratio = rerun_measure(reps);
    bench_quick_note(quick);
    bench_target("fibersched re-run after additions / first run, per task", rerun_ratio, "<=",
                 1.5, "x");
    for (i = 0; i < n_targets; i++) {
        char what[128];
        snprintf(what, sizeof what, "fibersched / oneTBB build, %s, %s, %d worker(s)",
                 targets[i].shape, targets[i].body, workers);
        if (targets[i].tbb_build > 0)
            bench_target(what, targets[i].fs_build / targets[i].tbb_build, "<=", 1, "x");
        else
            printf("target: %s: not measured (oneTBB not available)\n", what);
    }
    for (i = 0; i < n_targets; i++) {
        char what[128];
        snprintf(what, sizeof what,
                 "fibersched (bound main thread) / oneTBB run, %s, %s, %d worker(s)",
                 targets[i].shape, targets[i].body, workers);
        if (targets[i].tbb_run > 0)
            bench_target(what, targets[i].fs_run / targets[i].tbb_run, "<=", 0.9, "x");
        else
            printf("target: %s: not measured (oneTBB not available)\n", what);
    }
    fsched_destroy(sched);
    fsched_destroy(sched_bound);
    return 0;
}
