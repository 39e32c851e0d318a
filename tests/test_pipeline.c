/* Pipelines: both schedulers compute the same results on the same pipelines; the
   debugging scheduler's log is the same on every run and matches the expected log of a
   small pipeline; stepping and running until a predicate hold; modify and peek links see
   every envelope in order before consumers; the envelopes bound what is in flight;
   advances complete from other threads and tasks; a starved pipeline says which node
   waits on which hub; a finished node gives its envelopes back; linear pipelines keep
   order in serial stages, one item at a time in serial stages, and never more items in
   flight than the bound, also when stages wait for later items (from tasks and from a
   bound thread, on one worker and on several); bad input is refused.

   Built with FIBERSCHED_NO_THREADS, the main thread binds to the scheduler (its waits
   run the tasks) and advances complete from tasks instead of threads. */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <stdint.h>



static fsched_hub *hub_new(const char *name, uint32_t envelopes, size_t capacity) {
    fsched_hub_desc d;
    fsched_hub *h;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.envelopes = envelopes;
    d.capacity = capacity;
    CHECK_OK(fsched_hub_create(&d, &h));
    return h;
}

/* ---- a log sink that keeps everything ---- */

typedef struct log_buf {
    char *text;
    size_t len, cap;
} log_buf;

static void log_line(const char *line, void *user) {
    log_buf *b = (log_buf *)user;
    size_t n = strlen(line);
    if (b->len + n + 2 > b->cap) {
        b->cap = (b->len + n + 2) * 2;
        CHECK((b->text = (char *)realloc(b->text, b->cap)) != NULL);
    }
    memcpy(b->text + b->len, line, n);
    b->len += n;
    b->text[b->len++] = '\n';
    b->text[b->len] = 0;
}

/* ---- a three-node pipeline: source -> squares -> sink, with optional stages ----
   The source produces the numbers 1..n, `per` to an envelope; the middle node squares
   them (and drops every multiple of 7, keeping its output envelope when nothing is
   left); the sink sums. Advances may complete later, from a thread or a task. */

enum { SYNC = 0, FROM_TASK = 1, FROM_THREAD = 2 };

typedef struct line_ctx line_ctx;

typedef struct src_node {
    line_ctx *c;
    fsched_link *out;
    uint64_t next, n;
    uint32_t per;
    int initialized; /* times its initialize ran */
} src_node;

typedef struct mid_node {
    line_ctx *c;
    fsched_node *node;
    fsched_link *in, *out;
    int how;
    uint64_t seen_tag; /* tags must arrive in order */
    int order_bad;
#if TEST_THREADS
    test_thread completer; /* the thread completing the last advance, joined later */
    int has_completer;
#endif
} mid_node;

typedef struct sink_node {
    line_ctx *c;
    fsched_link *in;
    uint64_t sum, count, chunks;
    uint64_t next_tag;
    int order_bad;
    int terminated;
} sink_node;

struct line_ctx {
    fsched_sched *s;
    uint32_t envelopes;
    uint64_t in_flight, max_in_flight; /* atomic: full envelopes and those being worked on */
    src_node src;
    mid_node mid;
    sink_node sink;
    fsched_hub *a, *b;
    fsched_node *nodes[3];
};

static void src_initialize(fsched_node *node, void *user) {
    (void)node;
    ((src_node *)user)->initialized++;
}

static int src_can(fsched_node *node, void *user) {
    src_node *sn = (src_node *)user;
    if (sn->next == sn->n) return FSCHED_NODE_FINISHED;
    return fsched_node_is_served(node);
}

static void src_advance(fsched_node *node, void *user) {
    src_node *sn = (src_node *)user;
    fsched_envelope *e = fsched_link_envelope(sn->out);
    uint64_t *v = (uint64_t *)e->data, k = 0, now;
    CHECK(e->capacity >= sn->per * sizeof(uint64_t));
    while (k < sn->per && sn->next < sn->n) v[k++] = ++sn->next;
    e->size = k * sizeof(uint64_t);
    e->tag = (sn->next - 1) / sn->per;
    now = ADD(&sn->c->in_flight, 1);
    if (now > LOAD(&sn->c->max_in_flight)) STORE(&sn->c->max_in_flight, now);
    CHECK_OK(fsched_node_complete(node, 1));
}

static void mid_work(void *user) {
    mid_node *mn = (mid_node *)user;
    fsched_envelope *in = fsched_link_envelope(mn->in), *out = fsched_link_envelope(mn->out);
    const uint64_t *v = (const uint64_t *)in->data;
    uint64_t *w = (uint64_t *)out->data;
    size_t n = in->size / sizeof *v, k = 0, i;
    if (in->tag != mn->seen_tag) mn->order_bad = 1;
    mn->seen_tag = in->tag + 1;
    for (i = 0; i < n; i++)
        if (v[i] % 7) w[k++] = v[i] * v[i];
    out->size = k * sizeof *w;
    out->tag = in->tag;
    if (!k) CHECK_OK(fsched_link_keep(mn->out)); /* nothing left: keep the empty envelope */
    SUB(&mn->c->in_flight, 1);
    if (k) ADD(&mn->c->in_flight, 1);
    CHECK_OK(fsched_node_complete(mn->node, 1));
}

#if TEST_THREADS
static void mid_thread(void *user) { mid_work(user); }

static void mid_join_completer(mid_node *mn) {
    if (mn->has_completer) thread_join(mn->completer);
    mn->has_completer = 0;
}
#endif

static void mid_advance(fsched_node *node, void *user) {
    mid_node *mn = (mid_node *)user;
    mn->node = node;
    if (mn->how == FROM_TASK) {
        CHECK_OK(fsched_spawn(mn->c->s, mid_work, mn));
#if TEST_THREADS
    } else if (mn->how == FROM_THREAD) {
        mid_join_completer(mn); /* the previous advance's thread has completed it by now */
        mn->completer = thread_run(mid_thread, mn);
        mn->has_completer = 1;
#endif
    } else {
        mid_work(mn);
    }
}

static void mid_terminate(fsched_node *node, void *user) {
    (void)node;
#if TEST_THREADS
    mid_join_completer((mid_node *)user);
#else
    (void)user;
#endif
}

static void sink_advance(fsched_node *node, void *user) {
    sink_node *sk = (sink_node *)user;
    fsched_envelope *e = fsched_link_envelope(sk->in);
    const uint64_t *v = (const uint64_t *)e->data;
    size_t n = e->size / sizeof *v, i;
    if (e->tag < sk->next_tag) sk->order_bad = 1; /* chunks may be dropped, never reordered */
    sk->next_tag = e->tag + 1;
    for (i = 0; i < n; i++) sk->sum += v[i];
    sk->count += n;
    sk->chunks++;
    SUB(&sk->c->in_flight, 1);
    CHECK_OK(fsched_node_complete(node, 1));
}

static void sink_post(fsched_node *node, void *user, int advanced) {
    (void)node;
    CHECK(advanced);
    (void)user;
}

static void sink_terminate(fsched_node *node, void *user) {
    (void)node;
    ((sink_node *)user)->terminated++;
}

static uint64_t expected_sum(uint64_t n, uint64_t *count) {
    uint64_t s = 0, i;
    *count = 0;
    for (i = 1; i <= n; i++)
        if (i % 7) {
            s += i * i;
            ++*count;
        }
    return s;
}

