/* Dependency graphs: random graphs of thousands of tasks with random edges, run on many
   workers and checked for every task running exactly once and never before any of its
   predecessors finished, with results passed along intact; failures injected at random
   tasks mark exactly the tasks downstream of them; fail-fast and cancellation stop what
   has not started; worker sets and the caller's thread are respected; priorities and
   cost hints order ready tasks; running tasks add tasks and edges; graphs are run again
   and composed; edges that would close a cycle are refused (checked against a plain
   search); results are released exactly once; bad input and failing allocations return
   error codes.

   Built with FIBERSCHED_NO_THREADS, the parts that need threads are left out and the
   main thread binds to the scheduler, so that its waits run the tasks. */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <stdint.h>
#if defined(__NEWLIB__)
#include <malloc.h> /* memalign */
#endif

#define MS 1000000ull



static uint64_t mix(uint64_t x) {
    uint64_t state = x;
    return test_rng(&state);
}


static fsched_graph *graph_new(fsched_graph_policy policy) {
    fsched_graph_desc d;
    fsched_graph *g;
    memset(&d, 0, sizeof d);
    d.on_failure = policy;
    d.name = "test";
    CHECK_OK(fsched_graph_create(&d, &g));
    return g;
}

/* ---- a random graph, and what running it must produce ---- */

typedef struct node node;
typedef struct rgraph {
    fsched_graph *g;
    uint32_t n;
    node *nodes;
    uint32_t *topo;     /* the ids in an order where every edge goes forward */
    uint32_t run;       /* the number of the current run, 1.. */
    uint64_t cancel_at; /* a task with id cancel_at - 1 cancels the run (0: none) */
} rgraph;

typedef struct id_list {
    uint32_t *v;
    uint32_t n, cap;
} id_list;

static void id_list_add(id_list *l, uint32_t id) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 4;
        CHECK((l->v = (uint32_t *)realloc(l->v, l->cap * sizeof *l->v)) != NULL);
    }
    l->v[l->n++] = id;
}

struct node {
    rgraph *rg;
    fsched_graph_task *t;
    uint32_t id;
    id_list succ, preds;  /* the edges the graph accepted, preds in the order added */
    uint32_t runs;        /* atomic: how many times the body ran */
    uint32_t done_in_run; /* atomic: the run in which the body finished */
    int fail_with;        /* nonzero: the body returns this */
    uint32_t sleep_us;    /* the body sleeps this long (a blocking task) */
    uint64_t value;       /* what the body computed from its predecessors' results */
    uint8_t seen;         /* the test's own searches */
};

/* The value of a task: a hash of its id and of its predecessors' values, in edge order. */
static uint64_t node_value(uint32_t id, const uint64_t *preds, size_t n) {
    uint64_t v = mix(id + 1);
    size_t i;
    for (i = 0; i < n; i++) v = mix(v ^ preds[i]) + i;
    return v;
}

static void result_release(void *result, void *user) {
    (void)result;
    ADD((uint64_t *)user, 1);
}

static uint64_t released; /* results released, counted by result_release */

#define MAX_PREDS 64

static int node_body(fsched_graph_task *self, void *arg) {
    node *x = (node *)arg;
    rgraph *rg = x->rg;
    uint64_t pv[MAX_PREDS];
    size_t n = fsched_graph_pred_count(self), i;
    CHECK(ADD(&x->runs, 1) == rg->run); /* exactly once per run */
    CHECK(fsched_graph_task_state(self) == FSCHED_TASK_RUNNING);
    CHECK(n == x->preds.n && n <= MAX_PREDS);
    for (i = 0; i < n; i++) {
        fsched_graph_task *p = fsched_graph_pred(self, i);
        node *pn = &rg->nodes[x->preds.v[i]];
        CHECK(p == pn->t);
        /* never before a predecessor finished */
        CHECK(fsched_graph_task_state(p) == FSCHED_TASK_FINISHED);
        CHECK(LOAD(&pn->done_in_run) == rg->run);
        CHECK(fsched_graph_result(p) == (void *)&pn->value); /* intact */
        pv[i] = pn->value;
    }
    x->value = node_value(x->id, pv, n);
    CHECK_OK(fsched_graph_set_result(self, &x->value, result_release, &released));
    if (x->sleep_us) fsched_sleep_for(x->sleep_us * 1000ull);
    if (rg->cancel_at && x->id + 1 == rg->cancel_at) CHECK_OK(fsched_graph_cancel(rg->g));
    STORE(&x->done_in_run, rg->run);
    return x->fail_with;
}

static uint32_t refused_total; /* edges refused as closing a cycle, over all builds */

/* Whether `to` can be reached from `from` over the accepted edges. */
static int reaches(rgraph *rg, uint32_t from, uint32_t to) {
    uint32_t *stack = (uint32_t *)malloc(rg->n * sizeof *stack), top = 0, i;
    int found = 0;
    CHECK(stack != NULL);
    for (i = 0; i < rg->n; i++) rg->nodes[i].seen = 0;
    stack[top++] = from;
    rg->nodes[from].seen = 1;
    while (top && !found) {
        node *u = &rg->nodes[stack[--top]];
        if (u->id == to) found = 1;
        for (i = 0; i < u->succ.n; i++)
            if (!rg->nodes[u->succ.v[i]].seen) {
                rg->nodes[u->succ.v[i]].seen = 1;
                stack[top++] = u->succ.v[i];
            }
    }
    free(stack);
    return found;
}

static int has_edge(const rgraph *rg, uint32_t a, uint32_t b) {
    uint32_t i;
    for (i = 0; i < rg->nodes[a].succ.n; i++)
        if (rg->nodes[a].succ.v[i] == b) return 1;
    return 0;
}

/* Builds a random graph of n tasks with about `edges` edges, tried in random order and
   direction: most candidates follow a hidden random order (so most are accepted, and the
   graph's own order must be rearranged to fit them), the others go either way. The graph
   must refuse exactly the edges that close a cycle, which a plain search checks. */
static void rgraph_build_mixed(rgraph *rg, uint32_t n, uint32_t edges, uint64_t seed,
                               fsched_graph_policy policy, uint32_t free_one_in) {
    uint32_t *rank = (uint32_t *)malloc(n * sizeof *rank), *indeg, i, tries, added = 0,
             refused = 0, head = 0, tail = 0;
    CHECK(rank != NULL);
    memset(rg, 0, sizeof *rg);
    rg->g = graph_new(policy);
    rg->n = n;
    rg->nodes = (node *)calloc(n, sizeof *rg->nodes);
    rg->topo = (uint32_t *)malloc(n * sizeof *rg->topo);
    indeg = (uint32_t *)calloc(n, sizeof *indeg);
    CHECK(rg->nodes != NULL && rg->topo != NULL && indeg != NULL);
    for (i = 0; i < n; i++) { /* the hidden order: a random permutation */
        uint32_t j = (uint32_t)(test_rng(&seed) % (i + 1));
        rank[i] = rank[j];
        rank[j] = i;
    }
    for (i = 0; i < n; i++) {
        fsched_graph_task_desc td;
        char name[32];
        memset(&td, 0, sizeof td);
        snprintf(name, sizeof name, "n%u", (unsigned)i);
        td.name = name;
        rg->nodes[i].rg = rg;
        rg->nodes[i].id = i;
        CHECK_OK(fsched_graph_add(rg->g, node_body, &rg->nodes[i], &td, &rg->nodes[i].t));
    }
    for (tries = 0; added < edges && tries < edges * 4; tries++) {
        uint32_t a = (uint32_t)(test_rng(&seed) % n), b = (uint32_t)(test_rng(&seed) % n);
        int free_direction = test_rng(&seed) % free_one_in == 0, cycle;
        fsched_result r;
        if (!free_direction && rank[a] > rank[b]) {
            uint32_t x = a;
            a = b;
            b = x;
        }
        if (rg->nodes[b].preds.n == MAX_PREDS) continue;
        cycle = a == b || reaches(rg, b, a);
        r = fsched_graph_precede(rg->g, rg->nodes[a].t, rg->nodes[b].t);
        if (cycle) {
            CHECK_RESULT(r, FSCHED_ERR_INVALID_ARGUMENT);
            refused++;
        } else {
            CHECK_OK(r);
            if (!has_edge(rg, a, b)) {
                id_list_add(&rg->nodes[a].succ, b);
                id_list_add(&rg->nodes[b].preds, a);
                added++;
            }
        }
    }
    ADD(&refused_total, refused);
    /* a topological order of what was accepted (Kahn) */
    for (i = 0; i < n; i++) indeg[i] = rg->nodes[i].preds.n;
    for (i = 0; i < n; i++)
        if (!indeg[i]) rg->topo[tail++] = i;
    while (head < tail) {
        node *u = &rg->nodes[rg->topo[head++]];
        for (i = 0; i < u->succ.n; i++)
            if (--indeg[u->succ.v[i]] == 0) rg->topo[tail++] = u->succ.v[i];
    }
    CHECK(tail == n); /* acyclic */
    free(indeg);
    free(rank);
}

static void rgraph_build(rgraph *rg, uint32_t n, uint32_t edges, uint64_t seed,
                         fsched_graph_policy policy) {
    rgraph_build_mixed(rg, n, edges, seed, policy, 16);
}

static void rgraph_free(rgraph *rg) {
    uint32_t i;
    CHECK_OK(fsched_graph_destroy(rg->g));
    for (i = 0; i < rg->n; i++) {
        free(rg->nodes[i].succ.v);
        free(rg->nodes[i].preds.v);
    }
    free(rg->nodes);
    free(rg->topo);
}

/* Runs rg once on s and checks, against a serial evaluation: states (a task fails when it
   fails itself or a predecessor failed; downstream tasks never run), values, outcome. */
