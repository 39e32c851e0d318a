/* The trace (FIBERSCHED_TRACE): what a scheduler ran, written as Chrome trace-event JSON.
   The JSON is parsed back here (strictly: a syntax error fails the test) and checked
   against what the test ran: every detached task, graph task and pipeline stage once,
   blocked fibers and sleeps recorded, spans nested on every track, names escaped, every
   track named, the counts agreeing with the output, a full buffer counted as dropped,
   and every span of work named by the user's function (or the name given), never by one
   of the scheduler's own: loop pieces, join halves, spawn/sync children, graph tasks,
   pipeline nodes and stages.
   Built without FIBERSCHED_TRACE, the calls must say FSCHED_ERR_UNSUPPORTED. */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#if !FIBERSCHED_TRACE

static void discard(const char *text, size_t len, void *user) {
    (void)text;
    (void)len;
    (void)user;
    CHECK(!"nothing is written without FIBERSCHED_TRACE");
}

int main(void) {
    fsched_sched *s = test_sched_new(1);
    uint64_t recorded = 1, dropped = 1;
    CHECK_RESULT(fsched_trace_write_json(s, discard, NULL), FSCHED_ERR_UNSUPPORTED);
    CHECK_RESULT(fsched_trace_count(s, &recorded, &dropped), FSCHED_ERR_UNSUPPORTED);
    CHECK(recorded == 0 && dropped == 0);
    CHECK_RESULT(fsched_trace_write_json(NULL, discard, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    test_sched_free(s);
    printf("trace (off): ok\n");
    return 0;
}

#else

/* ---- the output, collected ---- */

typedef struct text_buffer {
    char *data;
    size_t n, cap;
} text_buffer;

static void collect(const char *text, size_t len, void *user) {
    text_buffer *b = (text_buffer *)user;
    CHECK(len > 0);
    if (b->n + len + 1 > b->cap) {
        b->cap = (b->n + len + 1) * 2;
        b->data = (char *)realloc(b->data, b->cap);
        CHECK(b->data != NULL);
    }
    memcpy(b->data + b->n, text, len);
    b->n += len;
    b->data[b->n] = 0;
}

/* ---- a strict JSON reader that keeps the trace events ---- */

typedef struct trace_event {
    char name[64];
    char cat[16]; /* the kind */
    char ph;
    uint64_t ts, dur; /* nanoseconds */
    uint64_t pid, tid;
    uint64_t fn;        /* args.fn: the user's function; 0: none */
    char arg_name[16];  /* the first other argument ... */
    char arg_value[32]; /* ... as written: a number or the inside of a string */
    char waits_on[32];  /* a blocked span's args.waits_on */
    char address[32];   /* the code anchor's "address" */
    int has_ts, has_dur, has_pid, has_tid, has_arg;
} trace_event;

typedef struct reader {
    const char *p;
    trace_event *events;
    size_t n_events, cap_events;
    int saw_trace_events;
} reader;

static void skip_space(reader *r) {
    while (*r->p == ' ' || *r->p == '\n' || *r->p == '\t' || *r->p == '\r') r->p++;
}

static void expect(reader *r, char c) {
    skip_space(r);
    if (*r->p != c) {
        fprintf(stderr, "JSON: expected '%c' at \"%.40s\"\n", c, r->p);
        CHECK(!"malformed JSON");
    }
    r->p++;
}

/* A string into out (unescaped, truncated to size). */
static void read_string(reader *r, char *out, size_t size) {
    size_t n = 0;
    expect(r, '"');
    while (*r->p != '"') {
        char c = *r->p++;
        CHECK(c != 0 && (unsigned char)c >= 0x20); /* no raw control characters */
        if (c == '\\') {
            c = *r->p++;
            if (c == 'u') { /* the writer escapes U+FFFD alone: kept as its UTF-8 bytes */
                CHECK(!strncmp(r->p, "fffd", 4));
                r->p += 4;
                if (n + 3 < size) {
                    memcpy(out + n, "\xef\xbf\xbd", 3);
                    n += 3;
                }
                continue;
            }
            CHECK(c == '"' || c == '\\' || c == '/' || c == 'n' || c == 't');
            if (c == 'n') c = '\n';
            if (c == 't') c = '\t';
        }
        if (n + 1 < size) out[n++] = c;
    }
    r->p++;
    out[n] = 0;
}

/* A number into out as written: -?digits(.digits)? */
static void read_number(reader *r, char *out, size_t size) {
    size_t n = 0;
    skip_space(r);
    if (*r->p == '-') out[n++] = *r->p++;
    CHECK(*r->p >= '0' && *r->p <= '9');
    while ((*r->p >= '0' && *r->p <= '9') || *r->p == '.') {
        CHECK(n + 1 < size);
        out[n++] = *r->p++;
    }
    out[n] = 0;
}

/* "U.FFF" microseconds (the writer's format) as nanoseconds */
static uint64_t microseconds_to_ns(const char *text) {
    uint64_t whole = 0;
    const char *dot = strchr(text, '.');
    CHECK(dot != NULL && strlen(dot) == 4);
    for (; text < dot; text++) whole = whole * 10 + (uint64_t)(*text - '0');
    return whole * 1000 + (uint64_t)strtoul(dot + 1, NULL, 10);
}

static void read_value(reader *r, int depth, trace_event *ev);

static void read_object(reader *r, int depth, trace_event *ev) {
    expect(r, '{');
    skip_space(r);
    if (*r->p == '}') {
        r->p++;
        return;
    }
    for (;;) {
        char key[32], number[32];
        read_string(r, key, sizeof key);
        expect(r, ':');
        skip_space(r);
        if (ev && depth == 2 && !strcmp(key, "name")) {
            read_string(r, ev->name, sizeof ev->name);
        } else if (ev && depth == 2 && !strcmp(key, "cat")) {
            read_string(r, ev->cat, sizeof ev->cat);
        } else if (ev && depth == 2 && !strcmp(key, "ph")) {
            char ph[4];
            read_string(r, ph, sizeof ph);
            CHECK(strlen(ph) == 1);
            ev->ph = ph[0];
        } else if (ev && depth == 2 && (!strcmp(key, "ts") || !strcmp(key, "dur"))) {
            read_number(r, number, sizeof number);
            if (key[0] == 't') ev->ts = microseconds_to_ns(number), ev->has_ts = 1;
            else ev->dur = microseconds_to_ns(number), ev->has_dur = 1;
        } else if (ev && depth == 2 && (!strcmp(key, "pid") || !strcmp(key, "tid"))) {
            read_number(r, number, sizeof number);
            if (key[0] == 'p') ev->pid = strtoull(number, NULL, 10), ev->has_pid = 1;
            else ev->tid = strtoull(number, NULL, 10), ev->has_tid = 1;
        } else if (ev && depth == 3 && !strcmp(key, "address")) {
            read_string(r, ev->address, sizeof ev->address);
        } else if (ev && depth == 3 && !strcmp(key, "fn")) {
            char hex[32];
            read_string(r, hex, sizeof hex);
            CHECK(!strncmp(hex, "0x", 2));
            ev->fn = strtoull(hex, NULL, 16);
            CHECK(ev->fn != 0);
        } else if (ev && depth == 3 && !strcmp(key, "waits_on")) {
            read_string(r, ev->waits_on, sizeof ev->waits_on);
        } else if (ev && depth == 3 && !ev->has_arg) {
            CHECK(strlen(key) < sizeof ev->arg_name);
            strcpy(ev->arg_name, key);
            if (*r->p == '"') read_string(r, ev->arg_value, sizeof ev->arg_value);
            else read_number(r, ev->arg_value, sizeof ev->arg_value);
            ev->has_arg = 1;
        } else if (depth == 0 && !strcmp(key, "traceEvents")) {
            r->saw_trace_events = 1;
            read_value(r, 1, NULL);
        } else {
            read_value(r, depth + 1, ev);
        }
        skip_space(r);
        if (*r->p == '}') {
            r->p++;
            return;
        }
        expect(r, ',');
    }
}

static void read_array(reader *r, int depth) {
    expect(r, '[');
    skip_space(r);
    if (*r->p == ']') {
        r->p++;
        return;
    }
    for (;;) {
        if (depth == 1) { /* an element of traceEvents */
            trace_event *ev;
            if (r->n_events == r->cap_events) {
                r->cap_events = r->cap_events ? r->cap_events * 2 : 256;
                r->events = (trace_event *)realloc(r->events, r->cap_events * sizeof *r->events);
                CHECK(r->events != NULL);
            }
            ev = &r->events[r->n_events++];
            memset(ev, 0, sizeof *ev);
            read_object(r, 2, ev);
        } else {
            read_value(r, depth + 1, NULL);
        }
        skip_space(r);
        if (*r->p == ']') {
            r->p++;
            return;
        }
        expect(r, ',');
    }
}

static void read_value(reader *r, int depth, trace_event *ev) {
    char scratch[64];
    skip_space(r);
    if (*r->p == '{') read_object(r, depth, ev);
    else if (*r->p == '[') read_array(r, depth);
    else if (*r->p == '"') read_string(r, scratch, sizeof scratch);
    else read_number(r, scratch, sizeof scratch);
}

/* Parses the whole output; every event has the fields its phase needs. */
static const char *const kinds[] = {"task",  "join",    "child", "graph task", "advance",
                                     "stage", "blocked", "sleep", "steal"};

static int is_kind(const char *cat, size_t from, size_t to) {
    size_t k;
    for (k = from; k < to; k++)
        if (!strcmp(cat, kinds[k])) return 1;
    return 0;
}

/* a span of the user's work: task, join, child, graph task, advance or stage */
static int is_work(const trace_event *e) { return e->ph == 'X' && is_kind(e->cat, 0, 6); }

static reader read_trace(const text_buffer *b) {
    reader r;
    size_t i;
    memset(&r, 0, sizeof r);
    CHECK(b->data != NULL);
    r.p = b->data;
    read_object(&r, 0, NULL);
    skip_space(&r);
    CHECK(*r.p == 0);
    CHECK(r.saw_trace_events);
    for (i = 0; i < r.n_events; i++) {
        const trace_event *e = &r.events[i];
        CHECK(e->name[0] && e->has_pid && e->has_tid);
        CHECK(e->ph == 'M' || e->ph == 'X' || e->ph == 'i');
        if (e->ph != 'M') CHECK(e->has_ts);
        if (e->ph == 'X') CHECK(e->has_dur);
        if (e->ph == 'M' && strcmp(e->name, "code_anchor") != 0)
            CHECK(e->has_arg && !strcmp(e->arg_name, "name"));
        /* every event says its kind; work carries the user's function, nothing else does */
        if (e->ph != 'M') CHECK(is_kind(e->cat, 0, sizeof kinds / sizeof *kinds));
        if (e->ph == 'i') CHECK(!strcmp(e->cat, "steal"));
        CHECK(is_work(e) ? e->fn != 0 : e->fn == 0);
        if (e->ph == 'X' && !strcmp(e->cat, "blocked")) CHECK(!strcmp(e->name, "blocked"));
    }
    /* once, first: where the writer's own code is, to name functions from their addresses */
    CHECK(r.n_events > 0 && !strcmp(r.events[0].name, "code_anchor"));
    CHECK(!strcmp(r.events[0].arg_name, "symbol"));
    CHECK(!strcmp(r.events[0].arg_value, "fsched_trace_write_json"));
    {
        fsched_result (*writer)(fsched_sched *, void (*)(const char *, size_t, void *), void *) =
            fsched_trace_write_json;
        uintptr_t address = 0;
        memcpy(&address, &writer, sizeof address);
        CHECK_EQ_U64(strtoull(r.events[0].address, NULL, 16), address);
    }
    for (i = 1; i < r.n_events; i++) CHECK(strcmp(r.events[i].name, "code_anchor") != 0);
    return r;
}

static size_t count_named(const reader *r, char ph, const char *name) {
    size_t i, n = 0;
    for (i = 0; i < r->n_events; i++)
        if (r->events[i].ph == ph && !strcmp(r->events[i].name, name)) n++;
    return n;
}

static int named_track(const reader *r, const char *meta, uint64_t pid, uint64_t tid) {
    size_t i;
    for (i = 0; i < r->n_events; i++) {
        const trace_event *e = &r->events[i];
        if (e->ph == 'M' && !strcmp(e->name, meta) && e->pid == pid && e->tid == tid)
            return 1;
    }
    return 0;
}

static int by_track_then_start(const void *a, const void *b) {
    const trace_event *x = *(const trace_event *const *)a, *y = *(const trace_event *const *)b;
    if (x->pid != y->pid) return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->dur != y->dur) return x->dur > y->dur ? -1 : 1; /* the enclosing one first */
    return 0;
}

/* Every span and instant is on a named track of a named slot, and the spans of a track
   nest: each one either ends before the next begins or contains it. */
static void check_tracks(const reader *r, uint32_t slots) {
    const trace_event **v = (const trace_event **)malloc((r->n_events + 1) * sizeof *v);
    const trace_event *stack[256];
    size_t i, n = 0, depth = 0;
    CHECK(v != NULL);
    for (i = 0; i < r->n_events; i++) {
        const trace_event *e = &r->events[i];
        if (e->ph == 'M') continue;
        CHECK(e->pid >= 1 && e->pid <= slots && e->tid >= 1);
        CHECK(named_track(r, "process_name", e->pid, 0));
        CHECK(named_track(r, "thread_name", e->pid, e->tid));
        if (e->ph == 'X') v[n++] = e;
    }
    qsort(v, n, sizeof *v, by_track_then_start);
    for (i = 0; i < n; i++) {
        const trace_event *e = v[i];
        if (depth && (stack[depth - 1]->pid != e->pid || stack[depth - 1]->tid != e->tid))
            depth = 0;
        while (depth && stack[depth - 1]->ts + stack[depth - 1]->dur <= e->ts) depth--;
        if (depth) {
            const trace_event *outer = stack[depth - 1];
            if (e->ts + e->dur > outer->ts + outer->dur) {
                fprintf(stderr, "track %llu/%llu: \"%s\" [%llu, +%llu] overlaps \"%s\" [%llu, +%llu]\n",
                        (unsigned long long)e->pid, (unsigned long long)e->tid, e->name,
                        (unsigned long long)e->ts, (unsigned long long)e->dur, outer->name,
                        (unsigned long long)outer->ts, (unsigned long long)outer->dur);
                CHECK(!"spans of one track must nest");
            }
        }
        CHECK(depth < sizeof stack / sizeof *stack);
        stack[depth++] = e;
    }
    free(v);
}

/* The trace holds what was recorded when it was written: no less than the count read
   before (`before`), no more than the count read now (a worker still finishing, or waking
   from a sleep, may record after the write). */
static void check_counts_agree(fsched_sched *s, const reader *r, uint64_t before,
                               uint64_t want_dropped_min) {
    uint64_t recorded = 0, dropped = 0, written = 0;
    size_t i;
    for (i = 0; i < r->n_events; i++) written += r->events[i].ph != 'M';
    CHECK_OK(fsched_trace_count(s, &recorded, &dropped));
    if (written < before || written > recorded)
        fprintf(stderr, "recorded %llu before writing, %llu after; written %llu\n",
                (unsigned long long)before, (unsigned long long)recorded,
                (unsigned long long)written);
    CHECK(before <= written && written <= recorded);
    CHECK(dropped >= want_dropped_min);
    if (!want_dropped_min) CHECK_EQ_U64(dropped, 0);
}

/* ---- what the scheduler runs ---- */

#define TASKS 300
#define SLEEPERS 30 /* of those, the ones that sleep (and so block their fiber) */
#define GRAPH_TASKS 64
#define ITEMS 200

static unsigned task_runs[TASKS];

typedef struct task_arg {
    unsigned index;
} task_arg;

static void small_task(void *p) {
    unsigned i = *(unsigned *)p;
    task_runs[i]++;
    if (i % (TASKS / SLEEPERS) == 0) fsched_sleep_for(50 * 1000);
}

static void fib(void *p) {
    long *a = (long *)p, x[2], y[2];
    if (a[0] < 2) {
        a[1] = a[0];
        return;
    }
    x[0] = a[0] - 1;
    y[0] = a[0] - 2;
    CHECK_OK(fsched_join(fib, x, fib, y));
    a[1] = x[1] + y[1];
}

static int graph_step(fsched_graph_task *self, void *arg) {
    (void)self;
    ++*(unsigned *)arg;
    return 0;
}

static unsigned next_item, items_seen;
static void *input_stage(void *user, void *item, int *stop) {
    (void)user;
    (void)item;
    if (next_item == ITEMS) *stop = 1;
    else next_item++;
    return (void *)(uintptr_t)next_item;
}
static void *middle_stage(void *user, void *item, int *stop) {
    (void)user;
    (void)stop;
    return item;
}
static void *output_stage(void *user, void *item, int *stop) {
    (void)user;
    (void)stop;
    CHECK((uintptr_t)item == ++items_seen); /* serial in order */
    return NULL;
}

static void run_pipeline_and_fib(void *p) {
    fsched_stage stages[3];
    long f[2] = {15, 0};
    (void)p;
    memset(stages, 0, sizeof stages);
    stages[0].mode = FSCHED_STAGE_SERIAL_IN_ORDER;
    stages[0].fn = input_stage;
    stages[1].mode = FSCHED_STAGE_PARALLEL;
    stages[1].fn = middle_stage;
    stages[2].mode = FSCHED_STAGE_SERIAL_IN_ORDER;
    stages[2].fn = output_stage;
    stages[0].user = stages[1].user = stages[2].user = NULL;
    CHECK_OK(fsched_parallel_pipeline(4, stages, 3));
    CHECK_EQ_U64(items_seen, ITEMS);
    fib(f);
    CHECK_EQ_U64(f[1], 610);
}

static void nothing(void *p) { (void)p; }

static void test_everything_recorded(uint32_t workers) {
    fsched_sched *s = test_sched_new(workers);
    fsched_wait_group wg;
    fsched_graph *g;
    fsched_graph_task *t[GRAPH_TASKS];
    fsched_graph_task_desc td;
    unsigned graph_runs[GRAPH_TASKS], idx[TASKS], i;
    uint64_t rng = 42;
    char name[32];
    text_buffer out = {NULL, 0, 0};
    reader r;
    size_t stage_calls[3] = {0, 0, 0}, graph_named = 0;
    uint64_t recorded_before = 0;

    memset(task_runs, 0, sizeof task_runs);
    next_item = items_seen = 0;
    CHECK_OK(fsched_wait_group_init(&wg));
    for (i = 0; i < TASKS; i++) {
        idx[i] = i;
        CHECK_OK(fsched_wait_group_spawn(&wg, s, small_task, &idx[i]));
    }
    CHECK_OK(fsched_wait_group_spawn(&wg, s, run_pipeline_and_fib, NULL));
    CHECK_OK(fsched_wait_group_wait(&wg));

    /* a random DAG of named tasks; one name needs escaping, and its newline is dropped */
    CHECK_OK(fsched_graph_create(NULL, &g));
    memset(&td, 0, sizeof td);
    for (i = 0; i < GRAPH_TASKS; i++) {
        graph_runs[i] = 0;
        if (i == 7) snprintf(name, sizeof name, "quote\"back\\slash\nend");
        else snprintf(name, sizeof name, "g%u", i);
        td.name = name;
        CHECK_OK(fsched_graph_add(g, graph_step, &graph_runs[i], &td, &t[i]));
        if (i > 0) CHECK_OK(fsched_graph_precede(g, t[test_rng(&rng) % i], t[i]));
    }
    CHECK_OK(fsched_graph_run(g, s));
    CHECK_OK(fsched_graph_wait(g, NULL));
    for (i = 0; i < GRAPH_TASKS; i++) CHECK_EQ_U64(graph_runs[i], 1);
    CHECK_OK(fsched_graph_destroy(g)); /* the names stay in the trace */

#if TEST_THREADS
    {   /* the workers go to sleep; a spawn wakes one, which records its sleep */
        fsched_sleep_for(30 * 1000 * 1000); /* this thread is outside: it just sleeps */
        CHECK_OK(fsched_wait_group_spawn_named(&wg, s, nothing, NULL, "the last one"));
        CHECK_OK(fsched_wait_group_wait(&wg));
    }
#else
    CHECK_OK(fsched_wait_group_spawn_named(&wg, s, nothing, NULL, "the last one"));
    CHECK_OK(fsched_wait_group_wait(&wg));
#endif
    CHECK_OK(fsched_wait_group_destroy(&wg));
    for (i = 0; i < TASKS; i++) CHECK_EQ_U64(task_runs[i], 1);

    CHECK_OK(fsched_trace_count(s, &recorded_before, NULL));
    CHECK_OK(fsched_trace_write_json(s, collect, &out));
    r = read_trace(&out);
    check_tracks(&r, workers + 8 + 1);
    check_counts_agree(s, &r, recorded_before, 0);

    /* every detached task once: the small ones and the pipeline's host as "task", the
       last one by its name */
    CHECK_EQ_U64(count_named(&r, 'X', "task"), TASKS + 1);
    CHECK_EQ_U64(count_named(&r, 'X', "the last one"), 1);
    for (i = 0; i < GRAPH_TASKS; i++) {
        if (i == 7) snprintf(name, sizeof name, "quote\"back\\slashend");
        else snprintf(name, sizeof name, "g%u", i);
        CHECK_EQ_U64(count_named(&r, 'X', name), 1);
    }
    for (i = 0; i < r.n_events; i++) {
        const trace_event *e = &r.events[i];
        if (e->ph == 'X' && !strcmp(e->name, "stage")) {
            unsigned long k = strtoul(e->arg_value, NULL, 10);
            CHECK(e->has_arg && !strcmp(e->arg_name, "stage") && k < 3);
            stage_calls[k]++;
        }
        if (e->ph == 'X' && (e->name[0] == 'g' || e->name[0] == 'q')) {
            CHECK(e->has_arg && !strcmp(e->arg_name, "status") && !strcmp(e->arg_value, "0"));
            graph_named++;
        }
        if (e->ph == 'X' && !strcmp(e->name, "task"))
            CHECK(!strcmp(e->cat, "task") && (e->fn == FSCHED__CODE(small_task) ||
                                              e->fn == FSCHED__CODE(run_pipeline_and_fib)));
        if (e->ph == 'i') CHECK(!strcmp(e->name, "steal") && !strcmp(e->arg_name, "victim"));
    }
    CHECK_EQ_U64(graph_named, GRAPH_TASKS);
    CHECK_EQ_U64(stage_calls[0], ITEMS + 1); /* the last call stops the input */
    CHECK_EQ_U64(stage_calls[1], ITEMS);
    CHECK_EQ_U64(stage_calls[2], ITEMS);
    CHECK(count_named(&r, 'X', "blocked") >= SLEEPERS); /* each sleep suspended a fiber */
#if TEST_THREADS
    CHECK(count_named(&r, 'X', "sleep") >= 1);
    { /* a worker ran something (which one is the scheduler's choice) */
        uint32_t k, named = 0;
        for (k = 0; k < workers; k++) named += named_track(&r, "process_name", k + 1, 0);
        CHECK(named >= 1);
    }
#endif
    free(r.events);
    free(out.data);
    test_sched_free(s);
}

/* ---- every span of work names the user's code ----
   Each kind of work is made to run as a job of its own, whatever the number of workers:
   the first half of a join, the first piece of a loop and a spawn/sync parent wait until
   the other half, piece or child has begun, which only a job of its own can do. */

static fsched_event half_began, piece_began, reduce_piece_began, child_began;
static unsigned node_advances;

static void waits_for_half(void *p) {
    (void)p;
    CHECK_OK(fsched_event_wait(&half_began));
}

static void sets_half(void *p) {
    (void)p;
    CHECK_OK(fsched_event_set(&half_began));
}

static void loop_piece(void *ctx, size_t lo, size_t hi) {
    (void)ctx;
    (void)hi;
    if (lo == 0) CHECK_OK(fsched_event_wait(&piece_began));
    else CHECK_OK(fsched_event_set(&piece_began));
}

static void reduce_init(void *ctx, void *acc) {
    (void)ctx;
    *(size_t *)acc = 0;
}

static void reduce_piece(void *ctx, size_t lo, size_t hi, void *acc) {
    (void)ctx;
    if (lo == 0) CHECK_OK(fsched_event_wait(&reduce_piece_began));
    else CHECK_OK(fsched_event_set(&reduce_piece_began));
    *(size_t *)acc += hi - lo;
}

static void reduce_combine(void *ctx, void *acc, const void *other) {
    (void)ctx;
    *(size_t *)acc += *(const size_t *)other;
}

FSCHED_VOID_TASK(child_sets, fsched_event *, e) { CHECK_OK(fsched_event_set(e)); }

FSCHED_VOID_TASK(parent_waits, fsched_event *, e) {
    FSCHED_SPAWN(child_sets, e);
    CHECK_OK(fsched_event_wait(e));
    FSCHED_SYNC(child_sets);
}

static void *stage_source(void *user, void *item, int *stop) {
    unsigned *n = (unsigned *)user;
    (void)item;
    if (++*n > 8) *stop = 1;
    return user;
}

static void *stage_sink(void *user, void *item, int *stop) {
    (void)user;
    (void)stop;
    return item;
}

static void user_work(void *p) {
    fsched_stage stages[2];
    unsigned items = 0;
    size_t sum = 0;
    (void)p;
    CHECK_OK(fsched_join(waits_for_half, NULL, sets_half, NULL));
    CHECK_OK(fsched_parallel_for(0, 2, 1, loop_piece, NULL));
    CHECK_OK(fsched_parallel_reduce(0, 2, 1, sizeof sum, reduce_init, reduce_piece,
                                    reduce_combine, NULL, &sum));
    CHECK_EQ_U64(sum, 2);
    CHECK_OK(FSCHED_RUN(parent_waits, &child_began, NULL));
    memset(stages, 0, sizeof stages);
    stages[0].mode = FSCHED_STAGE_SERIAL_IN_ORDER;
    stages[0].fn = stage_source;
    stages[0].user = &items;
    stages[0].name = "source";
    stages[1].mode = FSCHED_STAGE_PARALLEL;
    stages[1].fn = stage_sink;
    stages[1].name = "sink";
    CHECK_OK(fsched_parallel_pipeline(2, stages, 2));
}

static int graph_unnamed(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    return 0;
}

static int graph_named(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    return 0;
}

static int node_can_advance(fsched_node *node, void *user) {
    (void)node;
    (void)user;
    return node_advances < 3 ? 1 : FSCHED_NODE_FINISHED;
}

static void node_advance(fsched_node *node, void *user) {
    (void)user;
    node_advances++;
    CHECK_OK(fsched_node_complete(node, 1));
}

/* Spans of kind `cat` named `name` whose function is fn. */
static size_t count_spans(const reader *r, const char *cat, const char *name, uintptr_t fn) {
    size_t i, n = 0;
    for (i = 0; i < r->n_events; i++) {
        const trace_event *e = &r->events[i];
        n += e->ph == 'X' && !strcmp(e->cat, cat) && !strcmp(e->name, name) && e->fn == fn;
    }
    return n;
}

static void test_named_by_user_code(uint32_t workers) {
    fsched_sched *s = test_sched_new(workers);
    fsched_wait_group wg;
    fsched_graph *g;
    fsched_graph_task *t;
    fsched_graph_task_desc td;
    fsched_pipeline *pl;
    fsched_node *node;
    fsched_node_desc nd;
    text_buffer out = {NULL, 0, 0};
    reader r;
    size_t i, k, waits = 0;
    const uintptr_t user_code[] = {
        FSCHED__CODE(user_work),     FSCHED__CODE(waits_for_half), FSCHED__CODE(sets_half),
        FSCHED__CODE(loop_piece),    FSCHED__CODE(reduce_piece),
        FSCHED__CODE(child_sets_fsched_run), FSCHED__CODE(parent_waits_fsched_run),
        FSCHED__CODE(stage_source),  FSCHED__CODE(stage_sink),     FSCHED__CODE(graph_unnamed),
        FSCHED__CODE(graph_named),   FSCHED__CODE(node_advance)};

    CHECK_OK(fsched_event_init(&half_began, 0, 0));
    CHECK_OK(fsched_event_init(&piece_began, 0, 0));
    CHECK_OK(fsched_event_init(&reduce_piece_began, 0, 0));
    CHECK_OK(fsched_event_init(&child_began, 0, 0));
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, user_work, NULL));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));

    CHECK_OK(fsched_graph_create(NULL, &g));
    CHECK_OK(fsched_graph_add(g, graph_unnamed, NULL, NULL, &t));
    memset(&td, 0, sizeof td);
    td.name = "named step";
    CHECK_OK(fsched_graph_add(g, graph_named, NULL, &td, &t));
    CHECK_OK(fsched_graph_run(g, s));
    CHECK_OK(fsched_graph_wait(g, NULL));
    CHECK_OK(fsched_graph_destroy(g));

    node_advances = 0;
    CHECK_OK(fsched_pipeline_create(NULL, &pl));
    memset(&nd, 0, sizeof nd);
    nd.label = "counter";
    nd.can_advance = node_can_advance;
    nd.advance = node_advance;
    CHECK_OK(fsched_node_create(&nd, &node));
    CHECK_OK(fsched_pipeline_add(pl, node));
    CHECK_OK(fsched_pipeline_run(pl, s));
    CHECK_OK(fsched_pipeline_destroy(pl));
    CHECK_EQ_U64(node_advances, 3);

    CHECK_OK(fsched_trace_write_json(s, collect, &out));
    r = read_trace(&out);
    for (i = 0; i < r.n_events; i++) {
        const trace_event *e = &r.events[i];
        int known = 0;
        if (!is_work(e)) {
            waits += !strcmp(e->cat, "blocked") && !strcmp(e->waits_on, "event");
            continue;
        }
        for (k = 0; k < sizeof user_code / sizeof *user_code; k++) known |= e->fn == user_code[k];
        if (!known)
            fprintf(stderr, "%s \"%s\" names 0x%llx, none of the user's functions\n", e->cat,
                    e->name, (unsigned long long)e->fn);
        CHECK(known);
    }
    CHECK_EQ_U64(count_spans(&r, "task", "task", FSCHED__CODE(user_work)), 1);
    CHECK(count_spans(&r, "join", "join", FSCHED__CODE(sets_half)) == 1);
    CHECK(count_spans(&r, "join", "join", FSCHED__CODE(loop_piece)) == 1);
    CHECK(count_spans(&r, "join", "join", FSCHED__CODE(reduce_piece)) == 1);
    CHECK(count_spans(&r, "child", "child", FSCHED__CODE(child_sets_fsched_run)) == 1);
    CHECK_EQ_U64(count_spans(&r, "graph task", "graph task", FSCHED__CODE(graph_unnamed)), 1);
    CHECK_EQ_U64(count_spans(&r, "graph task", "named step", FSCHED__CODE(graph_named)), 1);
    CHECK_EQ_U64(count_spans(&r, "advance", "counter", FSCHED__CODE(node_advance)), 3);
    CHECK_EQ_U64(count_spans(&r, "stage", "source", FSCHED__CODE(stage_source)), 9);
    CHECK_EQ_U64(count_spans(&r, "stage", "sink", FSCHED__CODE(stage_sink)), 8);
    /* the join, the loop, the reduction and the parent waited: on one worker, where the
       other half, piece or child begins only once they wait (on two it may begin first) */
    if (workers == 1) CHECK(waits >= 4);
    CHECK_OK(fsched_event_destroy(&half_began));
    CHECK_OK(fsched_event_destroy(&piece_began));
    CHECK_OK(fsched_event_destroy(&reduce_piece_began));
    CHECK_OK(fsched_event_destroy(&child_began));
    free(r.events);
    free(out.data);
    test_sched_free(s);
}

