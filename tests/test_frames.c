/* Spawn and sync at scale: thousands of task trees blocked at once on one worker, each
   holding a frame stack (a tree waits in a called child for an event its spawned sibling
   sets), at one and two workers and single-threaded with a bound thread; the stacks
   stay as many as the trees hold, thieves find offered frames among thousands of
   stacks that offer none, trees run one after another reuse a few stacks, and a tree
   that cannot have a frame stack fails with FSCHED_ERR_OUT_OF_MEMORY instead of
   hanging; frame stacks of a size that is not a whole number of pages leave their
   neighbours alone when they give pages back; and (with schedule fuzzing) a thief that
   unmarks a stack while its owner offers frames on it. Also built with
   FIBERSCHED_NO_THREADS. */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <stddef.h>
#include <stdint.h>

/* The word thieves write has a cache line of its own, wherever the frame stack lies,
   however the compiler spells the alignment (FSCHED__ALIGNED). */
_Static_assert(_Alignof(fsched_frames) == 64 && offsetof(fsched_frames, shared) % 64 == 0 &&
                   sizeof(fsched_frames) % 64 == 0,
               "fsched_frames.shared is aligned to a cache line");

#if defined(FIBERSCHED_NO_OS)
/* Without an OS the application provides the clock: one that advances by a microsecond
   each time it is read. */
static uint64_t test_clock(void *user) {
    return FSCHED__FETCH_ADD((uint64_t *)user, 1000u, FSCHED__RELAXED) + 1000u;
}
static uint64_t test_clock_now;
#endif

/* A scheduler of `workers` workers (0: single-threaded, the calling thread bound), with
   an allocator if given, and fiber stacks of the given kind. */
static fsched_sched *make_sched_of(uint32_t workers, const fsched_allocator *allocator,
                                   fsched_stack_kind kind) {
    fsched_sched *s = NULL;
    fsched_desc d;
    test_desc_init(&d);
    d.workers = workers;
    d.single_threaded = workers == 0;
    d.stack_kind = kind;
    if (allocator) d.allocator = *allocator;
#if defined(FIBERSCHED_NO_OS)
    d.clock = test_clock;
    d.clock_user = &test_clock_now;
    d.stack_size = 65536; /* frame stacks come from the heap, zeroed: 64 KiB each */
#endif
    CHECK_OK(fsched_create(&d, &s));
    if (!workers) CHECK_OK(fsched_bind(s));
    return s;
}

static fsched_sched *make_sched(uint32_t workers, const fsched_allocator *allocator) {
    return make_sched_of(workers, allocator, FSCHED_STACK_DEFAULT);
}

static void end_sched(fsched_sched *s, uint32_t workers) {
    if (!workers) CHECK_OK(fsched_unbind());
    CHECK_OK(fsched_destroy(s));
}

/* Frame stacks that the scheduler's slots made, and the most any slot keeps with their
   pages. */
static uint32_t stacks_made(fsched_sched *s, uint32_t *most_kept) {
    uint32_t i, n = 0;
    if (most_kept) *most_kept = 0;
    for (i = 0; i < s->n_slots; i++) {
        n += FSCHED__LOAD(&s->slots[i]->frames_count, FSCHED__RELAXED);
        if (most_kept && s->slots[i]->frames_kept > *most_kept)
            *most_kept = s->slots[i]->frames_kept;
    }
    return n;
}

/* Memory mappings of the process (Linux; else 0, and under ThreadSanitizer, which maps
   memory of its own for every fiber, and Valgrind, whose map is its own). */
static uint32_t mappings(void) {
    uint32_t n = 0;
#if defined(__linux__) && !defined(FIBERSCHED_NO_STDIO) && !defined(FSCHED__TSAN)
    FILE *f = test_under_valgrind() ? NULL : fopen("/proc/self/maps", "r");
    int c;
    if (!f) return 0;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
#endif
    return n;
}

/* ---- a crowd of blocked trees ----
   Each tree spawns a setter, then calls a waiter that waits at a gate (opened once every
   tree has arrived, so that all are blocked at once) and then for the setter's event.
   With `setters_wait`, the setters wait at the gate too, so that every tree holds two
   frame stacks while blocked: its own and the one its setter runs on. */
