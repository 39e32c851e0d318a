/* A build system as a dependency graph: a generator writes a header that some of the
   sources include, each source file is compiled by a task of its own, and a link task
   combines the object files into a program. The graph is built once and run four times:
   twice as it is, once with one compile made to fail, and once more after the "fix".

   What it shows:
   - fsched_graph_add with a task desc: a name (for diagnostics and the DOT output) and a
     cost hint, so that among ready tasks those on the longest remaining chain start first;
   - fsched_graph_precede for the edges;
   - results: a task publishes its output with fsched_graph_set_result, together with a
     function that frees it, and its successors read it through fsched_graph_pred_count,
     fsched_graph_pred and fsched_graph_result; the graph keeps every result of a run
     readable until it runs again (or is destroyed), and then releases it;
   - tasks that wait (fsched_sleep_for stands in for reading a file) suspend their
     fiber, not their worker thread, which meanwhile runs other tasks;
   - failure: a task that returns nonzero fails, the tasks that depend on it are marked
     failed without running, independent tasks still finish, and fsched_graph_wait says
     which task failed first and with what status;
   - fsched_graph_dump_dot, which writes the graph with each task's state in Graphviz's
     DOT language (feed it to `dot -Tsvg` to draw it).

   The program's checksum is checked against the same build done serially.

   Build: cc -O2 -pthread examples/graph_build.c -o graph_build */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define WORKERS 2
#define READ_DELAY_NS 5000000u /* 5 ms: the time a compile waits to "read" its source */

/* The made-up project. `work` is what compiling a file costs: rounds of hashing its
   contents (each round a fraction of a microsecond). */
typedef struct source_file {
    const char *name;
    const char *contents;
    uint32_t work;
    int includes_config; /* includes the generated config.h */
} source_file;

static const source_file sources[] = {
    {"main.c", "int main(int argc, char **argv) { return run(parse(argv[1])); }", 3000, 1},
    {"lexer.c", "token next_token(lexer *lx) { skip_space(lx); return scan(lx); }", 5000, 0},
    {"parser.c", "node *parse(const char *text) { return unit(lex(text)); }", 8000, 1},
    {"codegen.c", "void emit(node *n, buf *out) { for (; n; n = n->next) put(n, out); }",
     10000, 1},
    {"util.c", "size_t align(size_t n, size_t k) { return (n + k - 1) / k * k; }", 2000, 0},
    {"io.c", "int read_file(const char *path, buf *out) { return slurp(path, out); }",
     2500, 0},
};
#define SOURCE_COUNT (sizeof sources / sizeof sources[0])
#define FAILING_SOURCE 2 /* parser.c: the compile made to fail in the third run */

#define CONFIG_TEXT "#define VERSION \"2.4.1\"\n#define HAVE_THREADS 1\n"
#define CONFIG_WORK 4000u
#define LINK_WORK 500u /* a cost hint only: linking here is just combining hashes */

/* A task's status, like a compiler's exit code: 0 is success, anything else a failure. */
enum build_status {
    BUILD_OK = 0,
    BUILD_COMPILE_ERROR = 1,
    BUILD_OUT_OF_MEMORY = 2,
    BUILD_MISSING_INPUT = 3,
    BUILD_SCHEDULER_ERROR = 4
};

/* ---- the "compiler" and "linker": pure functions, used by the tasks and by the serial
   build that checks them ---- */

#define FNV_OFFSET 14695981039346656037ull
#define FNV_PRIME 1099511628211ull

/* 64-bit FNV-1a over text, continuing from h. */
static uint64_t hash_text(uint64_t h, const char *text) {
    for (; *text; text++) h = (h ^ (unsigned char)*text) * FNV_PRIME;
    return h;
}

/* "Compiles" contents: hashes them `rounds` times over, each round on top of the last.
   The hash of the included header goes in first, so an object file depends on the
   header it was compiled with. */
static uint64_t compile_contents(const char *contents, uint32_t rounds,
                                 uint64_t header_hash) {
    uint64_t h = FNV_OFFSET ^ header_hash;
    uint32_t i;
    for (i = 0; i < rounds; i++) h = hash_text(h, contents);
    return h;
}

/* Adds one object file to a program's checksum. The order matters, as the order of
   object files on a linker's command line can. */
static uint64_t link_object(uint64_t checksum, uint64_t object_code) {
    return (checksum ^ object_code) * FNV_PRIME;
}

