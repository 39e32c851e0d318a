/* The fiber-aware synchronisation primitives under real concurrency: mutexes, condition
   variables, semaphores, events, wait groups, sleep and yield, each used at once by tasks
   on the fibers of a scheduler with more workers than cores, by threads bound to the
   scheduler, and by plain threads outside it. Timed waits are measured against the clock;
   a randomised stress test mixes every primitive; bad input is refused; a primitive
   cannot be destroyed while it is waited on, and may be freed as soon as a wait on it
   has returned; the single-threaded mode runs tasks while the bound main thread waits.

   Built with FIBERSCHED_NO_THREADS, the parts that need threads are left out and the
   main thread binds to every scheduler, so that its waits run the tasks.

   Usage: test_sync [name...]   runs only the named tests (default: all of them). */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <stdint.h>

#define US 1000ull
#define MS 1000000ull
#define SEC 1000000000ull

#define WORKERS 4 /* more than the cores of a small machine: fibers really suspend */

/* Set up in main: the amount of work (reduced under Valgrind), how late a timed wait may
   end (machines are shared and noisy: generous), and the fibers' stack size. */
static int heavy = 1;
static uint64_t late_slack = 2 * SEC;
static size_t stack_size = 64 * 1024;

static int scaled(int n) {
    return heavy ? n : (n / 10 > 1 ? n / 10 : 1);
}

/* Atomics for the test's own bookkeeping. */

/* splitmix64: a deterministic generator per task. */
static uint32_t rng_next(uint64_t *state) { return (uint32_t)(test_rng(state) >> 32); }

/* A timed wait that began at `start` ended neither before `timeout` nor very late. */
#define CHECK_ELAPSED(start, timeout)                                                     \
    do {                                                                                  \
        uint64_t elapsed_ = fsched_clock_ns() - (start);                                  \
        uint64_t timeout_ = (timeout);                                                    \
        if (elapsed_ < timeout_ || elapsed_ >= timeout_ + late_slack) {                   \
            fprintf(stderr, "%s:%d: a wait of %llu ns took %llu ns\n", __FILE__, __LINE__, \
                    (unsigned long long)timeout_, (unsigned long long)elapsed_);          \
            fflush(stderr);                                                               \
            abort();                                                                      \
        }                                                                                 \
    } while (0)

/* How many waiters are queued on a primitive. The count is private; the test reads it
   only to know that a thread has really gone to sleep on the primitive. */
static uint32_t queued_waiters(const fsched_wait_list *l) {
    return __atomic_load_n(&l->count, __ATOMIC_ACQUIRE);
}

/* ---- schedulers ---- */

/* A scheduler with WORKERS workers. Without threads it is single-threaded, and the main
   thread binds to it so that its waits (and sleeps) run the tasks. */
static fsched_sched *sched_new(void) {
    fsched_desc d;
    fsched_sched *s;
    test_desc_init(&d);
    d.workers = WORKERS;
    d.stack_size = stack_size;
    CHECK_OK(fsched_create(&d, &s));
#if TEST_THREADS
    CHECK(fsched_worker_count(s) == WORKERS);
#else
    CHECK(fsched_worker_count(s) == 0);
    CHECK_OK(fsched_bind(s));
#endif
    return s;
}

static void sched_free(fsched_sched *s) {
#if !TEST_THREADS
    CHECK_OK(fsched_unbind());
#endif
    CHECK_OK(fsched_destroy(s));
}

/* ---- crowds: the same function run by tasks, bound threads and plain threads ---- */

enum { TASK = 0, BOUND = 1, PLAIN = 2 };

typedef struct crowd crowd;
typedef struct member {
    crowd *c;
    int who, kind;
} member;

struct crowd {
    fsched_sched *s;
    void (*fn)(crowd *c, int who, int kind);
    void *ctx;
    int n[3];   /* members of each kind */
    int ran[3]; /* atomic: members of each kind that finished */
    int total;
    member *members;
    fsched_wait_group tasks;
#if TEST_THREADS
    test_thread *threads;
#endif
};

static void member_body(member *m) {
    m->c->fn(m->c, m->who, m->kind);
    ADD(&m->c->ran[m->kind], 1);
}

static void member_task(void *arg) {
    member *m = (member *)arg;
    CHECK(fsched_current() == m->c->s);
    CHECK(fsched_worker_index() >= 0);
    member_body(m);
}

#if TEST_THREADS
static void member_bound(void *arg) {
    member *m = (member *)arg;
    CHECK(fsched_current() == NULL);
    CHECK_OK(fsched_bind(m->c->s));
    CHECK(fsched_current() == m->c->s);
    CHECK(fsched_worker_index() >= (int)fsched_worker_count(m->c->s));
    member_body(m);
    CHECK_OK(fsched_unbind());
    CHECK(fsched_current() == NULL);
}

static void member_plain(void *arg) {
    member *m = (member *)arg;
    CHECK(fsched_current() == NULL && fsched_worker_index() == -1);
    member_body(m);
}
#endif

/* Starts the members: `who` numbers the tasks first, then bound, then plain threads.
   Without threads, only the tasks. */
static void crowd_start(crowd *c, fsched_sched *s, void (*fn)(crowd *, int, int), void *ctx,
                        int tasks, int bound, int plain) {
    int i;
    memset(c, 0, sizeof *c);
    c->s = s;
    c->fn = fn;
    c->ctx = ctx;
    c->n[TASK] = tasks;
#if TEST_THREADS
    c->n[BOUND] = bound;
    c->n[PLAIN] = plain;
#else
    (void)bound;
    (void)plain;
#endif
    c->total = c->n[TASK] + c->n[BOUND] + c->n[PLAIN];
    c->members = (member *)calloc((size_t)c->total, sizeof *c->members);
    CHECK(c->members != NULL);
    CHECK_OK(fsched_wait_group_init(&c->tasks));
    for (i = 0; i < c->total; i++) {
        c->members[i].c = c;
        c->members[i].who = i;
        c->members[i].kind = i < c->n[TASK]                ? TASK
                             : i < c->n[TASK] + c->n[BOUND] ? BOUND
                                                            : PLAIN;
    }
    for (i = 0; i < c->n[TASK]; i++)
        CHECK_OK(fsched_wait_group_spawn(&c->tasks, s, member_task, &c->members[i]));
#if TEST_THREADS
    c->threads =
        (test_thread *)calloc((size_t)(c->n[BOUND] + c->n[PLAIN] + 1), sizeof *c->threads);
    CHECK(c->threads != NULL);
    for (i = c->n[TASK]; i < c->total; i++)
        c->threads[i - c->n[TASK]] = thread_run(
            c->members[i].kind == BOUND ? member_bound : member_plain, &c->members[i]);
#endif
}

/* Waits for every member to finish. */
static void crowd_finish(crowd *c) {
    int k;
    CHECK_OK(fsched_wait_group_wait(&c->tasks));
#if TEST_THREADS
    {
        int i;
        for (i = 0; i < c->n[BOUND] + c->n[PLAIN]; i++) thread_join(c->threads[i]);
        free(c->threads);
    }
#endif
    for (k = 0; k < 3; k++) CHECK(LOAD(&c->ran[k]) == c->n[k]);
    CHECK_OK(fsched_wait_group_destroy(&c->tasks));
    free(c->members);
}

static void crowd_run(fsched_sched *s, void (*fn)(crowd *, int, int), void *ctx, int tasks,
                      int bound, int plain) {
    crowd c;
    crowd_start(&c, s, fn, ctx, tasks, bound, plain);
    crowd_finish(&c);
}

/* Sleeps a little (the main thread polling for the members): without threads the main
   thread is bound, and its sleep runs them. */
static void poll_pause(void) {
    fsched_sleep_for(200 * US);
}

static void wait_until_at_least(int *counter, int n) {
    while (LOAD(counter) < n) poll_pause();
}

/* After a failed try: yield, and now and then sleep (spinning callers would otherwise
   hog a serialising emulator such as Valgrind, where the holder waits for a turn). */
static void back_off(int fails) {
    if (fails % 16 == 0) fsched_sleep_for(20 * US);
    else fsched_yield();
}

/* ===================================================================================== */
/*  mutex                                                                                */
/* ===================================================================================== */

typedef struct counter_ctx {
    fsched_mutex m;
    long counter; /* guarded by m; deliberately not atomic */
    int inside;   /* atomic: holders at this moment */
    int iterations;
} counter_ctx;

static void counter_member(crowd *c, int who, int kind) {
    counter_ctx *x = (counter_ctx *)c->ctx;
    uint64_t rng = 0x5eed0000u + (uint64_t)who;
    int i, fails = 0;
    (void)kind;
    for (i = 0; i < x->iterations; i++) {
        long v;
        fsched_result r;
        switch ((i + who) % 3) {
        case 0:
            CHECK_OK(fsched_mutex_lock(&x->m));
            break;
        case 1:
            CHECK_OK(fsched_mutex_lock_for(&x->m, 60 * SEC));
            break;
        default:
            while ((r = fsched_mutex_try_lock(&x->m)) != FSCHED_OK) {
                CHECK(r == FSCHED_ERR_TIMEOUT);
                back_off(++fails);
            }
        }
        CHECK(ADD(&x->inside, 1) == 1);
        v = x->counter;
        if (rng_next(&rng) % 64 == 0) fsched_yield(); /* held across a yield: others block */
        x->counter = v + 1;
        CHECK(ADD(&x->inside, -1) == 0);
        CHECK_OK(fsched_mutex_unlock(&x->m));
    }
}

/* Many tasks and threads increment one plain counter under the mutex. */
static void test_mutex_counter(void) {
    fsched_sched *s = sched_new();
    counter_ctx x;
    crowd c;
    memset(&x, 0, sizeof x);
    x.iterations = scaled(2000);
    CHECK_OK(fsched_mutex_init(&x.m));
    /* fewer tasks under Valgrind: a convoy through the fair mutex, handed from worker to
       worker, costs a thread switch of the serialised emulator per lock */
    crowd_start(&c, s, counter_member, &x, heavy ? 32 : 8, 2, 2);
    crowd_finish(&c);
    CHECK_EQ_U64(x.counter, (uint64_t)c.total * (uint64_t)x.iterations);
    CHECK(LOAD(&x.inside) == 0);
    CHECK_OK(fsched_mutex_destroy(&x.m));
    sched_free(s);
}

typedef struct holder_ctx {
    fsched_mutex m;
    fsched_event held; /* manual reset: the holder has the mutex */
    int release;       /* atomic: the holder may let go */
    int naps;          /* atomic: sleeps of the holder while it held the mutex */
} holder_ctx;

static void holder_task(void *arg) {
    holder_ctx *x = (holder_ctx *)arg;
    CHECK_OK(fsched_mutex_lock(&x->m));
    CHECK_OK(fsched_event_set(&x->held));
    while (!LOAD(&x->release)) {
        fsched_sleep_for(1 * MS); /* the holder sleeps with the mutex held */
        ADD(&x->naps, 1);
    }
    CHECK_OK(fsched_mutex_unlock(&x->m));
}

static void lock_timeout_member(crowd *c, int who, int kind) {
    holder_ctx *x = (holder_ctx *)c->ctx;
    uint64_t timeout = (uint64_t)(1 + who % 4) * 5 * MS, start;
    (void)kind;
    CHECK_RESULT(fsched_mutex_try_lock(&x->m), FSCHED_ERR_TIMEOUT);
    CHECK_RESULT(fsched_mutex_lock_for(&x->m, 0), FSCHED_ERR_TIMEOUT);
    start = fsched_clock_ns();
    CHECK_RESULT(fsched_mutex_lock_for(&x->m, timeout), FSCHED_ERR_TIMEOUT);
    CHECK_ELAPSED(start, timeout);
    CHECK_RESULT(fsched_mutex_try_lock(&x->m), FSCHED_ERR_TIMEOUT);
}

