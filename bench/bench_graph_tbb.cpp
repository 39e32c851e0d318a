// Dependency graphs with oneTBB's flow graph, the peer of bench_graph.c: a
// continue_node<continue_msg> per task, make_edge per dependency, try_put to the sources,
// then wait_for_all. Built and run inside a task_arena of `workers` threads (the calling
// thread takes one of them, as in the other oneTBB peers); each node's body is
// bench_graph_task, the same function fibersched's tasks run.
#include <tbb/flow_graph.h>
#include <tbb/global_control.h>
#include <tbb/task_arena.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

extern "C" {
void bench_graph_task(uint32_t index); // bench_graph.c
void *bench_graph_tbb_build(uint32_t tasks, const uint32_t *pred_start, const uint32_t *preds,
                            int workers);
void bench_graph_tbb_run(void *handle, int workers);
void bench_graph_tbb_destroy(void *handle);
}

namespace {

typedef tbb::flow::continue_node<tbb::flow::continue_msg> task_node;

// Members in this order so that the nodes are destroyed before the graph they belong to.
struct tbb_graph {
    tbb::flow::graph graph;
    std::vector<std::unique_ptr<task_node>> nodes;
    std::vector<task_node *> sources; // nodes without predecessors: what a run puts to
};

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

// Tasks 0..tasks-1; the predecessors of task i are preds[pred_start[i] .. pred_start[i+1]).
// The graph is created inside the arena so that its work runs there.
extern "C" void *bench_graph_tbb_build(uint32_t tasks, const uint32_t *pred_start,
                                       const uint32_t *preds, int workers) {
    tbb_graph *g = nullptr;
    arena(workers).execute([&] {
        g = new tbb_graph;
        g->nodes.reserve(tasks);
        for (uint32_t i = 0; i < tasks; i++) {
            g->nodes.emplace_back(new task_node(g->graph, [i](const tbb::flow::continue_msg &) {
                bench_graph_task(i);
                return tbb::flow::continue_msg();
            }));
            if (pred_start[i] == pred_start[i + 1]) g->sources.push_back(g->nodes.back().get());
        }
        for (uint32_t i = 0; i < tasks; i++)
            for (uint32_t k = pred_start[i]; k < pred_start[i + 1]; k++)
                tbb::flow::make_edge(*g->nodes[preds[k]], *g->nodes[i]);
    });
    return g;
}

// One run: a message to every source, then wait until the graph is idle.
extern "C" void bench_graph_tbb_run(void *handle, int workers) {
    tbb_graph *g = static_cast<tbb_graph *>(handle);
    arena(workers).execute([g] {
        for (task_node *source : g->sources) source->try_put(tbb::flow::continue_msg());
        g->graph.wait_for_all();
    });
}

extern "C" void bench_graph_tbb_destroy(void *handle) { delete static_cast<tbb_graph *>(handle); }
