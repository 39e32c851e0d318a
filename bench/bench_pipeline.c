/* Pipelines: streams of items through stages, in two parts.

   (a) linear pipelines, fibersched's fsched_parallel_pipeline against oneTBB's
       tbb::parallel_pipeline, with the same stage modes and the same bound on items in
       flight (--tokens=N; default 4 per worker):

       small items   1,000,000 items (100,000 with --quick; --items=N, and heavy items a
                     fifth of that): a serial in-order input that reads in consecutive
                     integers, one parallel stage of a little arithmetic (20 rounds of
                     integer mixing, tens of nanoseconds), a serial in-order output that
                     checks the order and sums
       heavy items   200,000 items (20,000 with --quick): the same input and output around
                     two parallel stages of 1,200 rounds each (about 2 us each), where the
                     parallel speed-up matters

       An item is a slot of a ring with one slot per token: item i uses slot i % tokens,
       which item i - tokens has left, since at most `tokens` items are in flight and the
       output takes them in input order. Every candidate calls the same stage functions
       (bench_pipeline_input, _middle, _output, below), each touching only its item and its
       own stage's state. A run checks that the output saw every item once, in order, and
       that the sum equals the one computed beforehand by a plain loop. Candidates:

       serial        the stage functions called in a loop on the main thread (for scale)
       fibersched    fsched_parallel_pipeline, called from a task spawned with
                     fsched_wait_group_spawn on a scheduler of `workers` workers (created
                     once per process); the main thread waits on the wait group
       oneTBB        tbb::parallel_pipeline with filters serial_in_order / parallel /
                     serial_in_order, inside a task_arena of `workers` threads
                     (bench_pipeline_tbb.cpp), when available; the main thread is one of
                     those threads

   (b) a pipeline of nodes and hubs, the parallel scheduler against the debugging one: a
       producer node fills envelopes of 64 numbers (one after the other, 20,000 envelopes,
       2,000 with --quick) into a hub of 4 envelopes, a filter node consumes them and
       produces transformed numbers into a second hub of 4 envelopes, and a consumer node
       consumes those, checks that they arrive in order and sums them. Each number takes
       rounds of integer mixing in each node, in two shapes:

       balanced      24 rounds a number in each of the three nodes (about 1.5 us an
                     envelope each): the three nodes can overlap, so the parallel
                     scheduler can be up to min(3, workers, CPUs) times as fast
       filter-heavy  the producer and consumer only write and sum; 72 rounds a number in
                     the filter (about 7 us an envelope): the filter alone bounds the
                     run, so there is nothing to gain and the hand-over costs show

       The speed-up line gives that bound next to the measured ratio.

       A pipeline runs once: every repetition builds a fresh one (hubs, nodes, links),
       untimed, and times fsched_pipeline_run alone. The run must end FSCHED_OK with every
       node advanced once per envelope, and the consumer's sum must equal the plain loop's.
       Candidates: the same work as a plain loop (for scale); fsched_pipeline_run(p, NULL),
       the debugging scheduler on the main thread, without a log sink;
       fsched_pipeline_run(p, s), the parallel scheduler on the scheduler of (a), from the
       main thread, which blocks; and, when available, oneTBB's tbb::parallel_pipeline with
       three serial_in_order filters (producer, filter, consumer) in the task_arena of (a)
       (bench_pipeline_tbb.cpp), at most as many envelopes in flight as the two hubs hold.
       Every candidate calls the same work functions (bench_stream_produce, _filter,
       _consume, below) on envelopes of 64 numbers, the filter out of place, and checks the
       order and the sum as the consumer node does.

   Each repetition runs every candidate once, in rotating order, after a short sleep that
   lets the previous runtime's threads go idle, after one warm-up run of each. Reported:
   median and minimum over the repetitions.
   Targets: fibersched at most 0.9x oneTBB's time on small items and on the balanced node
   pipeline, where the scheduler's own costs show; level (at most 1.0x) on heavy items
   and the filter-heavy node pipeline, where the stage functions' time dominates.
   Usage: bench_pipeline [--quick] [--workers=N] [--reps=N] [--tokens=N] [--items=N] */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"

#if defined(__GNUC__)
#define BENCH_NOINLINE __attribute__((noinline))
#else
#define BENCH_NOINLINE
#endif