static void rgraph_run_and_check(rgraph *rg, fsched_sched *s) {
    fsched_graph_outcome o;
    uint8_t *failed = (uint8_t *)calloc(rg->n, 1);
    uint64_t *values = (uint64_t *)calloc(rg->n, sizeof *values);
    uint32_t i, k, nfailed = 0, any_failing = 0;
    CHECK(failed != NULL && values != NULL);
    rg->run++;
    for (i = 0; i < rg->n; i++) any_failing |= rg->nodes[i].fail_with != 0;
    CHECK_OK(fsched_graph_run(rg->g, s));
    fsched_graph_wait(rg->g, &o);
    for (k = 0; k < rg->n; k++) {
        uint32_t id = rg->topo[k];
        node *x = &rg->nodes[id];
        uint64_t pv[MAX_PREDS];
        fsched_task_state st = fsched_graph_task_state(x->t);
        int upstream = 0;
        for (i = 0; i < x->preds.n; i++) {
            upstream |= failed[x->preds.v[i]];
            pv[i] = values[x->preds.v[i]];
        }
        failed[id] = (uint8_t)(upstream ? 2 : x->fail_with ? 1 : 0); /* 1: failed itself */
        values[id] = node_value(id, pv, x->preds.n);
        if (failed[id]) {
            nfailed++;
            CHECK(st == FSCHED_TASK_FAILED);
            /* a task fails with its own status only when it ran */
            CHECK(fsched_graph_task_status(x->t) == (failed[id] == 1 ? x->fail_with : 0));
            if (failed[id] == 2) { /* downstream of a failure: never ran in this run */
                CHECK(LOAD(&x->runs) == rg->run - 1);
                x->runs = rg->run; /* keeps the per-run count aligned */
            }
        } else {
            CHECK(st == FSCHED_TASK_FINISHED);
            CHECK(LOAD(&x->runs) == rg->run);
            CHECK_EQ_U64(x->value, values[id]);
        }
    }
    if (nfailed) {
        CHECK_RESULT(o.result, FSCHED_ERR_TASK_FAILED);
        CHECK(o.failed != NULL);
        for (i = 0; i < rg->n && rg->nodes[i].t != o.failed; i++) {
        }
        CHECK(i < rg->n && failed[i] == 1 && o.status == rg->nodes[i].fail_with);
    } else {
        CHECK_OK(o.result);
        CHECK(o.failed == NULL && !any_failing);
    }
    CHECK_EQ_U64(o.finished, rg->n - nfailed);
    CHECK_EQ_U64(o.failed_count + o.skipped, nfailed);
    for (i = 0, k = 0; i < rg->n; i++) k += failed[i] == 1;
    CHECK_EQ_U64(o.failed_count, k);
    CHECK_EQ_U64(o.cancelled, 0);
    free(failed);
    free(values);
}

static void test_random_graphs(void) {
    fsched_sched *s = test_sched_new(4);
    uint32_t round;
    for (round = 0; round < 6; round++) {
        rgraph rg;
        uint32_t n = (round < 3 ? 3000u : 1500u) / TEST_SCALE, i, k;
        uint64_t seed = 1000 + round;
        rgraph_build(&rg, n, n * 2, seed, FSCHED_GRAPH_SKIP_DEPENDENTS);
        for (i = 0; i < n; i++)
            if (test_rng(&seed) % 50 == 0) rg.nodes[i].sleep_us = 50; /* a few block */
        rgraph_run_and_check(&rg, s);
        rgraph_run_and_check(&rg, s); /* run again, unchanged */
        for (k = 0; k < 3; k++) {     /* failures injected at random tasks */
            for (i = 0; i < n; i++) rg.nodes[i].fail_with = 0;
            for (i = 0; i < 1 + k * 3; i++) rg.nodes[test_rng(&seed) % n].fail_with = 7 + (int)i;
            rgraph_run_and_check(&rg, s);
        }
        for (i = 0; i < n; i++) rg.nodes[i].fail_with = 0;
        rgraph_run_and_check(&rg, s); /* and cleanly again */
        rgraph_free(&rg);
    }
    /* a dense graph whose edges go either way half of the time meets many cycles */
    STORE(&refused_total, 0);
    {
        rgraph rg;
        rgraph_build_mixed(&rg, 300, 1500, 42, FSCHED_GRAPH_SKIP_DEPENDENTS, 2);
        CHECK(LOAD(&refused_total) > 100);
        rgraph_run_and_check(&rg, s);
        rgraph_free(&rg);
    }
    test_sched_free(s);
}

/* ---- results are released exactly once ---- */

static void test_release(void) {
    fsched_sched *s = test_sched_new(2);
    rgraph rg;
    uint32_t i;
    rgraph_build(&rg, 200, 300, 77, FSCHED_GRAPH_SKIP_DEPENDENTS);
    STORE(&released, 0);
    rgraph_run_and_check(&rg, s);
    /* every result stays readable after the run */
    CHECK_EQ_U64(LOAD(&released), 0);
    for (i = 0; i < rg.n; i++) CHECK(fsched_graph_result(rg.nodes[i].t) == &rg.nodes[i].value);
    rgraph_run_and_check(&rg, s); /* released when the graph runs again */
    CHECK_EQ_U64(LOAD(&released), rg.n);
    rgraph_free(&rg); /* and the second run's with the graph */
    CHECK_EQ_U64(LOAD(&released), 2 * rg.n);
    test_sched_free(s);
}

/* ---- fail-fast and cancellation ---- */

typedef struct chain_ctx {
    uint32_t ran;        /* atomic */
    uint32_t saw_cancel; /* atomic */
    fsched_graph *g;
    int cancel_in_task;
} chain_ctx;

static int chain_link(fsched_graph_task *self, void *arg) {
    chain_ctx *c = (chain_ctx *)arg;
    uint32_t i;
    ADD(&c->ran, 1);
    for (i = 0; i < 20; i++) { /* a long-running task that notices cancellation */
        if (fsched_graph_is_cancelled(self)) {
            ADD(&c->saw_cancel, 1);
            break;
        }
        fsched_sleep_for(50000);
    }
    return 0;
}

static int failing_task(fsched_graph_task *self, void *arg) {
    (void)self;
    fsched_sleep_for(2 * MS);
    return (int)(intptr_t)arg;
}

static int cancelling_task(fsched_graph_task *self, void *arg) {
    (void)arg;
    fsched_sleep_for(2 * MS);
    CHECK_OK(fsched_graph_cancel(fsched_graph_task_graph(self)));
    CHECK(fsched_graph_is_cancelled(self));
    return 0;
}

/* A failing (or cancelling) task next to a long independent chain: the chain stops at
   once, its tasks not yet started are cancelled and never ran. */
static void stop_chain(fsched_sched *s, fsched_graph_policy policy, int cancel) {
    fsched_graph *g = graph_new(policy);
    fsched_graph_task *tasks[200], *trigger;
    fsched_graph_outcome o;
    chain_ctx c;
    uint32_t i, cancelled = 0, finished = 0;
    memset(&c, 0, sizeof c);
    for (i = 0; i < 200; i++) {
        CHECK_OK(fsched_graph_add(g, chain_link, &c, NULL, &tasks[i]));
        if (i) CHECK_OK(fsched_graph_precede(g, tasks[i - 1], tasks[i]));
    }
    CHECK_OK(fsched_graph_add(g, cancel ? cancelling_task : failing_task, (void *)(intptr_t)5,
                              NULL, &trigger));
    CHECK_OK(fsched_graph_run(g, s));
    fsched_graph_wait(g, &o);
    CHECK_RESULT(o.result, cancel ? FSCHED_ERR_CANCELLED : FSCHED_ERR_TASK_FAILED);
    if (!cancel) CHECK(o.failed == trigger && o.status == 5);
    for (i = 0; i < 200; i++) {
        fsched_task_state st = fsched_graph_task_state(tasks[i]);
        CHECK(st == FSCHED_TASK_FINISHED || st == FSCHED_TASK_CANCELLED);
        if (st == FSCHED_TASK_CANCELLED) cancelled++;
        else finished++;
        /* the chain is a prefix of finished tasks and a suffix of cancelled ones */
        CHECK(st == FSCHED_TASK_CANCELLED || cancelled == 0);
    }
    CHECK(cancelled > 100);
    CHECK_EQ_U64(LOAD(&c.ran), finished); /* cancelled tasks never ran */
    CHECK(LOAD(&c.saw_cancel) <= 1);
    CHECK_EQ_U64(o.cancelled, cancelled);
    CHECK_EQ_U64(o.finished, finished + (cancel ? 1u : 0u));
    CHECK_OK(fsched_graph_destroy(g));
}

static void test_fail_fast_and_cancel(void) {
    fsched_sched *s = test_sched_new(2);
    stop_chain(s, FSCHED_GRAPH_FAIL_FAST, 0);
    stop_chain(s, FSCHED_GRAPH_SKIP_DEPENDENTS, 1);
    stop_chain(s, FSCHED_GRAPH_FAIL_FAST, 1);
    test_sched_free(s);
}

/* Cancelling while a random graph runs, from one of its tasks and from the outside:
   every task either finished (and ran once) or was cancelled (and never ran); the run
   after is complete again. */
static void cancel_midway(fsched_sched *s, int from_task) {
    rgraph rg;
    fsched_graph_outcome o;
    uint32_t i, cancelled = 0;
    /* on a board, fewer: every sleeping task holds a fiber stack */
    rgraph_build(&rg, TEST_SCALE > 4 ? 40 : 600, TEST_SCALE > 4 ? 60 : 900, 5,
                 FSCHED_GRAPH_SKIP_DEPENDENTS);
    /* sleeping tasks suspend, so the run takes about its longest chain times 1 ms */
    for (i = 0; i < rg.n; i++) rg.nodes[i].sleep_us = 1000;
    rg.run = 1;
    if (from_task) rg.cancel_at = 1 + rg.topo[rg.n / 2];
    CHECK_OK(fsched_graph_run(rg.g, s));
    if (!from_task) {
        fsched_sleep_for(3 * MS);
        CHECK_OK(fsched_graph_cancel(rg.g));
    }
    CHECK_RESULT(fsched_graph_wait(rg.g, &o), FSCHED_ERR_CANCELLED);
    for (i = 0; i < rg.n; i++) {
        fsched_task_state st = fsched_graph_task_state(rg.nodes[i].t);
        if (st == FSCHED_TASK_CANCELLED) {
            cancelled++;
            CHECK_EQ_U64(LOAD(&rg.nodes[i].runs), 0);
            rg.nodes[i].runs = 1;
        } else {
            CHECK(st == FSCHED_TASK_FINISHED);
            CHECK_EQ_U64(LOAD(&rg.nodes[i].runs), 1);
        }
    }
    CHECK(cancelled > 0 && cancelled == o.cancelled);
    rg.cancel_at = 0;
    for (i = 0; i < rg.n; i++) rg.nodes[i].sleep_us = 0;
    rgraph_run_and_check(&rg, s);
    rgraph_free(&rg);
}

