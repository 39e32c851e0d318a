/* Fuzzes the scheduler's life and the synchronisation objects: a scheduler made from an
   odd desc (0 to 4 workers, single-threaded, tiny to huge stacks of every kind, a clock
   of its own, an allocator that fails on demand, worker start/stop hooks), then a
   sequence of operations, each run on the driving thread (plain or bound), in a task, a
   nested task, a plain thread, a start or stop hook or the poll hook: spawns, joins,
   spawn/sync trees, parallel loops, events, wait groups, mutexes, conditions,
   semaphores, sleeps and binds, with edge-value arguments and timeouts (0, 1, the
   largest), misuse (destroyed objects, a destroy from a task), and a destroy at any
   point. Every result is checked against the contract at the function's declaration;
   every task spawned must run exactly once; the scheduler must give back every byte it
   took from the allocator.

   Waits end: a rescuer thread sets the events, releases the semaphores, broadcasts the
   conditions and brings the wait group down once some actor has waited for long
   (FZ_RESCUE_MS), so that a wait that lasts longer than the watchdog's limit is a hang.

   An input whose first byte is FZ_MOVE_FORMAT makes tasks movable (desc.movable_tasks)
   and adds two operations: fsched_task_set_movable with edge values between waits, and
   a burst of movable tasks woken at once on one worker (which sheds them to idle ones);
   where they resume, the thread must be a slot of the scheduler, the count of moves
   never goes back, and every task still runs once. Any other input keeps its meaning.

   Input: a header (the desc), then operations of a few bytes each (see fz_op_read). */
#define _GNU_SOURCE
#include <limits.h>
#define FIBERSCHED_IMPLEMENTATION
#include "../../fibersched.h"
#include "fuzz.h"

#define FZ_OPS_MAX 48
#define FZ_THREADS_MAX 6
#define FZ_RESCUE_MS 20
#define FZ_MOVE_FORMAT 0x4D /* first byte of an input with movable tasks */

enum {
    OP_SPAWN, OP_SPAWN_TREE, OP_JOIN, OP_RUN, OP_PFOR, OP_REDUCE,
    OP_EV_SET, OP_EV_RESET, OP_EV_WAIT,
    OP_WG_ADD, OP_WG_DONE, OP_WG_WAIT, OP_WG_SPAWN,
    OP_MX_LOCK, OP_MX_LOCK_FOR, OP_MX_TRY,
    OP_CV_WAIT, OP_CV_SIGNAL, OP_CV_BROADCAST,
    OP_SEM_ACQUIRE, OP_SEM_RELEASE,
    OP_SLEEP, OP_YIELD, OP_BIND, OP_QUERY, OP_DESTROY_FROM_TASK, OP_SET_POLL,
    OP_SCRATCH, OP_DESTROY,
    OP_COUNT_PLAIN, /* the operations of inputs without FZ_MOVE_FORMAT */
    OP_MOVABLE = OP_COUNT_PLAIN, OP_MOVE_BURST,
    OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
    "spawn", "spawn tree", "join", "FSCHED_RUN", "parallel_for", "parallel_reduce",
    "event set", "event reset", "event wait",
    "wait group add", "wait group done", "wait group wait", "wait group spawn",
    "mutex lock", "mutex lock_for", "mutex try_lock",
    "cond wait", "cond signal", "cond broadcast",
    "sema acquire", "sema release",
    "sleep", "yield", "bind", "queries", "destroy from a task", "set_poll",
    "scratch objects", "destroy", "fsched_task_set_movable", "burst of movable tasks",
};

static int move_format; /* the input's: FZ_MOVE_FORMAT */

/* Where an operation runs. */
enum { CTX_MAIN, CTX_TASK, CTX_NESTED, CTX_THREAD, CTX_WG_TASK, CTX_POLL, CTX_COUNT };
#define FZ_WORKER_HOOK 2 /* fz_op.in_hook of a worker's start or stop hook */

typedef struct fz_op {
    uint8_t code, ctx, variant;
    uint32_t index;
    uint64_t x, t;
    int in_hook; /* a hook: no waiting (the poll hook's rule), timeouts 0; FZ_WORKER_HOOK:
                    a worker's start or stop hook */
} fz_op;

typedef struct world {
    fsched_sched *s;
    FZ_ATOMIC(int) destroyed;
    int single, failing, main_bound, pinned, unbind_at_end;
    uint32_t workers;
    fz_alloc_state alloc;
    fsched_allocator allocator;
    uint64_t clock_offset;
    int clock_pace; /* 0: the system clock; 1: offset; 2: twice as fast; 3: half as fast */

    fsched_event ev[2]; /* auto-reset, manual-reset */
    fsched_wait_group wg;
    FZ_ATOMIC(int64_t) wg_tally; /* what the operations added and not yet took back */
    FZ_ATOMIC(int64_t) wg_big_adds; /* adds of more than INT64_MAX / 2 begun, ever */
    fsched_mutex mx;
    fsched_cond cv;
    fsched_sema sem;
    FZ_ATOMIC(int64_t) sem_released;

    FZ_ATOMIC(uint64_t) spawned, ran; /* tasks spawned with FSCHED_OK, and run */
    FZ_ATOMIC(uint64_t) moved_seen;   /* the largest fibers_moved a finished call read */
    FZ_ATOMIC(int) actors;            /* operations under way elsewhere than the driver */
    FZ_ATOMIC(int) stop_rescuer;
    FZ_ATOMIC(uint64_t) waiting_since; /* an actor waits since (0: none) */
    FZ_ATOMIC(int) waits;              /* waits under way (the rescuer pokes until none) */

    fz_op hook_start, hook_stop;
    int have_hook_start, have_hook_stop;

    pthread_mutex_t poll_lock;
    fz_op poll_queue[FZ_OPS_MAX];
    int poll_head, poll_tail;
    int poll_installed;

    fz_thread threads[FZ_THREADS_MAX];
    int n_threads;
    fz_thread rescuer;
    fz_actor *driver;
} world;

static void run_op(world *w, const fz_op *op, int ctx);

/* ---- the scheduler's own clock ---- */

static uint64_t fz_clock(void *user) {
    world *w = (world *)user;
    uint64_t now = fz_now();
    switch (w->clock_pace) {
    case 2: return w->clock_offset + now * 2;
    case 3: return w->clock_offset + now / 2;
    default: return w->clock_offset + now;
    }
}

/* ---- where we are ---- */

/* fsched_destroy has begun (or has returned): calls on the scheduler may be refused. */
static int sched_gone(const world *w) { return w->destroyed; }

/* ---- tasks ---- */

static void leaf(void *arg) {
    world *w = (world *)arg;
    w->ran++;
}

static void leaf_copy(void *data) {
    world *w;
    memcpy(&w, data, sizeof w);
    w->ran++;
}

/* The codes a spawn onto w's scheduler may return, from here. */
#define EXPECT_SPAWN(r, what)                                                              \
    FZ_EXPECT(r, what, FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY, FSCHED_ERR_WRONG_STATE,        \
              FSCHED_ERR_INVALID_ARGUMENT)

static void count_spawn(world *w, fsched_result r) {
    if (r == FSCHED_OK) w->spawned++;
    /* a live scheduler that is not being destroyed refuses only for want of memory */
    if (r == FSCHED_ERR_INVALID_ARGUMENT) FZ_CHECK(sched_gone(w));
}

typedef struct tree_arg {
    world *w;
    int depth, width;
} tree_arg;

static void tree(void *p) {
    tree_arg *a = (tree_arg *)p;
    int i;
    a->w->ran++;
    if (a->depth > 0)
        for (i = 0; i < a->width; i++) {
            tree_arg child = {a->w, a->depth - 1, a->width};
            fsched_result r = fsched_spawn_copy(fsched_current(), tree, &child, sizeof child);
            EXPECT_SPAWN(r, "fsched_spawn_copy from a task");
            if (r == FSCHED_ERR_INVALID_ARGUMENT) FZ_CHECK(0); /* from a task: s is live */
            count_spawn(a->w, r);
        }
}

FSCHED_TASK(long, fz_fib, int, n) {
    long x, y;
    if (n < 2) return n;
    FSCHED_SPAWN(fz_fib, n - 1);
    y = FSCHED_CALL(fz_fib, n - 2);
    x = FSCHED_SYNC(fz_fib);
    return x + y;
}

