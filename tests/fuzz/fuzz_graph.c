/* Fuzzes dependency graphs, pipelines and linear pipelines.

   Graphs: tasks with odd descs (priorities, costs, worker sets the scheduler may lack,
   on_caller), edges checked against a reachability oracle kept here (an edge is
   refused exactly when it would close a cycle), runs, waits with timeouts, cancels and
   re-runs from the driver, plain threads (waiting at once, or only once joined) and
   tasks; tasks that fail, publish results, add tasks and edges while running and
   misuse their own graph (wait, run, destroy from inside). After each run every edge
   held (a task started after each predecessor finished), the outcome's counts add up,
   and the states follow the policy.

   Pipelines: a chain producer -> [modify | peek]* -> consumer over hubs of 1 to 3
   envelopes, advances completed inline or later from another thread, run by the
   debugging scheduler (whole, or step by step) or the parallel one; the consumer must
   receive every item once, in order. Linear pipelines: 1 to 4 stages of every mode and
   odd max_in_flight, checked for every item once and serial stages in order.

   Input: a header (the scheduler), then operations (see drive). */
#define _GNU_SOURCE
#define FIBERSCHED_IMPLEMENTATION
#include "../../fibersched.h"
#include "fuzz.h"

#define FZ_OPS_MAX 40
#define FZ_TASKS 12
#define FZ_THREADS_MAX 4

enum { OP_ADD, OP_PRECEDE, OP_RUN, OP_WAIT, OP_CANCEL, OP_DESTROY_GRAPH, OP_DOT, OP_QUERY,
       OP_PIPELINE, OP_LINEAR, OP_DESTROY_SCHED, OP_COUNT };
static const char *const op_names[OP_COUNT] = {
    "fsched_graph_add", "fsched_graph_precede", "fsched_graph_run", "fsched_graph_wait",
    "fsched_graph_cancel", "fsched_graph_destroy", "fsched_graph_dump_dot", "graph queries",
    "pipeline", "linear pipeline", "fsched_destroy"};

typedef struct world world;

/* What a graph task does, chosen by the input. */
typedef struct task_info {
    world *w;
    int index;
    uint8_t behaviour;
    FZ_ATOMIC(uint64_t) started, ended; /* sequence numbers of this run (0: did not run) */
    FZ_ATOMIC(int) runs;
} task_info;

struct world {
    fsched_sched *s;
    int destroyed, single, workers, failing, main_bound;
    fz_alloc_state alloc;
    fsched_graph *g;
    fsched_graph_policy policy;
    fsched_graph_task *tasks[FZ_TASKS];
    task_info info[FZ_TASKS];
    int n_tasks;
    uint8_t reach[FZ_TASKS][FZ_TASKS]; /* reach[a][b]: a path a -> b */
    uint8_t edge[FZ_TASKS][FZ_TASKS];
    int running, ran_once, bad_workers;
    int loose; /* built since the last run began: a wait may describe that run, which
                  had none of it */
    FZ_ATOMIC(uint64_t) clock;
    FZ_ATOMIC(int) results_live;
    fz_thread threads[FZ_THREADS_MAX];
    int n_threads;
    FZ_ATOMIC(int) joining; /* the driver joins the plain threads */
    fz_actor *driver;
};

static uint64_t tick(world *w) { return ++w->clock; }

/* ---- graph tasks ---- */

static void release_result(void *result, void *user) {
    world *w = (world *)user;
    free(result);
    w->results_live--;
}

static int dynamic_task(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    return 0;
}

