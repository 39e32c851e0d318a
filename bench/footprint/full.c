/* Footprint, the full configuration: the minimal one, plus synchronisation, fork-join, a
   parallel loop, a dependency graph and a pipeline of nodes. Prints the heap the
   scheduler allocated at creation. */
#include "counting.h"
#define FIBERSCHED_IMPLEMENTATION
#include "fibersched.h"

#include <stdio.h>
#include <stdlib.h>

#include "board.h"

static void task(void *arg) { (*(int *)arg)++; }
static void body(void *arg, size_t lo, size_t hi) { *(size_t *)arg += hi - lo; }
static int graph_task(fsched_graph_task *self, void *arg) {
    (void)self;
    (*(int *)arg)++;
    return 0;
}
static void advance(fsched_node *n, void *user) {
    (void)user;
    fsched_node_complete(n, 0);
}

int main(void) {
    fsched_desc d;
    fsched_sched *s;
    fsched_wait_group wg;
    fsched_mutex m;
    fsched_event e;
    fsched_sema sem;
    fsched_graph *g;
    fsched_graph_task *a, *b;
    fsched_pipeline *pl;
    fsched_node *node;
    fsched_node_desc nd;
    size_t before, after, sum = 0;
    int runs = 0, i;
    void *p = malloc(64); /* as in the reference */
    free(p);
    memset(&d, 0, sizeof d);
    d.clock = board_clock_ns;
    before = footprint_asked;
    if (fsched_create(&d, &s) != FSCHED_OK) return 1;
    after = footprint_asked;
    if (fsched_bind(s) != FSCHED_OK) return 1;
    fsched_wait_group_init(&wg);
    for (i = 0; i < 4; i++) fsched_wait_group_spawn(&wg, s, task, &runs);
    fsched_wait_group_wait(&wg);
    fsched_wait_group_destroy(&wg);
    fsched_mutex_init(&m);
    fsched_mutex_lock(&m);
    fsched_mutex_unlock(&m);
    fsched_mutex_destroy(&m);
    fsched_event_init(&e, 1, 1);
    fsched_event_wait_for(&e, 1000);
    fsched_event_destroy(&e);
    fsched_sema_init(&sem, 1);
    fsched_sema_acquire(&sem);
    fsched_sema_release(&sem, 1);
    fsched_sema_destroy(&sem);
    fsched_join(task, &runs, task, &runs);
    fsched_parallel_for(0, 1000, 0, body, &sum);
    fsched_graph_create(NULL, &g);
    fsched_graph_add(g, graph_task, &runs, NULL, &a);
    fsched_graph_add(g, graph_task, &runs, NULL, &b);
    fsched_graph_precede(g, a, b);
    fsched_graph_run(g, s);
    fsched_graph_wait(g, NULL);
    fsched_graph_destroy(g);
    memset(&nd, 0, sizeof nd);
    nd.advance = advance;
    fsched_pipeline_create(NULL, &pl);
    fsched_node_create(&nd, &node);
    fsched_pipeline_add(pl, node);
    fsched_pipeline_run(pl, s);
    fsched_pipeline_destroy(pl);
    fsched_unbind();
    fsched_destroy(s);
    printf("heap %lu\n", (unsigned long)(after - before));
    return runs == 8 && sum == 1000 ? 0 : 1;
}
