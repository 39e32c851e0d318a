// Pipelines with oneTBB, the peer of bench_pipeline.c, inside a task_arena of `workers`
// threads (the calling thread takes one of them, as in the other oneTBB peers):
//  (a) linear pipelines: tbb::parallel_pipeline with a serial_in_order input filter,
//      `middle_stages` parallel filters and a serial_in_order output filter, each calling
//      the same stage function as fibersched's stages do, with the same bound on live
//      tokens;
//  (b) the node pipeline: three serial_in_order filters, producer, filter and consumer,
//      calling the same work functions as fibersched's nodes on envelopes of `batch`
//      numbers.
#include <tbb/global_control.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

extern "C" {
void *bench_pipeline_input(void *run); // bench_pipeline.c
void *bench_pipeline_middle(void *run, void *item);
void bench_pipeline_output(void *run, void *item);
void bench_pipeline_tbb_run(void *run, size_t middle_stages, size_t tokens, int workers);
void bench_stream_produce(const void *shape, uint64_t envelope, uint64_t *out);
void bench_stream_filter(const void *shape, const uint64_t *in, uint64_t *out, size_t n);
uint64_t bench_stream_consume(const void *shape, const uint64_t *in, size_t n);
uint64_t bench_stream_tbb_run(const void *shape, uint64_t envelopes, uint64_t *buffers,
                              size_t batch, size_t tokens, int workers, uint64_t *in_order);
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

// One run of the node pipeline: `envelopes` envelopes, at most `tokens` at once. Envelope
// i takes slot i % tokens of `buffers` (tokens slots of numbers, then tokens of
// transformed numbers, `batch` each), which envelope i - tokens has left: the consumer
// takes them in order. Returns the sum; *in_order counts the envelopes the consumer saw
// in order.
extern "C" uint64_t bench_stream_tbb_run(const void *shape, uint64_t envelopes,
                                         uint64_t *buffers, size_t batch, size_t tokens,
                                         int workers, uint64_t *in_order) {
    uint64_t *numbers = buffers, *transformed = buffers + tokens * batch;
    // the producer's state and the consumer's, apart: they run on different threads at once
    alignas(64) uint64_t produced = 0;
    alignas(64) uint64_t next = 0;
    uint64_t sum = 0;
    arena(workers).execute([&] {
        tbb::parallel_pipeline(
            tokens,
            tbb::make_filter<void, uint64_t>(tbb::filter_mode::serial_in_order,
                                             [&](tbb::flow_control &fc) -> uint64_t {
                                                 if (produced == envelopes) {
                                                     fc.stop();
                                                     return 0;
                                                 }
                                                 bench_stream_produce(
                                                     shape, produced,
                                                     numbers + produced % tokens * batch);
                                                 return produced++;
                                             }) &
                tbb::make_filter<uint64_t, uint64_t>(
                    tbb::filter_mode::serial_in_order,
                    [&](uint64_t e) {
                        size_t at = e % tokens * batch;
                        bench_stream_filter(shape, numbers + at, transformed + at, batch);
                        return e;
                    }) &
                tbb::make_filter<uint64_t, void>(
                    tbb::filter_mode::serial_in_order, [&](uint64_t e) {
                        if (e == next) next++;
                        sum += bench_stream_consume(shape, transformed + e % tokens * batch,
                                                    batch);
                    }));
    });
    *in_order = next;
    return sum;
}
