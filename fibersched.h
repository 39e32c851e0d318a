/* fibersched.h - v0.1.0 - work-stealing task and fiber scheduler for C - MIT license (end of file)

   OVERVIEW

   fibersched is a single-header scheduler library. It gives C (and C++) programs:

   - fibers: cooperative threads with their own stacks, switched by a few instructions of
     assembly per architecture (fibersched_asm.h); usable on their own as coroutines;
   - stacks with guard pages, pooled for reuse, registered with AddressSanitizer,
     ThreadSanitizer and Valgrind, with an optional handler that reports a fiber stack
     overflow by name instead of a bare segmentation fault.

   QUICK START

   In exactly one source file:

       #define FIBERSCHED_IMPLEMENTATION
       #include "fibersched.h"

   Everywhere else, include "fibersched.h" without the define. Keep fibersched_asm.h next to
   fibersched.h. Build with `cc -O2 -pthread`. Coroutines without any scheduler:

       static fsched_fiber *caller;
       static void counter(void *arg) {
           for (int i = 0;; i++) { *(int *)arg = i; fsched_fiber_switch(caller); }
       }
       int main(void) {
           int value = 0;
           fsched_fiber *f;
           caller = fsched_fiber_current();
           if (fsched_fiber_create(&(fsched_fiber_desc){0}, counter, &value, &f) != FSCHED_OK)
               return 1;
           for (int i = 0; i < 3; i++) { fsched_fiber_switch(f); printf("%d\n", value); }
           fsched_fiber_destroy(f);
       }

   CONFIGURATION MACROS (define before including the implementation)

   FIBERSCHED_STATIC               all public functions `static` (a private copy per unit)
   FIBERSCHED_DLL                  export the API from a shared library (or import with it)
   FIBERSCHED_ASSERT(x)            internal invariant check; default: on unless NDEBUG
   FIBERSCHED_MALLOC(n) / FIBERSCHED_FREE(p)
                                   the default heap (both or neither); default malloc/free
   FIBERSCHED_DEFAULT_STACK_SIZE   usable stack bytes of a fiber when the desc says 0;
                                   default 256 KiB (64 KiB on 32-bit targets)
   FIBERSCHED_DEFAULT_GUARD_SIZE   guard bytes below page-allocated stacks; default 16 KiB
   FIBERSCHED_MIN_STACK_SIZE       smallest accepted stack; default 8 KiB
   FIBERSCHED_NO_THREADS           no thread library at all (single-threaded only)
   FIBERSCHED_NO_OS                no operating system: stacks from the heap with a canary,
                                   no signals; implies FIBERSCHED_NO_THREADS
   FIBERSCHED_NO_STDIO             no stdio: the default logger prints nothing
   FIBERSCHED_DEBUG                log misuse even when NDEBUG is defined
   FIBERSCHED_CONTEXT_ASM, FIBERSCHED_CONTEXT_UCONTEXT, FIBERSCHED_CONTEXT_WINFIBER
                                   force a context backend (default: assembly where
                                   available, else ucontext on POSIX, fibers on Windows)
   FIBERSCHED_FPU_CONTROL          0 stops switching the x86 floating-point control words
                                   (default 1; see fibersched_asm.h)
   FIBERSCHED_VALGRIND             1/0 forces the Valgrind stack registration on or off
                                   (default: on when <valgrind/valgrind.h> is available)

   PLATFORMS

   context backend  architecture / ABI                          tested in CI
   asm              x86-64 System V (Linux, BSD; Mach-O names)  native; Mach-O assembled
   asm              x86-64 Windows (MinGW-w64)                  under wine
   asm              i386 System V                               qemu-user
   asm              AArch64 (AAPCS64)                           qemu-user
   asm              ARM A32 / Thumb-2 / Thumb-1 (Cortex-M)      qemu-user (A32, Thumb-2,
                                                                Thumb-1 sequence)
   asm              RISC-V 64 (lp64d, lp64)                     qemu-user
   asm              ppc64le ELFv2                               qemu-user
   ucontext         other POSIX systems                         forced on Linux
   winfiber         Windows with clang-cl                       forced under MinGW + wine
   Compilers: GCC and Clang (C11 or later, C++11 or later). MSVC's cl is not supported yet.

   CAVEATS

   - A fiber's stack has a fixed size. Page-allocated stacks have a guard region below
     them: an overflow into it faults at once; fsched_install_overflow_handler() turns that
     fault into a message naming the fiber. Heap stacks (FSCHED_STACK_HEAP, FIBERSCHED_NO_OS)
     end in a canary that is checked when the fiber is destroyed (and, in debug builds, on
     every switch away from it).
   - A fiber keeps the thread's thread-local variables: code that reads a thread-local,
     switches and may resume on another thread sees the other thread's copy.
   - Destroying a suspended fiber frees its stack without unwinding it.
   - Not compatible with x86 CET shadow stacks, nor with AArch64's shadow call stack.

   ERROR MODEL

   Functions that can fail return fsched_result: FSCHED_OK (0) or one code per kind of
   failure, named by fsched_result_string(). Misuse (a NULL argument, a destroyed object,
   a call in the wrong state) returns a code and, in debug builds, logs a message through
   the logger of the desc (default: stderr). Out-of-memory is FSCHED_ERR_OUT_OF_MEMORY,
   never an abort. The process is ended, with a message, only when memory is already
   corrupt (a smashed stack canary) or a fiber's entry function returns with nowhere to go.

   THREAD SAFETY

   fsched_fiber_switch() and fsched_fiber_current() act on the calling thread. A fiber
   may be switched to from any thread while it is suspended, but by one thread at a time.
   Stack pools are thread-safe. Each function says more where it is declared.
*/

/* The implementation needs POSIX and BSD declarations (mmap flags, sigaltstack,
   clock_gettime) that strict -std=c11 hides; they must be requested before the first
   system header, so define FIBERSCHED_IMPLEMENTATION before including anything else. */
#if defined(FIBERSCHED_IMPLEMENTATION) && !defined(_DEFAULT_SOURCE) && !defined(_GNU_SOURCE)
#define _DEFAULT_SOURCE 1
#endif

#ifndef FIBERSCHED_H
#define FIBERSCHED_H

#define FIBERSCHED_VERSION_MAJOR 0
#define FIBERSCHED_VERSION_MINOR 1
#define FIBERSCHED_VERSION_PATCH 0

#include <stddef.h>
#include <stdint.h>

#if defined(FIBERSCHED_STATIC) && (defined(__GNUC__) || defined(__clang__))
#define FIBERSCHED_API static __attribute__((unused))
#elif defined(FIBERSCHED_STATIC)
#define FIBERSCHED_API static
#elif defined(FIBERSCHED_DLL) && defined(_WIN32)
#if defined(FIBERSCHED_IMPLEMENTATION)
#define FIBERSCHED_API __declspec(dllexport)
#else
#define FIBERSCHED_API __declspec(dllimport)
#endif
#elif defined(FIBERSCHED_DLL) && defined(__GNUC__)
#define FIBERSCHED_API __attribute__((visibility("default")))
#else
#define FIBERSCHED_API extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- results --------------------------------------------------------------------- */

typedef enum fsched_result {
    FSCHED_OK = 0,
    FSCHED_ERR_INVALID_ARGUMENT, /* NULL, out of range, or an object that is not live */
    FSCHED_ERR_OUT_OF_MEMORY,    /* an allocation failed */
    FSCHED_ERR_WRONG_STATE,      /* the object is in a state that forbids the call */
    FSCHED_ERR_TIMEOUT,          /* a timed wait expired */
    FSCHED_ERR_CANCELLED,        /* the work was cancelled */
    FSCHED_ERR_SYSTEM,           /* the operating system refused (errno / GetLastError) */
    FSCHED_ERR_UNSUPPORTED       /* not available in this build or on this platform */
} fsched_result;

/* A static English description of r, e.g. "invalid argument". Any thread. */
FIBERSCHED_API const char *fsched_result_string(fsched_result r);

/* "major.minor.patch" of the implementation. Any thread. */
FIBERSCHED_API const char *fsched_version_string(void);

/* ---- allocator and logger, carried in every desc ----------------------------------- */

/* Memory for everything fibersched allocates on behalf of an object. `alloc` returns
   memory aligned to `align` (a power of two) or NULL; `free` receives the size and
   alignment that were asked for. Both are called from any thread that uses the object.
   All-zero means FIBERSCHED_MALLOC / FIBERSCHED_FREE. */
typedef struct fsched_allocator {
    void *(*alloc)(size_t size, size_t align, void *user);
    void (*free)(void *ptr, size_t size, size_t align, void *user);
    void *user;
} fsched_allocator;