static uint64_t serial_build(void) {
    uint64_t header_hash = compile_contents(CONFIG_TEXT, CONFIG_WORK, 0);
    uint64_t checksum = FNV_OFFSET;
    size_t i;
    for (i = 0; i < SOURCE_COUNT; i++) {
        const source_file *src = &sources[i];
        uint64_t included = src->includes_config ? header_hash : 0;
        uint64_t code = compile_contents(src->contents, src->work, included);
        checksum = link_object(checksum, code);
    }
    return checksum;
}

/* ---- results: what the tasks hand to their successors ---- */

typedef struct generated_header {
    const char *text;
    uint64_t hash;
} generated_header;

typedef struct object_file {
    uint64_t code; /* stands for the machine code */
} object_file;

typedef struct program {
    uint64_t checksum;
    size_t objects;
} program;

/* Shared by all tasks of the build. The counters are atomic: tasks on several workers
   change them at once. */
typedef struct build {
    atomic_int results_alive; /* results allocated and not released yet */
    atomic_int tasks_started; /* numbers the tasks in the order they start */
} build;

/* What each task gets as its argument. */
typedef struct step {
    build *b;
    const source_file *src; /* compiles only */
    int fail;               /* compiles only: fail with a compile error (set between runs) */
    int start_order;        /* when it started in the last run; -1: it did not run */
    int worker;             /* the worker thread that ran it */
} step;

static void *new_result(build *b, size_t size) {
    void *result = malloc(size);
    if (result) atomic_fetch_add(&b->results_alive, 1);
    return result;
}

/* The release function given with each result. The graph calls it when it runs again or
   is destroyed: a run's results (the header, the object files, the program) stay
   readable until then. `user` is what was given along with it: the build. */
static void release_result(void *result, void *user) {
    build *b = (build *)user;
    free(result);
    atomic_fetch_sub(&b->results_alive, 1);
}

/* Publishes result, or frees it when the graph refuses it. Returns the task's status. */
static int publish(fsched_graph_task *self, build *b, void *result) {
    fsched_result r = fsched_graph_set_result(self, result, release_result, b);
    if (r != FSCHED_OK) {
        fprintf(stderr, "fsched_graph_set_result: %s\n", fsched_result_string(r));
        release_result(result, b);
        return BUILD_SCHEDULER_ERROR;
    }
    return BUILD_OK;
}

static void note_start(step *s) {
    s->start_order = atomic_fetch_add(&s->b->tasks_started, 1);
    s->worker = fsched_worker_index();
}

/* ---- the tasks: int f(self, arg), returning 0 or a status ---- */

static int generate_config(fsched_graph_task *self, void *arg) {
    step *s = (step *)arg;
    generated_header *header;
    note_start(s);
    header = (generated_header *)new_result(s->b, sizeof *header);
    if (!header) return BUILD_OUT_OF_MEMORY;
    header->text = CONFIG_TEXT;
    header->hash = compile_contents(CONFIG_TEXT, CONFIG_WORK, 0);
    return publish(self, s->b, header);
}

static int compile(fsched_graph_task *self, void *arg) {
    step *s = (step *)arg;
    const generated_header *header = NULL;
    object_file *object;
    size_t i;
    note_start(s);

    /* Reading the source: a wait, which suspends this task's fiber. The worker thread
       goes on with other ready tasks meanwhile. */
    fsched_sleep_for(READ_DELAY_NS);
    if (s->fail) {
        printf("  %s:1:42: error: expected ';' before '}' token\n", s->src->name);
        return BUILD_COMPILE_ERROR; /* the link, which depends on this task, will not run */
    }

    /* The predecessors' results. Every predecessor has finished before this task
       started, so their results are complete; a compile has at most one predecessor,
       the generator, and only when it includes the header. */
    for (i = 0; i < fsched_graph_pred_count(self); i++)
        header = (const generated_header *)fsched_graph_result(fsched_graph_pred(self, i));
    if (s->src->includes_config && !header) return BUILD_MISSING_INPUT;

    object = (object_file *)new_result(s->b, sizeof *object);
    if (!object) return BUILD_OUT_OF_MEMORY;
    object->code = compile_contents(s->src->contents, s->src->work,
                                    header ? header->hash : 0);
    return publish(self, s->b, object);
}

