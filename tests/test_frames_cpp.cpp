// Spawn and sync from C++: exceptions thrown in FSCHED_TASK children are rethrown at the
// FSCHED_SYNC (or FSCHED_RUN) that observes them, whether the child ran there or on the
// worker that took it; a called child, the root and nested trees throw through it too;
// the type (std::runtime_error and its message, an int) comes through; an exception that
// leaves a task waits first for the children other workers took and drops those nobody
// took; a second exception is dropped; a task that catches one spawns on; thousands of
// throwing trees leave no frame stack behind. At 1 and 2 workers and single-threaded
// with a bound thread. Built also without exceptions (the trees that do not throw) and
// without threads.
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>

namespace {

// ---- schedulers ----

// A scheduler of `workers` workers; 0: single-threaded, the calling thread bound.
fsched_sched *make_sched(uint32_t workers) {
    fsched_sched *s = nullptr;
    fsched_desc d;
    test_desc_init(&d);
    d.workers = workers;
    d.single_threaded = workers == 0;
    CHECK_OK(fsched_create(&d, &s));
    if (!workers) CHECK_OK(fsched_bind(s));
    return s;
}

void end_sched(fsched_sched *s, uint32_t workers) {
    if (!workers) CHECK_OK(fsched_unbind());
    CHECK_OK(fsched_destroy(s));
}

// Runs fn(arg) as a task of s and waits for it.
void run_task(fsched_sched *s, void (*fn)(void *), void *arg) {
    fsched_wait_group wg;
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, fn, arg));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

// ---- trees that do not throw ----

long long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

FSCHED_TASK(long long, fib, int, n) {
    if (n < 2) return n;
    FSCHED_SPAWN(fib, n - 1);
    long long y = FSCHED_CALL(fib, n - 2);
    long long x = FSCHED_SYNC(fib);
    return x + y;
}

struct fib_case {
    int n;
    long long result;
};

void fib_root(void *p) {
    fib_case *f = static_cast<fib_case *>(p);
    CHECK_OK(FSCHED_RUN(fib, f->n, &f->result));
}

void test_fib(uint32_t workers) {
    fsched_sched *s = make_sched(workers);
    fib_case f = {TEST_SCALE > 1 ? 18 : 23, -1};
    run_task(s, fib_root, &f);
    CHECK_EQ_U64(f.result, fib_serial(f.n));
    end_sched(s, workers);
}

#if FSCHED__CPP_EXCEPTIONS

// ---- children that throw ----

// Frame stacks the slots of s made.
uint32_t stacks_made(fsched_sched *s) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_slots; i++)
        n += FSCHED__LOAD(&s->slots[i]->frames_count, FSCHED__RELAXED);
    return n;
}

enum throw_kind { throw_none, throw_error, throw_int };

// What a tree's children share with the test, which outlives the tree.
struct scene {
    fsched_event started;     // manual reset: set by a child that signals its start
    std::atomic<int> starts;  // children that signalled
    int starts_wanted;        // ... until this many
    std::atomic<int> ran;     // children that ran
    std::atomic<int> finished; // children that returned or threw
    scene() : starts(0), starts_wanted(1), ran(0), finished(0) {
        CHECK_OK(fsched_event_init(&started, 1, 0));
    }
    ~scene() { CHECK_OK(fsched_event_destroy(&started)); }
    scene(const scene &) = delete;
    scene &operator=(const scene &) = delete;
    void start() {
        if (++starts == starts_wanted) CHECK_OK(fsched_event_set(&started));
    }
};

// A child's argument: plain data, as a frame holds it.
struct child_arg {
    scene *sc;
    int kind;      // throw_kind
    int value;
    int signal;    // 1: signals its start (the parent waits for it: someone took it)
    int sleep_us;  // then suspends this long before it throws or returns
};

child_arg arg_of(scene *sc, int kind, int value, int signal = 0, int sleep_us = 0) {
    child_arg a;
    a.sc = sc;
    a.kind = kind;
    a.value = value;
    a.signal = signal;
    a.sleep_us = sleep_us;
    return a;
}

