/* The low-level fiber API: switching, finishing, stacks, pools, bad input, alignment,
   unwinding and, with threads, fibers resumed on other threads. Built once per context
   backend and in the FIBERSCHED_NO_OS configuration. */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <stdint.h>

#if defined(__unix__) && TEST_THREADS /* check.h: the build has threads */
#define TEST_PTHREADS 1
#endif
#if defined(__GNUC__) && !defined(_WIN32) && !defined(FIBERSCHED_NO_OS) && \
    defined(FSCHED__CTX_ASM) && !defined(__arm__)
#include <unwind.h>
#define TEST_UNWIND 1
#endif
#if (defined(__x86_64__) || defined(__i386__)) && FIBERSCHED_FPU_CONTROL && defined(FSCHED__CTX_ASM)
#include <fenv.h>
#define TEST_FPU 1
#endif

/* Small stacks keep the many-fiber tests light, also under sanitizers and emulators. */
#if defined(FSCHED__ASAN)
#define SMALL_STACK (64 * 1024)
#else
#define SMALL_STACK (32 * 1024)
#endif

static fsched_fiber_desc small_desc(const char *name) {
    fsched_fiber_desc d;
    memset(&d, 0, sizeof d);
    d.stack_size = SMALL_STACK;
    d.name = name;
    return d;
}

/* ---- ping-pong and finishing ---- */

typedef struct pingpong {
    fsched_fiber *main;
    int counter;
    int finished_body;
} pingpong;

static void pingpong_body(void *arg) {
    pingpong *p = (pingpong *)arg;
    int i;
    for (i = 0; i < 1000; i++) {
        CHECK(p->counter == 2 * i);
        p->counter++;
        CHECK(fsched_fiber_get_state(fsched_fiber_current()) == FSCHED_FIBER_RUNNING);
        CHECK(fsched_fiber_get_state(p->main) == FSCHED_FIBER_SUSPENDED);
        CHECK_OK(fsched_fiber_switch(p->main));
    }
    p->finished_body = 1;
}

static void test_pingpong(void) {
    pingpong p;
    fsched_fiber *f;
    fsched_fiber_desc d = small_desc("pingpong");
    int i;
    memset(&p, 0, sizeof p);
    p.main = fsched_fiber_current();
    CHECK(p.main != NULL);
    CHECK(fsched_fiber_current() == p.main);
    CHECK_OK(fsched_fiber_create(&d, pingpong_body, &p, &f));
    CHECK(fsched_fiber_get_state(f) == FSCHED_FIBER_SUSPENDED);
    for (i = 0; i < 1000; i++) {
        CHECK(p.counter == 2 * i);
        CHECK_OK(fsched_fiber_switch(f));
        CHECK(fsched_fiber_current() == p.main);
        CHECK(p.counter == 2 * i + 1);
        p.counter++;
    }
    CHECK(!p.finished_body);
    CHECK(fsched_fiber_get_state(f) == FSCHED_FIBER_SUSPENDED);
    CHECK_OK(fsched_fiber_switch(f)); /* the body returns: control comes back here */
    CHECK(p.finished_body);
    CHECK(fsched_fiber_get_state(f) == FSCHED_FIBER_FINISHED);
    CHECK_RESULT(fsched_fiber_switch(f), FSCHED_ERR_WRONG_STATE);
    CHECK_OK(fsched_fiber_destroy(f));
}

/* A finished fiber returns to the fiber that last switched to it, not to its creator. */
typedef struct chain {
    fsched_fiber *a, *b;
    int order[4];
    int n;
} chain;

static void chain_b(void *arg) {
    chain *c = (chain *)arg;
    c->order[c->n++] = 2;
}

static void chain_a(void *arg) {
    chain *c = (chain *)arg;
    c->order[c->n++] = 1;
    CHECK_OK(fsched_fiber_switch(c->b)); /* b finishes and comes back to a */
    c->order[c->n++] = 3;
}

static void test_return_to_resumer(void) {
    chain c;
    fsched_fiber_desc d = small_desc("chain");
    memset(&c, 0, sizeof c);
    CHECK_OK(fsched_fiber_create(&d, chain_a, &c, &c.a));
    CHECK_OK(fsched_fiber_create(&d, chain_b, &c, &c.b));
    CHECK_OK(fsched_fiber_switch(c.a));
    CHECK(c.n == 3 && c.order[0] == 1 && c.order[1] == 2 && c.order[2] == 3);
    CHECK(fsched_fiber_get_state(c.a) == FSCHED_FIBER_FINISHED);
    CHECK(fsched_fiber_get_state(c.b) == FSCHED_FIBER_FINISHED);
    CHECK_OK(fsched_fiber_destroy(c.a));
    CHECK_OK(fsched_fiber_destroy(c.b));
}

/* ---- deep recursion ---- */

static FSCHED__NOINLINE uint64_t recurse(uint64_t depth, volatile uint64_t *sink) {
    volatile uint64_t frame[16];
    unsigned i;
    for (i = 0; i < 16; i++) frame[i] = depth * 16 + i;
    *sink += frame[depth % 16];
    if (depth == 0) return 0;
    return recurse(depth - 1, sink) + 1 + frame[depth % 16] - (depth * 16 + depth % 16);
}