typedef enum fsched_log_level {
    FSCHED_LOG_ERROR = 0, /* misuse and failures */
    FSCHED_LOG_WARNING,   /* degraded behaviour, e.g. a fallback was taken */
    FSCHED_LOG_INFO
} fsched_log_level;

/* Receives messages (one line, no trailing newline). Called from any thread, possibly
   concurrently. All-zero means: print to stderr (nothing under FIBERSCHED_NO_STDIO). */
typedef struct fsched_logger {
    void (*func)(fsched_log_level level, const char *message, void *user);
    void *user;
} fsched_logger;

/* ---- fibers ---------------------------------------------------------------------- */

/* A fiber: a function running on its own stack, switched to and from explicitly. The
   thread's own context is a fiber too (see fsched_fiber_current). Opaque. */
typedef struct fsched_fiber fsched_fiber;
typedef struct fsched_stack_pool fsched_stack_pool;

typedef enum fsched_stack_kind {
    FSCHED_STACK_DEFAULT = 0, /* pages where the platform has virtual memory, else heap */
    FSCHED_STACK_PAGES,       /* mmap / VirtualAlloc with a guard region below */
    FSCHED_STACK_HEAP         /* the allocator, with a canary below (no MMU needed) */
} fsched_stack_kind;

typedef enum fsched_fiber_state {
    FSCHED_FIBER_SUSPENDED = 0, /* created or switched away from: may be switched to */
    FSCHED_FIBER_RUNNING,       /* running on some thread */
    FSCHED_FIBER_FINISHED       /* its function returned; may only be destroyed */
} fsched_fiber_state;

typedef struct fsched_fiber_desc {
    size_t stack_size;          /* usable bytes; 0: FIBERSCHED_DEFAULT_STACK_SIZE */
    size_t guard_size;          /* page stacks; 0: FIBERSCHED_DEFAULT_GUARD_SIZE */
    fsched_stack_kind stack_kind;
    fsched_stack_pool *pool;    /* take the stack from (and return it to) this pool; the
                                   pool's sizes then apply and the fields above must be 0 */
    const char *name;           /* for diagnostics; copied (at most 31 bytes kept) */
    fsched_allocator allocator; /* heap stacks and bookkeeping */
    fsched_logger logger;
} fsched_fiber_desc;

/* Creates a suspended fiber that will run fn(arg) on its own stack when first switched
   to. When fn returns, the fiber is FINISHED and control passes to the fiber that last
   switched to it. desc may be NULL (all defaults).
   Returns FSCHED_ERR_INVALID_ARGUMENT (fn or out NULL, stack_size below
   FIBERSCHED_MIN_STACK_SIZE, sizes together with a pool), FSCHED_ERR_OUT_OF_MEMORY,
   FSCHED_ERR_UNSUPPORTED (page stacks without virtual memory). Any thread. */
FIBERSCHED_API fsched_result fsched_fiber_create(const fsched_fiber_desc *desc,
                                                 void (*fn)(void *arg), void *arg,
                                                 fsched_fiber **out);

/* Suspends the calling fiber (or the thread's own context) and resumes `to` on the
   calling thread. Returns when some fiber switches back: FSCHED_OK. Without switching:
   FSCHED_ERR_INVALID_ARGUMENT (to is NULL or destroyed, where detectable: a destroyed
   fiber's memory stays readable while its stack is cached in a pool) or
   FSCHED_ERR_WRONG_STATE (to is running, finished, or the caller itself). */
FIBERSCHED_API fsched_result fsched_fiber_switch(fsched_fiber *to);

/* Frees a fiber that is suspended or finished; a suspended fiber's stack is dropped
   without unwinding. The thread's own fiber cannot be destroyed. Returns
   FSCHED_ERR_INVALID_ARGUMENT or FSCHED_ERR_WRONG_STATE (running) without freeing. */
FIBERSCHED_API fsched_result fsched_fiber_destroy(fsched_fiber *f);

/* The fiber running on the calling thread: a created fiber, or the thread's own context
   (set up on first use, never NULL, freed with nothing: it lives in thread-local
   storage). Any thread. */
FIBERSCHED_API fsched_fiber *fsched_fiber_current(void);

/* State of a live fiber (FSCHED_FIBER_FINISHED for NULL or a destroyed fiber). */
FIBERSCHED_API fsched_fiber_state fsched_fiber_get_state(const fsched_fiber *f);

/* The usable stack of f: [*lo, *lo + *size). The thread's own fiber, and every fiber of
   the Windows fiber backend (the system owns those stacks), report 0 bytes. */
FIBERSCHED_API fsched_result fsched_fiber_stack(const fsched_fiber *f, void **lo,
                                                size_t *size);

/* ---- stack pools ----------------------------------------------------------------- */

typedef struct fsched_stack_pool_desc {
    size_t stack_size;       /* usable bytes per stack; 0: FIBERSCHED_DEFAULT_STACK_SIZE */
    size_t guard_size;       /* 0: FIBERSCHED_DEFAULT_GUARD_SIZE */
    fsched_stack_kind stack_kind;
    size_t max_cached;       /* stacks kept for reuse; 0: 64 */
    fsched_allocator allocator;
    fsched_logger logger;
} fsched_stack_pool_desc;

typedef struct fsched_stack_pool_stats {
    size_t cached;      /* stacks waiting for reuse */
    size_t in_use;      /* stacks held by live fibers */
    size_t allocated;   /* stacks allocated from the system since creation */
} fsched_stack_pool_stats;

/* A thread-safe cache of equally sized stacks. Destroying the pool frees its cached
   stacks at once and each stack still in use when its fiber is destroyed. */
FIBERSCHED_API fsched_result fsched_stack_pool_create(const fsched_stack_pool_desc *desc,
                                                      fsched_stack_pool **out);
FIBERSCHED_API void fsched_stack_pool_destroy(fsched_stack_pool *pool);
FIBERSCHED_API fsched_result fsched_stack_pool_get_stats(fsched_stack_pool *pool,
                                                         fsched_stack_pool_stats *out);

/* ---- stack overflow reporting ---------------------------------------------------- */

/* Installs a SIGSEGV/SIGBUS handler, running on an alternate signal stack, that reports a
   fault in the guard region of the running fiber as "fibersched: stack overflow in fiber
   ..." and ends the process with the original signal. Other faults go to the handler that
   was installed before. Threads get their alternate stack when they first use fibers
   after this call (the calling thread at once). Idempotent. FSCHED_ERR_UNSUPPORTED where
   there are no signals (Windows, FIBERSCHED_NO_OS). Any thread. */
FIBERSCHED_API fsched_result fsched_install_overflow_handler(void);

#ifdef __cplusplus
}
#endif
#endif /* FIBERSCHED_H */

/* ===================================================================================== */
/*                                    IMPLEMENTATION                                     */
/* ===================================================================================== */
#if defined(FIBERSCHED_IMPLEMENTATION) && !defined(FIBERSCHED_IMPLEMENTATION_ONCE)
#define FIBERSCHED_IMPLEMENTATION_ONCE

/* ---- configuration, resolved in one place ------------------------------------------ */

#if defined(FIBERSCHED_NO_OS) && !defined(FIBERSCHED_NO_THREADS)
#define FIBERSCHED_NO_THREADS
#endif
#if defined(FIBERSCHED_NO_OS)
#define FSCHED__OS_NONE 1
#elif defined(_WIN32)
#define FSCHED__OS_WINDOWS 1
#elif defined(__unix__) || defined(__APPLE__)
#define FSCHED__OS_POSIX 1
#else
#define FSCHED__OS_NONE 1
#if !defined(FIBERSCHED_NO_THREADS)
#error "fibersched: no operating system detected: define FIBERSCHED_NO_OS for bare metal"
#endif
#endif

#if !defined(__GNUC__) && !defined(__clang__)
#error "fibersched: needs GCC or Clang (or a compiler with their __atomic builtins)"
#endif

#if defined(FIBERSCHED_MALLOC) != defined(FIBERSCHED_FREE)
#error "fibersched: define both FIBERSCHED_MALLOC and FIBERSCHED_FREE, or neither"
#endif
#if !defined(FIBERSCHED_MALLOC)
#include <stdlib.h>
#define FIBERSCHED_MALLOC(size) malloc(size)
#define FIBERSCHED_FREE(ptr) free(ptr)
#endif

#if !defined(NDEBUG) || defined(FIBERSCHED_DEBUG)
#define FSCHED__DEBUG 1
#else
#define FSCHED__DEBUG 0
#endif

