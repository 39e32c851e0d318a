// The C++ layer: tasks from any callable (capturing lambdas, move-only callables), join and
// parallel_for without allocation, wait groups, a spawn that cannot allocate; exceptions
// caught where tasks run and rethrown at the join or wait that observes them, or handed to
// the unobserved-exception handler; captured objects destroyed exactly once;
// std::lock_guard / std::unique_lock with fsched::mutex under contention; condition
// variables, timed locks, events and semaphores; a group's destructor that waits for a
// task nothing runs yet. Written in C++11; the exception checks
// are compiled only when the compiler has exceptions on. Also runs without threads.
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

// ---- operator new counted, and made to fail on request (the nothrow form spawn uses);
//      not inlined, so that the compiler does not pair the malloc with a delete. Not
//      under ThreadSanitizer, whose runtime defines operator new itself (with clang), nor
//      under Valgrind, which replaces it at run time: new_counted() tells ----

static std::atomic<long> allocations(0);
static std::atomic<bool> fail_nothrow_new(false);

#if !defined(FSCHED__TSAN)

__attribute__((noinline)) void *operator new(std::size_t n) {
    allocations++;
    void *p = std::malloc(n ? n : 1);
    CHECK(p != nullptr);
    return p;
}
__attribute__((noinline)) void *operator new(std::size_t n, const std::nothrow_t &) noexcept {
    if (fail_nothrow_new.load()) return nullptr;
    allocations++;
    return std::malloc(n ? n : 1);
}
__attribute__((noinline)) void operator delete(void *p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void *p, std::size_t) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void *p, const std::nothrow_t &) noexcept {
    std::free(p);
}
#endif

static bool new_counted() {
    long before = allocations.load();
    ::operator delete(::operator new(1)); // a call, which the compiler may not leave out
    return allocations.load() != before;
}

