/* fib(n) the naive, doubly recursive way, in parallel with fsched_join, checked against
   the same computation done serially, with the time each took.

   fsched_join(a, b) runs a on the calling task and offers b to idle workers: if none took
   it by the time a is done, the caller runs b itself, at the cost of a function call. So
   a recursion can join at every level and the scheduler decides where parallelism pays.
   Below a small cutoff the recursion is serial: the leaves are then big enough for the
   cost of the joins not to show.

   Build: cc -O2 -pthread examples/parallel_fib.c -o parallel_fib
   Usage: parallel_fib [n]     (default 32; the time grows by 1.6 times per step of n) */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <stdio.h>
#include <stdlib.h>

#define CUTOFF 16

static uint64_t fib_serial(int n) {
    return n < 2 ? (uint64_t)n : fib_serial(n - 1) + fib_serial(n - 2);
}

/* One call: its argument and, when it returns, its result. */
typedef struct fib_call {
    int n;
    uint64_t result;
} fib_call;

/* The shape fsched_join wants: void f(void *). The two halves live on this task's stack,
   which stays valid because fsched_join returns only when both are done. */
static void fib_parallel(void *arg) {
    fib_call *call = (fib_call *)arg;
    fib_call a, b;
    if (call->n < CUTOFF) {
        call->result = fib_serial(call->n);
        return;
    }
    a.n = call->n - 1;
    b.n = call->n - 2;
    fsched_join(fib_parallel, &a, fib_parallel, &b);
    call->result = a.result + b.result;
}

int main(int argc, char **argv) {
    fsched_sched *sched;
    fib_call call;
    uint64_t t0, t1, t2, serial;
    double parallel_ms, serial_ms;
    fsched_result r;
    int n = 32;

    if (argc > 1) {
        char *end;
        long v = strtol(argv[1], &end, 10);
        if (*end != '\0' || v < 0 || v > 92) { /* fib(92) is the last to fit 64 bits */
            fprintf(stderr, "usage: %s [n]   with 0 <= n <= 92\n", argv[0]);
            return 2;
        }
        n = (int)v;
    }

    r = fsched_create(NULL, &sched); /* NULL: defaults, one worker per CPU */
    if (r != FSCHED_OK) {
        fprintf(stderr, "fsched_create: %s\n", fsched_result_string(r));
        return 1;
    }
    /* fsched_join needs a task or a bound thread to call it. Binding makes this thread
       take part in the scheduler: it computes too, and it runs other work while it waits
       for a half that a worker took. */
    r = fsched_bind(sched);
    if (r != FSCHED_OK) {
        fprintf(stderr, "fsched_bind: %s\n", fsched_result_string(r));
        return 1;
    }

    call.n = n;
    t0 = fsched_clock_ns();
    fib_parallel(&call);
    t1 = fsched_clock_ns();
    serial = fib_serial(n);
    t2 = fsched_clock_ns();

    parallel_ms = (double)(t1 - t0) / 1e6;
    serial_ms = (double)(t2 - t1) / 1e6;
    printf("fib(%d) = %llu\n", n, (unsigned long long)call.result);
    printf("parallel: %.1f ms on %u workers and this thread; serial: %.1f ms (%.2fx)\n",
           parallel_ms, (unsigned)fsched_worker_count(sched), serial_ms,
           parallel_ms > 0 ? serial_ms / parallel_ms : 0.0);

    fsched_unbind();
    fsched_destroy(sched);
    if (call.result != serial) {
        fprintf(stderr, "mismatch: the serial computation gives %llu\n",
                (unsigned long long)serial);
        return 1;
    }
    return 0;
}