/* try_lock and lock_for fail while a task holds the mutex and sleeps; unlocking an
   unlocked mutex and destroying a locked one are refused. */
static void test_mutex_timeouts_and_misuse(void) {
    fsched_sched *s = sched_new();
    holder_ctx x;
    fsched_wait_group wg;
    uint64_t start;
    memset(&x, 0, sizeof x);
    CHECK_OK(fsched_mutex_init(&x.m));
    CHECK_OK(fsched_event_init(&x.held, 1, 0));
    CHECK_OK(fsched_wait_group_init(&wg));

    CHECK_RESULT(fsched_mutex_unlock(&x.m), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_mutex_try_lock(&x.m));
    CHECK_RESULT(fsched_mutex_destroy(&x.m), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_mutex_unlock(&x.m));
    CHECK_RESULT(fsched_mutex_unlock(&x.m), FSCHED_ERR_WRONG_STATE);

    CHECK_OK(fsched_wait_group_spawn(&wg, s, holder_task, &x));
    CHECK_OK(fsched_event_wait(&x.held));
    crowd_run(s, lock_timeout_member, &x, 6, 1, 2);
    start = fsched_clock_ns();
    CHECK_RESULT(fsched_mutex_lock_for(&x.m, 5 * MS), FSCHED_ERR_TIMEOUT);
    CHECK_ELAPSED(start, 5 * MS);
    CHECK_RESULT(fsched_mutex_destroy(&x.m), FSCHED_ERR_WRONG_STATE);
    wait_until_at_least(&x.naps, 1);
    STORE(&x.release, 1);
    CHECK_OK(fsched_mutex_lock_for(&x.m, 60 * SEC)); /* once the holder lets go */
    CHECK_RESULT(fsched_mutex_try_lock(&x.m), FSCHED_ERR_TIMEOUT);
    CHECK_OK(fsched_mutex_unlock(&x.m));
    CHECK_RESULT(fsched_mutex_unlock(&x.m), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_event_destroy(&x.held));
    CHECK_OK(fsched_mutex_destroy(&x.m));
    sched_free(s);
}

/* ===================================================================================== */
/*  condition variable                                                                   */
/* ===================================================================================== */

#define QUEUE_CAP 8

typedef struct queue {
    fsched_mutex m;
    fsched_cond not_empty, not_full;
    int items[QUEUE_CAP];
    int head, count, closed; /* guarded by m */
    int producers_left;      /* guarded by m */
    int per_producer;
    int *consumed;           /* atomic, per item: times consumed */
} queue;

/* Waits on c, with a short timeout for some callers (retried: the predicate decides). */
static void queue_wait(queue *q, fsched_cond *c, int timed) {
    if (timed) {
        fsched_result r = fsched_cond_wait_for(c, &q->m, 1 * MS);
        CHECK(r == FSCHED_OK || r == FSCHED_ERR_TIMEOUT);
    } else {
        CHECK_OK(fsched_cond_wait(c, &q->m));
    }
}

static void queue_producer(queue *q, int index, int timed) {
    int k;
    for (k = 0; k < q->per_producer; k++) {
        int outside = k % 2; /* signal after unlocking for every other item */
        CHECK_OK(fsched_mutex_lock(&q->m));
        while (q->count == QUEUE_CAP) queue_wait(q, &q->not_full, timed);
        CHECK(q->count >= 0 && q->count < QUEUE_CAP && !q->closed);
        q->items[(q->head + q->count) % QUEUE_CAP] = index * q->per_producer + k;
        q->count++;
        if (!outside) CHECK_OK(fsched_cond_signal(&q->not_empty));
        CHECK_OK(fsched_mutex_unlock(&q->m));
        if (outside) CHECK_OK(fsched_cond_signal(&q->not_empty));
    }
    CHECK_OK(fsched_mutex_lock(&q->m));
    if (--q->producers_left == 0) { /* the last producer closes the queue */
        q->closed = 1;
        CHECK_OK(fsched_cond_broadcast(&q->not_empty));
    }
    CHECK_OK(fsched_mutex_unlock(&q->m));
}

static void queue_consumer(queue *q, int who, int timed) {
    uint64_t rng = 0xc0de0000u + (uint64_t)who;
    CHECK_OK(fsched_mutex_lock(&q->m));
    for (;;) {
        int item;
        while (q->count == 0 && !q->closed) queue_wait(q, &q->not_empty, timed);
        if (q->count == 0) break; /* closed and drained */
        item = q->items[q->head];
        q->head = (q->head + 1) % QUEUE_CAP;
        q->count--;
        CHECK_OK(fsched_cond_signal(&q->not_full));
        CHECK_OK(fsched_mutex_unlock(&q->m));
        CHECK(ADD(&q->consumed[item], 1) == 1);
        if (rng_next(&rng) % 16 == 0) fsched_yield();
        CHECK_OK(fsched_mutex_lock(&q->m));
    }
    CHECK_OK(fsched_mutex_unlock(&q->m));
}

/* Even members produce, odd ones consume; half of each side waits with short timeouts. */
static void queue_member(crowd *c, int who, int kind) {
    queue *q = (queue *)c->ctx;
    int timed = (who / 2) % 2;
    (void)kind;
    if (who % 2 == 0) queue_producer(q, who / 2, timed);
    else queue_consumer(q, who, timed);
}

/* A bounded queue with producers and consumers of every kind: each item consumed once. */
static void test_cond_queue(void) {
    fsched_sched *s = sched_new();
    queue q;
    crowd c;
    int producers, items, i;
    memset(&q, 0, sizeof q);
    CHECK_OK(fsched_mutex_init(&q.m));
    CHECK_OK(fsched_cond_init(&q.not_empty));
    CHECK_OK(fsched_cond_init(&q.not_full));
    q.per_producer = scaled(2000);
    /* the crowd's size decides the producers: count them as crowd_start will number them */
#if TEST_THREADS
    producers = (12 + 2 + 2 + 1) / 2;
#else
    producers = (12 + 1) / 2;
#endif
    items = producers * q.per_producer;
    q.producers_left = producers;
    q.consumed = (int *)calloc((size_t)items, sizeof *q.consumed);
    CHECK(q.consumed != NULL);
    crowd_start(&c, s, queue_member, &q, 12, 2, 2);
    CHECK((c.total + 1) / 2 == producers);
    crowd_finish(&c);
    for (i = 0; i < items; i++) CHECK(q.consumed[i] == 1);
    CHECK(q.count == 0 && q.closed);
    free(q.consumed);
    CHECK_OK(fsched_cond_destroy(&q.not_empty));
    CHECK_OK(fsched_cond_destroy(&q.not_full));
    CHECK_OK(fsched_mutex_destroy(&q.m));
    sched_free(s);
}

typedef struct ticket_ctx {
    fsched_mutex m;
    fsched_cond c;
    int waiting, tickets, open, wakeups, took; /* guarded by m */
} ticket_ctx;

static void ticket_member(crowd *c, int who, int kind) {
    ticket_ctx *x = (ticket_ctx *)c->ctx;
    (void)who;
    (void)kind;
    CHECK_OK(fsched_mutex_lock(&x->m));
    x->waiting++;
    for (;;) {
        if (x->tickets > 0) {
            x->tickets--;
            x->took++;
            break;
        }
        if (x->open) break;
        CHECK_OK(fsched_cond_wait(&x->c, &x->m));
        x->wakeups++; /* no spurious wakeups: each return was a signal or broadcast */
    }
    x->waiting--;
    CHECK_OK(fsched_mutex_unlock(&x->m));
}

static int ticket_read(ticket_ctx *x, const int *field) {
    int v;
    CHECK_OK(fsched_mutex_lock(&x->m));
    v = *field;
    CHECK_OK(fsched_mutex_unlock(&x->m));
    return v;
}

/* With every member queued on the condition variable, a signal wakes exactly one of them
   and a broadcast all the others. */
static void test_cond_signal_broadcast(void) {
    fsched_sched *s = sched_new();
    ticket_ctx x;
    crowd c;
    memset(&x, 0, sizeof x);
    CHECK_OK(fsched_mutex_init(&x.m));
    CHECK_OK(fsched_cond_init(&x.c));
    crowd_start(&c, s, ticket_member, &x, 6, 1, 2);
    /* a member counts itself under m and queues before cond_wait releases m: once the
       count is complete under m, all of them are queued */
    while (ticket_read(&x, &x.waiting) != c.total) poll_pause();
    CHECK_RESULT(fsched_cond_destroy(&x.c), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_mutex_lock(&x.m));
    x.tickets = 1;
    CHECK_OK(fsched_cond_signal(&x.c));
    CHECK_OK(fsched_mutex_unlock(&x.m));
    while (ticket_read(&x, &x.took) != 1) poll_pause();
    fsched_sleep_for(20 * MS); /* time for a wrong second wakeup to show */
    CHECK_OK(fsched_mutex_lock(&x.m));
    CHECK(x.wakeups == 1);
    CHECK(x.waiting == c.total - 1);
    x.open = 1;
    CHECK_OK(fsched_cond_broadcast(&x.c));
    CHECK_OK(fsched_mutex_unlock(&x.m));
    crowd_finish(&c);
    CHECK(x.wakeups == c.total && x.took == 1 && x.waiting == 0);
    CHECK_OK(fsched_cond_signal(&x.c)); /* nobody waits: nothing happens */
    CHECK_OK(fsched_cond_broadcast(&x.c));
    CHECK_OK(fsched_cond_destroy(&x.c));
    CHECK_OK(fsched_mutex_destroy(&x.m));
    sched_free(s);
}

/* ===================================================================================== */
/*  semaphore                                                                            */
/* ===================================================================================== */

#define UNITS 3

typedef struct resource_ctx {
    fsched_sema sema;
    int in_use;   /* atomic: holders of a unit at this moment */
    int peak;     /* atomic: the most seen at once */
    int rounds;
} resource_ctx;

static void resource_member(crowd *c, int who, int kind) {
    resource_ctx *x = (resource_ctx *)c->ctx;
    uint64_t rng = 0xabcd0000u + (uint64_t)who;
    int i, fails = 0;
    (void)kind;
    for (i = 0; i < x->rounds; i++) {
        int n, peak;
        fsched_result r;
        switch ((i + who) % 3) {
        case 0:
            CHECK_OK(fsched_sema_acquire(&x->sema));
            break;
        case 1:
            CHECK_OK(fsched_sema_acquire_for(&x->sema, 60 * SEC));
            break;
        default:
            while ((r = fsched_sema_try_acquire(&x->sema)) != FSCHED_OK) {
                CHECK(r == FSCHED_ERR_TIMEOUT);
                back_off(++fails);
            }
        }
        n = ADD(&x->in_use, 1);
        CHECK(n >= 1 && n <= UNITS);
        peak = LOAD(&x->peak);
        while (n > peak && !__atomic_compare_exchange_n(&x->peak, &peak, n, 0, __ATOMIC_ACQ_REL,
                                                        __ATOMIC_ACQUIRE)) {
        }
        switch (rng_next(&rng) % 4) {
        case 0: fsched_yield(); break;
        case 1: fsched_sleep_for((rng_next(&rng) % 50 + 1) * US); break;
        default: break;
        }
        CHECK(ADD(&x->in_use, -1) >= 0);
        CHECK_OK(fsched_sema_release(&x->sema, 1));
    }
}

/* A resource of UNITS units shared by many tasks and threads: never more holders. */
static void test_sema_resource(void) {
    fsched_sched *s = sched_new();
    resource_ctx x;
    int i;
    memset(&x, 0, sizeof x);
    x.rounds = scaled(300);
    CHECK_OK(fsched_sema_init(&x.sema, UNITS));
    crowd_run(s, resource_member, &x, 40, 2, 2);
    CHECK(LOAD(&x.in_use) == 0);
    CHECK(x.peak >= 1 && x.peak <= UNITS);
    for (i = 0; i < UNITS; i++) CHECK_OK(fsched_sema_try_acquire(&x.sema)); /* all came back */
    CHECK_RESULT(fsched_sema_try_acquire(&x.sema), FSCHED_ERR_TIMEOUT);
    CHECK_OK(fsched_sema_release(&x.sema, UNITS));
    CHECK_OK(fsched_sema_destroy(&x.sema));
    sched_free(s);
}