namespace {

using std::size_t;
typedef std::chrono::steady_clock test_clock;

// ---- objects that count themselves: a capture destroyed twice or never shows here ----

std::atomic<long> live_objects(0);

struct Tracked {
    int value;
    explicit Tracked(int v) : value(v) { live_objects++; }
    Tracked(const Tracked &o) : value(o.value) { live_objects++; }
    ~Tracked() {
        CHECK(value != -1); // destroyed twice
        value = -1;
        live_objects--;
    }
    Tracked &operator=(const Tracked &) = delete;
};

// A move-only callable (what a C++14 lambda capturing a std::unique_ptr is).
struct MoveOnlyTask {
    std::unique_ptr<Tracked> owned;
    std::atomic<int> *sum;
    MoveOnlyTask(int v, std::atomic<int> *s) : owned(new Tracked(v)), sum(s) {}
    MoveOnlyTask(MoveOnlyTask &&) = default;
    void operator()() { *sum += owned->value; }
};

#if FSCHED__CPP_EXCEPTIONS
struct TaskError : std::runtime_error {
    Tracked tracked; // the exception object is counted too: it must not leak
    TaskError(const std::string &what, int v) : std::runtime_error(what), tracked(v) {}
};
#endif

// Runs f as a task of s and waits for it (join and parallel_for need a task).
template <class F> void run_in(fsched_sched *s, F f) {
    fsched::wait_group wg;
    CHECK_OK(wg.spawn(s, f, "test"));
    CHECK_OK(wg.wait());
}

// ---- callables ----

void test_spawn_callables(fsched_sched *s) {
    const int n = 200;
    std::atomic<int> sum(0);
    {
        // capturing lambdas (by reference and by value, with a counted capture)
        fsched::wait_group wg;
        for (int i = 0; i < n; i++) {
            Tracked t(i);
            CHECK_OK(wg.spawn(s, [&sum, t] { sum += t.value; }));
        }
        CHECK_OK(wg.wait());
        CHECK_EQ_U64(sum.load(), n * (n - 1) / 2);
        CHECK_EQ_U64(live_objects.load(), 0); // every copy destroyed before wait returned
    }
    {
        // move-only callables, as temporaries and moved lvalues
        fsched::wait_group wg;
        sum = 0;
        for (int i = 0; i < n; i++) CHECK_OK(wg.spawn(s, MoveOnlyTask(i, &sum)));
        MoveOnlyTask named(1000, &sum);
        CHECK_OK(wg.spawn(s, std::move(named), "named"));
        CHECK(!named.owned); // moved into the task
        CHECK_OK(wg.wait());
        CHECK_EQ_U64(sum.load(), n * (n - 1) / 2 + 1000);
        CHECK_EQ_U64(live_objects.load(), 0);
    }
    {
        // a spawn that fails destroys the callable it was given, once
        Tracked t(7);
        CHECK_RESULT(fsched::spawn(nullptr, [t] { (void)t; }), FSCHED_ERR_INVALID_ARGUMENT);
        fsched::wait_group wg;
        CHECK_RESULT(wg.spawn(nullptr, MoveOnlyTask(1, &sum)), FSCHED_ERR_INVALID_ARGUMENT);
        CHECK_EQ_U64(live_objects.load(), 1);
        // and one that cannot allocate its block returns the code (and throws nothing)
        if (!new_counted()) return;
        fail_nothrow_new = true;
        fsched_result r = fsched::spawn(s, [t] { CHECK(!"ran"); });
        fsched_result rg = wg.spawn(s, MoveOnlyTask(2, &sum));
        fail_nothrow_new = false;
        CHECK_RESULT(r, FSCHED_ERR_OUT_OF_MEMORY);
        CHECK_RESULT(rg, FSCHED_ERR_OUT_OF_MEMORY);
        CHECK_EQ_U64(live_objects.load(), 1);
        CHECK_OK(wg.wait());
    }
}

long fib(long n) {
    if (n < 2) return n;
    long x = 0, y = 0;
    CHECK_OK(fsched::join([&] { x = fib(n - 1); }, [&] { y = fib(n - 2); }));
    return x + y;
}

void test_join(fsched_sched *s) {
    run_in(s, [] {
        long before = allocations.load();
        CHECK(fib(22) == 17711);
        CHECK(allocations.load() == before); // the callables stay where they are
        // move-only callables, as temporaries and as lvalues, and const ones
        std::atomic<int> sum(0);
        MoveOnlyTask a(1, &sum);
        CHECK_OK(fsched::join(a, MoveOnlyTask(2, &sum)));
        const auto c = [&sum] { sum += 4; };
        CHECK_OK(fsched::join(c, c));
        CHECK(sum.load() == 11);
    });
    // outside any task: on the default scheduler (tests/test_default.c)
    std::atomic<int> ran(0); // the two halves may run at once
    CHECK_OK(fsched::join([&] { ran++; }, [&] { ran++; }));
    CHECK(ran.load() == 2);
    CHECK_EQ_U64(live_objects.load(), 0);
}

// ---- parallel_for ----

void test_parallel_for(fsched_sched *s) {
    const size_t n = 100000 / TEST_SCALE;
    std::vector<std::atomic<int>> hits(n + 10);
    for (size_t grain : {size_t(0), size_t(1), size_t(7), size_t(1000)}) {
        for (auto &h : hits) h = 0;
        std::atomic<size_t> calls(0);
        run_in(s, [&] {
            long before = allocations.load();
            // one index per call
            CHECK_OK(fsched::parallel_for(5, n + 5, grain, [&](size_t i) { hits[i]++; }));
            CHECK(allocations.load() == before);
            // a subrange per call
            CHECK_OK(fsched::parallel_for(5, n + 5, grain, [&](size_t lo, size_t hi) {
                CHECK(5 <= lo && lo < hi && hi <= n + 5);
                calls++;
                for (size_t i = lo; i < hi; i++) hits[i]++;
            }));
            CHECK_OK(fsched::parallel_for(3, 3, grain, [&](size_t) { CHECK(!"empty range"); }));
        });
        for (size_t i = 0; i < hits.size(); i++)
            CHECK_EQ_U64(hits[i].load(), i >= 5 && i < n + 5 ? 2 : 0); // each once per loop
        CHECK(calls.load() >= 1);
    }
    // a function, and a callable of both shapes (called with subranges)
    struct Shapes {
        static void index(size_t i) { CHECK(i < 100); }
        std::atomic<size_t> *subranges;
        void operator()(size_t) const { CHECK(!"called with an index"); }
        void operator()(size_t lo, size_t hi) const { *subranges += hi - lo; }
    };
    std::atomic<size_t> covered(0);
    const Shapes both = {&covered};
    run_in(s, [&] {
        CHECK_OK(fsched::parallel_for(0, 100, 1, Shapes::index));
        CHECK_OK(fsched::parallel_for(0, 100, 1, &Shapes::index));
        CHECK_OK(fsched::parallel_for(0, 100, 1, both));
    });
    CHECK(covered.load() == 100);
    std::atomic<int> ran(0); // outside any task: on the default scheduler
    CHECK_OK(fsched::parallel_for(0, 10, 1, [&](size_t) { ran++; }));
    CHECK(ran.load() == 10);
}

// ---- parallel_reduce ----

// An accumulator that counts itself (every copy of the identity destroyed once) and
// keeps the indices it folded, in order.
struct Indices {
    Tracked tracked;
    std::vector<size_t> seen;
    Indices() : tracked(0) {}
    Indices(const Indices &) = default;
    Indices &operator=(Indices &&o) {
        seen = std::move(o.seen);
        return *this;
    }
};

// Aligned beyond the 16 bytes the C call gives an accumulator, and one too large for the
// stack (allocated).
struct alignas(64) Wide {
    long value;
};
struct Large {
    long value;
    long pad[63];
};

void test_parallel_reduce(fsched_sched *s) {
    const size_t n = 50000 / TEST_SCALE;
    for (size_t grain : {size_t(0), size_t(1), size_t(7), size_t(1000)}) {
        run_in(s, [&] {
            long before = allocations.load();
            // an index per call, combine returning the sum; the identity converts to T
            long sum = -1;
            CHECK_OK(fsched::parallel_reduce(0, n, grain, 0,
                                             [](size_t i, long &acc) { acc += (long)i; },
                                             std::plus<long>(), sum));
            CHECK(sum == (long)(n * (n - 1) / 2));
            // a subrange per call, combine in place
            long squares = 0;
            CHECK_OK(fsched::parallel_reduce(
                1, 1001, grain, 0L,
                [](size_t lo, size_t hi, long &acc) {
                    for (size_t i = lo; i < hi; i++) acc += (long)(i * i);
                },
                [](long &acc, const long &other) { acc += other; }, squares));
            CHECK(squares == 333833500L);
            CHECK(allocations.load() == before); // small accumulators live on the stack
            // an empty range: the identity
            long empty = -1;
            CHECK_OK(fsched::parallel_reduce(5, 5, grain, 42L, [](size_t, long &) {
                CHECK(!"empty range");
            }, std::plus<long>(), empty));
            CHECK(empty == 42);
        });
        // accumulators that own memory: combined in range order, moved from, destroyed once
        Indices all;
        run_in(s, [&] {
            CHECK_OK(fsched::parallel_reduce(
                0, n, grain, Indices(),
                [](size_t lo, size_t hi, Indices &acc) {
                    for (size_t i = lo; i < hi; i++) acc.seen.push_back(i);
                },
                [](Indices &acc, Indices &&other) {
                    acc.seen.insert(acc.seen.end(), other.seen.begin(), other.seen.end());
                    other.seen.clear();
                },
                all));
        });
        CHECK(all.seen.size() == n);
        for (size_t i = 0; i < n; i++) CHECK(all.seen[i] == i);
        CHECK_EQ_U64(live_objects.load(), 1); // `all` alone
    }
    run_in(s, [&] {
        Wide wide = {0};
        CHECK_OK(fsched::parallel_reduce(0, 1000, 1, Wide{0},
                                         [](size_t i, Wide &acc) {
                                             CHECK(reinterpret_cast<uintptr_t>(&acc) % 64 == 0);
                                             acc.value += (long)i;
                                         },
                                         [](Wide &acc, Wide &&other) { acc.value += other.value; },
                                         wide));
        CHECK(wide.value == 499500);
        Large large = Large();
        Large zero = Large();
        CHECK_OK(fsched::parallel_reduce(
            0, 1000, 1, zero, [](size_t i, Large &acc) { acc.value += (long)i; },
            [](Large &acc, const Large &other) {
                Large merged = acc;
                merged.value += other.value;
                return merged;
            },
            large));
        CHECK(large.value == 499500);
    });
    // outside any task: on the process's default scheduler, as the C call
    long outside = 7;
    CHECK_OK(fsched::parallel_reduce(0, 10, 1, 0L, [](size_t i, long &acc) { acc += (long)i; },
                                     std::plus<long>(), outside));
    CHECK(outside == 45);
    CHECK_EQ_U64(live_objects.load(), 0);
}

// ---- graphs ----

// A graph's tasks from callables of every shape, edges, runs again, statuses, the
// callables (move-only ones too) destroyed once with the graph, and a moved graph.
void test_graph(fsched_sched *s) {
    std::atomic<int> order(0), first(-1), second(-1), third(-1), with_self(0);
    std::atomic<int> moved_sum(0);
    {
        fsched::graph g;
        CHECK(g.get() == nullptr);
        fsched_graph_task *a = nullptr, *b = nullptr, *c = nullptr, *d = nullptr, *e = nullptr;
        Tracked capture(3);
        // no graph yet: refused, the callable destroyed, out cleared
        fsched_graph_task *none = a;
        CHECK_RESULT(g.add([capture] {}, &none), FSCHED_ERR_INVALID_ARGUMENT);
        CHECK(none == nullptr);
        CHECK_OK(g.create());
        CHECK_RESULT(g.create(), FSCHED_ERR_WRONG_STATE);
        CHECK_OK(g.add([&] { first = order++; }, &a, "first"));
        CHECK_OK(g.add([&, capture]() -> int {
            second = order++;
            return capture.value - 3; // 0: success
        }, &b));
        CHECK_OK(g.add([&](fsched_graph_task *self) {
            CHECK(std::strcmp(fsched_graph_task_name(self), "third") == 0);
            CHECK(fsched_graph_pred_count(self) == 2);
            with_self++;
            third = order++;
        }, &c, "third"));
        fsched_graph_task_desc high = fsched_graph_task_desc();
        high.priority = FSCHED_PRIORITY_HIGH;
        CHECK_OK(g.add(MoveOnlyTask(5, &moved_sum), &d, high));
        struct Plain {
            static int run() { return 0; }
        };
        CHECK_OK(g.add(Plain::run, &e));
        CHECK_OK(g.precede(a, b));
        CHECK_OK(g.precede(a, c));
        CHECK_OK(g.precede(b, c));
        CHECK_RESULT(g.precede(c, a), FSCHED_ERR_INVALID_ARGUMENT); // a cycle
        for (int run = 0; run < 3; run++) {
            order = 0;
            CHECK_OK(g.run(s));
            fsched_graph_outcome o;
            CHECK_OK(g.wait(&o));
            CHECK(o.finished == 5 && o.failed == nullptr);
            CHECK(first.load() == 0 && second.load() == 1 && third.load() == 2);
        }
        CHECK(with_self.load() == 3);
        CHECK(moved_sum.load() == 15);
        CHECK_EQ_U64(live_objects.load(), 3); // `capture`, the graph's copy, MoveOnlyTask's
        // moved: the new owner runs it, the old one owns nothing
        fsched::graph h(std::move(g));
        CHECK(g.get() == nullptr);
        CHECK_RESULT(g.run(s), FSCHED_ERR_INVALID_ARGUMENT);
        fsched::graph k;
        k = std::move(h);
        CHECK_OK(k.run(s));
        CHECK_OK(k.wait());
        CHECK(moved_sum.load() == 20);
    }
    CHECK_EQ_U64(live_objects.load(), 0); // the callables went with the graph

    // a status fails its task: dependents skipped, the outcome names it; statuses of
    // other integral types convert
    {
        fsched::graph g;
        CHECK_OK(g.create());
        fsched_graph_task *bad = nullptr, *after = nullptr, *aside = nullptr;
        std::atomic<int> ran(0);
        CHECK_OK(g.add([&] { ran++; return 7L; }, &bad, "bad"));
        CHECK_OK(g.add([&] { ran += 10; }, &after));
        CHECK_OK(g.add([&]() -> fsched_result { ran += 100; return FSCHED_OK; }, &aside));
        CHECK_OK(g.precede(bad, after));
        CHECK_OK(g.run(s));
        fsched_graph_outcome o;
        CHECK_RESULT(g.wait(&o), FSCHED_ERR_TASK_FAILED);
        CHECK(o.failed == bad && o.status == 7 && o.skipped == 1 && o.finished == 1);
        CHECK(ran.load() == 101);
    }

    // a running task adds to its own graph (a task of that run only); a callable copied
    // from a const lvalue
    {
        fsched::graph g;
        CHECK_OK(g.create());
        std::atomic<int> added_ran(0), adder_ran(0);
        const auto count_added = [&added_ran] { added_ran++; };
        CHECK_OK(g.add([&](fsched_graph_task *self) {
            fsched_graph_task *added = nullptr;
            CHECK(fsched_graph_task_graph(self) == g.get());
            CHECK_OK(g.add(count_added, &added, "added"));
            CHECK(added != nullptr);
            adder_ran++;
        }));
        for (int run = 1; run <= 3; run++) {
            CHECK_OK(g.run(s));
            CHECK_OK(g.wait());
            CHECK(adder_ran.load() == run && added_ran.load() == run);
            CHECK(fsched_graph_task_count(g.get()) == 2);
        }
    }

    // wait_for while a task blocks, then cancel: what has not started does not
    {
        fsched::graph g;
        CHECK_OK(g.create());
        fsched::event release;
        fsched_graph_task *blocked = nullptr, *later = nullptr;
        std::atomic<int> later_ran(0);
        CHECK_OK(g.add([&] { CHECK_OK(release.wait()); }, &blocked));
        CHECK_OK(g.add([&] { later_ran++; }, &later));
        CHECK_OK(g.precede(blocked, later));
        CHECK_OK(g.run(s));
        CHECK_RESULT(g.wait_for(std::chrono::milliseconds(5)), FSCHED_ERR_TIMEOUT);
        CHECK_OK(g.cancel());
        CHECK_OK(release.set());
        fsched_graph_outcome o;
        CHECK_RESULT(g.wait_for(std::chrono::seconds(60), &o), FSCHED_ERR_CANCELLED);
        CHECK(o.cancelled == 1 && later_ran.load() == 0);
    }

    // an add that cannot allocate the callable's block returns the code
    if (new_counted()) {
        fsched::graph g;
        CHECK_OK(g.create());
        Tracked t(1);
        fail_nothrow_new = true;
        fsched_result r = g.add([t] { CHECK(!"ran"); });
        fail_nothrow_new = false;
        CHECK_RESULT(r, FSCHED_ERR_OUT_OF_MEMORY);
        CHECK_EQ_U64(live_objects.load(), 1);
    }
    CHECK_EQ_U64(live_objects.load(), 0);
}

// The destructor of a graph whose run is still in flight: it cancels what has not
// started, waits for the running task (which uses its captures), then frees everything.
void test_graph_destroyed_running(fsched_sched *s) {
    std::atomic<int> finished(0), later_ran(0);
    fsched::event started, release;
    {
        fsched::graph g;
        CHECK_OK(g.create());
        fsched_graph_task *blocked = nullptr, *later = nullptr;
        Tracked capture(9);
        CHECK_OK(g.add([&, capture] {
            started.set();
            CHECK_OK(release.wait());
            fsched::sleep_for(std::chrono::milliseconds(2));
            CHECK(capture.value == 9); // not destroyed under it
            finished++;
        }, &blocked));
        CHECK_OK(g.add([&] { later_ran++; }, &later));
        CHECK_OK(g.precede(blocked, later));
        CHECK_OK(g.run(s));
        CHECK_OK(started.wait()); // else the destructor's cancel would keep it from starting
        // released a little after the destructor begins to wait (a task: without threads
        // this thread is the one that runs it, in the destructor's wait)
        CHECK_OK(fsched::spawn(s, [&release] {
            fsched::sleep_for(std::chrono::milliseconds(20));
            release.set();
        }));
    }
    CHECK(finished.load() == 1);
    CHECK(later_ran.load() == 0);
    CHECK_EQ_U64(live_objects.load(), 0);
}

// ---- binding ----

void test_bind_guard(fsched_sched *s) {
#if !TEST_THREADS
    CHECK_OK(fsched_unbind()); // bound by test_sched_new: this test binds it itself
#endif
    CHECK(fsched_current() == nullptr);
    fsched_desc d;
    test_desc_init(&d);
    d.single_threaded = 1;
    fsched_sched *single = nullptr;
    CHECK_OK(fsched_create(&d, &single));
    {
        fsched::bind_guard bound(single);
        CHECK(bound && bound.result() == FSCHED_OK);
        CHECK(fsched_current() == single);
        // this thread runs the scheduler's tasks while it waits, and joins as a task does
        std::atomic<int> ran(0);
        fsched::wait_group wg;
        CHECK_OK(wg.spawn(single, [&] { ran++; }));
        CHECK_OK(wg.wait());
        long sum = 0;
        CHECK_OK(fsched::parallel_reduce(0, 100, 1, 0L, [](size_t i, long &acc) { acc += (long)i; },
                                         std::plus<long>(), sum));
        CHECK(ran.load() == 1 && sum == 4950);
        // bound already: the second guard fails and unbinds nothing
#if FSCHED__CPP_EXCEPTIONS
        bool caught = false;
        try {
            fsched::bind_guard again(s);
            CHECK(!"bound twice");
        } catch (const std::system_error &e) {
            CHECK(e.code() == fsched::make_error_code(FSCHED_ERR_WRONG_STATE));
            caught = true;
        }
        CHECK(caught);
#else
        {
            fsched::bind_guard again(s);
            CHECK(!again && again.result() == FSCHED_ERR_WRONG_STATE);
        }
#endif
        CHECK(fsched_current() == single);
    }
    CHECK(fsched_current() == nullptr);
#if TEST_THREADS
    // a guard deleted on another thread, itself bound to the same scheduler by a guard of
    // its own, unbinds neither thread (it unbound the deleting one)
    struct handoff {
        fsched_sched *single;
        fsched::bind_guard *mine;
    } h = {single, new fsched::bind_guard(single)};
    test_thread other = thread_run(
        [](void *p) {
            handoff *h = static_cast<handoff *>(p);
            fsched::bind_guard theirs(h->single);
            delete h->mine;
            CHECK(fsched_current() == h->single);
        },
        &h);
    thread_join(other);
    CHECK(fsched_current() == single); // still bound: the guard was not this thread's
    CHECK_OK(fsched_unbind());
#endif
    CHECK_OK(fsched_destroy(single));
#if !TEST_THREADS
    CHECK_OK(fsched_bind(s));
#else
    (void)s;
#endif
}

// ---- exceptions ----

#if FSCHED__CPP_EXCEPTIONS
void test_join_exceptions(fsched_sched *s) {
    run_in(s, [] {
        for (int which = 1; which <= 3; which++) { // a throws, b throws, both throw
            std::atomic<int> ran(0);
            Tracked capture(which);
            try {
                CHECK_OK(fsched::join(
                    [&, capture] {
                        ran++;
                        if (which & 1) throw TaskError("a", 1);
                    },
                    [&, capture] {
                        fsched::yield(); // let it be taken by another worker sometimes
                        ran++;
                        if (which & 2) throw TaskError("b", 2);
                    }));
                CHECK(!"join did not throw");
            } catch (const TaskError &e) {
                CHECK(ran.load() == 2); // both ran to the end
                CHECK(std::strcmp(e.what(), which & 1 ? "a" : "b") == 0); // a's first
            }
        }
        // through nested joins, from a leaf deep in the tree
        struct Tree {
            static void walk(int depth, int leaf, int *visited) {
                if (depth == 0) {
                    __atomic_add_fetch(visited, 1, __ATOMIC_RELAXED);
                    if (leaf == 37) throw std::out_of_range("leaf 37");
                    return;
                }
                CHECK_OK(fsched::join([&] { walk(depth - 1, leaf * 2, visited); },
                                      [&] { walk(depth - 1, leaf * 2 + 1, visited); }));
            }
        };
        int visited = 0;
        try {
            Tree::walk(8, 0, &visited);
            CHECK(!"no exception from the tree");
        } catch (const std::out_of_range &e) {
            CHECK(std::string(e.what()) == "leaf 37");
        }
        CHECK(visited == 256); // a join waits for its other half before it rethrows
    });
    CHECK_EQ_U64(live_objects.load(), 0);
}

void test_wait_group_exceptions(fsched_sched *s) {
    const int n = 100;
    std::atomic<int> ran(0);
    fsched::wait_group wg;
    for (int round = 0; round < 3; round++) {
        ran = 0;
        for (int i = 0; i < n; i++) {
            Tracked capture(i);
            CHECK_OK(wg.spawn(s, [&ran, capture] {
                ran++;
                if (capture.value % 10 == 3)
                    throw TaskError("task " + std::to_string(capture.value), 0);
            }));
        }
        try {
            CHECK_OK(wg.wait());
            CHECK(!"wait did not throw");
        } catch (const TaskError &e) {
            CHECK(std::strncmp(e.what(), "task ", 5) == 0);
            CHECK(std::atoi(e.what() + 5) % 10 == 3);
        }
        CHECK(ran.load() == n);
        CHECK_EQ_U64(live_objects.load(), 0); // the other nine exceptions were dropped
        CHECK_OK(wg.wait());                     // the exception was taken: nothing more
    }
    // wait_for that times out keeps the exception for the wait that finds the group done
    fsched::event release;
    CHECK_OK(wg.spawn(s, [&release] {
        CHECK_OK(release.wait());
        throw std::logic_error("late");
    }));
    CHECK_RESULT(wg.wait_for(std::chrono::milliseconds(5)), FSCHED_ERR_TIMEOUT);
    release.set();
    bool caught = false;
    try {
        (void)wg.wait_for(std::chrono::seconds(60));
    } catch (const std::logic_error &) {
        caught = true;
    }
    CHECK(caught);
}

void test_parallel_for_exceptions(fsched_sched *s) {
    const size_t n = 1 << 16;
    // many workers: the first exception, every index at most once, loosely fewer calls
    for (int round = 0; round < 20; round++) {
        std::vector<std::atomic<int>> hits(n);
        for (auto &h : hits) h = 0;
        std::atomic<size_t> done(0);
        bool caught = false;
        run_in(s, [&] {
            try {
                CHECK_OK(fsched::parallel_for(0, n, 16, [&](size_t i) {
                    if (i == 1000 || i == n - 1000)
                        throw TaskError("index " + std::to_string(i), 0);
                    hits[i]++;
                    done++;
                }));
            } catch (const TaskError &e) {
                CHECK(std::string(e.what()) == "index 1000" ||
                      std::string(e.what()) == "index " + std::to_string(n - 1000));
                caught = true;
            }
        });
        CHECK(caught);
        for (size_t i = 0; i < n; i++) CHECK(hits[i].load() <= 1);
        CHECK(done.load() < n - 2);
    }
    // one worker, nobody to take halves: the caller runs the left half first, and the
    // right one, which it then pops from its own deque, is skipped
#if TEST_THREADS
    fsched_sched *one_worker = test_sched_new(1);
#else
    fsched_sched *one_worker = s; // this thread is bound to s: the only one there is
#endif
    std::atomic<size_t> calls(0), indices(0);
    bool caught = false;
    run_in(one_worker, [&] {
        try {
            CHECK_OK(fsched::parallel_for(0, n, 1, [&](size_t lo, size_t hi) {
                calls++;
                if (lo == 0) throw std::runtime_error("first");
                indices += hi - lo;
            }));
        } catch (const std::runtime_error &) {
            caught = true;
        }
    });
    CHECK(caught);
    CHECK_EQ_U64(calls.load(), 1);
    CHECK_EQ_U64(indices.load(), 0);
    CHECK_EQ_U64(live_objects.load(), 0);
#if TEST_THREADS
    test_sched_free(one_worker);
#endif
}

// An accumulator whose copies throw once `copies_left` runs out.
std::atomic<int> copies_left(1 << 30);
struct Fragile {
    Tracked tracked;
    long value;
    Fragile() : tracked(0), value(0) {}
    Fragile(const Fragile &o) : tracked(o.tracked), value(o.value) {
        if (copies_left-- <= 0) throw std::bad_alloc();
    }
    Fragile &operator=(const Fragile &o) {
        value = o.value;
        return *this;
    }
};

void test_parallel_reduce_exceptions(fsched_sched *s) {
    const size_t n = 1 << 16;
    // from the body, many workers: the first exception, the result left alone, every
    // accumulator destroyed (their count), every index folded at most once
    for (int round = 0; round < 20; round++) {
        std::vector<std::atomic<int>> hits(n);
        for (auto &h : hits) h = 0;
        Indices result;
        result.seen.push_back(12345);
        bool caught = false;
        run_in(s, [&] {
            try {
                CHECK_OK(fsched::parallel_reduce(0, n, 16, Indices(),
                    [&](size_t i, Indices &acc) {
                        if (i == 1000 || i == n - 1000)
                            throw TaskError("index " + std::to_string(i), 0);
                        hits[i]++;
                        acc.seen.push_back(i);
                    },
                    [](Indices &acc, Indices &&other) {
                        acc.seen.insert(acc.seen.end(), other.seen.begin(), other.seen.end());
                    },
                    result));
            } catch (const TaskError &e) {
                CHECK(std::string(e.what()) == "index 1000" ||
                      std::string(e.what()) == "index " + std::to_string(n - 1000));
                caught = true;
            }
        });
        CHECK(caught);
        CHECK(result.seen.size() == 1 && result.seen[0] == 12345);
        for (size_t i = 0; i < n; i++) CHECK(hits[i].load() <= 1);
        CHECK_EQ_U64(live_objects.load(), 1); // `result` alone
    }
    // from combine, and from a copy of the identity
    for (int which = 0; which < 2; which++) {
        long result = -1;
        bool caught = false;
        copies_left = which ? 1 : 1 << 30; // the root's copy, then a split's throws
        run_in(s, [&] {
            try {
                Fragile sum;
                CHECK_OK(fsched::parallel_reduce(0, n, 64, Fragile(),
                    [](size_t i, Fragile &acc) { acc.value += (long)i; },
                    [&](Fragile &acc, Fragile &&other) {
                        if (!which) throw std::logic_error("combine");
                        acc.value += other.value;
                    },
                    sum));
                result = sum.value;
            } catch (const std::logic_error &e) {
                CHECK(which == 0 && std::string(e.what()) == "combine");
                caught = true;
            } catch (const std::bad_alloc &) {
                CHECK(which == 1);
                caught = true;
            }
        });
        copies_left = 1 << 30;
        CHECK(caught && result == -1);
        CHECK_EQ_U64(live_objects.load(), 0);
    }
    // one worker: the caller folds the left half first; the right half, which it then
    // pops from its own deque, copies no identity and folds nothing
#if TEST_THREADS
    fsched_sched *one_worker = test_sched_new(1);
#else
    fsched_sched *one_worker = s;
#endif
    std::atomic<size_t> calls(0), indices(0);
    long untouched = 3;
    bool caught = false;
    run_in(one_worker, [&] {
        try {
            CHECK_OK(fsched::parallel_reduce(0, n, 1, 0L,
                [&](size_t lo, size_t hi, long &) {
                    calls++;
                    if (lo == 0) throw std::runtime_error("first");
                    indices += hi - lo;
                },
                std::plus<long>(), untouched));
        } catch (const std::runtime_error &) {
            caught = true;
        }
    });
    CHECK(caught && untouched == 3);
    CHECK_EQ_U64(calls.load(), 1);
    CHECK_EQ_U64(indices.load(), 0);
#if TEST_THREADS
    test_sched_free(one_worker);
#endif
}

// Waits until task t of a running graph has failed.
void await_failed(fsched_graph_task *t) {
    while (fsched_graph_task_state(t) != FSCHED_TASK_FAILED)
        fsched::sleep_for(std::chrono::microseconds(100));
}

void test_graph_exceptions(fsched_sched *s) {
    // a task that throws fails; its dependents are skipped; wait rethrows once the run
    // has ended, and a second wait only returns
    {
        fsched::graph g;
        CHECK_OK(g.create());
        fsched_graph_task *thrower = nullptr, *after = nullptr, *aside = nullptr;
        std::atomic<int> after_ran(0), aside_done(0);
        CHECK_OK(g.add([] { throw TaskError("from the graph", 1); }, &thrower, "thrower"));
        CHECK_OK(g.add([&] { after_ran++; }, &after));
        CHECK_OK(g.add([&] {
            fsched::sleep_for(std::chrono::milliseconds(5));
            aside_done++;
        }, &aside));
        CHECK_OK(g.precede(thrower, after));
        for (int run = 0; run < 3; run++) {
            CHECK_OK(g.run(s));
            fsched_graph_outcome o;
            bool caught = false;
            try {
                (void)g.wait(&o);
                CHECK(!"wait did not throw");
            } catch (const TaskError &e) {
                CHECK(std::string(e.what()) == "from the graph");
                caught = true;
            }
            CHECK(caught);
            CHECK(aside_done.load() == run + 1); // the run had ended
            CHECK(o.failed == thrower && o.status == (int)FSCHED_ERR_TASK_FAILED);
            CHECK(o.skipped == 1 && after_ran.load() == 0);
            CHECK_RESULT(g.wait(), FSCHED_ERR_TASK_FAILED); // taken: nothing more
        }
    }
    CHECK_EQ_U64(live_objects.load(), 0);
    // several throw: the first failure's exception; the others' are dropped
    {
        fsched::graph g;
        CHECK_OK(g.create());
        fsched_graph_task *one = nullptr, *two = nullptr;
        CHECK_OK(g.add([] { throw TaskError("first", 1); }, &one));
        CHECK_OK(g.add([&] {
            await_failed(one);
            throw TaskError("second", 2);
        }, &two));
        CHECK_OK(g.run(s));
        fsched_graph_outcome o;
        bool caught = false;
        try {
            (void)g.wait(&o);
        } catch (const TaskError &e) {
            CHECK(std::string(e.what()) == "first");
            caught = true;
        }
        CHECK(caught && o.failed == one && o.failed_count == 2);
    }
    CHECK_EQ_U64(live_objects.load(), 0);
    // the first failure is a status: wait returns it and rethrows nothing, neither a later
    // task's exception nor the exception the same task threw in an earlier run
    {
        fsched::graph g;
        CHECK_OK(g.create());
        fsched_graph_task *one = nullptr, *two = nullptr;
        std::atomic<bool> throw_now(true);
        CHECK_OK(g.add([&]() -> int {
            if (throw_now) throw TaskError("earlier run", 1);
            return 5;
        }, &one));
        CHECK_OK(g.run(s));
        CHECK_RESULT(fsched_graph_wait(g.get(), nullptr), FSCHED_ERR_TASK_FAILED); // not taken
        throw_now = false;
        CHECK_OK(g.add([&] {
            await_failed(one);
            throw TaskError("after the status", 2);
        }, &two));
        CHECK_OK(g.run(s));
        fsched_graph_outcome o;
        CHECK_RESULT(g.wait(&o), FSCHED_ERR_TASK_FAILED);
        CHECK(o.failed == one && o.status == 5);
    }
    CHECK_EQ_U64(live_objects.load(), 0);
    // fail-fast: the exception cancels what has not started
    {
        fsched_graph_desc desc = fsched_graph_desc();
        desc.on_failure = FSCHED_GRAPH_FAIL_FAST;
        fsched::graph g;
        CHECK_OK(g.create(&desc));
        fsched_graph_task *thrower = nullptr, *gate = nullptr, *later = nullptr;
        std::atomic<int> later_ran(0);
        CHECK_OK(g.add([] { throw std::out_of_range("fail fast"); }, &thrower));
        CHECK_OK(g.add([&] { await_failed(thrower); }, &gate));
        CHECK_OK(g.add([&] { later_ran++; }, &later));
        CHECK_OK(g.precede(gate, later));
        CHECK_OK(g.run(s));
        bool caught = false;
        fsched_graph_outcome o;
        try {
            (void)g.wait_for(std::chrono::seconds(60), &o);
        } catch (const std::out_of_range &) {
            caught = true;
        }
        CHECK(caught && o.failed == thrower && later_ran.load() == 0);
        CHECK(fsched_graph_task_state(later) == FSCHED_TASK_CANCELLED); // gate may be too
    }
}

// A wait group that goes out of scope while an exception passes waits for its tasks,
// whose captures refer to the scope, also while other tasks of the same worker throw and
// catch exceptions of their own meanwhile.
void test_unwinding_scope(fsched_sched *s) {
    run_in(s, [] {
        std::atomic<int> finished(0);
        try {
            fsched::wait_group wg;
            for (int i = 0; i < 16; i++) {
                CHECK_OK(wg.spawn(fsched_current(), [&finished, i] {
                    fsched::sleep_for(std::chrono::milliseconds(1 + i % 3));
                    try {
                        throw i;
                    } catch (int caught) {
                        CHECK(caught == i);
                    }
                    finished++;
                }));
            }
            throw std::runtime_error("leaving the scope");
        } catch (const std::runtime_error &e) {
            CHECK(std::string(e.what()) == "leaving the scope");
            CHECK(finished.load() == 16);
        }
    });
}

std::atomic<int> unobserved_count(0);
std::string unobserved_what; // written before the count is raised, read after
fsched::event *unobserved_seen = nullptr;

void count_unobserved(std::exception_ptr e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception &x) {
        unobserved_what = x.what();
    }
    unobserved_count++;
    CHECK_OK(fsched::event(false, true).wait()); // a handler may wait: it runs after the catch
    unobserved_seen->set();
}