static int link_program(fsched_graph_task *self, void *arg) {
    step *s = (step *)arg;
    size_t i, n = fsched_graph_pred_count(self);
    uint64_t checksum = FNV_OFFSET;
    program *p;
    note_start(s);
    /* Predecessors come in the order their edges were added, which build_graph made the
       order of the sources: the serial build's order. */
    for (i = 0; i < n; i++) {
        const object_file *object =
            (const object_file *)fsched_graph_result(fsched_graph_pred(self, i));
        if (!object) return BUILD_MISSING_INPUT;
        checksum = link_object(checksum, object->code);
    }
    p = (program *)new_result(s->b, sizeof *p);
    if (!p) return BUILD_OUT_OF_MEMORY;
    p->checksum = checksum;
    p->objects = n;
    /* The link task has no successors: its result stays readable after the run, until
       the graph runs again or is destroyed. */
    return publish(self, s->b, p);
}

/* ---- building the graph ---- */

#define TASK_COUNT (SOURCE_COUNT + 2) /* the generator, the compiles, the link */
#define GENERATOR 0
#define FIRST_COMPILE 1
#define LINK (TASK_COUNT - 1)

/* Adds the tasks and their edges; tasks[] receives the handles, which stay valid until
   the graph is destroyed. */
static fsched_result build_graph(fsched_graph *graph, step *steps,
                                 fsched_graph_task **tasks) {
    fsched_graph_task_desc task_desc = {0};
    char name[64];
    fsched_result r;
    size_t i;

    /* Each task gets a name, copied by the graph (a buffer on the stack will do), and a
       cost hint in any unit, the same for all tasks. The graph adds the costs up along
       each chain of successors and, among ready tasks, starts those with the costliest
       chain ahead first: the generator, whose chain runs through the largest compile. */
    task_desc.name = "generate config.h";
    task_desc.cost = CONFIG_WORK;
    r = fsched_graph_add(graph, generate_config, &steps[GENERATOR], &task_desc,
                         &tasks[GENERATOR]);
    if (r != FSCHED_OK) return r;

    for (i = 0; i < SOURCE_COUNT; i++) {
        fsched_graph_task **compile_task = &tasks[FIRST_COMPILE + i];
        snprintf(name, sizeof name, "compile %s", sources[i].name);
        task_desc.name = name;
        task_desc.cost = sources[i].work;
        r = fsched_graph_add(graph, compile, &steps[FIRST_COMPILE + i], &task_desc,
                             compile_task);
        if (r != FSCHED_OK) return r;
        /* The header must be generated before the sources that include it compile. */
        if (sources[i].includes_config &&
            (r = fsched_graph_precede(graph, tasks[GENERATOR], *compile_task)) != FSCHED_OK)
            return r;
    }

    task_desc.name = "link app";
    task_desc.cost = LINK_WORK;
    r = fsched_graph_add(graph, link_program, &steps[LINK], &task_desc, &tasks[LINK]);
    if (r != FSCHED_OK) return r;
    /* The link needs every object file. The order of these edges is the order in which
       it sees its predecessors. */
    for (i = 0; i < SOURCE_COUNT; i++) {
        r = fsched_graph_precede(graph, tasks[FIRST_COMPILE + i], tasks[LINK]);
        if (r != FSCHED_OK) return r;
    }
    return FSCHED_OK;
}

/* ---- running it ---- */

static int check(fsched_result r, const char *what) {
    if (r == FSCHED_OK) return 1;
    fprintf(stderr, "%s: %s\n", what, fsched_result_string(r));
    return 0;
}

/* Runs the graph once and waits for the run to end. Returns 0 when the graph could not be
   run at all; otherwise fills in the outcome and the time the run took. */
static int run_once(fsched_graph *graph, fsched_sched *sched, build *b, step *steps,
                    fsched_graph_outcome *outcome, double *ms) {
    fsched_result r;
    uint64_t t0;
    size_t i;
    atomic_store(&b->tasks_started, 0);
    for (i = 0; i < TASK_COUNT; i++) steps[i].start_order = steps[i].worker = -1;
    t0 = fsched_clock_ns();
    /* fsched_graph_run starts the run and returns; fsched_graph_wait blocks this thread
       (it is not part of the scheduler) until every task has finished, failed or been
       skipped. Starting a run releases the results the last one left. */
    if (!check(fsched_graph_run(graph, sched), "fsched_graph_run")) return 0;
    r = fsched_graph_wait(graph, outcome);
    *ms = (double)(fsched_clock_ns() - t0) / 1e6;
    /* wait returns outcome->result: FSCHED_ERR_TASK_FAILED means a task failed, not the
       call; anything but the three outcomes is an error of the call itself */
    if (r != FSCHED_OK && r != FSCHED_ERR_TASK_FAILED && r != FSCHED_ERR_CANCELLED)
        return check(r, "fsched_graph_wait");
    return 1;
}