typedef struct units_ctx {
    fsched_sema sema;
    int arrived, acquired; /* atomic */
} units_ctx;

static void units_member(crowd *c, int who, int kind) {
    units_ctx *x = (units_ctx *)c->ctx;
    (void)who;
    (void)kind;
    ADD(&x->arrived, 1);
    CHECK_OK(fsched_sema_acquire(&x->sema));
    ADD(&x->acquired, 1);
}

/* Waiters of every kind on an empty semaphore: a release of n units lets exactly n of
   them through (more than the 16 a release wakes per round of its lock). */
static void test_sema_release_wakes_n(void) {
    fsched_sched *s = sched_new();
    units_ctx x;
    crowd c;
    int first;
    memset(&x, 0, sizeof x);
    CHECK_OK(fsched_sema_init(&x.sema, 0));
    crowd_start(&c, s, units_member, &x, 24, 1, 2);
    first = c.total - 3;
    wait_until_at_least(&x.arrived, c.total);
    fsched_sleep_for(5 * MS); /* most are queued by now, perhaps all */
    CHECK(LOAD(&x.acquired) == 0);
    CHECK_OK(fsched_sema_release(&x.sema, 0));
    CHECK_OK(fsched_sema_release(&x.sema, first));
    wait_until_at_least(&x.acquired, first);
    fsched_sleep_for(10 * MS);
    CHECK(LOAD(&x.acquired) == first);
    CHECK_RESULT(fsched_sema_try_acquire(&x.sema), FSCHED_ERR_TIMEOUT);
    CHECK_OK(fsched_sema_release(&x.sema, 3));
    crowd_finish(&c);
    CHECK(LOAD(&x.acquired) == c.total);
    CHECK_RESULT(fsched_sema_try_acquire(&x.sema), FSCHED_ERR_TIMEOUT);
    CHECK_RESULT(fsched_sema_acquire_for(&x.sema, 0), FSCHED_ERR_TIMEOUT);
    CHECK_OK(fsched_sema_destroy(&x.sema));
    sched_free(s);
}

/* ===================================================================================== */
/*  event                                                                                */
/* ===================================================================================== */

typedef struct manual_ctx {
    fsched_event e;
    int arrived, released; /* atomic */
} manual_ctx;

static void manual_member(crowd *c, int who, int kind) {
    manual_ctx *x = (manual_ctx *)c->ctx;
    (void)who;
    (void)kind;
    ADD(&x->arrived, 1);
    CHECK_OK(fsched_event_wait(&x->e));
    ADD(&x->released, 1);
    CHECK(fsched_event_is_set(&x->e));       /* it stays set */
    CHECK_OK(fsched_event_wait_for(&x->e, 0)); /* and lets everybody through */
    CHECK_OK(fsched_event_wait(&x->e));
}

/* A manual-reset event: one set releases every waiter and stays set until reset. */
static void test_event_manual(void) {
    fsched_sched *s = sched_new();
    manual_ctx x;
    crowd c;
    uint64_t start;
    memset(&x, 0, sizeof x);
    CHECK_OK(fsched_event_init(&x.e, 1, 0));
    CHECK(!fsched_event_is_set(&x.e));
    crowd_start(&c, s, manual_member, &x, 20, 1, 2);
    wait_until_at_least(&x.arrived, c.total);
    fsched_sleep_for(5 * MS);
    CHECK(LOAD(&x.released) == 0);
    CHECK_OK(fsched_event_set(&x.e));
    crowd_finish(&c);
    CHECK(LOAD(&x.released) == c.total);
    CHECK(fsched_event_is_set(&x.e));
    CHECK_OK(fsched_event_set(&x.e)); /* setting a set event changes nothing */
    CHECK_OK(fsched_event_wait(&x.e));
    CHECK_OK(fsched_event_reset(&x.e));
    CHECK(!fsched_event_is_set(&x.e));
    CHECK_RESULT(fsched_event_wait_for(&x.e, 0), FSCHED_ERR_TIMEOUT);
    start = fsched_clock_ns();
    CHECK_RESULT(fsched_event_wait_for(&x.e, 5 * MS), FSCHED_ERR_TIMEOUT);
    CHECK_ELAPSED(start, 5 * MS);
    CHECK_OK(fsched_event_reset(&x.e)); /* resetting a reset event changes nothing */
    CHECK_OK(fsched_event_destroy(&x.e));
    /* created set */
    CHECK_OK(fsched_event_init(&x.e, 1, 1));
    CHECK(fsched_event_is_set(&x.e));
    CHECK_OK(fsched_event_wait(&x.e));
    CHECK_OK(fsched_event_wait(&x.e));
    CHECK_OK(fsched_event_destroy(&x.e));
    sched_free(s);
}

typedef struct auto_ctx {
    fsched_event e;
    int stop;               /* atomic */
    int released, exited;   /* atomic */
} auto_ctx;

static void auto_member(crowd *c, int who, int kind) {
    auto_ctx *x = (auto_ctx *)c->ctx;
    (void)who;
    (void)kind;
    for (;;) {
        CHECK_OK(fsched_event_wait(&x->e));
        if (LOAD(&x->stop)) break;
        ADD(&x->released, 1);
    }
    ADD(&x->exited, 1);
}

/* An auto-reset event: each set releases exactly one waiter. */
static void test_event_auto(void) {
    fsched_sched *s = sched_new();
    auto_ctx x;
    crowd c;
    int rounds = scaled(200), k;
    uint64_t start;
    memset(&x, 0, sizeof x);
    CHECK_OK(fsched_event_init(&x.e, 0, 0));
    crowd_start(&c, s, auto_member, &x, 6, 1, 2);
    for (k = 1; k <= rounds; k++) {
        CHECK_OK(fsched_event_set(&x.e));
        wait_until_at_least(&x.released, k);
        CHECK(LOAD(&x.released) == k); /* one set, one release */
        if (k % 50 == 0) {
            fsched_sleep_for(5 * MS); /* time for a wrong second release to show */
            CHECK(LOAD(&x.released) == k);
        }
    }
    STORE(&x.stop, 1);
    for (k = 1; k <= c.total; k++) { /* one set per member, each taken by one of them */
        CHECK_OK(fsched_event_set(&x.e));
        wait_until_at_least(&x.exited, k);
        CHECK(LOAD(&x.exited) == k);
    }
    crowd_finish(&c);
    CHECK(LOAD(&x.released) == rounds);
    CHECK(!fsched_event_is_set(&x.e));
    /* a set with nobody waiting is kept for the next wait, which consumes it */
    CHECK_OK(fsched_event_set(&x.e));
    CHECK_OK(fsched_event_set(&x.e));
    CHECK(fsched_event_is_set(&x.e));
    CHECK_OK(fsched_event_wait(&x.e));
    CHECK(!fsched_event_is_set(&x.e));
    CHECK_RESULT(fsched_event_wait_for(&x.e, 0), FSCHED_ERR_TIMEOUT);
    start = fsched_clock_ns();
    CHECK_RESULT(fsched_event_wait_for(&x.e, 5 * MS), FSCHED_ERR_TIMEOUT);
    CHECK_ELAPSED(start, 5 * MS);
    CHECK_OK(fsched_event_destroy(&x.e));
    CHECK_OK(fsched_event_init(&x.e, 0, 1)); /* created set: one wait goes through */
    CHECK_OK(fsched_event_wait_for(&x.e, 0));
    CHECK_RESULT(fsched_event_wait_for(&x.e, 0), FSCHED_ERR_TIMEOUT);
    CHECK_OK(fsched_event_destroy(&x.e));
    sched_free(s);
}

/* ===================================================================================== */
/*  wait group                                                                           */
/* ===================================================================================== */

static void done_member(crowd *c, int who, int kind) {
    fsched_wait_group *wg = (fsched_wait_group *)c->ctx;
    (void)who;
    (void)kind;
    fsched_sleep_for((uint64_t)(who % 5) * 100 * US);
    CHECK_OK(fsched_wait_group_done(wg));
}

/* add, done and wait from every kind of caller; the count never goes below zero. */
static void test_wait_group_counting(void) {
    fsched_sched *s = sched_new();
    fsched_wait_group wg;
    crowd c;
    uint64_t start;
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_wait(&wg)); /* nothing counted: returns at once */
    CHECK_OK(fsched_wait_group_wait_for(&wg, 0));
    CHECK_RESULT(fsched_wait_group_add(&wg, -1), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_wait_group_done(&wg), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_wait_group_add(&wg, 0));
    CHECK_OK(fsched_wait_group_add(&wg, 2));
    CHECK_RESULT(fsched_wait_group_add(&wg, -3), FSCHED_ERR_WRONG_STATE); /* left at 2 */
    CHECK_RESULT(fsched_wait_group_destroy(&wg), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_wait_group_wait_for(&wg, 0), FSCHED_ERR_TIMEOUT);
    start = fsched_clock_ns();
    CHECK_RESULT(fsched_wait_group_wait_for(&wg, 5 * MS), FSCHED_ERR_TIMEOUT);
    CHECK_ELAPSED(start, 5 * MS);
    CHECK_OK(fsched_wait_group_add(&wg, -2));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_RESULT(fsched_wait_group_done(&wg), FSCHED_ERR_WRONG_STATE);

    /* every member counts down once */
    CHECK_OK(fsched_wait_group_add(&wg, 1000));
    crowd_start(&c, s, done_member, &wg, 12, 2, 2);
    CHECK_OK(fsched_wait_group_add(&wg, c.total - 1000));
    CHECK_OK(fsched_wait_group_wait(&wg));
    crowd_finish(&c);
    CHECK_RESULT(fsched_wait_group_done(&wg), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_wait_group_destroy(&wg));
    sched_free(s);
}

typedef struct tree {
    fsched_sched *s;
    fsched_wait_group wg;
    int n;
    int *visits;     /* atomic, per node */
    int scope_runs;  /* atomic: tasks run by the scopes of some nodes */
    struct tree_node *nodes;
} tree;

typedef struct tree_node {
    tree *t;
    int index;
} tree_node;

static void scope_leaf(void *arg) {
    ADD((int *)arg, 1);
}

static void tree_visit(void *arg) {
    tree_node *nd = (tree_node *)arg;
    tree *t = nd->t;
    int child;
    CHECK(ADD(&t->visits[nd->index], 1) == 1);
    for (child = 2 * nd->index + 1; child <= 2 * nd->index + 2 && child < t->n; child++)
        CHECK_OK(fsched_wait_group_spawn(&t->wg, t->s, tree_visit, &t->nodes[child]));
    if (nd->index % 7 == 0) fsched_yield();
    if (nd->index % 61 == 0) { /* a nested scope: a wait group of this task's own */
        fsched_wait_group scope;
        int runs = 0, i;
        CHECK_OK(fsched_wait_group_init(&scope));
        for (i = 0; i < 8; i++)
            CHECK_OK(fsched_wait_group_spawn(&scope, t->s, scope_leaf, &runs));
        CHECK_OK(fsched_wait_group_wait(&scope));
        CHECK(LOAD(&runs) == 8);
        CHECK_OK(fsched_wait_group_destroy(&scope));
        ADD(&t->scope_runs, runs);
    }
}