void test_unobserved(fsched_sched *s) {
    fsched::event seen;
    unobserved_seen = &seen;
    CHECK(fsched::set_unobserved_exception_handler(count_unobserved) == nullptr);
    // a detached task
    Tracked capture(5);
    CHECK_OK(fsched::spawn(s, [capture] { throw TaskError("detached", capture.value); }));
    CHECK_OK(seen.wait());
    CHECK(unobserved_count.load() == 1);
    CHECK(unobserved_what == "detached");
    // a wait group destroyed without a wait that takes its exception
    {
        fsched::wait_group wg;
        CHECK_OK(wg.spawn(s, [] { throw std::range_error("never waited for"); }));
    }
    CHECK_OK(seen.wait());
    CHECK(unobserved_count.load() == 2);
    CHECK(unobserved_what == "never waited for");
    // a graph destroyed after a run nobody waited for, and one destroyed while its run
    // goes on (the destructor waits for it: the handler has run when it returns)
    {
        fsched::graph g;
        CHECK_OK(g.create());
        CHECK_OK(g.add([] { throw std::range_error("graph never waited for"); }));
        CHECK_OK(g.run(s));
        CHECK_RESULT(fsched_graph_wait(g.get(), nullptr), FSCHED_ERR_TASK_FAILED);
    }
    CHECK(unobserved_count.load() == 3);
    CHECK(unobserved_what == "graph never waited for");
    CHECK_OK(seen.wait());
    {
        fsched::event started;
        fsched::graph g;
        CHECK_OK(g.create());
        CHECK_OK(g.add([&started] {
            started.set();
            fsched::sleep_for(std::chrono::milliseconds(10));
            throw std::range_error("graph destroyed running");
        }));
        CHECK_OK(g.run(s));
        CHECK_OK(started.wait());
    }
    CHECK(unobserved_count.load() == 4);
    CHECK(unobserved_what == "graph destroyed running");
    CHECK_OK(seen.wait());
    {
        fsched::graph g; // the exception was taken: nothing to report
        CHECK_OK(g.create());
        CHECK_OK(g.add([] { throw std::range_error("taken"); }));
        CHECK_OK(g.run(s));
        try {
            (void)g.wait();
        } catch (const std::range_error &) {
        }
    }
    CHECK(unobserved_count.load() == 4);
    // a handler that throws: dropped as well
    struct Rethrow {
        static void handler(std::exception_ptr e) {
            unobserved_seen->set();
            std::rethrow_exception(e);
        }
    };
    CHECK(fsched::set_unobserved_exception_handler(Rethrow::handler) == count_unobserved);
    CHECK_OK(fsched::spawn(s, [] { throw 42; }));
    CHECK_OK(seen.wait());
    // the default prints a line (seen in the test's log) and drops the exception
    CHECK(fsched::set_unobserved_exception_handler(nullptr) == Rethrow::handler);
    CHECK_OK(fsched::spawn(s, [] { throw std::runtime_error("expected in the log"); }));
    CHECK_OK(fsched::spawn(s, [] { throw 3.5; }));
    unobserved_seen = nullptr;
}