/* Builds the pipeline into c (c->s set when advances complete from tasks). */
static fsched_pipeline *line_build(line_ctx *c, uint64_t n, uint32_t per, uint32_t envelopes,
                                   int how, log_buf *log) {
    fsched_pipeline_desc pd;
    fsched_node_desc d;
    fsched_pipeline *p;
    fsched_sched *s = c->s;
    memset(c, 0, sizeof *c);
    c->s = s;
    c->envelopes = envelopes;
    c->src.c = c->mid.c = c->sink.c = c;
    c->src.n = n;
    c->src.per = per;
    c->mid.how = how;
    c->a = hub_new("numbers", envelopes, per * sizeof(uint64_t));
    c->b = hub_new("squares", envelopes, per * sizeof(uint64_t));
    memset(&d, 0, sizeof d);
    d.label = "source";
    d.user = &c->src;
    d.initialize = src_initialize;
    d.can_advance = src_can;
    d.advance = src_advance;
    CHECK_OK(fsched_node_create(&d, &c->nodes[0]));
    CHECK_OK(fsched_node_link(c->nodes[0], c->a, FSCHED_LINK_PRODUCE, &c->src.out));
    memset(&d, 0, sizeof d);
    d.label = "squares";
    d.user = &c->mid;
    d.advance = mid_advance;
    d.terminate = mid_terminate;
    CHECK_OK(fsched_node_create(&d, &c->nodes[1]));
    CHECK_OK(fsched_node_link(c->nodes[1], c->a, FSCHED_LINK_CONSUME, &c->mid.in));
    CHECK_OK(fsched_node_link(c->nodes[1], c->b, FSCHED_LINK_PRODUCE, &c->mid.out));
    memset(&d, 0, sizeof d);
    d.label = "sink";
    d.user = &c->sink;
    d.advance = sink_advance;
    d.post_advance = sink_post;
    d.terminate = sink_terminate;
    CHECK_OK(fsched_node_create(&d, &c->nodes[2]));
    CHECK_OK(fsched_node_link(c->nodes[2], c->b, FSCHED_LINK_CONSUME, &c->sink.in));
    memset(&pd, 0, sizeof pd);
    pd.name = "line";
    pd.log = log ? log_line : NULL;
    pd.log_user = log;
    CHECK_OK(fsched_pipeline_create(&pd, &p));
    CHECK_OK(fsched_pipeline_add(p, c->nodes[0]));
    CHECK_OK(fsched_pipeline_add(p, c->nodes[1]));
    CHECK_OK(fsched_pipeline_add(p, c->nodes[2]));
    return p;
}

static void line_free(line_ctx *c, fsched_pipeline *p) {
    CHECK_RESULT(fsched_hub_destroy(c->a), FSCHED_ERR_WRONG_STATE); /* still linked */
    CHECK_OK(fsched_pipeline_destroy(p));
    CHECK_OK(fsched_hub_destroy(c->a));
    CHECK_OK(fsched_hub_destroy(c->b));
}

static void line_check(const line_ctx *c, uint64_t n) {
    uint64_t count, sum = expected_sum(n, &count);
    CHECK_EQ_U64(c->sink.sum, sum);
    CHECK_EQ_U64(c->sink.count, count);
    CHECK(!c->sink.order_bad && !c->mid.order_bad);
    CHECK_EQ_U64(c->sink.terminated, 1);
    CHECK_EQ_U64(LOAD(&c->in_flight), 0);
    /* memory is bounded by the envelopes: the full ones in both hubs, and those held */
    CHECK(LOAD(&c->max_in_flight) <= 2u * c->envelopes);
}

static const char expected_small_log[] =
    "[scheduler]: Node has been added: source\n"
    "[scheduler]: Node has been added: squares\n"
    "[scheduler]: Node has been added: sink\n"
    "[scheduler]: Starting pipeline initialization...\n"
    "[scheduler]: Initializing node source ...\n"
    "[scheduler]: Initializing node squares ...\n"
    "[scheduler]: Initializing node sink ...\n"
    "[scheduler]: Pipeline initialized.\n"
    "[scheduler]: Updating node source ...\n"
    "[scheduler]: Node did advance data.\n"
    "[scheduler]: Updating node squares ...\n"
    "[scheduler]: Node did advance data.\n"
    "[scheduler]: Updating node sink ...\n"
    "[scheduler]: Node did advance data.\n"
    "[scheduler]: Generation 0 has ended.\n"
    "[scheduler]: Updating node source ...\n"
    "[scheduler]: Node did advance data.\n"
    "[scheduler]: Updating node squares ...\n"
    "[scheduler]: Node did advance data.\n"
    "[scheduler]: Updating node sink ...\n"
    "[scheduler]: Node did advance data.\n"
    "[scheduler]: Generation 1 has ended.\n"
    "[scheduler]: Updating node source ...\n"
    "[scheduler]: Updating node squares ...\n"
    "[scheduler]: Updating node sink ...\n"
    "[scheduler]: Generation 2 has ended.\n"
    "[scheduler]: Termination condition met.\n"
    "[scheduler]: Starting pipeline termination...\n"
    "[scheduler]: Terminating node source ...\n"
    "[scheduler]: Terminating node squares ...\n"
    "[scheduler]: Terminating node sink ...\n"
    "[scheduler]: Pipeline terminated.\n";

/* The debugging scheduler: the expected log for 8 numbers, 4 per envelope, through hubs
   of 2 envelopes (7 is dropped on the way), the same on every run however advances
   complete, and the same results. */
static void test_debug_log(fsched_sched *s) {
    int how;
    for (how = SYNC; how <= FROM_THREAD; how++) {
        line_ctx c;
        log_buf log;
        fsched_pipeline *p;
        memset(&log, 0, sizeof log);
#if !TEST_THREADS
        if (how == FROM_THREAD) continue;
#endif
        c.s = s;
        p = line_build(&c, 8, 4, 2, how, &log);
        CHECK_OK(fsched_pipeline_run(p, NULL));
        line_check(&c, 8);
        if (strcmp(log.text, expected_small_log) != 0) {
            fprintf(stderr, "log:\n%s\nexpected:\n%s", log.text, expected_small_log);
            CHECK(0);
        }
        CHECK_RESULT(fsched_pipeline_run(p, NULL), FSCHED_ERR_WRONG_STATE); /* ran once */
        CHECK_RESULT(fsched_pipeline_step(p), FSCHED_ERR_WRONG_STATE);      /* after the end */
        line_free(&c, p);
        free(log.text);
    }
}

/* A longer run: the same log twice, and the parallel scheduler computes the same. */
static void test_same_results(fsched_sched *s) {
    uint64_t n = 20000 / TEST_SCALE;
    uint32_t envelopes;
    for (envelopes = 1; envelopes <= 8; envelopes *= 2) {
        line_ctx c;
        log_buf first, second;
        fsched_pipeline *p;
        int how;
        memset(&first, 0, sizeof first);
        memset(&second, 0, sizeof second);
        c.s = s;
        p = line_build(&c, n, 16, envelopes, FROM_TASK, &first);
        CHECK_OK(fsched_pipeline_run(p, NULL));
        line_check(&c, n);
        line_free(&c, p);
        c.s = s;
        p = line_build(&c, n, 16, envelopes, SYNC, &second);
        CHECK_OK(fsched_pipeline_run(p, NULL));
        line_check(&c, n);
        line_free(&c, p);
        CHECK(first.len == second.len && memcmp(first.text, second.text, first.len) == 0);
        free(first.text);
        free(second.text);
        for (how = SYNC; how <= FROM_THREAD; how++) {
            fsched_node_report rep;
            int k;
#if !TEST_THREADS
            if (how == FROM_THREAD) continue;
#endif
            c.s = s;
            p = line_build(&c, how == FROM_THREAD ? n / 20 : n, 16, envelopes, how, NULL);
            CHECK_OK(fsched_pipeline_run(p, s));
            line_check(&c, how == FROM_THREAD ? n / 20 : n);
            for (k = 0; k < 3; k++) {
                CHECK_OK(fsched_node_get_report(c.nodes[k], &rep));
                CHECK(rep.end == FSCHED_NODE_DONE && rep.waiting_on == NULL);
            }
            CHECK_RESULT(fsched_pipeline_run(p, s), FSCHED_ERR_WRONG_STATE);
            line_free(&c, p);
        }
    }
}

/* Stepping: the first step initializes (as an explicit initialize does); one node per
   step; run_until stops when the predicate holds; the end comes with the result, then
   steps are refused. */
static int sink_has_three(void *user) { return ((line_ctx *)user)->sink.count >= 3; }

