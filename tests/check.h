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

#endif
