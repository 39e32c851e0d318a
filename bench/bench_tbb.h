// What the oneTBB peers share: the arena of `workers` threads (the calling thread and
// workers - 1 of TBB's), made on first use and kept, so that no run pays for starting
// threads.
#ifndef FIBERSCHED_BENCH_TBB_H
#define FIBERSCHED_BENCH_TBB_H

#include <tbb/task_arena.h>

#include <map>
#include <memory>

static inline tbb::task_arena &bench_tbb_arena(int workers) {
    static std::map<int, std::unique_ptr<tbb::task_arena>> arenas;
    std::unique_ptr<tbb::task_arena> &a = arenas[workers];
    if (!a) {
        a.reset(new tbb::task_arena(workers));
        a->initialize();
    }
    return *a;
}

#endif