/* A tree of tasks, each spawning its children into the same wait group. */
static void test_wait_group_tree(void) {
    tree t;
    int i, scopes = 0;
    memset(&t, 0, sizeof t);
    t.s = sched_new();
    t.n = heavy ? 4095 : 511;
    t.visits = (int *)calloc((size_t)t.n, sizeof *t.visits);
    t.nodes = (tree_node *)calloc((size_t)t.n, sizeof *t.nodes);
    CHECK(t.visits && t.nodes);
    for (i = 0; i < t.n; i++) {
        t.nodes[i].t = &t;
        t.nodes[i].index = i;
        scopes += i % 61 == 0;
    }
    CHECK_OK(fsched_wait_group_init(&t.wg));
    CHECK_OK(fsched_wait_group_spawn(&t.wg, t.s, tree_visit, &t.nodes[0]));
    CHECK_OK(fsched_wait_group_wait(&t.wg));
    for (i = 0; i < t.n; i++) CHECK(t.visits[i] == 1);
    CHECK(LOAD(&t.scope_runs) == 8 * scopes);
    CHECK_OK(fsched_wait_group_destroy(&t.wg));
    free(t.visits);
    free(t.nodes);
    sched_free(t.s);
}

/* Each member opens a scope: spawns tasks into a wait group of its own and waits. */
static void scope_member(crowd *c, int who, int kind) {
    fsched_wait_group scope;
    int runs = 0, i, n = 20 + who % 13;
    (void)kind;
    CHECK_OK(fsched_wait_group_init(&scope));
    for (i = 0; i < n; i++) CHECK_OK(fsched_wait_group_spawn(&scope, c->s, scope_leaf, &runs));
    CHECK_OK(fsched_wait_group_wait(&scope));
    CHECK(LOAD(&runs) == n);
    CHECK_OK(fsched_wait_group_destroy(&scope));
}

static void test_wait_group_scopes(void) {
    fsched_sched *s = sched_new();
    crowd_run(s, scope_member, NULL, 16, 2, 2);
    sched_free(s);
}

/* ===================================================================================== */
/*  timed waits                                                                          */
/* ===================================================================================== */

typedef struct timeouts_ctx {
    fsched_event manual, automatic;
    fsched_sema sema;
    fsched_wait_group wg; /* counts 1 throughout */
    fsched_mutex held;    /* locked throughout */
} timeouts_ctx;

/* Every timed wait of the API expires: not before its timeout, not very late. */
static void timeouts_member(crowd *c, int who, int kind) {
    timeouts_ctx *x = (timeouts_ctx *)c->ctx;
    uint64_t timeout = (uint64_t)(1 + who % 3) * 3 * MS, start;
    fsched_mutex m;
    fsched_cond cv;
    (void)kind;
    /* a zero timeout is a poll */
    CHECK_RESULT(fsched_event_wait_for(&x->manual, 0), FSCHED_ERR_TIMEOUT);
    CHECK_RESULT(fsched_event_wait_for(&x->automatic, 0), FSCHED_ERR_TIMEOUT);
    CHECK_RESULT(fsched_sema_acquire_for(&x->sema, 0), FSCHED_ERR_TIMEOUT);
    CHECK_RESULT(fsched_wait_group_wait_for(&x->wg, 0), FSCHED_ERR_TIMEOUT);
    CHECK_RESULT(fsched_mutex_lock_for(&x->held, 0), FSCHED_ERR_TIMEOUT);

    start = fsched_clock_ns();
    CHECK_RESULT(fsched_event_wait_for(&x->manual, timeout), FSCHED_ERR_TIMEOUT);
    CHECK_ELAPSED(start, timeout);
    start = fsched_clock_ns();
    CHECK_RESULT(fsched_event_wait_for(&x->automatic, timeout), FSCHED_ERR_TIMEOUT);
    CHECK_ELAPSED(start, timeout);
    start = fsched_clock_ns();
    CHECK_RESULT(fsched_sema_acquire_for(&x->sema, timeout), FSCHED_ERR_TIMEOUT);
    CHECK_ELAPSED(start, timeout);
    start = fsched_clock_ns();
    CHECK_RESULT(fsched_wait_group_wait_for(&x->wg, timeout), FSCHED_ERR_TIMEOUT);
    CHECK_ELAPSED(start, timeout);
    start = fsched_clock_ns();
    CHECK_RESULT(fsched_mutex_lock_for(&x->held, timeout), FSCHED_ERR_TIMEOUT);
    CHECK_ELAPSED(start, timeout);
    start = fsched_clock_ns();
    fsched_sleep_for(timeout);
    CHECK_ELAPSED(start, timeout);

    /* a condition variable of our own: the timed wait relocks the mutex */
    CHECK_OK(fsched_mutex_init(&m));
    CHECK_OK(fsched_cond_init(&cv));
    CHECK_RESULT(fsched_cond_wait(&cv, &m), FSCHED_ERR_WRONG_STATE); /* m is not locked */
    CHECK_RESULT(fsched_cond_wait_for(&cv, &m, timeout), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_mutex_lock(&m));
    start = fsched_clock_ns();
    CHECK_RESULT(fsched_cond_wait_for(&cv, &m, timeout), FSCHED_ERR_TIMEOUT);
    CHECK_ELAPSED(start, timeout);
    CHECK_RESULT(fsched_mutex_try_lock(&m), FSCHED_ERR_TIMEOUT); /* locked again */
    CHECK_RESULT(fsched_cond_wait_for(&cv, &m, 0), FSCHED_ERR_TIMEOUT);
    CHECK_OK(fsched_mutex_unlock(&m));
    CHECK_OK(fsched_cond_destroy(&cv));
    CHECK_OK(fsched_mutex_destroy(&m));
}

static void test_timeouts(void) {
    fsched_sched *s = sched_new();
    timeouts_ctx x;
    crowd c;
    CHECK_OK(fsched_event_init(&x.manual, 1, 0));
    CHECK_OK(fsched_event_init(&x.automatic, 0, 0));
    CHECK_OK(fsched_sema_init(&x.sema, 0));
    CHECK_OK(fsched_wait_group_init(&x.wg));
    CHECK_OK(fsched_wait_group_add(&x.wg, 1));
    CHECK_OK(fsched_mutex_init(&x.held));
    CHECK_OK(fsched_mutex_lock(&x.held));
    crowd_start(&c, s, timeouts_member, &x, 12, 2, 2);
    timeouts_member(&c, 0, PLAIN); /* the main thread too */
    crowd_finish(&c);
    CHECK_OK(fsched_mutex_unlock(&x.held));
    CHECK_OK(fsched_wait_group_done(&x.wg));
    CHECK_OK(fsched_event_destroy(&x.manual));
    CHECK_OK(fsched_event_destroy(&x.automatic));
    CHECK_OK(fsched_sema_destroy(&x.sema));
    CHECK_OK(fsched_wait_group_destroy(&x.wg));
    CHECK_OK(fsched_mutex_destroy(&x.held));
    sched_free(s);
}

/* ===================================================================================== */
/*  sleep and yield                                                                      */
/* ===================================================================================== */

typedef struct sleepers_ctx {
    int woke; /* atomic */
} sleepers_ctx;

static void sleeper_member(crowd *c, int who, int kind) {
    sleepers_ctx *x = (sleepers_ctx *)c->ctx;
    uint64_t rng = 0x51ee9000u + (uint64_t)who, ns, start;
    (void)kind;
    ns = (uint64_t)(rng_next(&rng) % 5001) * US; /* 0 to 5 ms */
    if (rng_next(&rng) % 4 == 0) fsched_yield();
    start = fsched_clock_ns();
    fsched_sleep_for(ns);
    CHECK_ELAPSED(start, ns);
    if (rng_next(&rng) % 4 == 0) fsched_yield();
    ADD(&x->woke, 1);
}

/* A thousand tasks sleep at once, and threads beside them. */
static void test_sleepers(void) {
    fsched_sched *s = sched_new();
    sleepers_ctx x;
    crowd c;
    memset(&x, 0, sizeof x);
    /* each sleeper holds a fiber stack: a board has room for a few dozen */
    crowd_start(&c, s, sleeper_member, &x, TEST_SCALE > 4 ? 16 : heavy ? 1000 : 200, 2, 2);
    crowd_finish(&c);
    CHECK(LOAD(&x.woke) == c.total);
    fsched_sleep_for(0); /* returns at once */
    sched_free(s);
}

typedef struct yield_ctx {
    int flag; /* atomic: set by a task queued after the spinners */
} yield_ctx;

static void spinner_member(crowd *c, int who, int kind) {
    yield_ctx *x = (yield_ctx *)c->ctx;
    (void)who;
    (void)kind;
    while (!LOAD(&x->flag))
        fsched_yield(); /* lets the queued setter run, also with every worker spinning */
}

static void flag_setter(void *arg) {
    STORE((int *)arg, 1);
}

typedef struct late_setter {
    int *flag;
    fsched_event *go; /* NULL: sleep instead */
} late_setter;

/* Sets the flag after a sleep (a timer) or once `go` is set (from another thread). */
static void late_flag_setter(void *arg) {
    late_setter *l = (late_setter *)arg;
    if (l->go) CHECK_OK(fsched_event_wait(l->go));
    else fsched_sleep_for(1000000);
    STORE(l->flag, 1);
}

/* Tasks (more than workers) and threads spin on a flag with fsched_yield until it is set
   by: a task spawned after them (a queued job); a task that slept meanwhile (a timer);
   a task woken from the main thread (a fiber posted from outside). Yields that go from
   one ready fiber straight to the next must still let each of those run. */
static void test_yield(void) {
    int how;
    for (how = 0; how < 3; how++) {
        fsched_sched *s = sched_new();
        yield_ctx x;
        crowd c;
        fsched_wait_group wg;
        fsched_event go;
        late_setter l;
        memset(&x, 0, sizeof x);
        CHECK_OK(fsched_wait_group_init(&wg));
        CHECK_OK(fsched_event_init(&go, 0, 0));
        l.flag = &x.flag;
        l.go = how == 2 ? &go : NULL;
        if (how > 0) CHECK_OK(fsched_wait_group_spawn(&wg, s, late_flag_setter, &l));
        crowd_start(&c, s, spinner_member, &x, 3 * WORKERS, 1, 1);
        fsched_yield(); /* the main thread, outside the scheduler, yields its processor */
        if (how == 0) CHECK_OK(fsched_wait_group_spawn(&wg, s, flag_setter, &x.flag));
        if (how == 2) CHECK_OK(fsched_event_set(&go));
        crowd_finish(&c);
        CHECK_OK(fsched_wait_group_wait(&wg));
        CHECK_OK(fsched_wait_group_destroy(&wg));
        CHECK_OK(fsched_event_destroy(&go));
        sched_free(s);
    }
}

/* ===================================================================================== */
/*  stress: random blocking and random delays                                            */
/* ===================================================================================== */

/* Every member runs a random sequence of operations from its own seed: locks of one of
   a few mutexes (blocking, timed or tried) around a read-yield-write of a plain counter,
   units of a semaphore (at most STRESS_UNITS held at once), sets and timed waits of an
   auto-reset event, signals and timed waits of a condition variable, sleeps, yields,
   detached children and nested scopes. The mix cannot deadlock: a unit may be held
   while waiting for a mutex, never the reverse; a mutex holder only sleeps or yields;
   event and condition waits have timeouts; scopes wait holding nothing. At the end all
   members block on a gate, which the main thread opens once all have arrived. A lost
   wakeup hangs the test (and the watchdog fails it); the counters check mutual
   exclusion and that nothing is lost or made up. */

#define STRESS_MUTEXES 4
#define STRESS_UNITS 3

typedef struct stress {
    fsched_sched *s;
    int ops;
    fsched_mutex m[STRESS_MUTEXES];
    long counter[STRESS_MUTEXES]; /* guarded by m[i], not atomic */
    long taken[STRESS_MUTEXES];   /* atomic: successful locks of m[i] */
    fsched_sema units;
    int in_use;                   /* atomic */
    fsched_event token;           /* auto reset */
    long sets, takes;             /* atomic */
    fsched_mutex cm;
    fsched_cond cv;
    long cv_value;                /* guarded by cm */
    long cv_bumps;                /* atomic */
    fsched_wait_group children;
    long child_runs;              /* atomic */
    fsched_event gate;            /* manual reset: opened by the main thread at the end */
    int at_gate;                  /* atomic */
} stress;