#ifndef FIBERSCHED_DEFAULT_STACK_SIZE
#if UINTPTR_MAX > 0xffffffffu
#define FIBERSCHED_DEFAULT_STACK_SIZE (256u * 1024u)
#else
#define FIBERSCHED_DEFAULT_STACK_SIZE (64u * 1024u)
#endif
#endif
#ifndef FIBERSCHED_DEFAULT_GUARD_SIZE
#define FIBERSCHED_DEFAULT_GUARD_SIZE (16u * 1024u)
#endif
#ifndef FIBERSCHED_MIN_STACK_SIZE
#define FIBERSCHED_MIN_STACK_SIZE (8u * 1024u)
#endif

#if !defined(FIBERSCHED_VALGRIND)
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>) /* client requests need no OS: bare metal too */
#define FIBERSCHED_VALGRIND 1
#endif
#endif
#endif
#if !defined(FIBERSCHED_VALGRIND)
#define FIBERSCHED_VALGRIND 0
#endif

#if defined(__SANITIZE_ADDRESS__)
#define FSCHED__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FSCHED__ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define FSCHED__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FSCHED__TSAN 1
#endif
#endif

#include <stdarg.h>
#include <string.h>
#if !defined(FIBERSCHED_NO_STDIO)
#include <stdio.h>
#endif
#include <stdlib.h> /* abort */

#if defined(FSCHED__OS_POSIX)
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#if !defined(FIBERSCHED_NO_THREADS)
#include <pthread.h>
#endif
#if !defined(MAP_ANONYMOUS) && defined(MAP_ANON)
#define MAP_ANONYMOUS MAP_ANON
#endif
#if !defined(MAP_ANONYMOUS)
#error "fibersched: MAP_ANONYMOUS is hidden: define FIBERSCHED_IMPLEMENTATION before any #include"
#endif
#elif defined(FSCHED__OS_WINDOWS)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#include <windows.h>
#endif

#include "fibersched_asm.h"

#if defined(FSCHED__CTX_UCONTEXT)
#include <ucontext.h>
#endif
#if defined(FSCHED__CTX_WINFIBER) && !defined(FSCHED__OS_WINDOWS)
#error "fibersched: FIBERSCHED_CONTEXT_WINFIBER needs Windows"
#endif

#if FIBERSCHED_VALGRIND
#include <valgrind/valgrind.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif
#if defined(FSCHED__ASAN)
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old,
                                     size_t *size_old);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
#endif
#if defined(FSCHED__TSAN)
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
void __tsan_set_fiber_name(void *fiber, const char *name);
#endif
#ifdef __cplusplus
}
#endif

/* ===================================================================================== */
/*  platform: atomics, thread-local storage, locks, clock, pages, logging               */
/* ===================================================================================== */

#define FSCHED__NOINLINE __attribute__((noinline))
#define FSCHED__UNUSED __attribute__((unused))
#define FSCHED__LIKELY(x) __builtin_expect(!!(x), 1)
#define FSCHED__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define FSCHED__CACHE_LINE 64

/* Atomics follow the C11 memory model through the GCC/Clang __atomic builtins, which
   work on plain integer and pointer objects in C and C++ alike. Every use names its
   ordering; the comment next to it says why. Without threads they are plain accesses. */
#define FSCHED__RELAXED __ATOMIC_RELAXED
#define FSCHED__ACQUIRE __ATOMIC_ACQUIRE
#define FSCHED__RELEASE __ATOMIC_RELEASE
#define FSCHED__ACQ_REL __ATOMIC_ACQ_REL
#define FSCHED__SEQ_CST __ATOMIC_SEQ_CST
#if !defined(FIBERSCHED_NO_THREADS)
#define FSCHED__LOAD(p, mo) __atomic_load_n((p), (mo))
#define FSCHED__STORE(p, v, mo) __atomic_store_n((p), (v), (mo))
#define FSCHED__FETCH_ADD(p, v, mo) __atomic_fetch_add((p), (v), (mo))
#define FSCHED__FETCH_SUB(p, v, mo) __atomic_fetch_sub((p), (v), (mo))
#define FSCHED__EXCHANGE(p, v, mo) __atomic_exchange_n((p), (v), (mo))
#define FSCHED__CAS(p, expected, desired, succ, fail) \
    __atomic_compare_exchange_n((p), (expected), (desired), 0, (succ), (fail))
#define FSCHED__CAS_WEAK(p, expected, desired, succ, fail) \
    __atomic_compare_exchange_n((p), (expected), (desired), 1, (succ), (fail))
#define FSCHED__FENCE(mo) __atomic_thread_fence(mo)
#define FSCHED__THREAD_LOCAL_STORAGE 1
#else
#define FSCHED__LOAD(p, mo) (*(p))
#define FSCHED__STORE(p, v, mo) ((void)(*(p) = (v)))
#define FSCHED__FETCH_ADD(p, v, mo) ((*(p) += (v)) - (v))
#define FSCHED__FETCH_SUB(p, v, mo) ((*(p) -= (v)) + (v))
#define FSCHED__CAS(p, expected, desired, succ, fail) \
    (*(p) == *(expected) ? (*(p) = (desired), 1) : (*(expected) = *(p), 0))
#define FSCHED__CAS_WEAK FSCHED__CAS
#define FSCHED__FENCE(mo) ((void)0)
#endif

#if defined(FIBERSCHED_NO_THREADS)
#define FSCHED__THREAD_LOCAL
#elif defined(__cplusplus) && __cplusplus >= 201103L
#define FSCHED__THREAD_LOCAL thread_local
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define FSCHED__THREAD_LOCAL _Thread_local
#else
#define FSCHED__THREAD_LOCAL __thread
#endif

/* Spin-wait hint for the processor. */
static inline void fsched__cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || (defined(__arm__) && defined(__ARM_ARCH) && __ARM_ARCH >= 7)
    __asm__ __volatile__("yield");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/* ---- logging and fatal errors ---- */

static void fsched__default_log(fsched_log_level level, const char *message, void *user) {
    (void)user;
#if !defined(FIBERSCHED_NO_STDIO)
    fprintf(stderr, "fibersched: %s: %s\n",
            level == FSCHED_LOG_ERROR ? "error" : level == FSCHED_LOG_WARNING ? "warning" : "info",
            message);
#else
    (void)level;
    (void)message;
#endif
}

static void fsched__logv(const fsched_logger *logger, fsched_log_level level, const char *fmt,
                         va_list ap) {
    char buf[256];
#if !defined(FIBERSCHED_NO_STDIO)
    vsnprintf(buf, sizeof buf, fmt, ap);
#else
    size_t n = strlen(fmt);
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, fmt, n);
    buf[n] = 0;
    (void)ap;
#endif
    if (logger && logger->func) logger->func(level, buf, logger->user);
    else fsched__default_log(level, buf, NULL);
}

FSCHED__UNUSED static void fsched__log(const fsched_logger *logger, fsched_log_level level,
                                       const char *fmt, ...)
#if defined(__GNUC__) && !defined(FIBERSCHED_NO_STDIO)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static void fsched__log(const fsched_logger *logger, fsched_log_level level, const char *fmt,
                        ...) {
    va_list ap;
    va_start(ap, fmt);
    fsched__logv(logger, level, fmt, ap);
    va_end(ap);
}

/* Misuse: returns `code` and, in debug builds, says why through the logger. */
#if FSCHED__DEBUG
#define FSCHED__MISUSE(logger, code, ...) (fsched__log((logger), FSCHED_LOG_ERROR, __VA_ARGS__), (code))
#else
#define FSCHED__MISUSE(logger, code, ...) ((void)(logger), (code))
#endif

/* Ends the process: only for corrupted memory and impossible states. */
static void fsched__fatal(const char *message) {
#if !defined(FIBERSCHED_NO_STDIO)
    fprintf(stderr, "fibersched: fatal: %s\n", message);
    fflush(stderr);
#else
    (void)message;
#endif
    abort();
}

#ifndef FIBERSCHED_ASSERT
#if FSCHED__DEBUG
#define FIBERSCHED_ASSERT(x) ((x) ? (void)0 : fsched__fatal("assertion failed: " #x))
#else
#define FIBERSCHED_ASSERT(x) ((void)0)
#endif
#endif

/* ---- allocation ---- */

static void *fsched__default_alloc(size_t size, size_t align, void *user) {
    unsigned char *raw, *p;
    (void)user;
    if (align <= sizeof(void *) * 2) return FIBERSCHED_MALLOC(size);
    /* over-allocate and keep the original pointer just below the aligned block */
    if (size > SIZE_MAX - align - sizeof(void *)) return NULL;
    raw = (unsigned char *)FIBERSCHED_MALLOC(size + align + sizeof(void *));
    if (!raw) return NULL;
    p = (unsigned char *)(((uintptr_t)raw + sizeof(void *) + align - 1) & ~(uintptr_t)(align - 1));
    memcpy(p - sizeof(void *), &raw, sizeof raw);
    return p;
}

