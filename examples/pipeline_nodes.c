/* A producer, a filter and a consumer as a pipeline of nodes. The producer fills
   envelopes of the hub "readings" with chunks of sensor readings; the filter takes each
   chunk, drops the readings below an alarm level, converts the others to another unit
   and puts them into an envelope of the hub "alarms"; the consumer counts and sums the
   alarms. Envelopes circulate: once the consumer has read one it is empty again and
   goes back to the filter, so memory is bounded by the hubs, and a node that finds no
   envelope simply waits (backpressure).

   What it shows:
   - hubs (fsched_hub_create): a fixed number of envelopes of a fixed capacity;
   - nodes linked to hubs as producers and consumers (fsched_node_link), and the links'
     envelopes (fsched_link_envelope) inside the callbacks;
   - can_advance written out for the producer, which stops once it has produced every
     reading; the other nodes leave it to the default (every link holds an envelope);
   - an asynchronous advance: the filter hands each chunk to a task on a scheduler and
     returns at once; the task calls fsched_node_complete when it is done;
   - fsched_link_keep: when no reading of a chunk passes the filter, its output envelope
     is not sent on empty but stays with the filter for the next chunk;
   - post_advance, which keeps the filter's statistics, and terminate, which prints each
     node's summary once the run has ended;
   - the same pipeline run twice, as a pipeline runs once: on a small input with the
     debugging scheduler (fsched_pipeline_run(p, NULL)), which updates one node at a time
     and logs every event in the words of noarr's debugging scheduler, then on a large input with the parallel scheduler; both
     results are checked against a serial computation, and fsched_pipeline_describe
     says how each node ended.

   Build: cc -O2 -pthread examples/pipeline_nodes.c -o pipeline_nodes */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <stdio.h>

#define WORKERS 4
#define ALARM_LEVEL 700 /* readings are 0..999; the filter passes those at or above this */

/* The two runs: a few chunks for a readable log, then many. */
#define SMALL_READINGS 16
#define SMALL_CHUNK 4
#define LARGE_READINGS 1000000
#define LARGE_CHUNK 1024

#define READINGS_ENVELOPES 3 /* the producer may run ahead of the filter by 3 chunks */
#define ALARMS_ENVELOPES 2

/* ---- the data and what is done with it: used by the nodes and by the serial check ---- */

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Reading number i, 0..999: a hash of i, so that every run sees the same data. Some
   stretches of QUIET_STRETCH readings are quiet, with no reading at the alarm level, so
   that the large run too has chunks of which nothing passes the filter. */
#define QUIET_STRETCH 4096
static uint32_t make_reading(uint64_t i) {
    uint32_t reading = (uint32_t)(mix(i) % 1000);
    int quiet = mix(~(i / QUIET_STRETCH)) % 4 == 1;
    return quiet ? reading * (ALARM_LEVEL - 1) / 999 : reading;
}

static int is_alarm(uint32_t reading) { return reading >= ALARM_LEVEL; }

/* The filter's conversion: readings in tenths of a unit to hundredths, with an offset. */
static uint32_t convert(uint32_t reading) { return reading * 10 + 25; }

typedef struct totals {
    uint64_t alarms;
    uint64_t sum;
} totals;

static totals serial_totals(size_t readings) {
    totals t = {0, 0};
    size_t i;
    for (i = 0; i < readings; i++) {
        uint32_t r = make_reading(i);
        if (is_alarm(r)) {
            t.alarms++;
            t.sum += convert(r);
        }
    }
    return t;
}

/* ---- the nodes: each has a struct of its own, given to every callback as `user` ---- */

typedef struct producer {
    fsched_link *out;     /* PRODUCE into "readings" */
    size_t readings;      /* how many to produce */
    size_t chunk;         /* readings per envelope */
    size_t next;          /* the next reading to produce */
    uint64_t chunks;      /* chunks produced, also the tag of the next one */
    int trace;            /* say what it does (in the small run) */
    int failed;
} producer;

