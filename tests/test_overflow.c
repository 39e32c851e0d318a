/* Fatal paths, each run in a child process whose exit and stderr are inspected: a stack
   overflow into the guard region (with and without the reporting handler), a smashed heap
   stack canary, a finished fiber with nowhere to return, and a first frame that returns. */
#if defined(FIBERSCHED_TEST_BOARD) && !defined(FIBERSCHED_MPU_GUARD)
#define FIBERSCHED_STACK_CANARY 1024 /* as large as the overflow's frames, as documented */
#endif
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#if defined(FIBERSCHED_TEST_BOARD)
/* On a board (no fork): a task overflows its 8 KiB heap stack by about 2 KiB with 512-byte
   frames. The library must report it through the logger, naming the task's function, and
   stop the program; the exit hook then checks the report and turns the stop into a pass.
   Anything else (a hang, a fault, no report) fails. Built twice: with a canary as large
   as the frames, and with an MPU guard (FIBERSCHED_MPU_GUARD), whose fault the board's
   fault handler hands to fsched_stack_fault. */
#include <unistd.h>

#include "board.h"

static char reported[512];
static size_t reported_len;
static char expected_fn[32];

static void capture(fsched_log_level level, const char *message, void *user) {
    size_t n = strlen(message);
    (void)level;
    (void)user;
    if (n > sizeof reported - 1 - reported_len) n = sizeof reported - 1 - reported_len;
    memcpy(reported + reported_len, message, n);
    reported_len += n;
    reported[reported_len] = 0;
}

static void on_exit_check(int status) {
    int ok = status != 0 && strstr(reported, "stack overflow in fiber") &&
             strstr(reported, "(a stack of 8192 bytes)") && strstr(reported, expected_fn);
#if defined(FIBERSCHED_MPU_GUARD)
    ok = ok && strstr(reported, "MPU guard"); /* caught at the first write, by the MPU */
#endif
    fprintf(stderr, "test_overflow: the program stopped with status %d after: %s\n", status,
            reported_len ? reported : "(no report)");
    printf("test_overflow: %s\n", ok ? "ok (the overflow was reported)" : "FAILED");
    fflush(stdout);
    _exit(ok ? 0 : 1);
}

static void on_fault(const void *address) { (void)fsched_stack_fault(address); }

static FSCHED__NOINLINE unsigned bottomless(unsigned depth) {
    volatile unsigned char frame[512];
    if (depth == 20) return 0; /* 10 KiB of frames */
    frame[0] = (unsigned char)depth;
    frame[511] = (unsigned char)(depth >> 8);
    return bottomless(depth + 1) + frame[0] + frame[511]; /* not a tail call */
}

static void overflowing_task(void *arg) { *(unsigned *)arg = bottomless(0); }

int main(void) {
    fsched_desc d;
    fsched_sched *s;
    unsigned sink = 0;
    void (*fn)(void *) = overflowing_task;
    uintptr_t fn_addr = 0;
    memcpy(&fn_addr, &fn, sizeof fn_addr);
    snprintf(expected_fn, sizeof expected_fn, "0x%lx", (unsigned long)fn_addr);
    test_desc_init(&d);
    d.stack_size = 8192;
    d.logger.func = capture;
    CHECK_OK(fsched_create(&d, &s));
    CHECK_OK(fsched_bind(s));
    board_at_exit(on_exit_check);
    board_set_fault_hook(on_fault);
    CHECK_OK(fsched_spawn(s, overflowing_task, &sink));
    fsched_yield(); /* runs the task */
    fprintf(stderr, "test_overflow: the overflow went unnoticed (%u)\n", sink);
    return 1;
}
#elif !(defined(__unix__) || defined(__APPLE__)) || defined(FIBERSCHED_NO_OS)
int main(void) {
    printf("test_overflow: skipped (needs fork and signals)\n");
    return TEST_SKIP;
}
#else
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* Under a sanitizer, leave SIGSEGV to the program so that the handler under test runs
   (the sanitizers would otherwise report the overflow themselves, also loudly). */
#if defined(FSCHED__ASAN) || defined(FSCHED__TSAN)
const char *__asan_default_options(void);
const char *__tsan_default_options(void);
const char *__asan_default_options(void) { return "handle_segv=0:handle_sigbus=0"; }
const char *__tsan_default_options(void) { return "handle_segv=0:handle_sigbus=0"; }
#endif