void test_system_error() {
    fsched::mutex m;
    fsched_mutex *h = m.native_handle();
    CHECK_OK(fsched_mutex_destroy(h)); // misuse, on purpose: logged by debug builds
    bool caught = false;
    try {
        m.lock();
    } catch (const std::system_error &e) {
        CHECK(e.code() == fsched::make_error_code(FSCHED_ERR_INVALID_ARGUMENT));
        CHECK(e.code().category() == fsched::result_category());
        CHECK(e.code().message() == "invalid argument");
        caught = true;
    }
    CHECK(caught);
    CHECK_OK(fsched_mutex_init(h));
}
#endif

// ---- synchronisation ----

void test_mutex_contention(fsched_sched *s) {
    fsched::mutex m;
    long counter = 0, unsafe_check = 0;
    const int tasks = 64, rounds = (int)test_rounds(2000);
    fsched::wait_group wg;
    for (int t = 0; t < tasks; t++) {
        CHECK_OK(wg.spawn(s, [&, t] {
            for (int i = 0; i < rounds; i++) {
                if ((t + i) % 2) {
                    std::lock_guard<fsched::mutex> lock(m);
                    long seen = ++unsafe_check; // alone in here: nobody changes it meanwhile
                    counter++;
                    if (i % 64 == 0) fsched::yield(); // suspend while holding the lock
                    CHECK(unsafe_check == seen);
                } else {
                    std::unique_lock<fsched::mutex> lock(m, std::defer_lock);
                    if (!lock.try_lock()) lock.lock();
                    counter++;
                    lock.unlock();
                    lock.lock();
                    counter++;
                }
            }
        }));
    }
    CHECK_OK(wg.wait());
    CHECK_EQ_U64(counter, (uint64_t)tasks * rounds * 3 / 2);
#if __cplusplus >= 201703L
    // two at once, in either order, without deadlock (std::lock's try_lock and back off)
    fsched::mutex other;
    long both = 0;
    for (int t = 0; t < 16; t++) {
        CHECK_OK(wg.spawn(s, [&, t] {
            for (int i = 0; i < rounds / 4; i++) {
                if (t % 2) {
                    std::scoped_lock lock(m, other);
                    both++;
                } else {
                    std::scoped_lock lock(other, m);
                    both++;
                }
            }
        }));
    }
    CHECK_OK(wg.wait());
    CHECK_EQ_U64(both, 16 * (rounds / 4));
#endif
}

