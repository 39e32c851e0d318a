/* Footprint, the minimal configuration: a scheduler, tasks spawned into a wait group and
   waited for, an event. Prints the heap the scheduler asked for at creation. */
#include "counting.h"
#define FIBERSCHED_IMPLEMENTATION
#include "fibersched.h"

#include <stdio.h>
#include <stdlib.h>

#include "board.h"

static void task(void *arg) { (*(int *)arg)++; }

int main(void) {
    fsched_desc d;
    fsched_sched *s;
    fsched_wait_group wg;
    size_t before, after;
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
    fsched_unbind();
    fsched_destroy(s);
    printf("heap %lu\n", (unsigned long)(after - before));
    return runs == 4 ? 0 : 1;
}
