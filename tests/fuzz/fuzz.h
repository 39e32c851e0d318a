/* What the fuzz harnesses share: reading the input as a sequence of choices, a watchdog
   that names the step that hangs, checks of results against the header's contract,
   allocators that fail on demand, and plain threads.

   A harness defines LLVMFuzzerTestOneInput. Built with clang -fsanitize=fuzzer it is
   driven by libFuzzer; built with replay.c (any compiler, any sanitizer) it replays
   files, e.g. the corpus in tests/fuzz/corpus/<harness>/. Every input runs on its own
   scheduler(s), which it destroys: nothing carries over from one input to the next but
   the library's own registry and the threads' caches.

   The input is read front to back as bytes; past its end every read gives 0, so that
   any input, the empty one included, is a valid program. */
#ifndef FIBERSCHED_FUZZ_H
#define FIBERSCHED_FUZZ_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
#include <atomic>
#define FZ_ATOMIC(T) std::atomic<T>
#define FZ_EXTERN_C extern "C"
#else
#include <stdatomic.h>
#define FZ_ATOMIC(T) _Atomic(T)
#define FZ_EXTERN_C
#endif

/* Sanitizers: a huge allocation is an allocation that fails (the library must say
   FSCHED_ERR_OUT_OF_MEMORY), not a report. */
FZ_EXTERN_C const char *__asan_default_options(void);
FZ_EXTERN_C const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
FZ_EXTERN_C const char *__tsan_default_options(void);
FZ_EXTERN_C const char *__tsan_default_options(void) { return "allocator_may_return_null=1"; }

/* ---- time ---- */

#define FZ_US 1000ull
#define FZ_MS 1000000ull

static inline uint64_t fz_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void fz_nap(uint64_t ns) {
    struct timespec ts;
    ts.tv_sec = (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    nanosleep(&ts, NULL);
}

/* ---- failing the run ---- */

static void fz_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
static void fz_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s:%d: fuzz check failed: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    abort();
}

