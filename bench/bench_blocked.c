/* Blocked tasks: what it costs to have many tasks waiting at once. N tasks (100,000 by
   default) each start, report that they run, and block on one event; once all have
   blocked the event is set and every task ends. Candidates, side by side in one run:

   fibersched, small stacks   FSCHED_STACK_SMALL stacks of the smallest size (1 KiB asked,
                              1,600 bytes had on 4 KiB pages): two share a page, the
                              fiber's record in each, a canary checked at every switch
   fibersched, slab 16 KiB    FSCHED_STACK_SLAB stacks of 16 KiB: carved from mappings
                              shared by 64 stacks, so a blocked task holds only the stack
                              pages it touched; tasks wait on a manual-reset fsched_event
   fibersched, slab default   the same with the default stack size
                              (FIBERSCHED_DEFAULT_STACK_SIZE)
   fibersched, heap 16 KiB    FSCHED_STACK_HEAP stacks of 16 KiB (the allocator's)
   Go                         goroutines blocked on a receive from one channel, released
                              by closing it (bench_go.go, GOMAXPROCS = workers), when
                              Go was found at configure time

   Each round is spawned from a task (a goroutine in Go). Every candidate runs in a
   fresh process (this program, started again with --child=, or
   the Go program), so that one's memory is not another's: each process runs the whole
   test twice, first on a fresh heap ("cold": every stack page is faulted in), then again
   ("warm": stacks freed by the first round are reused). Reported per candidate, median of
   the repetitions: the cold and warm times from the first spawn until every task has
   ended, the warm release time (from setting the event until every task has ended), and
   the resident memory per blocked task (growth of the process's resident set from before
   the first spawn until all tasks have blocked, divided by N, cold round). Each
   repetition starts the candidates in rotating order. The child processes check that
   every task started and ended; a failure ends the program with an error. Targets: small
   stacks cost at most Go's memory per blocked task and take at most Go's time, cold and
   warm. (Linked with immediate binding, as small stacks ask: see FSCHED_STACK_SMALL.)
   Usage: bench_blocked [--quick] [--tasks=N] [--workers=N] [--reps=N] */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"
#include <fcntl.h>

/* ---- the child: one candidate, two rounds ---- */

/* Resident bytes of this process (0 where /proc is missing). Without stdio: it runs in a
   task, on the candidate's stack, which may be small. */
static long resident_bytes(void) {
    char text[128];
    long fields[2] = {0, 0};
    ssize_t n;
    int fd = open("/proc/self/statm", O_RDONLY), i = 0;
    const char *p = text;
    if (fd < 0) return 0;
    n = read(fd, text, sizeof text - 1);
    close(fd);
    if (n <= 0) return 0;
    text[n] = 0;
    for (; i < 2 && *p; p++) { /* "<pages> <resident> ..." */
        if (*p >= '0' && *p <= '9') fields[i] = fields[i] * 10 + (*p - '0');
        else if (*p == ' ') i++;
    }
    return fields[1] * sysconf(_SC_PAGESIZE);
}

typedef struct blocked_round {
    fsched_event release;
    fsched_wait_group started, ended;
    long ran; /* atomic: tasks that passed their wait */
} blocked_round;

static void blocked_task(void *arg) {
    blocked_round *b = (blocked_round *)arg;
    fsched_wait_group_done(&b->started);
    fsched_event_wait(&b->release);
    /* relaxed: read after the `ended` wait group, whose wait orders it */
    __atomic_fetch_add(&b->ran, 1, __ATOMIC_RELAXED);
}

static void fail_if(fsched_result r, const char *what) {
    if (r != FSCHED_OK) bench_fail("%s: %s", what, fsched_result_string(r));
}

/* A round's task and what it found: it calls nothing that needs much stack (no stdio),
   and the caller reports. */
typedef struct blocked_spawner {
    fsched_sched *sched;
    long tasks, ran;
    double block_ms, release_ms, rss_per_task;
    fsched_result failed; /* the first call that failed, and how */
    const char *what;
} blocked_spawner;

static int round_failed(blocked_spawner *sp, fsched_result r, const char *what) {
    if (r == FSCHED_OK) return 0;
    sp->failed = r;
    sp->what = what;
    return 1;
}