/* A scheduler for the test; without threads the calling thread binds to it, so that its
   waits run the tasks. */
static void create_sched(const fsched_desc *d, fsched_sched **s) {
    CHECK_OK(fsched_create(d, s));
    if (!TEST_THREADS) CHECK_OK(fsched_bind(*s));
}

typedef struct child_result {
    int signaled, signal, exited, status;
    char output[4096];
} child_result;

/* Runs fn in a child process with its stderr captured. */
static child_result run_child(void (*fn)(void)) {
    child_result r;
    int fds[2], status;
    size_t used = 0;
    pid_t pid;
    memset(&r, 0, sizeof r);
    CHECK(pipe(fds) == 0);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        test_watchdog(60); /* a hung child fails with its output, long before the parent's */
        fn();
        _exit(0);
    }
    close(fds[1]);
    for (;;) {
        ssize_t n = read(fds[0], r.output + used, sizeof r.output - 1 - used);
        if (n <= 0) break;
        used += (size_t)n;
    }
    close(fds[0]);
    CHECK(waitpid(pid, &status, 0) == pid);
    r.signaled = WIFSIGNALED(status);
    r.signal = r.signaled ? WTERMSIG(status) : 0;
    r.exited = WIFEXITED(status);
    r.status = r.exited ? WEXITSTATUS(status) : -1;
    return r;
}

static void expect_signal(const child_result *r, int sig1, int sig2, const char *text) {
    if (!(r->signaled && (r->signal == sig1 || r->signal == sig2)) ||
        (text && !strstr(r->output, text))) {
        fprintf(stderr, "child: signaled %d signal %d exited %d status %d, output:\n%s\n",
                r->signaled, r->signal, r->exited, r->status, r->output);
        CHECK(!"the child did not end as expected");
    }
}

/* ---- overflow into the guard region ---- */

/* Under qemu-user (the cross builds' tests) dladdr names neither symbol nor module in the
   report, which then gives the address alone. */
static int emulated(void) { return test_emulated(); }

static volatile unsigned long long depth_limit = ~0ull; /* never reached */

static FSCHED__NOINLINE unsigned long long bottomless(unsigned long long depth) {
    volatile unsigned char frame[512];
    if (depth == depth_limit) return 0;
    frame[0] = (unsigned char)depth;
    frame[511] = (unsigned char)(depth >> 8);
    return bottomless(depth + 1) + frame[0] + frame[511]; /* not a tail call */
}

static void overflow_body(void *arg) {
    (void)arg;
    bottomless(0);
}

static void overflow_fiber(void) {
    fsched_fiber_desc d;
    fsched_fiber *f;
    memset(&d, 0, sizeof d);
    d.stack_size = 16 * 1024;
    d.name = "overflower";
    CHECK_OK(fsched_fiber_create(&d, overflow_body, NULL, &f));
    CHECK_OK(fsched_fiber_switch(f));
}

static void overflow_with_handler(void) {
    CHECK_OK(fsched_install_overflow_handler());
    CHECK_OK(fsched_install_overflow_handler()); /* idempotent */
    overflow_fiber();
}

/* A fault elsewhere still reaches the handler that was installed before ours. */
static volatile sig_atomic_t previous_handler_ran;
static void previous_handler(int sig) {
    (void)sig;
    previous_handler_ran = 1;
    _exit(42);
}

static void unrelated_fault_with_handler(void) {
    /* a fault in an inaccessible page that is no fiber's guard */
    volatile int *page = (volatile int *)mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
                                              -1, 0);
    CHECK((void *)page != MAP_FAILED);
    signal(SIGSEGV, previous_handler);
    signal(SIGBUS, previous_handler);
    CHECK_OK(fsched_install_overflow_handler());
    CHECK_OK(fsched_install_overflow_handler()); /* again: still chains to the user's */
#if FIBERSCHED_VALGRIND
    VALGRIND_DISABLE_ERROR_REPORTING; /* the fault below is the point of the test */
#endif
    *page = 1;
}

static void test_guard_overflow(void) {
    child_result r = run_child(overflow_with_handler);
    expect_signal(&r, SIGSEGV, SIGBUS, "stack overflow in fiber 'overflower'");
    r = run_child(overflow_fiber); /* no handler: still a fault, never silent */
    expect_signal(&r, SIGSEGV, SIGBUS, NULL);
    r = run_child(unrelated_fault_with_handler);
    CHECK(r.exited && r.status == 42);
}