/* Checks a successful run: its outcome, the program's checksum, and that the results
   held are this run's: one per task. */
static int check_success(int run, const fsched_graph_outcome *outcome,
                         fsched_graph_task *link, build *b, double ms, uint64_t expected) {
    /* The results stay readable after the run. */
    const program *p = (const program *)fsched_graph_result(link);
    int alive = atomic_load(&b->results_alive);
    printf("run %d: %s in %.1f ms", run, fsched_result_string(outcome->result), ms);
    if (p)
        printf(", a program of %zu objects, checksum %016llx", p->objects,
               (unsigned long long)p->checksum);
    printf("\n");
    if (outcome->result != FSCHED_OK || outcome->finished != TASK_COUNT) {
        fprintf(stderr, "run %d: expected all %zu tasks to finish, %zu did\n", run,
                (size_t)TASK_COUNT, outcome->finished);
        return 0;
    }
    if (!p || p->checksum != expected) {
        fprintf(stderr, "run %d: wrong checksum; the serial build gives %016llx\n", run,
                (unsigned long long)expected);
        return 0;
    }
    if (alive != (int)TASK_COUNT) {
        fprintf(stderr, "run %d: %d results held; expected one per task\n", run, alive);
        return 0;
    }
    return 1;
}

static void print_start_order(fsched_graph_task **tasks, const step *steps) {
    int order;
    size_t i;
    for (order = 0; order < (int)TASK_COUNT; order++)
        for (i = 0; i < TASK_COUNT; i++)
            if (steps[i].start_order == order)
                printf("  %d. %-20s on worker %d\n", order + 1,
                       fsched_graph_task_name(tasks[i]), steps[i].worker);
}

static const char *state_name(fsched_task_state state) {
    switch (state) {
    case FSCHED_TASK_WAITING: return "waiting";
    case FSCHED_TASK_READY: return "ready";
    case FSCHED_TASK_RUNNING: return "running";
    case FSCHED_TASK_FINISHED: return "finished";
    case FSCHED_TASK_FAILED: return "failed";
    case FSCHED_TASK_CANCELLED: return "cancelled";
    }
    return "?";
}

/* Each task's state after a run, and its status when it failed. */
static void print_states(fsched_graph_task **tasks) {
    size_t i;
    for (i = 0; i < TASK_COUNT; i++) {
        fsched_task_state state = fsched_graph_task_state(tasks[i]);
        /* what the task returned; 0 also for one that failed because a predecessor did */
        int status = fsched_graph_task_status(tasks[i]);
        printf("  %-20s %s", fsched_graph_task_name(tasks[i]), state_name(state));
        if (state == FSCHED_TASK_FAILED && status) printf(" (status %d)", status);
        else if (state == FSCHED_TASK_FAILED) printf(" (not run: a predecessor failed)");
        printf("\n");
    }
}

/* fsched_graph_dump_dot hands over the text in pieces, without a terminator. */
static void write_to_stream(const char *text, size_t len, void *user) {
    fwrite(text, 1, len, (FILE *)user);
}