void test_timed_lock(fsched_sched *s) {
    fsched::mutex m;
    fsched::event held, release;
    fsched::wait_group wg;
    CHECK_OK(wg.spawn(s, [&] {
        std::lock_guard<fsched::mutex> lock(m);
        held.set();
        CHECK_OK(release.wait());
    }));
    CHECK_OK(wg.spawn(s, [&] {
        CHECK_OK(held.wait());
        CHECK(!m.try_lock());
        test_clock::time_point t0 = test_clock::now();
        CHECK(!m.try_lock_for(std::chrono::milliseconds(20)));
        CHECK(test_clock::now() - t0 >= std::chrono::milliseconds(19));
        CHECK(!m.try_lock_until(test_clock::now() - std::chrono::seconds(1))); // past: a try
        std::unique_lock<fsched::mutex> lock(m, std::chrono::microseconds(500));
        CHECK(!lock.owns_lock());
        release.set();
        CHECK(m.try_lock_until(test_clock::now() + std::chrono::seconds(60)));
        m.unlock();
        CHECK(m.try_lock_for(std::chrono::hours::max())); // free: at once, no overflow
        m.unlock();
    }));
    CHECK_OK(wg.wait());
}

#if FSCHED__CPP_EXCEPTIONS
// A wait that fails for want of memory (here: no memory for its timer) returns without
// the mutex: the error leaves a lock that owns nothing, so that its destructor does not
// unlock a mutex that another may hold by then.
static std::atomic<int> cv_refuse(0);

