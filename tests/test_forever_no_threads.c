/* Without threads, a wait with the timeout FSCHED_FOREVER is a wait without a limit: when
   nothing can end it (no task, no idle hook, no other thread), it fails with
   FSCHED_ERR_WRONG_STATE as the wait without a timeout does, instead of polling the
   clock for ever. From a plain thread and from a thread bound to a single-threaded
   scheduler. */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

static void forever_waits_fail(void) {
    fsched_event e;
    fsched_sema sem;
    fsched_wait_group wg;
    CHECK_OK(fsched_event_init(&e, 1, 0));
    CHECK_OK(fsched_sema_init(&sem, 0));
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_add(&wg, 1));
    CHECK_RESULT(fsched_event_wait(&e), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_event_wait_for(&e, FSCHED_FOREVER), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_sema_acquire_for(&sem, FSCHED_FOREVER), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_wait_group_wait_for(&wg, FSCHED_FOREVER), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_wait_group_done(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_sema_destroy(&sem));
    CHECK_OK(fsched_event_destroy(&e));
}

int main(void) {
    fsched_sched *s;
    fsched_desc d;
    test_watchdog(10);
    forever_waits_fail();
    memset(&d, 0, sizeof d);
    d.single_threaded = 1;
    CHECK_OK(fsched_create(&d, &s));
    CHECK_OK(fsched_bind(s));
    forever_waits_fail();
    CHECK_OK(fsched_unbind());
    CHECK_OK(fsched_destroy(s));
    return 0;
}