static void test_stepping(fsched_sched *s) {
    line_ctx c;
    log_buf log;
    fsched_pipeline *p;
    fsched_result r;
    uint32_t steps = 0;
    memset(&log, 0, sizeof log);
    c.s = s;
    p = line_build(&c, 8, 4, 2, SYNC, &log);
    CHECK(c.src.initialized == 0);
    CHECK_OK(fsched_pipeline_step(p)); /* initializes, then the source */
    CHECK(c.src.initialized == 1);
    CHECK(c.src.next == 4 && c.sink.count == 0);
    CHECK_RESULT(fsched_pipeline_initialize(p), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_pipeline_step(p)); /* squares */
    CHECK_EQ_U64(fsched_hub_full_count(c.b), 1);
    CHECK_OK(fsched_pipeline_run_until(p, sink_has_three, &c));
    CHECK(c.sink.count == 4 && !fsched_pipeline_is_finished(p)); /* 1, 2, 3, 4 in one envelope */
    do {
        r = fsched_pipeline_step(p);
        steps++;
    } while (!fsched_pipeline_is_finished(p));
    CHECK_OK(r);
    CHECK(steps > 3);
    line_check(&c, 8);
    CHECK_RESULT(fsched_pipeline_step(p), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_pipeline_run_until(p, sink_has_three, &c), FSCHED_ERR_WRONG_STATE);
    CHECK(strcmp(log.text, expected_small_log) == 0); /* stepped or run: the same */
    line_free(&c, p);
    free(log.text);

    /* an explicit initialize first: the same log */
    memset(&log, 0, sizeof log);
    c.s = s;
    p = line_build(&c, 8, 4, 2, SYNC, &log);
    CHECK_OK(fsched_pipeline_initialize(p));
    CHECK(c.src.initialized == 1);
    CHECK_RESULT(fsched_pipeline_initialize(p), FSCHED_ERR_WRONG_STATE);
    do r = fsched_pipeline_step(p);
    while (!fsched_pipeline_is_finished(p));
    CHECK_OK(r);
    line_check(&c, 8);
    CHECK(strcmp(log.text, expected_small_log) == 0);
    line_free(&c, p);
    free(log.text);
}

/* ---- modify and peek links: every envelope passes them in order, before consumers ---- */

typedef struct stage_ctx {
    fsched_link *link;
    uint64_t add;        /* MODIFY: added to every value */
    uint64_t expect_tag; /* the next tag it must see */
    uint64_t seen;
    int bad;
    uint64_t peek_sum;   /* PEEK: the values it saw */
} stage_ctx;

static void stage_advance(fsched_node *node, void *user) {
    stage_ctx *st = (stage_ctx *)user;
    fsched_envelope *e = fsched_link_envelope(st->link);
    uint64_t *v = (uint64_t *)e->data;
    size_t n = e->size / sizeof *v, i;
    if (e->tag != st->expect_tag) st->bad = 1;
    st->expect_tag++;
    st->seen++;
    for (i = 0; i < n; i++) {
        if (st->add) v[i] += st->add;
        else st->peek_sum += v[i];
    }
    CHECK_OK(fsched_node_complete(node, 1));
}

typedef struct stages_run {
    src_node src;
    sink_node sink;
    stage_ctx st[3];
    uint64_t in_flight, max_in_flight;
} stages_run;

static void stages_once(fsched_sched *s, int parallel, uint64_t n) {
    fsched_hub *h = hub_new("values", 3, 8 * sizeof(uint64_t));
    fsched_pipeline *p;
    fsched_node_desc d;
    fsched_node *nodes[5];
    line_ctx lc; /* for the source's and sink's bookkeeping */
    stages_run r;
    uint64_t count, i, expect = 0;
    int k;
    memset(&r, 0, sizeof r);
    memset(&lc, 0, sizeof lc);
    r.src.c = r.sink.c = &lc;
    r.src.n = n;
    r.src.per = 8;
    r.st[0].add = 1000;
    r.st[2].add = 1000000;
    CHECK_OK(fsched_pipeline_create(NULL, &p));
    memset(&d, 0, sizeof d);
    d.label = "source";
    d.user = &r.src;
    d.can_advance = src_can;
    d.advance = src_advance;
    CHECK_OK(fsched_node_create(&d, &nodes[0]));
    CHECK_OK(fsched_node_link(nodes[0], h, FSCHED_LINK_PRODUCE, &r.src.out));
    for (k = 0; k < 3; k++) { /* modify, peek, modify: in this order on the hub */
        memset(&d, 0, sizeof d);
        d.label = k == 1 ? "peek" : "modify";
        d.user = &r.st[k];
        d.advance = stage_advance;
        CHECK_OK(fsched_node_create(&d, &nodes[1 + k]));
        CHECK_OK(fsched_node_link(nodes[1 + k], h, k == 1 ? FSCHED_LINK_PEEK : FSCHED_LINK_MODIFY,
                                  &r.st[k].link));
    }
    memset(&d, 0, sizeof d);
    d.label = "sink";
    d.user = &r.sink;
    d.advance = sink_advance;
    CHECK_OK(fsched_node_create(&d, &nodes[4]));
    CHECK_OK(fsched_node_link(nodes[4], h, FSCHED_LINK_CONSUME, &r.sink.in));
    for (k = 4; k >= 0; k--) CHECK_OK(fsched_pipeline_add(p, nodes[k])); /* any order */
    CHECK_OK(fsched_pipeline_run(p, parallel ? s : NULL));
    for (i = 1; i <= n; i++) expect += i + 1000 + 1000000;
    (void)count;
    CHECK_EQ_U64(r.sink.sum, expect);
    CHECK_EQ_U64(r.sink.count, n);
    CHECK(!r.sink.order_bad);
    for (k = 0; k < 3; k++) CHECK(!r.st[k].bad && r.st[k].seen == (n + 7) / 8);
    for (i = 1, expect = 0; i <= n; i++) expect += i + 1000; /* peek sees the first modify */
    CHECK_EQ_U64(r.st[1].peek_sum, expect);
    CHECK_OK(fsched_pipeline_destroy(p));
    CHECK_OK(fsched_hub_destroy(h));
}

static void test_modify_and_peek(fsched_sched *s) {
    stages_once(s, 0, 100);
    stages_once(s, 1, 5000 / TEST_SCALE);
}

/* ---- several producers and consumers on one hub, and finished nodes ---- */

typedef struct counter_node {
    fsched_link *link;
    uint64_t left, done_items; /* producers: items left; consumers: items taken */
    uint64_t *total;           /* consumers: shared sum (atomic) */
} counter_node;

static int counter_produce_can(fsched_node *node, void *user) {
    counter_node *cn = (counter_node *)user;
    if (!cn->left) return FSCHED_NODE_FINISHED; /* gives its envelope back */
    return fsched_node_is_served(node);
}

static void counter_produce(fsched_node *node, void *user) {
    counter_node *cn = (counter_node *)user;
    fsched_envelope *e = fsched_link_envelope(cn->link);
    e->tag = cn->left--;
    CHECK_OK(fsched_node_complete(node, 1));
}

static void counter_consume(fsched_node *node, void *user) {
    counter_node *cn = (counter_node *)user;
    ADD(cn->total, fsched_link_envelope(cn->link)->tag);
    cn->done_items++;
    CHECK_OK(fsched_node_complete(node, 1));
}

/* Producers of different lengths and consumers share a hub of one envelope: a finished
   producer must not keep the envelope from the others (both schedulers). */