/* ---- a task of a scheduler: reported by default, naming the task and its stack ---- */

static void overflowing_task(void *arg) {
    (void)arg;
    bottomless(0);
}

static void task_overflow(int no_handler) {
    fsched_desc d;
    fsched_sched *s;
    fsched_wait_group wg;
    memset(&d, 0, sizeof d);
    d.workers = 2;
    d.stack_size = 64 * 1024;
    d.no_overflow_handler = no_handler;
    create_sched(&d, &s);
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, overflowing_task, NULL));
    CHECK_OK(fsched_wait_group_wait(&wg));
}

static void task_overflow_reported(void) { task_overflow(0); }
static void task_overflow_unhandled(void) { task_overflow(1); }

static int graph_overflower(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    return (int)bottomless(0);
}

static void graph_task_overflow(void) {
    fsched_sched *s;
    fsched_graph *g;
    fsched_graph_task *t;
    fsched_graph_task_desc td;
    create_sched(NULL, &s);
    CHECK_OK(fsched_graph_create(NULL, &g));
    memset(&td, 0, sizeof td);
    td.name = "recurses forever";
    CHECK_OK(fsched_graph_add(g, graph_overflower, NULL, &td, &t));
    CHECK_OK(fsched_graph_run(g, s));
    fsched_graph_wait(g, NULL);
}

/* ---- every kind of job names what overflowed: by its symbol where the program exports
   it (this test is linked with -rdynamic), else by address, module and offset ---- */

void overflow_in_task(void *arg);
void overflow_in_join_half(void *arg);
void overflow_in_loop(void *ctx, size_t lo, size_t hi);
int overflow_in_graph_task(fsched_graph_task *self, void *arg);

void overflow_in_task(void *arg) {
    (void)arg;
    bottomless(0);
}

static int half_taken; /* atomic (relaxed: a flag that only says when to go on) */

void overflow_in_join_half(void *arg) {
    (void)arg;
    FSCHED__STORE(&half_taken, 1, FSCHED__RELAXED);
    bottomless(0);
}

static void wait_until_taken(void *arg) {
    (void)arg;
    /* until the other worker took the second half */
    while (!FSCHED__LOAD(&half_taken, FSCHED__RELAXED)) fsched_yield();
}

void overflow_in_loop(void *ctx, size_t lo, size_t hi) {
    (void)ctx;
    (void)hi;
    if (lo >= 512) bottomless(0); /* a piece split off to the right */
}

int overflow_in_graph_task(fsched_graph_task *self, void *arg) {
    (void)self;
    (void)arg;
    return (int)bottomless(0);
}

static fsched_sched *named_sched(void) {
    fsched_desc d;
    fsched_sched *s;
    memset(&d, 0, sizeof d);
    d.workers = 2;
    d.stack_size = 64 * 1024;
    create_sched(&d, &s);
    return s;
}

static void run_in_task(fsched_sched *s, void (*fn)(void *)) {
    fsched_wait_group wg;
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, fn, NULL));
    CHECK_OK(fsched_wait_group_wait(&wg));
}

static void task_named(void) { run_in_task(named_sched(), overflow_in_task); }

static void joins(void *arg) {
    (void)arg;
    CHECK_OK(fsched_join(wait_until_taken, NULL, overflow_in_join_half, NULL));
}
static void join_half_named(void) { run_in_task(named_sched(), joins); }

static void loops(void *arg) {
    (void)arg;
    CHECK_OK(fsched_parallel_for(0, 1024, 1, overflow_in_loop, NULL));
}
static void loop_named(void) { run_in_task(named_sched(), loops); }

static void graph_task_named(void) {
    fsched_sched *s = named_sched();
    fsched_graph *g;
    fsched_graph_task *t;
    CHECK_OK(fsched_graph_create(NULL, &g));
    CHECK_OK(fsched_graph_add(g, overflow_in_graph_task, NULL, NULL, &t));
    CHECK_OK(fsched_graph_run(g, s));
    fsched_graph_wait(g, NULL);
}

/* a spawned child that another worker took: its run function is static (named by its
   address, module and offset) */
