/* Hello, scheduler: create a work-stealing scheduler, spawn a few tasks that say which
   worker thread runs them, wait for all of them with a wait group, and shut down.

   Build: cc -O2 -pthread examples/hello.c -o hello */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <stdio.h>

#define TASKS 8

/* What each task gets: its number, and a place to leave the index of its worker. */
typedef struct greeting {
    int number;
    int worker;
} greeting;

/* A task is a plain function with one pointer argument. It runs on a fiber of one of the
   scheduler's worker threads. */
static void greet(void *arg) {
    greeting *g = (greeting *)arg;
    /* A task that sleeps (or waits for anything) suspends its fiber, not its worker
       thread: the worker runs other tasks meanwhile, and idle workers steal some. */
    fsched_sleep_for(2000000); /* nanoseconds: 2 ms */
    g->worker = fsched_worker_index(); /* 0 .. workers-1 inside a worker */
    printf("hello from task %d on worker %d\n", g->number, g->worker);
}

int main(void) {
    fsched_desc desc = {0}; /* all-zero fields mean defaults */
    fsched_sched *sched;
    fsched_wait_group done;
    greeting greetings[TASKS];
    fsched_result r;
    int i, failures = 0;

    desc.workers = 4; /* 0 would mean one worker per CPU */
    r = fsched_create(&desc, &sched);
    if (r != FSCHED_OK) {
        fprintf(stderr, "fsched_create: %s\n", fsched_result_string(r));
        return 1;
    }

    /* A wait group counts outstanding work: fsched_wait_group_spawn adds one for each
       task and the task's end takes it away again. */
    fsched_wait_group_init(&done);
    for (i = 0; i < TASKS; i++) {
        greetings[i].number = i;
        greetings[i].worker = -1;
        r = fsched_wait_group_spawn(&done, sched, greet, &greetings[i]);
        if (r != FSCHED_OK) {
            fprintf(stderr, "spawn: %s\n", fsched_result_string(r));
            return 1;
        }
    }

    /* This thread is not part of the scheduler, so waiting blocks it like any thread;
       inside a task the same call would only suspend the task's fiber. */
    fsched_wait_group_wait(&done);
    fsched_wait_group_destroy(&done);

    /* Everything the tasks wrote is visible once the wait has returned. */
    for (i = 0; i < TASKS; i++)
        if (greetings[i].worker < 0 || greetings[i].worker >= (int)fsched_worker_count(sched))
            failures++;
    printf("%d tasks ran on %u workers%s\n", TASKS, (unsigned)fsched_worker_count(sched),
           failures ? ", but some did not report a worker" : "");

    /* Destroying the scheduler finishes any remaining tasks and stops the workers. */
    fsched_destroy(sched);
    return failures ? 1 : 0;
}
