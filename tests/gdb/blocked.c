/* A program for the gdb extension's test (tests/gdb/check.py): tasks blocked on an event,
   a mutex, a sleep, a wait group, a join, a parallel loop and a spawn/sync child, each in
   a function of its own, on a scheduler of two workers. When every one of them is
   suspended, main calls fibers_ready(), where the test's breakpoint stops it; the test
   then lists the fibers and takes their backtraces. Continued, main releases them all and
   checks that each task ended. Small stacks keep a core file of it small. */
#define FIBERSCHED_IMPLEMENTATION
#include "../../fibersched.h"
#include "../check.h"

static fsched_event ready_go;  /* set when the test has looked */
static fsched_mutex held;      /* locked by main while the test looks */
static fsched_wait_group group; /* never done until main is continued */
static fsched_event half_started, half_go; /* the second half of the join has begun; ends it */
static fsched_event piece_started, piece_go; /* the same for the loop's second piece */
static fsched_event child_started, child_go; /* and for the spawn/sync child */
static int ended;              /* atomic: tasks that ended */

static FSCHED__NOINLINE void waits_on_event(void *p) {
    (void)p;
    CHECK_OK(fsched_event_wait(&ready_go));
    FSCHED__FETCH_ADD(&ended, 1, FSCHED__RELAXED);
}

static FSCHED__NOINLINE void waits_on_mutex(void *p) {
    (void)p;
    CHECK_OK(fsched_mutex_lock(&held));
    CHECK_OK(fsched_mutex_unlock(&held));
    FSCHED__FETCH_ADD(&ended, 1, FSCHED__RELAXED);
}

static FSCHED__NOINLINE void sleeps_long(void *p) {
    (void)p;
    while (!fsched_event_is_set(&ready_go)) fsched_sleep_for(2000ull * 1000 * 1000);
    FSCHED__FETCH_ADD(&ended, 1, FSCHED__RELAXED);
}

static FSCHED__NOINLINE void waits_on_group(void *p) {
    (void)p;
    CHECK_OK(fsched_wait_group_wait(&group));
    FSCHED__FETCH_ADD(&ended, 1, FSCHED__RELAXED);
}

/* The first half waits until the second has begun elsewhere, so that the join waits for
   a taken half. */
static void first_half(void *p) {
    (void)p;
    CHECK_OK(fsched_event_wait(&half_started));
}

static void second_half(void *p) {
    (void)p;
    CHECK_OK(fsched_event_set(&half_started));
    CHECK_OK(fsched_event_wait(&half_go));
}

static FSCHED__NOINLINE void joins_halves(void *p) {
    (void)p;
    CHECK_OK(fsched_join(first_half, NULL, second_half, NULL));
    FSCHED__FETCH_ADD(&ended, 1, FSCHED__RELAXED);
}

/* The loop's first piece waits until the second has begun elsewhere, as the join's. */
static void loop_body(void *ctx, size_t lo, size_t hi) {
    (void)ctx;
    (void)hi;
    if (lo == 0) {
        CHECK_OK(fsched_event_wait(&piece_started));
    } else {
        CHECK_OK(fsched_event_set(&piece_started));
        CHECK_OK(fsched_event_wait(&piece_go));
    }
}

static FSCHED__NOINLINE void loops(void *p) {
    (void)p;
    CHECK_OK(fsched_parallel_for(0, 2, 1, loop_body, NULL));
    FSCHED__FETCH_ADD(&ended, 1, FSCHED__RELAXED);
}

/* A spawn/sync tree whose child another fiber runs, while the parent waits for it. */
FSCHED_VOID_TASK(child_waits, int, unused) {
    (void)unused;
    CHECK_OK(fsched_event_set(&child_started));
    CHECK_OK(fsched_event_wait(&child_go));
}

FSCHED_VOID_TASK(parent_of_child, int, unused) {
    FSCHED_SPAWN(child_waits, unused);
    CHECK_OK(fsched_event_wait(&child_started));
    FSCHED_SYNC(child_waits);
}

