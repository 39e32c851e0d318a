/* A bounded buffer shared by producer and consumer tasks, guarded by an fsched_mutex and
   two fsched_cond condition variables. When the buffer is full a producer waits, when it
   is empty a consumer waits: in a task, such a wait suspends the task's fiber and the
   worker thread goes on with other tasks, so there can be more waiting tasks than threads.
   Every item is checked to be consumed exactly once, and the consumers' work on the items
   (a checksum) against the same work done serially.

   Build: cc -O2 -pthread examples/producer_consumer.c -o producer_consumer */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <stdio.h>
#include <string.h>

#define PRODUCERS 4
#define CONSUMERS 3
#define ITEMS_EACH 10000
#define ITEMS (PRODUCERS * ITEMS_EACH)
#define CAPACITY 16

typedef struct buffer {
    fsched_mutex lock;     /* guards everything below */
    fsched_cond not_full;  /* signalled when a slot frees up */
    fsched_cond not_empty; /* signalled when an item arrives, broadcast at the end */
    int items[CAPACITY];   /* a ring: `count` items from `head` on */
    int head, count;
    int producers_left;    /* the last producer to finish closes the buffer */
    int closed;
    unsigned char consumed[ITEMS]; /* how often each item was taken */
    int taken_by[CONSUMERS];
    uint64_t checksum[CONSUMERS];  /* each consumer's own: written without the lock */
} buffer;

static buffer buf;

/* What each task is told: which producer or consumer it is. */
static int ids[PRODUCERS > CONSUMERS ? PRODUCERS : CONSUMERS];

/* Stands for the real work a consumer does with an item. */
static uint64_t work_on(int item) {
    uint64_t x = (uint64_t)item + 1;
    int i;
    for (i = 0; i < 100; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x;
}

static void producer(void *arg) {
    int id = *(int *)arg, i;
    for (i = 0; i < ITEMS_EACH; i++) {
        fsched_mutex_lock(&buf.lock);
        /* cond_wait releases the lock while it waits and takes it again before it
           returns; the condition is checked again in a loop, as with any condition
           variable (another task may have filled the slot first) */
        while (buf.count == CAPACITY) fsched_cond_wait(&buf.not_full, &buf.lock);
        buf.items[(buf.head + buf.count) % CAPACITY] = id * ITEMS_EACH + i;
        buf.count++;
        fsched_cond_signal(&buf.not_empty); /* one waiting consumer may go on */
        fsched_mutex_unlock(&buf.lock);
    }
    fsched_mutex_lock(&buf.lock);
    if (--buf.producers_left == 0) {
        buf.closed = 1;
        fsched_cond_broadcast(&buf.not_empty); /* every waiting consumer: no more items */
    }
    fsched_mutex_unlock(&buf.lock);
}

static void consumer(void *arg) {
    int id = *(int *)arg;
    fsched_mutex_lock(&buf.lock);
    for (;;) {
        int item;
        while (buf.count == 0 && !buf.closed) fsched_cond_wait(&buf.not_empty, &buf.lock);
        if (buf.count == 0) break; /* closed, and nothing left */
        item = buf.items[buf.head];
        buf.head = (buf.head + 1) % CAPACITY;
        buf.count--;
        buf.consumed[item]++;
        buf.taken_by[id]++;
        fsched_cond_signal(&buf.not_full); /* one waiting producer may go on */
        fsched_mutex_unlock(&buf.lock);
        buf.checksum[id] += work_on(item); /* the work is done without holding the lock */
        fsched_mutex_lock(&buf.lock);
    }
    fsched_mutex_unlock(&buf.lock);
}

int main(void) {
    fsched_desc desc = {0};
    fsched_sched *sched;
    fsched_wait_group all;
    fsched_result r;
    uint64_t expected = 0, total = 0;
    int i, wrong = 0;

    memset(&buf, 0, sizeof buf);
    fsched_mutex_init(&buf.lock);
    fsched_cond_init(&buf.not_full);
    fsched_cond_init(&buf.not_empty);
    buf.producers_left = PRODUCERS;

    desc.workers = 2; /* fewer threads than tasks: waiting tasks must give way */
    r = fsched_create(&desc, &sched);
    if (r != FSCHED_OK) {
        fprintf(stderr, "fsched_create: %s\n", fsched_result_string(r));
        return 1;
    }
    fsched_wait_group_init(&all);
    for (i = 0; i < PRODUCERS || i < CONSUMERS; i++) ids[i] = i;
    for (i = 0; i < CONSUMERS; i++) fsched_wait_group_spawn(&all, sched, consumer, &ids[i]);
    for (i = 0; i < PRODUCERS; i++) fsched_wait_group_spawn(&all, sched, producer, &ids[i]);
    fsched_wait_group_wait(&all); /* this thread is outside the scheduler: it blocks */
    fsched_wait_group_destroy(&all);
    fsched_destroy(sched);

    /* what the tasks wrote is visible once the wait group's wait has returned */
    for (i = 0; i < ITEMS; i++) {
        wrong += buf.consumed[i] != 1;
        expected += work_on(i);
    }
    for (i = 0; i < CONSUMERS; i++) total += buf.checksum[i];
    printf("%d producers, %d consumers, %d items through a buffer of %d: ", PRODUCERS,
           CONSUMERS, ITEMS, CAPACITY);
    if (wrong) printf("%d items not consumed exactly once\n", wrong);
    else printf("each consumed once\n");
    /* The split varies from run to run: tasks are never preempted, so a consumer that
       finds items waiting keeps taking them, and when the tasks share one worker the
       first consumer to wait is the one each signal wakes. */
    printf("taken per consumer:");
    for (i = 0; i < CONSUMERS; i++) printf(" %d", buf.taken_by[i]);
    printf("; checksum %s\n", total == expected ? "matches" : "DIFFERS");

    fsched_cond_destroy(&buf.not_full);
    fsched_cond_destroy(&buf.not_empty);
    fsched_mutex_destroy(&buf.lock);
    return wrong || total != expected ? 1 : 0;
}