static void test_many_producers(fsched_sched *s) {
    int parallel;
    for (parallel = 0; parallel <= 1; parallel++) {
        fsched_hub *h = hub_new("shared", 1, 0);
        fsched_pipeline *p;
        counter_node cn[5];
        fsched_node *nodes[5];
        fsched_node_desc d;
        uint64_t total = 0, want = 0, taken = 0;
        int k;
        CHECK_OK(fsched_pipeline_create(NULL, &p));
        for (k = 0; k < 5; k++) {
            memset(&cn[k], 0, sizeof cn[k]);
            memset(&d, 0, sizeof d);
            d.user = &cn[k];
            if (k < 3) { /* producers of 1, 300 and 50 items */
                cn[k].left = k == 0 ? 1 : k == 1 ? 300 : 50;
                want += cn[k].left * (cn[k].left + 1) / 2;
                d.label = "producer";
                d.can_advance = counter_produce_can;
                d.advance = counter_produce;
            } else {
                cn[k].total = &total;
                d.label = "consumer";
                d.advance = counter_consume;
            }
            CHECK_OK(fsched_node_create(&d, &nodes[k]));
            CHECK_OK(fsched_node_link(nodes[k], h, k < 3 ? FSCHED_LINK_PRODUCE : FSCHED_LINK_CONSUME,
                                      &cn[k].link));
            CHECK_OK(fsched_pipeline_add(p, nodes[k]));
        }
        CHECK_OK(fsched_pipeline_run(p, parallel ? s : NULL));
        CHECK_EQ_U64(LOAD(&total), want);
        for (k = 3; k < 5; k++) taken += cn[k].done_items;
        CHECK_EQ_U64(taken, 351);
        for (k = 0; k < 5; k++) {
            fsched_node_report rep;
            CHECK_OK(fsched_node_get_report(nodes[k], &rep));
            CHECK(rep.end == FSCHED_NODE_DONE);
            if (k < 3) CHECK(rep.advances == (k == 0 ? 1u : k == 1 ? 300u : 50u));
        }
        CHECK_OK(fsched_pipeline_destroy(p));
        CHECK_OK(fsched_hub_destroy(h));
    }
}

/* ---- a starved pipeline says which node waits on which hub ---- */

typedef struct quitter {
    fsched_link *in;
    uint64_t taken, limit;
} quitter;

static int quitter_can(fsched_node *node, void *user) {
    quitter *q = (quitter *)user;
    return q->taken < q->limit && fsched_node_is_served(node);
}

static void quitter_advance(fsched_node *node, void *user) {
    ((quitter *)user)->taken++;
    CHECK_OK(fsched_node_complete(node, 1));
}

static void describe_collect(const char *text, size_t len, void *user) {
    log_buf *b = (log_buf *)user;
    char line[512];
    CHECK(len < sizeof line);
    memcpy(line, text, len);
    line[len] = 0;
    if (len && line[len - 1] == '\n') line[len - 1] = 0;
    log_line(line, b);
}

static void test_starved(fsched_sched *s) {
    int parallel;
    for (parallel = 0; parallel <= 1; parallel++) {
        fsched_hub *h = hub_new("buffer", 2, 0);
        fsched_pipeline *p;
        fsched_node *prod, *cons;
        fsched_node_desc d;
        counter_node pc;
        quitter q;
        fsched_node_report rep;
        log_buf text;
        memset(&pc, 0, sizeof pc);
        memset(&q, 0, sizeof q);
        memset(&text, 0, sizeof text);
        pc.left = 10;
        q.limit = 3; /* stops consuming after 3: the producer is left waiting */
        memset(&d, 0, sizeof d);
        d.label = "maker";
        d.user = &pc;
        d.can_advance = counter_produce_can;
        d.advance = counter_produce;
        CHECK_OK(fsched_node_create(&d, &prod));
        CHECK_OK(fsched_node_link(prod, h, FSCHED_LINK_PRODUCE, &pc.link));
        memset(&d, 0, sizeof d);
        d.label = "taker";
        d.user = &q;
        d.can_advance = quitter_can;
        d.advance = quitter_advance;
        CHECK_OK(fsched_node_create(&d, &cons));
        CHECK_OK(fsched_node_link(cons, h, FSCHED_LINK_CONSUME, &q.in));
        CHECK_OK(fsched_pipeline_create(NULL, &p));
        CHECK_OK(fsched_pipeline_add(p, prod));
        CHECK_OK(fsched_pipeline_add(p, cons));
        CHECK_RESULT(fsched_pipeline_run(p, parallel ? s : NULL), FSCHED_ERR_STALLED);
        CHECK_OK(fsched_node_get_report(prod, &rep));
        CHECK(rep.end == FSCHED_NODE_STARVED && rep.waiting_on == h &&
              rep.waiting_as == FSCHED_LINK_PRODUCE);
        CHECK(rep.advances == 5); /* 3 consumed, 2 full envelopes waiting */
        CHECK_OK(fsched_node_get_report(cons, &rep));
        CHECK(rep.end == FSCHED_NODE_DONE && rep.advances == 3);
        CHECK_OK(fsched_pipeline_describe(p, describe_collect, &text));
        CHECK(strstr(text.text, "node \"maker\": starved, waiting to produce into hub "
                                "\"buffer\"") != NULL);
        CHECK(strstr(text.text, "node \"taker\": done; 3 advances") != NULL);
        CHECK_OK(fsched_pipeline_destroy(p));
        CHECK_OK(fsched_hub_destroy(h));
        free(text.text);
    }
}

/* ---- a node that declines: its advance completes with advanced = 0 while can_advance
   keeps saying yes. An advance that moved nothing is no progress: the debugging
   scheduler ends the run after a generation without progress, the parallel one lets the
   node idle until something changes; neither spins, and both end the same way. ---- */

typedef struct decliner {
    uint64_t declined;
} decliner;

static int decliner_can(fsched_node *node, void *user) {
    (void)node;
    (void)user;
    return 1; /* always willing */
}

static void decliner_advance(fsched_node *node, void *user) {
    ((decliner *)user)->declined++;
    CHECK_OK(fsched_node_complete(node, 0)); /* but moves nothing */
}

static const char expected_decline_log[] =
    "[scheduler]: Node has been added: maker\n"
    "[scheduler]: Node has been added: decliner\n"
    "[scheduler]: Starting pipeline initialization...\n"
    "[scheduler]: Initializing node maker ...\n"
    "[scheduler]: Initializing node decliner ...\n"
    "[scheduler]: Pipeline initialized.\n"
    "[scheduler]: Updating node maker ...\n"
    "[scheduler]: Node did advance data.\n"
    "[scheduler]: Updating node decliner ...\n"
    "[scheduler]: Generation 0 has ended.\n"
    "[scheduler]: Updating node maker ...\n"
    "[scheduler]: Node did advance data.\n"
    "[scheduler]: Updating node decliner ...\n"
    "[scheduler]: Generation 1 has ended.\n"
    "[scheduler]: Updating node maker ...\n"
    "[scheduler]: Updating node decliner ...\n"
    "[scheduler]: Generation 2 has ended.\n"
    "[scheduler]: Termination condition met.\n"
    "[scheduler]: Node maker is starved: it waits to produce into hub buffer.\n"
    "[scheduler]: Starting pipeline termination...\n"
    "[scheduler]: Terminating node maker ...\n"
    "[scheduler]: Terminating node decliner ...\n"
    "[scheduler]: Pipeline terminated.\n";