typedef struct crowd {
    fsched_sched *s;
    fsched_wait_group wg;
    fsched_event gate;      /* manual reset */
    uint32_t n;             /* trees */
    int setters_wait;
    uint32_t arrived;       /* waiters at the gate, and trees that could not start */
    uint32_t done;          /* trees that returned */
    uint32_t out_of_memory; /* trees that FSCHED_RUN refused for want of memory */
    uint32_t peak_stacks;   /* frame stacks made when the gate opened */
    uint32_t peak_mappings; /* memory mappings then */
} crowd;

typedef struct pair_arg {
    crowd *c;
    fsched_event *e;
} pair_arg;

static void arrive(crowd *c) {
    if (ADD(&c->arrived, 1u) != c->n) return;
    c->peak_stacks = stacks_made(c->s, NULL);
    c->peak_mappings = mappings();
    CHECK_OK(fsched_event_set(&c->gate));
}

FSCHED_VOID_TASK(crowd_setter, pair_arg, a) {
    if (a.c->setters_wait) CHECK_OK(fsched_event_wait(&a.c->gate));
    CHECK_OK(fsched_event_set(a.e));
}

FSCHED_VOID_TASK(crowd_waiter, pair_arg, a) {
    arrive(a.c);
    CHECK_OK(fsched_event_wait(&a.c->gate));
    CHECK_OK(fsched_event_wait(a.e));
}

FSCHED_VOID_TASK(crowd_tree, crowd *, c) {
    fsched_event e;
    pair_arg a;
    CHECK_OK(fsched_event_init(&e, 0, 0));
    a.c = c;
    a.e = &e;
    FSCHED_SPAWN(crowd_setter, a); /* a tree's first spawn is offered at once */
    FSCHED_CALL(crowd_waiter, a);
    FSCHED_SYNC(crowd_setter);
    CHECK_OK(fsched_event_destroy(&e));
    ADD(&c->done, 1u);
}

static void crowd_root(void *p) {
    crowd *c = (crowd *)p;
    fsched_result r = FSCHED_RUN(crowd_tree, c, NULL);
    if (r == FSCHED_ERR_OUT_OF_MEMORY) {
        ADD(&c->out_of_memory, 1u);
        arrive(c);
        return;
    }
    CHECK_OK(r);
}

/* Spawns the roots from a task, into its own deque: a worker starts them all before it
   runs the frames their trees offer as they block. */
static void crowd_spawn(void *p) {
    crowd *c = (crowd *)p;
    uint32_t i;
    for (i = 0; i < c->n; i++) CHECK_OK(fsched_wait_group_spawn(&c->wg, c->s, crowd_root, c));
}

static void crowd_run(crowd *c, fsched_sched *s, uint32_t n, int setters_wait) {
    memset(c, 0, sizeof *c);
    c->s = s;
    c->n = n;
    c->setters_wait = setters_wait;
    CHECK_OK(fsched_event_init(&c->gate, 1, 0));
    CHECK_OK(fsched_wait_group_init(&c->wg));
    CHECK_OK(fsched_wait_group_spawn(&c->wg, s, crowd_spawn, c));
    CHECK_OK(fsched_wait_group_wait(&c->wg));
    CHECK_OK(fsched_wait_group_destroy(&c->wg));
    CHECK_OK(fsched_event_destroy(&c->gate));
    CHECK_EQ_U64(c->arrived, n);
    CHECK_EQ_U64(c->done + c->out_of_memory, n);
}

/* ---- fib, to see that stealing works among many idle stacks ---- */