void *cv_alloc(size_t size, size_t align, void *) {
    return cv_refuse.load() ? nullptr : fsched__default_alloc(size, align, nullptr);
}

void cv_free(void *p, size_t size, size_t align, void *) { fsched__default_free(p, size, align, nullptr); }

void test_condition_variable_without_memory(fsched_sched *s) {
    fsched_desc d;
    fsched_sched *single;
#if !TEST_THREADS
    CHECK_OK(fsched_unbind()); // from s, to which the thread is bound
#endif
    (void)s;
    test_desc_init(&d);
    d.single_threaded = 1;
    d.allocator.alloc = cv_alloc;
    d.allocator.free = cv_free;
    CHECK_OK(fsched_create(&d, &single));
    CHECK_OK(fsched_bind(single));
    fsched::mutex m;
    fsched::condition_variable cv;
    for (int timed = 0; timed < 2; timed++) {
        std::unique_lock<fsched::mutex> lock(m);
        bool threw = false;
        cv_refuse = 1; // its slot has no timer heap yet: the timed wait cannot set a timer
        try {
            if (timed) (void)cv.wait_for(lock, std::chrono::milliseconds(1));
            else (void)fsched_cond_wait_for(cv.native_handle(), m.native_handle(), 1000000u);
        } catch (const std::system_error &e) {
            threw = e.code() == fsched::make_error_code(FSCHED_ERR_OUT_OF_MEMORY);
        }
        cv_refuse = 0;
        if (timed) {
            CHECK(threw);
            CHECK(!lock.owns_lock());
            CHECK(lock.mutex() == &m); // still its lock, to lock again
        } else {
            lock.release(); // the C call let m go, as the C++ one does
        }
        CHECK(m.try_lock()); // let go
        m.unlock();
    }
    CHECK_OK(fsched_unbind());
    CHECK_OK(fsched_destroy(single));
#if !TEST_THREADS
    CHECK_OK(fsched_bind(s));
#endif
}
#endif