static void fsched__default_free(void *ptr, size_t size, size_t align, void *user) {
    (void)size;
    (void)user;
    if (!ptr) return;
    if (align <= sizeof(void *) * 2) {
        FIBERSCHED_FREE(ptr);
    } else {
        void *raw;
        memcpy(&raw, (unsigned char *)ptr - sizeof(void *), sizeof raw);
        FIBERSCHED_FREE(raw);
    }
}

static fsched_allocator fsched__allocator_resolve(const fsched_allocator *a) {
    fsched_allocator r;
    if (a && a->alloc && a->free) return *a;
    r.alloc = fsched__default_alloc;
    r.free = fsched__default_free;
    r.user = NULL;
    return r;
}

static void *fsched__alloc(const fsched_allocator *a, size_t size, size_t align) {
    return a->alloc(size, align, a->user);
}
static void fsched__free(const fsched_allocator *a, void *ptr, size_t size, size_t align) {
    if (ptr) a->free(ptr, size, align, a->user);
}

static size_t fsched__round_up(size_t n, size_t align) {
    return (n + align - 1) & ~(align - 1);
}

/* ---- locks (a plain mutex: held for a few instructions, never across a switch) ---- */

#if defined(FIBERSCHED_NO_THREADS)
typedef struct fsched__mutex { int unused; } fsched__mutex;
static void fsched__mutex_init(fsched__mutex *m) { (void)m; }
static void fsched__mutex_destroy(fsched__mutex *m) { (void)m; }
static void fsched__mutex_lock(fsched__mutex *m) { (void)m; }
static void fsched__mutex_unlock(fsched__mutex *m) { (void)m; }
#elif defined(FSCHED__OS_WINDOWS)
typedef struct fsched__mutex { SRWLOCK lock; } fsched__mutex;
static void fsched__mutex_init(fsched__mutex *m) { InitializeSRWLock(&m->lock); }
static void fsched__mutex_destroy(fsched__mutex *m) { (void)m; }
static void fsched__mutex_lock(fsched__mutex *m) { AcquireSRWLockExclusive(&m->lock); }
static void fsched__mutex_unlock(fsched__mutex *m) { ReleaseSRWLockExclusive(&m->lock); }
#else
typedef struct fsched__mutex { pthread_mutex_t lock; } fsched__mutex;
static void fsched__mutex_init(fsched__mutex *m) { pthread_mutex_init(&m->lock, NULL); }
static void fsched__mutex_destroy(fsched__mutex *m) { pthread_mutex_destroy(&m->lock); }
static void fsched__mutex_lock(fsched__mutex *m) { pthread_mutex_lock(&m->lock); }
static void fsched__mutex_unlock(fsched__mutex *m) { pthread_mutex_unlock(&m->lock); }
#endif

/* ---- pages: stacks with a guard region ---- */

#if defined(FSCHED__OS_POSIX) || defined(FSCHED__OS_WINDOWS)
#define FSCHED__HAVE_PAGES 1
static size_t fsched__page_size(void) {
    static size_t cached; /* benign race: every thread computes the same value */
    size_t size = FSCHED__LOAD(&cached, FSCHED__RELAXED);
    if (!size) {
#if defined(FSCHED__OS_WINDOWS)
        SYSTEM_INFO info;
        GetSystemInfo(&info);
        size = info.dwPageSize;
#else
        long n = sysconf(_SC_PAGESIZE);
        size = n > 0 ? (size_t)n : 4096;
#endif
        FSCHED__STORE(&cached, size, FSCHED__RELAXED);
    }
    return size;
}

/* Maps `size` bytes of read-write memory whose lowest `guard` bytes are inaccessible.
   Returns NULL and sets *guard_failed when only the guard could not be set up. */
static void *fsched__pages_map(size_t size, size_t guard, int *guard_failed) {
    *guard_failed = 0;
#if defined(FSCHED__OS_WINDOWS)
    {
        unsigned char *p = (unsigned char *)VirtualAlloc(NULL, size, MEM_RESERVE, PAGE_NOACCESS);
        if (!p) return NULL;
        if (!VirtualAlloc(p + guard, size - guard, MEM_COMMIT, PAGE_READWRITE)) {
            VirtualFree(p, 0, MEM_RELEASE);
            return NULL;
        }
        return p;
    }
#else
    {
        int flags = MAP_PRIVATE | MAP_ANONYMOUS;
        void *p;
#if defined(MAP_STACK)
        flags |= MAP_STACK;
#endif
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, flags, -1, 0);
        if (p == MAP_FAILED) return NULL;
        if (guard && mprotect(p, guard, PROT_NONE) != 0) {
            /* Linux: each guard splits a mapping; vm.max_map_count bounds their number */
            munmap(p, size);
            *guard_failed = 1;
            return NULL;
        }
        return p;
    }
#endif
}

static void fsched__pages_unmap(void *p, size_t size) {
#if defined(FSCHED__OS_WINDOWS)
    (void)size;
    VirtualFree(p, 0, MEM_RELEASE);
#else
    munmap(p, size);
#endif
}
#endif /* pages */

/* ---- monotonic clock ---- */

FSCHED__UNUSED static uint64_t fsched__now_ns(void) {
#if defined(FSCHED__OS_WINDOWS)
    static LARGE_INTEGER freq; /* benign race: every thread computes the same value */
    LARGE_INTEGER now;
    if (!freq.QuadPart) QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&now);
    return (uint64_t)((double)now.QuadPart * (1e9 / (double)freq.QuadPart));
#elif defined(FSCHED__OS_POSIX)
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
#else
    return 0; /* no clock without an OS: schedulers take one in their desc */
#endif
}

/* ===================================================================================== */
/*  fiber: stacks, contexts, switching, sanitizer and Valgrind hooks                     */
/* ===================================================================================== */

#define FSCHED__FIBER_LIVE 0x46534642u /* "FSFB" */
#define FSCHED__FIBER_DEAD 0xdeadfb0bu
#define FSCHED__CANARY_BYTES 64
#define FSCHED__CANARY_BYTE 0xa5
#define FSCHED__NAME_BYTES 32

/* A saved context. `sp` is the fiber's state: non-NULL exactly while it is suspended (the
   assembly stores the stack pointer there with release ordering as its last act before
   leaving; other backends store a marker after their switch). Whoever resumes the fiber
   takes the value and clears it. `exit_sp` receives the last save of a finishing fiber,
   which marks it finished. */
typedef struct fsched__ctx {
    void *sp;
    void *exit_sp;
#if defined(FSCHED__CTX_UCONTEXT)
    ucontext_t uc;
#elif defined(FSCHED__CTX_WINFIBER)
    void *handle;
#endif
    void (*entry)(void *pass); /* the fiber's first function, given the switching fiber */
} fsched__ctx;

/* Stack parameters with every default resolved. */
typedef struct fsched__stack_params {
    size_t stack_size;
    size_t guard_size;
    fsched_stack_kind kind; /* PAGES or HEAP, never DEFAULT */
    fsched_allocator allocator;
    fsched_logger logger;
} fsched__stack_params;

struct fsched_fiber {
    fsched__ctx ctx;
    uint32_t magic;       /* LIVE while the fiber exists, DEAD after destroy */
    uint8_t is_root;      /* the thread's own context: no stack of ours */
    void (*fn)(void *);
    void *arg;
    fsched_fiber *resumer; /* the fiber that last switched to this one */
    /* memory: [mem, mem + mem_size) holds guard or canary, stack, and this struct */
    unsigned char *mem;
    size_t mem_size;
    unsigned char *stack_lo; /* lowest usable stack byte */
    unsigned char *stack_hi; /* one past the highest usable stack byte */
    fsched__stack_params params;
    fsched_stack_pool *pool;
    fsched_fiber *pool_next;
    unsigned valgrind_id;
    char name[FSCHED__NAME_BYTES];
    /* sanitizers: ASan's fake stack and this fiber's stack bounds; TSan's fiber */
    void *asan_fake_stack;
    const void *asan_bottom;
    size_t asan_size;
    void *tsan_fiber;
    void *owner; /* the scheduler's bookkeeping for fibers it runs */
};

struct fsched_stack_pool {
    fsched__mutex lock;
    fsched__stack_params params;
    fsched_fiber *cached; /* blocks whose fiber was destroyed, linked by pool_next */
    size_t n_cached, max_cached;
    size_t in_use, allocated;
    int destroyed;
};

/* Per-thread state. Read only through fsched__thread_get(): a fiber may resume on another
   thread, and compilers cache thread-local addresses across calls inside one function. */
typedef struct fsched__thread {
    fsched_fiber *current;
    fsched_fiber root;
    void *altstack; /* alternate signal stack for the overflow handler */
#if !defined(FSCHED__CTX_ASM)
    void *pass;        /* value carried across a ucontext / Windows fiber switch */
    void **publish_to; /* where the arriving side marks the context it left as saved */
#endif
} fsched__thread;