static void test_declining_node(fsched_sched *s) {
    int parallel;
    for (parallel = 0; parallel <= 1; parallel++) {
        fsched_hub *h = hub_new("buffer", 2, 0);
        fsched_pipeline *p;
        fsched_pipeline_desc pd;
        fsched_node *prod, *cons;
        fsched_node_desc d;
        counter_node pc;
        decliner dc;
        fsched_node_report rep;
        log_buf log;
        memset(&pc, 0, sizeof pc);
        memset(&dc, 0, sizeof dc);
        memset(&log, 0, sizeof log);
        pc.left = 10;
        memset(&d, 0, sizeof d);
        d.label = "maker";
        d.user = &pc;
        d.can_advance = counter_produce_can;
        d.advance = counter_produce;
        CHECK_OK(fsched_node_create(&d, &prod));
        CHECK_OK(fsched_node_link(prod, h, FSCHED_LINK_PRODUCE, &pc.link));
        memset(&d, 0, sizeof d);
        d.label = "decliner";
        d.user = &dc;
        d.can_advance = decliner_can;
        d.advance = decliner_advance;
        CHECK_OK(fsched_node_create(&d, &cons));
        CHECK_OK(fsched_node_link(cons, h, FSCHED_LINK_CONSUME, NULL));
        memset(&pd, 0, sizeof pd);
        pd.log = log_line;
        pd.log_user = &log;
        CHECK_OK(fsched_pipeline_create(&pd, &p));
        CHECK_OK(fsched_pipeline_add(p, prod));
        CHECK_OK(fsched_pipeline_add(p, cons));
        /* the maker fills both envelopes and then waits for an empty one, which the
           decliner never gives back: the run ends, the maker starved */
        CHECK_RESULT(fsched_pipeline_run(p, parallel ? s : NULL), FSCHED_ERR_STALLED);
        CHECK_OK(fsched_node_get_report(prod, &rep));
        CHECK(rep.end == FSCHED_NODE_STARVED && rep.advances == 2);
        CHECK_OK(fsched_node_get_report(cons, &rep));
        CHECK(rep.end == FSCHED_NODE_DONE && rep.advances == 0);
        /* asked again only after a change: at most once per change of its hub, plus the
           first time (a node that spun would be asked without end) */
        CHECK(dc.declined >= 1 && dc.declined <= 4);
        CHECK_EQ_U64(rep.updates, dc.declined);
        if (!parallel) {
            if (strcmp(log.text, expected_decline_log) != 0) {
                fprintf(stderr, "log:\n%s\nexpected:\n%s", log.text, expected_decline_log);
                CHECK(0);
            }
        }
        CHECK_OK(fsched_pipeline_destroy(p));
        CHECK_OK(fsched_hub_destroy(h));
        free(log.text);
    }
}

/* ---- where the parallel scheduler runs short nodes ---- */

/* A node of a chain source -> relay -> sink through hubs of 4 envelopes, each advance
   next to nothing: it passes the envelope's tag on and counts the advances that ran on
   another worker than the one before. */
typedef struct hop_node {
    fsched_link *in, *out;
    uint64_t left;           /* source: envelopes still to make */
    uint64_t next_tag;       /* the tag made or expected next */
    int order_bad;
    int last_worker;         /* -2: none yet */
    uint64_t moves;
    fsched_event *after;     /* set by each advance, when given */
    fsched_event *before;    /* waited for by each advance but the first, when given */
    uint64_t waited;
} hop_node;

static int hop_source_can(fsched_node *node, void *user) {
    hop_node *h = (hop_node *)user;
    if (!h->left) return FSCHED_NODE_FINISHED;
    return fsched_node_is_served(node);
}

static void hop_advance(fsched_node *node, void *user) {
    hop_node *h = (hop_node *)user;
    fsched_envelope *in = h->in ? fsched_link_envelope(h->in) : NULL;
    fsched_envelope *out = h->out ? fsched_link_envelope(h->out) : NULL;
    int here = fsched_worker_index();
    uint64_t tag;
    if (h->last_worker != -2 && here != h->last_worker) h->moves++;
    h->last_worker = here;
    if (h->before && h->next_tag > 0) { /* the sink took the one before */
        CHECK_OK(fsched_event_wait(h->before));
        h->waited++;
    }
    if (in) {
        if (in->tag != h->next_tag) h->order_bad = 1;
        tag = in->tag;
    } else {
        tag = h->next_tag;
        h->left--;
    }
    h->next_tag = tag + 1;
    if (out) {
        out->tag = tag;
        out->size = 0;
    }
    if (h->after) CHECK_OK(fsched_event_set(h->after));
    CHECK_OK(fsched_node_complete(node, 1));
}

/* Runs source -> relay -> sink with n envelopes on s; with `handshake`, each of the
   source's advances (but the first) waits, inside the callback, for the sink to have
   taken the envelope before. Returns the three nodes' states and reports. */
static void hop_run(fsched_sched *s, uint64_t n, int handshake, hop_node nodes[3],
                    fsched_node_report reps[3]) {
    static const char *const labels[3] = {"source", "relay", "sink"};
    fsched_hub *h1 = hub_new("first", 4, 0), *h2 = hub_new("second", 4, 0);
    fsched_pipeline *p;
    fsched_node *made[3];
    fsched_node_desc d;
    fsched_event sink_took;
    int i;
    CHECK_OK(fsched_event_init(&sink_took, 0, 0)); /* a wait takes the set */
    memset(nodes, 0, 3 * sizeof *nodes);
    for (i = 0; i < 3; i++) {
        nodes[i].last_worker = -2;
        memset(&d, 0, sizeof d);
        d.label = labels[i];
        d.user = &nodes[i];
        d.can_advance = i == 0 ? hop_source_can : NULL;
        d.advance = hop_advance;
        CHECK_OK(fsched_node_create(&d, &made[i]));
    }
    nodes[0].left = n;
    if (handshake) {
        nodes[0].before = &sink_took;
        nodes[2].after = &sink_took;
    }
    CHECK_OK(fsched_node_link(made[0], h1, FSCHED_LINK_PRODUCE, &nodes[0].out));
    CHECK_OK(fsched_node_link(made[1], h1, FSCHED_LINK_CONSUME, &nodes[1].in));
    CHECK_OK(fsched_node_link(made[1], h2, FSCHED_LINK_PRODUCE, &nodes[1].out));
    CHECK_OK(fsched_node_link(made[2], h2, FSCHED_LINK_CONSUME, &nodes[2].in));
    CHECK_OK(fsched_pipeline_create(NULL, &p));
    for (i = 0; i < 3; i++) CHECK_OK(fsched_pipeline_add(p, made[i]));
    CHECK_OK(fsched_pipeline_run(p, s));
    for (i = 0; i < 3; i++) {
        CHECK_OK(fsched_node_get_report(made[i], &reps[i]));
        CHECK(reps[i].end == FSCHED_NODE_DONE);
        CHECK_EQ_U64(reps[i].advances, n);
        CHECK(!nodes[i].order_bad);
        reps[i].label = labels[i]; /* the node's own copy goes with the pipeline */
    }
    CHECK_EQ_U64(nodes[2].next_tag, n);
    CHECK_OK(fsched_pipeline_destroy(p));
    CHECK_OK(fsched_hub_destroy(h1));
    CHECK_OK(fsched_hub_destroy(h2));
    CHECK_OK(fsched_event_destroy(&sink_took));
}

/* A task that yields until told to stop: each yield lets its worker look for a job,
   other workers' included. */
typedef struct thieves {
    int stop;     /* atomic */
    int started;  /* atomic */
} thieves;

static void thief_task(void *arg) {
    thieves *t = (thieves *)arg;
    ADD(&t->started, 1);
    while (!LOAD(&t->stop)) fsched_yield();
}

/* Short nodes (well under a microsecond an advance) made ready by an advance run next on
   the same worker rather than being queued for any worker: while every other worker
   keeps looking for jobs to steal, once the nodes have been timed they hardly ever
   change workers (queued for any worker, they moved on 1-10 % of advances). The timing,
   which the report gives, decides: where it says an advance is not clearly short (a
   slow or instrumented build), where they run is not checked. */