typedef struct filter {
    fsched_node *node;    /* for fsched_node_complete, from the task */
    fsched_link *in;      /* CONSUME from "readings" */
    fsched_link *out;     /* PRODUCE into "alarms" */
    fsched_sched *sched;  /* where the work on each chunk runs */
    /* the chunk in work: set by advance, the result by the task */
    const fsched_envelope *chunk_in;
    fsched_envelope *chunk_out;
    size_t readings_now, passed_now;
    /* statistics, kept by post_advance */
    uint64_t chunks, readings, passed, chunks_dropped, done_inline;
    int trace;
    int failed;
} filter;

typedef struct consumer {
    fsched_link *in;      /* CONSUME from "alarms" */
    uint64_t chunks;
    totals result;
    uint64_t last_tag;    /* tags must rise: chunks arrive in the order produced */
    int trace;
    int out_of_order, failed;
} consumer;

/* Every callback gets the node and its user pointer. The node's callbacks never run at
   the same time (not even on the parallel scheduler), so each node's struct needs no
   lock. */

/* Without can_advance a node advances whenever each of its links holds an envelope. The
   producer's link always gets one eventually (the consumer empties them), so it must say
   itself when it is finished: FSCHED_NODE_FINISHED, which also gives the envelope its
   link holds back to the hub. It may not depend on anything but its links and its own
   state, since nothing would ask it again when something else changed. */
static int producer_can_advance(fsched_node *node, void *user) {
    producer *p = (producer *)user;
    if (p->next == p->readings) return FSCHED_NODE_FINISHED;
    return fsched_node_is_served(node); /* the output link holds an empty envelope */
}

static void producer_advance(fsched_node *node, void *user) {
    producer *p = (producer *)user;
    fsched_envelope *env = fsched_link_envelope(p->out);
    uint32_t *values = (uint32_t *)env->data; /* env->capacity bytes, from the hub */
    size_t n = p->readings - p->next < p->chunk ? p->readings - p->next : p->chunk, i;
    for (i = 0; i < n; i++) values[i] = make_reading(p->next + i);
    /* size and tag are the user's: the consumer of the envelope reads them */
    env->size = n * sizeof *values;
    env->tag = p->chunks++;
    if (p->trace)
        printf("    producer: chunk %llu, readings %zu..%zu\n", (unsigned long long)env->tag,
               p->next, p->next + n - 1);
    p->next += n;
    /* Advanced: the envelope is committed, full, to the hub, where the filter finds it.
       Completing inside advance is the synchronous case. */
    if (fsched_node_complete(node, 1) != FSCHED_OK) p->failed = 1;
}

static void producer_terminate(fsched_node *node, void *user) {
    producer *p = (producer *)user;
    printf("    %s: produced %zu readings in %llu chunks\n", fsched_node_label(node), p->next,
           (unsigned long long)p->chunks);
}

/* The filter's work on one chunk. It runs as a task on a worker thread, while the
   pipeline's scheduler goes on with the other nodes; this node stays busy, with both
   envelopes held, until fsched_node_complete. */
static void filter_chunk(void *arg) {
    filter *f = (filter *)arg;
    const uint32_t *readings = (const uint32_t *)f->chunk_in->data;
    uint32_t *alarms = (uint32_t *)f->chunk_out->data;
    size_t n = f->chunk_in->size / sizeof *readings, passed = 0, i;
    for (i = 0; i < n; i++)
        if (is_alarm(readings[i])) alarms[passed++] = convert(readings[i]);
    f->chunk_out->size = passed * sizeof *alarms;
    f->chunk_out->tag = f->chunk_in->tag;
    f->readings_now = n;
    f->passed_now = passed;
    /* Nothing passed: keep the output envelope (it is not committed with this advance)
       rather than send the consumer an empty one. The input is still consumed. */
    if (passed == 0 && fsched_link_keep(f->out) != FSCHED_OK) f->failed = 1;
    /* From any thread, exactly once per advance. Whatever this task wrote before it is
       visible to the node's next callbacks (post_advance first). */
    if (fsched_node_complete(f->node, 1) != FSCHED_OK) f->failed = 1;
}