void raise(int kind, int value) {
    if (kind == throw_error) throw std::runtime_error("child " + std::to_string(value));
    if (kind == throw_int) throw value;
}

// Counts itself finished however it ends.
struct finish_counter {
    std::atomic<int> &n;
    ~finish_counter() { ++n; }
};

FSCHED_TASK(int, child, child_arg, a) {
    finish_counter fin{a.sc->finished};
    ++a.sc->ran;
    if (a.signal) a.sc->start();
    if (a.sleep_us) fsched_sleep_for(static_cast<uint64_t>(a.sleep_us) * 1000u);
    raise(a.kind, a.value);
    return a.value;
}

// In a parent: blocks until the signalling children started. The parent's fiber blocks,
// so they are offered, and whoever runs them took them (this worker too, on another
// fiber).
FSCHED_VOID_TASK(await_starts, scene *, sc) { CHECK_OK(fsched_event_wait(&sc->started)); }

// What came out of a tree: the exception's kind and value, or the result.
struct outcome {
    int kind = throw_none;
    int value = 0;
    std::string what;
};

template <class F> outcome catching(F f) {
    outcome o;
    try {
        o.value = f();
    } catch (const std::runtime_error &e) {
        o.kind = throw_error;
        o.what = e.what();
    } catch (int v) {
        o.kind = throw_int;
        o.value = v;
    }
    return o;
}

void check_error(const outcome &o, int value) {
    CHECK(o.kind == throw_error);
    CHECK(o.what == "child " + std::to_string(value));
}

void check_int(const outcome &o, int value) {
    CHECK(o.kind == throw_int);
    CHECK(o.value == value);
}

// ---- the trees ----

// A child spawned and synced at once: it runs at the sync (nobody takes it at 1 worker,
// where the parent does not block), or wherever a thief took it.
FSCHED_TASK(int, sync_at_once, child_arg, a) {
    FSCHED_SPAWN(child, a);
    return FSCHED_SYNC(child) + 1;
}

// The child is taken: the parent blocks until it started.
FSCHED_TASK(int, sync_taken, child_arg, a) {
    a.signal = 1;
    FSCHED_SPAWN(child, a);
    FSCHED_CALL(await_starts, a.sc);
    return FSCHED_SYNC(child) + 1;
}

// The child is taken by another worker: the parent spins (2 workers) until it started.
FSCHED_TASK(int, sync_stolen, child_arg, a) {
    a.signal = 1;
    FSCHED_SPAWN(child, a);
    while (!fsched_event_is_set(&a.sc->started)) fsched__cpu_relax();
    return FSCHED_SYNC(child) + 1;
}

FSCHED_TASK(int, call_throws, child_arg, a) {
    int x = FSCHED_CALL(child, a);
    return x + 1;
}

FSCHED_TASK(int, root_throws, child_arg, a) {
    ++a.sc->ran;
    raise(a.kind, a.value);
    return a.value;
}

// Unwinding past children spawned and not synced: the first is taken (and suspends for
// the parent's sleep_us before it ends), the second taken by nobody; then the parent
// throws.
FSCHED_TASK(int, throw_past_children, child_arg, a) {
    child_arg slow = arg_of(a.sc, a.kind, a.value + 1, 1, a.sleep_us);
    FSCHED_SPAWN(child, slow);
    FSCHED_CALL(await_starts, a.sc);
    FSCHED_SPAWN(child, arg_of(a.sc, throw_none, 0)); // at 1 worker nobody takes it
    raise(a.kind, a.value);
    FSCHED_SYNC(child);
    return FSCHED_SYNC(child);
}