FSCHED_VOID_TASK(overflow_in_frame, int, unused) {
    (void)unused;
    FSCHED__STORE(&half_taken, 1, FSCHED__RELAXED);
    bottomless(0);
}

FSCHED_VOID_TASK(frame_parent, int, unused) {
    (void)unused;
    FSCHED_SPAWN(overflow_in_frame, 0);
    /* until the other worker took the child */
    while (!FSCHED__LOAD(&half_taken, FSCHED__RELAXED)) fsched_yield();
    FSCHED_SYNC(overflow_in_frame);
}

static void frame_roots(void *arg) {
    (void)arg;
    CHECK_OK(FSCHED_RUN(frame_parent, 0, NULL));
}
static void frame_named(void) { run_in_task(named_sched(), frame_roots); }

static void test_jobs_named(void) {
    static const struct {
        void (*run)(void);
        const char *function;
    } cases[] = {
        {task_named, "overflow_in_task"},
        {join_half_named, "overflow_in_join_half"},
        {loop_named, "overflow_in_loop"},
        {graph_task_named, "overflow_in_graph_task"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char expected[128];
        child_result r = run_child(cases[i].run);
        snprintf(expected, sizeof expected, "running the task whose function is %s",
                 emulated() ? "" : cases[i].function);
        expect_signal(&r, SIGSEGV, SIGBUS, expected);
    }
    {
        char expected[128];
        child_result r = run_child(frame_named);
        snprintf(expected, sizeof expected, "running the task whose function is at %p",
                 (void *)FSCHED__CODE(overflow_in_frame_fsched_run));
        if (emulated()) expected[strlen("running the task whose function is ")] = 0;
        expect_signal(&r, SIGSEGV, SIGBUS, expected);
    }
}

static void test_task_overflow(void) {
    char expected[128];
    child_result r = run_child(task_overflow_reported);
    /* the default handler, not installed by hand: the task's function (static: by address,
       module and offset) and stack size */
    snprintf(expected, sizeof expected,
             "(a stack of %lu bytes) running the task whose function is at 0x",
             (unsigned long)(64 * 1024));
    expect_signal(&r, SIGSEGV, SIGBUS, expected);
    if (!emulated()) /* the module: this program, test-overflow or a variant of it */
        CHECK(strstr(r.output, "test-overflow") && strstr(r.output, "+0x"));
    r = run_child(task_overflow_unhandled); /* opted out: a plain fault */
    expect_signal(&r, SIGSEGV, SIGBUS, NULL);
    CHECK(!strstr(r.output, "stack overflow"));
    r = run_child(graph_task_overflow); /* a graph task, by name, on the default stack */
    snprintf(expected, sizeof expected, "(a stack of %lu bytes) running task 'recurses forever'",
             (unsigned long)FIBERSCHED_DEFAULT_STACK_SIZE);
    expect_signal(&r, SIGSEGV, SIGBUS, expected);
}

/* ---- spawn and sync: more children outstanding than the frame stack holds ---- */

FSCHED_VOID_TASK(leaf_frame, int, unused) { (void)unused; }

FSCHED_VOID_TASK(spawns_too_many, int, count) {
    int i;
    for (i = 0; i < count; i++) FSCHED_SPAWN(leaf_frame, i);
    for (i = 0; i < count; i++) FSCHED_SYNC(leaf_frame);
}

static void spawner(void *arg) {
    (void)arg;
    /* 64 KiB stacks: 8,192 frames */
    CHECK_OK(FSCHED_RUN(spawns_too_many, 10000, NULL));
}

static void frames_full(void) {
    fsched_desc d;
    fsched_sched *s;
    fsched_wait_group wg;
    memset(&d, 0, sizeof d);
    d.workers = 1;
    d.stack_size = 64 * 1024;
    create_sched(&d, &s);
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, spawner, NULL));
    CHECK_OK(fsched_wait_group_wait(&wg));
}

static void test_frames_full(void) {
    child_result r = run_child(frames_full);
    expect_signal(&r, SIGABRT, SIGABRT, "frames spawned and not synced in one task tree");
}

/* ---- heap stacks: a canary below the stack ---- */

static void smash_canary_body(void *arg) {
    void *lo;
    size_t size;
    (void)arg;
    CHECK_OK(fsched_fiber_stack(fsched_fiber_current(), &lo, &size));
    memset((unsigned char *)lo - 16, 0, 16); /* what a small overflow would do */
}

