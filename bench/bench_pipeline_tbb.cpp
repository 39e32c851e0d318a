// Linear pipelines with oneTBB, the peer of bench_pipeline.c: tbb::parallel_pipeline with a
// serial_in_order input filter, `middle_stages` parallel filters and a serial_in_order
// output filter, each calling the same stage function as fibersched's stages do, with
// the same bound on live tokens. Runs inside a task_arena of `workers` threads (the
// calling thread takes one of them, as in the other oneTBB peers).
#include <tbb/global_control.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <cstddef>
#include <map>
#include <memory>

extern "C" {
void *bench_pipeline_input(void *run); // bench_pipeline.c
void *bench_pipeline_middle(void *run, void *item);
void bench_pipeline_output(void *run, void *item);
void bench_pipeline_tbb_run(void *run, size_t middle_stages, size_t tokens, int workers);
}

namespace {

tbb::task_arena &arena(int workers) {
    // The whole process's parallelism, so that `workers` threads take part also when
    // that is more than TBB's default (one per CPU).
    static std::unique_ptr<tbb::global_control> limit;
    static std::map<int, std::unique_ptr<tbb::task_arena>> arenas;
    std::unique_ptr<tbb::task_arena> &a = arenas[workers];
    if (!a) {
        limit.reset(new tbb::global_control(tbb::global_control::max_allowed_parallelism,
                                            (size_t)workers));
        a.reset(new tbb::task_arena(workers));
        a->initialize();
    }
    return *a;
}

} // namespace

// One run: items until bench_pipeline_input returns NULL, at most `tokens` at once.
extern "C" void bench_pipeline_tbb_run(void *run, size_t middle_stages, size_t tokens,
                                       int workers) {
    arena(workers).execute([=] {
        tbb::filter<void, void *> chain = tbb::make_filter<void, void *>(
            tbb::filter_mode::serial_in_order, [run](tbb::flow_control &fc) -> void * {
                void *item = bench_pipeline_input(run);
                if (!item) fc.stop();
                return item;
            });
        for (size_t k = 0; k < middle_stages; k++)
            chain = chain & tbb::make_filter<void *, void *>(
                                tbb::filter_mode::parallel,
                                [run](void *item) { return bench_pipeline_middle(run, item); });
        tbb::parallel_pipeline(tokens, chain & tbb::make_filter<void *, void>(
                                                   tbb::filter_mode::serial_in_order,
                                                   [run](void *item) {
                                                       bench_pipeline_output(run, item);
                                                   }));
    });
}