typedef struct stress_child_arg {
    stress *x;
    uint64_t seed;
} stress_child_arg;

static void stress_pause(uint64_t *rng) {
    switch (rng_next(rng) % 4) {
    case 0: fsched_yield(); break;
    case 1: fsched_sleep_for((rng_next(rng) % 100 + 1) * US); break;
    default: break;
    }
}

static void stress_mutex(stress *x, uint64_t *rng) {
    int i = (int)(rng_next(rng) % STRESS_MUTEXES);
    fsched_result r;
    long v;
    switch (rng_next(rng) % 3) {
    case 0:
        r = fsched_mutex_lock(&x->m[i]);
        CHECK(r == FSCHED_OK);
        break;
    case 1:
        r = fsched_mutex_lock_for(&x->m[i], (rng_next(rng) % 300 + 1) * US);
        CHECK(r == FSCHED_OK || r == FSCHED_ERR_TIMEOUT);
        break;
    default:
        r = fsched_mutex_try_lock(&x->m[i]);
        CHECK(r == FSCHED_OK || r == FSCHED_ERR_TIMEOUT);
    }
    if (r != FSCHED_OK) return;
    v = x->counter[i];
    stress_pause(rng); /* a lost update would show in the final count */
    x->counter[i] = v + 1;
    ADD(&x->taken[i], 1);
    CHECK_OK(fsched_mutex_unlock(&x->m[i]));
}

static void stress_sema(stress *x, uint64_t *rng) {
    fsched_result r;
    int n;
    switch (rng_next(rng) % 3) {
    case 0:
        r = fsched_sema_acquire(&x->units);
        CHECK(r == FSCHED_OK);
        break;
    case 1:
        r = fsched_sema_acquire_for(&x->units, (rng_next(rng) % 300 + 1) * US);
        CHECK(r == FSCHED_OK || r == FSCHED_ERR_TIMEOUT);
        break;
    default:
        r = fsched_sema_try_acquire(&x->units);
        CHECK(r == FSCHED_OK || r == FSCHED_ERR_TIMEOUT);
    }
    if (r != FSCHED_OK) return;
    n = ADD(&x->in_use, 1);
    CHECK(n >= 1 && n <= STRESS_UNITS);
    /* a mutex while holding a unit: units, then mutexes, never the other way round */
    if (rng_next(rng) % 4 == 0) stress_mutex(x, rng);
    else stress_pause(rng);
    CHECK(ADD(&x->in_use, -1) >= 0);
    CHECK_OK(fsched_sema_release(&x->units, 1));
}

static void stress_token(stress *x, uint64_t *rng) {
    if (rng_next(rng) % 2) {
        ADD(&x->sets, 1);
        CHECK_OK(fsched_event_set(&x->token));
    } else {
        fsched_result r = fsched_event_wait_for(&x->token, (rng_next(rng) % 500) * US);
        CHECK(r == FSCHED_OK || r == FSCHED_ERR_TIMEOUT);
        if (r == FSCHED_OK) ADD(&x->takes, 1);
    }
}

static void stress_cond(stress *x, uint64_t *rng) {
    CHECK_OK(fsched_mutex_lock(&x->cm));
    if (rng_next(rng) % 2) {
        x->cv_value++;
        ADD(&x->cv_bumps, 1);
        switch (rng_next(rng) % 3) {
        case 0:
            CHECK_OK(fsched_cond_signal(&x->cv));
            CHECK_OK(fsched_mutex_unlock(&x->cm));
            break;
        case 1:
            CHECK_OK(fsched_cond_broadcast(&x->cv));
            CHECK_OK(fsched_mutex_unlock(&x->cm));
            break;
        default: /* signalling after the unlock is allowed too */
            CHECK_OK(fsched_mutex_unlock(&x->cm));
            CHECK_OK(fsched_cond_signal(&x->cv));
        }
    } else {
        long seen = x->cv_value;
        fsched_result r = fsched_cond_wait_for(&x->cv, &x->cm, (rng_next(rng) % 300 + 1) * US);
        CHECK(r == FSCHED_OK || r == FSCHED_ERR_TIMEOUT);
        CHECK(x->cv_value >= seen); /* m is held again, whatever the result */
        CHECK_OK(fsched_mutex_unlock(&x->cm));
    }
}

static void stress_child(void *arg) {
    stress_child_arg *a = (stress_child_arg *)arg;
    uint64_t rng = a->seed;
    ADD(&a->x->child_runs, 1);
    stress_mutex(a->x, &rng);
    free(a);
}

static void stress_spawn_child(stress *x, fsched_wait_group *wg, uint64_t *rng) {
    stress_child_arg *a = (stress_child_arg *)malloc(sizeof *a);
    CHECK(a != NULL);
    a->x = x;
    a->seed = rng_next(rng);
    CHECK_OK(fsched_wait_group_spawn(wg, x->s, stress_child, a));
}

static void stress_scope(stress *x, uint64_t *rng) {
    fsched_wait_group scope;
    int i, n = (int)(rng_next(rng) % 4) + 1;
    CHECK_OK(fsched_wait_group_init(&scope));
    for (i = 0; i < n; i++) stress_spawn_child(x, &scope, rng);
    CHECK_OK(fsched_wait_group_wait(&scope));
    CHECK_OK(fsched_wait_group_destroy(&scope));
}

static void stress_member(crowd *c, int who, int kind) {
    stress *x = (stress *)c->ctx;
    uint64_t rng = 0x57e55000u + 7919u * (uint64_t)who;
    int i;
    (void)kind;
    for (i = 0; i < x->ops; i++) {
        switch (rng_next(&rng) % 10) {
        case 0:
        case 1: stress_mutex(x, &rng); break;
        case 2: stress_sema(x, &rng); break;
        case 3:
        case 4: stress_token(x, &rng); break;
        case 5: stress_cond(x, &rng); break;
        case 6: fsched_sleep_for((rng_next(&rng) % 200) * US); break;
        case 7: fsched_yield(); break;
        case 8: stress_spawn_child(x, &x->children, &rng); break;
        default: stress_scope(x, &rng); break;
        }
    }
    ADD(&x->at_gate, 1);
    CHECK_OK(fsched_event_wait(&x->gate)); /* everybody blocks here until the end */
}

static void test_stress(void) {
    stress x;
    crowd c;
    long locks = 0, counted = 0;
    int i;
    memset(&x, 0, sizeof x);
    x.s = sched_new();
    x.ops = scaled(300);
    for (i = 0; i < STRESS_MUTEXES; i++) CHECK_OK(fsched_mutex_init(&x.m[i]));
    CHECK_OK(fsched_sema_init(&x.units, STRESS_UNITS));
    CHECK_OK(fsched_event_init(&x.token, 0, 0));
    CHECK_OK(fsched_mutex_init(&x.cm));
    CHECK_OK(fsched_cond_init(&x.cv));
    CHECK_OK(fsched_wait_group_init(&x.children));
    CHECK_OK(fsched_event_init(&x.gate, 1, 0));
    crowd_start(&c, x.s, stress_member, &x, 48, 2, 2);
    wait_until_at_least(&x.at_gate, c.total);
    CHECK_OK(fsched_event_set(&x.gate));
    crowd_finish(&c);
    CHECK_OK(fsched_wait_group_wait(&x.children));
    /* invariants */
    for (i = 0; i < STRESS_MUTEXES; i++) {
        CHECK_EQ_U64(x.counter[i], LOAD(&x.taken[i]));
        locks += x.counter[i];
        counted += LOAD(&x.taken[i]);
        CHECK_OK(fsched_mutex_destroy(&x.m[i]));
    }
    CHECK(locks == counted && locks > 0);
    CHECK(LOAD(&x.in_use) == 0);
    for (i = 0; i < STRESS_UNITS; i++) CHECK_OK(fsched_sema_try_acquire(&x.units));
    CHECK_RESULT(fsched_sema_try_acquire(&x.units), FSCHED_ERR_TIMEOUT);
    /* an auto-reset event releases at most one wait per set */
    CHECK(LOAD(&x.takes) + (fsched_event_is_set(&x.token) ? 1 : 0) <= LOAD(&x.sets));
    CHECK(x.cv_value == LOAD(&x.cv_bumps));
    CHECK(LOAD(&x.child_runs) > 0);
    CHECK_OK(fsched_sema_destroy(&x.units));
    CHECK_OK(fsched_event_destroy(&x.token));
    CHECK_OK(fsched_cond_destroy(&x.cv));
    CHECK_OK(fsched_mutex_destroy(&x.cm));
    CHECK_OK(fsched_wait_group_destroy(&x.children));
    CHECK_OK(fsched_event_destroy(&x.gate));
    sched_free(x.s);
}

/* ===================================================================================== */
/*  bad input                                                                            */
/* ===================================================================================== */

static void noop(void *arg) {
    (void)arg;
}

