/* fsched_get_stats counts every job a slot runs, wherever it runs it: from the scheduling
   loop, and on the stack of a wait group's wait that runs the group's own tasks. Exact
   counts at 1 and 2 workers, and single-threaded (a bound thread). */
#define FIBERSCHED_IMPLEMENTATION
#include "fibersched.h"

#include <stdint.h>
#include <stdio.h>

#include "check.h"

#define TASKS 10000u

typedef struct scope {
    unsigned tasks;
    uint64_t ran; /* atomic */
} scope;

static void leaf(void *p) { ADD(&((scope *)p)->ran, 1); }

/* A task that spawns its tasks into a wait group and waits for them (first untimed, then
   with a timeout that does not expire): its waits run them, as far as no other worker
   took them first. */
static void spawner(void *p) {
    scope *sc = (scope *)p;
    fsched_wait_group wg;
    unsigned i;
    CHECK_OK(fsched_wait_group_init(&wg));
    for (i = 0; i < sc->tasks / 2; i++)
        CHECK_OK(fsched_wait_group_spawn(&wg, fsched_current(), leaf, sc));
    CHECK_OK(fsched_wait_group_wait(&wg));
    for (; i < sc->tasks; i++)
        CHECK_OK(fsched_wait_group_spawn(&wg, fsched_current(), leaf, sc));
    CHECK_OK(fsched_wait_group_wait_for(&wg, UINT64_C(600) * 1000000000u));
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

static void test_jobs_counted(uint32_t workers) {
    fsched_sched *s = test_sched_new(workers);
    fsched_wait_group wg;
    fsched_stats st;
    scope sc;
    sc.tasks = TASKS / (unsigned)TEST_SCALE;
    sc.ran = 0;
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, spawner, &sc));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_EQ_U64(LOAD(&sc.ran), sc.tasks);
    /* every task has ended, and with it its count (written before it ran) */
    CHECK_OK(fsched_get_stats(s, &st));
    CHECK_EQ_U64(st.jobs_run, sc.tasks + 1u); /* and the spawner */
    CHECK(st.steals <= st.jobs_run);
#if !TEST_THREADS
    CHECK_OK(fsched_unbind());
#endif
    CHECK_OK(fsched_destroy(s));
}

int main(void) {
    test_watchdog(300);
    test_jobs_counted(1);
#if TEST_THREADS
    test_jobs_counted(2);
#endif
    return 0;
}