typedef struct deep {
    uint64_t depth, result, sink;
} deep;

static void deep_body(void *arg) {
    deep *d = (deep *)arg;
    d->result = recurse(d->depth, &d->sink);
}

static void test_deep_recursion(void) {
    deep d;
    fsched_fiber *f;
    fsched_fiber_desc desc;
    void *lo;
    size_t size;
    memset(&desc, 0, sizeof desc);
    desc.stack_size = 4u * 1024u * 1024u / TEST_SCALE;
    desc.name = "deep";
    /* about 200 bytes a frame: 2 MB of frames in 4 MiB (more under the sanitizers,
       which divide both by 4) */
    d.depth = 10000 / TEST_SCALE;
    d.result = 1;
    d.sink = 0;
    CHECK_OK(fsched_fiber_create(&desc, deep_body, &d, &f));
    CHECK_OK(fsched_fiber_stack(f, &lo, &size));
#if defined(FSCHED__CTX_WINFIBER)
    CHECK(size == 0); /* the system owns Windows fiber stacks */
#else
    CHECK(size >= desc.stack_size);
#endif
    CHECK_OK(fsched_fiber_switch(f));
    CHECK(fsched_fiber_get_state(f) == FSCHED_FIBER_FINISHED);
    CHECK_EQ_U64(d.result, d.depth); /* each level adds one, read back from its frame */
    CHECK_OK(fsched_fiber_destroy(f));
}

/* ---- many fibers: 100,000 created, switched and destroyed ---- */

typedef struct ring {
    fsched_fiber *main;
    fsched_fiber **fibers;
    unsigned n;
    unsigned long long visits;
} ring;

typedef struct ring_member {
    ring *r;
    unsigned index;
    unsigned visits;
} ring_member;

/* Each member passes control to the next one three times, then finishes. */
static void ring_body(void *arg) {
    ring_member *m = (ring_member *)arg;
    ring *r = m->r;
    int lap;
    for (lap = 0; lap < 3; lap++) {
        m->visits++;
        r->visits++;
        CHECK_OK(fsched_fiber_switch(m->index + 1 < r->n ? r->fibers[m->index + 1] : r->main));
    }
}

static void test_many_fibers(void) {
    enum { ALIVE = 1000 / TEST_SCALE };
    const unsigned rounds = test_rounds(100);
    static fsched_fiber *fibers[ALIVE];
    static ring_member members[ALIVE];
    ring r;
    fsched_fiber_desc d = small_desc("ring");
    fsched_stack_pool *pool = NULL;
    fsched_stack_pool_desc pd;
    unsigned round, i;
    unsigned long long created = 0;
    memset(&pd, 0, sizeof pd);
    pd.stack_size = SMALL_STACK;
    pd.max_cached = ALIVE;
    CHECK_OK(fsched_stack_pool_create(&pd, &pool));
    r.main = fsched_fiber_current();
    r.fibers = fibers;
    r.n = ALIVE;
    r.visits = 0;
    for (round = 0; round < rounds; round++) {
        /* even rounds take stacks from the pool, odd rounds map their own */
        fsched_fiber_desc rd = d;
        if (round % 2 == 0) {
            memset(&rd, 0, sizeof rd);
            rd.pool = pool;
            rd.name = "pooled";
        }
        for (i = 0; i < ALIVE; i++) {
            members[i].r = &r;
            members[i].index = i;
            members[i].visits = 0;
            CHECK_OK(fsched_fiber_create(&rd, ring_body, &members[i], &fibers[i]));
            created++;
        }
        /* three laps around the ring, then one switch per fiber to let it finish */
        for (i = 0; i < 3; i++) CHECK_OK(fsched_fiber_switch(fibers[0]));
        for (i = 0; i < ALIVE; i++) {
            CHECK(fsched_fiber_get_state(fibers[i]) == FSCHED_FIBER_SUSPENDED);
            CHECK_OK(fsched_fiber_switch(fibers[i]));
            CHECK(fsched_fiber_get_state(fibers[i]) == FSCHED_FIBER_FINISHED);
            CHECK(members[i].visits == 3);
        }
        for (i = 0; i < ALIVE; i++) CHECK_OK(fsched_fiber_destroy(fibers[i]));
    }
    CHECK_EQ_U64(created, (unsigned long long)rounds * ALIVE);
    CHECK_EQ_U64(r.visits, 3ull * rounds * ALIVE);
    {
        fsched_stack_pool_stats st;
        memset(&st, 0, sizeof st);
        CHECK_OK(fsched_stack_pool_get_stats(pool, &st));
        CHECK_EQ_U64(st.allocated, ALIVE); /* later even rounds reused the first one's stacks */
        CHECK_EQ_U64(st.cached, ALIVE);
        CHECK_EQ_U64(st.in_use, 0);
    }
    fsched_stack_pool_destroy(pool);
}

/* ---- the pool hands back the same stack ---- */

static void noop_body(void *arg) { ++*(int *)arg; }