static void test_short_nodes_stay(fsched_sched *s) {
    static const char *const labels[3] = {"source", "relay", "sink"};
    uint64_t n = test_rounds(20000), moves[3] = {0, 0, 0};
    uint32_t thieves_n = fsched_worker_count(s), k;
    int i, round, short_chain = 1;
    for (round = 0; round < 4; round++) { /* where thieves land varies from run to run */
        hop_node nodes[3];
        fsched_node_report reps[3];
        fsched_wait_group wg;
        thieves t;
        memset(&t, 0, sizeof t);
        fsched_wait_group_init(&wg);
        for (k = 0; k < thieves_n; k++) CHECK_OK(fsched_wait_group_spawn(&wg, s, thief_task, &t));
#if TEST_THREADS
        while (LOAD(&t.started) < (int)thieves_n) fsched_yield(); /* the thieves are at work */
#endif
        hop_run(s, n, 0, nodes, reps);
        STORE(&t.stop, 1);
        CHECK_OK(fsched_wait_group_wait(&wg));
        CHECK_OK(fsched_wait_group_destroy(&wg));
        for (i = 0; i < 3; i++) {
            if (reps[i].advance_ns >= 500) short_chain = 0;
            moves[i] += nodes[i].moves;
        }
    }
#if FIBERSCHED_CHAOS /* 0 unless set */
    short_chain = 0; /* perturbed steps inside the callbacks: their times straddle 1 us */
#endif
    if (test_under_valgrind()) short_chain = 0; /* one thread at a time */
#if defined(FSCHED__TSAN)
    short_chain = 0; /* every atomic step is slowed: an advance comes near 1 us, and a
                        loaded machine's preemptions push the mean either side of it */
#endif
    for (i = 0; short_chain && i < 3; i++) {
        if (moves[i] > 4 * (16 + n / 1000))
            fprintf(stderr, "node %s: %llu moves in %llu advances\n", labels[i],
                    (unsigned long long)moves[i], (unsigned long long)(4 * n));
        CHECK(moves[i] <= 4 * (16 + n / 1000));
    }
}

/* A node whose advance waits, inside the callback, for another node's advance: the other
   node, kept to run next on the same worker or not, still runs, and the run ends. */
static void test_advance_waits_for_node(fsched_sched *s) {
    uint64_t n = test_rounds(2000);
    hop_node nodes[3];
    fsched_node_report reps[3];
    hop_run(s, n, 1, nodes, reps);
    CHECK_EQ_U64(nodes[0].waited, n - 1);
}

/* ---- bad input ---- */

static void noop_advance(fsched_node *node, void *user) {
    (void)user;
    CHECK_OK(fsched_node_complete(node, 0));
    CHECK_RESULT(fsched_node_complete(node, 0), FSCHED_ERR_WRONG_STATE); /* once only */
}

typedef struct adder {
    fsched_pipeline *p;
    fsched_node *extra;
    int tried;
} adder;

static int adder_can(fsched_node *node, void *user) {
    adder *a = (adder *)user;
    (void)node;
    if (!a->tried) { /* adding nodes while the pipeline runs is refused */
        CHECK_RESULT(fsched_pipeline_add(a->p, a->extra), FSCHED_ERR_WRONG_STATE);
        a->tried = 1;
    }
    return 0;
}

/* A destroyed pipeline: every call is refused with a code, without reading its memory
   (which faults once freed: the allocator makes it inaccessible). */