/* The stage functions of (a), shared with the oneTBB peer. */
BENCH_NOINLINE void *bench_pipeline_input(void *run);
BENCH_NOINLINE void *bench_pipeline_middle(void *run, void *item);
BENCH_NOINLINE void bench_pipeline_output(void *run, void *item);
/* The work functions of (b), shared with the oneTBB peer. */
BENCH_NOINLINE void bench_stream_produce(const void *shape, uint64_t envelope, uint64_t *out);
BENCH_NOINLINE void bench_stream_filter(const void *shape, const uint64_t *in, uint64_t *out,
                                        size_t n);
BENCH_NOINLINE uint64_t bench_stream_consume(const void *shape, const uint64_t *in, size_t n);
#if defined(FSCHED_BENCH_TBB)
/* bench_pipeline_tbb.cpp */
void bench_pipeline_tbb_run(void *run, size_t middle_stages, size_t tokens, int workers);
uint64_t bench_stream_tbb_run(const void *shape, uint64_t envelopes, uint64_t *buffers,
                              size_t batch, size_t tokens, int workers, uint64_t *in_order);
#endif

#define CACHE_LINE 64
/* Rounds of mixing of a middle stage in (a): small and heavy items. */
#define SMALL_ROUNDS 20
#define HEAVY_ROUNDS 1200
/* (b): numbers per envelope, envelopes per hub, and the rounds of the two shapes. */
#define BATCH 64
#define HUB_ENVELOPES 4
#define BALANCED_ROUNDS 24
#define FILTER_HEAVY_ROUNDS 72
/* oneTBB's tokens in (b): all fibersched can have in flight, as nodes use the hubs' own. */
#define STREAM_TOKENS (2 * HUB_ENVELOPES)
/* The targets, fibersched's time over oneTBB's: where the scheduler's own costs show
   (small items, the balanced node pipeline), and where the work dominates (level). */
#define TARGET_OVERHEAD 0.9
#define TARGET_LEVEL 1.0

static fsched_sched *sched;
static int workers;

/* The work: a dependent multiply-xorshift chain, a couple of nanoseconds a round. */
static uint64_t mix(uint64_t x, unsigned rounds) {
    unsigned round;
    for (round = 0; round < rounds; round++) {
        x ^= x >> 31;
        x *= UINT64_C(0x9e3779b97f4a7c15);
        x ^= x >> 29;
    }
    return x;
}

/* ---- (a) linear pipelines: the items and the stage functions ---- */

/* A cache line per slot: items in the parallel stages on different threads do not share
   one. */
typedef struct linear_item {
    _Alignas(CACHE_LINE) uint64_t index;
    uint64_t value;
} linear_item;

typedef struct linear_run {
    /* set before a run, read only during it */
    uint64_t items;
    unsigned rounds; /* of each middle stage */
    size_t middle_stages, tokens;
    linear_item *ring; /* `tokens` slots */
    /* the input's state and the output's, apart: the serial stages run on different
       threads at once */
    _Alignas(CACHE_LINE) uint64_t next_in;
    size_t next_slot;
    _Alignas(CACHE_LINE) uint64_t next_out, sum, out_of_order;
} linear_run;

/* The next item, or NULL once all have been read in. */
BENCH_NOINLINE void *bench_pipeline_input(void *run) {
    linear_run *r = (linear_run *)run;
    linear_item *it;
    if (r->next_in == r->items) return NULL;
    it = &r->ring[r->next_slot];
    r->next_slot = r->next_slot + 1 == r->tokens ? 0 : r->next_slot + 1;
    it->index = r->next_in++;
    it->value = it->index;
    return it;
}

BENCH_NOINLINE void *bench_pipeline_middle(void *run, void *item) {
    linear_item *it = (linear_item *)item;
    it->value = mix(it->value, ((const linear_run *)run)->rounds);
    return it;
}

BENCH_NOINLINE void bench_pipeline_output(void *run, void *item) {
    linear_run *r = (linear_run *)run;
    const linear_item *it = (const linear_item *)item;
    if (it->index != r->next_out) r->out_of_order++;
    r->next_out = it->index + 1;
    r->sum += it->value;
}