/* A buffer of a few events per slot keeps the first ones and counts the rest. */
static void test_full_buffer(void) {
    fsched_desc d;
    fsched_sched *s;
    fsched_wait_group wg;
    text_buffer out = {NULL, 0, 0};
    reader r;
    uint64_t recorded, dropped;
    unsigned i;
    memset(&d, 0, sizeof d);
    d.workers = 2;
    d.trace_events = 8;
#if !TEST_THREADS
    d.workers = 0;
#endif
    CHECK_OK(fsched_create(&d, &s));
#if !TEST_THREADS
    CHECK_OK(fsched_bind(s));
#endif
    CHECK_OK(fsched_wait_group_init(&wg));
    for (i = 0; i < 100; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, nothing, NULL));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_trace_count(s, &recorded, &dropped));
    CHECK(recorded <= 8u * (d.workers + 8 + 1));
    CHECK(recorded + dropped >= 100); /* each task was recorded or counted */
    CHECK_OK(fsched_trace_write_json(s, collect, &out));
    r = read_trace(&out);
    check_tracks(&r, d.workers + 8 + 1);
    check_counts_agree(s, &r, recorded, 1);
    free(r.events);
    free(out.data);
#if !TEST_THREADS
    CHECK_OK(fsched_unbind());
#endif
    CHECK_OK(fsched_destroy(s));
}

