/* A second, private copy of fibersched (FIBERSCHED_STATIC) built another way, to measure
   what that costs in the same run: with FIBERSCHED_FPU_CONTROL=1 (the x86 floating-point
   control words switched too), and without NDEBUG (the checks of a default build, as
   `cc -O2` compiles). BENCH_SWITCH_FN names the measuring function of each copy. */
#if defined(BENCH_SWITCH_DEFAULT_BUILD)
#undef NDEBUG /* the default build's checks, whatever the build type */
#endif
#define FIBERSCHED_STATIC
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"

double BENCH_SWITCH_FN(long round_trips);

static fsched_fiber *main_fiber, *co_fiber;
static void body(void *arg) {
    (void)arg;
    for (;;) fsched_fiber_switch(main_fiber);
}

double BENCH_SWITCH_FN(long n) {
    fsched_fiber_desc d;
    double t0, t1;
    long i;
    memset(&d, 0, sizeof d);
    d.stack_size = 64 * 1024;
    main_fiber = fsched_fiber_current();
    if (fsched_fiber_create(&d, body, NULL, &co_fiber) != FSCHED_OK) abort();
    fsched_fiber_switch(co_fiber);
    t0 = bench_now();
    for (i = 0; i < n; i++) fsched_fiber_switch(co_fiber);
    t1 = bench_now();
    fsched_fiber_destroy(co_fiber);
    return (t1 - t0) / (2.0 * (double)n);
}