void test_condition_variable(fsched_sched *s) {
    fsched::mutex m;
    fsched::condition_variable not_empty, not_full;
    std::deque<long> queue;
    const size_t capacity = 4;
    const long per_producer = (long)test_rounds(2000);
    const int producers = 3, consumers = 2;
    int producers_left = producers;
    std::atomic<long> sum(0), count(0);
    fsched::wait_group wg;
    for (int p = 0; p < producers; p++) {
        CHECK_OK(wg.spawn(s, [&, p] {
            for (long i = 1; i <= per_producer; i++) {
                std::unique_lock<fsched::mutex> lock(m);
                not_full.wait(lock, [&] { return queue.size() < capacity; });
                queue.push_back(i * producers + p);
                not_empty.notify_one();
            }
            std::lock_guard<fsched::mutex> lock(m);
            if (--producers_left == 0) not_empty.notify_all();
        }));
    }
    for (int c = 0; c < consumers; c++) {
        CHECK_OK(wg.spawn(s, [&] {
            for (;;) {
                std::unique_lock<fsched::mutex> lock(m);
                while (queue.empty() && producers_left > 0) not_empty.wait(lock);
                if (queue.empty()) return;
                long v = queue.front();
                queue.pop_front();
                not_full.notify_one();
                lock.unlock();
                sum += v;
                count++;
            }
        }));
    }
    CHECK_OK(wg.wait());
    long expected = 0;
    for (int p = 0; p < producers; p++)
        for (long i = 1; i <= per_producer; i++) expected += i * producers + p;
    CHECK(count.load() == producers * per_producer);
    CHECK(sum.load() == expected);

    // timeouts, with and without a predicate, and a notification before the deadline
    run_in(s, [&] {
        std::unique_lock<fsched::mutex> lock(m);
        test_clock::time_point t0 = test_clock::now();
        // fsched::cv_status is std::cv_status where the standard library has threads
        CHECK(not_empty.wait_for(lock, std::chrono::milliseconds(10)) ==
              fsched::cv_status::timeout);
        CHECK(!not_empty.wait_for(lock, std::chrono::milliseconds(10), [] { return false; }));
        CHECK(!not_empty.wait_until(lock, test_clock::now() + std::chrono::milliseconds(10),
                                    [] { return false; }));
        CHECK(test_clock::now() - t0 >= std::chrono::milliseconds(29));
        CHECK(lock.owns_lock());
        bool flag = false;
        fsched::wait_group notifier;
        CHECK_OK(notifier.spawn(fsched_current(), [&] {
            fsched::sleep_for(std::chrono::milliseconds(2));
            std::lock_guard<fsched::mutex> g(m);
            flag = true;
            not_empty.notify_all();
        }));
        CHECK(not_empty.wait_for(lock, std::chrono::seconds(60), [&] { return flag; }));
        lock.unlock();
        CHECK_OK(notifier.wait());
    });
}