static void test_cancel_midway(void) {
    fsched_sched *s = test_sched_new(3);
    cancel_midway(s, 1);
    cancel_midway(s, 0);
    test_sched_free(s);
}

static int count_body(fsched_graph_task *self, void *arg);
static int slow_body(fsched_graph_task *self, void *arg);

/* ---- placement: worker sets, the caller's thread, priorities, cost hints ---- */

typedef struct placed_ctx {
    uint64_t workers;   /* the set the task may run on (0: any) */
    int caller_index;   /* >= 0: the task must run on this slot */
    uint32_t ran;       /* atomic */
} placed_ctx;

static int placed_body(fsched_graph_task *self, void *arg) {
    placed_ctx *p = (placed_ctx *)arg;
    int index = fsched_worker_index();
    (void)self;
    CHECK(index >= 0);
    if (p->workers) CHECK(index < 64 && ((p->workers >> index) & 1u));
    if (p->caller_index >= 0) CHECK(index == p->caller_index);
    ADD(&p->ran, 1);
    if (index % 2) fsched_yield();
    return 0;
}

typedef struct affinity_run {
    fsched_sched *s;
    uint32_t n;
} affinity_run;

static void affinity_in_task(void *arg) {
    affinity_run *ar = (affinity_run *)arg;
    fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    placed_ctx *ctx = (placed_ctx *)calloc(ar->n, sizeof *ctx);
    fsched_graph_task **t = (fsched_graph_task **)calloc(ar->n, sizeof *t);
    uint64_t seed = 99;
    uint32_t i, round, workers = fsched_worker_count(ar->s);
    CHECK(ctx != NULL && t != NULL);
    for (i = 0; i < ar->n; i++) {
        fsched_graph_task_desc td;
        uint32_t kind = (uint32_t)(test_rng(&seed) % 4);
        memset(&td, 0, sizeof td);
        ctx[i].caller_index = -1;
        if (kind == 1 && workers) {
            td.workers = (test_rng(&seed) % ((1u << workers) - 1)) + 1; /* a nonempty set */
            ctx[i].workers = td.workers;
        } else if (kind == 2) {
            td.on_caller = 1;
            ctx[i].caller_index = fsched_worker_index(); /* this task's thread */
        } else if (kind == 3) {
            td.priority = (fsched_priority)(test_rng(&seed) % 4);
        }
        CHECK_OK(fsched_graph_add(g, placed_body, &ctx[i], &td, &t[i]));
        if (i) { /* a random edge or two to an earlier task */
            CHECK_OK(fsched_graph_precede(g, t[test_rng(&seed) % i], t[i]));
            CHECK_OK(fsched_graph_precede(g, t[test_rng(&seed) % i], t[i]));
        }
    }
    for (round = 1; round <= 3; round++) {
        CHECK_OK(fsched_graph_run(g, ar->s));
        CHECK_OK(fsched_graph_wait(g, NULL)); /* suspends; on_caller tasks run here */
        for (i = 0; i < ar->n; i++) CHECK_EQ_U64(LOAD(&ctx[i].ran), round);
    }
    CHECK_OK(fsched_graph_destroy(g));
    free(ctx);
    free(t);
}

static void test_affinity(void) {
    fsched_sched *s = test_sched_new(4);
    affinity_run ar;
    fsched_wait_group wg;
    ar.s = s;
    ar.n = 2000 / TEST_SCALE;
    /* from a task: its worker is the caller */
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, affinity_in_task, &ar));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    /* from a bound thread: the thread itself is the caller */
#if TEST_THREADS
    CHECK_OK(fsched_bind(s));
#endif
    affinity_in_task(&ar);
#if TEST_THREADS
    CHECK_OK(fsched_unbind());
#endif
    test_sched_free(s);
}

/* One worker: the successors a task makes ready start by priority level, and sources
   start on the longest chain first. */
typedef struct order_log {
    uint32_t n;
    int entries[64];
} order_log;

typedef struct order_item {
    order_log *log;
    int key;
} order_item;

static int order_body(fsched_graph_task *self, void *arg) {
    order_item *it = (order_item *)arg;
    (void)self;
    CHECK(it->log->n < 64);
    it->log->entries[it->log->n++] = it->key;
    return 0;
}

static void test_priorities_and_costs(void) {
    fsched_sched *s = test_sched_new(1);
    fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    fsched_graph_task *root, *t;
    order_log log;
    order_item items[64], first;
    uint64_t seed = 3;
    uint32_t i;
    memset(&log, 0, sizeof log);
    first.log = &log;
    first.key = 100;
    CHECK_OK(fsched_graph_add(g, order_body, &first, NULL, &root));
    for (i = 0; i < 40; i++) {
        fsched_graph_task_desc td;
        memset(&td, 0, sizeof td);
        td.priority = (fsched_priority)(1 + test_rng(&seed) % 3); /* LOW, NORMAL, HIGH */
        items[i].log = &log;
        items[i].key = (int)td.priority;
        CHECK_OK(fsched_graph_add(g, order_body, &items[i], &td, &t));
        CHECK_OK(fsched_graph_precede(g, root, t));
    }
    CHECK_OK(fsched_graph_run(g, s));
    CHECK_OK(fsched_graph_wait(g, NULL));
    CHECK(log.n == 41 && log.entries[0] == 100);
    for (i = 2; i < log.n; i++) CHECK(log.entries[i - 1] >= log.entries[i]); /* by level */
    CHECK_OK(fsched_graph_destroy(g));

    /* three chains of different lengths, cost 1 per task: the longest starts first */
    g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    memset(&log, 0, sizeof log);
    {
        static const int lengths[3] = {3, 9, 5};
        uint32_t c, k = 0;
        for (c = 0; c < 3; c++) {
            fsched_graph_task *prev = NULL;
            for (i = 0; i < (uint32_t)lengths[c]; i++, k++) {
                fsched_graph_task_desc td;
                memset(&td, 0, sizeof td);
                td.cost = 1;
                items[k].log = &log;
                items[k].key = (int)(c * 100 + i);
                CHECK_OK(fsched_graph_add(g, order_body, &items[k], &td, &t));
                if (prev) CHECK_OK(fsched_graph_precede(g, prev, t));
                prev = t;
            }
        }
    }
    CHECK_OK(fsched_graph_run(g, s));
    CHECK_OK(fsched_graph_wait(g, NULL));
    CHECK(log.n == 17 && log.entries[0] == 100); /* the head of the 9-task chain */
    CHECK_OK(fsched_graph_destroy(g));

    /* successors made ready together start costliest first */
    g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    memset(&log, 0, sizeof log);
    CHECK_OK(fsched_graph_add(g, order_body, &first, NULL, &root));
    for (i = 0; i < 6; i++) {
        fsched_graph_task_desc td;
        memset(&td, 0, sizeof td);
        td.cost = 1 + (i * 7) % 6; /* 1 2 3 4 5 6 in a shuffled order */
        items[i].log = &log;
        items[i].key = (int)td.cost;
        CHECK_OK(fsched_graph_add(g, order_body, &items[i], &td, &t));
        CHECK_OK(fsched_graph_precede(g, root, t));
    }
    CHECK_OK(fsched_graph_run(g, s));
    CHECK_OK(fsched_graph_wait(g, NULL));
    CHECK(log.n == 7 && log.entries[0] == 100);
    for (i = 1; i < 7; i++) CHECK(log.entries[i] == 7 - (int)i);
    CHECK_OK(fsched_graph_destroy(g));
    test_sched_free(s);
}

/* Many independent chains (more than any batch of ready tasks), cost 1 per task, on one
   worker: the chains start longest first, whatever their number. */
typedef struct chain_head_log {
    uint32_t heads[64]; /* chain numbers, in the order their heads started */
    uint32_t n;
} chain_head_log;

typedef struct chain_head {
    chain_head_log *log;
    uint32_t chain;
} chain_head;

static int chain_head_body(fsched_graph_task *self, void *arg) {
    chain_head *h = (chain_head *)arg;
    (void)self;
    CHECK(h->log->n < 64);
    h->log->heads[h->log->n++] = h->chain;
    return 0;
}

static int chain_rest_body(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    return 0;
}

static void test_costs_whole_graph(void) {
    enum { CHAINS = 40 };
    fsched_sched *s = test_sched_new(1);
    fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    chain_head heads[CHAINS];
    chain_head_log log;
    uint32_t c, i, length[CHAINS];
    int round;
    memset(&log, 0, sizeof log);
    for (c = 0; c < CHAINS; c++) {
        fsched_graph_task_desc td;
        fsched_graph_task *prev, *t;
        memset(&td, 0, sizeof td);
        td.cost = 1;
        length[c] = 1 + (c * 17) % CHAINS; /* 1..40, shuffled: the longest is chain 7 */
        heads[c].log = &log;
        heads[c].chain = c;
        CHECK_OK(fsched_graph_add(g, chain_head_body, &heads[c], &td, &prev));
        for (i = 1; i < length[c]; i++) {
            CHECK_OK(fsched_graph_add(g, chain_rest_body, NULL, &td, &t));
            CHECK_OK(fsched_graph_precede(g, prev, t));
            prev = t;
        }
    }
    for (round = 0; round < 2; round++) { /* and again, ranks unchanged */
        log.n = 0;
        CHECK_OK(fsched_graph_run(g, s));
        CHECK_OK(fsched_graph_wait(g, NULL));
        CHECK_EQ_U64(log.n, CHAINS);
        for (i = 0; i < CHAINS; i++) CHECK_EQ_U64(length[log.heads[i]], CHAINS - i);
    }
    CHECK_OK(fsched_graph_destroy(g));
    test_sched_free(s);
}

/* ---- a result read by a task added while the graph runs ----
   p publishes a result; its only built successor a reads it; x, after a, adds y with an
   edge from p (finished by then, and a too): y must still find p's result, alive. */

typedef struct late_result {
    uint64_t value;
    int alive; /* cleared by the release function */
    int releases;
    int y_saw; /* 1: the result, alive; -1: NULL or released */
    fsched_graph_task *p;
} late_result;

static void late_release(void *result, void *user) {
    late_result *lr = (late_result *)user;
    CHECK(result == &lr->value);
    lr->alive = 0;
    lr->releases++;
}

static int late_p(fsched_graph_task *self, void *arg) {
    late_result *lr = (late_result *)arg;
    lr->alive = 1;
    lr->value = 42;
    CHECK_OK(fsched_graph_set_result(self, &lr->value, late_release, lr));
    return 0;
}