static void smashed_canary(void) {
    fsched_fiber_desc d;
    fsched_fiber *f;
    memset(&d, 0, sizeof d);
    d.stack_size = 16 * 1024;
    d.stack_kind = FSCHED_STACK_HEAP;
    d.name = "smasher";
    CHECK_OK(fsched_fiber_create(&d, smash_canary_body, NULL, &f));
    CHECK_OK(fsched_fiber_switch(f));
    fsched_fiber_destroy(f); /* checks the canary at the latest here */
}

/* A slab stack's canary lies in the slot below it: an overflow is seen the same way,
   zeros included (an overflowing array cleared by its code). */
static void smash_slab_body(void *arg) {
    void *lo;
    size_t size;
    (void)arg;
    CHECK_OK(fsched_fiber_stack(fsched_fiber_current(), &lo, &size));
    memset((unsigned char *)lo - 16, 0, 16);
}

static void smashed_slab(void) {
    fsched_fiber_desc d;
    fsched_fiber *f;
    memset(&d, 0, sizeof d);
    d.stack_size = 16 * 1024;
    d.stack_kind = FSCHED_STACK_SLAB;
    d.name = "slab smasher";
    CHECK_OK(fsched_fiber_create(&d, smash_slab_body, NULL, &f));
    CHECK_OK(fsched_fiber_switch(f));
    fsched_fiber_destroy(f);
}

/* ---- small stacks: no guard, a canary checked at every switch away, in every build ---- */

/* Recurses until a frame lies below the stack's lowest byte: it wrote over the canary, and
   a little of what lies below (another stack of the slab). */
static FSCHED__NOINLINE unsigned dive_below(const unsigned char *lo) {
    volatile unsigned char frame[128];
    size_t i;
    for (i = 0; i < sizeof frame; i++) frame[i] = (unsigned char)i;
    if ((const unsigned char *)frame < lo) return frame[0];
    return dive_below(lo) + frame[127]; /* not a tail call */
}

static unsigned char *stack_lo_here(void) {
    void *lo;
    size_t size;
    CHECK_OK(fsched_fiber_stack(fsched_fiber_current(), &lo, &size));
    return (unsigned char *)lo;
}

static void small_overflow_task(void *arg) {
    *(unsigned *)arg = dive_below(stack_lo_here());
    fsched_yield(); /* the switch away sees it */
}

static void small_task_overflows(void) {
    fsched_desc d;
    fsched_sched *s;
    fsched_wait_group wg;
    unsigned sink = 0;
    memset(&d, 0, sizeof d);
    d.workers = 1;
    d.stack_kind = FSCHED_STACK_SMALL;
    create_sched(&d, &s);
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn_named(&wg, s, small_overflow_task, &sink, "dives"));
    CHECK_OK(fsched_wait_group_wait(&wg));
    fprintf(stderr, "small stacks: the overflow went unseen\n");
}

static void small_fiber_body(void *arg) {
    *(unsigned *)arg = dive_below(stack_lo_here());
} /* its end switches away */

static void small_fiber_overflows(void) {
    fsched_fiber_desc d;
    fsched_fiber *f;
    unsigned sink = 0;
    memset(&d, 0, sizeof d);
    d.stack_kind = FSCHED_STACK_SMALL;
    d.name = "small diver";
    CHECK_OK(fsched_fiber_create(&d, small_fiber_body, &sink, &f));
    CHECK_OK(fsched_fiber_switch(f));
    fprintf(stderr, "small stacks: the overflow went unseen\n");
}

/* An overflow of a small stack that goes on past its canary (over the stacks below) until
   it faults, before any switch checks the canary: the fault is reported as the overflow. */
static void small_fault_body(void *arg) {
    volatile int *page = (volatile int *)arg;
    memset(stack_lo_here() - 16, 0, 16);
    *page = 1;
}

static void small_fiber_faults(void) {
    fsched_fiber_desc d;
    fsched_fiber *f;
    void *page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
    CHECK_OK(fsched_install_overflow_handler());
    memset(&d, 0, sizeof d);
    d.stack_kind = FSCHED_STACK_SMALL;
    d.name = "small faulter";
    CHECK_OK(fsched_fiber_create(&d, small_fault_body, page, &f));
#if FIBERSCHED_VALGRIND
    VALGRIND_DISABLE_ERROR_REPORTING; /* the fault is the point of the test */
#endif
    CHECK_OK(fsched_fiber_switch(f));
    fprintf(stderr, "small stacks: no fault\n");
}