/* One round, run as a task (as the Go peer spawns from a goroutine). */
static void blocked_round_run(void *arg) {
    blocked_spawner *sp = (blocked_spawner *)arg;
    fsched_sched *s = sp->sched;
    long tasks = sp->tasks;
    blocked_round b;
    double t0, t1, t2;
    long rss0, rss1, i;
    memset(&b, 0, sizeof b);
    if (round_failed(sp, fsched_event_init(&b.release, 1, 0), "fsched_event_init")) return;
    fsched_wait_group_init(&b.started);
    fsched_wait_group_init(&b.ended);
    rss0 = resident_bytes();
    t0 = bench_now();
    if (round_failed(sp, fsched_wait_group_add(&b.started, tasks), "fsched_wait_group_add"))
        return;
    for (i = 0; i < tasks; i++)
        if (round_failed(sp, fsched_wait_group_spawn(&b.ended, s, blocked_task, &b),
                         "fsched_wait_group_spawn"))
            return;
    fsched_wait_group_wait(&b.started);
    t1 = bench_now();
    rss1 = resident_bytes();
    fsched_event_set(&b.release);
    fsched_wait_group_wait(&b.ended);
    t2 = bench_now();
    sp->ran = b.ran;
    sp->block_ms = (t1 - t0) * 1e3;
    sp->release_ms = (t2 - t1) * 1e3;
    sp->rss_per_task = (double)(rss1 - rss0) / (double)tasks;
    fsched_wait_group_destroy(&b.started);
    fsched_wait_group_destroy(&b.ended);
    fsched_event_destroy(&b.release);
}

/* Runs a round and prints "<block ms> <release ms> <resident bytes per task>". */
static void blocked_round_report(blocked_spawner *sp) {
    sp->failed = FSCHED_OK;
    sp->ran = 0;
    bench_run_task(sp->sched, blocked_round_run, sp);
    fail_if(sp->failed, sp->failed != FSCHED_OK ? sp->what : "");
    if (sp->ran != sp->tasks) bench_fail("%ld of %ld blocked tasks ended", sp->ran, sp->tasks);
    printf("%.3f %.3f %.1f\n", sp->block_ms, sp->release_ms, sp->rss_per_task);
}

typedef struct blocked_stacks {
    const char *name;
    fsched_stack_kind kind;
    size_t size;
} blocked_stacks;

static const blocked_stacks stack_choices[] = {
    {"fibersched, small stacks", FSCHED_STACK_SMALL, 0},
    {"fibersched, slab 16 KiB", FSCHED_STACK_SLAB, 16384},
    {"fibersched, slab default", FSCHED_STACK_SLAB, 0},
    {"fibersched, heap 16 KiB", FSCHED_STACK_HEAP, 16384},
};
#define STACK_CHOICES ((int)(sizeof stack_choices / sizeof stack_choices[0]))

static int child_main(int choice, long tasks, int workers) {
    fsched_desc d;
    blocked_spawner sp;
    memset(&d, 0, sizeof d);
    d.workers = (uint32_t)workers;
    d.stack_kind = stack_choices[choice].kind;
    d.stack_size = stack_choices[choice].size;
    fail_if(fsched_create(&d, &sp.sched), "fsched_create");
    sp.tasks = tasks;
    blocked_round_report(&sp); /* cold */
    blocked_round_report(&sp); /* warm */
    fail_if(fsched_destroy(sp.sched), "fsched_destroy");
    return 0;
}

/* ---- the parent: candidates in fresh processes ---- */

typedef struct blocked_candidate {
    const char *name;
    char *argv[8];
    double cold[BENCH_MAX_REPS], warm[BENCH_MAX_REPS], release[BENCH_MAX_REPS],
        rss[BENCH_MAX_REPS];
} blocked_candidate;