static int late_a(fsched_graph_task *self, void *arg) {
    late_result *lr = (late_result *)arg;
    CHECK(fsched_graph_result(fsched_graph_pred(self, 0)) == &lr->value && lr->alive);
    return 0;
}

static int late_y(fsched_graph_task *self, void *arg) {
    late_result *lr = (late_result *)arg;
    const uint64_t *v = (const uint64_t *)fsched_graph_result(fsched_graph_pred(self, 0));
    CHECK(fsched_graph_pred(self, 0) == lr->p);
    STORE(&lr->y_saw, v == &lr->value && lr->alive && *v == 42 ? 1 : -1);
    return 0;
}

static int late_x(fsched_graph_task *self, void *arg) {
    late_result *lr = (late_result *)arg;
    fsched_graph *g = fsched_graph_task_graph(self);
    fsched_graph_task *y;
    CHECK(fsched_graph_task_state(lr->p) == FSCHED_TASK_FINISHED);
    CHECK_OK(fsched_graph_add(g, late_y, lr, NULL, &y));
    CHECK_OK(fsched_graph_precede(g, lr->p, y));
    return 0;
}

static void test_result_for_late_successor(void) {
    fsched_sched *s = test_sched_new(2);
    fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    fsched_graph_task *a, *x;
    late_result lr;
    int run;
    memset(&lr, 0, sizeof lr);
    CHECK_OK(fsched_graph_add(g, late_p, &lr, NULL, &lr.p));
    CHECK_OK(fsched_graph_add(g, late_a, &lr, NULL, &a));
    CHECK_OK(fsched_graph_add(g, late_x, &lr, NULL, &x));
    CHECK_OK(fsched_graph_precede(g, lr.p, a));
    CHECK_OK(fsched_graph_precede(g, a, x));
    for (run = 1; run <= 20; run++) {
        STORE(&lr.y_saw, 0);
        CHECK_OK(fsched_graph_run(g, s));
        CHECK_OK(fsched_graph_wait(g, NULL));
        CHECK_EQ_U64(LOAD(&lr.y_saw), 1);
        CHECK(lr.alive && fsched_graph_result(lr.p) == &lr.value); /* readable after it */
        CHECK_EQ_U64(lr.releases, run - 1); /* each run's released as the next begins */
    }
    CHECK_OK(fsched_graph_destroy(g));
    CHECK_EQ_U64(lr.releases, 20);
    CHECK(!lr.alive);
    test_sched_free(s);
}

/* A task for the caller's thread that becomes ready after the thread unbound cannot be
   queued: it fails, and the run says why. */
static void test_caller_gone(void) {
#if TEST_THREADS
    fsched_sched *s = test_sched_new(2);
    fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    fsched_graph_task *slow, *mine, *after;
    fsched_graph_task_desc td;
    fsched_graph_outcome o;
    uint32_t count = 0;
    memset(&td, 0, sizeof td);
    td.workers = 1; /* worker 0 only: the bound thread cannot help with it while it unbinds */
    CHECK_OK(fsched_graph_add(g, slow_body, NULL, &td, &slow));
    td.workers = 0;
    td.on_caller = 1;
    CHECK_OK(fsched_graph_add(g, count_body, &count, &td, &mine));
    CHECK_OK(fsched_graph_add(g, count_body, &count, NULL, &after));
    CHECK_OK(fsched_graph_precede(g, slow, mine));
    CHECK_OK(fsched_graph_precede(g, mine, after));
    CHECK_OK(fsched_bind(s));
    CHECK_OK(fsched_graph_run(g, s));
    CHECK_OK(fsched_unbind()); /* before `slow` ends */
    CHECK_RESULT(fsched_graph_wait(g, &o), FSCHED_ERR_WRONG_STATE);
    CHECK(o.failed == mine && o.status == 0 && o.failed_count == 1 && o.skipped == 1);
    CHECK(fsched_graph_task_state(mine) == FSCHED_TASK_FAILED && LOAD(&count) == 0);
    CHECK_OK(fsched_graph_destroy(g));
    test_sched_free(s);
#endif
}

/* ---- dynamic graphs: running tasks add tasks and edges ---- */

typedef struct dyn_ctx {
    uint32_t children;   /* added per run by the spawning task */
    uint32_t child_ran;  /* atomic */
    uint32_t order_bad;  /* atomic: a child that ran before its added predecessor */
    uint32_t late_ran;   /* atomic: runs of the static task that waits for a child */
    uint32_t last_child_done; /* atomic */
    fsched_graph_task *late; /* a static task the spawner makes wait for its last child */
    fsched_event edges_made; /* keeps `late` waiting until the spawner has added its edge */
} dyn_ctx;

typedef struct dyn_child {
    dyn_ctx *d;
    uint32_t index;
    uint32_t done;       /* atomic: the run in which it finished */
    struct dyn_child *prev;
    uint32_t run;
} dyn_child;

static int dyn_child_body(fsched_graph_task *self, void *arg) {
    dyn_child *c = (dyn_child *)arg;
    (void)self;
    if (c->prev && LOAD(&c->prev->done) != c->run) ADD(&c->d->order_bad, 1);
    ADD(&c->d->child_ran, 1);
    STORE(&c->done, c->run);
    if (c->index + 1 == c->d->children) STORE(&c->d->last_child_done, c->run);
    return 0;
}

static dyn_child dyn_children[256];
static uint32_t dyn_run;

static int dyn_spawner(fsched_graph_task *self, void *arg) {
    dyn_ctx *d = (dyn_ctx *)arg;
    fsched_graph *g = fsched_graph_task_graph(self);
    fsched_graph_task *prev = NULL, *t = NULL;
    uint32_t i;
    for (i = 0; i < d->children; i++) {
        dyn_child *c = &dyn_children[i];
        c->d = d;
        c->index = i;
        c->run = dyn_run;
        c->prev = i % 2 ? &dyn_children[i - 1] : NULL; /* odd children after even ones */
        CHECK_OK(fsched_graph_add(g, dyn_child_body, c, NULL, &t));
        if (c->prev) CHECK_OK(fsched_graph_precede(g, prev, t));
        CHECK(fsched_graph_task_state(t) == FSCHED_TASK_WAITING); /* held until we return */
        prev = t;
    }
    /* an existing task that has not started waits for the last child too */
    CHECK_OK(fsched_graph_precede(g, t, d->late));
    /* and a cycle through new tasks is refused as well */
    CHECK_RESULT(fsched_graph_precede(g, d->late, t), FSCHED_ERR_INVALID_ARGUMENT);
    /* a task that already runs (this one) cannot get predecessors */
    CHECK_RESULT(fsched_graph_precede(g, t, self), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_event_set(&d->edges_made));
    return 0;
}

static int dyn_late(fsched_graph_task *self, void *arg) {
    dyn_ctx *d = (dyn_ctx *)arg;
    (void)self;
    CHECK(LOAD(&d->last_child_done) == dyn_run);
    ADD(&d->late_ran, 1);
    return 0;
}

static int dyn_gate(fsched_graph_task *self, void *arg) {
    (void)self;
    CHECK_OK(fsched_event_wait(&((dyn_ctx *)arg)->edges_made)); /* suspends this task */
    return 0;
}

static int dyn_hold(fsched_graph_task *self, void *arg) {
    (void)self;
    CHECK_OK(fsched_event_wait((fsched_event *)arg));
    return 0;
}

static void test_dynamic(void) {
    fsched_sched *s = test_sched_new(3);
    fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    fsched_graph_task *spawner, *gate;
    dyn_ctx d;
    uint32_t run;
    memset(&d, 0, sizeof d);
    d.children = 200;
    CHECK_OK(fsched_event_init(&d.edges_made, 0, 0));
    CHECK_OK(fsched_graph_add(g, dyn_spawner, &d, NULL, &spawner));
    CHECK_OK(fsched_graph_add(g, dyn_gate, &d, NULL, &gate));
    CHECK_OK(fsched_graph_add(g, dyn_late, &d, NULL, &d.late));
    CHECK_OK(fsched_graph_precede(g, gate, d.late));
    for (run = 1; run <= 5; run++) {
        dyn_run = run;
        CHECK_OK(fsched_graph_run(g, s));
        CHECK_OK(fsched_graph_wait(g, NULL));
        CHECK_EQ_U64(fsched_graph_task_count(g), 3 + d.children);
        CHECK_EQ_U64(LOAD(&d.child_ran), run * d.children);
        CHECK_EQ_U64(LOAD(&d.late_ran), run);
        CHECK_EQ_U64(LOAD(&d.order_bad), 0);
    }
    /* adding from outside while it runs is refused: a task holds the run open */
    {
        fsched_event open;
        fsched_graph_task *holder, *t;
        CHECK_OK(fsched_event_init(&open, 0, 0));
        CHECK_OK(fsched_graph_add(g, dyn_hold, &open, NULL, &holder));
        CHECK_OK(fsched_graph_run(g, s));
        CHECK_RESULT(fsched_graph_add(g, dyn_hold, &open, NULL, &t), FSCHED_ERR_WRONG_STATE);
        CHECK_RESULT(fsched_graph_precede(g, holder, d.late), FSCHED_ERR_WRONG_STATE);
        CHECK_OK(fsched_event_set(&open));
        CHECK_OK(fsched_graph_wait(g, NULL));
        CHECK_OK(fsched_event_destroy(&open));
    }
    CHECK_OK(fsched_graph_wait(g, NULL));
    CHECK_OK(fsched_graph_destroy(g));
    test_sched_free(s);
}

/* ---- composition, several graphs at once, waiting, DOT ---- */

static int count_body(fsched_graph_task *self, void *arg) {
    (void)self;
    ADD((uint32_t *)arg, 1);
    return 0;
}