#define FZ_CHECK(cond)                                                                   \
    do {                                                                                 \
        if (!(cond)) fz_fail(__FILE__, __LINE__, "%s", #cond);                          \
    } while (0)

/* r must be one of the codes that follow (a list ending in -1): the contract of the
   call named by `what`, as its declaration in fibersched.h gives it. */
static inline int fz_one_of(int r, ...) {
    va_list ap;
    int code, found = 0;
    va_start(ap, r);
    while ((code = va_arg(ap, int)) != -1)
        if (r == code) found = 1;
    va_end(ap);
    return found;
}

#define FZ_EXPECT(r, what, ...)                                                          \
    do {                                                                                 \
        fsched_result fz_r_ = (r);                                                       \
        if (!fz_one_of((int)fz_r_, __VA_ARGS__, -1))                                          \
            fz_fail(__FILE__, __LINE__, "%s returned %s, which its contract rules out",  \
                    (what), fsched_result_string(fz_r_));                                \
    } while (0)

/* ---- the input ---- */

typedef struct fz_in {
    const uint8_t *p;
    size_t n, i;
} fz_in;

static inline uint8_t fz_u8(fz_in *in) { return in->i < in->n ? in->p[in->i++] : 0; }

static inline uint32_t fz_u32(fz_in *in) {
    uint32_t v = 0;
    int k;
    for (k = 0; k < 4; k++) v = v << 8 | fz_u8(in);
    return v;
}

static inline uint64_t fz_u64(fz_in *in) {
    uint64_t hi = fz_u32(in);
    return hi << 32 | fz_u32(in);
}

/* A number below n (n > 0). */
static inline uint32_t fz_below(fz_in *in, uint32_t n) { return fz_u8(in) % n; }

static inline int fz_done(const fz_in *in) { return in->i >= in->n; }

/* An edge value or a small one: what broke the library before. */
static inline uint64_t fz_edge64(fz_in *in) {
    static const uint64_t edges[] = {0, 1, 2, 3, 7, 8, 63, 64, 65, 255, 4096,
                                     (uint64_t)INT32_MAX, UINT32_MAX, (uint64_t)INT64_MAX,
                                     (uint64_t)INT64_MAX - 1, UINT64_MAX - 1, UINT64_MAX,
                                     (uint64_t)1 << 32, (uint64_t)1 << 63};
    return edges[fz_below(in, sizeof edges / sizeof edges[0])];
}

/* A timeout: the extremes, which must return promptly or never time out, and short real
   waits (at most a few milliseconds, so that an input runs in tens of them). */
static inline uint64_t fz_timeout(fz_in *in) {
    switch (fz_below(in, 8)) {
    case 0: return 0;
    case 1: return 1;
    case 2: return 1000;
    case 3: return 50 * FZ_US;
    case 4: return (uint64_t)(fz_u8(in) % 4 + 1) * FZ_MS;
    case 5: return UINT64_MAX;
    case 6: return UINT64_MAX - 1;
    default: return (uint64_t)1 << 63;
    }
}

/* A timeout that never expires while the harness runs (its waits end by a wake). */
static inline int fz_endless(uint64_t timeout) { return timeout >= ((uint64_t)1 << 62); }

/* ---- the watchdog: a hang is a bug ----
   Each actor (the driving thread, a task, a plain thread, a hook) says which step it is
   in; a step that does not end within FZ_STEP_LIMIT_S seconds aborts the process with
   its name. Steps that wait for other actors by design (the end of the input, a destroy)
   are steps too, named after what they wait for. */

#ifndef FZ_STEP_LIMIT_S
#define FZ_STEP_LIMIT_S 10
#endif
#define FZ_ACTORS 256

typedef struct fz_actor {
    FZ_ATOMIC(const char *) step;
    FZ_ATOMIC(uint64_t) since;
    FZ_ATOMIC(uint32_t) op;
} fz_actor;

static fz_actor fz_actors[FZ_ACTORS];
static FZ_ATOMIC(uint32_t) fz_actor_next;
static FZ_ATOMIC(uint64_t) fz_input_number;

/* Begins step `what` (an op's name: a string literal) for actor slot `a`; the op number
   says where in the input it is. */
/* FIBERSCHED_FUZZ_TRACE=1: every step is printed as it begins (to replay a failure). */
static inline void fz_step(fz_actor *a, const char *what, uint32_t op) {
    static int trace = -1;
    if (trace < 0) trace = getenv("FIBERSCHED_FUZZ_TRACE") != NULL;
    if (trace) fprintf(stderr, "fuzz: actor %u: %s (op %u)\n", (unsigned)(a - fz_actors), what, (unsigned)op);
    a->op = op;
    a->since = fz_now();
    a->step = what;
}

static inline void fz_step_end(fz_actor *a) { a->step = (const char *)0; }

/* A slot for an actor of this input (slots are reused round robin; an input has far
   fewer actors than slots). */
static inline fz_actor *fz_actor_new(void) {
    uint32_t k = fz_actor_next++;
    fz_actor *a = &fz_actors[k % FZ_ACTORS];
    a->step = (const char *)0;
    return a;
}

static void *fz_watchdog_main(void *arg) {
    (void)arg;
    for (;;) {
        uint64_t now = fz_now();
        int k, stuck = 0;
        fz_nap(100 * FZ_MS);
        for (k = 0; k < FZ_ACTORS; k++) {
            const char *step = fz_actors[k].step;
            uint64_t since = fz_actors[k].since;
            if (step && now > since && now - since > (uint64_t)FZ_STEP_LIMIT_S * 1000 * FZ_MS) {
                fprintf(stderr, "fuzz watchdog: input %llu: step '%s' (op %u) has not "
                                "returned for %u s\n",
                        (unsigned long long)fz_input_number, step, (unsigned)fz_actors[k].op,
                        (unsigned)FZ_STEP_LIMIT_S);
                stuck = 1;
            }
        }
        if (stuck) {
            for (k = 0; k < FZ_ACTORS; k++) {
                const char *step = fz_actors[k].step;
                if (step)
                    fprintf(stderr, "fuzz watchdog:   actor %d in '%s' (op %u) for %llu ms\n", k,
                            step, (unsigned)fz_actors[k].op,
                            (unsigned long long)((now - fz_actors[k].since) / FZ_MS));
            }
            fflush(stderr);
            abort();
        }
    }
    return NULL;
}

static void fz_watchdog_start(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, fz_watchdog_main, NULL) == 0) pthread_detach(t);
}

