// The C++ layer and spawn/sync trees from main, with no scheduler made: fsched::join,
// fsched::parallel_for (both shapes of body) and FSCHED_RUN run on the default scheduler,
// and (with exceptions) what a body, a side or a tree's root throws is rethrown in main,
// whose thread never ran it. Built also without exceptions and without threads.
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

FSCHED_TASK(long, fib, int, n) {
    if (n < 2) return n;
    FSCHED_SPAWN(fib, n - 1);
    long y = FSCHED_CALL(fib, n - 2);
    long x = FSCHED_SYNC(fib);
    return x + y;
}

#if FSCHED__CPP_EXCEPTIONS
// Throws from the root once its children have been synced.
FSCHED_TASK(long, fib_then_throw, int, n) {
    FSCHED_SPAWN(fib, n - 1);
    long y = FSCHED_CALL(fib, n - 2);
    long x = FSCHED_SYNC(fib);
    throw std::runtime_error("root: " + std::to_string(x + y));
}
#endif

void test_calls() {
    const std::size_t n = 10000;
    std::vector<std::atomic<int>> hits(n);
    for (auto &h : hits) h = 0;
    fsched_sched *seen = nullptr;
    std::atomic<int> elsewhere(0);
    CHECK_OK(fsched::parallel_for(0, n, 16, [&](std::size_t i) {
        hits[i]++;
        if (!fsched_current()) elsewhere++;
    }));
    CHECK_OK(fsched::parallel_for(0, n, 16, [&](std::size_t lo, std::size_t hi) {
        for (; lo < hi; lo++) hits[lo]++;
    }));
    for (auto &h : hits) CHECK(h.load() == 2);
    CHECK(elsewhere.load() == 0);
    int a = 0, b = 0;
    CHECK_OK(fsched::join([&] { a = 1; seen = fsched_current(); }, [&] { b = 2; }));
    CHECK(a == 1 && b == 2);
    fsched_sched *dflt = nullptr;
    CHECK_OK(fsched_default_get(&dflt));
    CHECK(seen == dflt && dflt != nullptr);
    long r = 0;
    CHECK_OK(FSCHED_RUN(fib, 22, &r));
    CHECK(r == 17711);
    CHECK(fsched_current() == nullptr); // main took no slot, or gave it back
}

#if FSCHED__CPP_EXCEPTIONS
void test_exceptions() {
    bool caught = false;
    try {
        (void)fsched::parallel_for(0, 1000, 1, [](std::size_t i) {
            if (i == 500) throw std::runtime_error("body 500");
        });
    } catch (const std::runtime_error &e) {
        caught = std::string(e.what()) == "body 500";
    }
    CHECK(caught);
    caught = false;
    try {
        (void)fsched::join([] {}, [] { throw 7; });
    } catch (int e) {
        caught = e == 7;
    }
    CHECK(caught);
    caught = false;
    try {
        long r = 0;
        (void)FSCHED_RUN(fib_then_throw, 15, &r);
    } catch (const std::runtime_error &e) {
        caught = std::string(e.what()) == "root: 610";
    }
    CHECK(caught);
    long r = 0;
    CHECK_OK(FSCHED_RUN(fib, 15, &r)); // the default is still in working order
    CHECK(r == 610);
}
#endif

} // namespace

int main() {
    test_watchdog(120);
    test_calls();
#if FSCHED__CPP_EXCEPTIONS
    test_exceptions();
#endif
    std::printf("default-cpp: ok\n");
    return 0; // the default is released at exit
}