static void test_pool_reuse(void) {
    fsched_stack_pool *pool;
    fsched_stack_pool_desc pd;
    fsched_fiber_desc d;
    fsched_stack_pool_stats st = {0, 0, 0};
    fsched_fiber *f, *g;
    void *lo1, *lo2;
    size_t size;
    int runs = 0, i;
    memset(&pd, 0, sizeof pd);
    pd.stack_size = SMALL_STACK;
    pd.max_cached = 2;
    CHECK_OK(fsched_stack_pool_create(&pd, &pool));
    memset(&d, 0, sizeof d);
    d.pool = pool;
    CHECK_OK(fsched_fiber_create(&d, noop_body, &runs, &f));
    CHECK_OK(fsched_fiber_stack(f, &lo1, &size));
#if !defined(FSCHED__CTX_WINFIBER)
    CHECK(size >= SMALL_STACK);
#endif
    CHECK_OK(fsched_fiber_switch(f));
    CHECK_OK(fsched_fiber_destroy(f));
    for (i = 0; i < 1000; i++) {
        CHECK_OK(fsched_fiber_create(&d, noop_body, &runs, &f));
        CHECK_OK(fsched_fiber_stack(f, &lo2, &size));
        CHECK(lo1 == lo2);
        CHECK_OK(fsched_fiber_switch(f));
        CHECK_OK(fsched_fiber_destroy(f));
    }
    CHECK(runs == 1001);
    CHECK_OK(fsched_stack_pool_get_stats(pool, &st));
    CHECK_EQ_U64(st.allocated, 1);
    CHECK_EQ_U64(st.cached, 1);
    /* a destroyed fiber whose stack waits in the pool is recognised */
    CHECK_RESULT(fsched_fiber_switch(f), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_fiber_destroy(f), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK(fsched_fiber_get_state(f) == FSCHED_FIBER_FINISHED);
    /* the pool keeps at most max_cached stacks */
    CHECK_OK(fsched_fiber_create(&d, noop_body, &runs, &f));
    CHECK_OK(fsched_fiber_create(&d, noop_body, &runs, &g));
    {
        fsched_fiber *h;
        CHECK_OK(fsched_fiber_create(&d, noop_body, &runs, &h));
        CHECK_OK(fsched_stack_pool_get_stats(pool, &st));
        CHECK_EQ_U64(st.in_use, 3);
        CHECK_EQ_U64(st.allocated, 3);
        CHECK_OK(fsched_fiber_destroy(h));
    }
    CHECK_OK(fsched_fiber_destroy(f));
    CHECK_OK(fsched_stack_pool_get_stats(pool, &st));
    CHECK_EQ_U64(st.cached, 2);
    /* destroying the pool while a fiber still holds a stack defers that stack's release */
    fsched_stack_pool_destroy(pool);
    CHECK_OK(fsched_fiber_switch(g));
    CHECK_OK(fsched_fiber_destroy(g));
    CHECK(runs == 1002);
}

/* ---- allocator and heap stacks ---- */

typedef struct counting_allocator {
    long live_blocks;
    size_t live_bytes;
    long calls;
    int fail_after; /* fail every allocation once calls reach this (0: never) */
} counting_allocator;

static void *counting_alloc(size_t size, size_t align, void *user) {
    counting_allocator *c = (counting_allocator *)user;
    void *p;
    c->calls++;
    if (c->fail_after && c->calls >= c->fail_after) return NULL;
    p = fsched__default_alloc(size, align, NULL);
    if (p) {
        CHECK(((uintptr_t)p & (align - 1)) == 0);
        c->live_blocks++;
        c->live_bytes += size;
    }
    return p;
}

static void counting_free(void *ptr, size_t size, size_t align, void *user) {
    counting_allocator *c = (counting_allocator *)user;
    c->live_blocks--;
    c->live_bytes -= size;
    fsched__default_free(ptr, size, align, NULL);
}

static void test_heap_stacks(void) {
    counting_allocator c;
    fsched_fiber_desc d = small_desc("heap");
    fsched_fiber *f;
    int runs = 0;
    memset(&c, 0, sizeof c);
    d.stack_kind = FSCHED_STACK_HEAP;
    d.allocator.alloc = counting_alloc;
    d.allocator.free = counting_free;
    d.allocator.user = &c;
    CHECK_OK(fsched_fiber_create(&d, noop_body, &runs, &f));
#if !defined(FSCHED__CTX_WINFIBER)
    CHECK(c.live_blocks == 1 && c.live_bytes > SMALL_STACK);
#endif
    CHECK_OK(fsched_fiber_switch(f));
    CHECK(runs == 1);
    CHECK_OK(fsched_fiber_destroy(f));
    CHECK(c.live_blocks == 0 && c.live_bytes == 0);
    /* out of memory is a result, not an abort */
    c.fail_after = 1;
    c.calls = 0;
    f = (fsched_fiber *)&c;
    CHECK_RESULT(fsched_fiber_create(&d, noop_body, &runs, &f), FSCHED_ERR_OUT_OF_MEMORY);
    CHECK(f == NULL);
    CHECK(c.live_blocks == 0);
}

/* ---- slab stacks: many stacks from shared mappings, slots reused ---- */

static void slab_body(void *arg) {
    volatile unsigned char buf[1024];
    size_t i;
    for (i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)i;
    *(unsigned *)arg += buf[1023] + 1u;
}

#if defined(FSCHED__HAVE_PAGES)
static int address_cmp(const void *a, const void *b) {
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

static void test_slab_stacks(void) {
    enum { N = 200 };
    static fsched_fiber *fibers[N];
    static uintptr_t first[N], second[N];
    fsched_fiber_desc d = small_desc("slab");
    unsigned runs = 0, round, i;
    d.stack_kind = FSCHED_STACK_SLAB;
    for (round = 0; round < 2; round++) {
        uintptr_t *lows = round ? second : first;
        for (i = 0; i < N; i++) {
            void *lo;
            size_t size;
            CHECK_OK(fsched_fiber_create(&d, slab_body, &runs, &fibers[i]));
            CHECK_OK(fsched_fiber_stack(fibers[i], &lo, &size));
#if !defined(FSCHED__CTX_WINFIBER) /* Windows makes the stack: only the record is ours */
            CHECK(size >= SMALL_STACK);
#endif
            lows[i] = (uintptr_t)lo;
        }
        for (i = 0; i < N; i++) CHECK_OK(fsched_fiber_switch(fibers[i]));
        for (i = 0; i < N; i++) CHECK_OK(fsched_fiber_destroy(fibers[i]));
        qsort(lows, N, sizeof *lows, address_cmp);
#if !defined(FSCHED__CTX_WINFIBER)
        for (i = 1; i < N; i++) CHECK(lows[i] - lows[i - 1] >= SMALL_STACK); /* apart */
#endif
    }
    CHECK(runs == 2u * N * 256u); /* each body adds (1023 & 0xff) + 1 */
#if !defined(FSCHED__CTX_WINFIBER)
    /* the second round had the first round's slots back, not new ones */
    for (i = 0; i < N; i++) CHECK(second[i] == first[i]);
#endif
}
#else
static void test_slab_stacks(void) { /* no pages without an OS */
    fsched_fiber_desc d = small_desc("slab");
    fsched_fiber *f = NULL;
    unsigned runs = 0;
    d.stack_kind = FSCHED_STACK_SLAB;
    CHECK_RESULT(fsched_fiber_create(&d, slab_body, &runs, &f), FSCHED_ERR_UNSUPPORTED);
    CHECK(f == NULL);
}
#endif

/* ---- small stacks: below a page, several sharing one, painted, with a canary ---- */

#if defined(FSCHED__HAVE_PAGES) && !defined(FSCHED__CTX_WINFIBER)
/* A recursion of `depth` frames of at least 64 bytes each: about 800 bytes at -O2 for 8,
   which a small stack of the smallest size (1,600 usable bytes on 4 KiB pages) holds. */
static FSCHED__NOINLINE unsigned recurse_small(unsigned depth) {
    volatile unsigned char frame[64];
    unsigned below, i;
    for (i = 0; i < sizeof frame; i++) /* every byte: a compiler keeps them all */
        frame[i] = (unsigned char)(i ? depth + 1 : depth);
    below = depth ? recurse_small(depth - 1) : 0;
    return below + frame[0] + frame[63]; /* read after the call: the frames nest */
}

static void small_body(void *arg) { *(unsigned *)arg += recurse_small(8); }

/* Sanitizers give frames redzones: their recursion takes the largest small stack. */
static size_t small_stack_size(void) {
#if defined(FSCHED__ASAN) || defined(FSCHED__TSAN)
    return fsched__small_stack_max();
#else
    return 0; /* the smallest */
#endif
}

static void test_small_stacks(void) {
    enum { N = 64 };
    static fsched_fiber *fibers[N];
    static uintptr_t lows[N];
    fsched_fiber_desc d;
    size_t page = fsched__page_size(), unit = fsched__small_unit(), size = 0, used = 0;
    unsigned sum = 0, i, shared = 0;
    memset(&d, 0, sizeof d);
    d.name = "small";
    d.stack_kind = FSCHED_STACK_SMALL;
    d.stack_size = small_stack_size();
    for (i = 0; i < N; i++) {
        void *lo;
        CHECK_OK(fsched_fiber_create(&d, small_body, &sum, &fibers[i]));
        CHECK_OK(fsched_fiber_stack(fibers[i], &lo, &size));
        CHECK(size >= (d.stack_size ? d.stack_size : FIBERSCHED_MIN_SMALL_STACK_SIZE));
        CHECK(size < unit);
        /* the stack, its record and its canary lie in one small unit: one page, unless a
           page cannot hold the smallest with its record (a ucontext's on aarch64) */
        CHECK((uintptr_t)fibers[i] + sizeof *fibers[i] - (uintptr_t)lo <= unit);
        if (unit == page)
            CHECK((uintptr_t)lo / page == ((uintptr_t)fibers[i] + sizeof *fibers[i] - 1) / page);
        CHECK_OK(fsched_fiber_stack_used(fibers[i], &used));
        /* painted: only its first frame so far, if any (a switch's saved registers:
           512 bytes on ppc64le) */
        CHECK(used < 768);
        lows[i] = (uintptr_t)lo;
    }
    qsort(lows, N, sizeof *lows, address_cmp);
    for (i = 1; i < N; i++) {
        CHECK(lows[i] - lows[i - 1] >= size); /* apart */
        shared += lows[i] / page == lows[i - 1] / page;
    }
    /* several to a page, where two of the smallest slots fit in one (not with a fiber
       record as large as a ucontext's) */
    if (!d.stack_size && FIBERSCHED_MIN_SMALL_STACK_SIZE + FSCHED__FIBER_RECORD_BYTES +
                                 FSCHED__CANARY_BYTES <= page / 2)
        CHECK(shared >= N / 4);
    for (i = 0; i < N; i++) CHECK_OK(fsched_fiber_switch(fibers[i]));
    CHECK_OK(fsched_fiber_stack_used(fibers[0], &used));
    CHECK(used < size); /* it fit: the canary is intact */
    CHECK(used >= 9 * 64); /* deep-ish */
    for (i = 0; i < N; i++) CHECK_OK(fsched_fiber_destroy(fibers[i]));
    CHECK(sum == N * 81u); /* each level adds 2 * depth + 1, over depths 8 to 0 */
}

/* Out of address space for a new slab mapping: fsched_fiber_create says
   FSCHED_ERR_OUT_OF_MEMORY, and the stacks it made before work and go back. In a child
   process, whose address space is capped a little above what it uses (not under the
   sanitizers, whose shadow memory maps as it goes). */
#if defined(__linux__) && !defined(FSCHED__ASAN) && !defined(FSCHED__TSAN)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static int small_stacks_until_out_of_memory(void) {
    enum { MAX = 1 << 16 };
    static fsched_fiber *fibers[MAX];
    fsched_fiber_desc d;
    struct rlimit cap;
    long pages = 0;
    unsigned sum = 0, n = 0, i;
    fsched_result r = FSCHED_OK;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (!statm || fscanf(statm, "%ld", &pages) != 1) return 2;
    fclose(statm);
    memset(&d, 0, sizeof d);
    d.stack_kind = FSCHED_STACK_SMALL;
    cap.rlim_cur = cap.rlim_max = (rlim_t)pages * fsched__page_size() + 4u * 1024u * 1024u;
    if (setrlimit(RLIMIT_AS, &cap) != 0) return 3;
    while (n < MAX && (r = fsched_fiber_create(&d, small_body, &sum, &fibers[n])) == FSCHED_OK)
        n++;
    if (r != FSCHED_ERR_OUT_OF_MEMORY || n == 0) return 4; /* 4 MiB hold 2,048 at most */
    for (i = 0; i < n; i++)
        if (fsched_fiber_switch(fibers[i]) != FSCHED_OK || fsched_fiber_destroy(fibers[i]) != FSCHED_OK)
            return 5;
    if (sum != n * 81u) return 6;
    /* their slots are back: as many again, without a new mapping */
    for (i = 0; i < n; i++)
        if (fsched_fiber_create(&d, small_body, &sum, &fibers[i]) != FSCHED_OK) return 7;
    return 0;
}

static void test_small_stacks_out_of_memory(void) {
    int status = 0;
    pid_t pid;
    if (test_under_valgrind()) return; /* Valgrind's own memory counts in the cap */
    if (test_emulated()) return;        /* qemu-user ignores an address-space cap */
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) _exit(small_stacks_until_out_of_memory());
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "small stacks out of memory: child status %d\n", status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
#else
static void test_small_stacks_out_of_memory(void) {}
#endif

static void test_small_stack_sizes(void) {
    fsched_fiber_desc d;
    fsched_fiber *f = NULL;
    void *lo;
    size_t size;
    memset(&d, 0, sizeof d);
    d.stack_kind = FSCHED_STACK_SMALL;
    d.stack_size = FIBERSCHED_MIN_SMALL_STACK_SIZE - 16;
    CHECK_RESULT(fsched_fiber_create(&d, small_body, NULL, &f), FSCHED_ERR_INVALID_ARGUMENT);
    d.stack_size = fsched__small_stack_max() + 16; /* more than a unit holds */
    CHECK_RESULT(fsched_fiber_create(&d, small_body, NULL, &f), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK(f == NULL);
    d.stack_size = fsched__small_stack_max(); /* the largest: a unit of its own */
    CHECK_OK(fsched_fiber_create(&d, small_body, NULL, &f));
    CHECK_OK(fsched_fiber_stack(f, &lo, &size));
    CHECK(size == d.stack_size && f->mem_size == fsched__small_unit());
    CHECK_OK(fsched_fiber_destroy(f));
}
#else
static void test_small_stacks(void) { /* no pages without an OS (Windows fibers: the system's) */
#if !defined(FSCHED__CTX_WINFIBER)
    fsched_fiber_desc d = small_desc("small");
    fsched_fiber *f = NULL;
    d.stack_kind = FSCHED_STACK_SMALL;
    d.stack_size = 0;
    CHECK_RESULT(fsched_fiber_create(&d, slab_body, NULL, &f), FSCHED_ERR_UNSUPPORTED);
    CHECK(f == NULL);
    /* any size: the kind is what is refused, not a size checked against no bound */
    d.stack_size = 1;
    CHECK_RESULT(fsched_fiber_create(&d, slab_body, NULL, &f), FSCHED_ERR_UNSUPPORTED);
    d.stack_size = SIZE_MAX;
    CHECK_RESULT(fsched_fiber_create(&d, slab_body, NULL, &f), FSCHED_ERR_UNSUPPORTED);
    CHECK(f == NULL);
#endif
}

static void test_small_stack_sizes(void) {}
static void test_small_stacks_out_of_memory(void) {}
#endif

/* ---- how deep a stack was used: heap stacks are painted where FIBERSCHED_STACK_PAINT
   says so (by default without an OS); elsewhere the query is unsupported ---- */

static void used_body(void *arg) {
    volatile unsigned char buf[3000];
    size_t i;
    for (i = 0; i < sizeof buf; i++) buf[i] = (unsigned char)i;
    *(size_t *)arg = buf[2999];
}

static void test_stack_used(void) {
    fsched_fiber_desc d = small_desc("deep");
    fsched_fiber *f;
    size_t used = 0, sink = 0;
    d.stack_kind = FSCHED_STACK_HEAP;
    CHECK_OK(fsched_fiber_create(&d, used_body, &sink, &f));
    CHECK_RESULT(fsched_fiber_stack_used(f, NULL), FSCHED_ERR_INVALID_ARGUMENT);
#if FIBERSCHED_STACK_PAINT && !defined(FSCHED__CTX_WINFIBER)
    CHECK_OK(fsched_fiber_stack_used(f, &used));
    CHECK(used < 1024); /* not run yet: only its first frame, if any */
    CHECK_OK(fsched_fiber_switch(f));
    CHECK_OK(fsched_fiber_stack_used(f, &used));
    CHECK(used >= 3000 && used < SMALL_STACK);
#else
    CHECK_OK(fsched_fiber_switch(f));
    CHECK_RESULT(fsched_fiber_stack_used(f, &used), FSCHED_ERR_UNSUPPORTED);
#endif
    CHECK(sink == (2999 & 0xff));
    CHECK_OK(fsched_fiber_destroy(f));
}

/* ---- bad input ---- */

static void self_destroy_body(void *arg) {
    fsched_fiber *self = fsched_fiber_current();
    (void)arg;
    CHECK_RESULT(fsched_fiber_destroy(self), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_fiber_switch(self), FSCHED_ERR_WRONG_STATE);
}

static void quiet_log(fsched_log_level level, const char *message, void *user) {
    (void)level;
    (void)message;
    ++*(int *)user;
}

static void test_bad_input(void) {
    fsched_fiber_desc d = small_desc("bad");
    fsched_fiber *f = NULL;
    fsched_stack_pool *pool;
    fsched_stack_pool_desc pd;
    int logged = 0;
    d.logger.func = quiet_log;
    d.logger.user = &logged;
    CHECK_RESULT(fsched_fiber_create(&d, NULL, NULL, &f), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_fiber_create(&d, noop_body, NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    d.stack_size = FIBERSCHED_MIN_STACK_SIZE - 1;
    CHECK_RESULT(fsched_fiber_create(&d, noop_body, NULL, &f), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK(f == NULL);
    d.stack_size = SIZE_MAX / 2;
    CHECK_RESULT(fsched_fiber_create(&d, noop_body, NULL, &f), FSCHED_ERR_INVALID_ARGUMENT);
    d.stack_size = SMALL_STACK;
    d.stack_kind = (fsched_stack_kind)42;
    CHECK_RESULT(fsched_fiber_create(&d, noop_body, NULL, &f), FSCHED_ERR_INVALID_ARGUMENT);
    d.stack_kind = FSCHED_STACK_DEFAULT;
#if FSCHED__DEBUG
    CHECK(logged == 5); /* every misuse above said why, through the desc's logger */
#endif
    CHECK_RESULT(fsched_fiber_switch(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_fiber_destroy(NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_fiber_switch(fsched_fiber_current()), FSCHED_ERR_WRONG_STATE);
    CHECK_RESULT(fsched_fiber_destroy(fsched_fiber_current()), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_fiber_stack(NULL, NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_stack_pool_create(NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    CHECK_RESULT(fsched_stack_pool_get_stats(NULL, NULL), FSCHED_ERR_INVALID_ARGUMENT);
    fsched_stack_pool_destroy(NULL);
    /* a pool fixes the stack sizes */
    memset(&pd, 0, sizeof pd);
    pd.stack_size = SMALL_STACK;
    CHECK_OK(fsched_stack_pool_create(&pd, &pool));
    d.pool = pool;
    CHECK_RESULT(fsched_fiber_create(&d, noop_body, NULL, &f), FSCHED_ERR_INVALID_ARGUMENT);
    d.stack_size = 0;
    d.logger.func = NULL;
    CHECK_OK(fsched_fiber_create(&d, self_destroy_body, NULL, &f));
    CHECK_OK(fsched_fiber_switch(f));
    CHECK_OK(fsched_fiber_destroy(f));
    fsched_stack_pool_destroy(pool);
#if defined(FIBERSCHED_NO_OS)
    d.pool = NULL;
    d.stack_size = SMALL_STACK;
    d.stack_kind = FSCHED_STACK_PAGES;
    CHECK_RESULT(fsched_fiber_create(&d, noop_body, NULL, &f), FSCHED_ERR_UNSUPPORTED);
#endif
    CHECK(strcmp(fsched_result_string(FSCHED_ERR_OUT_OF_MEMORY), "out of memory") == 0);
    CHECK(strcmp(fsched_result_string((fsched_result)1234), "unknown result") == 0);
}

/* ---- the first frame is aligned as the ABI requires ---- */

#if defined(__arm__)
#define ABI_STACK_ALIGN 8
#else
#define ABI_STACK_ALIGN 16
#endif

static FSCHED__NOINLINE int frame_is_aligned(void) {
    _Alignas(ABI_STACK_ALIGN) volatile unsigned char probe[ABI_STACK_ALIGN];
    probe[0] = 1;
    return ((uintptr_t)probe & (ABI_STACK_ALIGN - 1)) == 0;
}

static void alignment_body(void *arg) {
    _Alignas(ABI_STACK_ALIGN) volatile unsigned char probe[ABI_STACK_ALIGN];
    probe[0] = 1;
    *(int *)arg = ((uintptr_t)probe & (ABI_STACK_ALIGN - 1)) == 0 && frame_is_aligned();
}

static void test_alignment(void) {
    int aligned = 0;
    fsched_fiber_desc d = small_desc("align");
    fsched_fiber *f;
    unsigned extra;
    /* stacks of sizes that are not multiples of the alignment */
    for (extra = 0; extra < 64; extra += 4) {
        d.stack_size = SMALL_STACK + extra;
        aligned = 0;
        CHECK_OK(fsched_fiber_create(&d, alignment_body, &aligned, &f));
        CHECK_OK(fsched_fiber_switch(f));
        CHECK(aligned);
        CHECK_OK(fsched_fiber_destroy(f));
    }
}

/* ---- unwinding stops at the fiber's first frame ---- */

#if defined(TEST_UNWIND)
typedef struct walk {
    int frames;
    uintptr_t last_ip; /* the outermost frame with a known return address */
    _Unwind_Reason_Code end;
} walk;

static _Unwind_Reason_Code walk_frame(struct _Unwind_Context *ctx, void *arg) {
    walk *w = (walk *)arg;
    uintptr_t ip = (uintptr_t)_Unwind_GetIP(ctx);
    w->frames++;
    if (ip) w->last_ip = ip;
    return w->frames > 200 ? _URC_NORMAL_STOP : _URC_NO_REASON;
}

static FSCHED__NOINLINE void unwind_inner(walk *w) {
    w->end = _Unwind_Backtrace(walk_frame, w);
    __asm__ __volatile__("" ::: "memory"); /* no tail call: keep this frame */
}

static void unwind_body(void *arg) {
    unwind_inner((walk *)arg);
}

static void test_unwind(void) {
    walk w;
    fsched_fiber_desc d = small_desc("unwind");
    fsched_fiber *f;
    uintptr_t entry = (uintptr_t)fsched__asm_entry;
    memset(&w, 0, sizeof w);
    CHECK_OK(fsched_fiber_create(&d, unwind_body, &w, &f));
    CHECK_OK(fsched_fiber_switch(f));
    CHECK_OK(fsched_fiber_destroy(f));
    /* the walk ends by itself, a few frames up, in the trampoline */
    CHECK(w.end == _URC_END_OF_STACK);
    if (!(w.frames >= 3 && w.frames < 20)) fprintf(stderr, "frames %d end %d last %p entry %p\n", w.frames, (int)w.end, (void*)w.last_ip, (void*)entry);
    CHECK(w.frames >= 3 && w.frames < 20);
    CHECK(w.last_ip > entry && w.last_ip < entry + 64);
}
#endif

/* ---- x86 floating-point control state belongs to each fiber ---- */

#if defined(TEST_FPU)
typedef struct fpu {
    fsched_fiber *main;
    int seen_mode;
} fpu;

static void fpu_body(void *arg) {
    fpu *p = (fpu *)arg;
    p->seen_mode = fegetround(); /* inherited from the creating thread */
    CHECK(fesetround(FE_UPWARD) == 0);
    CHECK_OK(fsched_fiber_switch(p->main));
    p->seen_mode = fegetround(); /* its own mode survived main's change */
}

static void test_fpu_control(void) {
    fpu p;
    fsched_fiber_desc d = small_desc("fpu");
    fsched_fiber *f;
    p.main = fsched_fiber_current();
    CHECK(fesetround(FE_TOWARDZERO) == 0);
    CHECK_OK(fsched_fiber_create(&d, fpu_body, &p, &f));
    CHECK(fesetround(FE_DOWNWARD) == 0);
    CHECK_OK(fsched_fiber_switch(f));
    CHECK(p.seen_mode == FE_TOWARDZERO);
    CHECK(fegetround() == FE_DOWNWARD); /* the fiber's FE_UPWARD did not leak */
    CHECK_OK(fsched_fiber_switch(f));
    CHECK(p.seen_mode == FE_UPWARD);
    CHECK(fegetround() == FE_DOWNWARD);
    CHECK_OK(fsched_fiber_destroy(f));
    CHECK(fesetround(FE_TONEAREST) == 0);
}
#endif

/* ---- fibers resumed by other threads ---- */

#if defined(TEST_PTHREADS)
typedef struct migrate {
    fsched_fiber *fiber;
    fsched_fiber *back[4]; /* the root fiber of each thread, set as it takes its turn */
    int turn;
    int threads_seen[4];
} migrate;

static migrate mig;

static void migrate_body(void *arg) {
    int i;
    (void)arg;
    for (i = 0; i < 4; i++) {
        CHECK(mig.turn == i);
        mig.threads_seen[i] = 1;
        CHECK_OK(fsched_fiber_switch(mig.back[i]));
    }
}

static void *migrate_thread(void *arg) {
    int i = (int)(intptr_t)arg;
    mig.back[i] = fsched_fiber_current();
    mig.turn = i;
    CHECK_OK(fsched_fiber_switch(mig.fiber));
    CHECK(fsched_fiber_current() == mig.back[i]);
    return NULL;
}

static void test_migration(void) {
    fsched_fiber_desc d = small_desc("migrant");
    int i;
    memset(&mig, 0, sizeof mig);
    CHECK_OK(fsched_fiber_create(&d, migrate_body, NULL, &mig.fiber));
    for (i = 0; i < 4; i++) { /* one thread after another resumes the same fiber */
        pthread_t th;
        CHECK(pthread_create(&th, NULL, migrate_thread, (void *)(intptr_t)i) == 0);
        CHECK(pthread_join(th, NULL) == 0);
        CHECK(mig.threads_seen[i]);
    }
    CHECK(fsched_fiber_get_state(mig.fiber) == FSCHED_FIBER_SUSPENDED);
    mig.back[3] = fsched_fiber_current();
    CHECK_OK(fsched_fiber_destroy(mig.fiber)); /* suspended: dropped without unwinding */
}

/* Independent fibers on several threads at once. */
static void *parallel_thread(void *arg) {
    (void)arg;
    test_pingpong();
    test_return_to_resumer();
    return NULL;
}

/* Threads that start fibers at the same time take fresh slab slots from runs of their
   own: a slot's canary lies in the top page of the slot below, and two threads writing
   one fresh page both take its page fault. */
static struct {
    fsched_fiber *fiber;
    uintptr_t lo;
} slab_other;

static uintptr_t slab_fiber_low(fsched_fiber_desc *d, fsched_fiber **f) {
    void *lo;
    size_t size;
    CHECK_OK(fsched_fiber_create(d, slab_body, NULL, f));
    CHECK_OK(fsched_fiber_stack(*f, &lo, &size));
    return (uintptr_t)lo;
}

static void *slab_other_thread(void *arg) {
    slab_other.lo = slab_fiber_low((fsched_fiber_desc *)arg, &slab_other.fiber);
    return NULL;
}

static void test_slab_runs_per_thread(void) {
#if defined(FSCHED__HAVE_PAGES) && !defined(FSCHED__CTX_WINFIBER)
    fsched_fiber_desc d = small_desc("slab run");
    fsched_fiber *below, *above;
    uintptr_t lo_below, lo_above, slot;
    pthread_t th;
    d.stack_kind = FSCHED_STACK_SLAB;
    d.stack_size = SMALL_STACK + 3 * 4096; /* a size of its own: fresh slots only */
    lo_below = slab_fiber_low(&d, &below);
    CHECK(pthread_create(&th, NULL, slab_other_thread, &d) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    lo_above = slab_fiber_low(&d, &above);
    slot = (uintptr_t)below->mem_size;
    CHECK(lo_above == lo_below + slot); /* this thread's run goes on */
    CHECK(slab_other.lo != lo_below + slot && slab_other.lo + slot != lo_below &&
          slab_other.lo != lo_above + slot); /* the other thread's is elsewhere */
    CHECK_OK(fsched_fiber_destroy(below));
    CHECK_OK(fsched_fiber_destroy(above));
    CHECK_OK(fsched_fiber_destroy(slab_other.fiber));
#endif
}

static void test_parallel_threads(void) {
    pthread_t th[4];
    int i;
    for (i = 0; i < 4; i++) CHECK(pthread_create(&th[i], NULL, parallel_thread, NULL) == 0);
    for (i = 0; i < 4; i++) CHECK(pthread_join(th[i], NULL) == 0);
}
#endif

int main(void) {
    test_watchdog(600);
    test_pingpong();
    test_return_to_resumer();
    test_deep_recursion();
    test_pool_reuse();
    test_heap_stacks();
    test_slab_stacks();
    test_small_stacks();
    test_small_stack_sizes();
    test_small_stacks_out_of_memory();
    test_stack_used();
    test_bad_input();
    test_alignment();
#if defined(TEST_UNWIND)
    test_unwind();
#endif
#if defined(TEST_FPU)
    test_fpu_control();
#endif
#if defined(TEST_PTHREADS)
    test_migration();
    test_slab_runs_per_thread();
    test_parallel_threads();
#endif
    test_many_fibers();
    printf("test_fiber: ok\n");
    return 0;
}