static void test_composition(void) {
    fsched_sched *s = test_sched_new(2);
    fsched_graph *inner = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    fsched_graph *outer = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    fsched_graph_task *a, *b, *sub, *c, *bad;
    fsched_graph_outcome o;
    uint32_t inner_count = 0, outer_count = 0, i;
    for (i = 0; i < 50; i++) CHECK_OK(fsched_graph_add(inner, count_body, &inner_count, NULL, &a));
    CHECK_OK(fsched_graph_add(outer, count_body, &outer_count, NULL, &a));
    CHECK_OK(fsched_graph_add_graph(outer, inner, NULL, &sub));
    CHECK_OK(fsched_graph_add(outer, count_body, &outer_count, NULL, &c));
    CHECK_OK(fsched_graph_precede(outer, a, sub));
    CHECK_OK(fsched_graph_precede(outer, sub, c));
    CHECK_RESULT(fsched_graph_add_graph(outer, outer, NULL, &b), FSCHED_ERR_INVALID_ARGUMENT);
    for (i = 1; i <= 3; i++) {
        CHECK_OK(fsched_graph_run(outer, s));
        CHECK_OK(fsched_graph_wait(outer, NULL));
        CHECK_EQ_U64(inner_count, 50 * i);
        CHECK_EQ_U64(outer_count, 2 * i);
    }
    /* a failure inside fails the composed task, and what follows it */
    CHECK_OK(fsched_graph_add(inner, failing_task, (void *)(intptr_t)9, NULL, &bad));
    CHECK_RESULT(fsched_graph_run(outer, s), FSCHED_OK);
    CHECK_RESULT(fsched_graph_wait(outer, &o), FSCHED_ERR_TASK_FAILED);
    CHECK(o.failed == sub && o.status == (int)FSCHED_ERR_TASK_FAILED);
    CHECK(fsched_graph_task_state(c) == FSCHED_TASK_FAILED);
    CHECK_RESULT(fsched_graph_wait(inner, &o), FSCHED_ERR_TASK_FAILED);
    CHECK(o.failed == bad && o.status == 9);
    CHECK_OK(fsched_graph_destroy(outer));
    CHECK_OK(fsched_graph_destroy(inner));
    test_sched_free(s);
}

#if TEST_THREADS
typedef struct concurrent_arg {
    fsched_sched *s;
    uint64_t seed;
} concurrent_arg;

static void concurrent_thread(void *p) {
    concurrent_arg *ca = (concurrent_arg *)p;
    rgraph rg;
    int i;
    rgraph_build(&rg, 400 / TEST_SCALE, 800 / TEST_SCALE, ca->seed, FSCHED_GRAPH_SKIP_DEPENDENTS);
    for (i = 0; i < 5; i++) rgraph_run_and_check(&rg, ca->s);
    rgraph_free(&rg);
}
#endif

#if TEST_THREADS
/* ---- runs, cancels and waits from several threads at once ----
   The main thread runs a graph again and again, waiting twice after each run; a second
   thread cancels at random moments; a third waits at random moments. Odd runs have a
   failing task. Every outcome must be one the run it describes can have, and the two
   waits after a run must agree, whatever began or was cancelled in between. */

enum { RACE_CHAIN = 8, RACE_WIDE = 12, RACE_TASKS = RACE_CHAIN + RACE_WIDE + 1 };

typedef struct race_graph {
    fsched_graph *g;
    fsched_graph_task *failer;
    int fail;   /* atomic: the failer fails in this run */
    int stop;   /* atomic */
    uint64_t waits, cancels;
} race_graph;

static int race_body(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    return 0;
}

static int race_failer(fsched_graph_task *self, void *arg) {
    (void)self;
    return LOAD(&((race_graph *)arg)->fail) ? 9 : 0;
}

/* An outcome any run of the race graph can have. */
static void race_check(const race_graph *rg, fsched_result r, const fsched_graph_outcome *o) {
    CHECK(r == o->result);
    CHECK_EQ_U64(o->finished + o->failed_count + o->skipped + o->cancelled, RACE_TASKS);
    if (r == FSCHED_OK) {
        CHECK_EQ_U64(o->finished, RACE_TASKS);
    } else if (r == FSCHED_ERR_TASK_FAILED) {
        CHECK(o->failed == rg->failer && o->status == 9 && o->failed_count == 1);
    } else {
        CHECK_RESULT(r, FSCHED_ERR_CANCELLED);
        CHECK(o->failed == NULL && o->failed_count == 0);
    }
}

static void race_spin(uint64_t *seed) {
    unsigned n = (unsigned)(test_rng(seed) % 2000);
    while (n--) fsched__cpu_relax();
}

static void race_canceller(void *arg) {
    race_graph *rg = (race_graph *)arg;
    uint64_t seed = 11;
    while (!LOAD(&rg->stop)) {
        race_spin(&seed);
        CHECK_OK(fsched_graph_cancel(rg->g));
        rg->cancels++;
    }
}

static void race_waiter(void *arg) {
    race_graph *rg = (race_graph *)arg;
    uint64_t seed = 12;
    while (!LOAD(&rg->stop)) {
        fsched_graph_outcome o;
        fsched_result r;
        race_spin(&seed);
        r = fsched_graph_wait(rg->g, &o);
        race_check(rg, r, &o);
        rg->waits++;
    }
}
#endif

static void test_run_cancel_wait_races(void) {
#if TEST_THREADS
    fsched_sched *s = test_sched_new(2);
    race_graph rg;
    fsched_graph_task *prev = NULL, *t, *wide_root;
    test_thread canceller, waiter;
    unsigned round, rounds = test_rounds(2000), counts[3] = {0, 0, 0};
    int i;
    memset(&rg, 0, sizeof rg);
    rg.g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    for (i = 0; i < RACE_CHAIN; i++) {
        CHECK_OK(fsched_graph_add(rg.g, race_body, NULL, NULL, &t));
        if (prev) CHECK_OK(fsched_graph_precede(rg.g, prev, t));
        prev = t;
    }
    CHECK_OK(fsched_graph_add(rg.g, race_failer, &rg, NULL, &rg.failer));
    CHECK_OK(fsched_graph_precede(rg.g, prev, rg.failer));
    wide_root = rg.failer;
    for (i = 0; i < RACE_WIDE; i++) {
        CHECK_OK(fsched_graph_add(rg.g, race_body, NULL, NULL, &t));
        if (i % 2) CHECK_OK(fsched_graph_precede(rg.g, wide_root, t));
    }
    CHECK_OK(fsched_graph_run(rg.g, s)); /* so that the waiter has a run to wait for */
    CHECK(fsched_graph_wait(rg.g, NULL) == FSCHED_OK);
    canceller = thread_run(race_canceller, &rg);
    waiter = thread_run(race_waiter, &rg);
    for (round = 0; round < rounds; round++) {
        fsched_graph_outcome o1, o2;
        fsched_result r1, r2;
        STORE(&rg.fail, (int)(round % 2));
        CHECK_OK(fsched_graph_run(rg.g, s));
        r1 = fsched_graph_wait(rg.g, &o1);
        race_check(&rg, r1, &o1);
        if (r1 == FSCHED_ERR_TASK_FAILED) CHECK(round % 2);
        r2 = fsched_graph_wait(rg.g, &o2); /* the same run's outcome again */
        CHECK(r2 == r1 && o2.finished == o1.finished && o2.cancelled == o1.cancelled &&
              o2.skipped == o1.skipped && o2.failed == o1.failed);
        counts[r1 == FSCHED_OK ? 0 : r1 == FSCHED_ERR_TASK_FAILED ? 1 : 2]++;
    }
    STORE(&rg.stop, 1);
    thread_join(canceller);
    thread_join(waiter);
    CHECK(counts[0] + counts[1] + counts[2] == rounds);
    printf("test_graph: %u runs raced by cancels and waits: %u ok, %u failed, %u cancelled\n",
           rounds, counts[0], counts[1], counts[2]);
    CHECK_OK(fsched_graph_destroy(rg.g));
    test_sched_free(s);
#endif
}

static void test_concurrent_graphs(void) {
#if TEST_THREADS
    fsched_sched *s = test_sched_new(3);
    concurrent_arg args[4];
    test_thread th[4];
    int i;
    for (i = 0; i < 4; i++) {
        args[i].s = s;
        args[i].seed = 500 + (uint64_t)i;
        th[i] = thread_run(concurrent_thread, &args[i]);
    }
    for (i = 0; i < 4; i++) thread_join(th[i]);
    test_sched_free(s);
#endif
}

static int slow_body(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    fsched_sleep_for(30 * MS);
    return 0;
}

static void dot_collect(const char *text, size_t len, void *user) {
    char *buf = (char *)user;
    size_t have = strlen(buf);
    CHECK(have + len < 4096);
    memcpy(buf + have, text, len);
    buf[have + len] = 0;
}

static void test_wait_and_dot(void) {
    fsched_sched *s = test_sched_new(2);
    fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    fsched_graph_task *a, *b;
    fsched_graph_task_desc td;
    char dot[4096];
    memset(&td, 0, sizeof td);
    td.name = "say \"hi\"";
    CHECK_OK(fsched_graph_add(g, slow_body, NULL, &td, &a));
    td.name = "b";
    CHECK_OK(fsched_graph_add(g, failing_task, (void *)(intptr_t)3, &td, &b));
    CHECK_OK(fsched_graph_precede(g, a, b));
    dot[0] = 0;
    CHECK_OK(fsched_graph_dump_dot(g, dot_collect, dot));
    CHECK(strstr(dot, "digraph \"test\"") != NULL);
    CHECK(strstr(dot, "t0 [label=\"say \\\"hi\\\"\\nwaiting\"") != NULL);
    CHECK(strstr(dot, "t0 -> t1;") != NULL);
    CHECK_OK(fsched_graph_run(g, s));
#if TEST_THREADS
    CHECK_RESULT(fsched_graph_wait_for(g, 1 * MS, NULL), FSCHED_ERR_TIMEOUT);
    CHECK_RESULT(fsched_graph_run(g, s), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_graph_destroy(g), FSCHED_ERR_WRONG_STATE);
#endif
    CHECK_RESULT(fsched_graph_wait(g, NULL), FSCHED_ERR_TASK_FAILED);
    CHECK_RESULT(fsched_graph_wait(g, NULL), FSCHED_ERR_TASK_FAILED); /* again: the same */
    dot[0] = 0;
    CHECK_OK(fsched_graph_dump_dot(g, dot_collect, dot));
    CHECK(strstr(dot, "\\nfinished") != NULL && strstr(dot, "b\\nfailed") != NULL);
    CHECK(fsched_graph_task_status(b) == 3 && fsched_graph_task_status(a) == 0);
    CHECK(strcmp(fsched_graph_task_name(b), "b") == 0);
    CHECK_OK(fsched_graph_destroy(g));
    test_sched_free(s);
}

/* Every waiter learns the outcome: plain threads and tasks wait on one run at once. */
typedef struct waiter_arg {
    fsched_graph *g;
    fsched_graph_task *bad;
    uint32_t *seen; /* atomic */
} waiter_arg;