typedef struct linear_case {
    const char *name;
    uint64_t items;
    unsigned rounds;
    size_t middle_stages, tokens;
    uint64_t expected_sum; /* from the plain loop */
    linear_run run;
} linear_case;

static void linear_reset(linear_case *c) {
    linear_item *ring = c->run.ring;
    memset(&c->run, 0, sizeof c->run);
    c->run.items = c->items;
    c->run.rounds = c->rounds;
    c->run.middle_stages = c->middle_stages;
    c->run.tokens = c->tokens;
    c->run.ring = ring;
}

static void linear_check(const char *who, const linear_case *c) {
    const linear_run *r = &c->run;
    if (r->next_in != c->items || r->next_out != c->items || r->out_of_order)
        bench_fail("%s, %s: %llu items in, %llu out, %llu out of order (expected %llu)", who,
                   c->name, (unsigned long long)r->next_in, (unsigned long long)r->next_out,
                   (unsigned long long)r->out_of_order, (unsigned long long)c->items);
    if (r->sum != c->expected_sum)
        bench_fail("%s, %s: sum %llu, expected %llu", who, c->name, (unsigned long long)r->sum,
                   (unsigned long long)c->expected_sum);
}

static void linear_serial_pass(linear_run *r) {
    void *it;
    size_t k;
    while ((it = bench_pipeline_input(r)) != NULL) {
        for (k = 0; k < r->middle_stages; k++) it = bench_pipeline_middle(r, it);
        bench_pipeline_output(r, it);
    }
}

static double run_linear_serial(void *ctx) {
    linear_case *c = (linear_case *)ctx;
    double t0, t1;
    linear_reset(c);
    t0 = bench_now();
    linear_serial_pass(&c->run);
    t1 = bench_now();
    linear_check("serial", c);
    return t1 - t0;
}

/* fibersched's stages: the shared functions behind fsched_stage's signature. */
static void *fs_input(void *run, void *item, int *stop) {
    void *it = bench_pipeline_input(run);
    (void)item;
    if (!it) *stop = 1;
    return it;
}

static void *fs_middle(void *run, void *item, int *stop) {
    (void)stop;
    return bench_pipeline_middle(run, item);
}

static void *fs_output(void *run, void *item, int *stop) {
    (void)stop;
    bench_pipeline_output(run, item);
    return NULL;
}

typedef struct fs_linear_call {
    linear_case *c;
    fsched_result result;
} fs_linear_call;

/* fsched_parallel_pipeline needs a task (or a bound thread): this is that task. */
static void fs_linear_task(void *arg) {
    fs_linear_call *call = (fs_linear_call *)arg;
    linear_case *c = call->c;
    fsched_stage stages[4];
    size_t n = 0, k;
    stages[n].mode = FSCHED_STAGE_SERIAL_IN_ORDER;
    stages[n].fn = fs_input;
    stages[n++].user = &c->run;
    for (k = 0; k < c->middle_stages; k++) {
        stages[n].mode = FSCHED_STAGE_PARALLEL;
        stages[n].fn = fs_middle;
        stages[n++].user = &c->run;
    }
    stages[n].mode = FSCHED_STAGE_SERIAL_IN_ORDER;
    stages[n].fn = fs_output;
    stages[n++].user = &c->run;
    call->result = fsched_parallel_pipeline(c->tokens, stages, n);
}

static double run_linear_fsched(void *ctx) {
    linear_case *c = (linear_case *)ctx;
    fs_linear_call call;
    fsched_wait_group wg;
    fsched_result r;
    double t0, t1;
    linear_reset(c);
    call.c = c;
    call.result = FSCHED_ERR_WRONG_STATE;
    fsched_wait_group_init(&wg);
    t0 = bench_now();
    r = fsched_wait_group_spawn(&wg, sched, fs_linear_task, &call);
    if (r != FSCHED_OK) bench_fail("fsched_wait_group_spawn: %s", fsched_result_string(r));
    fsched_wait_group_wait(&wg);
    t1 = bench_now();
    fsched_wait_group_destroy(&wg);
    if (call.result != FSCHED_OK)
        bench_fail("fsched_parallel_pipeline: %s", fsched_result_string(call.result));
    linear_check("fibersched", c);
    return t1 - t0;
}

