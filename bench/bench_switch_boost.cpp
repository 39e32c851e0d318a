// Boost.Context's fiber, ping-ponged like the other candidates in bench_switch.c.
#include <boost/context/fiber.hpp>
#include <time.h>

namespace ctx = boost::context;

extern "C" double bench_boost_fiber_switch(long round_trips);

static double now() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

extern "C" double bench_boost_fiber_switch(long n) {
    ctx::fiber f{std::allocator_arg, ctx::fixedsize_stack(64 * 1024),
                 [](ctx::fiber &&back) {
                     for (;;) back = std::move(back).resume();
                     return std::move(back);
                 }};
    f = std::move(f).resume(); // first entry
    double t0 = now();
    for (long i = 0; i < n; i++) f = std::move(f).resume();
    double t1 = now();
    return (t1 - t0) / (2.0 * (double)n);
}