static long long fib_serial(int n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

FSCHED_TASK(long long, fib, int, n) {
    long long x, y;
    if (n < 2) return n;
    FSCHED_SPAWN(fib, n - 1);
    y = FSCHED_CALL(fib, n - 2);
    x = FSCHED_SYNC(fib);
    return x + y;
}

typedef struct fib_case {
    int n;
    long long result;
} fib_case;

static void fib_root(void *p) {
    fib_case *f = (fib_case *)p;
    CHECK_OK(FSCHED_RUN(fib, f->n, &f->result));
}

/* Runs fn(arg) as a task of s and waits for it. */
static void run_task(fsched_sched *s, void (*fn)(void *), void *arg) {
    fsched_wait_group wg;
    CHECK_OK(fsched_wait_group_init(&wg));
    CHECK_OK(fsched_wait_group_spawn(&wg, s, fn, arg));
    CHECK_OK(fsched_wait_group_wait(&wg));
    CHECK_OK(fsched_wait_group_destroy(&wg));
}

/* From a task: what a thief finds at every slot of s, once it has unmarked the stacks
   that once offered frames: nothing, and afterwards no chunk of any slot is marked (a
   steal attempt reads one word per group of stacks, not one per stack). */
static void look_everywhere(void *p) {
    fsched_sched *s = (fsched_sched *)p;
    fsched__worker *w = fsched__tls_thread.worker;
    uint32_t i;
    for (i = 0; i < s->n_slots; i++) {
        fsched__worker *v = s->slots[i];
        fsched__frames_group *g;
        CHECK(fsched__frames_claim(w, v) == NULL);
        for (g = FSCHED__LOAD(&v->frames_groups, FSCHED__ACQUIRE); g;
             g = FSCHED__LOAD(&g->next, FSCHED__ACQUIRE))
            CHECK(FSCHED__LOAD(&g->offers, FSCHED__ACQUIRE) == 0);
    }
}

/* ---- tests ---- */

/* n trees blocked at once: they all finish; the stacks made are about those the trees
   held at the peak (one each, two with waiting setters, and a spare per slot), in few
   memory mappings; afterwards a slot keeps the pages of a few free stacks only, thieves
   look at no stack of the idle thousands, and fib by spawn and sync comes out right. */
static void test_crowd(uint32_t workers, uint32_t n, int setters_wait) {
    fsched_sched *s = make_sched(workers, NULL);
    uint32_t before = mappings(), slots = s->n_slots, made, kept, held = setters_wait ? 2 : 1;
    crowd c;
    fib_case f;
    crowd_run(&c, s, n, setters_wait);
    CHECK_EQ_U64(c.done, n);
    made = stacks_made(s, &kept);
    /* trees hold a stack each at the peak (setters not all claimed yet), at most two */
    CHECK(c.peak_stacks >= n && made <= held * n + 2 * slots);
    CHECK(kept <= FSCHED__FRAMES_KEEP);
    /* the blocked fibers (one per tree, two with waiting setters) take two mappings each
       at most (a stack and its guard); the frame stacks next to nothing */
    if (before) CHECK(c.peak_mappings - before <= 2 * held * n + n / 16 + 64);
    run_task(s, look_everywhere, s);
    f.n = TEST_SCALE > 1 ? 20 : 24;
    run_task(s, fib_root, &f);
    CHECK_EQ_U64(f.result, fib_serial(f.n));
    /* a second crowd reuses the stacks (each slot's, but the trees may fall to the
       slots otherwise this time) */
    crowd_run(&c, s, n, setters_wait);
    CHECK_EQ_U64(c.done, n);
    /* with two workers, or under an emulator, the second crowd may fall to a slot that
       made none the first time (or peak past the first's: its setters run at other
       times), which then makes a set of its own and a spare: a leak still shows, as more */
    CHECK(stacks_made(s, NULL) <= made + (slots > 1 || test_emulated() ? held * n + slots : 2));
    end_sched(s, workers);
}

/* The mappings a crowd's frame stacks take, with fiber stacks carved from slabs (which
   take few mappings themselves). */
static void test_crowd_mappings(uint32_t workers, uint32_t n) {
#if defined(FIBERSCHED_NO_OS)
    fsched_sched *s = make_sched_of(workers, NULL, FSCHED_STACK_DEFAULT); /* no slabs */
#else
    fsched_sched *s = make_sched_of(workers, NULL, FSCHED_STACK_SLAB);
#endif
    uint32_t before = mappings();
    crowd c;
    crowd_run(&c, s, n, 1);
    CHECK_EQ_U64(c.done, n);
    CHECK(c.peak_stacks >= n);
    if (before) CHECK(c.peak_mappings - before <= n / 16 + 64);
    end_sched(s, workers);
}

/* Blocking trees one after another: a few stacks in all. */
static void sequence_root(void *p) {
    crowd *c = (crowd *)p;
    uint32_t i;
    for (i = 0; i < c->n; i++) {
        CHECK_OK(fsched_event_set(&c->gate)); /* the waiters pass the gate at once */
        CHECK_OK(FSCHED_RUN(crowd_tree, c, NULL));
    }
}

static void test_sequence(uint32_t workers, uint32_t n) {
    fsched_sched *s = make_sched(workers, NULL);
    crowd c;
    memset(&c, 0, sizeof c);
    c.s = s;
    c.n = n;
    CHECK_OK(fsched_event_init(&c.gate, 1, 0));
    run_task(s, sequence_root, &c);
    CHECK_EQ_U64(c.done, n);
    CHECK(stacks_made(s, NULL) <= 4 * s->n_slots);
    CHECK_OK(fsched_event_destroy(&c.gate));
    end_sched(s, workers);
}

/* ---- out of memory ---- */

/* The scheduler's allocator, failing every frame stack after the first `allowed` once
   armed. */
typedef struct frames_alloc {
    uint64_t made;    /* atomic */
    uint64_t allowed; /* atomic */
} frames_alloc;

static void *frames_alloc_fn(size_t size, size_t align, void *user) {
    frames_alloc *a = (frames_alloc *)user;
    if (size == sizeof(fsched_frames) && align == 64 && ADD(&a->made, 1) > LOAD(&a->allowed))
        return NULL;
    return fsched__default_alloc(size, align, NULL);
}

static void frames_free_fn(void *ptr, size_t size, size_t align, void *user) {
    (void)user;
    fsched__default_free(ptr, size, align, NULL);
}

/* A crowd larger than the frame stacks memory allows: the trees that cannot have one
   return FSCHED_ERR_OUT_OF_MEMORY, the others finish, nothing hangs; with memory back,
   every tree runs. */
static void test_out_of_memory(uint32_t workers, uint32_t n, int setters_wait) {
    frames_alloc a;
    fsched_allocator al;
    fsched_sched *s;
    crowd c;
    a.made = 0;
    a.allowed = n / 4;
    memset(&al, 0, sizeof al);
    al.alloc = frames_alloc_fn;
    al.free = frames_free_fn;
    al.user = &a;
    s = make_sched(workers, &al);
    crowd_run(&c, s, n, setters_wait);
    CHECK(c.out_of_memory > 0 && c.done > 0);
    CHECK(stacks_made(s, NULL) <= n / 4);
    STORE(&a.allowed, (uint64_t)-1);
    crowd_run(&c, s, n, setters_wait);
    CHECK_EQ_U64(c.done, n);
    end_sched(s, workers);
}

/* ---- frame stacks of a size that is not a whole number of pages ----
   Fiber stacks of 100,000 bytes made frame stacks of 800,000, carved one after the other
   from shared mappings: a free one that gave its pages back (beyond the first 32 of a
   slot) gave back the whole page at its end, and with it the first frames of the next
   stack, which a blocked tree held: its taken child's latch was cleared, and the tree
   waited at its sync forever. Half the trees (the even ones, or the odd ones: the
   neighbour of a stack is the tree started next, before or after it) end while the
   others stay blocked, then those end too. */
#define UNEVEN_TREES 200u

typedef struct uneven uneven;
typedef struct uneven_arg {
    uneven *u;
    uint32_t i;
} uneven_arg;

struct uneven {
    fsched_event wake[UNEVEN_TREES], all_blocked, half_done;
    uneven_arg args[UNEVEN_TREES];
    fsched_wait_group wg;
    uint32_t first; /* the trees woken first: i % 2 == first */
    uint32_t blocked, done; /* atomic */
};

FSCHED_TASK(uint32_t, uneven_child, uint32_t, i) { return i + 1u; }

FSCHED_TASK(uint32_t, uneven_tree, uneven_arg, a) {
    uint32_t r;
    FSCHED_SPAWN(uneven_child, a.i); /* offered as the tree blocks, and run meanwhile */
    if (ADD(&a.u->blocked, 1u) == UNEVEN_TREES) CHECK_OK(fsched_event_set(&a.u->all_blocked));
    CHECK_OK(fsched_event_wait(&a.u->wake[a.i])); /* holding its frame stack */
    r = FSCHED_SYNC(uneven_child);
    if (ADD(&a.u->done, 1u) == UNEVEN_TREES / 2) CHECK_OK(fsched_event_set(&a.u->half_done));
    return r;
}

static void uneven_root(void *p) {
    uneven_arg *a = (uneven_arg *)p;
    uint32_t r = 0;
    CHECK_OK(FSCHED_RUN(uneven_tree, *a, &r));
    CHECK(r == a->i + 1u);
}

/* Starts the trees, then wakes half of them, and the others once those ended. */
static void uneven_release(void *p) {
    uneven *u = (uneven *)p;
    uint32_t i;
    for (i = 0; i < UNEVEN_TREES; i++)
        CHECK_OK(fsched_wait_group_spawn(&u->wg, fsched_current(), uneven_root, &u->args[i]));
    CHECK_OK(fsched_event_wait(&u->all_blocked));
    for (i = u->first; i < UNEVEN_TREES; i += 2) CHECK_OK(fsched_event_set(&u->wake[i]));
    CHECK_OK(fsched_event_wait(&u->half_done));
    for (i = 1 - u->first; i < UNEVEN_TREES; i += 2) CHECK_OK(fsched_event_set(&u->wake[i]));
}

static void test_uneven_stacks(uint32_t workers, uint32_t first) {
    static uneven u;
    fsched_sched *s = NULL;
    fsched_desc d;
    uint32_t i;
    test_desc_init(&d);
    d.workers = workers;
    d.single_threaded = workers == 0;
    d.stack_size = 100000; /* 24.4 pages of 4 KiB */
#if defined(FIBERSCHED_NO_OS)
    d.clock = test_clock;
    d.clock_user = &test_clock_now;
#endif
    CHECK_OK(fsched_create(&d, &s));
    if (!workers) CHECK_OK(fsched_bind(s));
    memset(&u, 0, sizeof u);
    u.first = first;
    for (i = 0; i < UNEVEN_TREES; i++) {
        CHECK_OK(fsched_event_init(&u.wake[i], 0, 0));
        u.args[i].u = &u;
        u.args[i].i = i;
    }
    CHECK_OK(fsched_event_init(&u.all_blocked, 1, 0));
    CHECK_OK(fsched_event_init(&u.half_done, 1, 0));
    CHECK_OK(fsched_wait_group_init(&u.wg));
    CHECK_OK(fsched_wait_group_spawn(&u.wg, s, uneven_release, &u));
    CHECK_OK(fsched_wait_group_wait(&u.wg));
    CHECK_EQ_U64(LOAD(&u.done), UNEVEN_TREES);
    CHECK_OK(fsched_wait_group_destroy(&u.wg));
    for (i = 0; i < UNEVEN_TREES; i++) CHECK_OK(fsched_event_destroy(&u.wake[i]));
    CHECK_OK(fsched_event_destroy(&u.all_blocked));
    CHECK_OK(fsched_event_destroy(&u.half_done));
    end_sched(s, workers);
}

/* ---- forced: a thief unmarks a stack while its owner offers on it ----
   (FIBERSCHED_CHAOS builds, whose schedule-fuzzing points call a hook.) The tree's first
   child is taken by the other worker, which, looking for work again, finds the tree's
   stack marked with nothing on offer, and is stalled before it unmarks it. Meanwhile the
   tree spawns a setter and blocks for it: its offer finds the stack still marked and
   leaves the mark, and its worker goes on to a long task. When the thief unmarks the
   stack it must see the offer and mark the stack again (and take the setter): else the
   setter is offered where nobody looks, and the tree waits forever. */
#if FIBERSCHED_CHAOS && TEST_THREADS && (defined(__unix__) || defined(__APPLE__))
#include <time.h>

static int race_thief = -1; /* the worker that ran the first child */
static int race_armed;      /* stall that worker at its next unmarking */
static int race_stalled;    /* it is stalled there */
static int race_done;

static uint64_t race_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void race_sleep_ms(unsigned ms) {
    struct timespec ts;
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void race_hook(fsched__point at) {
    if (at != FSCHED__AT_UNMARK || fsched_worker_index() != LOAD(&race_thief) ||
        !LOAD(&race_armed))
        return;
    STORE(&race_armed, 0);
    STORE(&race_stalled, 1);
    race_sleep_ms(50);
}

FSCHED_VOID_TASK(race_first, int, unused) {
    (void)unused;
    STORE(&race_thief, fsched_worker_index());
    STORE(&race_armed, 1);
}

FSCHED_VOID_TASK(race_set, fsched_event *, e) { CHECK_OK(fsched_event_set(e)); }
FSCHED_VOID_TASK(race_wait, fsched_event *, e) { CHECK_OK(fsched_event_wait(e)); }

static void race_busy(void *p) {
    uint64_t until = race_now_ns() + 100000000u; /* past the thief's stall */
    (void)p;
    while (race_now_ns() < until) fsched__cpu_relax();
}

FSCHED_VOID_TASK(race_tree, fsched_sched *, s) {
    fsched_event e;
    uint64_t until = race_now_ns() + 10000000000ull;
    CHECK_OK(fsched_event_init(&e, 0, 0));
    FSCHED_SPAWN(race_first, 0); /* a tree's first spawn is offered at once */
    while (!LOAD(&race_stalled)) {
        CHECK(race_now_ns() < until);
        fsched__cpu_relax();
    }
    CHECK_OK(fsched_spawn(s, race_busy, NULL)); /* this worker's next job */
    FSCHED_SPAWN(race_set, &e);
    FSCHED_CALL(race_wait, &e); /* blocks: offers the setter */
    FSCHED_SYNC(race_set);
    FSCHED_SYNC(race_first);
    CHECK_OK(fsched_event_destroy(&e));
}

static void race_root(void *p) {
    CHECK_OK(FSCHED_RUN(race_tree, (fsched_sched *)p, NULL));
    STORE(&race_done, 1);
}

static void test_unmark_while_offered(void) {
    fsched_sched *s = make_sched(2, NULL);
    uint64_t until = race_now_ns() + 20000000000ull;
    __atomic_store_n(&fsched__chaos_hook, race_hook, __ATOMIC_RELEASE);
    CHECK_OK(fsched_spawn(s, race_root, s));
    /* polled: a waiting thread could take part in the run */
    while (!LOAD(&race_done)) {
        CHECK(race_now_ns() < until);
        race_sleep_ms(1);
    }
    __atomic_store_n(&fsched__chaos_hook, (void (*)(fsched__point))NULL, __ATOMIC_RELEASE);
    CHECK(LOAD(&race_thief) >= 0);
    end_sched(s, 2);
}
#endif

int main(void) {
    /* a blocked tree holds its fiber's stack and a frame stack of 8 times its size as
       address space: an eighth of the trees where 32 bits address 4 GiB in all; without
       an OS the frames come from the heap, zeroed */
#if defined(FIBERSCHED_NO_OS)
    uint32_t n = 10000 / TEST_SCALE / 16;
#else
    uint32_t n = 10000 / TEST_SCALE / TEST_FIBER_SCALE / (sizeof(void *) < 8 ? 8 : 1);
#endif
    /* Valgrind gives a program 128 GiB of address space: about 1,800 such trees; qemu-user
       maps a guest's reservations as its own memory (the kernel ended it at 10,000) */
    const char *emulated = getenv("FIBERSCHED_TEST_EMULATED");
    if (test_under_valgrind() || (emulated && *emulated && strcmp(emulated, "0") != 0)) n /= 16;
#if FIBERSCHED_CHAOS
    n /= 4; /* perturbed, every step is slow: what counts here is the interleavings */
#endif
    test_watchdog(600);
#if FIBERSCHED_CHAOS && TEST_THREADS && (defined(__unix__) || defined(__APPLE__))
    test_unmark_while_offered();
#endif
#if TEST_THREADS
    test_crowd(1, n, 0);
    test_crowd(1, n, 1);
    test_crowd(2, n, 0);
    test_crowd(2, n, 1);
    test_crowd_mappings(1, n);
    test_sequence(1, n);
    test_sequence(2, n);
    test_out_of_memory(1, 400, 0);
    test_out_of_memory(1, 400, 1);
    test_out_of_memory(2, 400, 1);
    test_uneven_stacks(1, 0);
    test_uneven_stacks(1, 1);
    test_uneven_stacks(2, 0);
    test_uneven_stacks(2, 1);
#endif
    /* single-threaded: the bound thread runs the trees while it waits */
    test_crowd(0, n, 0);
    test_crowd(0, n, 1);
    test_crowd_mappings(0, n);
    test_sequence(0, n);
    test_out_of_memory(0, 400, 1);
    test_uneven_stacks(0, 0);
    test_uneven_stacks(0, 1);
    printf("frames: ok\n");
    return 0;
}