#if defined(FSCHED_BENCH_TBB)
static double run_linear_tbb(void *ctx) {
    linear_case *c = (linear_case *)ctx;
    double t0, t1;
    linear_reset(c);
    t0 = bench_now();
    bench_pipeline_tbb_run(&c->run, c->middle_stages, c->tokens, workers);
    t1 = bench_now();
    linear_check("oneTBB", c);
    return t1 - t0;
}
#endif

/* ---- (b) a pipeline of nodes and hubs ---- */

typedef struct stream_shape {
    const char *name;
    unsigned produce_rounds, filter_rounds, consume_rounds; /* per number */
} stream_shape;

/* One run's state. The producer's and the consumer's fields are apart: the nodes run on
   different threads at once under the parallel scheduler. */
typedef struct stream_run {
    const stream_shape *shape;
    uint64_t envelopes; /* to produce */
    fsched_link *produce, *filter_in, *filter_out, *consume;
    _Alignas(CACHE_LINE) uint64_t produced;
    _Alignas(CACHE_LINE) uint64_t next_tag, sum, out_of_order;
} stream_run;

/* The producer declines once it has produced every envelope: it then ends done. */
static int producer_can_advance(fsched_node *node, void *user) {
    stream_run *r = (stream_run *)user;
    (void)node;
    return r->produced < r->envelopes && fsched_link_envelope(r->produce) != NULL;
}

/* The nodes' work on one envelope of BATCH numbers (shape: a stream_shape), shared with
   the plain loop and the oneTBB peer; not inlined, so that all run the same
   instructions. */
BENCH_NOINLINE void bench_stream_produce(const void *shape, uint64_t envelope, uint64_t *out) {
    const stream_shape *s = (const stream_shape *)shape;
    uint64_t first = envelope * BATCH;
    unsigned j;
    for (j = 0; j < BATCH; j++) out[j] = mix(first + j, s->produce_rounds);
}

BENCH_NOINLINE void bench_stream_filter(const void *shape, const uint64_t *in, uint64_t *out,
                                        size_t n) {
    const stream_shape *s = (const stream_shape *)shape;
    size_t j;
    for (j = 0; j < n; j++) out[j] = mix(in[j], s->filter_rounds);
}

BENCH_NOINLINE uint64_t bench_stream_consume(const void *shape, const uint64_t *in, size_t n) {
    const stream_shape *s = (const stream_shape *)shape;
    uint64_t sum = 0;
    size_t j;
    for (j = 0; j < n; j++) sum += mix(in[j], s->consume_rounds);
    return sum;
}

static void producer_advance(fsched_node *node, void *user) {
    stream_run *r = (stream_run *)user;
    fsched_envelope *e = fsched_link_envelope(r->produce);
    bench_stream_produce(r->shape, r->produced, (uint64_t *)e->data);
    e->size = BATCH * sizeof(uint64_t);
    e->tag = r->produced++;
    fsched_node_complete(node, 1);
}

static void filter_advance(fsched_node *node, void *user) {
    stream_run *r = (stream_run *)user;
    const fsched_envelope *in = fsched_link_envelope(r->filter_in);
    fsched_envelope *out = fsched_link_envelope(r->filter_out);
    bench_stream_filter(r->shape, (const uint64_t *)in->data, (uint64_t *)out->data,
                        in->size / sizeof(uint64_t));
    out->size = in->size;
    out->tag = in->tag;
    fsched_node_complete(node, 1);
}

static void consumer_advance(fsched_node *node, void *user) {
    stream_run *r = (stream_run *)user;
    const fsched_envelope *e = fsched_link_envelope(r->consume);
    size_t n = e->size / sizeof(uint64_t);
    if (e->tag != r->next_tag || n != BATCH) r->out_of_order++;
    r->next_tag = e->tag + 1;
    r->sum += bench_stream_consume(r->shape, (const uint64_t *)e->data, n);
    fsched_node_complete(node, 1);
}

typedef struct stream_case {
    const stream_shape *shape;
    uint64_t envelopes;
    uint64_t expected_sum; /* from the plain loop */
    fsched_sched *sched;   /* NULL: the debugging scheduler */
    uint64_t *buffers;     /* oneTBB: STREAM_TOKENS envelopes of numbers, then as many
                              of transformed numbers */
    stream_run run;
} stream_case;