/* Many children not yet synced at once. */
FSCHED_TASK(long, fz_wide, int, n) {
    long sum = 0;
    int i;
    if (n <= 0) return 1;
    for (i = 0; i < n; i++) FSCHED_SPAWN(fz_wide, 0);
    for (i = 0; i < n; i++) sum += FSCHED_SYNC(fz_wide);
    return sum;
}

static long fib_plain(int n) { return n < 2 ? n : fib_plain(n - 1) + fib_plain(n - 2); }

/* ---- loops ---- */

#define PFOR_MAX 600
typedef struct pfor_ctx {
    size_t begin;
    FZ_ATOMIC(uint8_t) seen[PFOR_MAX];
    FZ_ATOMIC(int) bad;
} pfor_ctx;

static void pfor_body(void *p, size_t lo, size_t hi) {
    pfor_ctx *c = (pfor_ctx *)p;
    size_t i;
    for (i = lo; i < hi; i++) {
        size_t k = i - c->begin;
        if (k >= PFOR_MAX || c->seen[k]++) c->bad = 1;
    }
}

/* Accumulators of `size` bytes (more than 256: allocated), the sum in the first 8. */
typedef struct red_ctx {
    size_t begin, size;
} red_ctx;

static void red_init(void *ctx, void *acc) { memset(acc, 0, ((red_ctx *)ctx)->size); }
static void red_body(void *ctx, size_t lo, size_t hi, void *acc) {
    size_t begin = ((red_ctx *)ctx)->begin;
    for (; lo < hi; lo++) *(uint64_t *)acc += lo - begin + 1;
}
static void red_combine(void *ctx, void *acc, const void *other) {
    (void)ctx;
    *(uint64_t *)acc += *(const uint64_t *)other;
}

/* ---- waits ---- */

/* Marks that an actor waits (the rescuer helps after a while), and checks how it ended:
   a wait without a deadline never times out; a hook's wait is a look (timeout 0). */
static void wait_begin(world *w) {
    uint64_t zero = 0;
    (void)zero;
    w->waits++;
    if (!w->waiting_since) w->waiting_since = fz_now();
}

/* A timed wait that nothing ends: it expires, or (a task's or bound thread's, whose timer
   list must grow) fails for want of memory while allocations fail. */
static void expect_expired(world *w, fsched_result r, const char *what) {
    FZ_EXPECT(r, what, FSCHED_ERR_TIMEOUT, FSCHED_ERR_OUT_OF_MEMORY);
    if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
}