int main(void) {
    fsched_desc desc = {0};
    fsched_graph_desc graph_desc = {0};
    fsched_sched *sched;
    fsched_graph *graph;
    fsched_graph_task *tasks[TASK_COUNT];
    fsched_graph_outcome outcome;
    step steps[TASK_COUNT];
    build b;
    uint64_t t0 = fsched_clock_ns(), expected = serial_build();
    double serial_ms = (double)(fsched_clock_ns() - t0) / 1e6, ms;
    fsched_result r;
    size_t i;
    int run, ok = 1;

    atomic_init(&b.results_alive, 0);
    atomic_init(&b.tasks_started, 0);
    for (i = 0; i < TASK_COUNT; i++) {
        steps[i].b = &b;
        steps[i].src = i >= FIRST_COMPILE && i < LINK ? &sources[i - FIRST_COMPILE] : NULL;
        steps[i].fail = 0;
        steps[i].start_order = steps[i].worker = -1;
    }

    desc.workers = WORKERS;
    if (!check(fsched_create(&desc, &sched), "fsched_create")) return 1;
    graph_desc.name = "build app"; /* names the DOT graph */
    if (!check(fsched_graph_create(&graph_desc, &graph), "fsched_graph_create")) return 1;
    if (!check(build_graph(graph, steps, tasks), "building the graph")) return 1;
    /* Were the workers to sit out the waits, a run would take longer than the waits
       shared among them; as the waits only suspend fibers, they overlap. */
    printf("%zu tasks on %d workers; each compile waits %.0f ms to read its file, %.0f ms in "
           "all,\n%.0f ms per worker if waiting held a worker; the computing alone takes "
           "%.1f ms\n",
           fsched_graph_task_count(graph), WORKERS, READ_DELAY_NS / 1e6,
           SOURCE_COUNT * READ_DELAY_NS / 1e6, SOURCE_COUNT * READ_DELAY_NS / 1e6 / WORKERS,
           serial_ms);

    /* Runs 1 and 2: a graph is built once and can run any number of times. */
    for (run = 1; run <= 2 && ok; run++) {
        if (!run_once(graph, sched, &b, steps, &outcome, &ms)) return 1;
        ok = check_success(run, &outcome, tasks[LINK], &b, ms, expected);
        if (ok && run == 1) print_start_order(tasks, steps);
    }

    /* Run 3: one compile fails. Under the default policy, FSCHED_GRAPH_SKIP_DEPENDENTS,
       what depends on it (the link) is marked failed without running, and the other
       compiles still finish. (FSCHED_GRAPH_FAIL_FAST in the graph's desc would cancel
       every task not yet started instead.) */
    if (ok) {
        step *failing = &steps[FIRST_COMPILE + FAILING_SOURCE];
        failing->fail = 1;
        printf("run 3, with a syntax error in %s:\n", failing->src->name);
        if (!run_once(graph, sched, &b, steps, &outcome, &ms)) return 1;
        printf("run 3: %s in %.1f ms; the first to fail: '%s', with status %d\n",
               fsched_result_string(outcome.result), ms,
               outcome.failed ? fsched_graph_task_name(outcome.failed) : "none",
               outcome.status);
        printf("  tasks: %zu finished, %zu failed, %zu not run (a predecessor failed), "
               "%zu cancelled\n",
               outcome.finished, outcome.failed_count, outcome.skipped, outcome.cancelled);
        print_states(tasks);
        if (outcome.result != FSCHED_ERR_TASK_FAILED ||
            outcome.failed != tasks[FIRST_COMPILE + FAILING_SOURCE] ||
            outcome.status != BUILD_COMPILE_ERROR || outcome.finished != TASK_COUNT - 2 ||
            outcome.failed_count != 1 || outcome.skipped != 1 || outcome.cancelled != 0 ||
            fsched_graph_task_state(tasks[LINK]) != FSCHED_TASK_FAILED ||
            fsched_graph_result(tasks[LINK]) != NULL) {
            fprintf(stderr, "run 3: not the outcome expected\n");
            ok = 0;
        }
        /* The run released the last run's results when it started; it holds its own:
           those of every task but the failed compile and the link it kept from running. */
        if (atomic_load(&b.results_alive) != (int)TASK_COUNT - 2) {
            fprintf(stderr, "run 3: %d results held\n", atomic_load(&b.results_alive));
            ok = 0;
        }
        printf("the graph after run 3, in DOT:\n");
        r = fsched_graph_dump_dot(graph, write_to_stream, stdout);
        if (!check(r, "fsched_graph_dump_dot")) return 1;
        failing->fail = 0;
    }

    /* Run 4, after the fix: a failed run leaves nothing behind. */
    if (ok) {
        if (!run_once(graph, sched, &b, steps, &outcome, &ms)) return 1;
        ok = check_success(4, &outcome, tasks[LINK], &b, ms, expected);
    }

    /* Destroying the graph releases the results it still holds: the last run's. */
    if (!check(fsched_graph_destroy(graph), "fsched_graph_destroy")) return 1;
    if (atomic_load(&b.results_alive) != 0) {
        fprintf(stderr, "%d results were never released\n", atomic_load(&b.results_alive));
        ok = 0;
    }
    if (!check(fsched_destroy(sched), "fsched_destroy")) return 1;
    if (ok) printf("every successful run gave the serial build's checksum\n");
    return ok ? 0 : 1;
}