/* Runs the candidate's program once and records repetition `rep` from its two lines. */
static void candidate_run(blocked_candidate *c, int rep) {
    pid_t pid;
    FILE *out = bench_child_start(c->argv, &pid);
    double block[2], release[2], rss[2];
    int i;
    for (i = 0; i < 2; i++)
        if (fscanf(out, "%lf %lf %lf", &block[i], &release[i], &rss[i]) != 3)
            bench_fail("%s: no result from %s", c->name, c->argv[0]);
    if (!bench_child_end(out, pid)) bench_fail("%s: %s failed", c->name, c->argv[0]);
    c->cold[rep] = block[0] + release[0];
    c->warm[rep] = block[1] + release[1];
    c->release[rep] = release[1];
    c->rss[rep] = rss[0];
}

int main(int argc, char **argv) {
    static char tasks_arg[32], workers_arg[32], child_arg[STACK_CHOICES][32];
    blocked_candidate c[STACK_CHOICES + 1];
    int quick = bench_quick(argc, argv);
    int reps = bench_reps(argc, argv, quick ? 1 : 5);
    long tasks = bench_option(argc, argv, "--tasks=", quick ? 5000 : 100000);
    int workers = (int)bench_option(argc, argv, "--workers=", bench_cpu_count());
    int child = (int)bench_option(argc, argv, "--child=", -1);
    int nc = 0, i, r;
    blocked_candidate *go = NULL;
    if (tasks < 1 || workers < 1) bench_fail("--tasks and --workers must be at least 1");
    if (child >= 0) {
        if (child >= STACK_CHOICES) bench_fail("--child=%d: no such candidate", child);
        return child_main(child, tasks, workers);
    }

    snprintf(tasks_arg, sizeof tasks_arg, "--tasks=%ld", tasks);
    snprintf(workers_arg, sizeof workers_arg, "--workers=%d", workers);
    memset(c, 0, sizeof c);
    for (i = 0; i < STACK_CHOICES; i++, nc++) {
        snprintf(child_arg[i], sizeof child_arg[i], "--child=%d", i);
        c[nc].name = stack_choices[i].name;
        c[nc].argv[0] = argv[0];
        c[nc].argv[1] = child_arg[i];
        c[nc].argv[2] = tasks_arg;
        c[nc].argv[3] = workers_arg;
    }
#if defined(BENCH_GO)
    go = &c[nc];
    c[nc].name = "Go: goroutines on a channel";
    c[nc].argv[0] = (char *)BENCH_GO; /* bench_go.go, which takes the same options */
    c[nc].argv[1] = (char *)"blocked";
    c[nc].argv[2] = tasks_arg;
    c[nc++].argv[3] = workers_arg;
#endif

    for (r = 0; r < reps; r++)
        for (i = 0; i < nc; i++) candidate_run(&c[(i + r) % nc], r);

    printf("blocked tasks: %ld tasks block on one event, then are released; %d worker(s); "
           "median of %d repetitions, each candidate in a fresh process\n\n",
           tasks, workers, reps);
    printf("| %-28s | %12s | %12s | %16s | %14s |\n", "candidate", "cold ms", "warm ms",
           "warm release ms", "RSS B/task");
    printf("|------------------------------|--------------|--------------|"
           "------------------|----------------|\n");
    for (i = 0; i < nc; i++) {
        c[i].cold[0] = bench_median(c[i].cold, reps);
        c[i].warm[0] = bench_median(c[i].warm, reps);
        c[i].release[0] = bench_median(c[i].release, reps);
        c[i].rss[0] = bench_median(c[i].rss, reps);
        printf("| %-28s | %12.1f | %12.1f | %16.1f | %14.0f |\n", c[i].name, c[i].cold[0],
               c[i].warm[0], c[i].release[0], c[i].rss[0]);
    }
    printf("\n");
    bench_quick_note(quick);
    if (go) {
        bench_target("fibersched small stacks / Go, RSS per blocked task",
                     c[0].rss[0] / go->rss[0], "<=", 1, "x");
        bench_target("fibersched small stacks / Go, cold", c[0].cold[0] / go->cold[0], "<=", 1,
                     "x");
        bench_target("fibersched small stacks / Go, warm", c[0].warm[0] / go->warm[0], "<=", 1,
                     "x");
    } else {
        printf("target: fibersched / Go: not measured (Go not found at configure time)\n");
    }
    return 0;
}