/* Written while the workers still record: a consistent prefix of every slot. */
static void test_written_while_running(void) {
#if TEST_THREADS
    fsched_sched *s = test_sched_new(2);
    fsched_wait_group wg;
    unsigned round, i;
    CHECK_OK(fsched_wait_group_init(&wg));
    for (round = 0; round < 20; round++) {
        text_buffer out = {NULL, 0, 0};
        reader r;
        for (i = 0; i < 200; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, nothing, NULL));
        CHECK_OK(fsched_trace_write_json(s, collect, &out));
        r = read_trace(&out);
        check_tracks(&r, 2 + 8 + 1);
        free(r.events);
        free(out.data);
    }
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    test_sched_free(s);
#endif
}

/* Whether text is well-formed UTF-8, as JSON must be (RFC 8259). */
static int valid_utf8(const char *text, size_t len) {
    const unsigned char *t = (const unsigned char *)text, *end = t + len;
    while (t < end) {
        unsigned n = *t < 0x80 ? 1 : *t >= 0xc2 && *t < 0xe0 ? 2 : *t >= 0xe0 && *t < 0xf0 ? 3
                   : *t >= 0xf0 && *t <= 0xf4 ? 4 : 0;
        unsigned i;
        if (!n || (size_t)(end - t) < n) return 0;
        for (i = 1; i < n; i++)
            if ((t[i] & 0xc0) != 0x80) return 0;
        if ((t[0] == 0xe0 && t[1] < 0xa0) || (t[0] == 0xed && t[1] > 0x9f) ||
            (t[0] == 0xf0 && t[1] < 0x90) || (t[0] == 0xf4 && t[1] > 0x8f))
            return 0;
        t += n;
    }
    return 1;
}

