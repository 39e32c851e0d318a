// The header compiled as C++: the API from C++ code, exceptions thrown and caught inside a
// fiber (DWARF unwinding on ELF, SEH on Windows, which checks the TIB's stack bounds that
// the switch maintains), destructors run during unwinding, a frame large enough to need
// stack probes, and spawn/sync tasks defined in C++ (a struct argument and result).
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <stdexcept>
#include <string>

namespace {

struct Counter {
    int *count;
    explicit Counter(int *c) : count(c) { ++*count; }
    ~Counter() { --*count; }
    Counter(const Counter &) = delete;
    Counter &operator=(const Counter &) = delete;
};

struct Shared {
    fsched_fiber *main_fiber = nullptr;
    int live = 0;
    int caught = 0;
    int rounds = 0;
    unsigned long long checksum = 0;
};

__attribute__((noinline)) void thrower(Shared *s, int depth) {
    Counter c(&s->live);
    if (depth == 0) throw std::runtime_error("from depth " + std::to_string(s->rounds));
    thrower(s, depth - 1);
}

__attribute__((noinline)) unsigned long long big_frame(int seed) {
    volatile unsigned char buffer[96 * 1024]; // needs probes on Windows (__chkstk)
    unsigned long long sum = 0;
    for (unsigned i = 0; i < sizeof buffer; i += 4096) buffer[i] = (unsigned char)(seed + i);
    for (unsigned i = 0; i < sizeof buffer; i += 4096) sum += buffer[i];
    return sum;
}

void body(void *arg) {
    Shared *s = static_cast<Shared *>(arg);
    for (int i = 0; i < 100; i++) {
        s->rounds = i;
        try {
            thrower(s, 10);
        } catch (const std::runtime_error &e) {
            CHECK(std::string(e.what()) == "from depth " + std::to_string(i));
            CHECK(s->live == 0); // every Counter was destroyed by the unwinder
            s->caught++;
        }
        s->checksum += big_frame(i);
        CHECK_OK(fsched_fiber_switch(s->main_fiber)); // suspend between rounds
    }
}

struct Span {
    long lo, hi;
};

struct Sum {
    long long total;
    long count;
};

FSCHED_TASK(Sum, sum_span, Span, span) {
    if (span.hi - span.lo <= 8) {
        Sum r = {0, 0};
        for (long i = span.lo; i < span.hi; i++) {
            r.total += i;
            r.count++;
        }
        return r;
    }
    long mid = span.lo + (span.hi - span.lo) / 2;
    FSCHED_SPAWN(sum_span, (Span{mid, span.hi}));
    Sum left = FSCHED_CALL(sum_span, (Span{span.lo, mid}));
    Sum right = FSCHED_SYNC(sum_span);
    return Sum{left.total + right.total, left.count + right.count};
}

struct SpanRun {
    Sum result;
    fsched_result status;
};

void run_span(void *arg) {
    SpanRun *r = static_cast<SpanRun *>(arg);
    r->status = FSCHED_RUN(sum_span, (Span{0, 100000}), &r->result);
}

void test_spawn_sync() {
    fsched_desc d = {};
    d.workers = 2;
    fsched_sched *s = nullptr;
    CHECK_OK(fsched_create(&d, &s));
#if defined(FIBERSCHED_NO_THREADS)
    CHECK_OK(fsched_bind(s));
#endif
    SpanRun r = {};
    fsched_wait_group wg;
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, run_span, &r));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(r.status);
    CHECK(r.result.count == 100000);
    CHECK(r.result.total == 100000LL * 99999 / 2);
#if defined(FIBERSCHED_NO_THREADS)
    CHECK_OK(fsched_unbind());
#endif
    CHECK_OK(fsched_destroy(s));
}

} // namespace

int main() {
    test_watchdog(300);
    Shared s;
    s.main_fiber = fsched_fiber_current();
    fsched_fiber_desc d = {};
    d.stack_size = 512 * 1024;
    d.name = "cpp";
    fsched_fiber *f = nullptr;
    CHECK_OK(fsched_fiber_create(&d, body, &s, &f));
    int switches = 0;
    while (fsched_fiber_get_state(f) == FSCHED_FIBER_SUSPENDED) {
        try {
            CHECK_OK(fsched_fiber_switch(f)); // the main context is inside a try block too
            switches++;
        } catch (...) {
            CHECK(!"an exception escaped the fiber");
        }
    }
    CHECK(switches == 101);
    CHECK(s.caught == 100);
    CHECK(s.checksum > 0);
    CHECK_OK(fsched_fiber_destroy(f));
    test_spawn_sync();
    std::printf("test_cpp: ok\n");
    return 0;
}
