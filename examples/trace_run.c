/* Tracing a run: a small mixed workload on two workers, recorded with FIBERSCHED_TRACE
   and written as Chrome trace-event JSON (open it in https://ui.perfetto.dev, or turn it
   into a text summary and an SVG timeline with tools/trace_summary.py).

   What runs, in two phases of a few tens of milliseconds each:
   - a parallel loop (fsched_parallel_for) that hashes an array; the pieces other workers
     take show up as spans of its body, hash_range (of the kind "join");
   - three consumers that wait on an event a producer sets after a sleep: their fibers
     show up as "blocked", while the workers run other tasks;
   - a dependency graph of named tasks (a fetch that sleeps, two parses, a link), whose
     spans carry the task names;
   - then, alone, a fork-join recursion (fsched_join) computing a Fibonacci number, whose
     halves the other worker steals (steal marks and spans of fib, of the kind "join").

   The program prints how many events were recorded and how many were dropped (a slot
   keeps its first desc.trace_events events).

   Build: cc -O2 -pthread examples/trace_run.c -o trace_run
   Run:   ./trace_run [trace.json]
          python3 tools/trace_summary.py trace.json --svg trace.svg --exe ./trace_run */
#define FIBERSCHED_TRACE 1
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define ITEMS (1u << 20)
#define FIB_N 35
#define FIB_SERIAL 20 /* below this the recursion is not worth offering to other workers */
#define CONSUMERS 3

static atomic_int failures; /* any failed call, in any task */

static void check(fsched_result r, const char *what) {
    if (r != FSCHED_OK) {
        fprintf(stderr, "%s: %s\n", what, fsched_result_string(r));
        atomic_fetch_add(&failures, 1);
    }
}

/* A few rounds of an integer mixer: enough arithmetic per item that the loop is visible
   in the trace, and a value that a serial pass can check. */
static uint64_t mix(uint64_t x) {
    int round;
    for (round = 0; round < 16; round++) {
        x ^= x >> 31;
        x *= 0x9e3779b97f4a7c15ull;
        x ^= x >> 29;
    }
    return x;
}

/* ---- the parallel loop ---- */

typedef struct loop_ctx {
    uint64_t *out;
} loop_ctx;

static void hash_range(void *ctx, size_t lo, size_t hi) {
    loop_ctx *c = (loop_ctx *)ctx;
    size_t i;
    for (i = lo; i < hi; i++) c->out[i] = mix(i);
}

static void loop_root(void *arg) {
    check(fsched_parallel_for(0, ITEMS, 4096, hash_range, arg), "fsched_parallel_for");
}

/* ---- the fork-join recursion ---- */

typedef struct fib_arg {
    int n;
    long result;
} fib_arg;

static long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

static void fib(void *arg) {
    fib_arg *f = (fib_arg *)arg;
    fib_arg a, b;
    if (f->n < FIB_SERIAL) {
        f->result = fib_serial(f->n);
        return;
    }
    a.n = f->n - 1;
    b.n = f->n - 2;
    a.result = b.result = 0;
    check(fsched_join(fib, &a, fib, &b), "fsched_join");
    f->result = a.result + b.result;
}

/* ---- an event the consumers wait on ---- */

typedef struct gate {
    fsched_event ready;
    uint64_t value; /* written before the event is set */
    uint64_t seen[CONSUMERS];
} gate;

typedef struct consumer_arg {
    gate *g;
    int index;
} consumer_arg;

static void producer(void *arg) {
    gate *g = (gate *)arg;
    fsched_sleep_for(15000000); /* 15 ms: stands in for waiting on a device */
    g->value = mix(42);
    check(fsched_event_set(&g->ready), "fsched_event_set");
}

static void consumer(void *arg) {
    consumer_arg *c = (consumer_arg *)arg;
    uint64_t x;
    int i;
    /* waiting suspends this fiber only: the worker runs other tasks meanwhile */
    check(fsched_event_wait(&c->g->ready), "fsched_event_wait");
    x = c->g->value;
    for (i = 0; i < 20000; i++) x = mix(x + (uint64_t)c->index);
    c->g->seen[c->index] = x;
}

/* ---- a graph of named tasks ---- */

static int fetch(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    fsched_sleep_for(10000000); /* 10 ms: stands in for a download */
    return 0;
}

static int parse(fsched_graph_task *self, void *arg) {
    uint64_t x = (uint64_t)(uintptr_t)arg;
    int i;
    (void)self;
    for (i = 0; i < 30000; i++) x = mix(x);
    return x == 0; /* never: mix has no fixed point at 0 from these seeds */
}

static int link_step(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    fsched_sleep_for(2000000);
    return 0;
}

static fsched_graph_task *add_task(fsched_graph *g, fsched_graph_fn fn, void *arg,
                                   const char *name) {
    fsched_graph_task_desc d = {0};
    fsched_graph_task *t = NULL;
    d.name = name;
    check(fsched_graph_add(g, fn, arg, &d, &t), "fsched_graph_add");
    return t;
}