static void stream_reset(stream_case *c) {
    memset(&c->run, 0, sizeof c->run);
    c->run.shape = c->shape;
    c->run.envelopes = c->envelopes;
}

/* The same work as a plain loop, envelope by envelope through two buffers. */
static uint64_t stream_serial_sum(const stream_shape *s, uint64_t envelopes) {
    uint64_t numbers[BATCH], transformed[BATCH], sum = 0, i;
    for (i = 0; i < envelopes; i++) {
        bench_stream_produce(s, i, numbers);
        bench_stream_filter(s, numbers, transformed, BATCH);
        sum += bench_stream_consume(s, transformed, BATCH);
    }
    return sum;
}

static double run_stream_serial(void *ctx) {
    stream_case *c = (stream_case *)ctx;
    double t0 = bench_now();
    uint64_t sum = stream_serial_sum(c->shape, c->envelopes);
    double t1 = bench_now();
    if (sum != c->expected_sum)
        bench_fail("serial, %s: sum %llu, expected %llu", c->shape->name,
                   (unsigned long long)sum, (unsigned long long)c->expected_sum);
    return t1 - t0;
}

static fsched_hub *stream_hub(const char *name) {
    fsched_hub_desc d;
    fsched_hub *h;
    fsched_result r;
    memset(&d, 0, sizeof d);
    d.name = name;
    d.envelopes = HUB_ENVELOPES;
    d.capacity = BATCH * sizeof(uint64_t);
    if ((r = fsched_hub_create(&d, &h)) != FSCHED_OK)
        bench_fail("fsched_hub_create: %s", fsched_result_string(r));
    return h;
}

static fsched_node *stream_node(const char *label, stream_run *run,
                                int (*can_advance)(fsched_node *, void *),
                                void (*advance)(fsched_node *, void *)) {
    fsched_node_desc d;
    fsched_node *n;
    fsched_result r;
    memset(&d, 0, sizeof d);
    d.label = label;
    d.user = run;
    d.can_advance = can_advance;
    d.advance = advance;
    if ((r = fsched_node_create(&d, &n)) != FSCHED_OK)
        bench_fail("fsched_node_create: %s", fsched_result_string(r));
    return n;
}

static void stream_link(fsched_node *n, fsched_hub *h, fsched_link_kind kind, fsched_link **out) {
    fsched_result r = fsched_node_link(n, h, kind, out);
    if (r != FSCHED_OK) bench_fail("fsched_node_link: %s", fsched_result_string(r));
}

static void stream_add(fsched_pipeline *p, fsched_node *n) {
    fsched_result r = fsched_pipeline_add(p, n);
    if (r != FSCHED_OK) bench_fail("fsched_pipeline_add: %s", fsched_result_string(r));
}