static void waiter(void *p) {
    waiter_arg *wa = (waiter_arg *)p;
    fsched_graph_outcome o;
    memset(&o, 0, sizeof o); /* filled by the wait; zeroed for the compiler's sake */
    CHECK_RESULT(fsched_graph_wait(wa->g, &o), FSCHED_ERR_TASK_FAILED);
    CHECK(o.failed == wa->bad && o.status == 3 && o.skipped == 1);
    ADD(wa->seen, 1);
}

static void test_many_waiters(void) {
    fsched_sched *s = test_sched_new(2);
    fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    fsched_graph_task *a, *b;
    fsched_wait_group wg;
    waiter_arg wa;
    uint32_t seen = 0;
    int i;
    CHECK_OK(fsched_graph_add(g, failing_task, (void *)(intptr_t)3, NULL, &a));
    CHECK_OK(fsched_graph_add(g, slow_body, NULL, NULL, &b));
    CHECK_OK(fsched_graph_precede(g, a, b));
    wa.g = g;
    wa.bad = a;
    wa.seen = &seen;
    CHECK_OK(fsched_graph_run(g, s));
    CHECK_OK(fsched_wait_group_init(&wg));
    for (i = 0; i < 4; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, waiter, &wa));
#if TEST_THREADS
    {
        test_thread th[3];
        for (i = 0; i < 3; i++) th[i] = thread_run(waiter, &wa);
        waiter(&wa);
        for (i = 0; i < 3; i++) thread_join(th[i]);
        CHECK_OK(fsched_wait_group_wait(&wg));
        CHECK_EQ_U64(LOAD(&seen), 8);
    }
#else
    waiter(&wa);
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_EQ_U64(LOAD(&seen), 5);
#endif
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_graph_destroy(g));
    test_sched_free(s);
}

/* fsched_destroy lets a running graph finish first. */
static void test_destroy_waits_for_run(void) {
#if TEST_THREADS
    fsched_sched *s = test_sched_new(2);
    fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    fsched_graph_task *prev = NULL, *t;
    uint32_t count = 0, i;
    for (i = 0; i < 5; i++) {
        CHECK_OK(fsched_graph_add(g, count_body, &count, NULL, &t));
        CHECK_OK(fsched_graph_add(g, slow_body, NULL, NULL, &t));
        if (prev) CHECK_OK(fsched_graph_precede(g, prev, t));
        prev = t;
    }
    CHECK_OK(fsched_graph_run(g, s));
    CHECK_OK(fsched_destroy(s));
    CHECK_EQ_U64(LOAD(&count), 5);
    CHECK_OK(fsched_graph_wait(g, NULL));
    CHECK_OK(fsched_graph_destroy(g));
#endif
}

/* ---- bad input ---- */

static int noop_body(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    return 0;
}

static int waits_for_own_graph(fsched_graph_task *self, void *arg) {
    (void)arg;
    CHECK_RESULT(fsched_graph_wait(fsched_graph_task_graph(self), NULL), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_graph_set_result(fsched_graph_pred(self, 0), NULL, NULL, NULL),
                 FSCHED_ERR_WRONG_STATE); /* only a task itself */
    return 0;
}

/* A destroyed graph: every call is refused with a code, without reading its memory
   (which faults once freed: the allocator makes it inaccessible). */
/* ---- ready tasks run in place ---- */

typedef struct seq_log {
    uint32_t n;
    int entries[256];
} seq_log;

typedef struct seq_item {
    seq_log *log;
    int key;
} seq_item;

static int seq_body(fsched_graph_task *self, void *arg) {
    seq_item *it = (seq_item *)arg;
    (void)self;
    CHECK(it->log->n < 256);
    it->log->entries[it->log->n++] = it->key;
    return 0;
}

/* On one worker: the sources run in the order they were added, each followed at once by
   the successor it made ready (in place, before the next source), after a source of high
   priority and before one of low priority. */
/* A plain source queued in its run's range job, not yet started, is READY (queued to
   run), as every other queued task is. */
static fsched_graph_task *ready_later;
static fsched_task_state ready_seen;

static int ready_first(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    ready_seen = fsched_graph_task_state(ready_later);
    return 0;
}

static int ready_nothing(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    return 0;
}

static void test_sources_ready(void) {
    fsched_sched *s = test_sched_new(1);
    fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    fsched_graph_task *first;
    int round;
    CHECK_OK(fsched_graph_add(g, ready_first, NULL, NULL, &first));
    CHECK_OK(fsched_graph_add(g, ready_nothing, NULL, NULL, &ready_later));
    for (round = 0; round < 2; round++) { /* the first run, and a run again */
        ready_seen = FSCHED_TASK_WAITING;
        CHECK_OK(fsched_graph_run(g, s));
        CHECK_OK(fsched_graph_wait(g, NULL));
        CHECK(ready_seen == FSCHED_TASK_READY);
    }
    CHECK_OK(fsched_graph_destroy(g));
    test_sched_free(s);
}

static void test_in_place_order(void) {
    enum { SOURCES = 100 };
    fsched_sched *s = test_sched_new(1);
    fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    fsched_graph_task_desc td;
    fsched_graph_task *src, *succ;
    static seq_item items[2 * SOURCES + 2];
    static seq_log log;
    uint32_t i, run;
    memset(&log, 0, sizeof log);
    memset(&td, 0, sizeof td);
    for (i = 0; i < SOURCES; i++) {
        items[2 * i].log = items[2 * i + 1].log = &log;
        items[2 * i].key = (int)(2 * i);
        items[2 * i + 1].key = (int)(2 * i + 1);
        CHECK_OK(fsched_graph_add(g, seq_body, &items[2 * i], NULL, &src));
        CHECK_OK(fsched_graph_add(g, seq_body, &items[2 * i + 1], NULL, &succ));
        CHECK_OK(fsched_graph_precede(g, src, succ));
    }
    items[2 * SOURCES].log = items[2 * SOURCES + 1].log = &log;
    items[2 * SOURCES].key = -1; /* high */
    items[2 * SOURCES + 1].key = 1000; /* low */
    td.priority = FSCHED_PRIORITY_LOW;
    CHECK_OK(fsched_graph_add(g, seq_body, &items[2 * SOURCES + 1], &td, &src));
    td.priority = FSCHED_PRIORITY_HIGH;
    CHECK_OK(fsched_graph_add(g, seq_body, &items[2 * SOURCES], &td, &src));
    for (run = 0; run < 2; run++) { /* the same again */
        log.n = 0;
        CHECK_OK(fsched_graph_run(g, s));
        CHECK_OK(fsched_graph_wait(g, NULL));
        CHECK(log.n == 2 * SOURCES + 2);
        CHECK(log.entries[0] == -1);
        for (i = 0; i < 2 * SOURCES; i++) CHECK(log.entries[1 + i] == (int)i);
        CHECK(log.entries[2 * SOURCES + 1] == 1000);
    }
    CHECK_OK(fsched_graph_destroy(g));
    test_sched_free(s);
}

static uint64_t chain_next;

static int chain_body(fsched_graph_task *self, void *arg) {
    (void)self;
    CHECK(chain_next == (uint64_t)(uintptr_t)arg); /* after its predecessor, once */
    chain_next++;
    return 0;
}

/* A chain of a million tasks, each made ready by the one before and run in place: the
   stack must not grow with it. On one worker and on two, twice each. */
static void test_deep_chain(void) {
    uint32_t n = 1000000 / TEST_SCALE, i, workers;
    fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    fsched_graph_task *prev = NULL, *t;
    for (i = 0; i < n; i++) {
        CHECK_OK(fsched_graph_add(g, chain_body, (void *)(uintptr_t)i, NULL, &t));
        if (prev) CHECK_OK(fsched_graph_precede(g, prev, t));
        prev = t;
    }
    for (workers = 1; workers <= (TEST_THREADS ? 2u : 1u); workers++) {
        fsched_sched *s = test_sched_new(workers);
        int run;
        for (run = 0; run < 2; run++) {
            fsched_graph_outcome o;
            chain_next = 0;
            CHECK_OK(fsched_graph_run(g, s));
            CHECK_OK(fsched_graph_wait(g, &o));
            CHECK(o.finished == n && chain_next == n);
        }
        test_sched_free(s);
    }
    CHECK_OK(fsched_graph_destroy(g));
}

#if TEST_THREADS
static uint32_t spread_started;

/* Waits (blocking its worker) until every source has started, 20 s at most. */
static int spread_body(fsched_graph_task *self, void *arg) {
    uint64_t deadline = fsched_clock_ns() + 20000 * MS;
    uint32_t sources = (uint32_t)(uintptr_t)arg;
    (void)self;
    ADD(&spread_started, 1u);
    while (LOAD(&spread_started) < sources)
        if (fsched_clock_ns() > deadline) return 1;
    return 0;
}
#endif

/* As many independent tasks as workers, each blocking its worker until all have started:
   they start at once, though a range job runs sources one after another. */
static void test_sources_spread(void) {
#if TEST_THREADS
    uint32_t workers;
    for (workers = 2; workers <= 4; workers++) {
        fsched_sched *s = test_sched_new(workers);
        fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
        fsched_graph_task *t;
        uint32_t i;
        for (i = 0; i < workers; i++)
            CHECK_OK(fsched_graph_add(g, spread_body, (void *)(uintptr_t)workers, NULL, &t));
        STORE(&spread_started, 0u);
        CHECK_OK(fsched_graph_run(g, s));
        CHECK_OK(fsched_graph_wait(g, NULL));
        CHECK_OK(fsched_graph_destroy(g));
        test_sched_free(s);
    }
#endif
}