/* Names are the user's bytes: a trace names a task by a name cut where it does not fit
   between two characters, never inside one, and writes a byte that is not UTF-8 as
   U+FFFD, so that the JSON stays UTF-8 (a JSON reader refuses anything else). */
static void test_names_not_ascii(void) {
    static const char *const names[] = {
        /* 29 bytes, then U+00E9 and U+20AC: the cut falls inside the euro sign */
        "abcdefghijklmnopqrstuvwxyzABC\xc3\xa9\xe2\x82\xac",
        "stray \xff\xfe bytes",        /* never UTF-8 */
        "cut \xe2\x82",                /* a sequence without its end */
        "overlong \xc0\xaf, surrogate \xed\xa0\x80",
    };
    static const char *const shown[] = {
        "abcdefghijklmnopqrstuvwxyzABC", /* and 30 bytes' room */
        "stray \xef\xbf\xbd\xef\xbf\xbd bytes",
        "cut \xef\xbf\xbd\xef\xbf\xbd",
        "overlong \xef\xbf\xbd\xef\xbf\xbd, surrogate \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
    };
    fsched_sched *s = test_sched_new(1);
    fsched_wait_group wg;
    text_buffer out = {NULL, 0, 0};
    reader r;
    size_t i;
    CHECK_OK(fsched_wait_group_init(&wg));
    for (i = 0; i < sizeof names / sizeof *names; i++)
        CHECK_OK(fsched_wait_group_spawn_named(&wg, s, nothing, NULL, names[i]));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_trace_write_json(s, collect, &out));
    CHECK(valid_utf8(out.data, out.n));
    r = read_trace(&out);
    for (i = 0; i < sizeof shown / sizeof *shown; i++) CHECK(count_named(&r, 'X', shown[i]) == 1);
    free(r.events);
    free(out.data);
    test_sched_free(s);
}

static void test_bad_input(void) {
    fsched_sched *s = test_sched_new(1);
    text_buffer out = {NULL, 0, 0};
    uint64_t recorded = 7;
    CHECK_RESULT(fsched_trace_write_json(NULL, collect, &out), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_trace_write_json(s, NULL, &out), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_trace_count(NULL, &recorded, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_EQ_U64(recorded, 0);
    CHECK_OK(fsched_trace_count(s, NULL, NULL));
    CHECK(out.n == 0);
    test_sched_free(s);
}

int main(void) {
    test_watchdog(300);
    test_everything_recorded(2);
    test_everything_recorded(1);
    test_named_by_user_code(2);
    test_named_by_user_code(1);
    test_full_buffer();
    test_written_while_running();
    test_names_not_ascii();
    test_bad_input();
    printf("trace: ok\n");
    return 0;
}

#endif
