/* Interrupt handlers calling the library on a board (FIBERSCHED_NO_OS, Cortex-M): a fast
   timer interrupt releases a semaphore, sets an event and spawns tasks while the program's
   tasks use the same objects, and the program's thread waits for interrupts (the idle
   hook) when it has nothing to run. Every release is acquired once, no wake is lost, every
   spawn either runs or fails with out of memory, and a wait from a handler is refused.
   Without interrupts masked around the library's critical sections and read-modify-writes
   these fail: run it with -singlestep so that an interrupt may come between any two
   instructions. */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#if !defined(FIBERSCHED_TEST_BOARD)
int main(void) {
    printf("test_interrupts: skipped (needs a board)\n");
    return TEST_SKIP;
}
#else

#define MS 1000000ull
#define PERIOD_US 50u
#define TICKS 3000u
#define FIRST_TICK_US 20000u
#define INTERRUPT_TASKS 8u

static fsched_sched *sched;
static fsched_sema sema, empty;
static fsched_event first, event, never;
static fsched_wait_group spawned;

/* written by the handler only */
static volatile uint32_t ticks, spawn_ok, spawn_failed, handler_checked;
static volatile int handler_done;
/* written by the program only (idles read by the handler too) */
static volatile uint32_t idles;
static uint32_t ran, acquired, event_waits, hammer_rounds;

static void counted(void *arg) {
    (void)arg;
    ran++;
}

/* Once the program's thread has been idle (ticking every FIRST_TICK_US until then: a
   host that holds the emulator off may let the first tick come before the wait): a handler
   calls as from outside the scheduler, and may not wait. */
static void on_first_tick(void) {
    if (!idles) return;
    board_timer_stop();
    CHECK(fsched_current() == NULL);
    CHECK_RESULT(fsched_event_wait(&never), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_sema_acquire(&empty), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_sema_try_acquire(&empty), FSCHED_ERR_TIMEOUT);
    handler_checked = 1;
    CHECK_OK(fsched_event_set(&first));
}

static void on_tick(void) {
    uint32_t k = ticks + 1;
    fsched_result r;
    if (handler_done) return;
    ticks = k;
    CHECK_OK(fsched_sema_release(&sema, 1));
    CHECK_OK(fsched_event_set(&event));
    r = fsched_wait_group_spawn(&spawned, sched, counted, NULL);
    if (r == FSCHED_OK) {
        spawn_ok++;
    } else {
        CHECK_RESULT(r, FSCHED_ERR_OUT_OF_MEMORY); /* the reserve is taken */
        spawn_failed++;
    }
    if (k == TICKS) {
        handler_done = 1;
        board_timer_stop();
    }
}

static void idle(void *user) {
    idles++;
    board_wait_for_interrupt(user);
}

/* Takes every permit the handler releases; a wait that times out while the handler still
   releases is a lost wake. */
static void consumer(void *arg) {
    (void)arg;
    while (acquired < TICKS) {
        CHECK_OK(fsched_sema_acquire_for(&sema, 2000 * MS));
        acquired++;
    }
}

/* Waits for the handler's sets until it is done. */
static void event_waiter(void *arg) {
    (void)arg;
    while (!handler_done) {
        fsched_result r = fsched_event_wait_for(&event, 2000 * MS);
        if (r == FSCHED_ERR_TIMEOUT) {
            CHECK(handler_done); /* else a set was lost */
            break;
        }
        CHECK_OK(r);
        event_waits++;
    }
}

/* Uses the semaphore and the event from the program, releasing as much as it takes,
   while the handler does too. */
static void hammer(void *arg) {
    (void)arg;
    while (!handler_done) {
        CHECK_OK(fsched_sema_release(&sema, 1));
        CHECK_OK(fsched_sema_acquire_for(&sema, 2000 * MS));
        CHECK(fsched_event_is_set(&event) == 0 || fsched_event_is_set(&event) == 1);
        hammer_rounds++;
        fsched_yield();
    }
}

int main(void) {
    fsched_desc d;
    fsched_wait_group workers;
    test_desc_init(&d);
    d.idle = idle;
    d.interrupt_tasks = INTERRUPT_TASKS;
    CHECK_OK(fsched_create(&d, &sched));
    CHECK_OK(fsched_bind(sched));
    CHECK_OK(fsched_sema_init(&sema, 0));
    CHECK_OK(fsched_sema_init(&empty, 0));
    CHECK_OK(fsched_event_init(&first, 0, 0));
    CHECK_OK(fsched_event_init(&event, 0, 0));
    CHECK_OK(fsched_event_init(&never, 0, 0));
    CHECK_OK(fsched_wait_group_init(&spawned));
    CHECK_OK(fsched_wait_group_init(&workers));

    printf("test_interrupts: a wait ended by a handler, the thread idle meanwhile\n");
    board_timer_start(FIRST_TICK_US, on_first_tick);
    CHECK_OK(fsched_event_wait_for(&first, 2000 * MS));
    CHECK(handler_checked);
    CHECK(idles > 0);

    board_timer_start(PERIOD_US, on_tick);

    printf("test_interrupts: %u ticks of releases, sets and spawns against the program's\n",
           (unsigned)TICKS);
    CHECK_OK(fsched_wait_group_spawn(&workers, sched, consumer, NULL));
    CHECK_OK(fsched_wait_group_spawn(&workers, sched, event_waiter, NULL));
    CHECK_OK(fsched_wait_group_spawn(&workers, sched, hammer, NULL));
    CHECK_OK(fsched_wait_group_wait(&workers));
    CHECK(handler_done);
    CHECK_OK(fsched_wait_group_wait(&spawned));

    CHECK_EQ_U64(acquired, TICKS);
    CHECK_RESULT(fsched_sema_try_acquire(&sema), FSCHED_ERR_TIMEOUT); /* all taken, none made */
    CHECK(event_waits >= 1 && event_waits <= TICKS);
    CHECK_EQ_U64(spawn_ok + spawn_failed, TICKS);
    CHECK(spawn_ok > 0);
    CHECK_EQ_U64(ran, spawn_ok);
    printf("test_interrupts: %u spawns from the handler ran, %u found the reserve taken; "
           "%u rounds of the program's, %u event waits, %u idle calls\n",
           (unsigned)spawn_ok, (unsigned)spawn_failed, (unsigned)hammer_rounds,
           (unsigned)event_waits, (unsigned)idles);

    CHECK_OK(fsched_unbind());
    CHECK_OK(fsched_destroy(sched));
    CHECK_OK(fsched_wait_group_destroy(&workers));
    CHECK_OK(fsched_wait_group_destroy(&spawned));
    CHECK_OK(fsched_event_destroy(&never));
    CHECK_OK(fsched_event_destroy(&event));
    CHECK_OK(fsched_event_destroy(&first));
    CHECK_OK(fsched_sema_destroy(&empty));
    CHECK_OK(fsched_sema_destroy(&sema));
    printf("test_interrupts: ok\n");
    return 0;
}
#endif
