// Boost.Fiber, the peer of bench_yield.c: two fibers on the main thread's round-robin
// scheduler take turns, through this_fiber::yield or two unbuffered channels.
#include <boost/fiber/all.hpp>
#include <time.h>

#include <cstdio>
#include <cstdlib>

extern "C" double bench_yield_boost(long n);
extern "C" double bench_pingpong_boost(long n);

static double now() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// Runs a and b as two fibers of this thread; seconds per step (2n steps).
template <typename A, typename B> static double pair(long n, A a, B b) {
    double t0 = now();
    boost::fibers::fiber fa(a), fb(b);
    fa.join();
    fb.join();
    return (now() - t0) / (2.0 * (double)n);
}

extern "C" double bench_yield_boost(long n) {
    auto loop = [n] {
        for (long i = 0; i < n; i++) boost::this_fiber::yield();
    };
    return pair(n, loop, loop);
}

extern "C" double bench_pingpong_boost(long n) {
    boost::fibers::unbuffered_channel<long> ping, pong;
    return pair(
        n,
        [&] {
            for (long i = 0; i < n; i++) {
                long back = -1;
                ping.push(i);
                pong.pop(back);
            }
        },
        [&] {
            for (long i = 0; i < n; i++) {
                long got = -1;
                ping.pop(got);
                if (got != i) {
                    std::fprintf(stderr, "bench: Boost.Fiber ping-pong out of order\n");
                    std::abort();
                }
                pong.push(i);
            }
        });
}