static void test_canary(void) {
    char expected[160];
    child_result r = run_child(smashed_canary);
    expect_signal(&r, SIGABRT, SIGABRT, "stack overflow in fiber 'smasher'");
    r = run_child(smashed_slab);
    expect_signal(&r, SIGABRT, SIGABRT, "stack overflow in fiber 'slab smasher'");
#if defined(FSCHED__HAVE_PAGES)
    snprintf(expected, sizeof expected,
             "(a stack of %lu bytes) running task 'dives': the canary below its stack was "
             "overwritten",
             (unsigned long)FIBERSCHED_MIN_SMALL_STACK_SIZE);
    r = run_child(small_task_overflows);
    expect_signal(&r, SIGABRT, SIGABRT, expected);
    r = run_child(small_fiber_overflows);
    expect_signal(&r, SIGABRT, SIGABRT, "stack overflow in fiber 'small diver'");
    r = run_child(small_fiber_faults);
    snprintf(expected, sizeof expected,
             "stack overflow in fiber 'small faulter' (a stack of %lu bytes): fault at ",
             (unsigned long)FIBERSCHED_MIN_SMALL_STACK_SIZE);
    expect_signal(&r, SIGSEGV, SIGBUS, expected);
#else
    (void)expected;
#endif
}

/* ---- a finished fiber with nowhere to return ---- */

static fsched_fiber *orphan_a, *orphan_b;

static void orphan_a_body(void *arg) {
    (void)arg;
    CHECK_OK(fsched_fiber_switch(orphan_b)); /* never comes back */
}

static void orphan_b_body(void *arg) {
    (void)arg;
    CHECK_OK(fsched_fiber_destroy(orphan_a)); /* the fiber that switched here */
    /* returns, with nowhere to go */
}

/* The stacks come from a pool, which keeps a destroyed fiber's record readable: that is
   what makes the destroyed resumer detectable. */
static void orphan(void) {
    fsched_fiber_desc d;
    fsched_stack_pool *pool;
    fsched_stack_pool_desc pd;
    memset(&pd, 0, sizeof pd);
    pd.stack_size = 32 * 1024;
    CHECK_OK(fsched_stack_pool_create(&pd, &pool));
    memset(&d, 0, sizeof d);
    d.pool = pool;
    CHECK_OK(fsched_fiber_create(&d, orphan_a_body, NULL, &orphan_a));
    CHECK_OK(fsched_fiber_create(&d, orphan_b_body, NULL, &orphan_b));
    fsched_fiber_switch(orphan_a);
    fprintf(stderr, "orphan: control came back\n");
}

static void test_orphan(void) {
    child_result r = run_child(orphan);
    expect_signal(&r, SIGABRT, SIGABRT, "nowhere to return to");
}

/* ---- the trampoline's trap: a first frame that returns ---- */

static void returning_entry(void *pass) {
    fsched_fiber *self = fsched__thread_get()->current;
    fsched__fiber_arrived(self, (fsched_fiber *)pass);
}

static void first_frame_returns(void) {
    fsched__stack_params params;
    fsched_fiber *f;
    fsched__thread *t = fsched__thread_get();
    CHECK_OK(fsched__stack_params_resolve(32 * 1024, 0, FSCHED_STACK_DEFAULT, NULL, NULL, &params));
    CHECK_OK(fsched__stack_alloc(&params, &f));
    CHECK_OK(fsched__fiber_prepare(f, returning_entry, "returner"));
    t->current = f;
    fsched__fiber_jump(&t->root, f, fsched__fiber_take(f), 0);
    fprintf(stderr, "trap: control came back\n");
}

static void test_trap(void) {
    child_result r = run_child(first_frame_returns);
    expect_signal(&r, SIGABRT, SIGABRT, "first frame returned");
}

int main(void) {
    test_watchdog(300);
    test_guard_overflow();
    test_task_overflow();
    test_jobs_named();
    test_canary();
    test_frames_full();
    test_orphan();
    test_trap();
    printf("test_overflow: ok\n");
    return 0;
}
#endif
