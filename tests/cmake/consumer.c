/* A consumer of fibersched built through CMake (tests/cmake/CMakeLists.txt): the header
   with its implementation, a scheduler, a few tasks whose results are checked. Exits
   nonzero on any failure. */
#define FIBERSCHED_IMPLEMENTATION
#include <fibersched.h>

#include <stdio.h>
#include <string.h>

#define STR_(x) #x
#define STR(x) STR_(x)

enum { TASKS = 8, ADDS = 1000 };

typedef struct {
    long n, result;
} fib_arg;

/* Fork-join: the two halves possibly on different workers. */
static void fib(void *p) {
    fib_arg *a = p, x, y;
    if (a->n < 2) {
        a->result = a->n;
        return;
    }
    x.n = a->n - 1;
    y.n = a->n - 2;
    if (fsched_join(fib, &x, fib, &y) != FSCHED_OK) {
        a->result = -1;
        return;
    }
    a->result = x.result + y.result;
}

/* Tasks that block on a fiber-aware mutex around a shared counter. */
static fsched_mutex lock;
static long counter;

static void add(void *p) {
    int i;
    (void)p;
    for (i = 0; i < ADDS; i++) {
        fsched_mutex_lock(&lock);
        counter++;
        if (i % 100 == 0) fsched_yield(); /* hold the mutex across a switch now and then */
        fsched_mutex_unlock(&lock);
    }
}

static int check(int ok, const char *what) {
    if (!ok) fprintf(stderr, "consumer: FAILED: %s\n", what);
    return ok ? 0 : 1;
}

int main(void) {
    fsched_desc desc;
    fsched_sched *s = NULL;
    fsched_wait_group wg;
    fib_arg fibs[TASKS];
    int i, failures = 0;

    failures += check(strcmp(fsched_version_string(),
                             STR(FIBERSCHED_VERSION_MAJOR) "." STR(FIBERSCHED_VERSION_MINOR) "."
                             STR(FIBERSCHED_VERSION_PATCH)) == 0, "version string");

    memset(&desc, 0, sizeof desc);
    desc.workers = 2;
    if (fsched_create(&desc, &s) != FSCHED_OK) return check(0, "fsched_create");
    failures += check(fsched_mutex_init(&lock) == FSCHED_OK, "fsched_mutex_init");
    failures += check(fsched_wait_group_init(&wg) == FSCHED_OK, "fsched_wait_group_init");

    for (i = 0; i < TASKS; i++) {
        fibs[i].n = 10 + i;
        fibs[i].result = 0;
        failures += check(fsched_wait_group_spawn(&wg, s, fib, &fibs[i]) == FSCHED_OK, "spawn fib");
        failures += check(fsched_wait_group_spawn(&wg, s, add, NULL) == FSCHED_OK, "spawn add");
    }
    failures += check(fsched_wait_group_wait(&wg) == FSCHED_OK, "fsched_wait_group_wait");

    {
        long a = 0, b = 1, t;
        for (i = 0; i < 10 + TASKS; i++) {
            if (i >= 10) failures += check(fibs[i - 10].result == a, "fib result");
            t = a + b;
            a = b;
            b = t;
        }
    }
    failures += check(counter == (long)TASKS * ADDS, "counter under the mutex");

    fsched_wait_group_destroy(&wg);
    fsched_mutex_destroy(&lock);
    failures += check(fsched_destroy(s) == FSCHED_OK, "fsched_destroy");

    printf("consumer: fibersched %s, %d tasks, %s\n", fsched_version_string(), 2 * TASKS,
           failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