static void test_bad_input(void) {
    const void *volatile no_data = NULL;
    fsched_wait_group wg;
    fsched_mutex m;
    fsched_cond c;
    fsched_sema sm;
    fsched_sched *s;
    CHECK_RESULT(fsched_event_init(NULL, 0, 0), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_event_destroy(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_event_set(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_event_reset(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_event_wait(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_event_wait_for(NULL, MS), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK(fsched_event_is_set(NULL) == 0);

    CHECK_RESULT(fsched_wait_group_init(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_wait_group_destroy(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_wait_group_add(NULL, 1), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_wait_group_done(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_wait_group_wait(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_wait_group_wait_for(NULL, MS), FSCHED_ERR_INVALID_ARGUMENT);

    CHECK_RESULT(fsched_mutex_init(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_mutex_destroy(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_mutex_lock(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_mutex_lock_for(NULL, MS), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_mutex_try_lock(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_mutex_unlock(NULL), FSCHED_ERR_INVALID_ARGUMENT);

    CHECK_OK(fsched_mutex_init(&m));
    CHECK_OK(fsched_cond_init(&c));
    CHECK_RESULT(fsched_cond_init(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_cond_destroy(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_cond_wait(NULL, &m), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_cond_wait(&c, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_cond_wait_for(NULL, &m, MS), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_cond_wait_for(&c, NULL, MS), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_cond_signal(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_cond_broadcast(NULL), FSCHED_ERR_INVALID_ARGUMENT);

    CHECK_RESULT(fsched_sema_init(NULL, 1), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_sema_init(&sm, -1), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_sema_destroy(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_sema_acquire(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_sema_acquire_for(NULL, MS), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_sema_try_acquire(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_sema_release(NULL, 1), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_sema_init(&sm, 1));
    CHECK_RESULT(fsched_sema_release(&sm, -1), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_sema_try_acquire(&sm)); /* the count is still 1 */
    CHECK_RESULT(fsched_sema_try_acquire(&sm), FSCHED_ERR_TIMEOUT);
    CHECK_OK(fsched_sema_destroy(&sm));

    /* spawning: NULL scheduler, function or wait group */
    CHECK_OK(fsched_wait_group_init(&wg));
    s = sched_new();
    CHECK_RESULT(fsched_spawn(NULL, noop, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_spawn(s, NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    /* NULL data with a size; passed through a volatile so that GCC, when the library is
       static and inlined, does not warn about the memcpy that the call never reaches */
    CHECK_RESULT(fsched_spawn_copy(s, noop, no_data, 8), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_wait_group_spawn(NULL, s, noop, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_wait_group_spawn(&wg, NULL, noop, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_wait_group_spawn(&wg, s, NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_wait_group_wait_for(&wg, 0)); /* the refused spawns counted nothing */
    CHECK_OK(fsched_wait_group_destroy(&wg));
    sched_free(s);
    /* outside any scheduler: on the default scheduler (tests/test_default.c) */
    CHECK_OK(fsched_join(noop, NULL, noop, NULL));
    CHECK_RESULT(fsched_unbind(), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_cond_destroy(&c));
    CHECK_OK(fsched_mutex_destroy(&m));
}

/* Counts at the top of int64_t: a release or add that would pass INT64_MAX is refused,
   the count left as it was (it wrapped to a negative count, or overflowed a signed sum,
   before), and a spawn into a full wait group fails instead of counting a task that the
   group cannot hold. */
static void count_ran(void *arg) { ADD((int *)arg, 1); }

static void test_counts_at_the_top(void) {
    fsched_sema sm;
    fsched_wait_group wg;
    fsched_sched *s;
    int ran = 0;
    CHECK_OK(fsched_sema_init(&sm, 0));
    CHECK_OK(fsched_sema_release(&sm, INT64_MAX));
    CHECK_RESULT(fsched_sema_release(&sm, 1), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_sema_try_acquire(&sm)); /* the count is INT64_MAX - 1 */
    CHECK_OK(fsched_sema_release(&sm, 1));
    CHECK_RESULT(fsched_sema_release(&sm, INT64_MAX), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_sema_try_acquire(&sm));
    CHECK_OK(fsched_sema_destroy(&sm));

    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_add(&wg, 1));
    CHECK_RESULT(fsched_wait_group_add(&wg, INT64_MAX), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_OK(fsched_wait_group_add(&wg, INT64_MAX - 1));
    CHECK_RESULT(fsched_wait_group_add(&wg, 1), FSCHED_ERR_INVALID_ARGUMENT);
    s = sched_new();
    CHECK_RESULT(fsched_wait_group_spawn(&wg, s, count_ran, &ran), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_wait_group_wait_for(&wg, 0), FSCHED_ERR_TIMEOUT);
    CHECK_OK(fsched_wait_group_add(&wg, -INT64_MAX)); /* the count was INT64_MAX */
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, count_ran, &ran));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK(LOAD(&ran) == 1); /* the refused spawn ran nothing */
    CHECK_OK(fsched_wait_group_destroy(&wg));
    sched_free(s);
}

/* Every call on a destroyed primitive is refused with a code (never a hang on its lock
   word, never a wait that nothing ends), destroy twice included; init makes it live. */
static void test_use_after_destroy(void) {
    fsched_event e;
    fsched_wait_group wg;
    fsched_mutex m;
    fsched_cond c;
    fsched_sema sm;
    fsched_sched *s = sched_new();
    const fsched_result gone = FSCHED_ERR_INVALID_ARGUMENT;
    CHECK_OK(fsched_event_init(&e, 0, 1));
    CHECK_OK(fsched_event_destroy(&e));
    CHECK_RESULT(fsched_event_destroy(&e), gone);
    CHECK_RESULT(fsched_event_set(&e), gone);
    CHECK_RESULT(fsched_event_reset(&e), gone);
    CHECK_RESULT(fsched_event_wait(&e), gone);
    CHECK_RESULT(fsched_event_wait_for(&e, MS), gone);
    CHECK(fsched_event_is_set(&e) == 0);
    CHECK_OK(fsched_event_init(&e, 1, 1)); /* live again */
    CHECK_OK(fsched_event_wait(&e));
    CHECK_OK(fsched_event_destroy(&e));

    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_RESULT(fsched_wait_group_destroy(&wg), gone);
    CHECK_RESULT(fsched_wait_group_add(&wg, 1), gone);
    CHECK_RESULT(fsched_wait_group_done(&wg), gone);
    CHECK_RESULT(fsched_wait_group_wait(&wg), gone);
    CHECK_RESULT(fsched_wait_group_wait_for(&wg, MS), gone);
    CHECK_RESULT(fsched_wait_group_spawn(&wg, s, noop, NULL), gone);

    CHECK_OK(fsched_mutex_init(&m));
    CHECK_OK(fsched_cond_init(&c));
    CHECK_OK(fsched_cond_destroy(&c));
    CHECK_RESULT(fsched_cond_destroy(&c), gone);
    CHECK_RESULT(fsched_cond_signal(&c), gone);
    CHECK_RESULT(fsched_cond_broadcast(&c), gone);
    CHECK_OK(fsched_mutex_lock(&m));
    CHECK_RESULT(fsched_cond_wait(&c, &m), gone);
    CHECK_RESULT(fsched_cond_wait_for(&c, &m, MS), gone);
    CHECK_OK(fsched_mutex_unlock(&m)); /* still held: the refused waits did not unlock it */
    CHECK_OK(fsched_mutex_destroy(&m));
    CHECK_RESULT(fsched_mutex_destroy(&m), gone);
    CHECK_RESULT(fsched_mutex_lock(&m), gone);
    CHECK_RESULT(fsched_mutex_lock_for(&m, MS), gone);
    CHECK_RESULT(fsched_mutex_try_lock(&m), gone);
    CHECK_RESULT(fsched_mutex_unlock(&m), gone);
    CHECK_OK(fsched_cond_init(&c));
    CHECK_RESULT(fsched_cond_wait(&c, &m), gone); /* a live condition, a dead mutex */
    CHECK_OK(fsched_cond_destroy(&c));

    CHECK_OK(fsched_sema_init(&sm, 2));
    CHECK_OK(fsched_sema_destroy(&sm));
    CHECK_RESULT(fsched_sema_destroy(&sm), gone);
    CHECK_RESULT(fsched_sema_acquire(&sm), gone);
    CHECK_RESULT(fsched_sema_acquire_for(&sm, MS), gone);
    CHECK_RESULT(fsched_sema_try_acquire(&sm), gone);
    CHECK_RESULT(fsched_sema_release(&sm, 1), gone);
    sched_free(s);
}

/* ===================================================================================== */
/*  destroying a primitive that is waited on                                             */
/* ===================================================================================== */

#if TEST_THREADS
typedef struct blocked_ctx {
    fsched_sched *s;
    fsched_event e;
    fsched_sema sema;
    fsched_wait_group wg;
    fsched_mutex m, cm;
    fsched_cond c;
    int waiting, go; /* guarded by cm */
} blocked_ctx;

static void wait_event_thread(void *arg) {
    CHECK_OK(fsched_event_wait(&((blocked_ctx *)arg)->e));
}

static void acquire_thread(void *arg) {
    CHECK_OK(fsched_sema_acquire(&((blocked_ctx *)arg)->sema));
}

static void wait_group_thread(void *arg) {
    CHECK_OK(fsched_wait_group_wait(&((blocked_ctx *)arg)->wg));
}

static void lock_thread(void *arg) {
    blocked_ctx *x = (blocked_ctx *)arg;
    CHECK_OK(fsched_mutex_lock(&x->m));
    CHECK_OK(fsched_mutex_unlock(&x->m));
}

static void cond_body(blocked_ctx *x) {
    CHECK_OK(fsched_mutex_lock(&x->cm));
    x->waiting++;
    while (!x->go) CHECK_OK(fsched_cond_wait(&x->c, &x->cm));
    CHECK_OK(fsched_mutex_unlock(&x->cm));
}

static void cond_thread(void *arg) {
    cond_body((blocked_ctx *)arg);
}

static void cond_bound_thread(void *arg) {
    blocked_ctx *x = (blocked_ctx *)arg;
    CHECK_OK(fsched_bind(x->s));
    cond_body(x);
    CHECK_OK(fsched_unbind());
}

static void until_queued(const fsched_wait_list *l, uint32_t n) {
    while (queued_waiters(l) < n) fsched_sleep_for(100 * US);
}

/* Two plain threads woken together twice, queued first in one order, then in the other.
   A broadcast must not hold one waiter's lock while it takes the next one's: in that
   order and then the reverse, ThreadSanitizer sees a lock-order inversion. */
typedef struct {
    fsched_event e[2];
    int go[2][2];   /* go[round][thread]: queue now */
    int woken[2];   /* per thread: rounds it was woken in */
} either_order_ctx;

typedef struct {
    either_order_ctx *x;
    int me;
} either_order_arg;

static void either_order_thread(void *arg) {
    either_order_arg *a = (either_order_arg *)arg;
    int round;
    for (round = 0; round < 2; round++) {
        while (!LOAD(&a->x->go[round][a->me])) fsched_sleep_for(100 * US);
        CHECK_OK(fsched_event_wait(&a->x->e[round]));
        ADD(&a->x->woken[a->me], 1);
    }
}

static void test_wake_threads_in_either_order(void) {
    either_order_ctx x;
    either_order_arg a[2];
    test_thread t[2];
    int round, i;
    memset(&x, 0, sizeof x);
    for (i = 0; i < 2; i++) {
        CHECK_OK(fsched_event_init(&x.e[i], 1, 0)); /* manual reset: a set wakes all */
        a[i].x = &x;
        a[i].me = i;
        t[i] = thread_run(either_order_thread, &a[i]);
    }
    for (round = 0; round < 2; round++) {
        int first = round, second = 1 - round;
        STORE(&x.go[round][first], 1);
        until_queued(&x.e[round].waiters, 1);
        STORE(&x.go[round][second], 1);
        until_queued(&x.e[round].waiters, 2);
        CHECK_OK(fsched_event_set(&x.e[round]));
    }
    for (i = 0; i < 2; i++) thread_join(t[i]);
    CHECK(LOAD(&x.woken[0]) == 2 && LOAD(&x.woken[1]) == 2);
    for (i = 0; i < 2; i++) CHECK_OK(fsched_event_destroy(&x.e[i]));
}

/* A plain thread really asleep on a primitive: destroy refuses; once the thread is
   released and joined, destroy succeeds. */
static void test_destroy_waited_on(void) {
    blocked_ctx x;
    test_thread t, t2;
    memset(&x, 0, sizeof x);
    x.s = sched_new();

    CHECK_OK(fsched_event_init(&x.e, 0, 0));
    t = thread_run(wait_event_thread, &x);
    until_queued(&x.e.waiters, 1);
    CHECK_RESULT(fsched_event_destroy(&x.e), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_event_set(&x.e));
    thread_join(t);
    CHECK(!fsched_event_is_set(&x.e)); /* the waiter took the set */
    CHECK_OK(fsched_event_destroy(&x.e));

    CHECK_OK(fsched_sema_init(&x.sema, 0));
    t = thread_run(acquire_thread, &x);
    until_queued(&x.sema.waiters, 1);
    CHECK_RESULT(fsched_sema_destroy(&x.sema), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_sema_release(&x.sema, 1));
    thread_join(t);
    CHECK_RESULT(fsched_sema_try_acquire(&x.sema), FSCHED_ERR_TIMEOUT); /* handed over */
    CHECK_OK(fsched_sema_destroy(&x.sema));

    CHECK_OK(fsched_wait_group_init(&x.wg));
    CHECK_OK(fsched_wait_group_add(&x.wg, 1));
    t = thread_run(wait_group_thread, &x);
    until_queued(&x.wg.waiters, 1);
    CHECK_RESULT(fsched_wait_group_destroy(&x.wg), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_wait_group_done(&x.wg));
    thread_join(t);
    CHECK_OK(fsched_wait_group_destroy(&x.wg));

    CHECK_OK(fsched_mutex_init(&x.m));
    CHECK_OK(fsched_mutex_lock(&x.m));
    t = thread_run(lock_thread, &x);
    until_queued(&x.m.waiters, 1);
    CHECK_RESULT(fsched_mutex_destroy(&x.m), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_mutex_unlock(&x.m)); /* handed to the thread */
    thread_join(t);
    CHECK_OK(fsched_mutex_destroy(&x.m));

    /* a plain and a bound thread on a condition variable: cond_wait queues before it
       releases the mutex, so holding the mutex after they counted themselves is proof */
    CHECK_OK(fsched_mutex_init(&x.cm));
    CHECK_OK(fsched_cond_init(&x.c));
    t = thread_run(cond_thread, &x);
    t2 = thread_run(cond_bound_thread, &x);
    for (;;) {
        CHECK_OK(fsched_mutex_lock(&x.cm));
        if (x.waiting == 2) break;
        CHECK_OK(fsched_mutex_unlock(&x.cm));
        fsched_sleep_for(100 * US);
    }
    CHECK_RESULT(fsched_cond_destroy(&x.c), FSCHED_ERR_WRONG_STATE);
    x.go = 1;
    CHECK_OK(fsched_cond_broadcast(&x.c));
    CHECK_OK(fsched_mutex_unlock(&x.cm));
    thread_join(t);
    thread_join(t2);
    CHECK_OK(fsched_cond_destroy(&x.c));
    CHECK_OK(fsched_mutex_destroy(&x.cm));
    sched_free(x.s);
}
#endif

/* ===================================================================================== */
/*  a waiter may free the primitive as soon as its wait returns                          */
/* ===================================================================================== */

enum { FREE_WAIT_GROUP, FREE_MANUAL_EVENT, FREE_AUTO_EVENT, FREE_SEMA, FREE_MUTEX, FREE_KINDS };

typedef struct freed {
    int kind;
    int work_done; /* atomic: set by the task before it signals */
    fsched_wait_group wg;
    fsched_event e;
    fsched_sema sema;
    fsched_mutex m;
} freed;

static void freed_signal(void *arg) {
    freed *f = (freed *)arg;
    if (f->kind == FREE_MUTEX) {
        CHECK_OK(fsched_mutex_lock(&f->m)); /* handed over when the main thread unlocks */
        STORE(&f->work_done, 1);
        CHECK_OK(fsched_mutex_unlock(&f->m));
        return;
    }
    STORE(&f->work_done, 1);
    switch (f->kind) {
    case FREE_WAIT_GROUP: CHECK_OK(fsched_wait_group_done(&f->wg)); break;
    case FREE_MANUAL_EVENT:
    case FREE_AUTO_EVENT: CHECK_OK(fsched_event_set(&f->e)); break;
    default: CHECK_OK(fsched_sema_release(&f->sema, 1)); break;
    }
}

/* Waits for the task's signal, blocking or polling with a zero timeout. */
static void freed_wait(freed *f, int poll) {
    fsched_result r;
    for (;;) {
        switch (f->kind) {
        case FREE_WAIT_GROUP:
            r = poll ? fsched_wait_group_wait_for(&f->wg, 0) : fsched_wait_group_wait(&f->wg);
            break;
        case FREE_MANUAL_EVENT:
        case FREE_AUTO_EVENT:
            r = poll ? fsched_event_wait_for(&f->e, 0) : fsched_event_wait(&f->e);
            break;
        case FREE_SEMA:
            r = poll ? fsched_sema_try_acquire(&f->sema) : fsched_sema_acquire(&f->sema);
            break;
        default: /* the task gets the mutex when this thread lets go, sets the flag and
                    unlocks; this thread then takes the mutex once more */
            CHECK_OK(fsched_mutex_unlock(&f->m));
            while (!LOAD(&f->work_done)) fsched_yield();
            r = poll ? fsched_mutex_try_lock(&f->m) : fsched_mutex_lock(&f->m);
            while (r == FSCHED_ERR_TIMEOUT && poll) {
                fsched_yield();
                r = fsched_mutex_try_lock(&f->m);
            }
            CHECK_OK(r);
            CHECK_OK(fsched_mutex_unlock(&f->m));
        }
        if (r != FSCHED_ERR_TIMEOUT || !poll) break;
        fsched_yield();
    }
    CHECK_OK(r);
}

/* A primitive on the heap, signalled by a task while the main thread waits on it (its
   wait begins before, during or after the signal); the main thread destroys and frees
   it the moment the wait returns, as it may once destroy succeeds. The signalling call
   must not touch the primitive once the waiter can see the signal. */
static void test_free_after_wait(void) {
    fsched_sched *s = sched_new();
    int rounds = scaled(3000), kind, i;
    for (kind = 0; kind < FREE_KINDS; kind++) {
        for (i = 0; i < rounds; i++) {
            freed *f = (freed *)malloc(sizeof *f);
            volatile int spin;
            CHECK(f != NULL);
            memset(f, 0, sizeof *f);
            f->kind = kind;
            CHECK_OK(fsched_wait_group_init(&f->wg));
            CHECK_OK(fsched_event_init(&f->e, kind == FREE_MANUAL_EVENT, 0));
            CHECK_OK(fsched_sema_init(&f->sema, 0));
            CHECK_OK(fsched_mutex_init(&f->m));
            if (kind == FREE_WAIT_GROUP) CHECK_OK(fsched_wait_group_add(&f->wg, 1));
            if (kind == FREE_MUTEX) CHECK_OK(fsched_mutex_lock(&f->m));
            CHECK_OK(fsched_spawn(s, freed_signal, f));
            for (spin = 0; spin < (i % 64) * 16; spin++) { /* vary when the wait begins */
            }
            freed_wait(f, i % 4 == 0);
            CHECK(LOAD(&f->work_done));
            CHECK_OK(fsched_wait_group_destroy(&f->wg));
            CHECK_OK(fsched_event_destroy(&f->e));
            CHECK_OK(fsched_sema_destroy(&f->sema));
            CHECK_OK(fsched_mutex_destroy(&f->m));
            free(f);
        }
    }
    sched_free(s);
}

/* ===================================================================================== */
/*  single-threaded mode                                                                 */
/* ===================================================================================== */

typedef struct pipeline {
    fsched_mutex m;
    fsched_cond not_empty, not_full;
    int buf[2];
    int head, count, closed; /* guarded by m */
    int items, next_expected;
    int ran;                 /* tasks that started */
    int slot;                /* the worker index the tasks saw */
} pipeline;

static void pipeline_producer(void *arg) {
    pipeline *p = (pipeline *)arg;
    int i;
    p->ran++;
    CHECK(fsched_worker_index() == p->slot);
    for (i = 0; i < p->items; i++) {
        CHECK_OK(fsched_mutex_lock(&p->m));
        while (p->count == 2) CHECK_OK(fsched_cond_wait(&p->not_full, &p->m));
        p->buf[(p->head + p->count) % 2] = i;
        p->count++;
        CHECK_OK(fsched_cond_signal(&p->not_empty));
        CHECK_OK(fsched_mutex_unlock(&p->m));
    }
    CHECK_OK(fsched_mutex_lock(&p->m));
    p->closed = 1;
    CHECK_OK(fsched_cond_signal(&p->not_empty));
    CHECK_OK(fsched_mutex_unlock(&p->m));
}

static void pipeline_consumer(void *arg) {
    pipeline *p = (pipeline *)arg;
    p->ran++;
    CHECK(fsched_worker_index() == p->slot);
    CHECK_OK(fsched_mutex_lock(&p->m));
    for (;;) {
        while (p->count == 0 && !p->closed) CHECK_OK(fsched_cond_wait(&p->not_empty, &p->m));
        if (p->count == 0) break;
        CHECK(p->buf[p->head] == p->next_expected); /* one consumer: in order */
        p->next_expected++;
        p->head = (p->head + 1) % 2;
        p->count--;
        CHECK_OK(fsched_cond_signal(&p->not_full));
    }
    CHECK_OK(fsched_mutex_unlock(&p->m));
}

/* A producer and a consumer task over a condition variable: they run only while the
   bound main thread waits. */
static void single_pipeline(fsched_sched *s) {
    pipeline p;
    fsched_wait_group wg;
    memset(&p, 0, sizeof p);
    p.items = scaled(2000);
    p.slot = fsched_worker_index();
    CHECK_OK(fsched_mutex_init(&p.m));
    CHECK_OK(fsched_cond_init(&p.not_empty));
    CHECK_OK(fsched_cond_init(&p.not_full));
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, pipeline_consumer, &p));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, pipeline_producer, &p));
    CHECK(p.ran == 0); /* nothing runs until the thread waits */
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK(p.ran == 2 && p.next_expected == p.items && p.closed);
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_cond_destroy(&p.not_empty));
    CHECK_OK(fsched_cond_destroy(&p.not_full));
    CHECK_OK(fsched_mutex_destroy(&p.m));
}

typedef struct alternation {
    char log[256];
    int n, rounds;
} alternation;

static void alternate_a(void *arg) {
    alternation *a = (alternation *)arg;
    int i;
    for (i = 0; i < a->rounds; i++) {
        a->log[a->n++] = 'a';
        fsched_yield();
    }
}

static void alternate_b(void *arg) {
    alternation *a = (alternation *)arg;
    int i;
    for (i = 0; i < a->rounds; i++) {
        a->log[a->n++] = 'b';
        fsched_yield();
    }
}

/* A yield runs a queued task before the caller continues; two yielding tasks alternate. */
static void single_yield(fsched_sched *s) {
    int flag = 0, i;
    alternation a;
    fsched_wait_group wg;
    CHECK_OK(fsched_spawn(s, flag_setter, &flag));
    CHECK(flag == 0);
    fsched_yield();
    CHECK(flag == 1);

    memset(&a, 0, sizeof a);
    a.rounds = 100;
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, alternate_a, &a));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, alternate_b, &a));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK(a.n == 2 * a.rounds);
    for (i = 1; i < a.n; i++) CHECK(a.log[i] != a.log[i - 1]);
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

typedef struct fifo {
    fsched_mutex m;
    fsched_wait_group arrived;
    int next_arrival, n_acquired;
    int order[16]; /* arrival number of each acquisition, in acquisition order */
} fifo;

static void fifo_task(void *arg) {
    fifo *f = (fifo *)arg;
    int me = f->next_arrival++;
    CHECK_OK(fsched_wait_group_done(&f->arrived));
    CHECK_OK(fsched_mutex_lock(&f->m));
    f->order[f->n_acquired++] = me;
    CHECK_OK(fsched_mutex_unlock(&f->m));
}

/* Unlock hands the mutex to the longest waiter. */
static void single_mutex_fifo(fsched_sched *s) {
    fifo f;
    fsched_wait_group wg;
    int i;
    memset(&f, 0, sizeof f);
    CHECK_OK(fsched_mutex_init(&f.m));
    CHECK_OK(fsched_wait_group_init(&f.arrived));
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_mutex_lock(&f.m));
    CHECK_OK(fsched_wait_group_add(&f.arrived, 16));
    for (i = 0; i < 16; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, fifo_task, &f));
    /* the tasks run while this thread waits; each blocks on the mutex in turn, the last
       one before this thread resumes */
    CHECK_OK(fsched_wait_group_wait(&f.arrived));
    CHECK(f.next_arrival == 16 && f.n_acquired == 0);
    CHECK_OK(fsched_mutex_unlock(&f.m));
    CHECK_OK(fsched_wait_group_wait(&wg));
    for (i = 0; i < 16; i++) CHECK(f.order[i] == i);
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_wait_group_destroy(&f.arrived));
    CHECK_OK(fsched_mutex_destroy(&f.m));
}

typedef struct single_blocked {
    fsched_event e;
    fsched_sema sema;
    fsched_wait_group inner;
    fsched_mutex m, cm;
    fsched_cond c;
    int go;
} single_blocked;

static void sb_event(void *arg) {
    CHECK_OK(fsched_event_wait(&((single_blocked *)arg)->e));
}

static void sb_sema(void *arg) {
    CHECK_OK(fsched_sema_acquire(&((single_blocked *)arg)->sema));
}

static void sb_wait_group(void *arg) {
    CHECK_OK(fsched_wait_group_wait(&((single_blocked *)arg)->inner));
}

static void sb_mutex(void *arg) {
    single_blocked *b = (single_blocked *)arg;
    CHECK_OK(fsched_mutex_lock(&b->m));
    CHECK_OK(fsched_mutex_unlock(&b->m));
}

static void sb_cond(void *arg) {
    single_blocked *b = (single_blocked *)arg;
    CHECK_OK(fsched_mutex_lock(&b->cm));
    while (!b->go) CHECK_OK(fsched_cond_wait(&b->c, &b->cm));
    CHECK_OK(fsched_mutex_unlock(&b->cm));
}

/* A task blocked on each primitive (a yield runs it until it blocks): destroy refuses. */
static void single_destroy_waited_on(fsched_sched *s) {
    single_blocked b;
    fsched_wait_group wg;
    memset(&b, 0, sizeof b);
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_event_init(&b.e, 1, 0));
    CHECK_OK(fsched_sema_init(&b.sema, 0));
    CHECK_OK(fsched_wait_group_init(&b.inner));
    CHECK_OK(fsched_wait_group_add(&b.inner, 1));
    CHECK_OK(fsched_mutex_init(&b.m));
    CHECK_OK(fsched_mutex_init(&b.cm));
    CHECK_OK(fsched_cond_init(&b.c));
    CHECK_OK(fsched_mutex_lock(&b.m));

    CHECK_OK(fsched_wait_group_spawn(&wg, s, sb_event, &b));
    fsched_yield();
    CHECK_OK(fsched_wait_group_spawn(&wg, s, sb_sema, &b));
    fsched_yield();
    CHECK_OK(fsched_wait_group_spawn(&wg, s, sb_wait_group, &b));
    fsched_yield();
    CHECK_OK(fsched_wait_group_spawn(&wg, s, sb_mutex, &b));
    fsched_yield();
    CHECK_OK(fsched_wait_group_spawn(&wg, s, sb_cond, &b));
    fsched_yield();
    CHECK(queued_waiters(&b.e.waiters) == 1 && queued_waiters(&b.sema.waiters) == 1 &&
          queued_waiters(&b.inner.waiters) == 1 && queued_waiters(&b.m.waiters) == 1 &&
          queued_waiters(&b.c.waiters) == 1);
    CHECK_RESULT(fsched_event_destroy(&b.e), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_sema_destroy(&b.sema), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_wait_group_destroy(&b.inner), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_mutex_destroy(&b.m), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_cond_destroy(&b.c), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_wait_group_destroy(&wg), FSCHED_ERR_WRONG_STATE);

    CHECK_OK(fsched_event_set(&b.e));
    CHECK_OK(fsched_sema_release(&b.sema, 1));
    CHECK_OK(fsched_wait_group_done(&b.inner));
    CHECK_OK(fsched_mutex_unlock(&b.m));
    CHECK_OK(fsched_mutex_lock(&b.cm));
    b.go = 1;
    CHECK_OK(fsched_cond_signal(&b.c));
    CHECK_OK(fsched_mutex_unlock(&b.cm));
    CHECK_OK(fsched_wait_group_wait(&wg));

    CHECK_OK(fsched_event_destroy(&b.e));
    CHECK_OK(fsched_sema_destroy(&b.sema));
    CHECK_OK(fsched_wait_group_destroy(&b.inner));
    CHECK_OK(fsched_mutex_destroy(&b.m));
    CHECK_OK(fsched_cond_destroy(&b.c));
    CHECK_OK(fsched_mutex_destroy(&b.cm));
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

static void single_timed_task(void *arg) {
    fsched_event *e = (fsched_event *)arg;
    uint64_t start = fsched_clock_ns();
    CHECK_RESULT(fsched_event_wait_for(e, 3 * MS), FSCHED_ERR_TIMEOUT);
    CHECK_ELAPSED(start, 3 * MS);
    start = fsched_clock_ns();
    fsched_sleep_for(2 * MS);
    CHECK_ELAPSED(start, 2 * MS);
}

/* Timed waits of tasks and of the bound thread itself. */
static void single_timeouts(fsched_sched *s) {
    fsched_event e;
    fsched_wait_group wg;
    int i;
    uint64_t start;
    CHECK_OK(fsched_event_init(&e, 0, 0));
    CHECK_OK(fsched_wait_group_init(&wg));
    for (i = 0; i < 20; i++) CHECK_OK(fsched_wait_group_spawn(&wg, s, single_timed_task, &e));
    start = fsched_clock_ns();
    /* the tasks run while this thread waits */
    CHECK_RESULT(fsched_event_wait_for(&e, 4 * MS), FSCHED_ERR_TIMEOUT);
    CHECK_ELAPSED(start, 4 * MS);
    start = fsched_clock_ns();
    fsched_sleep_for(1 * MS);
    CHECK_ELAPSED(start, 1 * MS);
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_event_destroy(&e));
}

#if TEST_THREADS
typedef struct cross {
    fsched_sched *s;
    fsched_event e;
    fsched_wait_group wg;
    int counted; /* atomic */
} cross;

static void cross_count(void *arg) {
    ADD(&((cross *)arg)->counted, 1);
}

static void cross_waiter(void *arg) {
    CHECK_OK(fsched_event_wait(&((cross *)arg)->e));
    ADD(&((cross *)arg)->counted, 1);
}

static void cross_thread(void *arg) {
    cross *x = (cross *)arg;
    fsched_sleep_for(5 * MS); /* the bound thread is asleep by now, most likely */
    CHECK_OK(fsched_event_set(&x->e));
    fsched_sleep_for(5 * MS);
    CHECK_OK(fsched_wait_group_spawn(&x->wg, x->s, cross_count, x));
    CHECK_OK(fsched_wait_group_done(&x->wg));
}

/* Another thread wakes a task of the single-threaded scheduler and spawns into it. */
static void single_cross_thread(fsched_sched *s) {
    cross x;
    test_thread t;
    memset(&x, 0, sizeof x);
    x.s = s;
    CHECK_OK(fsched_event_init(&x.e, 0, 0));
    CHECK_OK(fsched_wait_group_init(&x.wg));
    CHECK_OK(fsched_wait_group_spawn(&x.wg, s, cross_waiter, &x));
    CHECK_OK(fsched_wait_group_add(&x.wg, 1)); /* the thread's part */
    t = thread_run(cross_thread, &x);
    CHECK_OK(fsched_wait_group_wait(&x.wg));
    thread_join(t);
    CHECK(LOAD(&x.counted) == 2);
    CHECK_OK(fsched_wait_group_destroy(&x.wg));
    CHECK_OK(fsched_event_destroy(&x.e));
}
#else
static void deadlocked_task(void *arg) {
    CHECK_OK(fsched_event_wait((fsched_event *)arg));
}

/* Without threads, a wait that nothing can end is refused instead of hanging. */
static void single_deadlock(fsched_sched *s) {
    fsched_event never, later;
    fsched_wait_group wg;
    uint64_t start;
    CHECK_OK(fsched_event_init(&never, 0, 0));
    CHECK_OK(fsched_event_init(&later, 1, 0));
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_RESULT(fsched_event_wait(&never), FSCHED_ERR_WRONG_STATE);
    start = fsched_clock_ns();
    CHECK_RESULT(fsched_event_wait_for(&never, 2 * MS), FSCHED_ERR_TIMEOUT); /* can end */
    CHECK_ELAPSED(start, 2 * MS);
    /* the thread waits for a task that waits for the thread */
    CHECK_OK(fsched_wait_group_spawn(&wg, s, deadlocked_task, &later));
    CHECK_RESULT(fsched_wait_group_wait(&wg), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_event_set(&later));
    CHECK_OK(fsched_wait_group_wait(&wg));
    /* the same thread unbound: no task can run at all */
    CHECK_OK(fsched_unbind());
    CHECK_RESULT(fsched_event_wait(&never), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_bind(s));
    CHECK_OK(fsched_wait_group_destroy(&wg));
    CHECK_OK(fsched_event_destroy(&never));
    CHECK_OK(fsched_event_destroy(&later));
}
#endif

static void test_single_threaded(void) {
    fsched_desc d;
    fsched_sched *s;
    test_desc_init(&d);
    d.single_threaded = 1;
    d.stack_size = stack_size;
    CHECK_OK(fsched_create(&d, &s));
    CHECK(fsched_worker_count(s) == 0);
    CHECK(fsched_current() == NULL);
    CHECK_OK(fsched_bind(s));
    CHECK(fsched_current() == s);
    CHECK(fsched_worker_index() == 0);
    CHECK_RESULT(fsched_bind(s), FSCHED_ERR_WRONG_STATE);
    single_pipeline(s);
    single_yield(s);
    single_mutex_fifo(s);
    single_destroy_waited_on(s);
    single_timeouts(s);
#if TEST_THREADS
    single_cross_thread(s);
#else
    single_deadlock(s);
#endif
    CHECK_OK(fsched_unbind());
    CHECK_RESULT(fsched_unbind(), FSCHED_ERR_WRONG_STATE);
    CHECK(fsched_current() == NULL);
    CHECK_OK(fsched_destroy(s));
}

/* ===================================================================================== */

typedef struct test_case {
    const char *name;
    void (*fn)(void);
} test_case;

static const test_case tests[] = {
    {"mutex_counter", test_mutex_counter},
    {"mutex_timeouts_and_misuse", test_mutex_timeouts_and_misuse},
    {"cond_queue", test_cond_queue},
    {"cond_signal_broadcast", test_cond_signal_broadcast},
    {"sema_resource", test_sema_resource},
    {"sema_release_wakes_n", test_sema_release_wakes_n},
    {"event_manual", test_event_manual},
    {"event_auto", test_event_auto},
    {"wait_group_counting", test_wait_group_counting},
    {"wait_group_tree", test_wait_group_tree},
    {"wait_group_scopes", test_wait_group_scopes},
    {"timeouts", test_timeouts},
    {"sleepers", test_sleepers},
    {"yield", test_yield},
    {"stress", test_stress},
    {"bad_input", test_bad_input},
    {"counts_at_the_top", test_counts_at_the_top},
    {"use_after_destroy", test_use_after_destroy},
#if TEST_THREADS
    {"wake_threads_in_either_order", test_wake_threads_in_either_order},
    {"destroy_waited_on", test_destroy_waited_on},
#endif
    {"free_after_wait", test_free_after_wait},
    {"single_threaded", test_single_threaded},
};

static int selected(const char *name, int argc, char **argv) {
    int i;
    if (argc < 2) return 1;
    for (i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return 1;
    return 0;
}

int main(int argc, char **argv) {
    size_t i;
    int ran = 0;
    if (test_under_valgrind()) {
        heavy = 0;
        late_slack = 20 * SEC;
    }
#if defined(FSCHED__ASAN) || defined(FSCHED__TSAN)
    stack_size = 256 * 1024;
#endif
#if defined(FIBERSCHED_TEST_BOARD)
    stack_size = 16 * 1024; /* dozens of blocked tasks in 4 MiB */
#endif
    test_watchdog(heavy ? 300 : 1800);
#if defined(FIBERSCHED_NO_OS) && !defined(FIBERSCHED_TEST_BOARD)
    (void)argc;
    (void)argv;
    (void)i;
    (void)ran;
    (void)tests;
    (void)selected;
    printf("test_sync: skipped (no clock without an operating system)\n");
    return TEST_SKIP;
#else
    for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
        uint64_t start;
        if (!selected(tests[i].name, argc, argv)) continue;
        printf("  %s ...", tests[i].name);
        fflush(stdout);
        start = fsched_clock_ns();
        tests[i].fn();
        printf(" %.0f ms\n", (double)(fsched_clock_ns() - start) / 1e6);
        fflush(stdout);
        ran++;
    }
    if (!ran) {
        fprintf(stderr, "test_sync: no test named so\n");
        return 2;
    }
    printf("test_sync: ok\n");
    return 0;
#endif
}