static fsched_graph *build_graph(void) {
    fsched_graph *g = NULL;
    fsched_graph_task *get, *pa, *pb, *ln;
    check(fsched_graph_create(NULL, &g), "fsched_graph_create");
    if (!g) return NULL;
    get = add_task(g, fetch, NULL, "fetch");
    pa = add_task(g, parse, (void *)(uintptr_t)1, "parse a");
    pb = add_task(g, parse, (void *)(uintptr_t)2, "parse b");
    ln = add_task(g, link_step, NULL, "link");
    if (!get || !pa || !pb || !ln) return g;
    check(fsched_graph_precede(g, get, pa), "fsched_graph_precede");
    check(fsched_graph_precede(g, get, pb), "fsched_graph_precede");
    check(fsched_graph_precede(g, pa, ln), "fsched_graph_precede");
    check(fsched_graph_precede(g, pb, ln), "fsched_graph_precede");
    return g;
}

/* ---- writing the trace ---- */

static void to_file(const char *text, size_t len, void *file) {
    if (fwrite(text, 1, len, (FILE *)file) != len) atomic_fetch_add(&failures, 1);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "trace.json";
    fsched_desc desc = {0};
    fsched_sched *s = NULL;
    fsched_wait_group wg;
    fsched_graph *g;
    fsched_graph_outcome outcome;
    loop_ctx loop;
    fib_arg f = {FIB_N, 0};
    gate gt;
    consumer_arg consumers[CONSUMERS];
    uint64_t recorded = 0, dropped = 0;
    size_t i;
    int k;
    FILE *out;

    desc.workers = 2;
    check(fsched_create(&desc, &s), "fsched_create");
    if (!s) return 1;
    loop.out = (uint64_t *)malloc(ITEMS * sizeof *loop.out);
    if (!loop.out) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    check(fsched_event_init(&gt.ready, 1, 0), "fsched_event_init");
    check(fsched_wait_group_init(&wg), "fsched_wait_group_init");
    g = build_graph();

    /* First phase: the loop, the waiters and the graph at once, so that the timeline
       shows blocked fibers while their workers run other tasks. */
    check(fsched_wait_group_spawn(&wg, s, loop_root, &loop), "spawn loop");
    for (k = 0; k < CONSUMERS; k++) {
        consumers[k].g = &gt;
        consumers[k].index = k;
        check(fsched_wait_group_spawn(&wg, s, consumer, &consumers[k]), "spawn consumer");
    }
    check(fsched_wait_group_spawn(&wg, s, producer, &gt), "spawn producer");
    if (g) check(fsched_graph_run(g, s), "fsched_graph_run");

    check(fsched_wait_group_wait(&wg), "fsched_wait_group_wait");
    if (g) {
        check(fsched_graph_wait(g, &outcome), "fsched_graph_wait");
        check(fsched_graph_destroy(g), "fsched_graph_destroy");
    }

    /* Second phase: the recursion alone, so that the idle worker steals join halves. */
    check(fsched_wait_group_spawn(&wg, s, fib, &f), "spawn fib");
    check(fsched_wait_group_wait(&wg), "fsched_wait_group_wait");

    /* The results, checked serially (after the trace's work, so not in it twice). */
    if (f.result != 9227465) {
        fprintf(stderr, "fib(%d) = %ld, expected 9227465\n", FIB_N, f.result);
        atomic_fetch_add(&failures, 1);
    }
    for (i = 0; i < ITEMS; i++)
        if (loop.out[i] != mix(i)) {
            fprintf(stderr, "item %zu hashed wrongly\n", i);
            atomic_fetch_add(&failures, 1);
            break;
        }
    for (k = 0; k < CONSUMERS; k++)
        if (gt.seen[k] == 0) {
            fprintf(stderr, "consumer %d saw nothing\n", k);
            atomic_fetch_add(&failures, 1);
        }

    out = fopen(path, "w");
    if (!out) {
        perror(path);
        atomic_fetch_add(&failures, 1);
    } else {
        check(fsched_trace_write_json(s, to_file, out), "fsched_trace_write_json");
        if (fclose(out) != 0) atomic_fetch_add(&failures, 1);
    }
    check(fsched_trace_count(s, &recorded, &dropped), "fsched_trace_count");
    printf("%s: %llu events recorded, %llu dropped\n", path, (unsigned long long)recorded,
           (unsigned long long)dropped);

    check(fsched_wait_group_destroy(&wg), "fsched_wait_group_destroy");
    check(fsched_event_destroy(&gt.ready), "fsched_event_destroy");
    check(fsched_destroy(s), "fsched_destroy");
    free(loop.out);
    return atomic_load(&failures) ? 1 : 0;
}
