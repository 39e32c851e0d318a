// Callables of the wrong shape, one per case (-DWRONG=n), each of which must fail to
// compile with the static_assert message on its line (check_compile_errors.py reads
// them from here); case 0 has the right shapes and must compile.
#include "../fibersched.h"

#include <functional>

#ifndef WRONG
#define WRONG 0
#endif

void use(fsched_sched *s) {
    long sum = 0;
    fsched::wait_group wg;
    fsched::graph g;
    (void)s;
    (void)sum;
#if WRONG == 0
    (void)fsched::spawn(s, [] {});
    (void)wg.spawn(s, [] {});
    (void)fsched::join([] {}, [] {});
    (void)fsched::parallel_for(0, 10, 1, [](std::size_t) {});
    (void)fsched::parallel_reduce(0, 10, 1, 0, [](std::size_t, long &) {}, std::plus<long>(), sum);
    (void)g.add([](fsched_graph_task *) { return 0; });
#elif WRONG == 1 // error: fsched::spawn: the task is called with no arguments, as f()
    (void)fsched::spawn(s, [](int) {});
#elif WRONG == 2 // error: fsched::wait_group::spawn: the task is called with no arguments, as f()
    (void)wg.spawn(s, [](fsched_sched *) {});
#elif WRONG == 3 // error: fsched::join: both callables are called with no arguments, as a() and b()
    (void)fsched::join([] {}, [](int) {});
#elif WRONG == 4 // error: fsched::parallel_for: the body takes (size_t i) or (size_t lo, size_t hi)
    (void)fsched::parallel_for(0, 10, 1, [](int *) {});
#elif WRONG == 5 // error: fsched::parallel_reduce: the body takes (size_t i, T &acc) or (size_t lo, size_t hi, T &acc)
    (void)fsched::parallel_reduce(0, 10, 1, 0, [](long &) {}, std::plus<long>(), sum);
#elif WRONG == 6 // error: fsched::parallel_reduce: combine takes (T &acc, T &&other) and merges other into acc, or returns the merged T
    (void)fsched::parallel_reduce(0, 10, 1, 0, [](std::size_t, long &) {}, [](long *) {}, sum);
#elif WRONG == 7 // error: fsched::graph::add: the task is called as f(fsched_graph_task *self) or f(), and returns void or an int status
    (void)g.add([](int) {});
#elif WRONG == 8 // error: fsched::graph::add: the task is called as f(fsched_graph_task *self) or f(), and returns void or an int status
    (void)g.add([] { return true; });
#elif WRONG == 9 // error: fsched::parallel_reduce: T is copied (each piece begins from a copy of identity) and moved into result
    struct move_only {
        move_only() {}
        move_only(move_only &&) {}
        move_only &operator=(move_only &&) { return *this; }
    } m;
    (void)fsched::parallel_reduce(0, 10, 1, move_only(), [](std::size_t, move_only &) {},
                                  [](move_only &, move_only &&) {}, m);
#endif
}