static int graph_task(fsched_graph_task *self, void *arg) {
    task_info *ti = (task_info *)arg;
    world *w = ti->w;
    fsched_graph *g = fsched_graph_task_graph(self);
    size_t i, n = fsched_graph_pred_count(self);
    int status = 0;
    ti->started = tick(w);
    ti->runs++;
    FZ_CHECK(g == w->g);
    FZ_CHECK(fsched_graph_task_state(self) == FSCHED_TASK_RUNNING);
    for (i = 0; i < n; i++) {
        fsched_graph_task *p = fsched_graph_pred(self, i);
        int *res = (int *)fsched_graph_result(p);
        FZ_CHECK(p != NULL);
        FZ_CHECK(fsched_graph_task_state(p) == FSCHED_TASK_FINISHED);
        if (res) FZ_CHECK(*res >= 0 && *res < FZ_TASKS);
    }
    FZ_CHECK(fsched_graph_pred(self, n) == NULL);
    if (ti->behaviour & 1) { /* publish a result, maybe twice (the first is released) */
        int k, times = ti->behaviour & 2 ? 2 : 1;
        for (k = 0; k < times; k++) {
            int *res = (int *)malloc(sizeof *res);
            FZ_CHECK(res != NULL);
            *res = ti->index;
            w->results_live++;
            FZ_EXPECT(fsched_graph_set_result(self, res, release_result, w),
                      "fsched_graph_set_result", FSCHED_OK);
        }
    }
    if (ti->behaviour & 4) { /* its own graph, from inside: refused */
        FZ_EXPECT(fsched_graph_wait(g, NULL), "fsched_graph_wait from a task of the graph",
                  FSCHED_ERR_WRONG_STATE);
        FZ_EXPECT(fsched_graph_run(g, w->s), "fsched_graph_run while it runs",
                  FSCHED_ERR_WRONG_STATE);
        FZ_EXPECT(fsched_graph_destroy(g), "fsched_graph_destroy while it runs",
                  FSCHED_ERR_WRONG_STATE);
        FZ_EXPECT(fsched_graph_precede(g, self, self), "fsched_graph_precede(self, self)",
                  FSCHED_ERR_INVALID_ARGUMENT, FSCHED_ERR_WRONG_STATE);
    }
    if (ti->behaviour & 8) { /* adds a task while running, and an edge to it */
        fsched_graph_task *t = NULL;
        fsched_result r = fsched_graph_add(g, dynamic_task, NULL, NULL, &t);
        FZ_EXPECT(r, "fsched_graph_add while running", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
        if (r == FSCHED_OK)
            FZ_EXPECT(fsched_graph_precede(g, self, t), "fsched_graph_precede while running",
                      FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
    }
    if (ti->behaviour & 16) fsched_yield();
    if (ti->behaviour & 32) fsched_sleep_for(50 * FZ_US);
    if (ti->behaviour & 64) status = 1 + (int)(ti->behaviour >> 7); /* fails */
    (void)fsched_graph_is_cancelled(self);
    ti->ended = tick(w);
    return status;
}

/* ---- graph checks ---- */

static void check_outcome(world *w, fsched_result r, const fsched_graph_outcome *o) {
    int i, j;
    size_t sum;
    FZ_EXPECT(r, "fsched_graph_wait", FSCHED_OK, FSCHED_ERR_TASK_FAILED, FSCHED_ERR_CANCELLED,
              FSCHED_ERR_OUT_OF_MEMORY);
    FZ_CHECK(o->result == r);
    if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
    sum = o->finished + o->failed_count + o->skipped + o->cancelled;
    if (w->loose) return; /* the last additions are the next run's */
    FZ_CHECK(sum >= (size_t)w->n_tasks); /* and the tasks the run added */
    FZ_CHECK(sum == fsched_graph_task_count(w->g) || w->failing);
    if (r == FSCHED_OK) FZ_CHECK(o->failed == NULL && o->failed_count == 0 && o->cancelled == 0);
    for (i = 0; i < w->n_tasks; i++) {
        task_info *ti = &w->info[i];
        fsched_task_state st = fsched_graph_task_state(w->tasks[i]);
        FZ_CHECK(ti->runs <= 1);
        if (ti->runs) FZ_CHECK(st == FSCHED_TASK_FINISHED || st == FSCHED_TASK_FAILED);
        else FZ_CHECK(st == FSCHED_TASK_FAILED || st == FSCHED_TASK_CANCELLED);
        if (st == FSCHED_TASK_FAILED && ti->runs)
            FZ_CHECK(fsched_graph_task_status(w->tasks[i]) == 1 + (int)(ti->behaviour >> 7));
        for (j = 0; j < w->n_tasks; j++) {
            task_info *tj = &w->info[j];
            if (!w->edge[i][j]) continue;
            /* the edge held: j started after i ended, and only if i finished */
            if (tj->runs) {
                FZ_CHECK(ti->runs && ti->ended < tj->started);
                FZ_CHECK(st == FSCHED_TASK_FINISHED);
            }
        }
    }
    if (r == FSCHED_OK)
        for (i = 0; i < w->n_tasks; i++) FZ_CHECK(w->info[i].runs == 1);
}

static void reset_runs(world *w) {
    int i;
    for (i = 0; i < w->n_tasks; i++) {
        w->info[i].runs = 0;
        w->info[i].started = w->info[i].ended = 0;
    }
}

static void graph_wait(world *w, uint64_t t, int timed) {
    fsched_graph_outcome o;
    fsched_result r;
    memset(&o, 0, sizeof o);
    if (!w->ran_once) {
        FZ_EXPECT(fsched_graph_wait(w->g, &o), "fsched_graph_wait before any run",
                  FSCHED_ERR_WRONG_STATE);
        return;
    }
    if (timed) {
        r = fsched_graph_wait_for(w->g, t, &o);
        if (r == FSCHED_ERR_TIMEOUT) {
            FZ_CHECK(!fz_endless(t));
            return;
        }
    } else {
        r = fsched_graph_wait(w->g, &o);
    }
    check_outcome(w, r, &o);
    w->running = 0;
}

static void op_add(world *w, fz_in *in) {
    fsched_graph_task_desc d;
    fsched_result r;
    uint8_t how = fz_u8(in);
    int i = w->n_tasks;
    fsched_graph_task *t = NULL;
    if (i == FZ_TASKS) return;
    memset(&d, 0, sizeof d);
    d.name = how & 1 ? "a task with a name longer than most names are" : NULL;
    d.priority = (fsched_priority)((how >> 1) % 5); /* 4: out of range */
    d.cost = how & 8 ? fz_edge64(in) : 0;
    d.workers = (how >> 4) % 4 == 1 ? (uint64_t)1 << 63 : (how >> 4) % 4 == 2 ? 1 : 0;
    w->info[i].w = w;
    w->info[i].index = i;
    w->info[i].behaviour = fz_u8(in);
    if (w->ran_once) w->loose = 1; /* building, even refused, releases the last run's */
    r = fsched_graph_add(w->g, graph_task, &w->info[i], &d, &t);
    if (w->running) {
        /* refused while the run goes on; it may have ended unseen */
        FZ_EXPECT(r, "fsched_graph_add while running, from outside", FSCHED_ERR_WRONG_STATE,
                  FSCHED_ERR_INVALID_ARGUMENT, FSCHED_ERR_OUT_OF_MEMORY, FSCHED_OK);
        if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
        if (r != FSCHED_OK) return;
        w->loose = 1;
    } else if (d.priority > FSCHED_PRIORITY_HIGH) {
        FZ_EXPECT(r, "fsched_graph_add(bad priority)", FSCHED_ERR_INVALID_ARGUMENT);
        return;
    }
    FZ_EXPECT(r, "fsched_graph_add", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
    if (r != FSCHED_OK) {
        FZ_CHECK(w->failing);
        return;
    }
    FZ_CHECK(t != NULL && fsched_graph_task_state(t) == FSCHED_TASK_WAITING);
    /* worker 63, or worker 0 of a scheduler without workers: none it has */
    if (d.workers == (uint64_t)1 << 63 || (d.workers && w->single)) w->bad_workers = 1;
    w->tasks[i] = t;
    w->reach[i][i] = 1;
    w->n_tasks++;
}

static void op_precede(world *w, fz_in *in) {
    int a, b, x, y;
    fsched_result r;
    if (!w->n_tasks) return;
    a = (int)fz_below(in, (uint32_t)w->n_tasks);
    b = (int)fz_below(in, (uint32_t)w->n_tasks);
    if (w->ran_once) w->loose = 1; /* building, even refused, releases the last run's */
    r = fsched_graph_precede(w->g, w->tasks[a], w->tasks[b]);
    if (w->running) {
        /* refused while the run goes on; it may have ended unseen */
        FZ_EXPECT(r, "fsched_graph_precede while running, from outside", FSCHED_ERR_WRONG_STATE,
                  FSCHED_ERR_INVALID_ARGUMENT, FSCHED_ERR_OUT_OF_MEMORY, FSCHED_OK);
        if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
        if (r != FSCHED_OK) return;
        FZ_CHECK(!w->reach[b][a]);
        w->loose = 1;
    } else if (w->reach[b][a]) { /* b reaches a (or a == b): a cycle */
        /* finding the cycle may need memory */
        FZ_EXPECT(r, "fsched_graph_precede closing a cycle", FSCHED_ERR_INVALID_ARGUMENT,
                  FSCHED_ERR_OUT_OF_MEMORY);
        if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
        return;
    }
    FZ_EXPECT(r, "fsched_graph_precede", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
    if (r != FSCHED_OK) {
        FZ_CHECK(w->failing);
        return;
    }
    w->edge[a][b] = 1;
    for (x = 0; x < w->n_tasks; x++)
        if (w->reach[x][a])
            for (y = 0; y < w->n_tasks; y++)
                if (w->reach[b][y]) w->reach[x][y] = 1;
}

static void op_run(world *w) {
    fsched_result r;
    if (w->destroyed) {
        FZ_EXPECT(fsched_graph_run(w->g, w->s), "fsched_graph_run on a destroyed scheduler",
                  FSCHED_ERR_INVALID_ARGUMENT);
        return;
    }
    /* a run refused while it goes on: only its own tasks can be sure it does (see
       graph_task); the driver waits for it first */
    if (w->running) graph_wait(w, 0, 0);
    reset_runs(w);
    r = fsched_graph_run(w->g, w->s);
    if (w->bad_workers) {
        FZ_EXPECT(r, "fsched_graph_run(workers s lacks)", FSCHED_ERR_INVALID_ARGUMENT);
        return;
    }
    FZ_EXPECT(r, "fsched_graph_run", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
    if (r != FSCHED_OK) {
        FZ_CHECK(w->failing);
        return;
    }
    w->running = 1;
    w->ran_once = 1;
    w->loose = 0;
}

static void *cancel_thread(void *p) {
    world *w = (world *)p;
    FZ_EXPECT(fsched_graph_cancel(w->g), "fsched_graph_cancel", FSCHED_OK);
    return NULL;
}

static void dot_write(const char *text, size_t len, void *user) {
    (void)text;
    *(size_t *)user += len;
}

static void op_query(world *w, fz_in *in) {
    int i;
    FZ_CHECK(fsched_graph_task_state(NULL) == FSCHED_TASK_WAITING);
    FZ_CHECK(fsched_graph_task_count(w->g) >= (size_t)w->n_tasks);
    for (i = 0; i < w->n_tasks; i++) {
        FZ_CHECK(fsched_graph_task_name(w->tasks[i]) != NULL);
        FZ_CHECK(fsched_graph_task_graph(w->tasks[i]) == w->g);
        FZ_EXPECT(fsched_graph_set_result(w->tasks[i], NULL, NULL, NULL),
                  "fsched_graph_set_result from outside the task", FSCHED_ERR_WRONG_STATE);
    }
    FZ_EXPECT(fsched_graph_add(w->g, NULL, NULL, NULL, NULL), "fsched_graph_add(NULL)",
              FSCHED_ERR_INVALID_ARGUMENT, FSCHED_ERR_WRONG_STATE);
    FZ_EXPECT(fsched_graph_add_graph(w->g, w->g, NULL, NULL), "fsched_graph_add_graph(itself)",
              FSCHED_ERR_INVALID_ARGUMENT, FSCHED_ERR_WRONG_STATE);
    (void)in;
}

/* ---- pipelines: a chain producer -> stages -> consumer ---- */

typedef struct pnode {
    fsched_link *in, *out;
    uint64_t next; /* producer: the next tag; consumer and stages: the tag expected */
    uint64_t items;
    int kind;      /* 0 producer, 1 modify, 2 peek, 3 consumer */
    int late;      /* complete from another thread */
    FZ_ATOMIC(int) bad;
} pnode;

static void *complete_later(void *p) {
    fsched_node *n = (fsched_node *)p;
    fz_nap(20 * FZ_US);
    FZ_EXPECT(fsched_node_complete(n, 1), "fsched_node_complete", FSCHED_OK);
    return NULL;
}

static int pnode_can(fsched_node *node, void *user) {
    pnode *p = (pnode *)user;
    if (p->kind == 0 && p->next == p->items) return FSCHED_NODE_FINISHED;
    return fsched_node_is_served(node);
}

static void pnode_advance(fsched_node *node, void *user) {
    pnode *p = (pnode *)user;
    if (p->kind == 0) {
        fsched_envelope *e = fsched_link_envelope(p->out);
        e->tag = p->next++;
        e->size = 0;
    } else {
        fsched_envelope *e = fsched_link_envelope(p->in);
        if (e->tag != p->next) p->bad = 1;
        p->next++;
    }
    if (p->late) {
        pthread_t t;
        if (pthread_create(&t, NULL, complete_later, node) == 0) {
            pthread_detach(t);
            return;
        }
    }
    FZ_EXPECT(fsched_node_complete(node, 1), "fsched_node_complete", FSCHED_OK);
    FZ_EXPECT(fsched_node_complete(node, 1), "fsched_node_complete twice", FSCHED_ERR_WRONG_STATE);
}

static int step_pred(void *user) { return --*(int *)user < 0; }

static void op_pipeline(world *w, fz_in *in) {
    uint8_t shape = fz_u8(in), how = fz_u8(in);
    int k, n = shape % 4 + 2; /* a producer, up to 3 modify or peek nodes, a consumer */
    uint64_t items = fz_u8(in) % 20;
    fsched_hub *hub = NULL, *none = NULL;
    fsched_node *nodes[5] = {0};
    pnode pn[5];
    fsched_pipeline *p = NULL;
    fsched_pipeline_desc pd;
    fsched_hub_desc hd;
    fsched_result r;
    fsched_node_report rep;
    memset(&rep, 0, sizeof rep);
    memset(pn, 0, sizeof pn);
    memset(&pd, 0, sizeof pd);
    pd.logger = fz_logger();
    FZ_EXPECT(fsched_pipeline_create(&pd, &p), "fsched_pipeline_create", FSCHED_OK);
    memset(&hd, 0, sizeof hd);
    hd.logger = fz_logger();
    FZ_EXPECT(fsched_hub_create(&hd, &none), "fsched_hub_create(0 envelopes)",
              FSCHED_ERR_INVALID_ARGUMENT);
    hd.envelopes = (uint32_t)(shape >> 2) % 3 + 1;
    hd.capacity = how & 1 ? 64 : 0;
    FZ_EXPECT(fsched_hub_create(&hd, &hub), "fsched_hub_create", FSCHED_OK);
    for (k = 0; k < n; k++) {
        fsched_node_desc nd;
        fsched_link_kind kind;
        memset(&nd, 0, sizeof nd);
        pn[k].kind = k == 0 ? 0 : k == n - 1 ? 3 : 1 + (int)((how >> (1 + k)) & 1);
        pn[k].items = items;
        pn[k].late = (how >> 5) & 1 && k == 1;
        nd.label = "node";
        nd.user = &pn[k];
        nd.can_advance = pnode_can;
        nd.advance = pnode_advance;
        nd.logger = fz_logger();
        FZ_EXPECT(fsched_node_create(&nd, &nodes[k]), "fsched_node_create", FSCHED_OK);
        kind = pn[k].kind == 0   ? FSCHED_LINK_PRODUCE
               : pn[k].kind == 1 ? FSCHED_LINK_MODIFY
               : pn[k].kind == 2 ? FSCHED_LINK_PEEK
                                 : FSCHED_LINK_CONSUME;
        FZ_EXPECT(fsched_node_link(nodes[k], hub, kind, k == 0 ? &pn[k].out : &pn[k].in),
                  "fsched_node_link", FSCHED_OK);
    }
    for (k = 0; k < n; k++)
        FZ_EXPECT(fsched_pipeline_add(p, nodes[k]), "fsched_pipeline_add", FSCHED_OK);
    FZ_EXPECT(fsched_pipeline_add(p, nodes[0]), "fsched_pipeline_add twice", FSCHED_ERR_WRONG_STATE);
    FZ_EXPECT(fsched_hub_destroy(hub), "fsched_hub_destroy while linked", FSCHED_ERR_WRONG_STATE);
    FZ_EXPECT(fsched_node_complete(nodes[0], 1), "fsched_node_complete before a run",
              FSCHED_ERR_WRONG_STATE);
    switch ((how >> 6) % 4) {
    case 0: r = fsched_pipeline_run(p, NULL); break;
    case 1: {
        int steps = (int)(fz_u8(in) % 16);
        r = fsched_pipeline_run_until(p, step_pred, &steps);
        if (r == FSCHED_OK && !fsched_pipeline_is_finished(p)) r = fsched_pipeline_run(p, NULL);
        break;
    }
    default: r = fsched_pipeline_run(p, w->destroyed ? NULL : w->s); break;
    }
    /* one producer and a hub every node reads: nothing can starve */
    FZ_EXPECT(r, "fsched_pipeline_run", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
    FZ_CHECK(fsched_pipeline_is_finished(p));
    FZ_EXPECT(fsched_pipeline_run(p, NULL), "fsched_pipeline_run twice", FSCHED_ERR_WRONG_STATE);
    FZ_EXPECT(fsched_pipeline_step(p), "fsched_pipeline_step after the end", FSCHED_ERR_WRONG_STATE);
    for (k = 0; k < n; k++) {
        FZ_EXPECT(fsched_node_get_report(nodes[k], &rep), "fsched_node_get_report", FSCHED_OK);
        FZ_CHECK(rep.end != FSCHED_NODE_RUNNING);
        if (r == FSCHED_OK) {
            FZ_CHECK(rep.end == FSCHED_NODE_DONE);
            FZ_CHECK(rep.advances == items); /* every item passed every node */
        }
        FZ_CHECK(!pn[k].bad); /* in order */
    }
    FZ_EXPECT(fsched_pipeline_destroy(p), "fsched_pipeline_destroy", FSCHED_OK);
    FZ_EXPECT(fsched_hub_destroy(hub), "fsched_hub_destroy", FSCHED_OK);
}

/* ---- linear pipelines ---- */

typedef struct linear {
    uint64_t n, produced;
    FZ_ATOMIC(uint64_t) sum, last_in_order;
    FZ_ATOMIC(int) bad, inside[4];
    fsched_stage_mode modes[4];
} linear;

static void *lin_input(void *user, void *item, int *stop) {
    linear *l = (linear *)user;
    (void)item;
    if (l->produced == l->n) {
        *stop = 1;
        return NULL;
    }
    return (void *)(uintptr_t)++l->produced; /* 1..n */
}

#define LIN_STAGE(k)                                                                       \
    static void *lin_stage##k(void *user, void *item, int *stop) {                       \
        linear *l = (linear *)user;                                                      \
        (void)stop;                                                                      \
        if (l->modes[k] != FSCHED_STAGE_PARALLEL && l->inside[k]++ != 0) l->bad = 1;     \
        if (l->modes[k] == FSCHED_STAGE_SERIAL_IN_ORDER) {                               \
            if ((uintptr_t)item != l->last_in_order + 1) l->bad = 1;                     \
            l->last_in_order = (uintptr_t)item;                                          \
        }                                                                                \
        if (k == 3) l->sum += (uintptr_t)item;                                           \
        if (l->modes[k] != FSCHED_STAGE_PARALLEL) l->inside[k]--;                        \
        return item;                                                                     \
    }
LIN_STAGE(1)
LIN_STAGE(2)
LIN_STAGE(3)

static void op_linear(world *w, fz_in *in) {
    static const size_t flights[] = {0, 1, 2, 3, 1000, SIZE_MAX};
    uint8_t how = fz_u8(in);
    linear *l = (linear *)calloc(1, sizeof *l);
    fsched_stage st[4];
    fsched_parallel_pipeline_desc d;
    int k, in_order = 0;
    fsched_result r;
    FZ_CHECK(l != NULL);
    l->n = fz_u8(in) % 40;
    memset(st, 0, sizeof st);
    memset(&d, 0, sizeof d);
    d.max_in_flight = flights[how % 6];
    d.stall_report_ns = (how >> 3) & 1 ? UINT64_MAX : 0;
    d.logger = fz_logger();
    st[0].fn = lin_input;
    st[0].user = l;
    st[1].fn = lin_stage1;
    st[2].fn = lin_stage2;
    st[3].fn = lin_stage3;
    for (k = 1; k < 4; k++) {
        st[k].user = l;
        l->modes[k] = st[k].mode = (fsched_stage_mode)((how >> (2 * k)) % 3);
        /* only one serial in-order stage is checked for order (each sees 1..n) */
        if (l->modes[k] == FSCHED_STAGE_SERIAL_IN_ORDER && in_order++)
            l->modes[k] = st[k].mode = FSCHED_STAGE_SERIAL_OUT_OF_ORDER;
    }
    /* from a task, or from a plain thread on the default scheduler */
    r = fsched_parallel_pipeline_run(&d, st, 4);
    FZ_EXPECT(r, "fsched_parallel_pipeline_run", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
    if (r == FSCHED_OK) {
        FZ_CHECK(!l->bad);
        FZ_CHECK(l->sum == l->n * (l->n + 1) / 2);
    }
    FZ_EXPECT(fsched_parallel_pipeline_run(&d, st, 0), "fsched_parallel_pipeline_run(no stages)",
              FSCHED_ERR_INVALID_ARGUMENT);
    st[2].mode = (fsched_stage_mode)7;
    FZ_EXPECT(fsched_parallel_pipeline_run(&d, st, 4), "fsched_parallel_pipeline_run(bad mode)",
              FSCHED_ERR_INVALID_ARGUMENT);
    free(l);
    (void)w;
}

/* ---- driving ---- */

static void *wait_thread(void *p) {
    world *w = (world *)p;
    fsched_graph_outcome o;
    fsched_result r = fsched_graph_wait(w->g, &o);
    FZ_EXPECT(r, "fsched_graph_wait from a plain thread", FSCHED_OK, FSCHED_ERR_TASK_FAILED,
              FSCHED_ERR_CANCELLED, FSCHED_ERR_OUT_OF_MEMORY, FSCHED_ERR_WRONG_STATE);
    return NULL;
}

/* A plain thread that begins its wait as late as it can: when the driver joins it. */
static void *late_wait_thread(void *p) {
    world *w = (world *)p;
    while (!w->joining) fz_nap(20 * FZ_US);
    return wait_thread(p);
}

/* Joins the plain threads. A thread's wait describes the run that is current when the
   wait begins, which may be a run the driver began after it started the thread; on a
   single-threaded scheduler only the driver's own waits run that run's tasks, so the
   driver ends the run before it joins. */
static void join_threads(world *w) {
    fz_actor *d = w->driver;
    const char *step = d->step;
    int k;
    if (!w->n_threads) return;
    fz_step(d, "the last wait before joining the plain threads", d->op);
    if (w->running) graph_wait(w, 0, 0);
    fz_step(d, "joining the plain threads", d->op);
    w->joining = 1;
    for (k = 0; k < w->n_threads; k++) fz_thread_join(&w->threads[k]);
    w->joining = 0;
    w->n_threads = 0;
    fz_step(d, step, d->op);
}

static void drive(world *w, fz_in *in) {
    uint32_t i;
    for (i = 1; i <= FZ_OPS_MAX && !fz_done(in); i++) {
        uint8_t code = (uint8_t)fz_below(in, OP_COUNT);
        fz_step(w->driver, op_names[code], i);
        switch (code) {
        case OP_ADD: op_add(w, in); break;
        case OP_PRECEDE: op_precede(w, in); break;
        case OP_RUN: op_run(w); break;
        case OP_WAIT: {
            uint8_t how = fz_u8(in);
            if (how & 1 && w->running && w->n_threads < FZ_THREADS_MAX)
                FZ_CHECK(fz_thread_start(&w->threads[w->n_threads++],
                                         how & 4 ? late_wait_thread : wait_thread, w));
            graph_wait(w, fz_timeout(in), how & 2);
            break;
        }
        case OP_CANCEL:
            if (fz_u8(in) & 1 && w->n_threads < FZ_THREADS_MAX)
                FZ_CHECK(fz_thread_start(&w->threads[w->n_threads++], cancel_thread, w));
            else
                FZ_EXPECT(fsched_graph_cancel(w->g), "fsched_graph_cancel", FSCHED_OK);
            break;
        case OP_DESTROY_GRAPH: {
            fsched_result r;
            join_threads(w);
            r = fsched_graph_destroy(w->g);
            /* a run not yet waited for may have ended */
            if (w->running) FZ_EXPECT(r, "fsched_graph_destroy", FSCHED_OK, FSCHED_ERR_WRONG_STATE);
            else FZ_EXPECT(r, "fsched_graph_destroy", FSCHED_OK);
            if (r == FSCHED_OK) { /* it was destroyed: make the next */
                fsched_graph_desc gd;
                FZ_EXPECT(fsched_graph_destroy(w->g), "fsched_graph_destroy twice",
                          FSCHED_ERR_INVALID_ARGUMENT);
                memset(&gd, 0, sizeof gd);
                gd.logger = fz_logger();
                gd.on_failure = w->policy;
                FZ_EXPECT(fsched_graph_create(&gd, &w->g), "fsched_graph_create", FSCHED_OK);
                memset(w->reach, 0, sizeof w->reach);
                memset(w->edge, 0, sizeof w->edge);
                w->n_tasks = 0;
                w->ran_once = w->bad_workers = w->running = w->loose = 0;
            }
            break;
        }
        case OP_DOT: {
            size_t bytes = 0;
            FZ_EXPECT(fsched_graph_dump_dot(w->g, dot_write, &bytes), "fsched_graph_dump_dot",
                      FSCHED_OK);
            FZ_CHECK(bytes > 0);
            break;
        }
        case OP_QUERY: op_query(w, in); break;
        case OP_PIPELINE: op_pipeline(w, in); break;
        case OP_LINEAR: op_linear(w, in); break;
        default:
            if (!w->destroyed) {
                if (w->main_bound && !w->single) {
                    FZ_EXPECT(fsched_unbind(), "fsched_unbind", FSCHED_OK);
                    w->main_bound = 0;
                }
                FZ_EXPECT(fsched_destroy(w->s), "fsched_destroy", FSCHED_OK);
                w->destroyed = 1;
                w->main_bound = 0;
                if (w->running) graph_wait(w, 0, 0); /* the drain finished the run */
            }
            break;
        }
        fz_step_end(w->driver);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size, 0};
    world *w = (world *)calloc(1, sizeof *w);
    fsched_desc d;
    fsched_graph_desc gd;
    fsched_allocator a;
    uint8_t shape;
    FZ_CHECK(w != NULL);
    fz_input_begin();
    w->driver = fz_actor_new();
    shape = fz_u8(&in);
    memset(&d, 0, sizeof d);
    d.workers = shape % 4;
    d.single_threaded = (shape >> 2) % 4 == 0;
    if (d.single_threaded) d.workers = 0; /* else refused */
    d.stack_size = 64 * 1024;
    d.logger = fz_logger();
    w->single = d.single_threaded;
    w->policy = (shape >> 4) & 1 ? FSCHED_GRAPH_FAIL_FAST : FSCHED_GRAPH_SKIP_DEPENDENTS;
    FZ_EXPECT(fsched_create(&d, &w->s), "fsched_create", FSCHED_OK);
    if (w->single || (shape >> 5) & 1) {
        FZ_EXPECT(fsched_bind(w->s), "fsched_bind", FSCHED_OK);
        w->main_bound = 1;
    }
    memset(&gd, 0, sizeof gd);
    gd.name = "fuzz";
    gd.on_failure = w->policy;
    gd.logger = fz_logger();
    fz_allocator_from(&in, &w->alloc, &a);
    gd.allocator = a;
    w->failing = w->alloc.mode != 0;
    fz_step(w->driver, "fsched_graph_create", 0);
    if (fsched_graph_create(&gd, &w->g) == FSCHED_OK) {
        drive(w, &in);
        fz_step(w->driver, "the last wait", 0);
        if (w->running) graph_wait(w, 0, 0);
        join_threads(w);
        FZ_EXPECT(fsched_graph_destroy(w->g), "fsched_graph_destroy", FSCHED_OK);
    } else {
        FZ_CHECK(w->failing);
    }
    if (!w->destroyed) {
        if (w->main_bound) FZ_EXPECT(fsched_unbind(), "fsched_unbind", FSCHED_OK);
        FZ_EXPECT(fsched_destroy(w->s), "fsched_destroy", FSCHED_OK);
    }
    fz_step_end(w->driver);
    FZ_CHECK(w->results_live == 0); /* every result released */
    FZ_CHECK(w->alloc.live == 0);   /* the graph gave back all it took */
    free(w);
    return 0;
}
