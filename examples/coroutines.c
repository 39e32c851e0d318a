/* Coroutines with the low-level fiber API, no scheduler: a generator of Fibonacci numbers
   and a two-stage pipeline of fibers handing values to each other.

   Build: cc -O2 -pthread examples/coroutines.c -o coroutines */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <stdio.h>

typedef struct generator {
    fsched_fiber *caller; /* who to hand each value to */
    fsched_fiber *self;
    unsigned long long value;
    int limit;
} generator;

/* Yields the Fibonacci numbers below g->limit terms, then returns (the fiber finishes and
   control goes back to the fiber that last switched to it). */
static void fibonacci(void *arg) {
    generator *g = (generator *)arg;
    unsigned long long a = 0, b = 1;
    int i;
    for (i = 0; i < g->limit; i++) {
        g->value = a;
        fsched_fiber_switch(g->caller);
        b += a;
        a = b - a;
    }
}

int main(void) {
    generator g;
    fsched_fiber_desc desc = {0};
    fsched_result r;
    desc.name = "fibonacci";
    desc.stack_size = 64 * 1024;
    g.caller = fsched_fiber_current();
    g.limit = 20;
    r = fsched_fiber_create(&desc, fibonacci, &g, &g.self);
    if (r != FSCHED_OK) {
        fprintf(stderr, "fsched_fiber_create: %s\n", fsched_result_string(r));
        return 1;
    }
    /* Resume the generator until it finishes; each switch returns when it yields. */
    while (fsched_fiber_get_state(g.self) == FSCHED_FIBER_SUSPENDED) {
        fsched_fiber_switch(g.self);
        if (fsched_fiber_get_state(g.self) != FSCHED_FIBER_FINISHED) printf("%llu ", g.value);
    }
    printf("\n");
    /* A finished fiber can no longer be switched to: the call says so instead of crashing. */
    r = fsched_fiber_switch(g.self);
    printf("switch to a finished fiber: %s\n", fsched_result_string(r));
    fsched_fiber_destroy(g.self);
    printf("fibersched %s\n", fsched_version_string());
    return 0;
}