/* One repetition: builds a fresh pipeline (it runs once), times the run, checks it. */
static double run_stream(void *ctx) {
    stream_case *c = (stream_case *)ctx;
    const char *who = c->sched ? "parallel scheduler" : "debugging scheduler";
    fsched_pipeline *p;
    fsched_hub *numbers, *transformed;
    fsched_node *nodes[3];
    fsched_result r;
    double t0, t1;
    int i;

    stream_reset(c);
    numbers = stream_hub("numbers");
    transformed = stream_hub("transformed");
    if ((r = fsched_pipeline_create(NULL, &p)) != FSCHED_OK)
        bench_fail("fsched_pipeline_create: %s", fsched_result_string(r));
    nodes[0] = stream_node("producer", &c->run, producer_can_advance, producer_advance);
    nodes[1] = stream_node("filter", &c->run, NULL, filter_advance);
    nodes[2] = stream_node("consumer", &c->run, NULL, consumer_advance);
    stream_link(nodes[0], numbers, FSCHED_LINK_PRODUCE, &c->run.produce);
    stream_link(nodes[1], numbers, FSCHED_LINK_CONSUME, &c->run.filter_in);
    stream_link(nodes[1], transformed, FSCHED_LINK_PRODUCE, &c->run.filter_out);
    stream_link(nodes[2], transformed, FSCHED_LINK_CONSUME, &c->run.consume);
    for (i = 0; i < 3; i++) stream_add(p, nodes[i]);

    t0 = bench_now();
    r = fsched_pipeline_run(p, c->sched);
    t1 = bench_now();

    if (r != FSCHED_OK) bench_fail("%s, %s: fsched_pipeline_run: %s", who, c->shape->name,
                                   fsched_result_string(r));
    for (i = 0; i < 3; i++) {
        fsched_node_report rep;
        if ((r = fsched_node_get_report(nodes[i], &rep)) != FSCHED_OK)
            bench_fail("fsched_node_get_report: %s", fsched_result_string(r));
        if (rep.end != FSCHED_NODE_DONE || rep.advances != c->envelopes)
            bench_fail("%s, %s: node %s ended %d after %llu advances (expected done after %llu)",
                       who, c->shape->name, fsched_node_label(nodes[i]), (int)rep.end,
                       (unsigned long long)rep.advances, (unsigned long long)c->envelopes);
    }
    if (c->run.next_tag != c->envelopes || c->run.out_of_order || c->run.sum != c->expected_sum)
        bench_fail("%s, %s: %llu envelopes consumed (%llu out of order), sum %llu, expected "
                   "%llu envelopes and sum %llu", who, c->shape->name,
                   (unsigned long long)c->run.next_tag, (unsigned long long)c->run.out_of_order,
                   (unsigned long long)c->run.sum, (unsigned long long)c->envelopes,
                   (unsigned long long)c->expected_sum);
    if ((r = fsched_pipeline_destroy(p)) != FSCHED_OK) /* destroys the nodes, unlinking them */
        bench_fail("fsched_pipeline_destroy: %s", fsched_result_string(r));
    if ((r = fsched_hub_destroy(numbers)) != FSCHED_OK ||
        (r = fsched_hub_destroy(transformed)) != FSCHED_OK)
        bench_fail("fsched_hub_destroy: %s", fsched_result_string(r));
    return t1 - t0;
}

#if defined(FSCHED_BENCH_TBB)
static double run_stream_tbb(void *ctx) {
    stream_case *c = (stream_case *)ctx;
    uint64_t in_order, sum;
    double t0, t1;
    t0 = bench_now();
    sum = bench_stream_tbb_run(c->shape, c->envelopes, c->buffers, BATCH, STREAM_TOKENS,
                               workers, &in_order);
    t1 = bench_now();
    if (in_order != c->envelopes || sum != c->expected_sum)
        bench_fail("oneTBB, %s: %llu envelopes consumed in order, sum %llu, expected %llu "
                   "envelopes and sum %llu", c->shape->name, (unsigned long long)in_order,
                   (unsigned long long)sum, (unsigned long long)c->envelopes,
                   (unsigned long long)c->expected_sum);
    return t1 - t0;
}
#endif

/* What overlapping the nodes can gain at most, taking each node's work as its rounds: a
   node runs one advance at a time, so an envelope takes at least the longest node's
   work, and at least the total work shared among the workers. */
static double overlap_bound(const stream_shape *s, int n_threads) {
    double total = (double)s->produce_rounds + s->filter_rounds + s->consume_rounds;
    double longest = s->filter_rounds, shared = total / n_threads;
    if (s->produce_rounds > longest) longest = s->produce_rounds;
    if (s->consume_rounds > longest) longest = s->consume_rounds;
    return total / (longest > shared ? longest : shared);
}

/* ---- the tables ---- */

static void table_header(const char *per, const char *rate, const char *vs) {
    printf("| %-44s | %10s | %10s | %11s | %11s | %14s |\n", "candidate", "median ms", "min ms",
           per, rate, vs);
    printf("|%s|%s|%s|%s|%s|%s|\n", "----------------------------------------------",
           "------------", "------------", "-------------", "-------------", "----------------");
}

/* A row: `count` things went through (items, envelopes), rate in millions per second. */
static void table_row(const bench_case *c, double count, const bench_case *base, double per_unit) {
    char ratio[16];
    printf("| %-44s | %10.2f | %10.2f | %11.1f | %11.2f | %14s |\n", c->name, c->median * 1e3,
           c->min * 1e3, c->median * per_unit / count, count / c->median * 1e-6,
           c == base ? "1.00x" : bench_ratio(ratio, sizeof ratio, c, base));
}