static void test_use_after_destroy(fsched_sched *s) {
#if defined(TEST_GUARD_ALLOCATOR)
    fsched_pipeline_desc pd;
    fsched_pipeline *p;
    fsched_node_desc d;
    fsched_node *n;
    memset(&pd, 0, sizeof pd);
    pd.allocator.alloc = test_guard_alloc;
    pd.allocator.free = test_guard_free;
    memset(&d, 0, sizeof d);
    d.advance = noop_advance;
    CHECK_OK(fsched_pipeline_create(&pd, &p));
    CHECK_OK(fsched_pipeline_destroy(p));
    CHECK_RESULT(fsched_pipeline_destroy(p), FSCHED_ERR_INVALID_ARGUMENT); /* twice */
    CHECK_OK(fsched_node_create(&d, &n));
    CHECK_RESULT(fsched_pipeline_add(p, n), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_pipeline_run(p, s), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_pipeline_run(p, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_pipeline_initialize(p), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_pipeline_step(p), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK(!fsched_pipeline_is_finished(p));
    CHECK_OK(fsched_node_destroy(n));
#else
    (void)s;
#endif
}

static void test_bad_input(fsched_sched *s) {
    fsched_hub_desc hd;
    fsched_hub *h;
    fsched_node_desc d;
    fsched_node *n, *m;
    fsched_pipeline *p;
    fsched_link *l;
    adder a;
    memset(&hd, 0, sizeof hd);
    CHECK_RESULT(fsched_hub_create(&hd, &h), FSCHED_ERR_INVALID_ARGUMENT); /* no envelopes */
    CHECK_RESULT(fsched_hub_create(NULL, &h), FSCHED_ERR_INVALID_ARGUMENT);
    hd.envelopes = 2;
    CHECK_RESULT(fsched_hub_create(&hd, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_hub_create(&hd, &h));
    memset(&d, 0, sizeof d);
    CHECK_RESULT(fsched_node_create(&d, &n), FSCHED_ERR_INVALID_ARGUMENT); /* no advance */
    CHECK_RESULT(fsched_node_create(NULL, &n), FSCHED_ERR_INVALID_ARGUMENT);
    d.advance = noop_advance;
    CHECK_OK(fsched_node_create(&d, &n));
    CHECK_RESULT(fsched_node_link(n, NULL, FSCHED_LINK_PRODUCE, &l), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_node_link(n, h, (fsched_link_kind)9, &l), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_node_link(n, h, FSCHED_LINK_PRODUCE, &l));
    CHECK_RESULT(fsched_node_complete(n, 1), FSCHED_ERR_WRONG_STATE); /* no advance */
    CHECK_RESULT(fsched_node_complete(NULL, 1), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_link_keep(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK(fsched_link_envelope(NULL) == NULL && fsched_link_envelope(l) == NULL);
    CHECK_RESULT(fsched_hub_destroy(h), FSCHED_ERR_WRONG_STATE); /* linked */
    CHECK_OK(fsched_pipeline_create(NULL, &p));
    CHECK_RESULT(fsched_pipeline_add(p, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_pipeline_add(NULL, n), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_pipeline_add(p, n));
    CHECK_RESULT(fsched_pipeline_add(p, n), FSCHED_ERR_WRONG_STATE); /* already in one */
    CHECK_RESULT(fsched_node_link(n, h, FSCHED_LINK_CONSUME, &l), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_node_destroy(n), FSCHED_ERR_WRONG_STATE);    /* the pipeline owns it */
    /* a node that adds a node while running */
    memset(&a, 0, sizeof a);
    a.p = p;
    d.can_advance = adder_can;
    d.user = &a;
    CHECK_OK(fsched_node_create(&d, &m));
    CHECK_OK(fsched_pipeline_add(p, m));
    d.can_advance = NULL;
    d.user = NULL;
    CHECK_OK(fsched_node_create(&d, &a.extra));
    CHECK_RESULT(fsched_pipeline_run(p, (fsched_sched *)NULL), FSCHED_OK);
    CHECK(a.tried);
    CHECK_RESULT(fsched_pipeline_describe(p, NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_node_destroy(a.extra)); /* never added: destroyed by hand */
    CHECK_OK(fsched_pipeline_destroy(p));
    CHECK_OK(fsched_hub_destroy(h));
    CHECK_OK(fsched_pipeline_destroy(NULL));
    CHECK_OK(fsched_hub_destroy(NULL));
    CHECK(strcmp(fsched_result_string(FSCHED_ERR_STALLED), "stalled") == 0);
    (void)s;
}

/* ---- linear pipelines ---- */

typedef struct lin {
    uint64_t next, n;         /* the input */
    uint64_t in_flight, max_in_flight; /* atomic */
    uint64_t out_next;        /* the in-order output's next item */
    int out_bad;
    uint32_t in_serial;       /* atomic: items inside the serial out-of-order stage */
    int serial_bad;
    uint64_t sum;
    uint64_t serial_seen;
    uint64_t parallel_seen;   /* atomic */
    uint64_t items[256];      /* storage for items, indexed by seq % 256 */
} lin;

static void *lin_input(void *user, void *item, int *stop) {
    lin *l = (lin *)user;
    uint64_t f;
    CHECK(item == NULL);
    if (l->next == l->n) {
        *stop = 1;
        return NULL;
    }
    f = ADD(&l->in_flight, 1);
    if (f > LOAD(&l->max_in_flight)) STORE(&l->max_in_flight, f);
    l->items[l->next % 256] = l->next;
    return &l->items[l->next++ % 256];
}

static void *lin_parallel(void *user, void *item, int *stop) {
    lin *l = (lin *)user;
    uint64_t *v = (uint64_t *)item, i, x = *v;
    (void)stop;
    for (i = 0; i < (x % 13) * 20; i++) x = x * 6364136223846793005ull + 1; /* uneven work */
    (void)x;
    ADD(&l->parallel_seen, 1);
    return item;
}

static void *lin_serial_any(void *user, void *item, int *stop) {
    lin *l = (lin *)user;
    (void)stop;
    if (ADD(&l->in_serial, 1) != 1) l->serial_bad = 1;
    l->serial_seen++;
    *(uint64_t *)item *= 2;
    SUB(&l->in_serial, 1);
    return item;
}

static void *lin_output(void *user, void *item, int *stop) {
    lin *l = (lin *)user;
    uint64_t v = *(uint64_t *)item;
    (void)stop;
    if (v != 2 * l->out_next) l->out_bad = 1; /* in input order */
    l->out_next++;
    l->sum += v;
    SUB(&l->in_flight, 1);
    return NULL;
}

typedef struct lin_run {
    lin *l;
    size_t bound;
    fsched_result r;
} lin_run;

static void lin_task(void *p) {
    lin_run *lr = (lin_run *)p;
    fsched_stage st[4];
    memset(st, 0, sizeof st);
    st[0].mode = FSCHED_STAGE_SERIAL_IN_ORDER;
    st[0].fn = lin_input;
    st[1].mode = FSCHED_STAGE_PARALLEL;
    st[1].fn = lin_parallel;
    st[2].mode = FSCHED_STAGE_SERIAL_OUT_OF_ORDER;
    st[2].fn = lin_serial_any;
    st[3].mode = FSCHED_STAGE_SERIAL_IN_ORDER;
    st[3].fn = lin_output;
    st[0].user = st[1].user = st[2].user = st[3].user = lr->l;
    lr->r = fsched_parallel_pipeline(lr->bound, st, 4);
}

static void test_linear(fsched_sched *s) {
    static const size_t bounds[] = {1, 2, 7, 0, 64, 200};
    size_t b;
    for (b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
        lin *l = (lin *)calloc(1, sizeof *l);
        lin_run lr;
        fsched_wait_group wg;
        uint64_t limit = bounds[b] ? bounds[b] : 4u * (fsched_worker_count(s) ? fsched_worker_count(s) : 1u);
        CHECK(l != NULL);
        l->n = (b % 2 ? 50000u : 20000u) / TEST_SCALE;
        lr.l = l;
        lr.bound = bounds[b];
        CHECK_OK(fsched_wait_group_init(&wg));
        CHECK_OK(fsched_wait_group_spawn(&wg, s, lin_task, &lr));
        CHECK_OK(fsched_wait_group_wait(&wg));
        CHECK_OK(fsched_wait_group_destroy(&wg));
        CHECK_OK(lr.r);
        CHECK_EQ_U64(l->out_next, l->n);
        CHECK(!l->out_bad && !l->serial_bad);
        CHECK_EQ_U64(l->serial_seen, l->n);
        CHECK_EQ_U64(LOAD(&l->parallel_seen), l->n);
        CHECK_EQ_U64(l->sum, l->n * (l->n - 1));
        CHECK(LOAD(&l->max_in_flight) <= limit && limit <= 256);
        CHECK_EQ_U64(LOAD(&l->in_flight), 0);
        free(l);
    }
}

/* ---- stages that wait for later items: a worker carries items through the stages in
   place and holds the input meanwhile, which must not keep the input from running while
   a stage's fiber waits. Every 16th item waits in the parallel stage until the input has
   read the item two after it (and every 5th yields); the rest as in test_linear ---- */

#define AHEAD_EVERY 16u
#define AHEAD_BY 2u

typedef struct ahead {
    uint64_t next, n;                  /* the input */
    uint64_t in_flight, max_in_flight; /* atomic */
    uint64_t out_next;                 /* the output's next item */
    int out_bad;
    uint32_t in_serial; /* atomic: items inside the serial out-of-order stage */
    int serial_bad;
    fsched_event *read;   /* [i / AHEAD_EVERY]: item i + AHEAD_BY has been read */
    uint64_t items[256];
} ahead;

static void *ahead_input(void *user, void *item, int *stop) {
    ahead *a = (ahead *)user;
    uint64_t f;
    (void)item;
    if (a->next == a->n) {
        *stop = 1;
        return NULL;
    }
    f = ADD(&a->in_flight, 1);
    if (f > LOAD(&a->max_in_flight)) STORE(&a->max_in_flight, f);
    if (a->next >= AHEAD_BY && (a->next - AHEAD_BY) % AHEAD_EVERY == 0)
        CHECK_OK(fsched_event_set(&a->read[(a->next - AHEAD_BY) / AHEAD_EVERY]));
    a->items[a->next % 256] = a->next;
    return &a->items[a->next++ % 256];
}

static void *ahead_parallel(void *user, void *item, int *stop) {
    ahead *a = (ahead *)user;
    uint64_t i = *(uint64_t *)item;
    (void)stop;
    if (i % AHEAD_EVERY == 0 && i + AHEAD_BY < a->n) {
        /* bounded: a wait that nothing ends fails the test instead of hanging it */
        CHECK_OK(fsched_event_wait_for(&a->read[i / AHEAD_EVERY], 10000000000ull));
    } else if (i % 5 == 0) {
        fsched_yield();
    }
    return item;
}

static void *ahead_serial_any(void *user, void *item, int *stop) {
    ahead *a = (ahead *)user;
    (void)stop;
    if (ADD(&a->in_serial, 1) != 1) a->serial_bad = 1;
    SUB(&a->in_serial, 1);
    return item;
}

static void *ahead_output(void *user, void *item, int *stop) {
    ahead *a = (ahead *)user;
    (void)stop;
    if (*(uint64_t *)item != a->out_next) a->out_bad = 1; /* in input order */
    a->out_next++;
    SUB(&a->in_flight, 1);
    return NULL;
}

typedef struct ahead_run {
    ahead *a;
    size_t bound;
    fsched_result r;
} ahead_run;

static void ahead_task(void *p) {
    ahead_run *ar = (ahead_run *)p;
    fsched_stage st[4];
    memset(st, 0, sizeof st);
    st[0].mode = FSCHED_STAGE_SERIAL_IN_ORDER;
    st[0].fn = ahead_input;
    st[1].mode = FSCHED_STAGE_PARALLEL;
    st[1].fn = ahead_parallel;
    st[2].mode = FSCHED_STAGE_SERIAL_OUT_OF_ORDER;
    st[2].fn = ahead_serial_any;
    st[3].mode = FSCHED_STAGE_SERIAL_IN_ORDER;
    st[3].fn = ahead_output;
    st[0].user = st[1].user = st[2].user = st[3].user = ar->a;
    ar->r = fsched_parallel_pipeline(ar->bound, st, 4);
}

/* On s: from a task, or (bound) from the calling thread bound to s. */
static void ahead_check(fsched_sched *s, size_t bound, int from_bound_thread) {
    ahead *a = (ahead *)calloc(1, sizeof *a);
    ahead_run ar;
    uint64_t i, events;
    CHECK(a != NULL);
    a->n = 4000u / TEST_SCALE + AHEAD_EVERY;
    events = a->n / AHEAD_EVERY + 1;
    a->read = (fsched_event *)calloc(events, sizeof *a->read);
    CHECK(a->read != NULL);
    for (i = 0; i < events; i++) CHECK_OK(fsched_event_init(&a->read[i], 1, 0));
    ar.a = a;
    ar.bound = bound;
    ar.r = FSCHED_ERR_WRONG_STATE;
    if (from_bound_thread) {
        ahead_task(&ar);
    } else {
        fsched_wait_group wg;
        CHECK_OK(fsched_wait_group_init(&wg));
        CHECK_OK(fsched_wait_group_spawn(&wg, s, ahead_task, &ar));
        CHECK_OK(fsched_wait_group_wait(&wg));
        CHECK_OK(fsched_wait_group_destroy(&wg));
    }
    CHECK_OK(ar.r);
    CHECK_EQ_U64(a->out_next, a->n);
    CHECK(!a->out_bad && !a->serial_bad);
    CHECK(LOAD(&a->max_in_flight) <= bound);
    CHECK_EQ_U64(LOAD(&a->in_flight), 0);
    for (i = 0; i < events; i++) CHECK_OK(fsched_event_destroy(&a->read[i]));
    free(a->read);
    free(a);
}

static void test_linear_waiting_stages(fsched_sched *s) {
    ahead_check(s, 4, 0);
    ahead_check(s, 64, 0);
#if TEST_THREADS
    { /* one worker: the input stays with the worker that carries an item, but while
         that item's stage waits */
        fsched_sched *one = test_sched_new(1);
        ahead_check(one, 4, 0);
        ahead_check(one, 3, 0);
        CHECK_OK(fsched_bind(one)); /* a bound thread's own stage calls */
        ahead_check(one, 4, 1);
        CHECK_OK(fsched_unbind());
        test_sched_free(one);
    }
#endif
}

static void *stop_at_once(void *user, void *item, int *stop) {
    (void)user;
    (void)item;
    *stop = 1;
    return NULL;
}

typedef struct lin_bad {
    fsched_result no_stages, null_fn, bad_mode, empty, wrapping, most;
} lin_bad;

static void lin_bad_task(void *p) {
    lin_bad *lb = (lin_bad *)p;
    fsched_stage st[2];
    memset(st, 0, sizeof st);
    lb->no_stages = fsched_parallel_pipeline(4, st, 0);
    lb->null_fn = fsched_parallel_pipeline(4, st, 1);
    st[0].fn = stop_at_once;
    st[0].mode = (fsched_stage_mode)7;
    lb->bad_mode = fsched_parallel_pipeline(4, st, 1);
    st[0].mode = FSCHED_STAGE_SERIAL_IN_ORDER;
    st[1].fn = lin_output;
    lb->empty = fsched_parallel_pipeline(4, st, 2); /* no items at all */
    /* records for more items than a size_t counts in bytes: their size wraps round to a
       small block, which writing the records overran */
    lb->wrapping = fsched_parallel_pipeline(SIZE_MAX / sizeof(fsched__lp_item) + 2, st, 2);
    lb->most = fsched_parallel_pipeline(SIZE_MAX, st, 2);
}

/* ---- a linear pipeline's log and stall report: the fifth item blocks in the serial
   'write' stage until the report says where the items are ---- */

typedef struct stall_run {
    uint64_t next, n, written;
    fsched_event release;
    log_buf log, warnings;
    int reported; /* the log has shown the report's last line */
    fsched_result r;
} stall_run;

static void *stall_read(void *user, void *item, int *stop) {
    stall_run *sr = (stall_run *)user;
    (void)item;
    if (sr->next == sr->n) {
        *stop = 1;
        return NULL;
    }
    return (void *)(uintptr_t)++sr->next;
}

static void *stall_square(void *user, void *item, int *stop) {
    (void)user;
    (void)stop;
    return (void *)((uintptr_t)item * (uintptr_t)item);
}

static void *stall_write(void *user, void *item, int *stop) {
    stall_run *sr = (stall_run *)user;
    (void)stop;
    if ((uintptr_t)item == 25) CHECK_OK(fsched_event_wait(&sr->release)); /* item 5 */
    sr->written += (uintptr_t)item;
    return NULL;
}

static void stall_log(const char *line, void *user) {
    stall_run *sr = (stall_run *)user;
    log_line(line, &sr->log);
    if (strstr(line, "stage 2 'write'")) { /* the report's last line: let it go */
        sr->reported = 1;
        CHECK_OK(fsched_event_set(&sr->release));
    }
}

static void stall_warning(fsched_log_level level, const char *message, void *user) {
    CHECK(level == FSCHED_LOG_WARNING);
    log_line(message, &((stall_run *)user)->warnings);
}

static void stall_task(void *p) {
    stall_run *sr = (stall_run *)p;
    fsched_parallel_pipeline_desc d;
    fsched_stage st[3];
    memset(st, 0, sizeof st);
    st[0].mode = FSCHED_STAGE_SERIAL_IN_ORDER;
    st[0].fn = stall_read;
    st[0].name = "read";
    st[1].mode = FSCHED_STAGE_PARALLEL;
    st[1].fn = stall_square;
    st[1].name = "square";
    st[2].mode = FSCHED_STAGE_SERIAL_IN_ORDER;
    st[2].fn = stall_write;
    st[2].name = "write";
    st[0].user = st[1].user = st[2].user = sr;
    memset(&d, 0, sizeof d);
    d.name = "squares";
    d.max_in_flight = 4;
    d.log = stall_log;
    d.log_user = sr;
    d.stall_report_ns = 50 * 1000000ull;
    d.logger.func = stall_warning;
    d.logger.user = sr;
    sr->r = fsched_parallel_pipeline_run(&d, st, 3);
}

static void test_linear_stall_report(fsched_sched *s) {
    static const char expected[] =
        "[squares] started: 3 stages, at most 4 items in flight\n"
        "[squares] no item has moved for 50 ms; where the items are:\n"
        "[squares]   stage 0 'read' (serial, in order): 0 running\n"
        "[squares]   stage 1 'square' (parallel): 0 running\n"
        "[squares]   stage 2 'write' (serial, in order): 1 running, 3 waiting\n"
        "[squares] finished: 20 items\n";
    stall_run sr;
    fsched_wait_group wg;
    uint64_t i, want = 0;
    memset(&sr, 0, sizeof sr);
    sr.n = 20;
    CHECK_OK(fsched_event_init(&sr.release, 1, 0));
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, stall_task, &sr));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(sr.r);
    for (i = 1; i <= sr.n; i++) want += i * i;
    CHECK_EQ_U64(sr.written, want);
    CHECK(sr.reported);
    if (strcmp(sr.log.text, expected) != 0) {
        fprintf(stderr, "log:\n%s\nexpected:\n%s", sr.log.text, expected);
        CHECK(0);
    }
    CHECK(strstr(sr.warnings.text, "linear pipeline 'squares':   stage 2 'write' (serial, in "
                                   "order): 1 running, 3 waiting") != NULL);
    CHECK_OK(fsched_event_destroy(&sr.release));
    free(sr.log.text);
    free(sr.warnings.text);
}

static void test_linear_bad_input(fsched_sched *s) {
    fsched_stage st;
    fsched_wait_group wg;
    lin_bad lb;
    memset(&st, 0, sizeof st);
    st.fn = stop_at_once;
    CHECK_OK(fsched_parallel_pipeline(4, &st, 1)); /* outside: on the default scheduler */
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, lin_bad_task, &lb));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_RESULT(lb.no_stages, FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(lb.null_fn, FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(lb.bad_mode, FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(lb.empty);
    CHECK_RESULT(lb.wrapping, FSCHED_ERR_OUT_OF_MEMORY);
    CHECK_RESULT(lb.most, FSCHED_ERR_OUT_OF_MEMORY);
}

int main(void) {
    fsched_sched *s;
    test_watchdog(900);
    s = test_sched_new(3);
    test_bad_input(s);
    test_use_after_destroy(s);
    test_debug_log(s);
    test_stepping(s);
    test_same_results(s);
    test_modify_and_peek(s);
    test_many_producers(s);
    test_starved(s);
    test_declining_node(s);
    test_short_nodes_stay(s);
    test_advance_waits_for_node(s);
    test_linear(s);
    test_linear_waiting_stages(s);
    test_linear_stall_report(s);
    test_linear_bad_input(s);
    test_sched_free(s);
    printf("test_pipeline: ok\n");
    return 0;
}