void test_event_semaphore(fsched_sched *s) {
    fsched::semaphore slots(2);
    std::atomic<int> inside(0), most(0);
    fsched::wait_group wg;
    for (int i = 0; i < 32; i++) {
        CHECK_OK(wg.spawn(s, [&] {
            CHECK_OK(slots.acquire());
            int now = ++inside;
            int seen = most.load();
            while (now > seen && !most.compare_exchange_weak(seen, now)) {
            }
            fsched::sleep_for(std::chrono::microseconds(200));
            inside--;
            slots.release();
        }));
    }
    CHECK_OK(wg.wait());
    CHECK(most.load() >= 1 && most.load() <= 2);
    CHECK_OK(slots.try_acquire());
    CHECK_OK(slots.try_acquire());
    CHECK_RESULT(slots.try_acquire(), FSCHED_ERR_TIMEOUT);
    CHECK_RESULT(slots.acquire_for(std::chrono::milliseconds(1)), FSCHED_ERR_TIMEOUT);
    CHECK_OK(slots.release(2));

    fsched::event manual(true), automatic;
    CHECK(!manual.is_set());
    CHECK_RESULT(automatic.wait_for(std::chrono::milliseconds(1)), FSCHED_ERR_TIMEOUT);
    CHECK_OK(wg.spawn(s, [&] { CHECK_OK(manual.wait()); }));
    CHECK_OK(wg.spawn(s, [&] { CHECK_OK(manual.wait()); }));
    CHECK_OK(manual.set());
    CHECK_OK(wg.wait());
    CHECK(manual.is_set());
    CHECK_OK(automatic.set());
    CHECK_OK(automatic.wait_for(std::chrono::seconds(1)));
    CHECK(!automatic.is_set());
}

// The scheduler's owner, and detached tasks, whose destroy finishes them (run while no
// thread is bound, so that the calling thread may destroy schedulers).
void test_scheduler_owner() {
    fsched::scheduler a;
    CHECK(a.get() == nullptr);
    CHECK_OK(a.destroy()); // owns nothing: nothing to do
    fsched_desc d;
    test_desc_init(&d);
    d.workers = 2;
    CHECK_OK(a.create(&d));
    CHECK_RESULT(a.create(&d), FSCHED_ERR_WRONG_STATE);
    const int n = 200;
    std::atomic<int> sum(0);
    for (int i = 0; i < n; i++) {
        Tracked t(i);
        CHECK_OK(fsched::spawn(a, [&sum, t] { sum += t.value; }));
        CHECK_OK(fsched::spawn(a, MoveOnlyTask(i, &sum), "detached"));
    }
    struct Plain {
        static void run() {}
    };
    CHECK_OK(fsched::spawn(a, Plain::run));
    CHECK_OK(fsched::spawn(a, &Plain::run));
    fsched::scheduler b(std::move(a)); // moved: a owns nothing
    CHECK(a.get() == nullptr && b.get() != nullptr);
    fsched::scheduler c;
    c = std::move(b);
    CHECK_OK(c.destroy()); // finishes the tasks
    CHECK(c.get() == nullptr);
    CHECK_EQ_U64(sum.load(), n * (n - 1));
    CHECK_EQ_U64(live_objects.load(), 0);
    fsched_sched *raw = nullptr;
    CHECK_OK(fsched_create(&d, &raw));
    fsched::scheduler owner(raw);
    CHECK(owner.release() == raw);
    fsched::scheduler again(raw); // destroys it at the end of the scope
}

#if TEST_THREADS
// A group whose task waits in a single-threaded scheduler that no thread is bound to: the
// destructor's wait is refused (nothing would run the task yet), and the destructor waits
// all the same, until a thread that binds runs the task (which uses the group and its
// captures).
struct late_binder {
    fsched_sched *s;
    fsched_event done;
};

void bind_late(void *p) {
    late_binder *b = static_cast<late_binder *>(p);
    fsched_sleep_for(50000000u); // once the destructor waits
    CHECK_OK(fsched_bind(b->s));
    CHECK_OK(fsched_event_wait(&b->done)); // runs the queued task meanwhile
    CHECK_OK(fsched_unbind());
}

void test_wait_group_unattended() {
    late_binder b;
    fsched_desc d;
    test_desc_init(&d);
    d.single_threaded = 1;
    CHECK_OK(fsched_create(&d, &b.s));
    CHECK_OK(fsched_event_init(&b.done, 0, 0));
    std::atomic<int> ran(0);
    test_thread t;
    {
        fsched::wait_group wg;
        CHECK_OK(wg.spawn(b.s, [&ran] { ran++; }));
        t = thread_run(bind_late, &b);
    }
    CHECK(ran.load() == 1);
    CHECK_OK(fsched_event_set(&b.done));
    thread_join(t);
    CHECK_OK(fsched_event_destroy(&b.done));
    CHECK_OK(fsched_destroy(b.s));
}
#endif

} // namespace

int main() {
    test_watchdog(300);
    fsched_sched *s = test_sched_new(4);
    test_spawn_callables(s);
    test_join(s);
    test_parallel_for(s);
    test_parallel_reduce(s);
    test_graph(s);
    test_graph_destroyed_running(s);
    test_bind_guard(s);
#if FSCHED__CPP_EXCEPTIONS
    test_join_exceptions(s);
    test_wait_group_exceptions(s);
    test_parallel_for_exceptions(s);
    test_parallel_reduce_exceptions(s);
    test_graph_exceptions(s);
    test_unwinding_scope(s);
    test_unobserved(s);
    test_system_error();
    test_condition_variable_without_memory(s);
#endif
    test_mutex_contention(s);
    test_timed_lock(s);
    test_condition_variable(s);
    test_event_semaphore(s);
    test_sched_free(s);
    test_scheduler_owner();
#if TEST_THREADS
    test_wait_group_unattended();
#endif
    CHECK_EQ_U64(live_objects.load(), 0);
    std::printf("test_cpp_layer: ok%s\n", FSCHED__CPP_EXCEPTIONS ? "" : " (without exceptions)");
    return 0;
}