static FSCHED__THREAD_LOCAL fsched__thread fsched__tls_thread;

static void fsched__overflow_thread_setup(fsched__thread *t);

static FSCHED__NOINLINE fsched__thread *fsched__thread_get(void) {
    fsched__thread *t = &fsched__tls_thread;
    __asm__ __volatile__("" : "+r"(t)); /* not a constant function: never merged */
    if (FSCHED__UNLIKELY(!t->current)) {
        t->root.magic = FSCHED__FIBER_LIVE;
        t->root.is_root = 1;
        memcpy(t->root.name, "thread", 7);
#if defined(FSCHED__TSAN)
        t->root.tsan_fiber = __tsan_get_current_fiber();
#endif
        t->current = &t->root;
        fsched__overflow_thread_setup(t);
    }
    return t;
}

/* ---- contexts per backend ---- */

static void fsched__fiber_trap(void) {
    fsched__fatal("a fiber's first frame returned (its entry function must never return)");
}

#if !defined(FSCHED__CTX_ASM)
/* The arriving side of a ucontext / Windows fiber switch marks the context it left as
   saved; release: its registers are stored before another thread may resume it. */
static void *fsched__ctx_arrive(void) {
    fsched__thread *t = fsched__thread_get();
    FSCHED__STORE(t->publish_to, (void *)t->publish_to, FSCHED__RELEASE);
    return t->pass;
}
#endif

#if defined(FSCHED__CTX_UCONTEXT)
static void fsched__uc_entry(void) {
    void *pass = fsched__ctx_arrive();
    fsched__thread_get()->current->ctx.entry(pass);
    fsched__fiber_trap();
}
#elif defined(FSCHED__CTX_WINFIBER)
static void WINAPI fsched__winfiber_entry(void *param) {
    void *pass = fsched__ctx_arrive();
    (void)param;
    fsched__thread_get()->current->ctx.entry(pass);
    fsched__fiber_trap();
}
#endif

/* Builds the first context of f, which will call entry(pass) when first switched to. */
static fsched_result fsched__ctx_init(fsched_fiber *f, void (*entry)(void *)) {
    f->ctx.entry = entry;
    f->ctx.exit_sp = NULL;
#if defined(FSCHED__CTX_ASM)
    f->ctx.sp = fsched__asm_make_stack(f->stack_lo, f->stack_hi, entry, fsched__fiber_trap);
    return FSCHED_OK;
#elif defined(FSCHED__CTX_UCONTEXT)
    if (getcontext(&f->ctx.uc) != 0) return FSCHED_ERR_SYSTEM;
    f->ctx.uc.uc_stack.ss_sp = f->stack_lo;
    f->ctx.uc.uc_stack.ss_size = (size_t)(f->stack_hi - f->stack_lo);
    f->ctx.uc.uc_link = NULL;
    makecontext(&f->ctx.uc, fsched__uc_entry, 0);
    f->ctx.sp = &f->ctx.sp;
    return FSCHED_OK;
#elif defined(FSCHED__CTX_WINFIBER)
    f->ctx.handle = CreateFiberEx(0, f->params.stack_size, FIBER_FLAG_FLOAT_SWITCH,
                                  fsched__winfiber_entry, f);
    f->ctx.sp = &f->ctx.sp;
    return f->ctx.handle ? FSCHED_OK : FSCHED_ERR_OUT_OF_MEMORY;
#endif
}

static void fsched__ctx_release(fsched_fiber *f) {
#if defined(FSCHED__CTX_WINFIBER)
    if (f->ctx.handle) DeleteFiber(f->ctx.handle);
    f->ctx.handle = NULL;
#else
    (void)f;
#endif
}

/* The thread's own context needs preparing only for Windows fibers. */
static fsched_result fsched__ctx_prepare_root(fsched_fiber *root) {
#if defined(FSCHED__CTX_WINFIBER)
    if (!root->ctx.handle) {
        void *current = NULL;
        if (IsThreadAFiber()) {
#if defined(__x86_64__)
            /* GetCurrentFiber(): the TIB's FiberData (MinGW's inline version of it trips
               GCC's -Warray-bounds) */
            __asm__ __volatile__("movq %%gs:0x20, %0" : "=r"(current));
#else
            current = GetCurrentFiber();
#endif
        }
        root->ctx.handle = current ? current : ConvertThreadToFiberEx(NULL, FIBER_FLAG_FLOAT_SWITCH);
        if (!root->ctx.handle) return FSCHED_ERR_SYSTEM;
    }
#else
    (void)root;
#endif
    return FSCHED_OK;
}

/* Saves the running context of `from` (marking *save, its ctx.sp or ctx.exit_sp), resumes
   `to` from to_sp (the value taken from to->ctx.sp), and returns the `pass` value of
   whichever switch later resumes `from`. */
static inline void *fsched__ctx_switch(fsched_fiber *from, void **save, fsched_fiber *to,
                                       void *to_sp, void *pass) {
#if defined(FSCHED__CTX_ASM)
    (void)from;
    (void)to;
    return fsched__asm_switch(save, to_sp, pass);
#else
    fsched__thread *t = fsched__thread_get();
    (void)to_sp;
    t->pass = pass;
    t->publish_to = save;
#if defined(FSCHED__CTX_UCONTEXT)
    swapcontext(&from->ctx.uc, &to->ctx.uc);
#else
    (void)from;
    SwitchToFiber(to->ctx.handle);
#endif
    return fsched__ctx_arrive();
#endif
}

/* ---- stack memory ---- */

static int fsched__canary_intact(const fsched_fiber *f, size_t bytes) {
    const unsigned char *p = f->stack_lo - bytes;
    size_t i;
    for (i = 0; i < bytes; i++)
        if (p[i] != FSCHED__CANARY_BYTE) return 0;
    return 1;
}

static void fsched__stack_check(const fsched_fiber *f, size_t bytes) {
    if (f->params.kind == FSCHED_STACK_HEAP && f->stack_lo != f->stack_hi &&
        !fsched__canary_intact(f, bytes)) {
        char msg[128];
#if !defined(FIBERSCHED_NO_STDIO)
        snprintf(msg, sizeof msg, "stack overflow in fiber '%s': the canary below its stack "
                 "was overwritten", f->name);
#else
        memcpy(msg, "stack overflow in a fiber: its canary was overwritten", 54);
#endif
        fsched__fatal(msg);
    }
}

/* Resolves a stack request against the defaults and checks it. */
static fsched_result fsched__stack_params_resolve(size_t stack_size, size_t guard_size,
                                                  fsched_stack_kind kind,
                                                  const fsched_allocator *allocator,
                                                  const fsched_logger *logger,
                                                  fsched__stack_params *out) {
    if (logger) out->logger = *logger;
    else memset(&out->logger, 0, sizeof out->logger);
    out->allocator = fsched__allocator_resolve(allocator);
    out->stack_size = stack_size ? stack_size : FIBERSCHED_DEFAULT_STACK_SIZE;
    out->guard_size = guard_size ? guard_size : FIBERSCHED_DEFAULT_GUARD_SIZE;
    if ((unsigned)kind > (unsigned)FSCHED_STACK_HEAP)
        return FSCHED__MISUSE(&out->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "unknown stack kind %d", (int)kind);
    if (out->stack_size < FIBERSCHED_MIN_STACK_SIZE)
        return FSCHED__MISUSE(&out->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "stack size %lu is below the minimum of %lu bytes",
                              (unsigned long)out->stack_size,
                              (unsigned long)FIBERSCHED_MIN_STACK_SIZE);
    if (out->stack_size > SIZE_MAX / 4 || out->guard_size > SIZE_MAX / 4)
        return FSCHED__MISUSE(&out->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "stack size %lu or guard size %lu is out of range",
                              (unsigned long)out->stack_size, (unsigned long)out->guard_size);
#if defined(FSCHED__CTX_WINFIBER)
    kind = FSCHED_STACK_HEAP; /* Windows allocates the stack; we hold only the record */
#endif
#if defined(FSCHED__HAVE_PAGES)
    out->kind = kind == FSCHED_STACK_HEAP ? FSCHED_STACK_HEAP : FSCHED_STACK_PAGES;
    if (out->kind == FSCHED_STACK_PAGES)
        out->guard_size = fsched__round_up(out->guard_size, fsched__page_size());
#else
    if (kind == FSCHED_STACK_PAGES)
        return FSCHED__MISUSE(&out->logger, FSCHED_ERR_UNSUPPORTED,
                              "page-allocated stacks need an operating system");
    out->kind = FSCHED_STACK_HEAP;
#endif
    if (out->kind == FSCHED_STACK_HEAP) out->guard_size = 0;
    return FSCHED_OK;
}