/* Called when both links hold an envelope (the default can_advance). */
static void filter_advance(fsched_node *node, void *user) {
    filter *f = (filter *)user;
    f->node = node;
    f->chunk_in = fsched_link_envelope(f->in);
    f->chunk_out = fsched_link_envelope(f->out);
    /* Hand the chunk over and return without completing: the advance is in flight until
       the task completes it. Should the task not start, do the work here instead. */
    if (fsched_spawn(f->sched, filter_chunk, f) != FSCHED_OK) {
        f->done_inline++;
        filter_chunk(f);
    }
}

/* After each advance, once it has completed, before the envelopes are committed: the
   place for the node's bookkeeping, on the scheduler's side again. `advanced` is what
   the completion said. */
static void filter_post_advance(fsched_node *node, void *user, int advanced) {
    filter *f = (filter *)user;
    (void)node;
    if (!advanced) f->failed = 1; /* this filter always moves its input on */
    f->chunks++;
    f->readings += f->readings_now;
    f->passed += f->passed_now;
    if (f->passed_now == 0) f->chunks_dropped++;
    if (f->trace && f->passed_now == 0)
        printf("    filter: chunk %llu, nothing passed: the output envelope stays here\n",
               (unsigned long long)f->chunk_in->tag);
    else if (f->trace)
        printf("    filter: chunk %llu, %zu of %zu readings passed\n",
               (unsigned long long)f->chunk_in->tag, f->passed_now, f->readings_now);
}

static void filter_terminate(fsched_node *node, void *user) {
    filter *f = (filter *)user;
    printf("    %s: %llu chunks, %llu readings in, %llu passed; "
           "nothing passed in %llu chunks%s\n",
           fsched_node_label(node), (unsigned long long)f->chunks,
           (unsigned long long)f->readings, (unsigned long long)f->passed,
           (unsigned long long)f->chunks_dropped, f->done_inline ? " (some inline)" : "");
}

static void consumer_advance(fsched_node *node, void *user) {
    consumer *c = (consumer *)user;
    const fsched_envelope *env = fsched_link_envelope(c->in);
    const uint32_t *alarms = (const uint32_t *)env->data;
    size_t n = env->size / sizeof *alarms, i;
    if (c->chunks > 0 && env->tag <= c->last_tag) c->out_of_order = 1;
    c->last_tag = env->tag;
    for (i = 0; i < n; i++) c->result.sum += alarms[i];
    c->result.alarms += n;
    c->chunks++;
    if (c->trace)
        printf("    consumer: chunk %llu, %zu alarms\n", (unsigned long long)env->tag, n);
    /* Committing a consumed envelope makes it empty again, for the filter. */
    if (fsched_node_complete(node, 1) != FSCHED_OK) c->failed = 1;
}

static void consumer_terminate(fsched_node *node, void *user) {
    consumer *c = (consumer *)user;
    printf("    %s: %llu chunks, %llu alarms, sum %llu\n", fsched_node_label(node),
           (unsigned long long)c->chunks, (unsigned long long)c->result.alarms,
           (unsigned long long)c->result.sum);
}

/* ---- building the pipeline: once per run, as a pipeline runs once ---- */

typedef struct pipeline_run {
    fsched_pipeline *pipeline;
    fsched_hub *readings, *alarms;
    producer producer;
    filter filter;
    consumer consumer;
} pipeline_run;

static int check(fsched_result r, const char *what) {
    if (r == FSCHED_OK) return 1;
    fprintf(stderr, "%s: %s\n", what, fsched_result_string(r));
    return 0;
}

/* Creates a node with the callbacks of desc, links it to a hub or two, and adds it to the
   pipeline, which then owns it. */