static void expect_wait(world *w, fsched_result r, uint64_t t, int timed, const char *what) {
    w->waits--;
    if (!timed || fz_endless(t)) {
        FZ_EXPECT(r, what, FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
    } else {
        FZ_EXPECT(r, what, FSCHED_OK, FSCHED_ERR_TIMEOUT, FSCHED_ERR_OUT_OF_MEMORY);
    }
    if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
}

/* ---- the operations ---- */

static void op_spawn(world *w, const fz_op *op) {
    fsched_result r;
    static const size_t sizes[] = {0, 1, sizeof(void *), 63, 64, 65, 1000};
    switch (op->variant % 5) {
    case 0: r = fsched_spawn(w->s, leaf, w); break;
    case 1: {
        unsigned char buf[1000];
        size_t n = sizes[op->x % 7];
        if (n < sizeof w) n = sizeof w;
        memset(buf, 0xa5, sizeof buf);
        memcpy(buf, &w, sizeof w);
        r = fsched_spawn_copy(w->s, leaf_copy, buf, n);
        break;
    }
    case 2: r = fsched_spawn_named(w->s, leaf, w, op->x & 1 ? "named" : NULL); break;
    case 3:
        r = fsched_spawn(w->s, NULL, w);
        FZ_EXPECT(r, "fsched_spawn(NULL fn)", FSCHED_ERR_INVALID_ARGUMENT);
        return;
    default:
        r = fsched_spawn(NULL, leaf, w);
        FZ_EXPECT(r, "fsched_spawn(NULL scheduler)", FSCHED_ERR_INVALID_ARGUMENT);
        return;
    }
    EXPECT_SPAWN(r, "fsched_spawn");
    count_spawn(w, r);
    if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
}

static void op_spawn_tree(world *w, const fz_op *op) {
    tree_arg a = {w, (int)(op->x % 4), (int)(op->variant % 4) + 1};
    fsched_result r = fsched_spawn_copy(w->s, tree, &a, sizeof a);
    EXPECT_SPAWN(r, "fsched_spawn_copy(tree)");
    count_spawn(w, r);
}

static void join_side(void *p) { (*(FZ_ATOMIC(int) *)p)++; }

/* Whether a fork-join call may run where op runs: in a task or bound thread (on its
   scheduler) or a plain thread (on the default scheduler), not in a worker's start or
   stop hook, which must not wait. */
static int may_fork_join(const fz_op *op) {
    return fsched_current() != NULL || op->in_hook != FZ_WORKER_HOOK;
}

static void op_join(world *w, const fz_op *op) {
    (void)w;
    FZ_ATOMIC(int) a = 0, b = 0;
    int may = may_fork_join(op);
    fsched_result r;
    if (op->variant % 3 == 0) {
        r = fsched_join(NULL, NULL, join_side, &b);
        FZ_EXPECT(r, "fsched_join(NULL)", FSCHED_ERR_INVALID_ARGUMENT, FSCHED_ERR_WRONG_STATE);
        FZ_CHECK(b == 0);
        return;
    }
    r = fsched_join(join_side, &a, join_side, &b);
    if (may) FZ_EXPECT(r, "fsched_join", FSCHED_OK);
    else FZ_EXPECT(r, "fsched_join from a worker hook", FSCHED_ERR_WRONG_STATE);
    FZ_CHECK(r == FSCHED_OK ? a == 1 && b == 1 : a == 0 && b == 0);
}

static void op_run(world *w, const fz_op *op) {
    int may = may_fork_join(op);
    long got = -1;
    fsched_result r;
    (void)w;
    if (op->variant & 1) {
        int n = (int)(op->x % 17);
        r = FSCHED_RUN(fz_fib, n, &got);
        if (r == FSCHED_OK) FZ_CHECK(got == fib_plain(n));
    } else {
        int n = (int)(op->x % 200);
        r = FSCHED_RUN(fz_wide, n, &got);
        if (r == FSCHED_OK) FZ_CHECK(got == (n ? n : 1));
    }
    if (may) FZ_EXPECT(r, "FSCHED_RUN", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
    else FZ_EXPECT(r, "FSCHED_RUN from a worker hook", FSCHED_ERR_WRONG_STATE);
}

/* Ranges near the ends of size_t, empty and reversed ones, odd grains. */
static void pick_range(const fz_op *op, size_t *begin, size_t *end, size_t *grain) {
    static const size_t grains[] = {0, 1, 2, 7, 64, 1000, SIZE_MAX};
    size_t len = (size_t)(op->x % PFOR_MAX);
    switch (op->variant % 4) {
    case 0: *begin = 0; break;
    case 1: *begin = SIZE_MAX - len; break; /* ends at the very top */
    case 2: *begin = (size_t)op->x * 977u; break;
    default: *begin = 5; len = 0; break;
    }
    *end = *begin + len;
    if (op->variant & 0x40) { /* reversed: nothing to do */
        size_t t = *begin;
        *begin = *end;
        *end = t;
    }
    *grain = grains[(op->variant >> 2) % 7];
}

static void op_pfor(world *w, const fz_op *op) {
    pfor_ctx *c = (pfor_ctx *)calloc(1, sizeof *c);
    size_t begin, end, grain, i, expect;
    int may = may_fork_join(op);
    fsched_result r;
    (void)w;
    FZ_CHECK(c != NULL);
    pick_range(op, &begin, &end, &grain);
    c->begin = begin;
    r = fsched_parallel_for(begin, end, grain, pfor_body, c);
    if (end < begin)
        FZ_EXPECT(r, "fsched_parallel_for(end before begin)", FSCHED_ERR_INVALID_ARGUMENT);
    else if (may) FZ_EXPECT(r, "fsched_parallel_for", FSCHED_OK);
    else FZ_EXPECT(r, "fsched_parallel_for from a worker hook", FSCHED_ERR_WRONG_STATE);
    expect = r == FSCHED_OK && end > begin ? end - begin : 0;
    FZ_CHECK(!c->bad);
    for (i = 0; i < PFOR_MAX; i++) FZ_CHECK(c->seen[i] == (i < expect));
    free(c);
}

static void op_reduce(world *w, const fz_op *op) {
    size_t end, grain, n;
    red_ctx ctx;
    uint64_t result[40];
    int may = may_fork_join(op);
    fsched_result r;
    (void)w;
    pick_range(op, &ctx.begin, &end, &grain);
    ctx.size = op->x & 1 ? sizeof result : sizeof(uint64_t);
    memset(result, 0xee, sizeof result);
    r = fsched_parallel_reduce(ctx.begin, end, grain, ctx.size, red_init, red_body, red_combine,
                               &ctx, result);
    if (end < ctx.begin)
        FZ_EXPECT(r, "fsched_parallel_reduce(end before begin)", FSCHED_ERR_INVALID_ARGUMENT);
    else if (may) FZ_EXPECT(r, "fsched_parallel_reduce", FSCHED_OK);
    else FZ_EXPECT(r, "fsched_parallel_reduce from a worker hook", FSCHED_ERR_WRONG_STATE);
    if (r != FSCHED_OK) return;
    n = end > ctx.begin ? end - ctx.begin : 0;
    FZ_CHECK(result[0] == (uint64_t)n * (n + 1) / 2);
}

static void op_ev_wait(world *w, const fz_op *op) {
    fsched_event *e = &w->ev[op->variant & 1];
    int timed = (op->variant & 2) || op->in_hook;
    uint64_t t = op->in_hook ? 0 : op->t;
    fsched_result r;
    wait_begin(w);
    r = timed ? fsched_event_wait_for(e, t) : fsched_event_wait(e);
    expect_wait(w, r, t, timed, timed ? "fsched_event_wait_for" : "fsched_event_wait");
}

/* The wait group's count: the operations add and take back their own units only (the
   group's tasks hold theirs). */
static void op_wg_add(world *w, const fz_op *op) {
    static const int64_t amounts[] = {0, 1, 2, 1000, INT64_MAX, INT64_MAX - 1, -1, INT64_MIN};
    int64_t n = amounts[op->x % 8], mine;
    fsched_result r;
    if (n > 0) {
        if (n > INT64_MAX / 2) w->wg_big_adds += 1;
        r = fsched_wait_group_add(&w->wg, n);
        /* units the group does not have cannot overflow silently */
        FZ_EXPECT(r, "fsched_wait_group_add", FSCHED_OK, FSCHED_ERR_INVALID_ARGUMENT,
                  FSCHED_ERR_WRONG_STATE);
        if (r == FSCHED_OK) w->wg_tally += n;
        /* refused only near the top, where only a big add begun before can have taken
           the count (the count itself may be lower again by now: the rescuer takes the
           operations' units back at any moment) */
        if (r != FSCHED_OK) FZ_CHECK(n > 1000 || w->wg_big_adds > 0);
        return;
    }
    if (n == 0) {
        FZ_EXPECT(fsched_wait_group_add(&w->wg, 0), "fsched_wait_group_add(0)", FSCHED_OK);
        return;
    }
    /* take back one unit of ours, if there is one */
    mine = w->wg_tally;
    while (mine > 0 && !atomic_compare_exchange_weak(&w->wg_tally, &mine, mine - 1)) {
    }
    if (mine > 0) FZ_EXPECT(fsched_wait_group_add(&w->wg, -1), "fsched_wait_group_add(-1)", FSCHED_OK);
}

static void op_wg_done(world *w, const fz_op *op) {
    int64_t mine = w->wg_tally;
    (void)op;
    while (mine > 0 && !atomic_compare_exchange_weak(&w->wg_tally, &mine, mine - 1)) {
    }
    if (mine > 0) FZ_EXPECT(fsched_wait_group_done(&w->wg), "fsched_wait_group_done", FSCHED_OK);
}

static void op_wg_wait(world *w, const fz_op *op) {
    int timed = (op->variant & 1) || op->in_hook;
    uint64_t t = op->in_hook ? 0 : op->t;
    fsched_result r;
    wait_begin(w);
    r = timed ? fsched_wait_group_wait_for(&w->wg, t) : fsched_wait_group_wait(&w->wg);
    expect_wait(w, r, t, timed, "fsched_wait_group_wait");
}

static void op_wg_spawn(world *w, const fz_op *op) {
    fsched_result r = op->variant & 1 ? fsched_wait_group_spawn(&w->wg, w->s, leaf, w)
                                      : fsched_wait_group_spawn_named(&w->wg, w->s, leaf, w, "wg");
    EXPECT_SPAWN(r, "fsched_wait_group_spawn");
    if (r == FSCHED_ERR_INVALID_ARGUMENT && !sched_gone(w)) /* the group's count is full */
        FZ_CHECK(__atomic_load_n(&w->wg.count, __ATOMIC_RELAXED) > INT64_MAX / 2);
    else
        count_spawn(w, r);
}

static void hold_briefly(const fz_op *op) {
    if (op->in_hook) return;
    switch (op->variant % 4) {
    case 0: break;
    case 1: fsched_yield(); break;
    case 2: fsched_sleep_for(20 * FZ_US); break;
    default: fz_nap(10 * FZ_US); break;
    }
}

static void op_mutex(world *w, const fz_op *op) {
    fsched_result r;
    if (op->in_hook || op->code == OP_MX_TRY) {
        r = fsched_mutex_try_lock(&w->mx);
        FZ_EXPECT(r, "fsched_mutex_try_lock", FSCHED_OK, FSCHED_ERR_TIMEOUT);
    } else if (op->code == OP_MX_LOCK) {
        wait_begin(w);
        r = fsched_mutex_lock(&w->mx);
        expect_wait(w, r, 0, 0, "fsched_mutex_lock");
    } else {
        wait_begin(w);
        r = fsched_mutex_lock_for(&w->mx, op->t);
        expect_wait(w, r, op->t, 1, "fsched_mutex_lock_for");
    }
    if (r != FSCHED_OK) return;
    hold_briefly(op);
    FZ_EXPECT(fsched_mutex_unlock(&w->mx), "fsched_mutex_unlock", FSCHED_OK);
}

static void op_cv_wait(world *w, const fz_op *op) {
    int timed = op->variant & 1;
    fsched_result r;
    if (op->in_hook) return; /* it would wait */
    wait_begin(w);
    r = fsched_mutex_lock(&w->mx);
    expect_wait(w, r, 0, 0, "fsched_mutex_lock");
    if (r != FSCHED_OK) return;
    wait_begin(w);
    r = timed ? fsched_cond_wait_for(&w->cv, &w->mx, op->t) : fsched_cond_wait(&w->cv, &w->mx);
    expect_wait(w, r, op->t, timed, "fsched_cond_wait");
    /* the mutex is held again, also after a timeout; not after a failure for want of
       memory (a timer, or a wait without a fiber that gave up) */
    if (r == FSCHED_ERR_OUT_OF_MEMORY) return;
    FZ_EXPECT(fsched_mutex_unlock(&w->mx), "fsched_mutex_unlock after a cond wait", FSCHED_OK);
}

static void op_sem_acquire(world *w, const fz_op *op) {
    fsched_result r;
    if (op->in_hook || op->variant % 3 == 0) {
        r = fsched_sema_try_acquire(&w->sem);
        FZ_EXPECT(r, "fsched_sema_try_acquire", FSCHED_OK, FSCHED_ERR_TIMEOUT);
        return;
    }
    wait_begin(w);
    if (op->variant % 3 == 1) {
        r = fsched_sema_acquire(&w->sem);
        expect_wait(w, r, 0, 0, "fsched_sema_acquire");
    } else {
        r = fsched_sema_acquire_for(&w->sem, op->t);
        expect_wait(w, r, op->t, 1, "fsched_sema_acquire_for");
    }
}

static void op_sem_release(world *w, const fz_op *op) {
    static const int64_t amounts[] = {0, 1, 2, 5, -1, INT64_MIN, INT64_MAX, INT64_MAX / 2 + 1};
    int64_t n = amounts[op->x % 8];
    fsched_result r = fsched_sema_release(&w->sem, n);
    if (n < 0) FZ_EXPECT(r, "fsched_sema_release(negative)", FSCHED_ERR_INVALID_ARGUMENT);
    else FZ_EXPECT(r, "fsched_sema_release", FSCHED_OK, FSCHED_ERR_INVALID_ARGUMENT);
    /* overflow only: a large release, or a count an earlier one left near the top */
    if (r == FSCHED_ERR_INVALID_ARGUMENT && n >= 0)
        FZ_CHECK(n > 1000 || __atomic_load_n(&w->sem.count, __ATOMIC_RELAXED) > INT64_MAX / 2);
}

static void op_sleep(world *w, const fz_op *op) {
    uint64_t t0 = fz_now();
    (void)w;
    if (op->in_hook || fz_endless(op->t)) return; /* a sleep that would never end */
    fsched_sleep_for(op->t);
    /* never early (the scheduler's clock may be another one, but it is not slower than
       half the system's) */
    FZ_CHECK(fz_now() - t0 >= (w->clock_pace == 2 ? op->t / 2 : op->t));
}

static void op_bind(world *w, const fz_op *op) {
    fsched_result r;
    (void)op;
    if (fsched_current() != NULL) { /* a task, worker or bound thread */
        r = fsched_bind(w->s);
        FZ_EXPECT(r, "fsched_bind from a thread that works for a scheduler",
                  FSCHED_ERR_WRONG_STATE, FSCHED_ERR_INVALID_ARGUMENT);
        FZ_EXPECT(fsched_unbind(), "fsched_unbind from a task", FSCHED_ERR_WRONG_STATE);
        return;
    }
    FZ_EXPECT(fsched_unbind(), "fsched_unbind when not bound", FSCHED_ERR_WRONG_STATE);
    r = fsched_bind(w->s);
    FZ_EXPECT(r, "fsched_bind", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY, FSCHED_ERR_WRONG_STATE,
              FSCHED_ERR_INVALID_ARGUMENT);
    if (r == FSCHED_ERR_INVALID_ARGUMENT) FZ_CHECK(sched_gone(w));
    if (r != FSCHED_OK) return;
    FZ_CHECK(fsched_current() == w->s);
    FZ_CHECK(fsched_worker_index() >= (int)w->workers);
    fsched_yield();
    fsched_sleep_for(10 * FZ_US); /* runs queued tasks meanwhile */
    FZ_EXPECT(fsched_unbind(), "fsched_unbind", FSCHED_OK);
    FZ_CHECK(fsched_current() == NULL && fsched_worker_index() == -1);
}

static void op_query(world *w, const fz_op *op) {
    fsched_stats st;
    uint64_t moved_before = w->moved_seen;
    fsched_result r = fsched_get_stats(w->s, &st);
    int idx = fsched_worker_index();
    (void)op;
    if (r == FSCHED_OK) { /* moves are counted once each: the count never goes back */
        uint64_t seen = w->moved_seen;
        FZ_CHECK(st.fibers_moved >= moved_before);
        while (st.fibers_moved > seen &&
               !atomic_compare_exchange_weak(&w->moved_seen, &seen, st.fibers_moved)) {
        }
        if (!w->s || !move_format) FZ_CHECK(st.fibers_moved == 0);
    }
    if (sched_gone(w)) {
        FZ_EXPECT(r, "fsched_get_stats after destroy", FSCHED_OK, FSCHED_ERR_INVALID_ARGUMENT);
    } else {
        FZ_EXPECT(r, "fsched_get_stats", FSCHED_OK, FSCHED_ERR_INVALID_ARGUMENT);
    }
    FZ_EXPECT(fsched_get_stats(w->s, NULL), "fsched_get_stats(NULL out)",
              FSCHED_ERR_INVALID_ARGUMENT);
    FZ_EXPECT(fsched_get_stats(NULL, &st), "fsched_get_stats(NULL)", FSCHED_ERR_INVALID_ARGUMENT);
    if (fsched_current() == NULL) FZ_CHECK(idx == -1);
    else FZ_CHECK(idx >= 0);
    if (!sched_gone(w) && fsched_current() == w->s)
        FZ_CHECK(fsched_worker_count(w->s) == (w->single ? 0 : w->workers));
    FZ_CHECK(fsched_worker_count(NULL) == 0);
    FZ_CHECK(fsched_result_string((fsched_result)op->x) != NULL);
    (void)fsched_clock_ns();
}

static void op_destroy_from_task(world *w, const fz_op *op) {
    if (fsched_current() == w->s && fsched_worker_index() < (int)w->workers) {
        /* a task or poll hook of s: refused, destroying nothing */
        FZ_EXPECT(fsched_destroy(w->s), "fsched_destroy from a task", FSCHED_ERR_WRONG_STATE);
    } else if (op->in_hook == FZ_WORKER_HOOK) {
        FZ_EXPECT(fsched_destroy(w->s), "fsched_destroy from a worker hook", FSCHED_ERR_WRONG_STATE);
    }
    FZ_EXPECT(fsched_destroy(NULL), "fsched_destroy(NULL)", FSCHED_OK);
}

/* ---- movable tasks (inputs with FZ_MOVE_FORMAT) ---- */

static const int movable_values[] = {0, 1, 2, -1, INT_MIN, INT_MAX};

/* Where a task resumed: a slot of w's scheduler. */
static void check_resumed(const world *w) {
    FZ_CHECK(fsched_current() == w->s);
    FZ_CHECK(fsched_worker_index() >= 0);
}

/* fsched_task_set_movable with edge values, toggled between waits that may move the task:
   refused everywhere but in a task the loop runs. */
static void op_movable(world *w, const fz_op *op, int ctx) {
    int k, rounds = 1 + op->x % 4;
    uint64_t t = fz_endless(op->t) ? 1000u : op->t % 100000000u; /* at most 0.1 s */
    for (k = 0; k < rounds; k++) {
        int value = movable_values[(op->variant + k) % 6];
        fsched_result r = fsched_task_set_movable(value);
        if (ctx != CTX_TASK || op->in_hook) {
            FZ_EXPECT(r, "fsched_task_set_movable outside a task", FSCHED_ERR_WRONG_STATE);
            return;
        }
        /* a task; nested by a wait for want of a fiber, or a group's leased task: refused */
        FZ_EXPECT(r, "fsched_task_set_movable from a task", FSCHED_OK, FSCHED_ERR_WRONG_STATE);
        if (r == FSCHED_ERR_WRONG_STATE) return;
        if (fsched_current() != w->s) return; /* (a task of the scheduler: cannot be) */
        switch ((op->variant >> 3) % 4) {
        case 0: fsched_sleep_for(t); break;
        case 1:
            wait_begin(w);
            expect_wait(w, fsched_event_wait_for(&w->ev[0], t), t, 1,
                        "fsched_event_wait_for (movable)");
            break;
        case 2:
            wait_begin(w);
            r = fsched_mutex_lock(&w->mx);
            expect_wait(w, r, 0, 0, "fsched_mutex_lock (movable)");
            if (r != FSCHED_OK) break;
            fsched_yield();
            FZ_EXPECT(fsched_mutex_unlock(&w->mx), "fsched_mutex_unlock (movable)", FSCHED_OK);
            break;
        default: fsched_yield(); break;
        }
        check_resumed(w);
    }
}

/* A burst: movable tasks that block on one event, all woken at once where they blocked
   (their worker sheds the newer half to idle ones), each waking the next round's
   partner twice over, sleeping and locking between; the last one out frees the burst. */
#define BURST_MAX 24
typedef struct burst {
    world *w;
    fsched_event go;
    FZ_ATOMIC(int) left;
    FZ_ATOMIC(int) arrived; /* tasks at their first wait */
    int tasks, rounds;
    uint64_t sleep_ns;
    uint64_t work_ns; /* computed after each wake: a backlog forms where they woke */
} burst;

static void burst_task(void *p) {
    burst *b = (burst *)p;
    world *w = b->w;
    int r;
    w->ran++;
    for (r = 0; r < b->rounds; r++) {
        uint64_t until;
        fsched_result e;
        if (r == 0) b->arrived++;
        wait_begin(w);
        e = fsched_event_wait(&b->go);
        expect_wait(w, e, 0, 0, "fsched_event_wait (burst)");
        check_resumed(w);
        until = fz_now() + b->work_ns;
        while (fz_now() < until) {
        }
        if (r % 2) fsched_sleep_for(b->sleep_ns);
        else if (fsched_task_set_movable(r % 4 != 2) != FSCHED_OK)
            FZ_CHECK(w->failing); /* run nested by a wait, for want of a fiber */
        wait_begin(w);
        e = fsched_mutex_lock(&w->mx);
        expect_wait(w, e, 0, 0, "fsched_mutex_lock (burst)");
        if (e == FSCHED_OK)
            FZ_EXPECT(fsched_mutex_unlock(&w->mx), "fsched_mutex_unlock (burst)", FSCHED_OK);
        check_resumed(w);
    }
    if (--b->left == 0) {
        FZ_EXPECT(fsched_event_destroy(&b->go), "fsched_event_destroy (burst)", FSCHED_OK);
        free(b);
    }
}

static void op_move_burst(world *w, const fz_op *op) {
    burst *b;
    int i, started = 0;
    if (sched_gone(w) || op->in_hook) return;
    b = (burst *)calloc(1, sizeof *b);
    FZ_CHECK(b != NULL);
    b->w = w;
    b->tasks = 2 + op->x % (BURST_MAX - 1);
    b->rounds = 1 + op->variant % 4;
    b->sleep_ns = (op->variant >> 2) % 2 ? 0 : 1000;
    b->work_ns = (uint64_t[]){0, 20000, 100000, 5000}[(op->variant >> 3) % 4];
    FZ_EXPECT(fsched_event_init(&b->go, 1, 0), "fsched_event_init (burst)", FSCHED_OK);
    b->left = b->tasks + 1; /* and this call's hold */
    for (i = 0; i < b->tasks; i++) {
        fsched_result r = fsched_spawn(w->s, burst_task, b);
        EXPECT_SPAWN(r, "fsched_spawn (burst)");
        count_spawn(w, r);
        if (r == FSCHED_OK) started++;
        else b->left--;
    }
    /* once they wait (for 50 ms at most: a worker may be held by another operation), all
       woken at once. Manual reset, set for good: every later wait of every task passes
       (a reset between rounds could strand a task that has not come to its wait). */
    {
        uint64_t until = fz_now() + 50 * FZ_MS;
        while (b->arrived < started && fz_now() < until) fsched_sleep_for(100000);
    }
    FZ_EXPECT(fsched_event_set(&b->go), "fsched_event_set (burst)", FSCHED_OK);
    if (--b->left == 0) {
        FZ_EXPECT(fsched_event_destroy(&b->go), "fsched_event_destroy (burst)", FSCHED_OK);
        free(b);
    }
}

/* ---- the poll hook ---- */

static int poll_hook(void *user) {
    world *w = (world *)user;
    fz_op op;
    int more;
    pthread_mutex_lock(&w->poll_lock);
    if (w->poll_head == w->poll_tail) {
        pthread_mutex_unlock(&w->poll_lock);
        return 0;
    }
    op = w->poll_queue[w->poll_head++ % FZ_OPS_MAX];
    pthread_mutex_unlock(&w->poll_lock);
    op.in_hook = 1;
    run_op(w, &op, CTX_POLL);
    w->actors--;
    pthread_mutex_lock(&w->poll_lock);
    more = w->poll_head != w->poll_tail;
    pthread_mutex_unlock(&w->poll_lock);
    return more;
}

static void op_set_poll(world *w, const fz_op *op) {
    static const uint64_t intervals[] = {0, 1, 1000, 50 * FZ_US, FZ_MS, 1ull << 40};
    fsched_result r;
    int install = !(op->variant & 1) || !op->in_hook;
    r = fsched_set_poll(w->s, install ? poll_hook : NULL, w, intervals[op->x % 6]);
    if (sched_gone(w)) FZ_EXPECT(r, "fsched_set_poll after destroy", FSCHED_OK,
                                 FSCHED_ERR_INVALID_ARGUMENT);
    else FZ_EXPECT(r, "fsched_set_poll", FSCHED_OK, FSCHED_ERR_INVALID_ARGUMENT);
    if (r == FSCHED_OK && !sched_gone(w)) w->poll_installed = install;
}

/* ---- objects of the driving thread alone: init, destroy, use after destroy ---- */

static void op_scratch(world *w, const fz_op *op) {
    fsched_event e;
    fsched_wait_group g;
    fsched_mutex m;
    fsched_cond c;
    fsched_sema s;
    fsched_result r;
    (void)w;
    FZ_EXPECT(fsched_event_init(&e, op->x & 1, op->x & 2), "fsched_event_init", FSCHED_OK);
    FZ_CHECK(fsched_event_is_set(&e) == !!(op->x & 2));
    FZ_EXPECT(fsched_event_wait_for(&e, 0), "fsched_event_wait_for(0)",
              op->x & 2 ? FSCHED_OK : FSCHED_ERR_TIMEOUT);
    FZ_EXPECT(fsched_event_destroy(&e), "fsched_event_destroy", FSCHED_OK);
    FZ_EXPECT(fsched_event_destroy(&e), "fsched_event_destroy twice", FSCHED_ERR_INVALID_ARGUMENT);
    FZ_EXPECT(fsched_event_set(&e), "fsched_event_set after destroy", FSCHED_ERR_INVALID_ARGUMENT);
    FZ_EXPECT(fsched_event_wait(&e), "fsched_event_wait after destroy", FSCHED_ERR_INVALID_ARGUMENT);
    FZ_CHECK(!fsched_event_is_set(&e));
    FZ_CHECK(!fsched_event_is_set(NULL));
    FZ_EXPECT(fsched_event_init(NULL, 0, 0), "fsched_event_init(NULL)", FSCHED_ERR_INVALID_ARGUMENT);

    FZ_EXPECT(fsched_wait_group_init(&g), "fsched_wait_group_init", FSCHED_OK);
    FZ_EXPECT(fsched_wait_group_add(&g, -1), "fsched_wait_group_add below zero",
              FSCHED_ERR_WRONG_STATE);
    FZ_EXPECT(fsched_wait_group_done(&g), "fsched_wait_group_done at zero", FSCHED_ERR_WRONG_STATE);
    FZ_EXPECT(fsched_wait_group_add(&g, (int64_t)(op->x % 3)), "fsched_wait_group_add", FSCHED_OK);
    FZ_EXPECT(fsched_wait_group_wait_for(&g, 0), "fsched_wait_group_wait_for(0)",
              op->x % 3 ? FSCHED_ERR_TIMEOUT : FSCHED_OK);
    if (op->x % 3) {
        FZ_EXPECT(fsched_wait_group_destroy(&g), "fsched_wait_group_destroy while counted",
                  FSCHED_ERR_WRONG_STATE);
        FZ_EXPECT(fsched_wait_group_add(&g, -(int64_t)(op->x % 3)), "fsched_wait_group_add", FSCHED_OK);
    }
    FZ_EXPECT(fsched_wait_group_wait(&g), "fsched_wait_group_wait at zero", FSCHED_OK);
    FZ_EXPECT(fsched_wait_group_destroy(&g), "fsched_wait_group_destroy", FSCHED_OK);
    FZ_EXPECT(fsched_wait_group_add(&g, 1), "fsched_wait_group_add after destroy",
              FSCHED_ERR_INVALID_ARGUMENT);
    FZ_EXPECT(fsched_wait_group_wait(&g), "fsched_wait_group_wait after destroy",
              FSCHED_ERR_INVALID_ARGUMENT);

    FZ_EXPECT(fsched_mutex_init(&m), "fsched_mutex_init", FSCHED_OK);
    FZ_EXPECT(fsched_mutex_unlock(&m), "fsched_mutex_unlock unlocked", FSCHED_ERR_WRONG_STATE);
    FZ_EXPECT(fsched_mutex_try_lock(&m), "fsched_mutex_try_lock", FSCHED_OK);
    FZ_EXPECT(fsched_mutex_try_lock(&m), "fsched_mutex_try_lock held", FSCHED_ERR_TIMEOUT);
    expect_expired(w, fsched_mutex_lock_for(&m, op->t % (2 * FZ_MS)), "fsched_mutex_lock_for held");
    FZ_EXPECT(fsched_mutex_destroy(&m), "fsched_mutex_destroy locked", FSCHED_ERR_WRONG_STATE);
    FZ_EXPECT(fsched_cond_init(&c), "fsched_cond_init", FSCHED_OK);
    r = fsched_cond_wait_for(&c, &m, op->t % (2 * FZ_MS));
    expect_expired(w, r, "fsched_cond_wait_for");
    if (r == FSCHED_ERR_OUT_OF_MEMORY) /* returned without the mutex, which nobody else takes */
        FZ_EXPECT(fsched_mutex_try_lock(&m), "fsched_mutex_try_lock after out of memory", FSCHED_OK);
    FZ_EXPECT(fsched_cond_signal(&c), "fsched_cond_signal", FSCHED_OK);
    FZ_EXPECT(fsched_mutex_unlock(&m), "fsched_mutex_unlock", FSCHED_OK);
    FZ_EXPECT(fsched_cond_wait_for(&c, &m, 1), "fsched_cond_wait_for without the mutex",
              FSCHED_ERR_WRONG_STATE);
    FZ_EXPECT(fsched_mutex_destroy(&m), "fsched_mutex_destroy", FSCHED_OK);
    FZ_EXPECT(fsched_mutex_lock(&m), "fsched_mutex_lock after destroy", FSCHED_ERR_INVALID_ARGUMENT);
    FZ_EXPECT(fsched_mutex_unlock(&m), "fsched_mutex_unlock after destroy",
              FSCHED_ERR_INVALID_ARGUMENT);
    FZ_EXPECT(fsched_cond_wait(&c, &m), "fsched_cond_wait, mutex destroyed",
              FSCHED_ERR_INVALID_ARGUMENT);
    FZ_EXPECT(fsched_cond_destroy(&c), "fsched_cond_destroy", FSCHED_OK);
    FZ_EXPECT(fsched_cond_broadcast(&c), "fsched_cond_broadcast after destroy",
              FSCHED_ERR_INVALID_ARGUMENT);

    FZ_EXPECT(fsched_sema_init(&s, -1), "fsched_sema_init(-1)", FSCHED_ERR_INVALID_ARGUMENT);
    FZ_EXPECT(fsched_sema_init(&s, (int64_t)(op->x % 2)), "fsched_sema_init", FSCHED_OK);
    if (op->x % 2)
        FZ_EXPECT(fsched_sema_acquire_for(&s, op->t % (2 * FZ_MS)), "fsched_sema_acquire_for",
                  FSCHED_OK);
    else
        expect_expired(w, fsched_sema_acquire_for(&s, op->t % (2 * FZ_MS)), "fsched_sema_acquire_for");
    FZ_EXPECT(fsched_sema_try_acquire(&s), "fsched_sema_try_acquire at zero", FSCHED_ERR_TIMEOUT);
    FZ_EXPECT(fsched_sema_release(&s, INT64_MAX), "fsched_sema_release(INT64_MAX)", FSCHED_OK);
    FZ_EXPECT(fsched_sema_release(&s, 1), "fsched_sema_release past INT64_MAX",
              FSCHED_ERR_INVALID_ARGUMENT);
    FZ_EXPECT(fsched_sema_try_acquire(&s), "fsched_sema_try_acquire", FSCHED_OK);
    FZ_EXPECT(fsched_sema_destroy(&s), "fsched_sema_destroy", FSCHED_OK);
    FZ_EXPECT(fsched_sema_release(&s, 1), "fsched_sema_release after destroy",
              FSCHED_ERR_INVALID_ARGUMENT);
    FZ_EXPECT(fsched_sema_try_acquire(&s), "fsched_sema_try_acquire after destroy",
              FSCHED_ERR_INVALID_ARGUMENT);
}

/* ---- the rescuer, and destroying the scheduler ---- */

/* Ends every wait the operations may be in: sets the events, releases the semaphore,
   wakes the condition's waiters, takes the operations' units out of the wait group. */
static void poke(world *w) {
    int64_t mine = w->wg_tally;
    FZ_EXPECT(fsched_event_set(&w->ev[0]), "fsched_event_set", FSCHED_OK);
    FZ_EXPECT(fsched_event_set(&w->ev[1]), "fsched_event_set", FSCHED_OK);
    FZ_EXPECT(fsched_cond_broadcast(&w->cv), "fsched_cond_broadcast", FSCHED_OK);
    if (__atomic_load_n(&w->sem.count, __ATOMIC_RELAXED) <= 0) FZ_EXPECT(fsched_sema_release(&w->sem, 2), "fsched_sema_release", FSCHED_OK);
    while (mine > 0 && !atomic_compare_exchange_weak(&w->wg_tally, &mine, 0)) {
    }
    if (mine > 0) FZ_EXPECT(fsched_wait_group_add(&w->wg, -mine), "fsched_wait_group_add", FSCHED_OK);
}

static void *rescuer_main(void *p) {
    world *w = (world *)p;
    fz_actor *me = fz_actor_new();
    while (!w->stop_rescuer) {
        uint64_t since = w->waiting_since;
        fz_nap(2 * FZ_MS);
        if (since && fz_now() - since > FZ_RESCUE_MS * FZ_MS) {
            fz_step(me, "rescuer: poking the objects", 0);
            /* again while anyone still waits: an auto-reset event's set, or a signal,
               ends one wait only */
            w->waiting_since = w->waits > 0 ? fz_now() : 0;
            poke(w);
            fz_step_end(me);
        }
    }
    return NULL;
}

/* Waits until the actors have finished, poking meanwhile; a bound driver runs tasks as
   it waits. */
static void settle(world *w, const char *why) {
    fz_step(w->driver, why, 0);
    while (w->actors > 0) {
        w->waiting_since = 1; /* the rescuer pokes at once */
        if (w->main_bound) { /* runs queued tasks: a yield even without memory for a timer */
            fsched_yield();
            fsched_sleep_for(100 * FZ_US);
        } else {
            fz_nap(100 * FZ_US);
        }
    }
    fz_step_end(w->driver);
}

static void destroy_sched(world *w, uint32_t index) {
    fsched_result r;
    if (w->destroyed) {
        FZ_EXPECT(fsched_destroy(w->s), "fsched_destroy twice", FSCHED_ERR_INVALID_ARGUMENT);
        return;
    }
    fz_step(w->driver, "fsched_destroy (draining)", index);
    w->destroyed = 1; /* calls racing it may be refused from now on */
    for (;;) {
        w->waiting_since = 1;
        r = fsched_destroy(w->s);
        /* refused while a plain thread of an operation is bound: it unbinds soon */
        FZ_EXPECT(r, "fsched_destroy", FSCHED_OK, FSCHED_ERR_WRONG_STATE);
        if (r == FSCHED_OK) break;
        fz_nap(100 * FZ_US);
    }
    fz_step_end(w->driver);
    w->main_bound = 0;
    /* every task spawned ran, and ran once */
    if (w->spawned != w->ran)
        fz_fail(__FILE__, __LINE__, "%llu tasks spawned, %llu ran after fsched_destroy",
                (unsigned long long)w->spawned, (unsigned long long)w->ran);
    /* the scheduler gave back all it took */
    if (w->alloc.live != 0)
        fz_fail(__FILE__, __LINE__, "%llu bytes still allocated after fsched_destroy",
                (unsigned long long)w->alloc.live);
    FZ_EXPECT(fsched_destroy(w->s), "fsched_destroy twice", FSCHED_ERR_INVALID_ARGUMENT);
}

/* ---- contexts ---- */

typedef struct async_op {
    world *w;
    fz_op op;
} async_op;

static void task_op(void *p) {
    async_op *a = (async_op *)p;
    fz_actor *me = fz_actor_new();
    a->w->ran++;
    fz_step(me, op_names[a->op.code], a->op.index);
    run_op(a->w, &a->op, CTX_TASK);
    fz_step_end(me);
    a->w->actors--;
    free(a);
}

static void nested_op(void *p) {
    async_op *a = (async_op *)p;
    world *w = a->w; /* a is the task's once it is spawned */
    fsched_result r;
    w->ran++;
    w->spawned++; /* before the task can run and count itself */
    r = fsched_spawn(fsched_current(), task_op, a);
    FZ_EXPECT(r, "fsched_spawn from a task", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
    if (r == FSCHED_OK) return;
    w->spawned--;
    FZ_CHECK(w->failing);
    w->actors--;
    free(a);
}

static void *thread_op(void *p) {
    async_op *a = (async_op *)p;
    fz_actor *me = fz_actor_new();
    fz_step(me, op_names[a->op.code], a->op.index);
    run_op(a->w, &a->op, CTX_THREAD);
    fz_step_end(me);
    a->w->actors--;
    free(a);
    return NULL;
}

static void hook(world *w, const fz_op *op, uint32_t worker) {
    fz_actor *me = fz_actor_new();
    fz_op copy = *op;
    if (worker != 0) return; /* once per scheduler */
    /* a start hook may run before fsched_create returned: nothing to call on yet */
    if (!__atomic_load_n(&w->s, __ATOMIC_ACQUIRE)) return;
    FZ_CHECK(fsched_worker_index() == -1 && !fsched_current()); /* outside the scheduler */
    copy.in_hook = FZ_WORKER_HOOK;
    fz_step(me, op_names[copy.code], copy.index);
    run_op(w, &copy, CTX_MAIN);
    fz_step_end(me);
}

static void hook_start(void *user, uint32_t worker) {
    world *w = (world *)user;
    if (w->have_hook_start) hook(w, &w->hook_start, worker);
}

static void hook_stop(void *user, uint32_t worker) {
    world *w = (world *)user;
    if (w->have_hook_stop) hook(w, &w->hook_stop, worker);
}

static void launch(world *w, const fz_op *op) {
    async_op *a;
    fsched_result r = FSCHED_OK;
    int ctx = op->ctx;
    if (getenv("FIBERSCHED_FUZZ_TRACE"))
        fprintf(stderr, "fuzz: op %u: %s in context %d (single %d, workers %u, driver bound %d)\n",
                (unsigned)op->index, op_names[op->code], ctx, w->single, (unsigned)w->workers,
                w->main_bound);
    if (w->destroyed && (ctx == CTX_TASK || ctx == CTX_NESTED || ctx == CTX_WG_TASK))
        ctx = CTX_THREAD;
    if (ctx == CTX_WG_TASK && op->code == OP_WG_WAIT) ctx = CTX_TASK; /* it waits for itself */
    if (ctx == CTX_THREAD && w->n_threads == FZ_THREADS_MAX) ctx = CTX_MAIN;
    if (ctx == CTX_MAIN && op->code == OP_BIND) return; /* the driver's bind is drive()'s */
    if (ctx == CTX_POLL && w->destroyed) ctx = CTX_MAIN;
    if (ctx == CTX_MAIN) {
        fz_step(w->driver, op_names[op->code], op->index);
        run_op(w, op, CTX_MAIN);
        fz_step_end(w->driver);
        return;
    }
    w->actors++;
    if (ctx == CTX_POLL) {
        pthread_mutex_lock(&w->poll_lock);
        w->poll_queue[w->poll_tail++ % FZ_OPS_MAX] = *op;
        pthread_mutex_unlock(&w->poll_lock);
        return;
    }
    a = (async_op *)malloc(sizeof *a);
    FZ_CHECK(a != NULL);
    a->w = w;
    a->op = *op;
    switch (ctx) {
    case CTX_TASK: r = fsched_spawn(w->s, task_op, a); break;
    case CTX_NESTED: r = fsched_spawn(w->s, nested_op, a); break;
    case CTX_WG_TASK: r = fsched_wait_group_spawn(&w->wg, w->s, task_op, a); break;
    default:
        FZ_CHECK(fz_thread_start(&w->threads[w->n_threads++], thread_op, a));
        return;
    }
    EXPECT_SPAWN(r, "fsched_spawn of an operation");
    if (r == FSCHED_OK) {
        w->spawned++;
        return;
    }
    /* refused: for want of memory, or a wait group whose count is full */
    if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
    else FZ_CHECK(r == FSCHED_ERR_INVALID_ARGUMENT && ctx == CTX_WG_TASK && w->wg_big_adds > 0);
    w->actors--;
    free(a);
}

/* The poll hook must not wait: it only looks. */
static int waits(uint8_t code) {
    return code == OP_JOIN || code == OP_RUN || code == OP_PFOR || code == OP_REDUCE ||
           code == OP_BIND;
}

static void run_op(world *w, const fz_op *op, int ctx) {
    if (ctx == CTX_POLL && waits(op->code)) return;
    switch (op->code) {
    case OP_SPAWN: op_spawn(w, op); break;
    case OP_SPAWN_TREE: op_spawn_tree(w, op); break;
    case OP_JOIN: op_join(w, op); break;
    case OP_RUN: op_run(w, op); break;
    case OP_PFOR: op_pfor(w, op); break;
    case OP_REDUCE: op_reduce(w, op); break;
    case OP_EV_SET:
        FZ_EXPECT(fsched_event_set(&w->ev[op->variant & 1]), "fsched_event_set", FSCHED_OK);
        break;
    case OP_EV_RESET:
        FZ_EXPECT(fsched_event_reset(&w->ev[op->variant & 1]), "fsched_event_reset", FSCHED_OK);
        (void)fsched_event_is_set(&w->ev[op->variant & 1]);
        break;
    case OP_EV_WAIT: op_ev_wait(w, op); break;
    case OP_WG_ADD: op_wg_add(w, op); break;
    case OP_WG_DONE: op_wg_done(w, op); break;
    case OP_WG_WAIT: op_wg_wait(w, op); break;
    case OP_WG_SPAWN: op_wg_spawn(w, op); break;
    case OP_MX_LOCK:
    case OP_MX_LOCK_FOR:
    case OP_MX_TRY: op_mutex(w, op); break;
    case OP_CV_WAIT: op_cv_wait(w, op); break;
    case OP_CV_SIGNAL: FZ_EXPECT(fsched_cond_signal(&w->cv), "fsched_cond_signal", FSCHED_OK); break;
    case OP_CV_BROADCAST:
        FZ_EXPECT(fsched_cond_broadcast(&w->cv), "fsched_cond_broadcast", FSCHED_OK);
        break;
    case OP_SEM_ACQUIRE: op_sem_acquire(w, op); break;
    case OP_SEM_RELEASE: op_sem_release(w, op); break;
    case OP_SLEEP: op_sleep(w, op); break;
    case OP_YIELD: fsched_yield(); break;
    case OP_BIND:
        if (!op->in_hook) op_bind(w, op);
        else if (op->in_hook == FZ_WORKER_HOOK) /* the thread is a worker all the same */
            FZ_EXPECT(fsched_bind(w->s), "fsched_bind from a worker hook", FSCHED_ERR_WRONG_STATE);
        break;
    case OP_QUERY: op_query(w, op); break;
    case OP_DESTROY_FROM_TASK: op_destroy_from_task(w, op); break;
    case OP_SET_POLL: op_set_poll(w, op); break;
    case OP_MOVABLE: op_movable(w, op, ctx); break;
    case OP_MOVE_BURST: op_move_burst(w, op); break;
    default: break; /* OP_SCRATCH and OP_DESTROY: the driver's own (see drive) */
    }
}

/* ---- the input ---- */

static fz_op op_read(fz_in *in, uint32_t index) {
    fz_op op;
    memset(&op, 0, sizeof op);
    op.code = (uint8_t)fz_below(in, move_format ? OP_COUNT : OP_COUNT_PLAIN);
    op.ctx = (uint8_t)fz_below(in, CTX_COUNT);
    op.variant = fz_u8(in);
    op.x = fz_u8(in);
    op.t = fz_timeout(in);
    op.index = index;
    return op;
}

/* The header: the scheduler's desc. */
static fsched_result create(world *w, fz_in *in) {
    static const size_t stacks[] = {0, 16 * 1024, 64 * 1024, 16 << 20, 4096,
                                    FIBERSCHED_MIN_STACK_SIZE - 1, (size_t)1 << 40, SIZE_MAX};
    fsched_desc d;
    uint8_t shape = fz_u8(in), stack = fz_u8(in), extra = fz_u8(in);
    fsched_result r;
    memset(&d, 0, sizeof d);
    d.workers = shape % 5; /* 0: one per CPU */
    d.single_threaded = (shape >> 3) % 4 == 0;
    d.max_bound_threads = (uint32_t[]){0, 1, 2, 9}[(shape >> 5) % 4];
    d.stack_size = stacks[stack % 8];
    if (d.stack_size >= ((size_t)1 << 40) && (stack >> 3) % 2) d.stack_size = 0; /* rarely */
    d.stack_kind = (fsched_stack_kind)((stack >> 4) % 4);
    /* a terabyte only from the heap, which refuses it (reserved as pages it would be
       granted, and the sanitizers' shadow of it would exhaust the machine) */
    if (d.stack_size == (size_t)1 << 40) d.stack_kind = FSCHED_STACK_HEAP;
    d.guard_size = (stack >> 6) == 3 ? 4096 : 0;
    d.logger = fz_logger();
    d.worker_user = w;
    d.movable_tasks = move_format;
    d.worker_start = hook_start;
    d.worker_stop = hook_stop;
    d.no_overflow_handler = extra & 1;
    d.pin_workers = (extra >> 1) % 8 == 0;
    w->clock_pace = (extra >> 4) % 4;
    w->clock_offset = (extra >> 6) ? (uint64_t)1 << 62 : 0;
    if (w->clock_pace) {
        d.clock = fz_clock;
        d.clock_user = w;
    }
    if ((extra >> 6) == 3) d.worker_name = "a-very-long-worker-thread-name";
    fz_allocator_from(in, &w->alloc, &w->allocator);
    d.allocator = w->allocator;
    /* huge stacks may be refused later, when fibers are made */
    w->failing = w->alloc.mode != 0 || d.stack_size >= ((size_t)1 << 30);
    w->pinned = d.pin_workers;
    if (fz_u8(in) & 1) {
        w->hook_start = op_read(in, 0);
        w->have_hook_start = 1;
    }
    if (fz_u8(in) & 1) {
        w->hook_stop = op_read(in, 0);
        w->have_hook_stop = 1;
    }
    if (d.single_threaded) d.workers = 0; /* else refused */
    w->single = d.single_threaded;
    fz_step(w->driver, "fsched_create", 0);
    {
        fsched_sched *s = NULL;
        r = fsched_create(&d, &s);
        __atomic_store_n(&w->s, s, __ATOMIC_RELEASE); /* start hooks may be reading */
    }
    fz_step_end(w->driver);
    FZ_EXPECT(r, "fsched_create", FSCHED_OK, FSCHED_ERR_INVALID_ARGUMENT, FSCHED_ERR_OUT_OF_MEMORY,
              FSCHED_ERR_SYSTEM);
    if (r == FSCHED_ERR_INVALID_ARGUMENT)
        FZ_CHECK(d.stack_size && (d.stack_size < FIBERSCHED_MIN_STACK_SIZE ||
                                  d.stack_size > ((size_t)1 << 39)));
    if (r == FSCHED_ERR_OUT_OF_MEMORY)
        FZ_CHECK(w->failing || d.stack_size > ((size_t)1 << 39));
    if (r != FSCHED_OK) {
        FZ_CHECK(w->s == NULL);
        FZ_CHECK(w->alloc.live == 0);
        return r;
    }
    w->workers = fsched_worker_count(w->s);
    FZ_CHECK(w->single ? w->workers == 0 : w->workers == (d.workers ? d.workers : w->workers));
    return r;
}

static void drive(world *w, fz_in *in) {
    uint32_t i;
    fsched_result r;
    uint8_t how = fz_u8(in);
    w->unbind_at_end = (how >> 2) & 1;
    if (w->single || (how & 3) == 0) {
        r = fsched_bind(w->s);
        FZ_EXPECT(r, "fsched_bind", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
        w->main_bound = r == FSCHED_OK;
    }
    for (i = 1; i <= FZ_OPS_MAX && !fz_done(in); i++) {
        fz_op op = op_read(in, i);
        if (op.code == OP_SCRATCH) {
            fz_step(w->driver, "scratch objects", i);
            op_scratch(w, &op);
            fz_step_end(w->driver);
        } else if (op.code == OP_DESTROY) {
            if (w->main_bound && !w->single && (op.variant & 1)) {
                fz_step(w->driver, "fsched_unbind", i);
                FZ_EXPECT(fsched_unbind(), "fsched_unbind", FSCHED_OK);
                fz_step_end(w->driver);
                w->main_bound = 0;
            }
            destroy_sched(w, i);
        } else if (op.code == OP_BIND && op.ctx == CTX_MAIN) {
            /* the driver's bind is its own state: toggled, never left single-threaded
               without a bound thread */
            if (w->destroyed || w->single) continue;
            fz_step(w->driver, w->main_bound ? "fsched_unbind" : "fsched_bind", i);
            r = w->main_bound ? fsched_unbind() : fsched_bind(w->s);
            FZ_EXPECT(r, "fsched_bind / fsched_unbind", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
            fz_step_end(w->driver);
            if (r == FSCHED_OK) w->main_bound = !w->main_bound;
        } else {
            launch(w, &op);
        }
    }
}

static void finish(world *w) {
    int k;
    /* the poll hook's operations no hook will run: the driver runs them */
    if (!w->destroyed) {
        fz_step(w->driver, "fsched_set_poll(NULL)", 0);
        FZ_EXPECT(fsched_set_poll(w->s, NULL, NULL, 0), "fsched_set_poll(NULL)", FSCHED_OK);
        fz_step_end(w->driver);
    }
    for (;;) {
        fz_op op;
        pthread_mutex_lock(&w->poll_lock);
        if (w->poll_head == w->poll_tail) {
            pthread_mutex_unlock(&w->poll_lock);
            break;
        }
        op = w->poll_queue[w->poll_head++ % FZ_OPS_MAX];
        pthread_mutex_unlock(&w->poll_lock);
        op.in_hook = 1;
        fz_step(w->driver, op_names[op.code], op.index);
        run_op(w, &op, CTX_MAIN);
        fz_step_end(w->driver);
        w->actors--;
    }
    /* a single-threaded scheduler without a bound thread runs its tasks in the drain */
    if (!w->single || w->main_bound || w->destroyed)
        settle(w, "waiting for the operations' tasks and threads");
    if (w->main_bound && w->unbind_at_end) {
        fz_step(w->driver, "fsched_unbind at the end", 0);
        FZ_EXPECT(fsched_unbind(), "fsched_unbind", FSCHED_OK);
        fz_step_end(w->driver);
        w->main_bound = 0;
    }
    if (getenv("FIBERSCHED_FUZZ_TRACE") && !w->destroyed) {
        fsched_stats st;
        if (fsched_get_stats(w->s, &st) == FSCHED_OK)
            fprintf(stderr, "fuzz: %llu fibers moved\n", (unsigned long long)st.fibers_moved);
    }
    destroy_sched(w, 0);
    settle(w, "waiting for the operations' threads");
    for (k = 0; k < w->n_threads; k++) fz_thread_join(&w->threads[k]);
}

static void objects_init(world *w) {
    FZ_EXPECT(fsched_event_init(&w->ev[0], 0, 0), "fsched_event_init", FSCHED_OK);
    FZ_EXPECT(fsched_event_init(&w->ev[1], 1, 0), "fsched_event_init", FSCHED_OK);
    FZ_EXPECT(fsched_wait_group_init(&w->wg), "fsched_wait_group_init", FSCHED_OK);
    FZ_EXPECT(fsched_mutex_init(&w->mx), "fsched_mutex_init", FSCHED_OK);
    FZ_EXPECT(fsched_cond_init(&w->cv), "fsched_cond_init", FSCHED_OK);
    FZ_EXPECT(fsched_sema_init(&w->sem, 0), "fsched_sema_init", FSCHED_OK);
    pthread_mutex_init(&w->poll_lock, NULL);
}

static void objects_destroy(world *w) {
    int64_t mine = w->wg_tally;
    if (mine > 0) FZ_EXPECT(fsched_wait_group_add(&w->wg, -mine), "fsched_wait_group_add", FSCHED_OK);
    FZ_EXPECT(fsched_event_destroy(&w->ev[0]), "fsched_event_destroy", FSCHED_OK);
    FZ_EXPECT(fsched_event_destroy(&w->ev[1]), "fsched_event_destroy", FSCHED_OK);
    FZ_EXPECT(fsched_wait_group_destroy(&w->wg), "fsched_wait_group_destroy", FSCHED_OK);
    FZ_EXPECT(fsched_mutex_destroy(&w->mx), "fsched_mutex_destroy", FSCHED_OK);
    FZ_EXPECT(fsched_cond_destroy(&w->cv), "fsched_cond_destroy", FSCHED_OK);
    FZ_EXPECT(fsched_sema_destroy(&w->sem), "fsched_sema_destroy", FSCHED_OK);
    pthread_mutex_destroy(&w->poll_lock);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size, 0};
    world *w = (world *)calloc(1, sizeof *w);
    FZ_CHECK(w != NULL);
    fz_input_begin();
    move_format = size && data[0] == FZ_MOVE_FORMAT;
    if (move_format) in.i = 1;
    w->driver = fz_actor_new();
    objects_init(w);
    if (create(w, &in) == FSCHED_OK) {
        FZ_CHECK(fz_thread_start(&w->rescuer, rescuer_main, w));
        drive(w, &in);
        finish(w);
        w->stop_rescuer = 1;
        fz_thread_join(&w->rescuer);
    }
    objects_destroy(w);
    free(w);
    return 0;
}