#define FSCHED__FIBER_RECORD_BYTES \
    ((sizeof(struct fsched_fiber) + FSCHED__CACHE_LINE - 1) & ~(size_t)(FSCHED__CACHE_LINE - 1))

/* Allocates stack memory with the fiber record at its top:
   pages: [guard][stack.............][record]      heap: [canary][stack.....][record] */
static fsched_result fsched__stack_alloc(const fsched__stack_params *params, fsched_fiber **out) {
    unsigned char *mem = NULL;
    size_t size, usable;
    fsched_fiber *f;
#if defined(FSCHED__CTX_WINFIBER)
    usable = 0;
#else
    usable = fsched__round_up(params->stack_size, 16);
#endif
    if (params->kind == FSCHED_STACK_HEAP) {
        size = FSCHED__CANARY_BYTES + usable + FSCHED__FIBER_RECORD_BYTES;
        mem = (unsigned char *)fsched__alloc(&params->allocator, size, FSCHED__CACHE_LINE);
        if (!mem) return FSCHED_ERR_OUT_OF_MEMORY;
        memset(mem, FSCHED__CANARY_BYTE, FSCHED__CANARY_BYTES);
        f = (fsched_fiber *)(mem + FSCHED__CANARY_BYTES + usable);
        memset(f, 0, sizeof *f);
        f->stack_lo = mem + FSCHED__CANARY_BYTES;
    } else {
#if defined(FSCHED__HAVE_PAGES)
        int guard_failed;
        size = params->guard_size +
               fsched__round_up(usable + FSCHED__FIBER_RECORD_BYTES, fsched__page_size());
        mem = (unsigned char *)fsched__pages_map(size, params->guard_size, &guard_failed);
        if (!mem) {
            if (guard_failed)
                fsched__log(&params->logger, FSCHED_LOG_ERROR,
                            "cannot protect a stack guard: too many memory mappings "
                            "(raise vm.max_map_count, or use smaller or fewer stacks)");
            return FSCHED_ERR_OUT_OF_MEMORY;
        }
        f = (fsched_fiber *)(mem + size - FSCHED__FIBER_RECORD_BYTES);
        memset(f, 0, sizeof *f);
        f->stack_lo = mem + params->guard_size;
#else
        return FSCHED_ERR_UNSUPPORTED;
#endif
    }
    f->mem = mem;
    f->mem_size = size;
    f->stack_hi = (unsigned char *)f;
    f->params = *params;
#if FIBERSCHED_VALGRIND
    f->valgrind_id = VALGRIND_STACK_REGISTER(f->stack_lo, f->stack_hi);
#endif
    *out = f;
    return FSCHED_OK;
}

static void fsched__stack_free(fsched_fiber *f) {
    fsched__stack_params params = f->params;
    unsigned char *mem = f->mem;
    size_t size = f->mem_size;
#if FIBERSCHED_VALGRIND
    VALGRIND_STACK_DEREGISTER(f->valgrind_id);
#endif
#if defined(FSCHED__ASAN)
    /* frames of a fiber destroyed while suspended never unpoisoned their redzones */
    __asan_unpoison_memory_region(mem, size);
#endif
    if (params.kind == FSCHED_STACK_HEAP) {
        fsched__free(&params.allocator, mem, size, FSCHED__CACHE_LINE);
    } else {
#if defined(FSCHED__HAVE_PAGES)
        fsched__pages_unmap(mem, size);
#endif
    }
}

/* Re-initialises a cached block for a new fiber, keeping its memory fields. */
static fsched_fiber *fsched__stack_recycle(fsched_fiber *f) {
    fsched_fiber keep = *f;
#if defined(FSCHED__ASAN)
    __asan_unpoison_memory_region(f->stack_lo, (size_t)(f->stack_hi - f->stack_lo));
#endif
    memset(f, 0, sizeof *f);
    f->mem = keep.mem;
    f->mem_size = keep.mem_size;
    f->stack_lo = keep.stack_lo;
    f->stack_hi = keep.stack_hi;
    f->params = keep.params;
    f->valgrind_id = keep.valgrind_id;
    return f;
}

/* ---- stack pools ---- */

static fsched_result fsched__pool_take(fsched_stack_pool *pool, fsched_fiber **out) {
    fsched_fiber *f;
    fsched_result r;
    fsched__mutex_lock(&pool->lock);
    f = pool->cached;
    if (f) {
        pool->cached = f->pool_next;
        pool->n_cached--;
    }
    pool->in_use++; /* counted before allocating so that destroy waits for us */
    fsched__mutex_unlock(&pool->lock);
    if (f) {
        *out = fsched__stack_recycle(f);
    } else {
        r = fsched__stack_alloc(&pool->params, out);
        fsched__mutex_lock(&pool->lock);
        if (r == FSCHED_OK) pool->allocated++;
        else pool->in_use--;
        fsched__mutex_unlock(&pool->lock);
        if (r != FSCHED_OK) return r;
    }
    (*out)->pool = pool;
    return FSCHED_OK;
}

static void fsched__pool_free_struct(fsched_stack_pool *pool) {
    fsched_allocator a = pool->params.allocator;
    fsched__mutex_destroy(&pool->lock);
    fsched__free(&a, pool, sizeof *pool, FSCHED__CACHE_LINE);
}

static void fsched__pool_give(fsched_stack_pool *pool, fsched_fiber *f) {
    int keep, last;
    fsched__mutex_lock(&pool->lock);
    keep = !pool->destroyed && pool->n_cached < pool->max_cached;
    if (keep) {
        f->pool_next = pool->cached;
        pool->cached = f;
        pool->n_cached++;
    }
    pool->in_use--;
    last = pool->destroyed && pool->in_use == 0;
    fsched__mutex_unlock(&pool->lock);
    if (!keep) fsched__stack_free(f);
    if (last) fsched__pool_free_struct(pool);
}

FIBERSCHED_API fsched_result fsched_stack_pool_create(const fsched_stack_pool_desc *desc,
                                                      fsched_stack_pool **out) {
    fsched_stack_pool_desc d;
    fsched__stack_params params;
    fsched_stack_pool *pool;
    fsched_result r;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (!out) return FSCHED__MISUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT,
                                    "fsched_stack_pool_create: out is NULL");
    *out = NULL;
    r = fsched__stack_params_resolve(d.stack_size, d.guard_size, d.stack_kind, &d.allocator,
                                     &d.logger, &params);
    if (r != FSCHED_OK) return r;
    pool = (fsched_stack_pool *)fsched__alloc(&params.allocator, sizeof *pool, FSCHED__CACHE_LINE);
    if (!pool) return FSCHED_ERR_OUT_OF_MEMORY;
    memset(pool, 0, sizeof *pool);
    fsched__mutex_init(&pool->lock);
    pool->params = params;
    pool->max_cached = d.max_cached ? d.max_cached : 64;
    *out = pool;
    return FSCHED_OK;
}

FIBERSCHED_API void fsched_stack_pool_destroy(fsched_stack_pool *pool) {
    fsched_fiber *f, *next;
    int last;
    if (!pool) return;
    fsched__mutex_lock(&pool->lock);
    f = pool->cached;
    pool->cached = NULL;
    pool->n_cached = 0;
    pool->destroyed = 1;
    last = pool->in_use == 0;
    fsched__mutex_unlock(&pool->lock);
    for (; f; f = next) {
        next = f->pool_next;
        fsched__stack_free(f);
    }
    if (last) fsched__pool_free_struct(pool);
}

FIBERSCHED_API fsched_result fsched_stack_pool_get_stats(fsched_stack_pool *pool,
                                                         fsched_stack_pool_stats *out) {
    if (!pool || !out) return FSCHED__MISUSE((const fsched_logger *)NULL,
                                             FSCHED_ERR_INVALID_ARGUMENT,
                                             "fsched_stack_pool_get_stats: NULL argument");
    fsched__mutex_lock(&pool->lock);
    out->cached = pool->n_cached;
    out->in_use = pool->in_use;
    out->allocated = pool->allocated;
    fsched__mutex_unlock(&pool->lock);
    return FSCHED_OK;
}

/* ---- switching ---- */

/* Finishes a switch on the arriving side: tells ASan which stack it left. */
static inline void fsched__fiber_arrived(fsched_fiber *self, fsched_fiber *prev) {
#if defined(FSCHED__ASAN)
    const void *bottom = NULL;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(self->asan_fake_stack, &bottom, &size);
    if (prev && prev->is_root && !prev->asan_bottom) { /* learn the thread's stack */
        prev->asan_bottom = bottom;
        prev->asan_size = size;
    }
#else
    (void)self;
    (void)prev;
#endif
}

/* Tells the sanitizers that `from` leaves for `to`; `from_ends` says that `from` will
   never run again (ASan then drops its fake stack). */