// Two taken children throw; the newer is synced first, and its exception propagates
// while the older one, still running, throws too.
FSCHED_TASK(int, two_throw, child_arg, a) {
    a.sc->starts_wanted = 2;
    FSCHED_SPAWN(child, arg_of(a.sc, a.kind, a.value + 1, 1, 20000));
    FSCHED_SPAWN(child, arg_of(a.sc, a.kind, a.value, 1, 0));
    FSCHED_CALL(await_starts, a.sc);
    int newer = FSCHED_SYNC(child); // throws
    return newer + FSCHED_SYNC(child);
}

// A task that catches what a called child threw (after the child's own children were
// dropped and waited for), then spawns and syncs on, reusing the frames.
FSCHED_TASK(int, catch_and_go_on, child_arg, a) {
    FSCHED_SPAWN(child, arg_of(a.sc, throw_none, 100));
    int caught = 0;
    try {
        FSCHED_CALL(throw_past_children, a);
    } catch (...) {
        caught = 1;
    }
    CHECK(caught);
    CHECK(fsched__head->run == nullptr); // no frame of the called child is left
    FSCHED_SPAWN(child, arg_of(a.sc, throw_none, 10));
    FSCHED_SPAWN(child, arg_of(a.sc, throw_none, 20));
    int x = FSCHED_SYNC(child);
    int y = FSCHED_SYNC(child);
    return x + y + FSCHED_SYNC(child);
}

// Nested trees: a taken child runs a tree of its own whose taken child throws.
FSCHED_TASK(int, inner_root, child_arg, a) {
    int r = 0;
    fsched_result e = FSCHED_RUN(sync_taken, a, &r); // throws
    CHECK_OK(e);
    return r;
}

FSCHED_TASK(int, nested, child_arg, a) {
    scene inner; // the inner tree's own
    child_arg b = a;
    b.sc = &inner;
    FSCHED_SPAWN(inner_root, b);
    FSCHED_SPAWN(child, arg_of(a.sc, throw_none, 0, 1, 0));
    FSCHED_CALL(await_starts, a.sc); // the parent blocks: both are offered and taken
    int x = FSCHED_SYNC(child);
    return x + FSCHED_SYNC(inner_root);
}

// Runs a tree from a task and returns what came out of it.
struct tree_case {
    int (*run)(child_arg a, int *result); // FSCHED_RUN of one of the trees
    child_arg a;
    outcome out;
};

#define TREE_RUNNER(tree)                                                                 \
    int run_##tree(child_arg a, int *result) {                                            \
        CHECK_OK(FSCHED_RUN(tree, a, result));                                            \
        return *result;                                                                   \
    }
TREE_RUNNER(sync_at_once)
TREE_RUNNER(sync_taken)
TREE_RUNNER(sync_stolen)
TREE_RUNNER(call_throws)
TREE_RUNNER(root_throws)
TREE_RUNNER(throw_past_children)
TREE_RUNNER(two_throw)
TREE_RUNNER(catch_and_go_on)
TREE_RUNNER(nested)

void tree_task(void *p) {
    tree_case *c = static_cast<tree_case *>(p);
    c->out = catching([c] {
        int result = -1;
        return c->run(c->a, &result);
    });
}

outcome run_tree(fsched_sched *s, int (*run)(child_arg, int *), child_arg a) {
    tree_case c;
    c.run = run;
    c.a = a;
    run_task(s, tree_task, &c);
    return c.out;
}

// ---- tests ----

