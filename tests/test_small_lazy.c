/* Small stacks in a program linked for lazy binding (-z lazy): the first call of a
   function of the system's library binds it on the caller's stack, and the dynamic
   linker's binding saves the vector registers there (up to 3 KiB on x86-64 with
   AVX-512). The scheduler's own calls on a task's stack (a slab mapping made when a task
   blocks, unmapped when another worker made one first) must not be that first call: this
   process makes none of them before its 200,000 tasks block on small stacks, in each of
   four child processes (the race between the workers' mappings decides whether an unmap
   happens on a task's stack). Four more children have tasks that sleep (their timers'
   heap grows by copying, on a task's stack) and wait on an fd (the first makes the
   poller there), and workers that poll on their loop fibers' small stacks. */
#define FIBERSCHED_IMPLEMENTATION
#include "fibersched.h"

#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#if defined(FSCHED__HAVE_PAGES) && !defined(FSCHED__ASAN) && !defined(FSCHED__TSAN)
static fsched_event go;
static uint64_t sum, count;

static void blocked(void *p) {
    uint64_t id = (uint64_t)(uintptr_t)p;
    CHECK_OK(fsched_event_wait(&go));
    __atomic_fetch_add(&sum, id, __ATOMIC_RELAXED); /* relaxed: read after the group's wait */
    __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED);
}

static void block_many(void) {
    /* under an emulator (cross builds), fewer: the point is the host's binding */
    const uint64_t n = getenv("FIBERSCHED_TEST_EMULATED") ? 20000 : 200000;
    fsched_desc d;
    fsched_sched *s;
    fsched_wait_group wg;
    uint64_t i, expect = 0;
    memset(&d, 0, sizeof d);
    d.workers = 2;
    d.stack_kind = FSCHED_STACK_SMALL; /* the smallest */
    CHECK_OK(fsched_create(&d, &s));
    CHECK_OK(fsched_event_init(&go, 1, 0));
    CHECK_OK(fsched_wait_group_init(&wg));
    for (i = 1; i <= n; i++) {
        CHECK_OK(fsched_wait_group_spawn(&wg, s, blocked, (void *)(uintptr_t)i));
        expect += i;
    }
    fsched_sleep_for(200000000); /* the tasks block meanwhile */
    CHECK_OK(fsched_event_set(&go));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_EQ_U64(count, n);
    CHECK_EQ_U64(sum, expect);
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_event_destroy(&go));
    CHECK_OK(fsched_destroy(s));
}

static int pipe_ends[2];

static void sleeper(void *p) {
    uint64_t id = (uint64_t)(uintptr_t)p;
    uint32_t ready = 0;
    if (id % 1000 == 0) /* nothing is written: the wait times out */
        CHECK_RESULT(fsched_wait_fd(pipe_ends[0], FSCHED_READABLE, 1000000, &ready),
                     FSCHED_ERR_TIMEOUT);
    else
        fsched_sleep_for(1000000 + id % 1000 * 1000);
    __atomic_fetch_add(&count, 1, __ATOMIC_RELAXED); /* relaxed: read after the group's wait */
}

static void sleep_many(void) {
    const uint64_t n = getenv("FIBERSCHED_TEST_EMULATED") ? 2000 : 20000;
    fsched_desc d;
    fsched_sched *s;
    fsched_wait_group wg;
    uint64_t i;
    CHECK(pipe(pipe_ends) == 0);
    memset(&d, 0, sizeof d);
    d.workers = 2;
    d.stack_kind = FSCHED_STACK_SMALL;
    /* the largest: a timed or fd wait takes more than the smallest holds unoptimized on
       some targets (aarch64 at -O0), and still less than a binding saves */
    d.stack_size = fsched__small_stack_max();
    CHECK_OK(fsched_create(&d, &s));
    CHECK_OK(fsched_wait_group_init(&wg));
    for (i = 1; i <= n; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, sleeper, (void *)(uintptr_t)i));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_EQ_U64(count, n);
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_destroy(s));
}
#endif

int main(void) {
#if defined(FSCHED__HAVE_PAGES) && !defined(FSCHED__ASAN) && !defined(FSCHED__TSAN)
    int child;
    if (getenv("FIBERSCHED_TEST_UNDER_VALGRIND")) { /* which binds nothing on the stack */
        puts("test_small_lazy: skipped under Valgrind");
        return 0;
    }
    test_watchdog(300);
    for (child = 0; child < 8; child++) {
        int status = 0;
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            if (child < 4) block_many();
            else sleep_many();
            _exit(0);
        }
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
#endif
    puts("test_small_lazy: ok");
    return 0;
}