static inline void fsched__fiber_leaving(fsched_fiber *from, fsched_fiber *to, int from_ends) {
#if FSCHED__DEBUG
    fsched__stack_check(from, 8);
#endif
#if defined(FSCHED__ASAN)
    __sanitizer_start_switch_fiber(from_ends ? NULL : &from->asan_fake_stack, to->asan_bottom,
                                   to->asan_size);
#endif
#if defined(FSCHED__TSAN)
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
    (void)from;
    (void)to;
    (void)from_ends;
}

/* The value a switch hands to the context it resumes. A context suspended by the tail
   call in fsched_fiber_switch returns it as its result, so it is 0 (FSCHED_OK); only
   ASan builds, which never take that tail call, pass the fiber being left. */
#if defined(FSCHED__ASAN)
#define FSCHED__JUMP_PASS(from) ((void *)(from))
#else
#define FSCHED__JUMP_PASS(from) ((void)(from), (void *)0)
#endif

/* Switches from the running fiber `from` to `to` on this thread. The caller has taken
   to_sp out of to->ctx.sp. `from` is saved into its ctx.sp, or into ctx.exit_sp when it
   ends (then this never returns). */
static inline void fsched__fiber_jump(fsched_fiber *from, fsched_fiber *to, void *to_sp,
                                      int from_ends) {
    void *prev;
    fsched__fiber_leaving(from, to, from_ends);
    prev = fsched__ctx_switch(from, from_ends ? &from->ctx.exit_sp : &from->ctx.sp, to, to_sp,
                              FSCHED__JUMP_PASS(from));
    fsched__fiber_arrived(from, (fsched_fiber *)prev);
}

/* Takes the saved context of a suspended fiber, making it running; NULL if it is not
   suspended. Acquire: pairs with the release store that saved it (fibersched_asm.h), so
   its registers are visible here even if another thread suspended it. Plain store for the
   claim: switching to one fiber from two threads at once is a documented misuse. */
static inline void *fsched__fiber_take(fsched_fiber *f) {
    void *sp = FSCHED__LOAD(&f->ctx.sp, FSCHED__ACQUIRE);
    if (sp) FSCHED__STORE(&f->ctx.sp, (void *)NULL, FSCHED__RELAXED);
    return sp;
}

/* Sets up a fresh block as a suspended fiber that starts in `entry`. */
static fsched_result fsched__fiber_prepare(fsched_fiber *f, void (*entry)(void *),
                                           const char *name) {
    fsched_result r;
    size_t n = 0;
    f->magic = FSCHED__FIBER_LIVE;
    f->asan_bottom = f->stack_lo;
    f->asan_size = (size_t)(f->stack_hi - f->stack_lo);
    if (name) {
        while (n < FSCHED__NAME_BYTES - 1 && name[n]) n++;
        memcpy(f->name, name, n);
    }
    f->name[n] = 0;
    r = fsched__ctx_init(f, entry);
    if (r != FSCHED_OK) return r;
#if defined(FSCHED__TSAN)
    f->tsan_fiber = __tsan_create_fiber(0);
    if (n) __tsan_set_fiber_name(f->tsan_fiber, f->name);
#endif
    return FSCHED_OK;
}

/* Returns the block of a fiber that will never run again to its pool or the system. */
static void fsched__fiber_release(fsched_fiber *f) {
    f->magic = FSCHED__FIBER_DEAD;
#if defined(FSCHED__TSAN)
    if (f->tsan_fiber) __tsan_destroy_fiber(f->tsan_fiber);
    f->tsan_fiber = NULL;
#endif
    fsched__stack_check(f, FSCHED__CANARY_BYTES);
    fsched__ctx_release(f);
    if (f->pool) fsched__pool_give(f->pool, f);
    else fsched__stack_free(f);
}

/* First frame of a fiber created by fsched_fiber_create. */
static void fsched__fiber_main(void *pass) {
    fsched__thread *t = fsched__thread_get();
    fsched_fiber *self = t->current, *to;
    void *to_sp;
    fsched__fiber_arrived(self, (fsched_fiber *)pass);
    self->fn(self->arg);
    /* finished: hand control to the fiber that last switched here */
    t = fsched__thread_get();
    to = self->resumer;
    to_sp = to && to->magic == FSCHED__FIBER_LIVE ? fsched__fiber_take(to) : NULL;
    if (!to_sp)
        fsched__fatal("a fiber returned from its function, but the fiber that last switched "
                      "to it is destroyed or not suspended: there is nowhere to return to");
    t->current = to; /* `to` keeps its own resumer: returns unwind like calls */
    fsched__fiber_jump(self, to, to_sp, 1);
    fsched__fiber_trap();
}

/* ---- public fiber API ---- */

FIBERSCHED_API fsched_result fsched_fiber_create(const fsched_fiber_desc *desc,
                                                 void (*fn)(void *arg), void *arg,
                                                 fsched_fiber **out) {
    fsched_fiber_desc d;
    fsched_fiber *f = NULL;
    fsched_result r;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (!out) return FSCHED__MISUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT,
                                    "fsched_fiber_create: out is NULL");
    *out = NULL;
    if (!fn) return FSCHED__MISUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT,
                                   "fsched_fiber_create: fn is NULL");
    if (d.pool) {
        if (d.stack_size || d.guard_size || d.stack_kind != FSCHED_STACK_DEFAULT)
            return FSCHED__MISUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT,
                                  "fsched_fiber_create: stack sizes are given by the pool");
        r = fsched__pool_take(d.pool, &f);
    } else {
        fsched__stack_params params;
        r = fsched__stack_params_resolve(d.stack_size, d.guard_size, d.stack_kind,
                                         &d.allocator, &d.logger, &params);
        if (r == FSCHED_OK) r = fsched__stack_alloc(&params, &f);
    }
    if (r != FSCHED_OK) return r;
    f->fn = fn;
    f->arg = arg;
    if (d.logger.func) f->params.logger = d.logger;
    r = fsched__fiber_prepare(f, fsched__fiber_main, d.name);
    if (r != FSCHED_OK) {
        fsched__fiber_release(f);
        return r;
    }
    fsched__overflow_thread_setup(fsched__thread_get());
    *out = f;
    return FSCHED_OK;
}

/* Misuse of fsched_fiber_switch, kept out of line so the fast path stays small. */
static FSCHED__NOINLINE fsched_result fsched__switch_refused(fsched_fiber *self,
                                                             fsched_fiber *to) {
    if (!to || to->magic != FSCHED__FIBER_LIVE)
        return FSCHED__MISUSE(&self->params.logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "fsched_fiber_switch: %s",
                              to ? "the fiber was destroyed" : "to is NULL");
    return FSCHED__MISUSE(&self->params.logger, FSCHED_ERR_WRONG_STATE,
                          "fsched_fiber_switch: fiber '%s' is %s", to->name,
                          to == self ? "the calling fiber" :
                          FSCHED__LOAD(&to->ctx.exit_sp, FSCHED__ACQUIRE) ? "finished" : "running");
}

/* The switch itself: no work is left after the context switch, so on the common path the
   call to the assembly is a tail call and its indirect jump lands in the resumed fiber's
   caller directly. */
FIBERSCHED_API fsched_result fsched_fiber_switch(fsched_fiber *to) {
    /* the thread-local is read inline: nothing after the switch reuses its address */
    fsched__thread *t = &fsched__tls_thread;
    fsched_fiber *self;
    if (FSCHED__UNLIKELY(!t->current)) t = fsched__thread_get();
    self = t->current;
    void *to_sp;
    if (FSCHED__UNLIKELY(!to || to->magic != FSCHED__FIBER_LIVE))
        return fsched__switch_refused(self, to);
    if (FSCHED__UNLIKELY(self->is_root)) {
        fsched_result r = fsched__ctx_prepare_root(self);
        if (r != FSCHED_OK) return r;
    }
    to_sp = fsched__fiber_take(to); /* NULL for the caller itself: it is running */
    if (FSCHED__UNLIKELY(!to_sp)) return fsched__switch_refused(self, to);
    to->resumer = self;
    t->current = to;
#if defined(FSCHED__CTX_ASM) && !defined(FSCHED__ASAN) && !FSCHED__DEBUG && !defined(FSCHED__TSAN)
    /* the switch returns its third argument in the resumed fiber: here 0, FSCHED_OK */
    return fsched__asm_switch_result(&self->ctx.sp, to_sp, NULL);
#else
    fsched__fiber_jump(self, to, to_sp, 0);
    return FSCHED_OK;
#endif
}