void test_kinds(fsched_sched *s, uint32_t workers) {
    // not thrown: results come back
    {
        scene sc;
        outcome o = run_tree(s, run_sync_taken, arg_of(&sc, throw_none, 5));
        CHECK(o.kind == throw_none && o.value == 6);
    }
    // spawned and synced at once, both types
    {
        scene sc;
        check_error(run_tree(s, run_sync_at_once, arg_of(&sc, throw_error, 7)), 7);
        check_int(run_tree(s, run_sync_at_once, arg_of(&sc, throw_int, 8)), 8);
        CHECK(sc.ran == 2 && sc.finished == 2);
    }
    // taken (by this worker's loop on another fiber, or another worker), both types
    {
        scene sc;
        check_error(run_tree(s, run_sync_taken, arg_of(&sc, throw_error, 9)), 9);
        CHECK(sc.ran == 1 && sc.finished == 1);
    }
    {
        scene sc;
        check_int(run_tree(s, run_sync_taken, arg_of(&sc, throw_int, 10)), 10);
    }
    // taken by another worker while the parent runs on
    if (workers >= 2) {
        scene sc;
        check_error(run_tree(s, run_sync_stolen, arg_of(&sc, throw_error, 11)), 11);
        scene sc2;
        check_int(run_tree(s, run_sync_stolen, arg_of(&sc2, throw_int, 12)), 12);
    }
    // a called child, the root
    {
        scene sc;
        check_error(run_tree(s, run_call_throws, arg_of(&sc, throw_error, 13)), 13);
        check_int(run_tree(s, run_root_throws, arg_of(&sc, throw_int, 14)), 14);
    }
}

// An exception leaves a task with children not synced: the taken one has finished when
// the exception arrives (it was waited for), the other never ran (with 2 workers, another
// may have taken it too: then it finished as well); its own exception is dropped for the
// parent's.
void test_unwinding(fsched_sched *s, uint32_t workers) {
    const int others = workers >= 2; // children that another worker may have taken, too
    {
        scene sc;
        check_error(run_tree(s, run_throw_past_children, arg_of(&sc, throw_error, 20, 0, 20000)),
                    20);
        CHECK(sc.finished == sc.ran && sc.ran >= 1 && sc.ran <= 1 + others);
    }
    {
        scene sc;
        check_int(run_tree(s, run_two_throw, arg_of(&sc, throw_int, 30)), 30);
        CHECK(sc.ran == 2 && sc.finished == 2);
    }
    {
        scene sc;
        outcome o = run_tree(s, run_catch_and_go_on, arg_of(&sc, throw_error, 40, 0, 20000));
        CHECK(o.kind == throw_none && o.value == 130);
        // the slow one, 100, 10 and 20
        CHECK(sc.finished == sc.ran && sc.ran >= 4 && sc.ran <= 4 + others);
    }
    {
        scene sc;
        check_error(run_tree(s, run_nested, arg_of(&sc, throw_error, 50)), 50);
    }
}

// Thousands of throwing trees in a row, taken children and not: no frame stack is left
// behind (each tree's is given back however it ends), nothing leaks.
struct many_case {
    int n;
    uint32_t stacks_before, stacks_after;
    fsched_sched *s;
};

void many_throws(void *p) {
    many_case *m = static_cast<many_case *>(p);
    m->stacks_before = stacks_made(m->s);
    for (int i = 0; i < m->n; i++) {
        scene sc;
        outcome o = catching([&] {
            int r = 0;
            if (i % 2) CHECK_OK(FSCHED_RUN(sync_taken, arg_of(&sc, throw_error, i), &r));
            else CHECK_OK(FSCHED_RUN(throw_past_children, arg_of(&sc, throw_int, i), &r));
            return r;
        });
        if (i % 2) check_error(o, i);
        else check_int(o, i);
    }
    m->stacks_after = stacks_made(m->s);
}

void test_many(fsched_sched *s) {
    many_case m;
    m.n = 10000 / TEST_SCALE;
    m.s = s;
    run_task(s, many_throws, &m);
    CHECK(m.stacks_after <= m.stacks_before + 4 * s->n_slots);
}

#endif // FSCHED__CPP_EXCEPTIONS

void test_all(uint32_t workers) {
    test_fib(workers);
#if FSCHED__CPP_EXCEPTIONS
    fsched_sched *s = make_sched(workers);
    test_kinds(s, workers);
    test_unwinding(s, workers);
    test_many(s);
    end_sched(s, workers);
#endif
}

} // namespace

int main() {
    test_watchdog(600);
#if TEST_THREADS
    test_all(1);
    test_all(2);
#endif
    test_all(0);
    std::printf("frames-cpp: ok\n");
    return 0;
}