/* Starts the watchdog once per process, and counts the inputs. */
static inline void fz_input_begin(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    fz_input_number++;
    pthread_once(&once, fz_watchdog_start);
}

/* ---- allocators that fail on demand ----
   mode 0: never; 1: the n-th allocation and every one after it; 2: every n-th; 3: each
   with a probability from the input's seed. Counted over every object that carries it. */

typedef struct fz_alloc_state {
    uint32_t mode, n;
    FZ_ATOMIC(uint32_t) count;
    FZ_ATOMIC(uint64_t) live; /* bytes allocated and not freed */
    uint64_t seed;
} fz_alloc_state;

static void *fz_alloc(size_t size, size_t align, void *user) {
    fz_alloc_state *st = (fz_alloc_state *)user;
    uint32_t k = ++st->count;
    void *p = NULL;
    int fail = 0;
    switch (st->mode) {
    case 1: fail = k >= st->n; break;
    case 2: fail = st->n && k % st->n == 0; break;
    case 3: {
        uint64_t z = st->seed + k * 0x9e3779b97f4a7c15ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        fail = (z >> 59) < (st->n & 31u) / 4u; /* up to one in four */
        break;
    }
    default: break;
    }
    if (fail) return NULL;
    if (align < sizeof(void *)) align = sizeof(void *);
    if (posix_memalign(&p, align, size ? size : 1) != 0) return NULL;
    st->live += size;
    return p;
}

static void fz_free(void *ptr, size_t size, size_t align, void *user) {
    fz_alloc_state *st = (fz_alloc_state *)user;
    (void)align;
    if (!ptr) return;
    st->live -= size;
    free(ptr);
}

/* Fills a with a failing allocator from the input (or all zero: the default heap). */
static inline void fz_allocator_from(fz_in *in, fz_alloc_state *st, fsched_allocator *a) {
    memset(a, 0, sizeof *a);
    st->mode = fz_below(in, 6);
    if (st->mode > 3) st->mode = 0; /* the default heap, more often */
    st->n = fz_u8(in) + 1u;
    st->count = 0;
    st->live = 0;
    st->seed = fz_u8(in);
    a->alloc = fz_alloc;
    a->free = fz_free;
    a->user = st;
}

/* ---- a logger that keeps the run quiet (misuse is expected here) ---- */

static FZ_ATOMIC(uint64_t) fz_logged;
static void fz_log(fsched_log_level level, const char *message, void *user) {
    (void)level;
    (void)message;
    (void)user;
    fz_logged++;
}

static inline fsched_logger fz_logger(void) {
    fsched_logger l;
    l.func = fz_log;
    l.user = NULL;
    return l;
}

/* ---- plain threads ---- */

typedef struct fz_thread {
    pthread_t t;
    int started;
} fz_thread;

static inline int fz_thread_start(fz_thread *t, void *(*fn)(void *), void *arg) {
    t->started = pthread_create(&t->t, NULL, fn, arg) == 0;
    return t->started;
}

static inline void fz_thread_join(fz_thread *t) {
    if (t->started) FZ_CHECK(pthread_join(t->t, NULL) == 0);
    t->started = 0;
}

#endif