static void test_use_after_destroy(void) {
#if defined(TEST_GUARD_ALLOCATOR)
    fsched_sched *s = test_sched_new(1);
    fsched_graph_desc gd;
    fsched_graph *g;
    fsched_graph_task *t;
    fsched_graph_outcome o;
    memset(&gd, 0, sizeof gd);
    gd.allocator.alloc = test_guard_alloc;
    gd.allocator.free = test_guard_free;
    CHECK_OK(fsched_graph_create(&gd, &g));
    CHECK_OK(fsched_graph_add(g, noop_body, NULL, NULL, &t));
    CHECK_OK(fsched_graph_run(g, s));
    CHECK_OK(fsched_graph_wait(g, &o));
    CHECK_OK(fsched_graph_destroy(g));
    CHECK_RESULT(fsched_graph_destroy(g), FSCHED_ERR_INVALID_ARGUMENT); /* twice */
    CHECK_RESULT(fsched_graph_add(g, noop_body, NULL, NULL, &t), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_graph_run(g, s), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_graph_wait(g, &o), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_graph_wait_for(g, 1000, &o), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_graph_cancel(g), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK(fsched_graph_task_count(g) == 0);
    test_sched_free(s);
#endif
}

static void test_bad_input(void) {
    fsched_sched *s = test_sched_new(2);
    fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS), *other;
    fsched_graph_task *a, *b, *x;
    fsched_graph_task_desc td;
    fsched_graph_desc gd;
    memset(&gd, 0, sizeof gd);
    gd.on_failure = (fsched_graph_policy)7;
    CHECK_RESULT(fsched_graph_create(&gd, &other), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_graph_create(NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    other = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    CHECK_RESULT(fsched_graph_add(NULL, noop_body, NULL, NULL, &a), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_graph_add(g, NULL, NULL, NULL, &a), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_graph_add(g, noop_body, NULL, NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    memset(&td, 0, sizeof td);
    td.priority = (fsched_priority)9;
    CHECK_RESULT(fsched_graph_add(g, noop_body, NULL, &td, &a), FSCHED_ERR_INVALID_ARGUMENT);
    td.priority = FSCHED_PRIORITY_DEFAULT;
    td.on_caller = 1;
    td.workers = 1;
    CHECK_RESULT(fsched_graph_add(g, noop_body, NULL, &td, &a), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_graph_add(g, noop_body, NULL, NULL, &a));
    CHECK_OK(fsched_graph_add(g, waits_for_own_graph, NULL, NULL, &b));
    CHECK_OK(fsched_graph_add(other, noop_body, NULL, NULL, &x));
    CHECK_RESULT(fsched_graph_precede(g, a, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_graph_precede(g, a, x), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_graph_precede(g, a, a), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_graph_precede(g, a, b));
    CHECK_OK(fsched_graph_precede(g, a, b)); /* twice: no second edge */
    CHECK(fsched_graph_pred_count(b) == 1 && fsched_graph_pred(b, 0) == a);
    CHECK(fsched_graph_pred(b, 1) == NULL);
    CHECK_RESULT(fsched_graph_precede(g, b, a), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_graph_wait(g, NULL), FSCHED_ERR_WRONG_STATE); /* never ran */
    CHECK_RESULT(fsched_graph_run(NULL, s), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_graph_set_result(a, NULL, NULL, NULL), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_graph_run(g, s));
    CHECK_OK(fsched_graph_wait(g, NULL));
    /* a worker set the scheduler cannot serve; a caller that is not part of it */
    td.on_caller = 0;
    td.workers = (uint64_t)1 << 40;
    CHECK_OK(fsched_graph_add(other, noop_body, NULL, &td, &x));
    CHECK_RESULT(fsched_graph_run(other, s), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_graph_destroy(other));
    other = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
    td.workers = 0;
    td.on_caller = 1;
    CHECK_OK(fsched_graph_add(other, noop_body, NULL, &td, &x));
#if TEST_THREADS
    CHECK_RESULT(fsched_graph_run(other, s), FSCHED_ERR_WRONG_STATE);
#endif
    CHECK_RESULT(fsched_graph_cancel(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_graph_cancel(g)); /* not running: nothing to do */
    CHECK_RESULT(fsched_graph_dump_dot(g, NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK(fsched_graph_task_state(NULL) == FSCHED_TASK_WAITING);
    CHECK(fsched_graph_result(NULL) == NULL && fsched_graph_pred_count(NULL) == 0);
    CHECK(fsched_graph_task_count(NULL) == 0);
    CHECK(strcmp(fsched_result_string(FSCHED_ERR_TASK_FAILED), "a task failed") == 0);
    CHECK_OK(fsched_graph_destroy(other));
    CHECK_OK(fsched_graph_destroy(g));
    CHECK_OK(fsched_graph_destroy(NULL));
    test_sched_free(s);
}

/* ---- the chunks tasks and edges are carved from: counts at their boundaries ---- */

/* A task of the chunk tests: checks that its predecessors ran in this run before it. */
typedef struct chunk_task {
    struct chunk_ctx *ctx;
    uint32_t runs;                 /* runs it ran in */
    uint32_t npreds, preds[8];     /* its predecessors' indices, as added */
} chunk_task;

typedef struct chunk_ctx {
    chunk_task *tasks;
    fsched_graph_task **handles;
    uint32_t run, bad, ran;
    uint32_t adds;                 /* tasks the adder adds while it runs */
    uint32_t created, added;       /* tasks the adder made in the last run, and linked */
} chunk_ctx;

static int chunk_body(fsched_graph_task *self, void *arg) {
    chunk_task *t = (chunk_task *)arg;
    chunk_ctx *c = t->ctx;
    uint32_t k;
    if (fsched_graph_pred_count(self) != t->npreds) ADD(&c->bad, 1);
    for (k = 0; k < t->npreds; k++)
        if (LOAD(&c->tasks[t->preds[k]].runs) != c->run ||
            fsched_graph_pred(self, k) != c->handles[t->preds[k]])
            ADD(&c->bad, 1);
    if (LOAD(&t->runs) != c->run - 1) ADD(&c->bad, 1);
    STORE(&t->runs, c->run);
    ADD(&c->ran, 1);
    return 0;
}

static int chunk_added_body(fsched_graph_task *self, void *arg) {
    (void)self;
    ADD(&((chunk_ctx *)arg)->ran, 1);
    return 0;
}

/* Adds c->adds tasks while it runs, each after this task and after the one added before
   it: a run's additions across a chunk's end. */
static int chunk_adder(fsched_graph_task *self, void *arg) {
    chunk_ctx *c = (chunk_ctx *)((chunk_task *)arg)->ctx;
    fsched_graph *g = fsched_graph_task_graph(self);
    fsched_graph_task *prev = NULL, *t;
    uint32_t i;
    c->created = c->added = 0;
    for (i = 0; i < c->adds; i++) {
        fsched_result r = fsched_graph_add(g, chunk_added_body, c, NULL, &t);
        if (r == FSCHED_OK) {
            c->created++; /* it runs, whatever edges it gets */
            r = fsched_graph_precede(g, self, t);
            if (r == FSCHED_OK && prev) r = fsched_graph_precede(g, prev, t);
        }
        if (r != FSCHED_OK) {
            if (r != FSCHED_ERR_OUT_OF_MEMORY) ADD(&c->bad, 1);
            break;
        }
        c->added++;
        prev = t;
    }
    return chunk_body(self, arg);
}

/* Edge number k of a graph of n tasks: (i, j), i < j, taken by j then i, each j after
   at most 8 tasks. Returns 0 when there is no such edge. */
static int chunk_edge(uint32_t n, uint32_t k, uint32_t *from, uint32_t *to) {
    uint32_t j;
    for (j = 1; j < n; j++) {
        uint32_t in = j < 8 ? j : 8;
        if (k < in) {
            *from = j - 1 - k; /* the closest first: edges go into the chain's order */
            *to = j;
            return 1;
        }
        k -= in;
    }
    return 0;
}

/* Builds n tasks and up to m edges into g (task 0 the adder when adds > 0); returns the
   first error, with what was built so far in c. */
static fsched_result chunk_build(fsched_graph *g, chunk_ctx *c, uint32_t n, uint32_t m,
                                 uint32_t *built, uint32_t *edges) {
    fsched_graph_task_desc td;
    uint32_t i, k, from, to;
    fsched_result r;
    memset(&td, 0, sizeof td);
    *built = *edges = 0;
    for (i = 0; i < n; i++) {
        td.name = i % 5 == 0 ? "chunk" : NULL;
#if defined(FIBERSCHED_NO_THREADS) /* on the placed list: the caller, the only thread */
        td.on_caller = i % 11 == 3;
#else
        td.workers = i % 11 == 3 ? 1u : 0u;
#endif
        td.cost = i % 4;
        c->tasks[i].ctx = c;
        c->tasks[i].runs = 0;
        c->tasks[i].npreds = 0;
        r = fsched_graph_add(g, i == 0 && c->adds ? chunk_adder : chunk_body, &c->tasks[i], &td,
                             &c->handles[i]);
        if (r != FSCHED_OK) return r;
        *built = i + 1;
    }
    for (k = 0; k < m && chunk_edge(n, k, &from, &to); k++) {
        r = fsched_graph_precede(g, c->handles[from], c->handles[to]);
        if (r != FSCHED_OK) return r;
        c->tasks[to].preds[c->tasks[to].npreds++] = from;
        *edges = k + 1;
    }
    return FSCHED_OK;
}

static void test_chunk_boundaries(void) {
    const uint32_t C = FSCHED__GRAPH_CHUNK_TASKS, E = FSCHED__GRAPH_EDGE_CHUNK;
    const uint32_t task_counts[] = {0, 1, C - 1, C, C + 1, FSCHED__GRAPH_CHUNKS_FIRST * C + 1};
    const uint32_t edge_counts[] = {0, 1, E - 1, E, E + 1};
    const uint32_t max_tasks = FSCHED__GRAPH_CHUNKS_FIRST * C + 1 + 2 * C;
    fsched_sched *s = test_sched_new(2);
    chunk_ctx c;
    size_t a, b;
    memset(&c, 0, sizeof c);
    c.tasks = (chunk_task *)calloc(max_tasks, sizeof *c.tasks);
    c.handles = (fsched_graph_task **)calloc(max_tasks, sizeof *c.handles);
    CHECK(c.tasks && c.handles);
    for (a = 0; a < sizeof task_counts / sizeof *task_counts; a++) {
        for (b = 0; b < sizeof edge_counts / sizeof *edge_counts; b++) {
            uint32_t n = task_counts[a], built, edges, i, more;
            fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
            c.adds = 0;
            CHECK_OK(chunk_build(g, &c, n, edge_counts[b], &built, &edges));
            CHECK_EQ_U64(fsched_graph_task_count(g), n);
            for (i = 0; i < n; i++)
                CHECK_EQ_U64(fsched_graph_pred_count(c.handles[i]), c.tasks[i].npreds);
            for (c.run = 1; c.run <= 2; c.run++) {
                c.ran = 0;
                CHECK_OK(fsched_graph_run(g, s));
                CHECK_OK(fsched_graph_wait(g, NULL));
                CHECK_EQ_U64(c.ran, n);
            }
            /* built further after runs: the next tasks go where the chunks left room */
            for (more = 0; more < C + 1; more++) {
                c.tasks[n + more].ctx = &c;
                c.tasks[n + more].runs = 2;
                c.tasks[n + more].npreds = 0;
                CHECK_OK(fsched_graph_add(g, chunk_body, &c.tasks[n + more], NULL,
                                          &c.handles[n + more]));
                if (n + more > 0) {
                    CHECK_OK(fsched_graph_precede(g, c.handles[n + more - 1],
                                                  c.handles[n + more]));
                    c.tasks[n + more].preds[c.tasks[n + more].npreds++] = n + more - 1;
                }
            }
            c.ran = 0;
            CHECK_OK(fsched_graph_run(g, s));
            CHECK_OK(fsched_graph_wait(g, NULL));
            CHECK_EQ_U64(c.ran, n + C + 1);
            CHECK_EQ_U64(fsched_graph_task_count(g), n + C + 1);
            CHECK_OK(fsched_graph_destroy(g));
            CHECK_EQ_U64(c.bad, 0);
        }
    }
    /* a run's additions across a chunk's end, undone, added again, then built on */
    for (a = 0; a < 4; a++) {
        uint32_t n = C - 2 + (uint32_t)a, built, edges, run, i; /* the adder's chunk: ends at n */
        fsched_graph *g = graph_new(FSCHED_GRAPH_SKIP_DEPENDENTS);
        fsched_graph_task *late;
        c.adds = 3;
        CHECK_OK(chunk_build(g, &c, n, 2 * n, &built, &edges));
        for (run = 1; run <= 3; run++) {
            c.run = run;
            c.ran = 0;
            CHECK_OK(fsched_graph_run(g, s));
            CHECK_OK(fsched_graph_wait(g, NULL));
            CHECK_EQ_U64(c.added, 3);
            CHECK_EQ_U64(c.ran, n + 3);
            CHECK_EQ_U64(fsched_graph_task_count(g), n + 3);
        }
        /* building on undoes the additions: the new task takes the first one's place */
        c.tasks[n].ctx = &c;
        c.tasks[n].runs = 3;
        c.tasks[n].npreds = 1;
        c.tasks[n].preds[0] = 0;
        CHECK_OK(fsched_graph_add(g, chunk_body, &c.tasks[n], NULL, &late));
        c.handles[n] = late;
        CHECK_EQ_U64(fsched_graph_task_count(g), n + 1);
        CHECK_OK(fsched_graph_precede(g, c.handles[0], late));
        c.adds = 0;
        c.run = 4;
        c.ran = 0;
        CHECK_OK(fsched_graph_run(g, s));
        CHECK_OK(fsched_graph_wait(g, NULL));
        CHECK_EQ_U64(c.ran, n + 1);
        for (i = 0; i <= n; i++) CHECK_EQ_U64(c.tasks[i].runs, 4);
        CHECK_OK(fsched_graph_destroy(g));
        CHECK_EQ_U64(c.bad, 0);
    }
    free(c.tasks);
    free(c.handles);
    test_sched_free(s);
}

/* ---- failing allocations: every step fails once, and nothing leaks or breaks ---- */

typedef struct failing_alloc {
    long countdown; /* allocations left before one fails; < 0: never */
    long live;
} failing_alloc;

static void *fa_alloc(size_t size, size_t align, void *user) {
    failing_alloc *fa = (failing_alloc *)user;
    void *p;
    if (fa->countdown == 0) {
        fa->countdown = -1;
        return NULL;
    }
    if (fa->countdown > 0) fa->countdown--;
    if (align < sizeof(void *)) align = sizeof(void *);
    size = (size + align - 1) / align * align;
#if defined(_WIN32)
    p = _aligned_malloc(size, align);
#elif defined(__NEWLIB__)
    p = memalign(align, size); /* its aligned_alloc needs posix_memalign, often absent */
#else
    p = aligned_alloc(align, size);
#endif
    if (p) fa->live++;
    return p;
}

static void fa_free(void *p, size_t size, size_t align, void *user) {
    (void)size;
    (void)align;
    ((failing_alloc *)user)->live--;
#if defined(_WIN32)
    _aligned_free(p);
#else
    free(p);
#endif
}

static void test_out_of_memory(void) {
    fsched_sched *s = test_sched_new(2);
    long step;
    for (step = 0; step < 400; step++) {
        failing_alloc fa;
        fsched_graph_desc gd;
        fsched_graph *g;
        fsched_graph_task *t[100];
        fsched_graph_task_desc td;
        fsched_result r = FSCHED_OK;
        uint32_t count = 0, added = 0, i;
        int hit;
        memset(&gd, 0, sizeof gd);
        memset(&td, 0, sizeof td);
        fa.countdown = step;
        fa.live = 0;
        gd.allocator.alloc = fa_alloc;
        gd.allocator.free = fa_free;
        gd.allocator.user = &fa;
        gd.name = "oom";
        if (fsched_graph_create(&gd, &g) != FSCHED_OK) {
            CHECK(fa.live == 0);
            continue;
        }
        for (i = 0; i < 100 && r == FSCHED_OK; i++) {
            td.name = i % 3 ? NULL : "named";
            td.cost = i % 7;
            r = fsched_graph_add(g, count_body, &count, &td, &t[i]);
            if (r == FSCHED_OK) added++;
        }
        for (i = 1; i < added && r == FSCHED_OK; i++) {
            r = fsched_graph_precede(g, t[(i * 7919u) % i], t[i]);
            if (r == FSCHED_OK) r = fsched_graph_precede(g, t[i - 1], t[i]);
            /* an edge against the order makes the cycle search allocate */
            if (r == FSCHED_OK && i > 2) {
                fsched_result c = fsched_graph_precede(g, t[i], t[0]);
                CHECK(c == FSCHED_ERR_INVALID_ARGUMENT || c == FSCHED_ERR_OUT_OF_MEMORY);
                if (c == FSCHED_ERR_OUT_OF_MEMORY) r = c;
            }
        }
        hit = fa.countdown < 0;
        CHECK(r == FSCHED_OK || (r == FSCHED_ERR_OUT_OF_MEMORY && hit));
        r = fsched_graph_run(g, s);
        CHECK(r == FSCHED_OK || (r == FSCHED_ERR_OUT_OF_MEMORY && fa.countdown < 0));
        if (r == FSCHED_OK) {
            CHECK_OK(fsched_graph_wait(g, NULL));
            CHECK_EQ_U64(count, added);
        }
        CHECK_OK(fsched_graph_destroy(g));
        CHECK(fa.live == 0);
        if (!hit && r == FSCHED_OK) break; /* every allocation has had its turn */
    }
    CHECK(step < 400);
    test_sched_free(s);
}

/* Every allocation of building across the chunks' boundaries (the first chunk of tasks,
   the next ones, the room for more chunks, edge chunks, names, the placed list) and of a
   run that adds tasks across a chunk's end fails once in turn: an error code, nothing
   leaked, and what was built runs. */
static void test_out_of_memory_chunks(void) {
    const uint32_t C = FSCHED__GRAPH_CHUNK_TASKS, E = FSCHED__GRAPH_EDGE_CHUNK;
    const uint32_t n = FSCHED__GRAPH_CHUNKS_FIRST * C + 1;
    fsched_sched *s = test_sched_new(2);
    chunk_ctx c;
    long step;
    memset(&c, 0, sizeof c);
    c.tasks = (chunk_task *)calloc(n, sizeof *c.tasks);
    c.handles = (fsched_graph_task **)calloc(n, sizeof *c.handles);
    CHECK(c.tasks && c.handles);
    for (step = 0; step < 2000; step++) {
        failing_alloc fa;
        fsched_graph_desc gd;
        fsched_graph *g;
        fsched_result r;
        uint32_t built, edges;
        int hit;
        memset(&gd, 0, sizeof gd);
        fa.countdown = step;
        fa.live = 0;
        gd.allocator.alloc = fa_alloc;
        gd.allocator.free = fa_free;
        gd.allocator.user = &fa;
        if (fsched_graph_create(&gd, &g) != FSCHED_OK) {
            CHECK(fa.live == 0);
            continue;
        }
        c.adds = C + 1; /* from the built tasks' last chunk across the next one's end */
        c.bad = 0;
        r = chunk_build(g, &c, n, E + 1, &built, &edges);
        CHECK(r == FSCHED_OK || (r == FSCHED_ERR_OUT_OF_MEMORY && fa.countdown < 0));
        if (built > 0 && built < n) /* the failed add left no task behind */
            CHECK_EQ_U64(fsched_graph_task_count(g), built);
        if (r == FSCHED_OK) CHECK_EQ_U64(edges, E + 1);
        c.run = 1;
        c.ran = c.created = 0;
        r = fsched_graph_run(g, s);
        CHECK(r == FSCHED_OK || (r == FSCHED_ERR_OUT_OF_MEMORY && fa.countdown < 0));
        if (r == FSCHED_OK) {
            CHECK_OK(fsched_graph_wait(g, NULL));
            CHECK_EQ_U64(c.bad, 0);
            CHECK_EQ_U64(c.ran, built + c.created);
            CHECK_EQ_U64(fsched_graph_task_count(g), built + c.created);
        }
        hit = fa.countdown < 0;
        CHECK_OK(fsched_graph_destroy(g));
        CHECK(fa.live == 0);
        if (!hit) break; /* every allocation has had its turn */
    }
    CHECK(step < 2000);
    printf("test_graph: chunks: each of %ld allocations failed in turn\n", step);
    free(c.tasks);
    free(c.handles);
    test_sched_free(s);
}

int main(void) {
    test_watchdog(900);
    test_bad_input();
    test_use_after_destroy();
    test_random_graphs();
    test_release();
    test_fail_fast_and_cancel();
    test_cancel_midway();
    test_affinity();
    test_priorities_and_costs();
    test_in_place_order();
    test_sources_ready();
    test_deep_chain();
    test_sources_spread();
    test_costs_whole_graph();
    test_result_for_late_successor();
    test_caller_gone();
    test_dynamic();
    test_composition();
    test_concurrent_graphs();
    test_run_cancel_wait_races();
    test_wait_and_dot();
    test_many_waiters();
    test_destroy_waits_for_run();
    test_out_of_memory();
    test_chunk_boundaries();
    test_out_of_memory_chunks();
    printf("test_graph: ok\n");
    return 0;
}