static fsched_result add_node(fsched_pipeline *p, const fsched_node_desc *desc,
                              fsched_hub *hub_a, fsched_link_kind kind_a,
                              fsched_link **link_a, fsched_hub *hub_b,
                              fsched_link_kind kind_b, fsched_link **link_b) {
    fsched_node *node;
    fsched_result r = fsched_node_create(desc, &node);
    if (r != FSCHED_OK) return r;
    r = fsched_node_link(node, hub_a, kind_a, link_a);
    if (r == FSCHED_OK && hub_b) r = fsched_node_link(node, hub_b, kind_b, link_b);
    if (r == FSCHED_OK) r = fsched_pipeline_add(p, node);
    if (r != FSCHED_OK) fsched_node_destroy(node); /* not added: still ours */
    return r;
}

/* The debugging scheduler's log, one event a line. */
static void print_log_line(const char *line, void *user) {
    (void)user;
    printf("  | %s\n", line);
}

static void destroy_run(pipeline_run *run) {
    /* The pipeline destroys its nodes, which unlinks them from the hubs; a hub can only be
       destroyed after that. */
    check(fsched_pipeline_destroy(run->pipeline), "fsched_pipeline_destroy");
    check(fsched_hub_destroy(run->readings), "fsched_hub_destroy");
    check(fsched_hub_destroy(run->alarms), "fsched_hub_destroy");
}

static fsched_result build_run(pipeline_run *run, const char *name, size_t readings,
                               size_t chunk, fsched_sched *sched, int with_log) {
    fsched_pipeline_desc pipeline_desc = {0};
    fsched_hub_desc hub_desc = {0};
    fsched_node_desc node_desc = {0};
    fsched_result r;

    run->pipeline = NULL;
    run->readings = run->alarms = NULL;
    run->producer = (producer){0};
    run->filter = (filter){0};
    run->consumer = (consumer){0};
    run->producer.readings = readings;
    run->producer.chunk = chunk;
    run->filter.sched = sched;
    run->producer.trace = run->filter.trace = run->consumer.trace = with_log;

    pipeline_desc.name = name; /* for diagnostics */
    if (with_log) pipeline_desc.log = print_log_line;
    if ((r = fsched_pipeline_create(&pipeline_desc, &run->pipeline)) != FSCHED_OK) return r;

    /* Both hubs have envelopes of a whole chunk of readings: the filter's output is never
       larger than its input. */
    hub_desc.capacity = chunk * sizeof(uint32_t);
    hub_desc.name = "readings";
    hub_desc.envelopes = READINGS_ENVELOPES;
    if ((r = fsched_hub_create(&hub_desc, &run->readings)) != FSCHED_OK) return r;
    hub_desc.name = "alarms";
    hub_desc.envelopes = ALARMS_ENVELOPES;
    if ((r = fsched_hub_create(&hub_desc, &run->alarms)) != FSCHED_OK) return r;

    /* The debugging scheduler updates the nodes in the order they were added. */
    node_desc.label = "producer";
    node_desc.user = &run->producer;
    node_desc.can_advance = producer_can_advance;
    node_desc.advance = producer_advance;
    node_desc.terminate = producer_terminate;
    r = add_node(run->pipeline, &node_desc, run->readings, FSCHED_LINK_PRODUCE,
                 &run->producer.out, NULL, FSCHED_LINK_PRODUCE, NULL);
    if (r != FSCHED_OK) return r;

    node_desc = (fsched_node_desc){0};
    node_desc.label = "filter";
    node_desc.user = &run->filter;
    node_desc.advance = filter_advance;
    node_desc.post_advance = filter_post_advance;
    node_desc.terminate = filter_terminate;
    r = add_node(run->pipeline, &node_desc, run->readings, FSCHED_LINK_CONSUME,
                 &run->filter.in, run->alarms, FSCHED_LINK_PRODUCE, &run->filter.out);
    if (r != FSCHED_OK) return r;

    node_desc = (fsched_node_desc){0};
    node_desc.label = "consumer";
    node_desc.user = &run->consumer;
    node_desc.advance = consumer_advance;
    node_desc.terminate = consumer_terminate;
    return add_node(run->pipeline, &node_desc, run->alarms, FSCHED_LINK_CONSUME,
                    &run->consumer.in, NULL, FSCHED_LINK_PRODUCE, NULL);
}

