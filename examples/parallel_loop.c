/* Parallel loops from main, with no setup: no scheduler is created here. The first
   fork-join call made outside every scheduler makes the process's default scheduler (one
   worker per CPU), runs the call there while main waits, and the default is released at
   exit. fsched_join and FSCHED_RUN work from main the same way.

   The program counts the Collatz steps of every number below N with fsched_parallel_for,
   finds the number that takes the most with fsched_parallel_reduce, and checks both
   against a plain loop.

   Build: cc -O2 -pthread examples/parallel_loop.c -o parallel_loop */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <stdio.h>
#include <stdlib.h>

#define N 1000000u

static unsigned collatz_steps(uint64_t x) {
    unsigned n = 0;
    while (x != 1) {
        x = x % 2 ? 3 * x + 1 : x / 2;
        n++;
    }
    return n;
}

/* A loop body gets a subrange [lo, hi) of the whole range; ctx is the last argument of
   fsched_parallel_for. Subranges run in parallel on the workers. */
static void count_steps(void *ctx, size_t lo, size_t hi) {
    unsigned *steps = (unsigned *)ctx;
    size_t i;
    for (i = lo; i < hi; i++) steps[i] = collatz_steps(i);
}

/* A reduction: each subrange folds into an accumulator of its own, and accumulators are
   combined in range order, so a tie goes to the smaller number, as in a plain loop. */
typedef struct longest {
    size_t number;
    unsigned steps;
} longest;

static void longest_init(void *ctx, void *acc) {
    longest *l = (longest *)acc;
    (void)ctx;
    l->number = 0;
    l->steps = 0;
}

static void longest_fold(void *ctx, size_t lo, size_t hi, void *acc) {
    const unsigned *steps = (const unsigned *)ctx;
    longest *l = (longest *)acc;
    size_t i;
    for (i = lo; i < hi; i++)
        if (steps[i] > l->steps) {
            l->number = i;
            l->steps = steps[i];
        }
}

static void longest_combine(void *ctx, void *acc, const void *other) {
    longest *l = (longest *)acc;
    const longest *r = (const longest *)other;
    (void)ctx;
    if (r->steps > l->steps) *l = *r;
}

int main(void) {
    unsigned *steps = (unsigned *)malloc(N * sizeof *steps);
    longest best, check = {0, 0};
    fsched_result r;
    size_t i;
    if (!steps) return 1;

    /* From main, like from anywhere: returns once every subrange has been counted. */
    r = fsched_parallel_for(1, N, 4096, count_steps, steps);
    if (r == FSCHED_OK)
        r = fsched_parallel_reduce(1, N, 4096, sizeof best, longest_init, longest_fold,
                                   longest_combine, steps, &best);
    if (r != FSCHED_OK) {
        fprintf(stderr, "parallel loop: %s\n", fsched_result_string(r));
        return 1;
    }
    printf("below %u, %lu takes the most Collatz steps: %u\n", N, (unsigned long)best.number,
           best.steps);

    /* the same, one number after the other */
    for (i = 1; i < N; i++) {
        unsigned n = collatz_steps(i);
        if (n != steps[i]) {
            fprintf(stderr, "%lu: %u steps, the loop counted %u\n", (unsigned long)i, n, steps[i]);
            return 1;
        }
        if (n > check.steps) {
            check.number = i;
            check.steps = n;
        }
    }
    free(steps);
    if (check.number != best.number || check.steps != best.steps) {
        fprintf(stderr, "the plain loop found %lu (%u steps)\n", (unsigned long)check.number,
                check.steps);
        return 1;
    }
    return 0; /* the default scheduler finishes and goes at exit */
}
