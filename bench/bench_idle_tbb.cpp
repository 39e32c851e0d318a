// The oneTBB peer of bench_idle.c: tasks enqueued into a task_arena from a thread outside
// it (task_arena::enqueue), which TBB's worker threads run.
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <cstdint>
#include <ctime>
#include <memory>

extern "C" void bench_idle_tbb_init(int workers);
extern "C" void bench_idle_tbb_spawn_empty(void);
extern "C" long bench_idle_tbb_executed(void);
extern "C" void bench_idle_tbb_spawn_stamp(uint64_t *slot);

static std::unique_ptr<tbb::global_control> limit;
static std::unique_ptr<tbb::task_arena> arena;
static std::atomic<long> executed{0};

// All `workers` slots go to TBB's worker threads (by default TBB starts one fewer than
// there are CPUs, counting the calling thread): the enqueuing thread does not join.
extern "C" void bench_idle_tbb_init(int workers) {
    limit.reset(new tbb::global_control(tbb::global_control::max_allowed_parallelism,
                                        (size_t)workers + 1));
    arena.reset(new tbb::task_arena(workers, 0));
    arena->initialize();
}

extern "C" void bench_idle_tbb_spawn_empty(void) {
    arena->enqueue([] { executed.fetch_add(1, std::memory_order_relaxed); });
}

extern "C" long bench_idle_tbb_executed(void) { return executed.load(std::memory_order_acquire); }

// The task stores CLOCK_MONOTONIC in nanoseconds into *slot when it starts.
extern "C" void bench_idle_tbb_spawn_stamp(uint64_t *slot) {
    arena->enqueue([slot] {
        timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        __atomic_store_n(slot, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                         __ATOMIC_RELEASE);
    });
}
