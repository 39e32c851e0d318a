/* Test helpers: checks that stay on under NDEBUG, a watchdog for hung tests, and a way to
   run a function in a child process and inspect how it ended. */
#ifndef FIBERSCHED_TEST_CHECK_H
#define FIBERSCHED_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
            fflush(stderr);                                                               \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                \
    do {                                                                                  \
        unsigned long long check_a_ = (unsigned long long)(a);                            \
        unsigned long long check_b_ = (unsigned long long)(b);                            \
        if (check_a_ != check_b_) {                                                       \
            fprintf(stderr, "%s:%d: check failed: %s == %s (%llu != %llu)\n", __FILE__,   \
                    __LINE__, #a, #b, check_a_, check_b_);                                \
            fflush(stderr);                                                               \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

#define CHECK_RESULT(expr, expected)                                                      \
    do {                                                                                  \
        fsched_result check_r_ = (expr);                                                  \
        if (check_r_ != (expected)) {                                                     \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s\n", __FILE__, __LINE__,   \
                    #expr, fsched_result_string(check_r_), fsched_result_string(expected)); \
            fflush(stderr);                                                               \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

#define CHECK_OK(expr) CHECK_RESULT(expr, FSCHED_OK)

/* Meson's exit code for a skipped test. */
#define TEST_SKIP 77

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
static DWORD WINAPI test_watchdog_thread(LPVOID arg) {
    Sleep((DWORD)(uintptr_t)arg * 1000u);
    fprintf(stderr, "watchdog: the test hung\n");
    fflush(stderr);
    ExitProcess(3);
    return 0;
}
/* Ends the process with a failure if it runs longer than `seconds`. */
static inline void test_watchdog(unsigned seconds) {
    HANDLE h = CreateThread(NULL, 0, test_watchdog_thread, (LPVOID)(uintptr_t)seconds, 0, NULL);
    if (h) CloseHandle(h);
}
#elif defined(__unix__) || defined(__APPLE__)
#include <signal.h>
#include <unistd.h>
static void test_watchdog_fired(int sig) {
    static const char msg[] = "watchdog: the test hung\n";
    ssize_t unused = write(2, msg, sizeof msg - 1);
    (void)unused;
    (void)sig;
    _exit(3);
}
static inline void test_watchdog(unsigned seconds) {
    signal(SIGALRM, test_watchdog_fired);
    alarm(seconds);
}
#else
static inline void test_watchdog(unsigned seconds) { (void)seconds; }
#endif

/* ---- threads: TEST_THREADS is 1 where the build has them ---- */

#if !defined(FIBERSCHED_NO_THREADS)
#define TEST_THREADS 1
#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#else
#include <pthread.h>
#endif
#else
#define TEST_THREADS 0
#endif

/* The tests' atomic accesses to their own counters: with one thread, plain accesses
   (64-bit atomics need not exist there: ARMv7-M has none). */
#if TEST_THREADS
#define LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_ACQ_REL)
#define SUB(p, v) __atomic_sub_fetch((p), (v), __ATOMIC_ACQ_REL)
#else
#define LOAD(p) (*(p))
#define STORE(p, v) ((void)(*(p) = (v)))
#define ADD(p, v) (*(p) += (v))
#define SUB(p, v) (*(p) -= (v))
#endif

/* One knob for the tests' sizes (tasks, fibers, array lengths, stack sizes): problem
   sizes are divided by TEST_SCALE, 1 on a desktop, 4 under the sanitizers, 64 on a board
   with a few MiB of RAM (FIBERSCHED_TEST_BOARD, set by the bare-metal cross builds). */
#if defined(FIBERSCHED_TEST_BOARD)
#define TEST_SCALE 64
#elif defined(FSCHED__ASAN) || defined(FSCHED__TSAN)
#define TEST_SCALE 4
#else
#define TEST_SCALE 1
#endif

/* GCC's TSan runtime gives every fiber a thread's state and clears the shadow of every
   stack unmapped, some hundreds of kilobytes each: tests that block thousands of fibers
   at once block a quarter as many there (clang's TSan build runs them all). */
#if defined(__SANITIZE_THREAD__) && !defined(__clang__)
#define TEST_FIBER_SCALE 4
#else
#define TEST_FIBER_SCALE 1
#endif

#if TEST_THREADS
typedef struct thread_start {
    void (*fn)(void *);
    void *arg;
} thread_start;

#if defined(_WIN32)
typedef HANDLE test_thread;
static inline DWORD WINAPI thread_trampoline(LPVOID p) {
    thread_start st = *(thread_start *)p;
    free(p);
    st.fn(st.arg);
    return 0;
}
static inline test_thread thread_run(void (*fn)(void *), void *arg) {
    thread_start *st = (thread_start *)malloc(sizeof *st);
    HANDLE h;
    CHECK(st != NULL);
    st->fn = fn;
    st->arg = arg;
    h = CreateThread(NULL, 0, thread_trampoline, st, 0, NULL);
    CHECK(h != NULL);
    return h;
}
static inline void thread_join(test_thread t) {
    CHECK(WaitForSingleObject(t, INFINITE) == WAIT_OBJECT_0);
    CloseHandle(t);
}
#else
typedef pthread_t test_thread;
static inline void *thread_trampoline(void *p) {
    thread_start st = *(thread_start *)p;
    free(p);
    st.fn(st.arg);
    return NULL;
}
static inline test_thread thread_run(void (*fn)(void *), void *arg) {
    thread_start *st = (thread_start *)malloc(sizeof *st);
    pthread_t t;
    CHECK(st != NULL);
    st->fn = fn;
    st->arg = arg;
    CHECK(pthread_create(&t, NULL, thread_trampoline, st) == 0);
    return t;
}
static inline void thread_join(test_thread t) {
    CHECK(pthread_join(t, NULL) == 0);
}
#endif
#endif

/* ---- fewer rounds where every step is slower ---- */

/* Set by the `valgrind` test setup (and true when the program runs under Valgrind). */
static inline int test_under_valgrind(void) {
    const char *vg = getenv("FIBERSCHED_TEST_UNDER_VALGRIND");
#if FIBERSCHED_VALGRIND
    if (RUNNING_ON_VALGRIND) return 1;
#endif
    return vg && *vg && strcmp(vg, "0") != 0;
}

/* Set by cross builds, whose tests run under an emulator (qemu-user, wine). */
static inline int test_emulated(void) {
    const char *e = getenv("FIBERSCHED_TEST_EMULATED");
    return e && *e && strcmp(e, "0") != 0;
}

/* `n` rounds of a long loop, divided by about the slowdown of the tool the test runs
   under (Valgrind; ThreadSanitizer's and AddressSanitizer's per-fiber bookkeeping);
   never fewer than one. */
static inline unsigned test_rounds(unsigned n) {
    unsigned divisor = 1;
#if defined(FSCHED__TSAN)
    divisor = 25;
#elif defined(FSCHED__ASAN)
    divisor = 4;
#endif
    if (test_under_valgrind()) divisor = 20;
    return n / divisor ? n / divisor : 1;
}

/* ---- random numbers and schedulers for the tests ---- */

#include <stdint.h>
#if defined(FIBERSCHED_TEST_BOARD)
#include "board.h"
#endif

/* splitmix64: a deterministic generator. */
static inline uint64_t test_rng(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* An all-default scheduler desc, but on a board, which has no operating system: its
   clock is the board's SysTick. */
static inline void test_desc_init(fsched_desc *d) {
    memset(d, 0, sizeof *d);
#if defined(FIBERSCHED_TEST_BOARD)
    d->clock = board_clock_ns;
#endif
}

/* A scheduler of `workers` workers. Without threads it is single-threaded, and the
   calling thread binds to it so that its waits run the tasks. */
static inline fsched_sched *test_sched_new(uint32_t workers) {
    fsched_desc d;
    fsched_sched *s;
    test_desc_init(&d);
    d.workers = workers;
    CHECK_OK(fsched_create(&d, &s));
#if !TEST_THREADS
    CHECK_OK(fsched_bind(s));
#endif
    return s;
}

/* ---- an allocator that makes a use after free fault at once ----
   Every block gets pages of its own; freeing a block makes its pages inaccessible, and
   they stay so (unmapped only when 4096 newer blocks were freed, 256 under Valgrind), so
   that a read of freed memory faults instead of reading stale data. POSIX only; elsewhere
   the C library. */
#if TEST_THREADS && (defined(__unix__) || defined(__APPLE__))
#include <sys/mman.h>
#define TEST_GUARD_QUARANTINE 4096
static pthread_mutex_t test_guard_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { void *p; size_t n; } test_guard_freed[TEST_GUARD_QUARANTINE];
static size_t test_guard_next;

static inline size_t test_guard_span(size_t size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (size ? size + page - 1 : page) / page * page;
}

static inline void *test_guard_alloc(size_t size, size_t align, void *user) {
    void *p;
    (void)user;
    if (align > (size_t)sysconf(_SC_PAGESIZE)) return NULL;
    p = mmap(NULL, test_guard_span(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
             -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static inline void test_guard_free(void *ptr, size_t size, size_t align, void *user) {
    size_t n = test_guard_span(size), k;
    (void)align;
    (void)user;
    CHECK(mprotect(ptr, n, PROT_NONE) == 0);
    pthread_mutex_lock(&test_guard_lock);
    /* Valgrind tracks a bounded number of mappings: a shorter quarantine there */
    k = test_guard_next++ % (test_under_valgrind() ? TEST_GUARD_QUARANTINE / 16
                                                   : TEST_GUARD_QUARANTINE);
    if (test_guard_freed[k].p) munmap(test_guard_freed[k].p, test_guard_freed[k].n);
    test_guard_freed[k].p = ptr;
    test_guard_freed[k].n = n;
    pthread_mutex_unlock(&test_guard_lock);
}
#define TEST_GUARD_ALLOCATOR 1
#endif

static inline void test_sched_free(fsched_sched *s) {
#if !TEST_THREADS
    CHECK_OK(fsched_unbind());
#endif
    CHECK_OK(fsched_destroy(s));
}

#endif