FIBERSCHED_API fsched_result fsched_fiber_destroy(fsched_fiber *f) {
    if (!f || f->magic != FSCHED__FIBER_LIVE)
        return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "fsched_fiber_destroy: %s", f ? "the fiber was destroyed" : "f is NULL");
    if (f->is_root)
        return FSCHED__MISUSE(&f->params.logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "fsched_fiber_destroy: a thread's own fiber cannot be destroyed");
    /* acquire: the fiber's last switch away is complete before its stack is freed */
    if (fsched_fiber_get_state(f) == FSCHED_FIBER_RUNNING)
        return FSCHED__MISUSE(&f->params.logger, FSCHED_ERR_WRONG_STATE,
                              "fsched_fiber_destroy: fiber '%s' is running", f->name);
    fsched__fiber_release(f);
    return FSCHED_OK;
}

FIBERSCHED_API fsched_fiber *fsched_fiber_current(void) {
    return fsched__thread_get()->current;
}

FIBERSCHED_API fsched_fiber_state fsched_fiber_get_state(const fsched_fiber *f) {
    if (!f || f->magic != FSCHED__FIBER_LIVE) return FSCHED_FIBER_FINISHED;
    /* acquire, as in fsched__fiber_take: the saved context is complete */
    if (FSCHED__LOAD(&f->ctx.sp, FSCHED__ACQUIRE)) return FSCHED_FIBER_SUSPENDED;
    if (FSCHED__LOAD(&f->ctx.exit_sp, FSCHED__ACQUIRE)) return FSCHED_FIBER_FINISHED;
    return FSCHED_FIBER_RUNNING;
}

FIBERSCHED_API fsched_result fsched_fiber_stack(const fsched_fiber *f, void **lo, size_t *size) {
    if (!f || f->magic != FSCHED__FIBER_LIVE || !lo || !size)
        return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "fsched_fiber_stack: NULL or destroyed argument");
    *lo = f->stack_lo;
    *size = (size_t)(f->stack_hi - f->stack_lo);
    return FSCHED_OK;
}

/* ---- stack overflow reporting ---- */

#if defined(FSCHED__OS_POSIX)
#define FSCHED__ALTSTACK_BYTES (64u * 1024u)
static int fsched__overflow_installed;
static struct sigaction fsched__overflow_old_segv, fsched__overflow_old_bus;
#if !defined(FIBERSCHED_NO_THREADS)
static pthread_once_t fsched__overflow_once = PTHREAD_ONCE_INIT;
static pthread_key_t fsched__overflow_key;
static void fsched__overflow_thread_exit(void *altstack) {
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    munmap(altstack, FSCHED__ALTSTACK_BYTES);
}
static void fsched__overflow_make_key(void) {
    pthread_key_create(&fsched__overflow_key, fsched__overflow_thread_exit);
}
#endif

static void fsched__overflow_thread_setup(fsched__thread *t) {
    stack_t ss;
    /* acquire: pairs with the release in fsched_install_overflow_handler */
    if (t->altstack || !FSCHED__LOAD(&fsched__overflow_installed, FSCHED__ACQUIRE)) return;
    if (sigaltstack(NULL, &ss) == 0 && !(ss.ss_flags & SS_DISABLE)) {
        t->altstack = ss.ss_sp; /* the thread already has one (e.g. a sanitizer's) */
        return;
    }
    ss.ss_sp = mmap(NULL, FSCHED__ALTSTACK_BYTES, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (ss.ss_sp == MAP_FAILED) return;
    ss.ss_size = FSCHED__ALTSTACK_BYTES;
    ss.ss_flags = 0;
    if (sigaltstack(&ss, NULL) != 0) {
        munmap(ss.ss_sp, FSCHED__ALTSTACK_BYTES);
        return;
    }
    t->altstack = ss.ss_sp;
#if !defined(FIBERSCHED_NO_THREADS)
    pthread_setspecific(fsched__overflow_key, ss.ss_sp);
#endif
}

/* Async-signal-safe formatting of the report. */
static char *fsched__sig_put(char *p, char *end, const char *s) {
    while (*s && p < end) *p++ = *s++;
    return p;
}
static char *fsched__sig_hex(char *p, char *end, uintptr_t v) {
    char digits[2 + 2 * sizeof v];
    int n = 0;
    do {
        digits[n++] = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    p = fsched__sig_put(p, end, "0x");
    while (n && p < end) *p++ = digits[--n];
    return p;
}

static void fsched__overflow_signal(int sig, siginfo_t *info, void *uctx) {
    fsched_fiber *f = fsched__tls_thread.current;
    uintptr_t addr = (uintptr_t)info->si_addr;
    struct sigaction *old = sig == SIGSEGV ? &fsched__overflow_old_segv : &fsched__overflow_old_bus;
    if (f && !f->is_root && f->params.guard_size && addr >= (uintptr_t)f->mem &&
        addr < (uintptr_t)f->stack_lo) {
        char msg[256], *p = msg, *end = msg + sizeof msg - 1;
        struct sigaction dfl;
        ssize_t unused;
        p = fsched__sig_put(p, end, "fibersched: stack overflow in fiber '");
        p = fsched__sig_put(p, end, f->name);
        p = fsched__sig_put(p, end, "': fault at ");
        p = fsched__sig_hex(p, end, addr);
        p = fsched__sig_put(p, end, " in the guard below its stack [");
        p = fsched__sig_hex(p, end, (uintptr_t)f->stack_lo);
        p = fsched__sig_put(p, end, ", ");
        p = fsched__sig_hex(p, end, (uintptr_t)f->stack_hi);
        p = fsched__sig_put(p, end, ")\n");
        unused = write(2, msg, (size_t)(p - msg));
        (void)unused;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(sig, &dfl, NULL); /* returning re-faults and ends the process */
        return;
    }
    if (old->sa_flags & SA_SIGINFO) {
        old->sa_sigaction(sig, info, uctx);
    } else if (old->sa_handler == SIG_DFL || old->sa_handler == SIG_IGN) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(sig, &dfl, NULL);
    } else {
        old->sa_handler(sig);
    }
}

FIBERSCHED_API fsched_result fsched_install_overflow_handler(void) {
    struct sigaction sa;
#if !defined(FIBERSCHED_NO_THREADS)
    pthread_once(&fsched__overflow_once, fsched__overflow_make_key);
    {
        static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&install_lock);
        if (!FSCHED__LOAD(&fsched__overflow_installed, FSCHED__RELAXED)) {
#endif
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = fsched__overflow_signal;
            sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
            sigemptyset(&sa.sa_mask);
            sigaction(SIGSEGV, &sa, &fsched__overflow_old_segv);
            sigaction(SIGBUS, &sa, &fsched__overflow_old_bus);
            /* release: threads that see the flag also see the saved old handlers */
            FSCHED__STORE(&fsched__overflow_installed, 1, FSCHED__RELEASE);
#if !defined(FIBERSCHED_NO_THREADS)
        }
        pthread_mutex_unlock(&install_lock);
    }
#endif
    fsched__overflow_thread_setup(fsched__thread_get());
    return FSCHED_OK;
}
#else
static void fsched__overflow_thread_setup(fsched__thread *t) { (void)t; }
FIBERSCHED_API fsched_result fsched_install_overflow_handler(void) {
    return FSCHED_ERR_UNSUPPORTED;
}
#endif

/* ---- results and version ---- */

FIBERSCHED_API const char *fsched_result_string(fsched_result r) {
    switch (r) {
    case FSCHED_OK: return "ok";
    case FSCHED_ERR_INVALID_ARGUMENT: return "invalid argument";
    case FSCHED_ERR_OUT_OF_MEMORY: return "out of memory";
    case FSCHED_ERR_WRONG_STATE: return "wrong state";
    case FSCHED_ERR_TIMEOUT: return "timed out";
    case FSCHED_ERR_CANCELLED: return "cancelled";
    case FSCHED_ERR_SYSTEM: return "system error";
    case FSCHED_ERR_UNSUPPORTED: return "unsupported";
    }
    return "unknown result";
}

#define FSCHED__STR2(x) #x
#define FSCHED__STR(x) FSCHED__STR2(x)
FIBERSCHED_API const char *fsched_version_string(void) {
    return FSCHED__STR(FIBERSCHED_VERSION_MAJOR) "." FSCHED__STR(FIBERSCHED_VERSION_MINOR) "."
        FSCHED__STR(FIBERSCHED_VERSION_PATCH);
}

#endif /* FIBERSCHED_IMPLEMENTATION */

/*
------------------------------------------------------------------------------
MIT License

Copyright (c) 2026 The fibersched authors

Permission is hereby granted, free of charge, to any person obtaining a copy of
this software and associated documentation files (the "Software"), to deal in
the Software without restriction, including without limitation the rights to
use, copy, modify, merge, publish, distribute, sublicense, and/or sell copies
of the Software, and to permit persons to whom the Software is furnished to do
so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
------------------------------------------------------------------------------
*/
