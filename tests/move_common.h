/* What test_move and test_move_inline share: a short pause and a wait for a count that
   tasks raise, with a bound. Included after check.h, with TEST_POSIX defined where
   nanosleep is declared. */
#ifndef FIBERSCHED_TEST_MOVE_COMMON_H
#define FIBERSCHED_TEST_MOVE_COMMON_H

static void pause_us(unsigned us) {
#if defined(TEST_POSIX)
    struct timespec ts;
    ts.tv_sec = 0;
    ts.tv_nsec = (long)us * 1000L;
    nanosleep(&ts, NULL);
#else
    (void)us;
    fsched__os_yield();
#endif
}

/* Waits until *p reaches n; fails after 60 s. */
static void await_count(const int *p, int n) {
    uint64_t until = fsched_clock_ns() + 60000000000ull;
    while (LOAD(p) < n) {
        CHECK(fsched_clock_ns() < until);
        pause_us(100);
    }
}

/* Waits until every worker thread of s sleeps (the scheduler's own count); fails after
   60 s. A pause is no such promise on a loaded machine: a worker may not have run for
   longer. (test_move_inline does without.) */
static FSCHED__UNUSED void await_all_asleep(fsched_sched *s) {
    uint64_t until = fsched_clock_ns() + 60000000000ull;
    const uint32_t n = fsched_worker_count(s);
    while (FSCHED__SLEEPING(FSCHED__LOAD(&s->counters, FSCHED__SEQ_CST)) != n) {
        CHECK(fsched_clock_ns() < until);
        pause_us(100);
    }
}

#endif