static FSCHED__NOINLINE void runs_tree(void *p) {
    (void)p;
    CHECK_OK(FSCHED_RUN(parent_of_child, 0, NULL));
    FSCHED__FETCH_ADD(&ended, 1, FSCHED__RELAXED);
}

/* The test's breakpoint. Built with CRASH_WHEN_READY, the program aborts there instead,
   for a core file as a crash leaves it. */
FSCHED__NOINLINE void fibers_ready(void);
FSCHED__NOINLINE void fibers_ready(void) {
#if defined(CRASH_WHEN_READY)
    abort();
#endif
    __asm__ volatile("" ::: "memory");
}

/* Suspended fibers of every slot (a look from outside: good enough to know when to stop). */
static uint32_t blocked(fsched_sched *s) {
    uint32_t i, n = 0;
    for (i = 0; i < s->n_slots; i++) n += FSCHED__LOAD(&s->slots[i]->blocked, FSCHED__RELAXED);
    return n;
}

/* Whether every worker thread has started its loop, on a fiber (the same kind of look). */
static int workers_started(fsched_sched *s) {
    uint32_t i;
    for (i = 0; i < s->n_threads; i++)
        if (!FSCHED__LOAD(&s->slots[i]->root_parked, FSCHED__RELAXED)) return 0;
    return 1;
}

int main(void) {
    fsched_desc d;
    fsched_sched *s;
    int spins = 0;
    memset(&d, 0, sizeof d);
    d.workers = 2;
    d.stack_size = 128 * 1024;
    CHECK_OK(fsched_event_init(&ready_go, 1, 0));
    CHECK_OK(fsched_event_init(&half_started, 1, 0));
    CHECK_OK(fsched_event_init(&half_go, 1, 0));
    CHECK_OK(fsched_event_init(&piece_started, 1, 0));
    CHECK_OK(fsched_event_init(&piece_go, 1, 0));
    CHECK_OK(fsched_event_init(&child_started, 1, 0));
    CHECK_OK(fsched_event_init(&child_go, 1, 0));
    CHECK_OK(fsched_mutex_init(&held));
    CHECK_OK(fsched_wait_group_init(&group));
    CHECK_OK(fsched_wait_group_add(&group, 1));
    CHECK_OK(fsched_mutex_lock(&held));
    CHECK_OK(fsched_create(&d, &s));
    /* unnamed tasks are listed by their function, named ones by name and function */
    CHECK_OK(fsched_spawn(s, waits_on_event, NULL));
    CHECK_OK(fsched_spawn(s, waits_on_mutex, NULL));
    CHECK_OK(fsched_spawn_named(s, sleeps_long, NULL, "sleeper"));
    /* a name that is not UTF-8: shown with a replacement character, never refused */
    CHECK_OK(fsched_spawn_named(s, sleeps_long, NULL, "bytes \xff\xfe"));
    CHECK_OK(fsched_spawn_named(s, waits_on_group, NULL, "group-waiter"));
    CHECK_OK(fsched_spawn(s, joins_halves, NULL));
    CHECK_OK(fsched_spawn(s, loops, NULL));
    CHECK_OK(fsched_spawn(s, runs_tree, NULL));
    /* eight tasks, the join's second half, the loop's second piece and the child */
    while (blocked(s) < 11 || !workers_started(s)) {
        CHECK(++spins < 100000); /* 100 s */
        fsched_sleep_for(1000 * 1000);
    }
    fibers_ready();
    CHECK_OK(fsched_event_set(&ready_go));
    CHECK_OK(fsched_event_set(&half_go));
    CHECK_OK(fsched_event_set(&piece_go));
    CHECK_OK(fsched_event_set(&child_go));
    CHECK_OK(fsched_mutex_unlock(&held));
    CHECK_OK(fsched_wait_group_done(&group));
    CHECK_OK(fsched_destroy(s));
    CHECK_EQ_U64(FSCHED__LOAD(&ended, FSCHED__RELAXED), 8);
    printf("blocked: ok\n");
    return 0;
}