int main(int argc, char **argv) {
    int quick = bench_quick(argc, argv);
    int reps = bench_reps(argc, argv, quick ? 3 : 7);
    long tokens_option, items_option;
    size_t tokens;
    linear_case lin[2];
    stream_shape shapes[2] = {
        {"balanced", BALANCED_ROUNDS, BALANCED_ROUNDS, BALANCED_ROUNDS},
        {"filter-heavy", 0, FILTER_HEAVY_ROUNDS, 0},
    };
    double fs_over_tbb[2] = {0, 0}, speedup[2] = {0, 0}, stream_fs_over_tbb[2] = {0, 0};
    linear_item *ring;
    uint64_t *stream_buffers = NULL;
    fsched_desc d;
    fsched_result res;
    int k, i, nc, threads;

    workers = (int)bench_option(argc, argv, "--workers=", bench_cpu_count());
    if (workers < 1) bench_fail("--workers must be at least 1");
    threads = workers < bench_cpu_count() ? workers : bench_cpu_count(); /* that can overlap */
    tokens_option = bench_option(argc, argv, "--tokens=", 4L * workers);
    if (tokens_option < 1) bench_fail("--tokens must be at least 1");
    tokens = (size_t)tokens_option;
    items_option = bench_option(argc, argv, "--items=", quick ? 100000L : 1000000L);
    if (items_option < 5) bench_fail("--items must be at least 5");
    memset(&d, 0, sizeof d);
    d.workers = (uint32_t)workers;
    res = fsched_create(&d, &sched);
    if (res != FSCHED_OK) bench_fail("fsched_create: %s", fsched_result_string(res));
    ring = (linear_item *)aligned_alloc(CACHE_LINE, tokens * sizeof *ring);
    if (!ring) bench_fail("out of memory for %zu slots", tokens);
#if defined(FSCHED_BENCH_TBB)
    /* a cache line apart: each envelope is a whole number of lines */
    stream_buffers = (uint64_t *)aligned_alloc(CACHE_LINE,
                                               2 * STREAM_TOKENS * BATCH * sizeof(uint64_t));
    if (!stream_buffers) bench_fail("out of memory for %d envelopes", 2 * STREAM_TOKENS);
#endif

    /* ---- (a) ---- */
    memset(lin, 0, sizeof lin);
    lin[0].name = "small items";
    lin[0].items = (uint64_t)items_option;
    lin[0].rounds = SMALL_ROUNDS;
    lin[0].middle_stages = 1;
    lin[1].name = "heavy items";
    lin[1].items = (uint64_t)items_option / 5;
    lin[1].rounds = HEAVY_ROUNDS;
    lin[1].middle_stages = 2;
    printf("linear pipelines: %d worker(s) for every candidate, at most %zu items in flight "
           "(%s); median of %d repetitions\n\n", workers, tokens,
           tokens == 4u * (size_t)workers ? "4 per worker" : "--tokens", reps);
    for (k = 0; k < 2; k++) {
        linear_case *lc = &lin[k];
        bench_case c[3];
        lc->tokens = tokens;
        lc->run.ring = ring;
        linear_reset(lc);
        linear_serial_pass(&lc->run); /* the known sum */
        lc->expected_sum = lc->run.sum;

        memset(c, 0, sizeof c);
        nc = 0;
        c[nc].name = "fibersched: fsched_parallel_pipeline";
        c[nc].run = run_linear_fsched;
        c[nc].ctx = lc;
        c[nc++].workers = workers;
#if defined(FSCHED_BENCH_TBB)
        c[nc].name = "oneTBB: parallel_pipeline";
        c[nc].run = run_linear_tbb;
        c[nc].ctx = lc;
        c[nc++].workers = workers;
#endif
        c[nc].name = "serial loop (scale)";
        c[nc].run = run_linear_serial;
        c[nc].ctx = lc;
        c[nc++].workers = 1;
        bench_run_cases(c, nc, reps, 20, 1);

        printf("%s: %llu items; serial in-order input -> %zu parallel stage(s) of %u rounds "
               "-> serial in-order output\n\n", lc->name, (unsigned long long)lc->items,
               lc->middle_stages, lc->rounds);
        table_header("ns/item", "Mitems/s", "vs fibersched");
        for (i = 0; i < nc; i++) table_row(&c[i], (double)lc->items, &c[0], 1e9);
        printf("\n");
#if defined(FSCHED_BENCH_TBB)
        fs_over_tbb[k] = c[0].median / c[1].median;
#endif
    }

    /* ---- (b) ---- */
    printf("node pipeline: producer -> hub of %d envelopes of %d numbers -> filter -> hub of "
           "%d envelopes -> consumer; parallel scheduler and oneTBB on %d worker(s), oneTBB "
           "with at most %d envelopes in flight; median of %d repetitions\n\n", HUB_ENVELOPES,
           BATCH, HUB_ENVELOPES, workers, STREAM_TOKENS, reps);
    for (k = 0; k < 2; k++) {
        stream_case sc[4];
        bench_case c[4];
        uint64_t envelopes = quick ? 2000 : 20000;
        uint64_t expected = stream_serial_sum(&shapes[k], envelopes);
        memset(sc, 0, sizeof sc);
        memset(c, 0, sizeof c);
        for (i = 0; i < 4; i++) {
            sc[i].shape = &shapes[k];
            sc[i].envelopes = envelopes;
            sc[i].expected_sum = expected;
            c[i].ctx = &sc[i];
        }
        sc[1].sched = sched;
        nc = 0;
        c[nc].name = "debugging scheduler: run(p, NULL)";
        c[nc].run = run_stream;
        c[nc++].workers = 1;
        c[nc].name = "parallel scheduler: run(p, s)";
        c[nc].run = run_stream;
        c[nc++].workers = workers;
#if defined(FSCHED_BENCH_TBB)
        sc[nc].buffers = stream_buffers;
        c[nc].name = "oneTBB: parallel_pipeline (3 serial filters)";
        c[nc].run = run_stream_tbb;
        c[nc++].workers = workers;
#endif
        c[nc].name = "serial loop (scale)";
        c[nc].run = run_stream_serial;
        c[nc++].workers = 1;
        bench_run_cases(c, nc, reps, 20, 1);

        printf("%s: %llu envelopes; rounds a number: producer %u, filter %u, consumer %u\n\n",
               shapes[k].name, (unsigned long long)envelopes, shapes[k].produce_rounds,
               shapes[k].filter_rounds, shapes[k].consume_rounds);
        table_header("us/envelope", "Menv/s", "vs debugging");
        for (i = 0; i < nc; i++) table_row(&c[i], (double)envelopes, &c[0], 1e6);
        printf("\n");
        speedup[k] = c[0].median / c[1].median;
#if defined(FSCHED_BENCH_TBB)
        stream_fs_over_tbb[k] = c[1].median / c[2].median;
#endif
    }

    bench_quick_note(quick);
    for (k = 0; k < 2; k++) {
        char what[96];
        snprintf(what, sizeof what, "fibersched / oneTBB time, linear pipeline, %s", lin[k].name);
        if (fs_over_tbb[k] > 0)
            bench_target(what, fs_over_tbb[k], "<=", k == 0 ? TARGET_OVERHEAD : TARGET_LEVEL, "x");
        else printf("target: %s: not measured (oneTBB not available)\n", what);
    }
    for (k = 0; k < 2; k++)
        printf("speed-up: parallel scheduler over debugging scheduler, %s = %.2fx (at most "
               "about %.1fx: nodes of %u, %u and %u rounds, %d worker(s), %d CPU(s))\n",
               shapes[k].name, speedup[k], overlap_bound(&shapes[k], threads),
               shapes[k].produce_rounds, shapes[k].filter_rounds, shapes[k].consume_rounds,
               workers, bench_cpu_count());
    for (k = 0; k < 2; k++) {
        char what[96];
        snprintf(what, sizeof what, "fibersched parallel / oneTBB time, node pipeline, %s",
                 shapes[k].name);
        if (stream_fs_over_tbb[k] > 0)
            bench_target(what, stream_fs_over_tbb[k], "<=",
                         k == 0 ? TARGET_OVERHEAD : TARGET_LEVEL, "x");
        else printf("target: %s: not measured (oneTBB not available)\n", what);
    }
    free(stream_buffers);
    free(ring);
    fsched_destroy(sched);
    return 0;
}