/* fsched_pipeline_describe hands over the text in pieces, without a terminator; this
   writer indents each line. */
static void write_indented(const char *text, size_t len, void *user) {
    int *at_line_start = (int *)user;
    size_t i;
    for (i = 0; i < len; i++) {
        if (*at_line_start) fputs("    ", stdout);
        putchar(text[i]);
        *at_line_start = text[i] == '\n';
    }
}

/* Builds the pipeline, runs it on run_sched (NULL: the debugging scheduler) with the
   filter's work going to work_sched, and checks the consumer's totals against the serial
   computation. */
static int run_and_check(const char *title, size_t readings, size_t chunk,
                         fsched_sched *work_sched, fsched_sched *run_sched, int with_log) {
    pipeline_run run;
    totals expected = serial_totals(readings);
    uint64_t t0;
    double ms;
    fsched_result r;
    int ok, at_line_start = 1;

    printf("%s: %zu readings in chunks of %zu\n", title, readings, chunk);
    r = build_run(&run, "sensors", readings, chunk, work_sched, with_log);
    if (!check(r, "building the pipeline")) {
        if (run.pipeline) destroy_run(&run);
        return 0;
    }
    t0 = fsched_clock_ns();
    /* Returns when every node is idle and none can advance: FSCHED_OK when every node
       ended done, FSCHED_ERR_STALLED when one waits on a hub that will never serve it.
       The nodes' terminate callbacks have run by then. */
    r = fsched_pipeline_run(run.pipeline, run_sched);
    ms = (double)(fsched_clock_ns() - t0) / 1e6;
    ok = check(r, "fsched_pipeline_run");
    printf("  how the nodes ended:\n");
    ok &= check(fsched_pipeline_describe(run.pipeline, write_indented, &at_line_start),
                "fsched_pipeline_describe");

    printf("  result: %llu alarms, sum %llu, in %.1f ms; serially: %llu alarms, sum %llu\n",
           (unsigned long long)run.consumer.result.alarms,
           (unsigned long long)run.consumer.result.sum, ms,
           (unsigned long long)expected.alarms, (unsigned long long)expected.sum);
    if (run.producer.failed || run.filter.failed || run.consumer.failed) {
        fprintf(stderr, "  fsched_node_complete or fsched_link_keep failed\n");
        ok = 0;
    }
    if (run.consumer.out_of_order) {
        fprintf(stderr, "  the consumer saw chunks out of order\n");
        ok = 0;
    }
    if (run.consumer.result.alarms != expected.alarms ||
        run.consumer.result.sum != expected.sum || run.filter.readings != readings) {
        fprintf(stderr, "  wrong result\n");
        ok = 0;
    }
    destroy_run(&run);
    return ok;
}

int main(void) {
    fsched_desc desc = {0};
    fsched_sched *sched;
    int ok;

    /* The filter's tasks run on this scheduler in both runs; the second run's nodes too. */
    desc.workers = WORKERS;
    if (!check(fsched_create(&desc, &sched), "fsched_create")) return 1;

    /* The debugging scheduler runs on this thread and updates one node at a time, in the
       order they were added; when an advance has not completed by the time its callback
       returns (the filter's), it waits for it before it goes on to the next node. */
    ok = run_and_check("small run, debugging scheduler", SMALL_READINGS, SMALL_CHUNK, sched,
                       NULL, 1);
    /* The parallel scheduler updates a node as soon as something it depends on has
       changed: the producer, the filter and the consumer overlap. This thread is not part
       of the scheduler, so it blocks until the run ends. */
    if (ok)
        ok = run_and_check("large run, parallel scheduler", LARGE_READINGS, LARGE_CHUNK,
                           sched, sched, 0);

    if (!check(fsched_destroy(sched), "fsched_destroy")) return 1;
    if (ok) printf("both runs agree with the serial computation\n");
    return ok ? 0 : 1;
}
