/* The old names of renamed functions (see NAMES in fibersched.h) still compile, and each
   forwards to its new name: asked in the states where the answer differs, the old name
   answers as the new one. Their deprecation warnings are what this file expects. */
#define FIBERSCHED_IMPLEMENTATION
#include "fibersched.h"

#include "check.h"

#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif

#define ITEMS 3

typedef struct producer {
    int made;
    int served_seen; /* times fsched_node_served said yes */
} producer;

static int producer_can(fsched_node *node, void *user) {
    producer *pr = (producer *)user;
    int served = fsched_node_served(node);
    CHECK(served == fsched_node_is_served(node));
    if (pr->made == ITEMS) return FSCHED_NODE_FINISHED;
    if (served) pr->served_seen++;
    return served;
}

static void producer_advance(fsched_node *node, void *user) {
    ((producer *)user)->made++;
    CHECK_OK(fsched_node_complete(node, 1));
}

static void consumer_advance(fsched_node *node, void *user) {
    (void)user;
    CHECK_OK(fsched_node_complete(node, 1));
}

static void test_pipeline_aliases(void) {
    fsched_hub_desc hd = {0};
    fsched_node_desc pd = {0}, cd = {0};
    fsched_pipeline *p;
    fsched_hub *h;
    fsched_node *prod, *cons;
    fsched_node_report rep, rep_new;
    producer pr = {0};
    hd.envelopes = 1;
    CHECK_OK(fsched_hub_create(&hd, &h));
    pd.label = "producer";
    pd.user = &pr;
    pd.can_advance = producer_can;
    pd.advance = producer_advance;
    cd.label = "consumer";
    cd.advance = consumer_advance;
    CHECK_OK(fsched_node_create(&pd, &prod));
    CHECK_OK(fsched_node_create(&cd, &cons));
    CHECK_OK(fsched_node_link(prod, h, FSCHED_LINK_PRODUCE, NULL));
    CHECK_OK(fsched_node_link(cons, h, FSCHED_LINK_CONSUME, NULL));
    CHECK_OK(fsched_pipeline_create(NULL, &p));
    CHECK_OK(fsched_pipeline_add(p, prod));
    CHECK_OK(fsched_pipeline_add(p, cons));

    CHECK(!fsched_pipeline_finished(p) && !fsched_pipeline_is_finished(p));
    CHECK(!fsched_node_served(prod) && !fsched_node_is_served(prod)); /* no envelope yet */
    CHECK_OK(fsched_pipeline_run(p, NULL));
    CHECK(fsched_pipeline_finished(p) && fsched_pipeline_is_finished(p));
    /* asked, the producer held the envelope each time */
    CHECK(pr.made == ITEMS && pr.served_seen == ITEMS);

    CHECK_OK(fsched_node_report_get(cons, &rep));
    CHECK_OK(fsched_node_get_report(cons, &rep_new));
    CHECK(rep.end == FSCHED_NODE_DONE && rep.advances == ITEMS);
    CHECK(rep.end == rep_new.end && rep.advances == rep_new.advances &&
          rep.updates == rep_new.updates && rep.label == rep_new.label);
    CHECK_RESULT(fsched_node_report_get(NULL, &rep), FSCHED_ERR_INVALID_ARGUMENT);

    CHECK_OK(fsched_pipeline_destroy(p));
    CHECK_OK(fsched_hub_destroy(h));
}

typedef struct cancelling {
    int before, after; /* fsched_graph_cancelled before and after the task cancels its run */
} cancelling;

static int cancel_own_run(fsched_graph_task *self, void *arg) {
    cancelling *c = (cancelling *)arg;
    c->before = fsched_graph_cancelled(self);
    CHECK(c->before == fsched_graph_is_cancelled(self));
    CHECK_OK(fsched_graph_cancel(fsched_graph_task_graph(self)));
    c->after = fsched_graph_cancelled(self);
    CHECK(c->after == fsched_graph_is_cancelled(self));
    return 0;
}

static void test_graph_alias(void) {
    fsched_sched *s;
    fsched_graph *g;
    fsched_graph_task *t;
    cancelling c = {-1, -1};
    CHECK_OK(fsched_create(NULL, &s));
    CHECK_OK(fsched_graph_create(NULL, &g));
    CHECK_OK(fsched_graph_add(g, cancel_own_run, &c, NULL, &t));
    CHECK_OK(fsched_graph_run(g, s));
    (void)fsched_graph_wait(g, NULL); /* however the run ended: the task ran */
    CHECK(c.before == 0 && c.after != 0);
    CHECK_OK(fsched_graph_destroy(g));
    CHECK_OK(fsched_destroy(s));
}

int main(void) {
    test_watchdog(120);
    test_pipeline_aliases();
    test_graph_alias();
    printf("deprecated names: ok\n");
    return 0;
}
