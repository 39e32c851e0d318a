/* fibersched.h - v0.1.0 - work-stealing task and fiber scheduler for C - MIT license (end of file)

   OVERVIEW

   fibersched is a single-header scheduler library. It gives C (and C++) programs:

   - a work-stealing scheduler: worker threads with split Chase-Lev deques, spawn and
     sync of typed tasks whose children live in a stack of frames (FSCHED_TASK,
     FSCHED_SPAWN, FSCHED_SYNC: the fastest fork-join), fork-join of plain functions
     (fsched_join), detached tasks (fsched_spawn), wait groups, parallel loops and
     reductions; idle workers sleep and cost nothing;
   - tasks that may block: a task that waits suspends its fiber, never its worker, on
     fiber-aware events, wait groups, mutexes, condition variables, semaphores, timed
     waits and sleeps, which also work from threads outside any scheduler;
   - dependency graphs: tasks with predecessors, built once and run many times, results
     passed along, failures and cancellation propagated to dependents, worker sets,
     priorities and cost hints, tasks that add tasks while running, cycles refused;
   - pipelines: nodes that advance data between hubs of a fixed number of envelopes, run
     by a deterministic debugging scheduler (logged, single-stepped) or a parallel one,
     with a report of starved nodes; and linear pipelines of serial and parallel stages;
   - fibers: cooperative threads with their own stacks, switched by a few instructions of
     assembly per architecture (fibersched_asm.h); usable on their own as coroutines;
   - an optional trace (FIBERSCHED_TRACE): tasks, graph tasks, pipeline advances, blocked
     fibers, sleeps and steals per worker, written as Chrome trace-event JSON for Perfetto;
   - stacks with guard pages, pooled for reuse, registered with AddressSanitizer,
     ThreadSanitizer and Valgrind, with an optional handler that reports a fiber stack
     overflow by name instead of a bare segmentation fault;
   - a single-threaded mode, and builds without threads (FIBERSCHED_NO_THREADS) or without
     any operating system (FIBERSCHED_NO_OS);
   - for C++ (11 or later), an optional layer in namespace fsched, at the end of the
     file: spawn, join, parallel_for, parallel_reduce, wait groups and graphs taking any
     callable (capturing lambdas, move-only ones), owners for the scheduler, a thread's
     binding and the synchronisation objects (fsched::mutex works with std::lock_guard
     and std::unique_lock), and exceptions
     that escape a task rethrown at the join or wait that observes them;
   - for gdb, tools/fibersched-gdb.py: `info fibers` and `fiber bt`.

   QUICK START

   In exactly one source file:

       #define FIBERSCHED_IMPLEMENTATION
       #include "fibersched.h"

   Everywhere else, include "fibersched.h" without the define. Keep fibersched_asm.h next to
   fibersched.h. Build with `cc -O2 -pthread`. A parallel loop, from any thread, with no
   setup (the first call makes a default scheduler, one worker per CPU, released at exit):

       static void square(void *ctx, size_t lo, size_t hi) {
           double *v = ctx;
           for (size_t i = lo; i < hi; i++) v[i] = v[i] * v[i];
       }
       int main(void) {
           static double v[1000000];
           fsched_parallel_for(0, 1000000, 4096, square, v);   // returns when all is done
       }

   fsched_join, fsched_parallel_reduce, FSCHED_RUN and linear pipelines work from any
   thread too. For control over the workers (how many, their stacks, their hooks), make a
   scheduler and give it work (or fsched_default_configure the default):

       static void fib(void *p) {                 // p points at {n, result}
           long *a = p, x[2] = {a[0] - 1}, y[2] = {a[0] - 2};
           if (a[0] < 2) { a[1] = a[0]; return; }
           fsched_join(fib, x, fib, y);           // x and y possibly in parallel
           a[1] = x[1] + y[1];
       }
       int main(void) {
           fsched_sched *s;
           fsched_wait_group wg;
           long a[2] = {30};
           fsched_create(NULL, &s);               // one worker per CPU
           fsched_wait_group_init(&wg);
           fsched_wait_group_spawn(&wg, s, fib, a);
           fsched_wait_group_wait(&wg);           // this thread blocks; workers compute
           printf("%ld\n", a[1]);
           fsched_destroy(s);                     // finishes all work, joins the workers
       }

   A dependency graph: c runs once a and b have finished, and reads their results.

       static int produce(fsched_graph_task *self, void *arg) {
           fsched_graph_set_result(self, arg, NULL, NULL);
           return 0;                              // nonzero: failed, c does not run
       }
       static int add(fsched_graph_task *self, void *arg) {
           *(long *)arg = *(long *)fsched_graph_result(fsched_graph_pred(self, 0)) +
                          *(long *)fsched_graph_result(fsched_graph_pred(self, 1));
           return 0;
       }
       ...
       long x = 1, y = 2, sum;
       fsched_graph *g;
       fsched_graph_task *a, *b, *c;
       fsched_graph_create(NULL, &g);
       fsched_graph_add(g, produce, &x, NULL, &a);
       fsched_graph_add(g, produce, &y, NULL, &b);
       fsched_graph_add(g, add, &sum, NULL, &c);
       fsched_graph_precede(g, a, c);
       fsched_graph_precede(g, b, c);
       fsched_graph_run(g, s);                    // starts it and returns
       fsched_graph_wait(g, NULL);                // FSCHED_OK, or how the run failed
       fsched_graph_destroy(g);

   Coroutines without any scheduler:

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
   FIBERSCHED_NO_INLINE_JOIN       in a unit: fsched_join there is a call, not the inline
                                   path (which GCC and Clang take on ELF targets)
   FIBERSCHED_ASSERT(x)            internal invariant check; default: on unless NDEBUG
   FIBERSCHED_MALLOC(n) / FIBERSCHED_FREE(p)
                                   the default heap (both or neither); default malloc/free
   FIBERSCHED_DEFAULT_STACK_SIZE   usable stack bytes of a fiber when the desc says 0;
                                   default what a thread gets: 8 MiB on 64-bit POSIX
                                   systems, reserved as address space (pages are
                                   committed when touched); 1 MiB on 64-bit Windows and
                                   without an OS; 64 KiB on 32-bit targets, 8 KiB under
                                   FIBERSCHED_NO_OS there
   FIBERSCHED_DEFAULT_GUARD_SIZE   guard bytes below page-allocated stacks; default 16 KiB
   FIBERSCHED_STACK_CANARY         bytes of the canary below heap stacks, checked when a
                                   task ends and (debug builds) at every switch: an
                                   overflow is seen when it writes into it, so make it as
                                   large as the largest stack frame (multiple of 16;
                                   default 256 under FIBERSCHED_NO_OS, else 64)
   FIBERSCHED_MPU_GUARD            bytes (a power of two, at least the canary's) of a
                                   read-only MPU region below every heap stack, pointed
                                   at the running fiber's at each switch (ARMv7-M under
                                   FIBERSCHED_NO_OS; region FIBERSCHED_MPU_GUARD_REGION,
                                   default 7): an overflow faults at its first write
                                   below the stack; see fsched_stack_fault (default 0)
   FIBERSCHED_STACK_PAINT          1 paints heap stacks when allocated, for
                                   fsched_fiber_stack_used (default 1 under
                                   FIBERSCHED_NO_OS, else 0)
   FIBERSCHED_MIN_STACK_SIZE       smallest accepted stack; default 8 KiB (1 KiB under
                                   FIBERSCHED_NO_OS)
   FIBERSCHED_MIN_SMALL_STACK_SIZE smallest FSCHED_STACK_SMALL stack, and what a
                                   stack_size of 0 gives them; default 1 KiB (2 KiB on
                                   64-bit POWER and 64-bit Windows, whose frames and
                                   switches take more)
   FIBERSCHED_NO_THREADS           no thread library at all (single-threaded only)
   FIBERSCHED_NO_OS                no operating system: stacks from the heap with a canary,
                                   no signals; implies FIBERSCHED_NO_THREADS
   FIBERSCHED_INTERRUPTS_MASK(), FIBERSCHED_INTERRUPTS_RESTORE(state), FIBERSCHED_IN_INTERRUPT()
                                   FIBERSCHED_NO_OS on other targets than Cortex-M: how
                                   to mask interrupts and tell a handler (see INTERRUPT
                                   HANDLERS; Cortex-M uses PRIMASK and IPSR)
   FIBERSCHED_NO_STDIO             no stdio: the default logger prints nothing
   FIBERSCHED_IO_POLL              fd waits through poll() even on Linux (default: epoll
                                   there, poll() on other POSIX systems)
   FIBERSCHED_FD_VERIFY_NS         epoll: how long an FSCHED_EDGE wait goes at most
                                   before the poller asks the kernel about its fd
                                   again, which bounds how late a wait on a number
                                   reused after a plain close() or dup2() is answered
                                   (default 1 s; the poller looks every half of it
                                   while fds are registered for edge waits, and asks
                                   about a wait that lasts once a period)
   FIBERSCHED_NO_CPP               leave out the C++ layer, which every translation unit
                                   compiled as C++ gets by default (define it wherever
                                   the header is included)
   FIBERSCHED_DEBUG                log misuse even when NDEBUG is defined
   FIBERSCHED_CONTEXT_ASM, FIBERSCHED_CONTEXT_UCONTEXT, FIBERSCHED_CONTEXT_WINFIBER
                                   force a context backend (default: assembly where
                                   available, else ucontext on POSIX, fibers on Windows)
   FIBERSCHED_FPU_CONTROL          1 switches the x86 floating-point control words with
                                   every fiber (default 0: fibers share the thread's; see
                                   fibersched_asm.h)
   FIBERSCHED_VALGRIND             1/0 forces the Valgrind stack registration on or off
                                   (default: on when <valgrind/valgrind.h> is available)
   FIBERSCHED_TRACE                1 records what every scheduler slot runs, for
                                   fsched_trace_write_json (default 0: no code at all)
   FIBERSCHED_TRACE_EVENTS         events each slot keeps when the desc says 0;
                                   default 32768 (64 bytes each, touched when the
                                   scheduler is created)
   FIBERSCHED_CHAOS                1 builds schedule fuzzing in: every step of the
                                   concurrency protocols may spin, yield or sleep a few
                                   microseconds at random, from the seed in the
                                   environment variable FIBERSCHED_CHAOS_SEED (or the
                                   clock; printed once; 0 turns it off). For testing
                                   programs under unlucky timing (default 0: no code)
   FIBERSCHED_GDB_SCRIPT           embeds the text of tools/fibersched-gdb.py (`info
                                   fibers`, `fiber bt`) in the program's
                                   .debug_gdb_scripts section: gdb runs it when it loads
                                   the program (live or a core file), no file needed,
                                   once `add-auto-load-safe-path PROGRAM` allows it (in
                                   gdbinit; ELF only; 17 KB not loaded at run time)

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

   GUARANTEES

   Whatever the timing, and tested under forced interleavings (tests/test_races.c, the
   schedule-fuzzing build, ThreadSanitizer, a Spin model of the sleep protocol):
   - no lost wake: work that is queued while some worker could take it is taken without
     waiting for unrelated events; a worker goes to sleep only when a final look, ordered
     against every publication, finds nothing;
   - every task spawned, and every task those tasks spawn, runs exactly once;
     fsched_destroy returns once all of it has run, also when runs end, or spawns are
     refused, on other threads while it drains;
   - no call touches memory that another thread may already have freed: a call from
     outside a scheduler holds it while it touches it (fsched_destroy waits for it), and
     a wake touches nothing of the object after the waiter may have returned;
   - a timed wait sleeps until its deadline in the scheduler's clock, whatever that
     clock's origin or pace; a woken thread never spins on a lock its waker holds.

   CAVEATS

   - A fiber's stack has a fixed size: every task runs on a fiber of the size its
     scheduler's desc chose, never on a thread's own stack. Page-allocated stacks are
     reserved as address space (pages commit when touched) with a guard region below: an
     overflow into it faults at once, and the handler every scheduler installs (unless
     its desc says no_overflow_handler) reports it with the task and its stack size;
     fsched_install_overflow_handler() does the same for plain fibers. Heap stacks
     (FSCHED_STACK_HEAP, FIBERSCHED_NO_OS) and slab stacks (FSCHED_STACK_SLAB) end in
     a canary (FIBERSCHED_STACK_CANARY) that is checked when the fiber is destroyed
     and, in debug builds, when each task on it ends and on every switch away from it
     (with the stack pointer's range): an overflow is reported through the logger,
     naming the fiber and its task, and stops the program. Small stacks
     (FSCHED_STACK_SMALL) are checked so in every build. fsched_fiber_stack_used
     tells how deep a heap or small stack was used.
   - A fiber keeps the thread's thread-local variables: code that reads a thread-local,
     switches and may resume on another thread sees the other thread's copy.
   - Destroying a suspended fiber frees its stack without unwinding it.
   - Not compatible with x86 CET shadow stacks, nor with AArch64's shadow call stack.
   - Tasks run on the scheduler's fibers: switch to those only through the scheduler
     (never with fsched_fiber_switch). A task resumes on the worker where it blocked, so
     thread-local variables stay valid across its waits, unless it is movable (opt-in:
     desc.movable_tasks, fsched_task_set_movable), when it may resume on another
     worker, and must not keep a thread-local address across a wait. A bound thread
     runs queued tasks while it waits; one of them that blocks resumes only on that
     thread, at its next wait (or fsched_unbind, or fsched_destroy): a bound thread
     that computes for long outside the scheduler's waits delays such tasks meanwhile.
   - A wait group's wait runs the group's tasks still queued on the caller's deque on the
     waiting task's stack (help-first), and fsched_join runs its second half there when
     no other worker took it: recursions through them nest on one stack, each level
     costing the task's own frames and the scheduler's (on x86-64 at -O2, 112 bytes for
     a wait group's wait, 64 for a join). Give fibers stacks for the deepest nesting.
   - On Linux each guarded stack costs two memory mappings and vm.max_map_count (65530 by
     default) bounds them: guarded stacks take at most seven eighths of them (the rest
     of the program maps too), and further stacks come from slabs (a warning says so
     once). For 100,000 blocked tasks, use FSCHED_STACK_SLAB stacks of a few KiB: carved
     from mappings shared by many stacks, they cost only the pages their fibers touch
     (and share page tables). Their canary lies in the top page of the next stack below,
     which is resident anyway. Tasks that need little stack may take FSCHED_STACK_SMALL
     stacks: two 1 KiB stacks (1,600 usable bytes each) share a 4 KiB page, so that a
     blocked task costs half a page. Size them for the build (fsched_fiber_stack_used):
     a task's wait takes about 1 KiB of its stack on 64-bit targets when optimized,
     several at -O0, and more than any small stack holds under AddressSanitizer or
     ThreadSanitizer (take FSCHED_STACK_SLAB stacks in such builds). An overflow is seen at the next switch away or
     task end, after it wrote over what lies below (another stack), so leave a margin;
     and link with -z now (immediate binding): the dynamic linker's first call to a
     function of a shared library saves the vector registers on the caller's stack, up to
     3 KiB on x86-64 with AVX-512.
   - A stack's reservation is address space, not memory: under vm.overcommit_memory=2
     (strict accounting) each stack counts in full against the commit limit, as a
     thread's does; choose a smaller stack_size there.

   ERROR MODEL

   Functions that can fail return fsched_result: FSCHED_OK (0) or one code per kind of
   failure, named by fsched_result_string(). Misuse (a NULL argument, a destroyed object,
   a call in the wrong state) returns a code and, in debug builds, logs a message through
   the logger of the desc (default: stderr). Out-of-memory is FSCHED_ERR_OUT_OF_MEMORY,
   never an abort. The process is ended, with a message, only when memory is already
   corrupt (a smashed stack canary) or a fiber's entry function returns with nowhere to go.

   Destroyed objects are detected: a scheduler, graph or pipeline that was destroyed is
   refused with FSCHED_ERR_INVALID_ARGUMENT (destroy twice included) without reading its
   memory, which went back to its allocator; an event, wait group, mutex, condition or
   semaphore is poisoned by its _destroy, and every later call on it (until _init) is
   refused likewise. Undefined, because it cannot be detected without a cost on every
   call: switching to, or asking about, a fiber whose memory was released (a fiber's
   record stays readable, and its use refused, while its stack is cached in a pool); a
   hub or node used after its pipeline was destroyed; a synchronisation object whose
   memory the program freed or reused; destroying any object while another thread is
   inside a call on it (but fsched_destroy, which waits for calls from outside).

   NAMES

   Public functions and types are fsched_*, their constants and macros FSCHED_*, the
   configuration macros FIBERSCHED_*; a name with a double underscore (fsched__*,
   FSCHED__*) is the library's own, also where the declarations show it. A function is
   fsched_<object>_<verb> (fsched_graph_run, fsched_event_wait_for); the scheduler, the
   object of most, goes without a name (fsched_spawn, fsched_worker_count). Two kinds
   follow one rule each:
   - a getter reads something of an object and changes nothing: fsched_<object>_<thing>,
     with no verb (fsched_worker_count, fsched_graph_task_state, fsched_hub_name); where
     that name is taken by the type of what it reads, fsched_<object>_get_<thing>
     (fsched_get_stats fills an fsched_stats; fsched_fiber_get_state,
     fsched_stack_pool_get_stats, fsched_node_get_report);
   - a yes/no question returns int, nonzero for yes: fsched_<object>_is_<adjective>
     (fsched_event_is_set, fsched_graph_is_cancelled, fsched_node_is_served,
     fsched_pipeline_is_finished).
   A renamed function answers to its old name for one more release, through a wrapper
   the compiler warns about as deprecated (CHANGELOG.md lists them).

   THREAD SAFETY

   Scheduler functions may be called from any thread unless their declaration says
   otherwise. Fork-join calls (fsched_join, the parallel loops, FSCHED_RUN, linear
   pipelines) run on the caller's scheduler from a task or bound thread, and on the default
   scheduler from any other thread, which blocks until the call is done (see
   fsched_default_configure); they are refused only where no wait is allowed (interrupt
   handlers, poll hooks, workers' start and stop hooks). No function is async-signal-safe:
   a signal handler must not call any (it may write to a pipe that a task waits on with
   fsched_wait_fd). fsched_destroy must not be called from one of the scheduler's own
   tasks, nor while other threads are bound (it refuses both with a code). Calls from
   other threads may race fsched_destroy: a spawn, run or bind either finds the scheduler
   and counts (the drain waits for it) or fails with FSCHED_ERR_WRONG_STATE, and after
   destroy has returned with FSCHED_ERR_INVALID_ARGUMENT.
   Synchronisation objects may be shared by tasks of any scheduler and by plain threads.
   fsched_fiber_switch() and fsched_fiber_current() act on the calling thread; a fiber may
   be switched to from any thread while it is suspended, but by one thread at a time. Stack
   pools are thread-safe. Graphs are built from any thread and run, waited for and cancelled
   from any thread; pipelines are built from one thread at a time and run from one (their
   sections say more). Each function says more where it is declared.

   INTERRUPT HANDLERS (FIBERSCHED_NO_OS)

   On Cortex-M (ARMv6-M, v7-M, v8-M), and on other bare-metal targets that define
   FIBERSCHED_INTERRUPTS_MASK() (mask interrupts, return the state before),
   FIBERSCHED_INTERRUPTS_RESTORE(state) and FIBERSCHED_IN_INTERRUPT() (nonzero in a
   handler), an interrupt handler may call:
     fsched_event_set, fsched_event_reset, fsched_event_is_set, fsched_sema_release,
     fsched_sema_try_acquire, fsched_wait_group_add, fsched_wait_group_done, and
     fsched_spawn, fsched_spawn_copy (at most FSCHED_TASK_INLINE_BYTES bytes) and
     fsched_wait_group_spawn, which take a task record from the scheduler's reserve
     (fsched_desc.interrupt_tasks; FSCHED_ERR_OUT_OF_MEMORY when none is left);
   the task runs later, on the program's thread, as one spawned from outside. A wait from
   a handler (event, semaphore, mutex, condition, wait group, join) is refused with
   FSCHED_ERR_WRONG_STATE; nothing else is meant for handlers. The library keeps
   interrupts masked inside its critical sections (a few dozen instructions, no call to
   the allocator from a handler's path) and around every read-modify-write of its shared
   words, so these calls are safe at any instruction of the program. With desc.idle the
   program's thread waits for interrupts (wfi) when it has nothing to run: a wait that
   only a handler can end then waits for it instead of failing. A handler's frame lands on
   the stack the thread runs on: with the thread on MSP, the stack of the fiber it
   interrupts (leave room for the deepest nesting of handlers on every fiber stack); with
   the thread on PSP (CONTROL.SPSEL = 1, handlers on MSP), only the basic frame. Without interrupt support (other bare-metal
   targets without the macros), no call may come from a handler.
*/

/* The implementation uses POSIX and BSD declarations (mmap flags, sigaltstack,
   clock_gettime) that strict -std=c11 hides unless requested before the first system
   header. Defined before any #include, FIBERSCHED_IMPLEMENTATION requests them; after
   one, under strict ISO C on Linux, the implementation still compiles, without the
   overflow signal handler (see the includes below). */
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

/* FSCHED__ALIGNED(n), first in a member's declaration: the member aligned to n bytes.
   Without any of these the declarations still compile, members unaligned: a program's
   own units read only the members before such a one, and the implementation needs GCC
   or Clang anyway. */
#if defined(__cplusplus) && __cplusplus >= 201103L
#define FSCHED__ALIGNED(n) alignas(n)
#elif !defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define FSCHED__ALIGNED(n) _Alignas(n)
#elif defined(__GNUC__) || defined(__clang__)
#define FSCHED__ALIGNED(n) __attribute__((aligned(n)))
#elif defined(_MSC_VER)
#define FSCHED__ALIGNED(n) __declspec(align(n))
#else
#define FSCHED__ALIGNED(n)
#endif

/* FSCHED__UNUSED, after a parameter or first in a function's declaration: no warning
   when it goes unused. FSCHED__LIKELY(x), FSCHED__UNLIKELY(x): x, with the branch the
   compiler should lay out first. FSCHED__PREFETCH(p): fetch p's line for reading, a
   hint that never faults. */
#if defined(__GNUC__) || defined(__clang__)
#define FSCHED__UNUSED __attribute__((unused))
#define FSCHED__LIKELY(x) __builtin_expect(!!(x), 1)
#define FSCHED__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define FSCHED__PREFETCH(p) __builtin_prefetch(p)
#else
#define FSCHED__UNUSED
#define FSCHED__LIKELY(x) (x)
#define FSCHED__UNLIKELY(x) (x)
#define FSCHED__PREFETCH(p) ((void)(p))
#endif

/* FSCHED__DEPRECATED(msg): a compiler's warning at every use of what it marks */
#if defined(__cplusplus) && __cplusplus >= 201402L
#define FSCHED__DEPRECATED(msg) [[deprecated(msg)]]
#elif defined(__GNUC__) || defined(__clang__)
#define FSCHED__DEPRECATED(msg) __attribute__((deprecated(msg)))
#elif defined(_MSC_VER)
#define FSCHED__DEPRECATED(msg) __declspec(deprecated(msg))
#else
#define FSCHED__DEPRECATED(msg)
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
    FSCHED_ERR_UNSUPPORTED,      /* not available in this build or on this platform */
    FSCHED_ERR_TASK_FAILED,      /* a task of a graph reported an error */
    FSCHED_ERR_STALLED           /* a pipeline stopped with nodes waiting on hubs */
} fsched_result;

/* A static English description of r, e.g. "invalid argument". Any thread. */
FIBERSCHED_API const char *fsched_result_string(fsched_result r);

/* "major.minor.patch" of the implementation. Any thread. */
FIBERSCHED_API const char *fsched_version_string(void);

/* ---- allocator and logger, carried in every desc --------------------------------- */

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
    FSCHED_STACK_HEAP,        /* the allocator, with a canary below (no MMU needed) */
    FSCHED_STACK_SLAB,        /* pages carved from mappings shared by many stacks, with
                                 a canary below instead of a guard: no mapping and no page
                                 touched per stack until it is used (many fibers) */
    FSCHED_STACK_SMALL        /* below a page, for tasks that need little stack (many
                                 blocked at once): slab slots that share pages, the
                                 fiber's record at the top of each, a canary at its bottom
                                 checked at every switch away from it in every build;
                                 stack_size from FIBERSCHED_MIN_SMALL_STACK_SIZE (also
                                 what 0 means) up to a page less the record and canary */
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

/* The deepest f's stack has been used since it was allocated (a pooled stack keeps it
   across fibers), in bytes: for sizing stacks. Heap stacks are painted when allocated
   (FIBERSCHED_STACK_PAINT, on by default under FIBERSCHED_NO_OS), small stacks always;
   other stacks return FSCHED_ERR_UNSUPPORTED. */
FIBERSCHED_API fsched_result fsched_fiber_stack_used(const fsched_fiber *f, size_t *used);

/* For the fault handler of a FIBERSCHED_MPU_GUARD build (MemManage, or HardFault when
   that one is off): when `address` lies in the guard below the running fiber's stack (the
   fault address, MMFAR when valid; else the thread's stack pointer, for a fault while
   the processor stacked an exception frame), reports the overflow through the logger,
   naming the fiber and its task, and stops the program. Returns 0 otherwise (not an
   overflow, or a build without the guard). */
FIBERSCHED_API int fsched_stack_fault(const void *address);

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
   ..." (with its stack size and the task it runs, for a scheduler's fibers) and ends the
   process with the original signal. Other faults go to the handler that was installed
   before. Threads get their alternate stack when they first use fibers after this call
   (the calling thread at once). Every scheduler calls it when it is created, unless its
   desc says no_overflow_handler. Idempotent. FSCHED_ERR_UNSUPPORTED where there are no
   signals (Windows, FIBERSCHED_NO_OS). Any thread. */
FIBERSCHED_API fsched_result fsched_install_overflow_handler(void);

/* ---- the scheduler --------------------------------------------------------------- */

/* A work-stealing scheduler: worker threads, each with a deque of tasks, that run tasks on
   fibers. A task that blocks suspends its fiber, never its worker. Opaque. */
typedef struct fsched_sched fsched_sched;

/* The most worker threads, and the most bound threads, a scheduler may have. */
#define FSCHED_MAX_WORKERS 4096

typedef struct fsched_desc {
    uint32_t workers;           /* worker threads, at most FSCHED_MAX_WORKERS; 0: one
                                   per CPU */
    int single_threaded;        /* no worker threads at all (workers must be 0): a bound
                                   thread runs queued tasks on fibers of its own whenever
                                   it waits (while none is bound, spawns wait, which debug
                                   builds say once, and a wait group's wait for them from
                                   elsewhere fails with FSCHED_ERR_WRONG_STATE); implied by
                                   FIBERSCHED_NO_THREADS, where workers is ignored */
    uint32_t max_bound_threads; /* threads that may be bound at once, at most
                                   FSCHED_MAX_WORKERS; 0: 8 (1 under
                                   FIBERSCHED_NO_THREADS) */
    size_t stack_size;          /* fiber stacks; 0: FIBERSCHED_DEFAULT_STACK_SIZE */
    size_t guard_size;          /* 0: FIBERSCHED_DEFAULT_GUARD_SIZE */
    fsched_stack_kind stack_kind;
    uint64_t (*clock)(void *user); /* monotonic nanoseconds; 0: the system clock (needed
                                      for timed waits under FIBERSCHED_NO_OS) */
    void *clock_user;
    fsched_allocator allocator;
    fsched_logger logger;
    uint32_t trace_events;      /* FIBERSCHED_TRACE builds: events each slot keeps (the
                                   first ones; later ones are counted as dropped);
                                   0: FIBERSCHED_TRACE_EVENTS */
    int no_overflow_handler;    /* 1: leave SIGSEGV and SIGBUS alone; by default the
                                   scheduler installs fsched_install_overflow_handler(), so
                                   that a task that overflows its stack is reported by
                                   name and stack size */
    void (*idle)(void *user);   /* FIBERSCHED_NO_THREADS: called, with interrupts masked
                                   under FIBERSCHED_NO_OS, while the only thread has
                                   nothing to run and waits for an interrupt handler (or
                                   the clock) to end a wait: a `wfi` returns on a pending
                                   interrupt, which runs once the call returns. NULL: a
                                   wait that no task can end fails with
                                   FSCHED_ERR_WRONG_STATE (with a hook it waits for
                                   interrupts), and timed waits poll the clock */
    void *idle_user;
    uint32_t interrupt_tasks;   /* FIBERSCHED_NO_OS: task records set aside at creation
                                   for fsched_spawn from interrupt handlers (which never
                                   allocate); a spawn that finds none left fails with
                                   FSCHED_ERR_OUT_OF_MEMORY. 0: none */
    int pin_workers;            /* 1: each worker thread runs on one CPU only: worker i on
                                   the i-th CPU the creating thread may run on (wrapping
                                   around), so that the kernel never stacks two workers
                                   on one CPU while another idles. Linux and Windows;
                                   elsewhere FSCHED_ERR_UNSUPPORTED. 0: the kernel places
                                   them */
    const uint32_t *worker_cpus; /* pinned workers: worker i runs on CPU
                                    worker_cpus[i % worker_cpu_count] (each one the
                                    creating thread may run on) instead; implies
                                    pin_workers */
    uint32_t worker_cpu_count;
    void (*worker_start)(void *user, uint32_t worker); /* called on each worker thread
                                   as it starts, before it runs anything (set up
                                   thread-local state there), with its index ... */
    void (*worker_stop)(void *user, uint32_t worker);  /* ... and as it ends, after its
                                   last task. Either may be NULL. Both run as a thread
                                   that does not work for the scheduler (yet, or any
                                   more): fsched_current() is NULL there, and a spawn
                                   into the scheduler is a plain thread's, refused with
                                   FSCHED_ERR_WRONG_STATE once fsched_destroy began.
                                   The thread is a worker all the same: fsched_bind,
                                   fsched_destroy of its own scheduler, and fork-join
                                   calls (which would wait) fail with
                                   FSCHED_ERR_WRONG_STATE there */
    void *worker_user;
    const char *worker_name;    /* worker threads are named this followed by their index
                                   (up to 15 bytes in all on Linux), as top -H, gdb and
                                   perf show them (Linux, macOS, Windows 10).
                                   NULL: "fsched-w" */
    int movable_tasks;          /* 1: tasks start movable (fsched_task_set_movable): a
                                   task woken while its worker has others ready to run
                                   and another worker idles may resume on that worker,
                                   so that work spreads (connections of a server, say).
                                   Such a task must not keep a thread-local address or
                                   the thread's identity across a wait (see
                                   fsched_task_set_movable). 0: every task resumes on
                                   the worker where it blocked */
} fsched_desc;

/* Creates a scheduler and starts its workers. desc may be NULL (all defaults).
   FSCHED_ERR_INVALID_ARGUMENT (a desc out of range, or out NULL), FSCHED_ERR_OUT_OF_MEMORY
   (also when a fiber stack of the desc's size cannot be had: each worker thread takes its
   first one here), FSCHED_ERR_SYSTEM (a thread could not be started); each with a log
   line saying why. Any thread; several schedulers may exist at once. */
FIBERSCHED_API fsched_result fsched_create(const fsched_desc *desc, fsched_sched **out);

/* Finishes every task spawned so far, and every task those tasks spawn while it waits,
   and every graph or pipeline run begun on s, then stops the workers and frees
   everything the scheduler allocated. The calling thread runs queued tasks on fibers of
   its own meanwhile. Spawns, runs and binds from threads outside the scheduler fail
   with FSCHED_ERR_WRONG_STATE once destruction has begun; a call from outside that is
   still inside s is waited for. Returns FSCHED_ERR_WRONG_STATE, destroying nothing, when
   called from one of the scheduler's own tasks or worker hooks, from a task, worker or
   bound thread of another scheduler, while another thread is still bound, or while
   another thread destroys s; FSCHED_ERR_INVALID_ARGUMENT for a scheduler already
   destroyed; NULL is ignored. */
FIBERSCHED_API fsched_result fsched_destroy(fsched_sched *s);

/* The calling thread takes part in s: its waits run queued tasks on fibers of its own
   (the only way tasks run in single-threaded mode), and its spawns go to its own deque.
   FSCHED_ERR_WRONG_STATE if the thread is already bound or is a worker (in its start or
   stop hook too), FSCHED_ERR_OUT_OF_MEMORY when all max_bound_threads slots are taken. */
FIBERSCHED_API fsched_result fsched_bind(fsched_sched *s);

/* Ends fsched_bind for the calling thread, after running the tasks left in its own deque.
   FSCHED_ERR_WRONG_STATE if the thread is not bound (workers cannot unbind). */
FIBERSCHED_API fsched_result fsched_unbind(void);

/* The scheduler the calling thread works for (worker or bound), or NULL. */
FIBERSCHED_API fsched_sched *fsched_current(void);

/* Worker threads of s (0 in single-threaded mode). */
FIBERSCHED_API uint32_t fsched_worker_count(const fsched_sched *s);

/* What a scheduler did since its creation, and what it holds: counted in every build (a
   plain store per event, on the counting thread's own line), read from any thread. */
typedef struct fsched_stats {
    uint64_t jobs_run;      /* jobs the slots took from the queues and ran, wherever they
                               ran them (a wait group's wait runs its own tasks): tasks,
                               stolen halves of joins, loop chunks, graph tasks, pipeline
                               nodes */
    uint64_t steals;        /* of those, jobs taken from another slot */
    uint64_t sleeps;        /* times a slot slept for want of work */
    uint64_t wakeups;       /* times another thread woke a sleeping slot */
    uint64_t fibers;        /* fibers now: running, blocked, ready or parked in a loop */
    uint64_t stacks_cached; /* stacks now kept for reuse in the scheduler's pool (each
                               slot keeps up to 32 more of its own) */
    uint64_t stacks_allocated; /* stacks allocated from the system since creation */
    uint64_t fd_registrations; /* times the poller told the kernel of an fd to watch or
                                  armed it again (epoll_ctl; 0 with poll()) */
    uint64_t fd_events;     /* readiness events the poller took from the kernel for fds
                               (epoll; 0 with poll()) */
    uint64_t fibers_moved;  /* times a woken movable task resumed on another worker than
                               the one where it blocked */
} fsched_stats;

/* Fills *out (a snapshot: each count is exact, the counts are read one after the other).
   FSCHED_ERR_INVALID_ARGUMENT for a NULL or destroyed scheduler or a NULL out. */
FIBERSCHED_API fsched_result fsched_get_stats(const fsched_sched *s, fsched_stats *out);

/* Index of the calling thread's slot in its scheduler: 0..workers-1 for worker threads,
   then the bound threads; -1 outside any scheduler. */
FIBERSCHED_API int fsched_worker_index(void);

/* ---- the default scheduler ---------------------------------------------------------
   Fork-join calls (fsched_join, fsched_parallel_for, fsched_parallel_reduce, FSCHED_RUN,
   fsched_parallel_pipeline, and the C++ layer's join and parallel_for) work from any
   thread, with no setup. From a task or a bound thread they run on that thread's
   scheduler. From any other thread (main, say) they run on the process's default
   scheduler, and the calling thread blocks until the whole call is done: the call runs
   as one task there, which costs the wake-up of a worker (when all sleep) and, at its
   end, the caller's (bench_wake measures it). Without threads (FIBERSCHED_NO_THREADS,
   FIBERSCHED_NO_OS) the default is single-threaded and the calling thread runs the call
   itself, bound to it meanwhile; on a single-threaded default, more threads calling at
   once than it has bound slots (desc.max_bound_threads) take turns for the slots (a call
   fails with FSCHED_ERR_OUT_OF_MEMORY only when threads bound for good hold all of them).

   The default is made at the first such call (or fsched_default_get, or a graph run with
   no scheduler): with one worker per CPU unless fsched_default_configure says otherwise,
   once, however many threads race to make it. When it cannot be made (out of memory, a
   thread that cannot start) the call returns the error (as fsched_create's, with a log
   line in debug builds) and a later call tries again. At exit (atexit) the default the
   library made is destroyed, after what was spawned onto it has finished, unless the
   exiting thread works for a scheduler or a call from another thread still runs on it
   (the default is then left to the end of the process, as that thread is); calls from
   outside every scheduler fail with FSCHED_ERR_WRONG_STATE from then on. In the child of
   a fork(), the parent's default is left alone (its workers are not in the child) and the
   child's first call makes a new one, from the same configuration. Calls from interrupt
   handlers, poll hooks and workers' start and stop hooks are refused with
   FSCHED_ERR_WRONG_STATE: they must not wait. */

/* Sets the desc the default scheduler will be made with: copied (NULL: all defaults);
   what its pointers name (worker_name, worker_cpus...) must live until the default is
   made. Its errors come back from the first call, as fsched_create's.
   FSCHED_ERR_WRONG_STATE once the default exists (made, set or gotten) or the process
   exits. Any thread. */
FIBERSCHED_API fsched_result fsched_default_configure(const fsched_desc *desc);

/* Makes s the default scheduler, so that calls from outside every scheduler run on it
   and no second pool of workers is made. s stays the caller's: it is not destroyed at
   exit; once the caller destroys it, those calls fail with FSCHED_ERR_WRONG_STATE.
   FSCHED_ERR_INVALID_ARGUMENT for a scheduler that is not live, FSCHED_ERR_WRONG_STATE
   while it is being destroyed and once a default exists (made, set or gotten) or the
   process exits. Any thread. */
FIBERSCHED_API fsched_result fsched_default_set(fsched_sched *s);

/* The default scheduler in *out, made now if there is none: for spawns into it, its
   stats, graph runs. FSCHED_ERR_INVALID_ARGUMENT (out NULL), FSCHED_ERR_WRONG_STATE once
   the process exits or the default was destroyed (the program may destroy the one the
   library made too: calls from outside then fail so), or fsched_create's errors when it
   cannot be made. Any thread. */
FIBERSCHED_API fsched_result fsched_default_get(fsched_sched **out);

/* ---- tasks ----------------------------------------------------------------------- */

/* Runs fn(arg) as a detached task. From a task of s the task goes to the caller's deque,
   where other workers can take it at once (the caller may compute for long before it
   next calls the scheduler); from any other thread to s's injector queue. FSCHED_ERR_INVALID_ARGUMENT (NULL),
   FSCHED_ERR_OUT_OF_MEMORY, FSCHED_ERR_WRONG_STATE (s is being destroyed and the caller
   is outside it). Any thread. */
FIBERSCHED_API fsched_result fsched_spawn(fsched_sched *s, void (*fn)(void *arg), void *arg);

/* Whether the running task may resume on another worker after a wait (1) or always
   resumes on the worker where it blocked (0, the default unless desc.movable_tasks): a
   worker that has more woken tasks ready than it can run at once, while another worker
   idles, hands half of the movable ones over (an echo server's connections then spread
   over the workers instead of staying where their first read blocked). Lasts until the
   task changes it again or ends; tasks it spawns start as the desc says.
   The caveat: after any wait (an event, mutex, sleep, fd wait, wait group...) a movable
   task may run on another thread, so it must not keep across a wait the address of a
   thread-local variable, the thread's identity (pthread_self, a lock owned by the
   thread) or a per-thread handle (an allocator's cache); it may use them between waits.
   `errno` is such a variable: compilers may compute its address once per function
   (glibc's __errno_location is declared const), so read errno in a function that does
   not wait, for instance a read helper, not inlined, that returns -errno. Waits under
   fsched_join, a parallel loop, FSCHED_RUN, a graph or pipeline run, and tasks that a
   wait runs nested, never move, also when the task opted in under them; one exception,
   not detected yet: a join that began while its task was not movable and took the
   inline path (its second half on the worker's private ring) does not survive a move of
   a wait in its first half after the task opted in there. Opt in before such a join,
   not inside it. FSCHED_ERR_WRONG_STATE outside a task of a worker or a
   bound slot (the thread's own code, a hook), in a task that a wait runs nested, in the
   body of a parallel loop, a graph task, a node or a stage (wherever it runs), and in a
   task of a wait group whose count its slot holds (spawned from a task of the same
   group's slot: it ends there). Costs: a movable task's fsched_join is a call. */
FIBERSCHED_API fsched_result fsched_task_set_movable(int movable);

/* Like fsched_spawn, but copies `size` bytes from `data` into the task and passes fn a
   pointer to the copy (aligned to 16 bytes): capture by value. Copies of up to
   FSCHED_TASK_INLINE_BYTES live inside the task; larger ones are allocated. */
#define FSCHED_TASK_INLINE_BYTES 64
FIBERSCHED_API fsched_result fsched_spawn_copy(fsched_sched *s, void (*fn)(void *data),
                                               const void *data, size_t size);

/* Like fsched_spawn, with a name that traces show for the task and a stack overflow
   report gives (NULL: none). The name is not copied: it must outlive the task (a string
   literal does). */
FIBERSCHED_API fsched_result fsched_spawn_named(fsched_sched *s, void (*fn)(void *arg), void *arg,
                                                const char *name);

/* Runs a(arg_a) and b(arg_b), possibly in parallel, and returns when both have finished.
   b is offered to other workers while a runs on the caller; if nobody took it, the
   caller runs it too (no allocation, no atomic operation). If b was taken, the caller's
   fiber suspends until b finishes; its worker runs other work meanwhile, on other fibers
   (nothing else runs on the caller's stack, where it could block the caller). Any
   thread: from one outside every scheduler, the join runs as a task of the default
   scheduler and the thread blocks until it is done (see fsched_default_configure).
   FSCHED_ERR_INVALID_ARGUMENT (a or b NULL) or FSCHED_ERR_WRONG_STATE (from a poll
   hook, a worker's start or stop hook or an interrupt handler, which must not wait; no
   default scheduler, as the process exits), running nothing; fsched_create's errors
   when the default scheduler cannot be made. a and b must return: leaving either by
   longjmp (or, from C, by a C++ exception; the C++ layer's join carries them) leaves the
   second half queued with its record gone, which is undefined. */
FIBERSCHED_API fsched_result fsched_join(void (*a)(void *arg), void *arg_a,
                                         void (*b)(void *arg), void *arg_b);

/* fsched_join's common path, inline in the caller: the second half is recorded on the
   caller's stack and queued on its worker's private ring; if nobody took it by the time
   a returns, the caller runs it. With a and b known at the call, the compiler calls them
   directly, and the join costs a few stores and loads of lines the worker alone touches.
   Everything else (a call from outside every scheduler or from a hook, NULL functions,
   a full ring, a thief's request, a taken half) goes to the library as before. The
   plumbing below is the implementation's, not an API. Where the implementation's
   thread-local state cannot be reached from the program's units at the cost of a load
   (a shared library's interface, targets without ELF thread-local storage, bare metal
   with interrupt handlers that call the library), and in units that define
   FIBERSCHED_NO_INLINE_JOIN, fsched_join is a plain call. (fsched_join) names the
   function itself. */
/* Sanitizers instrument each access by its address: on x86 too, a compiler then computes
   a thread-local's address from the thread pointer and may keep it across calls. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FSCHED__INSTRUMENTED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FSCHED__INSTRUMENTED 1
#endif
#endif
#if (defined(__GNUC__) || defined(__clang__)) && defined(__ELF__) && !defined(FIBERSCHED_DLL) && \
    !defined(FIBERSCHED_NO_OS) && !defined(FIBERSCHED_INTERRUPTS_MASK)
#define FSCHED__JOIN_RING 1 /* the implementation keeps fsched__join_ring */
#if !(defined(__x86_64__) || defined(__i386__)) || (defined(__PIC__) && !defined(__PIE__)) || \
    defined(FSCHED__INSTRUMENTED)
#define FSCHED__JOIN_RING_CALL 1 /* read through fsched__join_ring_now (see there) */
#endif
#if !defined(FIBERSCHED_NO_INLINE_JOIN)
#define FSCHED__JOIN_INLINE 1
#endif
#endif

/* A queued piece of work (the implementation's: spawned tasks, join halves, chunks). */
struct fsched__worker;
typedef struct fsched__job fsched__job;
struct fsched__job {
    void (*execute)(fsched__job *job, struct fsched__worker *w);
    fsched__job *next; /* in the injector */
};

/* A worker's private ring of jobs (the front of its work-stealing deque): only its
   worker's thread reads or writes it, but for `request`, which other workers set when
   they found nothing public to take, and which the worker answers by sharing jobs. */
#if defined(FIBERSCHED_NO_OS) || !(defined(_WIN32) || defined(__unix__) || defined(__APPLE__))
#define FSCHED__RING_SIZE 32u /* a microcontroller's RAM; more jobs go to the public part */
#else
#define FSCHED__RING_SIZE 256u
#endif
#if defined(FIBERSCHED_NO_THREADS) || defined(FIBERSCHED_NO_OS)
#define FSCHED__RING_LINE 16 /* one thread shares no lines */
#else
#define FSCHED__RING_LINE 64 /* thieves write `request` on a line of its own */
#endif
typedef struct fsched__ring {
    fsched__job *slot[FSCHED__RING_SIZE];
    size_t head; /* oldest private job */
    size_t tail; /* one past the newest */
    FSCHED__ALIGNED(FSCHED__RING_LINE) uint32_t request; /* thieves asked for work */
} fsched__ring;

/* The second half of a join: a job on the joiner's stack. Its latch is 0 while pending,
   1 when done, or the joiner's fiber once the joiner suspended on it. */
typedef struct fsched__join_job {
    fsched__job job;
    void (*fn)(void *);
    void *arg;
    fsched__ring *owner; /* the joiner's worker's ring */
    uintptr_t latch;
    struct fsched__join_job *self; /* the inline path's: the record's own address */
} fsched__join_job;
FIBERSCHED_API void fsched__join_execute(fsched__job *job, struct fsched__worker *w);
FIBERSCHED_API void fsched__join_rest(fsched__join_job *j);
#if defined(FSCHED__JOIN_RING_CALL)
FIBERSCHED_API fsched__ring *fsched__join_ring_now(void);
#endif

#if defined(FSCHED__JOIN_RING)
/* The ring of the worker the calling thread is, while it may join (NULL in a hook). */
#if defined(FIBERSCHED_STATIC)
static __thread fsched__ring *fsched__join_ring FSCHED__UNUSED;
#elif defined(FIBERSCHED_NO_THREADS)
FIBERSCHED_API fsched__ring *fsched__join_ring;
#else
FIBERSCHED_API __thread fsched__ring *fsched__join_ring;
#endif
#endif

#if defined(FSCHED__JOIN_INLINE)
/* The ring of the thread the caller runs on now: a movable task may resume on another
   thread after a wait, and where the thread pointer is a register (AArch64, ppc64le,
   riscv64) compilers read it once per function and keep it across calls, so that an
   inline read after a wait could read the ring of the thread before it. There, and in a
   shared library's code (whose thread-local addresses come from calls that compilers
   may merge), the ring comes from a call that reads it anew; on x86 each access goes
   through the segment register that the thread's own value fills. */
#if defined(FSCHED__JOIN_RING_CALL)
#define FSCHED__JOIN_RING_NOW() fsched__join_ring_now()
#else
#define FSCHED__JOIN_RING_NOW() fsched__join_ring
#endif

static inline fsched_result fsched__join_inline(void (*a)(void *arg), void *arg_a,
                                                void (*b)(void *arg), void *arg_b) {
    fsched__ring *r = FSCHED__JOIN_RING_NOW();
    fsched__join_job j;
    /* relaxed: a hint, as the library's own pushes read it */
    if (FSCHED__UNLIKELY(!r || !a || !b || r->tail - r->head == FSCHED__RING_SIZE ||
                         __atomic_load_n(&r->request, __ATOMIC_RELAXED)))
        return (fsched_join)(a, arg_a, b, arg_b);
    j.job.execute = fsched__join_execute;
    j.fn = b;
    j.arg = arg_b;
    j.owner = r;
    j.latch = 0;
    j.self = &j;
    r->slot[r->tail++ % FSCHED__RING_SIZE] = &j.job;
    a(arg_a);
    /* a task resumes on the worker where it blocked (a movable one is given no ring: it
       joins through the call): r is still this thread's ring. The ring, b's argument and
       the record's own address are read back from j, not kept in registers across a: a
       recursive caller (fib, a tree walk) would otherwise save and restore up to three
       more registers in every call, leaves included (fib(35) at 1 worker: 13% of
       fsched_join's time with gcc -O2, 8% with clang). */
    r = j.owner;
    if (FSCHED__LIKELY(r->tail != r->head &&
                       r->slot[(r->tail - 1) % FSCHED__RING_SIZE] == &j.self->job)) {
        r->tail--; /* nobody took it */
        b(j.arg);
        return FSCHED_OK;
    }
    fsched__join_rest(j.self);
    return FSCHED_OK;
}
#define fsched_join(a, arg_a, b, arg_b) fsched__join_inline(a, arg_a, b, arg_b)
#endif

/* Calls body(ctx, lo, hi) over disjoint subranges covering [begin, end), in parallel.
   Ranges are split in halves, further only while other workers take the halves
   (adaptive splitting), and only while longer than `grain` elements (0: 1): a piece
   that comes from a split has at least half that many. Returns when all calls
   have returned. Any thread, as fsched_join (from main: on the default scheduler).
   Errors as fsched_join, and FSCHED_ERR_INVALID_ARGUMENT when end is before begin (an
   empty range, end == begin, calls nothing). */
FIBERSCHED_API fsched_result fsched_parallel_for(size_t begin, size_t end, size_t grain,
                                                 void (*body)(void *ctx, size_t lo, size_t hi),
                                                 void *ctx);

/* A reduction over [begin, end): each subrange gets an accumulator of `size` bytes set up
   by init(ctx, acc), body(ctx, lo, hi, acc) folds the subrange into it, and
   combine(ctx, acc, other) merges a right-hand accumulator into a left-hand one, always
   in range order (so combine need only be associative). The final value is written to
   `result`, which init sets up first. Splitting as fsched_parallel_for; accumulators of up
   to 256 bytes live on the stack, larger ones are allocated (and when that fails, the
   range is not split there). Errors as fsched_parallel_for. */
FIBERSCHED_API fsched_result fsched_parallel_reduce(
    size_t begin, size_t end, size_t grain, size_t size, void (*init)(void *ctx, void *acc),
    void (*body)(void *ctx, size_t lo, size_t hi, void *acc),
    void (*combine)(void *ctx, void *acc, const void *other), void *ctx, void *result);

/* ---- spawn and sync: child records in the worker's frame stack --------------------
   For fine-grained fork-join (recursive divide and conquer, many children per node), the
   fastest way: a task defined with FSCHED_TASK takes one argument and returns a value;
   inside one, FSCHED_SPAWN(name, arg) offers a child to other workers, FSCHED_CALL runs
   one here, and FSCHED_SYNC(name) returns the result of the newest child not yet synced
   (children are synced in the reverse order of their spawns), running it here unless
   another worker took it. A child's record (its argument, then its result) is a frame in
   a stack of frames that the caller's task tree owns: a spawn writes a frame and a sync
   takes it back, with no allocation, no atomic operation and no fence unless other
   workers asked for work. The frame stack and the position in it pass from task to task
   as hidden arguments, so tasks are defined and called through the macros only.

       FSCHED_TASK(long, fib, int, n) {
           long x, y;
           if (n < 2) return n;
           FSCHED_SPAWN(fib, n - 1);
           y = FSCHED_CALL(fib, n - 2);
           x = FSCHED_SYNC(fib);
           return x + y;
       }
       ...
       long r;
       fsched_result e = FSCHED_RUN(fib, 30, &r);   // from any thread

   FSCHED_VOID_TASK(name, type, arg) defines one without a result (FSCHED_RUN's last
   argument is then NULL). The argument and result are copied with assignment: plain C
   types and structs of up to FSCHED_FRAME_BYTES (a compile-time error otherwise); pass
   a pointer for more. Every spawn must be synced before its task returns. A task tree
   may block (its fiber is suspended, and its children not yet taken are offered to
   other workers first). A frame per 8 bytes of the scheduler's stack size (rounded up
   to whole pages; per 64 bytes without an OS) can be spawned and not yet synced in one
   tree, and no more: more stops the program with a message (as a stack overflow
   does). Use fsched_join or wait groups where the children are not known at compile
   time or need not be synced in order.

   Any number of trees may be blocked at once, on one worker or many (a server may run
   each of ten thousand requests as a tree that waits for I/O). A blocked tree holds its
   fiber and a frame stack: that many frames of 64 bytes as address space, of which the
   pages it used are touched (a page for most trees), carved with other stacks from
   shared mappings, so that stacks take few of the system's memory mappings. A worker
   keeps the stacks it made for later trees, the pages of all but a few of its free ones
   given back. FSCHED_RUN returns FSCHED_ERR_OUT_OF_MEMORY when no frame stack can be had
   for the tree, and one more for the children it may offer.

   C++ with exceptions (unless FIBERSCHED_NO_CPP): an exception that leaves a child is
   rethrown by the FSCHED_SYNC that syncs it, whether the child ran there or on a worker
   that took it (where it was caught: it never unwinds through the scheduler); one that
   leaves the root, by FSCHED_RUN (the tree's frame stack given back). An exception that
   leaves a task drops the children it spawned and did not sync: those no worker took
   never run; those another worker took are waited for first (their frames and
   arguments live on until they return), and what they throw is dropped, the first
   exception going on. The task's locals die before that wait, as the exception leaves
   their scope: sync a child that points at them before anything can throw past it (or
   catch in the task). The type of the exception is kept (std::rethrow_exception). While
   nothing throws the catching runs no code, but its size keeps GCC from unfolding a
   recursive task into itself: fib with no other work per task takes about 3 times as
   long (bench_fib_cpp against bench_fib), tasks that do some work less. A unit built
   without exceptions (or with FIBERSCHED_NO_CPP) has C's speed. In C, and in C++
   without exceptions, a child must not throw. */
#define FSCHED_FRAME_BYTES 48

typedef struct fsched_frames fsched_frames;
typedef struct fsched_frame fsched_frame;

/* A child record. Members are private. */
struct fsched_frame {
    /* runs the child for the worker that took it: nonzero when it threw (C++), its
       exception then in `data`; NULL: a free frame */
    int (*run)(fsched_frame *frame, fsched_frames *fs, fsched_frame *head);
    uintptr_t latch; /* taken by another worker: 0 until it finished, then 1, or
                        FSCHED__FRAME_THREW when it threw */
    union {
        unsigned char bytes[FSCHED_FRAME_BYTES];
        void *p;
        long long ll;
        double d;
        long double ld;
    } data;
};

/* The latch of a frame whose child, taken by another worker, threw (C++): odd, as 1 */
#define FSCHED__FRAME_THREW 3u

/* A stack of frames, owned by one task tree at a time. Members are private: the macros
   read the first three (and the C++ layer's helpers of spawn and sync the first two). */
struct fsched_frames {
    fsched_frame *split; /* the owner's: frames from here up are its own, not offered */
    fsched_frame *end;   /* one past the last frame */
    uint32_t asked;      /* other workers found nothing offered: offer some at the next spawn */
    uint32_t in_use;     /* a tree holds it (a hint for thieves) */
    fsched_frame *base;
    struct fsched_frames *outer; /* the next frame stack the same fiber holds, or the next
                                    free one */
    void *worker, *fiber;        /* whose frames they are */
    void *chunk;                 /* the part of the worker's set of stacks that names it */
    uintptr_t bit;               /* its bit in that part's word of stacks that offer */
    size_t bytes;                /* of its frames */
    size_t mapped;               /* bytes of the memory that begins at base and is freed
                                    with it (0: part of an earlier stack's) */
    FSCHED__ALIGNED(64) uint64_t shared; /* offered [tail, split): tail low, split high */
};

/* The macros' plumbing (and that of the C++ layer's helpers of them), not an API: a
   root takes a frame stack (enter; from outside every scheduler it runs through
   outside, on the default scheduler) and gives it back (leave); a spawn offers frames
   to workers that asked (share), or stops the program when the stack is full (full); a
   sync takes an offered frame back, or waits for the worker that took it (reclaim). */
FIBERSCHED_API fsched_result fsched__frames_enter(fsched_frames **out);
FIBERSCHED_API fsched_result fsched__frames_outside(fsched_result (*root)(void *call),
                                                    void *call);
FIBERSCHED_API void fsched__frames_leave(fsched_frames *fs);
FIBERSCHED_API void fsched__frames_share(fsched_frames *fs, fsched_frame *head);
FIBERSCHED_API int fsched__frames_reclaim(fsched_frames *fs, fsched_frame *frame);
FIBERSCHED_API void fsched__frames_full(fsched_frames *fs);

#define FSCHED__TASK_FN static FSCHED__UNUSED
/* a negative array size (a compile-time error) when an argument or result is too large */
#define FSCHED__FITS_FRAME(type) (sizeof(type) <= FSCHED_FRAME_BYTES ? 1 : -1)
#if defined(__cplusplus) && !defined(FIBERSCHED_NO_CPP) &&                                 \
    (defined(__cpp_exceptions) || defined(__EXCEPTIONS))
/* C++ with exceptions (the helpers are in the C++ layer, fsched::detail): a child that
   another worker runs keeps what it throws in its frame, for the sync to rethrow; the body
   of every task, when something leaves it by an exception, drops its children not synced
   (fsched::detail::frames_unwound); a root leaves its frame stack however it ends. */
#define FSCHED__TASK_RUN(frame, run_body)                                                  \
    try {                                                                                  \
        run_body;                                                                          \
    } catch (...) {                                                                        \
        fsched::detail::frame_keep(frame);                                                 \
        return 1;                                                                          \
    }                                                                                      \
    return 0
#define FSCHED__TASK_TAKEN(head)                                                           \
    if (FSCHED__UNLIKELY((head)->latch == FSCHED__FRAME_THREW))                            \
    fsched::detail::frame_rethrow(head)
#define FSCHED__TASK_ROOT(fs, root_call)                                                   \
    fsched::detail::frames_lease fsched__lease(fs);                                        \
    root_call
/* a root run on the default scheduler, from outside: its exception is rethrown here */
#define FSCHED__TASK_THROWN std::exception_ptr thrown;
#define FSCHED__TASK_OUTSIDE(call, run_root)                                               \
    try {                                                                                  \
        run_root;                                                                          \
    } catch (...) {                                                                        \
        (call)->thrown = std::current_exception();                                         \
    }                                                                                      \
    return FSCHED_OK
#define FSCHED__TASK_RETHROW(call)                                                         \
    if ((call).thrown) std::rethrow_exception((call).thrown)
#define FSCHED__TASK_BODY(rtype, name, atype, aname)                                       \
    static inline rtype name##_fsched_user(fsched_frames *fsched__fs,                      \
                                           fsched_frame *fsched__head, atype aname);       \
    static inline rtype name##_fsched_body(fsched_frames *fsched__fs,                      \
                                           fsched_frame *fsched__head, atype fsched__arg) { \
        fsched::detail::exception_slot fsched__thrown;                                     \
        try {                                                                              \
            return name##_fsched_user(fsched__fs, fsched__head, fsched__arg);              \
        } catch (...) {                                                                    \
            fsched__thrown.keep();                                                         \
        }                                                                                  \
        fsched::detail::frames_unwound(fsched__fs, fsched__head, fsched__thrown);          \
    }                                                                                      \
    static inline rtype name##_fsched_user(                                                \
        fsched_frames *fsched__fs FSCHED__UNUSED,                                          \
        fsched_frame *fsched__head FSCHED__UNUSED, atype aname)
#else
#define FSCHED__TASK_RUN(frame, run_body)                                                  \
    run_body;                                                                              \
    return 0
#define FSCHED__TASK_TAKEN(head) (void)0
#define FSCHED__TASK_ROOT(fs, root_call)                                                   \
    root_call;                                                                             \
    fsched__frames_leave(fs)
#define FSCHED__TASK_THROWN
#define FSCHED__TASK_OUTSIDE(call, run_root) run_root
#define FSCHED__TASK_RETHROW(call) (void)0
#define FSCHED__TASK_BODY(rtype, name, atype, aname)                                       \
    static inline rtype name##_fsched_body(fsched_frames *fsched__fs FSCHED__UNUSED,       \
                                           fsched_frame *fsched__head FSCHED__UNUSED,      \
                                           atype aname)
#endif
#define FSCHED__TASK_COMMON(rtype, name, atype, aname, data_members, run_body, sync_here,   \
                            sync_taken, root_call)                                          \
    typedef union name##_fsched_data { data_members } name##_fsched_data;                    \
    typedef char name##_fsched_fits[FSCHED__FITS_FRAME(name##_fsched_data)];                 \
    static inline rtype name##_fsched_body(fsched_frames *fsched__fs,                        \
                                           fsched_frame *fsched__head, atype aname);         \
    FSCHED__TASK_FN int name##_fsched_run(fsched_frame *fsched__frame,                       \
                                          fsched_frames *fsched__fs,                         \
                                          fsched_frame *fsched__head) {                      \
        name##_fsched_data *fsched__d = (name##_fsched_data *)(void *)&fsched__frame->data;   \
        FSCHED__TASK_RUN(fsched__frame, run_body);                                           \
    }                                                                                        \
    FSCHED__TASK_FN inline void name##_fsched_spawn(fsched_frame *fsched__head,              \
                                                    atype fsched__arg) {                     \
        ((name##_fsched_data *)(void *)&fsched__head->data)->arg = fsched__arg;              \
        fsched__head->run = name##_fsched_run;                                               \
    }                                                                                        \
    FSCHED__TASK_FN inline rtype name##_fsched_sync(fsched_frames *fsched__fs,               \
                                                    fsched_frame *fsched__head) {            \
        name##_fsched_data *fsched__d = (name##_fsched_data *)(void *)&fsched__head->data;    \
        if (FSCHED__LIKELY(fsched__head >= fsched__fs->split) ||                              \
            fsched__frames_reclaim(fsched__fs, fsched__head)) {                               \
            fsched__head->run = 0;                                                           \
            sync_here;                                                                       \
        } else {                                                                             \
            FSCHED__TASK_TAKEN(fsched__head);                                                \
            sync_taken;                                                                      \
        }                                                                                    \
    }                                                                                        \
    /* outside every scheduler, the root runs as a task of the default scheduler */        \
    typedef struct name##_fsched_call {                                                      \
        atype arg;                                                                           \
        void *out;                                                                           \
        FSCHED__TASK_THROWN                                                                  \
    } name##_fsched_call;                                                                    \
    FSCHED__TASK_FN inline fsched_result name##_fsched_root(atype fsched__arg,               \
                                                            void *fsched__out);              \
    FSCHED__TASK_FN fsched_result name##_fsched_outside(void *fsched__p) {                   \
        name##_fsched_call *fsched__c = (name##_fsched_call *)fsched__p;                     \
        FSCHED__TASK_OUTSIDE(fsched__c, return name##_fsched_root(fsched__c->arg,            \
                                                                  fsched__c->out));          \
    }                                                                                        \
    FSCHED__TASK_FN fsched_result name##_fsched_root_outside(atype fsched__arg,              \
                                                             void *fsched__out) {            \
        name##_fsched_call fsched__c;                                                        \
        fsched_result fsched__r;                                                             \
        fsched__c.arg = fsched__arg;                                                         \
        fsched__c.out = fsched__out;                                                         \
        fsched__r = fsched__frames_outside(name##_fsched_outside, &fsched__c);               \
        FSCHED__TASK_RETHROW(fsched__c);                                                     \
        return fsched__r;                                                                    \
    }                                                                                        \
    FSCHED__TASK_FN inline fsched_result name##_fsched_root(atype fsched__arg,               \
                                                            void *fsched__out) {             \
        fsched_frames *fsched__fs;                                                           \
        fsched_result fsched__r = fsched__frames_enter(&fsched__fs);                         \
        if (fsched__r != FSCHED_OK) return fsched__r;                                        \
        if (FSCHED__UNLIKELY(!fsched__fs))                                                   \
            return name##_fsched_root_outside(fsched__arg, fsched__out);                     \
        FSCHED__TASK_ROOT(fsched__fs, root_call);                                            \
        (void)fsched__out;                                                                   \
        return FSCHED_OK;                                                                    \
    }                                                                                        \
    /* inline: the compiler may unfold a recursion a few levels, as it does a plain one */  \
    FSCHED__TASK_BODY(rtype, name, atype, aname)

/* Defines the task `name`: `rtype name(atype aname)`, followed by its body in braces. */
#define FSCHED_TASK(rtype, name, atype, aname)                                             \
    FSCHED__TASK_COMMON(rtype, name, atype, aname, atype arg; rtype result;,               \
                        fsched__d->result = name##_fsched_body(fsched__fs, fsched__head,   \
                                                               fsched__d->arg),            \
                        return name##_fsched_body(fsched__fs, fsched__head, fsched__d->arg), \
                        return fsched__d->result,                                          \
                        rtype fsched__result =                                             \
                            name##_fsched_body(fsched__fs, fsched__fs->base, fsched__arg); \
                        if (fsched__out) *(rtype *)fsched__out = fsched__result)

/* Defines a task without a result. */
#define FSCHED_VOID_TASK(name, atype, aname)                                               \
    FSCHED__TASK_COMMON(void, name, atype, aname, atype arg;,                              \
                        name##_fsched_body(fsched__fs, fsched__head, fsched__d->arg),      \
                        name##_fsched_body(fsched__fs, fsched__head, fsched__d->arg),      \
                        (void)0,                                                           \
                        name##_fsched_body(fsched__fs, fsched__fs->base, fsched__arg))

/* Inside a task: offers name(arg) to other workers (a statement). `asked` is read
   relaxed: a thief's request, a hint; one seen late is served at a later spawn, and the
   share itself publishes the frames. */
#define FSCHED_SPAWN(name, arg)                                                            \
    do {                                                                                   \
        if (FSCHED__UNLIKELY(fsched__head == fsched__fs->end))                             \
            fsched__frames_full(fsched__fs);                                               \
        name##_fsched_spawn(fsched__head, (arg));                                          \
        ++fsched__head;                                                                    \
        if (FSCHED__UNLIKELY(__atomic_load_n(&fsched__fs->asked, __ATOMIC_RELAXED) != 0))  \
            fsched__frames_share(fsched__fs, fsched__head);                                \
    } while (0)

/* Inside a task: runs name(arg) here and returns its result. */
#define FSCHED_CALL(name, arg) name##_fsched_body(fsched__fs, fsched__head, (arg))

/* Inside a task: the result of the newest child not yet synced (which must be a `name`). */
#define FSCHED_SYNC(name) (--fsched__head, name##_fsched_sync(fsched__fs, fsched__head))

/* Runs name(arg) as the root of a tree of tasks, stores its result in *out (a pointer to
   the task's result type, or NULL) and returns FSCHED_OK. Any thread, as fsched_join:
   from one outside every scheduler the tree runs on the default scheduler, the thread
   blocking meanwhile (in C++, the root's exception is rethrown in the caller).
   FSCHED_ERR_WRONG_STATE where fsched_join is refused; FSCHED_ERR_OUT_OF_MEMORY when no
   frame stack can be had (running nothing). */
#define FSCHED_RUN(name, arg, out) name##_fsched_root((arg), (out))

/* ---- fiber-aware synchronisation --------------------------------------------------
   Each object is a transparent struct placed anywhere, set up with _init and released with
   _destroy (which fails with FSCHED_ERR_WRONG_STATE while someone waits). Waiting suspends
   the calling fiber when called from a task or bound thread, and blocks the thread when
   called from any other thread. Timed waits take a relative timeout in nanoseconds and
   return FSCHED_ERR_TIMEOUT when it expires (one too long for the clock never does, and
   FSCHED_FOREVER waits as the call without a timeout: no timer, no clock needed); under
   FIBERSCHED_NO_OS they need the scheduler's desc.clock and return
   FSCHED_ERR_UNSUPPORTED without one. A timed wait of a task or bound thread arms a
   timer of its worker's, whose list grows as it needs (16, then doubling): it fails with
   FSCHED_ERR_OUT_OF_MEMORY, waiting for nothing, when the list cannot grow. A poll hook
   must not wait (see fsched_set_poll): its waits fail with FSCHED_ERR_WRONG_STATE.
   Without threads (FIBERSCHED_NO_THREADS), a wait that nothing could ever end returns
   FSCHED_ERR_WRONG_STATE instead of hanging.
   Fields are private. */

typedef struct fsched_wait_list {
    uint32_t lock;
    uint32_t count;
    void *head;
    void *tail;
} fsched_wait_list;

typedef struct fsched_event {
    fsched_wait_list waiters;
    uint32_t signaled;
    uint32_t manual_reset;
} fsched_event;

/* manual_reset: a set event stays set and releases every waiter until reset; otherwise
   each set releases one waiter (or the next wait) and the event resets itself. */
FIBERSCHED_API fsched_result fsched_event_init(fsched_event *e, int manual_reset, int initially_set);
FIBERSCHED_API fsched_result fsched_event_destroy(fsched_event *e);
FIBERSCHED_API fsched_result fsched_event_set(fsched_event *e);
FIBERSCHED_API fsched_result fsched_event_reset(fsched_event *e);
FIBERSCHED_API int fsched_event_is_set(const fsched_event *e);
FIBERSCHED_API fsched_result fsched_event_wait(fsched_event *e);
FIBERSCHED_API fsched_result fsched_event_wait_for(fsched_event *e, uint64_t timeout_ns);

/* Counts outstanding work; wait returns when the count is zero. Tasks spawned with
   fsched_wait_group_spawn are counted automatically, and wait runs those of them still
   queued on the caller's own deque before it suspends (a scope). The spawn of a task of
   a worker thread into a group queues its task as fsched_join queues its second half:
   other workers can take it at once when none of the caller's work is public, otherwise
   once the caller next spawns, joins or waits (a wait_for with a zero timeout too) after
   one of them asked; the caller's wait runs what nobody took. So a task that computes
   for long between its spawns and its wait may run some of them itself; one that spins
   until its children have run, without such a call, can wait for ever: use fsched_spawn
   (other workers can take its task at once) and count with fsched_wait_group_add and
   _done. Bound threads (their own code and their tasks) and threads outside the
   scheduler queue a group's tasks where other workers take them at once, as fsched_spawn
   does. A wait from a thread that is not bound to the single-threaded scheduler the
   group's tasks were spawned into fails with FSCHED_ERR_WRONG_STATE while no thread is
   bound to it: nothing would run them (bind one, whose waits run them). */
typedef struct fsched_wait_group {
    fsched_wait_list waiters;
    uint64_t count; /* at most INT64_MAX from the program's adds; tasks that leave a lease
                       (below) may count past it */
    struct fsched_sched *single; /* private: the single-threaded scheduler of its last spawn
                                    (NULL when that one has worker threads) */
    void *lease;    /* private: the slot whose queued tasks of the group one unit of the
                       count stands for (NULL: none) */
    int64_t leased; /* private: how many; only that slot touches it */
} fsched_wait_group;

FIBERSCHED_API fsched_result fsched_wait_group_init(fsched_wait_group *wg);
FIBERSCHED_API fsched_result fsched_wait_group_destroy(fsched_wait_group *wg);
/* Adds n (may be negative) to the count; FSCHED_ERR_WRONG_STATE if it would go below 0,
   FSCHED_ERR_INVALID_ARGUMENT if it would pass INT64_MAX (the count left alone). A
   spawn into the group fails likewise when the group cannot count its task. */
FIBERSCHED_API fsched_result fsched_wait_group_add(fsched_wait_group *wg, int64_t n);
FIBERSCHED_API fsched_result fsched_wait_group_done(fsched_wait_group *wg);
FIBERSCHED_API fsched_result fsched_wait_group_wait(fsched_wait_group *wg);
FIBERSCHED_API fsched_result fsched_wait_group_wait_for(fsched_wait_group *wg, uint64_t timeout_ns);
FIBERSCHED_API fsched_result fsched_wait_group_spawn(fsched_wait_group *wg, fsched_sched *s,
                                                     void (*fn)(void *arg), void *arg);
/* fsched_wait_group_spawn with a name, as fsched_spawn_named. */
FIBERSCHED_API fsched_result fsched_wait_group_spawn_named(fsched_wait_group *wg, fsched_sched *s,
                                                           void (*fn)(void *arg), void *arg,
                                                           const char *name);

/* A mutex whose waiters suspend. Unlock wakes the longest waiter, which competes with
   lockers that are running (none of them waits behind a waiter that is still waking
   up); a waiter that has waited 1 ms is handed the mutex directly, so none starves. */
typedef struct fsched_mutex {
    fsched_wait_list waiters;
    uint32_t state;
} fsched_mutex;

FIBERSCHED_API fsched_result fsched_mutex_init(fsched_mutex *m);
FIBERSCHED_API fsched_result fsched_mutex_destroy(fsched_mutex *m);
FIBERSCHED_API fsched_result fsched_mutex_lock(fsched_mutex *m);
FIBERSCHED_API fsched_result fsched_mutex_lock_for(fsched_mutex *m, uint64_t timeout_ns);
/* FSCHED_OK, or FSCHED_ERR_TIMEOUT at once if the mutex is held. */
FIBERSCHED_API fsched_result fsched_mutex_try_lock(fsched_mutex *m);
/* FSCHED_ERR_WRONG_STATE if the mutex is not locked. */
FIBERSCHED_API fsched_result fsched_mutex_unlock(fsched_mutex *m);

typedef struct fsched_cond {
    fsched_wait_list waiters;
} fsched_cond;

FIBERSCHED_API fsched_result fsched_cond_init(fsched_cond *c);
FIBERSCHED_API fsched_result fsched_cond_destroy(fsched_cond *c);
/* Unlocks m, waits for a signal, locks m again (also after a timeout). Spurious wakeups
   do not happen, but re-check the predicate: another waiter may have consumed it.
   FSCHED_OK and FSCHED_ERR_TIMEOUT return with m held; FSCHED_ERR_OUT_OF_MEMORY (no
   timer could be set; or a wait without a fiber, run inline above a caller that could
   go on, gave up) returns without it. */
FIBERSCHED_API fsched_result fsched_cond_wait(fsched_cond *c, fsched_mutex *m);
FIBERSCHED_API fsched_result fsched_cond_wait_for(fsched_cond *c, fsched_mutex *m, uint64_t timeout_ns);
FIBERSCHED_API fsched_result fsched_cond_signal(fsched_cond *c);
FIBERSCHED_API fsched_result fsched_cond_broadcast(fsched_cond *c);

typedef struct fsched_sema {
    fsched_wait_list waiters;
    int64_t count;
} fsched_sema;

FIBERSCHED_API fsched_result fsched_sema_init(fsched_sema *s, int64_t initial);
FIBERSCHED_API fsched_result fsched_sema_destroy(fsched_sema *s);
FIBERSCHED_API fsched_result fsched_sema_acquire(fsched_sema *s);
FIBERSCHED_API fsched_result fsched_sema_acquire_for(fsched_sema *s, uint64_t timeout_ns);
/* FSCHED_OK, or FSCHED_ERR_TIMEOUT at once if the count is zero. */
FIBERSCHED_API fsched_result fsched_sema_try_acquire(fsched_sema *s);
/* Releases n units: to waiters first, the rest to the count. FSCHED_ERR_INVALID_ARGUMENT,
   releasing nothing, for a negative n or one that would take the count past INT64_MAX. */
FIBERSCHED_API fsched_result fsched_sema_release(fsched_sema *s, int64_t n);

/* Suspends the calling fiber (or thread) for at least ns nanoseconds. Without any clock
   (FIBERSCHED_NO_OS and no desc.clock) it yields instead. */
FIBERSCHED_API void fsched_sleep_for(uint64_t ns);

/* Lets other ready fibers, and at least one queued task if there is one, run before the
   calling fiber continues; a plain thread yields its processor. */
FIBERSCHED_API void fsched_yield(void);

/* The monotonic clock timed waits use, in nanoseconds. */
FIBERSCHED_API uint64_t fsched_clock_ns(void);

/* ---- waiting on the outside world -------------------------------------------------
   A task waits for a file descriptor without blocking its worker. Each scheduler keeps
   one poller (epoll on Linux, poll() on other POSIX systems), made at its first such
   wait; a worker with nothing to run sleeps in it instead of on its own, and busy workers
   look into it between tasks. Libraries that complete work only when asked (MPI_Test, a
   device's queue, a completion ring) plug in through a poll hook. Neither exists under
   FIBERSCHED_NO_OS or on Windows (FSCHED_ERR_UNSUPPORTED). A child of fork() polls apart
   from its parent (the waits it inherited included), so that the children of a prefork
   server on a single-threaded scheduler may each wait. */

#define FSCHED_READABLE 1u        /* data to read, a connection to accept, or end of file */
#define FSCHED_WRITABLE 2u        /* room to write */
#define FSCHED_EDGE 4u            /* with either: a wait after EAGAIN (see fsched_wait_fd) */
#define FSCHED_FOREVER UINT64_MAX /* a timeout that never expires */

/* Waits until fd is ready for any of `events` or timeout_ns pass (0: only looks;
   FSCHED_FOREVER: no limit; a timeout too long for the clock never expires either; as
   with poll(), an fd found ready when the time is up, however short, is reported ready,
   not timed out). A task or bound thread suspends only its fiber; any other thread
   blocks as in poll(). On FSCHED_OK, *ready (if not NULL) holds what was found; an
   error or hang-up on fd counts as every event asked for, so that the read or write
   that follows reports it.
   Readiness is a hint, as with poll(): another fiber may have taken the data first. Many
   fibers may wait on one fd; each wakes for its own events. A number that a new file
   took (after close() or dup2()) is watched as that file. The memory a scheduler keeps
   follows the fds waited on, not how high their numbers are.
   Each wait asks the kernel about fd (one system call) unless `events` has FSCHED_EDGE,
   a promise: since the caller's last wait on fd for these events returned, its last
   read, write or accept for them failed with EAGAIN (or EWOULDBLOCK), or, on a stream
   socket or a pipe, its last read or write moved fewer bytes than it asked for (the
   kernel had no more, or no more room: the read that would say EAGAIN is saved; not a
   read the kernel cut short with more behind it: at TCP's urgent mark, at descriptors
   or credentials passed on a Unix socket, at a packet's end in a pipe opened with
   O_DIRECT), and no other fiber waits on fd for them until this wait returns. Such a
   wait makes no system call: fd is registered once (edge-triggered, with epoll), and a
   readiness found while nobody waited is kept for the next such wait, which then
   returns at once (possibly for readiness already used up: the caller tries again, and
   waits again on EAGAIN). A hang-up answers one such wait more than its data needs: a
   short read takes the data, not the end behind it, which no edge would announce.
   A broken promise, or a number a new file took after a plain close() or dup2()
   rather than fsched_close_fd, delays such a wait's answer by up to
   FIBERSCHED_FD_VERIFY_NS (default 1 s), never for ever; after fsched_close_fd the
   next wait on the number registers whatever file has it. With poll() (other systems,
   FIBERSCHED_IO_POLL) and for threads outside a scheduler the flag is accepted and
   the wait is a plain one.
   FSCHED_ERR_TIMEOUT; FSCHED_ERR_INVALID_ARGUMENT for a negative fd, one that is not
   open, or a scheduler's own (its epoll set, eventfd or pipe), or events other than the
   two (with FSCHED_EDGE or not); FSCHED_ERR_CANCELLED when fsched_close_fd closed fd meanwhile or the scheduler is
   being destroyed (a wait begun then fails at once); FSCHED_ERR_WRONG_STATE from a poll
   hook (which must not wait; a timeout of 0 only looks, and may); FSCHED_ERR_OUT_OF_MEMORY
   (also when the poller's memory ran out while the wait was under way);
   FSCHED_ERR_SYSTEM (errno). */
FIBERSCHED_API fsched_result fsched_wait_fd(int fd, uint32_t events, uint64_t timeout_ns,
                                            uint32_t *ready);

/* Ends every wait on fd, in every live scheduler, with FSCHED_ERR_CANCELLED, then closes
   it. Use it instead of close() on an fd that tasks may wait for: the kernel drops a
   closed fd from the poller without a word, and its waiters would wait until their
   timeout. A wait on fd that begins while this runs ends too: cancelled, or, once fd is
   closed, as a wait on a closed fd or on the new file that took its number. Waits of
   threads outside any scheduler (in poll()) are not ended, and one without a timeout may
   then wait for ever: a poll() under way looks at a new file that took the number only
   when the closed one stirs. FSCHED_OK;
   FSCHED_ERR_INVALID_ARGUMENT for a negative fd, one that is not open, or a scheduler's
   own; FSCHED_ERR_SYSTEM when close() failed otherwise (errno). Any thread. */
FIBERSCHED_API fsched_result fsched_close_fd(int fd);

/* A poll hook finds out whether work it waits for outside the scheduler has completed, and
   ends the waits for it (by setting events, releasing semaphores, spawning). It must not
   wait itself: a wait from it fails with FSCHED_ERR_WRONG_STATE, and so do fsched_join, the
   parallel loops, FSCHED_RUN and linear pipelines (which wait for work other workers take);
   a wait group's wait runs none of the group's tasks there; fsched_yield yields only the
   thread, and fsched_sleep_for blocks it. Returns nonzero while something is still
   outstanding, 0 when nothing is. */
typedef int (*fsched_poll_fn)(void *user);

/* Installs fn as s's poll hook, replacing any other (NULL removes it). The scheduler
   calls it on one thread at a time: on a worker that ran out of work, before it sleeps,
   and on a worker between two tasks once interval_ns (0: 50 us) have passed since the
   last call, so a task that runs long delays it. While the last call returned nonzero,
   idle workers sleep at most interval_ns before calling it again: start what it waits for
   from a task, whose worker calls it before it sleeps. An interval shorter than a sleep
   (1 ns, say) makes idle workers call it without sleeping, a processor each, for the
   lowest latency; one too long for the clock (FSCHED_FOREVER) calls it only as workers
   run out of work. Without a clock (FIBERSCHED_NO_OS and no desc.clock) no interval
   passes: workers call it between every two tasks, and idle ones call it again without
   sleeping while it returns nonzero. The interval does not pace the fd waits. The new
   hook and interval count from this call (made from the hook, the next call comes an
   interval later). The cost: from the first hook or fd wait on, workers read the clock
   between tasks.
   Removing it waits for a call in progress (unless made from the hook).
   FSCHED_ERR_INVALID_ARGUMENT for a scheduler that is not live;
   FSCHED_ERR_WRONG_STATE from another scheduler's poll hook while s's is being called
   (a hook must not wait, and that call may be waiting for it), and from an interrupt
   handler (which may have preempted a call of the hook). Any thread. */
FIBERSCHED_API fsched_result fsched_set_poll(fsched_sched *s, fsched_poll_fn fn, void *user,
                                             uint64_t interval_ns);

/* ---- dependency graphs ------------------------------------------------------------
   A graph holds tasks and the edges between them ("before" precedes "after"). Running it
   starts every task once all its predecessors have finished, in parallel wherever the
   edges allow, on the work-stealing pool: a task made ready starts on the worker that
   finished its last predecessor, without a queue when it is the only one. Graphs are
   built once and run many times; a running task may add tasks and edges to its own
   graph. An edge that would close a cycle is refused when it is added.

   A task function returns 0 when it succeeded and any other value (its status) when it
   failed. By default the dependents of a failed task do not run and are marked failed,
   while independent branches still finish; FSCHED_GRAPH_FAIL_FAST cancels every task not
   yet started instead. fsched_graph_wait reports the first failure and its task. Results
   are values a task publishes for its successors (and the caller); they live until the
   graph is run again, built further or destroyed, since a task a run adds may read the
   result of any task that finished before.

   Thread safety: building (add, precede) may happen from several threads at once (the
   graph serializes it); while the graph runs, only its own running tasks may add to it.
   Run, wait and cancel may be called from any thread; wait suspends only the calling
   task when called from one. Task handles stay valid until the graph is destroyed (tasks
   a running task added: until the graph is run again or built further). */

typedef struct fsched_graph fsched_graph;
typedef struct fsched_graph_task fsched_graph_task;

/* A task: self is the running task (for results, predecessors, the graph and the
   cancellation flag), arg what was given to fsched_graph_add. 0: success; anything else
   is the task's status and marks it failed. */
typedef int (*fsched_graph_fn)(fsched_graph_task *self, void *arg);

typedef enum fsched_priority {
    FSCHED_PRIORITY_DEFAULT = 0, /* normal */
    FSCHED_PRIORITY_LOW,
    FSCHED_PRIORITY_NORMAL,
    FSCHED_PRIORITY_HIGH
} fsched_priority;

typedef enum fsched_task_state {
    FSCHED_TASK_WAITING = 0, /* predecessors have not finished (or the graph is not running) */
    FSCHED_TASK_READY,       /* queued to run */
    FSCHED_TASK_RUNNING,
    FSCHED_TASK_FINISHED,    /* returned 0 */
    FSCHED_TASK_FAILED,      /* returned a status, could not be queued, or a predecessor failed */
    FSCHED_TASK_CANCELLED    /* not started: the graph was cancelled */
} fsched_task_state;

typedef enum fsched_graph_policy {
    FSCHED_GRAPH_SKIP_DEPENDENTS = 0, /* a failure fails only what depends on it */
    FSCHED_GRAPH_FAIL_FAST            /* a failure cancels every task not yet started */
} fsched_graph_policy;

typedef struct fsched_graph_desc {
    const char *name;           /* for diagnostics and DOT output; copied */
    fsched_graph_policy on_failure;
    fsched_allocator allocator;
    fsched_logger logger;
} fsched_graph_desc;

typedef struct fsched_graph_task_desc {
    const char *name;           /* for diagnostics and DOT output; copied */
    fsched_priority priority;   /* among ready tasks on one worker, higher levels start first */
    uint64_t cost;              /* estimated cost, any unit; when any task has one, ready
                                   tasks on the longest remaining chain start first */
    uint64_t workers;           /* bit i: worker thread i (fsched_worker_index) may run it;
                                   0: any worker. Only workers 0..63 can be named */
    int on_caller;              /* run only on the thread that called fsched_graph_run
                                   (a task or a bound thread of the scheduler) */
} fsched_graph_task_desc;

typedef struct fsched_graph_outcome {
    fsched_result result;       /* FSCHED_OK; FSCHED_ERR_TASK_FAILED when a task failed;
                                   FSCHED_ERR_CANCELLED; or, when the first failure was a
                                   task that could not be queued, why (out of memory, or
                                   FSCHED_ERR_WRONG_STATE: its thread had unbound) */
    fsched_graph_task *failed;  /* the first task that failed, or NULL */
    int status;                 /* what that task returned (0 if it could not be queued) */
    size_t finished;            /* tasks that returned 0 */
    size_t failed_count;        /* tasks that failed themselves */
    size_t skipped;             /* tasks marked failed because a predecessor failed */
    size_t cancelled;           /* tasks cancelled before they started */
} fsched_graph_outcome;

/* Creates an empty graph. desc may be NULL. FSCHED_ERR_INVALID_ARGUMENT, _OUT_OF_MEMORY. */
FIBERSCHED_API fsched_result fsched_graph_create(const fsched_graph_desc *desc, fsched_graph **out);

/* Frees the graph, its tasks and the results still held (releasing them).
   FSCHED_ERR_WRONG_STATE, freeing nothing, while it runs. NULL is ignored. */
FIBERSCHED_API fsched_result fsched_graph_destroy(fsched_graph *g);

/* Adds a task that runs fn(self, arg). desc may be NULL. While the graph runs, only its
   running tasks may add (the new task starts once the adding task has returned and the
   new task's own predecessors have finished; it belongs to this run only). Any thread.
   FSCHED_ERR_INVALID_ARGUMENT, _OUT_OF_MEMORY, _WRONG_STATE. */
FIBERSCHED_API fsched_result fsched_graph_add(fsched_graph *g, fsched_graph_fn fn, void *arg,
                                              const fsched_graph_task_desc *desc,
                                              fsched_graph_task **out);

/* Adds a task that runs the whole graph `sub` (on the same scheduler) and waits for it:
   composition. The task fails when sub does, with the fsched_result of sub's run as its
   status. sub must not contain g. Errors as fsched_graph_add. */
FIBERSCHED_API fsched_result fsched_graph_add_graph(fsched_graph *g, fsched_graph *sub,
                                                    const fsched_graph_task_desc *desc,
                                                    fsched_graph_task **out);

/* `before` must finish before `after` starts. Adding an edge twice has no further effect.
   FSCHED_ERR_INVALID_ARGUMENT when the edge would close a cycle (before == after
   included) or the tasks belong to another graph; while the graph runs, only its running
   tasks may add edges, and `after` must not have started (FSCHED_ERR_WRONG_STATE).
   Building after a run (this or fsched_graph_add, from outside the run, whether it
   succeeds or is refused) first releases that run's results and the tasks it added. */
FIBERSCHED_API fsched_result fsched_graph_precede(fsched_graph *g, fsched_graph_task *before,
                                                  fsched_graph_task *after);

/* Starts a run of g on s and returns at once. Results and tasks added by the previous
   run are released first. s NULL: the scheduler the caller works for, else the default
   scheduler (see fsched_default_configure; without threads its runs wait for a thread
   bound to it, as any single-threaded scheduler's). FSCHED_ERR_WRONG_STATE (already
   running; on_caller tasks but the caller is no task or bound thread of s; s being
   destroyed; no default scheduler, as the process exits),
   FSCHED_ERR_INVALID_ARGUMENT (a task names only workers s does not have). Any thread. */
FIBERSCHED_API fsched_result fsched_graph_run(fsched_graph *g, fsched_sched *s);

/* Waits for the current (or last) run to end and describes how it ended; out may be
   NULL. Returns how the run ended (out->result: FSCHED_OK when every task finished), or
   an error of the call itself, out left alone: FSCHED_ERR_WRONG_STATE when g never ran
   or when called from one of g's own tasks, FSCHED_ERR_INVALID_ARGUMENT. A task waits by
   suspending; any other thread blocks. On a single-threaded scheduler the run's tasks run
   only while its bound thread waits, so another thread's wait ends once that thread has
   waited (for this run, or for anything else long enough). */
FIBERSCHED_API fsched_result fsched_graph_wait(fsched_graph *g, fsched_graph_outcome *out);

/* fsched_graph_wait with a relative timeout: FSCHED_ERR_TIMEOUT when the run goes on. */
FIBERSCHED_API fsched_result fsched_graph_wait_for(fsched_graph *g, uint64_t timeout_ns,
                                                   fsched_graph_outcome *out);

/* Cancels the current run: tasks not yet started are marked cancelled and do not run;
   running tasks may notice through fsched_graph_is_cancelled. Any thread. */
FIBERSCHED_API fsched_result fsched_graph_cancel(fsched_graph *g);

/* Writes g in Graphviz DOT, with each task's name and state, through write (called with
   pieces of text, no terminator). Any thread, also while g runs. */
FIBERSCHED_API fsched_result fsched_graph_dump_dot(fsched_graph *g,
                                                   void (*write)(const char *text, size_t len,
                                                                 void *user),
                                                   void *user);

/* Number of tasks in g (including those added by the running tasks). */
FIBERSCHED_API size_t fsched_graph_task_count(fsched_graph *g);

/* ---- inside a task, and queries -------------------------------------------------- */

/* The graph a task belongs to (for adding tasks while running). */
FIBERSCHED_API fsched_graph *fsched_graph_task_graph(const fsched_graph_task *t);

/* Publishes the running task's result for its successors; release(result, user) is
   called when the graph is run again, built further or destroyed, or at once when the
   result is replaced by another call. Only the task itself, while it runs:
   FSCHED_ERR_WRONG_STATE otherwise. release may be NULL. */
FIBERSCHED_API fsched_result fsched_graph_set_result(fsched_graph_task *self, void *result,
                                                     void (*release)(void *result, void *user),
                                                     void *user);

/* The result t published in the current or last run, or NULL. A running task may read
   its predecessors' results (also those of predecessors an edge added while running
   names); after a run, until the graph is run again or built further, every task's. */
FIBERSCHED_API void *fsched_graph_result(const fsched_graph_task *t);

/* t's predecessors, in the order the edges were added. */
FIBERSCHED_API size_t fsched_graph_pred_count(const fsched_graph_task *t);
FIBERSCHED_API fsched_graph_task *fsched_graph_pred(const fsched_graph_task *t, size_t i);

/* Nonzero when the run of t's graph has been cancelled (a running task may stop early). */
FIBERSCHED_API int fsched_graph_is_cancelled(const fsched_graph_task *t);

/* State of t (FSCHED_TASK_WAITING for NULL). Any thread. */
FIBERSCHED_API fsched_task_state fsched_graph_task_state(const fsched_graph_task *t);

/* What t returned in the last run when it failed: its status (0 otherwise, also when it
   failed because a predecessor did or because it could not be queued). */
FIBERSCHED_API int fsched_graph_task_status(const fsched_graph_task *t);

/* t's name ("" without one). */
FIBERSCHED_API const char *fsched_graph_task_name(const fsched_graph_task *t);

/* ---- pipelines --------------------------------------------------------------------
   Streaming work: nodes advance data between hubs. A hub owns a fixed number of
   envelopes (buffers of a fixed capacity); they circulate between the nodes linked to
   it, so memory is bounded by the envelopes, and a producer with no empty envelope
   simply cannot advance (backpressure). A node links to hubs:

     PRODUCE  takes an empty envelope; committing it makes it full (queued, oldest first)
     CONSUME  takes the oldest full envelope; committing it makes it empty again
     MODIFY   takes the oldest full envelope it has not modified yet; committing it
              leaves it in the queue, for the next MODIFY or PEEK link of the hub (in the
              order they were linked) and then for consumers
     PEEK     as MODIFY, read only: every envelope passes it before consumers see it

   Before a node is asked whether it can advance, each of its links gets an envelope if
   one is available; it keeps it until a successful advance commits it (or, with
   fsched_link_keep, longer). can_advance decides from the links and the node's own
   state (it must not depend on anything else: nothing would ask again), and returns
   FSCHED_NODE_FINISHED once the node will never advance again: its envelopes then go
   back to their hubs for others (a finished producer would otherwise hold one forever).
   advance does the work and reports, at once or later from any thread, whether it
   advanced data (fsched_node_complete); until then the node's links may be used from
   that thread. A run ends when every node is idle and none can advance; each node then
   reports whether it ended done, or starved while waiting on a hub.

   Two schedulers run the same pipelines. The debugging scheduler (fsched_pipeline_run
   with no scheduler, or step by step) updates one node at a time in the order the nodes
   were added, in generations, and writes every event to the pipeline's log in the words
   of noarr's debugging scheduler ("[scheduler]: Updating node producer ...", "[scheduler]:
   Node did advance data.", "[scheduler]: Generation 0 has ended.", ...): two runs print
   the same log. A generation in which no node advanced data ends the run (an advance
   completed with advanced = 0 moved nothing). The parallel scheduler runs on a
   work-stealing pool: a node is updated as soon as something it depends on changed (an
   envelope became empty or full, an advance completed), with no generation barrier; a
   node never runs two advances at once, and one whose advance moved nothing is asked
   again only after such a change. Its log has the lines of initialization and
   termination.

   Thread safety: building (hubs, nodes, links, adding nodes) happens before a run, from
   one thread at a time. During a run only fsched_node_complete, fsched_link_* (from the
   node's own callbacks) and the queries may be called. */

typedef struct fsched_hub fsched_hub;
typedef struct fsched_node fsched_node;
typedef struct fsched_link fsched_link;
typedef struct fsched_pipeline fsched_pipeline;

/* An envelope: a buffer of its hub. data and capacity are set by the hub; size and tag
   are the user's (a producer typically sets them, consumers read them). */
typedef struct fsched_envelope {
    void *data;
    size_t capacity;
    size_t size;
    uint64_t tag;
} fsched_envelope;

typedef struct fsched_hub_desc {
    const char *name;           /* for the log and reports; copied */
    uint32_t envelopes;         /* how many (at least 1) */
    size_t capacity;            /* bytes of data per envelope (0: none, only size and tag) */
    fsched_allocator allocator;
    fsched_logger logger;
} fsched_hub_desc;

typedef enum fsched_link_kind {
    FSCHED_LINK_PRODUCE = 0,
    FSCHED_LINK_CONSUME,
    FSCHED_LINK_MODIFY,
    FSCHED_LINK_PEEK
} fsched_link_kind;

/* What can_advance returns when the node will never advance again. */
#define FSCHED_NODE_FINISHED (-1)

/* The callbacks of a node run one at a time: on a worker of the parallel scheduler, or
   on the thread that steps or runs the debugging scheduler; initialize and terminate on
   the thread that calls fsched_pipeline_run (or _initialize, _step). */
typedef struct fsched_node_desc {
    const char *label;          /* for the log and reports; copied */
    void *user;                 /* passed to every callback */
    void (*initialize)(fsched_node *node, void *user);        /* optional, once before */
    int (*can_advance)(fsched_node *node, void *user);        /* optional: default, every
                                                                 link has an envelope
                                                                 (fsched_node_is_served);
                                                                 nonzero: yes;
                                                                 FSCHED_NODE_FINISHED */
    void (*advance)(fsched_node *node, void *user);           /* required: ends with
                                                                 fsched_node_complete */
    void (*post_advance)(fsched_node *node, void *user, int advanced); /* optional, after
                                                                 each, before the links
                                                                 commit */
    void (*terminate)(fsched_node *node, void *user);         /* optional, once after */
    fsched_allocator allocator;
    fsched_logger logger;
} fsched_node_desc;

typedef struct fsched_pipeline_desc {
    const char *name;           /* copied */
    void (*log)(const char *line, void *user); /* the scheduler's events, one line each
                                                  (no newline); may be NULL */
    void *log_user;
    fsched_allocator allocator;
    fsched_logger logger;
} fsched_pipeline_desc;

typedef enum fsched_node_end {
    FSCHED_NODE_RUNNING = 0,    /* the run has not ended */
    FSCHED_NODE_DONE,           /* finished (FSCHED_NODE_FINISHED), declined to advance with
                                   every link served, or waits only for input that can never
                                   come (a hub with nothing queued whose producers are done) */
    FSCHED_NODE_STARVED         /* waits on a hub that will never serve it */
} fsched_node_end;

typedef struct fsched_node_report {
    const char *label;
    fsched_node_end end;
    fsched_hub *waiting_on;     /* STARVED: the hub; NULL otherwise */
    fsched_link_kind waiting_as; /* STARVED: the kind of the link that waits */
    uint64_t advances;          /* advances that advanced data */
    uint64_t updates;           /* times the node was asked whether it can advance */
    uint64_t advance_ns;        /* parallel scheduler: the typical time of the advance
                                   callback (a mean over every eighth advance, each
                                   counted as at most 4 us); 0 unknown */
} fsched_node_report;

/* Hubs. destroy fails with FSCHED_ERR_WRONG_STATE while nodes are linked to the hub. */
FIBERSCHED_API fsched_result fsched_hub_create(const fsched_hub_desc *desc, fsched_hub **out);
FIBERSCHED_API fsched_result fsched_hub_destroy(fsched_hub *hub);
/* Envelopes that are full (queued) right now. Any thread. */
FIBERSCHED_API uint32_t fsched_hub_full_count(const fsched_hub *hub);
FIBERSCHED_API const char *fsched_hub_name(const fsched_hub *hub);

/* Nodes. A node added to a pipeline belongs to it (destroyed with it); destroy is for
   nodes never added. desc->advance is required. */
FIBERSCHED_API fsched_result fsched_node_create(const fsched_node_desc *desc, fsched_node **out);
FIBERSCHED_API fsched_result fsched_node_destroy(fsched_node *node);

/* Links node to hub as `kind`; *out (may be NULL) is the link, for the callbacks. Before
   the node is added to a pipeline. A node may have several links, also to one hub. */
FIBERSCHED_API fsched_result fsched_node_link(fsched_node *node, fsched_hub *hub,
                                              fsched_link_kind kind, fsched_link **out);

/* Ends the node's current advance: advanced != 0 when it moved data (then the envelopes
   of its links are committed, but for those kept). Exactly once per advance, from any
   thread, inside advance or later. FSCHED_ERR_WRONG_STATE when no advance is in flight. */
FIBERSCHED_API fsched_result fsched_node_complete(fsched_node *node, int advanced);

/* The node's report once a run has ended (end FSCHED_NODE_RUNNING before). */
FIBERSCHED_API fsched_result fsched_node_get_report(const fsched_node *node,
                                                    fsched_node_report *out);
FIBERSCHED_API const char *fsched_node_label(const fsched_node *node);
/* Nonzero when every link of the node holds an envelope (the default can_advance). */
FIBERSCHED_API int fsched_node_is_served(const fsched_node *node);

/* The envelope the link holds, or NULL. From the node's callbacks (and, during an
   advance, from the thread that completes it). */
FIBERSCHED_API fsched_envelope *fsched_link_envelope(const fsched_link *link);
/* The link's envelope stays with it after the current advance (not committed). During
   advance or post_advance; each advance starts with no link kept. */
FIBERSCHED_API fsched_result fsched_link_keep(fsched_link *link);

/* Pipelines. */
FIBERSCHED_API fsched_result fsched_pipeline_create(const fsched_pipeline_desc *desc,
                                                    fsched_pipeline **out);
/* FSCHED_ERR_WRONG_STATE while it runs (step by step included). Destroys its nodes. */
FIBERSCHED_API fsched_result fsched_pipeline_destroy(fsched_pipeline *p);
/* Adds a node (its links made). FSCHED_ERR_WRONG_STATE once the pipeline started or
   when the node belongs to a pipeline; FSCHED_ERR_INVALID_ARGUMENT for a node without
   advance. Logs "Node has been added: label". */
FIBERSCHED_API fsched_result fsched_pipeline_add(fsched_pipeline *p, fsched_node *node);

/* Runs the pipeline to its end and returns FSCHED_OK when every node ended done, or
   FSCHED_ERR_STALLED when some starved (see fsched_node_get_report and
   fsched_pipeline_describe). s NULL: the debugging scheduler, on the calling thread (it
   continues a run begun step by step); else the parallel scheduler on s: from a task or
   bound thread of s the caller's fiber waits, any other thread blocks. A pipeline runs
   once: FSCHED_ERR_WRONG_STATE afterwards. */
FIBERSCHED_API fsched_result fsched_pipeline_run(fsched_pipeline *p, fsched_sched *s);

/* The debugging scheduler step by step: initialize calls every node's initialize (in
   order; the first step does it when it was not called); step updates the next node;
   run_until steps until pred(user) holds (checked before each step) or the run ends.
   step and run_until return FSCHED_OK while the run goes on, then what
   fsched_pipeline_run would; FSCHED_ERR_WRONG_STATE after the end or on a pipeline run
   by the parallel scheduler. */
FIBERSCHED_API fsched_result fsched_pipeline_initialize(fsched_pipeline *p);
FIBERSCHED_API fsched_result fsched_pipeline_step(fsched_pipeline *p);
FIBERSCHED_API fsched_result fsched_pipeline_run_until(fsched_pipeline *p,
                                                       int (*pred)(void *user), void *user);
/* Nonzero once the run has ended. */
FIBERSCHED_API int fsched_pipeline_is_finished(const fsched_pipeline *p);

/* Writes, one line per node, how each node ended ("done", or "starved: waiting to
   consume from hub 'x'"), through write (pieces of text, no terminator). */
FIBERSCHED_API fsched_result fsched_pipeline_describe(const fsched_pipeline *p,
                                                      void (*write)(const char *text,
                                                                    size_t len, void *user),
                                                      void *user);

/* ---- linear pipelines ------------------------------------------------------------
   Items flow through a list of stages (oneTBB's parallel_pipeline). The first stage is
   the input: called with item NULL, it returns the next item, or sets *stop and returns
   anything to end the input. Each later stage takes the item the stage before returned
   and returns the item for the next one (the last stage's return value is dropped).
   A serial stage processes one item at a time, in input order (IN_ORDER) or in any order
   (OUT_OF_ORDER); a PARALLEL stage processes any number at once. At most max_in_flight
   items (0: 4 per worker) are between the first stage and the end at any time. The
   first stage is always serial and in order. The stages run on the scheduler's loops,
   never on the caller's fiber, which waits: a worker carries an item through the stages
   in place, then reads the next one itself, unless another worker took the input
   meanwhile: around the calls of a stage that takes a microsecond or more, as timed on
   every 64th item, it is offered to them (a stage that turns long runs up to about 128
   items more before other workers join; one whose timed items are short and the others
   long keeps them out). A stage must not spin, without a scheduler call, until a later
   item arrives: the input may be held by the spinning worker. */

typedef enum fsched_stage_mode {
    FSCHED_STAGE_SERIAL_IN_ORDER = 0,
    FSCHED_STAGE_SERIAL_OUT_OF_ORDER,
    FSCHED_STAGE_PARALLEL
} fsched_stage_mode;

typedef struct fsched_stage {
    fsched_stage_mode mode;
    void *(*fn)(void *user, void *item, int *stop); /* stop: only the first stage's */
    void *user;
    const char *name;           /* for the log and stall reports; may be NULL */
} fsched_stage;

typedef struct fsched_parallel_pipeline_desc {
    const char *name;           /* for the log and stall reports */
    size_t max_in_flight;       /* 0: 4 per worker */
    void (*log)(const char *line, void *user); /* the run's events, one line each (no
                                                  newline): its start, its end, and stall
                                                  reports; may be NULL */
    void *log_user;
    uint64_t stall_report_ns;   /* when no item has moved for this long, where the items
                                   are is reported (log, and logger as a warning), once per
                                   stall; 0: 10 s; UINT64_MAX: never (nor without a clock:
                                   FIBERSCHED_NO_OS and no desc.clock) */
    fsched_logger logger;       /* misuse and stall reports; zero: the scheduler's */
} fsched_parallel_pipeline_desc;

/* Runs items through the stages until the first stage stops and every item has passed.
   desc may be NULL (the defaults). A stall report names, per stage, the items running in
   it and those waiting for a serial stage, e.g. "stage 2 'write' (serial, in order): 1
   running, 7 waiting": a stage function that never returns is found there. Any thread,
   as fsched_join (from main: on the default scheduler, the thread blocking meanwhile);
   FSCHED_ERR_WRONG_STATE where fsched_join is refused; FSCHED_ERR_INVALID_ARGUMENT for
   no stages, a NULL fn or an unknown mode; FSCHED_ERR_OUT_OF_MEMORY. */
FIBERSCHED_API fsched_result fsched_parallel_pipeline_run(const fsched_parallel_pipeline_desc *desc,
                                                          const fsched_stage *stages,
                                                          size_t n_stages);

/* fsched_parallel_pipeline_run with max_in_flight and every other setting by default. */
FIBERSCHED_API fsched_result fsched_parallel_pipeline(size_t max_in_flight,
                                                      const fsched_stage *stages,
                                                      size_t n_stages);

/* ---- tracing ----------------------------------------------------------------------
   Built with FIBERSCHED_TRACE=1 in the implementation's translation unit, every slot of
   a scheduler (worker thread, bound thread, the thread in fsched_destroy) records, with
   the scheduler's clock: each detached task, join half or piece of a parallel loop that
   ran as a job of its own (another worker took it), spawn/sync child another worker
   took, graph task, pipeline advance and linear-pipeline stage it runs; each time one of
   its fibers is blocked (and on what); each sleep; each steal. A slot keeps its first
   trace_events events (see fsched_desc) and counts the rest as dropped; recording takes
   no lock. In the output a slot is a process ("worker 0", "bound slot 2",
   "fsched_destroy") and each of its fibers a thread, so that the spans of a track always
   nest. Each event's category ("cat") is its kind: task, join, child, graph task,
   advance, stage, blocked, sleep or steal. A span of work is named by the name the user
   gave (fsched_spawn_named, a graph task's or stage's name, a node's label; up to 30
   bytes), else by its kind, and its args.fn is the address of the user's function it
   ran (a loop's body, a join's function; for a spawn/sync task `name`, its
   name_fsched_run), never one of the scheduler's own: tools/trace_summary.py --exe names
   it. Without FIBERSCHED_TRACE these calls return FSCHED_ERR_UNSUPPORTED. */

/* Writes the events recorded so far as Chrome trace-event JSON (for Perfetto or
   chrome://tracing) through write, in pieces. Any thread, also while tasks run (events
   recorded meanwhile may be left out), but not after fsched_destroy.
   FSCHED_ERR_INVALID_ARGUMENT for a NULL or destroyed scheduler or a NULL write. */
FIBERSCHED_API fsched_result fsched_trace_write_json(fsched_sched *s,
                                                     void (*write)(const char *text,
                                                                   size_t len, void *user),
                                                     void *user);

/* Events recorded so far, and events dropped because a slot's buffer was full (either
   pointer may be NULL). Any thread. */
FIBERSCHED_API fsched_result fsched_trace_count(const fsched_sched *s, uint64_t *recorded,
                                                uint64_t *dropped);

/* ---- deprecated names -------------------------------------------------------------
   Old names of renamed functions, kept for one release (and exported, for programs
   linked against an earlier build): each forwards to its new name (see NAMES at the
   top), and the compiler warns where it is used. */

FSCHED__DEPRECATED("use fsched_node_get_report")
FIBERSCHED_API fsched_result fsched_node_report_get(const fsched_node *node,
                                                    fsched_node_report *out);
FSCHED__DEPRECATED("use fsched_node_is_served")
FIBERSCHED_API int fsched_node_served(const fsched_node *node);
FSCHED__DEPRECATED("use fsched_graph_is_cancelled")
FIBERSCHED_API int fsched_graph_cancelled(const fsched_graph_task *t);
FSCHED__DEPRECATED("use fsched_pipeline_is_finished")
FIBERSCHED_API int fsched_pipeline_finished(const fsched_pipeline *p);

#ifdef __cplusplus
}
#endif
#endif /* FIBERSCHED_H */

/* ===================================================================================== */
/*                                    IMPLEMENTATION                                     */
/* ===================================================================================== */
#if defined(FIBERSCHED_IMPLEMENTATION) && !defined(FIBERSCHED_IMPLEMENTATION_ONCE)
#define FIBERSCHED_IMPLEMENTATION_ONCE

/* The layers, bottom to top, in the order of the file. A layer calls only the layers
   below it; where a lower one must reach up, the higher one installs a function pointer
   (s->watch for io, fsched__frames_linked for the frame stacks of spawn/sync). A function
   belongs to the layer of the banner above it, and a "----" banner not named here to the
   layer of the "====" banner above it. A layer beside another shares its level and calls
   it neither way. tools/check_layers.py holds the implementation to this table.

   LAYER platform: configuration, resolved in one place; platform
   LAYER fiber: fiber
   LAYER deque (beside fiber): deque
   LAYER wait & sleep: wait & sleep
   LAYER trace: trace
   LAYER worker: worker
   LAYER lifecycle: lifecycle
   LAYER sync: sync
   LAYER io: io
   LAYER algorithms: algorithms
   LAYER graph: graph
   LAYER pipeline (beside graph): pipeline
   LAYER trace export: trace export

   Trace records from the worker and every layer above it (FSCHED__TRACE, nothing when
   off); its export, which walks every slot's records, stands above all. */

/* ---- configuration, resolved in one place ---------------------------------------- */

#if defined(FIBERSCHED_NO_OS) && !defined(FIBERSCHED_NO_THREADS)
#define FIBERSCHED_NO_THREADS
#endif
#if defined(FIBERSCHED_NO_THREADS)
#define FSCHED__THREADS 0 /* one thread, perhaps preempted by interrupt handlers */
#else
#define FSCHED__THREADS 1
#endif
#if defined(FIBERSCHED_NO_OS)
#define FSCHED__OS_NONE 1
#define FSCHED__OS 0
#elif defined(_WIN32)
#define FSCHED__OS_WINDOWS 1
#elif defined(__unix__) || defined(__APPLE__)
#define FSCHED__OS_POSIX 1
#else
#define FSCHED__OS_NONE 1
#define FSCHED__OS 0
#if !defined(FIBERSCHED_NO_THREADS)
#error "fibersched: no operating system detected: define FIBERSCHED_NO_OS for bare metal"
#endif
#endif
#if !defined(FSCHED__OS)
#define FSCHED__OS 1 /* POSIX or Windows */
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

/* The default stack: what a thread gets by default, where stacks are reserved as address
   space and committed page by page as they are touched (64-bit POSIX systems: 8 MiB, a
   Linux thread's); 1 MiB on 64-bit Windows (a thread's there; its stacks are committed
   when mapped) and on 64-bit targets without an OS (heap stacks, painted whole) */
#ifndef FIBERSCHED_DEFAULT_STACK_SIZE
#if UINTPTR_MAX > 0xffffffffu && defined(FSCHED__OS_POSIX)
#define FIBERSCHED_DEFAULT_STACK_SIZE (8u * 1024u * 1024u)
#elif UINTPTR_MAX > 0xffffffffu
#define FIBERSCHED_DEFAULT_STACK_SIZE (1024u * 1024u)
#elif defined(FSCHED__OS_NONE)
#define FIBERSCHED_DEFAULT_STACK_SIZE (8u * 1024u) /* a microcontroller's RAM */
#else
#define FIBERSCHED_DEFAULT_STACK_SIZE (64u * 1024u)
#endif
#endif
#ifndef FIBERSCHED_DEFAULT_GUARD_SIZE
#define FIBERSCHED_DEFAULT_GUARD_SIZE (16u * 1024u)
#endif
#ifndef FIBERSCHED_MIN_STACK_SIZE
#if defined(FSCHED__OS_NONE)
#define FIBERSCHED_MIN_STACK_SIZE 1024u
#else
#define FIBERSCHED_MIN_STACK_SIZE (8u * 1024u)
#endif
#endif
/* Small stacks (FSCHED_STACK_SMALL): a task's own wait takes about 1 KiB of them on
   64-bit targets in optimized builds (the scheduler's frames from the task to the switch) */
#ifndef FIBERSCHED_MIN_SMALL_STACK_SIZE
#if defined(__powerpc64__) || defined(_WIN64)
/* a switch alone saves 512 bytes on POWER; on 64-bit Windows it saves the vector
   registers too, and every call reserves 32 bytes for its callee */
#define FIBERSCHED_MIN_SMALL_STACK_SIZE 2048u
#else
#define FIBERSCHED_MIN_SMALL_STACK_SIZE 1024u
#endif
#endif
#if FIBERSCHED_MIN_SMALL_STACK_SIZE < 256 || FIBERSCHED_MIN_SMALL_STACK_SIZE > 65536
#error "fibersched: FIBERSCHED_MIN_SMALL_STACK_SIZE is 256 to 65536 bytes"
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

/* The trace layer, at the end of the file, is called from every layer through
   FSCHED__TRACE(statements), which compiles to nothing unless FIBERSCHED_TRACE is 1. */
#if !defined(FIBERSCHED_TRACE)
#define FIBERSCHED_TRACE 0
#endif
#if !defined(FIBERSCHED_TRACE_EVENTS)
#define FIBERSCHED_TRACE_EVENTS 32768u
#endif
#if FIBERSCHED_TRACE
#define FSCHED__TRACE(...) __VA_ARGS__
/* What a span or instant records: the export names each kind and its argument. */
/* Spans of work record the user's code (the function it runs: never a wrapper of the
   scheduler's) and the name the user gave it, if any. */
typedef enum fsched__trace_kind {
    FSCHED__TRACE_TASK,       /* a detached task */
    FSCHED__TRACE_JOIN,       /* a join's second half, or a piece of a parallel loop, run
                                 as a job of its own (another worker took it) */
    FSCHED__TRACE_CHILD,      /* a spawn/sync child another worker took */
    FSCHED__TRACE_GRAPH_TASK, /* arg: the status the task returned */
    FSCHED__TRACE_ADVANCE,    /* a pipeline node's advance; name: the node's label */
    FSCHED__TRACE_STAGE,      /* a linear pipeline's stage; arg: its index */
    FSCHED__TRACE_BLOCKED,    /* the fiber waited (suspended); name: on what */
    FSCHED__TRACE_SLEEP,      /* the worker slept */
    FSCHED__TRACE_STEAL       /* an instant: a job taken from another slot; arg: its index */
} fsched__trace_kind;
#define FSCHED__TRACE_INSTANT UINT64_MAX /* a `begin` that means "now, no duration" */
struct fsched__trace_buffer;
#else
#define FSCHED__TRACE(...)
#endif

/* What the user's macros turn on or off, under the names the rest of the implementation
   tests (it tests the user's names nowhere else; it uses their values as resolved here). */
#if defined(FIBERSCHED_NO_STDIO)
#define FSCHED__STDIO 0
#else
#define FSCHED__STDIO 1
#endif
#if FIBERSCHED_TRACE
#define FSCHED__TRACING 1
#else
#define FSCHED__TRACING 0
#endif
#if FIBERSCHED_VALGRIND
#define FSCHED__VALGRIND 1
#else
#define FSCHED__VALGRIND 0
#endif
#if !defined(FIBERSCHED_CHAOS)
#define FIBERSCHED_CHAOS 0
#endif
#if FIBERSCHED_CHAOS
#define FSCHED__CHAOS 1
#else
#define FSCHED__CHAOS 0
#endif
#if defined(FIBERSCHED_GDB_SCRIPT) && defined(__ELF__) && defined(__GNUC__)
#define FSCHED__GDB_SCRIPT 1
#endif
#if defined(FSCHED__OS_NONE) && defined(FIBERSCHED_INTERRUPTS_MASK)
#if !defined(FIBERSCHED_INTERRUPTS_RESTORE) || !defined(FIBERSCHED_IN_INTERRUPT)
#error "fibersched: define FIBERSCHED_INTERRUPTS_MASK, _RESTORE and FIBERSCHED_IN_INTERRUPT together"
#endif
#define FSCHED__INTERRUPTS_USER 1 /* the user's macros mask interrupts */
#endif
#ifndef FIBERSCHED_ASSERT
#if FSCHED__DEBUG
#define FIBERSCHED_ASSERT(x) ((x) ? (void)0 : fsched__fatal("assertion failed: " #x))
#else
#define FIBERSCHED_ASSERT(x) ((void)0)
#endif
#endif

/* Stack canaries: bytes of a known value below every heap or slab stack. */
#ifndef FIBERSCHED_STACK_CANARY
#if defined(FSCHED__OS_NONE)
#define FIBERSCHED_STACK_CANARY 256
#else
#define FIBERSCHED_STACK_CANARY 64
#endif
#endif
#if FIBERSCHED_STACK_CANARY < 16 || FIBERSCHED_STACK_CANARY % 16
#error "fibersched: FIBERSCHED_STACK_CANARY is a multiple of 16 bytes, at least 16"
#endif
#define FSCHED__CANARY_BYTES ((size_t)FIBERSCHED_STACK_CANARY)

/* An MPU guard (ARMv7-M): heap stacks start with a read-only region of this many bytes
   (0: none), aligned to its size, which holds the canary; one MPU region (number
   FSCHED__MPU_GUARD_REGION) is pointed at the running fiber's guard at every switch, so
   the first write below its stack faults. */
#if defined(FIBERSCHED_MPU_GUARD) && FIBERSCHED_MPU_GUARD
#if !defined(FSCHED__OS_NONE) || !(defined(__ARM_ARCH_7M__) || defined(__ARM_ARCH_7EM__))
#error "fibersched: FIBERSCHED_MPU_GUARD needs FIBERSCHED_NO_OS on an ARMv7-M core"
#endif
#if FIBERSCHED_MPU_GUARD < 32 || (FIBERSCHED_MPU_GUARD & (FIBERSCHED_MPU_GUARD - 1)) || \
    FIBERSCHED_MPU_GUARD < FIBERSCHED_STACK_CANARY
#error "fibersched: FIBERSCHED_MPU_GUARD is a power of two, at least 32 and the canary's size"
#endif
#ifndef FIBERSCHED_MPU_GUARD_REGION
#define FIBERSCHED_MPU_GUARD_REGION 7
#endif
#define FSCHED__MPU_GUARD FIBERSCHED_MPU_GUARD
#define FSCHED__MPU_GUARD_REGION FIBERSCHED_MPU_GUARD_REGION
#else
#define FSCHED__MPU_GUARD 0
#endif

/* Painted stacks: an unused heap stack's bytes hold a known value, so that the depth
   a fiber reached can be measured (fsched_fiber_stack_used). */
#ifndef FIBERSCHED_STACK_PAINT
#if defined(FSCHED__OS_NONE)
#define FIBERSCHED_STACK_PAINT 1
#else
#define FIBERSCHED_STACK_PAINT 0
#endif
#endif
#if FIBERSCHED_STACK_PAINT
#define FSCHED__STACK_PAINT 1
#else
#define FSCHED__STACK_PAINT 0
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
#include <sched.h>
#endif
#if !defined(MAP_ANONYMOUS) && defined(MAP_ANON)
#define MAP_ANONYMOUS MAP_ANON
#endif
/* waits on file descriptors: epoll on Linux, poll() elsewhere (or where
   FIBERSCHED_IO_POLL asks for it); none without an OS or on Windows */
#define FSCHED__IO 1
#include <fcntl.h>
#include <poll.h>
#include <pthread.h> /* pthread_atfork, also without threads (a fork gives pollers anew) */
#if defined(__linux__) && !defined(FIBERSCHED_IO_POLL)
#define FSCHED__IO_EPOLL 1
#if !defined(FIBERSCHED_FD_VERIFY_NS)
#define FIBERSCHED_FD_VERIFY_NS 1000000000ull
#endif
#include <sys/epoll.h>
#include <sys/eventfd.h>
#endif
#if defined(__linux__) && !defined(__cplusplus)
/* Strict ISO C (-std=c11) with a system header included before the implementation:
   glibc and musl then hide POSIX and BSD declarations for the whole translation unit
   (the _DEFAULT_SOURCE above came too late). The few the implementation calls are
   declared here (the same declarations, harmless when visible), hidden constants take
   Linux's values, and what has hidden types goes without: readers of the registry
   exclude each other without an rwlock, and there is no overflow signal handler
   (fsched_install_overflow_handler returns FSCHED_ERR_UNSUPPORTED). */
int clock_gettime(int clock, struct timespec *ts); /* clockid_t: int on Linux */
int nanosleep(const struct timespec *duration, struct timespec *left);
long syscall(long number, ...);
#if !defined(CLOCK_MONOTONIC)
#define CLOCK_MONOTONIC 1
#endif
#if !defined(MAP_ANONYMOUS)
#if defined(__mips__)
#define MAP_ANONYMOUS 0x800
#elif defined(__alpha__) || defined(__hppa__)
#define MAP_ANONYMOUS 0x10
#else
#define MAP_ANONYMOUS 0x20
#endif
#endif
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
/* Not inlined without threads (small flash), as the compiler sees fit with them. */
#if FSCHED__THREADS
#define FSCHED__NOINLINE_ALONE
#else
#define FSCHED__NOINLINE_ALONE FSCHED__NOINLINE
#endif
#define FSCHED__ALWAYS_INLINE __inline__ __attribute__((always_inline))
#if !FSCHED__THREADS
#define FSCHED__CACHE_LINE 16 /* one thread shares no lines: the alignment stacks need */
#else
#define FSCHED__CACHE_LINE 64
#endif

/* Interrupts (FIBERSCHED_NO_OS): the one thread of a bare-metal program may be preempted
   at any instruction by an interrupt handler that calls the library. The platform masks
   them (returning the state to restore) and says whether a handler runs: PRIMASK and IPSR
   on Cortex-M, the user's three macros elsewhere; without either no call may come from a
   handler. Each primitive is a compiler barrier. */
#if defined(FSCHED__INTERRUPTS_USER)
#define FSCHED__INTERRUPTS 1
typedef unsigned long fsched__irq_state;
static inline fsched__irq_state fsched__irq_save(void) {
    fsched__irq_state s = (fsched__irq_state)(FIBERSCHED_INTERRUPTS_MASK());
    __asm__ __volatile__("" ::: "memory");
    return s;
}
static inline void fsched__irq_restore(fsched__irq_state s) {
    __asm__ __volatile__("" ::: "memory");
    FIBERSCHED_INTERRUPTS_RESTORE(s);
}
static inline int fsched__in_interrupt(void) { return (FIBERSCHED_IN_INTERRUPT()) != 0; }
#elif defined(FSCHED__OS_NONE) && defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M'
#define FSCHED__INTERRUPTS 1
typedef uint32_t fsched__irq_state;
static inline fsched__irq_state fsched__irq_save(void) {
    fsched__irq_state s;
    __asm__ __volatile__("mrs %0, primask\n\tcpsid i" : "=r"(s) : : "memory");
    return s;
}
static inline void fsched__irq_restore(fsched__irq_state s) {
    __asm__ __volatile__("msr primask, %0" : : "r"(s) : "memory");
}
static inline int fsched__in_interrupt(void) {
    uint32_t ipsr; /* the active exception's number; 0 in thread mode */
    __asm__ __volatile__("mrs %0, ipsr" : "=r"(ipsr));
    return ipsr != 0;
}
#else
typedef unsigned fsched__irq_state;
static inline fsched__irq_state fsched__irq_save(void) { return 0; }
static inline void fsched__irq_restore(fsched__irq_state s) { (void)s; }
static inline int fsched__in_interrupt(void) { return 0; }
#endif

/* Atomics follow the C11 memory model through the GCC/Clang __atomic builtins, which
   work on plain integer and pointer objects in C and C++ alike. Every use names its
   ordering; the comment next to it says why. Without threads, see below. */
#define FSCHED__RELAXED __ATOMIC_RELAXED
#define FSCHED__ACQUIRE __ATOMIC_ACQUIRE
#define FSCHED__RELEASE __ATOMIC_RELEASE
#define FSCHED__ACQ_REL __ATOMIC_ACQ_REL
#define FSCHED__SEQ_CST __ATOMIC_SEQ_CST
#if FSCHED__THREADS
#define FSCHED__LOAD(p, mo) __atomic_load_n((p), (mo))
#define FSCHED__STORE(p, v, mo) __atomic_store_n((p), (v), (mo))
#define FSCHED__FETCH_ADD(p, v, mo) __atomic_fetch_add((p), (v), (mo))
#define FSCHED__FETCH_SUB(p, v, mo) __atomic_fetch_sub((p), (v), (mo))
#define FSCHED__FETCH_OR(p, v, mo) __atomic_fetch_or((p), (v), (mo))
#define FSCHED__FETCH_AND(p, v, mo) __atomic_fetch_and((p), (v), (mo))
#define FSCHED__EXCHANGE(p, v, mo) __atomic_exchange_n((p), (v), (mo))
#define FSCHED__CAS(p, expected, desired, succ, fail) \
    __atomic_compare_exchange_n((p), (expected), (desired), 0, (succ), (fail))
#define FSCHED__CAS_WEAK(p, expected, desired, succ, fail) \
    __atomic_compare_exchange_n((p), (expected), (desired), 1, (succ), (fail))
#define FSCHED__FENCE(mo) __atomic_thread_fence(mo)
#define FSCHED__THREAD_LOCAL_STORAGE 1
#else
/* One thread, perhaps preempted by interrupt handlers: a read-modify-write, and an access
   wider than a pointer (two instructions), runs with interrupts masked; other loads and
   stores are single volatile accesses. One processor sees its own accesses in order, so
   a fence only keeps the compiler from moving accesses across it. No atomic instructions:
   ARMv6-M has none, and bare-metal C libraries no libatomic. */
#define FSCHED__WIDE(p) (sizeof *(p) > sizeof(void *))
/* A wide load masks out of line (a call is shorter, and they are many). Its 64 bits come
   back as a uint64_t and are read as *p's type through a union: a cast of the value
   would not compile for the pointers that never take this branch. */
static FSCHED__NOINLINE uint64_t fsched__wide_load(const volatile void *p) {
    fsched__irq_state m = fsched__irq_save();
    uint64_t v = *(const volatile uint64_t *)p;
    fsched__irq_restore(m);
    return v;
}
#define FSCHED__LOAD(p, mo)                                                            \
    __extension__({                                                                    \
        union {                                                                        \
            uint64_t wide;                                                             \
            __typeof__(*(p)) value;                                                    \
        } fsched__u_ = {FSCHED__WIDE(p) ? fsched__wide_load(p) : 0};                   \
        FSCHED__WIDE(p) ? fsched__u_.value : *(volatile __typeof__(*(p)) *)(p);        \
    })
#define FSCHED__STORE(p, v, mo)                                                        \
    __extension__({                                                                    \
        fsched__irq_state fsched__m_ = FSCHED__WIDE(p) ? fsched__irq_save() : 0;       \
        *(volatile __typeof__(*(p)) *)(p) = (v);                                       \
        if (FSCHED__WIDE(p)) fsched__irq_restore(fsched__m_);                          \
        (void)0;                                                                       \
    })
/* *p becomes `value`, computed from the old value fsched__old_, which is returned */
#define FSCHED__RMW(p, value)                                                          \
    __extension__({                                                                    \
        fsched__irq_state fsched__m_ = fsched__irq_save();                             \
        __typeof__(*(p)) fsched__old_ = *(p);                                          \
        *(p) = (value);                                                                \
        fsched__irq_restore(fsched__m_);                                               \
        fsched__old_;                                                                  \
    })
/* Words the size of a pointer go through the functions below, out of line: a call is
   shorter than masking inline, and they are many. */
#define FSCHED__WORD(p) (sizeof *(p) == sizeof(uintptr_t))
typedef uintptr_t __attribute__((may_alias)) fsched__word;
static FSCHED__NOINLINE uintptr_t fsched__word_add(void *p, uintptr_t v) {
    fsched__irq_state m = fsched__irq_save();
    uintptr_t old = *(fsched__word *)p;
    *(fsched__word *)p = old + v;
    fsched__irq_restore(m);
    return old;
}
static FSCHED__NOINLINE uintptr_t fsched__word_exchange(void *p, uintptr_t v) {
    fsched__irq_state m = fsched__irq_save();
    uintptr_t old = *(fsched__word *)p;
    *(fsched__word *)p = v;
    fsched__irq_restore(m);
    return old;
}
static FSCHED__NOINLINE int fsched__word_cas(void *p, void *expected, uintptr_t desired) {
    fsched__irq_state m = fsched__irq_save();
    int same = *(fsched__word *)p == *(fsched__word *)expected;
    if (same) *(fsched__word *)p = desired;
    else *(fsched__word *)expected = *(fsched__word *)p;
    fsched__irq_restore(m);
    return same;
}
#define FSCHED__FETCH_ADD(p, v, mo)                                                    \
    (FSCHED__WORD(p) ? (__typeof__(*(p)))fsched__word_add((void *)(p), (uintptr_t)(v))   \
                     : FSCHED__RMW(p, fsched__old_ + (v)))
#define FSCHED__FETCH_SUB(p, v, mo)                                                    \
    (FSCHED__WORD(p)                                                                   \
         ? (__typeof__(*(p)))fsched__word_add((void *)(p), (uintptr_t)0 - (uintptr_t)(v)) \
         : FSCHED__RMW(p, fsched__old_ - (v)))
#define FSCHED__FETCH_OR(p, v, mo) FSCHED__RMW(p, fsched__old_ | (v))
#define FSCHED__FETCH_AND(p, v, mo) FSCHED__RMW(p, fsched__old_ & (v))
#define FSCHED__EXCHANGE(p, v, mo)                                                     \
    (FSCHED__WORD(p) ? (__typeof__(*(p)))fsched__word_exchange((void *)(p), (uintptr_t)(v)) \
                     : FSCHED__RMW(p, (v)))
#define FSCHED__CAS(p, expected, desired, succ, fail)                                  \
    (FSCHED__WORD(p) ? fsched__word_cas((void *)(p), (void *)(expected), (uintptr_t)(desired)) \
                     : __extension__({                                                 \
                           fsched__irq_state fsched__m_ = fsched__irq_save();          \
                           int fsched__same_ = *(p) == *(expected);                    \
                           if (fsched__same_) *(p) = (desired);                        \
                           else *(expected) = *(p);                                    \
                           fsched__irq_restore(fsched__m_);                            \
                           fsched__same_;                                              \
                       }))
#define FSCHED__CAS_WEAK FSCHED__CAS
#define FSCHED__FENCE(mo) __asm__ __volatile__("" : : : "memory")
#endif

/* Accesses to words that threads share but interrupt handlers never touch (a slot's
   counts of its work, its statistics): atomic between threads; without threads the one
   thread's plain accesses suffice, at any width (nothing can interrupt them and look). */
#if FSCHED__THREADS
#define FSCHED__LOAD_THREADS FSCHED__LOAD
#define FSCHED__STORE_THREADS FSCHED__STORE
#else
#define FSCHED__LOAD_THREADS(p, mo) (*(p))
#define FSCHED__STORE_THREADS(p, v, mo) ((void)(*(p) = (v)))
#endif

#if !FSCHED__THREADS
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

/* ---- logging and fatal errors ---------------------------------------------------- */

static void fsched__default_log(fsched_log_level level, const char *message, void *user) {
    (void)user;
#if FSCHED__STDIO
    fprintf(stderr, "fibersched: %s: %s\n",
            level == FSCHED_LOG_ERROR ? "error" : level == FSCHED_LOG_WARNING ? "warning" : "info",
            message);
#else
    (void)level;
    (void)message;
#endif
}

/* Hands `message` as it is to the logger, or to the default one without a logger. */
static void fsched__say(const fsched_logger *logger, fsched_log_level level, const char *message) {
    if (logger && logger->func) logger->func(level, message, logger->user);
    else fsched__default_log(level, message, NULL);
}

static void fsched__logv(const fsched_logger *logger, fsched_log_level level, const char *fmt,
                         va_list ap) {
    char buf[256];
#if FSCHED__STDIO
    vsnprintf(buf, sizeof buf, fmt, ap);
#else
    size_t n = strlen(fmt);
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, fmt, n);
    buf[n] = 0;
    (void)ap;
#endif
    fsched__say(logger, level, buf);
}

FSCHED__UNUSED static void fsched__log(const fsched_logger *logger, fsched_log_level level,
                                       const char *fmt, ...)
#if defined(__GNUC__) && FSCHED__STDIO
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

/* fsched__log of "where: " followed by the message, the name set before the format so
   that it stays a plain string where nothing formats (FIBERSCHED_NO_STDIO) */
FSCHED__UNUSED static void fsched__log_in(const fsched_logger *logger, fsched_log_level level,
                                          const char *where, const char *fmt, ...)
#if defined(__GNUC__) && !defined(FIBERSCHED_NO_STDIO)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void fsched__log_in(const fsched_logger *logger, fsched_log_level level,
                           const char *where, const char *fmt, ...) {
    char with[256];
    size_t n = strlen(where), m = strlen(fmt);
    va_list ap;
    va_start(ap, fmt);
    if (n + 2 + m < sizeof with) {
        memcpy(with, where, n);
        memcpy(with + n, ": ", 2);
        memcpy(with + n + 2, fmt, m + 1);
        fmt = with;
    }
    fsched__logv(logger, level, fmt, ap);
    va_end(ap);
}

/* Misuse: returns `code` and, in debug builds, says why through the logger. A helper
   that acts for a public function names it, as that function's caller gave it
   (`what`); the public function itself says FSCHED__REFUSE, which names it by __func__:
   "fsched_event_set: NULL argument". */
#if FSCHED__DEBUG
#define FSCHED__MISUSE(logger, code, ...) (fsched__log((logger), FSCHED_LOG_ERROR, __VA_ARGS__), (code))
#define FSCHED__REFUSE(logger, code, ...)                                                   \
    (fsched__log_in((logger), FSCHED_LOG_ERROR, __func__, __VA_ARGS__), (code))
#else
/* release builds say nothing, but still use the arguments (no unused warnings) */
static inline void fsched__say_nothing(const char *fmt, ...) { (void)fmt; }
#define FSCHED__MISUSE(logger, code, ...) ((void)(logger), fsched__say_nothing(__VA_ARGS__), (code))
#define FSCHED__REFUSE(logger, code, ...) FSCHED__MISUSE(logger, code, __VA_ARGS__)
#endif

/* Ends the process: only for corrupted memory and impossible states. */
static void fsched__fatal(const char *message) {
#if FSCHED__STDIO
    fprintf(stderr, "fibersched: fatal: %s\n", message);
    fflush(stderr);
#else
    (void)message;
#endif
    abort();
}

/* ---- results and version --------------------------------------------------------- */

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
    case FSCHED_ERR_TASK_FAILED: return "a task failed";
    case FSCHED_ERR_STALLED: return "stalled";
    }
    return "unknown result";
}

#define FSCHED__STR2(x) #x
#define FSCHED__STR(x) FSCHED__STR2(x)
FIBERSCHED_API const char *fsched_version_string(void) {
    return FSCHED__STR(FIBERSCHED_VERSION_MAJOR) "." FSCHED__STR(FIBERSCHED_VERSION_MINOR) "."
        FSCHED__STR(FIBERSCHED_VERSION_PATCH);
}

/* ---- formatting without stdio, safe in a signal handler -------------------------- */

#define FSCHED__NUMBER_BYTES 21 /* a uint64_t in decimal, and the terminator */

/* v in base 10 or 16 (without "0x"), as a string at the end of buf (FSCHED__NUMBER_BYTES
   long): returns where it begins. Every number the library writes is written here. */
static const char *fsched__number(char *buf, uint64_t v, unsigned base) {
    char *p = buf + FSCHED__NUMBER_BYTES - 1;
    *p = 0;
    do {
        *--p = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    return p;
}

static char *fsched__sig_put(char *p, char *end, const char *s) {
    while (*s && p < end) *p++ = *s++;
    return p;
}
static char *fsched__sig_dec(char *p, char *end, uintptr_t v) {
    char digits[FSCHED__NUMBER_BYTES];
    return fsched__sig_put(p, end, fsched__number(digits, v, 10));
}
static char *fsched__sig_hex(char *p, char *end, uintptr_t v) {
    char digits[FSCHED__NUMBER_BYTES];
    p = fsched__sig_put(p, end, "0x");
    return fsched__sig_put(p, end, fsched__number(digits, v, 16));
}

/* The address of a function (C allows converting a function pointer to an integer). */
#define FSCHED__CODE(fn) ((uintptr_t)(fn))

/* dladdr, where the C library has it (glibc from 2.34, musl, the BSDs; a weak reference,
   so that a program without it still links, and says only the address). Declared here:
   glibc hides it without _GNU_SOURCE. */
#if defined(__ELF__) && defined(FSCHED__OS_POSIX)
typedef struct fsched__dl_info {
    const char *file;   /* the module holding the address ... */
    void *base;         /* ... loaded there */
    const char *symbol; /* the nearest symbol below it, if any ... */
    void *address;      /* ... at this address */
} fsched__dl_info;
extern int fsched__dladdr(const void *address, fsched__dl_info *info) __asm__("dladdr")
    __attribute__((weak));
#define FSCHED__HAVE_DLADDR 1
#endif

/* Names the function at `code` for a report: its symbol when the dynamic linker knows
   one starting there, else its address, with its module and offset (for addr2line -f)
   where known. Safe in a signal handler as far as dladdr is. */
static char *fsched__sig_put_code(char *p, char *end, uintptr_t code) {
#if defined(FSCHED__HAVE_DLADDR)
    fsched__dl_info info;
    memset(&info, 0, sizeof info);
    if (fsched__dladdr && fsched__dladdr((const void *)code, &info) && info.symbol &&
        (uintptr_t)info.address == code)
        return fsched__sig_put(p, end, info.symbol);
#endif
    p = fsched__sig_put(p, end, "at ");
    p = fsched__sig_hex(p, end, code);
#if defined(FSCHED__HAVE_DLADDR)
    if (info.file && info.base) {
        p = fsched__sig_put(p, end, " (");
        p = fsched__sig_put(p, end, info.file);
        p = fsched__sig_put(p, end, "+");
        p = fsched__sig_hex(p, end, code - (uintptr_t)info.base);
        p = fsched__sig_put(p, end, ")");
    }
#endif
    return p;
}

/* Lines built from pieces, for logs and traces. */
typedef struct fsched__line {
    char text[256];
    size_t n;
} fsched__line;

static void fsched__line_add(fsched__line *l, const char *s) {
    for (; *s && l->n + 1 < sizeof l->text; s++) l->text[l->n++] = *s;
    l->text[l->n] = 0;
}

static void fsched__line_num(fsched__line *l, uint64_t v) {
    char digits[FSCHED__NUMBER_BYTES];
    fsched__line_add(l, fsched__number(digits, v, 10));
}

/* ---- Valgrind: stacks, reports -------------------------------------------------- */

/* Tells Valgrind of a stack [lo, hi): returns the id that removes it again. Nothing
   without Valgrind. */
static unsigned fsched__valgrind_stack_add(const void *lo, const void *hi) {
    (void)lo; /* Valgrind's macros use nothing on an ABI it does not support */
    (void)hi;
#if FSCHED__VALGRIND
    return VALGRIND_STACK_REGISTER(lo, hi);
#else
    return 0;
#endif
}

static void fsched__valgrind_stack_remove(unsigned id) {
    (void)id; /* as above */
#if FSCHED__VALGRIND
    VALGRIND_STACK_DEREGISTER(id);
#endif
}

/* Turns Valgrind's error reports off (0), around an access it would report wrongly, and
   on again (1). Nothing without Valgrind. */
static void fsched__valgrind_reports(int on) {
#if FSCHED__VALGRIND
    if (on) VALGRIND_ENABLE_ERROR_REPORTING;
    else VALGRIND_DISABLE_ERROR_REPORTING;
#else
    (void)on;
#endif
}

/* ---- allocation ------------------------------------------------------------------ */

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

/* Every block is asked for aligned at least for a uint64_t: records hold 64-bit atomics,
   which a 32-bit ABI aligns beyond its pointers (ARM's ldrexd faults on an address that
   is 4 but not 8 aligned), and a user's allocator gives no more than it is asked for. */
#define FSCHED__ALIGN_MIN 8u

static size_t fsched__align_min(size_t align) {
    return align < FSCHED__ALIGN_MIN ? FSCHED__ALIGN_MIN : align;
}
static void *fsched__alloc(const fsched_allocator *a, size_t size, size_t align) {
    return a->alloc(size, fsched__align_min(align), a->user);
}
static void fsched__free(const fsched_allocator *a, void *ptr, size_t size, size_t align) {
    if (ptr) a->free(ptr, size, fsched__align_min(align), a->user);
}

static size_t fsched__round_up(size_t n, size_t align) {
    return (n + align - 1) & ~(align - 1);
}

/* ---- locks (a plain mutex: held for a few instructions, never across a switch) ---- */

#if !FSCHED__THREADS
/* One thread: a critical section masks interrupts. Sections nest (a lock taken under
   another), and only the outermost restores what it found, whatever order they end in. */
#if defined(FSCHED__INTERRUPTS)
static uint32_t fsched__critical_depth;
static fsched__irq_state fsched__critical_saved;
static void fsched__critical_enter(void) {
    fsched__irq_state saved = fsched__irq_save();
    if (fsched__critical_depth++ == 0) fsched__critical_saved = saved;
}
static void fsched__critical_exit(void) {
    if (--fsched__critical_depth == 0) fsched__irq_restore(fsched__critical_saved);
}
#else
static void fsched__critical_enter(void) {}
static void fsched__critical_exit(void) {}
#endif
typedef struct fsched__mutex { int unused; } fsched__mutex;
static void fsched__mutex_init(fsched__mutex *m) { (void)m; }
static void fsched__mutex_destroy(fsched__mutex *m) { (void)m; }
static void fsched__mutex_lock(fsched__mutex *m) { (void)m; fsched__critical_enter(); }
static void fsched__mutex_unlock(fsched__mutex *m) { (void)m; fsched__critical_exit(); }
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

/* ---- pages: stacks with a guard region ------------------------------------------- */

#if defined(FSCHED__OS_POSIX) || defined(FSCHED__OS_WINDOWS)
#define FSCHED__HAVE_PAGES 1
static size_t fsched__page_size(void) {
    /* relaxed: every thread computes the same value */
    static size_t cached;
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
#if defined(MAP_NORESERVE)
        flags |= MAP_NORESERVE; /* address space only: pages are committed when touched */
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

/* Guarded stacks the process may hold at once. On Linux each costs two of the memory
   mappings vm.max_map_count bounds (65530 by default), and once they run out everything
   that maps fails, the allocator too: an eighth of them is left to the rest of the
   program. Elsewhere, no bound. */
#if defined(__linux__)
static uint32_t fsched__guards_max(void) {
    /* relaxed: every thread computes the same value */
    static uint32_t cached;
    uint32_t n = FSCHED__LOAD(&cached, FSCHED__RELAXED);
    if (!n) {
        unsigned long maps = 65530; /* the kernel's default, when /proc cannot tell */
#if FSCHED__STDIO
        FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
        if (f) {
            if (fscanf(f, "%lu", &maps) != 1) maps = 65530;
            fclose(f);
        }
#endif
        maps = (maps - maps / 8) / 2;
        n = maps < UINT32_MAX ? (uint32_t)maps : UINT32_MAX;
        if (!n) n = 1;
        FSCHED__STORE(&cached, n, FSCHED__RELAXED);
    }
    return n;
}
#else
static uint32_t fsched__guards_max(void) { return UINT32_MAX; }
#endif

static uint32_t fsched__guards_live; /* guarded stacks mapped now */

/* Counts a guarded stack about to be mapped; 0 when the process holds as many as it
   may. Relaxed: a bound on a count, no order. */
static int fsched__guard_take(void) {
    if (FSCHED__FETCH_ADD(&fsched__guards_live, 1u, FSCHED__RELAXED) < fsched__guards_max())
        return 1;
    FSCHED__FETCH_SUB(&fsched__guards_live, 1u, FSCHED__RELAXED);
    return 0;
}

static void fsched__guard_give(void) {
    FSCHED__FETCH_SUB(&fsched__guards_live, 1u, FSCHED__RELAXED); /* relaxed: a count */
}

/* Gives the pages of [p, p + size), a part of a mapping, back to the system; the range
   stays mapped and reads, when next touched, as zeros or as it was. Nothing where the
   system offers no way (or strict ISO C hid it). */
#if defined(FSCHED__OS_WINDOWS)
static void fsched__pages_discard(void *p, size_t size) {
    (void)VirtualAlloc(p, size, MEM_RESET, PAGE_READWRITE);
}
#elif defined(MADV_FREE) && !defined(__linux__)
static void fsched__pages_discard(void *p, size_t size) { (void)madvise(p, size, MADV_FREE); }
#elif defined(MADV_DONTNEED)
static void fsched__pages_discard(void *p, size_t size) {
    (void)madvise(p, size, MADV_DONTNEED);
}
#else
static void fsched__pages_discard(void *p, size_t size) {
    (void)p;
    (void)size;
}
#endif

#endif /* pages */

/* ---- monotonic clock ------------------------------------------------------------- */

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

/* t + ns, or UINT64_MAX when that does not fit: every deadline is made here, so that a
   timeout near UINT64_MAX means "very late", never "already past". */
static inline uint64_t fsched__time_add(uint64_t t, uint64_t ns) {
    return ns > UINT64_MAX - t ? UINT64_MAX : t + ns;
}

/* `left` nanoseconds in whole milliseconds, rounded up (a sleep that ends before its
   deadline would spin), capped far out (the callers sleep again). */
FSCHED__UNUSED static int fsched__timeout_ms(uint64_t left) {
    return left >= 1000000000000ull ? 1000000 : (int)((left + 999999u) / 1000000u);
}

#if defined(FSCHED__OS_POSIX)
/* ns as a timespec, its seconds capped at what a 32-bit time_t holds: 68 years, further
   than any deadline of a monotonic clock; a sleep that long ends early, and its caller
   sleeps again. */
static struct timespec fsched__timespec(uint64_t ns) {
    struct timespec ts;
    uint64_t sec = ns / 1000000000u;
    ts.tv_sec = (time_t)(sec > 0x7fffffffu ? 0x7fffffffu : sec);
    ts.tv_nsec = (long)(ns % 1000000000u);
    return ts;
}
#endif

/* Sleeps the calling thread about ns nanoseconds: on Windows whole milliseconds, rounded
   up; without an OS it only spins once. May end early (a signal): callers loop. */
#if defined(FSCHED__OS_POSIX)
static void fsched__os_sleep(uint64_t ns) {
    struct timespec ts = fsched__timespec(ns);
    nanosleep(&ts, NULL);
}
#elif defined(FSCHED__OS_WINDOWS)
static void fsched__os_sleep(uint64_t ns) { Sleep((DWORD)fsched__timeout_ms(ns)); }
#else
static void fsched__os_sleep(uint64_t ns) {
    (void)ns;
    fsched__cpu_relax();
}
#endif

/* ---- threads --------------------------------------------------------------------- */

#if FSCHED__THREADS
#if defined(FSCHED__OS_WINDOWS)
typedef HANDLE fsched__os_thread;
typedef struct fsched__thread_start_args {
    void (*fn)(void *);
    void *arg;
} fsched__thread_start_args;
static DWORD WINAPI fsched__thread_trampoline(LPVOID p) {
    fsched__thread_start_args a = *(fsched__thread_start_args *)p;
    HeapFree(GetProcessHeap(), 0, p);
    a.fn(a.arg);
    return 0;
}
static fsched_result fsched__os_thread_start(fsched__os_thread *t, void (*fn)(void *), void *arg) {
    fsched__thread_start_args *a = (fsched__thread_start_args *)HeapAlloc(GetProcessHeap(), 0, sizeof *a);
    if (!a) return FSCHED_ERR_OUT_OF_MEMORY;
    a->fn = fn;
    a->arg = arg;
    *t = CreateThread(NULL, 0, fsched__thread_trampoline, a, 0, NULL);
    if (!*t) {
        HeapFree(GetProcessHeap(), 0, a);
        return FSCHED_ERR_SYSTEM;
    }
    return FSCHED_OK;
}
static void fsched__os_thread_join(fsched__os_thread t) {
    WaitForSingleObject(t, INFINITE);
    CloseHandle(t);
}
static void fsched__os_yield(void) { SwitchToThread(); }
#else
typedef pthread_t fsched__os_thread;
typedef struct fsched__thread_start_args {
    void (*fn)(void *);
    void *arg;
} fsched__thread_start_args;
static void *fsched__thread_trampoline(void *p) {
    fsched__thread_start_args a = *(fsched__thread_start_args *)p;
    free(p);
    a.fn(a.arg);
    return NULL;
}
static fsched_result fsched__os_thread_start(fsched__os_thread *t, void (*fn)(void *), void *arg) {
    fsched__thread_start_args *a = (fsched__thread_start_args *)malloc(sizeof *a);
    int rc;
    if (!a) return FSCHED_ERR_OUT_OF_MEMORY;
    a->fn = fn;
    a->arg = arg;
    rc = pthread_create(t, NULL, fsched__thread_trampoline, a);
    if (rc != 0) {
        free(a);
        return rc == EAGAIN ? FSCHED_ERR_OUT_OF_MEMORY : FSCHED_ERR_SYSTEM;
    }
    return FSCHED_OK;
}
static void fsched__os_thread_join(fsched__os_thread t) { pthread_join(t, NULL); }
static void fsched__os_yield(void) { sched_yield(); }
#endif
#else
static void fsched__os_yield(void) {} /* no other thread to give the processor to */
#endif /* threads */

/* ---- schedule fuzzing (FIBERSCHED_CHAOS) ----
   FSCHED__POINT(name) marks a step of a concurrency protocol: between a push and its wake,
   around a CAS that decides a race, before parking, in destroy's drain. Built with
   FIBERSCHED_CHAOS=1, every point perturbs the calling thread at random (it spins, gives
   its processor away or sleeps a few microseconds), so that rare interleavings become
   common. The perturbations follow a seed, taken from the environment variable
   FIBERSCHED_CHAOS_SEED or else from the clock, and printed once: each thread draws its
   own sequence from it; seed 0 turns them off. Tests may also install fsched__chaos_hook
   to stall a chosen thread at a chosen point. Without FIBERSCHED_CHAOS the points
   compile to nothing. */
#if FSCHED__CHAOS
typedef enum fsched__point {
    FSCHED__AT_PUBLISHED,    /* work is queued, not yet announced */
    FSCHED__AT_STEAL,        /* a thief is about to claim the oldest job */
    FSCHED__AT_TAKE_LAST,    /* the owner is about to race thieves for its last job */
    FSCHED__AT_SLEEPY,       /* a worker announced that it may sleep */
    FSCHED__AT_PARK,         /* counted as sleeping, about to park */
    FSCHED__AT_WOKEN,        /* back from parking */
    FSCHED__AT_NOTIFY,       /* about to set a worker's latch */
    FSCHED__AT_POSTED,       /* a fiber is in a worker's inbox, the worker not yet told */
    FSCHED__AT_RESUME,       /* a worker is about to resume a ready fiber */
    FSCHED__AT_WAKE,         /* a waker decided which waiter it ends */
    FSCHED__AT_UNLOCKED,     /* a waker let go of the wait list, its wakes not yet done */
    FSCHED__AT_WAITING,      /* a waiter is queued, about to suspend or block */
    FSCHED__AT_WOKEN_WAITER, /* a waiter's wait ended, before it returns */
    FSCHED__AT_JOIN,         /* a joiner or a join half is about to touch the latch */
    FSCHED__AT_HELP,         /* a wait group's wait examines a job it took to help */
    FSCHED__AT_HELD,         /* a call from outside holds a scheduler */
    FSCHED__AT_DRAIN,        /* fsched_destroy checks whether all work is done */
    FSCHED__AT_CLOSING,      /* fsched_destroy has begun, before it drains */
    FSCHED__AT_RUN_END,      /* a graph or pipeline run is ending */
    FSCHED__AT_OUTCOME,      /* fsched_graph_wait is about to read how a run ended */
    FSCHED__AT_CANCEL,       /* fsched_graph_cancel decided that a run is current */
    FSCHED__AT_BIND,         /* fsched_bind found the scheduler live and open */
    FSCHED__AT_COMPLETE,     /* fsched_node_complete decided who finishes the advance */
    FSCHED__AT_SLAB_MAPPED,  /* a thread made a slab mapping, not yet handed to the class */
    FSCHED__AT_POLL,         /* the poller's owner, its latch SLEEPING, is about to poll */
    FSCHED__AT_FD_CLOSE,     /* fsched_close_fd ended the waits on an fd it is about to close */
    FSCHED__AT_FD_CLOSED,    /* ... and closed it; waits that came meanwhile are held */
    FSCHED__AT_UNMARK,       /* a thief saw a frame stack offer nothing, about to unmark it */
    FSCHED__AT_DEFAULT,      /* a call from outside every scheduler looks for the default */
    FSCHED__AT_POLL_SET,     /* fsched_set_poll is about to say whether workers watch */
    FSCHED__AT_WAKE_DRAINED, /* the poller read its wake fd, not yet said so */
    FSCHED__AT_SHED,         /* a worker took movable fibers out of its lists, not yet
                                published */
    FSCHED__AT_ADOPT,        /* a slot runs the job of a fiber in transit, before adopting it */
    FSCHED__AT_FD_HARVESTED, /* the poller holds the record an event names, not yet answered */
    FSCHED__AT_COUNT
} fsched__point;
/* Called, when set, at every point before the random perturbation (tests stall here). */
static void (*fsched__chaos_hook)(fsched__point at);
#define FSCHED__POINT(name) fsched__chaos(FSCHED__AT_##name)
#else
#define FSCHED__POINT(name) ((void)0)
#endif

#if FSCHED__CHAOS
#define FSCHED__CHAOS_OFF UINT64_MAX /* the seed when FIBERSCHED_CHAOS_SEED is 0 */
static uint64_t fsched__chaos_seed;    /* 0 until first used */
static uint32_t fsched__chaos_threads; /* threads that drew a sequence */
static FSCHED__THREAD_LOCAL uint64_t fsched__chaos_state;

/* The seed: FIBERSCHED_CHAOS_SEED, or the clock; printed by whichever thread sets it. */
static uint64_t fsched__chaos_seed_get(void) {
    /* acquire: pairs with the CAS that set it */
    uint64_t seed = FSCHED__LOAD(&fsched__chaos_seed, FSCHED__ACQUIRE), expected = 0;
    const char *env;
    if (seed) return seed;
    env = getenv("FIBERSCHED_CHAOS_SEED");
    seed = env && *env ? strtoull(env, NULL, 0) : fsched__now_ns() | 1u;
    if (!seed) seed = FSCHED__CHAOS_OFF;
    if (FSCHED__CAS(&fsched__chaos_seed, &expected, seed, FSCHED__ACQ_REL, FSCHED__ACQUIRE)) {
#if FSCHED__STDIO
        if (seed != FSCHED__CHAOS_OFF)
            fprintf(stderr, "fibersched: schedule fuzzing with FIBERSCHED_CHAOS_SEED=%llu\n",
                    (unsigned long long)seed);
#endif
        return seed;
    }
    return expected;
}

static void fsched__chaos(fsched__point at) {
    /* acquire: pairs with the test's release store of the hook, and what it set up */
    void (*hook)(fsched__point) = FSCHED__LOAD(&fsched__chaos_hook, FSCHED__ACQUIRE);
    uint64_t x = fsched__chaos_state;
    uint32_t r, i;
    if (hook) hook(at);
    if (!x) { /* this thread's sequence: the seed and the order in which threads came
                 (relaxed: a ticket, only its uniqueness counts) */
        uint64_t seed = fsched__chaos_seed_get();
        if (seed == FSCHED__CHAOS_OFF) return;
        x = seed ^ (0x9e3779b97f4a7c15ull *
                    (FSCHED__FETCH_ADD(&fsched__chaos_threads, 1u, FSCHED__RELAXED) + 1u));
        if (!x) x = 1;
    }
    x ^= x << 13; /* xorshift64 */
    x ^= x >> 7;
    x ^= x << 17;
    fsched__chaos_state = x;
    r = (uint32_t)(x % 64u);
    if (r < 44) return; /* most steps run undisturbed */
    if (r < 54) {
        for (i = (uint32_t)((x >> 8) % 2048u); i > 0; i--) fsched__cpu_relax();
    } else if (r < 62) {
        fsched__os_yield();
    } else {
#if defined(FSCHED__OS_WINDOWS)
        Sleep(0);
#elif defined(FSCHED__OS_POSIX)
        fsched__os_sleep(1000u + (x >> 16) % 40000u); /* 1 to 41 microseconds */
#endif
    }
}
#endif

/* Waits a little longer at each call for another thread to finish something short (leave
   a critical section, end a call that holds a scheduler): spins first, then gives its
   processor away, then sleeps, so that a holder that was preempted gets to run again
   even on one CPU and under real-time priorities. Start *n at 0. */
static void fsched__backoff(uint32_t *n) {
#if FSCHED__THREADS
    uint32_t k = (*n)++;
    if (k < 16) {
        fsched__cpu_relax();
    } else if (k < 48) {
        fsched__os_yield();
    } else {
#if defined(FSCHED__OS_WINDOWS)
        Sleep(k < 64 ? 0 : 1);
#else
        fsched__os_sleep(k < 64 ? 20000u : 500000u); /* 20 us, later 0.5 ms */
#endif
    }
#else
    (void)n;
#endif
}

/* ---- spinlock: for critical sections of a few instructions, never held across a
   switch; a holder that was preempted gets the processor back through yields ---- */

static void fsched__spin_lock(uint32_t *lock) {
#if FSCHED__THREADS
    uint32_t spins = 0;
    for (;;) {
        uint32_t expected = 0;
        /* relaxed: a look that spins without writing the line; acquire: the protected
           data as the last holder left it */
        if (!FSCHED__LOAD(lock, FSCHED__RELAXED) &&
            FSCHED__CAS_WEAK(lock, &expected, 1u, FSCHED__ACQUIRE, FSCHED__RELAXED))
            return;
        if (++spins < 64) fsched__cpu_relax();
        else fsched__os_yield();
    }
#else
    (void)lock;
    fsched__critical_enter();
#endif
}

/* Unlocks, leaving `word` in the lock (0, or a poison that refuses later use). */
static void fsched__spin_unlock_to(uint32_t *lock, uint32_t word) {
    FSCHED__STORE(lock, word, FSCHED__RELEASE); /* release: pairs with the next lock */
#if !FSCHED__THREADS
    fsched__critical_exit();
#endif
}

static void fsched__spin_unlock(uint32_t *lock) { fsched__spin_unlock_to(lock, 0u); }

static uint32_t fsched__cpu_count(void) {
#if !FSCHED__THREADS
    return 1;
#elif defined(FSCHED__OS_WINDOWS)
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n ? (uint32_t)n : 1;
#else
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (uint32_t)n : 1;
#endif
}

/* ---- pinning a thread to one CPU (Linux, Windows) ----
   CPUs are numbered as the system does; numbers from FSCHED__CPU_LIMIT up are not used. */
#define FSCHED__CPU_LIMIT 1024u

#if FSCHED__THREADS && defined(__linux__)
#define FSCHED__HAVE_PINNING 1
#include <sys/syscall.h>
#define FSCHED__CPU_WORD_BITS (8u * (uint32_t)sizeof(unsigned long))
/* The CPUs the calling thread may run on, ascending, into cpus[FSCHED__CPU_LIMIT];
   returns how many (0: unknown). Raw system calls: cpu_set_t needs _GNU_SOURCE. */
static uint32_t fsched__cpus_allowed(uint32_t *cpus) {
    unsigned long mask[FSCHED__CPU_LIMIT / FSCHED__CPU_WORD_BITS];
    long bytes;
    uint32_t n = 0, c;
    memset(mask, 0, sizeof mask);
    bytes = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
    for (c = 0; bytes > 0 && c < (uint32_t)bytes * 8u && c < FSCHED__CPU_LIMIT; c++)
        if ((mask[c / FSCHED__CPU_WORD_BITS] >> (c % FSCHED__CPU_WORD_BITS)) & 1u) cpus[n++] = c;
    return n;
}
/* Pins the calling thread to `cpu` (below FSCHED__CPU_LIMIT); 0 on success. */
static int fsched__pin_self(uint32_t cpu) {
    unsigned long mask[FSCHED__CPU_LIMIT / FSCHED__CPU_WORD_BITS];
    memset(mask, 0, sizeof mask);
    mask[cpu / FSCHED__CPU_WORD_BITS] = 1ul << (cpu % FSCHED__CPU_WORD_BITS);
    return syscall(SYS_sched_setaffinity, 0, sizeof mask, mask) == 0 ? 0 : -1;
}
#elif FSCHED__THREADS && defined(FSCHED__OS_WINDOWS)
#define FSCHED__HAVE_PINNING 1
/* The process's CPUs (of its processor group) into cpus[FSCHED__CPU_LIMIT]. */
static uint32_t fsched__cpus_allowed(uint32_t *cpus) {
    DWORD_PTR process, system;
    uint32_t n = 0, c;
    if (!GetProcessAffinityMask(GetCurrentProcess(), &process, &system)) return 0;
    for (c = 0; c < 8u * (uint32_t)sizeof process; c++)
        if ((process >> c) & 1u) cpus[n++] = c;
    return n;
}
static int fsched__pin_self(uint32_t cpu) {
    return SetThreadAffinityMask(GetCurrentThread(), (DWORD_PTR)1 << cpu) ? 0 : -1;
}
#endif

/* ---- naming the calling thread, for top -H, gdb and perf ------------------------- */
#define FSCHED__THREAD_NAME_BYTES 16u /* Linux keeps 15 and the terminator */
#if FSCHED__THREADS && defined(__linux__)
#include <sys/syscall.h>
static void fsched__name_self(const char *name) {
    syscall(SYS_prctl, 15 /* PR_SET_NAME: <sys/prctl.h> is not everywhere */, name, 0, 0, 0);
}
#elif FSCHED__THREADS && defined(__APPLE__)
static void fsched__name_self(const char *name) { pthread_setname_np(name); }
#elif FSCHED__THREADS && defined(FSCHED__OS_WINDOWS)
/* SetThreadDescription is looked up: Windows before 10 and older SDKs lack it */
static void fsched__name_self(const char *name) {
    typedef HRESULT(WINAPI * describe_fn)(HANDLE, PCWSTR);
    FARPROC found = GetProcAddress(GetModuleHandleA("kernel32.dll"), "SetThreadDescription");
    WCHAR wide[FSCHED__THREAD_NAME_BYTES];
    size_t i;
    if (!found) return;
    for (i = 0; i + 1 < FSCHED__THREAD_NAME_BYTES && name[i]; i++) wide[i] = (WCHAR)name[i];
    wide[i] = 0;
    ((describe_fn)(void (*)(void))found)(GetCurrentThread(), wide);
}
#elif FSCHED__THREADS
static void fsched__name_self(const char *name) { (void)name; }
#endif

/* ---- parker: one thread sleeps until another wakes it or a deadline passes ----
   A permit, as in Rust's std: unpark stores NOTIFIED, park consumes it or sleeps. Linux
   uses the futex word itself; other systems a mutex and condition variable. Without
   threads nobody can unpark, so park only waits for its deadline. The sleeps beneath
   (a futex wait, a condition variable's) serve the threads that wait on a waiter too. */

#define FSCHED__PARK_EMPTY 0
#define FSCHED__PARK_NOTIFIED 1
#define FSCHED__PARK_PARKED 2

#if !FSCHED__THREADS
#define FSCHED__PARKER_NONE 1
#elif defined(__linux__) && !defined(FSCHED__PARKER_PTHREAD)
#define FSCHED__PARKER_FUTEX 1
#include <linux/futex.h>
#include <sys/syscall.h>
#elif defined(FSCHED__OS_WINDOWS)
#define FSCHED__PARKER_WIN32 1
#define FSCHED__PARKER_COND 1
#else
#define FSCHED__PARKER_PTHREAD_COND 1
#define FSCHED__PARKER_COND 1
#endif

typedef struct fsched__parker {
    uint32_t state;
#if defined(FSCHED__PARKER_PTHREAD_COND)
    int ready;
    pthread_mutex_t lock;
    pthread_cond_t cond;
#elif defined(FSCHED__PARKER_WIN32)
    SRWLOCK lock; /* zero is the initial state of both */
    CONDITION_VARIABLE cond;
#endif
} fsched__parker;

#if defined(FSCHED__PARKER_FUTEX)
/* Sleeps while *word == value, until the monotonic deadline (0: none); may return
   sooner (a signal, a spurious wake): callers loop. */
static void fsched__futex_wait(uint32_t *word, uint32_t value, uint64_t deadline) {
    struct timespec ts, *tsp = NULL;
    if (deadline) {
        ts = fsched__timespec(deadline);
        tsp = &ts;
    }
    /* absolute CLOCK_MONOTONIC deadline; returns at once unless *word is still value */
    syscall(SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, value, tsp, NULL,
            FUTEX_BITSET_MATCH_ANY);
}

/* Wakes one thread sleeping on word. The kernel does not read the word. */
static void fsched__futex_wake(uint32_t *word) {
    syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
}
#endif

#if defined(FSCHED__PARKER_PTHREAD_COND)
/* Prepares a parker that may sit in zeroed memory; idempotent per parker. */
static void fsched__parker_init(fsched__parker *p) {
    if (!p->ready) {
        pthread_condattr_t attr;
        pthread_mutex_init(&p->lock, NULL);
        pthread_condattr_init(&attr);
#if !defined(__APPLE__)
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
#endif
        pthread_cond_init(&p->cond, &attr);
        pthread_condattr_destroy(&attr);
        p->ready = 1;
    }
}

static void fsched__parker_destroy(fsched__parker *p) {
    if (p->ready) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->cond);
        p->ready = 0;
    }
}

static void fsched__parker_lock(fsched__parker *p) { pthread_mutex_lock(&p->lock); }
static void fsched__parker_unlock(fsched__parker *p) { pthread_mutex_unlock(&p->lock); }

/* Sleeps on p's condition variable, its lock held, until signalled or until the
   monotonic deadline (0: none; `now`: the time the caller read, for systems that wait
   for a span); may return sooner: callers loop. */
static void fsched__parker_sleep(fsched__parker *p, uint64_t deadline, uint64_t now) {
    struct timespec ts;
    if (!deadline) {
        pthread_cond_wait(&p->cond, &p->lock);
        return;
    }
#if defined(__APPLE__)
    ts = fsched__timespec(deadline - now);
    pthread_cond_timedwait_relative_np(&p->cond, &p->lock, &ts);
#else
    (void)now;
    ts = fsched__timespec(deadline);
    pthread_cond_timedwait(&p->cond, &p->lock, &ts);
#endif
}

/* Wakes one sleeper of p's condition variable, or all. */
static void fsched__parker_signal(fsched__parker *p, int all) {
    if (all) pthread_cond_broadcast(&p->cond);
    else pthread_cond_signal(&p->cond);
}
#elif defined(FSCHED__PARKER_WIN32)
static void fsched__parker_init(fsched__parker *p) { (void)p; }
static void fsched__parker_destroy(fsched__parker *p) { (void)p; }
static void fsched__parker_lock(fsched__parker *p) { AcquireSRWLockExclusive(&p->lock); }
static void fsched__parker_unlock(fsched__parker *p) { ReleaseSRWLockExclusive(&p->lock); }

static void fsched__parker_sleep(fsched__parker *p, uint64_t deadline, uint64_t now) {
    SleepConditionVariableSRW(&p->cond, &p->lock,
                              deadline ? (DWORD)fsched__timeout_ms(deadline - now) : INFINITE, 0);
}

static void fsched__parker_signal(fsched__parker *p, int all) {
    if (all) WakeAllConditionVariable(&p->cond);
    else WakeConditionVariable(&p->cond);
}
#else
static void fsched__parker_init(fsched__parker *p) { (void)p; }
static void fsched__parker_destroy(fsched__parker *p) { (void)p; }
#endif

/* Takes p's lock and lets go of it: whoever held it has left (a futex parker has none). */
#if defined(FSCHED__PARKER_COND)
static void fsched__parker_lock_pass(fsched__parker *p) {
    fsched__parker_lock(p);
    fsched__parker_unlock(p);
}
#else
static void fsched__parker_lock_pass(fsched__parker *p) { (void)p; }
#endif

/* fsched__park's sleep, its permit not there when it began: 1 once it took one, 0 at
   the monotonic deadline (0: none). */
#if defined(FSCHED__PARKER_FUTEX)
static int fsched__park_sleep(fsched__parker *p, uint64_t deadline) {
    uint32_t expected = FSCHED__PARK_EMPTY;
    /* acquire on failure: the permit that came meanwhile, as the exchange before */
    if (!FSCHED__CAS(&p->state, &expected, (uint32_t)FSCHED__PARK_PARKED, FSCHED__ACQUIRE,
                     FSCHED__ACQUIRE)) {
        /* notified between the exchange and here: taken by an exchange (acquire), which
           reads a second permit that came since too, where a store would drop it unread */
        FSCHED__EXCHANGE(&p->state, (uint32_t)FSCHED__PARK_EMPTY, FSCHED__ACQUIRE);
        return 1;
    }
    while (!deadline || fsched__now_ns() < deadline) {
        fsched__futex_wait(&p->state, (uint32_t)FSCHED__PARK_PARKED, deadline);
        expected = FSCHED__PARK_NOTIFIED;
        /* acquire: takes the permit, and what the unparker wrote before it */
        if (FSCHED__CAS(&p->state, &expected, (uint32_t)FSCHED__PARK_EMPTY, FSCHED__ACQUIRE,
                        FSCHED__ACQUIRE))
            return 1;
    }
    /* timed out: leave PARKED; a notification racing with us still counts (acquire, as
       above) */
    return FSCHED__EXCHANGE(&p->state, (uint32_t)FSCHED__PARK_EMPTY, FSCHED__ACQUIRE) ==
           FSCHED__PARK_NOTIFIED;
}
#elif defined(FSCHED__PARKER_COND)
static int fsched__park_sleep(fsched__parker *p, uint64_t deadline) {
    int notified = 0;
    fsched__parker_init(p);
    fsched__parker_lock(p);
    /* acquire: taking the permit takes what the unparker wrote before it; relaxed, the
       rest: PARKED and its reset tell nothing, and each turn ends in the take */
    for (;;) {
        uint32_t expected = FSCHED__PARK_NOTIFIED;
        uint64_t now = 0;
        if (FSCHED__CAS(&p->state, &expected, (uint32_t)FSCHED__PARK_EMPTY, FSCHED__ACQUIRE,
                        FSCHED__RELAXED)) {
            notified = 1;
            break;
        }
        if (deadline && (now = fsched__now_ns()) >= deadline) break;
        /* a CAS, not a store: an unpark that came first must not be overwritten */
        expected = FSCHED__PARK_EMPTY;
        if (!FSCHED__CAS(&p->state, &expected, (uint32_t)FSCHED__PARK_PARKED, FSCHED__RELAXED,
                         FSCHED__RELAXED))
            continue;
        fsched__parker_sleep(p, deadline, now);
        expected = FSCHED__PARK_PARKED;
        FSCHED__CAS(&p->state, &expected, (uint32_t)FSCHED__PARK_EMPTY, FSCHED__RELAXED,
                    FSCHED__RELAXED);
    }
    fsched__parker_unlock(p);
    return notified;
}
#else
static int fsched__park_sleep(fsched__parker *p, uint64_t deadline) {
    (void)p;
    (void)deadline;
    return 0;
}
#endif

/* Blocks until unparked (returns 1) or until timeout_ns nanoseconds of the system's
   monotonic clock have passed (returns 0; 0 means no timeout). The timeout is relative:
   a scheduler with a clock of its own converts its deadline (the two clocks need not
   share an origin). May return 1 spuriously only after an unpark: callers loop. Without
   threads nobody could unpark: not called there. */
FSCHED__UNUSED static int fsched__park(fsched__parker *p, uint64_t timeout_ns) {
    /* acquire: whatever the unparker wrote before its release store is visible */
    if (FSCHED__EXCHANGE(&p->state, (uint32_t)FSCHED__PARK_EMPTY, FSCHED__ACQUIRE) ==
        FSCHED__PARK_NOTIFIED)
        return 1;
    return fsched__park_sleep(p, timeout_ns ? fsched__time_add(fsched__now_ns(), timeout_ns) : 0);
}

/* Takes p's permit without sleeping: 1 if there was one. Seq_cst: see fsched__io_sleep. */
FSCHED__UNUSED static int fsched__park_take(fsched__parker *p) {
    return FSCHED__EXCHANGE(&p->state, (uint32_t)FSCHED__PARK_EMPTY, FSCHED__SEQ_CST) ==
           FSCHED__PARK_NOTIFIED;
}

/* Wakes p's thread, which sleeps or is about to. */
#if defined(FSCHED__PARKER_FUTEX)
static void fsched__park_wake(fsched__parker *p) { fsched__futex_wake(&p->state); }
#elif defined(FSCHED__PARKER_COND)
static void fsched__park_wake(fsched__parker *p) {
    /* the lock orders the wake after the sleeper's wait began */
    fsched__parker_lock_pass(p);
    fsched__parker_signal(p, 0);
}
#else
static void fsched__park_wake(fsched__parker *p) { (void)p; }
#endif

/* Gives p a permit, waking its thread if it sleeps. Any thread. */
static void fsched__unpark(fsched__parker *p) {
    /* seq_cst: pairs with the acquire in fsched__park, and with fsched__park_take */
    if (FSCHED__EXCHANGE(&p->state, (uint32_t)FSCHED__PARK_NOTIFIED, FSCHED__SEQ_CST) ==
        FSCHED__PARK_PARKED)
        fsched__park_wake(p);
}

/* ---- the registry of live objects ----
   Schedulers, graphs and pipelines are entered here while they live, so that a call on
   one that was destroyed is refused without reading its memory (which went back to its
   allocator), and so that a call racing fsched_destroy either finds the scheduler and
   holds it or finds it gone. A hash set of pointers (open addressing, linear probing)
   under a reader-writer lock; its table comes from FIBERSCHED_MALLOC and is freed when
   the last object leaves. Without an OS, a list through the objects. */

/* fsched__live_fork_child: in the child of a fork() whose parent held the lock for
   writing (it was taken before the fork, so that no other thread was inside), the lock
   of the child, whose only thread is not the one that took it, set free anew. */
#if !FSCHED__THREADS
static void fsched__live_read_lock(void) { fsched__critical_enter(); }
static void fsched__live_read_unlock(void) { fsched__critical_exit(); }
static void fsched__live_write_lock(void) { fsched__critical_enter(); }
static void fsched__live_write_unlock(void) { fsched__critical_exit(); }
FSCHED__UNUSED static void fsched__live_fork_child(void) { fsched__critical_exit(); }
#elif defined(FSCHED__OS_WINDOWS)
static SRWLOCK fsched__live_lock = SRWLOCK_INIT;
static void fsched__live_read_lock(void) { AcquireSRWLockShared(&fsched__live_lock); }
static void fsched__live_read_unlock(void) { ReleaseSRWLockShared(&fsched__live_lock); }
static void fsched__live_write_lock(void) { AcquireSRWLockExclusive(&fsched__live_lock); }
static void fsched__live_write_unlock(void) { ReleaseSRWLockExclusive(&fsched__live_lock); }
#else
#if !defined(PTHREAD_RWLOCK_INITIALIZER) /* hidden (see the includes): a mutex */
static pthread_mutex_t fsched__live_lock = PTHREAD_MUTEX_INITIALIZER;
static void fsched__live_read_lock(void) { pthread_mutex_lock(&fsched__live_lock); }
static void fsched__live_read_unlock(void) { pthread_mutex_unlock(&fsched__live_lock); }
static void fsched__live_write_lock(void) { pthread_mutex_lock(&fsched__live_lock); }
static void fsched__live_write_unlock(void) { pthread_mutex_unlock(&fsched__live_lock); }
static void fsched__live_fork_child(void) { pthread_mutex_init(&fsched__live_lock, NULL); }
#else
static pthread_rwlock_t fsched__live_lock = PTHREAD_RWLOCK_INITIALIZER;
static void fsched__live_read_lock(void) { pthread_rwlock_rdlock(&fsched__live_lock); }
static void fsched__live_read_unlock(void) { pthread_rwlock_unlock(&fsched__live_lock); }
static void fsched__live_write_lock(void) { pthread_rwlock_wrlock(&fsched__live_lock); }
static void fsched__live_write_unlock(void) { pthread_rwlock_unlock(&fsched__live_lock); }
/* (an rwlock records its writer: unlocked by another thread, it would take the reader's
   path) */
static void fsched__live_fork_child(void) { pthread_rwlock_init(&fsched__live_lock, NULL); }
#endif
#endif

/* atomic: objects removed so far, so that a thread may remember an object it found live
   and trust that while nothing was removed (see fsched__graph_check) */
static size_t fsched__live_removals;

/* Under the write lock: one object fewer. Relaxed: a later call on the object, ordered
   after this by its caller, sees the count changed (coherence); an unordered one was a
   use after free anyway. */
#define FSCHED__LIVE_REMOVED() \
    FSCHED__STORE(&fsched__live_removals, fsched__live_removals + 1, FSCHED__RELAXED)

#if defined(FSCHED__OS_NONE)
/* A microcontroller holds a few objects: a list through an entry in each, searched in full
   (a fraction of a hash set's code, and entering one asks for no memory). Debuggers walk
   it from fsched__live_list. */
typedef struct fsched__live_entry {
    struct fsched__live_entry *next;
    const void *object;
} fsched__live_entry;
static fsched__live_entry *fsched__live_list;

/* Under the lock (read or write): whether p is a live object. */
static int fsched__live_has(const void *p) {
    const fsched__live_entry *l = fsched__live_list;
    while (l && l->object != p) l = l->next;
    return l != NULL;
}

/* Enters p through its entry; never fails (1). */
static int fsched__live_add(const void *p, fsched__live_entry *entry) {
    fsched__live_write_lock();
    entry->object = p;
    entry->next = fsched__live_list;
    fsched__live_list = entry;
    fsched__live_write_unlock();
    return 1;
}
#define FSCHED__LIVE_ADD(object) fsched__live_add((object), &(object)->live_entry)

/* Under the write lock: removes p. */
static void fsched__live_remove_locked(const void *p) {
    fsched__live_entry **at = &fsched__live_list;
    while (*at && (*at)->object != p) at = &(*at)->next;
    if (!*at) return;
    *at = (*at)->next;
    FSCHED__LIVE_REMOVED();
}
#else
/* A hash set (open addressing, linear probing). */
static const void **fsched__live_slots; /* NULL: empty slot */
static size_t fsched__live_mask, fsched__live_count; /* the capacity - 1 (debuggers read
                                                         every slot to it), and the objects */

static size_t fsched__live_home(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return (size_t)(x ^ (x >> 32)) & fsched__live_mask;
}

/* Under the lock: the slot of p, or the empty slot where it would go. */
static size_t fsched__live_slot(const void *p) {
    size_t i = fsched__live_home(p);
    while (fsched__live_slots[i] && fsched__live_slots[i] != p) i = (i + 1) & fsched__live_mask;
    return i;
}

/* Under the write lock: room for one more object (a table twice the size, a power of
   two, where 64 are first); 0 for want of memory. */
static int fsched__live_room(void) {
    size_t cap = fsched__live_slots ? 2 * (fsched__live_mask + 1) : 64, i;
    const void **old = fsched__live_slots, **slots;
    size_t old_cap = old ? fsched__live_mask + 1 : 0;
    if (old && 2 * (fsched__live_count + 1) <= old_cap) return 1;
    slots = (const void **)FIBERSCHED_MALLOC(cap * sizeof *slots);
    if (!slots) return 0;
    memset(slots, 0, cap * sizeof *slots);
    fsched__live_slots = slots;
    fsched__live_mask = cap - 1;
    for (i = 0; i < old_cap; i++)
        if (old[i]) fsched__live_slots[fsched__live_slot(old[i])] = old[i];
    if (old) FIBERSCHED_FREE((void *)old);
    return 1;
}

/* Under the lock (read or write): whether p is a live object. */
static int fsched__live_has(const void *p) {
    return p && fsched__live_slots && fsched__live_slots[fsched__live_slot(p)] == p;
}

/* Enters p; 0 for want of memory. */
static int fsched__live_add(const void *p) {
    int ok;
    fsched__live_write_lock();
    ok = fsched__live_room();
    if (ok) {
        fsched__live_slots[fsched__live_slot(p)] = p;
        fsched__live_count++;
    }
    fsched__live_write_unlock();
    return ok;
}
#define FSCHED__LIVE_ADD(object) fsched__live_add(object)

/* Under the write lock: removes p, moving later entries of its probe run back; the
   table goes with the last object. */
static void fsched__live_remove_locked(const void *p) {
    size_t i = fsched__live_slot(p), j = i;
    if (fsched__live_slots[i] != p) return;
    fsched__live_slots[i] = NULL;
    for (;;) {
        size_t home;
        j = (j + 1) & fsched__live_mask;
        if (!fsched__live_slots[j]) break;
        home = fsched__live_home(fsched__live_slots[j]);
        /* the entry at j may move to the hole at i if its home is not in (i, j] */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            fsched__live_slots[i] = fsched__live_slots[j];
            fsched__live_slots[j] = NULL;
            i = j;
        }
    }
    FSCHED__LIVE_REMOVED();
    if (--fsched__live_count) return;
    FIBERSCHED_FREE((void *)fsched__live_slots);
    fsched__live_slots = NULL;
    fsched__live_mask = 0;
}
#endif

static void fsched__live_remove(const void *p) {
    fsched__live_write_lock();
    fsched__live_remove_locked(p);
    fsched__live_write_unlock();
}

/* Whether p is live now (for objects whose calls need no hold across the check). */
static int fsched__live_check(const void *p) {
    int live;
    fsched__live_read_lock();
    live = fsched__live_has(p);
    fsched__live_read_unlock();
    return live;
}

/* ===================================================================================== */
/*  fiber: stacks, contexts, switching, sanitizer and Valgrind hooks                     */
/* ===================================================================================== */

#define FSCHED__FIBER_LIVE 0x46534642u /* "FSFB" */
#define FSCHED__FIBER_DEAD 0xdeadfb0bu
#if FSCHED__MPU_GUARD
#define FSCHED__STACK_LEAD ((size_t)FSCHED__MPU_GUARD)    /* below a heap stack */
#define FSCHED__STACK_ALIGN ((size_t)FSCHED__MPU_GUARD)
#else
#define FSCHED__STACK_LEAD FSCHED__CANARY_BYTES
#define FSCHED__STACK_ALIGN ((size_t)FSCHED__CACHE_LINE)
#endif
#define FSCHED__CANARY_BYTE 0xa5
#define FSCHED__PAINT_BYTE 0x5a /* an unused heap stack's bytes */
#define FSCHED__NAME_BYTES 32

/* How many bytes of `name` a buffer of `room` bytes keeps with its terminator: a cut
   falls before a character that does not fit, never inside its UTF-8 sequence. */
static size_t fsched__name_fit(const char *name, size_t room) {
    size_t n = 0;
    if (!name || !room) return 0;
    while (n + 1 < room && name[n]) n++;
    if (name[n])
        while (n && ((unsigned char)name[n] & 0xc0) == 0x80) n--;
    return n;
}

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
    unsigned char *mem;   /* from here to `params`, what a pooled block keeps for its
                             next fiber (fsched__stack_recycle) */
    size_t mem_size;
    unsigned char *stack_lo; /* lowest usable stack byte */
    unsigned char *stack_hi; /* one past the highest usable stack byte */
    unsigned valgrind_id;    /* the stack as Valgrind knows it */
    void *tsan_fiber;        /* TSan's fiber, made by the block's first fiber: making one
                                costs a thread's worth of TSan's state (hundreds of
                                kilobytes zeroed, in GCC's runtime); the block's next fiber
                                starts after its last one ended, so reuse hides no race */
    fsched__stack_params params;
    fsched_stack_pool *pool;
    char name[FSCHED__NAME_BYTES];
    /* sanitizers: ASan's fake stack and this fiber's stack bounds */
    void *asan_fake_stack;
    const void *asan_bottom;
    size_t asan_size;
    const unsigned char *asan_sp; /* where it last left: frames below have returned */
    /* the scheduler's bookkeeping for fibers it runs */
    void *owner;            /* the worker whose loop the fiber belongs to */
    fsched_fiber *link;     /* ready queue, inbox or idle pool */
    uint32_t ready_taken;   /* taken from the ready queue for a switch not yet made */
    void *graph_task;       /* the graph task whose function runs on this fiber */
    uint32_t inline_depth;  /* jobs nested on it by waits without a fiber (out of memory) */
    struct fsched__nest *nest; /* the innermost of those jobs' callers (with threads) */
    fsched_frames *frames;  /* the innermost frame stack its task trees hold (spawn/sync) */
    /* a task that may resume on another worker after a wait (fsched_task_set_movable):
       owner only, but for a fiber in transit, which only its shedder, then its adopter,
       touch (the deque's publication orders them) */
    uint8_t movable_task;   /* the task it runs may move after a wait ... */
    uint8_t task_may_move;  /* ... which fsched_task_set_movable may change: a task the
                               loop itself runs (not nested by a wait), not leased */
    uint8_t move_ok;        /* woken from a wait that lets it move: its owner may shed it */
    uint8_t in_transit;     /* shed, not adopted yet */
    uint32_t pins;          /* library frames under the task that keep their worker: it
                               stays (fsched__pin) */
    struct fsched__waiter *move_waiter; /* the wait it was woken from, while move_ok;
                                           without threads, the wait it is in (deadlocks) */
    fsched__job move_job;   /* queued while in transit: whoever runs it adopts the fiber */
    uintptr_t task_code;     /* the user function it runs (of a task, a join half, a
                                frame, a loop, a graph task, a node, a stage) ... */
    const char *task_name;   /* ... and its name, if it has one: for overflow reports */
    /* for debuggers (tools/fibersched-gdb.py): what it waits on while suspended, its id
       and its place in its worker's list of fibers */
    const char *wait_what;   /* "event", "mutex", "join"...; NULL: not waiting */
    const void *wait_object; /* the event, mutex... waited on; NULL for a sleep */
    uint32_t id;             /* unique in its scheduler, from 1 */
    fsched_fiber *live_prev, *live_next;
#if FSCHED__TRACING
    uint32_t trace_id;      /* its track in the trace of the slot that runs it; 0: none yet */
#endif
};

#if FSCHED__THREADS
typedef fsched_fiber **fsched__pool_cache;
#else
typedef fsched_fiber *fsched__pool_cache;
#endif
struct fsched_stack_pool {
    fsched__mutex lock;
    fsched__stack_params params;
#if FSCHED__THREADS
    fsched__pool_cache cached; /* blocks whose fiber was destroyed: an array, so that
                                  taking and giving many touches none of them */
    size_t n_cached, cap_cached, max_cached;
#else
    fsched__pool_cache cached; /* the same, linked by their records' `link` (one thread
                                  gives and takes one at a time): no memory to manage */
    size_t n_cached, max_cached;
#endif
    size_t in_use, allocated;
    int destroyed;
};

/* Per-thread state. Read only through fsched__thread_get(): a fiber may resume on another
   thread, and compilers cache thread-local addresses across calls inside one function. */
struct fsched__worker;
typedef struct fsched__thread {
    fsched_fiber *current;
    fsched_fiber root;
    struct fsched__worker *worker; /* the scheduler slot this thread occupies, if any */
    uint32_t slab_run;             /* 1 + which run of fresh slab slots it takes; 0: none yet */
    fsched__parker parker;         /* for waits of a thread outside any scheduler */
    const struct fsched_sched *in_hook; /* the scheduler whose poll hook this thread runs */
    const struct fsched_sched *in_worker_hook; /* the scheduler whose worker_start or
                                                  worker_stop this thread runs */
    void *altstack; /* alternate signal stack for the overflow handler */
    const void *live_seen;     /* the object this thread last found live ... */
    size_t live_seen_removals; /* ... when the registry had seen this many removals */
#if !defined(FSCHED__CTX_ASM)
    void *pass;        /* value carried across a ucontext / Windows fiber switch */
    void **publish_to; /* where the arriving side marks the context it left as saved */
#endif
} fsched__thread;

#if defined(FSCHED__INTERRUPTS)
/* The program's one thread, and interrupt handlers: they call as from outside any
   scheduler (they never touch a slot's deque, fibers or free lists, and never wait). */
static fsched__thread fsched__threads[2];
/* Out of line: read in many places, and a call is shorter than the look it makes. */
static FSCHED__NOINLINE fsched__thread *fsched__thread_here(void) {
    return &fsched__threads[fsched__in_interrupt()];
}
#define fsched__tls_thread (*fsched__thread_here())
#else
static FSCHED__THREAD_LOCAL fsched__thread fsched__tls_thread;
#endif

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

/* The calling thread's state as it stands (not set up, unlike fsched__thread_get), for
   code that a task may run, inlined into its own function, after a wait: a movable task
   may resume on another thread. Where the thread pointer is a register (AArch64,
   ppc64le, riscv64), compilers read it once per function and keep it across calls, the
   wait included: FSCHED__THREAD_NOW then reads it anew, through a call. On x86 with ELF
   each access to a thread-local goes through the segment register, which the thread's
   own value fills: the member is read inline. (In a shared library's code the address
   comes from a call that compilers may merge, and a sanitizer's instrumentation takes
   every address: there too, through the call.) */
#if FSCHED__THREADS && (!(defined(__x86_64__) || defined(__i386__)) || !defined(__ELF__) || \
                        (defined(__PIC__) && !defined(__PIE__)) || defined(FSCHED__INSTRUMENTED))
static FSCHED__NOINLINE fsched__thread *fsched__thread_now(void) {
    fsched__thread *t = &fsched__tls_thread;
    __asm__ __volatile__("" : "+r"(t)); /* not a constant function: never merged */
    return t;
}
#define FSCHED__THREAD_NOW (*fsched__thread_now())
#else
#define FSCHED__THREAD_NOW fsched__tls_thread
#endif

/* ---- contexts per backend -------------------------------------------------------- */

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

/* ---- stack memory ---------------------------------------------------------------- */

static int fsched__canary_intact(const fsched_fiber *f) {
    const unsigned char *p = f->stack_lo - FSCHED__CANARY_BYTES;
    const uint64_t pattern = UINT64_C(0x0101010101010101) * FSCHED__CANARY_BYTE;
    uint64_t word, diff = 0;
    size_t i;
    for (i = 0; i < FSCHED__CANARY_BYTES; i += sizeof word) { /* a word at a time */
        memcpy(&word, p + i, sizeof word);
        diff |= word ^ pattern;
    }
    return diff == 0;
}

/* Stacks with a canary below them (the others have a guard region, or none at all: a
   thread's own stack). */
static int fsched__has_canary(const fsched_fiber *f) {
    return f->params.kind != FSCHED_STACK_PAGES && f->stack_lo != f->stack_hi;
}

/* What a fiber runs: each kind of job says so around the user's code and restores what
   was there after it (a job may run nested while another waits on the same fiber), so
   that an overflow report and gdb name the task, or its function. */
typedef struct fsched__running {
    uintptr_t code;
    const char *name;
    uint8_t may_move;
} fsched__running;

/* Whatever runs on f meanwhile (a join half, a chunk of a parallel loop, a graph task, a
   node, a stage, or a task nested by a wait) is not the task that runs f: it may not
   change whether that task moves (fsched_task_set_movable), as it may not where it runs
   on a fiber of its own. A task the loop runs says otherwise itself. */
static inline fsched__running fsched__running_begin(fsched_fiber *f, uintptr_t code,
                                                    const char *name) {
    fsched__running outer;
    outer.code = f->task_code;
    outer.name = f->task_name;
    outer.may_move = f->task_may_move;
    f->task_code = code;
    f->task_name = name;
    f->task_may_move = 0;
    return outer;
}

static inline void fsched__running_end(fsched_fiber *f, fsched__running outer) {
    f->task_code = outer.code;
    f->task_name = outer.name;
    f->task_may_move = outer.may_move;
}

/* A movable task may resume on another thread after a wait, unless a frame of the library
   that keeps its worker (a join, a parallel loop, a graph or pipeline run) lies under the
   wait: such a frame pins the fiber while it is there, whether or not its task is movable
   yet (a task may opt in under it, in a join's first half). Returns the fiber it pinned,
   or NULL (nothing to undo). Pins are the fiber's own: only the thread running it
   counts. */
static inline fsched_fiber *fsched__pin(void) {
    fsched_fiber *f = FSCHED__THREAD_NOW.current;
    if (!FSCHED__THREADS || !f) return NULL;
    f->pins++;
    return f;
}

static inline void fsched__unpin(fsched_fiber *f) {
    if (f) f->pins--;
}

/* The start of an overflow report: the fiber, its stack size and what it runs (by name,
   else by function). Safe in a signal handler. */
static char *fsched__sig_put_overflow(char *p, char *end, const fsched_fiber *f) {
    p = fsched__sig_put(p, end, "stack overflow in fiber '");
    p = fsched__sig_put(p, end, f->name);
    p = fsched__sig_put(p, end, "'");
    if (FSCHED__DEBUG || FSCHED__STDIO) {
        p = fsched__sig_put(p, end, " (a stack of ");
        p = fsched__sig_dec(p, end, (uintptr_t)f->params.stack_size);
        p = fsched__sig_put(p, end, " bytes)");
    }
    if (f->task_name) {
        p = fsched__sig_put(p, end, " running task '");
        p = fsched__sig_put(p, end, f->task_name);
        p = fsched__sig_put(p, end, "'");
    } else if (f->task_code && (FSCHED__DEBUG || FSCHED__STDIO)) {
        p = fsched__sig_put(p, end, " running the task whose function is ");
        p = fsched__sig_put_code(p, end, f->task_code);
    }
    return p;
}

/* Says which fiber overflowed its stack, and what it ran, through the logger of its
   stack (the text as it is: nothing to format), then stops the program: what lies below
   the stack is corrupt. */
static FSCHED__NOINLINE void fsched__stack_report(const fsched_fiber *f, const char *how) {
    char msg[384], *end = msg + sizeof msg - 1, *p = fsched__sig_put_overflow(msg, end, f);
    p = fsched__sig_put(p, end, ": ");
    p = fsched__sig_put(p, end, how);
    *p = 0;
    fsched__say(&f->params.logger, FSCHED_LOG_ERROR, msg);
    fsched__fatal("stack overflow (reported before)");
}

static void fsched__stack_report_away(const fsched_fiber *f, const char *how);

/* Reports f's overflow from a stack of its own where there is one (the overflowed stack
   may have no room left for the logger's frames: below a small one lie other stacks, or
   the end of its mapping), else here. */
static FSCHED__NOINLINE void fsched__stack_overflowed(const fsched_fiber *f, const char *how) {
    fsched__stack_report_away(f, how);
    fsched__stack_report(f, how);
}

/* Stops the program when f overflowed its heap stack: its canary changed, or `sp` (a
   frame address of f's own code, or NULL) is outside the stack. An overflow that skips
   the canary (a frame larger than it, not written where it lies) goes unseen: size the
   canary after the largest frame. Page stacks fault in their guard instead. */
static void fsched__stack_check(const fsched_fiber *f, const void *sp) {
    if (!fsched__has_canary(f)) return;
    if (!fsched__canary_intact(f))
        fsched__stack_overflowed(f, "the canary below its stack was overwritten");
    /* sp may be a frame's canonical frame address (RISC-V's frame pointer), which is the
       top of the stack itself in a fiber's first frame */
    if (sp && ((const unsigned char *)sp < f->stack_lo || (const unsigned char *)sp > f->stack_hi))
        fsched__stack_overflowed(f, "its stack pointer left its stack");
}

/* Whether f's stack is checked at every switch away from it and when each task on it
   ends: in debug builds, and in every build for small stacks, which have nothing else. */
#if defined(FSCHED__HAVE_PAGES)
#define FSCHED__STACK_WATCHED(f) (FSCHED__DEBUG || (f)->params.kind == FSCHED_STACK_SMALL)
#else /* no small stacks without pages */
#define FSCHED__STACK_WATCHED(f) FSCHED__DEBUG
#endif

/* At a switch away from f, on f's stack: the check with this frame's address (not a
   sanitizer's fake stack). Out of line, so that a switch sets up no frame for it. */
static FSCHED__NOINLINE void fsched__stack_check_here(const fsched_fiber *f) {
    fsched__stack_check(f, f->is_root ? NULL : __builtin_frame_address(0));
}

#if FSCHED__MPU_GUARD
#define FSCHED__MPU_CTRL (*(volatile uint32_t *)0xE000ED94u)
#define FSCHED__MPU_RNR (*(volatile uint32_t *)0xE000ED98u)
#define FSCHED__MPU_RBAR (*(volatile uint32_t *)0xE000ED9Cu)
#define FSCHED__MPU_RASR (*(volatile uint32_t *)0xE000EDA0u)
/* Points the guard region at the guard below `to`'s heap stack, or turns it off for a
   stack without one, before the switch to `to`. The guard is read-only (the canary in it
   is still checked) and never executed; the MPU is turned on, with the default memory map
   for privileged code everywhere else, if it is off. */
static void fsched__mpu_guard_arm(const fsched_fiber *to) {
    fsched__irq_state m = fsched__irq_save(); /* a handler may interrupt: RNR is shared */
    FSCHED__MPU_RNR = FSCHED__MPU_GUARD_REGION;
    if (to->params.kind == FSCHED_STACK_HEAP && to->stack_lo != to->stack_hi &&
        (uintptr_t)to->mem % FSCHED__MPU_GUARD == 0) {
        FSCHED__MPU_RBAR = (uint32_t)(uintptr_t)to->mem;
        /* enabled; 2^(SIZE+1) bytes; normal memory (C, B); AP 110: read-only; XN */
        FSCHED__MPU_RASR = 1u | ((uint32_t)(__builtin_ctz(FSCHED__MPU_GUARD) - 1) << 1) |
                           (3u << 16) | (6u << 24) | (1u << 28);
        if (!(FSCHED__MPU_CTRL & 1u)) FSCHED__MPU_CTRL = 5u; /* ENABLE, PRIVDEFENA */
    } else {
        FSCHED__MPU_RASR = 0u;
    }
    __asm__ __volatile__("dsb\n\tisb" : : : "memory"); /* in force before `to` runs */
    fsched__irq_restore(m);
}
#endif

#define FSCHED__FIBER_RECORD_BYTES \
    ((sizeof(struct fsched_fiber) + FSCHED__CACHE_LINE - 1) & ~(size_t)(FSCHED__CACHE_LINE - 1))

#if defined(FSCHED__HAVE_PAGES)
/* ---- slabs: stacks carved from mappings shared by many of them ----
   A slot is [stack][fiber record][canary of the slot above], a whole number of pages:
   a stack's canary lies in the top page of the slot below it, which that slot's own
   record keeps resident (slots are handed out from the bottom up), so writing and
   checking it touch no new page (a canary at the bottom of its own slot would cost a
   page fault per stack). The lowest slot's canary is in a page that leads the mapping.
   Slots of one size come from one class: its free slots, then a run of fresh slots
   that the taking thread shares with few others, then a new run from the rest of the
   newest mapping, then a new mapping of FSCHED__SLAB_SLOTS slots. Runs keep threads
   that start fibers together off each other's pages: two threads writing one fresh
   page (a record, and the canary of the slot above) both take its page fault. A
   mapping is one range of memory (no guard splits it), reserved as address space: a
   stack costs only the pages its fiber touches. A freed slot joins the free list
   through its record's place; mappings are kept for the process's life.
   Small stacks (FSCHED_STACK_SMALL) take slots of their own classes, the small unit (a
   page, where one holds the smallest small stack with its record) or a power of two
   fraction of it, so that several share a page and none crosses one: a slot is
   [canary][stack][fiber record], and a fiber touches the one page it lies in. Their
   mappings hold FSCHED__SLAB_SLOTS units. */
#define FSCHED__SLAB_SLOTS 64u  /* slots per mapping (units, for small slots) */
#define FSCHED__SLAB_RUN 16u    /* fresh slots a run takes from the mapping */
#define FSCHED__SLAB_RUNS 4u    /* runs per class; threads share them round-robin */
#define FSCHED__SLAB_CLASSES 8u

/* The largest slot of small stacks: a page, or as many as hold the smallest small stack
   with its fiber's record and canary (a record with a ucontext_t can fill a page alone:
   aarch64's holds 4 KiB of vector state). */
static size_t fsched__small_unit(void) {
    return fsched__round_up(FIBERSCHED_MIN_SMALL_STACK_SIZE + FSCHED__FIBER_RECORD_BYTES +
                                FSCHED__CANARY_BYTES,
                            fsched__page_size());
}

typedef struct fsched__slab_span {
    unsigned char *next, *end; /* fresh slots, bottom up */
} fsched__slab_span;

typedef struct fsched__slab_class {
    size_t slot;                /* bytes per slot; 0: class unused */
    int small;                  /* slots of small stacks (their canary is their own) */
    fsched__slab_span rest;     /* the unused rest of the newest mapping */
    fsched__slab_span runs[FSCHED__SLAB_RUNS];
    void *free;                 /* freed slots, linked through fsched__slab_link */
} fsched__slab_class;

static fsched__slab_class fsched__slabs[FSCHED__SLAB_CLASSES];
static uint32_t fsched__slabs_lock;
static uint32_t fsched__slab_threads; /* threads that took a slot: deals out the runs */

/* The link of a free slot: a word in its record's place (the last one below the canary of
   the slot above, which stays intact; in a small slot, which ends in the record, a word
   of the record's), so that both canaries stay intact. */
static void **fsched__slab_link(void *slot, size_t size) {
    return (void **)((unsigned char *)slot + size - FSCHED__CANARY_BYTES - sizeof(void *));
}

/* A slot from class c, under the lock: a free one, else a fresh one from the run of
   this thread, refilled from the rest of the newest mapping; NULL if neither has one. */
static unsigned char *fsched__slab_pick(fsched__slab_class *c, fsched__slab_span *run) {
    unsigned char *slot;
    if (c->free) {
        slot = (unsigned char *)c->free;
        c->free = *fsched__slab_link(slot, c->slot);
        return slot;
    }
    if (run->next == run->end && c->rest.next != c->rest.end) {
        size_t left = (size_t)(c->rest.end - c->rest.next) / c->slot;
        run->next = c->rest.next;
        run->end = run->next + c->slot * (left < FSCHED__SLAB_RUN ? left : FSCHED__SLAB_RUN);
        c->rest.next = run->end;
    }
    if (run->next == run->end) return NULL;
    slot = run->next;
    run->next += c->slot;
    return slot;
}

/* The class of slots of `size` bytes and kind `small`, made on first use; NULL when all
   are taken by other sizes. Under the lock. */
static fsched__slab_class *fsched__slab_class_of(size_t size, int small) {
    uint32_t i;
    for (i = 0; i < FSCHED__SLAB_CLASSES; i++) {
        fsched__slab_class *c = &fsched__slabs[i];
        if (!c->slot) {
            c->slot = size;
            c->small = small;
        }
        if (c->slot == size && c->small == small) return c;
    }
    return NULL;
}

/* A slot of `size` bytes (a multiple of the page size; for small stacks, the small unit
   or a fraction of it), or NULL: out of memory, or more distinct sizes than classes. */
static void *fsched__slab_take(size_t size, int small) {
    fsched__thread *t = fsched__thread_get();
    fsched__slab_class *c;
    fsched__slab_span *run = NULL;
    unsigned char *slot = NULL, *map = NULL;
    size_t lead = fsched__page_size(),
           bytes = lead + (small ? fsched__small_unit() : size) * FSCHED__SLAB_SLOTS;
    int flags;
    if (!t->slab_run) /* relaxed: only a spread of threads over runs, any order does */
        t->slab_run = 1u + FSCHED__FETCH_ADD(&fsched__slab_threads, 1u, FSCHED__RELAXED);
    fsched__spin_lock(&fsched__slabs_lock);
    c = fsched__slab_class_of(size, small);
    if (c) {
        run = &c->runs[t->slab_run % FSCHED__SLAB_RUNS];
        slot = fsched__slab_pick(c, run);
    }
    fsched__spin_unlock(&fsched__slabs_lock);
    if (slot || !c) return slot;
    /* a new mapping, made outside the lock; if another thread made one meanwhile, ours
       goes back (its pages were never touched) and the slot comes from theirs */
#if defined(FSCHED__OS_WINDOWS)
    map = (unsigned char *)VirtualAlloc(NULL, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
    if (!map) return NULL;
#else
    flags = MAP_PRIVATE | MAP_ANONYMOUS;
#if defined(MAP_NORESERVE)
    flags |= MAP_NORESERVE;
#endif
    map = (unsigned char *)mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    if ((void *)map == MAP_FAILED) return NULL;
#endif
    (void)flags;
    FSCHED__POINT(SLAB_MAPPED);
    fsched__spin_lock(&fsched__slabs_lock);
    slot = fsched__slab_pick(c, run);
    if (!slot) {
        c->rest.next = map + lead;
        c->rest.end = map + bytes;
        slot = fsched__slab_pick(c, run);
        map = NULL;
    }
    fsched__spin_unlock(&fsched__slabs_lock);
    if (map) {
#if defined(FSCHED__OS_WINDOWS)
        VirtualFree(map, 0, MEM_RELEASE);
#else
        munmap(map, bytes);
#endif
    }
    return slot;
}

/* Returns a slot taken with fsched__slab_take. Its pages stay, for the next stack of
   the class (as freed heap memory does): giving them back would cost a system call per
   stack. */
static void fsched__slab_give(void *slot, size_t size, int small) {
    fsched__slab_class *c;
    fsched__spin_lock(&fsched__slabs_lock);
    c = fsched__slab_class_of(size, small); /* the slot's: it exists */
    *fsched__slab_link(slot, size) = c->free;
    c->free = slot;
    fsched__spin_unlock(&fsched__slabs_lock);
}
#endif

/* The largest small stack: the largest slot with the fiber's record and the canary
   (without pages, no bound: the kind is refused). */
static size_t fsched__small_stack_max(void) {
#if defined(FSCHED__HAVE_PAGES)
    return (fsched__small_unit() - FSCHED__FIBER_RECORD_BYTES - FSCHED__CANARY_BYTES) &
           ~(size_t)15;
#else
    return SIZE_MAX / 4;
#endif
}

/* Binds now the system's functions that the scheduler calls on a task's stack, or on a
   loop fiber's (which has the tasks' kind of stack): slab mappings, wakes, the clock,
   locks, copies (a timer heap that grows), the poller (made at the first fd wait) and
   its polls, so that a program linked for lazy binding does not bind them there: the
   dynamic linker saves the vector registers on the caller's stack, up to 3 KiB on x86-64
   with AVX-512, more than a small stack holds. Each call does nothing, or fails. */
static void fsched__bind_system_now(void) {
#if defined(FSCHED__HAVE_PAGES) && defined(FSCHED__OS_POSIX)
    static uint32_t done;
    struct timespec ts;
    char buf[16] = {0};
    volatile size_t none = 0; /* copies of a size the compiler cannot see: calls */
    const char *volatile text = "";
    fsched__mutex m;
    int saved;
    /* relaxed: the calls are harmless twice; the flag only spares repeating them */
    if (FSCHED__EXCHANGE(&done, 1u, FSCHED__RELAXED)) return;
    saved = errno; /* the caller's, which the failing calls below overwrite */
    (void)munmap(NULL, 0);                                               /* EINVAL */
    (void)mmap(NULL, 0, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0); /* EINVAL */
    fsched__pages_discard(buf, 0);
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    fsched__os_yield();
    fsched__os_sleep(0);
#if defined(FSCHED__PARKER_FUTEX)
    fsched__futex_wake(&done); /* nobody sleeps on it */
#endif
    memcpy(buf, buf + 8, none);
    memmove(buf, buf + 1, none);
    memset(buf, 0, none);
    fsched__mutex_init(&m);
    fsched__mutex_lock(&m);
    fsched__mutex_unlock(&m);
    fsched__mutex_destroy(&m);
#if defined(PTHREAD_RWLOCK_INITIALIZER)
    {
        pthread_rwlock_t l = PTHREAD_RWLOCK_INITIALIZER;
        (void)pthread_rwlock_rdlock(&l);
        (void)pthread_rwlock_unlock(&l);
        (void)pthread_rwlock_wrlock(&l);
        (void)pthread_rwlock_unlock(&l);
    }
#endif
#if defined(FSCHED__IO)
    (void)read(-1, buf, 0);  /* EBADF */
    (void)write(-1, buf, 0); /* EBADF */
    (void)close(-1);         /* EBADF */
    (void)fcntl(-1, F_GETFD); /* EBADF */
    (void)poll(NULL, 0, 0);
    (void)pthread_atfork(NULL, NULL, NULL);
#if defined(FSCHED__IO_EPOLL)
    {
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        (void)epoll_create1(-1);                        /* EINVAL */
        (void)eventfd(0, -1);                           /* EINVAL */
        (void)epoll_ctl(-1, EPOLL_CTL_ADD, -1, &ev);    /* EBADF */
        (void)epoll_wait(-1, &ev, 1, 0);                /* EBADF */
    }
#endif
#endif
    errno = saved + (int)strlen(text);
#endif
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
    if ((unsigned)kind > (unsigned)FSCHED_STACK_SMALL)
        return FSCHED__MISUSE(&out->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "unknown stack kind %d", (int)kind);
#if !defined(FSCHED__HAVE_PAGES)
    /* before the sizes: a small stack's have no bound here, and none would make it work */
    if (kind == FSCHED_STACK_PAGES || kind == FSCHED_STACK_SLAB || kind == FSCHED_STACK_SMALL)
        return FSCHED__MISUSE(&out->logger, FSCHED_ERR_UNSUPPORTED,
                              "page-allocated stacks need an operating system");
#endif
    if (kind == FSCHED_STACK_SMALL) {
        out->stack_size = stack_size ? stack_size : FIBERSCHED_MIN_SMALL_STACK_SIZE;
        if (out->stack_size < FIBERSCHED_MIN_SMALL_STACK_SIZE ||
            out->stack_size > fsched__small_stack_max())
            return FSCHED__MISUSE(&out->logger, FSCHED_ERR_INVALID_ARGUMENT,
                                  "small stack size %lu is outside %lu to %lu bytes (a page "
                                  "with the fiber's record)",
                                  (unsigned long)out->stack_size,
                                  (unsigned long)FIBERSCHED_MIN_SMALL_STACK_SIZE,
                                  (unsigned long)fsched__small_stack_max());
        fsched__bind_system_now();
    } else if (out->stack_size < FIBERSCHED_MIN_STACK_SIZE) {
        return FSCHED__MISUSE(&out->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "stack size %lu is below the minimum of %lu bytes",
                              (unsigned long)out->stack_size,
                              (unsigned long)FIBERSCHED_MIN_STACK_SIZE);
    }
    if (out->stack_size > SIZE_MAX / 4 || out->guard_size > SIZE_MAX / 4)
        return FSCHED__MISUSE(&out->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "stack size %lu or guard size %lu is out of range",
                              (unsigned long)out->stack_size, (unsigned long)out->guard_size);
#if defined(FSCHED__CTX_WINFIBER)
    kind = FSCHED_STACK_HEAP; /* Windows allocates the stack; we hold only the record */
#endif
#if defined(FSCHED__HAVE_PAGES)
    out->kind = kind == FSCHED_STACK_DEFAULT ? FSCHED_STACK_PAGES : kind;
    if (out->kind == FSCHED_STACK_PAGES) {
        out->guard_size = fsched__round_up(out->guard_size, fsched__page_size());
        (void)fsched__guards_max(); /* read here, on the stack of whoever asks for stacks,
                                       not on a small fiber's that needs one */
    }
#else
    out->kind = FSCHED_STACK_HEAP;
#endif
    if (out->kind != FSCHED_STACK_PAGES) out->guard_size = 0;
    return FSCHED_OK;
}

#if defined(FSCHED__HAVE_PAGES)
/* A slab slot for a stack of `usable` bytes, f's record below the canary at its top:
   the stack takes the rest of the slot's last page. */
static fsched_fiber *fsched__stack_from_slab(size_t usable, size_t *size) {
    unsigned char *mem;
    fsched_fiber *f;
    *size = fsched__round_up(usable + FSCHED__FIBER_RECORD_BYTES + FSCHED__CANARY_BYTES,
                             fsched__page_size());
    mem = (unsigned char *)fsched__slab_take(*size, 0);
    if (!mem) return NULL;
    f = (fsched_fiber *)(mem + *size - FSCHED__CANARY_BYTES - FSCHED__FIBER_RECORD_BYTES);
    memset(mem - FSCHED__CANARY_BYTES, FSCHED__CANARY_BYTE, FSCHED__CANARY_BYTES);
    memset(f, 0, sizeof *f);
    f->mem = mem;
    f->stack_lo = mem;
    return f;
}

/* A small slab slot for a stack of at least `usable` bytes: the smallest small unit, or
   power of two fraction of one, that holds it with f's record and a canary; the stack takes the
   rest of the slot. It is painted (it lies in the one page the record touches anyway), so
   that fsched_fiber_stack_used tells how deep it was used. */
static fsched_fiber *fsched__stack_from_small(size_t usable, size_t *size) {
    size_t need = usable + FSCHED__FIBER_RECORD_BYTES + FSCHED__CANARY_BYTES;
    unsigned char *mem;
    fsched_fiber *f;
    *size = fsched__small_unit();
    while (*size / 2 >= need) *size /= 2;
    mem = (unsigned char *)fsched__slab_take(*size, 1);
    if (!mem) return NULL;
    f = (fsched_fiber *)(mem + *size - FSCHED__FIBER_RECORD_BYTES);
    /* a slot back from a fiber holds what Valgrind saw below its stack pointer */
    fsched__valgrind_reports(0);
    memset(mem, FSCHED__CANARY_BYTE, FSCHED__CANARY_BYTES);
    memset(mem + FSCHED__CANARY_BYTES, FSCHED__PAINT_BYTE,
           (size_t)((unsigned char *)f - mem) - FSCHED__CANARY_BYTES);
    fsched__valgrind_reports(1);
    memset(f, 0, sizeof *f);
    f->mem = mem;
    f->stack_lo = mem + FSCHED__CANARY_BYTES;
    return f;
}
#endif

/* Allocates stack memory with the fiber record at its top:
   pages: [guard][stack.............][record]      heap: [canary][stack.....][record]
   slab:  [stack.......][record][canary of the slot above]
   small: [canary][stack][record], several to a page */
static fsched_result fsched__stack_alloc(const fsched__stack_params *params, fsched_fiber **out) {
    unsigned char *mem = NULL;
    size_t size, usable;
    fsched_fiber *f;
    /* what the record keeps: params, or their copy for a slab when guards ran out */
    const fsched__stack_params *kept = params;
#if defined(FSCHED__HAVE_PAGES)
    fsched__stack_params own;
#endif
#if defined(FSCHED__CTX_WINFIBER)
    usable = 0;
#else
    usable = fsched__round_up(params->stack_size, 16);
#endif
    if (params->kind == FSCHED_STACK_HEAP) {
        size = FSCHED__STACK_LEAD + usable + FSCHED__FIBER_RECORD_BYTES;
        mem = (unsigned char *)fsched__alloc(&params->allocator, size, FSCHED__STACK_ALIGN);
        if (!mem) return FSCHED_ERR_OUT_OF_MEMORY;
        memset(mem, FSCHED__CANARY_BYTE, FSCHED__STACK_LEAD); /* the canary ends it */
        if (FSCHED__STACK_PAINT) memset(mem + FSCHED__STACK_LEAD, FSCHED__PAINT_BYTE, usable);
        f = (fsched_fiber *)(mem + FSCHED__STACK_LEAD + usable);
        memset(f, 0, sizeof *f);
        f->mem = mem;
        f->stack_lo = mem + FSCHED__STACK_LEAD;
    } else {
#if defined(FSCHED__HAVE_PAGES)
        f = NULL;
        if (params->kind == FSCHED_STACK_PAGES) {
            int guard_failed, capped = !fsched__guard_take();
            size = params->guard_size +
                   fsched__round_up(usable + FSCHED__FIBER_RECORD_BYTES, fsched__page_size());
            if (!capped) {
                mem = (unsigned char *)fsched__pages_map(size, params->guard_size,
                                                         &guard_failed);
                if (!mem) fsched__guard_give();
            }
            if (mem) {
                f = (fsched_fiber *)(mem + size - FSCHED__FIBER_RECORD_BYTES);
                memset(f, 0, sizeof *f);
                f->mem = mem;
                f->stack_lo = mem + params->guard_size;
            } else {
                /* out of mappings for guards (or of memory): this stack comes from a slab,
                   whose mappings many stacks share, with a canary instead of a guard
                   (said once: there may be many; relaxed: only who says it counts) */
                static uint32_t said;
                if (capped && !FSCHED__EXCHANGE(&said, 1u, FSCHED__RELAXED))
                    fsched__log(&params->logger, FSCHED_LOG_WARNING,
                                "no more guarded stacks: their memory mappings would reach "
                                "vm.max_map_count; further stacks have a canary instead "
                                "(FSCHED_STACK_SLAB)");
                own = *params;
                own.kind = FSCHED_STACK_SLAB;
                own.guard_size = 0;
                kept = &own;
            }
        }
        if (kept->kind == FSCHED_STACK_SLAB) f = fsched__stack_from_slab(usable, &size);
        if (kept->kind == FSCHED_STACK_SMALL) f = fsched__stack_from_small(usable, &size);
        if (!f) return FSCHED_ERR_OUT_OF_MEMORY;
#else
        return FSCHED_ERR_UNSUPPORTED;
#endif
    }
    f->mem_size = size;
    f->stack_hi = (unsigned char *)f;
    f->params = *kept;
    if (FSCHED__VALGRIND) f->valgrind_id = fsched__valgrind_stack_add(f->stack_lo, f->stack_hi);
    *out = f;
    return FSCHED_OK;
}

/* ASan builds: the frames a fiber destroyed while suspended left on its stack never
   unpoisoned their redzones; they lie above where it last left it (frames below that
   returned, and unpoisoned theirs), give or take the switch's own. Only that part: the
   whole stack would commit an eighth of it as shadow memory. */
static void fsched__stack_unpoison(const fsched_fiber *f) {
#if defined(FSCHED__ASAN)
    uintptr_t lo = (uintptr_t)f->stack_lo, hi = (uintptr_t)f->stack_hi,
              sp = (uintptr_t)f->asan_sp;
    if (!sp) return; /* it never ran */
    if (sp >= lo + 4096 && sp <= hi) lo = sp - 4096;
    __asan_unpoison_memory_region((const void *)lo, (size_t)(hi - lo));
#else
    (void)f;
#endif
}

static void fsched__stack_free(fsched_fiber *f) {
    /* what the freeing needs, read before: the record lies in the memory freed */
    fsched_stack_kind kind = f->params.kind;
    fsched_allocator allocator = f->params.allocator;
    unsigned char *mem = f->mem;
    size_t size = f->mem_size;
    fsched__valgrind_stack_remove(f->valgrind_id);
    fsched__stack_unpoison(f);
#if defined(FSCHED__TSAN)
    if (f->tsan_fiber) __tsan_destroy_fiber(f->tsan_fiber);
#endif
    if (kind == FSCHED_STACK_HEAP) {
        fsched__free(&allocator, mem, size, FSCHED__STACK_ALIGN);
    } else {
#if defined(FSCHED__HAVE_PAGES)
        if (kind == FSCHED_STACK_SLAB || kind == FSCHED_STACK_SMALL) {
            fsched__slab_give(mem, size, kind == FSCHED_STACK_SMALL);
        } else {
            fsched__pages_unmap(mem, size);
            fsched__guard_give();
        }
#endif
    }
}

/* Re-initialises a cached block for a new fiber, keeping its memory fields: those from
   `mem` to `params`, which lie together (zeroed around, not copied: a record is large). */
typedef char fsched__recycle_keeps_mem_to_params /* then pool, nothing between */
    [offsetof(fsched_fiber, pool) - offsetof(fsched_fiber, params) -
             sizeof(fsched__stack_params) < sizeof(void *) ? 1 : -1];

static fsched_fiber *fsched__stack_recycle(fsched_fiber *f) {
    fsched__stack_unpoison(f);
    memset(f, 0, offsetof(fsched_fiber, mem));
    memset(&f->pool, 0, sizeof *f - offsetof(fsched_fiber, pool));
    return f;
}

/* ---- stack pools ----------------------------------------------------------------- */

/* Under the pool's lock: takes a cached block (there is one). */
#if FSCHED__THREADS
static fsched_fiber *fsched__pool_pop(fsched_stack_pool *pool) {
    return pool->cached[--pool->n_cached];
}
#else
static fsched_fiber *fsched__pool_pop(fsched_stack_pool *pool) {
    fsched_fiber *f = pool->cached;
    pool->cached = f->link;
    pool->n_cached--;
    return f;
}
#endif

static fsched_result fsched__pool_take(fsched_stack_pool *pool, fsched_fiber **out) {
    fsched_fiber *f = NULL;
    fsched_result r;
    fsched__mutex_lock(&pool->lock);
    if (pool->n_cached) f = fsched__pool_pop(pool);
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

#if FSCHED__THREADS /* for worker threads' spares */
/* Takes up to max cached blocks at once into out; returns how many. They count as in use
   until given back. */
static uint32_t fsched__pool_take_cached(fsched_stack_pool *pool, fsched_fiber **out,
                                         uint32_t max) {
    uint32_t n;
    fsched__mutex_lock(&pool->lock);
    n = pool->n_cached < max ? (uint32_t)pool->n_cached : max;
    pool->n_cached -= n;
    if (n) memcpy(out, pool->cached + pool->n_cached, n * sizeof *out);
    pool->in_use += n;
    fsched__mutex_unlock(&pool->lock);
    return n;
}
#endif

static void fsched__pool_free_struct(fsched_stack_pool *pool) {
    fsched_allocator a = pool->params.allocator;
    fsched__mutex_destroy(&pool->lock);
    fsched__free(&a, pool, sizeof *pool, FSCHED__CACHE_LINE);
}

#if FSCHED__THREADS
/* Under the pool's lock: room in the cache for up to n more blocks, growing its array (by
   doubling) up to max_cached; less when memory is short. */
static size_t fsched__pool_room(fsched_stack_pool *pool, size_t n) {
    size_t want = pool->max_cached - pool->n_cached < n ? pool->max_cached - pool->n_cached : n;
    if (pool->destroyed) return 0;
    if (pool->n_cached + want > pool->cap_cached) {
        size_t cap = pool->cap_cached ? pool->cap_cached : 64;
        fsched_fiber **grown;
        while (cap < pool->n_cached + want) cap *= 2;
        grown = (fsched_fiber **)fsched__alloc(&pool->params.allocator, cap * sizeof *grown,
                                               sizeof(void *));
        if (grown) {
            if (pool->n_cached) memcpy(grown, pool->cached, pool->n_cached * sizeof *grown);
            if (pool->cached)
                fsched__free(&pool->params.allocator, pool->cached,
                             pool->cap_cached * sizeof *grown, sizeof(void *));
            pool->cached = grown;
            pool->cap_cached = cap;
        }
        if (pool->n_cached + want > pool->cap_cached) want = pool->cap_cached - pool->n_cached;
    }
    return want;
}

/* Gives back the n blocks of `blocks` at once: kept while the cache has room, freed
   otherwise. */
static void fsched__pool_give_many(fsched_stack_pool *pool, fsched_fiber *const *blocks,
                                   size_t n) {
    size_t keep, i;
    int last;
    fsched__mutex_lock(&pool->lock);
    keep = fsched__pool_room(pool, n);
    if (keep) memcpy(pool->cached + pool->n_cached, blocks, keep * sizeof *blocks);
    pool->n_cached += keep;
    pool->in_use -= n;
    last = pool->destroyed && pool->in_use == 0;
    fsched__mutex_unlock(&pool->lock);
    for (i = keep; i < n; i++) fsched__stack_free(blocks[i]);
    if (last) fsched__pool_free_struct(pool);
}

static void fsched__pool_give(fsched_stack_pool *pool, fsched_fiber *f) {
    fsched__pool_give_many(pool, &f, 1);
}

/* Under the pool's lock: takes every cached block out of the pool, for
   fsched__pool_free_cached. */
static fsched__pool_cache fsched__pool_detach(fsched_stack_pool *pool, size_t *n, size_t *cap) {
    fsched__pool_cache cached = pool->cached;
    *n = pool->n_cached;
    *cap = pool->cap_cached;
    pool->cached = NULL;
    pool->n_cached = pool->cap_cached = 0;
    return cached;
}

/* Frees the blocks fsched__pool_detach took out of the pool, outside its lock (which
   may be gone: `a` is its allocator). */
static void fsched__pool_free_cached(const fsched_allocator *a, fsched__pool_cache cached,
                                     size_t n, size_t cap) {
    size_t i;
    for (i = 0; i < n; i++) fsched__stack_free(cached[i]);
    if (cached) fsched__free(a, cached, cap * sizeof *cached, sizeof(void *));
}
#else
/* Gives back a block: kept while the cache has room, freed otherwise. */
static void fsched__pool_give(fsched_stack_pool *pool, fsched_fiber *f) {
    int keep, last;
    fsched__mutex_lock(&pool->lock);
    keep = !pool->destroyed && pool->n_cached < pool->max_cached;
    if (keep) {
        f->link = pool->cached;
        pool->cached = f;
        pool->n_cached++;
    }
    pool->in_use--;
    last = pool->destroyed && pool->in_use == 0;
    fsched__mutex_unlock(&pool->lock);
    if (!keep) fsched__stack_free(f);
    if (last) fsched__pool_free_struct(pool);
}

static fsched__pool_cache fsched__pool_detach(fsched_stack_pool *pool, size_t *n, size_t *cap) {
    fsched__pool_cache cached = pool->cached;
    *n = *cap = 0; /* (a list: its end says where it ends) */
    pool->cached = NULL;
    pool->n_cached = 0;
    return cached;
}

static void fsched__pool_free_cached(const fsched_allocator *a, fsched__pool_cache cached,
                                     size_t n, size_t cap) {
    fsched_fiber *next;
    (void)a;
    (void)n;
    (void)cap;
    for (; cached; cached = next) {
        next = cached->link;
        fsched__stack_free(cached);
    }
}
#endif

FIBERSCHED_API fsched_result fsched_stack_pool_create(const fsched_stack_pool_desc *desc,
                                                      fsched_stack_pool **out) {
    fsched_stack_pool_desc d;
    fsched__stack_params params;
    fsched_stack_pool *pool;
    fsched_result r;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (!out) return FSCHED__REFUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT, "out is NULL");
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
    fsched_allocator a;
    fsched__pool_cache cached;
    size_t n, cap;
    int last;
    if (!pool) return;
    a = pool->params.allocator; /* once unlocked, the pool may be freed by its last give */
    fsched__mutex_lock(&pool->lock);
    cached = fsched__pool_detach(pool, &n, &cap);
    pool->destroyed = 1;
    last = pool->in_use == 0;
    fsched__mutex_unlock(&pool->lock);
    fsched__pool_free_cached(&a, cached, n, cap);
    if (last) fsched__pool_free_struct(pool);
}

FIBERSCHED_API fsched_result fsched_stack_pool_get_stats(fsched_stack_pool *pool,
                                                         fsched_stack_pool_stats *out) {
    if (!pool || !out) return FSCHED__REFUSE((const fsched_logger *)NULL,
                                             FSCHED_ERR_INVALID_ARGUMENT,
                                             "NULL argument");
    fsched__mutex_lock(&pool->lock);
    out->cached = pool->n_cached;
    out->in_use = pool->in_use;
    out->allocated = pool->allocated;
    fsched__mutex_unlock(&pool->lock);
    return FSCHED_OK;
}

/* ---- switching ------------------------------------------------------------------- */

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
    if (FSCHED__STACK_WATCHED(from) && from->params.kind != FSCHED_STACK_PAGES)
        fsched__stack_check_here(from);
#if FSCHED__MPU_GUARD
    fsched__mpu_guard_arm(to);
#endif
#if defined(FSCHED__ASAN)
    from->asan_sp = (const unsigned char *)__builtin_frame_address(0);
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
   its registers are visible here even if another thread suspended it. Relaxed store for
   the claim: switching to one fiber from two threads at once is a documented misuse. */
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
#if defined(FSCHED__ASAN) /* only ASan reads them */
    f->asan_bottom = f->stack_lo;
    f->asan_size = (size_t)(f->stack_hi - f->stack_lo);
#endif
    n = fsched__name_fit(name, sizeof f->name);
    if (n) memcpy(f->name, name, n);
    f->name[n] = 0;
    FSCHED__TRACE(f->trace_id = 0;)
    r = fsched__ctx_init(f, entry);
    if (r != FSCHED_OK) return r;
#if defined(FSCHED__TSAN) /* one per block (see tsan_fiber) */
    if (!f->tsan_fiber) f->tsan_fiber = __tsan_create_fiber(0);
    if (n) __tsan_set_fiber_name(f->tsan_fiber, f->name);
#endif
    return FSCHED_OK;
}

#if defined(FSCHED__HAVE_PAGES)
/* The stack overflow reports run on: address space until one is made (the first thread
   to report takes it, others wait for the end of the program). */
#define FSCHED__REPORT_STACK (64u * 1024u)
static unsigned char fsched__report_mem[FSCHED__REPORT_STACK] __attribute__((aligned(64)));
static uint32_t fsched__report_taken;
static const fsched_fiber *fsched__report_of;
static const char *fsched__report_how;

static void fsched__report_main(void *pass) {
    fsched__fiber_arrived(fsched__thread_get()->current, (fsched_fiber *)pass);
    fsched__stack_report(fsched__report_of, fsched__report_how);
}

static void fsched__stack_report_away(const fsched_fiber *f, const char *how) {
    static fsched_fiber left; /* the context left for good: no stack of ours to check */
    fsched__thread *t = fsched__thread_get();
    fsched_fiber *to = (fsched_fiber *)(fsched__report_mem + FSCHED__REPORT_STACK -
                                        FSCHED__FIBER_RECORD_BYTES);
    /* relaxed: only one thread may take it, and what it reads it wrote itself */
    if (FSCHED__EXCHANGE(&fsched__report_taken, 1u, FSCHED__RELAXED))
        for (;;) fsched__os_yield();
    fsched__report_of = f;
    fsched__report_how = how;
    memset(to, 0, sizeof *to);
    to->stack_lo = fsched__report_mem;
    to->stack_hi = (unsigned char *)to;
    to->params.kind = FSCHED_STACK_PAGES; /* never checked: it ends the program */
    if (fsched__fiber_prepare(to, fsched__report_main, "overflow report") != FSCHED_OK) return;
    t->current = to;
    fsched__fiber_jump(&left, to, fsched__fiber_take(to), 1);
}
#else
static void fsched__stack_report_away(const fsched_fiber *f, const char *how) {
    (void)f; /* reported where it is seen */
    (void)how;
}
#endif

/* Ends a fiber that will never run again; its block stays allocated. */
static void fsched__fiber_end(fsched_fiber *f) {
    f->magic = FSCHED__FIBER_DEAD;
    fsched__stack_check(f, NULL);
    fsched__ctx_release(f);
}

/* Returns the block of a fiber that will never run again to its pool or the system. */
static void fsched__fiber_release(fsched_fiber *f) {
    fsched__fiber_end(f);
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

/* ---- public fiber API ------------------------------------------------------------ */

FIBERSCHED_API fsched_result fsched_fiber_create(const fsched_fiber_desc *desc,
                                                 void (*fn)(void *arg), void *arg,
                                                 fsched_fiber **out) {
    fsched_fiber_desc d;
    fsched_fiber *f = NULL;
    fsched_result r;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (!out) return FSCHED__REFUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!fn) return FSCHED__REFUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT, "fn is NULL");
    if (d.pool) {
        if (d.stack_size || d.guard_size || d.stack_kind != FSCHED_STACK_DEFAULT)
            return FSCHED__REFUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT,
                                  "stack sizes are given by the pool");
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
                          to == self ? "the calling fiber" : /* acquire, as fsched_fiber_state */
                          FSCHED__LOAD(&to->ctx.exit_sp, FSCHED__ACQUIRE) ? "finished" : "running");
}

/* The switch itself: no work is left after the context switch, so on the common path the
   call to the assembly is a tail call and its indirect jump lands in the resumed fiber's
   caller directly. */
FIBERSCHED_API fsched_result fsched_fiber_switch(fsched_fiber *to) {
    /* the thread-local is read inline: nothing after the switch reuses its address */
    fsched__thread *t = &FSCHED__THREAD_NOW;
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
#if defined(FSCHED__CTX_ASM) && !defined(FSCHED__ASAN) && !defined(FSCHED__TSAN)
    /* nothing is left to do on arrival: what precedes a switch (the debug build's stack
       check, the MPU guard) goes first, and the switch returns its third argument in the
       resumed fiber: here 0, FSCHED_OK */
    fsched__fiber_leaving(self, to, 0);
    return fsched__asm_switch_result(&self->ctx.sp, to_sp, NULL);
#else
    fsched__fiber_jump(self, to, to_sp, 0);
    return FSCHED_OK;
#endif
}

FIBERSCHED_API fsched_result fsched_fiber_destroy(fsched_fiber *f) {
    if (!f || f->magic != FSCHED__FIBER_LIVE)
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "%s", f ? "the fiber was destroyed" : "f is NULL");
    if (f->is_root)
        return FSCHED__REFUSE(&f->params.logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "a thread's own fiber cannot be destroyed");
    /* acquire: the fiber's last switch away is complete before its stack is freed */
    if (fsched_fiber_get_state(f) == FSCHED_FIBER_RUNNING)
        return FSCHED__REFUSE(&f->params.logger, FSCHED_ERR_WRONG_STATE,
                              "fiber '%s' is running", f->name);
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
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "NULL or destroyed argument");
    *lo = f->stack_lo;
    *size = (size_t)(f->stack_hi - f->stack_lo);
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_fiber_stack_used(const fsched_fiber *f, size_t *used) {
    const unsigned char *p;
    if (!f || f->magic != FSCHED__FIBER_LIVE || !used)
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "NULL or destroyed argument");
    if (!(FSCHED__STACK_PAINT && f->params.kind == FSCHED_STACK_HEAP) &&
        f->params.kind != FSCHED_STACK_SMALL)
        return FSCHED_ERR_UNSUPPORTED; /* not painted */
    if (f->stack_lo == f->stack_hi) return FSCHED_ERR_UNSUPPORTED;
    /* the scan reads below the fiber's stack pointer, which Valgrind holds out of bounds */
    fsched__valgrind_reports(0);
    for (p = f->stack_lo; p < f->stack_hi && *p == FSCHED__PAINT_BYTE; p++) {
    }
    fsched__valgrind_reports(1);
    *used = (size_t)(f->stack_hi - p);
    return FSCHED_OK;
}

FIBERSCHED_API int fsched_stack_fault(const void *address) {
#if FSCHED__MPU_GUARD
    /* the program's thread: the handler that calls this is not it */
    const fsched_fiber *f = fsched__threads[0].current;
    if (f && !f->is_root && f->params.kind == FSCHED_STACK_HEAP &&
        (const unsigned char *)address >= f->mem && (const unsigned char *)address < f->stack_lo)
        fsched__stack_overflowed(f, "a write into the MPU guard below its stack faulted");
#endif
    (void)address;
    return 0;
}

/* ---- stack overflow reporting ---------------------------------------------------- */

#if defined(FSCHED__OS_POSIX) && defined(SA_ONSTACK) && defined(SS_DISABLE)
#define FSCHED__ALTSTACK_BYTES (64u * 1024u)
static int fsched__overflow_installed;
static struct sigaction fsched__overflow_old_segv, fsched__overflow_old_bus;
#if FSCHED__THREADS
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
#if FSCHED__THREADS
    pthread_setspecific(fsched__overflow_key, ss.ss_sp);
#endif
}

/* The report, to stderr. On Linux a raw system call: a sanitizer's write() interceptor
   updates its own state, which a fault on a fiber's guard can leave it unable to do (under
   ThreadSanitizer the handler deadlocked in it, now and then). */
#if defined(__linux__)
#include <sys/syscall.h>
static long fsched__sig_write(const char *msg, size_t n) { return syscall(SYS_write, 2, msg, n); }
#else
static long fsched__sig_write(const char *msg, size_t n) { return (long)write(2, msg, n); }
#endif

static void fsched__overflow_signal(int sig, siginfo_t *info, void *uctx) {
    fsched_fiber *f = fsched__tls_thread.current;
    uintptr_t addr = (uintptr_t)info->si_addr;
    struct sigaction *old = sig == SIGSEGV ? &fsched__overflow_old_segv : &fsched__overflow_old_bus;
    int in_guard = f && !f->is_root && f->params.guard_size && addr >= (uintptr_t)f->mem &&
                   addr < (uintptr_t)f->stack_lo;
    /* a stack with a canary instead of a guard: an overflow that went on past the canary,
       over what lies below (another stack, the record of its fiber), faults before the next
       check would see the canary */
    int past_canary = f && !f->is_root && fsched__has_canary(f) && !fsched__canary_intact(f);
    if (in_guard || past_canary) {
        char msg[384], *p = msg, *end = msg + sizeof msg - 1;
        struct sigaction dfl;
        long unused;
        p = fsched__sig_put(p, end, "fibersched: ");
        p = fsched__sig_put_overflow(p, end, f);
        p = fsched__sig_put(p, end, ": fault at ");
        p = fsched__sig_hex(p, end, addr);
        p = fsched__sig_put(p, end, in_guard ? " in the guard below its stack ["
                                             : " after the canary below its stack was "
                                               "overwritten [");
        p = fsched__sig_hex(p, end, (uintptr_t)f->stack_lo);
        p = fsched__sig_put(p, end, ", ");
        p = fsched__sig_hex(p, end, (uintptr_t)f->stack_hi);
        p = fsched__sig_put(p, end, ")\n");
        unused = fsched__sig_write(msg, (size_t)(p - msg));
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

/* The lock of the handler's installation (and the key of threads' alternate stacks,
   made once); nothing to take with one thread. */
#if FSCHED__THREADS
static pthread_mutex_t fsched__overflow_install_lock = PTHREAD_MUTEX_INITIALIZER;
static void fsched__overflow_lock(void) {
    pthread_once(&fsched__overflow_once, fsched__overflow_make_key);
    pthread_mutex_lock(&fsched__overflow_install_lock);
}
static void fsched__overflow_unlock(void) { pthread_mutex_unlock(&fsched__overflow_install_lock); }
#else
static void fsched__overflow_lock(void) {}
static void fsched__overflow_unlock(void) {}
#endif

FIBERSCHED_API fsched_result fsched_install_overflow_handler(void) {
    fsched__overflow_lock();
    /* relaxed: only a holder of the lock stores the flag. Once: a second installation
       would save this handler as the one to chain to, and lose the program's own */
    if (!FSCHED__LOAD(&fsched__overflow_installed, FSCHED__RELAXED)) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = fsched__overflow_signal;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &fsched__overflow_old_segv);
        sigaction(SIGBUS, &sa, &fsched__overflow_old_bus);
        /* release: threads that see the flag also see the saved old handlers */
        FSCHED__STORE(&fsched__overflow_installed, 1, FSCHED__RELEASE);
    }
    fsched__overflow_unlock();
    fsched__overflow_thread_setup(fsched__thread_get());
    return FSCHED_OK;
}
#else
static void fsched__overflow_thread_setup(fsched__thread *t) { (void)t; }
FIBERSCHED_API fsched_result fsched_install_overflow_handler(void) {
    return FSCHED_ERR_UNSUPPORTED;
}
#endif

/* ===================================================================================== */
/*  deque: split work-stealing deque (private ring + Chase-Lev public part), injector    */
/* ===================================================================================== */

/* Everything a worker can run (fsched__job, in the declarations, for fsched_join's inline
   path): a spawned task, the second half of a join, a loop chunk. */

#define FSCHED__ALIGN_LINE __attribute__((aligned(FSCHED__CACHE_LINE)))

/* The frame stacks of a slot (spawn and sync), as thieves find them: a list of groups,
   each naming up to FSCHED__FRAMES_FANOUT chunks, each naming as many stacks. A bit per
   stack in its chunk's word, and a bit per chunk in its group's word, is set while the
   stack may offer frames, so that thieves look at those alone, however many stacks wait
   with nothing to offer (blocked task trees, free stacks). Nothing in the set moves or is
   freed before the slot is. */
#define FSCHED__FRAMES_FANOUT (8u * (uint32_t)sizeof(uintptr_t))
typedef struct fsched__frames_group fsched__frames_group;
typedef struct fsched__frames_chunk {
    uintptr_t offers;               /* bit i: stacks[i] may offer frames */
    uintptr_t bit;                  /* its bit in the group's word */
    fsched__frames_group *group;
    fsched_frames *stacks[FSCHED__FRAMES_FANOUT];
} fsched__frames_chunk;
struct fsched__frames_group {
    uintptr_t offers;               /* bit j: chunks[j]'s word may be nonzero */
    fsched__frames_chunk *chunks[FSCHED__FRAMES_FANOUT];
    fsched__frames_group *next;
};

/* ---- Chase-Lev deque ----
   With threads (without, see below): the C11 orderings of Le, Pop, Cohen and Zappa
   Nardelli, "Correct and Efficient Work-Stealing for Weak Memory Models" (PPoPP 2013).
   Indices are signed so that
   `bottom - 1` may go below `top`. The array grows by doubling; arrays it outgrows may
   still be read by a thief that loaded the old pointer, so they are kept on a list and
   freed with the deque. The array is allocated on the first push. */
#define FSCHED__STEAL_EMPTY ((fsched__job *)0)
#define FSCHED__STEAL_RETRY ((fsched__job *)1)

#if FSCHED__THREADS
typedef struct fsched__cl_array {
    int64_t mask;                      /* capacity - 1, a power of two minus one */
    struct fsched__cl_array *retired;  /* older arrays, freed with the deque */
    fsched__job **slots;               /* atomic elements: thieves read them racily */
} fsched__cl_array;

typedef struct fsched__cl {
    FSCHED__ALIGN_LINE int64_t top;    /* thieves write */
    FSCHED__ALIGN_LINE int64_t bottom; /* the owner writes, thieves read */
    fsched__cl_array *array;
    fsched_allocator allocator;
} fsched__cl;

static fsched__cl_array *fsched__cl_array_new(const fsched_allocator *a, int64_t capacity) {
    size_t bytes = sizeof(fsched__cl_array) + (size_t)capacity * sizeof(fsched__job *);
    fsched__cl_array *arr = (fsched__cl_array *)fsched__alloc(a, bytes, FSCHED__CACHE_LINE);
    if (!arr) return NULL;
    arr->mask = capacity - 1;
    arr->retired = NULL;
    arr->slots = (fsched__job **)(arr + 1);
    return arr;
}

static void fsched__cl_init(fsched__cl *q, const fsched_allocator *a) {
    memset(q, 0, sizeof *q);
    q->allocator = *a;
}

static void fsched__cl_destroy(fsched__cl *q) {
    fsched__cl_array *arr = q->array, *next;
    for (; arr; arr = next) {
        next = arr->retired;
        fsched__free(&q->allocator, arr,
                     sizeof(fsched__cl_array) + (size_t)(arr->mask + 1) * sizeof(fsched__job *),
                     FSCHED__CACHE_LINE);
    }
    q->array = NULL;
}

/* Owner: an array with room for `need` jobs between t and b (the first, or a doubled
   one that keeps the old array readable for thieves); NULL for want of memory. Relaxed,
   the pointer's load and the copy: only the owner writes them; the release store of the
   pointer publishes the copy. */
static fsched__cl_array *fsched__cl_room(fsched__cl *q, int64_t t, int64_t b, int64_t need) {
    fsched__cl_array *arr = FSCHED__LOAD(&q->array, FSCHED__RELAXED), *bigger;
    int64_t capacity = arr ? arr->mask + 1 : 256, i;
    if (arr && need <= capacity) return arr;
    while (capacity < need) capacity *= 2;
    bigger = fsched__cl_array_new(&q->allocator, capacity);
    if (!bigger) return NULL;
    if (arr)
        for (i = t; i < b; i++)
            FSCHED__STORE(&bigger->slots[i & bigger->mask],
                          FSCHED__LOAD(&arr->slots[i & arr->mask], FSCHED__RELAXED),
                          FSCHED__RELAXED);
    bigger->retired = arr;
    /* release: a thief that loads the new pointer sees its copied slots */
    FSCHED__STORE(&q->array, bigger, FSCHED__RELEASE);
    return bigger;
}

/* Owner: appends n jobs taken from ring[first...] (modulo the ring's size; ring may be
   NULL), then the m jobs of `more`, as one batch. 0, pushing nothing, for want of memory. */
static int fsched__cl_push(fsched__cl *q, fsched__job *const *ring, size_t first, size_t n,
                           fsched__job *const *more, size_t m) {
    int64_t b = FSCHED__LOAD(&q->bottom, FSCHED__RELAXED); /* relaxed: the owner's own */
    /* acquire: pairs with thieves' CAS on top, so slots they vacated may be reused */
    int64_t t = FSCHED__LOAD(&q->top, FSCHED__ACQUIRE);
    fsched__cl_array *arr = fsched__cl_room(q, t, b, b - t + (int64_t)(n + m));
    size_t i;
    if (!arr) return 0;
    /* relaxed: the release store of bottom below publishes the slots */
    for (i = 0; i < n; i++)
        FSCHED__STORE(&arr->slots[(b + (int64_t)i) & arr->mask],
                      ring[(first + i) % FSCHED__RING_SIZE], FSCHED__RELAXED);
    for (i = 0; i < m; i++)
        FSCHED__STORE(&arr->slots[(b + (int64_t)(n + i)) & arr->mask], more[i], FSCHED__RELAXED);
    /* release: the slots (and the jobs they point to) are written before a thief sees the
       new bottom. The paper's release fence followed by a relaxed store gives the same
       order for this purpose; a release store is also understood by ThreadSanitizer. */
    FSCHED__STORE(&q->bottom, b + (int64_t)(n + m), FSCHED__RELEASE);
    return 1;
}

/* Owner: takes the newest job, or NULL. Sets *emptied when the deque is now empty (it
   took the last job, lost it to a thief, or found none). */
static fsched__job *fsched__cl_take(fsched__cl *q, int *emptied) {
    /* relaxed: only the owner writes bottom and the array's pointer */
    int64_t b = FSCHED__LOAD(&q->bottom, FSCHED__RELAXED) - 1;
    fsched__cl_array *arr = FSCHED__LOAD(&q->array, FSCHED__RELAXED);
    int64_t t;
    fsched__job *job = NULL;
    *emptied = 1;
    /* seq_cst, both: the bottom store and the top load must not reorder, against a
       thief's seq_cst loads of top and bottom (the fences of the paper, expressed on the
       accesses themselves: as cheap on x86, cheaper on Arm, and understood by
       ThreadSanitizer) */
    FSCHED__STORE(&q->bottom, b, FSCHED__SEQ_CST);
    t = FSCHED__LOAD(&q->top, FSCHED__SEQ_CST);
    /* Relaxed: the slot is the owner's own write; a CAS that fails leaves the job to
       the thief and reads nothing; bottom goes back to where it was before the take,
       above no slot that thieves have not been shown with release. */
    if (t <= b) {
        job = FSCHED__LOAD(&arr->slots[b & arr->mask], FSCHED__RELAXED);
        if (t == b) { /* the last job: race the thieves for it */
            FSCHED__POINT(TAKE_LAST);
            if (!FSCHED__CAS(&q->top, &t, t + 1, FSCHED__SEQ_CST, FSCHED__RELAXED)) job = NULL;
            FSCHED__STORE(&q->bottom, b + 1, FSCHED__RELAXED);
        } else {
            *emptied = 0;
        }
    } else {
        FSCHED__STORE(&q->bottom, b + 1, FSCHED__RELAXED);
    }
    return job;
}

/* Thief: takes the oldest job; FSCHED__STEAL_RETRY when another thief won it. Sets
   *emptied when it took the last one. */
static fsched__job *fsched__cl_steal(fsched__cl *q, int *emptied) {
    /* seq_cst, both (see fsched__cl_take); as acquires they also pair with other
       thieves' CAS of top and with the owner's release store of bottom */
    int64_t t = FSCHED__LOAD(&q->top, FSCHED__SEQ_CST);
    int64_t b = FSCHED__LOAD(&q->bottom, FSCHED__SEQ_CST);
    *emptied = 0;
    if (t < b) {
        /* acquire (consume in the paper): the slots of the array we load are visible;
           relaxed, the slot: the load of bottom above acquired the push that wrote it */
        fsched__cl_array *arr = FSCHED__LOAD(&q->array, FSCHED__ACQUIRE);
        fsched__job *job = FSCHED__LOAD(&arr->slots[t & arr->mask], FSCHED__RELAXED);
        FSCHED__POINT(STEAL);
        /* seq_cst: decides the race with other thieves and with the owner's take; relaxed
           on failure: the job is another's, and nothing of it is read */
        if (!FSCHED__CAS(&q->top, &t, t + 1, FSCHED__SEQ_CST, FSCHED__RELAXED))
            return FSCHED__STEAL_RETRY;
        *emptied = t + 1 == b;
        return job;
    }
    return FSCHED__STEAL_EMPTY;
}

/* Whether the deque looks empty. Relaxed: a hint (the owner's own bottom, or a thief's
   quick look before the fenced steal); a stale answer costs only time. */
static inline int fsched__cl_looks_empty(fsched__cl *q) {
    return FSCHED__LOAD(&q->bottom, FSCHED__RELAXED) <= FSCHED__LOAD(&q->top, FSCHED__RELAXED);
}

/* Whether q holds a job, as fsched__work_visible must see it (seq_cst: see there). */
static inline int fsched__cl_visible(fsched__cl *q) {
    return FSCHED__LOAD(&q->top, FSCHED__SEQ_CST) < FSCHED__LOAD(&q->bottom, FSCHED__SEQ_CST);
}

/* Owner: the newest job without taking it, or NULL. Only the owner writes slots and
   bottom, so a take that follows returns this job or, if a thief took it, NULL.
   Relaxed: the owner's own writes, and top a hint that the take checks again. */
static inline fsched__job *fsched__cl_peek(fsched__cl *q) {
    int64_t b = FSCHED__LOAD(&q->bottom, FSCHED__RELAXED);
    fsched__cl_array *arr;
    if (b <= FSCHED__LOAD(&q->top, FSCHED__RELAXED)) return NULL;
    arr = FSCHED__LOAD(&q->array, FSCHED__RELAXED);
    return FSCHED__LOAD(&arr->slots[(b - 1) & arr->mask], FSCHED__RELAXED);
}
#else
/* Without threads nothing steals, and interrupt handlers queue their work in the
   injector, never here: the public part is its owner's stack of jobs, linked through
   their `next` (a job waits in one queue at a time), the newest on top. It never
   allocates, so a push never fails. A "steal" takes the oldest job, as with threads. */
typedef struct fsched__cl {
    fsched__job *newest;
} fsched__cl;

static void fsched__cl_init(fsched__cl *q, const fsched_allocator *a) {
    (void)a; /* nothing to allocate */
    q->newest = NULL;
}

static void fsched__cl_destroy(fsched__cl *q) { (void)q; /* nothing allocated */ }

static int fsched__cl_push(fsched__cl *q, fsched__job *const *ring, size_t first, size_t n,
                           fsched__job *const *more, size_t m) {
    size_t i;
    for (i = 0; i < n + m; i++) {
        fsched__job *job = i < n ? ring[(first + i) % FSCHED__RING_SIZE] : more[i - n];
        job->next = q->newest;
        q->newest = job;
    }
    return 1;
}

static fsched__job *fsched__cl_take(fsched__cl *q, int *emptied) {
    fsched__job *job = q->newest;
    if (job) q->newest = job->next;
    *emptied = !q->newest;
    return job;
}

static fsched__job *fsched__cl_steal(fsched__cl *q, int *emptied) {
    fsched__job **at = &q->newest, *job;
    *emptied = 0;
    if (!*at) return FSCHED__STEAL_EMPTY;
    while ((*at)->next) at = &(*at)->next;
    job = *at;
    *at = NULL;
    *emptied = !q->newest;
    return job;
}

static inline int fsched__cl_looks_empty(fsched__cl *q) { return !q->newest; }

static inline int fsched__cl_visible(fsched__cl *q) { return q->newest != NULL; }

static inline fsched__job *fsched__cl_peek(fsched__cl *q) { return q->newest; }
#endif

/* ---- split deque: a private ring in front of a Chase-Lev deque ----
   The ring is touched only by its owner: push and pop of the newest job take no fence
   and no atomic read-modify-write. `request` says that the public part went empty: it
   starts set, and whoever takes the last public job (a thief or the owner) or finds none
   (a thief) sets it. The owner answers on its next push or pop by moving the older half
   of its ring to the public part. So an owner with queued work offers its oldest job as
   soon as it next queues or takes one, not only after a thief asked and waited: a job
   queued just before a long computation that never calls the scheduler is not stranded
   behind it while other workers idle. Jobs in the ring are always newer than every job
   in the public part, so thieves keep taking the oldest work. In recursive fork-join the
   ring does nearly all the work: one move per public job taken. */
typedef struct fsched__deque {
    fsched__ring ring; /* owner only, but `request`, which thieves write rarely and the
                          owner reads on every push and pop (a line of its own) */
    void (*leaving)(fsched__job *job); /* told of each private job before other threads
                                          can see it; NULL: nobody asked */
    fsched__cl pub;
} fsched__deque;

static void fsched__deque_init(fsched__deque *d, const fsched_allocator *a) {
    memset(d, 0, sizeof *d);
    fsched__cl_init(&d->pub, a);
    d->ring.request = FSCHED__THREADS; /* the public part is empty (without threads, nobody asks) */
}

static void fsched__deque_destroy(fsched__deque *d) { fsched__cl_destroy(&d->pub); }

/* Owner: appends the n oldest private jobs, then the m jobs of `more`, to the public part
   as one batch (so the public part stays older than the ring). Fails only for want of
   memory, and then moves nothing (the jobs `leaving` was told of stay private, which
   every job may be). */
static int fsched__deque_expose(fsched__deque *d, size_t n, fsched__job *const *more, size_t m) {
    size_t i;
    if (FSCHED__THREADS && d->leaving) /* (set only where tasks lease: fsched__group_count) */
        for (i = 0; i < n; i++) d->leaving(d->ring.slot[(d->ring.head + i) % FSCHED__RING_SIZE]);
    if (!fsched__cl_push(&d->pub, d->ring.slot, d->ring.head, n, more, m)) return 0;
    d->ring.head += n;
    return 1;
}

/* Says that the public part went empty, so the owner shares on its next push or pop.
   Written only when clear: the owner reads the flag on every push, and a write to a
   line it reads costs it a cache miss. Relaxed: a hint; a late answer costs only time. */
static inline void fsched__deque_request(fsched__deque *d) {
    if (FSCHED__THREADS && !FSCHED__LOAD(&d->ring.request, FSCHED__RELAXED))
        FSCHED__STORE(&d->ring.request, 1u, FSCHED__RELAXED);
}

/* Owner: moves the older half of the ring (at least one job) to the public part. */
static void fsched__deque_share(fsched__deque *d) {
    size_t n = (d->ring.tail - d->ring.head + 1) / 2;
    if (n) fsched__deque_expose(d, n, NULL, 0);
}

/* True when the public part went empty. Relaxed: a hint (see fsched__deque_request). */
static inline int fsched__deque_requested(fsched__deque *d) {
    return FSCHED__THREADS && FSCHED__LOAD(&d->ring.request, FSCHED__RELAXED) != 0;
}

/* Owner: pushes a job as the newest. Returns 0 only when the ring is full and the public
   part cannot grow (out of memory); the job is then not queued. */
static inline int fsched__deque_push(fsched__deque *d, fsched__job *job) {
    if (FSCHED__UNLIKELY(d->ring.tail - d->ring.head == FSCHED__RING_SIZE)) {
        fsched__deque_share(d);
        if (d->ring.tail - d->ring.head == FSCHED__RING_SIZE) return 0;
    }
    d->ring.slot[d->ring.tail++ % FSCHED__RING_SIZE] = job;
    return 1;
}

/* Owner: takes the newest job, or NULL when the deque is empty. */
static inline fsched__job *fsched__deque_pop(fsched__deque *d) {
    fsched__job *job;
    int emptied;
    if (FSCHED__LIKELY(d->ring.tail != d->ring.head))
        return d->ring.slot[--d->ring.tail % FSCHED__RING_SIZE];
    job = fsched__cl_take(&d->pub, &emptied);
    if (emptied) fsched__deque_request(d);
    return job;
}

/* Owner: takes the newest job if it is `job` and still private (the common end of a
   join: nobody asked for it). */
static inline int fsched__deque_pop_if_newest(fsched__deque *d, const fsched__job *job) {
    if (d->ring.tail != d->ring.head && d->ring.slot[(d->ring.tail - 1) % FSCHED__RING_SIZE] == job) {
        d->ring.tail--;
        return 1;
    }
    return 0;
}

/* Owner: the newest job without taking it, or NULL; see fsched__cl_peek. */
static inline fsched__job *fsched__deque_peek(fsched__deque *d) {
    if (d->ring.tail != d->ring.head) return d->ring.slot[(d->ring.tail - 1) % FSCHED__RING_SIZE];
    return fsched__cl_peek(&d->pub);
}

/* Owner: whether any job is queued (private or public). */
static inline int fsched__deque_empty(fsched__deque *d) {
    return d->ring.tail == d->ring.head && fsched__cl_looks_empty(&d->pub);
}

/* ---- the injector: work submitted from threads outside the pool ----
   A FIFO of jobs linked through their `next` field, under a mutex: queueing never
   allocates, so it cannot fail. Workers check its atomic count before taking the lock,
   and take several jobs at a time, so the lock is touched once per batch. */
typedef struct fsched__injector {
    fsched__mutex lock;
    fsched__job *head, *tail;
    size_t count;
    FSCHED__ALIGN_LINE size_t size; /* atomic copy of count, read without the lock */
} fsched__injector;

static void fsched__injector_init(fsched__injector *q) {
    memset(q, 0, sizeof *q);
    fsched__mutex_init(&q->lock);
}

static void fsched__injector_destroy(fsched__injector *q) { fsched__mutex_destroy(&q->lock); }

/* Queues the n jobs of `jobs`, in order. */
static void fsched__injector_push(fsched__injector *q, fsched__job *const *jobs, size_t n) {
    size_t i;
    if (!n) return;
    for (i = 0; i + 1 < n; i++) jobs[i]->next = jobs[i + 1];
    jobs[n - 1]->next = NULL;
    fsched__mutex_lock(&q->lock);
    if (q->tail) q->tail->next = jobs[0];
    else q->head = jobs[0];
    q->tail = jobs[n - 1];
    q->count += n;
    /* release: a worker that sees the size also sees the queue (it takes the lock anyway) */
    FSCHED__STORE(&q->size, q->count, FSCHED__RELEASE);
    fsched__mutex_unlock(&q->lock);
}

/* Takes up to max jobs, oldest first; returns how many. Relaxed, the size: a look before
   the lock, which hands the jobs over; every push is followed by fsched__new_jobs, whose
   fence orders it against a sleeper's last look (see fsched__sleep). */
static size_t fsched__injector_take(fsched__injector *q, fsched__job **out, size_t max) {
    size_t n = 0;
    if (!FSCHED__LOAD(&q->size, FSCHED__RELAXED)) return 0;
    fsched__mutex_lock(&q->lock);
    while (n < max && q->head) {
        out[n++] = q->head;
        q->head = q->head->next;
    }
    if (!q->head) q->tail = NULL;
    q->count -= n;
    FSCHED__STORE(&q->size, q->count, FSCHED__RELAXED);
    fsched__mutex_unlock(&q->lock);
    return n;
}

/* ---- placed jobs: a priority level, or a set of slots that may run them ---------- */

#define FSCHED__LEVEL_LOW 0u
#define FSCHED__LEVEL_NORMAL 1u
#define FSCHED__LEVEL_HIGH 2u
#define FSCHED__LEVELS 3u

/* A job with a place (graph tasks): its level orders it against other local work, and
   `slot` or `workers` restrict who may run it. */
typedef struct fsched__placed {
    fsched__job job;
    struct fsched__placed *next; /* in an affinity queue */
    uint64_t workers;            /* bit i: worker thread i may run it; 0 and slot < 0: any */
    int32_t slot;                /* >= 0: only this slot may run it */
    uint32_t level;              /* FSCHED__LEVEL_* */
} fsched__placed;

/* Jobs that only some slots may run, queued at one of them: a FIFO per level under a
   mutex, and a count read without it. Other slots a job allows take it too: thieves only
   take what they may run. A bound slot closes its queue when it unbinds. */
typedef struct fsched__affine {
    fsched__mutex lock;
    fsched__placed *head[FSCHED__LEVELS], *tail[FSCHED__LEVELS];
    uint32_t closed;
    FSCHED__ALIGN_LINE uint32_t size; /* written under the lock */
} fsched__affine;

static void fsched__affine_init(fsched__affine *q) {
    memset(q, 0, sizeof *q);
    fsched__mutex_init(&q->lock);
}

static void fsched__affine_destroy(fsched__affine *q) { fsched__mutex_destroy(&q->lock); }

/* Queues p; 0 when the queue is closed. */
static int fsched__affine_put(fsched__affine *q, fsched__placed *p) {
    fsched__mutex_lock(&q->lock);
    if (q->closed) {
        fsched__mutex_unlock(&q->lock);
        return 0;
    }
    p->next = NULL;
    if (q->tail[p->level]) q->tail[p->level]->next = p;
    else q->head[p->level] = p;
    q->tail[p->level] = p;
    /* relaxed: a hint; the job itself is handed over by the mutex */
    FSCHED__STORE(&q->size, q->size + 1u, FSCHED__RELAXED);
    fsched__mutex_unlock(&q->lock);
    return 1;
}

/* Whether slot `index` (a worker thread when `worker`) may run p. */
static inline int fsched__placed_allows(const fsched__placed *p, uint32_t index, int worker) {
    if (p->slot >= 0) return (uint32_t)p->slot == index;
    if (!p->workers) return 1;
    return worker && index < 64 && ((p->workers >> index) & 1u);
}

/* Takes the oldest job of the highest level that slot `index` may run, or NULL. Relaxed,
   the size: a look before the lock, which hands the job over; a put notifies its slot
   after it (fsched__place), and the latch orders the two. */
static fsched__placed *fsched__affine_take(fsched__affine *q, uint32_t index, int worker) {
    fsched__placed *p = NULL, *prev;
    uint32_t level;
    if (!FSCHED__LOAD(&q->size, FSCHED__RELAXED)) return NULL;
    fsched__mutex_lock(&q->lock);
    for (level = FSCHED__LEVELS; level-- > 0 && !p;) {
        for (prev = NULL, p = q->head[level]; p; prev = p, p = p->next)
            if (fsched__placed_allows(p, index, worker)) break;
        if (!p) continue;
        if (prev) prev->next = p->next;
        else q->head[level] = p->next;
        if (q->tail[level] == p) q->tail[level] = prev;
        FSCHED__STORE(&q->size, q->size - 1u, FSCHED__RELAXED);
    }
    fsched__mutex_unlock(&q->lock);
    return p;
}

/* ===================================================================================== */
/*  wait & sleep: the scheduler's state, its clock, holds, core latches, wait lists     */
/* ===================================================================================== */

/* A worker's core latch says whether something was posted for it in particular (a fiber
   made ready, termination, a drained scheduler). Its owner moves it UNSET -> SLEEPY ->
   SLEEPING on its way to sleep and gives up if it finds it SET; whoever posts swaps in
   SET and unparks the owner only if it was SLEEPING. */
#define FSCHED__LATCH_UNSET 0u
#define FSCHED__LATCH_SLEEPY 1u
#define FSCHED__LATCH_SLEEPING 2u
#define FSCHED__LATCH_SET 3u

/* One word counts the workers that sleep (bits 0-15) and that are inactive, searching or
   sleeping (bits 16-31), and holds the jobs event counter (bits 32-63). The counter is
   even ("sleepy") after a worker announced it may sleep, and is made odd by the next
   publication of work, so a worker about to sleep sees whether work was published since
   it last searched. */
#define FSCHED__SLEEPING_ONE ((uint64_t)1)
#define FSCHED__INACTIVE_ONE ((uint64_t)1 << 16)
#define FSCHED__JEC_ONE ((uint64_t)1 << 32)
#define FSCHED__SLEEPING(c) ((uint32_t)((c)&0xffffu))
#define FSCHED__INACTIVE(c) ((uint32_t)(((c) >> 16) & 0xffffu))
#define FSCHED__JEC(c) ((uint32_t)((c) >> 32))

/* Idle rounds: search and spin, announce sleepiness, search twice more, then sleep. A
   few microseconds in all: enough for work that comes in bursts, little enough that an
   idle scheduler woken a thousand times a second stays near 1% of a core. */
#if FSCHED__THREADS
#define FSCHED__ROUNDS_UNTIL_SLEEPY 10u
#define FSCHED__ROUNDS_UNTIL_SLEEP 12u
#else /* one thread: only an interrupt handler could post meanwhile, and it wakes a sleep */
#define FSCHED__ROUNDS_UNTIL_SLEEPY 1u
#define FSCHED__ROUNDS_UNTIL_SLEEP 2u
#endif
#define FSCHED__SPIN_PER_ROUND 32u

/* Counts of work begun and ended, compared for equality only, and of fibers that live,
   which memory bounds: 64-bit with threads, whose many workers may run billions of units
   while fsched_destroy reads the counts one after another; without threads the core's
   word, as nothing runs while the one thread reads them (a 32-bit core pays twice for
   64-bit arithmetic, masked from interrupts). */
#if FSCHED__THREADS
typedef uint64_t fsched__work_count;
typedef int64_t fsched__fiber_count;
#else
typedef uintptr_t fsched__work_count;
typedef intptr_t fsched__fiber_count;
#endif

typedef struct fsched__idle {
    uint32_t rounds;
    uint32_t jec;      /* the jobs event counter when sleepiness was announced */
    uint32_t inactive; /* counted in the inactive workers */
} fsched__idle;

/* ---- the scheduler and its slots ------------------------------------------------- */

typedef struct fsched__waiter fsched__waiter;

/* A detached task. Tasks are carved from slabs owned by a worker and go back to that
   worker's free list (through its remote-free stack when another worker ran them). */
typedef struct fsched__task {
    fsched__job job;
    void (*fn)(void *);
    void *arg;
    const char *name;            /* for traces and overflow reports; NULL: none */
    fsched_wait_group *wait_group;
    int leased;                  /* counted by its group's lease, not by the count itself */
    struct fsched__task *next;   /* free lists */
    struct fsched__worker *home; /* owner of the slab; NULL: allocated alone */
    void *copy;                  /* a copy too large for `data`, or NULL */
    size_t copy_size;
    __attribute__((aligned(16))) unsigned char data[FSCHED_TASK_INLINE_BYTES];
} fsched__task;

#if defined(FSCHED__OS_NONE)
#define FSCHED__TASKS_PER_SLAB 15u /* allocated as spawns need them: small steps */
#else
#define FSCHED__TASKS_PER_SLAB 63u
#endif
typedef struct fsched__task_slab {
    struct fsched__task_slab *next;
    fsched__task tasks[FSCHED__TASKS_PER_SLAB];
} fsched__task_slab;

/* A slot of the scheduler: a worker thread, or a thread bound with fsched_bind. */
#if FSCHED__THREADS
#define FSCHED__SPARE_BATCH 32u /* fiber blocks a worker takes from its pool at once */
#endif

typedef struct fsched__worker {
    fsched__deque deque;     /* normal work */
    fsched__cl high, low;    /* placed jobs of the other levels (always public) */
    fsched__affine affine;   /* placed jobs that only some slots may run */
    fsched__placed *local;   /* owner only: pipeline nodes to run next, here (LIFO) */
    uint32_t finds;          /* owner only: searches since work from outside went first */
    struct fsched_sched *sched;
    uint32_t index;
    uint32_t bound;          /* a slot for fsched_bind rather than a worker thread */
    uint32_t own_calls;      /* bound, owner only: fork-join calls of the thread's own code
                                in progress (fsched__own_call_begin) */
    int32_t cpu;             /* worker threads: the CPU it is pinned to; -1: none */
    uint64_t rng;            /* victim selection */
    fsched__thread *thread;  /* the thread in the slot */
    fsched_fiber *root;      /* that thread's own context */
    /* fibers, owner only */
    fsched_fiber *idle;      /* parked in the scheduling loop, ready to take over */
    uint32_t idle_count;
    fsched_fiber *live;      /* every fiber of the slot but the root, for debuggers */
#if FSCHED__THREADS
    fsched_fiber *spare[2u * FSCHED__SPARE_BATCH]; /* blocks of ended loop fibers, for
                                new ones: taken from and given to the pool in batches */
    uint32_t spare_count;
#endif
    uint32_t root_parked;    /* the root waits, parked, for the loop (fsched__schedule) */
    int (*until)(struct fsched__worker *w); /* what the parked root waits for; NULL: the
                                                scheduler's end (worker threads) */
    fsched_fiber *retire;    /* freed by whichever fiber the next switch resumes */
    fsched_fiber *ready_head, *ready_tail; /* FIFO of fibers to resume */
    uint32_t movable_ready;  /* of which those that may be shed (move_ok) */
    uint32_t blocked;        /* suspended fibers of this slot */
    uint32_t yield_pending;  /* a fiber yielded: run one job before ready fibers */
    uint32_t yields_direct;  /* yields straight to a ready fiber since one went through
                                the loop */
    uint32_t join_ring_off;  /* the join ring is withheld from the fiber running here, a
                                movable task's (fsched__join_ring_follow) */
    /* tasks, owner only */
    fsched__task *free_tasks;
    fsched__task_slab *slabs;
    fsched__work_count spawned, completed; /* written by the owner, read by fsched_destroy */
    /* counts for fsched_get_stats: written by the owner (fsched__count), read by any */
    uint64_t jobs_run, steals, sleeps;
    uint64_t moves;          /* fibers it adopted from another slot */
    fsched__fiber_count fibers; /* made minus ended (adopted minus shed) */
    /* frame stacks (spawn and sync): the owner adds to the set, thieves read it */
    fsched__frames_group *frames_groups; /* the set (a list the owner appends to) */
    fsched__frames_group *frames_last;   /* owner only: its last group */
    uint32_t frames_count;   /* stacks made (written by the owner) ... */
    uint32_t frames_chunks;  /* ... and chunks of the set */
    uint32_t frames_kept;    /* owner only: stacks in frames_free */
    fsched_frames *frames_free; /* owner only: stacks no tree holds, linked by `outer`, ... */
    fsched_frames *frames_bare; /* ... and more of them, their pages given back */
    fsched_frames *frames_current; /* the innermost stack of the fiber that ran last with
                                      one: where thieves ask for frames */
    unsigned char *frames_region; /* owner only: memory mapped for stacks not yet made ... */
    uint32_t frames_region_left;  /* ... for this many */
    fsched_frame *stolen;    /* owner only: the frame just claimed, until it runs, ... */
    fsched_frames *stolen_from; /* ... and where it was */
    fsched__job frame_job;   /* runs it */
    /* timers: a binary min-heap of waiters by deadline */
    fsched__waiter **timers;
    uint32_t timer_count, timer_cap;
    /* written by other threads */
    FSCHED__ALIGN_LINE fsched_fiber *inbox; /* fibers made ready elsewhere (a stack) */
    fsched__task *remote_free;              /* tasks freed elsewhere (a stack) */
    uint32_t in_use;                        /* bound slots: taken */
    FSCHED__ALIGN_LINE uint32_t latch;
    uint32_t sleeping; /* parked and counted as sleeping: a wake for work may take it */
    uint32_t polls;    /* sleeps in the poller: a wake interrupts the poll (fsched__io_sleep) */
    int hook_pending;  /* owner only: the poll hook's answer before this idle worker sleeps */
    uint64_t wakeups;  /* for fsched_get_stats: added to by wakers */
    fsched__parker parker;
#if FSCHED__THREADS
    fsched__os_thread os_thread;
#endif
#if FSCHED__TRACING
    struct fsched__trace_buffer *trace; /* written by the slot's thread alone */
#endif
} fsched__worker;

/* Whether w is a slot for fsched_bind: every slot is without threads (a constant, so
   that what only worker threads do is left out). */
#define FSCHED__BOUND(w) (!FSCHED__THREADS || (w)->bound)

/* The ring fsched_join's inline path queues on: the slot's, while its thread occupies a
   slot and may join (not in a poll hook), else NULL. Set with the thread's worker. */
#if defined(FSCHED__JOIN_RING) && !defined(FIBERSCHED_STATIC)
#if FSCHED__THREADS
__thread
#endif
    fsched__ring *fsched__join_ring;
#endif

#if defined(FSCHED__JOIN_RING_CALL)
/* Not inlined: each call reads the thread pointer anew (see fsched__join_inline). */
FIBERSCHED_API FSCHED__NOINLINE fsched__ring *fsched__join_ring_now(void) {
    fsched__ring *r = fsched__join_ring;
    __asm__ __volatile__("" : "+r"(r)); /* not a pure function: never merged */
    return r;
}
#endif

/* Makes r the ring of the calling thread's joins; returns the one it replaces. */
static fsched__ring *fsched__join_ring_swap(fsched__ring *r) {
#if defined(FSCHED__JOIN_RING)
    fsched__ring *old = fsched__join_ring;
    fsched__join_ring = r;
    return old;
#else
    (void)r;
    return NULL;
#endif
}

/* Owner, as f (a fiber of w) begins or goes on running: fsched_join's inline path queues
   on w's ring, which a movable task must not use (it may resume on another worker
   between queueing its second half and taking it back): the ring is withheld while one
   runs, and its joins take the library's path, which pins it. Writes only on a change. */
#if defined(FSCHED__JOIN_RING)
static FSCHED__NOINLINE void fsched__join_ring_set(fsched__worker *w, uint32_t off) {
    w->join_ring_off = off;
    fsched__join_ring_swap(off ? NULL : &w->deque.ring);
}

static inline void fsched__join_ring_follow(fsched__worker *w, const fsched_fiber *f) {
    /* bound slots have no ring to give */
    if (FSCHED__UNLIKELY(f->movable_task != w->join_ring_off) && !FSCHED__BOUND(w))
        fsched__join_ring_set(w, f->movable_task);
}
#else
static inline void fsched__join_ring_follow(fsched__worker *w, const fsched_fiber *f) {
    (void)w; /* no ring to withhold */
    (void)f;
}
#endif

/* Frame stacks (spawn and sync), defined with fork-join. The scheduling loop reaches the
   code that steals and offers frames through pointers that the first frame stack sets,
   so that a program that never spawns this way does not link it (microcontrollers). */
typedef struct fsched__frames_code {
    fsched__job *(*steal)(fsched__worker *w, fsched__worker *v);
    void (*offer_all)(fsched_fiber *f);
    int (*visible)(fsched__worker *v); /* whether v offers a frame */
    void (*destroy)(fsched__worker *w); /* frees w's frame stacks */
} fsched__frames_code;
static const fsched__frames_code *fsched__frames_linked;

/* That code, once any frame stack was made (else NULL). Relaxed: written once, before any
   frame stack can offer a frame; a thread that saw an offer (its acquire or seq_cst load
   of the offered part) sees the pointer too. */
static inline const fsched__frames_code *fsched__frames_used(void) {
    return FSCHED__LOAD(&fsched__frames_linked, FSCHED__RELAXED);
}

/* Whether v offers a frame, for fsched__work_visible. Its set of stacks first: published
   (release) after the code was linked, so a thread that sees a set sees the code. */
static int fsched__frames_offered(fsched__worker *v) {
    return FSCHED__LOAD(&v->frames_groups, FSCHED__SEQ_CST) && fsched__frames_used()->visible(v);
}

/* The worker threads of s: none without threads, a constant, so that their code is
   left out. */
#define FSCHED__N_THREADS(s) (FSCHED__THREADS ? (s)->n_threads : 0u)

#define FSCHED__SCHED_LIVE 0x46534348u /* "FSCH" */
#define FSCHED__SCHED_DEAD 0xdead5c4eu

struct fsched_sched {
    uint32_t magic;
#if defined(FSCHED__OS_NONE)
    fsched__live_entry live_entry; /* in the registry of live objects */
#endif
    uint32_t is_default;  /* the process's default scheduler (written under its claim) */
    uint32_t n_threads;   /* worker threads */
    uint32_t n_slots;     /* worker threads, bound slots, and one for fsched_destroy */
    uint32_t started;     /* worker threads started */
    fsched__worker **slots;
    fsched_stack_pool *stacks;
    fsched_allocator allocator;
    fsched_logger logger;
    uint64_t (*clock)(void *user);
    void *clock_user;
    uint32_t movable_tasks; /* desc.movable_tasks */
    const struct fsched__watch *watch; /* how workers look out, once a poller or a poll
                             hook was made (NULL: never; read every turn, written once:
                             kept off the lines others write) */
    FSCHED__ALIGN_LINE uint64_t counters;
    FSCHED__ALIGN_LINE fsched__injector injector;
    FSCHED__ALIGN_LINE uint32_t closing;   /* fsched_destroy has begun */
    uint32_t terminating;                  /* workers leave their loops */
    uint32_t wake_cursor;                  /* where the next search for a sleeper starts */
    fsched__worker *drainer;               /* the slot of the thread in fsched_destroy */
    fsched__work_count external_begun;     /* work begun outside the slots: spawns, runs */
    fsched__work_count external_ended;     /* of that, what ended outside the slots */
    uint32_t fiber_ids;   /* atomic: ids given to fibers so far (off the lines read in steals) */
    FSCHED__ALIGN_LINE uint32_t transit_lock; /* fibers shed, not adopted yet: */
    fsched_fiber *transit;                    /* linked by live_prev/next (debuggers) */
    uint32_t fibers_moving;                   /* their count (for fsched_stats) */
    FSCHED__ALIGN_LINE uint32_t holds;     /* calls from outside that still touch s */
    void (*idle)(void *user);              /* desc.idle */
    void *idle_user;
    void (*worker_start)(void *user, uint32_t worker); /* desc.worker_start, ... */
    void (*worker_stop)(void *user, uint32_t worker);
    void *worker_user;
    char worker_name[FSCHED__THREAD_NAME_BYTES]; /* the prefix of worker threads' names */
    uint32_t said_unattended;              /* spawns found no thread to run them: said */
#if defined(FSCHED__INTERRUPTS)
    struct fsched__task *reserve;          /* desc.interrupt_tasks records, */
    uint32_t reserve_count;
    struct fsched__task *reserve_free;     /* of which these are free (interrupts masked) */
#endif
    /* the outside world (waits on fds, the poll hook) */
    FSCHED__ALIGN_LINE uint64_t watch_next; /* when busy workers next look into the poller */
    uint64_t hook_next;                    /* ... and next call the poll hook */
    uint32_t fd_waits;                     /* fd waits under way */
    uint64_t fd_registrations, fd_events;  /* relaxed counts (fsched_stats) */
    struct fsched__io *io;                 /* the poller, made at the first fd wait */
    fsched_poll_fn poll_fn;                /* the hook, and its user and interval: */
    void *poll_user;                       /* written under poll_busy */
    uint64_t poll_interval;
    uint32_t poll_busy;                    /* bit 0: a lock, held by a call of the hook or by
                                              fsched_set_poll (FSCHED__POLL_CALLING too
                                              during a call); 2 more for each
                                              fsched_set_poll waiting for it, which calls
                                              give way to */
#if FSCHED__TRACING
    uint64_t trace_origin;                 /* the clock when the scheduler was created */
    uint32_t trace_events;                 /* per slot */
#endif
};

#define FSCHED__IDLE_FIBERS_MAX 16u

/* How the layers below io reach it: the io layer, above them, installs this in
   s->watch once there is something to watch (a poller or a poll hook), for good. */
typedef struct fsched__io fsched__io;
typedef struct fsched__watch {
    void (*tick)(struct fsched__worker *w);    /* between tasks: a look, if one is due */
    int (*poll_call)(fsched_sched *s);         /* the hook, before a worker may sleep */
    int (*block)(struct fsched__worker *w, uint64_t deadline); /* sleep watching */
    void (*interrupt)(fsched_sched *s);        /* ends the sleep of the poller's owner */
    void (*close)(fsched_sched *s);            /* fsched_destroy has begun */
    void (*free)(fsched_sched *s);             /* the scheduler is being freed */
} fsched__watch;

/* The watch of s, or NULL (relaxed: a hint; what it watches is published otherwise). */
static const fsched__watch *fsched__watch_of(const fsched_sched *s) {
    return FSCHED__LOAD(&s->watch, FSCHED__RELAXED);
}

/* ---- time ------------------------------------------------------------------------ */

static uint64_t fsched__sched_now(const fsched_sched *s) {
    return s && s->clock ? s->clock(s->clock_user) : fsched__now_ns();
}

static uint64_t fsched__clock_ns(void) {
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    return fsched__sched_now(w ? w->sched : NULL);
}

/* Whether s measures time: always with an OS, else with a desc.clock (without, its
   clock reads 0 for ever). */
static int fsched__sched_clocked(const fsched_sched *s) { return FSCHED__OS || s->clock; }

/* Whether timed waits can work here. */
static int fsched__have_clock(void) {
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    return w ? fsched__sched_clocked(w->sched) : FSCHED__OS;
}

/* ---- holding a scheduler from outside ----
   A thread that is not one of s's slots (a plain thread, or a task of another scheduler)
   may touch s only while it holds it: fsched_destroy frees s only once no call holds it.
   A call that starts from a pointer the caller passed enters through the registry
   (fsched__sched_enter), which refuses a destroyed scheduler without reading it; a call
   that reaches s through live work (waking a fiber of s, completing a pipeline node of a
   run on s) holds it directly, for as long as it touches it after making that work
   runnable: the work may finish, and s be destroyed, before the call returns. */

static void fsched__sched_hold(fsched_sched *s) {
    /* relaxed: the caller reaches s through work that is still outstanding; that work
       ends, in a release that fsched_destroy acquires, only after this increment, so
       destroy sees it (or the decrement) before it frees s */
    FSCHED__FETCH_ADD(&s->holds, 1u, FSCHED__RELAXED);
}

static void fsched__sched_release(fsched_sched *s) {
    FSCHED__POINT(HELD);
    /* release: the caller's last touch of s; destroy reads the count with acquire */
    FSCHED__FETCH_SUB(&s->holds, 1u, FSCHED__RELEASE);
}

/* FSCHED_OK unless fsched_destroy has begun. Under the registry's lock, or holding s
   (taken under it): the lock orders the read after destroy's write of the flag, or
   destroy's drain after the hold (relaxed: the lock, or the hold, orders it). */
static fsched_result fsched__sched_refuse_closing(const fsched_sched *s, const char *what) {
    if (FSCHED__LOAD(&s->closing, FSCHED__RELAXED))
        return FSCHED__MISUSE(&s->logger, FSCHED_ERR_WRONG_STATE,
                              "%s: the scheduler is being destroyed", what);
    return FSCHED_OK;
}

/* Under the registry's lock: FSCHED_OK when s is a live scheduler, and (with
   `refuse_closing`) fsched_destroy has not begun; else why not. */
static fsched_result fsched__sched_open(const fsched_sched *s, int refuse_closing,
                                        const char *what) {
    if (!s || !fsched__live_has(s) || s->magic != FSCHED__SCHED_LIVE)
        return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "%s: %s", what,
                              s ? "not a live scheduler (destroyed?)" : "s is NULL");
    return refuse_closing ? fsched__sched_refuse_closing(s, what) : FSCHED_OK;
}

/* Enters s from a pointer the caller passed: FSCHED_OK, holding s, or why not (see
   fsched__sched_open). */
static fsched_result fsched__sched_enter(fsched_sched *s, int refuse_closing, const char *what) {
    fsched_result r;
    fsched__live_read_lock();
    r = fsched__sched_open(s, refuse_closing, what);
    if (r == FSCHED_OK) /* relaxed: the registry's lock orders it against destroy */
        FSCHED__FETCH_ADD(&s->holds, 1u, FSCHED__RELAXED);
    fsched__live_read_unlock();
    return r;
}

/* Whether nothing would run s's queued tasks: it has no worker threads, and no thread is
   bound to it (nor destroying it). A hint: a thread may bind at any moment. */
static int fsched__sched_unattended(const fsched_sched *s) {
    uint32_t i;
    if (FSCHED__N_THREADS(s)) return 0;
    for (i = 0; i < s->n_slots; i++) /* relaxed: a hint, as said */
        if (FSCHED__LOAD(&s->slots[i]->in_use, FSCHED__RELAXED)) return 0;
    return 1;
}

/* Debug builds: says once per scheduler that spawns wait for a thread to run them.
   Relaxed: only who says it counts. */
static void fsched__say_unattended(fsched_sched *s) {
    if (!FSCHED__EXCHANGE(&s->said_unattended, 1u, FSCHED__RELAXED))
        fsched__log(&s->logger, FSCHED_LOG_WARNING,
                    "fsched_spawn: no thread is bound to this single-threaded scheduler: its "
                    "tasks wait until one binds (its waits run them) or fsched_destroy");
}

/* ---- the core latch -------------------------------------------------------------- */

/* Posts an event for w: unparks it if it sleeps. Any thread. */
static void fsched__notify(fsched__worker *w) {
    FSCHED__POINT(NOTIFY);
    /* acq_rel: releases what was posted (a fiber in the inbox); the owner's acquiring
       exchange or CAS on the latch sees it */
    if (FSCHED__EXCHANGE(&w->latch, FSCHED__LATCH_SET, FSCHED__ACQ_REL) == FSCHED__LATCH_SLEEPING) {
        FSCHED__FETCH_ADD(&w->wakeups, (uint64_t)1, FSCHED__RELAXED); /* relaxed: a count */
        fsched__unpark(&w->parker);
#if defined(FSCHED__IO)
        /* seq_cst: after the unpark's exchange (see fsched__io_sleep) */
        if (FSCHED__LOAD(&w->polls, FSCHED__SEQ_CST)) fsched__watch_of(w->sched)->interrupt(w->sched);
#endif
    }
}

/* Whether the calling thread must hold w's scheduler to tell w something: it is not a
   slot of that scheduler (see fsched__sched_hold). */
static fsched_sched *fsched__hold_for(fsched__worker *w) {
    fsched__worker *self = FSCHED__THREAD_NOW.worker;
    if (self && self->sched == w->sched) return NULL;
    fsched__sched_hold(w->sched);
    return w->sched;
}

/* Tells w about what was posted for it, then lets go of the scheduler the caller held
   for it (fsched__hold_for), or NULL. */
static void fsched__tell(fsched__worker *w, fsched_sched *held) {
    fsched__notify(w);
    if (held) fsched__sched_release(held);
}

/* Counts the end of one unit of work of s (a task, a graph run, a pipeline run) for
   fsched_destroy: on w, a slot of s, or else from outside the slots. The caller's last
   touch of the work itself comes before: once it is counted, s may be destroyed. From
   outside, the caller does not hold s yet (it reached s through the work), so it holds
   it across the count, and tells the drainer, which sleeps while it waits for the end. */
static void fsched__work_ended(fsched_sched *s, fsched__worker *w) {
    if (w && w->sched == s) {
        /* release: the work's effects happen before destroy, which reads the count with
           acquire (and is told by this slot's next fsched__idle_begin) */
        FSCHED__STORE_THREADS(&w->completed, w->completed + 1, FSCHED__RELEASE);
        return;
    }
    fsched__sched_hold(s);
    /* seq_cst, both: against destroy's closing store and its seq_cst read of this count,
       either destroy counts this end or this sees destroy begun and tells its drainer */
    FSCHED__FETCH_ADD(&s->external_ended, (fsched__work_count)1, FSCHED__SEQ_CST);
    if (FSCHED__LOAD(&s->closing, FSCHED__SEQ_CST)) {
        /* acquire, though the closing load above orders it already: the drainer is
           stored before the flag */
        fsched__worker *drainer = FSCHED__LOAD(&s->drainer, FSCHED__ACQUIRE);
        if (drainer) fsched__notify(drainer);
    }
    fsched__sched_release(s);
}

/* ---- wait lists: the waiters of every blocking object ---------------------------- */

/* Every primitive keeps its waiters in a wait list: a spinlock held for a few
   instructions (never across a switch) and a FIFO of waiter records that live on the
   waiters' stacks. A waiter is ended by exactly one party: the one whose CAS moves its
   state from WAITING (a waker, its timer, or the deadlock breaker).

   A waiter may return, and free the primitive, the moment it sees the signal, so a waker
   decides everything that touches the primitive inside one hold of the list's lock: the
   change of state, the unlinking. _destroy takes the lock, so it waits for a waker still
   inside, and every successful wait waits for the lock to be free before it returns
   (fsched__wait_list_quiesce). The wakes themselves (a futex wake, a worker told that a
   fiber is ready) come after the lock is released, so that the woken party does not run
   into the lock still held by a waker that was preempted right after waking it: they
   touch no memory of the primitive. A thread waiter's record is left alone after its
   state changed: on Linux it sleeps on its own state word (a futex wake touches no user
   memory); elsewhere the waker takes the waiting thread's parker mutex before its CAS
   and holds it until it has broadcast, and the waiter takes that mutex once before it
   returns. */

struct fsched__waiter {
    fsched__waiter *next, *prev;
    fsched_wait_list *list;   /* where it waits; NULL for a sleep */
    fsched_fiber *fiber;      /* a waiting fiber and its worker, ... */
    fsched__worker *worker;
    fsched__parker *parker;   /* ... or a waiting thread; neither: a worker helping inline */
    uint64_t deadline;        /* 0: none */
    uint32_t state;           /* atomic: WAITING (WAKING), then WOKEN, TIMED_OUT or ABORTED */
    uint32_t linked;          /* in `list`, under its lock */
    uint32_t timer;           /* position in the worker's heap + 1; 0: not there */
    uint32_t handed;          /* a mutex waiter ended with the mutex locked for it */
    uint64_t since;           /* a mutex waiter: when it first queued (0: no clock) */
    fsched_fiber *next_fiber; /* what the worker switches to when the fiber blocks */
    const char *what;         /* what it waits on, for debuggers: "event", "mutex"... */
    const void *object;       /* ... and which one */
    const void *relocks;      /* a condition variable's waiter: the mutex it locks next */
};

#define FSCHED__WAIT_WAITING 0u
#define FSCHED__WAIT_WOKEN 1u
#define FSCHED__WAIT_TIMED_OUT 2u
#define FSCHED__WAIT_ABORTED 3u
#define FSCHED__WAIT_WAKING 4u /* a thread's waker won, and sets WOKEN under the parker's mutex */
#define FSCHED__WAIT_NO_MEMORY 5u /* no fiber to wait on, nothing to wait for inline */

/* A wake decided under a wait list's lock, carried out after it. */
typedef struct fsched__wake {
    fsched__worker *worker;   /* tell it that a fiber is ready (or its inline wait ended), */
    fsched_sched *held;       /* then let go of this scheduler, held meanwhile (or NULL) */
    uint32_t *word;           /* or wake the thread sleeping on this futex word, */
    fsched__parker *parker;   /* or, under this parker's mutex, set *word WOKEN and broadcast */
} fsched__wake;

#define FSCHED__WAKES_MAX 8u
typedef struct fsched__wakes {
    uint32_t n;
    fsched__wake v[FSCHED__WAKES_MAX];
} fsched__wakes;

/* What a thread waiter's waker sets its state to: WOKEN where the thread sleeps on the
   word itself; where it sleeps on its parker's condition variable, WAKING, which keeps it
   waiting (its timeout has lost) until the wake, after the list's lock, sets WOKEN under
   the parker's mutex: no lock is held across another. */
#if defined(FSCHED__PARKER_COND)
#define FSCHED__WAIT_WAKER_STATE FSCHED__WAIT_WAKING
#else
#define FSCHED__WAIT_WAKER_STATE FSCHED__WAIT_WOKEN
#endif

/* Wakes a thread that waits on the waiter whose state is *word, its waker having won. */
#if defined(FSCHED__PARKER_FUTEX)
static void fsched__thread_wake(uint32_t *word, fsched__parker *parker) {
    /* The waiter may have returned: the word is then a dead or reused stack slot. The
       kernel does not read it, and a sleeper on a reused slot rechecks its own word;
       Valgrind does read it, so it is told not to report this call. */
    (void)parker;
    fsched__valgrind_reports(0);
    fsched__futex_wake(word);
    fsched__valgrind_reports(1);
}
#elif defined(FSCHED__PARKER_COND)
static void fsched__thread_wake(uint32_t *word, fsched__parker *parker) {
    /* the waiter reads WOKEN under this mutex, so it leaves only after the unlock;
       release: pairs with its acquire load of the state (the mutex orders it too) */
    fsched__parker_lock(parker);
    FSCHED__STORE(word, FSCHED__WAIT_WOKEN, FSCHED__RELEASE);
    fsched__parker_signal(parker, 1);
    fsched__parker_unlock(parker);
}
#else
static void fsched__thread_wake(uint32_t *word, fsched__parker *parker) {
    (void)word; /* no thread waits: nothing is recorded */
    (void)parker;
}
#endif

static void fsched__wake_do(const fsched__wake *k) {
    if (k->worker) fsched__tell(k->worker, k->held);
    else if (k->word) fsched__thread_wake(k->word, k->parker);
}

/* Under the lock: records a wake for later, or, when the record is full, does it now
   (correct, only slower for the woken). */
static void fsched__wake_add(fsched__wakes *wakes, fsched__worker *worker, fsched_sched *held,
                             uint32_t *word, fsched__parker *parker) {
    fsched__wake k;
    k.worker = worker;
    k.held = held;
    k.word = word;
    k.parker = parker;
    if (wakes->n < FSCHED__WAKES_MAX) wakes->v[wakes->n++] = k;
    else fsched__wake_do(&k);
}

#define FSCHED__LIST_DEAD 0xdead1157u /* the lock word of a destroyed primitive */

static void fsched__wait_list_lock(fsched_wait_list *l) { fsched__spin_lock(&l->lock); }

static void fsched__wait_list_unlock(fsched_wait_list *l) {
    fsched__spin_unlock(&l->lock); /* the last access of a waker */
}

/* Unlocks the list, then carries out the wakes decided under its lock. */
static void fsched__wait_list_unlock_wake(fsched_wait_list *l, fsched__wakes *wakes) {
    uint32_t i;
    fsched__spin_unlock(&l->lock); /* the last access of a waker to the primitive */
    FSCHED__POINT(UNLOCKED);
    for (i = 0; i < wakes->n; i++) fsched__wake_do(&wakes->v[i]);
    wakes->n = 0;
}

/* Under the lock: wt is in l now. The count is written under the lock and read without
   it (a hint for signal paths). Relaxed: the lock orders its writes; a condition
   variable's signal, the one read without it that matters, is ordered after the append
   by the caller's mutex. */
static void fsched__wait_list_joined(fsched_wait_list *l, fsched__waiter *wt) {
    wt->list = l;
    wt->linked = 1;
    FSCHED__STORE(&l->count, FSCHED__LOAD(&l->count, FSCHED__RELAXED) + 1u, FSCHED__RELAXED);
}

static void fsched__wait_list_append(fsched_wait_list *l, fsched__waiter *wt) {
    wt->next = NULL;
    wt->prev = (fsched__waiter *)l->tail;
    if (l->tail) ((fsched__waiter *)l->tail)->next = wt;
    else l->head = wt;
    l->tail = wt;
    fsched__wait_list_joined(l, wt);
}

/* As fsched__wait_list_append, at the head (a waiter that was woken and lost a race). */
static void fsched__wait_list_prepend(fsched_wait_list *l, fsched__waiter *wt) {
    wt->prev = NULL;
    wt->next = (fsched__waiter *)l->head;
    if (l->head) ((fsched__waiter *)l->head)->prev = wt;
    else l->tail = wt;
    l->head = wt;
    fsched__wait_list_joined(l, wt);
}

/* Relaxed, the count: as in fsched__wait_list_joined. */
static void fsched__wait_list_remove(fsched_wait_list *l, fsched__waiter *wt) {
    if (wt->prev) wt->prev->next = wt->next;
    else l->head = wt->next;
    if (wt->next) wt->next->prev = wt->prev;
    else l->tail = wt->prev;
    wt->linked = 0;
    FSCHED__STORE(&l->count, FSCHED__LOAD(&l->count, FSCHED__RELAXED) - 1u, FSCHED__RELAXED);
}

/* A waiter that ended its own wait (a timeout, a deadlock, no memory) leaves its list,
   unless a waker took it off first. Out of line without threads: four paths end so. */
static FSCHED__NOINLINE_ALONE void fsched__wait_list_leave(fsched__waiter *wt) {
    if (!wt->list) return;
    fsched__wait_list_lock(wt->list);
    if (wt->linked) fsched__wait_list_remove(wt->list, wt);
    fsched__wait_list_unlock(wt->list);
}

/* ===================================================================================== */
/*  trace: events recorded per slot                                                     */
/* ===================================================================================== */

#if FSCHED__TRACING

/* 64 bytes: a cache line */
typedef struct fsched__trace_event {
    uint64_t begin, end; /* the scheduler's clock; equal for an instant */
    uint64_t code;       /* the user's function a span of work ran; 0: none */
    uint32_t arg;        /* see fsched__trace_kind */
    uint32_t fiber;      /* the track: the fiber's number in its slot, from 1 */
    uint8_t kind;
    char name[FSCHED__NAME_BYTES - 1];
} fsched__trace_event;

/* Written by the slot's thread alone, so recording takes no lock. A reader sees the
   events below `count`, and those are never written again: a full buffer drops new
   events rather than overwrite old ones. */
typedef struct fsched__trace_buffer {
    uint64_t count;   /* events recorded */
    uint64_t dropped; /* events that found the buffer full */
    uint32_t capacity;
    uint32_t fibers;  /* track numbers handed out */
    fsched__trace_event *events;
} fsched__trace_buffer;

static fsched__trace_buffer *fsched__trace_buffer_new(const fsched_allocator *a,
                                                      uint32_t capacity) {
    fsched__trace_buffer *b;
    size_t bytes = (size_t)capacity * sizeof(fsched__trace_event);
    if (bytes / sizeof(fsched__trace_event) != capacity) return NULL; /* 32-bit overflow */
    b = (fsched__trace_buffer *)fsched__alloc(a, sizeof *b, FSCHED__CACHE_LINE);
    if (!b) return NULL;
    memset(b, 0, sizeof *b);
    b->capacity = capacity;
    b->events = (fsched__trace_event *)fsched__alloc(a, bytes, FSCHED__CACHE_LINE);
    if (!b->events) {
        fsched__free(a, b, sizeof *b, FSCHED__CACHE_LINE);
        return NULL;
    }
    memset(b->events, 0, bytes); /* its page faults now, not in the middle of a trace */
    return b;
}

static void fsched__trace_buffer_free(const fsched_allocator *a, fsched__trace_buffer *b) {
    fsched__free(a, b->events, (size_t)b->capacity * sizeof *b->events, FSCHED__CACHE_LINE);
    fsched__free(a, b, sizeof *b, FSCHED__CACHE_LINE);
}

/* The clock of the calling thread's scheduler; 0 outside any, or when its buffer is
   full (the span will be dropped: no need to read the clock). Relaxed: the count is
   this thread's own. */
static uint64_t fsched__trace_now(void) {
    fsched__worker *w = fsched__thread_get()->worker;
    if (!w || FSCHED__LOAD(&w->trace->count, FSCHED__RELAXED) >= w->trace->capacity) return 0;
    return fsched__sched_now(w->sched);
}

/* Records a span from `begin` to now (or an instant) on the running fiber's track of the
   calling thread's slot. Threads outside any scheduler record nothing. */
static void fsched__trace_record(fsched__trace_kind kind, uint64_t begin, uintptr_t code,
                                 const char *name, uint32_t arg) {
    fsched__thread *t = fsched__thread_get();
    fsched__worker *w = t->worker;
    fsched__trace_buffer *b;
    fsched__trace_event *e;
    uint64_t n;
    size_t len = 0;
    if (!w) return;
    b = w->trace;
    /* relaxed: only this thread writes the count, and the dropped count, a statistic */
    n = FSCHED__LOAD(&b->count, FSCHED__RELAXED);
    if (n >= b->capacity) {
        FSCHED__STORE(&b->dropped, FSCHED__LOAD(&b->dropped, FSCHED__RELAXED) + 1,
                      FSCHED__RELAXED);
        return;
    }
    e = &b->events[n];
    e->end = fsched__sched_now(w->sched);
    e->begin = begin == FSCHED__TRACE_INSTANT ? e->end : begin;
    e->code = (uint64_t)code;
    e->arg = arg;
    e->kind = (uint8_t)kind;
    if (!t->current->trace_id) t->current->trace_id = ++b->fibers;
    e->fiber = t->current->trace_id;
    len = fsched__name_fit(name, sizeof e->name);
    if (len) memcpy(e->name, name, len);
    e->name[len] = 0;
    /* release: the event is complete before a reader that sees the new count reads it */
    FSCHED__STORE(&b->count, n + 1, FSCHED__RELEASE);
}

#endif /* FSCHED__TRACING */

/* ===================================================================================== */
/*  worker: ready fibers, fibers, timers, finding work, idling, the loop, threads       */
/* ===================================================================================== */
/* ---- ready fibers ---------------------------------------------------------------- */

static void fsched__ready_append(fsched__worker *w, fsched_fiber *f) {
    if (FSCHED__THREADS) w->movable_ready += f->move_ok; /* (never set without threads) */
    f->link = NULL;
    if (w->ready_tail) w->ready_tail->link = f;
    else w->ready_head = f;
    w->ready_tail = f;
}

/* Makes a suspended fiber of w runnable. On w's own thread it is queued and 0 returned.
   From any other thread it goes to w's inbox and 1 is returned: the caller then tells w
   with fsched__tell(w, *held), where *held is what the caller holds meanwhile (see
   fsched__hold_for), so that telling w may wait until a lock is released. */
static int fsched__post_ready(fsched__worker *w, fsched_fiber *f, fsched_sched **held) {
    fsched_fiber *head;
    if (FSCHED__THREAD_NOW.worker == w) {
        fsched__ready_append(w, f);
        return 0;
    }
    *held = fsched__hold_for(w);
    /* relaxed: a guess that the CAS checks; release: the fiber's state before it became
       ready is visible to w */
    head = FSCHED__LOAD(&w->inbox, FSCHED__RELAXED);
    do {
        f->link = head;
    } while (!FSCHED__CAS_WEAK(&w->inbox, &head, f, FSCHED__RELEASE, FSCHED__RELAXED));
    FSCHED__POINT(POSTED);
    return 1;
}

/* Makes a suspended fiber of w runnable again. Any thread. */
static void fsched__make_ready(fsched__worker *w, fsched_fiber *f) {
    fsched_sched *held;
    if (fsched__post_ready(w, f, &held)) fsched__tell(w, held);
}

static void fsched__adopt(fsched__worker *w, fsched_fiber *f);

/* Owner: consumes the latch, then moves fibers posted by other threads to the FIFO (in
   the order they were posted). The latch is reset first: a post after it sets it again.
   Relaxed, the looks before each exchange: a stale one is made good by the post's
   notify, which sets the latch after it; acquire, the latch's exchange: see
   fsched__notify. */
static void fsched__collect_posted(fsched__worker *w) {
    fsched_fiber *list, *rev = NULL;
    if (FSCHED__LOAD(&w->latch, FSCHED__RELAXED) == FSCHED__LATCH_SET) {
        if (FSCHED__THREADS) FSCHED__EXCHANGE(&w->latch, FSCHED__LATCH_UNSET, FSCHED__ACQUIRE);
        /* relaxed, without threads: a store does (a handler that sets the latch between
           the look and the store finds it set, and what it posted is collected below) */
        else FSCHED__STORE(&w->latch, FSCHED__LATCH_UNSET, FSCHED__RELAXED);
    }
    if (!FSCHED__LOAD(&w->inbox, FSCHED__RELAXED)) return;
    /* acquire: pairs with the release CAS of each post */
    list = FSCHED__EXCHANGE(&w->inbox, (fsched_fiber *)NULL, FSCHED__ACQUIRE);
    while (list) {
        fsched_fiber *next = list->link;
        list->link = rev;
        rev = list;
        list = next;
    }
    while (rev) {
        fsched_fiber *next = rev->link;
        if (FSCHED__THREADS && FSCHED__UNLIKELY(rev->in_transit))
            fsched__adopt(w, rev); /* forwarded to it */
        else fsched__ready_append(w, rev);
        rev = next;
    }
}

static fsched_fiber *fsched__ready_pop(fsched__worker *w) {
    fsched_fiber *f = w->ready_head;
    if (f) {
        w->ready_head = f->link;
        if (!w->ready_head) w->ready_tail = NULL;
        if (FSCHED__THREADS) w->movable_ready -= f->move_ok;
    }
    return f;
}

/* Owner: adds to one of its slot's counts. Relaxed: only the owner writes it (and so
   reads it plainly), and readers want a recent value, not an order. */
#define fsched__count(field, delta) \
    FSCHED__STORE_THREADS(&(field), (field) + (delta), FSCHED__RELAXED)

/* ---- fibers of a worker ---------------------------------------------------------- */

static void fsched__loop_main(void *pass);

/* A new id for a fiber of s (a loop fiber, or the root of a thread taking a slot), by which
   debuggers name it. Relaxed: it need only be unique. */
static uint32_t fsched__fiber_id(fsched_sched *s) {
    return FSCHED__FETCH_ADD(&s->fiber_ids, (uint32_t)1, FSCHED__RELAXED) + 1;
}

/* Owner: a new loop fiber of w joins its list (which debuggers walk), and leaves it when it
   ends; the count that fsched_get_stats reports follows. */
static void fsched__live_link(fsched__worker *w, fsched_fiber *f) {
    f->live_prev = NULL;
    f->live_next = w->live;
    if (w->live) w->live->live_prev = f;
    w->live = f;
    fsched__count(w->fibers, 1);
}

static FSCHED__NOINLINE_ALONE void fsched__live_unlink(fsched__worker *w, fsched_fiber *f) {
    if (f->live_prev) f->live_prev->live_next = f->live_next;
    else w->live = f->live_next;
    if (f->live_next) f->live_next->live_prev = f->live_prev;
    fsched__count(w->fibers, -1);
}

/* Blocks for loop fibers: a worker thread keeps spares of its own, taken from and given
   back to the pool in batches, one lock per batch, not per fiber (100,000 tasks that block
   at once take as many fibers); with one thread there is no lock to spare, and the pool
   is used as it is. */
#if FSCHED__THREADS
/* Owner: a block for a new loop fiber of w. */
static fsched_result fsched__block_take(fsched__worker *w, fsched_fiber **out) {
    if (!w->spare_count)
        w->spare_count = fsched__pool_take_cached(w->sched->stacks, w->spare, FSCHED__SPARE_BATCH);
    if (!w->spare_count) return fsched__pool_take(w->sched->stacks, out);
    *out = fsched__stack_recycle(w->spare[--w->spare_count]);
    (*out)->pool = w->sched->stacks;
    return FSCHED_OK;
}

/* Owner: the block of an ended loop fiber joins w's spares, and the older half of them
   goes back to the pool when they are many. */
static void fsched__block_give(fsched__worker *w, fsched_fiber *f) {
    w->spare[w->spare_count++] = f;
    if (w->spare_count == 2u * FSCHED__SPARE_BATCH) {
        fsched__pool_give_many(w->sched->stacks, w->spare, FSCHED__SPARE_BATCH);
        memmove(w->spare, w->spare + FSCHED__SPARE_BATCH, FSCHED__SPARE_BATCH * sizeof *w->spare);
        w->spare_count = FSCHED__SPARE_BATCH;
    }
}

/* Owner: w's spares go back to the pool. */
static void fsched__blocks_release(fsched__worker *w) {
    fsched__pool_give_many(w->sched->stacks, w->spare, w->spare_count);
    w->spare_count = 0;
}
#else
static fsched_result fsched__block_take(fsched__worker *w, fsched_fiber **out) {
    return fsched__pool_take(w->sched->stacks, out);
}

static void fsched__block_give(fsched__worker *w, fsched_fiber *f) {
    fsched__pool_give(w->sched->stacks, f);
}

static void fsched__blocks_release(fsched__worker *w) { (void)w; }
#endif

/* Owner: a fiber parked in the scheduling loop, from the idle pool or newly made. */
static fsched_fiber *fsched__idle_take(fsched__worker *w) {
    fsched_fiber *f = w->idle;
    if (f) {
        w->idle = f->link;
        w->idle_count--;
        return f;
    }
    if (fsched__block_take(w, &f) != FSCHED_OK) return NULL;
    if (fsched__fiber_prepare(f, fsched__loop_main, "fibersched worker") != FSCHED_OK) {
        fsched__fiber_release(f);
        return NULL;
    }
    f->owner = w;
    f->id = fsched__fiber_id(w->sched);
    fsched__live_link(w, f);
    return f;
}

/* Owner: ends a loop fiber of w that will never run again and keeps its block. */
static void fsched__spare_add(fsched__worker *w, fsched_fiber *f) {
    fsched__live_unlink(w, f);
    fsched__fiber_end(f);
    fsched__block_give(w, f);
}

/* Owner: parks the running fiber before a switch: a loop fiber in the idle pool (or
   retired, when the pool is full), the root as waiting for the loop (see
   fsched__schedule). */
static void fsched__idle_park(fsched__worker *w, fsched_fiber *self) {
    if (self == w->root) {
        w->root_parked = 1;
        return;
    }
    if (w->idle_count >= FSCHED__IDLE_FIBERS_MAX) {
        w->retire = self; /* freed once the switch has left its stack */
        return;
    }
    self->link = w->idle;
    w->idle = self;
    w->idle_count++;
}

/* Owner: the parked root is about to be resumed. */
static void fsched__unpark_root(fsched__worker *w) { w->root_parked = 0; }

/* Owner: frees the fiber retired by the switch that just completed. */
static inline void fsched__after_switch(fsched__worker *w) {
    if (FSCHED__UNLIKELY(w->retire != NULL)) {
        fsched_fiber *f = w->retire;
        w->retire = NULL;
        fsched__spare_add(w, f);
    }
}

/* Owner: switches from the running fiber to `to`, a fiber of this worker. Returns when
   the running fiber is resumed. */
static void fsched__switch_to(fsched__worker *w, fsched_fiber *to) {
    /* w's thread, not the thread-local address: inlined where a movable task waited
       before, a compiler may reuse that address, computed on another thread */
    fsched__thread *t = w->thread;
    fsched_fiber *from = t->current;
    void *sp = to->ctx.sp;
    int i;
    /* The frames the switch returns into are fetched together, from where `to` left
       up, rather than one miss after another as each return reaches the next: after a
       long wait (thousands of fibers woken at once) they have gone cold. A small
       stack's canary, checked when `to` next leaves its stack, lies far below what the
       fiber touches: its line is fetched while the switch runs. */
    for (i = 0; i < 4; i++) FSCHED__PREFETCH((const char *)sp + 64 * i);
    if (to->params.kind == FSCHED_STACK_SMALL)
        FSCHED__PREFETCH(to->stack_lo - FSCHED__CANARY_BYTES);
    to->ctx.sp = NULL;
    t->current = to;
    fsched__fiber_jump(from, to, sp, 0);
    /* from resumes, on the worker that owns it now: a movable task's may not be the one
       that switched away from it */
    w = (fsched__worker *)from->owner;
    fsched__after_switch(w);
    fsched__join_ring_follow(w, from);
    /* where thieves ask for frames (see fsched__frames_ask; release: they read the stack) */
    if (from->frames) FSCHED__STORE(&w->frames_current, from->frames, FSCHED__RELEASE);
}

/* Owner: the running fiber stops until someone makes it ready; the worker carries on
   with a ready fiber or, failing that, an idle one. `next` was taken by the caller
   (fsched__suspend_prepare), before it published the fiber as waiting. `what` and
   `object` say what it waits on, for debuggers. */
static void fsched__suspend(fsched__worker *w, fsched_fiber *next, const char *what,
                            const void *object) {
    fsched_fiber *self = w->thread->current; /* w's thread: see fsched__switch_to */
    FSCHED__TRACE(uint64_t trace_begin = fsched__trace_now();)
    next->ready_taken = 0;
    w->blocked++;
    self->wait_what = what;
    self->wait_object = object;
    fsched__switch_to(w, next);
    self->wait_what = NULL;
    ((fsched__worker *)self->owner)->blocked--; /* where it resumed */
    FSCHED__TRACE(fsched__trace_record(FSCHED__TRACE_BLOCKED, trace_begin, 0, what, 0);)
}

/* Owner: the fiber to switch to when the running one blocks, or NULL when no fiber can be
   had (out of memory): the caller then waits by running jobs inline. */
static fsched_fiber *fsched__suspend_prepare(fsched__worker *w) {
    fsched_fiber *next, *self = w->thread->current; /* see fsched__switch_to */
    if (self->frames) fsched__frames_used()->offer_all(self); /* frame stacks exist */
    next = fsched__ready_pop(w);
    if (!next) {
        if ((next = fsched__idle_take(w)) != NULL) return next;
        /* no memory for a loop fiber, which would empty the inbox: a fiber woken from
           another thread would stay there as long as this one waits */
        fsched__collect_posted(w);
        if (!(next = fsched__ready_pop(w))) return NULL;
    }
    next->ready_taken = 1;
    return next;
}

/* Owner: gives back a fiber taken by fsched__suspend_prepare when the wait turned out
   not to be needed: a ready fiber to the front of the queue, an idle one to the pool. */
static void fsched__suspend_cancel(fsched__worker *w, fsched_fiber *next) {
    if (next->ready_taken) {
        next->ready_taken = 0;
        if (FSCHED__THREADS) w->movable_ready += next->move_ok;
        next->link = w->ready_head;
        w->ready_head = next;
        if (!w->ready_tail) w->ready_tail = next;
    } else {
        fsched__idle_park(w, next);
        fsched__after_switch(w);
    }
}

/* Owner: frees the idle fibers and retired fibers of a slot. */
static void fsched__release_fibers(fsched__worker *w) {
    fsched_fiber *f = w->idle, *next;
    for (; f; f = next) {
        next = f->link;
        fsched__live_unlink(w, f);
        fsched__fiber_release(f);
    }
    w->idle = NULL;
    w->idle_count = 0;
    fsched__after_switch(w);
    fsched__blocks_release(w);
}

/* ---- timers: a binary min-heap of waiting fibers by deadline --------------------- */

/* The timers' code, reached through a pointer that the first deadline sets (a wait has
   a timer only with a deadline), so that a program that never waits with a timeout does
   not link it (microcontrollers). */
typedef struct fsched__timers_code {
    int (*add)(fsched__worker *w, fsched__waiter *wt);
    void (*remove)(fsched__worker *w, fsched__waiter *wt);
    void (*fire)(fsched__worker *w);
} fsched__timers_code;
static const fsched__timers_code *fsched__timers_linked;

/* That code, once a deadline was made. Relaxed: written once, with the same value by
   every thread; a slot's timers are added by the thread that made their deadlines, and
   used only while one is there. */
static inline const fsched__timers_code *fsched__timers(void) {
    return FSCHED__LOAD(&fsched__timers_linked, FSCHED__RELAXED);
}

static void fsched__timer_place(fsched__worker *w, uint32_t i, fsched__waiter *wt) {
    w->timers[i] = wt;
    wt->timer = i + 1;
}

static void fsched__timer_sift_up(fsched__worker *w, uint32_t i) {
    fsched__waiter *wt = w->timers[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (w->timers[parent]->deadline <= wt->deadline) break;
        fsched__timer_place(w, i, w->timers[parent]);
        i = parent;
    }
    fsched__timer_place(w, i, wt);
}

static void fsched__timer_sift_down(fsched__worker *w, uint32_t i) {
    fsched__waiter *wt = w->timers[i];
    for (;;) {
        uint32_t child = 2 * i + 1;
        if (child >= w->timer_count) break;
        if (child + 1 < w->timer_count && w->timers[child + 1]->deadline < w->timers[child]->deadline)
            child++;
        if (wt->deadline <= w->timers[child]->deadline) break;
        fsched__timer_place(w, i, w->timers[child]);
        i = child;
    }
    fsched__timer_place(w, i, wt);
}

/* Owner: adds a waiter with a deadline. 0 when the heap cannot grow. */
static int fsched__timer_add(fsched__worker *w, fsched__waiter *wt) {
    if (w->timer_count == w->timer_cap) {
        uint32_t cap = w->timer_cap ? w->timer_cap * 2 : 16;
        fsched__waiter **t = (fsched__waiter **)fsched__alloc(&w->sched->allocator,
                                                               cap * sizeof *t, sizeof(void *));
        if (!t) return 0;
        if (w->timer_count) memcpy(t, w->timers, w->timer_count * sizeof *t);
        fsched__free(&w->sched->allocator, w->timers, w->timer_cap * sizeof *t, sizeof(void *));
        w->timers = t;
        w->timer_cap = cap;
    }
    w->timers[w->timer_count] = wt;
    fsched__timer_sift_up(w, w->timer_count++);
    return 1;
}

/* Owner: removes a waiter from the heap, wherever it is. */
static void fsched__timer_remove(fsched__worker *w, fsched__waiter *wt) {
    uint32_t i = wt->timer - 1;
    fsched__waiter *last = w->timers[--w->timer_count];
    wt->timer = 0;
    if (last != wt) {
        fsched__timer_place(w, i, last);
        fsched__timer_sift_down(w, i);
        fsched__timer_sift_up(w, last->timer - 1);
    }
}

/* Owner: wakes the fibers whose deadline has passed. */
static void fsched__timers_fire(fsched__worker *w) {
    uint64_t now;
    if (!w->timer_count) return;
    now = fsched__sched_now(w->sched);
    while (w->timer_count && w->timers[0]->deadline <= now) {
        fsched__waiter *wt = w->timers[0];
        uint32_t expected = FSCHED__WAIT_WAITING;
        fsched__timer_remove(w, wt);
        /* acq_rel: decides the race with a waker (which then makes the fiber ready) */
        if (FSCHED__CAS(&wt->state, &expected, FSCHED__WAIT_TIMED_OUT, FSCHED__ACQ_REL,
                        FSCHED__ACQUIRE)) {
            fsched__wait_list_leave(wt);
            /* a worker waiting inline reads the state itself: it is running, or in
               the FIFO behind a fiber it let run */
            if (wt->fiber) fsched__ready_append(w, wt->fiber);
        }
    }
}

static const fsched__timers_code fsched__timers_code_here = {
    fsched__timer_add, fsched__timer_remove, fsched__timers_fire};

/* The deadline of a timed wait that begins now (0 means none: a wait of 0 ns at time 0
   gets 1). Links the timers' code. */
static uint64_t fsched__deadline_after(uint64_t timeout_ns) {
    uint64_t deadline = fsched__time_add(fsched__clock_ns(), timeout_ns);
    /* relaxed: see fsched__timers */
    if (!fsched__timers())
        FSCHED__STORE(&fsched__timers_linked, &fsched__timers_code_here, FSCHED__RELAXED);
    return deadline ? deadline : 1;
}

/* The deadline of a wait on something for timeout_ns: none (0) for FSCHED_FOREVER, a wait
   as the call without a timeout makes (which fails where nothing could end it). */
static uint64_t fsched__wait_deadline(uint64_t timeout_ns) {
    return timeout_ns == FSCHED_FOREVER ? 0 : fsched__deadline_after(timeout_ns);
}

/* ---- finding work ---------------------------------------------------------------- */

static inline uint64_t fsched__rng_next(fsched__worker *w) {
    uint64_t x = w->rng; /* xorshift64 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w->rng = x;
    return x;
}

static void fsched__wake_sleepers(fsched_sched *s, uint32_t n);

/* Announces n published jobs, given the counters read after their publication: a worker
   that announced it may sleep is told through the jobs event counter, and sleepers are
   woken when too few awake workers are idle to take the jobs. */
static void fsched__announce_jobs(fsched_sched *s, uint32_t n, uint64_t c) {
    uint32_t sleeping, awake_idle;
    /* acquire on failure: the counters read anew, as fsched__new_jobs reads them */
    while ((FSCHED__JEC(c) & 1u) == 0) { /* sleepy: make it active again */
        if (FSCHED__CAS_WEAK(&s->counters, &c, c + FSCHED__JEC_ONE, FSCHED__SEQ_CST,
                             FSCHED__ACQUIRE)) {
            c += FSCHED__JEC_ONE;
            break;
        }
    }
    sleeping = FSCHED__SLEEPING(c);
    awake_idle = FSCHED__INACTIVE(c) - sleeping;
    if (sleeping == 0 || awake_idle >= n) return;
    fsched__wake_sleepers(s, n - awake_idle < sleeping ? n - awake_idle : sleeping);
}

/* Publishes work: whoever may be about to sleep either sees it or is counted as sleeping
   here, and is woken when nobody else is awake to find it. Every publication comes here,
   spawns included: a spawner may compute for long (or spin on what its task is to do)
   before it calls the scheduler again, so a worker that missed its job would sleep
   through it. The proof: a worker about to sleep announces it (the jobs event counter
   made even), searches every queue at least once more, then counts itself sleeping in
   the counters, with seq_cst, and checks the injector and its inbox; the publisher's
   store-load barrier below sits between its publication and its read of the counters.
   Either that read sees the announcement (the counter made odd again stops the sleep),
   or the count (the sleeper is woken), or it precedes the announcement, and then the
   sleeper's later searches (seq_cst loads of the deques' ends, the injector after the
   sleeper's own fence) see the job. tests/model/ holds a Spin model of this protocol. */
static void fsched__new_jobs(fsched_sched *s, uint32_t n) {
    uint64_t c;
    FSCHED__POINT(PUBLISHED);
    if (!FSCHED__THREADS) { /* the one thread sleeps only with nothing queued */
        fsched__wake_sleepers(s, 1);
        return;
    }
#if defined(FSCHED__TSAN)
    /* ThreadSanitizer does not model fences (GCC refuses them): a read-modify-write of
       the counters gives the same order, being ordered with the sleeper's own */
    c = FSCHED__FETCH_ADD(&s->counters, (uint64_t)0, FSCHED__SEQ_CST);
#else
    /* seq_cst fence: orders the publication before the counters read, against the
       sleeper's counters update and its own seq_cst fence (see fsched__sleep) */
    FSCHED__FENCE(FSCHED__SEQ_CST);
    /* acquire: a sleeper's flag, set before it counted itself, is visible */
    c = FSCHED__LOAD(&s->counters, FSCHED__ACQUIRE);
#endif
    fsched__announce_jobs(s, n, c);
}

/* Wakes up to n sleeping slots. Relaxed, the cursor: any start will do. */
static void fsched__wake_sleepers(fsched_sched *s, uint32_t n) {
    /* (without threads one slot at most sleeps: any start finds it) */
    uint32_t start = FSCHED__THREADS ? FSCHED__FETCH_ADD(&s->wake_cursor, 1u, FSCHED__RELAXED) : 0,
             i;
    for (i = 0; i < s->n_slots && n; i++) {
        fsched__worker *v = s->slots[(start + i) % s->n_slots];
        uint32_t expected = 1;
        /* the flag is taken by exactly one waker; the sleeper uncounts itself. Relaxed,
           the look and a failed CAS; acq_rel, more than it needs: only who takes the flag
           matters, and the notify that follows orders the rest */
        if (FSCHED__LOAD(&v->sleeping, FSCHED__RELAXED) &&
            FSCHED__CAS(&v->sleeping, &expected, 0u, FSCHED__ACQ_REL, FSCHED__RELAXED)) {
            fsched__notify(v);
            n--;
        }
    }
}

/* True when sleeping workers could take work and no awake one is looking for it. */
static inline int fsched__wants_workers(fsched_sched *s) {
    uint64_t c = FSCHED__LOAD(&s->counters, FSCHED__RELAXED); /* relaxed: a hint */
    return FSCHED__SLEEPING(c) != 0 && FSCHED__INACTIVE(c) == FSCHED__SLEEPING(c);
}

/* Whether any work is queued where every worker may take it: the injector, or the public
   part of some slot's deques. Seq_cst loads: a worker that has just stopped counting as
   idle (a seq_cst update of the counters) either sees work published meanwhile, or its
   publisher's fenced read of the counters saw this worker no longer idle, and woke a
   sleeper itself (see fsched__new_jobs). */
static int fsched__work_visible(fsched_sched *s) {
    uint32_t i;
    if (FSCHED__LOAD(&s->injector.size, FSCHED__SEQ_CST)) return 1;
    for (i = 0; i < s->n_slots; i++) {
        fsched__worker *v = s->slots[i];
        if (fsched__cl_visible(&v->deque.pub) || fsched__cl_visible(&v->high) ||
            fsched__cl_visible(&v->low) || fsched__frames_offered(v))
            return 1;
    }
    return 0;
}

/* A worker that stops searching (it found a job, or a fiber to resume) while others sleep,
   nobody else searches and work is queued wakes one more: the job it was woken for, or
   that others counted on it to find (it published some of what it took while it still
   counted as searching), may not be the one it runs, and it may run for long (Go's rule
   for spinning threads, taken only when there is work to find). */
static inline void fsched__pass_search_on(fsched_sched *s) {
    if (FSCHED__THREADS && fsched__wants_workers(s) && fsched__work_visible(s)) fsched__new_jobs(s, 1);
}

/* Owner: whether its private jobs stay private for now: the running fiber runs jobs
   nested inline above a caller (out of memory). A join's second half that a thief took
   could wait, inline there too, for what the caller below holds, while the join, which
   cannot give up, holds up that caller; kept here, the half's wait gives up instead
   (fsched__holds_up). */
static int fsched__private_kept(void) {
    return FSCHED__THREADS && FSCHED__UNLIKELY(FSCHED__THREAD_NOW.current->nest != NULL);
}

/* Owner: moves the older half of its private jobs where thieves can take them, for a
   thief that asked, and announces the publication. */
static FSCHED__NOINLINE void fsched__share(fsched__worker *w) {
    fsched__deque *d = &w->deque;
    /* nothing private, or kept: a request stays set */
    if (d->ring.tail == d->ring.head || fsched__private_kept()) return;
    /* cleared first, so that a request made meanwhile survives (no other trigger is
       needed: a worker that goes to sleep has asked every other slot for work during
       its last search) */
    FSCHED__STORE(&d->ring.request, 0u, FSCHED__RELAXED); /* relaxed: a hint */
    fsched__deque_share(d);
    fsched__new_jobs(w->sched, 1);
}

/* Owner: queues the m jobs of `jobs` where thieves see them, after every private job, and
   announces them. When the public part cannot grow (out of memory) they go to the
   injector instead, which never fails. */
static FSCHED__NOINLINE void fsched__publish(fsched__worker *w, fsched__job *const *jobs,
                                             size_t m) {
    fsched__deque *d = &w->deque;
    size_t n = fsched__private_kept() ? 0 : d->ring.tail - d->ring.head;
    FSCHED__STORE(&d->ring.request, 0u, FSCHED__RELAXED); /* answered (relaxed), as in fsched__share */
    if (fsched__deque_expose(d, n, jobs, m)) {
        fsched__new_jobs(w->sched, (uint32_t)(n + m));
        return;
    }
    fsched__injector_push(&w->sched->injector, jobs, m);
    fsched__new_jobs(w->sched, (uint32_t)m);
}

/* The slot that should queue p, which only some slots may run: its own slot, else the
   calling worker if allowed, else an allowed worker that sleeps, else the next allowed
   worker in turn. NULL when no slot of s is allowed. Relaxed: hints for the pick; any
   pick is correct, and the notify that follows orders the rest. */
static fsched__worker *fsched__place_target(fsched_sched *s, fsched__worker *self,
                                            const fsched__placed *p) {
    uint32_t n = FSCHED__N_THREADS(s) < 64 ? FSCHED__N_THREADS(s) : 64, start, i;
    fsched__worker *pick = NULL;
    if (p->slot >= 0) return (uint32_t)p->slot < s->n_slots ? s->slots[p->slot] : NULL;
    if (self && fsched__placed_allows(p, self->index, !FSCHED__BOUND(self))) return self;
    if (!n) return NULL;
    start = FSCHED__FETCH_ADD(&s->wake_cursor, 1u, FSCHED__RELAXED);
    for (i = 0; i < n; i++) {
        uint32_t k = (start + i) % n;
        if (!((p->workers >> k) & 1u)) continue;
        if (FSCHED__LOAD(&s->slots[k]->sleeping, FSCHED__RELAXED)) return s->slots[k];
        if (!pick) pick = s->slots[k];
    }
    return pick;
}

/* Owner: a placed job of w's own of `level`: high or low from its deque of that level;
   normal from the nodes kept here, then from its affinity queue. NULL: none. */
static fsched__job *fsched__placed_take(fsched__worker *w, uint32_t level) {
    fsched__placed *p = w->local;
    int emptied;
    if (level != FSCHED__LEVEL_NORMAL) {
        fsched__cl *q = level == FSCHED__LEVEL_HIGH ? &w->high : &w->low;
        return fsched__cl_looks_empty(q) ? NULL : fsched__cl_take(q, &emptied);
    }
    if (p) {
        w->local = p->next;
        return &p->job;
    }
    p = fsched__affine_take(&w->affine, w->index, !FSCHED__BOUND(w));
    return p ? &p->job : NULL;
}

/* The scheduling loop takes placed jobs through a pointer that the first placement sets
   (the nodes a pipeline keeps on a slot were placed first), so that a program that
   places none does not link that code (microcontrollers). */
typedef fsched__job *fsched__placed_taker(fsched__worker *w, uint32_t level);
static fsched__placed_taker *fsched__placed_linked;

/* Relaxed, the load: the pointer is stored before the first placed job is queued; a slot
   finds a placed job queued by its own thread, or by another that notified it after
   (its latch's acquire makes the store visible), and takes it then. */
static inline fsched__placed_taker *fsched__placed_used(void) {
    return FSCHED__LOAD(&fsched__placed_linked, FSCHED__RELAXED);
}

/* Queues a placed job from `self` (a slot of s, or NULL outside it, which then holds s):
   in an affinity queue when only some slots may run it, else on the caller's deque of
   its level (the injector from outside). 0 when it cannot be queued: out of memory, no
   allowed slot, or its only slot has unbound. */
static int fsched__place(fsched_sched *s, fsched__worker *self, fsched__placed *p) {
    fsched__job *job = &p->job;
    /* relaxed: every slot that may find the job is told of it after (see above) */
    if (!fsched__placed_used())
        FSCHED__STORE(&fsched__placed_linked, &fsched__placed_take, FSCHED__RELAXED);
    if (p->slot >= 0 || p->workers) {
        fsched__worker *target = fsched__place_target(s, self, p);
        if (!target || !fsched__affine_put(&target->affine, p)) return 0;
        if (target != self) fsched__notify(target);
        return 1;
    }
    if (!self) {
        fsched__injector_push(&s->injector, &job, 1);
        fsched__new_jobs(s, 1);
        return 1;
    }
    if (p->level == FSCHED__LEVEL_NORMAL ||
        !fsched__cl_push(p->level == FSCHED__LEVEL_HIGH ? &self->high : &self->low, NULL, 0, 0,
                         &job, 1)) {
        fsched__publish(self, &job, 1); /* out of memory for the level's deque: normal */
        return 1;
    }
    fsched__new_jobs(s, 1);
    return 1;
}

/* Owner: answers other workers that asked for its private jobs (see fsched__deque). */
static inline void fsched__answer_request(fsched__worker *w) {
    if (FSCHED__UNLIKELY(fsched__deque_requested(&w->deque))) fsched__share(w);
}

/* Owner: queues a job, answering a request. 0 when out of memory (not queued). */
static inline int fsched__push_job(fsched__worker *w, fsched__job *job) {
    if (FSCHED__UNLIKELY(!fsched__deque_push(&w->deque, job))) return 0;
    fsched__answer_request(w);
    return 1;
}

static inline fsched__job *fsched__pop_job(fsched__worker *w) {
    fsched__job *job = fsched__deque_pop(&w->deque);
    fsched__answer_request(w);
    return job;
}

/* Thief: steals from q, retrying a few times when other thieves win the race. */
static fsched__job *fsched__steal_from(fsched__cl *q, int *emptied) {
    fsched__job *job = FSCHED__STEAL_RETRY;
    int attempt;
    for (attempt = 0; attempt < 4 && job == FSCHED__STEAL_RETRY; attempt++)
        job = fsched__cl_steal(q, emptied);
    return job == FSCHED__STEAL_RETRY ? NULL : job;
}

/* Thief: a job of v that w may run: high level first, then normal work (asking v to
   share when it has none public), then placed jobs w is allowed to take, then low. */
static fsched__job *fsched__steal_one(fsched__worker *w, fsched__worker *v) {
    fsched__job *job = NULL;
    int emptied = 0;
    fsched__placed *p;
    if (!fsched__cl_looks_empty(&v->high) && (job = fsched__steal_from(&v->high, &emptied)))
        return job;
    if ((job = fsched__steal_from(&v->deque.pub, &emptied))) {
        if (emptied) fsched__deque_request(&v->deque); /* took the last one */
        return job;
    }
    fsched__deque_request(&v->deque);
    if (fsched__frames_used() && (job = fsched__frames_used()->steal(w, v))) return job;
    if ((p = fsched__affine_take(&v->affine, w->index, !FSCHED__BOUND(w)))) return &p->job;
    if (!fsched__cl_looks_empty(&v->low)) return fsched__steal_from(&v->low, &emptied);
    return NULL;
}

/* Tries the other slots from a random one. A worker that found work while others sleep
   wakes one more to keep searching. */
static fsched__job *fsched__steal(fsched__worker *w) {
    fsched_sched *s = w->sched;
    uint32_t n = s->n_slots, start, i;
    if (!FSCHED__THREADS || n < 2) return NULL; /* one thread: the other slots are drained */
    /* the high half scaled to [0, n): no 64-bit division (a library call on 32-bit cores) */
    start = (uint32_t)(((fsched__rng_next(w) >> 32) * n) >> 32);
    for (i = 0; i < n; i++) {
        fsched__worker *v = s->slots[(start + i) % n];
        fsched__job *job;
        /* relaxed: a hint; a slot's deques outlive its binding, and a slot skipped costs
           only this search */
        if (v == w || (FSCHED__BOUND(v) && !FSCHED__LOAD(&v->in_use, FSCHED__RELAXED))) continue;
        if ((job = fsched__steal_one(w, v))) {
            fsched__count(w->steals, 1);
            FSCHED__TRACE(fsched__trace_record(FSCHED__TRACE_STEAL, FSCHED__TRACE_INSTANT, 0,
                                               NULL, v->index);)
            fsched__pass_search_on(s);
            return job;
        }
    }
    return NULL;
}

/* Takes a batch from the injector: runs the first, queues the rest where other workers
   can take them too (newest last, so the owner runs them in the order they came). The
   one thread takes one job at a time: no other worker would share a batch. */
#define FSCHED__INJECTED_BATCH (FSCHED__THREADS ? 16u : 1u)
static fsched__job *fsched__take_injected(fsched__worker *w) {
    fsched__job *batch[FSCHED__INJECTED_BATCH], *rest[FSCHED__INJECTED_BATCH];
    size_t n = fsched__injector_take(&w->sched->injector, batch, FSCHED__INJECTED_BATCH), i;
    if (n < 2) return n ? batch[0] : NULL;
    for (i = 1; i < n; i++) rest[i - 1] = batch[n - i];
    fsched__publish(w, rest, n - 1);
    return batch[0];
}

/* Every this many searches, work from outside goes before the slot's own (but high), so
   that a task that keeps its worker busy with work of its own (or the only thread, in
   single-threaded mode) does not starve spawns from other threads and interrupt
   handlers. Prime, so that it does not beat with periodic work (Go's scheduler uses 61
   for its global queue too). */
#define FSCHED__OUTSIDE_EVERY 61u

/* The next job for w: its own work by level (high, the nodes kept here, placed jobs for
   it, normal, low), then work from outside, then other slots' work. */
static fsched__job *fsched__find_job(fsched__worker *w) {
    fsched__placed_taker *placed = fsched__placed_used();
    fsched__job *job;
    if (placed && (job = placed(w, FSCHED__LEVEL_HIGH))) return job;
    if (FSCHED__UNLIKELY(++w->finds == FSCHED__OUTSIDE_EVERY)) {
        w->finds = 0;
        if ((job = fsched__take_injected(w))) return job;
    }
    if (placed && (job = placed(w, FSCHED__LEVEL_NORMAL))) return job;
    if ((job = fsched__pop_job(w))) return job;
    /* frames this slot offered when their fiber blocked (other fibers of it may run them) */
    if (fsched__frames_used() && (job = fsched__frames_used()->steal(w, w))) return job;
    if (placed && (job = placed(w, FSCHED__LEVEL_LOW))) return job;
    if ((job = fsched__take_injected(w))) return job;
    return fsched__steal(w);
}

/* Owner: runs a job and counts it. Every job a slot runs goes through here: those the
   loop finds, those a wait runs on its own stack (a wait group helping with its tasks, a
   wait without a fiber to switch to). */
#if FSCHED__THREADS
static FSCHED__ALWAYS_INLINE void fsched__run_job(fsched__worker *w, fsched__job *job) {
#else
static FSCHED__NOINLINE void fsched__run_job(fsched__worker *w, fsched__job *job) {
#endif
    fsched__count(w->jobs_run, 1);
    job->execute(job, w);
}

/* ---- idling and sleeping --------------------------------------------------------- */

static void fsched__idle_begin(fsched__worker *w, fsched__idle *idle) {
    fsched_sched *s = w->sched;
    if (idle->inactive) return;
    idle->inactive = 1;
    idle->rounds = 0;
    if (!FSCHED__THREADS) return; /* nobody counts on the one thread, the drainer itself */
    /* seq_cst: this worker's counts (spawned, completed) are released before it is seen
       inactive, and against fsched_destroy's closing store and its seq_cst read of the
       counters, either destroy sees the counts or this worker sees it closing and tells
       the drainer (the last task may have ended here) */
    FSCHED__FETCH_ADD(&s->counters, FSCHED__INACTIVE_ONE, FSCHED__SEQ_CST);
    if (FSCHED__LOAD(&s->closing, FSCHED__SEQ_CST)) {
        /* acquire, though the closing load above orders it already: the drainer is
           stored before the flag */
        fsched__worker *drainer = FSCHED__LOAD(&s->drainer, FSCHED__ACQUIRE);
        if (drainer && drainer != w) fsched__notify(drainer);
    }
}

/* Leaves the search for something to run (see fsched__pass_search_on). */
static void fsched__idle_end(fsched__worker *w, fsched__idle *idle) {
    if (!idle->inactive) return;
    idle->inactive = 0;
    if (!FSCHED__THREADS) return;
    FSCHED__FETCH_SUB(&w->sched->counters, FSCHED__INACTIVE_ONE, FSCHED__SEQ_CST);
    fsched__pass_search_on(w->sched);
}

/* Makes the jobs event counter even ("sleepy") and returns it. Relaxed, the read and a
   failed CAS: guesses the CAS checks. */
static uint32_t fsched__announce_sleepy(fsched_sched *s) {
    uint64_t c = FSCHED__LOAD(&s->counters, FSCHED__RELAXED);
    FSCHED__POINT(SLEEPY);
    for (;;) {
        if ((FSCHED__JEC(c) & 1u) == 0) return FSCHED__JEC(c);
        if (FSCHED__CAS_WEAK(&s->counters, &c, c + FSCHED__JEC_ONE, FSCHED__SEQ_CST,
                             FSCHED__RELAXED))
            return FSCHED__JEC(c + FSCHED__JEC_ONE);
    }
}

#if !FSCHED__THREADS
/* Single-threaded only: nothing can run and nothing can wake the thread. One wait is
   ended with FSCHED_ERR_WRONG_STATE, so that the call that would hang returns: the root
   fiber's, else a task's (the root then waits for the slot's tasks to end: an unbind or
   destroy), whose fiber goes on; another deadlock ends the next. */
static void fsched__deadlock(fsched__worker *w) {
    fsched_fiber *f;
    for (f = w->root; f; f = f == w->root ? w->live : f->live_next) {
        fsched__waiter *wt = f->move_waiter;
        uint32_t expected = FSCHED__WAIT_WAITING;
        /* acq_rel, as a waker's CAS of the state; relaxed on failure: someone else ended
           it */
        if (wt && FSCHED__CAS(&wt->state, &expected, FSCHED__WAIT_ABORTED, FSCHED__ACQ_REL,
                              FSCHED__RELAXED)) {
            if (FSCHED__DEBUG || FSCHED__STDIO) /* (release builds without stdio: the code) */
                fsched__log(&w->sched->logger, FSCHED_LOG_ERROR,
                            "deadlock: the only thread waits for something no task can provide");
            fsched__wait_list_leave(wt);
            fsched__ready_append(w, f);
            return;
        }
    }
}
#endif

/* Blocks the worker's thread until its latch is set or, with a deadline (in the
   scheduler's clock; 0: none), until the deadline. */
#if !FSCHED__THREADS
static void fsched__block(fsched__worker *w, uint64_t deadline) {
    /* one thread: only the clock, the outside world or an interrupt handler setting the
       latch ends this */
    fsched_sched *s = w->sched;
    int done = 0;
    if (fsched__watch_of(s) && fsched__watch_of(s)->block(w, deadline)) return;
    if (!deadline && !s->idle) {
        fsched__deadlock(w); /* nothing can ever wake this only thread */
        return;
    }
    while (!done) {
        /* masked from the look to the idle hook: an interrupt that sets the latch after
           the look is pending when the hook waits for one, and ends its wait */
        fsched__irq_state m = fsched__irq_save();
        /* acquire: pairs with fsched__notify's exchange, as the latch's other reads */
        done = FSCHED__LOAD(&w->latch, FSCHED__ACQUIRE) == FSCHED__LATCH_SET ||
               (deadline && fsched__sched_now(s) >= deadline);
        if (!done && s->idle) s->idle(s->idle_user);
        fsched__irq_restore(m);
        if (!done && !s->idle) fsched__cpu_relax();
    }
}
#else
static void fsched__block(fsched__worker *w, uint64_t deadline) {
    uint64_t now;
    const fsched__watch *watch = fsched__watch_of(w->sched);
    if (watch && watch->block(w, deadline)) return;
    if (!deadline) {
        fsched__park(&w->parker, 0);
        return;
    }
    /* the deadline is in the scheduler's clock, which may have another origin and pace
       than the system's: park for what is left of it, measured now */
    now = fsched__sched_now(w->sched);
    if (now < deadline) fsched__park(&w->parker, deadline - now);
}
#endif

/* Sleeps until something is posted for this worker, work is published, or the earliest
   timer is due. Gives up at once when any of these already happened. */
static void fsched__sleep(fsched__worker *w, fsched__idle *idle) {
    fsched_sched *s = w->sched;
    uint32_t expected = FSCHED__LATCH_UNSET;
    uint64_t c, deadline = 0;
    /* acquire: if the latch is SET, what was posted is visible (the loop handles it) */
    if (!FSCHED__CAS(&w->latch, &expected, FSCHED__LATCH_SLEEPY, FSCHED__ACQUIRE, FSCHED__ACQUIRE))
        return;
    /* the flag goes up before the count, so a waker that sees the count finds the flag
       (relaxed: the count's CAS releases it); relaxed, the read: a guess the CAS checks */
    FSCHED__STORE(&w->sleeping, 1u, FSCHED__RELAXED);
    c = FSCHED__LOAD(&s->counters, FSCHED__RELAXED);
    for (;;) {
        /* relaxed, taking back the flag and the latch: a waker's or a poster's change
           wins the CAS, and the latch it sets is acquired before the worker sleeps */
        if (FSCHED__JEC(c) != idle->jec) { /* work was published since we looked */
            expected = 1;
            FSCHED__CAS(&w->sleeping, &expected, 0u, FSCHED__RELAXED, FSCHED__RELAXED);
            expected = FSCHED__LATCH_SLEEPY;
            FSCHED__CAS(&w->latch, &expected, FSCHED__LATCH_UNSET, FSCHED__RELAXED, FSCHED__RELAXED);
            idle->rounds = 0;
            return;
        }
        /* seq_cst, release: publishes the sleeping flag with the count; relaxed on
           failure: a new guess, compared only */
        if (FSCHED__CAS_WEAK(&s->counters, &c, c + FSCHED__SLEEPING_ONE, FSCHED__SEQ_CST,
                             FSCHED__RELAXED))
            break;
    }
#if !defined(FSCHED__TSAN)
    /* seq_cst fence: pairs with the one in fsched__new_jobs (see there); under
       ThreadSanitizer the publisher's read-modify-write of the counters does its work */
    FSCHED__FENCE(FSCHED__SEQ_CST);
#endif
    FSCHED__POINT(PARK);
    if (w->timer_count) deadline = w->timers[0]->deadline;
    expected = FSCHED__LATCH_SLEEPY;
    /* relaxed, the looks: after the fence, which orders them against a publication
       (see fsched__new_jobs), and a post sets the latch, which the CAS reads with
       acquire; after the sleep, relaxed: back to UNSET only when nothing set the latch,
       and a set latch stays for the loop, which acquires it, as the flag stays for its
       waker */
    if (!FSCHED__LOAD(&s->injector.size, FSCHED__RELAXED) &&
        !FSCHED__LOAD(&w->inbox, FSCHED__RELAXED) &&
        FSCHED__CAS(&w->latch, &expected, FSCHED__LATCH_SLEEPING, FSCHED__ACQUIRE, FSCHED__ACQUIRE)) {
        FSCHED__TRACE(uint64_t trace_begin = fsched__trace_now();)
        fsched__count(w->sleeps, 1);
        fsched__block(w, deadline);
        FSCHED__TRACE(fsched__trace_record(FSCHED__TRACE_SLEEP, trace_begin, 0, NULL, 0);)
        FSCHED__POINT(WOKEN);
        expected = FSCHED__LATCH_SLEEPING;
        FSCHED__CAS(&w->latch, &expected, FSCHED__LATCH_UNSET, FSCHED__RELAXED, FSCHED__RELAXED);
    } else {
        expected = FSCHED__LATCH_SLEEPY;
        FSCHED__CAS(&w->latch, &expected, FSCHED__LATCH_UNSET, FSCHED__RELAXED, FSCHED__RELAXED);
    }
    expected = 1;
    FSCHED__CAS(&w->sleeping, &expected, 0u, FSCHED__RELAXED, FSCHED__RELAXED);
    FSCHED__FETCH_SUB(&s->counters, FSCHED__SLEEPING_ONE, FSCHED__SEQ_CST);
    idle->rounds = 0;
}

/* Without threads: the latch alone. Only an interrupt handler can post meanwhile (a fiber
   made ready, a task queued: fsched__new_jobs finds the `sleeping` flag), and
   fsched__block reads the latch with interrupts masked. Relaxed, every access: one
   thread, whose handlers see its accesses in program order. */
static void fsched__sleep_alone(fsched__worker *w, fsched__idle *idle) {
    uint32_t expected = FSCHED__LATCH_UNSET;
    idle->rounds = 0;
    FSCHED__STORE(&w->sleeping, 1u, FSCHED__RELAXED); /* relaxed: see above */
    if (!FSCHED__LOAD(&w->sched->injector.size, FSCHED__RELAXED) &&
        !FSCHED__LOAD(&w->inbox, FSCHED__RELAXED) &&
        FSCHED__CAS(&w->latch, &expected, FSCHED__LATCH_SLEEPING, FSCHED__RELAXED, FSCHED__RELAXED)) {
        FSCHED__TRACE(uint64_t trace_begin = fsched__trace_now();)
        fsched__count(w->sleeps, 1);
        fsched__block(w, w->timer_count ? w->timers[0]->deadline : 0);
        FSCHED__TRACE(fsched__trace_record(FSCHED__TRACE_SLEEP, trace_begin, 0, NULL, 0);)
        expected = FSCHED__LATCH_SLEEPING; /* a set latch stays for the loop */
        FSCHED__CAS(&w->latch, &expected, FSCHED__LATCH_UNSET, FSCHED__RELAXED, FSCHED__RELAXED);
    }
    FSCHED__STORE(&w->sleeping, 0u, FSCHED__RELAXED); /* relaxed: see above */
}

static void fsched__idle_step(fsched__worker *w, fsched__idle *idle) {
    uint32_t i;
    fsched__idle_begin(w, idle);
    idle->rounds++;
    if (idle->rounds < FSCHED__ROUNDS_UNTIL_SLEEPY) {
        for (i = 0; i < FSCHED__SPIN_PER_ROUND; i++) fsched__cpu_relax();
    } else if (idle->rounds == FSCHED__ROUNDS_UNTIL_SLEEPY) {
        /* the poll hook, before the worker may sleep: what it makes runnable here (a
           fiber it wakes, a task it spawns) is found by the rounds still to come */
        const fsched__watch *watch = fsched__watch_of(w->sched);
        if (watch) w->hook_pending = watch->poll_call(w->sched);
        if (FSCHED__THREADS) idle->jec = fsched__announce_sleepy(w->sched);
    } else if (idle->rounds < FSCHED__ROUNDS_UNTIL_SLEEP) {
        fsched__os_yield();
    } else if (!FSCHED__THREADS) {
        fsched__sleep_alone(w, idle);
    } else {
        fsched__sleep(w, idle);
    }
}

/* ---- moving woken tasks to idle workers ------------------------------------------
   A movable task (fsched_task_set_movable) woken from a wait it made with no frame under
   it that keeps its worker (move_ok) waits in its owner's ready FIFO like any other
   (counted in movable_ready). An owner with two or more of them ready, while another
   worker searches or sleeps, sheds the newer half (at most FSCHED__SHED_MAX): out of
   its lists and counts, onto the public part of its deque as jobs, which thieves steal
   as any job (the protocol that publishes work wakes a sleeper for them). Whoever runs such a job adopts
   the fiber: it becomes the runner's, ready there. Every list stays its owner's alone;
   the deque's release push and the steal's acquire CAS order the fiber's state (its
   saved context included) from shedder to adopter. A bound slot adopts none but its
   own (its unbind waits for its fibers, and its thread may never run them): it forwards
   the fiber to a worker thread's inbox, which adopts what it collects there. */
#define FSCHED__SHED_MAX 16u

/* Owner: moves f from w's fibers to those in transit (shed: 1), or back to w's (0), under
   the scheduler's lock for them, which fsched_get_stats takes too: a fiber that moves is
   counted once, as a slot's or as in transit. */
static void fsched__transit_move(fsched__worker *w, fsched_fiber *f, int shed) {
    fsched_sched *s = w->sched;
    fsched__spin_lock(&s->transit_lock);
    if (shed) {
        fsched__live_unlink(w, f);
        f->live_prev = NULL;
        f->live_next = s->transit;
        if (s->transit) s->transit->live_prev = f;
        s->transit = f;
        s->fibers_moving++;
    } else {
        if (f->live_prev) f->live_prev->live_next = f->live_next;
        else s->transit = f->live_next;
        if (f->live_next) f->live_next->live_prev = f->live_prev;
        s->fibers_moving--;
        fsched__live_link(w, f);
    }
    fsched__spin_unlock(&s->transit_lock);
}

static void fsched__fiber_adopt_execute(fsched__job *job, fsched__worker *w);

/* Owner: takes a ready fiber of w, already out of the FIFO, out of w's lists and counts,
   as a job for whoever will adopt it. Its timer (the wait was ended) can only lose now:
   it goes, so that the heap keeps nothing of a fiber that leaves. */
static fsched__job *fsched__fiber_shed(fsched__worker *w, fsched_fiber *f) {
    fsched__waiter *wt = (fsched__waiter *)f->move_waiter;
    if (wt->timer) fsched__timers()->remove(w, wt);
    w->movable_ready--;
    f->move_ok = 0;
    f->move_waiter = NULL;
    f->in_transit = 1;
    w->blocked--;
    fsched__transit_move(w, f, 1);
    f->move_job.execute = fsched__fiber_adopt_execute;
    f->move_job.next = NULL;
    return &f->move_job;
}

/* Owner, between turns, with two or more movable fibers ready: sheds the newer half of
   them when another worker searches or sleeps (it counts among the inactive, beside
   this one if this one still counts itself). Relaxed, the counters: a hint; a
   late look only sheds a turn later or for nothing (the thief that steals them may be
   this worker itself). */
static FSCHED__NOINLINE void fsched__shed(fsched__worker *w, const fsched__idle *idle) {
    fsched_sched *s = w->sched;
    fsched__job *jobs[FSCHED__SHED_MAX];
    fsched_fiber *f, *prev = NULL, *next;
    uint32_t movable = w->movable_ready, skip, n = 0, k;
    if (FSCHED__N_THREADS(s) < 2 ||
        FSCHED__INACTIVE(FSCHED__LOAD(&s->counters, FSCHED__RELAXED)) <= idle->inactive)
        return;
    k = movable / 2 < FSCHED__SHED_MAX ? movable / 2 : FSCHED__SHED_MAX;
    skip = movable - k; /* the older ones stay: they have waited longest here */
    for (f = w->ready_head; f && n < k; f = next) {
        next = f->link;
        if (!f->move_ok || (skip && skip--)) {
            prev = f;
            continue;
        }
        if (prev) prev->link = next;
        else w->ready_head = next;
        if (w->ready_tail == f) w->ready_tail = prev;
        jobs[n++] = fsched__fiber_shed(w, f);
    }
    if (!n) return; /* (none found: cannot be, the count being exact) */
    FSCHED__POINT(SHED);
    /* only these go public (the private ring stays); the injector if that fails */
    if (!fsched__deque_expose(&w->deque, 0, jobs, n)) fsched__injector_push(&s->injector, jobs, n);
    fsched__new_jobs(s, n);
}

/* Owner: a fiber in transit becomes w's, ready to resume here. */
static void fsched__adopt(fsched__worker *w, fsched_fiber *f) {
    if (f->owner != w) fsched__count(w->moves, 1);
    f->owner = w;
    f->in_transit = 0;
    fsched__transit_move(w, f, 0);
    w->blocked++; /* it resumes in a wait, which counts it off where it resumes */
    FSCHED__TRACE(f->trace_id = 0;) /* a track of this slot's own numbering */
    fsched__ready_append(w, f);
}

/* The job of a fiber in transit, run by whichever slot took it: a worker thread adopts
   it, and so does the bound slot that shed it (it is still that slot's, as if never
   shed); another bound slot forwards it (see above) to the worker thread that shed it,
   which took a loop turn just now, or else to one chosen in turn. Not to any worker
   thread: one that computes for long would collect it only when done, while the fiber
   was ready where it was. Relaxed, the cursor: any worker will do. */
static void fsched__fiber_adopt_execute(fsched__job *job, fsched__worker *w) {
    fsched_fiber *f = (fsched_fiber *)(void *)((char *)job - offsetof(fsched_fiber, move_job));
    fsched_sched *s = w->sched, *held = NULL;
    fsched__worker *to = (fsched__worker *)f->owner; /* the shedder */
    FSCHED__POINT(ADOPT);
    if (!FSCHED__BOUND(w) || to == w) {
        fsched__adopt(w, f);
        return;
    }
    if (FSCHED__BOUND(to))
        to = s->slots[FSCHED__FETCH_ADD(&s->wake_cursor, 1u, FSCHED__RELAXED) % s->n_threads];
    if (fsched__post_ready(to, f, &held)) fsched__tell(to, held);
}

/* The running task opts in or out. */
FIBERSCHED_API fsched_result fsched_task_set_movable(int movable) {
    fsched__thread *t = fsched__thread_get();
    fsched__worker *w = t->worker;
    fsched_fiber *f = t->current;
    if (!w || t->in_hook || !f->task_may_move)
        return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE,
                              "fsched_task_set_movable: not in a task that a worker's loop "
                              "runs (the thread's own code, a hook, a task run nested by a "
                              "wait, or a task whose group's count its slot holds)");
    f->movable_task = movable != 0;
    fsched__join_ring_follow(w, f);
    return FSCHED_OK;
}

/* ---- the scheduling loop --------------------------------------------------------- */

/* Owner: leaves the running loop fiber for good, for the root, which then leaves the
   loop (the worker thread ends). */
static void fsched__exit_to_root(fsched__worker *w) {
    fsched__thread *t = w->thread; /* see fsched__switch_to */
    fsched_fiber *self = t->current;
    void *sp;
    if (w->root_parked) fsched__unpark_root(w);
    self->link = w->idle; /* this fiber joins the pool, to be freed with it */
    w->idle = self;
    sp = w->root->ctx.sp;
    w->root->ctx.sp = NULL;
    t->current = w->root;
    fsched__fiber_jump(self, w->root, sp, 1);
    fsched__fiber_trap();
}

/* Owner: resumes a ready fiber, parking the running one in the idle pool. */
static void fsched__run_fiber(fsched__worker *w, fsched_fiber *f) {
    FSCHED__POINT(RESUME);
    if (FSCHED__UNLIKELY(fsched__deque_requested(&w->deque))) /* the fiber may compute */
        fsched__share(w);                                      /* for long: share first */
    fsched__idle_park(w, w->thread->current); /* see fsched__switch_to */
    fsched__switch_to(w, f);
}

/* Whether the root, parked while the loop runs on other fibers, may leave the loop: its
   condition holds (fsched_destroy, fsched_unbind), or, on a worker thread, the
   scheduler terminates. */
static int fsched__root_may_leave(fsched__worker *w) {
    if (w->until) return w->until(w);
    /* acquire: pairs with the release store in fsched__stop_workers */
    return !FSCHED__BOUND(w) && FSCHED__LOAD(&w->sched->terminating, FSCHED__ACQUIRE);
}

/* Owner: the slot's fibers woken from other threads (its inbox) and by its timers join
   its ready FIFO. */
static void fsched__gather_woken(fsched__worker *w) {
    fsched__collect_posted(w);
    if (w->timer_count) fsched__timers()->fire(w);
}

/* One turn of the scheduling loop: ready fibers first (they bound memory), then jobs from
   the own deque, the injector and other workers, then timers; idle turns end in sleep.
   Runs on the loop's fibers, never on the root (the thread's own stack), but when no
   fiber could be had for want of memory. Returns 1 when the root may leave the loop
   (only on the root itself; elsewhere the root is resumed instead). */
static int fsched__loop_turn(fsched__worker *w, fsched__idle *idle) {
    fsched_fiber *f;
    fsched__job *job;
    const fsched__watch *watch;
    fsched__gather_woken(w);
    watch = fsched__watch_of(w->sched);
    if (FSCHED__UNLIKELY(watch != NULL)) watch->tick(w);
    /* without threads no other worker could take them: the code is left out */
    if (FSCHED__THREADS && FSCHED__UNLIKELY(w->movable_ready >= 2)) fsched__shed(w, idle);
    if (FSCHED__UNLIKELY(w->yield_pending)) { /* a yield lets one job run first */
        w->yield_pending = 0;
        if ((job = fsched__find_job(w))) {
            fsched__idle_end(w, idle);
            fsched__run_job(w, job);
            return 0;
        }
    }
    if ((f = fsched__ready_pop(w))) {
        fsched__idle_end(w, idle);
        fsched__run_fiber(w, f);
        return 0;
    }
    if ((job = fsched__find_job(w))) {
        fsched__idle_end(w, idle);
        fsched__run_job(w, job);
        return 0;
    }
    if (w->root_parked && fsched__root_may_leave(w)) {
        fsched__idle_end(w, idle);
        if (!FSCHED__THREADS || w->until) { /* without threads, every slot is bound */
            fsched__unpark_root(w);
            fsched__run_fiber(w, w->root);
        } else {
            fsched__exit_to_root(w);
        }
        return 0;
    }
    if (w->thread->current == w->root && fsched__root_may_leave(w)) {
        fsched__idle_end(w, idle);
        return 1;
    }
    fsched__idle_step(w, idle);
    return 0;
}

/* First frame of a worker's loop fibers: the loop, forever (they leave only by
   switching away). */
static void fsched__loop_main(void *pass) {
    fsched__thread *t = fsched__thread_get();
    fsched_fiber *self = t->current;
    fsched__worker *w = t->worker;
    fsched__idle idle;
    fsched__fiber_arrived(self, (fsched_fiber *)pass);
    fsched__after_switch(w);
    fsched__join_ring_follow(w, self);
    memset(&idle, 0, sizeof idle);
    /* each turn on the fiber's worker now: a movable task that ran here may have ended
       on another one */
    for (;;) fsched__loop_turn((fsched__worker *)self->owner, &idle);
}

/* Owner, on the root: runs the loop on the slot's fibers until `until` holds (NULL: until
   the scheduler terminates). The root waits parked among the idle fibers; a loop fiber
   that finds the condition true resumes it. */
static void fsched__schedule(fsched__worker *w, int (*until)(fsched__worker *w)) {
    /* the root's slot, where switches back to it look (a worker's start hook may have
       taken the thread into another scheduler's slot for a while: fsched_destroy) */
    w->root->owner = w;
    w->until = until;
    while (!fsched__root_may_leave(w)) {
        fsched_fiber *next = fsched__idle_take(w);
        if (!next) { /* out of memory for a fiber: the loop runs here, on the root */
            fsched__idle idle;
            memset(&idle, 0, sizeof idle);
            w->root->inline_depth++; /* its jobs run on the root's stack */
            while (!fsched__loop_turn(w, &idle)) {
            }
            w->root->inline_depth--;
            break;
        }
        fsched__idle_park(w, w->root);
        fsched__switch_to(w, next);
    }
    w->until = NULL;
}

/* ---- worker threads -------------------------------------------------------------- */

#if FSCHED__THREADS
/* Names the calling worker thread: the scheduler's prefix, then the index in decimal
   (cut to what the name holds; no stdio needed). */
static void fsched__name_worker(const fsched__worker *w) {
    char name[FSCHED__THREAD_NAME_BYTES], digits[FSCHED__NUMBER_BYTES];
    size_t n = strlen(w->sched->worker_name);
    const char *d = fsched__number(digits, w->index, 10);
    memcpy(name, w->sched->worker_name, n);
    while (*d && n + 1 < sizeof name) name[n++] = *d++;
    name[n] = 0;
    fsched__name_self(name);
}

/* The hooks run before the thread works for s and after it stopped: their calls are a
   plain thread's, which s counts, or refuses once it is being destroyed (a spawn queued
   on the thread's own deque there would be lost to a drain that ended, or that never saw
   it). But the thread is still s's worker: it may not destroy s (it would free what the
   thread goes on to use, or wait for itself to end), nor bind (the binding would be
   overwritten, or outlive the thread). */
static void fsched__worker_hook(fsched__thread *t, fsched__worker *w,
                                void (*hook)(void *user, uint32_t worker)) {
    if (!hook) return;
    t->in_worker_hook = w->sched;
    hook(w->sched->worker_user, w->index);
    t->in_worker_hook = NULL;
}

static void fsched__worker_main(void *arg) {
    fsched__worker *w = (fsched__worker *)arg;
    fsched__thread *t = fsched__thread_get();
    /* Windows fibers: the thread becomes one before the loop switches away from it */
    if (fsched__ctx_prepare_root(t->current) != FSCHED_OK)
        fsched__fatal("a worker thread cannot become a fiber (ConvertThreadToFiberEx)");
    w->thread = t;
    w->root = t->current;
    w->root->id = fsched__fiber_id(w->sched);
#if defined(FSCHED__HAVE_PINNING)
    if (w->cpu >= 0 && fsched__pin_self((uint32_t)w->cpu) != 0) /* checked at creation */
        fsched__log(&w->sched->logger, FSCHED_LOG_WARNING, "worker %lu cannot be pinned to CPU %ld",
                    (unsigned long)w->index, (long)w->cpu);
#endif
    fsched__name_worker(w);
    fsched__worker_hook(t, w, w->sched->worker_start);
    t->worker = w;
    fsched__join_ring_swap(&w->deque.ring);
    FSCHED__TRACE(w->root->trace_id = 0;) /* a track of this slot's own numbering */
    fsched__schedule(w, NULL);
    fsched__release_fibers(w);
    t->worker = NULL;
    fsched__join_ring_swap(NULL);
    fsched__worker_hook(t, w, w->sched->worker_stop);
}
#endif

static void fsched__slot_free(fsched_sched *s, fsched__worker *w);

static fsched__worker *fsched__slot_new(fsched_sched *s, uint32_t index, int bound) {
    fsched__worker *w = (fsched__worker *)fsched__alloc(&s->allocator, sizeof *w, FSCHED__CACHE_LINE);
    if (!w) return NULL;
    memset(w, 0, sizeof *w);
    fsched__deque_init(&w->deque, &s->allocator);
    fsched__cl_init(&w->high, &s->allocator);
    fsched__cl_init(&w->low, &s->allocator);
    fsched__affine_init(&w->affine);
    w->sched = s;
    w->index = index;
    w->bound = (uint32_t)bound;
    if (FSCHED__THREADS) w->rng = 0x9e3779b97f4a7c15ull * (index + 1); /* (thieves only) */
    fsched__parker_init(&w->parker);
    FSCHED__TRACE(if (!(w->trace = fsched__trace_buffer_new(&s->allocator, s->trace_events))) {
        fsched__slot_free(s, w);
        return NULL;
    })
    return w;
}

static void fsched__slot_free(fsched_sched *s, fsched__worker *w) {
    fsched__task_slab *slab, *next;
    fsched__release_fibers(w); /* a worker that never ran still holds its first fiber */
    for (slab = w->slabs; slab; slab = next) {
        next = slab->next;
        fsched__free(&s->allocator, slab, sizeof *slab, FSCHED__CACHE_LINE);
    }
    fsched__free(&s->allocator, w->timers, w->timer_cap * sizeof *w->timers, sizeof(void *));
    fsched__deque_destroy(&w->deque);
    if (w->frames_groups) fsched__frames_used()->destroy(w);
    fsched__cl_destroy(&w->high);
    fsched__cl_destroy(&w->low);
    fsched__affine_destroy(&w->affine);
    fsched__parker_destroy(&w->parker);
    FSCHED__TRACE(if (w->trace) fsched__trace_buffer_free(&s->allocator, w->trace);)
    fsched__free(&s->allocator, w, sizeof *w, FSCHED__CACHE_LINE);
}

/* ===================================================================================== */
/*  lifecycle: create, destroy, bind, unbind                                             */
/* ===================================================================================== */

/* The reserve of n tasks for interrupt handlers (see fsched__reserve_take); 0: out of
   memory. Without interrupts there is none to set aside. */
#if defined(FSCHED__INTERRUPTS)
static int fsched__reserve_create(fsched_sched *s, uint32_t n) {
    uint32_t i;
    s->reserve = (fsched__task *)fsched__alloc(&s->allocator, n * sizeof *s->reserve,
                                               FSCHED__CACHE_LINE);
    if (!s->reserve) return 0;
    s->reserve_count = n;
    for (i = 0; i < n; i++) {
        s->reserve[i].home = NULL;
        s->reserve[i].next = i + 1 < n ? &s->reserve[i + 1] : NULL;
    }
    s->reserve_free = s->reserve;
    return 1;
}

static void fsched__reserve_destroy(fsched_sched *s) {
    fsched__free(&s->allocator, s->reserve, s->reserve_count * sizeof *s->reserve,
                 FSCHED__CACHE_LINE);
}
#else
static int fsched__reserve_create(fsched_sched *s, uint32_t n) {
    (void)s;
    (void)n;
    return 1;
}

static void fsched__reserve_destroy(fsched_sched *s) { (void)s; }
#endif

static void fsched__sched_free(fsched_sched *s) {
    fsched_allocator a = s->allocator;
    uint32_t i;
    for (i = 0; i < s->n_slots; i++)
        if (s->slots[i]) fsched__slot_free(s, s->slots[i]);
    fsched__free(&a, s->slots, s->n_slots * sizeof *s->slots, sizeof(void *));
    if (s->stacks) fsched_stack_pool_destroy(s->stacks);
    fsched__reserve_destroy(s);
    fsched__injector_destroy(&s->injector);
    if (fsched__watch_of(s)) fsched__watch_of(s)->free(s);
    s->magic = FSCHED__SCHED_DEAD;
    fsched__free(&a, s, sizeof *s, FSCHED__CACHE_LINE);
}

/* Stops the worker threads (all work done) and waits for them. */
#if FSCHED__THREADS
static void fsched__stop_workers(fsched_sched *s) {
    uint32_t i;
    /* release: everything before is visible to the workers that see the flag */
    FSCHED__STORE(&s->terminating, 1u, FSCHED__RELEASE);
    for (i = 0; i < s->started; i++) fsched__notify(s->slots[i]);
    for (i = 0; i < s->started; i++) fsched__os_thread_join(s->slots[i]->os_thread);
    s->started = 0;
}
#else
static void fsched__stop_workers(fsched_sched *s) { (void)s; /* none to stop */ }
#endif

/* Gives each worker thread of s the CPU the desc pins it to (none unless asked). */
static fsched_result fsched__pin_plan(fsched_sched *s, const fsched_desc *d) {
    uint32_t i;
    for (i = 0; FSCHED__THREADS && i < s->n_slots; i++) s->slots[i]->cpu = -1; /* (theirs) */
    if (!d->pin_workers && !d->worker_cpus) return FSCHED_OK;
    if (d->worker_cpus && !d->worker_cpu_count)
        return FSCHED__MISUSE(&s->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "fsched_create: worker_cpus given with worker_cpu_count 0");
    if (!FSCHED__N_THREADS(s)) return FSCHED_OK; /* no worker thread to pin */
#if defined(FSCHED__HAVE_PINNING)
    {
        uint32_t *allowed = (uint32_t *)fsched__alloc(&s->allocator,
                                                      FSCHED__CPU_LIMIT * sizeof(uint32_t),
                                                      sizeof(uint32_t));
        uint32_t n, k;
        fsched_result r = FSCHED_OK;
        if (!allowed) return FSCHED_ERR_OUT_OF_MEMORY;
        n = fsched__cpus_allowed(allowed);
        if (!n) r = FSCHED__MISUSE(&s->logger, FSCHED_ERR_SYSTEM,
                                   "fsched_create: cannot read the CPUs this thread may use");
        for (i = 0; r == FSCHED_OK && i < FSCHED__N_THREADS(s); i++) {
            uint32_t cpu = d->worker_cpus ? d->worker_cpus[i % d->worker_cpu_count]
                                          : allowed[i % n];
            for (k = 0; k < n && allowed[k] != cpu; k++) {
            }
            if (k == n)
                r = FSCHED__MISUSE(&s->logger, FSCHED_ERR_INVALID_ARGUMENT,
                                   "fsched_create: worker %lu: CPU %lu is not one this thread "
                                   "may run on", (unsigned long)i, (unsigned long)cpu);
            s->slots[i]->cpu = (int32_t)cpu;
        }
        fsched__free(&s->allocator, allowed, FSCHED__CPU_LIMIT * sizeof(uint32_t),
                     sizeof(uint32_t));
        return r;
    }
#else
    return FSCHED__MISUSE(&s->logger, FSCHED_ERR_UNSUPPORTED,
                          "fsched_create: pinning workers to CPUs is not supported here");
#endif
}

/* The desc fsched_create works from, in *d: the user's (NULL: all zeros) with every zero
   that has a default replaced by it (written in place: a desc returned by value is
   copied once more). */
static void fsched__desc_defaults(const fsched_desc *desc, fsched_desc *d) {
    if (desc) *d = *desc;
    else memset(d, 0, sizeof *d);
    if (!FSCHED__THREADS) d->single_threaded = 1;
    if (d->single_threaded) d->workers = 0;
    else if (!d->workers) d->workers = fsched__cpu_count();
    if (!d->max_bound_threads) d->max_bound_threads = FSCHED__THREADS ? 8 : 1; /* or the one */
    if (!d->worker_name && FSCHED__THREADS) d->worker_name = "fsched-w";
    if (!d->trace_events) d->trace_events = FIBERSCHED_TRACE_EVENTS;
}

/* Checks the user's desc (NULL: all defaults) and d, the same with its defaults. */
static fsched_result fsched__desc_check(const fsched_desc *desc, const fsched_desc *d) {
    if (desc && desc->single_threaded && desc->workers)
        return FSCHED__MISUSE(&d->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "fsched_create: single_threaded with %lu workers (a single-threaded "
                              "scheduler has no worker threads: leave workers 0)",
                              (unsigned long)desc->workers);
    if (d->workers > FSCHED_MAX_WORKERS || d->max_bound_threads > FSCHED_MAX_WORKERS)
        return FSCHED__MISUSE(&d->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "fsched_create: %lu workers and %lu bound threads: at most %d of "
                              "each (FSCHED_MAX_WORKERS)", (unsigned long)d->workers,
                              (unsigned long)d->max_bound_threads, FSCHED_MAX_WORKERS);
    if (d->interrupt_tasks > 65536)
        return FSCHED__MISUSE(&d->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "fsched_create: %lu interrupt tasks is too many",
                              (unsigned long)d->interrupt_tasks);
    return FSCHED_OK;
}

/* A scheduler for d (its defaults resolved), as yet without stacks, slots or workers;
   NULL: out of memory. */
static fsched_sched *fsched__sched_alloc(const fsched_desc *d) {
    fsched_allocator a = fsched__allocator_resolve(&d->allocator);
    fsched_sched *s = (fsched_sched *)fsched__alloc(&a, sizeof *s, FSCHED__CACHE_LINE);
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    s->magic = FSCHED__SCHED_LIVE;
    s->allocator = a;
    s->logger = d->logger;
    s->clock = d->clock;
    s->clock_user = d->clock_user;
    s->idle = d->idle;
    s->idle_user = d->idle_user;
    if (FSCHED__THREADS) { /* what only worker threads use */
        s->worker_start = d->worker_start;
        s->worker_stop = d->worker_stop;
        s->worker_user = d->worker_user;
        s->movable_tasks = d->movable_tasks != 0;
        /* the names of worker threads; memset: it ends */
        strncpy(s->worker_name, d->worker_name, sizeof s->worker_name - 1);
    }
    FSCHED__TRACE(s->trace_origin = fsched__sched_now(s); s->trace_events = d->trace_events;)
    s->n_threads = d->workers; /* (read through FSCHED__N_THREADS) */
    s->n_slots = d->workers + d->max_bound_threads + 1; /* the last bound slot is kept for
                                                          fsched_destroy */
    if (FSCHED__THREADS) s->counters = FSCHED__JEC_ONE; /* odd: active (only workers
                                                            read it) */
    fsched__injector_init(&s->injector);
    return s;
}

/* Gives s its stacks and slots, each worker thread's first fiber, its interrupt tasks
   and its CPUs, and enters it in the registry. On failure the caller frees s. */
static fsched_result fsched__sched_build(fsched_sched *s, const fsched_desc *d) {
    fsched_stack_pool_desc pd;
    fsched_result r;
    uint32_t i;
    memset(&pd, 0, sizeof pd);
    pd.stack_size = d->stack_size;
    pd.guard_size = d->guard_size;
    pd.stack_kind = d->stack_kind;
    /* slab stacks keep their pages when freed anyway: the pool may as well keep them all */
    pd.max_cached = d->stack_kind == FSCHED_STACK_SLAB || d->stack_kind == FSCHED_STACK_SMALL
                        ? SIZE_MAX
                        : 4u * (s->n_slots + 4u);
    pd.allocator = s->allocator;
    pd.logger = d->logger;
    r = fsched_stack_pool_create(&pd, &s->stacks);
    s->slots = (fsched__worker **)fsched__alloc(&s->allocator, s->n_slots * sizeof *s->slots,
                                                sizeof(void *));
    if (s->slots) memset(s->slots, 0, s->n_slots * sizeof *s->slots);
    else s->n_slots = 0;
    if (r != FSCHED_OK || !s->slots) return r != FSCHED_OK ? r : FSCHED_ERR_OUT_OF_MEMORY;
    for (i = 0; i < s->n_slots; i++) {
        /* a worker thread's first loop fiber, so that it starts without allocating (and
           runs no task on its own stack for want of one); without workers, one for the
           slot fsched_destroy keeps: a stack the system cannot give fails here */
        int first_fiber = i < FSCHED__N_THREADS(s) || (!FSCHED__N_THREADS(s) && i == s->n_slots - 1);
        fsched_fiber *first = NULL;
        if (!(s->slots[i] = fsched__slot_new(s, i, i >= FSCHED__N_THREADS(s))))
            return FSCHED_ERR_OUT_OF_MEMORY;
        if (first_fiber && !(first = fsched__idle_take(s->slots[i])))
            return FSCHED__MISUSE(&d->logger, FSCHED_ERR_OUT_OF_MEMORY,
                                  "fsched_create: no fiber stack of %lu bytes could be had "
                                  "(out of memory or address space)",
                                  (unsigned long)s->stacks->params.stack_size);
        if (first) fsched__idle_park(s->slots[i], first);
    }
    if (d->interrupt_tasks && !fsched__reserve_create(s, d->interrupt_tasks))
        return FSCHED_ERR_OUT_OF_MEMORY;
    r = fsched__pin_plan(s, d);
    if (r != FSCHED_OK) return r;
    return FSCHED__LIVE_ADD(s) ? FSCHED_OK : FSCHED_ERR_OUT_OF_MEMORY;
}

/* Starts s's worker threads; on failure stops those started and frees s. */
#if FSCHED__THREADS
static fsched_result fsched__workers_start(fsched_sched *s) {
    uint32_t i;
    for (i = 0; i < FSCHED__N_THREADS(s); i++) {
        fsched_result r =
            fsched__os_thread_start(&s->slots[i]->os_thread, fsched__worker_main, s->slots[i]);
        if (r != FSCHED_OK) {
            fsched__log(&s->logger, FSCHED_LOG_ERROR, "fsched_create: cannot start worker %lu",
                        (unsigned long)i);
            /* the started workers' stop hooks find s closing (seq_cst, as in destroy) */
            FSCHED__STORE(&s->closing, 1u, FSCHED__SEQ_CST);
            fsched__stop_workers(s);
            fsched__live_remove(s);
            fsched__sched_free(s);
            return r;
        }
        s->started++;
    }
    return FSCHED_OK;
}
#else
static fsched_result fsched__workers_start(fsched_sched *s) {
    (void)s; /* none to start */
    return FSCHED_OK;
}
#endif

FIBERSCHED_API fsched_result fsched_create(const fsched_desc *desc, fsched_sched **out) {
    fsched_desc d;
    fsched_sched *s;
    fsched_result r;
    fsched__desc_defaults(desc, &d);
    if (!out) return FSCHED__MISUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT,
                                    "fsched_create: out is NULL");
    *out = NULL;
    r = fsched__desc_check(desc, &d);
    if (r != FSCHED_OK) return r;
    s = fsched__sched_alloc(&d);
    if (!s) return FSCHED_ERR_OUT_OF_MEMORY;
    r = fsched__sched_build(s, &d);
    if (r != FSCHED_OK) {
        fsched__sched_free(s);
        return r;
    }
    /* before the workers start: each sets up its alternate signal stack as it starts */
    if (!d.no_overflow_handler) (void)fsched_install_overflow_handler();
    r = fsched__workers_start(s);
    if (r == FSCHED_OK) *out = s;
    return r;
}

/* A bound slot's in_use: free, or taken by fsched_bind, or by a call from outside for
   the length of the call (fsched__call_bound). */
#define FSCHED__SLOT_FREE 0u
#define FSCHED__SLOT_BOUND 1u
#define FSCHED__SLOT_CALL 2u

/* Claims a bound slot for the calling thread; `reserved` may take the last one. For a
   call from outside (`turn` non-NULL), finding every slot taken while a call holds one
   sets *turn: that slot will be freed, and the caller may wait for it. */
static fsched_result fsched__bind(fsched_sched *s, int reserved, fsched__worker **out,
                                  int *turn) {
    fsched__thread *t = fsched__thread_get();
    uint32_t i, last = s->n_slots - (reserved ? 0u : 1u), calls = 0;
    fsched_result r;
    if (t->worker)
        return FSCHED__MISUSE(&s->logger, FSCHED_ERR_WRONG_STATE,
                              "fsched_bind: the thread already works for a scheduler");
    if (t->current == &t->root && (r = fsched__ctx_prepare_root(t->current)) != FSCHED_OK)
        return r; /* Windows fibers: the thread becomes one, as for fsched_fiber_switch */
    for (i = FSCHED__N_THREADS(s); i < last; i++) {
        fsched__worker *w = s->slots[i];
        uint32_t expected = FSCHED__SLOT_FREE;
        /* acquire: the previous binder's release in fsched__unbind */
        if (FSCHED__CAS(&w->in_use, &expected, turn ? FSCHED__SLOT_CALL : FSCHED__SLOT_BOUND,
                        FSCHED__ACQUIRE, FSCHED__RELAXED)) {
            fsched__mutex_lock(&w->affine.lock);
            w->affine.closed = 0;
            fsched__mutex_unlock(&w->affine.lock);
            w->thread = t;
            w->root = t->current;
            w->root->owner = w;
            w->root->id = fsched__fiber_id(s);
            FSCHED__TRACE(w->root->trace_id = 0;) /* a track of this slot's own numbering */
            t->worker = w; /* its joins take the call (fsched__own_call_begin) */
            *out = w;
            return FSCHED_OK;
        }
        /* (without threads no other thread's call can hold a slot) */
        calls += FSCHED__THREADS && expected == FSCHED__SLOT_CALL;
    }
    if (turn && calls) {
        *turn = 1;
        return FSCHED_ERR_OUT_OF_MEMORY;
    }
    return FSCHED__MISUSE(&s->logger, FSCHED_ERR_OUT_OF_MEMORY,
                          "fsched_bind: all %lu bound-thread slots are taken",
                          (unsigned long)(s->n_slots - FSCHED__N_THREADS(s) - 1));
}

/* Whether the calling bound thread runs its own code: on its root fiber, and not in a
   task that the root runs on its stack for want of a fiber (out of memory). */
static int fsched__in_own_code(const fsched__thread *t) {
    return t->current == t->worker->root && !t->current->inline_depth;
}

/* Acquire, the inbox: pairs with a post's release CAS, as where it is collected; relaxed,
   the affinity queue's size: fsched__unbind reads it again under the queue's lock. */
static int fsched__slot_drained(fsched__worker *w) {
    return w->blocked == 0 && !w->ready_head && !FSCHED__LOAD(&w->inbox, FSCHED__ACQUIRE) &&
           fsched__deque_empty(&w->deque) && fsched__cl_looks_empty(&w->high) &&
           fsched__cl_looks_empty(&w->low) && !FSCHED__LOAD(&w->affine.size, FSCHED__RELAXED);
}

static void fsched__unbind(fsched__worker *w) {
    fsched__thread *t = &fsched__tls_thread;
    for (;;) { /* what it queued runs before it leaves; then nothing more may be queued */
        fsched__schedule(w, fsched__slot_drained);
        fsched__mutex_lock(&w->affine.lock);
        w->affine.closed = w->affine.size == 0;
        fsched__mutex_unlock(&w->affine.lock);
        if (w->affine.closed) break;
    }
    fsched__release_fibers(w);
    t->worker = NULL;
    w->thread = NULL;
    w->root = NULL;
    /* release: the slot's state is complete before another thread binds it */
    FSCHED__STORE(&w->in_use, FSCHED__SLOT_FREE, FSCHED__RELEASE);
}

/* fsched_bind, or with `for_call` a bind for the length of a call from outside, which
   waits its turn while the slots are taken by other such calls. */
static fsched_result fsched__bind_open(fsched_sched *s, int for_call) {
    uint32_t spins = 0;
    /* (without threads there are no worker hooks to be in) */
    if (FSCHED__THREADS && fsched__thread_get()->in_worker_hook)
        return FSCHED__MISUSE(NULL, FSCHED_ERR_WRONG_STATE,
                              "fsched_bind: called from a worker's start or stop hook");
    for (;;) {
        fsched__worker *w;
        int turn = 0;
        fsched_result r;
        /* under the registry's lock: fsched_destroy, which checks for bound threads and
           begins under it exclusively, sees this bind or is seen by it */
        fsched__live_read_lock();
        r = fsched__sched_open(s, 1, "fsched_bind");
        if (r == FSCHED_OK) {
            FSCHED__POINT(BIND);
            r = fsched__bind(s, 0, &w, for_call ? &turn : NULL);
        }
        fsched__live_read_unlock();
        if (!turn) return r;
        fsched__backoff(&spins); /* a slot is freed when the call that holds it ends */
    }
}

FIBERSCHED_API fsched_result fsched_bind(fsched_sched *s) { return fsched__bind_open(s, 0); }

FIBERSCHED_API fsched_result fsched_unbind(void) {
    fsched__thread *t = fsched__thread_get();
    fsched__worker *w = t->worker;
    if (!w || !FSCHED__BOUND(w))
        return FSCHED__REFUSE(w ? &w->sched->logger : NULL, FSCHED_ERR_WRONG_STATE,
                              "the thread is %s", w ? "a worker" : "not bound");
    if (!fsched__in_own_code(t))
        return FSCHED__REFUSE(&w->sched->logger, FSCHED_ERR_WRONG_STATE,
                              "called from a task, not from the bound thread itself");
    if (w->own_calls)
        return FSCHED__REFUSE(&w->sched->logger, FSCHED_ERR_WRONG_STATE,
                              "called inside a fork-join call of the thread's own code");
    fsched__unbind(w);
    return FSCHED_OK;
}

/* fsched_destroy's test, run when its slot is idle: every unit of work begun (tasks,
   graph and pipeline runs) has ended, and no call from outside holds s. Counts only grow;
   ends are summed before beginnings, so equal sums mean that at some moment nothing was
   outstanding, and nothing can begin after that: only outstanding work and, before
   closing, callers outside begin work. The holds are read first: a call that held s and
   left has counted what it began (its release pairs with the acquire). A call that
   takes a hold later does so through outstanding work, which the counts see, or finds s
   closing; one still inside when this returns is waited for before s is freed. */
static int fsched__quiescent(fsched__worker *self) {
    fsched_sched *s = self->sched;
    uint32_t spins = 0, i;
    FSCHED__POINT(DRAIN);
    for (;;) {
        fsched__work_count ended, begun;
        if (!FSCHED__LOAD(&s->holds, FSCHED__ACQUIRE)) {
            /* seq_cst: pairs with fsched__idle_begin (its RMW of the counters releases
               the slot's counts) and with fsched__work_ended */
            if (FSCHED__THREADS) (void)FSCHED__LOAD(&s->counters, FSCHED__SEQ_CST);
            ended = FSCHED__LOAD(&s->external_ended, FSCHED__SEQ_CST);
            for (i = 0; i < s->n_slots; i++)
                ended += FSCHED__LOAD_THREADS(&s->slots[i]->completed, FSCHED__ACQUIRE);
            begun = FSCHED__LOAD(&s->external_begun, FSCHED__ACQUIRE);
            for (i = 0; i < s->n_slots; i++)
                begun += FSCHED__LOAD_THREADS(&s->slots[i]->spawned, FSCHED__ACQUIRE);
            return ended == begun && !FSCHED__LOAD(&s->injector.size, FSCHED__ACQUIRE);
        }
        fsched__backoff(&spins); /* a call from outside is on its way out */
    }
}

FIBERSCHED_API fsched_result fsched_destroy(fsched_sched *s) {
    fsched__thread *t;
    fsched__worker *w = NULL;
    fsched_result r = FSCHED_OK;
    uint32_t i, spins = 0;
    if (!s) return FSCHED_OK;
    t = fsched__thread_get();
    /* exclusively: no call may enter s through the registry while destroy begins (a
       bind, a spawn from outside: they see s closing afterwards, or are seen here) */
    fsched__live_write_lock();
    if ((r = fsched__sched_open(s, 1, __func__)) != FSCHED_OK) {
        /* destroyed already, or another thread destroys it */
    } else if (t->worker && (t->worker->sched != s || !FSCHED__BOUND(t->worker) ||
                             !fsched__in_own_code(t))) {
        r = FSCHED__REFUSE(&s->logger, FSCHED_ERR_WRONG_STATE,
                           "called from a task or from another scheduler");
    } else if (FSCHED__THREADS && t->in_worker_hook == s) {
        r = FSCHED__REFUSE(&s->logger, FSCHED_ERR_WRONG_STATE,
                           "called from the scheduler's own worker hook");
    } else if (t->worker && t->worker->own_calls) {
        r = FSCHED__REFUSE(&s->logger, FSCHED_ERR_WRONG_STATE,
                           "called inside a fork-join call of the bound thread's own code");
    } else {
        /* acquire: pairs with the release that frees a slot (fsched__unbind) */
        for (i = FSCHED__N_THREADS(s); i < s->n_slots; i++)
            if (s->slots[i] != t->worker && FSCHED__LOAD(&s->slots[i]->in_use, FSCHED__ACQUIRE))
                r = FSCHED__REFUSE(&s->logger, FSCHED_ERR_WRONG_STATE,
                                   "another thread is still bound");
    }
    if (r == FSCHED_OK) {
        w = t->worker;
        if (!w) /* the reserved slot: free, as s is not closing */
            r = fsched__bind(s, 1, &w, NULL);
    }
    if (r == FSCHED_OK) {
        FSCHED__STORE(&s->drainer, w, FSCHED__RELAXED); /* relaxed: the next store publishes it */
        /* seq_cst: see fsched__idle_begin and fsched__work_ended */
        FSCHED__STORE(&s->closing, 1u, FSCHED__SEQ_CST);
    }
    fsched__live_write_unlock();
    if (r != FSCHED_OK) return r;
    FSCHED__POINT(CLOSING);
    if (fsched__watch_of(s)) fsched__watch_of(s)->close(s);
    fsched__schedule(w, fsched__quiescent);
    fsched__stop_workers(s);
    fsched__unbind(w);
    fsched__live_write_lock();
    fsched__live_remove_locked(s); /* from now on, calls find s gone */
    s->magic = FSCHED__SCHED_DEAD;
    fsched__live_write_unlock();
    /* acquire: pairs with the release of the last call that held s */
    while (FSCHED__LOAD(&s->holds, FSCHED__ACQUIRE)) fsched__backoff(&spins);
    fsched__sched_free(s);
    return FSCHED_OK;
}

/* The thread read anew, as fsched_worker_index: a movable task may ask after a wait, on
   another thread, and where the thread pointer is a register (AArch64, RISC-V, POWER) a
   compiler reads it once per function: inlined into the task, a plain read would give
   the thread that ran it before the wait. */
FIBERSCHED_API fsched_sched *fsched_current(void) {
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    return w ? w->sched : NULL;
}

FIBERSCHED_API uint32_t fsched_worker_count(const fsched_sched *s) {
    uint32_t n;
    if (fsched__sched_enter((fsched_sched *)s, 0, __func__) != FSCHED_OK) return 0;
    n = FSCHED__N_THREADS(s);
    fsched__sched_release((fsched_sched *)s);
    return n;
}

FIBERSCHED_API fsched_result fsched_get_stats(const fsched_sched *s, fsched_stats *out) {
    fsched_sched *m = (fsched_sched *)s;
    fsched_stack_pool_stats pool;
    int64_t fibers = 0;
    uint32_t i;
    fsched_result r;
    if (!out) return FSCHED__REFUSE(NULL, FSCHED_ERR_INVALID_ARGUMENT, "out is NULL");
    if ((r = fsched__sched_enter(m, 0, __func__)) != FSCHED_OK) return r;
    memset(out, 0, sizeof *out);
    /* under the lock of fibers in transit: none is counted twice or missed as it moves */
    fsched__spin_lock(&m->transit_lock);
    /* relaxed: statistics, each count read on its own */
    for (i = 0; i < m->n_slots; i++) {
        fsched__worker *w = m->slots[i];
        if (!w) continue;
        out->jobs_run += FSCHED__LOAD_THREADS(&w->jobs_run, FSCHED__RELAXED);
        out->steals += FSCHED__LOAD_THREADS(&w->steals, FSCHED__RELAXED);
        out->sleeps += FSCHED__LOAD_THREADS(&w->sleeps, FSCHED__RELAXED);
        out->wakeups += FSCHED__LOAD(&w->wakeups, FSCHED__RELAXED);
        out->fibers_moved += FSCHED__LOAD_THREADS(&w->moves, FSCHED__RELAXED);
        fibers += FSCHED__LOAD_THREADS(&w->fibers, FSCHED__RELAXED);
    }
    fibers += m->fibers_moving;
    fsched__spin_unlock(&m->transit_lock);
    out->fibers = fibers > 0 ? (uint64_t)fibers : 0; /* counts read apart may cross */
    out->fd_registrations = FSCHED__LOAD(&m->fd_registrations, FSCHED__RELAXED);
    out->fd_events = FSCHED__LOAD(&m->fd_events, FSCHED__RELAXED);
    if (fsched_stack_pool_get_stats(m->stacks, &pool) == FSCHED_OK) {
        out->stacks_cached = pool.cached;
        out->stacks_allocated = pool.allocated;
    }
    fsched__sched_release(m);
    return FSCHED_OK;
}

FIBERSCHED_API int fsched_worker_index(void) { /* see fsched_current */
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    return w ? (int)w->index : -1;
}

/* ---- the default scheduler ----
   The scheduler that fork-join calls from threads outside every scheduler run on: made
   at the first such call, by one thread, from the desc fsched_default_configure kept (or
   installed by fsched_default_set). A state word says where it stands; BUSY is a lock,
   held by the thread that makes, configures or installs it (others wait, briefly), so
   the desc and the pointer are written under it and published by the store that ends
   it. At exit the library's own default is destroyed unless a call from outside is still
   running on it (such calls count themselves in `calls`); in the child of a fork() the
   parent's is forgotten, its workers not being there. */

#define FSCHED__DEFAULT_NONE 0u /* not made: it may still be configured or installed */
#define FSCHED__DEFAULT_BUSY 1u /* a thread makes, configures or installs it */
#define FSCHED__DEFAULT_MADE 2u /* made by the library, destroyed at exit */
#define FSCHED__DEFAULT_SET 3u  /* the program's own (fsched_default_set) */
#define FSCHED__DEFAULT_GONE 4u /* the process exits: no default any more */

static uint32_t fsched__default_state;
static fsched_sched *fsched__default_sched;
static fsched_desc fsched__default_desc; /* fsched_default_configure's copy */
static int fsched__default_configured;
static uint32_t fsched__default_calls;   /* calls from outside running on the default */
static uint32_t fsched__default_hooked;  /* the exit and fork handlers are registered */

/* Takes the state from NONE to BUSY: 1; 0 when it holds a default (or the process
   exits). Waits while another thread holds it. */
static int fsched__default_claim(void) {
    uint32_t spins = 0;
    for (;;) {
        uint32_t expected = FSCHED__DEFAULT_NONE;
        /* acquire: what the last holder wrote (the desc) */
        if (FSCHED__CAS(&fsched__default_state, &expected, FSCHED__DEFAULT_BUSY,
                        FSCHED__ACQUIRE, FSCHED__RELAXED))
            return 1;
        if (expected != FSCHED__DEFAULT_BUSY) return 0;
        fsched__backoff(&spins);
    }
}

/* Ends a claim with `state` (release: publishes what was written under it). */
static void fsched__default_unclaim(uint32_t state) {
    FSCHED__STORE(&fsched__default_state, state, FSCHED__RELEASE);
}

/* Under the registry's lock: whether s is the default, still live (not another
   scheduler made since at the address of one the program destroyed). */
static int fsched__default_live_locked(const fsched_sched *s) {
    return fsched__live_has(s) && s->magic == FSCHED__SCHED_LIVE && s->is_default;
}

static int fsched__default_live(const fsched_sched *s) {
    int live;
    fsched__live_read_lock();
    live = fsched__default_live_locked(s);
    fsched__live_read_unlock();
    return live;
}

/* At exit: no default from now on; the library's own is destroyed, unless the exiting
   thread works for a scheduler (a task that called exit) or a call from outside still
   runs on it (it is then left to the end of the process, as its other threads are). */
static void fsched__default_at_exit(void) {
    const fsched__thread *t = fsched__thread_get();
    uint32_t state = FSCHED__DEFAULT_NONE, spins = 0;
    /* seq_cst: against a call's count and read of the state (fsched__default_enter):
       either the call sees GONE, or this reads its count */
    while (!FSCHED__CAS(&fsched__default_state, &state, FSCHED__DEFAULT_GONE, FSCHED__SEQ_CST,
                        FSCHED__SEQ_CST))
        if (state == FSCHED__DEFAULT_BUSY) { /* being made: wait for its end */
            state = FSCHED__DEFAULT_NONE;
            fsched__backoff(&spins);
        }
    if (state != FSCHED__DEFAULT_MADE || t->worker || t->in_worker_hook ||
        FSCHED__LOAD(&fsched__default_calls, FSCHED__SEQ_CST))
        return;
    if (fsched__default_live(fsched__default_sched)) /* the program may have destroyed it */
        (void)fsched_destroy(fsched__default_sched);
}

#if defined(FSCHED__OS_POSIX)
/* fork(): the state is claimed (no thread makes or configures the default meanwhile) and
   the registry locked (no thread is inside it) across the fork, so that the child, whose
   only thread is the forking one, finds neither held by a thread it does not have. */
static int fsched__default_fork_claimed;
static fsched_sched *fsched__default_forsaken; /* a parent's, kept reachable */

static void fsched__default_fork_prepare(void) {
    fsched__default_fork_claimed = fsched__default_claim();
    fsched__live_write_lock();
}

static void fsched__default_fork_parent(void) {
    fsched__live_write_unlock();
    if (fsched__default_fork_claimed) fsched__default_unclaim(FSCHED__DEFAULT_NONE);
}

/* The parent's default has no workers here: the child makes its own at its first call.
   Relaxed: the only thread. */
static void fsched__default_fork_child(void) {
    uint32_t state = FSCHED__LOAD(&fsched__default_state, FSCHED__RELAXED);
    fsched__live_fork_child();
    if (state == FSCHED__DEFAULT_MADE) fsched__default_forsaken = fsched__default_sched;
    if (state != FSCHED__DEFAULT_GONE) {
        fsched__default_sched = NULL;
        FSCHED__STORE(&fsched__default_state, FSCHED__DEFAULT_NONE, FSCHED__RELAXED);
    }
    FSCHED__STORE(&fsched__default_calls, 0u, FSCHED__RELAXED);
}

static void fsched__default_fork_hook(void) {
    (void)pthread_atfork(fsched__default_fork_prepare, fsched__default_fork_parent,
                         fsched__default_fork_child);
}
#else
static void fsched__default_fork_hook(void) {}
#endif

/* Under the claim: the exit and fork handlers, once per process. */
static void fsched__default_hook(void) {
    if (fsched__default_hooked) return;
    fsched__default_hooked = 1;
    (void)atexit(fsched__default_at_exit);
    fsched__default_fork_hook();
}

/* Under the claim: makes the default. A failure leaves none, for a later call to try. */
static fsched_result fsched__default_make(fsched_sched **out, const char *what) {
    fsched_sched *s;
    const fsched_desc *d = fsched__default_configured ? &fsched__default_desc : NULL;
    fsched_result r = fsched_create(d, &s);
    if (r != FSCHED_OK) {
        if (FSCHED__DEBUG)
            fsched__log(&fsched__default_desc.logger, FSCHED_LOG_ERROR,
                        "%s: the default scheduler cannot be made: %s", what,
                        fsched_result_string(r));
        fsched__default_unclaim(FSCHED__DEFAULT_NONE);
        return r;
    }
    fsched__default_hook();
    s->is_default = 1; /* read only after the unclaim's release, as the pointer */
    fsched__default_sched = s;
    fsched__default_unclaim(FSCHED__DEFAULT_MADE);
    *out = s;
    return FSCHED_OK;
}

/* The default in *out, made now if there is none. */
static fsched_result fsched__default_find(fsched_sched **out, const char *what) {
    FSCHED__POINT(DEFAULT);
    for (;;) {
        /* seq_cst: see fsched__default_at_exit; it acquires the pointer published with
           MADE or SET */
        uint32_t state = FSCHED__LOAD(&fsched__default_state, FSCHED__SEQ_CST);
        if (state == FSCHED__DEFAULT_MADE || state == FSCHED__DEFAULT_SET) {
            *out = fsched__default_sched;
            return FSCHED_OK;
        }
        if (state == FSCHED__DEFAULT_GONE)
            return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE,
                                  "%s: the process is exiting: there is no default scheduler",
                                  what);
        if (fsched__default_claim()) return fsched__default_make(out, what);
    }
}

/* The default in *out, made now if there is none, and still live. */
static fsched_result fsched__default_find_live(fsched_sched **out, const char *what) {
    fsched_result r = fsched__default_find(out, what);
    if (r == FSCHED_OK && !fsched__default_live(*out))
        r = FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE,
                           "%s: the default scheduler was destroyed", what);
    return r;
}

/* A call from outside leaves the default (release: its last touch of it). */
static void fsched__default_leave(void) {
    FSCHED__FETCH_SUB(&fsched__default_calls, 1u, FSCHED__RELEASE);
}

/* A call from outside enters the default, made now if there is none: FSCHED_OK, counted
   in `calls` and holding *out (live and not being destroyed), or why not. */
static fsched_result fsched__default_enter(fsched_sched **out, const char *what) {
    fsched_result r;
    /* seq_cst: counted before the state is read (see fsched__default_at_exit) */
    FSCHED__FETCH_ADD(&fsched__default_calls, 1u, FSCHED__SEQ_CST);
    if ((r = fsched__default_find(out, what)) == FSCHED_OK) {
        fsched__live_read_lock();
        if (!fsched__default_live_locked(*out))
            r = FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE,
                               "%s: the default scheduler was destroyed", what);
        else if ((r = fsched__sched_refuse_closing(*out, what)) == FSCHED_OK)
            /* relaxed: the registry's lock orders it against destroy */
            FSCHED__FETCH_ADD(&(*out)->holds, 1u, FSCHED__RELAXED);
        fsched__live_read_unlock();
    }
    if (r != FSCHED_OK) fsched__default_leave();
    return r;
}

FIBERSCHED_API fsched_result fsched_default_configure(const fsched_desc *desc) {
    if (!fsched__default_claim())
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE,
                              "the default scheduler exists already "
                              "(made, set or gotten), or the process is exiting");
    if (desc) fsched__default_desc = *desc;
    else memset(&fsched__default_desc, 0, sizeof fsched__default_desc);
    fsched__default_configured = desc != NULL;
    fsched__default_unclaim(FSCHED__DEFAULT_NONE);
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_default_set(fsched_sched *s) {
    fsched_result r = fsched__sched_enter(s, 1, __func__);
    if (r != FSCHED_OK) return r;
    if (fsched__default_claim()) {
        fsched__default_hook();
        s->is_default = 1; /* read only after the unclaim's release, as the pointer */
        fsched__default_sched = s;
        fsched__default_unclaim(FSCHED__DEFAULT_SET);
    } else {
        r = FSCHED__REFUSE(&s->logger, FSCHED_ERR_WRONG_STATE,
                           "the default scheduler exists already (made, "
                           "set or gotten), or the process is exiting");
    }
    fsched__sched_release(s);
    return r;
}

FIBERSCHED_API fsched_result fsched_default_get(fsched_sched **out) {
    fsched_sched *s = NULL;
    fsched_result r;
    if (!out)
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "out is NULL");
    r = fsched__default_find_live(&s, __func__);
    *out = r == FSCHED_OK ? s : NULL;
    return r;
}

/* ===================================================================================== */
/*  sync: event, wait group, mutex, condition variable, semaphore, sleep, yield         */
/* ===================================================================================== */
/* ---- blocking a thread on its waiter --------------------------------------------- */

/* A waker ends a thread's wait and records the wake. Called with the list locked and
   the waiter still linked, so the record is alive. 0 when the waiter's own timeout won
   the race. */
static int fsched__thread_waiter_end(fsched__waiter *wt, fsched__wakes *wakes) {
    uint32_t expected = FSCHED__WAIT_WAITING;
    /* acq_rel: releases the waker's writes to the waiter; a lost race with the
       waiter's own timeout leaves the record alone */
    if (!FSCHED__CAS(&wt->state, &expected, FSCHED__WAIT_WAKER_STATE, FSCHED__ACQ_REL,
                     FSCHED__RELAXED))
        return 0;
    if (FSCHED__THREADS) fsched__wake_add(wakes, NULL, NULL, &wt->state, wt->parker);
    return 1;
}

/* Still waiting: WAITING, or WAKING (the wake is on its way). */
static int fsched__thread_waiter_waiting(uint32_t state) {
    return state == FSCHED__WAIT_WAITING || state == FSCHED__WAIT_WAKING;
}

/* The waiting thread sleeps until its state may have changed or its deadline may have
   passed; 0 at once when nothing could ever change it (no other thread exists). */
#if defined(FSCHED__PARKER_FUTEX)
static int fsched__thread_waiter_sleep(fsched__waiter *wt) {
    fsched__futex_wait(&wt->state, FSCHED__WAIT_WAITING, wt->deadline);
    return 1;
}
#elif defined(FSCHED__PARKER_COND)
static int fsched__thread_waiter_sleep(fsched__waiter *wt) {
    /* the waker sets WOKEN under this mutex, then broadcasts; acquire: pairs with its
       release store */
    fsched__parker *p = wt->parker;
    fsched__parker_lock(p);
    for (;;) {
        uint32_t state = FSCHED__LOAD(&wt->state, FSCHED__ACQUIRE);
        uint64_t deadline = state == FSCHED__WAIT_WAITING ? wt->deadline : 0, now = 0;
        if (!fsched__thread_waiter_waiting(state)) break;
        if (deadline && (now = fsched__clock_ns()) >= deadline) break;
        fsched__parker_sleep(p, deadline, now);
    }
    fsched__parker_unlock(p);
    return 1;
}
#else
static int fsched__thread_waiter_sleep(fsched__waiter *wt) {
    if (!wt->deadline) return 0; /* no other thread exists to end this wait */
    fsched__cpu_relax();
    return 1;
}
#endif

/* The waiting thread's side: returns once its wait has ended, having ended it itself
   with TIMED_OUT if the deadline came first (or at once, with ABORTED, when no thread
   could ever wake it). Acquire, each read of the state: pairs with the CAS (or the store
   of WOKEN) that ended the wait; acq_rel, its own end of it, as a waker's. */
static void fsched__thread_waiter_block(fsched__waiter *wt) {
    for (;;) {
        uint32_t expected = FSCHED__WAIT_WAITING, to = FSCHED__WAIT_TIMED_OUT;
        uint32_t state = FSCHED__LOAD(&wt->state, FSCHED__ACQUIRE);
        if (!fsched__thread_waiter_waiting(state)) break;
        if (state != FSCHED__WAIT_WAITING || !wt->deadline || fsched__clock_ns() < wt->deadline) {
            if (fsched__thread_waiter_sleep(wt)) continue;
            to = FSCHED__WAIT_ABORTED;
        }
        /* a timeout, or none to come: end the wait ourselves, unless a waker got there first */
        if (FSCHED__CAS(&wt->state, &expected, to, FSCHED__ACQ_REL, FSCHED__ACQUIRE)) {
            fsched__wait_list_leave(wt);
            break;
        }
    }
    /* WOKEN may have been read before the waker unlocked our parker's mutex */
    fsched__parker_lock_pass(wt->parker);
}

/* Under the lock: removes a waiter and, unless it timed out meanwhile (0), ends it,
   recording how to resume it. A fiber waiter is made ready on its worker; a worker
   waiting inline (it had no fiber to switch to) is told; a thread is woken as above. */
static int fsched__wait_list_end(fsched_wait_list *l, fsched__waiter *wt, fsched__wakes *wakes) {
    fsched_fiber *fiber = wt->fiber;
    fsched__worker *worker = wt->worker;
    fsched_sched *held = NULL;
    uint32_t expected = FSCHED__WAIT_WAITING;
    fsched__wait_list_remove(l, wt);
    if (!fiber && !worker) {
        if (!fsched__thread_waiter_end(wt, wakes))
            return 0; /* it timed out meanwhile and will find itself unlinked */
        FSCHED__POINT(WAKE);
        return 1;
    }
    /* acq_rel: releases the waker's writes (e.g. a mutex handed over) to the waiter;
       loses to a timer that already timed the waiter out */
    if (!FSCHED__CAS(&wt->state, &expected, FSCHED__WAIT_WOKEN, FSCHED__ACQ_REL, FSCHED__RELAXED))
        return 0;
    FSCHED__POINT(WAKE);
    /* a fiber waiter stays suspended until made ready: its record outlives this */
    if (fiber) {
        if (fsched__post_ready(worker, fiber, &held))
            fsched__wake_add(wakes, worker, held, NULL, NULL);
    } else {
        fsched__wake_add(wakes, worker, fsched__hold_for(worker), NULL, NULL);
    }
    return 1;
}

/* Under the lock: ends the first waiter still waiting. Returns 1 if one was ended. */
static int fsched__wait_list_wake_one(fsched_wait_list *l, fsched__wakes *wakes) {
    while (l->head)
        if (fsched__wait_list_end(l, (fsched__waiter *)l->head, wakes)) return 1;
    return 0;
}

/* Under the lock: ends every waiter. */
static void fsched__wait_list_wake_all(fsched_wait_list *l, fsched__wakes *wakes) {
    while (fsched__wait_list_wake_one(l, wakes)) {
    }
}

/* The caller of a job run inline, nested on its fiber's stack: it cannot go on until
   the job returns. A chain per fiber, innermost first. */
typedef struct fsched__nest {
    struct fsched__nest *below;
    const fsched__waiter *wait; /* an inline wait, ready to go on once ended; */
    const uintptr_t *latch;     /* or a join's latch wait, once the latch is set (odd); */
} fsched__nest;                 /* or neither: a yield, ready at once */

/* Whether the caller recorded in n could go on now, before `wt` (which waits above it)
   ends. A condition variable's waiter whose wait is over locks its mutex next: while wt
   waits for that same mutex, it cannot go on first (a broadcast under the mutex ends
   the waiters' waits at once, and each then waits for the mutex in turn). Acquire:
   pairs with the CAS that ended the wait, or the exchange that set the latch. */
static int fsched__nest_ready(const fsched__nest *n, const fsched__waiter *wt) {
    if (n->wait && n->wait->relocks && n->wait->relocks == wt->object) return 0;
    return n->wait    ? FSCHED__LOAD(&n->wait->state, FSCHED__ACQUIRE) != FSCHED__WAIT_WAITING
           : n->latch ? (FSCHED__LOAD(n->latch, FSCHED__ACQUIRE) & 1u) != 0
                      : 1;
}

/* Runs a job on the running fiber, for a caller (in `nest`) that has no fiber to switch
   to (out of memory). That job may do the same in turn, nesting on the same stack: it
   may while at least half of the stack is free (on a thread's own stack, of unknown size,
   to a depth of 4), so that the stack cannot overflow. Returns 1 when it ran one, 0 when
   there was none, -1 when there is no room for one. */
#define FSCHED__INLINE_DEPTH_MAX 4u
static int fsched__run_inline(fsched__worker *w, fsched__nest *nest) {
    fsched_fiber *f = FSCHED__THREAD_NOW.current;
    fsched__job *job;
    char here; /* about where the stack pointer is (stacks grow down) */
    int room = f->stack_hi > f->stack_lo
                   ? (uintptr_t)&here - (uintptr_t)f->stack_lo >
                         (uintptr_t)(f->stack_hi - f->stack_lo) / 2
                   : f->inline_depth < FSCHED__INLINE_DEPTH_MAX;
    if (!room) return -1;
    if (!(job = fsched__find_job(w))) return 0;
    f->inline_depth++;
    if (FSCHED__THREADS) { /* for fsched__holds_up (without threads nothing reads it) */
        nest->below = f->nest;
        f->nest = nest;
    }
    fsched__run_job(w, job);
    if (FSCHED__THREADS) f->nest = nest->below;
    f->inline_depth--;
    return 1;
}

/* Owner, with no fiber to be had for the loop (out of memory): the running fiber lets
   a fiber of the slot that was woken run, going behind it in the FIFO, as a yield does
   (the loop, which fires the slot's timers and empties its inbox, may not run here for
   long: the thread waits inline, or is a bound thread that polls). Returns 0 when none
   was woken. */
static int fsched__yield_to_posted(fsched__worker *w) {
    fsched_fiber *next;
    fsched__gather_woken(w); /* as the loop does */
    if (!(next = fsched__ready_pop(w))) return 0;
    fsched__ready_append(w, w->thread->current); /* see fsched__switch_to */
    fsched__answer_request(w);
    fsched__switch_to(w, next);
    return 1;
}

/* Waits until no waker is inside the list's lock. Every wait calls it before it returns
   a success, fast paths included: the signal it saw may have been given inside a
   waker's critical section, and the caller may free the primitive next. */
static inline void fsched__wait_list_quiesce(const fsched_wait_list *l) {
    uint32_t spins = 0, lock;
    if (!FSCHED__THREADS) return; /* no waker runs beside the one thread */
    /* acquire: pairs with the waker's release of the lock. A waker preempted inside its
       few instructions gets the processor back through the back-off's yields. */
    while ((lock = FSCHED__LOAD(&l->lock, FSCHED__ACQUIRE)) != 0 && lock != FSCHED__LIST_DEAD)
        fsched__backoff(&spins);
}

/* With threads, an inline wait that finds nothing to run: whether it holds up a caller
   below it on the same stack that could go on (a yield; a wait woken, or timed out by
   the timers its loop fires). That caller's task cannot go on until this wait returns,
   and this one may wait for what that task would give (a mutex it holds): it must give
   up. But a wake-all ends its waiters oldest (lowest) first, all in one hold of the
   list's lock: once the lock is free, a wake-all that reached the one below has reached
   this one too. Acquire: pairs with the lock's release. */
static int fsched__holds_up(const fsched_fiber *f, const fsched__waiter *wt) {
    const fsched__nest *below = f->nest;
    if (!FSCHED__THREADS) return 0; /* there, an untimed wait fails at once */
    while (below && !fsched__nest_ready(below, wt)) below = below->below;
    if (!below) return 0;
    if (wt->list) fsched__wait_list_quiesce(wt->list);
    return FSCHED__LOAD(&wt->state, FSCHED__ACQUIRE) == FSCHED__WAIT_WAITING;
}

/* Owner: waits inline when no fiber can be had to switch to (out of memory): runs jobs
   on the running fiber (to the nesting bound), and fibers woken meanwhile from other
   threads (which may be what it waits for), until the waiter is resumed or times out.
   When nothing can run, an untimed wait without threads ends for want of memory, as
   does any wait that holds up a caller below it that could go on. Acquire and acq_rel,
   as in fsched__thread_waiter_block. */
static void fsched__wait_inline(fsched__worker *w, fsched__waiter *wt) {
    fsched__nest nest = {NULL, wt, NULL};
    while (FSCHED__LOAD(&wt->state, FSCHED__ACQUIRE) == FSCHED__WAIT_WAITING) {
        uint32_t end = FSCHED__WAIT_WAITING, expected = FSCHED__WAIT_WAITING;
        int ran = fsched__run_inline(w, &nest);
        const fsched__watch *watch;
        if (ran > 0 || fsched__yield_to_posted(w)) continue;
        watch = fsched__watch_of(w->sched);
        if (FSCHED__UNLIKELY(watch != NULL)) {
            watch->tick(w); /* what it waits for may come from outside (an fd) */
            if (FSCHED__LOAD(&wt->state, FSCHED__ACQUIRE) != FSCHED__WAIT_WAITING) continue;
        }
        if (wt->deadline && fsched__sched_now(w->sched) >= wt->deadline)
            end = FSCHED__WAIT_TIMED_OUT;
        /* nothing else can run (one thread), or no room to run what it may wait for: it
           could hang (as could every worker): it fails */
        else if ((!wt->deadline && (!FSCHED__THREADS || ran < 0)) ||
                 fsched__holds_up(w->thread->current, wt))
            end = FSCHED__WAIT_NO_MEMORY;
        else
            fsched__os_yield(); /* until the deadline, or another thread ends the wait */
        if (end != FSCHED__WAIT_WAITING &&
            FSCHED__CAS(&wt->state, &expected, end, FSCHED__ACQ_REL, FSCHED__ACQUIRE))
            fsched__wait_list_leave(wt);
    }
}

/* Sets up a waiter before the caller locks a wait list, so that nothing slow happens
   under the lock: a task or bound thread takes the fiber its worker will switch to and
   arms its timer; any other thread readies its parker. FSCHED_ERR_OUT_OF_MEMORY when the
   timer cannot be set. */
static fsched_result fsched__wait_begin(fsched__waiter *wt, uint64_t deadline, const char *what,
                                        const void *object) {
    /* read anew (not inlined): a movable task may have waited and moved before, in the
       function this is inlined into, and a compiler may reuse a thread-local address */
    fsched__thread *t = fsched__thread_get();
    fsched__worker *w = t->worker;
    if (fsched__in_interrupt()) /* it would block the very code it preempted */
        return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE,
                              "a wait from an interrupt handler");
    if (t->in_hook) /* it would hold the hook's lock, which fsched_set_poll waits for */
        return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE,
                              "a wait from a poll hook");
    memset(wt, 0, sizeof *wt);
    wt->deadline = deadline;
    wt->what = what;
    wt->object = object;
    if (w) {
        if (deadline && !fsched__timers()->add(w, wt)) return FSCHED_ERR_OUT_OF_MEMORY;
        wt->worker = w;
        wt->next_fiber = fsched__suspend_prepare(w);
        wt->fiber = wt->next_fiber ? t->current : NULL; /* none: wait inline */
    } else {
        wt->parker = &t->parker;
        fsched__parker_init(wt->parker);
    }
    return FSCHED_OK;
}

/* The wait was not needed after all (the caller never appended the waiter): gives back
   what fsched__wait_begin took. */
static void fsched__wait_abandon(fsched__waiter *wt) {
    if (!wt->worker) return;
    if (wt->timer) fsched__timers()->remove(wt->worker, wt);
    if (wt->next_fiber) fsched__suspend_cancel(wt->worker, wt->next_fiber);
}

/* Blocks on a waiter set up by fsched__wait_begin and, if `list` is not NULL, appended to
   the locked list, which this unlocks. A task or bound thread suspends its fiber; any
   other thread blocks. Returns FSCHED_OK when woken, FSCHED_ERR_TIMEOUT at the deadline,
   FSCHED_ERR_WRONG_STATE when the wait could never end (single-threaded deadlock),
   FSCHED_ERR_OUT_OF_MEMORY when it could not wait for want of a fiber. */
static fsched_result fsched__wait_commit(fsched_wait_list *list, fsched__waiter *wt) {
    fsched__worker *w = wt->worker;
    uint32_t state;
    if (w) {
        fsched_fiber *next = wt->next_fiber;
        /* without threads, the wait the fiber is in, for fsched__deadlock (nothing moves) */
        fsched_fiber *waiting = w->thread->current;
        if (!FSCHED__THREADS) waiting->move_waiter = wt;
        if (list) fsched__wait_list_unlock(list);
        FSCHED__POINT(WAITING);
        if (next) {
            fsched_fiber *self = wt->fiber;
            /* a movable task with no frame under it that keeps this worker may be shed
               once woken (fsched__shed), where another worker thread could adopt it */
            uint8_t offered = FSCHED__THREADS && FSCHED__UNLIKELY(self->movable_task) && !self->pins &&
                              !self->frames && !self->inline_depth && !self->is_root &&
                              FSCHED__N_THREADS(w->sched) >= 2;
            if (FSCHED__UNLIKELY(offered)) {
                self->move_waiter = wt;
                self->move_ok = 1;
            }
            fsched__suspend(w, next, wt->what, wt->object);
            if (FSCHED__UNLIKELY(offered)) self->move_ok = 0;
        } else {
            fsched__wait_inline(w, wt);
        }
        if (!FSCHED__THREADS) waiting->move_waiter = NULL;
        /* the worker it resumed on (a movable task's may have changed: its timer then
           went with its shedding) */
        if (wt->fiber) w = (fsched__worker *)wt->fiber->owner;
        if (wt->timer) fsched__timers()->remove(w, wt);
    } else {
        if (!list && !wt->deadline) return FSCHED_OK;
        if (list) fsched__wait_list_unlock(list);
        FSCHED__POINT(WAITING);
        fsched__thread_waiter_block(wt);
    }
    FSCHED__POINT(WOKEN_WAITER);
    if (list) fsched__wait_list_quiesce(list);
    /* acquire: pairs with the CAS of whoever ended the wait */
    state = FSCHED__LOAD(&wt->state, FSCHED__ACQUIRE);
    return state == FSCHED__WAIT_WOKEN       ? FSCHED_OK
           : state == FSCHED__WAIT_TIMED_OUT ? FSCHED_ERR_TIMEOUT
           : state == FSCHED__WAIT_NO_MEMORY ? FSCHED_ERR_OUT_OF_MEMORY
                                             : FSCHED_ERR_WRONG_STATE;
}

static void fsched__wait_list_init(fsched_wait_list *l) { memset(l, 0, sizeof *l); }

/* For _destroy: waits for a waker still inside the lock; refuses while someone waits
   or `busy` says why not; else poisons the lock word, so that every later call on the
   object (until it is initialised again) fails with a code instead of hanging on it. */
static fsched_result fsched__wait_list_retire(fsched_wait_list *l, const char *busy,
                                              const char *what) {
    /* The common case, nobody inside the lock and nobody waiting, poisons the word without
       taking the lock: a call that would take it now races the destroy, which is the
       program's error either way. Acquire: pairs with the last unlock, whose holder's
       writes of the count are seen; relaxed, the count: ordered by that; release, the
       poison: as the unlock it stands for. */
    if (FSCHED__THREADS && !busy && FSCHED__LOAD(&l->lock, FSCHED__ACQUIRE) == 0 &&
        FSCHED__LOAD(&l->count, FSCHED__RELAXED) == 0) {
        FSCHED__STORE(&l->lock, FSCHED__LIST_DEAD, FSCHED__RELEASE);
        return FSCHED_OK;
    }
    fsched__wait_list_lock(l);
    /* relaxed: under the lock, which orders the count's writes */
    if (FSCHED__LOAD(&l->count, FSCHED__RELAXED)) busy = "destroyed while waited on";
    if (busy) {
        fsched__wait_list_unlock(l);
        return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE, "%s: %s",
                              what, busy);
    }
    fsched__spin_unlock_to(&l->lock, FSCHED__LIST_DEAD);
    return FSCHED_OK;
}

/* In a public function, as the checks below: refuses a NULL argument, naming the function */
#define FSCHED__CHECK_ARG(ptr)                                                              \
    do {                                                                                    \
        if (!(ptr))                                                                         \
            return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT, \
                                  "NULL argument");                                         \
    } while (0)

/* A primitive that is NULL or was destroyed (its lock word poisoned): refused. Relaxed:
   a check of misuse; a destroy racing the call itself is undefined. */
#define FSCHED__CHECK_LIVE(obj)                                                             \
    do {                                                                                    \
        FSCHED__CHECK_ARG(obj);                                                             \
        if (FSCHED__LOAD(&(obj)->waiters.lock, FSCHED__RELAXED) == FSCHED__LIST_DEAD)       \
            return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT, \
                                  "the object was destroyed");                              \
    } while (0)

/* ---- event ----------------------------------------------------------------------- */

FIBERSCHED_API fsched_result fsched_event_init(fsched_event *e, int manual_reset, int initially_set) {
    FSCHED__CHECK_ARG(e);
    fsched__wait_list_init(&e->waiters);
    e->signaled = initially_set ? 1u : 0u;
    e->manual_reset = manual_reset ? 1u : 0u;
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_event_destroy(fsched_event *e) {
    FSCHED__CHECK_LIVE(e);
    return fsched__wait_list_retire(&e->waiters, NULL, __func__);
}

FIBERSCHED_API fsched_result fsched_event_set(fsched_event *e) {
    fsched__wakes wakes;
    FSCHED__CHECK_LIVE(e);
    wakes.n = 0;
    fsched__wait_list_lock(&e->waiters);
    if (e->manual_reset) {
        /* release: what the setter wrote is visible to waiters that see the flag */
        FSCHED__STORE(&e->signaled, 1u, FSCHED__RELEASE);
        fsched__wait_list_wake_all(&e->waiters, &wakes);
    } else if (!fsched__wait_list_wake_one(&e->waiters, &wakes)) {
        FSCHED__STORE(&e->signaled, 1u, FSCHED__RELEASE); /* release, as above: next wait */
    }
    fsched__wait_list_unlock_wake(&e->waiters, &wakes);
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_event_reset(fsched_event *e) {
    FSCHED__CHECK_LIVE(e);
    /* relaxed: a reset publishes nothing; a wait that sees it looks again under the lock */
    FSCHED__STORE(&e->signaled, 0u, FSCHED__RELAXED);
    return FSCHED_OK;
}

/* Relaxed, the lock word: a check of misuse, as FSCHED__CHECK_LIVE; acquire, the flag:
   pairs with the setter's release. */
FIBERSCHED_API int fsched_event_is_set(const fsched_event *e) {
    return e && FSCHED__LOAD(&e->waiters.lock, FSCHED__RELAXED) != FSCHED__LIST_DEAD &&
           FSCHED__LOAD(&e->signaled, FSCHED__ACQUIRE) != 0;
}

/* Takes the signal if it is there: always for manual reset, consuming it otherwise.
   Acquire: pairs with the setter's release; relaxed on failure: no signal to read. */
static int fsched__event_try(fsched_event *e) {
    uint32_t expected = 1;
    if (e->manual_reset) return FSCHED__LOAD(&e->signaled, FSCHED__ACQUIRE) != 0;
    return FSCHED__CAS(&e->signaled, &expected, 0u, FSCHED__ACQUIRE, FSCHED__RELAXED);
}

static fsched_result fsched__event_wait(fsched_event *e, uint64_t deadline) {
    fsched__waiter wt;
    fsched_result r;
    if (fsched__event_try(e)) {
        fsched__wait_list_quiesce(&e->waiters);
        return FSCHED_OK;
    }
    r = fsched__wait_begin(&wt, deadline, "event", e);
    if (r != FSCHED_OK) return r;
    fsched__wait_list_lock(&e->waiters);
    if (fsched__event_try(e)) { /* set meanwhile */
        fsched__wait_list_unlock(&e->waiters);
        fsched__wait_abandon(&wt);
        return FSCHED_OK;
    }
    fsched__wait_list_append(&e->waiters, &wt);
    return fsched__wait_commit(&e->waiters, &wt);
}

FIBERSCHED_API fsched_result fsched_event_wait(fsched_event *e) {
    FSCHED__CHECK_LIVE(e);
    return fsched__event_wait(e, 0);
}

#define FSCHED__CHECK_CLOCK()                                                               \
    do {                                                                                    \
        if (!fsched__have_clock())                                                          \
            return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_UNSUPPORTED,      \
                                  "no clock (give the scheduler's desc a clock)");          \
    } while (0)

FIBERSCHED_API fsched_result fsched_event_wait_for(fsched_event *e, uint64_t timeout_ns) {
    FSCHED__CHECK_LIVE(e);
    if (fsched__event_try(e)) {
        fsched__wait_list_quiesce(&e->waiters);
        return FSCHED_OK;
    }
    if (!timeout_ns) return FSCHED_ERR_TIMEOUT;
    FSCHED__CHECK_CLOCK();
    return fsched__event_wait(e, fsched__wait_deadline(timeout_ns));
}

/* ---- wait group ------------------------------------------------------------------ */

FIBERSCHED_API fsched_result fsched_wait_group_init(fsched_wait_group *wg) {
    FSCHED__CHECK_ARG(wg);
    fsched__wait_list_init(&wg->waiters);
    wg->count = 0;
    wg->single = NULL;
    wg->lease = NULL;
    wg->leased = 0;
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_wait_group_destroy(fsched_wait_group *wg) {
    FSCHED__CHECK_LIVE(wg);
    /* acquire, as a waiter reads the count: the work counted happened before a zero */
    return fsched__wait_list_retire(&wg->waiters,
                                    FSCHED__LOAD(&wg->count, FSCHED__ACQUIRE) != 0
                                        ? "work is still counted" : NULL,
                                    __func__);
}

/* Whether adding n, of magnitude step, to a group's count c is refused (FSCHED_OK: not). */
static inline fsched_result fsched__wait_group_check(uint64_t c, int64_t n, uint64_t step) {
    if (n > 0 && c > (uint64_t)INT64_MAX - step)
        return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "fsched_wait_group_add: the count would pass INT64_MAX");
    if (n < 0 && step > c)
        return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE,
                              "fsched_wait_group_add: the count would go below zero");
    return FSCHED_OK;
}

/* The count is unsigned: the program's adds keep it at most INT64_MAX, and the units that
   tasks leaving a lease add (fsched__task_leaving) may take it past, never failing. */
FIBERSCHED_API fsched_result fsched_wait_group_add(fsched_wait_group *wg, int64_t n) {
    fsched__wakes wakes;
    uint64_t c, step = n < 0 ? (uint64_t)0 - (uint64_t)n : (uint64_t)n; /* |n| */
    fsched_result r;
    FSCHED__CHECK_LIVE(wg);
    /* with threads, without the lock while the count stays above zero; without threads
       always under it, which costs no more than the CAS (interrupts masked), and the
       count is read there alone. Relaxed: a guess the CAS checks. */
    if (FSCHED__THREADS) c = FSCHED__LOAD(&wg->count, FSCHED__RELAXED);
    while (FSCHED__THREADS) {
        if ((r = fsched__wait_group_check(c, n, step)) != FSCHED_OK) return r;
        if (n < 0 && step == c) break;
        /* acq_rel: the work counted down happens before a waiter returns */
        if (FSCHED__CAS_WEAK(&wg->count, &c, n < 0 ? c - step : c + step, FSCHED__ACQ_REL,
                             FSCHED__RELAXED))
            return FSCHED_OK;
    }
    /* reaching zero: under the lock, together with the wakes (a waiter that sees zero may
       free the group at once) */
    wakes.n = 0;
    fsched__wait_list_lock(&wg->waiters);
    /* relaxed, the guess, and acq_rel, the CAS: as above; without threads the lock masks
       interrupts, and a plain read does */
    c = FSCHED__THREADS ? FSCHED__LOAD(&wg->count, FSCHED__RELAXED) : wg->count;
    for (;;) {
        if ((r = fsched__wait_group_check(c, n, step)) != FSCHED_OK) {
            fsched__wait_list_unlock(&wg->waiters);
            return r;
        }
        if (!FSCHED__THREADS) { /* the lock masks interrupts: nothing else writes it */
            wg->count = n < 0 ? c - step : c + step;
            break;
        }
        if (FSCHED__CAS_WEAK(&wg->count, &c, n < 0 ? c - step : c + step, FSCHED__ACQ_REL,
                             FSCHED__RELAXED))
            break;
    }
    if (n < 0 && c == step) fsched__wait_list_wake_all(&wg->waiters, &wakes);
    fsched__wait_list_unlock_wake(&wg->waiters, &wakes);
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_wait_group_done(fsched_wait_group *wg) {
    return fsched_wait_group_add(wg, -1);
}

/* ---- tasks: what wait groups count ----------------------------------------------- */

static fsched__task *fsched__task_alloc(fsched__worker *w) {
    fsched__task *t = w->free_tasks;
    /* relaxed: a look; acquire, the exchange: pairs with the release CAS of remote frees */
    if (!t && FSCHED__LOAD(&w->remote_free, FSCHED__RELAXED))
        t = FSCHED__EXCHANGE(&w->remote_free, (fsched__task *)NULL, FSCHED__ACQUIRE);
    if (!t) {
        fsched__task_slab *slab = (fsched__task_slab *)fsched__alloc(
            &w->sched->allocator, sizeof *slab, FSCHED__CACHE_LINE);
        uint32_t i;
        if (!slab) return NULL;
        slab->next = w->slabs;
        w->slabs = slab;
        for (i = 0; i < FSCHED__TASKS_PER_SLAB; i++) {
            slab->tasks[i].home = w;
            slab->tasks[i].next = i + 1 < FSCHED__TASKS_PER_SLAB ? &slab->tasks[i + 1] : NULL;
        }
        t = &slab->tasks[0];
    }
    w->free_tasks = t->next;
    return t;
}

/* ---- tasks of interrupt handlers: a reserve set aside at creation (desc.interrupt_tasks),
   for a handler must not call the allocator; its free list changes with interrupts
   masked. Its records have no home, like those allocated alone, and are told apart by
   address. ---- */

#if defined(FSCHED__INTERRUPTS)
static fsched__task *fsched__reserve_take(fsched_sched *s) {
    fsched__irq_state m = fsched__irq_save();
    fsched__task *t = s->reserve_free;
    if (t) s->reserve_free = t->next;
    fsched__irq_restore(m);
    return t;
}

static int fsched__reserve_give(fsched_sched *s, fsched__task *t) {
    fsched__irq_state m;
    /* by address, as integers: without a reserve, s->reserve is NULL, to which even 0
       may not be added */
    if ((uintptr_t)t - (uintptr_t)s->reserve >= (uintptr_t)s->reserve_count * sizeof *t)
        return 0;
    m = fsched__irq_save();
    t->next = s->reserve_free;
    s->reserve_free = t;
    fsched__irq_restore(m);
    return 1;
}
#else
static fsched__task *fsched__reserve_take(fsched_sched *s) {
    (void)s; /* no handler calls here */
    return NULL;
}

static int fsched__reserve_give(fsched_sched *s, fsched__task *t) {
    (void)s;
    (void)t;
    return 0;
}
#endif

/* A task record for a spawn from outside the slots: alone from the allocator, or, in an
   interrupt handler, from the reserve. */
static fsched__task *fsched__task_alloc_outside(fsched_sched *s) {
    fsched__task *t;
    if (fsched__in_interrupt()) return fsched__reserve_take(s);
    t = (fsched__task *)fsched__alloc(&s->allocator, sizeof *t, FSCHED__CACHE_LINE);
    if (t) t->home = NULL;
    return t;
}

static void fsched__task_free(fsched_sched *s, fsched__worker *w, fsched__task *t) {
    if (t->copy) fsched__free(&s->allocator, t->copy, t->copy_size, 16);
    t->copy = NULL;
    if (!t->home) {
        if (fsched__reserve_give(s, t)) return;
        fsched__free(&s->allocator, t, sizeof *t, FSCHED__CACHE_LINE);
    } else if (t->home == w) {
        t->next = w->free_tasks;
        w->free_tasks = t;
    } else {
        fsched__worker *home = t->home;
        /* relaxed: a guess the CAS checks; release: the task's fields are written before
           its home reuses it */
        fsched__task *head = FSCHED__LOAD(&home->remote_free, FSCHED__RELAXED);
        do {
            t->next = head;
        } while (!FSCHED__CAS_WEAK(&home->remote_free, &head, t, FSCHED__RELEASE, FSCHED__RELAXED));
    }
}

/* ---- a group's lease: its queued tasks counted without atomics ----
   A slot that spawns into a group takes the group's lease when nobody holds it: one unit
   of the count then stands for all the tasks of the group the slot spawns while it holds
   it (`leased`, which only that slot touches), so that a scope's spawns, and the ends of
   the tasks its wait runs, touch nothing shared. Such a task runs on that slot (a worker
   thread's: its loop serves the ring) unless it leaves the slot's private ring for the
   public part, where thieves take jobs: then it is counted on its own
   (fsched__task_leaving, the deque's `leaving` hook), which cannot fail: the program's
   adds keep the count at most INT64_MAX, and these units may take it past. The last
   leased task to end, or to leave, gives the lease back (release, for the next holder's
   acquire CAS: the old holder's writes of `leased` come first) before its unit leaves the
   count, after which a waiter may free the group. */

/* The holder: one leased task fewer; 1 when it was the last, the lease then given back
   (release: this slot's writes of `leased` come before the next holder's). */
static int fsched__lease_drop(fsched_wait_group *wg) {
    if (--wg->leased) return 0;
    FSCHED__STORE(&wg->lease, (void *)NULL, FSCHED__RELEASE);
    return 1;
}

/* The end of a task of wg, on the slot that ran it (the lease's holder, if it was
   leased): the last leased one takes the lease's unit from the count. */
static void fsched__group_end(fsched_wait_group *wg, int leased) {
    if (!leased || fsched__lease_drop(wg)) fsched_wait_group_done(wg);
}

/* A task runs on the fiber of a wait that helps its group as well, nested as deep as
   the tasks' own recursion: what this frame keeps across the call is kept small (the
   fiber is read again after it). The record goes back before the task runs, what it
   needs after carried in this frame, unless the task's argument lives in it (a copy):
   a task that blocks holds nothing but its fiber's stack. */
static void fsched__task_execute(fsched__job *job, fsched__worker *w) {
    fsched__task *t = (fsched__task *)job;
    fsched_fiber *f = fsched__tls_thread.current;
    /* what the fiber ran before: the task whose wait runs this one, if any */
    fsched__running outer = fsched__running_begin(f, FSCHED__CODE(t->fn), t->name);
    void (*fn)(void *) = t->fn;
    void *arg = t->arg;
    fsched_wait_group *wg = t->wait_group;
    int leased = FSCHED__THREADS && t->leased; /* (only worker threads lease: fsched__spawn) */
    fsched__task *kept = t->copy || arg == (void *)t->data ? t : NULL;
    uint8_t outer_movable = f->movable_task; /* (fsched__running_end restores the rest) */
    FSCHED__TRACE(uint64_t trace_begin = fsched__trace_now();)
    /* only a task the loop itself runs may move: one nested by a wait (which runs its
       group's tasks, or jobs for want of a fiber) has that wait's frames under it, and a
       leased one must end on its lease's holder */
    f->task_may_move = !outer.code && !leased && !f->is_root;
    f->movable_task = FSCHED__THREADS && f->task_may_move && w->sched->movable_tasks;
    fsched__join_ring_follow(w, f);
    if (!kept) fsched__task_free(w->sched, w, t);
    fn(arg);
    /* the task may have suspended: it resumes on the same fiber, and on the worker that
       owns it now (a movable task's may have changed; the thread's own state is not
       read again here: its address may have been computed before) */
    w = (fsched__worker *)f->owner;
    f->movable_task = outer_movable;
    fsched__join_ring_follow(w, f);
    if (FSCHED__STACK_WATCHED(f)) fsched__stack_check(f, NULL);
    FSCHED__TRACE(fsched__trace_record(FSCHED__TRACE_TASK, trace_begin, FSCHED__CODE(fn),
                                       f->task_name, 0);)
    fsched__running_end(f, outer);
    /* relaxed: the holder reads its own store */
    if (FSCHED__DEBUG && leased && FSCHED__LOAD(&wg->lease, FSCHED__RELAXED) != (void *)w)
        fsched__fatal("a leased task ran on a slot that does not hold its group's lease");
    if (kept) fsched__task_free(w->sched, w, kept);
    if (wg) fsched__group_end(wg, leased);
    fsched__work_ended(w->sched, w);
}

/* A task of the holder's private ring about to be seen by other threads: if it is
   leased, it is counted on its own from now on (the last leased one takes the lease's
   unit with it). */
static void fsched__task_leaving(fsched__job *job) {
    fsched__task *t = (fsched__task *)job;
    fsched_wait_group *wg;
    if (job->execute != fsched__task_execute || !t->leased) return; /* another kind of job */
    wg = t->wait_group;
    t->leased = 0;
    if (fsched__lease_drop(wg)) return; /* the lease's unit goes with it */
    /* the task's own unit, past INT64_MAX if need be (the count is unsigned). Relaxed: the
       count holds the lease's unit meanwhile, so it does not reach zero; the publication
       of the task, after this, orders it before the thief's decrement */
    FSCHED__FETCH_ADD(&wg->count, (uint64_t)1, FSCHED__RELAXED);
}

/* Counts t, a task of wg that a task of slot w queues on w's ring (w NULL: any other
   spawn), in its group: under w's lease when w holds it or can take it, else on its own. */
static fsched_result fsched__group_count(fsched_wait_group *wg, fsched__worker *w,
                                         fsched__task *t) {
    /* relaxed: only w stores w, so w reads its own holding exactly; another value, late,
       sends this spawn to the CAS or to the count, both of which decide for themselves */
    void *holder = FSCHED__LOAD(&wg->lease, FSCHED__RELAXED), *none = NULL;
    fsched_result r;
    if (w && holder == (void *)w) {
        wg->leased++;
        t->leased = 1;
        return FSCHED_OK;
    }
    /* acquire: the previous holder's writes of `leased` come before this one's */
    if (!w || holder ||
        !FSCHED__CAS(&wg->lease, &none, (void *)w, FSCHED__ACQUIRE, FSCHED__RELAXED))
        return fsched_wait_group_add(wg, 1);
    if ((r = fsched_wait_group_add(wg, 1)) != FSCHED_OK) { /* the lease's unit */
        /* release: as in fsched__lease_drop */
        FSCHED__STORE(&wg->lease, (void *)NULL, FSCHED__RELEASE);
        return r;
    }
    wg->leased = 1;
    t->leased = 1;
    w->deque.leaving = fsched__task_leaving;
    return FSCHED_OK;
}

/* Whether job is a task counted by wg. Only for a job the caller owns: a job still in a
   deque's public part may be taken, run and freed by a thief at any moment. */
static int fsched__job_of_group(const fsched__job *job, const fsched_wait_group *wg) {
    return job->execute == fsched__task_execute && ((const fsched__task *)job)->wait_group == wg;
}

/* The newest job of the public part of d if it is a task of wg, else NULL (a job that
   is not the group's goes back as the newest again). Inlined: the oldest of a scope's
   tasks is often there (the deque shares at once when none of its work is public). */
static FSCHED__ALWAYS_INLINE fsched__job *fsched__wait_group_take_public(
    fsched__deque *d, const fsched_wait_group *wg) {
    int emptied;
    fsched__job *job = fsched__cl_take(&d->pub, &emptied);
    if (emptied) fsched__deque_request(d); /* as fsched__deque_pop */
    if (!job) return NULL; /* empty, or stolen */
    FSCHED__POINT(HELP);
    if (fsched__job_of_group(job, wg)) return job;
    fsched__cl_push(&d->pub, NULL, 0, 0, &job, 1); /* room: it just left */
    return NULL;
}

/* Runs this group's tasks still at the top of the caller's own deque (a scope: the newest
   jobs are usually the ones it just spawned). Each candidate is taken before it is
   looked at; one that is not the group's goes back where it was. A bound thread's own
   code does not help: it waits on its root fiber while the tasks run on fibers (so that
   a task that blocks is never taken for the thread's own wait, and no task runs on the
   thread's stack). The tasks run on this stack, nested as deep as their recursion: this
   frame is one level of it, and holds nothing more than the loop needs. Acquire, as
   every read of the count in a wait: pairs with the acq_rel CAS that counted it down, so
   the work counted happens before the wait returns. */
static FSCHED__ALWAYS_INLINE void fsched__wait_group_help(fsched_wait_group *wg) {
    fsched__thread *t = &FSCHED__THREAD_NOW; /* once: nothing waits before its reads */
    fsched__worker *w = t->worker;
    fsched__deque *d;
    /* nor does a poll hook, whose tasks would run where their waits fail */
    if (!w || t->current == w->root || t->in_hook) return;
    d = &w->deque;
    while (FSCHED__LOAD(&wg->count, FSCHED__ACQUIRE) != 0) {
        fsched__job *job;
        const fsched__watch *watch;
        if (d->ring.tail != d->ring.head) { /* private: only this worker touches the ring */
            job = d->ring.slot[(d->ring.tail - 1) % FSCHED__RING_SIZE];
            if (!fsched__job_of_group(job, wg)) return;
            d->ring.tail--;
        } else if (!(job = fsched__wait_group_take_public(d, wg))) {
            return;
        }
        /* the outside world is watched between these tasks too, as in the loop */
        watch = fsched__watch_of(w->sched);
        if (FSCHED__UNLIKELY(watch != NULL)) watch->tick(w);
        fsched__run_job(w, job);
    }
}

/* The rest of a wait after helping: returns at once if the count is zero, else suspends
   until it is. Out of line, so that its waiter is not on the stack while the wait runs
   tasks there. Acquire: see fsched__wait_group_help. */
static FSCHED__NOINLINE fsched_result fsched__wait_group_block(fsched_wait_group *wg,
                                                              uint64_t deadline) {
    fsched__waiter wt;
    fsched_result r;
    if (FSCHED__LOAD(&wg->count, FSCHED__ACQUIRE) == 0) {
        fsched__wait_list_quiesce(&wg->waiters); /* the last done may still be waking */
        return FSCHED_OK;
    }
    r = fsched__wait_begin(&wt, deadline, "wait group", wg);
    if (r != FSCHED_OK) return r;
    fsched__wait_list_lock(&wg->waiters);
    /* the last done takes this lock; without threads it masks interrupts, and a plain
       read does */
    if ((FSCHED__THREADS ? FSCHED__LOAD(&wg->count, FSCHED__ACQUIRE) : wg->count) == 0) {
        fsched__wait_list_unlock(&wg->waiters);
        fsched__wait_abandon(&wt);
        return FSCHED_OK;
    }
    fsched__wait_list_append(&wg->waiters, &wt);
    return fsched__wait_commit(&wg->waiters, &wt);
}

/* A wait that nothing would end: the group's tasks wait in a single-threaded scheduler
   that no thread is bound to, and the caller is not bound to it either. */
static FSCHED__NOINLINE fsched_result fsched__wait_group_unattended(fsched_wait_group *wg,
                                                                   const char *what) {
    /* relaxed: a hint (see fsched__spawn); acquire, the count: as in a wait */
    fsched_sched *s = (fsched_sched *)FSCHED__LOAD(&wg->single, FSCHED__RELAXED);
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    fsched_result r = FSCHED_OK;
    if (!s || (w && w->sched == s) || !FSCHED__LOAD(&wg->count, FSCHED__ACQUIRE)) return r;
    if (fsched__sched_enter(s, 0, what) != FSCHED_OK) return r; /* destroyed: its tasks ran */
    if (fsched__sched_unattended(s))
        r = FSCHED__MISUSE(&s->logger, FSCHED_ERR_WRONG_STATE,
                           "%s: the group's tasks wait in a single-threaded scheduler that no "
                           "thread is bound to: nothing would run them (bind a thread to it; "
                           "its waits run them)", what);
    fsched__sched_release(s);
    return r;
}

/* Relaxed, the look at `single`: a hint (see fsched__spawn); acquire, the count: see
   fsched__wait_group_help. */
FIBERSCHED_API fsched_result fsched_wait_group_wait(fsched_wait_group *wg) {
    fsched_result r;
    FSCHED__CHECK_LIVE(wg);
    if (FSCHED__UNLIKELY(FSCHED__LOAD(&wg->single, FSCHED__RELAXED)) &&
        (r = fsched__wait_group_unattended(wg, __func__)) != FSCHED_OK)
        return r;
    fsched__wait_group_help(wg);
    return fsched__wait_group_block(wg, 0);
}

/* Relaxed and acquire, as in fsched_wait_group_wait. */
FIBERSCHED_API fsched_result fsched_wait_group_wait_for(fsched_wait_group *wg, uint64_t timeout_ns) {
    uint64_t deadline;
    fsched_result r;
    FSCHED__CHECK_LIVE(wg);
    if (FSCHED__LOAD(&wg->count, FSCHED__ACQUIRE) == 0) {
        fsched__wait_list_quiesce(&wg->waiters);
        return FSCHED_OK;
    }
    if (!timeout_ns) { /* a poll: other workers that asked get the caller's queued work */
        if (FSCHED__THREAD_NOW.worker) fsched__answer_request(FSCHED__THREAD_NOW.worker);
        return FSCHED_ERR_TIMEOUT;
    }
    FSCHED__CHECK_CLOCK();
    if (FSCHED__UNLIKELY(FSCHED__LOAD(&wg->single, FSCHED__RELAXED)) &&
        (r = fsched__wait_group_unattended(wg, __func__)) != FSCHED_OK)
        return r;
    deadline = fsched__wait_deadline(timeout_ns); /* from the call, helping included */
    fsched__wait_group_help(wg);
    return fsched__wait_group_block(wg, deadline);
}

/* ---- mutex ----
   The state word says LOCKED, and WAITERS when the list may hold waiters (unlock must
   then look). Unlock releases the mutex and wakes the longest waiter, which competes for
   it with the threads and tasks that are running: a running locker never waits for a
   sleeping one to wake up (a convoy). A woken waiter that loses queues again at the head,
   and a waiter that has waited FSCHED__MUTEX_HANDOFF_NS gets the mutex handed over,
   still locked, so that nobody waits for ever (Go's sync.Mutex makes the same trade). */

#define FSCHED__MUTEX_LOCKED 1u
#define FSCHED__MUTEX_WAITERS 2u
#define FSCHED__MUTEX_HANDOFF_NS 1000000u

FIBERSCHED_API fsched_result fsched_mutex_init(fsched_mutex *m) {
    FSCHED__CHECK_ARG(m);
    fsched__wait_list_init(&m->waiters);
    m->state = 0;
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_mutex_destroy(fsched_mutex *m) {
    FSCHED__CHECK_LIVE(m);
    /* acquire: pairs with the unlock's release: the last critical section came first */
    return fsched__wait_list_retire(&m->waiters,
                                    FSCHED__LOAD(&m->state, FSCHED__ACQUIRE) &
                                            FSCHED__MUTEX_LOCKED
                                        ? "the mutex is locked" : NULL,
                                    __func__);
}

/* Takes the mutex if it is free; 1 when taken. */
static int fsched__mutex_try(fsched_mutex *m) {
    uint32_t st = FSCHED__LOAD(&m->state, FSCHED__RELAXED); /* relaxed: a guess */
    while (!(st & FSCHED__MUTEX_LOCKED))
        /* acquire: the previous holder's critical section happens before ours; relaxed
           on failure: a new guess */
        if (FSCHED__CAS_WEAK(&m->state, &st, st | FSCHED__MUTEX_LOCKED, FSCHED__ACQUIRE,
                             FSCHED__RELAXED))
            return 1;
    return 0;
}

FIBERSCHED_API fsched_result fsched_mutex_try_lock(fsched_mutex *m) {
    FSCHED__CHECK_LIVE(m);
    if (!fsched__mutex_try(m)) return FSCHED_ERR_TIMEOUT;
    fsched__wait_list_quiesce(&m->waiters);
    return FSCHED_OK;
}

static fsched_result fsched__mutex_acquire(fsched_mutex *m, uint64_t deadline) {
    fsched__waiter wt;
    fsched_result r;
    uint64_t since = 0;
    int spins, woken = 0;
    for (spins = 0; spins < 32; spins++) { /* critical sections are usually short */
        if (fsched__mutex_try(m)) {
            fsched__wait_list_quiesce(&m->waiters);
            return FSCHED_OK;
        }
        fsched__cpu_relax();
    }
    for (;;) {
        uint32_t st;
        if ((r = fsched__wait_begin(&wt, deadline, "mutex", m)) != FSCHED_OK) return r;
        if (!FSCHED__OS) since = (uint64_t)woken; /* no clock: starving once it lost */
        else if (!since) since = fsched__now_ns() | 2u; /* never 0 or 1 */
        wt.since = since;
        fsched__wait_list_lock(&m->waiters);
        /* relaxed, the guesses; acquire, taking it, as in fsched__mutex_try; relaxed, the
           mark: the unlocker's CAS, a read-modify-write, sees it, and the list's lock
           hands the waiter over */
        st = FSCHED__LOAD(&m->state, FSCHED__RELAXED);
        for (;;) { /* under the list lock: take the mutex, or mark it waited on */
            if (!(st & FSCHED__MUTEX_LOCKED)) {
                if (!FSCHED__CAS(&m->state, &st, st | FSCHED__MUTEX_LOCKED, FSCHED__ACQUIRE,
                                 FSCHED__RELAXED))
                    continue;
                fsched__wait_list_unlock(&m->waiters);
                fsched__wait_abandon(&wt);
                return FSCHED_OK;
            }
            if ((st & FSCHED__MUTEX_WAITERS) ||
                FSCHED__CAS(&m->state, &st, st | FSCHED__MUTEX_WAITERS, FSCHED__RELAXED,
                            FSCHED__RELAXED))
                break;
        }
        if (deadline && fsched__clock_ns() >= deadline) {
            fsched__wait_list_unlock(&m->waiters);
            fsched__wait_abandon(&wt);
            return FSCHED_ERR_TIMEOUT;
        }
        if (woken) fsched__wait_list_prepend(&m->waiters, &wt); /* it lost once: first */
        else fsched__wait_list_append(&m->waiters, &wt);
        if ((r = fsched__wait_commit(&m->waiters, &wt)) != FSCHED_OK) return r;
        /* acquire (the commit's): the unlocker's `handed`, and the mutex with it */
        if (wt.handed || fsched__mutex_try(m)) return FSCHED_OK;
        woken = 1; /* woken to compete, and a running locker came first */
    }
}

FIBERSCHED_API fsched_result fsched_mutex_lock(fsched_mutex *m) {
    FSCHED__CHECK_LIVE(m);
    return fsched__mutex_acquire(m, 0);
}

FIBERSCHED_API fsched_result fsched_mutex_lock_for(fsched_mutex *m, uint64_t timeout_ns) {
    FSCHED__CHECK_LIVE(m);
    FSCHED__CHECK_CLOCK();
    return fsched__mutex_acquire(m, fsched__wait_deadline(timeout_ns));
}

/* Under the list lock: whether the head waiter has waited long enough to be handed the
   mutex: by the system's clock, or, without an operating system, once it lost a race
   (`since` is then 0 or 1). */
static int fsched__mutex_starving(const fsched__waiter *wt) {
    if (!FSCHED__OS) return wt->since != 0;
    return fsched__now_ns() - wt->since >= FSCHED__MUTEX_HANDOFF_NS;
}

FIBERSCHED_API fsched_result fsched_mutex_unlock(fsched_mutex *m) {
    fsched__wakes wakes;
    uint32_t st = FSCHED__MUTEX_LOCKED, handoff = 0;
    FSCHED__CHECK_LIVE(m);
    /* release: our critical section happens before the next holder's */
    if (FSCHED__CAS(&m->state, &st, 0u, FSCHED__RELEASE, FSCHED__RELAXED)) return FSCHED_OK;
    if (!(st & FSCHED__MUTEX_LOCKED))
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE,
                              "the mutex is not locked");
    wakes.n = 0;
    fsched__wait_list_lock(&m->waiters);
    while (m->waiters.head) {
        fsched__waiter *wt = (fsched__waiter *)m->waiters.head;
        handoff = (uint32_t)fsched__mutex_starving(wt);
        wt->handed = handoff; /* read by the waiter after its end (the CAS releases it) */
        if (fsched__wait_list_end(&m->waiters, (fsched__waiter *)m->waiters.head, &wakes)) break;
        handoff = 0; /* it had timed out: the next one */
    }
    /* nobody else changes the state while it is locked and the list is locked: a plain
       store. Release: when the mutex is released, as above */
    FSCHED__STORE(&m->state,
                  (handoff ? FSCHED__MUTEX_LOCKED : 0u) |
                      (m->waiters.head ? FSCHED__MUTEX_WAITERS : 0u),
                  FSCHED__RELEASE);
    fsched__wait_list_unlock_wake(&m->waiters, &wakes);
    return FSCHED_OK;
}

/* ---- condition variable ---------------------------------------------------------- */

FIBERSCHED_API fsched_result fsched_cond_init(fsched_cond *c) {
    FSCHED__CHECK_ARG(c);
    fsched__wait_list_init(&c->waiters);
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_cond_destroy(fsched_cond *c) {
    FSCHED__CHECK_LIVE(c);
    return fsched__wait_list_retire(&c->waiters, NULL, __func__);
}

static fsched_result fsched__cond_wait(fsched_cond *c, fsched_mutex *m, uint64_t deadline) {
    fsched__waiter wt;
    fsched_result r, relock;
    /* the misuse first, before a timer that may fail for want of memory. Relaxed: the
       caller's own lock is what it would see, if it holds m */
    if (!(FSCHED__LOAD(&m->state, FSCHED__RELAXED) & FSCHED__MUTEX_LOCKED))
        return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE,
                              "fsched_cond_wait: the mutex is not locked");
    r = fsched__wait_begin(&wt, deadline, "condition", c);
    if (r != FSCHED_OK) { /* no timer (out of memory): m is let go, as every such failure */
        if (r == FSCHED_ERR_OUT_OF_MEMORY) fsched_mutex_unlock(m);
        return r;
    }
    wt.relocks = m; /* for fsched__nest_ready */
    fsched__wait_list_lock(&c->waiters);
    fsched__wait_list_append(&c->waiters, &wt); /* queued before m is released: no lost signal */
    r = fsched_mutex_unlock(m);
    if (r != FSCHED_OK) {
        fsched__wait_list_remove(&c->waiters, &wt);
        fsched__wait_list_unlock(&c->waiters);
        fsched__wait_abandon(&wt);
        return r;
    }
    r = fsched__wait_commit(&c->waiters, &wt);
    /* a wait that gave up inline (it held up a caller below that could go on) returns
       at once, without m; so does one whose relock gives up: any other result says that
       the caller holds m */
    if (r == FSCHED_ERR_OUT_OF_MEMORY) return r;
    relock = fsched_mutex_lock(m);
    return relock != FSCHED_OK ? relock : r;
}

FIBERSCHED_API fsched_result fsched_cond_wait(fsched_cond *c, fsched_mutex *m) {
    FSCHED__CHECK_LIVE(c);
    FSCHED__CHECK_LIVE(m);
    return fsched__cond_wait(c, m, 0);
}

FIBERSCHED_API fsched_result fsched_cond_wait_for(fsched_cond *c, fsched_mutex *m, uint64_t timeout_ns) {
    FSCHED__CHECK_LIVE(c);
    FSCHED__CHECK_LIVE(m);
    FSCHED__CHECK_CLOCK();
    return fsched__cond_wait(c, m, fsched__wait_deadline(timeout_ns));
}

/* Acquire, the look at the count, though the caller's mutex orders it already: a waiter
   appends itself before it unlocks the mutex, which whoever changed the condition locked
   after it. */
FIBERSCHED_API fsched_result fsched_cond_signal(fsched_cond *c) {
    fsched__wakes wakes;
    FSCHED__CHECK_LIVE(c);
    if (!FSCHED__LOAD(&c->waiters.count, FSCHED__ACQUIRE)) return FSCHED_OK;
    wakes.n = 0;
    fsched__wait_list_lock(&c->waiters);
    fsched__wait_list_wake_one(&c->waiters, &wakes);
    fsched__wait_list_unlock_wake(&c->waiters, &wakes);
    return FSCHED_OK;
}

/* Acquire, as in fsched_cond_signal. */
FIBERSCHED_API fsched_result fsched_cond_broadcast(fsched_cond *c) {
    fsched__wakes wakes;
    FSCHED__CHECK_LIVE(c);
    if (!FSCHED__LOAD(&c->waiters.count, FSCHED__ACQUIRE)) return FSCHED_OK;
    wakes.n = 0;
    fsched__wait_list_lock(&c->waiters);
    fsched__wait_list_wake_all(&c->waiters, &wakes);
    fsched__wait_list_unlock_wake(&c->waiters, &wakes);
    return FSCHED_OK;
}

/* ---- semaphore ------------------------------------------------------------------- */

FIBERSCHED_API fsched_result fsched_sema_init(fsched_sema *s, int64_t initial) {
    FSCHED__CHECK_ARG(s);
    if (initial < 0)
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "negative count");
    fsched__wait_list_init(&s->waiters);
    s->count = initial;
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_sema_destroy(fsched_sema *s) {
    FSCHED__CHECK_LIVE(s);
    return fsched__wait_list_retire(&s->waiters, NULL, __func__);
}

static int fsched__sema_try(fsched_sema *s) {
    int64_t c = FSCHED__LOAD(&s->count, FSCHED__RELAXED); /* relaxed: a guess */
    while (c > 0)
        /* acquire: the releaser's writes happen before ours; relaxed on failure: a new
           guess */
        if (FSCHED__CAS_WEAK(&s->count, &c, c - 1, FSCHED__ACQUIRE, FSCHED__RELAXED)) {
            fsched__wait_list_quiesce(&s->waiters); /* the releaser may still be inside */
            return 1;
        }
    return 0;
}

/* With the list locked (no waker inside): takes a unit if there is one. Relaxed and
   acquire, as in fsched__sema_try. */
static int fsched__sema_take_locked(fsched_sema *s) {
    int64_t c = FSCHED__LOAD(&s->count, FSCHED__RELAXED);
    while (c > 0)
        if (FSCHED__CAS_WEAK(&s->count, &c, c - 1, FSCHED__ACQUIRE, FSCHED__RELAXED)) return 1;
    return 0;
}

FIBERSCHED_API fsched_result fsched_sema_try_acquire(fsched_sema *s) {
    FSCHED__CHECK_LIVE(s);
    return fsched__sema_try(s) ? FSCHED_OK : FSCHED_ERR_TIMEOUT;
}

static fsched_result fsched__sema_acquire(fsched_sema *s, uint64_t deadline) {
    fsched__waiter wt;
    fsched_result r;
    if (fsched__sema_try(s)) return FSCHED_OK;
    r = fsched__wait_begin(&wt, deadline, "semaphore", s);
    if (r != FSCHED_OK) return r;
    fsched__wait_list_lock(&s->waiters);
    if (fsched__sema_take_locked(s)) { /* released meanwhile */
        fsched__wait_list_unlock(&s->waiters);
        fsched__wait_abandon(&wt);
        return FSCHED_OK;
    }
    if (deadline && fsched__clock_ns() >= deadline) {
        fsched__wait_list_unlock(&s->waiters);
        fsched__wait_abandon(&wt);
        return FSCHED_ERR_TIMEOUT;
    }
    fsched__wait_list_append(&s->waiters, &wt);
    /* woken means a unit was handed to us directly */
    return fsched__wait_commit(&s->waiters, &wt);
}

FIBERSCHED_API fsched_result fsched_sema_acquire(fsched_sema *s) {
    FSCHED__CHECK_LIVE(s);
    return fsched__sema_acquire(s, 0);
}

FIBERSCHED_API fsched_result fsched_sema_acquire_for(fsched_sema *s, uint64_t timeout_ns) {
    FSCHED__CHECK_LIVE(s);
    FSCHED__CHECK_CLOCK();
    return fsched__sema_acquire(s, fsched__wait_deadline(timeout_ns));
}

FIBERSCHED_API fsched_result fsched_sema_release(fsched_sema *s, int64_t n) {
    fsched__wakes wakes;
    FSCHED__CHECK_LIVE(s);
    if (n < 0)
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "negative count");
    if (n == 0) return FSCHED_OK;
    wakes.n = 0;
    fsched__wait_list_lock(&s->waiters);
    /* releases are serialized by the lock and acquires only lower the count: it cannot
       overflow once this test passed (relaxed: a bound, which only grows looser) */
    if (n > INT64_MAX - FSCHED__LOAD(&s->count, FSCHED__RELAXED)) {
        fsched__wait_list_unlock(&s->waiters);
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "the count would pass INT64_MAX");
    }
    /* waiters first (each gets its unit directly), the rest to the count */
    while (n > 0 && fsched__wait_list_wake_one(&s->waiters, &wakes)) n--;
    /* release: our writes happen before an acquirer's */
    if (n > 0) FSCHED__FETCH_ADD(&s->count, n, FSCHED__RELEASE);
    fsched__wait_list_unlock_wake(&s->waiters, &wakes);
    return FSCHED_OK;
}

/* ---- sleep and yield ------------------------------------------------------------- */

FIBERSCHED_API void fsched_sleep_for(uint64_t ns) {
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    fsched__waiter wt;
    if (!ns) return;
    if (!fsched__have_clock()) { /* no clock to sleep by: let others run instead */
        fsched_yield();
        return;
    }
    if (w && !FSCHED__THREAD_NOW.in_hook) { /* a poll hook stays on its fiber */
        /* a timer that cannot be set (out of memory) falls back to blocking the thread */
        if (fsched__wait_begin(&wt, fsched__deadline_after(ns), "sleep", NULL) == FSCHED_OK) {
            fsched__wait_commit(NULL, &wt);
            return;
        }
    }
    if (FSCHED__OS) {
        uint64_t deadline = fsched__time_add(fsched__now_ns(), ns), now;
        while ((now = fsched__now_ns()) < deadline) fsched__os_sleep(deadline - now);
    } else { /* the scheduler's clock: the system has none */
        uint64_t deadline = fsched__deadline_after(ns);
        while (fsched__clock_ns() < deadline) fsched__os_sleep(0);
    }
}

FIBERSCHED_API void fsched_yield(void) {
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    if (w && !FSCHED__THREAD_NOW.in_hook) { /* a poll hook stays on its fiber */
        fsched_fiber *next;
        /* Another fiber is ready: the thread goes to it directly (one switch, not two
           through the loop), but every FSCHED__OUTSIDE_EVERY-th yield in a row passes
           through the loop, which runs a job first and looks at timers and fibers woken
           from other threads: fibers that yield to each other cannot starve those. */
        if (w->ready_head && ++w->yields_direct < FSCHED__OUTSIDE_EVERY) {
            next = fsched__ready_pop(w);
            fsched__ready_append(w, FSCHED__THREAD_NOW.current);
            fsched__answer_request(w);
            fsched__switch_to(w, next);
            return;
        }
        w->yields_direct = 0;
        next = fsched__idle_take(w);
        if (next) {
            fsched__ready_append(w, FSCHED__THREAD_NOW.current);
            w->yield_pending = 1;
            fsched__switch_to(w, next);
            return;
        }
        /* no fiber to switch to: a fiber woken from another thread, or one job here if
           there is room */
        if (!fsched__yield_to_posted(w)) {
            fsched__nest nest = {NULL, NULL, NULL};
            fsched__run_inline(w, &nest);
        }
        return;
    }
    fsched__os_yield();
}

FIBERSCHED_API uint64_t fsched_clock_ns(void) { return fsched__clock_ns(); }

/* ===================================================================================== */
/*  io: fd waits and the poll hook                                                      */
/* ===================================================================================== */

/* ---- waiting on the outside world: file descriptors and the poll hook ----
   A scheduler watches the outside world only once asked to: at its first fd wait it
   makes a poller (an epoll set with an eventfd, or a set for poll() and a pipe), and
   fsched_set_poll installs a hook. From then on busy workers look out between tasks
   (fsched__watch_tick): into the poller every FSCHED__WATCH_INTERVAL, and at the hook
   every interval of its own; a worker about to sleep sleeps in the poller instead of on
   its parker (fsched__watch_block): one thread at a time owns the poller. A waker tells
   that worker through the poller's wake fd (fsched__notify reads w->polls after its
   unpark; fsched__io_sleep says why no wake is lost).

   An fd's waiters queue in the wait list of a record of its own, so a timeout, a cancel
   and a wake are those of every other primitive. The records sit in a hash table by fd
   number, so that its size follows the fds waited on and not their numbers; a record no
   call holds is freed when the table would grow. On Linux every wait arms its fd one-shot
   for what the waiters want, and each event arms it again while any still wait: no event
   is consumed for nobody, and a number that a new file took (after close() or dup2(),
   which drop the old file's registration without a word) is registered anew. An event
   names its record by fd number and generation, never by address: one of a record freed
   since finds nothing, one of an older file is a hint for the new. */

#define FSCHED__WATCH_INTERVAL 50000u /* ns between looks by busy workers, by default */
#define FSCHED__POLL_CALLING 0x80000000u /* in poll_busy: a call of the hook holds it */

#if defined(FSCHED__IO)

/* One fd number's waiters in a poller: made at a wait; once no call holds it, freed when
   the table would grow. */
typedef struct fsched__fd {
    fsched_wait_list waiters; /* fsched__fd_waiter records */
    struct fsched__fd *next;  /* in its bucket */
    int fd;
    uint32_t gen;             /* names it in the kernel's events; never 0 (the wake fd's) */
    uint32_t users;           /* under the poller's lock: calls that hold it */
    uint32_t checked;         /* atomic: fsched__io_fds_gen when fd was last found to be
                                 none of the pollers' own */
    uint32_t added;           /* epoll: registered once (under the list's lock) */
    uint32_t readers, writers; /* under the list's lock: watched waiters that want each */
    uint32_t edge;            /* epoll, under the list's lock: registered edge-triggered,
                                 for both directions, until fsched_close_fd */
    uint32_t latched;         /* ... and the readiness harvested that no FSCHED_EDGE
                                 waiter took (FSCHED_READABLE | FSCHED_WRITABLE) */
    uint32_t hup_latched;     /* ... and a hang-up's, which the latch gives once more
                                 after a waiter took it (see fsched__fd_answer_locked) */
} fsched__fd;

/* How a waiter stands with fsched_close_fd (under its list's lock). */
#define FSCHED__FD_WATCHED 0u /* its fd is watched for it */
#define FSCHED__FD_HELD 1u    /* it came while its fd was being closed: not watched */
#define FSCHED__FD_AGAIN 2u   /* that close has ended: the wait starts over */

typedef struct fsched__fd_waiter {
    fsched__waiter wt;     /* first: the list links &wt */
    uint32_t events;       /* asked for */
    uint32_t ready;        /* found; written before the CAS that ends the wait, */
    fsched_result result;  /* with how it ended: FSCHED_OK, or the fd was closed
                              (FSCHED_ERR_CANCELLED), or cannot be watched (not open:
                              INVALID_ARGUMENT, OUT_OF_MEMORY, SYSTEM) */
    uint32_t close_state;  /* FSCHED__FD_WATCHED, _HELD or _AGAIN */
    uint32_t counted;      /* under the list's lock: its events, while counted in its
                              record's readers and writers */
    uint32_t edge;         /* FSCHED_EDGE was asked for (epoll) */
    uint32_t epoch;        /* under the list's lock: io->sweep_epoch when it was queued,
                              or when the sweep last asked about its fd */
} fsched__fd_waiter;

struct fsched__io {
    fsched_sched *sched;
    struct fsched__io *next; /* every poller, for fsched_close_fd */
    uint32_t lock;           /* spinlock: the table (and `blocking` under poll()) */
    uint32_t owner;          /* atomic: a thread polls (a try-lock) */
    uint32_t blocking;       /* poll(): the owner sleeps in a poll */
    uint32_t gen;            /* the last record's */
    fsched__fd **buckets;    /* records by fd number, hashed; NULL: none yet */
    uint32_t bucket_count;   /* a power of two */
    uint32_t records;
    int wake_read, wake_write; /* the eventfd (both), or a pipe's ends */
    uint32_t wake_sent;      /* atomic: a write to the wake fd not yet drained */
#if defined(FSCHED__IO_EPOLL)
    int epfd;
    uint32_t rearm;          /* atomic: a fork's child has an epoll set of its own, where
                                the next owner arms the waits anew */
    uint32_t edge_records;   /* atomic: records registered edge-triggered */
    uint32_t sweep_epoch;    /* atomic: half periods of FIBERSCHED_FD_VERIFY_NS so far */
    uint64_t sweep_next;     /* owners only: when the next half begins */
#else
    struct pollfd *fds;      /* the owner's poll set, rebuilt for each poll */
    fsched__fd **fds_of;
    uint32_t fds_cap;
#endif
};

/* Every live poller, for fsched_close_fd, under a spinlock never held across a wait;
   the generation changes with each new poller, whose fds records may have known as the
   user's (a number closed, then taken by the poller). */
static fsched__io *fsched__io_all;
static uint32_t fsched__io_all_lock;
static uint32_t fsched__io_fds_gen = 1;

/* The fds that fsched_close_fd is closing: entries on its callers' stacks, under a lock
   under which no other is taken (a waiter takes it under its record's). */
typedef struct fsched__fd_closing {
    int fd;
    struct fsched__fd_closing *next;
} fsched__fd_closing;
static fsched__fd_closing *fsched__fd_closings;
static uint32_t fsched__fd_closings_lock;
static uint32_t fsched__fd_closings_count; /* atomic: entries in the list */

/* Ends a poll under way or the next one. At most one write per poll: `wake_sent` says a
   write was made (or is about to be) that no drain has answered yet, and the poll it
   makes readable, or one now returning, is the one the caller means (fsched__io_sleep:
   only the owner polls, and a previous owner's drain ended before it disowned). */
static void fsched__io_interrupt(fsched__io *io) {
#if defined(FSCHED__IO_EPOLL)
    uint64_t one = 1;
#else
    char one = 0;
#endif
    ssize_t n;
    /* seq_cst: against the drain's clear, which follows its read (see there) */
    if (FSCHED__EXCHANGE(&io->wake_sent, 1u, FSCHED__SEQ_CST)) return;
    /* a full pipe or counter is readable already: the sleeper wakes either way */
    n = write(io->wake_write, &one, sizeof one);
    (void)n;
}

/* The owner, after a poll found the wake fd readable. It reads first, then clears
   `wake_sent`: a write whose flag it cleared has been read, or stays readable for the
   next poll. Clearing first would let an interrupter set the flag and write between the
   clear and the read, which takes its count: the flag then stays set with nothing to
   read, and every later interrupt is skipped (a hang). */
static void fsched__io_drain_wake(fsched__io *io) {
#if defined(FSCHED__IO_EPOLL)
    uint64_t count; /* one read takes the eventfd's whole count */
    ssize_t n = read(io->wake_read, &count, sizeof count);
    (void)n;
#else
    char buf[64];
    while (read(io->wake_read, buf, sizeof buf) > 0) {
    }
#endif
    FSCHED__POINT(WAKE_DRAINED);
    /* seq_cst: after the read, against the interrupters' exchange (see above) */
    FSCHED__STORE(&io->wake_sent, 0u, FSCHED__SEQ_CST);
}

#if !defined(FSCHED__IO_EPOLL)
static int fsched__fd_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 &&
           fcntl(fd, F_SETFD, FD_CLOEXEC) == 0;
}
#endif

/* Under fsched__io_all_lock: whether fd is one of a poller's own, of any scheduler. */
static int fsched__io_owns(int fd) {
    const fsched__io *io;
    for (io = fsched__io_all; io; io = io->next) {
#if defined(FSCHED__IO_EPOLL)
        if (fd == io->epfd) return 1;
#endif
        if (fd == io->wake_read || fd == io->wake_write) return 1;
    }
    return 0;
}

/* fsched_wait_fd and fsched_close_fd refuse the pollers' own fds: a wait would change
   their registration, a close would leave a scheduler deaf. */
static fsched_result fsched__fd_not_own(int fd, const fsched_logger *logger, const char *what) {
    int own;
    fsched__spin_lock(&fsched__io_all_lock);
    own = fsched__io_owns(fd);
    fsched__spin_unlock(&fsched__io_all_lock);
    return own ? FSCHED__MISUSE(logger, FSCHED_ERR_INVALID_ARGUMENT,
                                "%s: fd %d is a scheduler's own", what, fd)
               : FSCHED_OK;
}

/* ---- fork() ----
   A child shares its parent's epoll set and wake fd: a poll in one would take the other's
   one-shot events and wakes, and their waits time out or hang (the children of a prefork
   server on a single-threaded scheduler, say). In the child, every poller gets kernel
   objects of its own at the same numbers (plain system calls, so that a child of a
   multithreaded parent that only execs is safe), and its first owner arms the waits
   there anew. Best effort: a child that cannot have new fds keeps sharing. */

static void fsched__io_fork_prepare(void) { fsched__spin_lock(&fsched__io_all_lock); }
static void fsched__io_fork_parent(void) { fsched__spin_unlock(&fsched__io_all_lock); }

/* Puts the new fds `made` at the numbers `own` (close-on-exec), if there are both. */
static void fsched__fd_move(const int made[2], const int own[2]) {
    int k, ok = made[0] >= 0 && made[1] >= 0;
    for (k = 0; k < 2; k++) {
        if (ok && dup2(made[k], own[k]) == own[k]) (void)fcntl(own[k], F_SETFD, FD_CLOEXEC);
        if (made[k] >= 0) close(made[k]);
    }
}

/* In the child, its only thread: io gets a poller of its own (the parent's threads, one
   of which may have owned it, are not here). */
static void fsched__io_renew(fsched__io *io) {
    int made[2] = {-1, -1}, own[2];
#if defined(FSCHED__IO_EPOLL)
    struct epoll_event ev;
    made[0] = epoll_create1(EPOLL_CLOEXEC);
    made[1] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    own[0] = io->epfd;
    own[1] = io->wake_read;
    fsched__fd_move(made, own);
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.u64 = 0; /* the wake fd */
    (void)epoll_ctl(io->epfd, EPOLL_CTL_ADD, io->wake_read, &ev);
    {
        /* none of the records is registered in the new set: each registers anew, the
           waited on at the rearm, the others at their next wait */
        uint32_t b;
        fsched__fd *rec;
        for (b = 0; b < io->bucket_count; b++)
            for (rec = io->buckets[b]; rec; rec = rec->next) rec->added = 0;
    }
    FSCHED__STORE(&io->rearm, 1u, FSCHED__RELAXED); /* relaxed: the only thread */
#else
    own[0] = io->wake_read;
    own[1] = io->wake_write;
    if (pipe(made) == 0 && !(fsched__fd_nonblocking(made[0]) && fsched__fd_nonblocking(made[1])))
        made[1] = (close(made[1]), -1);
    fsched__fd_move(made, own);
#endif
    FSCHED__STORE(&io->owner, 0u, FSCHED__RELAXED); /* relaxed: the only thread */
    /* the new wake fd is empty: a flag the parent left set would skip every interrupt.
       Relaxed: the only thread */
    FSCHED__STORE(&io->wake_sent, 0u, FSCHED__RELAXED);
}

static void fsched__io_fork_child(void) {
    fsched__io *io;
    for (io = fsched__io_all; io; io = io->next) fsched__io_renew(io);
    /* the closes under way are the parent's other threads', which are not here: their
       fds stay open in the child, where waits on them must not be held for those closes.
       Relaxed: the only thread. */
    fsched__fd_closings = NULL;
    FSCHED__STORE(&fsched__fd_closings_count, 0u, FSCHED__RELAXED);
    FSCHED__STORE(&fsched__fd_closings_lock, 0u, FSCHED__RELAXED);
    fsched__io_fork_parent();
}

/* Once, at the first poller. */
static void fsched__io_fork_hook(void) {
    static uint32_t hooked;
    /* relaxed: one caller registers; a fork before that shares, as it did without */
    if (!FSCHED__EXCHANGE(&hooked, 1u, FSCHED__RELAXED))
        (void)pthread_atfork(fsched__io_fork_prepare, fsched__io_fork_parent, fsched__io_fork_child);
}


/* ---- the table of records -------------------------------------------------------- */

static uint32_t fsched__fd_bucket(int fd, uint32_t bucket_count) {
    uint32_t h = (uint32_t)fd;
    return (h ^ (h >> 16)) & (bucket_count - 1u); /* numbers in a row: buckets in a row */
}

/* Under the poller's lock: fd's record, or NULL. */
static fsched__fd *fsched__io_find(const fsched__io *io, int fd) {
    fsched__fd *rec = io->buckets ? io->buckets[fsched__fd_bucket(fd, io->bucket_count)] : NULL;
    while (rec && rec->fd != fd) rec = rec->next;
    return rec;
}

/* Under the poller's lock: rec takes a new generation (never 0, the wake fd's name), so
   that events naming the old one name nothing. */
static void fsched__io_new_gen(fsched__io *io, fsched__fd *rec) {
    if (!++io->gen) io->gen = 1;
    rec->gen = io->gen;
}

/* Under the poller's lock: rec forgets its registration (its file was closed, or rec
   goes) and leaves the count of records registered edge-triggered. */
static void fsched__io_forget_registration(fsched__io *io, fsched__fd *rec) {
#if defined(FSCHED__IO_EPOLL)
    /* relaxed: a count for the sweep's pace (see fsched__io_sweep) */
    if (rec->edge) FSCHED__FETCH_SUB(&io->edge_records, 1u, FSCHED__RELAXED);
    rec->edge = rec->latched = rec->hup_latched = 0;
#else
    (void)io; /* poll() registers nothing */
#endif
    rec->added = 0;
}

/* Under the poller's lock, with the table full: frees the records no call holds, then
   sizes the table for twice the records left. An allocation that fails leaves the old
   table, whose chains grow longer; 0 when there is none at all. */
static int fsched__io_resize(fsched__io *io) {
    const fsched_allocator *a = &io->sched->allocator;
    fsched__fd **buckets, *rec, **p;
    uint32_t count = 16, i;
    for (i = 0; i < io->bucket_count; i++)
        for (p = &io->buckets[i]; (rec = *p) != NULL;) {
            if (rec->users) {
                p = &rec->next;
                continue;
            }
            *p = rec->next;
            io->records--;
            fsched__io_forget_registration(io, rec);
            fsched__free(a, rec, sizeof *rec, sizeof(void *));
        }
    while (count < 2u * io->records) count *= 2u;
    if (count == io->bucket_count) return 1;
    buckets = (fsched__fd **)fsched__alloc(a, count * sizeof *buckets, sizeof(void *));
    if (!buckets) return io->buckets != NULL;
    memset(buckets, 0, count * sizeof *buckets);
    for (i = 0; i < io->bucket_count; i++)
        while ((rec = io->buckets[i]) != NULL) {
            uint32_t b = fsched__fd_bucket(rec->fd, count);
            io->buckets[i] = rec->next;
            rec->next = buckets[b];
            buckets[b] = rec;
        }
    if (io->buckets)
        fsched__free(a, io->buckets, io->bucket_count * sizeof *io->buckets, sizeof(void *));
    io->buckets = buckets;
    io->bucket_count = count;
    return 1;
}

/* Under the poller's lock: adds rec, unless the table cannot take it (0). */
static int fsched__io_insert(fsched__io *io, fsched__fd *rec) {
    uint32_t b;
    if (io->records >= io->bucket_count && !fsched__io_resize(io)) return 0;
    b = fsched__fd_bucket(rec->fd, io->bucket_count);
    rec->next = io->buckets[b];
    io->buckets[b] = rec;
    io->records++;
    fsched__io_new_gen(io, rec);
    return 1;
}

/* fd is not open: FSCHED_ERR_INVALID_ARGUMENT, with the log line of a misuse. */
static fsched_result fsched__fd_not_open(const fsched__io *io, int fd) {
    return FSCHED__MISUSE(&io->sched->logger, FSCHED_ERR_INVALID_ARGUMENT,
                          "fsched_wait_fd: fd %d is not open", fd);
}

/* Holds fd's record, made if need be: NULL, with *r set, when fd is no fd to wait on (not
   open, or a poller's own) or for want of memory. */
static fsched__fd *fsched__io_hold(fsched__io *io, int fd, fsched_result *r) {
    const fsched_allocator *a = &io->sched->allocator;
    /* relaxed: read before a look at the pollers under the lock it changes under, so a
       poller made after the read makes the next hold look again */
    uint32_t gen = FSCHED__LOAD(&fsched__io_fds_gen, FSCHED__RELAXED);
    fsched__fd *rec, *made;
    fsched__spin_lock(&io->lock);
    if ((rec = fsched__io_find(io, fd)) != NULL) rec->users++;
    fsched__spin_unlock(&io->lock);
    if (!rec) {
        /* before anything is made for fd: it is open (which bounds its number) */
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            *r = fsched__fd_not_open(io, fd);
            return NULL;
        }
        if ((*r = fsched__fd_not_own(fd, &io->sched->logger, "fsched_wait_fd")) != FSCHED_OK)
            return NULL;
        *r = FSCHED_ERR_OUT_OF_MEMORY;
        if (!(made = (fsched__fd *)fsched__alloc(a, sizeof *made, sizeof(void *)))) return NULL;
        memset(made, 0, sizeof *made);
        made->fd = fd;
        made->checked = gen;
        fsched__spin_lock(&io->lock);
        if (!(rec = fsched__io_find(io, fd)) && fsched__io_insert(io, made)) rec = made;
        if (rec) rec->users++;
        fsched__spin_unlock(&io->lock);
        if (rec != made) fsched__free(a, made, sizeof *made, sizeof(void *));
        if (!rec) return NULL;
    }
    /* relaxed: only spares the look when no poller was made since the last (see above) */
    if (FSCHED__LOAD(&rec->checked, FSCHED__RELAXED) != gen) {
        if ((*r = fsched__fd_not_own(fd, &io->sched->logger, "fsched_wait_fd")) != FSCHED_OK) {
            fsched__spin_lock(&io->lock);
            rec->users--;
            fsched__spin_unlock(&io->lock);
            return NULL;
        }
        FSCHED__STORE(&rec->checked, gen, FSCHED__RELAXED);
    }
    return rec;
}

/* Holds the record an epoll event names (fd number and generation): NULL when it is the
   wake fd's, or the record was freed since. */
FSCHED__UNUSED static fsched__fd *fsched__io_hold_named(fsched__io *io, uint64_t name) {
    fsched__fd *rec;
    if (!name) return NULL;
    fsched__spin_lock(&io->lock);
    rec = fsched__io_find(io, (int)(uint32_t)name);
    if (rec && rec->gen == (uint32_t)(name >> 32)) rec->users++;
    else rec = NULL;
    fsched__spin_unlock(&io->lock);
    return rec;
}

static void fsched__io_release(fsched__io *io, fsched__fd *rec) {
    fsched__spin_lock(&io->lock);
    rec->users--;
    fsched__spin_unlock(&io->lock);
}

/* ---- watching and answering ------------------------------------------------------ */

/* What the watched waiters of rec want (under its lock): counted, not looked up, so that
   many waits on one fd cost each the same. */
static uint32_t fsched__fd_wanted(const fsched__fd *rec) {
    return (rec->readers ? FSCHED_READABLE : 0u) | (rec->writers ? FSCHED_WRITABLE : 0u);
}

/* Under rec's lock: counts fw, which is watched, in what rec's waiters want (add), or
   out of it if it was. */
static void fsched__fd_count(fsched__fd *rec, fsched__fd_waiter *fw, int add) {
    uint32_t events = add ? fw->events : fw->counted;
    uint32_t delta = add ? 1u : (uint32_t)-1;
    rec->readers += (events & FSCHED_READABLE) ? delta : 0u;
    rec->writers += (events & FSCHED_WRITABLE) ? delta : 0u;
    fw->counted = add ? events : 0u;
}

/* What a refusal to watch an fd (an errno) means to its waiters. EPERM: a regular file
   or directory, always ready, as poll() says. */
static fsched_result fsched__fd_refusal(int err) {
    return err == EPERM    ? FSCHED_OK
           : err == EBADF  ? FSCHED_ERR_INVALID_ARGUMENT
           : err == ENOMEM ? FSCHED_ERR_OUT_OF_MEMORY
                           : FSCHED_ERR_SYSTEM;
}

/* Under rec's lock: arms rec one-shot for what its watched waiters want. 0, or the errno
   of the refusal. The kernel is asked every time: the number may belong to a new file
   since the last arm, the old file's registration gone with it. */
static int fsched__fd_arm(fsched__io *io, fsched__fd *rec) {
#if defined(FSCHED__IO_EPOLL)
    struct epoll_event ev;
    uint32_t want = fsched__fd_wanted(rec);
    if (!want) return 0;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLONESHOT | ((want & FSCHED_READABLE) ? EPOLLIN | EPOLLRDHUP : 0u) |
                ((want & FSCHED_WRITABLE) ? EPOLLOUT : 0u);
    ev.data.u64 = (uint64_t)rec->gen << 32 | (uint32_t)rec->fd;
    /* relaxed: a count */
    FSCHED__FETCH_ADD(&io->sched->fd_registrations, (uint64_t)1, FSCHED__RELAXED);
    if (rec->added) {
        if (epoll_ctl(io->epfd, EPOLL_CTL_MOD, rec->fd, &ev) == 0) return 0;
        if (errno != ENOENT) return errno;
    }
    if (epoll_ctl(io->epfd, EPOLL_CTL_ADD, rec->fd, &ev) != 0 &&
        (errno != EEXIST || epoll_ctl(io->epfd, EPOLL_CTL_MOD, rec->fd, &ev) != 0))
        return errno;
    rec->added = 1;
#else
    (void)io; /* poll() is given the fd in its next set */
    (void)rec;
#endif
    return 0;
}

#if defined(FSCHED__IO_EPOLL)
/* How long an FSCHED_EDGE wait goes at most before its fd is asked about again: a
   variable, so that tests may shorten it (relaxed: a setting, read on its own). */
static uint64_t fsched__fd_verify_ns = FIBERSCHED_FD_VERIFY_NS;

/* Under rec's lock: epoll_ctl(op) with rec's edge-triggered registration, counted. */
static int fsched__fd_ctl_edge(fsched__io *io, const fsched__fd *rec, int op) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
    ev.data.u64 = (uint64_t)rec->gen << 32 | (uint32_t)rec->fd;
    /* relaxed: a count */
    FSCHED__FETCH_ADD(&io->sched->fd_registrations, (uint64_t)1, FSCHED__RELAXED);
    return epoll_ctl(io->epfd, op, rec->fd, &ev) == 0 ? 0 : errno;
}

/* Under rec's lock: registers rec edge-triggered for both directions, to stay so until
   fsched_close_fd, or asks again about a record so registered. Either way the kernel
   looks at the file at once, and readiness already there arrives as an event. A number
   whose file lost the registration (a plain close() or dup2()) is registered anew; one
   another file of the same number kept (a dup of the old file open) names the old one.
   0, or the errno of the refusal. */
static int fsched__fd_register_edge(fsched__io *io, fsched__fd *rec) {
    int err = fsched__fd_ctl_edge(io, rec, rec->added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD);
    if (err == ENOENT && rec->added) err = fsched__fd_ctl_edge(io, rec, EPOLL_CTL_ADD);
    else if (err == EEXIST) err = fsched__fd_ctl_edge(io, rec, EPOLL_CTL_MOD);
    if (err) return err;
    rec->added = 1;
    if (!rec->edge) {
        rec->edge = 1;
        rec->latched = rec->hup_latched = 0;
        /* seq_cst: against the owner's load before it polls (fsched__io_sweep): the
           first edge record ends a poll whose timeout the sweep did not bound */
        if (!FSCHED__FETCH_ADD(&io->edge_records, 1u, FSCHED__SEQ_CST)) fsched__io_interrupt(io);
    }
    return 0;
}
#endif

/* Under rec's lock: ends with `result` the waits that `found` answers: a cancel ends
   every one, anything else those watched (a waiter held for a close is not). Returns
   what it gave FSCHED_EDGE waiters. */
static uint32_t fsched__fd_end(fsched__fd *rec, uint32_t found, fsched_result result,
                               fsched__wakes *wakes) {
    fsched__waiter *wt, *next;
    uint32_t taken = 0;
    for (wt = (fsched__waiter *)rec->waiters.head; wt; wt = next) {
        fsched__fd_waiter *fw = (fsched__fd_waiter *)wt;
        next = wt->next;
        if (!(fw->events & found) ||
            (fw->close_state != FSCHED__FD_WATCHED && result != FSCHED_ERR_CANCELLED))
            continue;
        fw->ready = fw->events & found;
        fw->result = result;
        if (fw->edge) taken |= fw->ready;
        fsched__fd_count(rec, fw, 0);
        fsched__wait_list_end(&rec->waiters, wt, wakes);
    }
    return taken;
}

/* With the readiness an event found, shifted by this: the directions a hang-up (or
   error) ended. EPOLLRDHUP ends reading alone: it stays in every event after it, and a
   writer answered twice for each room would make a wasted write every time. */
#define FSCHED__FD_HUP_SHIFT 3u

/* Under rec's lock: ends the waits on rec that `found` (FSCHED_READABLE |
   FSCHED_WRITABLE, and those shifted by FSCHED__FD_HUP_SHIFT) answers with `result`.
   After readiness, a one-shot record is armed again for the others; an edge-triggered
   one stays registered, and keeps what no FSCHED_EDGE waiter took for the next (the edge
   will not come again), or registers anew in a fork's child. The others end too when
   that fails (closed, or no memory). A hang-up answers two FSCHED_EDGE waits: the one
   that finds the data before it, and the one after the short read that took that data
   (a promise fsched_wait_fd allows), for which no edge would come: the end is a state,
   not news. Not more: on a FIFO a new writer ends the hang-up, and a waiter answered
   every time would spin. */
static void fsched__fd_answer_locked(fsched__io *io, fsched__fd *rec, uint32_t found,
                                     fsched_result result, fsched__wakes *wakes) {
    uint32_t taken = fsched__fd_end(rec, found, result, wakes);
    int err;
    if (result != FSCHED_OK) return;
#if defined(FSCHED__IO_EPOLL)
    if (rec->edge) {
        uint32_t hup = (found >> FSCHED__FD_HUP_SHIFT) & (FSCHED_READABLE | FSCHED_WRITABLE);
        found &= FSCHED_READABLE | FSCHED_WRITABLE;
        /* what a waiter took is kept for one more; what none took, for two */
        rec->latched |= (found & ~taken) | (hup & taken);
        rec->hup_latched |= hup & ~taken;
        err = !rec->added && fsched__fd_wanted(rec) ? fsched__fd_register_edge(io, rec) : 0;
    } else
#else
    (void)taken; /* poll() keeps nothing: it looks at every fd waited on each time */
#endif
        err = fsched__fd_arm(io, rec);
    if (err)
        fsched__fd_end(rec, FSCHED_READABLE | FSCHED_WRITABLE, fsched__fd_refusal(err), wakes);
}

static void fsched__fd_answer(fsched__io *io, fsched__fd *rec, uint32_t found,
                              fsched_result result) {
    fsched__wakes wakes;
    wakes.n = 0;
    fsched__wait_list_lock(&rec->waiters);
    fsched__fd_answer_locked(io, rec, found, result, &wakes);
    fsched__wait_list_unlock_wake(&rec->waiters, &wakes);
}

/* fsched_close_fd has closed rec's fd: the waits held meanwhile start over. */
static void fsched__fd_unhold(fsched__fd *rec) {
    fsched__wakes wakes;
    fsched__waiter *wt, *next;
    wakes.n = 0;
    fsched__wait_list_lock(&rec->waiters);
    for (wt = (fsched__waiter *)rec->waiters.head; wt; wt = next) {
        fsched__fd_waiter *fw = (fsched__fd_waiter *)wt;
        next = wt->next;
        if (fw->close_state != FSCHED__FD_HELD) continue;
        fw->close_state = FSCHED__FD_AGAIN;
        fsched__wait_list_end(&rec->waiters, wt, &wakes);
    }
    fsched__wait_list_unlock_wake(&rec->waiters, &wakes);
}

#if !defined(FSCHED__IO_EPOLL)
/* Under the poller's lock: makes room in the poll set for the wake pipe and every
   record, if memory allows. */
static void fsched__io_set_room(fsched__io *io) {
    const fsched_allocator *a = &io->sched->allocator;
    uint32_t cap = io->records + 1u;
    struct pollfd *fds;
    fsched__fd **of;
    if (io->fds_cap >= cap) return;
    fds = (struct pollfd *)fsched__alloc(a, cap * sizeof *fds, sizeof(void *));
    of = (fsched__fd **)fsched__alloc(a, cap * sizeof *of, sizeof(void *));
    if (fds && of) {
        if (io->fds) {
            fsched__free(a, io->fds, io->fds_cap * sizeof *io->fds, sizeof(void *));
            fsched__free(a, io->fds_of, io->fds_cap * sizeof *io->fds_of, sizeof(void *));
        }
        io->fds = fds;
        io->fds_of = of;
        io->fds_cap = cap;
        return;
    }
    if (fds) fsched__free(a, fds, cap * sizeof *fds, sizeof(void *));
    if (of) fsched__free(a, of, cap * sizeof *of, sizeof(void *));
}

/* Under the poller's lock: fills `set` (room for `cap`, the wake pipe first) with the
   fds that waiters want, holding their records; the waiters of an fd it has no room for
   end for want of memory (*ended is set). Returns how many it filled. */
static uint32_t fsched__io_set_fill(fsched__io *io, struct pollfd *set, uint32_t cap,
                                    int *ended) {
    uint32_t n = 1, b;
    set[0].fd = io->wake_read;
    set[0].events = POLLIN;
    for (b = 0; b < io->bucket_count; b++) {
        fsched__fd *rec;
        for (rec = io->buckets[b]; rec; rec = rec->next) {
            uint32_t want;
            /* relaxed: a look; a wait that comes after it interrupts the poll (see
               fsched__fd_wait) */
            if (!FSCHED__LOAD(&rec->waiters.count, FSCHED__RELAXED)) continue;
            fsched__wait_list_lock(&rec->waiters);
            want = fsched__fd_wanted(rec);
            fsched__wait_list_unlock(&rec->waiters);
            if (!want) continue;
            if (n == cap) {
                fsched__fd_answer(io, rec, want, FSCHED_ERR_OUT_OF_MEMORY);
                *ended = 1;
                continue;
            }
            set[n].fd = rec->fd;
            set[n].events = (short)(((want & FSCHED_READABLE) ? POLLIN : 0) |
                                    ((want & FSCHED_WRITABLE) ? POLLOUT : 0));
            io->fds_of[n++] = rec;
            rec->users++;
        }
    }
    return n;
}
#endif

#if defined(FSCHED__IO_EPOLL)
#define FSCHED__SWEEP_BATCH 64u /* records held at once by the sweep, which asks in batches */

/* Whether rec has an FSCHED_EDGE waiter queued, or last asked about by the sweep, before
   the last two half periods began (under rec's lock). */
static int fsched__fd_unverified(const fsched__fd *rec, uint32_t epoch) {
    const fsched__waiter *wt;
    for (wt = (const fsched__waiter *)rec->waiters.head; wt; wt = wt->next) {
        const fsched__fd_waiter *fw = (const fsched__fd_waiter *)wt;
        if (fw->edge && fw->close_state == FSCHED__FD_WATCHED &&
            (uint32_t)(epoch - fw->epoch) >= 2u)
            return 1;
    }
    return 0;
}

/* The owner, before it polls: every half of FIBERSCHED_FD_VERIFY_NS, asks the kernel
   once more about the fds whose FSCHED_EDGE waits have gone unanswered, and unasked,
   for at least a half: a number that a new file took after a plain close() or dup2()
   is registered anew, and one ready (a broken promise) gives its event. A long wait is
   asked about once a period, not once: the number may be taken at any time. Returns
   timeout_ms, bounded by the next pass while records are registered edge-triggered. */
static int fsched__io_sweep(fsched__io *io, int timeout_ms) {
    fsched__fd *held[FSCHED__SWEEP_BATCH], *rec;
    uint32_t n, b = 0, count = 0, i, epoch;
    uint64_t now, half;
    int ms;
    /* seq_cst: against the registration that makes the first one (see
       fsched__fd_register_edge) */
    if (FSCHED__LIKELY(!FSCHED__LOAD(&io->edge_records, FSCHED__SEQ_CST))) return timeout_ms;
    now = fsched__now_ns();
    if (now >= io->sweep_next) {
        /* relaxed: a setting, read on its own */
        half = FSCHED__LOAD(&fsched__fd_verify_ns, FSCHED__RELAXED) / 2u;
        io->sweep_next = fsched__time_add(now, half ? half : 1u);
        /* relaxed: a pace, written by owners only, read by waiters to date themselves */
        epoch = FSCHED__LOAD(&io->sweep_epoch, FSCHED__RELAXED) + 1u;
        FSCHED__STORE(&io->sweep_epoch, epoch, FSCHED__RELAXED);
        /* batch after batch, so that every old wait is asked about in this pass (the
           bound holds however many there are): each resumes at the bucket where the last
           filled up, whose records asked about are dated anew by then; from the first
           bucket again if the table was resized meanwhile */
        do {
            n = 0;
            fsched__spin_lock(&io->lock);
            if (io->bucket_count != count) b = 0;
            count = io->bucket_count;
            for (; b < count && n < FSCHED__SWEEP_BATCH; b++)
                for (rec = io->buckets[b]; rec && n < FSCHED__SWEEP_BATCH; rec = rec->next) {
                    int old;
                    /* relaxed: a look; a wait queued after it is younger than a half */
                    if (!FSCHED__LOAD(&rec->waiters.count, FSCHED__RELAXED)) continue;
                    fsched__wait_list_lock(&rec->waiters);
                    old = rec->edge && fsched__fd_unverified(rec, epoch);
                    fsched__wait_list_unlock(&rec->waiters);
                    if (!old) continue;
                    rec->users++;
                    held[n++] = rec;
                }
            fsched__spin_unlock(&io->lock);
            if (n == FSCHED__SWEEP_BATCH) b--; /* the bucket that filled it may hold more */
            for (i = 0; i < n; i++) {
                fsched__wakes wakes;
                const fsched__waiter *wt;
                int err = 0;
                rec = held[i];
                wakes.n = 0;
                fsched__wait_list_lock(&rec->waiters);
                if (rec->edge) {
                    for (wt = (const fsched__waiter *)rec->waiters.head; wt; wt = wt->next)
                        ((fsched__fd_waiter *)wt)->epoch = epoch;
                    err = fsched__fd_register_edge(io, rec);
                }
                if (err)
                    fsched__fd_end(rec, FSCHED_READABLE | FSCHED_WRITABLE,
                                   fsched__fd_refusal(err), &wakes);
                fsched__wait_list_unlock_wake(&rec->waiters, &wakes);
                fsched__io_release(io, rec);
            }
        } while (n == FSCHED__SWEEP_BATCH);
    }
    ms = fsched__timeout_ms(io->sweep_next > now ? io->sweep_next - now : 0);
    return timeout_ms < 0 || timeout_ms > ms ? ms : timeout_ms;
}
#endif

/* Polls once, for up to timeout_ms (-1: until something happens), and answers the fds
   found ready. The caller owns the poller. */
static void fsched__io_poll(fsched__io *io, int timeout_ms) {
#if defined(FSCHED__IO_EPOLL)
    struct epoll_event ev[64];
    int n, i;
    uint64_t events = 0;
    timeout_ms = fsched__io_sweep(io, timeout_ms);
    n = epoll_wait(io->epfd, ev, 64, timeout_ms);
    for (i = 0; i < n; i++) {
        uint32_t e = ev[i].events, found, ended;
        fsched__fd *rec = fsched__io_hold_named(io, ev[i].data.u64);
        fsched__wakes wakes;
        if (!ev[i].data.u64) fsched__io_drain_wake(io);
        if (!rec) continue; /* the wake fd, or a record freed since */
        FSCHED__POINT(FD_HARVESTED);
        events++;
        /* the directions a hang-up ended (EPOLLRDHUP: the peer's sending side alone),
           each ready too */
        ended = e & (EPOLLERR | EPOLLHUP) ? FSCHED_READABLE | FSCHED_WRITABLE
                : e & EPOLLRDHUP          ? FSCHED_READABLE
                                          : 0u;
        found = ended | ended << FSCHED__FD_HUP_SHIFT;
        if (e & EPOLLIN) found |= FSCHED_READABLE;
        if (e & EPOLLOUT) found |= FSCHED_WRITABLE;
        wakes.n = 0;
        fsched__wait_list_lock(&rec->waiters);
        /* fsched_close_fd may have given the record a new generation since it was
           named: the event is the closed file's, and would latch the new one */
        if (rec->gen == (uint32_t)(ev[i].data.u64 >> 32))
            fsched__fd_answer_locked(io, rec, found, FSCHED_OK, &wakes);
        fsched__wait_list_unlock_wake(&rec->waiters, &wakes);
        fsched__io_release(io, rec);
    }
    /* relaxed: a count */
    if (events) FSCHED__FETCH_ADD(&io->sched->fd_events, events, FSCHED__RELAXED);
#else
    struct pollfd one, *set;
    uint32_t n, i;
    int k, ended = 0;
    fsched__spin_lock(&io->lock);
    fsched__io_set_room(io);
    set = io->fds ? io->fds : &one;
    n = fsched__io_set_fill(io, set, io->fds ? io->fds_cap : 1u, &ended);
    /* the waits ended for want of memory may be the caller's own fibers, made ready
       without a wake: it only looks, and runs them */
    if (ended) timeout_ms = 0;
    /* under the table's lock, which a new waiter takes after it queued to read this:
       either the set above has its fd, or it sees `blocking` and interrupts the poll */
    io->blocking = timeout_ms != 0;
    fsched__spin_unlock(&io->lock);
    k = poll(set, n, timeout_ms);
    fsched__spin_lock(&io->lock);
    io->blocking = 0;
    fsched__spin_unlock(&io->lock);
    if (k > 0 && set[0].revents) fsched__io_drain_wake(io);
    for (i = 1; i < n && k > 0; i++) {
        short e = set[i].revents;
        uint32_t found = 0;
        if (!e) continue;
        /* not open when the poll began; a new file may have taken the number since, and
           then its waiters (queued after the set was made) wait on */
        if ((e & POLLNVAL) && fcntl(set[i].fd, F_GETFD) >= 0) continue;
        if (e & (POLLERR | POLLHUP | POLLNVAL)) found = FSCHED_READABLE | FSCHED_WRITABLE;
        if (e & POLLIN) found |= FSCHED_READABLE;
        if (e & POLLOUT) found |= FSCHED_WRITABLE;
        fsched__fd_answer(io, io->fds_of[i], found,
                          (e & POLLNVAL) ? FSCHED_ERR_INVALID_ARGUMENT : FSCHED_OK);
    }
    fsched__spin_lock(&io->lock);
    for (i = 1; i < n; i++) io->fds_of[i]->users--;
    fsched__spin_unlock(&io->lock);
#endif
}

/* Ends every wait on fd in io with FSCHED_ERR_CANCELLED (fd < 0: on every fd). One fd's
   is found by its number: a close costs the same however many fds are waited on. */
static void fsched__io_cancel(fsched__io *io, int fd) {
    uint32_t b;
    fsched__fd *rec;
    fsched__spin_lock(&io->lock);
    if (fd >= 0 && (rec = fsched__io_find(io, fd)) != NULL)
        fsched__fd_answer(io, rec, FSCHED_READABLE | FSCHED_WRITABLE, FSCHED_ERR_CANCELLED);
    for (b = 0; fd < 0 && b < io->bucket_count; b++)
        for (rec = io->buckets[b]; rec; rec = rec->next)
            fsched__fd_answer(io, rec, FSCHED_READABLE | FSCHED_WRITABLE, FSCHED_ERR_CANCELLED);
    fsched__spin_unlock(&io->lock);
}

/* fsched_close_fd has closed fd, still listed as being closed: its record in io forgets
   the closed file's registration, and takes a new generation, so that the closed
   file's events still on their way (read by another poll, or from a registration that
   a dup or a fork keeps alive) name nothing. */
static void fsched__io_forget(fsched__io *io, int fd) {
    fsched__fd *rec;
    fsched__spin_lock(&io->lock);
    if ((rec = fsched__io_find(io, fd)) != NULL) {
        fsched__wait_list_lock(&rec->waiters);
        fsched__io_new_gen(io, rec);
        fsched__io_forget_registration(io, rec);
        fsched__wait_list_unlock(&rec->waiters);
    }
    fsched__spin_unlock(&io->lock);
}

/* fsched_close_fd has closed fd: its waits held in io start over. */
static void fsched__io_unhold(fsched__io *io, int fd) {
    fsched__fd *rec;
    fsched__spin_lock(&io->lock);
    if ((rec = fsched__io_find(io, fd)) != NULL) fsched__fd_unhold(rec);
    fsched__spin_unlock(&io->lock);
}

/* fsched_close_fd lists fd as being closed (entry on its stack), before it cancels. */
static void fsched__fd_closing_begin(fsched__fd_closing *entry, int fd) {
    entry->fd = fd;
    fsched__spin_lock(&fsched__fd_closings_lock);
    entry->next = fsched__fd_closings;
    fsched__fd_closings = entry;
    /* seq_cst: before the cancel, against the waiter's load (see fsched_close_fd) */
    FSCHED__FETCH_ADD(&fsched__fd_closings_count, 1u, FSCHED__SEQ_CST);
    fsched__spin_unlock(&fsched__fd_closings_lock);
}

/* fsched_close_fd has closed entry's fd: takes it off the list, then lets the waits held
   meanwhile start over (they no longer find it listed). */
static void fsched__fd_closing_end(fsched__fd_closing *entry) {
    fsched__fd_closing **p;
    fsched__io *io;
    /* while fd is still listed, so that no wait comes between: one would trust the
       closed file's registration, and wait for events that never come */
    fsched__spin_lock(&fsched__io_all_lock);
    for (io = fsched__io_all; io; io = io->next) fsched__io_forget(io, entry->fd);
    fsched__spin_unlock(&fsched__io_all_lock);
    fsched__spin_lock(&fsched__fd_closings_lock);
    for (p = &fsched__fd_closings; *p != entry; p = &(*p)->next) {
    }
    *p = entry->next;
    FSCHED__FETCH_SUB(&fsched__fd_closings_count, 1u, FSCHED__SEQ_CST);
    fsched__spin_unlock(&fsched__fd_closings_lock);
    fsched__spin_lock(&fsched__io_all_lock);
    for (io = fsched__io_all; io; io = io->next) fsched__io_unhold(io, entry->fd);
    fsched__spin_unlock(&fsched__io_all_lock);
}

/* Whether fsched_close_fd is closing fd now. */
static int fsched__fd_is_closing(int fd) {
    const fsched__fd_closing *c;
    int found = 0;
    /* seq_cst: see fsched_close_fd */
    if (!FSCHED__LOAD(&fsched__fd_closings_count, FSCHED__SEQ_CST)) return 0;
    fsched__spin_lock(&fsched__fd_closings_lock);
    for (c = fsched__fd_closings; c && !found; c = c->next) found = c->fd == fd;
    fsched__spin_unlock(&fsched__fd_closings_lock);
    return found;
}

/* The owner, in a fork's child: arms every wait in the child's own epoll set (they were
   armed in the parent's), ending those it cannot arm. */
static void fsched__io_rearm(fsched__io *io) {
#if defined(FSCHED__IO_EPOLL)
    uint32_t b;
    fsched__fd *rec;
    /* relaxed: read and cleared by owners only, ordered by the ownership's CAS */
    if (FSCHED__LIKELY(!FSCHED__LOAD(&io->rearm, FSCHED__RELAXED))) return;
    FSCHED__STORE(&io->rearm, 0u, FSCHED__RELAXED);
    fsched__spin_lock(&io->lock);
    for (b = 0; b < io->bucket_count; b++)
        for (rec = io->buckets[b]; rec; rec = rec->next) fsched__fd_answer(io, rec, 0, FSCHED_OK);
    fsched__spin_unlock(&io->lock);
    /* the waits it ended may be the owner's own fibers, made ready without a wake: the
       poll it is about to make only looks */
    fsched__io_interrupt(io);
#else
    (void)io;
#endif
}

/* Owns the poller of s, if s has one and no other thread owns it: the poller, or NULL. */
static fsched__io *fsched__io_own(fsched_sched *s) {
    /* acquire: pairs with the CAS that published the poller */
    fsched__io *io = FSCHED__LOAD(&s->io, FSCHED__ACQUIRE);
    uint32_t free = 0;
    /* relaxed: a hint (see fsched__fd_wait); acquire: what the previous owner's answers
       wrote; a busy owner is left alone */
    if (!io || !FSCHED__LOAD(&s->fd_waits, FSCHED__RELAXED) ||
        !FSCHED__CAS(&io->owner, &free, 1u, FSCHED__ACQUIRE, FSCHED__RELAXED))
        return NULL;
    fsched__io_rearm(io);
    return io;
}

static void fsched__io_disown(fsched__io *io) {
    FSCHED__STORE(&io->owner, 0u, FSCHED__RELEASE); /* release: pairs with the next owner */
}
#endif /* FSCHED__IO */

/* ---- the poll hook and the watch ------------------------------------------------- */

static uint64_t fsched__watch_interval(const fsched_sched *s) {
    /* relaxed: a pace; any recent interval will do */
    uint64_t i = FSCHED__LOAD(&s->poll_interval, FSCHED__RELAXED);
    return i ? i : FSCHED__WATCH_INTERVAL;
}

/* Whether the time in *next has come, and if so, makes it `interval` after now. Relaxed:
   pacing only; of two workers that pass together, one does it. */
static int fsched__watch_due(uint64_t *next, uint64_t now, uint64_t interval) {
    uint64_t n = FSCHED__LOAD(next, FSCHED__RELAXED);
    return now >= n &&
           FSCHED__CAS(next, &n, fsched__time_add(now, interval), FSCHED__RELAXED, FSCHED__RELAXED);
}

/* Calls the hook unless none is set or another thread is in it. Returns whether it
   still waits for something; 1 too when another thread was in it, whose call may have
   begun before the caller's task started what it waits for (so the caller looks again
   after an interval rather than sleep through it). */
static int fsched__poll_call(fsched_sched *s) {
    uint32_t free = 0;
    int pending = 0;
    fsched_poll_fn fn;
    /* relaxed: a look; the hook itself is read under the lock */
    if (!FSCHED__LOAD(&s->poll_fn, FSCHED__RELAXED)) return 0;
    /* acquire: the hook and its user as fsched_set_poll left them, under this lock */
    if (!FSCHED__CAS(&s->poll_busy, &free, 1u | FSCHED__POLL_CALLING, FSCHED__ACQUIRE,
                     FSCHED__RELAXED))
        return 1;
    if ((fn = s->poll_fn) != NULL) {
        /* the hook cannot wait or yield (it holds this lock): it ends on this thread */
        fsched__ring *ring = fsched__join_ring_swap(NULL); /* joins refused, as below */
        fsched__tls_thread.in_hook = s;
        pending = fn(s->poll_user) != 0;
        fsched__tls_thread.in_hook = NULL;
        fsched__join_ring_swap(ring);
        /* replaced from inside (which wakes no sleeper): the caller calls the new hook
           after an interval */
        pending |= s->poll_fn && s->poll_fn != fn;
    }
    /* release: unlocks; pairs with the next taker's acquire */
    FSCHED__FETCH_SUB(&s->poll_busy, 1u | FSCHED__POLL_CALLING, FSCHED__RELEASE);
    return pending;
}

/* Takes the hook's lock for fsched_set_poll: waits for a call in progress, saying so
   first, so that no call begins meanwhile (a hook that keeps workers calling it would
   keep the lock taken). From another scheduler's hook it does not wait for a call
   (FSCHED_ERR_WRONG_STATE): that call may be waiting for the caller's own, and a hook
   must not wait. Relaxed: the CAS takes the lock. */
static fsched_result fsched__poll_lock(fsched_sched *s) {
    uint32_t spins = 0, busy;
    FSCHED__FETCH_ADD(&s->poll_busy, 2u, FSCHED__RELAXED);
    for (;;) {
        busy = FSCHED__LOAD(&s->poll_busy, FSCHED__RELAXED);
        if ((busy & FSCHED__POLL_CALLING) && FSCHED__THREAD_NOW.in_hook) {
            FSCHED__FETCH_SUB(&s->poll_busy, 2u, FSCHED__RELAXED); /* took nothing */
            return FSCHED__MISUSE(&s->logger, FSCHED_ERR_WRONG_STATE,
                                  "fsched_set_poll: from a poll hook, while another "
                                  "scheduler's hook is being called");
        }
        busy &= ~1u;
        if (FSCHED__CAS(&s->poll_busy, &busy, busy | 1u, FSCHED__ACQUIRE, FSCHED__RELAXED))
            return FSCHED_OK;
        fsched__backoff(&spins);
    }
}

/* Between tasks: calls the hook once its interval has passed since the last call by any
   worker, and looks into the poller once FSCHED__WATCH_INTERVAL has. */
static void fsched__watch_tick(fsched__worker *w) {
    fsched_sched *s = w->sched;
    uint64_t now = fsched__sched_now(s);
#if defined(FSCHED__IO)
    fsched__io *io;
#endif
    /* relaxed: a look; fsched__poll_call takes the lock. Without a clock no interval
       ever passes: every look is due */
    if (FSCHED__LOAD(&s->poll_fn, FSCHED__RELAXED) &&
        (!fsched__sched_clocked(s) ||
         fsched__watch_due(&s->hook_next, now, fsched__watch_interval(s))))
        fsched__poll_call(s);
#if defined(FSCHED__IO)
    if (fsched__watch_due(&s->watch_next, now, FSCHED__WATCH_INTERVAL) &&
        (io = fsched__io_own(s)) != NULL) {
        fsched__io_poll(io, 0);
        fsched__io_disown(io);
    }
#endif
}

#if defined(FSCHED__IO) && FSCHED__THREADS
/* The owner of the poller sleeps in it for up to timeout_ms. A waker unparks the worker,
   then reads `polls` to see whether it must interrupt the poll too; here `polls` is
   set, then the permit taken: all seq_cst, so either the waker sees `polls` or this
   sees its permit and does not sleep. */
static void fsched__io_sleep(fsched__worker *w, fsched__io *io, int timeout_ms) {
    FSCHED__POINT(POLL);
    FSCHED__EXCHANGE(&w->polls, 1u, FSCHED__SEQ_CST);
    if (!fsched__park_take(&w->parker)) fsched__io_poll(io, timeout_ms);
    FSCHED__STORE(&w->polls, 0u, FSCHED__RELAXED); /* relaxed: a late interrupt ends a poll */
}
#endif

/* The worker found nothing to do, and would sleep until `deadline` (the scheduler's
   clock; 0: none). Watches the outside world meanwhile: sleeps in the poller if it is
   free, and no longer than the interval while the hook, called before (in
   fsched__idle_step), waits for something. Returns 0 when there was nothing to watch
   (the caller sleeps as usual). */
static int fsched__watch_block(fsched__worker *w, uint64_t deadline) {
    fsched_sched *s = w->sched;
    int pending = w->hook_pending;
    uint64_t now = fsched__sched_now(s);
#if defined(FSCHED__IO)
    fsched__io *io;
#endif
    if (pending) {
        uint64_t again = fsched__time_add(now, fsched__watch_interval(s));
        if (!deadline || deadline > again) deadline = again;
    }
#if defined(FSCHED__IO)
    if ((io = fsched__io_own(s)) != NULL) {
        int ms = -1;
        if (deadline) ms = fsched__timeout_ms(deadline > now ? deadline - now : 0);
#if !FSCHED__THREADS
        fsched__io_poll(io, ms); /* no other thread could wake this one */
#else
        fsched__io_sleep(w, io, ms);
#endif
        fsched__io_disown(io);
        return 1;
    }
#endif
    if (!pending) return 0;
#if !FSCHED__THREADS
    /* without a clock no interval ends: the loop's next idle round calls the hook again */
    if (!fsched__sched_clocked(s)) return 1;
    while (fsched__sched_now(s) < deadline && /* acquire: see fsched__notify */
           FSCHED__LOAD(&w->latch, FSCHED__ACQUIRE) != FSCHED__LATCH_SET)
        fsched__cpu_relax();
#else
    if (now < deadline) fsched__park(&w->parker, deadline - now);
#endif
    return 1;
}

/* fsched_destroy has begun: every fd wait fails, now and from now on. */
static void fsched__watch_close(fsched_sched *s) {
#if defined(FSCHED__IO)
    /* acquire: pairs with the CAS that published the poller */
    fsched__io *io = FSCHED__LOAD(&s->io, FSCHED__ACQUIRE);
    if (io) fsched__io_cancel(io, -1);
#else
    (void)s;
#endif
}

#if defined(FSCHED__IO)
/* Frees the poller of a scheduler being freed (no thread of it uses the poller now). */
static void fsched__watch_free(fsched_sched *s) {
    fsched__io *io = s->io, **p;
    const fsched_allocator *a = &s->allocator;
    uint32_t i;
    if (!io) return;
    fsched__spin_lock(&fsched__io_all_lock); /* waits for fsched_close_fd's walk */
    for (p = &fsched__io_all; *p; p = &(*p)->next)
        if (*p == io) {
            *p = io->next;
            break;
        }
    fsched__spin_unlock(&fsched__io_all_lock);
    for (i = 0; i < io->bucket_count; i++)
        while (io->buckets[i]) {
            fsched__fd *rec = io->buckets[i];
            io->buckets[i] = rec->next;
            fsched__free(a, rec, sizeof *rec, sizeof(void *));
        }
    if (io->buckets)
        fsched__free(a, io->buckets, io->bucket_count * sizeof *io->buckets, sizeof(void *));
#if defined(FSCHED__IO_EPOLL)
    close(io->epfd);
#else
    if (io->fds) {
        fsched__free(a, io->fds, io->fds_cap * sizeof *io->fds, sizeof(void *));
        fsched__free(a, io->fds_of, io->fds_cap * sizeof *io->fds_of, sizeof(void *));
    }
    close(io->wake_write);
#endif
    close(io->wake_read);
    fsched__free(a, io, sizeof *io, sizeof(void *));
    s->io = NULL;
}

static void fsched__watch_interrupt(fsched_sched *s) { fsched__io_interrupt(s->io); }
#else
static void fsched__watch_free(fsched_sched *s) { (void)s; }
static void fsched__watch_interrupt(fsched_sched *s) { (void)s; }
#endif

/* What the layers below reach through s->watch. */
static const fsched__watch fsched__watch_io = {fsched__watch_tick,  fsched__poll_call,
                                               fsched__watch_block, fsched__watch_interrupt,
                                               fsched__watch_close, fsched__watch_free};

#if defined(FSCHED__IO)
/* The poller of s, made at the first call; NULL, with *r set, when it cannot be. */
static fsched__io *fsched__io_get(fsched_sched *s, fsched_result *r) {
    /* acquire: pairs with the CAS that published a poller another thread made */
    fsched__io *io = FSCHED__LOAD(&s->io, FSCHED__ACQUIRE), *none = NULL;
    if (FSCHED__LIKELY(io != NULL)) return io;
    io = (fsched__io *)fsched__alloc(&s->allocator, sizeof *io, sizeof(void *));
    *r = FSCHED_ERR_OUT_OF_MEMORY;
    if (!io) return NULL;
    memset(io, 0, sizeof *io);
    io->sched = s;
    *r = FSCHED_ERR_SYSTEM;
#if defined(FSCHED__IO_EPOLL)
    io->epfd = epoll_create1(EPOLL_CLOEXEC);
    io->wake_read = io->wake_write = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (io->epfd >= 0 && io->wake_read >= 0) {
        struct epoll_event ev;
        memset(&ev, 0, sizeof ev);
        ev.events = EPOLLIN; /* level-triggered: readable until drained */
        ev.data.u64 = 0;     /* no record has generation 0: the wake fd */
        if (epoll_ctl(io->epfd, EPOLL_CTL_ADD, io->wake_read, &ev) == 0) *r = FSCHED_OK;
    }
#else
    {
        int ends[2];
        io->wake_read = io->wake_write = -1;
        if (pipe(ends) == 0) {
            io->wake_read = ends[0];
            io->wake_write = ends[1];
            if (fsched__fd_nonblocking(ends[0]) && fsched__fd_nonblocking(ends[1])) *r = FSCHED_OK;
        }
    }
#endif
    if (*r != FSCHED_OK && errno == ENOMEM) *r = FSCHED_ERR_OUT_OF_MEMORY;
    /* acq_rel: publishes the poller; a loser frees its own and takes the winner's */
    if (*r == FSCHED_OK && FSCHED__CAS(&s->io, &none, io, FSCHED__ACQ_REL, FSCHED__ACQUIRE)) {
        FSCHED__STORE(&s->watch, &fsched__watch_io, FSCHED__RELAXED); /* relaxed: a hint */
        fsched__io_fork_hook();
        fsched__spin_lock(&fsched__io_all_lock);
        io->next = fsched__io_all;
        fsched__io_all = io;
        /* relaxed: read before a look at the list under this lock (fsched__io_hold) */
        FSCHED__FETCH_ADD(&fsched__io_fds_gen, 1u, FSCHED__RELAXED);
        fsched__spin_unlock(&fsched__io_all_lock);
        return io;
    }
#if defined(FSCHED__IO_EPOLL)
    if (io->epfd >= 0) close(io->epfd);
#else
    if (io->wake_write >= 0) close(io->wake_write);
#endif
    if (io->wake_read >= 0) close(io->wake_read);
    fsched__free(&s->allocator, io, sizeof *io, sizeof(void *));
    return none; /* the winner's, or NULL with *r set */
}
#endif

FIBERSCHED_API fsched_result fsched_set_poll(fsched_sched *s, fsched_poll_fn fn, void *user,
                                             uint64_t interval_ns) {
    fsched_result r;
    int inside;
    if (fsched__in_interrupt()) /* it may have preempted a call of the hook: it would wait */
        return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE,
                              "fsched_set_poll: from an interrupt handler");
    if ((r = fsched__sched_enter(s, 0, __func__)) != FSCHED_OK) return r;
    /* the hook's own lock, unless this is the call that holds it */
    inside = FSCHED__THREAD_NOW.in_hook == s;
    if (!inside && (r = fsched__poll_lock(s)) != FSCHED_OK) {
        fsched__sched_release(s);
        return r;
    }
    /* relaxed: under the hook's lock, whose release below publishes them to its next
       taker, and `watch`, a hint (see fsched__watch_of) */
    s->poll_user = user;
    FSCHED__STORE(&s->poll_interval, interval_ns, FSCHED__RELAXED);
    /* the new interval from now: due at once (busy workers call a new hook at their next
       look), or from the hook an interval after this call; relaxed, as above */
    FSCHED__STORE(&s->hook_next,
                  inside ? fsched__time_add(fsched__sched_now(s), fsched__watch_interval(s)) : 0,
                  FSCHED__RELAXED);
    FSCHED__STORE(&s->poll_fn, fn, FSCHED__RELAXED);
    FSCHED__POINT(POLL_SET);
    /* never taken back (a hook taken away leaves workers looking: a few loads a turn),
       so that a first fd wait, which installs it too, cannot have its poller left
       unwatched by a call that looked before it made the poller; relaxed: a hint) */
    if (fn) FSCHED__STORE(&s->watch, &fsched__watch_io, FSCHED__RELAXED);
    if (!inside) FSCHED__FETCH_SUB(&s->poll_busy, 3u, FSCHED__RELEASE); /* release: unlocks */
    /* an idle worker calls the new hook soon, and from then on at every interval; from
       the hook, its caller does (a hook that sets itself again at every call, to change
       its interval, say, would have each call wake a worker for the next). Announced as
       new work is, so that a worker about to sleep, which read `watch` before this
       and is not yet counted sleeping, does not sleep on its parker past it */
    if (fn && !inside) fsched__new_jobs(s, 1);
    fsched__sched_release(s);
    return FSCHED_OK;
}

/* ---- fd waits -------------------------------------------------------------------- */

#if defined(FSCHED__IO)
/* What poll() found of `events` (an error or hang-up: all of them). */
static uint32_t fsched__fd_found(uint32_t events, short revents) {
    return (revents & (POLLERR | POLLHUP))
               ? events
               : (uint32_t)(((revents & POLLIN) ? FSCHED_READABLE : 0u) |
                            ((revents & POLLOUT) ? FSCHED_WRITABLE : 0u));
}

static short fsched__fd_poll_events(uint32_t events) {
    return (short)(((events & FSCHED_READABLE) ? POLLIN : 0) |
                   ((events & FSCHED_WRITABLE) ? POLLOUT : 0));
}

/* A wait of a fiber that timed out looks once more, as poll() does before its timeout
   runs: an fd ready all along (a regular file, or data already there) is reported ready,
   and one not open refused, even when the timer came before the poller's look. */
static fsched_result fsched__fd_last_look(const fsched__io *io, int fd, uint32_t events,
                                          uint32_t *ready) {
    struct pollfd p;
    p.fd = fd;
    p.events = fsched__fd_poll_events(events);
    p.revents = 0;
    if (poll(&p, 1, 0) != 1) return FSCHED_ERR_TIMEOUT;
    if (p.revents & POLLNVAL) return fsched__fd_not_open(io, fd);
    *ready = fsched__fd_found(events, p.revents);
    return FSCHED_OK;
}

/* poll(): for a thread outside any scheduler, or a wait that only looks. */
static fsched_result fsched__fd_poll_thread(int fd, uint32_t events, uint64_t timeout_ns,
                                            uint32_t *ready) {
    struct pollfd p;
    uint64_t deadline = fsched__time_add(fsched__now_ns(), timeout_ns);
    fsched_result r = fsched__fd_not_own(fd, NULL, "fsched_wait_fd");
    if (r != FSCHED_OK) return r;
    p.fd = fd;
    p.events = fsched__fd_poll_events(events);
    for (;;) {
        int ms = -1, k;
        if (timeout_ns != FSCHED_FOREVER) {
            uint64_t now = fsched__now_ns();
            ms = fsched__timeout_ms(deadline > now ? deadline - now : 0);
        }
        p.revents = 0;
        k = poll(&p, 1, ms);
        if (k < 0 && errno == EINTR) continue; /* a signal: the deadline still holds */
        if (k < 0) return errno == ENOMEM ? FSCHED_ERR_OUT_OF_MEMORY : FSCHED_ERR_SYSTEM;
        if (p.revents & POLLNVAL)
            return FSCHED__MISUSE(NULL, FSCHED_ERR_INVALID_ARGUMENT,
                                  "fsched_wait_fd: fd %d is not open", fd);
        if (k == 0) {
            if (timeout_ns != FSCHED_FOREVER && fsched__now_ns() >= deadline)
                return FSCHED_ERR_TIMEOUT;
            continue;
        }
        if (ready) *ready = fsched__fd_found(events, p.revents);
        return FSCHED_OK;
    }
}

/* One wait of a task or bound thread on fd: queued on fd's record and the fd armed,
   then suspended until an answer, the deadline or a cancel. fw->close_state is
   FSCHED__FD_AGAIN when it came while fd was being closed, and that close has ended
   (the caller starts over). */
static fsched_result fsched__fd_wait(fsched__io *io, fsched__fd_waiter *fw, int fd,
                                     uint64_t deadline) {
    fsched_sched *s = io->sched;
    fsched__fd *rec;
    fsched_result r;
    uint32_t latched = 0;
    int err = 0;
    fw->close_state = FSCHED__FD_WATCHED;
    if (!(rec = fsched__io_hold(io, fd, &r))) return r;
    if ((r = fsched__wait_begin(&fw->wt, deadline, "fd", rec)) != FSCHED_OK) {
        fsched__io_release(io, rec);
        return r;
    }
    fw->ready = 0;
    fw->result = FSCHED_OK;
    fw->counted = 0;
    fsched__wait_list_lock(&rec->waiters);
    /* under the lock that destroy's cancel takes after it set `closing` (relaxed: the
       lock orders it) */
    if (FSCHED__LOAD(&s->closing, FSCHED__RELAXED)) {
        r = FSCHED_ERR_CANCELLED;
    } else {
        fsched__wait_list_append(&rec->waiters, &fw->wt);
        /* under the lock that fsched_close_fd's cancel takes after it listed fd */
        if (fsched__fd_is_closing(fd)) {
            fw->close_state = FSCHED__FD_HELD;
#if defined(FSCHED__IO_EPOLL)
        } else if (fw->edge && rec->edge && rec->added && (rec->latched & fw->events)) {
            /* readiness came since the caller's EAGAIN, before it waited: the edge will
               not come again */
            latched = rec->latched & fw->events;
            rec->latched = (rec->latched & ~latched) | (rec->hup_latched & latched);
            rec->hup_latched &= ~latched;
            fsched__wait_list_remove(&rec->waiters, &fw->wt);
#endif
        } else {
            fsched__fd_count(rec, fw, 1);
#if defined(FSCHED__IO_EPOLL)
            /* relaxed: dates the wait for the sweep; a late epoch only makes it later */
            fw->epoch = FSCHED__LOAD(&io->sweep_epoch, FSCHED__RELAXED);
            if (fw->edge && rec->edge && rec->added)
                err = 0; /* registered: the edge after the caller's EAGAIN will come */
            else if (fw->edge || rec->edge)
                err = fsched__fd_register_edge(io, rec); /* (a plain wait: looks again) */
            else
#endif
                err = fsched__fd_arm(io, rec);
            if (err != 0) {
                fsched__fd_count(rec, fw, 0);
                fsched__wait_list_remove(&rec->waiters, &fw->wt);
            }
        }
    }
    if (r != FSCHED_OK || err || latched) {
        fsched__wait_list_unlock(&rec->waiters);
        fsched__wait_abandon(&fw->wt);
        fsched__io_release(io, rec);
        fw->ready = latched ? latched : fw->events; /* EPERM: always ready */
        r = err ? fsched__fd_refusal(err) : r;
        return r == FSCHED_ERR_INVALID_ARGUMENT ? fsched__fd_not_open(io, fd) : r;
    }
    /* relaxed: a hint for the watch; this worker itself looks before it sleeps */
    FSCHED__FETCH_ADD(&s->fd_waits, 1u, FSCHED__RELAXED);
#if !defined(FSCHED__IO_EPOLL)
    {
        uint32_t blocking;
        fsched__wait_list_unlock(&rec->waiters);
        /* poll() watches the set it was given: a poll under way learns of this fd (see
           fsched__io_poll). The wait may be answered meanwhile; the commit below then
           finds its fiber made ready already, as after any early wake. */
        fsched__spin_lock(&io->lock);
        blocking = io->blocking;
        fsched__spin_unlock(&io->lock);
        if (blocking) fsched__io_interrupt(io);
        fsched__wait_list_lock(&rec->waiters);
    }
#endif
    r = fsched__wait_commit(&rec->waiters, &fw->wt);
    FSCHED__FETCH_SUB(&s->fd_waits, 1u, FSCHED__RELAXED); /* relaxed: a hint, as above */
    /* off the list, whoever ended the wait gone from its lock: still counted only when
       it did not answer (a timeout) */
    if (fw->counted) {
        fsched__wait_list_lock(&rec->waiters);
        fsched__fd_count(rec, fw, 0);
        fsched__wait_list_unlock(&rec->waiters);
    }
    fsched__io_release(io, rec);
    if (r == FSCHED_OK) r = fw->result;
    return r == FSCHED_ERR_INVALID_ARGUMENT ? fsched__fd_not_open(io, fd) : r;
}
#endif

FIBERSCHED_API fsched_result fsched_wait_fd(int fd, uint32_t events, uint64_t timeout_ns,
                                            uint32_t *ready) {
#if defined(FSCHED__IO)
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    fsched__io *io;
    fsched__fd_waiter fw;
    uint64_t deadline;
    fsched_result r = FSCHED_OK;
    uint32_t edge = events & FSCHED_EDGE;
    if (fd < 0 || !(events & (FSCHED_READABLE | FSCHED_WRITABLE)) ||
        (events & ~(FSCHED_READABLE | FSCHED_WRITABLE | FSCHED_EDGE)))
        return FSCHED__REFUSE(NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "fd %d or events %u out of range", fd, events);
    events &= ~FSCHED_EDGE; /* poll() and plain threads: a plain wait */
    if (!w || !timeout_ns) return fsched__fd_poll_thread(fd, events, timeout_ns, ready);
    /* relaxed: an early answer; fsched__fd_wait looks again under the lock */
    if (FSCHED__LOAD(&w->sched->closing, FSCHED__RELAXED)) return FSCHED_ERR_CANCELLED;
    if (!(io = fsched__io_get(w->sched, &r))) return r;
    deadline = fsched__wait_deadline(timeout_ns);
    fw.events = events;
#if defined(FSCHED__IO_EPOLL)
    fw.edge = edge != 0;
#else
    fw.edge = 0;
    (void)edge;
#endif
    do r = fsched__fd_wait(io, &fw, fd, deadline);
    while (r == FSCHED_OK && fw.close_state == FSCHED__FD_AGAIN);
    if (r == FSCHED_ERR_TIMEOUT) r = fsched__fd_last_look(io, fd, events, &fw.ready);
    if (r == FSCHED_OK && ready) *ready = fw.ready;
    return r;
#else
    (void)fd;
    (void)events;
    (void)timeout_ns;
    (void)ready;
    return FSCHED__REFUSE(NULL, FSCHED_ERR_UNSUPPORTED, "no file descriptors here");
#endif
}

/* A wait being set up races the close: it queues, then looks whether fd is being closed,
   under its record's lock; the cancel takes that lock after fd was listed (seq_cst, the
   count and its load). Either the cancel finds the waiter, or the waiter finds fd listed
   and is held, not armed, until the close has ended, and then starts over on whatever
   file has the number by then. No wait is armed on the file being closed after its
   cancel: the kernel would drop that registration without a word. */
FIBERSCHED_API fsched_result fsched_close_fd(int fd) {
#if defined(FSCHED__IO)
    fsched__fd_closing entry;
    fsched__io *io;
    int own, rc, err;
    if (fd < 0)
        return FSCHED__REFUSE(NULL, FSCHED_ERR_INVALID_ARGUMENT, "fd %d", fd);
    /* the list's lock keeps every poller in it alive (fsched__watch_free takes it first) */
    fsched__spin_lock(&fsched__io_all_lock);
    if (!(own = fsched__io_owns(fd))) {
        fsched__fd_closing_begin(&entry, fd);
        for (io = fsched__io_all; io; io = io->next) fsched__io_cancel(io, fd);
    }
    fsched__spin_unlock(&fsched__io_all_lock);
    if (own)
        return FSCHED__REFUSE(NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "fd %d is a scheduler's own", fd);
    FSCHED__POINT(FD_CLOSE);
    rc = close(fd);
    err = errno;
    FSCHED__POINT(FD_CLOSED);
    fsched__fd_closing_end(&entry);
    if (rc == 0) return FSCHED_OK;
    errno = err;
    return err == EBADF ? FSCHED__REFUSE(NULL, FSCHED_ERR_INVALID_ARGUMENT,
                                         "fd %d is not open", fd)
                        : FSCHED_ERR_SYSTEM;
#else
    (void)fd;
    return FSCHED__REFUSE(NULL, FSCHED_ERR_UNSUPPORTED, "no file descriptors here");
#endif
}

/* ===================================================================================== */
/*  algorithms: spawn, join, parallel for and reduce                                     */
/* ===================================================================================== */

/* ---- spawn ----------------------------------------------------------------------- */

/* A task's own copy of its argument (fsched_spawn_copy): the bytes, and the code that
   makes the copy, which only that call passes, so that a program that never copies does
   not link it. */
typedef struct fsched__arg_copy {
    const void *data;
    size_t size;
    int (*make)(fsched_sched *s, fsched__task *t, const struct fsched__arg_copy *c);
} fsched__arg_copy;

/* t's argument made a copy of c's bytes: in the record when they fit, else on the heap
   (never from an interrupt handler, which must not allocate). 0: out of memory. */
static int fsched__task_copy(fsched_sched *s, fsched__task *t, const fsched__arg_copy *c) {
    if (c->size <= sizeof t->data) {
        memcpy(t->data, c->data, c->size);
        t->arg = t->data;
        return 1;
    }
    t->copy = fsched__in_interrupt() ? NULL : fsched__alloc(&s->allocator, c->size, 16);
    if (!t->copy) {
        if (FSCHED__DEBUG && fsched__in_interrupt())
            fsched__log(&s->logger, FSCHED_LOG_ERROR,
                        "fsched_spawn_copy: %lu bytes from an interrupt handler (at most %d)",
                        (unsigned long)c->size, FSCHED_TASK_INLINE_BYTES);
        return 0;
    }
    t->copy_size = c->size;
    memcpy(t->copy, c->data, c->size);
    t->arg = t->copy;
    return 1;
}

/* Spawns fn(arg), or fn on a copy of `copy`'s bytes when it is not NULL. */
static fsched_result fsched__spawn(fsched_sched *s, fsched_wait_group *wg, void (*fn)(void *),
                                   void *arg, const fsched__arg_copy *copy, const char *name) {
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    fsched__job *job;
    fsched__task *t;
    fsched_result r;
    int queued_here;
    /* a NULL s first: gcc -O3 otherwise finds a path where it reaches the code below */
    if (!s) return fsched__sched_open(s, 0, "fsched_spawn");
    if (!w || w->sched != s) { /* from outside s: hold it while touching it */
        w = NULL;
        if ((r = fsched__sched_enter(s, 0, "fsched_spawn")) != FSCHED_OK) return r;
    }
    /* bad arguments first, whatever the state of s */
    if (!fn || (copy && copy->size && !copy->data)) {
        r = FSCHED__MISUSE(&s->logger, FSCHED_ERR_INVALID_ARGUMENT,
                           "fsched_spawn: %s is NULL", fn ? "data (with a size)" : "fn");
        goto out;
    }
    if (!w && (r = fsched__sched_refuse_closing(s, "fsched_spawn")) != FSCHED_OK) goto out;
    t = w ? fsched__task_alloc(w) : fsched__task_alloc_outside(s);
    r = FSCHED_ERR_OUT_OF_MEMORY;
    if (!t) goto out;
    t->job.execute = fsched__task_execute;
    t->fn = fn;
    t->name = name;
    t->wait_group = wg;
    t->leased = 0;
    t->copy = NULL;
    t->copy_size = 0;
    t->arg = arg;
    if (copy && copy->size && !copy->make(s, t, copy)) {
        fsched__task_free(s, w, t);
        goto out;
    }
    /* a task of a worker thread, whose loop serves its ring; not one of a bound thread
       (which returns to its own code, which may block in the OS or compute for long, as
       any thread's), nor a worker's hook; without threads every slot is bound */
    queued_here = FSCHED__THREADS && wg && w && !FSCHED__BOUND(w) &&
                  FSCHED__THREAD_NOW.current != w->root;
    if (wg && (r = fsched__group_count(wg, queued_here ? w : NULL, t)) != FSCHED_OK) {
        /* the count is full */
        fsched__task_free(s, w, t);
        goto out;
    }
    /* relaxed: a hint for a waiter that no thread would run these tasks; cleared by a
       spawn into a scheduler with workers, so that a group used before in a
       single-threaded one is not refused for it (on the line the count is on) */
    if (wg) FSCHED__STORE(&wg->single, FSCHED__N_THREADS(s) ? NULL : s, FSCHED__RELAXED);
    if (!w && FSCHED__DEBUG && fsched__sched_unattended(s)) fsched__say_unattended(s);
    job = &t->job;
    r = FSCHED_OK;
    if (w) {
        /* release: fsched_destroy reads the counts of spawns and completions */
        FSCHED__STORE_THREADS(&w->spawned, w->spawned + 1, FSCHED__RELEASE);
        /* A group's task is queued as a join's second half: the spawner's wait runs it
           unless a thief asked (the deque shares at once when none of its work is
           public), and it costs no fence. A detached task is published at once: the
           spawner may compute for long before it next calls the scheduler, and nothing
           else would run it meanwhile. */
        if (queued_here) {
            if (fsched__push_job(w, job)) return FSCHED_OK;
            fsched__task_leaving(job); /* out of memory: to the injector, which never fails */
        }
        fsched__publish(w, &job, 1);
        return FSCHED_OK;
    }
    /* relaxed: fsched_destroy reads it after the release of this call's hold */
    FSCHED__FETCH_ADD(&s->external_begun, (fsched__work_count)1, FSCHED__RELAXED);
    fsched__injector_push(&s->injector, &job, 1);
    fsched__new_jobs(s, 1);
out:
    if (!w) fsched__sched_release(s);
    return r;
}

FIBERSCHED_API fsched_result fsched_spawn(fsched_sched *s, void (*fn)(void *arg), void *arg) {
    return fsched__spawn(s, NULL, fn, arg, NULL, NULL);
}

FIBERSCHED_API fsched_result fsched_spawn_copy(fsched_sched *s, void (*fn)(void *data),
                                               const void *data, size_t size) {
    fsched__arg_copy copy;
    copy.data = data;
    copy.size = size;
    copy.make = fsched__task_copy;
    return fsched__spawn(s, NULL, fn, NULL, &copy, NULL);
}

FIBERSCHED_API fsched_result fsched_spawn_named(fsched_sched *s, void (*fn)(void *arg), void *arg,
                                                const char *name) {
    return fsched__spawn(s, NULL, fn, arg, NULL, name);
}

FIBERSCHED_API fsched_result fsched_wait_group_spawn(fsched_wait_group *wg, fsched_sched *s,
                                                     void (*fn)(void *arg), void *arg) {
    FSCHED__CHECK_LIVE(wg);
    return fsched__spawn(s, wg, fn, arg, NULL, NULL);
}

FIBERSCHED_API fsched_result fsched_wait_group_spawn_named(fsched_wait_group *wg, fsched_sched *s,
                                                           void (*fn)(void *arg), void *arg,
                                                           const char *name) {
    FSCHED__CHECK_LIVE(wg);
    return fsched__spawn(s, wg, fn, arg, NULL, name);
}

/* ---- calls from outside every scheduler ----
   A fork-join call (join, a parallel loop, a spawn/sync tree, a linear pipeline) runs on a
   slot of a scheduler: it queues its halves on the slot's deque and waits for those that
   others took on a fiber. Made from a thread that works for no scheduler, it runs instead
   as one task of the default scheduler, and the thread blocks until that task has returned:
   a worker takes the task (woken if all slept), and the task's end wakes the caller. The
   thread does not take a slot to help: a slot also runs other threads' work, and a fiber of
   that work which blocked there could resume only on this thread, which would have to wait
   for it before returning. Nor does it spin before it blocks: that saves its wake only
   where a processor is free for it, and where none is, it holds the one the task's worker
   needs (bench_wake, on a loaded machine). Without worker threads (FIBERSCHED_NO_THREADS,
   or a single-threaded default) nothing else would run the task: the thread binds to the
   default for the call and runs it itself. */

typedef struct fsched__outside_call {
    fsched_result (*call)(void *arg); /* the fork-join call, made again on a slot */
    void *arg;
    fsched_result result;
} fsched__outside_call;

static void fsched__outside_task(void *p) {
    fsched__outside_call *c = (fsched__outside_call *)p;
    c->result = c->call(c->arg);
}

/* Whether the calling thread may wait for a call from outside: not from an interrupt
   handler, a worker's start or stop hook or a poll hook, which must not wait. */
static fsched_result fsched__outside_refused(const char *what) {
    const char *where = fsched__in_interrupt()              ? "an interrupt handler"
                        : FSCHED__THREAD_NOW.in_worker_hook ? "a worker's start or stop hook"
                        : FSCHED__THREAD_NOW.in_hook        ? "a poll hook"
                                                            : NULL;
    if (!where) return FSCHED_OK;
    return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE,
                          "%s: called from %s, which must not wait", what, where);
}

/* The single-threaded default: the calling thread takes part for the call, once a bound
   slot is free (the desc sets how many: more callers at once than slots take turns). */
static fsched_result fsched__call_bound(fsched_sched *s, fsched__outside_call *c) {
    fsched_result r = fsched__bind_open(s, 1);
    if (r != FSCHED_OK) return r;
    fsched__outside_task(c);
    return fsched_unbind();
}

/* Runs call(arg), a fork-join call made from a thread outside every scheduler, on the
   default scheduler (made now if there is none), and returns what it returned, or why it
   could not run. The calling thread blocks meanwhile. */
static FSCHED__NOINLINE fsched_result fsched__call_outside(fsched_result (*call)(void *arg),
                                                          void *arg, const char *what) {
    fsched__outside_call c;
    fsched_wait_group wg;
    fsched_sched *s;
    fsched_result r = fsched__outside_refused(what);
    if (r != FSCHED_OK || (r = fsched__default_enter(&s, what)) != FSCHED_OK) return r;
    c.call = call;
    c.arg = arg;
    c.result = FSCHED_OK;
    if (!FSCHED__N_THREADS(s)) {
        fsched__sched_release(s); /* binding enters s anew */
        r = fsched__call_bound(s, &c);
    } else {
        fsched_wait_group_init(&wg);
        r = fsched__spawn(s, &wg, fsched__outside_task, &c, NULL, what);
        fsched__sched_release(s);
        if (r == FSCHED_OK) r = fsched_wait_group_wait(&wg);
        fsched_wait_group_destroy(&wg);
    }
    fsched__default_leave();
    return r != FSCHED_OK ? r : c.result;
}

/* ---- join ------------------------------------------------------------------------ */

/* The second half of a join is a fsched__join_job on the joiner's stack (declared with
   fsched_join's inline path); `owner` names the ring of the joiner's worker. */
static fsched__worker *fsched__ring_worker(fsched__ring *r) {
    return (fsched__worker *)(void *)((char *)r - offsetof(fsched__worker, deque.ring));
}

/* Runs the second half as a job of its own (another worker took it, or the worker's loop
   runs it while the joiner waits), named by `code`: the user's function it runs. */
static void fsched__join_run(fsched__join_job *j, uintptr_t code) {
    fsched__worker *owner = fsched__ring_worker(j->owner); /* after the latch, j may be gone */
    fsched_fiber *f = fsched__tls_thread.current;
    fsched__running outer = fsched__running_begin(f, code, NULL);
    uintptr_t waiting;
    FSCHED__TRACE(uint64_t trace_begin = fsched__trace_now();)
    j->fn(j->arg);
    fsched__running_end(f, outer);
    FSCHED__TRACE(fsched__trace_record(FSCHED__TRACE_JOIN, trace_begin, code, NULL, 0);)
    FSCHED__POINT(JOIN);
    /* acq_rel: releases fn's effects to the joiner, acquires the fiber it left there */
    waiting = FSCHED__EXCHANGE(&j->latch, (uintptr_t)1, FSCHED__ACQ_REL);
    if (waiting > 1) fsched__make_ready(owner, (fsched_fiber *)waiting);
}

FIBERSCHED_API void fsched__join_execute(fsched__job *job, fsched__worker *w) {
    fsched__join_job *j = (fsched__join_job *)job;
    (void)w;
    fsched__join_run(j, FSCHED__CODE(j->fn));
}

/* The waiting side of a latch set by another worker (0 pending, 1 set, else the fiber
   waiting for it): suspends until it is set. Used by a join whose second half, and a sync
   whose frame, another worker took. It runs no other job on this fiber meanwhile: one that
   blocked here would hold the waiter's continuation beneath it, and with it whatever that
   continuation would release (and chains of such nesting grow the stack without bound).
   The worker's loop runs them, each on a fiber of its own. */
static void fsched__latch_wait(fsched__worker *w, uintptr_t *latch) {
    fsched_fiber *next;
    uintptr_t expected = 0;
    fsched__nest nest = {NULL, NULL, latch};
    for (;;) {
        /* acquire: pairs with the setter's exchange (set: 1, or for a frame whose child
           threw, FSCHED__FRAME_THREW: odd, where a fiber's address is even) */
        if (FSCHED__LOAD(latch, FSCHED__ACQUIRE) & 1u) return;
        next = fsched__suspend_prepare(w);
        if (next) break;
        if (fsched__run_inline(w, &nest) <= 0) /* no fiber to switch to (out of memory): help */
            fsched__cpu_relax();
    }
    FSCHED__POINT(JOIN);
    /* acq_rel: publishes the fiber to the setter, or sees that it finished */
    if (FSCHED__CAS(latch, &expected, (uintptr_t)FSCHED__THREAD_NOW.current, FSCHED__ACQ_REL,
                    FSCHED__ACQUIRE))
        fsched__suspend(w, next, "join", latch);
    else
        fsched__suspend_cancel(w, next); /* finished meanwhile */
}

/* After a, when b was not the newest job: b runs here if it is still queued, that is, if
   it is the newest job after all (it was shared to the public part, and thieves take the
   oldest). Else another worker took it, or jobs queued after it (tasks a spawned, jobs of
   fibers that ran while a was suspended) are above it, and the caller waits for its latch:
   the worker's loop runs those jobs, and b, on other fibers (see fsched__latch_wait). */
static void fsched__join_finish(fsched__worker *w, fsched__join_job *j) {
    /* owner: b is the newest, so a pop returns b, or nothing if a thief took it meanwhile */
    if (fsched__deque_peek(&w->deque) == &j->job && fsched__pop_job(w) == &j->job) {
        j->fn(j->arg);
        return;
    }
    fsched__latch_wait(w, &j->latch);
}

/* The end of a join whose second half was not the newest job when a returned (the
   inline path's, kept out of line). */
FIBERSCHED_API FSCHED__NOINLINE void fsched__join_rest(fsched__join_job *j) {
    fsched__join_finish(fsched__ring_worker(j->owner), j);
}

/* Whether a fork-join call (join, a parallel loop, a spawn/sync tree) may run on w, the
   caller's slot (a call from outside every scheduler goes to fsched__call_outside first):
   not from a poll hook, which must not wait (for a half, a chunk or a child that another
   worker took: the hook would hold its lock, and its thread's mark, while its fiber is
   suspended). */
static fsched_result fsched__join_check(fsched__worker *w, int null_function, const char *what) {
    if (null_function)
        return FSCHED__MISUSE(w ? &w->sched->logger : NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "%s: NULL function", what);
    if (FSCHED__THREAD_NOW.in_hook)
        return FSCHED__MISUSE(&w->sched->logger, FSCHED_ERR_WRONG_STATE,
                              "%s: called from a poll hook, which must not wait", what);
    return FSCHED_OK;
}

/* A fork-join call from a bound thread's own code (not from a task the thread runs)
   holds the thread on its slot until it returns: its records on the thread's stack are
   queued there, and their ends are waited for there, so fsched_unbind and fsched_destroy
   are refused meanwhile. Whether it counted the call, for fsched__own_call_end. */
static int fsched__own_call_begin(fsched__worker *w) {
    if (!FSCHED__BOUND(w) || !fsched__in_own_code(&FSCHED__THREAD_NOW)) return 0;
    w->own_calls++;
    return 1;
}

static void fsched__own_call_end(fsched__worker *w, int counted) {
    w->own_calls -= (uint32_t)counted;
}

/* fsched_join from anywhere but a task or bound thread, or with bad arguments: kept out
   of line, so that fsched_join's own path stays short. */
typedef struct fsched__join_args {
    void (*a)(void *);
    void *arg_a;
    void (*b)(void *);
    void *arg_b;
} fsched__join_args;

static fsched_result fsched__join_again(void *p) {
    const fsched__join_args *j = (const fsched__join_args *)p;
    return fsched_join(j->a, j->arg_a, j->b, j->arg_b);
}

static FSCHED__NOINLINE fsched_result fsched__join_elsewhere(void (*a)(void *), void *arg_a,
                                                            void (*b)(void *), void *arg_b) {
    fsched__join_args j;
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    if (!a || !b || w) return fsched__join_check(w, !a || !b, "fsched_join"); /* a hook */
    j.a = a;
    j.arg_a = arg_a;
    j.b = b;
    j.arg_b = arg_b;
    return fsched__call_outside(fsched__join_again, &j, "fsched_join");
}

/* The rest of a join when its job could not simply go to the ring (full, or a share
   is due): kept out of line, so that fsched_join's own path stays short. */
static FSCHED__NOINLINE void fsched__join_queue_slow(fsched__worker *w, fsched__join_job *j,
                                                     void (*a)(void *), void *arg_a) {
    if (!fsched__push_job(w, &j->job)) { /* out of memory: in sequence */
        a(arg_a);
        j->fn(j->arg);
        return;
    }
    a(arg_a);
    if (fsched__deque_pop_if_newest(&w->deque, &j->job)) j->fn(j->arg);
    else fsched__join_finish(w, j);
}

/* fsched_join on w, the calling thread's slot. After a, everything is read from j:
   nested joins each keep only j on the stack, and no register across the call. */
static FSCHED__ALWAYS_INLINE void fsched__join_on(fsched__worker *w, void (*a)(void *),
                                                  void *arg_a, void (*b)(void *), void *arg_b) {
    fsched__deque *d = &w->deque;
    fsched__join_job j;
    j.job.execute = fsched__join_execute;
    j.fn = b;
    j.arg = arg_b;
    j.owner = &d->ring;
    j.latch = 0;
    if (FSCHED__UNLIKELY(d->ring.tail - d->ring.head == FSCHED__RING_SIZE ||
                         fsched__deque_requested(d))) {
        fsched__join_queue_slow(w, &j, a, arg_a);
        return;
    }
    d->ring.slot[d->ring.tail++ % FSCHED__RING_SIZE] = &j.job; /* fsched__push_job's common case */
    a(arg_a);
    if (FSCHED__LIKELY(fsched__deque_pop_if_newest(&fsched__ring_worker(j.owner)->deque, &j.job)))
        j.fn(j.arg); /* nobody took it */
    else
        fsched__join_rest(&j);
}

/* fsched_join as a call (the inline path's fallback, and the whole of it for bound
   threads and where there is none). */
FIBERSCHED_API fsched_result(fsched_join)(void (*a)(void *arg), void *arg_a,
                                          void (*b)(void *arg), void *arg_b) {
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    fsched_fiber *pinned;
    int counted;
    if (FSCHED__UNLIKELY(!w || FSCHED__THREAD_NOW.in_hook || !a || !b))
        return fsched__join_elsewhere(a, arg_a, b, arg_b);
    counted = fsched__own_call_begin(w); /* a bound thread's, which has no inline path */
    pinned = fsched__pin(); /* b waits on w's deque */
    fsched__join_on(w, a, arg_a, b, arg_b);
    fsched__unpin(pinned);
    if (FSCHED__UNLIKELY(counted)) fsched__own_call_end(w, counted);
    return FSCHED_OK;
}

/* ---- spawn and sync: frame stacks ----
   A frame stack is an array of frames owned by one task tree (FSCHED_RUN, or a frame
   another worker took) on one fiber at a time. Frames from `split` up are the owner's
   own: a spawn writes one at the head and a sync takes it back, touching nothing shared
   (the head travels as a hidden argument, in a register). Frames in [tail, split) are
   offered: `shared` packs both indices in one word that thieves claim frames from by
   compare-and-swap (tail + 1), and that the owner moves split in only by compare-and-swap
   too, so that every decision about an offered frame is one read-modify-write of one
   word. The owner offers frames when a thief asked (`asked`, read at every spawn), at
   the first spawn of a tree, and when its fiber blocks (every frame it holds, so that a
   child the blocked code waits for is never stranded); a sync below split takes its
   frame back unless it was claimed, and then waits for it as a join does.

   A slot makes stacks as its trees need them, without limit: a tree that blocks keeps
   its stack, trees that start meanwhile take others. Thieves look only at the stacks
   marked in the slot's set (fsched__frames_group) as offering: the owner marks a stack
   when it offers, a thief unmarks one it finds with nothing on offer. A stack lives as
   long as its slot (thieves may read it at any time); a free one beyond the first
   FSCHED__FRAMES_KEEP gives its pages back (thieves read nothing but the word of a stack
   that offers nothing). Frames come from mappings shared by stacks made one after the
   other (1, 1, 2, 4... of them, up to FSCHED__FRAMES_FANOUT), so that many thousand
   stacks take few of the system's memory mappings (Linux allows 65530 by default). */
#define FSCHED__FRAMES_TAIL(v) ((uint32_t)(v))
#define FSCHED__FRAMES_SPLIT(v) ((uint32_t)((v) >> 32))
#define FSCHED__FRAMES_PACK(tail, split) ((uint64_t)(tail) | (uint64_t)(split) << 32)
#define FSCHED__FRAMES_OFFERS(v) (FSCHED__FRAMES_TAIL(v) < FSCHED__FRAMES_SPLIT(v))
#define FSCHED__FRAMES_KEEP 32u /* free stacks of a slot that keep their pages */

/* Frames per stack: one per 8 bytes of the scheduler's fiber stacks, where pages are
   reserved and touched only as deep as used (a task tree cannot nest deeper than its
   stack anyway, unless it spawns many children before syncing them); fewer from a heap. */
static size_t fsched__frames_capacity(const fsched_sched *s) {
    size_t stack = s->stacks ? s->stacks->params.stack_size : FIBERSCHED_DEFAULT_STACK_SIZE;
#if defined(FSCHED__HAVE_PAGES)
    size_t n = stack / 8;
#else
    size_t n = stack / 64;
#endif
    if (n < 64) n = 64;
    if (n > ((size_t)1 << 24)) n = (size_t)1 << 24;
    return n;
}

/* The index of the lowest bit set in x (not 0). */
static inline uint32_t fsched__lowest_bit(uintptr_t x) {
    return sizeof x > sizeof(unsigned long) ? (uint32_t)__builtin_ctzll((unsigned long long)x)
                                            : (uint32_t)__builtin_ctzl((unsigned long)x);
}

/* ---- the memory of frames -------------------------------------------------------- */

#if defined(FSCHED__HAVE_PAGES)
/* The bytes of a stack of n frames: whole pages, so that a free stack gives its pages back
   (fsched__frames_memory_discard) without touching the next stack of its mapping. */
static size_t fsched__frames_bytes(size_t n) {
    return fsched__round_up(n * sizeof(fsched_frame), fsched__page_size());
}

/* Owner: frames for fs, carved from the slot's newest mapping, or from a new one: as many
   stacks as the slot made so far (up to the fanout, and 1 GiB), 1 if that fails. */
static int fsched__frames_memory(fsched__worker *w, fsched_frames *fs) {
    if (!w->frames_region_left) {
        size_t most = ((size_t)1 << (sizeof(size_t) > 4 ? 30 : 26)) / fs->bytes;
        uint32_t n = w->frames_count < FSCHED__FRAMES_FANOUT ? w->frames_count
                                                             : FSCHED__FRAMES_FANOUT;
        int guard_failed;
        if (n > most) n = (uint32_t)most;
        if (!n) n = 1;
        w->frames_region = (unsigned char *)fsched__pages_map(n * fs->bytes, 0, &guard_failed);
        if (!w->frames_region && n > 1) {
            n = 1;
            w->frames_region = (unsigned char *)fsched__pages_map(fs->bytes, 0, &guard_failed);
        }
        if (!w->frames_region) return 0;
        w->frames_region_left = n;
        fs->mapped = n * fs->bytes;
    }
    fs->base = (fsched_frame *)(void *)w->frames_region;
    w->frames_region += fs->bytes;
    w->frames_region_left--;
    return 1;
}

static void fsched__frames_memory_free(fsched_sched *s, fsched_frames *fs) {
    (void)s;
    if (fs->mapped) fsched__pages_unmap(fs->base, fs->mapped);
}

static void fsched__frames_memory_discard(fsched_frames *fs) {
    fsched__pages_discard(fs->base, fs->bytes);
}
#else
static size_t fsched__frames_bytes(size_t n) { return n * sizeof(fsched_frame); }

static int fsched__frames_memory(fsched__worker *w, fsched_frames *fs) {
    fs->base = (fsched_frame *)fsched__alloc(&w->sched->allocator, fs->bytes, 16);
    if (!fs->base) return 0;
    memset(fs->base, 0, fs->bytes); /* free frames have no function */
    fs->mapped = fs->bytes;
    return 1;
}

static void fsched__frames_memory_free(fsched_sched *s, fsched_frames *fs) {
    fsched__free(&s->allocator, fs->base, fs->mapped, 16);
}

static void fsched__frames_memory_discard(fsched_frames *fs) { (void)fs; }
#endif

/* ---- the set of a slot's stacks -------------------------------------------------- */

/* Marks fs as offering frames: its bit in its chunk, then the chunk's in its group. A
   thief that unmarks checks again after (fsched__frames_unmark). All seq_cst: either
   that check sees the offer, or this load of the bit comes after the unmarking (in the
   single total order) and sets the bit again. */
static void fsched__frames_mark(fsched_frames *fs) {
    fsched__frames_chunk *c = (fsched__frames_chunk *)fs->chunk;
    fsched__frames_group *g = c->group;
    if (!(FSCHED__LOAD(&c->offers, FSCHED__SEQ_CST) & fs->bit))
        FSCHED__FETCH_OR(&c->offers, fs->bit, FSCHED__SEQ_CST);
    if (!(FSCHED__LOAD(&g->offers, FSCHED__SEQ_CST) & c->bit))
        FSCHED__FETCH_OR(&g->offers, c->bit, FSCHED__SEQ_CST);
}

/* Thief: fs, marked, was seen offering nothing: unmarks it, then checks again (seq_cst,
   see fsched__frames_mark). Returns 1 when it offers frames after all: marked again and
   announced, as its owner did (a worker that looked meanwhile may have gone to sleep). */
static int fsched__frames_unmark(fsched_frames *fs) {
    fsched__frames_chunk *c = (fsched__frames_chunk *)fs->chunk;
    FSCHED__POINT(UNMARK);
    FSCHED__FETCH_AND(&c->offers, ~fs->bit, FSCHED__SEQ_CST);
    if (!FSCHED__FRAMES_OFFERS(FSCHED__LOAD(&fs->shared, FSCHED__SEQ_CST))) return 0;
    fsched__frames_mark(fs);
    fsched__new_jobs(((fsched__worker *)fs->worker)->sched, 1);
    return 1;
}

/* Thief: the same for chunk c of a slot of s, seen with no stack marked. */
static void fsched__frames_unmark_chunk(fsched_sched *s, fsched__frames_chunk *c) {
    fsched__frames_group *g = c->group;
    FSCHED__FETCH_AND(&g->offers, ~c->bit, FSCHED__SEQ_CST);
    if (!FSCHED__LOAD(&c->offers, FSCHED__SEQ_CST)) return;
    FSCHED__FETCH_OR(&g->offers, c->bit, FSCHED__SEQ_CST);
    fsched__new_jobs(s, 1);
}

/* Owner: the chunk that names the next stack; a new one (and a new group, for the first
   chunk of one) when the stack is the first of its chunk. NULL: out of memory. */
static fsched__frames_chunk *fsched__frames_chunk_next(fsched__worker *w) {
    fsched_sched *s = w->sched;
    uint32_t k = w->frames_count / FSCHED__FRAMES_FANOUT, j = k % FSCHED__FRAMES_FANOUT;
    fsched__frames_chunk *c;
    fsched__frames_group *g;
    if (k < w->frames_chunks) return w->frames_last->chunks[j]; /* the newest chunk */
    if (!(c = (fsched__frames_chunk *)fsched__alloc(&s->allocator, sizeof *c, sizeof(void *))))
        return NULL;
    memset(c, 0, sizeof *c);
    if (!j) {
        if (!(g = (fsched__frames_group *)fsched__alloc(&s->allocator, sizeof *g,
                                                          sizeof(void *)))) {
            fsched__free(&s->allocator, c, sizeof *c, sizeof(void *));
            return NULL;
        }
        memset(g, 0, sizeof *g);
        /* release: a thief that finds the group sees it set up */
        if (w->frames_last) FSCHED__STORE(&w->frames_last->next, g, FSCHED__RELEASE);
        else FSCHED__STORE(&w->frames_groups, g, FSCHED__RELEASE);
        w->frames_last = g;
    }
    c->group = w->frames_last;
    c->bit = (uintptr_t)1 << j;
    w->frames_last->chunks[j] = c; /* thieves read it after its bit is set: later */
    w->frames_chunks++;
    return c;
}

static void fsched__frames_free(fsched_sched *s, fsched_frames *fs) {
    fsched__frames_memory_free(s, fs);
    fsched__free(&s->allocator, fs, sizeof *fs, 64);
}

/* What the scheduling loop reaches through fsched__frames_linked, set by the first stack */
static fsched__job *fsched__frames_claim(fsched__worker *w, fsched__worker *v);
static void fsched__frames_offer_held(fsched_fiber *f);
static int fsched__frames_visible(fsched__worker *v);
static void fsched__frames_destroy(fsched__worker *w);
static const fsched__frames_code fsched__frames_code_here = {
    fsched__frames_claim, fsched__frames_offer_held, fsched__frames_visible,
    fsched__frames_destroy};
static void fsched__frame_job_execute(fsched__job *job, fsched__worker *w);

/* Owner: a new frame stack of w, named in w's set (where thieves find it). NULL: out of
   memory. */
static fsched_frames *fsched__frames_new(fsched__worker *w) {
    fsched_sched *s = w->sched;
    size_t n = fsched__frames_capacity(s);
    uint32_t i = w->frames_count % FSCHED__FRAMES_FANOUT;
    fsched__frames_chunk *c;
    fsched_frames *fs;
    /* relaxed: see fsched__frames_used; before the first set of stacks is published */
    if (!fsched__frames_used())
        FSCHED__STORE(&fsched__frames_linked, &fsched__frames_code_here, FSCHED__RELAXED);
    c = fsched__frames_chunk_next(w);
    if (!c || !(fs = (fsched_frames *)fsched__alloc(&s->allocator, sizeof *fs, 64))) return NULL;
    memset(fs, 0, sizeof *fs);
    fs->bytes = fsched__frames_bytes(n);
    if (!fsched__frames_memory(w, fs)) {
        fsched__free(&s->allocator, fs, sizeof *fs, 64);
        return NULL;
    }
    fs->end = fs->base + fs->bytes / sizeof(fsched_frame);
    fs->split = fs->base;
    fs->worker = w;
    fs->chunk = c;
    fs->bit = (uintptr_t)1 << i;
    c->stacks[i] = fs; /* thieves read it after its bit is set: at its first offer */
    /* relaxed: others read it only as a count (tests, debuggers) */
    FSCHED__STORE(&w->frames_count, w->frames_count + 1, FSCHED__RELAXED);
    w->frame_job.execute = fsched__frame_job_execute;
    return fs;
}

/* ---- owning stacks --------------------------------------------------------------- */

/* Owner: fs, which no tree holds, joins the free stacks. Beyond the first
   FSCHED__FRAMES_KEEP it gives its pages back: it offers nothing, so no thief reads its
   frames, and the next tree finds them zeroed, or as they were (all free). */
static void fsched__frames_push(fsched__worker *w, fsched_frames *fs) {
    if (w->frames_kept < FSCHED__FRAMES_KEEP) {
        fs->outer = w->frames_free;
        w->frames_free = fs;
        w->frames_kept++;
        return;
    }
    fsched__frames_memory_discard(fs);
    fs->outer = w->frames_bare;
    w->frames_bare = fs;
}

/* Owner: a free stack (one that kept its pages first), or NULL. */
static fsched_frames *fsched__frames_pop(fsched__worker *w) {
    fsched_frames *fs = w->frames_free;
    if (fs) {
        w->frames_free = fs->outer;
        w->frames_kept--;
    } else if ((fs = w->frames_bare) != NULL) {
        w->frames_bare = fs->outer;
    }
    return fs;
}

/* Owner: makes sure a free stack is at hand for a frame this worker takes. */
static int fsched__frames_ready(fsched__worker *w) {
    fsched_frames *fs;
    if (w->frames_free || w->frames_bare) return 1;
    if (!(fs = fsched__frames_new(w))) return 0;
    fsched__frames_push(w, fs);
    return 1;
}

/* Owner: fiber f's tree takes fs, the innermost stack f holds. */
static void fsched__frames_hold(fsched__worker *w, fsched_frames *fs, fsched_fiber *f) {
    fs->split = fs->base;
    fs->fiber = f;
    fs->outer = f->frames;
    f->frames = fs;
    /* relaxed: hints for thieves (whether to ask), and the first spawn offers a frame at
       once, as a new deque does: other workers may be idle */
    FSCHED__STORE(&fs->in_use, 1u, FSCHED__RELAXED);
    FSCHED__STORE(&fs->asked, 1u, FSCHED__RELAXED);
    /* release: a thief that reads the pointer reads the stack (see fsched__frames_ask) */
    FSCHED__STORE(&w->frames_current, fs, FSCHED__RELEASE);
}

/* FSCHED_OK with *out NULL outside every scheduler: the macro then runs the tree through
   fsched__frames_outside. */
FIBERSCHED_API fsched_result fsched__frames_enter(fsched_frames **out) {
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    fsched_frames *fs;
    fsched_result refused;
    *out = NULL;
    if (!w) return fsched__outside_refused("FSCHED_RUN");
    if ((refused = fsched__join_check(w, 0, "FSCHED_RUN")) != FSCHED_OK) return refused;
    if (!(fs = fsched__frames_pop(w)) && !(fs = fsched__frames_new(w)))
        return FSCHED_ERR_OUT_OF_MEMORY;
    /* a tree starts only with another stack at hand, for a frame it offers when it blocks:
       this worker can always run one (the blocked code may wait for it) */
    if (FSCHED__UNLIKELY(!fsched__frames_ready(w))) {
        fsched__frames_push(w, fs);
        return FSCHED_ERR_OUT_OF_MEMORY;
    }
    fsched__frames_hold(w, fs, FSCHED__THREAD_NOW.current);
    (void)fsched__own_call_begin(w); /* fsched__frames_leave ends it (the same test) */
    *out = fs;
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched__frames_outside(fsched_result (*root)(void *call),
                                                    void *call) {
    return fsched__call_outside(root, call, "FSCHED_RUN");
}

FIBERSCHED_API void fsched__frames_leave(fsched_frames *fs) {
    fsched__worker *w = (fsched__worker *)fs->worker;
    fsched__own_call_end(w, FSCHED__BOUND(w) && fsched__in_own_code(&FSCHED__THREAD_NOW));
    ((fsched_fiber *)fs->fiber)->frames = fs->outer;
    FSCHED__STORE(&fs->in_use, 0u, FSCHED__RELAXED); /* relaxed: see fsched__frames_hold */
    /* the fiber's outer tree spawns again (release: as in fsched__frames_hold) */
    if (fs->outer) FSCHED__STORE(&w->frames_current, fs->outer, FSCHED__RELEASE);
    /* every frame was synced: nothing is offered (tail == split), so no thief writes the
       word; relaxed, as thieves read nothing else of a stack with nothing offered */
    FSCHED__STORE(&fs->shared, (uint64_t)0, FSCHED__RELAXED);
    fsched__frames_push(w, fs);
}

/* ---- offering and claiming ------------------------------------------------------- */

/* Owner: offers the n oldest of its own frames. */
static void fsched__frames_offer(fsched_frames *fs, size_t n) {
    fsched__worker *w = (fsched__worker *)fs->worker;
    uint32_t split = (uint32_t)(fs->split - fs->base);
    /* relaxed: a first guess for the CAS, which decides */
    uint64_t cur = FSCHED__LOAD(&fs->shared, FSCHED__RELAXED), want;
    fsched_frame *f;
    for (f = fs->split; f < fs->split + n; f++) f->latch = 0;
    /* seq_cst: against a thief's unmarking (fsched__frames_mark); it releases the frames'
       contents to a thief's acquire of the word; relaxed on failure: a new guess */
    do { /* thieves may move the tail meanwhile; only the owner moves split */
        want = FSCHED__FRAMES_PACK(FSCHED__FRAMES_TAIL(cur), split + (uint32_t)n);
    } while (!FSCHED__CAS(&fs->shared, &cur, want, FSCHED__SEQ_CST, FSCHED__RELAXED));
    fs->split += n;
    fsched__frames_mark(fs);
    fsched__new_jobs(w->sched, (uint32_t)n);
}

FIBERSCHED_API void fsched__frames_share(fsched_frames *fs, fsched_frame *head) {
    size_t own = (size_t)(head - fs->split);
    if (!own) return; /* nothing of its own to offer: the request stays */
    /* cleared first, so that a request made meanwhile survives (relaxed: a hint) */
    FSCHED__STORE(&fs->asked, 0u, FSCHED__RELAXED);
    fsched__frames_offer(fs, (own + 1) / 2);
}

/* Owner: the running fiber blocks; offers every frame of its own in every frame stack it
   holds (the code that blocks may wait for one of them). Its own frames are those from
   split up to the first free one: syncs free the frames they take. */
static void fsched__frames_offer_held(fsched_fiber *f) {
    fsched_frames *fs;
    for (fs = (fsched_frames *)f->frames; fs; fs = fs->outer) {
        fsched_frame *head = fs->split;
        while (head < fs->end && head->run) head++;
        if (head > fs->split) fsched__frames_offer(fs, (size_t)(head - fs->split));
    }
}

FIBERSCHED_API int fsched__frames_reclaim(fsched_frames *fs, fsched_frame *frame) {
    uint32_t at = (uint32_t)(frame - fs->base);
    /* relaxed: a first guess for the CAS, which decides (a claimed frame's result is read
       only after the latch's acquire) */
    uint64_t cur = FSCHED__LOAD(&fs->shared, FSCHED__RELAXED);
    /* every newer frame is synced, so the offered part ends at this one: it is ours again
       unless a thief claimed it (tail past it) */
    FSCHED__POINT(TAKE_LAST);
    while (FSCHED__FRAMES_TAIL(cur) <= at) {
        /* seq_cst: decides the race with thieves; relaxed on failure: a new guess */
        if (FSCHED__CAS(&fs->shared, &cur, FSCHED__FRAMES_PACK(FSCHED__FRAMES_TAIL(cur), at),
                        FSCHED__SEQ_CST, FSCHED__RELAXED)) {
            fs->split = frame;
            return 1;
        }
    }
    /* claimed: wait for the thief, as a join does. Nothing is offered meanwhile (tail ==
       split), so no thief writes the word; afterwards the offered part starts here */
    fsched__latch_wait((fsched__worker *)fs->worker, &frame->latch);
    /* relaxed: as in fsched_frames_leave, with nothing offered */
    FSCHED__STORE(&fs->shared, FSCHED__FRAMES_PACK(at, at), FSCHED__RELAXED);
    fs->split = frame;
    frame->run = NULL;
    return 0;
}

FIBERSCHED_API void fsched__frames_full(fsched_frames *fs) {
    fsched__worker *w = (fsched__worker *)fs->worker;
    fsched__log(&w->sched->logger, FSCHED_LOG_ERROR,
                "FSCHED_SPAWN: %lu frames spawned and not synced in one task tree: the frame "
                "stack is full (its size follows the fiber stack size)",
                (unsigned long)(fs->end - fs->base));
    fsched__fatal("frame stack overflow (reported before)");
}

/* Thief: claims the oldest frame fs offers, if any; sets *no_room when this worker has
   no stack to run one on (out of memory). */
static fsched__job *fsched__frames_claim_from(fsched__worker *w, fsched_frames *fs,
                                              int *no_room) {
    /* acquire: pairs with the owner's CAS in fsched__frames_offer */
    uint64_t cur = FSCHED__LOAD(&fs->shared, FSCHED__ACQUIRE);
    if (!FSCHED__FRAMES_OFFERS(cur)) return NULL;
    if (!fsched__frames_ready(w)) {
        *no_room = 1;
        return NULL;
    }
    FSCHED__POINT(STEAL);
    while (FSCHED__FRAMES_OFFERS(cur)) {
        /* seq_cst: decides the race with other thieves and the owner's reclaim; acquire on
           failure: the next attempt's frames are visible too */
        if (FSCHED__CAS(&fs->shared, &cur, cur + 1, FSCHED__SEQ_CST, FSCHED__ACQUIRE)) {
            w->stolen = fs->base + FSCHED__FRAMES_TAIL(cur);
            w->stolen_from = fs;
            return &w->frame_job;
        }
    }
    return NULL;
}

/* Thief: claims a frame from a stack of chunk c that is marked, unmarking those that offer
   nothing (and c, when none is left marked). */
static fsched__job *fsched__frames_claim_in(fsched__worker *w, fsched__frames_chunk *c,
                                            int *no_room) {
    /* acquire: a stack is named in c before its bit is first set */
    uintptr_t marked = FSCHED__LOAD(&c->offers, FSCHED__ACQUIRE);
    while (marked) {
        fsched_frames *fs = c->stacks[fsched__lowest_bit(marked)];
        fsched__job *job;
        marked &= marked - 1;
        do {
            if ((job = fsched__frames_claim_from(w, fs, no_room)) || *no_room) return job;
        } while (fsched__frames_unmark(fs));
    }
    /* relaxed: a first look; the unmarking checks again */
    if (!FSCHED__LOAD(&c->offers, FSCHED__RELAXED)) fsched__frames_unmark_chunk(w->sched, c);
    return NULL;
}

/* Thief: v offers w nothing: asks the tree v runs (or ran last) to offer some at its next
   spawn. A stack, once made, lives as long as v; the rest is hints (relaxed). */
static void fsched__frames_ask(fsched__worker *v) {
    /* acquire: the stack's fields are set up */
    fsched_frames *fs = FSCHED__LOAD(&v->frames_current, FSCHED__ACQUIRE);
    if (fs && FSCHED__LOAD(&fs->in_use, FSCHED__RELAXED) &&
        !FSCHED__LOAD(&fs->asked, FSCHED__RELAXED) &&
        !FSCHED__FRAMES_OFFERS(FSCHED__LOAD(&fs->shared, FSCHED__RELAXED)))
        FSCHED__STORE(&fs->asked, 1u, FSCHED__RELAXED); /* written only when clear: the
                                                            owner reads it at every spawn */
}

/* Thief: claims the oldest offered frame of one of v's stacks; when there is none, asks v
   to offer some (unless v is the thief's own slot). */
static fsched__job *fsched__frames_claim(fsched__worker *w, fsched__worker *v) {
    fsched__frames_group *g;
    int no_room = 0;
    /* acquire: a group is set up before it is linked */
    for (g = FSCHED__LOAD(&v->frames_groups, FSCHED__ACQUIRE); g;
         g = FSCHED__LOAD(&g->next, FSCHED__ACQUIRE)) {
        /* acquire: a chunk is named in g before its bit is first set */
        uintptr_t marked = FSCHED__LOAD(&g->offers, FSCHED__ACQUIRE);
        while (marked) {
            fsched__frames_chunk *c = g->chunks[fsched__lowest_bit(marked)];
            fsched__job *job;
            marked &= marked - 1;
            if ((job = fsched__frames_claim_in(w, c, &no_room)) || no_room) return job;
        }
    }
    if (v != w) fsched__frames_ask(v);
    return NULL;
}

/* Runs the frame this worker claimed, on a frame stack of its own, and tells the owner. */
static void fsched__frame_job_execute(fsched__job *job, fsched__worker *w) {
    fsched_frame *frame = w->stolen;
    fsched__worker *owner = (fsched__worker *)w->stolen_from->worker;
    fsched_frames *fs = fsched__frames_pop(w); /* there is one: fsched__frames_claim made sure */
    uintptr_t waiting;
    int threw;
    fsched_fiber *f = fsched__tls_thread.current;
    fsched__running outer;
    (void)job;
    w->stolen = NULL;
    w->stolen_from = NULL;
    fsched__frames_hold(w, fs, f);
    FSCHED__TRACE(uint64_t trace_begin = fsched__trace_now();)
    outer = fsched__running_begin(f, FSCHED__CODE(frame->run), NULL);
    threw = frame->run(frame, fs, fs->base);
    fsched__running_end(f, outer);
    FSCHED__TRACE(fsched__trace_record(FSCHED__TRACE_CHILD, trace_begin, FSCHED__CODE(frame->run),
                                       NULL, 0);)
    fsched__frames_leave(fs);
    FSCHED__POINT(JOIN);
    /* acq_rel: releases the result (or the exception) to the owner, acquires the fiber it
       left there; after it the owner may reuse the frame */
    waiting = FSCHED__EXCHANGE(&frame->latch, threw ? (uintptr_t)FSCHED__FRAME_THREW : 1u,
                               FSCHED__ACQ_REL);
    if (waiting > 1) fsched__make_ready(owner, (fsched_fiber *)waiting);
}

/* Whether any slot offers a frame. Seq_cst loads, as in fsched__work_visible: an offer
   marks its stack (seq_cst) before it announces the frames. */
static int fsched__frames_visible(fsched__worker *v) {
    fsched__frames_group *g;
    for (g = FSCHED__LOAD(&v->frames_groups, FSCHED__SEQ_CST); g;
         g = FSCHED__LOAD(&g->next, FSCHED__SEQ_CST)) {
        uintptr_t marked = FSCHED__LOAD(&g->offers, FSCHED__SEQ_CST);
        while (marked) {
            fsched__frames_chunk *c = g->chunks[fsched__lowest_bit(marked)];
            uintptr_t stacks = FSCHED__LOAD(&c->offers, FSCHED__SEQ_CST);
            marked &= marked - 1;
            while (stacks) {
                fsched_frames *fs = c->stacks[fsched__lowest_bit(stacks)];
                stacks &= stacks - 1;
                if (FSCHED__FRAMES_OFFERS(FSCHED__LOAD(&fs->shared, FSCHED__SEQ_CST))) return 1;
            }
        }
    }
    return 0;
}

static void fsched__frames_destroy(fsched__worker *w) {
    /* plain reads: every thread that used the slot has been joined or has left it */
    fsched_sched *s = w->sched;
    fsched__frames_group *g, *next;
    uint32_t j, i;
    for (g = w->frames_groups; g; g = next) {
        next = g->next;
        for (j = 0; j < FSCHED__FRAMES_FANOUT && g->chunks[j]; j++) {
            fsched__frames_chunk *c = g->chunks[j];
            for (i = 0; i < FSCHED__FRAMES_FANOUT && c->stacks[i]; i++)
                fsched__frames_free(s, c->stacks[i]);
            fsched__free(&s->allocator, c, sizeof *c, sizeof(void *));
        }
        fsched__free(&s->allocator, g, sizeof *g, sizeof(void *));
    }
    w->frames_groups = w->frames_last = NULL;
    w->frames_count = w->frames_chunks = w->frames_kept = 0;
    w->frames_free = w->frames_bare = w->frames_current = NULL;
    w->frames_region = NULL;
    w->frames_region_left = 0;
}

/* ---- parallel for and reduce: binary splitting, adaptive ----
   A range is split while it is longer than the grain and the splitter allows: it starts
   with one split per worker (halved at each level) and is reset when a half is stolen, so
   ranges split further only where other workers are taking work. */

typedef struct fsched__range {
    void (*body)(void *ctx, size_t lo, size_t hi);
    void (*rbody)(void *ctx, size_t lo, size_t hi, void *acc);
    void (*init)(void *ctx, void *acc);
    void (*combine)(void *ctx, void *acc, const void *other);
    void *ctx;
    size_t grain, size;
    uint32_t threads;
    fsched_allocator allocator;
} fsched__range;

typedef struct fsched__range_part {
    const fsched__range *r;
    size_t lo, hi;
    uint32_t splits;
    fsched__worker *origin; /* where the part was queued: another worker means stolen */
    void *acc;
} fsched__range_part;

static int fsched__split_more(uint32_t *splits, int stolen, uint32_t threads) {
    if (stolen) {
        *splits = *splits / 2 > threads ? *splits / 2 : threads;
        return 1;
    }
    if (*splits == 0) return 0;
    *splits /= 2;
    return 1;
}

static void fsched__range_run(fsched__range_part *p, int stolen);

static uintptr_t fsched__range_code(const fsched__range *r) {
    return r->rbody ? FSCHED__CODE(r->rbody) : FSCHED__CODE(r->body);
}

/* The right half, named by the loop's body wherever it runs (an overflow report then
   names the body, also when the piece runs inline on the loop's own fiber). */
static void fsched__range_right(void *arg) {
    fsched__range_part *p = (fsched__range_part *)arg;
    fsched_fiber *f = FSCHED__THREAD_NOW.current;
    fsched__running outer = fsched__running_begin(f, fsched__range_code(p->r), NULL);
    fsched__range_run(p, FSCHED__THREAD_NOW.worker != p->origin);
    fsched__running_end(f, outer);
}

/* The right half as a job of its own: a join's second half named by the loop's body
   (for the trace and gdb), not by fsched__range_right. */
static void fsched__range_execute(fsched__job *job, fsched__worker *w) {
    fsched__join_job *j = (fsched__join_job *)job;
    (void)w;
    fsched__join_run(j, fsched__range_code(((const fsched__range_part *)j->arg)->r));
}

#define FSCHED__ACC_INLINE 256u

static void fsched__range_run(fsched__range_part *p, int stolen) {
    const fsched__range *r = p->r;
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    while (p->hi - p->lo > r->grain && fsched__split_more(&p->splits, stolen, r->threads)) {
        size_t mid = p->lo + (p->hi - p->lo) / 2;
        fsched__range_part right;
        fsched__join_job j;
        int queued;
        __attribute__((aligned(16))) unsigned char local[FSCHED__ACC_INLINE];
        right = *p;
        right.lo = mid;
        right.origin = w;
        right.acc = NULL;
        if (r->rbody) { /* the right half folds into its own accumulator */
            right.acc = r->size <= sizeof local ? (void *)local
                                                : fsched__alloc(&r->allocator, r->size, 16);
            if (!right.acc) break; /* no memory for a split: fold the whole range here */
            r->init(r->ctx, right.acc);
        }
        j.job.execute = fsched__range_execute;
        j.fn = fsched__range_right;
        j.arg = &right;
        j.owner = &w->deque.ring;
        j.latch = 0;
        p->hi = mid;
        queued = fsched__push_job(w, &j.job);
        fsched__range_run(p, 0); /* the left half, here */
        if (queued) fsched__join_finish(w, &j);
        else fsched__range_right(&right); /* out of memory: the right half after it */
        if (r->rbody) {
            r->combine(r->ctx, p->acc, right.acc);
            if (right.acc != (void *)local) fsched__free(&r->allocator, right.acc, r->size, 16);
        }
        return;
    }
    if (r->rbody) r->rbody(r->ctx, p->lo, p->hi, p->acc);
    else r->body(r->ctx, p->lo, p->hi);
}

typedef struct fsched__range_call {
    fsched__range *r;
    size_t begin, end;
    void *acc;
    const char *what;
} fsched__range_call;

static fsched_result fsched__range_start(fsched__range *r, size_t begin, size_t end, void *acc,
                                         const char *what);

static fsched_result fsched__range_again(void *p) {
    const fsched__range_call *c = (const fsched__range_call *)p;
    return fsched__range_start(c->r, c->begin, c->end, c->acc, c->what);
}

static fsched_result fsched__range_start(fsched__range *r, size_t begin, size_t end, void *acc,
                                         const char *what) {
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    fsched__range_part p;
    fsched_result refused;
    if (w && (refused = fsched__join_check(w, 0, what)) != FSCHED_OK) return refused;
    if (end < begin)
        return FSCHED__MISUSE(w ? &w->sched->logger : NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "%s: end is before begin", what);
    if (!w) {
        fsched__range_call c;
        c.r = r;
        c.begin = begin;
        c.end = end;
        c.acc = acc;
        c.what = what;
        return fsched__call_outside(fsched__range_again, &c, what);
    }
    r->threads = FSCHED__N_THREADS(w->sched) ? FSCHED__N_THREADS(w->sched) : 1;
    r->grain = r->grain ? r->grain : 1;
    r->allocator = w->sched->allocator;
    p.r = r;
    p.lo = begin;
    p.hi = end;
    p.splits = r->threads;
    p.origin = w;
    p.acc = acc;
    if (end > begin) {
        int counted = fsched__own_call_begin(w);
        fsched_fiber *pinned = fsched__pin(); /* p.origin is this worker */
        fsched_fiber *f = FSCHED__THREAD_NOW.current;
        /* the body is not the task, here as on another worker (fsched__running_begin) */
        uint8_t may_move = f->task_may_move;
        f->task_may_move = 0;
        fsched__range_run(&p, 0);
        f->task_may_move = may_move;
        fsched__unpin(pinned);
        fsched__own_call_end(w, counted);
    }
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_parallel_for(size_t begin, size_t end, size_t grain,
                                                 void (*body)(void *ctx, size_t lo, size_t hi),
                                                 void *ctx) {
    fsched__range r;
    if (!body)
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "body is NULL");
    memset(&r, 0, sizeof r);
    r.body = body;
    r.ctx = ctx;
    r.grain = grain;
    return fsched__range_start(&r, begin, end, NULL, __func__);
}

FIBERSCHED_API fsched_result fsched_parallel_reduce(
    size_t begin, size_t end, size_t grain, size_t size, void (*init)(void *ctx, void *acc),
    void (*body)(void *ctx, size_t lo, size_t hi, void *acc),
    void (*combine)(void *ctx, void *acc, const void *other), void *ctx, void *result) {
    fsched__range r;
    fsched_result res;
    if (!init || !body || !combine || !result || !size)
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "NULL function, result or size 0");
    memset(&r, 0, sizeof r);
    r.rbody = body;
    r.init = init;
    r.combine = combine;
    r.ctx = ctx;
    r.grain = grain;
    r.size = size;
    init(ctx, result);
    res = fsched__range_start(&r, begin, end, result, __func__);
    return res;
}


/* ===================================================================================== */
/*  graph: dependency-graph tasks                                                        */
/* ===================================================================================== */

/* Fixed-size items carved from chunks, with a free list: the edges of graphs. Owned by
   one graph and used under its lock. A new chunk is handed out item by item (`fresh`),
   so that an item is first written when it is used. */
typedef struct fsched__slab {
    void *free;   /* items given back, linked through their first word */
    void *chunks; /* chunks, linked through their first word */
    unsigned char *fresh; /* the newest chunk's items not yet handed out ... */
    size_t fresh_left;    /* ... and how many */
    size_t item, per_chunk;
} fsched__slab;

/* Chunks are cache-line aligned; items are aligned as their size is (a multiple of 16,
   or of the cache line). */
static size_t fsched__slab_header(const fsched__slab *sl) {
    return sl->item % FSCHED__CACHE_LINE ? 16 : FSCHED__CACHE_LINE;
}

static void *fsched__slab_get(fsched__slab *sl, const fsched_allocator *a) {
    void *item = sl->free;
    if (item) {
        memcpy(&sl->free, item, sizeof(void *));
        return item;
    }
    if (!sl->fresh_left) {
        size_t header = fsched__slab_header(sl);
        unsigned char *chunk = (unsigned char *)fsched__alloc(
            a, header + sl->item * sl->per_chunk, FSCHED__CACHE_LINE);
        if (!chunk) return NULL;
        memcpy(chunk, &sl->chunks, sizeof(void *));
        sl->chunks = chunk;
        sl->fresh = chunk + header;
        sl->fresh_left = sl->per_chunk;
    }
    item = sl->fresh;
    sl->fresh += sl->item;
    sl->fresh_left--;
    return item;
}

static void fsched__slab_put(fsched__slab *sl, void *item) {
    memcpy(item, &sl->free, sizeof(void *));
    sl->free = item;
}

static void fsched__slab_destroy(fsched__slab *sl, const fsched_allocator *a) {
    size_t header = fsched__slab_header(sl);
    while (sl->chunks) {
        void *next;
        memcpy(&next, sl->chunks, sizeof(void *));
        fsched__free(a, sl->chunks, header + sl->item * sl->per_chunk, FSCHED__CACHE_LINE);
        sl->chunks = next;
    }
    sl->free = NULL;
    sl->fresh = NULL;
    sl->fresh_left = 0;
}

/* An edge: `to` in a list of successors. Edges built between runs are in their task's
   `succ_built` list, which runs only read. An edge a running task adds has a record in
   `succ` (the structure, newest first) and a second one, in the `dyn_live` list of its
   `before` task, which that task takes when it completes. */
typedef struct fsched__gedge {
    struct fsched__gedge *next;
    fsched_graph_task *to;
} fsched__gedge;

typedef struct fsched__glive {
    struct fsched__glive *next;     /* in a task's dyn_live list */
    struct fsched__glive *all_next; /* in the graph's records of the current run */
    fsched_graph_task *to;
} fsched__glive;

/* Why a task will not run, set by its predecessors (bits of `upstream`). */
#define FSCHED__UPSTREAM_FAILED 1u
#define FSCHED__UPSTREAM_CANCELLED 2u

#define FSCHED__GRAPH_INLINE_PREDS 2u

/* Values that carry the number of the run they belong to, so that a run needs no pass
   over all tasks to set them up: a task re-arms itself for the next run as it completes.
   `pending` holds the run in its upper half and the count below; `state` the run above
   three bits of fsched_task_state; a closed `dyn_live` list is an odd marker naming the
   run (an even value, a list or NULL, is open). */
#define FSCHED__GRAPH_PENDING(run, count) (((uint64_t)(run) << 32) | (uint32_t)(count))
#define FSCHED__GRAPH_STATE(run, state) (((uint64_t)(run) << 3) | (uint64_t)(state))
#define FSCHED__GRAPH_CLOSED(run) ((fsched__glive *)(((uintptr_t)(run) << 1) | 1u))

struct fsched_graph_task {
    /* what a run touches for every edge, in one cache line */
    fsched__placed placed;      /* the job, its level and allowed slots; must be first */
    uint64_t pending;           /* atomic: predecessors not completed, plus holds (above) */
    uint64_t state;             /* atomic: (run, fsched_task_state) */
    uint32_t upstream;          /* atomic: FSCHED__UPSTREAM_*; 0 between runs */
    int doomed;                 /* a fsched_result that kept the task from being queued */
    /* what a run touches for every task, in the next line */
    fsched_graph *graph;
    fsched_graph_fn fn;
    void *arg;
    fsched__gedge *succ_built;  /* the successors built between runs */
    fsched_graph_task *local_next;  /* a worker's list of tasks to process */
    fsched__glive *dyn_live;    /* atomic: successors a running task added (above) */
    fsched_graph_task *added;   /* tasks this one added while it ran (held) */
    char *name;                 /* a copy, or NULL */
    /* what a run touches for some tasks, and structure (under the graph's lock) */
    int status;
    uint32_t npreds_built;
    uint64_t rank;              /* the costliest chain from this task to a sink */
    fsched_graph_task **preds;  /* predecessors in the order added: pred_inline, or an
                                   allocation whose capacity is in preds[-1] */
    uint32_t npreds, nsucc_built;
    fsched_graph_task *added_next;
    fsched__gedge *succ;        /* successors, newest first: succ_built, and above it what
                                   the current run added */
    fsched_graph_task *pred_inline[FSCHED__GRAPH_INLINE_PREDS];
    /* rarely touched */
    void *result;
    void (*release)(void *result, void *user);
    void *release_user;
    fsched_graph_task *result_next; /* in the graph's list of results */
    uint32_t nsucc;
    uint32_t index;             /* its number among the graph's tasks (fsched__graph_task_at) */
    uint8_t holds_result;       /* on the graph's list of results (set by the task itself) */
    uint8_t touched;            /* the current run added edges to it */
    uint8_t dynamic;            /* added by a running task: belongs to that run only */
    uint8_t on_caller;
    uint32_t mark;              /* visit mark of the cycle search */
    int64_t ord;                /* position in a topological order (Pearce-Kelly) */
    uint64_t cost;
};

#define FSCHED__GRAPH_LIVE 0x46534752u /* "FSGR" */
#define FSCHED__GRAPH_DEAD 0xdead6a4fu

/* A job that runs the plain sources [its index, hi) of g in place, one after another
   (see fsched__graph_range). */
typedef struct fsched__grange {
    fsched__job job; /* must be first */
    fsched_graph *graph;
    uint32_t hi;
} fsched__grange;

/* A growable array of tasks, under the graph's lock. */
typedef struct fsched__task_set {
    fsched_graph_task **v;
    uint32_t n, cap;
} fsched__task_set;

struct fsched_graph {
    uint32_t magic;
#if defined(FSCHED__OS_NONE)
    fsched__live_entry live_entry; /* in the registry of live objects */
#endif
    fsched_graph_policy policy;
    fsched_allocator allocator;
    fsched_logger logger;
    char *name;
    fsched__mutex lock;         /* structure, and starting runs */
    fsched__slab edge_slab, live_slab;
    fsched_graph_task **task_chunks; /* the tasks, by index (fsched__graph_task_at) */
    uint32_t ntasks;            /* built ones first (nbuilt), then the current run's */
    uint32_t nbuilt;
    uint32_t nchunks, chunks_cap; /* chunks allocated (some may be above the last task) */
    fsched__task_set sources;   /* built tasks without predecessors, found when a run
                                   begins after building: first the `nqueued` ones that
                                   are placed or of another level (queued one by one),
                                   then those a range job runs (fsched__graph_range) */
    uint32_t nqueued;
    fsched__grange *ranges;     /* a range job for each source a range may begin with */
    uint32_t ranges_cap;
    fsched__task_set placed;    /* built tasks with a worker set or on_caller */
    fsched__task_set touched;   /* built tasks the current run added edges to */
    fsched__glive *dyn_records; /* live records of the current run (freed after it) */
    int64_t next_ord;
    uint32_t next_mark;
    uint32_t has_costs;
    uint32_t stale;             /* built on since the sources (and ranks) were found */
    uint32_t unrestored;        /* a run began since fsched__graph_restore */
    fsched_graph_task *results; /* atomic: tasks that published a result, newest first */
    /* the current run */
    fsched_sched *sched;
    int32_t caller_slot;
    uint32_t run;               /* atomic: the number of the current or last run; 0: none */
    uint32_t running;           /* atomic: from fsched_graph_run until the run has ended */
    uint32_t cancel;            /* atomic */
    fsched_graph_task *first_failed; /* atomic: set once per run */
    fsched_result first_reason; /* why it failed: FSCHED_ERR_TASK_FAILED, or doomed */
    uint32_t n_failed, n_skipped, n_cancelled; /* atomic: tasks that did not finish */
    uint32_t ended_run;         /* the last run that ended, and how (under the lock) */
    fsched_graph_outcome outcome;
    fsched_event done;          /* manual reset: the run has ended */
    fsched__job starter;        /* queues the sources of a run begun outside the scheduler */
    FSCHED__ALIGN_LINE uint64_t remaining; /* atomic: tasks of the run not completed, + holds */
};

static inline fsched_graph_task *fsched__graph_pred_at(const fsched_graph_task *t, uint32_t i) {
    return t->preds[i];
}

/* The tasks live in chunks of FSCHED__GRAPH_CHUNK_TASKS, in the order of their indices:
   tasks come and go only at the end (a run's additions are undone from the last), so no
   task moves, no array of them grows, and building writes each task's lines once. A chunk
   above the last task stays for the next ones. Tasks are cache-line aligned: a run
   touches the first line of a task for every edge. */
#define FSCHED__GRAPH_CHUNK_SHIFT 6u
#define FSCHED__GRAPH_CHUNK_TASKS (1u << FSCHED__GRAPH_CHUNK_SHIFT)
#define FSCHED__GRAPH_CHUNKS_FIRST 8u /* room for chunks first made, doubled when full */
#define FSCHED__GRAPH_EDGE_CHUNK 256u /* edges in a chunk of the edge slab */
#define FSCHED__GRAPH_TASK_STRIDE                                                          \
    ((sizeof(fsched_graph_task) + FSCHED__CACHE_LINE - 1) / FSCHED__CACHE_LINE *            \
     FSCHED__CACHE_LINE)

static inline fsched_graph_task *fsched__graph_task_at(const fsched_graph *g, uint32_t i) {
    return (fsched_graph_task *)((unsigned char *)g->task_chunks[i >> FSCHED__GRAPH_CHUNK_SHIFT] +
                                 (size_t)(i & (FSCHED__GRAPH_CHUNK_TASKS - 1)) *
                                     FSCHED__GRAPH_TASK_STRIDE);
}

static void fsched__graph_execute(fsched__job *job, fsched__worker *w);
static void fsched__graph_process_list(fsched_graph_task *t, fsched__worker *w);

static int fsched__task_set_add(fsched_graph *g, fsched__task_set *set, fsched_graph_task *t) {
    if (set->n == set->cap) {
        uint32_t cap = set->cap ? set->cap * 2 : 16;
        fsched_graph_task **v = (fsched_graph_task **)fsched__alloc(&g->allocator, cap * sizeof *v,
                                                                    sizeof(void *));
        if (!v) return 0;
        if (set->n) memcpy(v, set->v, set->n * sizeof *v);
        fsched__free(&g->allocator, set->v, set->cap * sizeof *v, sizeof(void *));
        set->v = v;
        set->cap = cap;
    }
    set->v[set->n++] = t;
    return 1;
}

static void fsched__task_set_free(fsched_graph *g, fsched__task_set *set) {
    fsched__free(&g->allocator, set->v, set->cap * sizeof *set->v, sizeof(void *));
    memset(set, 0, sizeof *set);
}

/* The capacity of t's array of predecessors (an allocated one keeps it in front). */
static uint32_t fsched__graph_preds_cap(const fsched_graph_task *t) {
    return t->preds == t->pred_inline ? FSCHED__GRAPH_INLINE_PREDS
                                      : (uint32_t)(uintptr_t)t->preds[-1];
}

static void fsched__graph_free_preds(fsched_graph *g, fsched_graph_task *t) {
    if (t->preds != t->pred_inline)
        fsched__free(&g->allocator, t->preds - 1,
                     (fsched__graph_preds_cap(t) + 1) * sizeof *t->preds, sizeof(void *));
}

static void fsched__graph_free_task(fsched_graph *g, fsched_graph_task *t) {
    fsched__graph_free_preds(g, t);
    if (t->name) fsched__free(&g->allocator, t->name, strlen(t->name) + 1, 1);
    t->placed.job.execute = NULL; /* a stale handle is refused (fsched_graph_precede) */
}

static char *fsched__graph_strdup(const fsched_allocator *a, const char *text) {
    size_t n;
    char *copy;
    if (!text || !*text) return NULL;
    n = strlen(text) + 1;
    copy = (char *)fsched__alloc(a, n, 1);
    if (copy) memcpy(copy, text, n);
    return copy;
}

/* The graph task whose function runs on the calling fiber, or NULL. */
static fsched_graph_task *fsched__graph_current(void) {
    fsched_fiber *f = FSCHED__THREAD_NOW.current;
    return f ? (fsched_graph_task *)f->graph_task : NULL;
}

/* Releases a task's result (calls its release function once). */
static void fsched__graph_release_result(fsched_graph_task *t) {
    void (*release)(void *, void *) = t->release;
    void *result = t->result;
    t->release = NULL;
    t->result = NULL;
    if (release) release(result, t->release_user);
}

/* ---- the order: incremental cycle detection (Pearce and Kelly, "A dynamic topological
   sort algorithm for directed acyclic graphs", JEA 2006) ----
   Every task has an `ord`; edges always go from a lower to a higher one. A new edge that
   agrees with the order costs nothing; otherwise only the tasks whose ords lie between
   its ends are searched, and reordered. Under the graph's lock. */

typedef struct fsched__ord_search {
    fsched_graph_task **stack, **found;
    size_t stack_len, found_len, cap;
} fsched__ord_search;

static int fsched__ord_push(fsched_graph *g, fsched__ord_search *os, fsched_graph_task *t) {
    if (os->stack_len == os->cap || os->found_len == os->cap) {
        size_t cap = os->cap ? os->cap * 2 : 64;
        fsched_graph_task **stack = (fsched_graph_task **)fsched__alloc(
            &g->allocator, cap * sizeof *stack, sizeof(void *));
        fsched_graph_task **found = (fsched_graph_task **)fsched__alloc(
            &g->allocator, cap * sizeof *found, sizeof(void *));
        if (!stack || !found) {
            fsched__free(&g->allocator, stack, cap * sizeof *stack, sizeof(void *));
            fsched__free(&g->allocator, found, cap * sizeof *found, sizeof(void *));
            return 0;
        }
        if (os->stack_len) memcpy(stack, os->stack, os->stack_len * sizeof *stack);
        if (os->found_len) memcpy(found, os->found, os->found_len * sizeof *found);
        fsched__free(&g->allocator, os->stack, os->cap * sizeof *stack, sizeof(void *));
        fsched__free(&g->allocator, os->found, os->cap * sizeof *found, sizeof(void *));
        os->stack = stack;
        os->found = found;
        os->cap = cap;
    }
    t->mark = g->next_mark;
    os->stack[os->stack_len++] = t;
    os->found[os->found_len++] = t;
    return 1;
}

/* Depth-first search from `from` over successors (forward) or predecessors with ords
   within [lo, hi]; the tasks reached are in os->found. Returns 1 when `target` was
   reached, 0 when not, -1 for want of memory. */
static int fsched__ord_search_from(fsched_graph *g, fsched__ord_search *os,
                                   fsched_graph_task *from, int forward, int64_t lo,
                                   int64_t hi, const fsched_graph_task *target) {
    if (!fsched__ord_push(g, os, from)) return -1;
    while (os->stack_len) {
        fsched_graph_task *t = os->stack[--os->stack_len];
        if (forward) {
            fsched__gedge *e;
            for (e = t->succ; e; e = e->next) {
                fsched_graph_task *u = e->to;
                if (u == target) return 1;
                if (u->mark != g->next_mark && u->ord <= hi && !fsched__ord_push(g, os, u))
                    return -1;
            }
        } else {
            uint32_t i;
            for (i = 0; i < t->npreds; i++) {
                fsched_graph_task *u = fsched__graph_pred_at(t, i);
                if (u->mark != g->next_mark && u->ord >= lo && !fsched__ord_push(g, os, u))
                    return -1;
            }
        }
    }
    return 0;
}

/* Sorts v ascending by `less`: heapsort, O(n log n) whatever the input, no memory. */
static void fsched__task_sort(fsched_graph_task **v, size_t n,
                              int (*less)(const fsched_graph_task *, const fsched_graph_task *)) {
    size_t start = n / 2, end = n;
    while (end > 1) {
        size_t root, child;
        fsched_graph_task *x;
        if (start > 0) { /* building the heap */
            root = --start;
        } else { /* the largest goes to the end */
            x = v[--end];
            v[end] = v[0];
            v[0] = x;
            root = 0;
        }
        x = v[root];
        while ((child = 2 * root + 1) < end) {
            if (child + 1 < end && less(v[child], v[child + 1])) child++;
            if (!less(x, v[child])) break;
            v[root] = v[child];
            root = child;
        }
        v[root] = x;
    }
}

static int fsched__ord_less(const fsched_graph_task *a, const fsched_graph_task *b) {
    return a->ord < b->ord;
}

/* Makes room in the order for the edge before -> after. FSCHED_OK, or
   FSCHED_ERR_INVALID_ARGUMENT when the edge would close a cycle, or _OUT_OF_MEMORY. */
static fsched_result fsched__ord_add_edge(fsched_graph *g, fsched_graph_task *before,
                                          fsched_graph_task *after) {
    fsched__ord_search fwd, bwd;
    fsched_result r = FSCHED_OK;
    int64_t *ords = NULL;
    size_t n = 0, i;
    int hit;
    if (before == after) return FSCHED_ERR_INVALID_ARGUMENT;
    if (before->ord < after->ord) return FSCHED_OK;
    memset(&fwd, 0, sizeof fwd);
    memset(&bwd, 0, sizeof bwd);
    if (++g->next_mark == 0) { /* the marks wrapped: none may look current */
        for (i = 0; i < g->ntasks; i++) fsched__graph_task_at(g, i)->mark = 0;
        g->next_mark = 1;
    }
    hit = fsched__ord_search_from(g, &fwd, after, 1, after->ord, before->ord, before);
    if (hit) {
        r = hit > 0 ? FSCHED_ERR_INVALID_ARGUMENT : FSCHED_ERR_OUT_OF_MEMORY;
        goto done;
    }
    if (fsched__ord_search_from(g, &bwd, before, 0, after->ord, before->ord, NULL) < 0) {
        r = FSCHED_ERR_OUT_OF_MEMORY;
        goto done;
    }
    n = fwd.found_len + bwd.found_len;
    ords = (int64_t *)fsched__alloc(&g->allocator, n * sizeof *ords, sizeof(int64_t));
    if (!ords) {
        r = FSCHED_ERR_OUT_OF_MEMORY;
        goto done;
    }
    /* the tasks that reach `before` go first, then those `after` reaches, each group in
       its old order, into the same set of ords (the two groups' ords, merged) */
    fsched__task_sort(bwd.found, bwd.found_len, fsched__ord_less);
    fsched__task_sort(fwd.found, fwd.found_len, fsched__ord_less);
    {
        size_t b = 0, f = 0;
        for (i = 0; i < n; i++)
            ords[i] = f == fwd.found_len ||
                              (b < bwd.found_len && bwd.found[b]->ord < fwd.found[f]->ord)
                          ? bwd.found[b++]->ord
                          : fwd.found[f++]->ord;
    }
    for (i = 0; i < bwd.found_len; i++) bwd.found[i]->ord = ords[i];
    for (i = 0; i < fwd.found_len; i++) fwd.found[i]->ord = ords[bwd.found_len + i];
done:
    fsched__free(&g->allocator, ords, n * sizeof *ords, sizeof(int64_t));
    fsched__free(&g->allocator, fwd.stack, fwd.cap * sizeof(void *), sizeof(void *));
    fsched__free(&g->allocator, fwd.found, fwd.cap * sizeof(void *), sizeof(void *));
    fsched__free(&g->allocator, bwd.stack, bwd.cap * sizeof(void *), sizeof(void *));
    fsched__free(&g->allocator, bwd.found, bwd.cap * sizeof(void *), sizeof(void *));
    return r;
}

/* Releases the results of the last run: a result lives until then, since a task the run
   added may read any predecessor's, finished long before. Under the graph's lock, while
   g does not run; costs the results, not the graph's size. */
static void fsched__graph_release_results(fsched_graph *g) {
    /* acquire: pairs with the release of each push (the run has ended, too) */
    fsched_graph_task *t = FSCHED__EXCHANGE(&g->results, (fsched_graph_task *)NULL,
                                            FSCHED__ACQUIRE);
    while (t) {
        fsched_graph_task *next = t->result_next;
        t->holds_result = 0;
        fsched__graph_release_result(t);
        t = next;
    }
}

/* Undoes what the last run added: its results, tasks and edges. Under the graph's lock,
   while g does not run, before the graph is built further or run again. Costs what the
   run added, not the graph's size, and nothing once done. */
static void fsched__graph_restore(fsched_graph *g) {
    uint32_t i;
    if (!g->unrestored) return;
    g->unrestored = 0;
    fsched__graph_release_results(g);
    for (i = g->nbuilt; i < g->ntasks; i++) { /* added while running: edges and all */
        fsched_graph_task *t = fsched__graph_task_at(g, i);
        while (t->succ) {
            fsched__gedge *e = t->succ;
            t->succ = e->next;
            fsched__slab_put(&g->edge_slab, e);
        }
        fsched__graph_free_task(g, t);
    }
    g->ntasks = g->nbuilt;
    for (i = 0; i < g->touched.n; i++) {
        fsched_graph_task *t = g->touched.v[i];
        while (t->succ != t->succ_built) {
            fsched__gedge *e = t->succ;
            t->succ = e->next;
            fsched__slab_put(&g->edge_slab, e);
        }
        t->nsucc = t->nsucc_built;
        t->npreds = t->npreds_built;
        t->touched = 0;
    }
    g->touched.n = 0;
    while (g->dyn_records) {
        fsched__glive *r = g->dyn_records;
        g->dyn_records = r->all_next;
        fsched__slab_put(&g->live_slab, r);
    }
}

/* ---- building -------------------------------------------------------------------- */

FIBERSCHED_API fsched_result fsched_graph_create(const fsched_graph_desc *desc, fsched_graph **out) {
    fsched_graph_desc d;
    fsched_allocator a;
    fsched_graph *g;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (!out) return FSCHED__REFUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (d.on_failure != FSCHED_GRAPH_SKIP_DEPENDENTS && d.on_failure != FSCHED_GRAPH_FAIL_FAST)
        return FSCHED__REFUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "unknown failure policy %d", (int)d.on_failure);
    a = fsched__allocator_resolve(&d.allocator);
    g = (fsched_graph *)fsched__alloc(&a, sizeof *g, FSCHED__CACHE_LINE);
    if (!g) return FSCHED_ERR_OUT_OF_MEMORY;
    memset(g, 0, sizeof *g);
    g->allocator = a;
    g->logger = d.logger;
    g->policy = d.on_failure;
    if (d.name && *d.name && !(g->name = fsched__graph_strdup(&a, d.name))) {
        fsched__free(&a, g, sizeof *g, FSCHED__CACHE_LINE);
        return FSCHED_ERR_OUT_OF_MEMORY;
    }
    g->edge_slab.item = fsched__round_up(sizeof(fsched__gedge), 16);
    g->edge_slab.per_chunk = FSCHED__GRAPH_EDGE_CHUNK;
    g->live_slab.item = fsched__round_up(sizeof(fsched__glive), 16);
    g->live_slab.per_chunk = 64;
    fsched__mutex_init(&g->lock);
    fsched_event_init(&g->done, 1, 1);
    g->magic = FSCHED__GRAPH_LIVE;
    if (!FSCHED__LIVE_ADD(g)) {
        fsched__mutex_destroy(&g->lock);
        fsched__free(&a, g->name, g->name ? strlen(g->name) + 1 : 0, 1);
        fsched__free(&a, g, sizeof *g, FSCHED__CACHE_LINE);
        return FSCHED_ERR_OUT_OF_MEMORY;
    }
    *out = g;
    return FSCHED_OK;
}

/* Whether g is a live graph, from the registry, or, for the graph the thread last found
   live, from the registry's count of removals: building calls this for every task and
   edge, and the registry's lock is a line every thread writes. */
static int fsched__graph_live(const fsched_graph *g) {
    fsched__thread *th = fsched__thread_get();
    /* relaxed: see fsched__live_remove_locked; read before the registry, so that a
       removal meanwhile makes the remembered count stale, never too new */
    size_t removals = FSCHED__LOAD(&fsched__live_removals, FSCHED__RELAXED);
    if (g && th->live_seen == (const void *)g && th->live_seen_removals == removals) return 1;
    if (!fsched__live_check(g)) return 0;
    th->live_seen = g;
    th->live_seen_removals = removals;
    return 1;
}

/* FSCHED_OK for a live graph; a destroyed one is found gone without reading it. */
static fsched_result fsched__graph_check(const fsched_graph *g, const char *what) {
    if (!fsched__graph_live(g) || g->magic != FSCHED__GRAPH_LIVE)
        return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "%s: %s", what, g ? "not a live graph (destroyed?)" : "the graph is NULL");
    return FSCHED_OK;
}

/* Whether the caller may change g's structure now: while g runs, only g's running tasks.
   Under g's lock. Acquire: pairs with the release that ended the last run. From here on,
   relaxed reads of `running` under the lock see the same: a run begins under the lock,
   and one ends only after its tasks, the caller among them, have returned. */
static fsched_result fsched__graph_may_build(fsched_graph *g, const char *what) {
    fsched_graph_task *cur;
    if (!FSCHED__LOAD(&g->running, FSCHED__ACQUIRE)) return FSCHED_OK;
    cur = fsched__graph_current();
    if (cur && cur->graph == g) return FSCHED_OK;
    return FSCHED__MISUSE(&g->logger, FSCHED_ERR_WRONG_STATE,
                          "%s: the graph runs; only its own tasks may add to it", what);
}

/* Whether a worker set names a worker s has (only workers 0..63 can be named). */
static int fsched__graph_workers_exist(const fsched_sched *s, uint64_t workers) {
    uint32_t n = FSCHED__N_THREADS(s) < 64 ? FSCHED__N_THREADS(s) : 64;
    return n == 64 ? workers != 0 : (workers & (((uint64_t)1 << n) - 1)) != 0;
}

/* The task desc `d` (zero: the defaults), or why not. */
static fsched_result fsched__graph_desc_check(const fsched_graph *g,
                                              const fsched_graph_task_desc *d, const char *what) {
    if ((unsigned)d->priority > (unsigned)FSCHED_PRIORITY_HIGH)
        return FSCHED__MISUSE(&g->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "%s: unknown priority %d", what, (int)d->priority);
    if (d->on_caller && d->workers)
        return FSCHED__MISUSE(&g->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "%s: on_caller and a worker set exclude each other", what);
    return FSCHED_OK;
}

/* Under the graph's lock: where task number g->ntasks goes, in a chunk allocated now
   when none has room; NULL, with nothing changed, for want of memory. */
static fsched_graph_task *fsched__graph_task_room(fsched_graph *g) {
    uint32_t chunk = g->ntasks >> FSCHED__GRAPH_CHUNK_SHIFT;
    if (g->ntasks == UINT32_MAX) return NULL;
    if (chunk == g->nchunks) {
        void *mem;
        if (g->nchunks == g->chunks_cap) {
            uint32_t cap = g->chunks_cap ? g->chunks_cap * 2 : FSCHED__GRAPH_CHUNKS_FIRST;
            fsched_graph_task **v = (fsched_graph_task **)fsched__alloc(
                &g->allocator, cap * sizeof *v, sizeof(void *));
            if (!v) return NULL;
            if (g->nchunks) memcpy(v, g->task_chunks, g->nchunks * sizeof *v);
            fsched__free(&g->allocator, g->task_chunks, g->chunks_cap * sizeof *v,
                         sizeof(void *));
            g->task_chunks = v;
            g->chunks_cap = cap;
        }
        mem = fsched__alloc(&g->allocator,
                            FSCHED__GRAPH_CHUNK_TASKS * FSCHED__GRAPH_TASK_STRIDE,
                            FSCHED__CACHE_LINE);
        if (!mem) return NULL;
        g->task_chunks[g->nchunks++] = (fsched_graph_task *)mem;
    }
    return fsched__graph_task_at(g, g->ntasks);
}

/* Under the graph's lock: a new task, named, the last of g's tasks, and, built before a
   run, in g's set of placed ones; its other fields not yet set. NULL, with no task added,
   for want of memory. */
static fsched_graph_task *fsched__graph_task_new(fsched_graph *g, const fsched_graph_task_desc *d,
                                                 int during_run) {
    int placed = !during_run && (d->on_caller || d->workers);
    char *name = NULL;
    fsched_graph_task *t = fsched__graph_task_room(g);
    if (!t) return NULL;
    if (placed && !fsched__task_set_add(g, &g->placed, t)) return NULL;
    if (d->name && *d->name && !(name = fsched__graph_strdup(&g->allocator, d->name))) {
        if (placed) g->placed.n--; /* t is its last */
        return NULL;
    }
    t->name = name;
    g->ntasks++;
    return t;
}

/* A new task's every other field: its work, priority, placement and cost from its desc,
   no edges, no result. (Set one by one: a task is several cache lines, and building a
   large graph is mostly writing them.) */
static void fsched__graph_task_init(fsched_graph_task *t, fsched_graph *g, fsched_graph_fn fn,
                                    void *arg, const fsched_graph_task_desc *d) {
    t->placed.job.execute = fsched__graph_execute; /* NULL again once freed */
    t->placed.job.next = NULL;
    t->placed.next = NULL;
    t->placed.workers = d->workers;
    t->placed.slot = -1;
    t->placed.level = d->priority == FSCHED_PRIORITY_LOW    ? FSCHED__LEVEL_LOW
                      : d->priority == FSCHED_PRIORITY_HIGH ? FSCHED__LEVEL_HIGH
                                                            : FSCHED__LEVEL_NORMAL;
    t->upstream = 0;
    t->doomed = 0;
    t->graph = g;
    t->fn = fn;
    t->arg = arg;
    t->succ_built = t->succ = NULL;
    t->local_next = NULL;
    t->dyn_live = NULL;
    t->added = t->added_next = NULL;
    t->status = 0;
    t->npreds = t->npreds_built = 0;
    t->nsucc = t->nsucc_built = 0;
    t->rank = t->cost = d->cost;
    t->preds = t->pred_inline;
    t->result = NULL;
    t->release = NULL;
    t->release_user = NULL;
    t->result_next = NULL;
    t->index = g->ntasks - 1;
    t->holds_result = t->touched = t->dynamic = 0;
    t->on_caller = d->on_caller ? 1u : 0u;
    t->mark = 0;
    t->ord = g->next_ord++;
}

/* Under the graph's lock: arms a new task for the next run, or, added by cur, a task of
   the running graph, for this run. */
static void fsched__graph_task_arm(fsched_graph *g, fsched_graph_task *t, fsched_graph_task *cur,
                                   int during_run) {
    if (during_run) {
        /* added by a running task: held by it until it returns, then part of this run
           (relaxed: the caller's run, set before its task was queued; cur's hold keeps
           the count above zero) */
        uint32_t run = FSCHED__LOAD(&g->run, FSCHED__RELAXED);
        t->dynamic = 1;
        if (t->on_caller) t->placed.slot = g->caller_slot;
        t->state = FSCHED__GRAPH_STATE(run, FSCHED_TASK_WAITING);
        t->pending = FSCHED__GRAPH_PENDING(run, 1);
        t->added_next = cur->added;
        cur->added = t;
        FSCHED__FETCH_ADD(&g->remaining, (uint64_t)1, FSCHED__RELAXED); /* cur holds one */
    } else {
        /* a run's additions go before the next: they leave the order be */
        if (t->cost) g->has_costs = 1;
        g->stale = 1;
        t->state = FSCHED__GRAPH_STATE(g->run, FSCHED_TASK_WAITING);
        t->pending = FSCHED__GRAPH_PENDING(g->run + 1, 0);
        g->nbuilt = g->ntasks;
    }
}

static fsched_result fsched__graph_add(fsched_graph *g, fsched_graph_fn fn, void *arg,
                                       const fsched_graph_task_desc *desc,
                                       fsched_graph_task **out, const char *what) {
    fsched_graph_task_desc d;
    fsched_graph_task *t, *cur;
    fsched_result r;
    int during_run;
    if ((r = fsched__graph_check(g, what)) != FSCHED_OK) return r;
    if (out) *out = NULL;
    if (!fn || !out)
        return FSCHED__MISUSE(&g->logger, FSCHED_ERR_INVALID_ARGUMENT, "%s: %s is NULL", what,
                              fn ? "out" : "fn");
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if ((r = fsched__graph_desc_check(g, &d, what)) != FSCHED_OK) return r;
    fsched__mutex_lock(&g->lock);
    if ((r = fsched__graph_may_build(g, what)) != FSCHED_OK) goto unlock;
    cur = fsched__graph_current();
    /* relaxed: see fsched__graph_may_build */
    during_run = FSCHED__LOAD(&g->running, FSCHED__RELAXED) && cur && cur->graph == g;
    if (!during_run) fsched__graph_restore(g); /* building on: the last run's additions go */
    if (during_run && ((d.on_caller && g->caller_slot < 0) ||
                       (d.workers && !fsched__graph_workers_exist(g->sched, d.workers)))) {
        r = FSCHED__MISUSE(&g->logger, FSCHED_ERR_INVALID_ARGUMENT,
                           "%s: no thread of the running graph's scheduler may run it", what);
        goto unlock;
    }
    if (!(t = fsched__graph_task_new(g, &d, during_run))) {
        r = FSCHED_ERR_OUT_OF_MEMORY;
        goto unlock;
    }
    fsched__graph_task_init(t, g, fn, arg, &d);
    fsched__graph_task_arm(g, t, cur, during_run);
    *out = t;
unlock:
    fsched__mutex_unlock(&g->lock);
    return r;
}

FIBERSCHED_API fsched_result fsched_graph_add(fsched_graph *g, fsched_graph_fn fn, void *arg,
                                              const fsched_graph_task_desc *desc,
                                              fsched_graph_task **out) {
    return fsched__graph_add(g, fn, arg, desc, out, __func__);
}

/* Whether `before` -> `after` exists: looks through the shorter of the two lists. */
static int fsched__graph_has_edge(const fsched_graph_task *before, const fsched_graph_task *after) {
    if (after->npreds <= before->nsucc) {
        uint32_t i;
        for (i = 0; i < after->npreds; i++)
            if (fsched__graph_pred_at(after, i) == before) return 1;
    } else {
        const fsched__gedge *e;
        for (e = before->succ; e; e = e->next)
            if (e->to == after) return 1;
    }
    return 0;
}

static int fsched__graph_add_pred(fsched_graph *g, fsched_graph_task *t, fsched_graph_task *pred) {
    if (t->npreds == fsched__graph_preds_cap(t)) {
        uint32_t cap = t->npreds * 2;
        fsched_graph_task **preds = (fsched_graph_task **)fsched__alloc(
            &g->allocator, (cap + 1) * sizeof *preds, sizeof(void *));
        if (!preds) return 0;
        preds[0] = (fsched_graph_task *)(uintptr_t)cap;
        memcpy(preds + 1, t->preds, t->npreds * sizeof *preds);
        fsched__graph_free_preds(g, t);
        t->preds = preds + 1;
    }
    t->preds[t->npreds++] = pred;
    return 1;
}

/* Records that the current run changed t's edges, to be undone after it. */
static int fsched__graph_touch(fsched_graph *g, fsched_graph_task *t) {
    if (t->dynamic || t->touched) return 1;
    if (!fsched__task_set_add(g, &g->touched, t)) return 0;
    t->touched = 1;
    return 1;
}

static void fsched__graph_queue(fsched_graph_task *t, fsched__worker *w,
                                fsched_graph_task **local);

/* precede while g runs (from one of its tasks), under the lock: `after` must not have
   started; the edge counts for this run unless `before` has completed. Relaxed, the run:
   the caller's own; acquire, the first look at the count, more than it needs: only the
   count matters, as to the CAS that holds `after` back (relaxed). */
static fsched_result fsched__graph_precede_running(fsched_graph *g, fsched_graph_task *before,
                                                   fsched_graph_task *after) {
    uint32_t run = FSCHED__LOAD(&g->run, FSCHED__RELAXED);
    uint64_t c = FSCHED__LOAD(&after->pending, FSCHED__ACQUIRE);
    fsched__gedge *e = NULL;
    fsched__glive *live = NULL, *head;
    fsched_result r;
    /* hold `after` back while the edge is made: its count must belong to this run and
       still be above zero (else it has started) */
    do {
        if ((uint32_t)(c >> 32) != run || (uint32_t)c == 0)
            return FSCHED__MISUSE(&g->logger, FSCHED_ERR_WRONG_STATE,
                                  "fsched_graph_precede: task '%s' has already started",
                                  after->name ? after->name : "");
    } while (!FSCHED__CAS_WEAK(&after->pending, &c, c + 1, FSCHED__RELAXED, FSCHED__RELAXED));
    r = fsched__ord_add_edge(g, before, after);
    if (r == FSCHED_ERR_INVALID_ARGUMENT)
        r = FSCHED__MISUSE(&g->logger, r, "fsched_graph_precede: '%s' -> '%s' closes a cycle",
                           before->name ? before->name : "", after->name ? after->name : "");
    if (r == FSCHED_OK) {
        e = (fsched__gedge *)fsched__slab_get(&g->edge_slab, &g->allocator);
        live = (fsched__glive *)fsched__slab_get(&g->live_slab, &g->allocator);
        if (!e || !live || !fsched__graph_touch(g, before) || !fsched__graph_touch(g, after) ||
            !fsched__graph_add_pred(g, after, before))
            r = FSCHED_ERR_OUT_OF_MEMORY;
    }
    if (r != FSCHED_OK) {
        if (e) fsched__slab_put(&g->edge_slab, e);
        if (live) fsched__slab_put(&g->live_slab, live);
        /* acq_rel: as in fsched__graph_complete */
        if ((uint32_t)FSCHED__FETCH_SUB(&after->pending, (uint64_t)1, FSCHED__ACQ_REL) == 1)
            fsched__graph_queue(after, FSCHED__THREAD_NOW.worker, NULL);
        return r;
    }
    e->to = after;
    e->next = before->succ;
    before->succ = e;
    before->nsucc++;
    live->to = after;
    live->all_next = g->dyn_records; /* freed after the run */
    g->dyn_records = live;
    /* the live record joins before's list unless before has completed in this run */
    head = FSCHED__LOAD(&before->dyn_live, FSCHED__ACQUIRE);
    while (head != FSCHED__GRAPH_CLOSED(run)) {
        live->next = ((uintptr_t)head & 1u) ? NULL : head; /* an older run's marker: empty */
        /* release: the record is written before the completing task reads it */
        if (FSCHED__CAS(&before->dyn_live, &head, live, FSCHED__RELEASE, FSCHED__ACQUIRE))
            return FSCHED_OK;
    }
    {
        /* before has completed: the edge does not hold `after` back (before's result
           lives until the run ends). Acquire: pairs with the release that completed it;
           relaxed, the marks: the acq_rel decrement below publishes them */
        uint32_t st = (uint32_t)(FSCHED__LOAD(&before->state, FSCHED__ACQUIRE) & 7u);
        if (st == FSCHED_TASK_FAILED)
            FSCHED__FETCH_OR(&after->upstream, FSCHED__UPSTREAM_FAILED, FSCHED__RELAXED);
        else if (st == FSCHED_TASK_CANCELLED)
            FSCHED__FETCH_OR(&after->upstream, FSCHED__UPSTREAM_CANCELLED, FSCHED__RELAXED);
        /* acq_rel: the upstream mark is seen by whoever releases `after` */
        if ((uint32_t)FSCHED__FETCH_SUB(&after->pending, (uint64_t)1, FSCHED__ACQ_REL) == 1)
            fsched__graph_queue(after, FSCHED__THREAD_NOW.worker, NULL);
    }
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_graph_precede(fsched_graph *g, fsched_graph_task *before,
                                                  fsched_graph_task *after) {
    fsched__gedge *e;
    fsched_result r;
    if ((r = fsched__graph_check(g, __func__)) != FSCHED_OK) return r;
    if (!before || !after || before->graph != g || after->graph != g ||
        !before->placed.job.execute || !after->placed.job.execute)
        return FSCHED__REFUSE(&g->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "a task is NULL or not of this graph");
    fsched__mutex_lock(&g->lock);
    if ((r = fsched__graph_may_build(g, __func__)) != FSCHED_OK) goto unlock;
    /* relaxed, `running`: see fsched__graph_may_build */
    if (!FSCHED__LOAD(&g->running, FSCHED__RELAXED)) {
        if (before->dynamic || after->dynamic) { /* of the last run: gone as building goes on */
            r = FSCHED__REFUSE(&g->logger, FSCHED_ERR_INVALID_ARGUMENT,
                               "a task added by the last run");
            goto unlock;
        }
        fsched__graph_restore(g);
    }
    if (fsched__graph_has_edge(before, after)) goto unlock;
    if (FSCHED__LOAD(&g->running, FSCHED__RELAXED)) { /* relaxed: as above */
        r = fsched__graph_precede_running(g, before, after);
        goto unlock;
    }
    r = fsched__ord_add_edge(g, before, after);
    if (r == FSCHED_ERR_INVALID_ARGUMENT)
        r = FSCHED__REFUSE(&g->logger, r, "'%s' -> '%s' closes a cycle",
                           before->name ? before->name : "", after->name ? after->name : "");
    if (r != FSCHED_OK) goto unlock;
    e = (fsched__gedge *)fsched__slab_get(&g->edge_slab, &g->allocator);
    if (!e || !fsched__graph_add_pred(g, after, before)) {
        if (e) fsched__slab_put(&g->edge_slab, e);
        r = FSCHED_ERR_OUT_OF_MEMORY;
        goto unlock;
    }
    e->to = after;
    e->next = before->succ;
    before->succ = before->succ_built = e;
    before->nsucc_built = ++before->nsucc;
    after->npreds_built = after->npreds;
    after->pending++; /* armed for the next run with one more predecessor */
    g->stale = 1;
unlock:
    fsched__mutex_unlock(&g->lock);
    return r;
}

/* ---- running --------------------------------------------------------------------- */

/* Whether a starts before b among ready tasks: higher level, then longer chain. */
static inline int fsched__graph_before(const fsched_graph_task *a, const fsched_graph_task *b) {
    return a->placed.level != b->placed.level ? a->placed.level > b->placed.level
                                              : a->rank > b->rank;
}

static int fsched__graph_after(const fsched_graph_task *a, const fsched_graph_task *b) {
    return fsched__graph_before(b, a);
}

/* Sorts a list of edges by their tasks, those that start last first (merge sort: stable,
   O(n log n), no memory). */
static fsched__gedge *fsched__gedge_sort(fsched__gedge *list, uint32_t n) {
    fsched__gedge *left = list, *right, *out = NULL, **tail = &out;
    uint32_t i;
    if (n < 2) return list;
    for (i = 1; i < n / 2; i++) list = list->next;
    right = list->next;
    list->next = NULL;
    left = fsched__gedge_sort(left, n / 2);
    right = fsched__gedge_sort(right, n - n / 2);
    while (left && right) {
        fsched__gedge **from = fsched__graph_before(left->to, right->to) ? &right : &left;
        *tail = *from;
        tail = &(*from)->next;
        *from = (*from)->next;
    }
    *tail = left ? left : right;
    return out;
}

/* With cost hints, ranks for "longest chain first" (rank = cost + the largest rank of a
   successor) and the order that lets a worker start the best ready task first: every
   task's successors sorted worst first, since a worker's deque gives back the newest
   first (see fsched__graph_queue_batch). O(V + E log E). */
static int fsched__graph_rank(fsched_graph *g) {
    uint32_t n = g->ntasks, head = 0, tail = 0, i;
    fsched_graph_task **queue;
    uint32_t *left;
    queue = (fsched_graph_task **)fsched__alloc(&g->allocator, n * sizeof *queue, sizeof(void *));
    left = (uint32_t *)fsched__alloc(&g->allocator, n * sizeof *left, sizeof(uint32_t));
    if (!queue || !left) {
        fsched__free(&g->allocator, queue, n * sizeof *queue, sizeof(void *));
        fsched__free(&g->allocator, left, n * sizeof *left, sizeof(uint32_t));
        return 0;
    }
    /* from the sinks backwards: a task once all its successors have their ranks */
    for (i = 0; i < n; i++) {
        fsched_graph_task *t = fsched__graph_task_at(g, i);
        if (!(left[i] = t->nsucc_built)) queue[tail++] = t;
    }
    while (head < tail) {
        fsched_graph_task *t = queue[head++];
        uint64_t best = 0;
        fsched__gedge *e;
        for (e = t->succ_built; e; e = e->next)
            if (e->to->rank > best) best = e->to->rank;
        t->rank = t->cost + best;
        for (i = 0; i < t->npreds_built; i++)
            if (--left[t->preds[i]->index] == 0) queue[tail++] = t->preds[i];
    }
    for (i = 0; i < n; i++) {
        fsched_graph_task *t = fsched__graph_task_at(g, i);
        t->succ = t->succ_built = fsched__gedge_sort(t->succ_built, t->nsucc_built);
    }
    fsched__free(&g->allocator, queue, n * sizeof *queue, sizeof(void *));
    fsched__free(&g->allocator, left, n * sizeof *left, sizeof(uint32_t));
    return 1;
}

/* Whether a source may run in place in a range job: any worker may run it, at the
   normal level. */
static int fsched__graph_plain(const fsched_graph_task *t) {
    return !t->on_caller && !t->placed.workers && t->placed.level == FSCHED__LEVEL_NORMAL;
}

/* Finds the sources: first those queued one by one (placed, or of another level), then
   the plain ones, for range jobs; with cost hints, ranks, the first sorted worst first
   (as successors), the others best first (a range runs them in order). Between runs,
   under the graph's lock, once after building: O(V), with cost hints O(V + E log E). */
static int fsched__graph_prepare(fsched_graph *g) {
    uint32_t i, nplain;
    int plain;
    if (!g->stale) return 1;
    g->sources.n = 0;
    for (plain = 0; plain < 2; plain++) {
        for (i = 0; i < g->ntasks; i++) {
            fsched_graph_task *t = fsched__graph_task_at(g, i);
            if (!t->npreds_built && fsched__graph_plain(t) == plain &&
                !fsched__task_set_add(g, &g->sources, t))
                return 0;
        }
        if (!plain) g->nqueued = g->sources.n;
    }
    nplain = g->sources.n - g->nqueued;
    if (nplain > g->ranges_cap) {
        fsched__grange *r = (fsched__grange *)fsched__alloc(&g->allocator, nplain * sizeof *r,
                                                            sizeof(void *));
        if (!r) return 0;
        fsched__free(&g->allocator, g->ranges, g->ranges_cap * sizeof *r, sizeof(void *));
        g->ranges = r;
        g->ranges_cap = nplain;
    }
    if (g->has_costs) {
        if (!fsched__graph_rank(g)) return 0;
        fsched__task_sort(g->sources.v, g->nqueued, fsched__graph_after);
        fsched__task_sort(g->sources.v + g->nqueued, nplain, fsched__graph_before);
    }
    g->stale = 0;
    return 1;
}

static void fsched__graph_sort_ready(fsched_graph_task **v, size_t n) { /* insertion */
    size_t i, j;
    for (i = 1; i < n; i++) {
        fsched_graph_task *t = v[i];
        for (j = i; j > 0 && fsched__graph_before(t, v[j - 1]); j--) v[j] = v[j - 1];
        v[j] = t;
    }
}

/* Queues a ready task. When it cannot be queued (out of memory, or no slot may run it any
   more) it is doomed: put on `local` to be completed as failed without running, or, with
   no list, completed here. Relaxed: the run is the task's own, begun before it was
   armed; READY (as RUNNING) publishes nothing, only a completed state does. */
static void fsched__graph_queue(fsched_graph_task *t, fsched__worker *w,
                                fsched_graph_task **local) {
    fsched_graph *g = t->graph;
    uint32_t run = FSCHED__LOAD(&g->run, FSCHED__RELAXED);
    FSCHED__STORE(&t->state, FSCHED__GRAPH_STATE(run, FSCHED_TASK_READY), FSCHED__RELAXED);
    if (fsched__place(g->sched, w, &t->placed)) return;
    t->doomed = t->placed.slot >= 0 || t->placed.workers ? FSCHED_ERR_WRONG_STATE
                                                         : FSCHED_ERR_OUT_OF_MEMORY;
    fsched__log(&g->logger, FSCHED_LOG_ERROR, "graph task '%s' could not be queued: %s",
                t->name ? t->name : "", fsched_result_string((fsched_result)t->doomed));
    if (local) {
        t->local_next = *local;
        *local = t;
    } else {
        fsched__graph_process_list(t, w);
    }
}

#define FSCHED__GRAPH_READY_BATCH 32u
#define FSCHED__GRAPH_CHAIN_MAX 64u /* tasks run back to back before the loop gets a turn */

/* Queues ready tasks so that the worker that queues them starts the best first: its own
   deque gives back the newest first, so the best goes last. (Thieves take the oldest,
   the least urgent: the queueing worker is the one that runs the best soon.) Sources and
   successor lists come sorted worst first (fsched__graph_order): batch after batch, the
   order holds across the whole set. */
static void fsched__graph_queue_batch(fsched_graph_task **batch, size_t n, fsched__worker *w,
                                      fsched_graph_task **local) {
    size_t i;
    fsched__graph_sort_ready(batch, n);
    for (i = n; i-- > 0;) fsched__graph_queue(batch[i], w, local);
}

/* The end of a run: its outcome is recorded under the lock, for waiters of this run,
   whatever runs come after; the event wakes them. Clearing `running` is the last touch
   of g: the next run cannot begin before it, and a waiter returns only once it sees it
   or a newer run (see fsched__graph_wait). The run counts as one unit of work for
   fsched_destroy, ended here. */
static void fsched__graph_end(fsched_graph *g, fsched__worker *w) {
    fsched_sched *s = g->sched;
    fsched_graph_outcome o;
    memset(&o, 0, sizeof o);
    FSCHED__POINT(RUN_END);
    fsched__mutex_lock(&g->lock);
    /* relaxed: the last decrement of `remaining` (acq_rel) gathered every task's counts */
    o.failed_count = FSCHED__LOAD(&g->n_failed, FSCHED__RELAXED);
    o.skipped = FSCHED__LOAD(&g->n_skipped, FSCHED__RELAXED);
    o.cancelled = FSCHED__LOAD(&g->n_cancelled, FSCHED__RELAXED);
    o.finished = g->ntasks - o.failed_count - o.skipped - o.cancelled;
    o.failed = FSCHED__LOAD(&g->first_failed, FSCHED__RELAXED);
    if (o.failed) {
        o.status = o.failed->status;
        o.result = g->first_reason;
    } else if (o.cancelled || FSCHED__LOAD(&g->cancel, FSCHED__RELAXED)) {
        o.result = FSCHED_ERR_CANCELLED;
    }
    g->outcome = o;
    g->ended_run = FSCHED__LOAD(&g->run, FSCHED__RELAXED);
    fsched_event_set(&g->done);
    fsched__mutex_unlock(&g->lock);
    FSCHED__POINT(RUN_END);
    /* release: the run and its outcome happen before a waiter or the next run sees it */
    FSCHED__STORE(&g->running, 0u, FSCHED__RELEASE);
    fsched__work_ended(s, w);
}

/* Records t, failed for `reason`, as the run's first failure if it is; fail-fast cancels
   the rest. */
static void fsched__graph_record_failure(fsched_graph *g, fsched_graph_task *t,
                                         fsched_result reason) {
    fsched_graph_task *none = NULL;
    /* acq_rel: the waiter reads the task's status after reading this; release, the
       cancel: pairs with the acquire of the tasks that look at it. The reason is
       written by the one task that wins, before it counts itself off the run (whose
       last count the run's end reads after) */
    if (FSCHED__CAS(&g->first_failed, &none, t, FSCHED__ACQ_REL, FSCHED__RELAXED))
        g->first_reason = reason;
    if (g->policy == FSCHED_GRAPH_FAIL_FAST) FSCHED__STORE(&g->cancel, 1u, FSCHED__RELEASE);
}

/* Tells successor s that its predecessor completed (with `bad` upstream marks); collects
   it when it becomes ready: the best one allowed on w to run next here, the others in
   the batch. */
static inline void fsched__graph_release(fsched_graph_task *s, uint32_t bad, fsched__worker *w,
                                         fsched_graph_task **local, const uint32_t *chain,
                                         fsched_graph_task **best, fsched_graph_task **batch,
                                         size_t *n) {
    if (bad) FSCHED__FETCH_OR(&s->upstream, bad, FSCHED__RELAXED); /* relaxed: see below */
    /* acq_rel: the predecessor's effects (and an upstream mark) happen before s runs */
    if ((uint32_t)FSCHED__FETCH_SUB(&s->pending, (uint64_t)1, FSCHED__ACQ_REL) != 1) return;
    if (local && w && *chain < FSCHED__GRAPH_CHAIN_MAX &&
        fsched__placed_allows(&s->placed, w->index, !FSCHED__BOUND(w)) &&
        (!*best || fsched__graph_before(s, *best))) {
        fsched_graph_task *x = *best; /* s runs next here; the former best is queued */
        *best = s;
        if (!(s = x)) return;
    }
    batch[(*n)++] = s;
    if (*n == FSCHED__GRAPH_READY_BATCH) {
        fsched__graph_queue_batch(batch, *n, w, local);
        *n = 0;
    }
}

/* Completes t with `state`: starts what it added, releases predecessors' results nobody
   needs, tells its successors, and re-arms itself for the next run. The best successor
   made ready may be put on *local to run next on this worker; the others are queued.
   The caller counts t off the run's remaining tasks (see fsched__graph_process_list).
   Relaxed: the run, READY, as in fsched__graph_queue; the counts of tasks that did not
   finish, which the caller's acq_rel count of `remaining` gathers for the run's end. */
static void fsched__graph_complete(fsched_graph_task *t, fsched__worker *w, uint32_t state,
                                   fsched_graph_task **local, uint32_t *chain) {
    fsched_graph *g = t->graph;
    uint32_t run = FSCHED__LOAD(&g->run, FSCHED__RELAXED);
    fsched_graph_task *batch[FSCHED__GRAPH_READY_BATCH], *best = NULL;
    size_t n = 0;
    fsched__gedge *e;
    fsched__glive *dyn, *d;
    uint32_t bad = state == FSCHED_TASK_FINISHED ? 0u
                   : state == FSCHED_TASK_FAILED ? FSCHED__UPSTREAM_FAILED
                                                 : FSCHED__UPSTREAM_CANCELLED;
    if (state == FSCHED_TASK_FAILED)
        FSCHED__FETCH_ADD(t->status || t->doomed ? &g->n_failed : &g->n_skipped, 1u,
                          FSCHED__RELAXED);
    else if (state == FSCHED_TASK_CANCELLED)
        FSCHED__FETCH_ADD(&g->n_cancelled, 1u, FSCHED__RELAXED);
    for (e = t->succ_built; e; e = e->next) __builtin_prefetch(e->to, 1); /* lines to write */
    /* release: what the task did is visible to whoever reads the state with acquire */
    FSCHED__STORE(&t->state, FSCHED__GRAPH_STATE(run, state), FSCHED__RELEASE);
    /* acq_rel: edges added meanwhile are seen; later ones see the list closed */
    dyn = FSCHED__EXCHANGE(&t->dyn_live, FSCHED__GRAPH_CLOSED(run), FSCHED__ACQ_REL);
    if ((uintptr_t)dyn & 1u) dyn = NULL; /* an older run's marker: no additions */
    while (t->added) { /* tasks t added while it ran: its hold on them ends */
        fsched_graph_task *a = t->added;
        t->added = a->added_next;
        fsched__graph_release(a, 0, w, local, chain, &best, batch, &n);
    }
    for (e = t->succ_built; e; e = e->next)
        fsched__graph_release(e->to, bad, w, local, chain, &best, batch, &n);
    for (d = dyn; d; d = d->next) fsched__graph_release(d->to, bad, w, local, chain, &best, batch, &n);
    fsched__graph_queue_batch(batch, n, w, local);
    if (best) {
        if (best->placed.level < FSCHED__LEVEL_HIGH && !fsched__cl_looks_empty(&w->high)) {
            fsched__graph_queue(best, w, local); /* higher-level work waits here */
        } else {
            FSCHED__STORE(&best->state, FSCHED__GRAPH_STATE(run, FSCHED_TASK_READY),
                          FSCHED__RELAXED);
            best->local_next = *local;
            *local = best;
            ++*chain;
        }
    }
    /* re-armed for the next run (nothing else touches these in this one: every
       predecessor has completed, and a later edge sees this task has started); relaxed:
       the run's end publishes them to the next (the acq_rel count of `remaining`, then
       the release of `running`, which the next fsched_graph_run acquires) */
    t->doomed = 0;
    FSCHED__STORE(&t->upstream, 0u, FSCHED__RELAXED);
    FSCHED__STORE(&t->pending, FSCHED__GRAPH_PENDING(run + 1, t->npreds_built), FSCHED__RELAXED);
}

/* Counts n completed tasks off the run's remaining ones; the last ends the run. */
static void fsched__graph_count_done(fsched_graph *g, fsched__worker *w, uint64_t n) {
    /* acq_rel: the run's effects are gathered in the last decrement, which ends it */
    if (n && FSCHED__FETCH_SUB(&g->remaining, n, FSCHED__ACQ_REL) == n) fsched__graph_end(g, w);
}

/* Runs (or skips) t and completes it. */
static void fsched__graph_process(fsched_graph_task *t, fsched__worker *w,
                                  fsched_graph_task **local, uint32_t *chain) {
    fsched_graph *g = t->graph;
    /* acquire: the marks predecessors left before their release of `pending` */
    uint32_t up = FSCHED__LOAD(&t->upstream, FSCHED__ACQUIRE), state;
    t->status = 0;
    if (t->doomed) {
        state = FSCHED_TASK_FAILED;
        fsched__graph_record_failure(g, t, (fsched_result)t->doomed);
    } else if (up & FSCHED__UPSTREAM_FAILED) {
        state = FSCHED_TASK_FAILED;
    } else if ((up & FSCHED__UPSTREAM_CANCELLED) || /* acquire: pairs with the cancel's */
               FSCHED__LOAD(&g->cancel, FSCHED__ACQUIRE)) {
        state = FSCHED_TASK_CANCELLED;
    } else {
        fsched_fiber *f = FSCHED__THREAD_NOW.current;
        void *outer = f->graph_task; /* a task may run inline while another one waits */
        fsched__running outer_running;
        /* relaxed: as in fsched__graph_queue */
        FSCHED__STORE(&t->state,
                      FSCHED__GRAPH_STATE(FSCHED__LOAD(&g->run, FSCHED__RELAXED),
                                          FSCHED_TASK_RUNNING),
                      FSCHED__RELAXED);
        FSCHED__TRACE(uint64_t trace_begin = fsched__trace_now();)
        f->graph_task = t;
        outer_running = fsched__running_begin(f, FSCHED__CODE(t->fn), t->name);
        t->status = t->fn(t, t->arg);
        if (FSCHED__DEBUG) fsched__stack_check(f, NULL);
        fsched__running_end(f, outer_running);
        FSCHED__TRACE(fsched__trace_record(FSCHED__TRACE_GRAPH_TASK, trace_begin,
                                           FSCHED__CODE(t->fn), t->name, (uint32_t)t->status);)
        /* the task may have suspended: it resumes on the same fiber and worker */
        f->graph_task = outer;
        state = t->status ? FSCHED_TASK_FAILED : FSCHED_TASK_FINISHED;
        if (t->status) fsched__graph_record_failure(g, t, FSCHED_ERR_TASK_FAILED);
    }
    fsched__graph_complete(t, w, state, local, chain);
}

/* Processes t and every task it leaves on the worker's list (all of t's graph); returns
   how many, for the caller to count off the run's remaining tasks with one atomic
   operation: the count is a line every worker writes. */
static uint64_t fsched__graph_process_all(fsched_graph_task *t, fsched__worker *w) {
    fsched_graph_task *local = t;
    uint32_t chain = 0, done = 0;
    t->local_next = NULL;
    while (local) {
        t = local;
        local = t->local_next;
        fsched__graph_process(t, w, &local, &chain);
        done++;
        if (!local || !w) continue;
        /* ready fibers run before more tasks start (they bound memory), and after a long
           chain the loop gets a turn: the rest goes to the ring of the deque, not shared
           even when asked for (the worker takes it back at once: handing a chain to an
           idle worker would only move it, and wake that worker for nothing) */
        if (chain >= FSCHED__GRAPH_CHAIN_MAX || w->ready_head || /* relaxed: a hint */
            FSCHED__LOAD(&w->inbox, FSCHED__RELAXED)) {
            while (local) {
                fsched_graph_task *x = local;
                local = x->local_next;
                if (x->doomed) {
                    x->local_next = NULL;
                    fsched__graph_process_list(x, w);
                } else if (x->placed.slot >= 0 || x->placed.workers ||
                           !fsched__deque_push(&w->deque, &x->placed.job)) {
                    fsched__graph_queue(x, w, NULL); /* thieves may only take it if allowed */
                }
            }
        }
    }
    return done;
}

/* Processes t and what it leaves on the worker's list, and counts them off the run. */
static void fsched__graph_process_list(fsched_graph_task *t, fsched__worker *w) {
    fsched_graph *g = t->graph;
    fsched__graph_count_done(g, w, fsched__graph_process_all(t, w));
}

static void fsched__graph_execute(fsched__job *job, fsched__worker *w) {
    fsched__graph_process_list((fsched_graph_task *)job, w);
}

/* Queues a job any worker may run from w: on its deque's private ring, from where a
   thief that asks gets it, unless w is a bound thread, whose code may go on to block in
   the OS (or the ring is full and cannot grow): then where thieves take it at once. */
static void fsched__graph_push(fsched__worker *w, fsched__job *job) {
    if (FSCHED__BOUND(w) || !fsched__push_job(w, job)) fsched__publish(w, &job, 1);
}

static void fsched__graph_range_execute(fsched__job *job, fsched__worker *w);

/* Sets up the range job of the sources [lo, hi) of g. */
static fsched__job *fsched__graph_range(fsched_graph *g, uint32_t lo, uint32_t hi) {
    fsched__grange *r = &g->ranges[lo - g->nqueued];
    r->job.execute = fsched__graph_range_execute;
    r->graph = g;
    r->hi = hi;
    return &r->job;
}

#define FSCHED__GRAPH_FAN_OUT 16u

/* The first range of a run: one piece for each worker (up to FSCHED__GRAPH_FAN_OUT)
   where every worker sees them at once, so that as many sources start at once as there
   are workers, however long each runs; returns the end of the piece left to w. */
static uint32_t fsched__graph_fan_out(fsched_graph *g, fsched__worker *w, uint32_t lo,
                                      uint32_t hi) {
    fsched__job *jobs[FSCHED__GRAPH_FAN_OUT];
    uint32_t k = FSCHED__N_THREADS(g->sched), i, size;
    if (k > FSCHED__GRAPH_FAN_OUT) k = FSCHED__GRAPH_FAN_OUT;
    if (k > hi - lo) k = hi - lo;
    if (k < 2) return hi;
    size = (hi - lo) / k;
    for (i = 1; i < k; i++)
        jobs[k - 1 - i] = fsched__graph_range(g, lo + i * size, i + 1 < k ? lo + (i + 1) * size
                                                                            : hi);
    fsched__publish(w, jobs, k - 1); /* the last piece first, as a split gives the upper half */
    return lo + size;
}

/* A range job: runs the plain sources [lo, hi) of its graph in place, one after another,
   each with the tasks it makes ready (as fsched__graph_process_all), lo given by the
   job's place in g->ranges. The run's first range is spread over the workers at once;
   after that, whenever a thief has asked this worker for work, the upper half of what is
   left goes to a job of its own first: splitting on demand, so that a run's sources take
   no queue at all while nobody else is idle. Counts them all off the run's remaining
   tasks at the end. */
static void fsched__graph_range_execute(fsched__job *job, fsched__worker *w) {
    fsched__grange *r = (fsched__grange *)job;
    fsched_graph *g = r->graph;
    uint32_t base = g->nqueued, lo = base + (uint32_t)(r - g->ranges), hi = r->hi;
    uint64_t done = 0;
    if (lo == base) hi = fsched__graph_fan_out(g, w, lo, hi); /* a split never begins there */
    while (lo < hi) {
        if (hi - lo > 1 && fsched__deque_requested(&w->deque)) {
            uint32_t mid = lo + (hi - lo) / 2;
            fsched__graph_push(w, fsched__graph_range(g, mid, hi));
            hi = mid;
        }
        done += fsched__graph_process_all(g->sources.v[lo++], w);
    }
    fsched__graph_count_done(g, w, done);
}

/* Queues the run's sources from w: those placed or of another level one by one, in
   batches as in fsched__graph_complete, the plain ones as one range job. Under the
   graph's lock (tasks that run meanwhile may add tasks). */
static void fsched__graph_queue_sources(fsched_graph *g, fsched__worker *w,
                                        fsched_graph_task **local) {
    fsched_graph_task *batch[FSCHED__GRAPH_READY_BATCH];
    uint32_t i, n = 0;
    for (i = 0; i < g->nqueued; i++) {
        batch[n++] = g->sources.v[i];
        if (n < FSCHED__GRAPH_READY_BATCH && i + 1 < g->nqueued) continue;
        fsched__graph_queue_batch(batch, n, w, local);
        n = 0;
    }
    if (g->sources.n > g->nqueued) {
        /* relaxed, the run and the states: as in fsched__graph_queue */
        uint32_t run = FSCHED__LOAD(&g->run, FSCHED__RELAXED);
        for (i = g->nqueued; i < g->sources.n; i++) /* queued in the range job */
            FSCHED__STORE(&g->sources.v[i]->state, FSCHED__GRAPH_STATE(run, FSCHED_TASK_READY),
                          FSCHED__RELAXED);
        fsched__graph_push(w, fsched__graph_range(g, g->nqueued, g->sources.n));
    }
}

/* Completes the tasks that could not be queued (as failed), then ends the hold of the
   call that started the run: the run may end here. */
static void fsched__graph_started(fsched_graph *g, fsched__worker *w, fsched_graph_task *local) {
    while (local) {
        fsched_graph_task *t = local;
        local = t->local_next;
        t->local_next = NULL;
        fsched__graph_process_list(t, w);
    }
    fsched__graph_count_done(g, w, 1);
}

/* A run begun outside the scheduler starts on a worker: one job through the injector,
   and the sources go to that worker's deque, from where the others take them. */
static void fsched__graph_starter(fsched__job *job, fsched__worker *w) {
    fsched_graph *g = (fsched_graph *)((char *)job - offsetof(fsched_graph, starter));
    fsched_graph_task *local = NULL;
    fsched__mutex_lock(&g->lock);
    fsched__graph_queue_sources(g, w, &local);
    fsched__mutex_unlock(&g->lock);
    fsched__graph_started(g, w, local);
}

FIBERSCHED_API fsched_result fsched_graph_run(fsched_graph *g, fsched_sched *s) {
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    fsched_graph_task *local = NULL;
    fsched_result r;
    uint32_t i;
    if ((r = fsched__graph_check(g, __func__)) != FSCHED_OK) return r;
    if (!s && !(s = fsched_current()) &&
        (r = fsched__default_find_live(&s, __func__)) != FSCHED_OK)
        return r;
    if (w && w->sched != s) w = NULL; /* a task of another scheduler: from outside */
    if (!w && (r = fsched__sched_enter(s, 1, __func__)) != FSCHED_OK) return r;
    fsched__mutex_lock(&g->lock);
    /* acquire: pairs with the release that ended the last run */
    if (FSCHED__LOAD(&g->running, FSCHED__ACQUIRE)) {
        r = FSCHED__REFUSE(&g->logger, FSCHED_ERR_WRONG_STATE, "already running");
        goto unlock;
    }
    for (i = 0; i < g->placed.n; i++) {
        fsched_graph_task *t = g->placed.v[i];
        if (t->on_caller && !w) {
            r = FSCHED__REFUSE(&g->logger, FSCHED_ERR_WRONG_STATE,
                               "task '%s' runs on the caller, which is no "
                               "task or bound thread of the scheduler (fsched_bind it)",
                               t->name ? t->name : "");
            goto unlock;
        }
        if (t->placed.workers && !fsched__graph_workers_exist(s, t->placed.workers)) {
            r = FSCHED__REFUSE(&g->logger, FSCHED_ERR_INVALID_ARGUMENT,
                               "task '%s' may run only on workers the "
                               "scheduler does not have", t->name ? t->name : "");
            goto unlock;
        }
    }
    fsched__graph_restore(g);
    if (!fsched__graph_prepare(g)) {
        r = FSCHED_ERR_OUT_OF_MEMORY;
        goto unlock;
    }
    /* release and relaxed: counted as a spawn is (see fsched__spawn) */
    if (w) FSCHED__STORE_THREADS(&w->spawned, w->spawned + 1, FSCHED__RELEASE);
    else FSCHED__FETCH_ADD(&s->external_begun, (fsched__work_count)1, FSCHED__RELAXED);
    g->sched = s;
    g->caller_slot = w ? (int32_t)w->index : -1;
    g->unrestored = 1;
    for (i = 0; i < g->placed.n; i++)
        if (g->placed.v[i]->on_caller) g->placed.v[i]->placed.slot = g->caller_slot;
    g->cancel = 0;
    g->first_failed = NULL;
    g->n_failed = g->n_skipped = g->n_cancelled = 0;
    fsched_event_reset(&g->done);
    /* one more than the tasks: this call's hold, so that the run cannot end (and g be
       freed by a waiter) before the sources are queued */
    g->remaining = (uint64_t)g->ntasks + 1;
    /* release: the run's setup is visible to its tasks and its waiters (every task was
       armed for this run when it was built or when it completed in the last run) */
    FSCHED__STORE(&g->run, g->run + 1, FSCHED__RELEASE);
    FSCHED__STORE(&g->running, 1u, FSCHED__RELEASE);
    if (w) {
        fsched__graph_queue_sources(g, w, &local);
    } else { /* this call's hold goes to the starter */
        fsched__job *job = &g->starter;
        job->execute = fsched__graph_starter;
        fsched__injector_push(&s->injector, &job, 1);
        fsched__new_jobs(s, 1);
    }
unlock:
    fsched__mutex_unlock(&g->lock);
    if (!w) fsched__sched_release(s);
    if (r != FSCHED_OK) return r;
    if (w) {
        fsched_fiber *pinned = fsched__pin(); /* its local tasks run here, on w */
        fsched__graph_started(g, w, local);
        fsched__unpin(pinned);
    }
    return FSCHED_OK;
}

static fsched_result fsched__graph_wait(fsched_graph *g, uint64_t timeout_ns, int timed,
                                        fsched_graph_outcome *out, const char *what) {
    fsched_graph_outcome o;
    fsched_graph_task *cur = fsched__graph_current();
    fsched_result r;
    uint32_t spins = 0, run;
    if ((r = fsched__graph_check(g, what)) != FSCHED_OK) return r;
    fsched__mutex_lock(&g->lock);
    run = g->run; /* the run this call reports on: the current one, or the last */
    fsched__mutex_unlock(&g->lock);
    if (!run) return FSCHED__MISUSE(&g->logger, FSCHED_ERR_WRONG_STATE, "%s: never ran", what);
    /* acquire, as every read of `running` outside a run's tasks */
    if (cur && cur->graph == g && FSCHED__LOAD(&g->running, FSCHED__ACQUIRE))
        return FSCHED__MISUSE(&g->logger, FSCHED_ERR_WRONG_STATE,
                              "%s: a task cannot wait for its own graph", what);
    for (;;) {
        FSCHED__POINT(OUTCOME);
        fsched__mutex_lock(&g->lock);
        if (g->ended_run >= run) { /* how it ended, whatever ran since */
            o = g->outcome;
            break;
        }
        fsched__mutex_unlock(&g->lock);
        /* the event is set when `run` ends (or a later run, which the lock shows) */
        r = timed ? fsched_event_wait_for(&g->done, timeout_ns) : fsched_event_wait(&g->done);
        if (r != FSCHED_OK) return r;
    }
    fsched__mutex_unlock(&g->lock);
    /* the ender clears `running` last: wait for that (or for a later run, which began only
       after it), so that the caller may free g at once (acquire: pairs with the ender's
       release of `running`, and with fsched_graph_run's of `run`) */
    while (FSCHED__LOAD(&g->running, FSCHED__ACQUIRE) && FSCHED__LOAD(&g->run, FSCHED__ACQUIRE) == run)
        fsched__backoff(&spins);
    if (out) *out = o;
    return o.result;
}

FIBERSCHED_API fsched_result fsched_graph_wait(fsched_graph *g, fsched_graph_outcome *out) {
    return fsched__graph_wait(g, 0, 0, out, __func__);
}

FIBERSCHED_API fsched_result fsched_graph_wait_for(fsched_graph *g, uint64_t timeout_ns,
                                                   fsched_graph_outcome *out) {
    return fsched__graph_wait(g, timeout_ns, 1, out, __func__);
}

FIBERSCHED_API fsched_result fsched_graph_cancel(fsched_graph *g) {
    fsched_result r = fsched__graph_check(g, __func__);
    if (r != FSCHED_OK) return r;
    /* under the lock: the flag belongs to the run that is current now, never to one that
       begins later (fsched_graph_run clears it under the same lock) */
    fsched__mutex_lock(&g->lock);
    /* acquire, as every read of `running` outside a run's tasks */
    if (FSCHED__LOAD(&g->running, FSCHED__ACQUIRE) && g->ended_run != g->run) {
        FSCHED__POINT(CANCEL);
        /* release: tasks that see the flag see what the canceller did before */
        FSCHED__STORE(&g->cancel, 1u, FSCHED__RELEASE);
    }
    fsched__mutex_unlock(&g->lock);
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_graph_destroy(fsched_graph *g) {
    fsched_result r;
    uint32_t i;
    if (!g) return FSCHED_OK;
    if ((r = fsched__graph_check(g, __func__)) != FSCHED_OK) return r;
    /* acquire: pairs with the release that ended the last run, whose tasks came first */
    if (FSCHED__LOAD(&g->running, FSCHED__ACQUIRE))
        return FSCHED__REFUSE(&g->logger, FSCHED_ERR_WRONG_STATE, "the graph is running");
    fsched__mutex_lock(&g->lock);
    fsched__graph_restore(g); /* and the results */
    for (i = 0; i < g->ntasks; i++) {
        fsched_graph_task *t = fsched__graph_task_at(g, i);
        fsched__graph_free_preds(g, t);
        if (t->name) fsched__free(&g->allocator, t->name, strlen(t->name) + 1, 1);
    }
    fsched__mutex_unlock(&g->lock);
    for (i = 0; i < g->nchunks; i++)
        fsched__free(&g->allocator, g->task_chunks[i],
                     FSCHED__GRAPH_CHUNK_TASKS * FSCHED__GRAPH_TASK_STRIDE, FSCHED__CACHE_LINE);
    fsched__free(&g->allocator, g->task_chunks, g->chunks_cap * sizeof *g->task_chunks,
                 sizeof(void *));
    fsched__slab_destroy(&g->edge_slab, &g->allocator);
    fsched__slab_destroy(&g->live_slab, &g->allocator);
    fsched__task_set_free(g, &g->sources);
    fsched__free(&g->allocator, g->ranges, g->ranges_cap * sizeof *g->ranges, sizeof(void *));
    fsched__task_set_free(g, &g->placed);
    fsched__task_set_free(g, &g->touched);
    if (g->name) fsched__free(&g->allocator, g->name, strlen(g->name) + 1, 1);
    fsched_event_destroy(&g->done);
    fsched__mutex_destroy(&g->lock);
    fsched__live_remove(g);
    g->magic = FSCHED__GRAPH_DEAD;
    fsched__free(&g->allocator, g, sizeof *g, FSCHED__CACHE_LINE);
    return FSCHED_OK;
}

/* ---- composition ----------------------------------------------------------------- */

static int fsched__graph_run_sub(fsched_graph_task *self, void *arg) {
    fsched_graph *sub = (fsched_graph *)arg;
    fsched_sched *s = fsched_current();
    fsched_result r;
    (void)self;
    if (!s) return (int)FSCHED_ERR_WRONG_STATE;
    r = fsched_graph_run(sub, s);
    if (r == FSCHED_OK) r = fsched_graph_wait(sub, NULL);
    return (int)r;
}

FIBERSCHED_API fsched_result fsched_graph_add_graph(fsched_graph *g, fsched_graph *sub,
                                                    const fsched_graph_task_desc *desc,
                                                    fsched_graph_task **out) {
    fsched_result r = fsched__graph_check(sub, __func__);
    if (r != FSCHED_OK) return r;
    if (sub == g)
        return FSCHED__REFUSE(&g->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "a graph cannot contain itself");
    return fsched__graph_add(g, fsched__graph_run_sub, sub, desc, out, __func__);
}

/* ---- inside a task, and queries -------------------------------------------------- */

FIBERSCHED_API fsched_graph *fsched_graph_task_graph(const fsched_graph_task *t) {
    return t ? t->graph : NULL;
}

FIBERSCHED_API fsched_result fsched_graph_set_result(fsched_graph_task *self, void *result,
                                                     void (*release)(void *result, void *user),
                                                     void *user) {
    if (!self || fsched__graph_current() != self)
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_WRONG_STATE,
                              "only a task itself, while it runs");
    if (self->result || self->release) fsched__graph_release_result(self); /* replaced */
    self->result = result;
    self->release = release;
    self->release_user = user;
    if (!self->holds_result) { /* listed once per run, released when the run is over */
        fsched_graph *g = self->graph;
        /* relaxed: a guess the CAS checks; release: the task's fields before its entry,
           for the exchange that takes the list */
        fsched_graph_task *head = FSCHED__LOAD(&g->results, FSCHED__RELAXED);
        self->holds_result = 1;
        do self->result_next = head;
        while (!FSCHED__CAS_WEAK(&g->results, &head, self, FSCHED__RELEASE, FSCHED__RELAXED));
    }
    return FSCHED_OK;
}

FIBERSCHED_API void *fsched_graph_result(const fsched_graph_task *t) { return t ? t->result : NULL; }

FIBERSCHED_API size_t fsched_graph_pred_count(const fsched_graph_task *t) {
    return t ? t->npreds : 0;
}

FIBERSCHED_API fsched_graph_task *fsched_graph_pred(const fsched_graph_task *t, size_t i) {
    return t && i < t->npreds ? fsched__graph_pred_at(t, (uint32_t)i) : NULL;
}

FIBERSCHED_API int fsched_graph_is_cancelled(const fsched_graph_task *t) {
    /* acquire: pairs with the cancel's release */
    return t && FSCHED__LOAD(&t->graph->cancel, FSCHED__ACQUIRE) != 0;
}

FIBERSCHED_API int fsched_graph_cancelled(const fsched_graph_task *t) {
    return fsched_graph_is_cancelled(t);
}

/* A task's state in the current (or last) run: WAITING until the run reaches it. Acquire:
   pairs with the release that completed the task, and with fsched_graph_run's of `run`. */
static fsched_task_state fsched__graph_state(const fsched_graph_task *t) {
    uint64_t st = FSCHED__LOAD(&t->state, FSCHED__ACQUIRE);
    if ((uint32_t)(st >> 3) != FSCHED__LOAD(&t->graph->run, FSCHED__ACQUIRE))
        return FSCHED_TASK_WAITING;
    return (fsched_task_state)(st & 7u);
}

FIBERSCHED_API fsched_task_state fsched_graph_task_state(const fsched_graph_task *t) {
    return t ? fsched__graph_state(t) : FSCHED_TASK_WAITING;
}

FIBERSCHED_API int fsched_graph_task_status(const fsched_graph_task *t) {
    return t && fsched__graph_state(t) == FSCHED_TASK_FAILED ? t->status : 0;
}

FIBERSCHED_API const char *fsched_graph_task_name(const fsched_graph_task *t) {
    return t && t->name ? t->name : "";
}

FIBERSCHED_API size_t fsched_graph_task_count(fsched_graph *g) {
    size_t n;
    if (fsched__graph_check(g, __func__) != FSCHED_OK) return 0;
    fsched__mutex_lock(&g->lock);
    n = g->ntasks;
    fsched__mutex_unlock(&g->lock);
    return n;
}

/* ---- Graphviz -------------------------------------------------------------------- */

static void fsched__dot_text(void (*write)(const char *, size_t, void *), void *user,
                             const char *text) {
    write(text, strlen(text), user);
}

/* Writes text as the inside of a DOT string: quotes and backslashes escaped. */
static void fsched__dot_quoted(void (*write)(const char *, size_t, void *), void *user,
                               const char *text) {
    const char *p = text;
    for (; *p; p++) {
        if (*p == '"' || *p == '\\') {
            if (p > text) write(text, (size_t)(p - text), user);
            write(*p == '"' ? "\\\"" : "\\\\", 2, user);
            text = p + 1;
        } else if (*p == '\n') {
            if (p > text) write(text, (size_t)(p - text), user);
            write("\\n", 2, user);
            text = p + 1;
        }
    }
    if (p > text) write(text, (size_t)(p - text), user);
}

static void fsched__dot_number(void (*write)(const char *, size_t, void *), void *user,
                               uint32_t n) {
    char digits[FSCHED__NUMBER_BYTES];
    const char *text = fsched__number(digits, n, 10);
    write(text, strlen(text), user);
}

FIBERSCHED_API fsched_result fsched_graph_dump_dot(fsched_graph *g,
                                                   void (*write)(const char *text, size_t len,
                                                                 void *user),
                                                   void *user) {
    static const char *const state_names[] = {"waiting", "ready",  "running",
                                              "finished", "failed", "cancelled"};
    static const char *const state_colors[] = {"white", "lightyellow", "lightblue",
                                               "palegreen", "salmon", "lightgray"};
    fsched_result r = fsched__graph_check(g, __func__);
    uint32_t i;
    if (r != FSCHED_OK) return r;
    if (!write)
        return FSCHED__REFUSE(&g->logger, FSCHED_ERR_INVALID_ARGUMENT, "write is NULL");
    fsched__mutex_lock(&g->lock);
    fsched__dot_text(write, user, "digraph \"");
    fsched__dot_quoted(write, user, g->name ? g->name : "fibersched");
    fsched__dot_text(write, user, "\" {\n  node [shape=box, style=filled];\n");
    for (i = 0; i < g->ntasks; i++) {
        const fsched_graph_task *t = fsched__graph_task_at(g, i);
        uint32_t st = (uint32_t)fsched__graph_state(t);
        fsched__dot_text(write, user, "  t");
        fsched__dot_number(write, user, i);
        fsched__dot_text(write, user, " [label=\"");
        if (t->name) {
            fsched__dot_quoted(write, user, t->name);
        } else {
            fsched__dot_text(write, user, "#");
            fsched__dot_number(write, user, i);
        }
        fsched__dot_text(write, user, "\\n");
        fsched__dot_text(write, user, state_names[st]);
        fsched__dot_text(write, user, "\", fillcolor=");
        fsched__dot_text(write, user, state_colors[st]);
        fsched__dot_text(write, user, "];\n");
    }
    for (i = 0; i < g->ntasks; i++) { /* each task's incoming edges, in the order added */
        const fsched_graph_task *t = fsched__graph_task_at(g, i);
        uint32_t k;
        for (k = 0; k < t->npreds; k++) {
            fsched__dot_text(write, user, "  t");
            fsched__dot_number(write, user, fsched__graph_pred_at(t, k)->index);
            fsched__dot_text(write, user, " -> t");
            fsched__dot_number(write, user, i);
            fsched__dot_text(write, user, ";\n");
        }
    }
    fsched__dot_text(write, user, "}\n");
    fsched__mutex_unlock(&g->lock);
    return FSCHED_OK;
}


/* ===================================================================================== */
/*  pipeline: hubs, nodes, the debugging and the parallel scheduler, linear pipelines    */
/* ===================================================================================== */

#define FSCHED__HUB_LIVE 0x46534855u  /* "FSHU" */
#define FSCHED__NODE_LIVE 0x46534e4fu /* "FSNO" */
#define FSCHED__PIPE_LIVE 0x46535049u /* "FSPI" */
#define FSCHED__PIPE_DEAD 0xdead9193u

/* An envelope and the hub's bookkeeping of it. */
typedef struct fsched__env { /* a line each: neighbours are worked on by other nodes */
    FSCHED__ALIGN_LINE fsched_envelope pub; /* what users see; must be first */
    struct fsched__env *next;   /* in the free list */
    uint32_t stage;             /* MODIFY and PEEK links of the hub it has passed */
    uint32_t held;              /* attached to a MODIFY or PEEK link (it stays queued) */
} fsched__env;

struct fsched_hub {
    uint32_t magic;
    char *name;
    fsched_allocator allocator;
    fsched_logger logger;
    uint32_t lock;              /* spinlock: a hub is touched for a few instructions */
    fsched__env *envs;
    unsigned char *data;
    uint32_t count;
    size_t capacity;
    fsched__env *free_list;     /* empty envelopes */
    fsched__env **queue;        /* full envelopes, oldest first: a ring of `count` */
    uint32_t q_head, q_len;
    uint32_t n_stages;          /* MODIFY and PEEK links, in the order linked */
    fsched_link **links;        /* every link to the hub, for notifications */
    uint32_t n_links, links_cap;
    uint32_t full;              /* atomic copy of q_len */
};

struct fsched_link {
    /* read by the other nodes of the hub when they notify */
    FSCHED__ALIGN_LINE fsched_node *node;
    fsched_hub *hub;
    fsched_link_kind kind;
    uint32_t stage;             /* MODIFY, PEEK: its place among them on the hub */
    /* written by its node as it advances: a line apart */
    FSCHED__ALIGN_LINE fsched__env *env; /* the attached envelope, or NULL */
    uint32_t keep;              /* not committed by the current advance */
};

/* A node on the parallel scheduler is IDLE, or BUSY (queued, updating or advancing); a
   notification for a BUSY node makes it DIRTY, so that it looks again before it idles. */
#define FSCHED__NODE_IDLE 0u
#define FSCHED__NODE_BUSY 1u
#define FSCHED__NODE_DIRTY 2u

/* An advance: the node's callback and fsched_node_complete race to end it; whichever
   comes second finishes it (post_advance, commits). */
#define FSCHED__ADV_NONE 0u
#define FSCHED__ADV_ADVANCING 1u /* in the callback, not completed */
#define FSCHED__ADV_RETURNED 2u  /* the callback returned first */
#define FSCHED__ADV_COMPLETED 3u /* fsched_node_complete was called */

struct fsched_node {
    fsched__placed placed;      /* the node's updates as jobs of the parallel scheduler */
    uint32_t magic;
    char *label;
    fsched_node_desc desc;
    fsched_allocator allocator;
    fsched_logger logger;
    fsched_link **links;
    uint32_t n_links, links_cap;
    fsched_pipeline *pipeline;
    /* written by the nodes that notify it, on other workers: a line of its own */
    FSCHED__ALIGN_LINE uint32_t busy; /* atomic: FSCHED__NODE_* */
    FSCHED__ALIGN_LINE uint32_t phase; /* atomic: FSCHED__ADV_* */
    uint64_t advance_ns;        /* parallel scheduler: mean advance, UINT64_MAX unknown */
    int advanced;               /* what the completion said */
    int finished;               /* can_advance said FSCHED_NODE_FINISHED */
    fsched_node_report report;
};

#define FSCHED__PIPE_BUILDING 0u
#define FSCHED__PIPE_STEPPING 1u /* the debugging scheduler, initialized */
#define FSCHED__PIPE_RUNNING 2u  /* the parallel scheduler */
#define FSCHED__PIPE_ENDED 3u

struct fsched_pipeline {
    uint32_t magic;
#if defined(FSCHED__OS_NONE)
    fsched__live_entry live_entry; /* in the registry of live objects */
#endif
    char *name;
    void (*log)(const char *line, void *user);
    void *log_user;
    fsched_allocator allocator;
    fsched_logger logger;
    fsched_node **nodes;
    uint32_t n_nodes, nodes_cap;
    uint32_t state;             /* atomic: FSCHED__PIPE_*; each move a release, each read
                                   an acquire: what came before a move (building, a
                                   run, its end) is seen with the state it made */
    fsched_result result;
    /* the debugging scheduler */
    uint32_t next;              /* the node to update next */
    uint64_t generation;
    int advanced_in_generation;
    fsched_event completed;     /* an advance completed elsewhere (auto reset) */
    /* the parallel scheduler */
    fsched_sched *sched;
    fsched_event done;          /* manual reset: every node is idle */
    FSCHED__ALIGN_LINE uint32_t active; /* atomic: nodes not idle */
};

/* ---- the log: lines built from pieces, without stdio (deterministic everywhere) ---- */

/* Writes "[scheduler]: " and the pieces (b and c may be NULL) to the pipeline's log:
   the lines of noarr's debugging scheduler, word for word, so that logs compare. */
static void fsched__pipe_log(const fsched_pipeline *p, const char *a, const char *b,
                             const char *c) {
    fsched__line l;
    if (!p->log) return;
    l.n = 0;
    l.text[0] = 0;
    fsched__line_add(&l, "[scheduler]: ");
    fsched__line_add(&l, a);
    if (b) fsched__line_add(&l, b);
    if (c) fsched__line_add(&l, c);
    p->log(l.text, p->log_user);
}

static const char *fsched__link_kind_verb(fsched_link_kind kind) {
    return kind == FSCHED_LINK_PRODUCE ? "produce into"
           : kind == FSCHED_LINK_CONSUME ? "consume from"
           : kind == FSCHED_LINK_MODIFY ? "modify in"
                                        : "peek into";
}

static char *fsched__strdup_or_null(const fsched_allocator *a, const char *text, int *failed) {
    size_t n;
    char *copy;
    *failed = 0;
    if (!text || !*text) return NULL;
    n = strlen(text) + 1;
    copy = (char *)fsched__alloc(a, n, 1);
    if (copy) memcpy(copy, text, n);
    else *failed = 1;
    return copy;
}

static void fsched__free_str(const fsched_allocator *a, char *text) {
    if (text) fsched__free(a, text, strlen(text) + 1, 1);
}

/* ---- hubs ------------------------------------------------------------------------ */

FIBERSCHED_API fsched_result fsched_hub_create(const fsched_hub_desc *desc, fsched_hub **out) {
    fsched_hub_desc d;
    fsched_allocator a;
    fsched_hub *h;
    uint32_t i;
    int failed;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (!out) return FSCHED__REFUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (d.envelopes == 0 || d.envelopes > (1u << 24) ||
        (d.capacity && d.capacity > SIZE_MAX / d.envelopes))
        return FSCHED__REFUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "%lu envelopes of %lu bytes",
                              (unsigned long)d.envelopes, (unsigned long)d.capacity);
    a = fsched__allocator_resolve(&d.allocator);
    h = (fsched_hub *)fsched__alloc(&a, sizeof *h, FSCHED__CACHE_LINE);
    if (!h) return FSCHED_ERR_OUT_OF_MEMORY;
    memset(h, 0, sizeof *h);
    h->allocator = a;
    h->logger = d.logger;
    h->count = d.envelopes;
    h->capacity = d.capacity;
    h->name = fsched__strdup_or_null(&a, d.name, &failed);
    h->envs = (fsched__env *)fsched__alloc(&a, h->count * sizeof *h->envs, FSCHED__CACHE_LINE);
    h->queue = (fsched__env **)fsched__alloc(&a, h->count * sizeof *h->queue, sizeof(void *));
    if (d.capacity)
        h->data = (unsigned char *)fsched__alloc(&a, h->count * d.capacity, FSCHED__CACHE_LINE);
    if (failed || !h->envs || !h->queue || (d.capacity && !h->data)) {
        h->magic = FSCHED__HUB_LIVE;
        fsched_hub_destroy(h);
        return FSCHED_ERR_OUT_OF_MEMORY;
    }
    for (i = h->count; i-- > 0;) {
        fsched__env *e = &h->envs[i];
        memset(e, 0, sizeof *e);
        e->pub.data = h->data ? h->data + (size_t)i * d.capacity : NULL;
        e->pub.capacity = d.capacity;
        e->next = h->free_list;
        h->free_list = e;
    }
    h->magic = FSCHED__HUB_LIVE;
    *out = h;
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_hub_destroy(fsched_hub *h) {
    fsched_allocator a;
    if (!h) return FSCHED_OK;
    if (h->magic != FSCHED__HUB_LIVE)
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "not a live hub");
    if (h->n_links)
        return FSCHED__REFUSE(&h->logger, FSCHED_ERR_WRONG_STATE,
                              "nodes are still linked to hub '%s'",
                              h->name ? h->name : "");
    a = h->allocator;
    fsched__free(&a, h->data, h->count * h->capacity, FSCHED__CACHE_LINE);
    fsched__free(&a, h->envs, h->count * sizeof *h->envs, FSCHED__CACHE_LINE);
    fsched__free(&a, h->queue, h->count * sizeof *h->queue, sizeof(void *));
    fsched__free(&a, h->links, h->links_cap * sizeof *h->links, sizeof(void *));
    fsched__free_str(&a, h->name);
    h->magic = FSCHED__PIPE_DEAD;
    fsched__free(&a, h, sizeof *h, FSCHED__CACHE_LINE);
    return FSCHED_OK;
}

/* Relaxed: a count written under the hub's lock, read without it as a statistic. */
FIBERSCHED_API uint32_t fsched_hub_full_count(const fsched_hub *h) {
    return h && h->magic == FSCHED__HUB_LIVE ? FSCHED__LOAD(&h->full, FSCHED__RELAXED) : 0;
}

FIBERSCHED_API const char *fsched_hub_name(const fsched_hub *h) {
    return h && h->name ? h->name : "";
}

/* Under the hub's lock: an envelope for link l, or NULL (see fsched_link_kind). Relaxed,
   the count: see fsched_hub_full_count. */
static fsched__env *fsched__hub_take(fsched_hub *h, const fsched_link *l) {
    fsched__env *e;
    uint32_t i;
    switch (l->kind) {
    case FSCHED_LINK_PRODUCE:
        if ((e = h->free_list) != NULL) h->free_list = e->next;
        return e;
    case FSCHED_LINK_CONSUME:
        if (!h->q_len) return NULL;
        e = h->queue[h->q_head];
        if (e->stage != h->n_stages || e->held) return NULL;
        h->q_head = (h->q_head + 1) % h->count;
        h->q_len--;
        FSCHED__STORE(&h->full, h->q_len, FSCHED__RELAXED);
        return e;
    default: /* MODIFY, PEEK: the oldest envelope at this link's stage (stages only go
                down along the queue, and each stage link holds one envelope at most) */
        for (i = 0; i < h->q_len; i++) {
            e = h->queue[(h->q_head + i) % h->count];
            if (e->stage == l->stage) {
                if (e->held) return NULL;
                e->held = 1;
                return e;
            }
            if (e->stage < l->stage) return NULL;
        }
        return NULL;
    }
}

/* Under the hub's lock: hands e on as link l commits it. Returns the kind of link whose
   nodes may now advance (with *stage for MODIFY/PEEK links), as a notification. Relaxed,
   the count: see fsched_hub_full_count. */
static fsched_link_kind fsched__hub_commit(fsched_hub *h, const fsched_link *l, fsched__env *e,
                                           uint32_t *stage) {
    switch (l->kind) {
    case FSCHED_LINK_PRODUCE:
        e->stage = 0;
        e->held = 0;
        h->queue[(h->q_head + h->q_len) % h->count] = e;
        h->q_len++;
        FSCHED__STORE(&h->full, h->q_len, FSCHED__RELAXED);
        *stage = 0;
        return h->n_stages ? FSCHED_LINK_MODIFY : FSCHED_LINK_CONSUME;
    case FSCHED_LINK_CONSUME:
        e->next = h->free_list;
        h->free_list = e;
        return FSCHED_LINK_PRODUCE;
    default:
        e->stage++;
        e->held = 0;
        *stage = e->stage;
        return e->stage < h->n_stages ? FSCHED_LINK_MODIFY : FSCHED_LINK_CONSUME;
    }
}

/* ---- nodes and links ------------------------------------------------------------- */

FIBERSCHED_API fsched_result fsched_node_create(const fsched_node_desc *desc, fsched_node **out) {
    fsched_allocator a;
    fsched_node *n;
    int failed;
    if (!out) return FSCHED__REFUSE(desc ? &desc->logger : NULL, FSCHED_ERR_INVALID_ARGUMENT,
                                    "out is NULL");
    *out = NULL;
    if (!desc || !desc->advance)
        return FSCHED__REFUSE(desc ? &desc->logger : NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "a node needs an advance callback");
    a = fsched__allocator_resolve(&desc->allocator);
    n = (fsched_node *)fsched__alloc(&a, sizeof *n, FSCHED__CACHE_LINE);
    if (!n) return FSCHED_ERR_OUT_OF_MEMORY;
    memset(n, 0, sizeof *n);
    n->desc = *desc;
    n->allocator = a;
    n->logger = desc->logger;
    n->label = fsched__strdup_or_null(&a, desc->label, &failed);
    if (failed) {
        fsched__free(&a, n, sizeof *n, FSCHED__CACHE_LINE);
        return FSCHED_ERR_OUT_OF_MEMORY;
    }
    n->desc.label = n->label;
    n->placed.job.execute = NULL; /* set when a parallel run starts */
    n->placed.slot = -1;
    n->placed.level = FSCHED__LEVEL_NORMAL;
    n->report.label = n->label ? n->label : "";
    n->advance_ns = UINT64_MAX;
    n->magic = FSCHED__NODE_LIVE;
    *out = n;
    return FSCHED_OK;
}

static void fsched__node_free(fsched_node *n) {
    fsched_allocator a = n->allocator;
    uint32_t i;
    for (i = 0; i < n->n_links; i++) {
        fsched_link *l = n->links[i];
        fsched_hub *h = l->hub;
        uint32_t k;
        for (k = 0; k < h->n_links; k++)
            if (h->links[k] == l) {
                h->links[k] = h->links[--h->n_links];
                break;
            }
        if (l->kind == FSCHED_LINK_MODIFY || l->kind == FSCHED_LINK_PEEK) {
            h->n_stages--; /* the later stages move up */
            for (k = 0; k < h->n_links; k++)
                if ((h->links[k]->kind == FSCHED_LINK_MODIFY ||
                     h->links[k]->kind == FSCHED_LINK_PEEK) && h->links[k]->stage > l->stage)
                    h->links[k]->stage--;
        }
        fsched__free(&a, l, sizeof *l, FSCHED__CACHE_LINE);
    }
    fsched__free(&a, n->links, n->links_cap * sizeof *n->links, sizeof(void *));
    fsched__free_str(&a, n->label);
    n->magic = FSCHED__PIPE_DEAD;
    fsched__free(&a, n, sizeof *n, FSCHED__CACHE_LINE);
}

FIBERSCHED_API fsched_result fsched_node_destroy(fsched_node *n) {
    if (!n) return FSCHED_OK;
    if (n->magic != FSCHED__NODE_LIVE)
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "not a live node");
    if (n->pipeline)
        return FSCHED__REFUSE(&n->logger, FSCHED_ERR_WRONG_STATE,
                              "node '%s' belongs to a pipeline",
                              n->label ? n->label : "");
    fsched__node_free(n);
    return FSCHED_OK;
}

static int fsched__grow_ptrs(const fsched_allocator *a, void ***v, uint32_t n, uint32_t *cap) {
    void **bigger;
    uint32_t c;
    if (n < *cap) return 1;
    c = *cap ? *cap * 2 : 4;
    bigger = (void **)fsched__alloc(a, c * sizeof *bigger, sizeof(void *));
    if (!bigger) return 0;
    if (n) memcpy(bigger, *v, n * sizeof *bigger);
    fsched__free(a, *v, *cap * sizeof *bigger, sizeof(void *));
    *v = bigger;
    *cap = c;
    return 1;
}

FIBERSCHED_API fsched_result fsched_node_link(fsched_node *n, fsched_hub *h, fsched_link_kind kind,
                                              fsched_link **out) {
    fsched_link *l;
    if (out) *out = NULL;
    if (!n || n->magic != FSCHED__NODE_LIVE || !h || h->magic != FSCHED__HUB_LIVE ||
        (unsigned)kind > (unsigned)FSCHED_LINK_PEEK)
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "a NULL or dead node or hub, or an unknown kind");
    if (n->pipeline)
        return FSCHED__REFUSE(&n->logger, FSCHED_ERR_WRONG_STATE,
                              "node '%s' already belongs to a pipeline",
                              n->label ? n->label : "");
    if (!fsched__grow_ptrs(&n->allocator, (void ***)&n->links, n->n_links, &n->links_cap) ||
        !fsched__grow_ptrs(&h->allocator, (void ***)&h->links, h->n_links, &h->links_cap))
        return FSCHED_ERR_OUT_OF_MEMORY;
    l = (fsched_link *)fsched__alloc(&n->allocator, sizeof *l, FSCHED__CACHE_LINE);
    if (!l) return FSCHED_ERR_OUT_OF_MEMORY;
    memset(l, 0, sizeof *l);
    l->node = n;
    l->hub = h;
    l->kind = kind;
    if (kind == FSCHED_LINK_MODIFY || kind == FSCHED_LINK_PEEK) l->stage = h->n_stages++;
    n->links[n->n_links++] = l;
    h->links[h->n_links++] = l;
    if (out) *out = l;
    return FSCHED_OK;
}

FIBERSCHED_API fsched_envelope *fsched_link_envelope(const fsched_link *l) {
    return l && l->env ? &l->env->pub : NULL;
}

FIBERSCHED_API fsched_result fsched_link_keep(fsched_link *l) {
    if (!l) return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                                  "link is NULL");
    l->keep = 1;
    return FSCHED_OK;
}

FIBERSCHED_API const char *fsched_node_label(const fsched_node *n) {
    return n && n->label ? n->label : "";
}

FIBERSCHED_API int fsched_node_is_served(const fsched_node *n) {
    uint32_t i;
    if (!n) return 0;
    for (i = 0; i < n->n_links; i++)
        if (!n->links[i]->env) return 0;
    return 1;
}

FIBERSCHED_API int fsched_node_served(const fsched_node *node) {
    return fsched_node_is_served(node);
}

FIBERSCHED_API fsched_result fsched_node_get_report(const fsched_node *n, fsched_node_report *out) {
    if (!n || n->magic != FSCHED__NODE_LIVE || !out)
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "NULL argument or dead node");
    *out = n->report;
    out->advance_ns = n->advance_ns == UINT64_MAX ? 0 : n->advance_ns;
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_node_report_get(const fsched_node *node,
                                                    fsched_node_report *out) {
    return fsched_node_get_report(node, out);
}

/* ---- updating a node (both schedulers) ------------------------------------------- */

static void fsched__node_notify(fsched_node *m, fsched__worker *w, fsched__placed **ready);

/* Advances shorter than this stay on the worker whose advance made them possible: moving
   one to another worker costs about as much (the envelopes' lines follow it, the other
   worker may have to be woken). */
#define FSCHED__NODE_SHORT_NS 1000u

/* Gives each link without an envelope one, if its hub has one for it. */
static void fsched__node_attach(fsched_node *n) {
    uint32_t i;
    for (i = 0; i < n->n_links; i++) {
        fsched_link *l = n->links[i];
        if (l->env) continue;
        fsched__spin_lock(&l->hub->lock);
        l->env = fsched__hub_take(l->hub, l);
        fsched__spin_unlock(&l->hub->lock);
    }
}

/* Whether the node can advance now: 1, 0, or FSCHED_NODE_FINISHED. */
static int fsched__node_can_advance(fsched_node *n) {
    int r;
    n->report.updates++;
    if (!n->desc.can_advance) return fsched_node_is_served(n);
    r = n->desc.can_advance(n, n->desc.user);
    return r == FSCHED_NODE_FINISHED ? r : r != 0;
}

/* Calls advance; returns 1 when the advance completed before the callback returned (the
   caller finishes it), 0 when fsched_node_complete will come later. On the parallel
   scheduler (w), the first advance and every eighth one are timed: advance_ns follows
   their mean (weight 1/8), which decides where the node runs when it is made ready.
   A sample counts as at most 4x the threshold: a preempted advance cannot make a short
   node look long for hundreds of advances. */
/* Calls the node's advance, named by the node on the fiber it runs on. */
static void fsched__node_advance(fsched_node *n) {
    fsched_fiber *f = FSCHED__THREAD_NOW.current;
    fsched__running outer;
    if (!f) {
        n->desc.advance(n, n->desc.user);
        return;
    }
    outer = fsched__running_begin(f, FSCHED__CODE(n->desc.advance), n->label);
    n->desc.advance(n, n->desc.user);
    fsched__running_end(f, outer);
}

static int fsched__node_start_advance(fsched_node *n, fsched__worker *w) {
    uint32_t expected = FSCHED__ADV_ADVANCING, i;
    for (i = 0; i < n->n_links; i++) n->links[i]->keep = 0;
    FSCHED__TRACE(uint64_t trace_begin = fsched__trace_now();)
    /* relaxed: the advance, called next, is what lets anyone call fsched_node_complete */
    FSCHED__STORE(&n->phase, FSCHED__ADV_ADVANCING, FSCHED__RELAXED);
    if (w && (n->report.advances & 7u) == 0u) {
        uint64_t begin = fsched__sched_now(w->sched), took;
        fsched__node_advance(n);
        took = fsched__sched_now(w->sched) - begin;
        if (took > 4u * FSCHED__NODE_SHORT_NS) took = 4u * FSCHED__NODE_SHORT_NS;
        n->advance_ns = n->advance_ns == UINT64_MAX ? took
                                                    : n->advance_ns - n->advance_ns / 8 + took / 8;
    } else {
        fsched__node_advance(n);
    }
    FSCHED__TRACE(fsched__trace_record(FSCHED__TRACE_ADVANCE, trace_begin,
                                       FSCHED__CODE(n->desc.advance), n->label, 0);)
    /* acq_rel: decides with fsched_node_complete who finishes; acquires its `advanced` */
    return !FSCHED__CAS(&n->phase, &expected, FSCHED__ADV_RETURNED, FSCHED__ACQ_REL,
                        FSCHED__ACQUIRE);
}

/* Ends an advance: post_advance, then the links commit their envelopes (when it
   advanced, but for those kept), notifying (on the parallel scheduler, w) the nodes
   that may now advance; those to run next on w are listed in *ready. */
static void fsched__node_finish(fsched_node *n, fsched__worker *w, fsched__placed **ready) {
    int advanced = n->advanced;
    uint32_t i;
    /* relaxed: the completion is taken; only the next advance reads the phase again */
    FSCHED__STORE(&n->phase, FSCHED__ADV_NONE, FSCHED__RELAXED);
    if (n->desc.post_advance) n->desc.post_advance(n, n->desc.user, advanced);
    if (advanced) n->report.advances++;
    for (i = 0; i < n->n_links; i++) {
        fsched_link *l = n->links[i];
        fsched_hub *h = l->hub;
        fsched_link_kind wake;
        uint32_t stage = 0, k;
        if (!advanced || !l->env || l->keep) {
            l->keep = 0;
            continue;
        }
        fsched__spin_lock(&h->lock);
        wake = fsched__hub_commit(h, l, l->env, &stage);
        /* the parallel scheduler's node attaches again next: under the same lock, as the
           other side of the hub has written its line meanwhile */
        l->env = w ? fsched__hub_take(h, l) : NULL;
        fsched__spin_unlock(&h->lock);
        if (!w) continue;
        /* the hub's links do not change during a run: read without the lock */
        for (k = 0; k < h->n_links; k++) {
            const fsched_link *o = h->links[k];
            int match = wake == FSCHED_LINK_MODIFY
                            ? (o->kind == FSCHED_LINK_MODIFY || o->kind == FSCHED_LINK_PEEK) &&
                                  o->stage == stage
                            : o->kind == wake;
            if (match && o->node != n) fsched__node_notify(o->node, w, ready);
        }
    }
}

static void fsched__link_return(fsched_link *l);

/* A node that finished gives its envelopes back to their hubs, and (on the parallel
   scheduler, w) tells the other nodes of those hubs, which may now use them. Returns
   how many envelopes it gave back that another node's link could take (a producer's or
   a consumer's, where the hub has another of that kind that is not finished). */
static uint32_t fsched__node_give_back(fsched_node *n, fsched__worker *w) {
    uint32_t i, k, given = 0;
    n->finished = 1;
    for (i = 0; i < n->n_links; i++) {
        fsched_link *l = n->links[i];
        fsched_hub *h = l->hub;
        if (!l->env) continue;
        fsched__spin_lock(&h->lock);
        fsched__link_return(l);
        fsched__spin_unlock(&h->lock);
        for (k = 0; k < h->n_links; k++) {
            const fsched_link *o = h->links[k];
            if (o->node != n && !o->node->finished && o->kind == l->kind &&
                (l->kind == FSCHED_LINK_PRODUCE || l->kind == FSCHED_LINK_CONSUME)) {
                given++;
                break;
            }
        }
        if (!w) continue;
        for (k = 0; k < h->n_links; k++)
            if (h->links[k]->node != n) fsched__node_notify(h->links[k]->node, w, NULL);
    }
    return given;
}

/* ---- how a run ends: reports, terminate, the result ------------------------------ */

/* Whether link l (without an envelope) waits for input that can never come: nothing is
   queued at or before its stage of the hub, and every earlier link (producers, earlier
   MODIFY and PEEK links) belongs to a node that is done. */
static int fsched__link_drained(const fsched_link *l) {
    const fsched_hub *h = l->hub;
    uint32_t stage = l->kind == FSCHED_LINK_CONSUME ? h->n_stages : l->stage, i, k;
    if (l->kind == FSCHED_LINK_PRODUCE) return 0; /* waits for an empty envelope */
    for (i = 0; i < h->q_len; i++)
        if (h->queue[(h->q_head + i) % h->count]->stage <= stage) return 0;
    for (k = 0; k < h->n_links; k++) {
        const fsched_link *o = h->links[k];
        int earlier = o->kind == FSCHED_LINK_PRODUCE ||
                      ((o->kind == FSCHED_LINK_MODIFY || o->kind == FSCHED_LINK_PEEK) &&
                       o->stage < stage);
        if (earlier && o->node->report.end != FSCHED_NODE_DONE) return 0;
    }
    return 1;
}

/* Computes every node's end (to a fixed point: a node waiting on a drained hub is done
   once the hub's producers are), calls terminate in order, and sets the result. */
static void fsched__pipe_end(fsched_pipeline *p) {
    uint32_t i, k;
    int changed = 1, starved = 0;
    for (i = 0; i < p->n_nodes; i++) {
        fsched_node *n = p->nodes[i];
        /* finished, or declined with every link served */
        n->report.end = n->finished || fsched_node_is_served(n) ? FSCHED_NODE_DONE
                                                                : FSCHED_NODE_STARVED;
    }
    while (changed) {
        changed = 0;
        for (i = 0; i < p->n_nodes; i++) {
            fsched_node *n = p->nodes[i];
            if (n->report.end == FSCHED_NODE_DONE) continue;
            for (k = 0; k < n->n_links; k++)
                if (!n->links[k]->env && !fsched__link_drained(n->links[k])) break;
            if (k == n->n_links) {
                n->report.end = FSCHED_NODE_DONE;
                changed = 1;
            }
        }
    }
    for (i = 0; i < p->n_nodes; i++) {
        fsched_node *n = p->nodes[i];
        n->report.waiting_on = NULL;
        n->report.waiting_as = FSCHED_LINK_PRODUCE;
        if (n->report.end == FSCHED_NODE_STARVED) {
            for (k = 0; k < n->n_links; k++)
                if (!n->links[k]->env && !fsched__link_drained(n->links[k])) break;
            n->report.waiting_on = n->links[k]->hub;
            n->report.waiting_as = n->links[k]->kind;
            starved = 1;
        }
    }
    fsched__pipe_log(p, "Termination condition met.", NULL, NULL);
    for (i = 0; i < p->n_nodes; i++) { /* beyond noarr's lines: why a node starved */
        fsched_node *n = p->nodes[i];
        fsched__line l;
        if (n->report.end != FSCHED_NODE_STARVED) continue;
        l.n = 0;
        l.text[0] = 0;
        fsched__line_add(&l, " is starved: it waits to ");
        fsched__line_add(&l, fsched__link_kind_verb(n->report.waiting_as));
        fsched__line_add(&l, " hub ");
        fsched__line_add(&l, fsched_hub_name(n->report.waiting_on));
        fsched__line_add(&l, ".");
        fsched__pipe_log(p, "Node ", n->report.label, l.text);
    }
    fsched__pipe_log(p, "Starting pipeline termination...", NULL, NULL);
    for (i = 0; i < p->n_nodes; i++) {
        fsched_node *n = p->nodes[i];
        fsched__pipe_log(p, "Terminating node ", n->report.label, " ...");
        if (n->desc.terminate) n->desc.terminate(n, n->desc.user);
    }
    p->result = starved ? FSCHED_ERR_STALLED : FSCHED_OK;
    fsched__pipe_log(p, "Pipeline terminated.", NULL, NULL);
    /* release: see the pipeline's `state` */
    FSCHED__STORE(&p->state, FSCHED__PIPE_ENDED, FSCHED__RELEASE);
}

/* ---- pipelines and the debugging scheduler --------------------------------------- */

FIBERSCHED_API fsched_result fsched_pipeline_create(const fsched_pipeline_desc *desc,
                                                    fsched_pipeline **out) {
    fsched_pipeline_desc d;
    fsched_allocator a;
    fsched_pipeline *p;
    int failed;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    if (!out) return FSCHED__REFUSE(&d.logger, FSCHED_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    a = fsched__allocator_resolve(&d.allocator);
    p = (fsched_pipeline *)fsched__alloc(&a, sizeof *p, FSCHED__CACHE_LINE);
    if (!p) return FSCHED_ERR_OUT_OF_MEMORY;
    memset(p, 0, sizeof *p);
    p->allocator = a;
    p->logger = d.logger;
    p->log = d.log;
    p->log_user = d.log_user;
    p->name = fsched__strdup_or_null(&a, d.name, &failed);
    if (failed) {
        fsched__free(&a, p, sizeof *p, FSCHED__CACHE_LINE);
        return FSCHED_ERR_OUT_OF_MEMORY;
    }
    fsched_event_init(&p->completed, 0, 0);
    fsched_event_init(&p->done, 1, 0);
    p->magic = FSCHED__PIPE_LIVE;
    if (!FSCHED__LIVE_ADD(p)) {
        fsched__free_str(&a, p->name);
        fsched__free(&a, p, sizeof *p, FSCHED__CACHE_LINE);
        return FSCHED_ERR_OUT_OF_MEMORY;
    }
    *out = p;
    return FSCHED_OK;
}

/* FSCHED_OK for a live pipeline; a destroyed one is found gone without reading it. */
static fsched_result fsched__pipe_check(const fsched_pipeline *p, const char *what) {
    if (!fsched__live_check(p) || p->magic != FSCHED__PIPE_LIVE)
        return FSCHED__MISUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "%s: %s", what,
                              p ? "not a live pipeline (destroyed?)" : "the pipeline is NULL");
    return FSCHED_OK;
}

/* Gives the link's envelope back to its hub as it was before the link took it. */
static void fsched__link_return(fsched_link *l) {
    fsched_hub *h = l->hub;
    if (!l->env) return;
    if (l->kind == FSCHED_LINK_PRODUCE) {
        l->env->next = h->free_list;
        h->free_list = l->env;
    } else if (l->kind == FSCHED_LINK_CONSUME) { /* not consumed: first in line again */
        h->q_head = (h->q_head + h->count - 1) % h->count;
        h->queue[h->q_head] = l->env;
        h->q_len++;
        FSCHED__STORE(&h->full, h->q_len, FSCHED__RELAXED); /* relaxed: see fsched_hub_full_count */
    } else {
        l->env->held = 0;
    }
    l->env = NULL;
}

FIBERSCHED_API fsched_result fsched_pipeline_destroy(fsched_pipeline *p) {
    fsched_allocator a;
    uint32_t i, st;
    fsched_result r;
    if (!p) return FSCHED_OK;
    if ((r = fsched__pipe_check(p, __func__)) != FSCHED_OK) return r;
    /* acquire: see the pipeline's `state` */
    st = FSCHED__LOAD(&p->state, FSCHED__ACQUIRE);
    if (st == FSCHED__PIPE_RUNNING)
        return FSCHED__REFUSE(&p->logger, FSCHED_ERR_WRONG_STATE, "the pipeline is running");
    for (i = 0; i < p->n_nodes; i++) {
        fsched_node *n = p->nodes[i];
        uint32_t k;
        if (st == FSCHED__PIPE_STEPPING && n->desc.terminate) n->desc.terminate(n, n->desc.user);
        for (k = 0; k < n->n_links; k++) fsched__link_return(n->links[k]);
        n->pipeline = NULL;
        fsched__node_free(n);
    }
    a = p->allocator;
    fsched__free(&a, p->nodes, p->nodes_cap * sizeof *p->nodes, sizeof(void *));
    fsched_event_destroy(&p->completed);
    fsched_event_destroy(&p->done);
    fsched__free_str(&a, p->name);
    fsched__live_remove(p);
    p->magic = FSCHED__PIPE_DEAD;
    fsched__free(&a, p, sizeof *p, FSCHED__CACHE_LINE);
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_pipeline_add(fsched_pipeline *p, fsched_node *n) {
    fsched_result r;
    if ((r = fsched__pipe_check(p, __func__)) != FSCHED_OK) return r;
    if (!n || n->magic != FSCHED__NODE_LIVE || !n->desc.advance)
        return FSCHED__REFUSE(&p->logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "not a live node with an advance callback");
    /* acquire: see the pipeline's `state` */
    if (FSCHED__LOAD(&p->state, FSCHED__ACQUIRE) != FSCHED__PIPE_BUILDING || n->pipeline)
        return FSCHED__REFUSE(&p->logger, FSCHED_ERR_WRONG_STATE,
                              "%s",
                              n->pipeline ? "the node belongs to a pipeline already"
                                          : "the pipeline has started");
    if (!fsched__grow_ptrs(&p->allocator, (void ***)&p->nodes, p->n_nodes, &p->nodes_cap))
        return FSCHED_ERR_OUT_OF_MEMORY;
    p->nodes[p->n_nodes++] = n;
    n->pipeline = p;
    fsched__pipe_log(p, "Node has been added: ", n->report.label, NULL);
    return FSCHED_OK;
}

/* Calls every node's initialize, in order. */
static void fsched__pipe_initialize_nodes(fsched_pipeline *p) {
    uint32_t i;
    fsched__pipe_log(p, "Starting pipeline initialization...", NULL, NULL);
    for (i = 0; i < p->n_nodes; i++) {
        fsched_node *n = p->nodes[i];
        fsched__pipe_log(p, "Initializing node ", n->report.label, " ...");
        n->report.end = FSCHED_NODE_RUNNING;
        if (n->desc.initialize) n->desc.initialize(n, n->desc.user);
    }
    fsched__pipe_log(p, "Pipeline initialized.", NULL, NULL);
}

FIBERSCHED_API fsched_result fsched_pipeline_initialize(fsched_pipeline *p) {
    fsched_result r;
    if ((r = fsched__pipe_check(p, __func__)) != FSCHED_OK) return r;
    /* acquire: see the pipeline's `state` */
    if (FSCHED__LOAD(&p->state, FSCHED__ACQUIRE) != FSCHED__PIPE_BUILDING)
        return FSCHED__REFUSE(&p->logger, FSCHED_ERR_WRONG_STATE, "the pipeline has started");
    fsched__pipe_initialize_nodes(p);
    p->next = 0;
    p->generation = 0;
    /* release: see the pipeline's `state` */
    FSCHED__STORE(&p->state, FSCHED__PIPE_STEPPING, FSCHED__RELEASE);
    return FSCHED_OK;
}

/* The debugging scheduler's update of one node: every node, every generation (a finished
   one does nothing), as noarr's does. */
static fsched_result fsched__debug_update(fsched_pipeline *p, fsched_node *n) {
    int can;
    fsched__pipe_log(p, "Updating node ", n->report.label, " ...");
    if (n->finished) return FSCHED_OK;
    fsched__node_attach(n);
    can = fsched__node_can_advance(n);
    if (can == FSCHED_NODE_FINISHED) {
        /* envelopes it gives back may let others advance: progress when there were any */
        if (fsched__node_give_back(n, NULL)) p->advanced_in_generation = 1;
        return FSCHED_OK;
    }
    if (!can) return FSCHED_OK;
    if (!fsched__node_start_advance(n, NULL)) {
        /* completed elsewhere, later: wait for it (this keeps the order deterministic;
           nothing about it is logged, as when it comes is not). fsched_node_complete
           sets the event exactly once for such a completion, as its last touch of the
           pipeline: wait for the event even when the phase already says completed */
        fsched_result r = fsched_event_wait(&p->completed);
        if (r != FSCHED_OK) {
            fsched__pipe_log(p, "Node ", n->report.label, " never completed its advance.");
            return r;
        }
        /* acquire, though the event's wait orders it already: the phase came first */
        FIBERSCHED_ASSERT(FSCHED__LOAD(&n->phase, FSCHED__ACQUIRE) == FSCHED__ADV_COMPLETED);
    }
    /* an advance that moved nothing is no progress (a generation of those ends the run) */
    if (n->advanced) {
        p->advanced_in_generation = 1;
        fsched__pipe_log(p, "Node did advance data.", NULL, NULL);
    }
    fsched__node_finish(n, NULL, NULL); /* post_advance after the outcome's line */
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_pipeline_step(fsched_pipeline *p) {
    fsched_result r;
    uint32_t st;
    if ((r = fsched__pipe_check(p, __func__)) != FSCHED_OK) return r;
    /* acquire: see the pipeline's `state` */
    st = FSCHED__LOAD(&p->state, FSCHED__ACQUIRE);
    if (st == FSCHED__PIPE_BUILDING) fsched_pipeline_initialize(p); /* the first step does */
    else if (st != FSCHED__PIPE_STEPPING)
        return FSCHED__REFUSE(&p->logger, FSCHED_ERR_WRONG_STATE,
                              "the run has ended or runs on the "
                              "parallel scheduler");
    if (p->next == 0) p->advanced_in_generation = 0;
    if (p->next < p->n_nodes) {
        r = fsched__debug_update(p, p->nodes[p->next]);
        if (r != FSCHED_OK) { /* an advance that cannot complete: the run ends here */
            fsched__pipe_end(p);
            p->result = r;
            return r;
        }
        p->next++;
    }
    if (p->next == p->n_nodes) {
        fsched__line l;
        l.n = 0;
        l.text[0] = 0;
        fsched__line_num(&l, p->generation++);
        fsched__pipe_log(p, "Generation ", l.text, " has ended.");
        p->next = 0;
        if (!p->advanced_in_generation) {
            fsched__pipe_end(p);
            return p->result;
        }
    }
    return FSCHED_OK;
}

/* Acquire, each read of the state: see the pipeline's `state`. */
FIBERSCHED_API fsched_result fsched_pipeline_run_until(fsched_pipeline *p, int (*pred)(void *user),
                                                       void *user) {
    fsched_result r;
    if ((r = fsched__pipe_check(p, __func__)) != FSCHED_OK) return r;
    if (!pred)
        return FSCHED__REFUSE(&p->logger, FSCHED_ERR_INVALID_ARGUMENT, "pred is NULL");
    if (FSCHED__LOAD(&p->state, FSCHED__ACQUIRE) != FSCHED__PIPE_STEPPING)
        return fsched_pipeline_step(p); /* the same refusal */
    while (!pred(user)) {
        r = fsched_pipeline_step(p);
        if (FSCHED__LOAD(&p->state, FSCHED__ACQUIRE) == FSCHED__PIPE_ENDED) return r;
    }
    return FSCHED_OK;
}

FIBERSCHED_API int fsched_pipeline_is_finished(const fsched_pipeline *p) {
    /* acquire: see the pipeline's `state` */
    return fsched__live_check(p) && p->magic == FSCHED__PIPE_LIVE &&
           FSCHED__LOAD(&p->state, FSCHED__ACQUIRE) == FSCHED__PIPE_ENDED;
}

FIBERSCHED_API int fsched_pipeline_finished(const fsched_pipeline *p) {
    return fsched_pipeline_is_finished(p);
}

FIBERSCHED_API fsched_result fsched_pipeline_describe(const fsched_pipeline *p,
                                                      void (*write)(const char *text,
                                                                    size_t len, void *user),
                                                      void *user) {
    fsched_result r;
    uint32_t i;
    if ((r = fsched__pipe_check(p, __func__)) != FSCHED_OK) return r;
    if (!write)
        return FSCHED__REFUSE(&p->logger, FSCHED_ERR_INVALID_ARGUMENT, "write is NULL");
    for (i = 0; i < p->n_nodes; i++) {
        const fsched_node_report *rep = &p->nodes[i]->report;
        fsched__line l;
        l.n = 0;
        l.text[0] = 0;
        fsched__line_add(&l, "node \"");
        fsched__line_add(&l, rep->label);
        fsched__line_add(&l, "\": ");
        if (rep->end == FSCHED_NODE_RUNNING) {
            fsched__line_add(&l, "running");
        } else if (rep->end == FSCHED_NODE_DONE) {
            fsched__line_add(&l, "done");
        } else {
            fsched__line_add(&l, "starved, waiting to ");
            fsched__line_add(&l, fsched__link_kind_verb(rep->waiting_as));
            fsched__line_add(&l, " hub \"");
            fsched__line_add(&l, fsched_hub_name(rep->waiting_on));
            fsched__line_add(&l, "\"");
        }
        fsched__line_add(&l, "; ");
        fsched__line_num(&l, rep->advances);
        fsched__line_add(&l, " advances, ");
        fsched__line_num(&l, rep->updates);
        fsched__line_add(&l, " updates\n");
        write(l.text, l.n, user);
    }
    return FSCHED_OK;
}

/* ---- the parallel scheduler ------------------------------------------------------ */

/* Something m depends on changed: an idle node is queued, a busy one looks again. A
   short node is listed in *ready (when given) to run next on w, but on a bound slot,
   which may leave (nodes are placed at the normal level, for any slot). Relaxed, the
   first look: a notifier that sees DIRTY returns, having committed under a hub's lock
   that the node's next look takes (fsched__node_attach), so that look sees its change. */
static void fsched__node_notify(fsched_node *m, fsched__worker *w, fsched__placed **ready) {
    uint32_t st = FSCHED__LOAD(&m->busy, FSCHED__RELAXED);
    for (;;) {
        if (st == FSCHED__NODE_DIRTY) return;
        if (st == FSCHED__NODE_BUSY) {
            /* release: what changed is visible when the node looks again */
            if (FSCHED__CAS(&m->busy, &st, FSCHED__NODE_DIRTY, FSCHED__RELEASE, FSCHED__RELAXED))
                return;
            continue;
        }
        /* acq_rel: the node's last update happens before this one */
        if (FSCHED__CAS(&m->busy, &st, FSCHED__NODE_BUSY, FSCHED__ACQ_REL, FSCHED__RELAXED)) {
            /* relaxed: the notifier is active itself, so the count cannot reach zero
               meanwhile; the count's own order is total */
            FSCHED__FETCH_ADD(&m->pipeline->active, 1u, FSCHED__RELAXED);
            if (ready && !FSCHED__BOUND(w) && m->advance_ns < FSCHED__NODE_SHORT_NS) {
                m->placed.next = *ready;
                *ready = &m->placed;
            } else {
                fsched__place(m->pipeline->sched, w, &m->placed); /* cannot fail: no slot set */
            }
            return;
        }
    }
}

/* Runs node n until it cannot advance, or until its advance made short nodes ready:
   those run next on w, then n again (still busy), its envelopes' lines still at hand. */
static void fsched__node_run(fsched__job *job, fsched__worker *w) {
    fsched_node *n = (fsched_node *)job;
    fsched_pipeline *p = n->pipeline;
    fsched__placed *ready = NULL, *last;
    int declined = 0; /* the last advance moved nothing: ask again only after a change */
    for (;;) {
        uint32_t expected = FSCHED__NODE_BUSY;
        int can = 0;
        /* acquire: the completion's `advanced` */
        if (FSCHED__LOAD(&n->phase, FSCHED__ACQUIRE) == FSCHED__ADV_COMPLETED) {
            fsched__node_finish(n, w, &ready); /* an advance completed elsewhere */
            declined = !n->advanced;
            if (ready) break;
        }
        if (!n->finished && !declined) {
            fsched__node_attach(n);
            can = fsched__node_can_advance(n);
            if (can == FSCHED_NODE_FINISHED) {
                fsched__node_give_back(n, w);
                can = 0;
            }
        }
        if (can) {
            if (!fsched__node_start_advance(n, w)) return; /* fsched_node_complete queues it */
            fsched__node_finish(n, w, &ready);
            declined = !n->advanced;
            if (ready) break;
            continue;
        }
        /* acq_rel: a notification that made it DIRTY is seen, or sees this update */
        if (FSCHED__CAS(&n->busy, &expected, FSCHED__NODE_IDLE, FSCHED__ACQ_REL,
                        FSCHED__ACQUIRE)) {
            /* acq_rel: the last node to idle sees every update before it */
            if (FSCHED__FETCH_SUB(&p->active, 1u, FSCHED__ACQ_REL) == 1)
                fsched_event_set(&p->done); /* every node idle: the run is over */
            return;
        }
        /* DIRTY: look again (relaxed: the failed CAS acquired it; see fsched__node_notify) */
        FSCHED__STORE(&n->busy, FSCHED__NODE_BUSY, FSCHED__RELAXED);
        declined = 0;
    }
    n->placed.next = w->local;
    for (last = ready; last->next; last = last->next) {
    }
    last->next = &n->placed;
    w->local = ready;
}

FIBERSCHED_API fsched_result fsched_node_complete(fsched_node *n, int advanced) {
    uint32_t ph;
    if (!n || n->magic != FSCHED__NODE_LIVE)
        return FSCHED__REFUSE((const fsched_logger *)NULL, FSCHED_ERR_INVALID_ARGUMENT,
                              "not a live node");
    ph = FSCHED__LOAD(&n->phase, FSCHED__RELAXED); /* relaxed: a guess the CAS checks */
    for (;;) {
        if (ph != FSCHED__ADV_ADVANCING && ph != FSCHED__ADV_RETURNED)
            return FSCHED__REFUSE(&n->logger, FSCHED_ERR_WRONG_STATE,
                                  "node '%s' has no advance in flight",
                                  n->label ? n->label : "");
        n->advanced = advanced ? 1 : 0;
        /* acq_rel: publishes `advanced` and what the advance did to whoever finishes */
        if (FSCHED__CAS(&n->phase, &ph, FSCHED__ADV_COMPLETED, FSCHED__ACQ_REL, FSCHED__RELAXED))
            break;
    }
    FSCHED__POINT(COMPLETE);
    if (ph == FSCHED__ADV_ADVANCING) return FSCHED_OK; /* the callback finishes it */
    /* the callback returned first: whoever runs the node next finishes it */
    /* acquire: see the pipeline's `state` */
    if (FSCHED__LOAD(&n->pipeline->state, FSCHED__ACQUIRE) == FSCHED__PIPE_RUNNING) {
        fsched_sched *s = n->pipeline->sched;
        fsched__worker *w = FSCHED__THREAD_NOW.worker;
        if (w && w->sched != s) w = NULL;
        /* from outside s, hold it: once queued, the node may run, the pipeline end and s
           be destroyed while this call is still announcing the job */
        if (!w) fsched__sched_hold(s);
        fsched__place(s, w, &n->placed); /* it is still counted active */
        if (!w) fsched__sched_release(s);
    } else {
        fsched_event_set(&n->pipeline->completed); /* the debugging scheduler waits */
    }
    return FSCHED_OK;
}

/* Acquire, each read of the state: see the pipeline's `state`. */
FIBERSCHED_API fsched_result fsched_pipeline_run(fsched_pipeline *p, fsched_sched *s) {
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    fsched_result r;
    fsched_fiber *pinned;
    uint32_t i, st;
    if ((r = fsched__pipe_check(p, __func__)) != FSCHED_OK) return r;
    st = FSCHED__LOAD(&p->state, FSCHED__ACQUIRE);
    if (!s) { /* the debugging scheduler, to the end */
        if (st == FSCHED__PIPE_BUILDING && (r = fsched_pipeline_initialize(p)) != FSCHED_OK)
            return r;
        if (FSCHED__LOAD(&p->state, FSCHED__ACQUIRE) != FSCHED__PIPE_STEPPING)
            return FSCHED__REFUSE(&p->logger, FSCHED_ERR_WRONG_STATE, "the pipeline has run");
        do {
            r = fsched_pipeline_step(p);
        } while (FSCHED__LOAD(&p->state, FSCHED__ACQUIRE) == FSCHED__PIPE_STEPPING);
        return r;
    }
    if (st != FSCHED__PIPE_BUILDING)
        return FSCHED__REFUSE(&p->logger, FSCHED_ERR_WRONG_STATE,
                              "the pipeline has started or run");
    if (w && w->sched != s) w = NULL;
    if (!w && (r = fsched__sched_enter(s, 1, __func__)) != FSCHED_OK) return r;
    /* release and relaxed: counted as a spawn is (see fsched__spawn) */
    if (w) FSCHED__STORE_THREADS(&w->spawned, w->spawned + 1, FSCHED__RELEASE); /* as a spawn */
    else FSCHED__FETCH_ADD(&s->external_begun, (fsched__work_count)1, FSCHED__RELAXED); /* see spawn */
    p->sched = s;
    fsched__pipe_initialize_nodes(p);
    p->active = p->n_nodes + 1; /* + this call, until every node is queued */
    fsched_event_reset(&p->done);
    for (i = 0; i < p->n_nodes; i++) {
        p->nodes[i]->placed.job.execute = fsched__node_run;
        p->nodes[i]->busy = FSCHED__NODE_BUSY;
        p->nodes[i]->advance_ns = UINT64_MAX; /* unknown: not short */
    }
    /* release: the set-up above is visible to the nodes' jobs; acq_rel, this call's count:
       as a node's, in fsched__node_run */
    FSCHED__STORE(&p->state, FSCHED__PIPE_RUNNING, FSCHED__RELEASE);
    for (i = 0; i < p->n_nodes; i++) fsched__place(s, w, &p->nodes[i]->placed);
    if (FSCHED__FETCH_SUB(&p->active, 1u, FSCHED__ACQ_REL) == 1) fsched_event_set(&p->done);
    if (!w) fsched__sched_release(s); /* the run, counted, keeps s alive until it ends */
    pinned = fsched__pin(); /* its end is counted on w */
    r = fsched_event_wait(&p->done); /* a task suspends; a thread blocks */
    if (r != FSCHED_OK) { /* cannot happen with threads: nothing else ends this wait */
        /* acquire: pairs with the last node's acq_rel count, as the event would */
        while (FSCHED__LOAD(&p->active, FSCHED__ACQUIRE)) fsched_yield();
    }
    fsched__unpin(pinned);
    fsched__pipe_end(p);
    r = p->result;
    FSCHED__POINT(RUN_END);
    fsched__work_ended(s, w);
    return r;
}

/* ---- linear pipelines ----
   Each item in flight has a record (the records are the bound on items in flight, and
   all the memory a run allocates). A worker carries an item through the stages in place,
   as oneTBB's tasks do: the input stage takes a free record and reads an item, and the
   worker carries it on, holding the input meanwhile (fsched__lp_lend says when it hands
   the input to other workers instead). A serial stage has a lock, a busy flag and, in
   order, the number of the next item it may take: an item that finds it busy (or not
   its turn) waits in the stage's list, and whoever leaves the stage hands it to the next
   waiting item, with the stage already reserved for it. When its item is done or waits,
   the worker goes on in place with what it has at hand: the item it handed the last
   stage to, else the input if it holds it (reading into the record of the item just
   done). So a worker that no other one needs runs item after item without a job
   through the scheduler's loop and without the records' lock. When the records run
   out the input stops, and the item that returns a record restarts it. */

typedef struct fsched__lp_item {
    fsched__job job;             /* its continuation as a job; must be first */
    struct fsched__lp *lp;
    void *data;
    uint64_t seq;                /* its place in input order */
    size_t stage;                /* the next stage to run */
    int reserved;                /* that stage is serial and already reserved for it */
    struct fsched__lp_item *next; /* in a stage's waiting list, or the free records */
    /* for stall reports, read by the waiting caller (relaxed: a report is a snapshot) */
    uint64_t where;              /* atomic: FSCHED__LP_WHERE(stage, how), 0: free */
} fsched__lp_item;

/* Where an item is: running in a stage, or waiting for a serial one; with the item's
   sequence number, so that a snapshot tells whether anything moved. */
#define FSCHED__LP_RUNNING 1u
#define FSCHED__LP_WAITING 2u
#define FSCHED__LP_WHERE(seq, stage, how) \
    (((uint64_t)(seq) << 24) | ((uint64_t)(stage) << 2) | (uint64_t)(how))

typedef struct fsched__lp_stage {
    uint32_t lock;
    uint32_t busy;
    uint64_t next_seq;           /* in order: the item allowed next */
    fsched__lp_item *waiting;    /* in order: sorted by seq; out of order: a stack */
    uint32_t call_ns;            /* atomic: the typical time of a call, UINT32_MAX unknown
                                    (see fsched__lp_stage_call) */
} fsched__lp_stage;

/* Items whose number is a multiple of this have their stage calls timed. */
#define FSCHED__LP_TIMED_EVERY 64u

typedef struct fsched__lp {
    const fsched_stage *stages;
    size_t n;
    const char *name;
    uint32_t input_where;        /* atomic: FSCHED__LP_RUNNING while the input stage runs */
    uint64_t items;              /* atomic: items the input gave (written by it alone) */
    fsched__lp_stage *st;
    fsched__lp_item *records;
    size_t n_records;
    fsched__job input;           /* the input stage as a job */
    uint32_t lock;               /* free records and the input's state */
    fsched__lp_item *free_records;
    size_t free_count;
    int input_running, stopped;
    uint64_t next_seq;
    fsched_event done;           /* the input stopped and every record is free again */
} fsched__lp;

/* Queues a job of the run on w. A worker thread's fiber keeps it on its private ring,
   where its loop serves it: other workers get it when they ask (at once when none of
   w's work is public; and before each stage call, which may compute for long). A bound
   thread, whose own code may block in the OS or compute between its calls to the
   scheduler, publishes it (as spawn does). */
static void fsched__lp_queue(fsched__worker *w, fsched__job *job) {
    if (!FSCHED__BOUND(w) && FSCHED__THREAD_NOW.current != w->root && fsched__push_job(w, job))
        return;
    fsched__publish(w, &job, 1); /* out of memory for the ring: the injector */
}

/* Reserves serial stage k for item it, or parks the item there. 1 when reserved. */
static int fsched__lp_enter(fsched__lp *lp, size_t k, fsched__lp_item *it) {
    fsched__lp_stage *st = &lp->st[k];
    int in_order = lp->stages[k].mode == FSCHED_STAGE_SERIAL_IN_ORDER;
    fsched__spin_lock(&st->lock);
    if (!st->busy && (!in_order || st->next_seq == it->seq)) {
        st->busy = 1;
        fsched__spin_unlock(&st->lock);
        return 1;
    }
    it->stage = k;
    /* relaxed: where the item is, for the stall report alone, which reads it as a hint */
    FSCHED__STORE(&it->where, FSCHED__LP_WHERE(it->seq, k, FSCHED__LP_WAITING), FSCHED__RELAXED);
    if (in_order) { /* sorted by seq: the one allowed next is first */
        fsched__lp_item **pp = &st->waiting;
        while (*pp && (*pp)->seq < it->seq) pp = &(*pp)->next;
        it->next = *pp;
        *pp = it;
    } else {
        it->next = st->waiting;
        st->waiting = it;
    }
    fsched__spin_unlock(&st->lock);
    return 0;
}

/* Leaves serial stage k (item seq just passed it): hands it to a waiting item, if one may
   take it now, which is returned with the stage reserved for it; else NULL. */
static fsched__lp_item *fsched__lp_leave(fsched__lp *lp, size_t k, uint64_t seq) {
    fsched__lp_stage *st = &lp->st[k];
    int in_order = lp->stages[k].mode == FSCHED_STAGE_SERIAL_IN_ORDER;
    fsched__lp_item *next = NULL;
    fsched__spin_lock(&st->lock);
    if (in_order) st->next_seq = seq + 1;
    if (st->waiting && (!in_order || st->waiting->seq == st->next_seq)) {
        next = st->waiting;
        st->waiting = next->next;
    } else {
        st->busy = 0;
    }
    fsched__spin_unlock(&st->lock);
    if (next) next->reserved = 1;
    return next;
}

/* Under lp->lock, released here: whether the run is over (the input stopped and every
   record is free), which then ends the caller's wait; lp is not touched after that. */
static int fsched__lp_unlock_and_check(fsched__lp *lp) {
    int over = lp->stopped && !lp->input_running && lp->free_count == lp->n_records;
    fsched__spin_unlock(&lp->lock);
    if (over) fsched_event_set(&lp->done);
    return over;
}

/* Whether other workers would gain by taking the input around a call of stage st: the
   call is long (or not yet timed), so that one that idles now or during the call may
   read and carry the next items meanwhile. Relaxed: a hint (any worker may time a
   call). */
static int fsched__lp_wanted(const fsched__lp_stage *st, const fsched__worker *w) {
    return FSCHED__N_THREADS(w->sched) > 1 &&
           FSCHED__LOAD(&st->call_ns, FSCHED__RELAXED) >= FSCHED__NODE_SHORT_NS;
}

/* Around a call of stage st, the input that w holds (held): the call may compute for
   long without calling the scheduler, or suspend its fiber. When other workers would
   gain by it, the input goes where they take it (w takes it back once it has nothing
   else at hand, if nobody took it); else w keeps it on its private ring for the call's
   time (no atomic operation), where w's loop runs it if the fiber suspends, and takes
   it back after the call if nothing took it meanwhile. Around a short call it stays
   also from idle workers: as with a short node's advance (FSCHED__NODE_SHORT_NS),
   moving the next item to another worker would cost about as much as the call. A bound
   thread, whose stage may block in the OS, publishes it (as spawn does). */
static void fsched__lp_lend(fsched__lp *lp, const fsched__lp_stage *st, fsched__worker *w,
                            int held) {
    fsched__job *input = &lp->input;
    if (!held) {
        fsched__answer_request(w);
    } else if (fsched__lp_wanted(st, w) || FSCHED__BOUND(w) ||
               FSCHED__THREAD_NOW.current == w->root || !fsched__deque_push(&w->deque, input)) {
        fsched__publish(w, &input, 1);
    }
}

/* Takes the input back from w's private ring, when it is the newest job there. */
static int fsched__lp_take_back(fsched__lp *lp, fsched__worker *w) {
    return fsched__deque_pop_if_newest(&w->deque, &lp->input);
}

/* Takes the input back from w's deque, once w has nothing else at hand, when it is still
   the newest job there: from the private ring, or from the public part unless a thief
   takes it first (thieves take the oldest job, so the owner's take yields the input or,
   when it was the last, nothing). */
static int fsched__lp_reclaim(fsched__lp *lp, fsched__worker *w) {
    if (fsched__lp_take_back(lp, w)) return 1;
    if (fsched__deque_peek(&w->deque) != &lp->input) return 0;
    return fsched__pop_job(w) == &lp->input;
}

/* Calls a stage, named by the stage on the fiber it runs on (a worker's). Later stages'
   calls (st) lend the input w holds (*held), and are timed for every
   FSCHED__LP_TIMED_EVERY-th item: call_ns follows their mean (weight 1/8), a sample
   counting as at most 4x the threshold, as a node's advance_ns. Relaxed, call_ns: a hint
   (any worker may time a call; a lost sample costs nothing). */
static void *fsched__lp_stage_call(fsched__lp *lp, const fsched_stage *sg, fsched__lp_stage *st,
                                   fsched__lp_item *it, int *stop, fsched__worker *w,
                                   int *held) {
    fsched_fiber *f = FSCHED__THREAD_NOW.current;
    fsched__running outer = fsched__running_begin(f, FSCHED__CODE(sg->fn), sg->name);
    void *data = it ? it->data : NULL;
    if (!st) {
        data = sg->fn(sg->user, data, stop);
    } else if (it->seq % FSCHED__LP_TIMED_EVERY) {
        fsched__lp_lend(lp, st, w, *held);
        data = sg->fn(sg->user, data, stop);
    } else {
        uint64_t begin, took;
        uint32_t ns;
        fsched__lp_lend(lp, st, w, *held);
        begin = fsched__sched_now(w->sched);
        data = sg->fn(sg->user, data, stop);
        took = fsched__sched_now(w->sched) - begin;
        if (took > 4u * FSCHED__NODE_SHORT_NS) took = 4u * FSCHED__NODE_SHORT_NS;
        ns = FSCHED__LOAD(&st->call_ns, FSCHED__RELAXED);
        ns = ns == UINT32_MAX ? (uint32_t)took : ns - ns / 8 + (uint32_t)took / 8;
        FSCHED__STORE(&st->call_ns, ns, FSCHED__RELAXED);
    }
    if (st && *held) *held = fsched__lp_take_back(lp, w);
    fsched__running_end(f, outer);
    return data;
}

/* Carries an item through the stages from it->stage on, w holding the input or not
   (*held). 1 when it passed the last one; 0 when it waits for a serial stage. An item
   the last stage is handed to is left in *next, for w to carry on in place; one handed
   an earlier stage is queued (this item goes on). Relaxed, the item's `where`: see
   fsched__lp_enter. */
static int fsched__lp_carry(fsched__lp *lp, fsched__lp_item *it, fsched__worker *w,
                            fsched__lp_item **next, int *held) {
    while (it->stage < lp->n) {
        size_t k = it->stage;
        const fsched_stage *sg = &lp->stages[k];
        int serial = sg->mode != FSCHED_STAGE_PARALLEL, stop = 0;
        if (serial && !it->reserved && !fsched__lp_enter(lp, k, it)) return 0; /* parked */
        FSCHED__TRACE(uint64_t trace_begin;)
        it->reserved = 0;
        FSCHED__STORE(&it->where, FSCHED__LP_WHERE(it->seq, k, FSCHED__LP_RUNNING),
                      FSCHED__RELAXED);
        FSCHED__TRACE(trace_begin = fsched__trace_now();)
        it->data = fsched__lp_stage_call(lp, sg, &lp->st[k], it, &stop, w, held);
        FSCHED__TRACE(fsched__trace_record(FSCHED__TRACE_STAGE, trace_begin, FSCHED__CODE(sg->fn),
                                           sg->name, (uint32_t)k);)
        it->stage++;
        if (serial) {
            fsched__lp_item *waiting = fsched__lp_leave(lp, k, it->seq);
            if (waiting && it->stage < lp->n) fsched__lp_queue(w, &waiting->job);
            else if (waiting) *next = waiting;
        }
    }
    FSCHED__STORE(&it->where, (uint64_t)0, FSCHED__RELAXED);
    return 1;
}

/* What a worker does after an item passed the last stage and gave its record back. */
typedef enum fsched__lp_after {
    FSCHED__LP_GO_ON,    /* whatever it has at hand */
    FSCHED__LP_INPUT,    /* the input, which the record restarted: here, in place */
    FSCHED__LP_OVER      /* nothing: the run is over, lp is not touched again */
} fsched__lp_after;

/* Gives an item's record back: the input may go on. */
static fsched__lp_after fsched__lp_give_back(fsched__lp *lp, fsched__lp_item *it) {
    fsched__spin_lock(&lp->lock);
    it->next = lp->free_records;
    lp->free_records = it;
    lp->free_count++;
    if (!lp->input_running && !lp->stopped) {
        lp->input_running = 1;
        fsched__spin_unlock(&lp->lock);
        return FSCHED__LP_INPUT;
    }
    return fsched__lp_unlock_and_check(lp) ? FSCHED__LP_OVER : FSCHED__LP_GO_ON;
}

/* The input stage, for one item: reads the item into record it (NULL: a free one); w
   then holds the input for the next one (*held). NULL when the records ran out (the next
   one given back restarts the input) or the input stopped (then the run may be over: lp
   is not touched again). */
static fsched__lp_item *fsched__lp_read(fsched__lp *lp, fsched__lp_item *it, fsched__worker *w,
                                        int *held) {
    int stop = 0;
    void *data;
    if (!it) {
        fsched__spin_lock(&lp->lock);
        it = lp->free_records;
        if (!it) { /* the next record returned restarts the input */
            lp->input_running = 0;
            fsched__spin_unlock(&lp->lock);
            return NULL;
        }
        lp->free_records = it->next;
        lp->free_count--;
        fsched__spin_unlock(&lp->lock);
    }
    {
        /* relaxed: for the stall report, as an item's `where` (see fsched__lp_enter) */
        FSCHED__TRACE(uint64_t trace_begin = fsched__trace_now();)
        FSCHED__STORE(&lp->input_where, FSCHED__LP_RUNNING, FSCHED__RELAXED);
        data = fsched__lp_stage_call(lp, &lp->stages[0], NULL, NULL, &stop, w, NULL);
        FSCHED__STORE(&lp->input_where, 0u, FSCHED__RELAXED);
        FSCHED__TRACE(fsched__trace_record(FSCHED__TRACE_STAGE, trace_begin,
                                           FSCHED__CODE(lp->stages[0].fn), lp->stages[0].name, 0);)
    }
    if (stop) {
        fsched__spin_lock(&lp->lock);
        it->next = lp->free_records;
        lp->free_records = it;
        lp->free_count++;
        lp->stopped = 1;
        lp->input_running = 0;
        fsched__lp_unlock_and_check(lp);
        return NULL;
    }
    it->data = data;
    it->seq = lp->next_seq++;
    /* relaxed: only the input writes it; the reporter's snapshot is a hint */
    FSCHED__STORE(&lp->items, FSCHED__LOAD(&lp->items, FSCHED__RELAXED) + 1, FSCHED__RELAXED);
    it->stage = 1;
    it->reserved = 0;
    *held = 1;
    return it;
}

/* Runs the run's work on w, item it first (NULL: the input first), then in place what
   each step leaves at hand, until there is none: the item handed the last stage, else the
   input, when w still holds it (the record of an item done then serves the next),
   restarted it, or takes back what it offered and nobody took. */
static void fsched__lp_work(fsched__lp *lp, fsched__lp_item *it, fsched__worker *w) {
    fsched__lp_item *record = NULL;
    int held = 0;
    for (;;) {
        fsched__lp_item *next = NULL;
        if (!it && !(it = fsched__lp_read(lp, record, w, &held))) return;
        record = NULL;
        if (!fsched__lp_carry(lp, it, w, &next, &held)) {
            /* it waits in a serial stage */
        } else if (held && !next) {
            record = it;
        } else {
            fsched__lp_after after = fsched__lp_give_back(lp, it);
            if (after == FSCHED__LP_OVER) return; /* not while w holds the input */
            if (after == FSCHED__LP_INPUT) held = 1;
        }
        if (next) {
            it = next;
        } else if (held || fsched__lp_reclaim(lp, w)) {
            held = 0;
            it = NULL;
        } else {
            return;
        }
    }
}

static void fsched__lp_item_job(fsched__job *job, fsched__worker *w) {
    fsched__lp_item *it = (fsched__lp_item *)job;
    fsched__lp_work(it->lp, it, w);
}

static void fsched__lp_input(fsched__job *job, fsched__worker *w) {
    fsched__lp_work((fsched__lp *)((char *)job - offsetof(fsched__lp, input)), NULL, w);
}

/* Writes "[name] " and the pieces to the linear pipeline's log. */
static void fsched__lp_log(const fsched__lp *lp, const fsched_parallel_pipeline_desc *d,
                           const char *a, const char *b, const char *c) {
    fsched__line l;
    if (!d->log) return;
    l.n = 0;
    l.text[0] = 0;
    fsched__line_add(&l, "[");
    fsched__line_add(&l, lp->name);
    fsched__line_add(&l, "] ");
    fsched__line_add(&l, a);
    if (b) fsched__line_add(&l, b);
    if (c) fsched__line_add(&l, c);
    d->log(l.text, d->log_user);
}

/* A snapshot of where the items are (the sum over records of their positions): equal
   snapshots a period apart mean no item moved. Relaxed: positions read as hints, each
   on its own; a stale one only delays a report. */
static uint64_t fsched__lp_snapshot(const fsched__lp *lp) {
    uint64_t sum = FSCHED__LOAD(&lp->items, FSCHED__RELAXED) * 0x9e3779b97f4a7c15ull;
    size_t i;
    for (i = 0; i < lp->n_records; i++)
        sum += FSCHED__LOAD(&lp->records[i].where, FSCHED__RELAXED) * (2 * i + 1);
    return sum;
}

/* Reports where the items are: per stage, those running in it and those waiting.
   Relaxed: as in fsched__lp_snapshot. */
static void fsched__lp_report(const fsched__lp *lp, const fsched_parallel_pipeline_desc *d,
                              const fsched_logger *logger, uint64_t still_ns) {
    size_t k, i;
    fsched__line head;
    head.n = 0;
    head.text[0] = 0;
    fsched__line_add(&head, "no item has moved for ");
    fsched__line_num(&head, still_ns / 1000000u);
    fsched__line_add(&head, " ms; where the items are:");
    fsched__lp_log(lp, d, head.text, NULL, NULL);
    fsched__log(logger, FSCHED_LOG_WARNING, "linear pipeline '%s': %s", lp->name, head.text);
    for (k = 0; k < lp->n; k++) {
        const fsched_stage *sg = &lp->stages[k];
        uint64_t running = 0, waiting = 0;
        fsched__line l;
        if (k == 0) {
            running = FSCHED__LOAD(&lp->input_where, FSCHED__RELAXED) == FSCHED__LP_RUNNING;
        } else {
            for (i = 0; i < lp->n_records; i++) {
                uint64_t where = FSCHED__LOAD(&lp->records[i].where, FSCHED__RELAXED);
                if (!where || ((where >> 2) & 0x3fffffu) != k) continue;
                if ((where & 3u) == FSCHED__LP_RUNNING) running++;
                else waiting++;
            }
        }
        l.n = 0;
        l.text[0] = 0;
        fsched__line_add(&l, "stage ");
        fsched__line_num(&l, k);
        if (sg->name) {
            fsched__line_add(&l, " '");
            fsched__line_add(&l, sg->name);
            fsched__line_add(&l, "'");
        }
        fsched__line_add(&l, sg->mode == FSCHED_STAGE_PARALLEL ? " (parallel): "
                             : sg->mode == FSCHED_STAGE_SERIAL_IN_ORDER ? " (serial, in order): "
                                                                       : " (serial): ");
        fsched__line_num(&l, running);
        fsched__line_add(&l, " running");
        if (sg->mode != FSCHED_STAGE_PARALLEL && k > 0) {
            fsched__line_add(&l, ", ");
            fsched__line_num(&l, waiting);
            fsched__line_add(&l, " waiting");
        }
        fsched__lp_log(lp, d, "  ", l.text, NULL);
        fsched__log(logger, FSCHED_LOG_WARNING, "linear pipeline '%s':   %s", lp->name, l.text);
    }
}

typedef struct fsched__lp_call {
    const fsched_parallel_pipeline_desc *desc;
    const fsched_stage *stages;
    size_t n_stages;
} fsched__lp_call;

static fsched_result fsched__lp_again(void *p) {
    const fsched__lp_call *c = (const fsched__lp_call *)p;
    return fsched_parallel_pipeline_run(c->desc, c->stages, c->n_stages);
}

/* Why the stages cannot run from here, or FSCHED_OK. */
static fsched_result fsched__lp_check(const fsched_logger *logger, const fsched_stage *stages,
                                      size_t n_stages) {
    size_t i;
    if (FSCHED__THREAD_NOW.worker && FSCHED__THREAD_NOW.in_hook)
        return FSCHED__MISUSE(logger, FSCHED_ERR_WRONG_STATE, "fsched_parallel_pipeline: "
                              "called from a poll hook, which must not wait");
    if (!stages || !n_stages)
        return FSCHED__MISUSE(logger, FSCHED_ERR_INVALID_ARGUMENT,
                              "fsched_parallel_pipeline: no stages");
    for (i = 0; i < n_stages; i++)
        if (!stages[i].fn || (unsigned)stages[i].mode > (unsigned)FSCHED_STAGE_PARALLEL)
            return FSCHED__MISUSE(logger, FSCHED_ERR_INVALID_ARGUMENT,
                                  "fsched_parallel_pipeline: stage %lu has no fn or an unknown mode",
                                  (unsigned long)i);
    return FSCHED_OK;
}

/* A run of the stages on w's scheduler, its records free and its input ready; 0 for want
   of memory (also for more records than a size_t counts in bytes, whose size would wrap
   round to a small block). */
static int fsched__lp_make(fsched__lp *lp, const fsched_parallel_pipeline_desc *d,
                           const fsched_stage *stages, size_t n_stages, fsched__worker *w,
                           const fsched_logger *logger) {
    const fsched_allocator *a = &w->sched->allocator;
    size_t i, n = d->max_in_flight ? d->max_in_flight
                                   : 4u * (FSCHED__N_THREADS(w->sched) ? FSCHED__N_THREADS(w->sched) : 1u);
    int too_many = n > SIZE_MAX / sizeof *lp->records || n_stages > SIZE_MAX / sizeof *lp->st;
    memset(lp, 0, sizeof *lp);
    lp->stages = stages;
    lp->n = n_stages;
    lp->name = d->name && *d->name ? d->name : "pipeline";
    lp->n_records = n;
    if (!too_many) {
        lp->st = (fsched__lp_stage *)fsched__alloc(a, n_stages * sizeof *lp->st, sizeof(void *));
        lp->records = (fsched__lp_item *)fsched__alloc(a, n * sizeof *lp->records, sizeof(void *));
    }
    if (!lp->st || !lp->records) {
        fsched__free(a, lp->st, n_stages * sizeof *lp->st, sizeof(void *));
        fsched__free(a, lp->records, n * sizeof *lp->records, sizeof(void *));
        fsched__log(logger, FSCHED_LOG_ERROR,
                    "fsched_parallel_pipeline: no memory for the records of %lu items in "
                    "flight (max_in_flight)", (unsigned long)n);
        return 0;
    }
    memset(lp->st, 0, n_stages * sizeof *lp->st);
    for (i = 0; i < n_stages; i++) lp->st[i].call_ns = UINT32_MAX; /* unknown: long */
    for (i = n; i-- > 0;) {
        fsched__lp_item *it = &lp->records[i];
        memset(it, 0, sizeof *it);
        it->job.execute = fsched__lp_item_job;
        it->lp = lp;
        it->next = lp->free_records;
        lp->free_records = it;
    }
    lp->free_count = n;
    lp->input.execute = fsched__lp_input;
    lp->input_running = 1;
    fsched_event_init(&lp->done, 1, 0);
    return 1;
}

static void fsched__lp_free(fsched__lp *lp, const fsched_allocator *a) {
    fsched_event_destroy(&lp->done);
    fsched__free(a, lp->st, lp->n * sizeof *lp->st, sizeof(void *));
    fsched__free(a, lp->records, lp->n_records * sizeof *lp->records, sizeof(void *));
}

/* Logs "<what><a><text_a>[<b><text_b>]" (b: none when text_b is NULL). */
static void fsched__lp_log_counts(fsched__lp *lp, const fsched_parallel_pipeline_desc *d,
                                  const char *what, uint64_t a, const char *text_a, uint64_t b,
                                  const char *text_b) {
    fsched__line l;
    l.n = 0;
    l.text[0] = 0;
    fsched__line_num(&l, a);
    fsched__line_add(&l, text_a);
    if (text_b) {
        fsched__line_num(&l, b);
        fsched__line_add(&l, text_b);
    }
    fsched__lp_log(lp, d, what, l.text, NULL);
}

/* Runs (or suspends for) the items until the input ends and the last is done; a period
   without movement is reported, once per stall. */
static void fsched__lp_wait(fsched__lp *lp, const fsched_parallel_pipeline_desc *d,
                            const fsched_logger *logger) {
    uint64_t period = d->stall_report_ns ? d->stall_report_ns : (uint64_t)10000000000ull;
    uint64_t last = fsched__lp_snapshot(lp), still = 0;
    if (!fsched__have_clock()) period = UINT64_MAX; /* no clock to time a stall by */
    while (period == UINT64_MAX ? fsched_event_wait(&lp->done) != FSCHED_OK
                                : fsched_event_wait_for(&lp->done, period) != FSCHED_OK) {
        uint64_t now = fsched__lp_snapshot(lp);
        if (now != last) {
            last = now;
            still = 0;
        } else if (!still++) {
            fsched__lp_report(lp, d, logger, period);
        }
    }
}

FIBERSCHED_API fsched_result fsched_parallel_pipeline_run(const fsched_parallel_pipeline_desc *desc,
                                                          const fsched_stage *stages,
                                                          size_t n_stages) {
    fsched__worker *w = FSCHED__THREAD_NOW.worker;
    fsched_parallel_pipeline_desc d;
    const fsched_logger *logger;
    fsched_fiber *pinned;
    fsched__lp lp;
    fsched_result r;
    if (desc) d = *desc;
    else memset(&d, 0, sizeof d);
    logger = d.logger.func ? &d.logger : w ? &w->sched->logger : NULL;
    if ((r = fsched__lp_check(logger, stages, n_stages)) != FSCHED_OK) return r;
    if (!w) {
        fsched__lp_call c;
        c.desc = desc;
        c.stages = stages;
        c.n_stages = n_stages;
        return fsched__call_outside(fsched__lp_again, &c, "fsched_parallel_pipeline");
    }
    if (!fsched__lp_make(&lp, &d, stages, n_stages, w, logger)) return FSCHED_ERR_OUT_OF_MEMORY;
    fsched__lp_log_counts(&lp, &d, "started: ", n_stages, " stages, at most ", lp.n_records,
                          " items in flight");
    pinned = fsched__pin(); /* the run keeps w */
    fsched__lp_queue(w, &lp.input); /* the caller's fiber watches for stalls */
    fsched__lp_wait(&lp, &d, logger);
    fsched__unpin(pinned);
    fsched__lp_log_counts(&lp, &d, "finished: ", lp.items, " items", 0, NULL);
    fsched__lp_free(&lp, &w->sched->allocator);
    return FSCHED_OK;
}

FIBERSCHED_API fsched_result fsched_parallel_pipeline(size_t max_in_flight,
                                                      const fsched_stage *stages,
                                                      size_t n_stages) {
    fsched_parallel_pipeline_desc d;
    memset(&d, 0, sizeof d);
    d.max_in_flight = max_in_flight;
    return fsched_parallel_pipeline_run(&d, stages, n_stages);
}

/* ===================================================================================== */
/*  trace export: Chrome trace-event JSON, the trace calls                              */
/* ===================================================================================== */

#if FSCHED__TRACING

/* ---- writing JSON ---------------------------------------------------------------- */

/* The length of the well-formed UTF-8 sequence `t` begins with, or 0 (a stray byte, a
   cut sequence, an overlong form, a surrogate, or beyond U+10FFFF). */
static size_t fsched__utf8_length(const unsigned char *t) {
    size_t n, i;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (t[0] < 0x80) return 1;
    if (t[0] < 0xc2 || t[0] > 0xf4) return 0;
    n = t[0] < 0xe0 ? 2 : t[0] < 0xf0 ? 3 : 4;
    if (t[0] == 0xe0) lo = 0xa0;
    if (t[0] == 0xed) hi = 0x9f;
    if (t[0] == 0xf0) lo = 0x90;
    if (t[0] == 0xf4) hi = 0x8f;
    if (t[1] < lo || t[1] > hi) return 0;
    for (i = 2; i < n; i++)
        if ((t[i] & 0xc0) != 0x80) return 0;
    return n;
}

/* text as the inside of a JSON string: quotes and backslashes escaped, controls dropped,
   and a byte that is not UTF-8 (JSON's encoding) replaced by U+FFFD */
static void fsched__line_json(fsched__line *l, const char *text) {
    const unsigned char *t = (const unsigned char *)text;
    char c[5];
    while (*t) {
        size_t n = fsched__utf8_length(t);
        if (n == 0) {
            fsched__line_add(l, "\\ufffd");
            t++;
            continue;
        }
        if (*t == '"' || *t == '\\') {
            c[0] = '\\';
            c[1] = (char)*t;
            c[2] = 0;
            fsched__line_add(l, c);
        } else if (*t >= 0x20) {
            memcpy(c, t, n);
            c[n] = 0;
            fsched__line_add(l, c);
        }
        t += n;
    }
}

/* nanoseconds as microseconds with three decimals, the trace format's unit */
static void fsched__line_us(fsched__line *l, uint64_t ns) {
    char digits[FSCHED__NUMBER_BYTES];
    fsched__line_num(l, ns / 1000);
    fsched__line_add(l, ".");
    /* three digits, zeros first: those after the 1 of 1000 + ns % 1000 */
    fsched__line_add(l, fsched__number(digits, 1000u + ns % 1000u, 10) + 1);
}

static void fsched__line_hex(fsched__line *l, uint64_t v) {
    char digits[FSCHED__NUMBER_BYTES];
    fsched__line_add(l, "0x");
    fsched__line_add(l, fsched__number(digits, v, 16));
}

/* each kind's category (and the name of a span the user named not) */
static const char *const fsched__trace_names[] = {"task",    "join",  "child",   "graph task",
                                                  "advance", "stage", "blocked", "sleep",
                                                  "steal"};
/* the name of the number a kind records in `arg`; NULL: none */
static const char *const fsched__trace_arg_names[] = {NULL, NULL,    NULL, "status", NULL,
                                                      "stage", NULL, NULL, "victim"};

/* Begins a line of the event list: the separator, then `{"name":"`. */
static void fsched__trace_line_begin(fsched__line *l, int *first) {
    l->n = 0;
    l->text[0] = 0;
    fsched__line_add(l, *first ? "\n{\"name\":\"" : ",\n{\"name\":\"");
    *first = 0;
}

static void fsched__trace_line_ids(fsched__line *l, uint32_t slot, uint32_t track) {
    fsched__line_add(l, ",\"pid\":");
    fsched__line_num(l, (uint64_t)slot + 1);
    fsched__line_add(l, ",\"tid\":");
    fsched__line_num(l, track);
}

/* Metadata: the name of slot `slot` (a process), or of track `track` (a thread) in it. */
static void fsched__trace_write_name(fsched_sched *s, uint32_t slot, uint32_t track,
                                     void (*write)(const char *, size_t, void *), void *user,
                                     int *first) {
    fsched__line l;
    fsched__trace_line_begin(&l, first);
    fsched__line_add(&l, track ? "thread_name\",\"ph\":\"M\"" : "process_name\",\"ph\":\"M\"");
    fsched__trace_line_ids(&l, slot, track);
    fsched__line_add(&l, ",\"args\":{\"name\":\"");
    if (track) {
        fsched__line_add(&l, "fiber ");
        fsched__line_num(&l, track);
    } else if (slot < FSCHED__N_THREADS(s)) {
        fsched__line_add(&l, "worker ");
        fsched__line_num(&l, slot);
    } else if (slot + 1 < s->n_slots) {
        fsched__line_add(&l, "bound slot ");
        fsched__line_num(&l, slot);
    } else {
        fsched__line_add(&l, "fsched_destroy");
    }
    fsched__line_add(&l, "\"}}");
    write(l.text, l.n, user);
}

/* Metadata: where this function is in memory, so that a reader with the program's symbol
   table can name the functions whose addresses the events give (tools/trace_summary.py
   --exe), whatever address the program was loaded at. */
static void fsched__trace_write_anchor(void (*write)(const char *, size_t, void *), void *user,
                                       int *first) {
    fsched_result (*self)(fsched_sched *, void (*)(const char *, size_t, void *), void *) =
        fsched_trace_write_json;
    uintptr_t address = 0;
    fsched__line l;
    memcpy(&address, &self, sizeof address < sizeof self ? sizeof address : sizeof self);
    fsched__trace_line_begin(&l, first);
    fsched__line_add(&l, "code_anchor\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{");
    fsched__line_add(&l, "\"symbol\":\"fsched_trace_write_json\",\"address\":\"");
    fsched__line_hex(&l, (uint64_t)address);
    fsched__line_add(&l, "\"}}");
    write(l.text, l.n, user);
}

/* Opens the event's args, or adds a separator when they are open. */
static void fsched__trace_arg(fsched__line *l, int *open, const char *name) {
    fsched__line_add(l, *open ? ",\"" : ",\"args\":{\"");
    fsched__line_add(l, name);
    fsched__line_add(l, "\":");
    *open = 1;
}

/* An event: named by the user's name, else by its kind (its category); args: the user's
   function (fn), the kind's number, and what a blocked fiber waited on. */
static void fsched__trace_write_event(const fsched_sched *s, uint32_t slot,
                                      const fsched__trace_event *e,
                                      void (*write)(const char *, size_t, void *), void *user,
                                      int *first) {
    fsched__line l;
    uint64_t origin = s->trace_origin;
    const char *kind = fsched__trace_names[e->kind], *arg_name = fsched__trace_arg_names[e->kind];
    int blocked = e->kind == FSCHED__TRACE_BLOCKED, open = 0; /* a blocked span's name: on what */
    fsched__trace_line_begin(&l, first);
    fsched__line_json(&l, e->name[0] && !blocked ? e->name : kind);
    fsched__line_add(&l, "\",\"cat\":\"");
    fsched__line_add(&l, kind);
    if (e->kind == FSCHED__TRACE_STEAL) {
        fsched__line_add(&l, "\",\"ph\":\"i\",\"s\":\"t\",\"ts\":");
        fsched__line_us(&l, e->begin > origin ? e->begin - origin : 0);
    } else {
        fsched__line_add(&l, "\",\"ph\":\"X\",\"ts\":");
        fsched__line_us(&l, e->begin > origin ? e->begin - origin : 0);
        fsched__line_add(&l, ",\"dur\":");
        fsched__line_us(&l, e->end > e->begin ? e->end - e->begin : 0);
    }
    fsched__trace_line_ids(&l, slot, e->fiber);
    if (e->code) {
        fsched__trace_arg(&l, &open, "fn");
        fsched__line_add(&l, "\"");
        fsched__line_hex(&l, e->code);
        fsched__line_add(&l, "\"");
    }
    if (arg_name) {
        fsched__trace_arg(&l, &open, arg_name);
        if (e->kind == FSCHED__TRACE_GRAPH_TASK && (int32_t)e->arg < 0) {
            fsched__line_add(&l, "-");
            fsched__line_num(&l, (uint64_t)0 - (uint64_t)(int64_t)(int32_t)e->arg);
        } else {
            fsched__line_num(&l, e->arg);
        }
    }
    if (blocked && e->name[0]) {
        fsched__trace_arg(&l, &open, "waits_on");
        fsched__line_add(&l, "\"");
        fsched__line_json(&l, e->name);
        fsched__line_add(&l, "\"");
    }
    fsched__line_add(&l, open ? "}}" : "}");
    write(l.text, l.n, user);
}

#endif /* FSCHED__TRACING */

/* Enters s (holding it: see fsched__sched_enter) when it is live and traced. */
static fsched_result fsched__trace_enter(const fsched_sched *s, const char *fn) {
    fsched_result r = fsched__sched_enter((fsched_sched *)s, 0, fn);
    if (r != FSCHED_OK) return r;
#if !FSCHED__TRACING
    r = FSCHED__MISUSE(&s->logger, FSCHED_ERR_UNSUPPORTED, "%s: built without FIBERSCHED_TRACE",
                       fn);
    fsched__sched_release((fsched_sched *)s);
#endif
    return r;
}

FIBERSCHED_API fsched_result fsched_trace_write_json(fsched_sched *s,
                                                     void (*write)(const char *text,
                                                                   size_t len, void *user),
                                                     void *user) {
    fsched_result r = fsched__trace_enter(s, __func__);
    if (r != FSCHED_OK) return r;
#if FSCHED__TRACING
    if (!write) {
        r = FSCHED__REFUSE(&s->logger, FSCHED_ERR_INVALID_ARGUMENT, "write is NULL");
    } else {
        static const char head[] = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
        static const char tail[] = "\n]}\n";
        uint32_t i, track, tracks;
        uint64_t k, n;
        int first = 1;
        write(head, sizeof head - 1, user);
        fsched__trace_write_anchor(write, user, &first);
        for (i = 0; i < s->n_slots; i++) {
            const fsched__trace_buffer *b = s->slots[i]->trace;
            /* acquire: pairs with the release in fsched__trace_record; the events below
               n are complete and will not change */
            n = FSCHED__LOAD(&b->count, FSCHED__ACQUIRE);
            if (!n) continue;
            fsched__trace_write_name(s, i, 0, write, user, &first);
            for (tracks = 0, k = 0; k < n; k++)
                if (b->events[k].fiber > tracks) tracks = b->events[k].fiber;
            for (track = 1; track <= tracks; track++)
                fsched__trace_write_name(s, i, track, write, user, &first);
            for (k = 0; k < n; k++) fsched__trace_write_event(s, i, &b->events[k], write, user, &first);
        }
        write(tail, sizeof tail - 1, user);
    }
    fsched__sched_release(s);
#else
    (void)write;
    (void)user;
#endif
    return r;
}

FIBERSCHED_API fsched_result fsched_trace_count(const fsched_sched *s, uint64_t *recorded,
                                                uint64_t *dropped) {
    fsched_result r = fsched__trace_enter(s, __func__);
    uint64_t sum_recorded = 0, sum_dropped = 0;
#if FSCHED__TRACING
    uint32_t i;
    if (r == FSCHED_OK) {
        /* relaxed: statistics, each count read on its own */
        for (i = 0; i < s->n_slots; i++) {
            sum_recorded += FSCHED__LOAD(&s->slots[i]->trace->count, FSCHED__RELAXED);
            sum_dropped += FSCHED__LOAD(&s->slots[i]->trace->dropped, FSCHED__RELAXED);
        }
        fsched__sched_release((fsched_sched *)s);
    }
#endif
    if (recorded) *recorded = sum_recorded;
    if (dropped) *dropped = sum_dropped;
    return r;
}

/* ---- gdb: tools/fibersched-gdb.py, embedded (FIBERSCHED_GDB_SCRIPT) ----
   gdb runs the entries of a program's .debug_gdb_scripts section when it loads the
   program: each a kind byte, then text up to a NUL; kind 4 is a Python script inline, its
   name on the first line. The lines below are tools/fibersched-gdb.py as it is, written
   by tools/embed-gdb-script.py (a test checks that they are the same); "MS" lets the
   linker keep one copy when several units embed it. */
#if defined(FSCHED__GDB_SCRIPT)
#define FSCHED__GDB_LINE(text) ".ascii \"" text "\\n\"\n"
__asm__(".pushsection \".debug_gdb_scripts\", \"MS\", %progbits, 1\n"
    ".byte 4\n"
    FSCHED__GDB_LINE("fibersched-gdb.py")
    FSCHED__GDB_LINE("# fibersched-gdb.py - gdb commands for programs built with fibersched.h - MIT license")
    FSCHED__GDB_LINE("#")
    FSCHED__GDB_LINE("#   info fibers            every fiber of every live scheduler: id, where it runs, its")
    FSCHED__GDB_LINE("#                          state, what it waits on, the task it runs")
    FSCHED__GDB_LINE("#   fiber bt ID [ARGS]     the backtrace of fiber ID (ARGS as for bt: full, a count...)")
    FSCHED__GDB_LINE("#")
    FSCHED__GDB_LINE("# Load it with `source tools/fibersched-gdb.py`, or build the program with")
    FSCHED__GDB_LINE("# -DFIBERSCHED_GDB_SCRIPT: fibersched.h then embeds this text in the program's")
    FSCHED__GDB_LINE("# .debug_gdb_scripts section, and gdb runs it when it loads the program, from a live")
    FSCHED__GDB_LINE("# process or a core file, once `auto-load safe-path` allows that program.")
    FSCHED__GDB_LINE("#")
    FSCHED__GDB_LINE("# It needs the program's debug information (-g) for the scheduler's records. The Task")
    FSCHED__GDB_LINE("# column names what the scheduler says the fiber runs: the name the task was given, and")
    FSCHED__GDB_LINE("# the function it was started with (a loop's body, a join's function, a graph task's...).")
    FSCHED__GDB_LINE("# A backtrace of a suspended fiber needs the assembly context switch (the default): the")
    FSCHED__GDB_LINE("# fiber's saved stack pointer leads, through the switch's unwind information, to the code")
    FSCHED__GDB_LINE("# that was suspended. It reads memory only, so it works on a core file as on a live")
    FSCHED__GDB_LINE("# process: `fiber bt` shows the selected thread's innermost frame as the caller of the")
    FSCHED__GDB_LINE("# fiber's context, and hides that frame and those newer than it.")
    FSCHED__GDB_LINE("#")
    FSCHED__GDB_LINE("# (Written without double quotes and backslashes: fibersched.h embeds it line by line.)")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("import gdb")
    FSCHED__GDB_LINE("from gdb.FrameDecorator import FrameDecorator")
    FSCHED__GDB_LINE("from gdb.unwinder import Unwinder, register_unwinder")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("SCHED_LIVE = 0x46534348  # fsched_sched.magic while the scheduler lives ('FSCH')")
    FSCHED__GDB_LINE("TASK_SUFFIX = '_fsched_run'  # a spawn/sync task NAME runs as NAME_fsched_run")
    FSCHED__GDB_LINE("# the names of pc and sp, generic and per architecture (ppc64's sp is r1)")
    FSCHED__GDB_LINE("PC_SP_NAMES = ('pc', 'sp', 'rip', 'rsp', 'eip', 'esp', 'r1')")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def _int(value):")
    FSCHED__GDB_LINE("    return int(value.cast(gdb.lookup_type('unsigned long long')))")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def _pointer(address):")
    FSCHED__GDB_LINE("    return gdb.Value(address).cast(gdb.lookup_type('void').pointer())")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def _string(value):")
    FSCHED__GDB_LINE("    if _int(value) == 0:")
    FSCHED__GDB_LINE("        return None")
    FSCHED__GDB_LINE("    try:")
    FSCHED__GDB_LINE("        # names are the program's bytes: shown whatever they hold")
    FSCHED__GDB_LINE("        return value.string(errors='replace')")
    FSCHED__GDB_LINE("    except gdb.error:")
    FSCHED__GDB_LINE("        return None")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def _symbol(address):")
    FSCHED__GDB_LINE("    '''The symbol table's name for address: (name, offset), or (None, 0).'''")
    ".popsection\n");
__asm__(".pushsection \".debug_gdb_scripts\", \"MS\", %progbits, 1\n"
    FSCHED__GDB_LINE("    text = gdb.execute('info symbol 0x%x' % address, to_string=True)")
    FSCHED__GDB_LINE("    if text.startswith('No symbol'):")
    FSCHED__GDB_LINE("        return None, 0")
    FSCHED__GDB_LINE("    name = text.split(' in section')[0].strip()")
    FSCHED__GDB_LINE("    if ' + ' in name:")
    FSCHED__GDB_LINE("        name, offset = name.rsplit(' + ', 1)")
    FSCHED__GDB_LINE("        return name, int(offset)")
    FSCHED__GDB_LINE("    return name, 0")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def function_name(address):")
    FSCHED__GDB_LINE("    '''The name of the function that begins at address: the outermost function of its")
    FSCHED__GDB_LINE("    block (at -O2 a callee inlined at its start owns the innermost block there), else its")
    FSCHED__GDB_LINE("    symbol. A spawn/sync task is named as its FSCHED_TASK was.'''")
    FSCHED__GDB_LINE("    name = None")
    FSCHED__GDB_LINE("    try:")
    FSCHED__GDB_LINE("        find = getattr(gdb.current_progspace(), 'block_for_pc', None) or gdb.block_for_pc")
    FSCHED__GDB_LINE("        block = find(address)")
    FSCHED__GDB_LINE("        while block is not None and not (block.is_global or block.is_static):")
    FSCHED__GDB_LINE("            if block.function is not None:")
    FSCHED__GDB_LINE("                name = block.function.print_name")
    FSCHED__GDB_LINE("            block = block.superblock")
    FSCHED__GDB_LINE("    except RuntimeError:")
    FSCHED__GDB_LINE("        pass")
    FSCHED__GDB_LINE("    if name is None:")
    FSCHED__GDB_LINE("        symbol, offset = _symbol(address)")
    FSCHED__GDB_LINE("        name = symbol if symbol and not offset else '0x%x' % address")
    FSCHED__GDB_LINE("    if name.endswith(TASK_SUFFIX):")
    FSCHED__GDB_LINE("        name = name[:-len(TASK_SUFFIX)]")
    FSCHED__GDB_LINE("    return name")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def _statics(name):")
    FSCHED__GDB_LINE("    '''The static variables of that name: one per translation unit holding the")
    FSCHED__GDB_LINE("    implementation (several with FIBERSCHED_STATIC).'''")
    FSCHED__GDB_LINE("    lookup = getattr(gdb, 'lookup_static_symbols', None)")
    FSCHED__GDB_LINE("    if lookup is not None:")
    FSCHED__GDB_LINE("        return lookup(name)")
    FSCHED__GDB_LINE("    return [gdb.lookup_static_symbol(name)]")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def _live_objects():")
    FSCHED__GDB_LINE("    '''The addresses of the objects in each registry of live objects: a hash set of")
    FSCHED__GDB_LINE("    pointers (slots and mask), or without an OS a list through the objects.'''")
    FSCHED__GDB_LINE("    for s, m in zip(_statics('fsched__live_slots'), _statics('fsched__live_mask')):")
    FSCHED__GDB_LINE("        if s is None or m is None:")
    FSCHED__GDB_LINE("            continue")
    FSCHED__GDB_LINE("        slots = s.value()")
    FSCHED__GDB_LINE("        if _int(slots) == 0:")
    FSCHED__GDB_LINE("            continue")
    FSCHED__GDB_LINE("        for i in range(int(m.value()) + 1):")
    FSCHED__GDB_LINE("            if _int(slots[i]):")
    FSCHED__GDB_LINE("                yield slots[i]")
    FSCHED__GDB_LINE("    for head in _statics('fsched__live_list'):")
    FSCHED__GDB_LINE("        if head is None:")
    FSCHED__GDB_LINE("            continue")
    FSCHED__GDB_LINE("        entry = head.value()")
    FSCHED__GDB_LINE("        while _int(entry):")
    FSCHED__GDB_LINE("            yield entry['object']")
    FSCHED__GDB_LINE("            entry = entry['next']")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def schedulers():")
    FSCHED__GDB_LINE("    try:")
    ".popsection\n");
__asm__(".pushsection \".debug_gdb_scripts\", \"MS\", %progbits, 1\n"
    FSCHED__GDB_LINE("        sched_type = gdb.lookup_type('struct fsched_sched').pointer()")
    FSCHED__GDB_LINE("    except gdb.error:")
    FSCHED__GDB_LINE("        raise gdb.GdbError('fibersched: the program has no debug information about '")
    FSCHED__GDB_LINE("                           'fibersched (build the file that defines '")
    FSCHED__GDB_LINE("                           'FIBERSCHED_IMPLEMENTATION with -g)')")
    FSCHED__GDB_LINE("    word = gdb.lookup_type('unsigned int').pointer()")
    FSCHED__GDB_LINE("    for p in _live_objects():")
    FSCHED__GDB_LINE("        if int(p.cast(word).dereference()) == SCHED_LIVE:")
    FSCHED__GDB_LINE("            yield p.cast(sched_type)")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("class Fiber(object):")
    FSCHED__GDB_LINE("    def __init__(self, sched_number, sched, slot, record, is_root):")
    FSCHED__GDB_LINE("        self.sched_number = sched_number")
    FSCHED__GDB_LINE("        self.sched = sched")
    FSCHED__GDB_LINE("        self.slot = slot")
    FSCHED__GDB_LINE("        self.record = record")
    FSCHED__GDB_LINE("        self.is_root = is_root")
    FSCHED__GDB_LINE("        self.number = int(record['id'])")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def ident(self, many):")
    FSCHED__GDB_LINE("        return '%d.%d' % (self.sched_number, self.number) if many else str(self.number)")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def saved_sp(self):")
    FSCHED__GDB_LINE("        return _int(self.record['ctx']['sp'])")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def state(self, idle, threads):")
    FSCHED__GDB_LINE("        if self.slot is None:")
    FSCHED__GDB_LINE("            return 'ready (moving)'  # woken, between the worker that shed it and another")
    FSCHED__GDB_LINE("        if self.saved_sp() == 0:")
    FSCHED__GDB_LINE("            thread = threads.get(_int(self.slot['thread']))")
    FSCHED__GDB_LINE("            return 'running' + (' (thread %d)' % thread if thread else '')")
    FSCHED__GDB_LINE("        if _string(self.record['wait_what']):")
    FSCHED__GDB_LINE("            return 'blocked'")
    FSCHED__GDB_LINE("        if self.is_root and int(self.slot['root_parked']):")
    FSCHED__GDB_LINE("            return 'parked'  # the thread runs its slot's loop on another fiber")
    FSCHED__GDB_LINE("        if _int(self.record.address) in idle:")
    FSCHED__GDB_LINE("            return 'idle'")
    FSCHED__GDB_LINE("        return 'ready'")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def waits_on(self):")
    FSCHED__GDB_LINE("        what = _string(self.record['wait_what'])")
    FSCHED__GDB_LINE("        if not what or self.slot is None:")
    FSCHED__GDB_LINE("            return ''")
    FSCHED__GDB_LINE("        obj = _int(self.record['wait_object'])")
    FSCHED__GDB_LINE("        if not obj:")
    FSCHED__GDB_LINE("            return what")
    FSCHED__GDB_LINE("        name, offset = _symbol(obj)")
    FSCHED__GDB_LINE("        if name and offset:")
    FSCHED__GDB_LINE("            name = '%s+%d' % (name, offset)")
    FSCHED__GDB_LINE("        return '%s 0x%x%s' % (what, obj, ' (%s)' % name if name else '')")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def task(self):")
    FSCHED__GDB_LINE("        '''What the scheduler says the fiber runs: the task's name and the function it")
    FSCHED__GDB_LINE("        was started with (the fiber's record holds both while it runs it).'''")
    FSCHED__GDB_LINE("        code = _int(self.record['task_code'])")
    FSCHED__GDB_LINE("        name = _string(self.record['task_name'])")
    FSCHED__GDB_LINE("        function = function_name(code) if code else None")
    ".popsection\n");
__asm__(".pushsection \".debug_gdb_scripts\", \"MS\", %progbits, 1\n"
    FSCHED__GDB_LINE("        if name and function and name != function:")
    FSCHED__GDB_LINE("            return '%s (%s)' % (name, function)")
    FSCHED__GDB_LINE("        if name or function:")
    FSCHED__GDB_LINE("            return name or function")
    FSCHED__GDB_LINE("        if self.is_root:")
    FSCHED__GDB_LINE("            return '(the thread' + chr(39) + 's own stack)'")
    FSCHED__GDB_LINE("        return ''")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def fibers():")
    FSCHED__GDB_LINE("    '''Every fiber of every live scheduler, slot by slot: the root (the thread's own")
    FSCHED__GDB_LINE("    context) first, then the slot's fibers; then the movable tasks woken on one worker")
    FSCHED__GDB_LINE("    and on their way to another (in no slot's list meanwhile).'''")
    FSCHED__GDB_LINE("    for n, s in enumerate(schedulers(), 1):")
    FSCHED__GDB_LINE("        for i in range(int(s['n_slots'])):")
    FSCHED__GDB_LINE("            w = s['slots'][i]")
    FSCHED__GDB_LINE("            if _int(w) == 0:")
    FSCHED__GDB_LINE("                continue")
    FSCHED__GDB_LINE("            if _int(w['root']):")
    FSCHED__GDB_LINE("                yield Fiber(n, s, w, w['root'].dereference(), True)")
    FSCHED__GDB_LINE("            f = w['live']")
    FSCHED__GDB_LINE("            while _int(f):")
    FSCHED__GDB_LINE("                yield Fiber(n, s, w, f.dereference(), False)")
    FSCHED__GDB_LINE("                f = f['live_next']")
    FSCHED__GDB_LINE("        f = s['transit']")
    FSCHED__GDB_LINE("        while _int(f):")
    FSCHED__GDB_LINE("            yield Fiber(n, s, None, f.dereference(), False)")
    FSCHED__GDB_LINE("            f = f['live_next']")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def _idle_records(slot):")
    FSCHED__GDB_LINE("    found = set()")
    FSCHED__GDB_LINE("    f = slot['idle']")
    FSCHED__GDB_LINE("    while _int(f):")
    FSCHED__GDB_LINE("        found.add(_int(f))")
    FSCHED__GDB_LINE("        f = f['link']")
    FSCHED__GDB_LINE("    return found")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def _thread_numbers():")
    FSCHED__GDB_LINE("    '''The address of each gdb thread's fibersched thread record -> its gdb number.'''")
    FSCHED__GDB_LINE("    found = {}")
    FSCHED__GDB_LINE("    selected = gdb.selected_thread()")
    FSCHED__GDB_LINE("    try:")
    FSCHED__GDB_LINE("        for thread in gdb.selected_inferior().threads():")
    FSCHED__GDB_LINE("            try:")
    FSCHED__GDB_LINE("                thread.switch()")
    FSCHED__GDB_LINE("                found[_int(gdb.parse_and_eval('&fsched__tls_thread'))] = thread.num")
    FSCHED__GDB_LINE("            except gdb.error:")
    FSCHED__GDB_LINE("                pass")
    FSCHED__GDB_LINE("    finally:")
    FSCHED__GDB_LINE("        if selected is not None:")
    FSCHED__GDB_LINE("            selected.switch()")
    FSCHED__GDB_LINE("    return found")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def _slot_name(fiber):")
    FSCHED__GDB_LINE("    w = fiber.slot")
    FSCHED__GDB_LINE("    if w is None:")
    FSCHED__GDB_LINE("        return 'in transit'")
    FSCHED__GDB_LINE("    kind = 'bound' if int(w['bound']) else 'worker'")
    FSCHED__GDB_LINE("    return '%s %d' % (kind, int(w['index']))")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("class InfoFibers(gdb.Command):")
    FSCHED__GDB_LINE("    '''Lists every fiber of every live fibersched scheduler.")
    FSCHED__GDB_LINE("Columns: the fiber's id (for `fiber bt`; SCHEDULER.ID when there are several schedulers),")
    FSCHED__GDB_LINE("the slot it belongs to (a worker thread, a bound thread, or none while a woken movable task")
    ".popsection\n");
__asm__(".pushsection \".debug_gdb_scripts\", \"MS\", %progbits, 1\n"
    FSCHED__GDB_LINE("is in transit to another worker), its state (running, blocked, ready, idle, or parked: a")
    FSCHED__GDB_LINE("thread's own context while the thread runs its slot's loop),")
    FSCHED__GDB_LINE("what it waits on, and the task it runs: its name, if it was given one, and the function")
    FSCHED__GDB_LINE("it was started with (a spawned task's, a loop's body, a join's half, a graph task's...).'''")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def __init__(self):")
    FSCHED__GDB_LINE("        super(InfoFibers, self).__init__('info fibers', gdb.COMMAND_STATUS)")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def invoke(self, arg, from_tty):")
    FSCHED__GDB_LINE("        all_fibers = list(fibers())")
    FSCHED__GDB_LINE("        if not all_fibers:")
    FSCHED__GDB_LINE("            print('No fibersched scheduler is live.')")
    FSCHED__GDB_LINE("            return")
    FSCHED__GDB_LINE("        many = len(set(f.sched_number for f in all_fibers)) > 1")
    FSCHED__GDB_LINE("        threads = _thread_numbers()")
    FSCHED__GDB_LINE("        idle = {}")
    FSCHED__GDB_LINE("        rows = []")
    FSCHED__GDB_LINE("        for f in all_fibers:")
    FSCHED__GDB_LINE("            key = _int(f.slot) if f.slot is not None else 0")
    FSCHED__GDB_LINE("            if key not in idle:")
    FSCHED__GDB_LINE("                idle[key] = _idle_records(f.slot) if f.slot is not None else set()")
    FSCHED__GDB_LINE("            rows.append((f.ident(many), _slot_name(f), f.state(idle[key], threads),")
    FSCHED__GDB_LINE("                         f.waits_on(), f.task()))")
    FSCHED__GDB_LINE("        head = ('Id', 'Slot', 'State', 'Waits on', 'Task')")
    FSCHED__GDB_LINE("        widths = [max(len(r[i]) for r in rows + [head]) for i in range(4)]")
    FSCHED__GDB_LINE("        for r in [head] + rows:")
    FSCHED__GDB_LINE("            print(('  '.join(r[i].ljust(widths[i]) for i in range(4)) + '  ' + r[4]).rstrip())")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def find_fiber(ident):")
    FSCHED__GDB_LINE("    all_fibers = list(fibers())")
    FSCHED__GDB_LINE("    many = len(set(f.sched_number for f in all_fibers)) > 1")
    FSCHED__GDB_LINE("    for f in all_fibers:")
    FSCHED__GDB_LINE("        if f.ident(many) == ident or (not many and ident == '1.%d' % f.number):")
    FSCHED__GDB_LINE("            return f")
    FSCHED__GDB_LINE("    raise gdb.GdbError('No fiber %s (see `info fibers`).' % ident)")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("# ---- a suspended fiber's backtrace, from memory alone ----")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("class _FrameId(object):")
    FSCHED__GDB_LINE("    def __init__(self, sp, pc):")
    FSCHED__GDB_LINE("        self.sp = sp")
    FSCHED__GDB_LINE("        self.pc = pc")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("class FiberUnwinder(Unwinder):")
    FSCHED__GDB_LINE("    '''While `fiber bt` runs: the first frame gdb unwinds (the selected thread's innermost")
    FSCHED__GDB_LINE("    real frame) is given the fiber's context as its caller: sp the saved stack pointer, pc")
    FSCHED__GDB_LINE("    the switch's resume label, where the switch's unwind information describes the")
    FSCHED__GDB_LINE("    registers the fiber saved. The frame's own id takes the fiber's stack address, so")
    FSCHED__GDB_LINE("    that gdb does not stop at a caller on another stack as at a corrupt one.'''")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def __init__(self):")
    FSCHED__GDB_LINE("        super(FiberUnwinder, self).__init__('fibersched fiber')")
    ".popsection\n");
__asm__(".pushsection \".debug_gdb_scripts\", \"MS\", %progbits, 1\n"
    FSCHED__GDB_LINE("        self.context = None  # (sp, pc) while armed")
    FSCHED__GDB_LINE("        self.level = 0  # the frame's level: the innermost that is not inlined")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def __call__(self, pending_frame):")
    FSCHED__GDB_LINE("        context = self.context")
    FSCHED__GDB_LINE("        if context is None:")
    FSCHED__GDB_LINE("            return None")
    FSCHED__GDB_LINE("        if hasattr(pending_frame, 'level'):  # asked again whenever gdb rebuilds its frames")
    FSCHED__GDB_LINE("            if pending_frame.level() != self.level:")
    FSCHED__GDB_LINE("                return None")
    FSCHED__GDB_LINE("        else:")
    FSCHED__GDB_LINE("            self.context = None  # gdb before 11: the first frame asked about, once")
    FSCHED__GDB_LINE("        sp, pc = context")
    FSCHED__GDB_LINE("        info = pending_frame.create_unwind_info(")
    FSCHED__GDB_LINE("            _FrameId(_pointer(sp), pending_frame.read_register('pc')))")
    FSCHED__GDB_LINE("        info.add_saved_register('pc', _pointer(pc))")
    FSCHED__GDB_LINE("        info.add_saved_register('sp', _pointer(sp))")
    FSCHED__GDB_LINE("        # the other registers as in this frame (the status register tells Arm's unwinder")
    FSCHED__GDB_LINE("        # the instruction set); the switch's unwind information restores those it saved")
    FSCHED__GDB_LINE("        registers = getattr(pending_frame.architecture(), 'registers', None)")
    FSCHED__GDB_LINE("        for register in registers('general') if registers else ():")
    FSCHED__GDB_LINE("            if register.name in PC_SP_NAMES:")
    FSCHED__GDB_LINE("                continue")
    FSCHED__GDB_LINE("            try:")
    FSCHED__GDB_LINE("                value = pending_frame.read_register(register.name)")
    FSCHED__GDB_LINE("                # gdb fails the whole frame for a register the core file has not (a")
    FSCHED__GDB_LINE("                # register set cut short): those are left out")
    FSCHED__GDB_LINE("                if str(value) != '<unavailable>':")
    FSCHED__GDB_LINE("                    info.add_saved_register(register.name, value)")
    FSCHED__GDB_LINE("            except (gdb.error, ValueError):")
    FSCHED__GDB_LINE("                pass")
    FSCHED__GDB_LINE("        return info")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("class FiberFrameFilter(object):")
    FSCHED__GDB_LINE("    '''While `fiber bt` runs: hides the thread's own frames, those before the fiber's")
    FSCHED__GDB_LINE("    context.'''")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def __init__(self):")
    FSCHED__GDB_LINE("        self.name = 'fibersched fiber'")
    FSCHED__GDB_LINE("        self.priority = 100")
    FSCHED__GDB_LINE("        self.enabled = True")
    FSCHED__GDB_LINE("        self.context = None  # (sp, pc) while armed")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def filter(self, frames):")
    FSCHED__GDB_LINE("        if self.context is None:")
    FSCHED__GDB_LINE("            return frames")
    FSCHED__GDB_LINE("        return self._fiber_frames(frames, self.context)")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    @staticmethod")
    FSCHED__GDB_LINE("    def _fiber_frames(frames, context):")
    FSCHED__GDB_LINE("        found = False")
    FSCHED__GDB_LINE("        for decorator in frames:")
    FSCHED__GDB_LINE("            frame = decorator.inferior_frame()")
    FSCHED__GDB_LINE("            found = found or (frame.pc() == context[1] and")
    FSCHED__GDB_LINE("                              _int(frame.read_register('sp')) == context[0])")
    FSCHED__GDB_LINE("            if found:")
    ".popsection\n");
__asm__(".pushsection \".debug_gdb_scripts\", \"MS\", %progbits, 1\n"
    FSCHED__GDB_LINE("                yield FiberFrame(decorator)")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("class FiberFrame(FrameDecorator):")
    FSCHED__GDB_LINE("    '''A frame of a fiber. The switch's functions, assembly without debug information,")
    FSCHED__GDB_LINE("    are named as written (gdb would decode fsched__asm_switch as an Ada name).'''")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def function(self):")
    FSCHED__GDB_LINE("        function = super(FiberFrame, self).function()")
    FSCHED__GDB_LINE("        if isinstance(function, str):")
    FSCHED__GDB_LINE("            return function")
    FSCHED__GDB_LINE("        name = self.inferior_frame().name()  # the symbol table's, decoded")
    FSCHED__GDB_LINE("        if name and name.startswith('fsched.'):")
    FSCHED__GDB_LINE("            return 'fsched__' + name[len('fsched.'):]")
    FSCHED__GDB_LINE("        return function")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("_unwinder = FiberUnwinder()")
    FSCHED__GDB_LINE("_filter = FiberFrameFilter()")
    FSCHED__GDB_LINE("register_unwinder(None, _unwinder, replace=True)")
    FSCHED__GDB_LINE("gdb.frame_filters[_filter.name] = _filter")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def _innermost_real_level():")
    FSCHED__GDB_LINE("    frame, level = gdb.newest_frame(), 0")
    FSCHED__GDB_LINE("    while frame.type() == gdb.INLINE_FRAME and frame.older() is not None:")
    FSCHED__GDB_LINE("        frame, level = frame.older(), level + 1")
    FSCHED__GDB_LINE("    return level")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def _selected_depth():")
    FSCHED__GDB_LINE("    '''How many frames are newer than the selected one (to select it again).'''")
    FSCHED__GDB_LINE("    depth = 0")
    FSCHED__GDB_LINE("    try:")
    FSCHED__GDB_LINE("        frame = gdb.selected_frame()")
    FSCHED__GDB_LINE("        while frame.newer() is not None:")
    FSCHED__GDB_LINE("            frame = frame.newer()")
    FSCHED__GDB_LINE("            depth += 1")
    FSCHED__GDB_LINE("    except gdb.error:")
    FSCHED__GDB_LINE("        pass")
    FSCHED__GDB_LINE("    return depth")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def _select_depth(depth):")
    FSCHED__GDB_LINE("    try:")
    FSCHED__GDB_LINE("        frame = gdb.newest_frame()")
    FSCHED__GDB_LINE("        while depth and frame.older() is not None:")
    FSCHED__GDB_LINE("            frame = frame.older()")
    FSCHED__GDB_LINE("            depth -= 1")
    FSCHED__GDB_LINE("        frame.select()")
    FSCHED__GDB_LINE("    except gdb.error:")
    FSCHED__GDB_LINE("        pass")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("def suspended_backtrace(fiber, ident, args, from_tty):")
    FSCHED__GDB_LINE("    sp = fiber.saved_sp()")
    FSCHED__GDB_LINE("    try:")
    FSCHED__GDB_LINE("        resume = _int(gdb.parse_and_eval('&fsched__asm_resume'))")
    FSCHED__GDB_LINE("    except gdb.error:")
    FSCHED__GDB_LINE("        raise gdb.GdbError('Fiber %s is suspended, but `fiber bt` needs the assembly '")
    FSCHED__GDB_LINE("                           'context switch (fsched__asm_resume: the default on x86-64, i386, '")
    FSCHED__GDB_LINE("                           'AArch64, Arm, RISC-V 64 and ppc64le), and this program saves '")
    FSCHED__GDB_LINE("                           'contexts with ucontext or Windows fibers.' % ident)")
    FSCHED__GDB_LINE("    try:")
    FSCHED__GDB_LINE("        gdb.selected_inferior().read_memory(sp, 8)")
    FSCHED__GDB_LINE("    except gdb.MemoryError:")
    FSCHED__GDB_LINE("        raise gdb.GdbError('Fiber %s saved its registers at 0x%x, which this process or '")
    ".popsection\n");
__asm__(".pushsection \".debug_gdb_scripts\", \"MS\", %progbits, 1\n"
    FSCHED__GDB_LINE("                           'core file does not hold: a core needs the fibers%s stacks '")
    FSCHED__GDB_LINE("                           '(anonymous private memory: bit 0 of /proc/PID/coredump_filter, '")
    FSCHED__GDB_LINE("                           'on by default; gcore writes them).' % (ident, chr(39), sp))")
    FSCHED__GDB_LINE("    depth = _selected_depth()")
    FSCHED__GDB_LINE("    _unwinder.level = _innermost_real_level()")
    FSCHED__GDB_LINE("    _unwinder.context = _filter.context = (sp, resume)")
    FSCHED__GDB_LINE("    gdb.invalidate_cached_frames()")
    FSCHED__GDB_LINE("    try:")
    FSCHED__GDB_LINE("        gdb.execute('backtrace %s' % args, from_tty)")
    FSCHED__GDB_LINE("    finally:")
    FSCHED__GDB_LINE("        _unwinder.context = _filter.context = None")
    FSCHED__GDB_LINE("        gdb.invalidate_cached_frames()")
    FSCHED__GDB_LINE("        _select_depth(depth)")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("class FiberPrefix(gdb.Command):")
    FSCHED__GDB_LINE("    '''Commands on one fibersched fiber: fiber bt ID.'''")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def __init__(self):")
    FSCHED__GDB_LINE("        super(FiberPrefix, self).__init__('fiber', gdb.COMMAND_STACK, prefix=True)")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("class FiberBacktrace(gdb.Command):")
    FSCHED__GDB_LINE("    '''Backtrace of a fibersched fiber: fiber bt ID [bt arguments].")
    FSCHED__GDB_LINE("A running fiber's backtrace is its thread's. A suspended fiber's is read from its saved")
    FSCHED__GDB_LINE("context (in a live process or a core file), its frames numbered after the selected")
    FSCHED__GDB_LINE("thread's innermost one, which `bt` hides.'''")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def __init__(self):")
    FSCHED__GDB_LINE("        super(FiberBacktrace, self).__init__('fiber bt', gdb.COMMAND_STACK)")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("    def invoke(self, arg, from_tty):")
    FSCHED__GDB_LINE("        words = arg.split(None, 1)")
    FSCHED__GDB_LINE("        if not words:")
    FSCHED__GDB_LINE("            raise gdb.GdbError('usage: fiber bt ID [bt arguments]')")
    FSCHED__GDB_LINE("        fiber = find_fiber(words[0])")
    FSCHED__GDB_LINE("        rest = words[1] if len(words) > 1 else ''")
    FSCHED__GDB_LINE("        if fiber.saved_sp() != 0:")
    FSCHED__GDB_LINE("            suspended_backtrace(fiber, words[0], rest, from_tty)")
    FSCHED__GDB_LINE("            return")
    FSCHED__GDB_LINE("        thread = _thread_numbers().get(_int(fiber.slot['thread']))")
    FSCHED__GDB_LINE("        if thread is None:")
    FSCHED__GDB_LINE("            raise gdb.GdbError('Fiber %s is running, on no thread gdb knows.' % words[0])")
    FSCHED__GDB_LINE("        gdb.execute('thread apply %d backtrace %s' % (thread, rest), from_tty)")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("")
    FSCHED__GDB_LINE("InfoFibers()")
    FSCHED__GDB_LINE("FiberPrefix()")
    FSCHED__GDB_LINE("FiberBacktrace()")
    ".byte 0\n"
    ".popsection\n");
#undef FSCHED__GDB_LINE
#endif /* FSCHED__GDB_SCRIPT */

#endif /* FIBERSCHED_IMPLEMENTATION */

/* ===================================================================================== */
/*  C++: callables, RAII and exceptions                                                  */
/* ===================================================================================== */
/* An optional layer for C++11 and later, over the public C API only, in every translation
   unit that includes this header as C++ (not only the implementation's). C compilers see
   none of it; FIBERSCHED_NO_CPP leaves it out of C++ too. In namespace fsched:

       fsched_result spawn(fsched_sched *s, F &&f, const char *name = nullptr);
       fsched_result join(A &&a, B &&b);
       fsched_result parallel_for(size_t begin, size_t end, size_t grain, F &&body);
       fsched_result parallel_reduce(size_t begin, size_t end, size_t grain,
                                     const T &identity, Body &&body, Combine &&combine,
                                     T &result);
       class scheduler, bind_guard, wait_group, graph, mutex, condition_variable, event,
             semaphore;
       void sleep_for(std::chrono::duration), yield();

   Tasks take any callable: capturing lambdas, move-only ones, function pointers. join,
   parallel_for and parallel_reduce are synchronous and call the caller's callables where
   they are (no allocation, but for reduction accumulators over 256 bytes); spawn,
   wait_group::spawn and graph::add move (or copy) the callable into a block of their own
   (operator new), which a spawned task destroys once it has run and a graph when it is
   destroyed. Shapes: a task is called as f() (a graph task also as f(fsched_graph_task
   *self), returning void or an int status); a parallel_for body takes `(size_t i)` or
   `(size_t lo, size_t hi)`; a parallel_reduce body the same followed by `T &acc`, and its
   combine `(T &acc, T &&other)`. A callable of another shape is a compile error from a
   static_assert that names the shapes.

   Failures are results, as in C: fsched_result, [[nodiscard]] under C++17 for the calls
   whose failure means that something did not run or did not wait. mutex and
   condition_variable, shaped after the standard ones so that std::lock_guard and
   std::unique_lock work with them, report a failed lock or wait (misuse only) as those
   do, with std::system_error (result_category() names the fsched_result); without
   exceptions they print a line and abort. bind_guard, whose constructor has no result to
   return either, throws std::system_error when the bind fails; without exceptions it
   keeps the failure for its result().

   EXCEPTIONS (when the compiler has them on). An exception that escapes a callable is
   caught on the fiber that ran it, never unwinding through the library's C frames, and
   rethrown where the work is observed:
   - join(a, b): once both have returned; a's exception when both threw;
   - parallel_for: once every call has returned, the first exception; the calls that
     begin after one threw skip the body (calls already running go on);
   - parallel_reduce: as parallel_for, for the body, combine and the copies of identity;
   - wait_group::wait, and a wait_for that returns FSCHED_OK: the first exception of the
     group's tasks since the last wait;
   - graph::wait, and a wait_for that finds the run ended: the exception of the run's
     first failed task (the outcome's `failed`) when that task threw;
   - FSCHED_SYNC: the child's exception, wherever it ran; FSCHED_RUN: the root's. A task
     that an exception leaves first waits for the children other workers took from it,
     dropping their exceptions, and drops those nobody took, unrun (see spawn and sync);
   - spawn: nothing observes a detached task. Its exception goes to the unobserved-
     exception handler (set_unobserved_exception_handler), whose default prints one line
     to stderr (with what() for a std::exception) and drops it. So does an exception
     that a wait_group, or a graph's last run, still holds when it is destroyed.
   The exceptions not rethrown are dropped. Nothing here calls std::terminate. Under
   -fno-exceptions (in every translation unit of the program alike) the layer is the
   same, without the catching and without the handler.

   CAVEAT: do not wait (lock, wait, join, sleep, yield) inside a catch block. The C++
   runtime keeps the exceptions being handled per thread, and a task that runs on the same
   worker meanwhile and catches one of its own changes what `throw;` and
   std::current_exception() see in the first. Keep std::current_exception() (or what the
   exception says) and wait after the catch block. A movable task must not wait either
   while an exception unwinds it (in a destructor): the runtime counts the exceptions in
   flight per thread (std::uncaught_exceptions), and a task that resumed elsewhere would
   leave that count wrong on both threads. */
#if defined(__cplusplus) && !defined(FIBERSCHED_NO_CPP) && !defined(FIBERSCHED_CPP_H)
#define FIBERSCHED_CPP_H

#if __cplusplus < 201103L
#error "fibersched: the C++ layer needs C++11 or later (or define FIBERSCHED_NO_CPP)"
#endif

#include <atomic>
#include <chrono>
#include <condition_variable> /* std::cv_status */
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex> /* std::unique_lock */
#include <new>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define FSCHED__CPP_EXCEPTIONS 1
#include <exception>
#else
#define FSCHED__CPP_EXCEPTIONS 0
#endif

/* A standard library built without threads (bare metal) has no std::cv_status. */
#if (defined(__GLIBCXX__) && !defined(_GLIBCXX_HAS_GTHREADS)) ||                         \
    defined(_LIBCPP_HAS_NO_THREADS) || (defined(_LIBCPP_HAS_THREADS) && !_LIBCPP_HAS_THREADS)
#define FSCHED__STD_CV_STATUS 0
#else
#define FSCHED__STD_CV_STATUS 1
#endif

#if __cplusplus >= 201703L
#define FSCHED__NODISCARD [[nodiscard]]
#else
#define FSCHED__NODISCARD
#endif

namespace fsched {

/* ---- errors ---------------------------------------------------------------------- */

namespace detail {
class category : public std::error_category {
public:
    const char *name() const noexcept override { return "fibersched"; }
    std::string message(int r) const override {
        return fsched_result_string(static_cast<fsched_result>(r));
    }
};
} // namespace detail

/* The category of std::system_error's codes from this layer: their values are
   fsched_result codes, their messages fsched_result_string's. */
inline const std::error_category &result_category() noexcept {
    static const detail::category c;
    return c;
}

inline std::error_code make_error_code(fsched_result r) noexcept {
    return std::error_code(static_cast<int>(r), result_category());
}

#if FSCHED__CPP_EXCEPTIONS
/* Receives an exception that no join or wait observes: on the task's fiber once its
   callable was destroyed, or in the destructor of the wait_group that held it; outside
   any catch block, so it may wait. What it throws is dropped. */
typedef void (*unobserved_exception_handler)(std::exception_ptr error);
#endif

namespace detail {

/* ---- what the wrappers share ----------------------------------------------------- */

/* A failed call shaped after the standard library's, which has no result to return. */
[[noreturn]] inline void fail(fsched_result r, const char *what) {
#if FSCHED__CPP_EXCEPTIONS
    throw std::system_error(make_error_code(r), what);
#else
#if !defined(FIBERSCHED_NO_STDIO)
    std::fprintf(stderr, "fibersched: %s: %s\n", what, fsched_result_string(r));
#endif
    std::abort();
#endif
}

inline void check(fsched_result r, const char *what) {
    if (r != FSCHED_OK) fail(r, what);
}

/* A failure where the caller keeps r for the user to query: thrown as fail throws it
   when exceptions are on; without them, left to the query. */
inline void throw_or_keep(fsched_result r, const char *what) {
#if FSCHED__CPP_EXCEPTIONS
    fail(r, what);
#else
    (void)r;
    (void)what;
#endif
}

/* A timed call: true when it succeeded, false when it timed out. */
inline bool timed(fsched_result r, const char *what) {
    if (r == FSCHED_ERR_TIMEOUT) return false;
    check(r, what);
    return true;
}

/* A relative timeout as the C calls take it: nanoseconds, rounded up (a wait lasts at
   least what was asked), 0 for none left, all ones for longer than 292 years. */
template <class Rep, class Period>
std::uint64_t to_ns(const std::chrono::duration<Rep, Period> &d) noexcept {
    typedef std::chrono::duration<long double, std::nano> exact; /* no overflow */
    if (d <= d.zero()) return 0;
    if (exact(d) >= exact(std::chrono::nanoseconds::max())) return ~std::uint64_t(0);
    std::chrono::nanoseconds ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d);
    if (ns < d) ++ns;
    return static_cast<std::uint64_t>(ns.count());
}

/* ---- the shapes of callables ----
   Told apart by what a callable can be called with (an index is a declval<size_t>(), not
   size_t(), which GCC takes for a null pointer). A call that matches no shape is left out
   (it does nothing), so that the public call's static_assert, which names the shapes it
   takes, is the only error. */

template <int N> struct shape : std::integral_constant<int, N> {};

template <class F, class = void> struct takes_nothing : std::false_type {};
template <class F>
struct takes_nothing<F, decltype(void(std::declval<F &>()()))> : std::true_type {};

/* A task: f(). */
template <class F> void call_task(F &f, std::true_type) { f(); }
template <class F> void call_task(F &, std::false_type) {}
template <class F> void call_task(F &f) { call_task(f, takes_nothing<F>()); }

/* A loop body: body(lo, hi) for a subrange (2), else body(i) for each index (1). */
template <class F, class = void> struct takes_range : std::false_type {};
template <class F>
struct takes_range<F, decltype(void(std::declval<F &>()(std::declval<std::size_t>(),
                                                        std::declval<std::size_t>())))>
    : std::true_type {};
template <class F, class = void> struct takes_index : std::false_type {};
template <class F>
struct takes_index<F, decltype(void(std::declval<F &>()(std::declval<std::size_t>())))>
    : std::true_type {};
template <class F>
struct body_shape : shape<takes_range<F>::value ? 2 : takes_index<F>::value ? 1 : 0> {};

template <class F> void call_body(F &body, std::size_t lo, std::size_t hi, shape<2>) {
    body(lo, hi);
}
template <class F> void call_body(F &body, std::size_t lo, std::size_t hi, shape<1>) {
    for (; lo < hi; ++lo) body(lo);
}
template <class F> void call_body(F &, std::size_t, std::size_t, shape<0>) {}

/* A reduction's body: body(lo, hi, acc) for a subrange (2), else body(i, acc) (1). */
template <class F, class T, class = void> struct folds_range : std::false_type {};
template <class F, class T>
struct folds_range<F, T,
                   decltype(void(std::declval<F &>()(std::declval<std::size_t>(),
                                                     std::declval<std::size_t>(),
                                                     std::declval<T &>())))>
    : std::true_type {};
template <class F, class T, class = void> struct folds_index : std::false_type {};
template <class F, class T>
struct folds_index<F, T,
                   decltype(void(std::declval<F &>()(std::declval<std::size_t>(),
                                                     std::declval<T &>())))>
    : std::true_type {};
template <class F, class T>
struct fold_shape : shape<folds_range<F, T>::value ? 2 : folds_index<F, T>::value ? 1 : 0> {};

template <class F, class T>
void call_fold(F &body, std::size_t lo, std::size_t hi, T &acc, shape<2>) {
    body(lo, hi, acc);
}
template <class F, class T>
void call_fold(F &body, std::size_t lo, std::size_t hi, T &acc, shape<1>) {
    for (; lo < hi; ++lo) body(lo, acc);
}
template <class F, class T> void call_fold(F &, std::size_t, std::size_t, T &, shape<0>) {}

/* A reduction's combine: combine(acc, std::move(other)) merges into acc and returns
   nothing (1), or returns the merged value, assigned to acc (2). */
template <class T, class R>
struct merge_result
    : shape<std::is_void<R>::value ? 1 : std::is_assignable<T &, R>::value ? 2 : 0> {};
template <class C, class T, class = void> struct merge_shape : shape<0> {};
template <class C, class T>
struct merge_shape<C, T,
                   decltype(void(std::declval<C &>()(std::declval<T &>(), std::declval<T &&>())))>
    : merge_result<T, decltype(std::declval<C &>()(std::declval<T &>(), std::declval<T &&>()))> {};

template <class C, class T> void call_merge(C &combine, T &acc, T &other, shape<1>) {
    combine(acc, std::move(other));
}
template <class C, class T> void call_merge(C &combine, T &acc, T &other, shape<2>) {
    acc = combine(acc, std::move(other));
}
template <class C, class T> void call_merge(C &, T &, T &, shape<0>) {}

/* A graph task: f(self) or f(), returning nothing (success) or a status (an int; not a
   bool, whose true would read as a failure). Shapes 4 and 3: f(self), returning nothing
   or a status; 2 and 1: f(), likewise. */
template <class R>
struct returns : shape<std::is_void<R>::value ? 2
                       : std::is_convertible<R, int>::value &&
                               !std::is_same<typename std::decay<R>::type, bool>::value
                           ? 1
                           : 0> {};
template <class F, class = void> struct self_shape : shape<0> {};
template <class F>
struct self_shape<F, decltype(void(std::declval<F &>()(std::declval<fsched_graph_task *>())))>
    : returns<decltype(std::declval<F &>()(std::declval<fsched_graph_task *>()))> {};
template <class F, class = void> struct plain_shape : shape<0> {};
template <class F>
struct plain_shape<F, decltype(void(std::declval<F &>()()))>
    : returns<decltype(std::declval<F &>()())> {};
template <class F>
struct graph_shape
    : shape<self_shape<F>::value ? self_shape<F>::value + 2 : plain_shape<F>::value> {};

template <class F> int call_graph_task(F &f, fsched_graph_task *self, shape<4>) {
    f(self);
    return 0;
}
template <class F> int call_graph_task(F &f, fsched_graph_task *self, shape<3>) {
    return static_cast<int>(f(self));
}
template <class F> int call_graph_task(F &f, fsched_graph_task *, shape<2>) {
    f();
    return 0;
}
template <class F> int call_graph_task(F &f, fsched_graph_task *, shape<1>) {
    return static_cast<int>(f());
}
template <class F> int call_graph_task(F &, fsched_graph_task *, shape<0>) { return 0; }

#if FSCHED__CPP_EXCEPTIONS
/* Calls f() and keeps what it throws in *thrown. The catch block only takes the exception:
   it must not wait (see the caveat above). */
template <class F> void call_catching(F &f, std::exception_ptr *thrown) noexcept {
    try {
        call_task(f);
    } catch (...) {
        *thrown = std::current_exception();
    }
}

/* The first exception that tasks, on any threads, offer; later ones are dropped. A
   lock-free slot: empty, busy (being filled or emptied) or full. */
class first_error {
public:
    first_error() noexcept : state_(empty) {}
    /* Whether an exception was offered and not yet taken (relaxed: a look; take acquires
       what it finds). */
    bool failed() const noexcept { return state_.load(std::memory_order_relaxed) != empty; }
    void offer(std::exception_ptr e) noexcept {
        int expected = empty;
        /* acquire: a take that emptied the slot is done with error_; release, the store:
           error_ is written before a take sees the slot full */
        if (state_.compare_exchange_strong(expected, busy, std::memory_order_acquire,
                                           std::memory_order_relaxed)) {
            error_ = std::move(e);
            state_.store(full, std::memory_order_release);
        }
    }
    std::exception_ptr take() noexcept {
        std::exception_ptr e;
        int expected = full;
        /* acquire: the offer's write of error_; release, the store: done with error_
           before the next offer fills it */
        if (state_.compare_exchange_strong(expected, busy, std::memory_order_acquire,
                                           std::memory_order_relaxed)) {
            e = std::move(error_);
            error_ = nullptr;
            state_.store(empty, std::memory_order_release);
        }
        return e;
    }

private:
    enum { empty, busy, full };
    std::atomic<int> state_;
    std::exception_ptr error_;
};

/* Function-local: one handler for the whole program, however many units include this. */
inline std::atomic<unobserved_exception_handler> &unobserved_handler() noexcept {
    static std::atomic<unobserved_exception_handler> handler(nullptr); /* constant init */
    return handler;
}

inline void print_unobserved(std::exception_ptr error) {
#if !defined(FIBERSCHED_NO_STDIO)
    try {
        std::rethrow_exception(error);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "fibersched: unobserved exception in a task, dropped: %s\n",
                     e.what());
    } catch (...) {
        std::fputs("fibersched: unobserved exception in a task, dropped\n", stderr);
    }
#else
    (void)error;
#endif
}

inline void report_unobserved(std::exception_ptr error) noexcept {
    /* acquire: pairs with the exchange that set the handler (what it uses was ready) */
    unobserved_exception_handler h = unobserved_handler().load(std::memory_order_acquire);
    try {
        (h ? h : print_unobserved)(std::move(error));
    } catch (...) {
    }
}
#else
struct first_error { /* nothing is caught: nothing to keep */
    bool failed() const noexcept { return false; }
};
#endif

/* Calls f(); with exceptions, what it throws is offered to `errors` instead. Whether f
   returned. */
template <class F> bool call_offering(F f, first_error &errors) noexcept {
#if FSCHED__CPP_EXCEPTIONS
    std::exception_ptr e;
    call_catching(f, &e);
    if (!e) return true;
    errors.offer(std::move(e));
    return false;
#else
    (void)errors;
    call_task(f);
    return true;
#endif
}

#if FSCHED__CPP_EXCEPTIONS
/* ---- spawn and sync (FSCHED_TASK): what the macros call -------------------------- */

/* The exception of a child that another worker ran, kept in its frame in place of its
   result until the sync that observes it. */
inline std::exception_ptr *frame_exception(fsched_frame *frame) noexcept {
    static_assert(sizeof(std::exception_ptr) <= FSCHED_FRAME_BYTES &&
                      alignof(std::exception_ptr) <= alignof(long double),
                  "fibersched: an exception_ptr fits a frame");
    return static_cast<std::exception_ptr *>(static_cast<void *>(&frame->data));
}

/* In the catch block of that child's run: keeps the exception (nothing waits here). */
inline void frame_keep(fsched_frame *frame) noexcept {
    new (static_cast<void *>(&frame->data)) std::exception_ptr(std::current_exception());
}

/* At the sync of that child: rethrows its exception. */
[[noreturn]] inline void frame_rethrow(fsched_frame *frame) {
    std::exception_ptr *kept = frame_exception(frame);
    std::exception_ptr e(std::move(*kept));
    kept->~exception_ptr();
    std::rethrow_exception(e);
}

/* Drops the children a task spawned from `head` up and did not sync, newest first as
   syncs go: those no worker took never run; those another worker took are waited for
   (their frames and arguments live on until they return), and what they threw is
   dropped. Spawned frames are those from head up to the first free one. */
inline void frames_drop(fsched_frames *fs, fsched_frame *head) noexcept {
    fsched_frame *top = head;
    while (top < fs->end && top->run) ++top;
    while (top > head) {
        --top;
        if (top >= fs->split || fsched__frames_reclaim(fs, top)) top->run = nullptr;
        else if (top->latch == FSCHED__FRAME_THREW) frame_exception(top)->~exception_ptr();
    }
}

/* Where a task's body keeps the exception that leaves it, outside the catch block (which
   must not wait: see the caveat above). Trivial, so that a body that returns pays
   nothing for it. */
class exception_slot {
public:
    void keep() noexcept { new (static_cast<void *>(bytes_)) std::exception_ptr(std::current_exception()); }
    std::exception_ptr take() noexcept {
        std::exception_ptr *kept = static_cast<std::exception_ptr *>(static_cast<void *>(bytes_));
        std::exception_ptr e(std::move(*kept));
        kept->~exception_ptr();
        return e;
    }

private:
    alignas(std::exception_ptr) unsigned char bytes_[sizeof(std::exception_ptr)];
};

/* After an exception left a task's body: drops the children it did not sync, then
   rethrows the exception into the code that called or synced the task. */
[[noreturn]] inline void frames_unwound(fsched_frames *fs, fsched_frame *head,
                                        exception_slot &thrown) {
    std::exception_ptr e = thrown.take();
    frames_drop(fs, head);
    std::rethrow_exception(e);
}

/* Leaves the frame stack of a tree (FSCHED_RUN) however its root returns. */
class frames_lease {
public:
    explicit frames_lease(fsched_frames *fs) noexcept : fs_(fs) {}
    frames_lease(const frames_lease &) = delete;
    frames_lease &operator=(const frames_lease &) = delete;
    ~frames_lease() { fsched__frames_leave(fs_); }

private:
    fsched_frames *fs_;
};
#endif

/* ---- tasks ----------------------------------------------------------------------- */

/* One side of a join: the caller's callable, where it is (join is synchronous). */
template <class F> struct join_side {
    F &fn;
#if FSCHED__CPP_EXCEPTIONS
    std::exception_ptr error;
#endif
    explicit join_side(F &f) noexcept : fn(f) {}
    static void run(void *p) noexcept {
        join_side *side = static_cast<join_side *>(p);
#if FSCHED__CPP_EXCEPTIONS
        call_catching(side->fn, &side->error);
#else
        call_task(side->fn);
#endif
    }
};

template <class F> struct loop {
    F &body;
    first_error errors;
    explicit loop(F &f) noexcept : body(f) {}
    static void run(void *p, std::size_t lo, std::size_t hi) noexcept {
        loop *l = static_cast<loop *>(p);
        if (l->errors.failed()) return; /* cancelled: a call threw */
        (void)call_offering([&] { call_body(l->body, lo, hi, body_shape<F>()); }, l->errors);
    }
};

/* A callable a spawned task owns. The task destroys it once it has run, before a wait
   group counts the task done, so that a wait returns after the captures are gone. */
template <class F> struct owned_task {
    F fn;
    first_error *errors; /* the wait group's, or null: nobody observes (detached) */
    template <class G> owned_task(G &&g, first_error *e) : fn(std::forward<G>(g)), errors(e) {}
    static void run(void *p) noexcept {
        owned_task *t = static_cast<owned_task *>(p);
#if FSCHED__CPP_EXCEPTIONS
        first_error *errors = t->errors;
        std::exception_ptr e;
        call_catching(t->fn, &e);
        delete t;
        if (!e) return;
        if (errors) errors->offer(std::move(e));
        else report_unobserved(std::move(e));
#else
        call_task(t->fn);
        delete t;
#endif
    }
};

template <class F>
fsched_result spawn_owned(fsched_wait_group *wg, first_error *errors, fsched_sched *s, F &&f,
                          const char *name) {
    typedef owned_task<typename std::decay<F>::type> task;
    task *t = new (std::nothrow) task(std::forward<F>(f), errors);
    if (!t) return FSCHED_ERR_OUT_OF_MEMORY;
    fsched_result r = wg ? fsched_wait_group_spawn_named(wg, s, &task::run, t, name)
                         : fsched_spawn_named(s, &task::run, t, name);
    if (r != FSCHED_OK) delete t;
    return r;
}

/* ---- reductions ------------------------------------------------------------------ */

template <class T> struct exactly {
    typedef T type; /* a parameter of this type takes no part in deducing T */
};

/* An accumulator in the bytes fsched_parallel_reduce gives it: a byte that says whether
   its T was constructed (not when copying the identity threw, nor after a failure), then
   the T at its alignment (the C call aligns the bytes to 16 only: size leaves room). */
template <class T> struct accumulator {
    static const std::size_t size = alignof(T) + sizeof(T);
    static unsigned char &live(void *acc) noexcept { return *static_cast<unsigned char *>(acc); }
    static T &value(void *acc) noexcept {
        std::uintptr_t at = reinterpret_cast<std::uintptr_t>(acc) + 1;
        return *reinterpret_cast<T *>((at + alignof(T) - 1) / alignof(T) * alignof(T));
    }
    /* Destroys the reduction's own accumulator however the call ends. */
    struct root {
        unsigned char bytes[size];
        root() noexcept { bytes[0] = 0; }
        ~root() {
            if (live(bytes)) value(bytes).~T();
        }
    };
};

/* The callbacks of fsched_parallel_reduce over the caller's callables. After a call threw,
   those that begin later do nothing: no copies of the identity, no folds, no combines. */
template <class T, class Body, class Combine> struct reduction {
    typedef accumulator<T> acc;
    const T &identity;
    Body &body;
    Combine &combine;
    first_error errors;
    reduction(const T &i, Body &b, Combine &c) noexcept : identity(i), body(b), combine(c) {}

    static void init(void *ctx, void *a) noexcept {
        reduction *r = static_cast<reduction *>(ctx);
        acc::live(a) = 0;
        if (r->errors.failed()) return;
        acc::live(a) =
            r->attempt([&] { new (static_cast<void *>(&acc::value(a))) T(r->identity); });
    }
    static void fold(void *ctx, std::size_t lo, std::size_t hi, void *a) noexcept {
        reduction *r = static_cast<reduction *>(ctx);
        if (!acc::live(a) || r->errors.failed()) return;
        (void)r->attempt([&] { call_fold(r->body, lo, hi, acc::value(a), fold_shape<Body, T>()); });
    }
    static void merge(void *ctx, void *a, const void *o) noexcept {
        reduction *r = static_cast<reduction *>(ctx);
        void *other = const_cast<void *>(o); /* our bytes, which the C call reads no more */
        if (!acc::live(other)) return;
        if (acc::live(a) && !r->errors.failed())
            (void)r->attempt([&] {
                call_merge(r->combine, acc::value(a), acc::value(other), merge_shape<Combine, T>());
            });
        acc::value(other).~T();
    }

private:
    /* 1 when f returned, 0 when it threw (offered to errors) */
    template <class F> unsigned char attempt(F f) noexcept {
        return call_offering(f, errors) ? 1 : 0;
    }
};

/* ---- graphs ---------------------------------------------------------------------- */

/* A graph task's callable, owned by the fsched::graph it was added to, on the graph's
   list until the graph is destroyed. `thrown` keeps what the callable threw in the task's
   last run until a wait takes it (emptied as the task starts again). */
struct graph_callable {
    graph_callable *next;
    fsched_graph_task *task;
    first_error thrown;
    graph_callable() noexcept : next(nullptr), task(nullptr) {}
    graph_callable(const graph_callable &) = delete;
    graph_callable &operator=(const graph_callable &) = delete;
    virtual ~graph_callable() {}
};

/* A task that throws fails with this status, its exception kept for the wait. */
const int graph_task_threw = static_cast<int>(FSCHED_ERR_TASK_FAILED);

template <class F> struct graph_task final : graph_callable {
    F fn;
    template <class G> explicit graph_task(G &&g) : fn(std::forward<G>(g)) {}
    static int run(fsched_graph_task *self, void *p) noexcept {
        graph_task *t = static_cast<graph_task *>(p);
        int status = 0;
        t->forget_thrown();
        if (!call_offering([&] { status = call_graph_task(t->fn, self, graph_shape<F>()); },
                           t->thrown))
            return graph_task_threw;
        return status;
    }

private:
    void forget_thrown() noexcept {
#if FSCHED__CPP_EXCEPTIONS
        if (thrown.failed()) (void)thrown.take(); /* the last run's, which nobody took */
#endif
    }
};

} // namespace detail

#if FSCHED__CPP_EXCEPTIONS
/* Sets the handler of exceptions that nothing observes (see EXCEPTIONS above) and returns
   the previous one; nullptr means the default, which prints a line to stderr. Any
   thread. Acq_rel: releases what the new handler uses to the threads that call it, and
   acquires the previous one's, which the caller may call. */
inline unobserved_exception_handler
set_unobserved_exception_handler(unobserved_exception_handler h) noexcept {
    return detail::unobserved_handler().exchange(h, std::memory_order_acq_rel);
}
#endif

/* ---- tasks ----------------------------------------------------------------------- */

/* Runs f() as a detached task on s, as fsched_spawn_named (name: a string that outlives
   the task, or nullptr). f is moved or copied into a block of the task's own;
   FSCHED_ERR_OUT_OF_MEMORY when that cannot be allocated. When the spawn fails, that copy
   is destroyed and the task does not run. Any thread. */
template <class F>
FSCHED__NODISCARD fsched_result spawn(fsched_sched *s, F &&f, const char *name = nullptr) {
    static_assert(detail::takes_nothing<typename std::decay<F>::type>::value,
                  "fsched::spawn: the task is called with no arguments, as f()");
    return detail::spawn_owned(nullptr, nullptr, s, std::forward<F>(f), name);
}

/* Runs a() and b(), possibly in parallel, as fsched_join (from any thread: outside every
   scheduler on the default one), then rethrows a's exception, else b's. No allocation. */
template <class A, class B> FSCHED__NODISCARD fsched_result join(A &&a, B &&b) {
    static_assert(detail::takes_nothing<typename std::remove_reference<A>::type>::value &&
                      detail::takes_nothing<typename std::remove_reference<B>::type>::value,
                  "fsched::join: both callables are called with no arguments, as a() and b()");
    detail::join_side<typename std::remove_reference<A>::type> side_a(a);
    detail::join_side<typename std::remove_reference<B>::type> side_b(b);
    fsched_result r = fsched_join(&side_a.run, &side_a, &side_b.run, &side_b);
#if FSCHED__CPP_EXCEPTIONS
    if (side_a.error) std::rethrow_exception(side_a.error);
    if (side_b.error) std::rethrow_exception(side_b.error);
#endif
    return r;
}

/* Calls body over [begin, end) in parallel, split as fsched_parallel_for splits (from any
   thread, as it): body(lo, hi) for each subrange when body can be called so, else
   body(i) for each index. No allocation. After a call threw, the calls not yet begun do
   nothing, and the first exception is rethrown once all calls have returned. */
template <class F>
FSCHED__NODISCARD fsched_result parallel_for(std::size_t begin, std::size_t end,
                                             std::size_t grain, F &&body) {
    typedef typename std::remove_reference<F>::type body_type;
    static_assert(detail::body_shape<body_type>::value != 0,
                  "fsched::parallel_for: the body takes (size_t i) or (size_t lo, size_t hi)");
    detail::loop<body_type> l(body);
    fsched_result r = fsched_parallel_for(begin, end, grain, &l.run, &l);
#if FSCHED__CPP_EXCEPTIONS
    std::exception_ptr e = l.errors.take();
    if (e) std::rethrow_exception(e);
#endif
    return r;
}

namespace detail {
template <class T>
struct copies : std::integral_constant<bool, std::is_copy_constructible<T>::value &&
                                                 std::is_move_assignable<T>::value> {};

template <class T, class Body, class Combine>
fsched_result reduce(std::size_t begin, std::size_t end, std::size_t grain, const T &identity,
                     Body &body, Combine &combine, T &result, std::true_type) {
    typedef reduction<T, Body, Combine> red_type;
    typedef accumulator<T> acc;
    red_type red(identity, body, combine);
    typename acc::root root;
    fsched_result r = fsched_parallel_reduce(begin, end, grain, acc::size, &red_type::init,
                                             &red_type::fold, &red_type::merge, &red, root.bytes);
#if FSCHED__CPP_EXCEPTIONS
    std::exception_ptr e = red.errors.take();
    if (e) std::rethrow_exception(e);
#endif
    if (r == FSCHED_OK) result = std::move(acc::value(root.bytes));
    return r;
}

/* T that cannot be copied: refused by parallel_reduce's static_assert alone */
template <class T, class Body, class Combine>
fsched_result reduce(std::size_t, std::size_t, std::size_t, const T &, Body &, Combine &, T &,
                     std::false_type) {
    return FSCHED_ERR_INVALID_ARGUMENT;
}
} // namespace detail

/* Reduces [begin, end) in parallel into result, split as fsched_parallel_reduce splits
   (from any thread, as it). Each piece folds into an accumulator of its own, a copy
   of identity: body(lo, hi, acc) for each subrange when body can be called so, else
   body(i, acc) for each index. combine(acc, std::move(other)) merges a right-hand
   accumulator into a left-hand one, always in range order (so it need only be
   associative): in place, returning nothing, or returning the merged value, which is
   assigned to acc (std::plus<T>() does). The accumulators live on the stack where they
   fit in 256 bytes with their alignment; larger ones are allocated. result gets the
   reduced value (identity for an empty range) when the call returns FSCHED_OK, and is
   left alone when it fails or throws. T is result's type; identity converts to it.
   After a call (of the body, of combine, or a copy of identity) threw, the calls not yet
   begun do nothing, and the first exception is rethrown once all calls have returned. */
template <class T, class Body, class Combine>
FSCHED__NODISCARD fsched_result parallel_reduce(std::size_t begin, std::size_t end,
                                                std::size_t grain,
                                                const typename detail::exactly<T>::type &identity,
                                                Body &&body, Combine &&combine, T &result) {
    typedef typename std::remove_reference<Body>::type body_type;
    typedef typename std::remove_reference<Combine>::type combine_type;
    static_assert(detail::fold_shape<body_type, T>::value != 0,
                  "fsched::parallel_reduce: the body takes (size_t i, T &acc) or "
                  "(size_t lo, size_t hi, T &acc)");
    static_assert(detail::merge_shape<combine_type, T>::value != 0,
                  "fsched::parallel_reduce: combine takes (T &acc, T &&other) and merges other "
                  "into acc, or returns the merged T");
    static_assert(detail::copies<T>::value,
                  "fsched::parallel_reduce: T is copied (each piece begins from a copy of "
                  "identity) and moved into result");
    return detail::reduce(begin, end, grain, identity, body, combine, result,
                          detail::copies<T>());
}

/* ---- owners of the C objects ----------------------------------------------------- */

/* Owns a scheduler (or none): destroys it, finishing its work, when it goes. Converts to
   fsched_sched * for the C calls and for spawn. Movable, not copyable. */
class scheduler {
public:
    scheduler() noexcept : s_(nullptr) {}
    explicit scheduler(fsched_sched *owned) noexcept : s_(owned) {}
    scheduler(scheduler &&other) noexcept : s_(other.release()) {}
    scheduler &operator=(scheduler &&other) noexcept {
        if (this != &other) {
            (void)destroy();
            s_ = other.release();
        }
        return *this;
    }
    scheduler(const scheduler &) = delete;
    scheduler &operator=(const scheduler &) = delete;
    ~scheduler() { (void)destroy(); }

    /* fsched_create (desc nullptr: all defaults); FSCHED_ERR_WRONG_STATE when this
       already owns one. */
    FSCHED__NODISCARD fsched_result create(const fsched_desc *desc = nullptr) noexcept {
        fsched_sched *s = nullptr;
        if (s_) return FSCHED_ERR_WRONG_STATE;
        fsched_result r = fsched_create(desc, &s);
        if (r == FSCHED_OK) s_ = s;
        return r;
    }
    /* fsched_destroy now, for its result; it still owns the scheduler when that fails. */
    FSCHED__NODISCARD fsched_result destroy() noexcept {
        if (!s_) return FSCHED_OK;
        fsched_result r = fsched_destroy(s_);
        if (r == FSCHED_OK) s_ = nullptr;
        return r;
    }
    fsched_sched *release() noexcept {
        fsched_sched *s = s_;
        s_ = nullptr;
        return s;
    }
    fsched_sched *get() const noexcept { return s_; }
    operator fsched_sched *() const noexcept { return s_; }

private:
    fsched_sched *s_;
};

/* Binds the calling thread to s for the guard's scope (fsched_bind) and unbinds it at the
   end (fsched_unbind, which first runs the tasks left in the thread's own deque). When
   the bind fails (the thread is already bound or is a worker; no slot left), the
   constructor throws std::system_error with the fsched_result as its code; without
   exceptions, the guard keeps the failure for result() and unbinds nothing. Neither
   copyable nor movable: it belongs to its thread's scope; destroyed on another thread
   (deleted there), it unbinds nothing, as that thread is not the one it bound. */
class bind_guard {
public:
    explicit bind_guard(fsched_sched *s) : r_(fsched_bind(s)), s_(s), slot_(-1) {
        if (r_ != FSCHED_OK) detail::throw_or_keep(r_, "fsched::bind_guard");
        slot_ = fsched_worker_index();
    }
    bind_guard(const bind_guard &) = delete;
    bind_guard &operator=(const bind_guard &) = delete;
    ~bind_guard() {
        if (r_ == FSCHED_OK && fsched_current() == s_ && fsched_worker_index() == slot_)
            (void)fsched_unbind();
    }
    /* FSCHED_OK while the thread is bound by this guard, else why the bind failed. */
    fsched_result result() const noexcept { return r_; }
    explicit operator bool() const noexcept { return r_ == FSCHED_OK; }

private:
    fsched_result r_;
    fsched_sched *s_;
    int slot_; /* the bound thread's slot in s_: which thread this guard bound */
};

/* Tasks spawned into a group, waited for together. wait rethrows the first exception of
   the group's tasks. The destructor waits for the tasks still counted (they use their
   captures and this group) however long that takes: also when its wait is refused as
   no thread would run them yet (a single-threaded scheduler nobody is bound to), until
   a thread that binds, or fsched_destroy, runs them. It hands an exception nobody took
   to the unobserved-exception handler. Neither copyable nor movable: tasks point at it. */
class wait_group {
public:
    wait_group() noexcept : wg_() { (void)fsched_wait_group_init(&wg_); }
    wait_group(const wait_group &) = delete;
    wait_group &operator=(const wait_group &) = delete;
    ~wait_group() {
        if (fsched_wait_group_wait(&wg_) != FSCHED_OK) /* refused: looks every millisecond */
            while (fsched_wait_group_wait_for(&wg_, 0) == FSCHED_ERR_TIMEOUT)
                fsched_sleep_for(1000000u);
#if FSCHED__CPP_EXCEPTIONS
        std::exception_ptr e = errors_.take();
        if (e) detail::report_unobserved(std::move(e));
#endif
        (void)fsched_wait_group_destroy(&wg_);
    }

    /* Runs f() as a task on s counted by this group; as fsched::spawn otherwise. */
    template <class F>
    FSCHED__NODISCARD fsched_result spawn(fsched_sched *s, F &&f, const char *name = nullptr) {
        static_assert(detail::takes_nothing<typename std::decay<F>::type>::value,
                      "fsched::wait_group::spawn: the task is called with no arguments, as f()");
        return detail::spawn_owned(&wg_, &errors_, s, std::forward<F>(f), name);
    }
    /* fsched_wait_group_wait; then, on FSCHED_OK, rethrows the first exception. */
    FSCHED__NODISCARD fsched_result wait() { return rethrow_after(fsched_wait_group_wait(&wg_)); }
    template <class Rep, class Period>
    FSCHED__NODISCARD fsched_result wait_for(const std::chrono::duration<Rep, Period> &timeout) {
        return rethrow_after(fsched_wait_group_wait_for(&wg_, detail::to_ns(timeout)));
    }
    fsched_wait_group *native_handle() noexcept { return &wg_; }

private:
    fsched_result rethrow_after(fsched_result r) {
#if FSCHED__CPP_EXCEPTIONS
        if (r == FSCHED_OK) {
            std::exception_ptr e = errors_.take();
            if (e) std::rethrow_exception(e);
        }
#endif
        return r;
    }
    fsched_wait_group wg_;
    detail::first_error errors_;
};

/* Owns a dependency graph (fsched_graph, see "dependency graphs") whose tasks are
   callables. create makes the C graph; add takes a callable, moved or copied into a
   block the graph owns until it is destroyed, called as f(self) when it can be called so
   (self: the running fsched_graph_task, for fsched_graph_is_cancelled, results, ...), else
   as f(); it returns nothing (success) or a status, an int (0: success; anything else
   fails the task, as in C). Building, running, waiting and cancelling follow the C
   calls, on the same threads; a running task may add to its own graph (its callable is
   kept until the graph is destroyed).

   Exceptions: one that escapes a task fails it (with status FSCHED_ERR_TASK_FAILED, as
   the outcome shows; dependents are skipped or the run cancelled, per the graph's
   policy) and is kept. wait, and a wait_for that finds the run ended, rethrow the
   exception of the run's first failure (fsched_graph_outcome::failed, which *out names)
   when that task threw, once the whole run has ended; when several tasks threw, the
   others' exceptions are dropped, as the outcome reports only the first failure's
   status. When the first failure is a status or a task that could not be queued, wait
   returns its result and rethrows nothing. A wait takes the exception: a second wait for
   the same run only returns.

   The destructor (and a move assignment) cancels a run still in flight, waits for it to
   end (its running tasks use their callables) however long that takes, hands an
   exception of the last run that no wait took to the unobserved-exception handler, and
   destroys the graph and the callables. Destroyed from one of its own running tasks, it
   can do none of that (the C calls refuse, and log it in debug builds): the graph and
   its callables are then left to the run, never freed. Movable, not copyable. */
class graph {
public:
    /* Relaxed, moving: the owner's own act; callables a running task added are read only
       after the wait for its run (close), which orders them. `ran_` is the owner's. */
    graph() noexcept : g_(nullptr), callables_(nullptr), ran_(false) {}
    graph(graph &&other) noexcept
        : g_(other.g_), callables_(other.callables_.exchange(nullptr, std::memory_order_relaxed)),
          ran_(other.ran_.load(std::memory_order_relaxed)) {
        other.g_ = nullptr;
    }
    graph &operator=(graph &&other) noexcept {
        if (this != &other) {
            close();
            g_ = other.g_;
            other.g_ = nullptr;
            callables_.store(other.callables_.exchange(nullptr, std::memory_order_relaxed),
                             std::memory_order_relaxed);
            ran_.store(other.ran_.load(std::memory_order_relaxed), std::memory_order_relaxed);
        }
        return *this;
    }
    graph(const graph &) = delete;
    graph &operator=(const graph &) = delete;
    ~graph() { close(); }

    /* fsched_graph_create (desc nullptr: all defaults); FSCHED_ERR_WRONG_STATE when this
       already owns one. */
    FSCHED__NODISCARD fsched_result create(const fsched_graph_desc *desc = nullptr) noexcept {
        fsched_graph *g = nullptr;
        if (g_) return FSCHED_ERR_WRONG_STATE;
        fsched_result r = fsched_graph_create(desc, &g);
        if (r == FSCHED_OK) g_ = g;
        return r;
    }

    /* Adds a task that calls f, as fsched_graph_add; *out (when out is not null) is its
       handle, for precede and the C queries, or null when the add fails.
       FSCHED_ERR_OUT_OF_MEMORY when the block for
       f cannot be allocated; when the add fails, that copy of f is destroyed. */
    template <class F>
    FSCHED__NODISCARD fsched_result add(F &&f, fsched_graph_task **out = nullptr,
                                        const char *name = nullptr) {
        fsched_graph_task_desc desc = fsched_graph_task_desc();
        desc.name = name;
        return add(std::forward<F>(f), out, desc);
    }
    template <class F>
    FSCHED__NODISCARD fsched_result add(F &&f, fsched_graph_task **out,
                                        const fsched_graph_task_desc &desc) {
        typedef typename std::decay<F>::type fn_type;
        static_assert(detail::graph_shape<fn_type>::value != 0,
                      "fsched::graph::add: the task is called as f(fsched_graph_task *self) "
                      "or f(), and returns void or an int status");
        typedef detail::graph_task<fn_type> task;
        if (out) *out = nullptr;
        task *t = new (std::nothrow) task(std::forward<F>(f));
        if (!t) return FSCHED_ERR_OUT_OF_MEMORY;
        fsched_result r = fsched_graph_add(g_, &task::run, t, &desc, &t->task);
        if (r != FSCHED_OK) {
            delete t;
            return r;
        }
        keep(t);
        if (out) *out = t->task;
        return r;
    }
    /* fsched_graph_precede: `before` finishes before `after` starts. */
    FSCHED__NODISCARD fsched_result precede(fsched_graph_task *before,
                                            fsched_graph_task *after) noexcept {
        return fsched_graph_precede(g_, before, after);
    }
    /* fsched_graph_run: starts a run on s and returns at once. */
    FSCHED__NODISCARD fsched_result run(fsched_sched *s) noexcept {
        fsched_result r = fsched_graph_run(g_, s);
        /* relaxed: read by the destructor, which the owner orders after every call */
        if (r == FSCHED_OK) ran_.store(true, std::memory_order_relaxed);
        return r;
    }
    /* fsched_graph_wait; then rethrows the first failure's exception (see above). */
    FSCHED__NODISCARD fsched_result wait(fsched_graph_outcome *out = nullptr) {
        fsched_graph_outcome o;
        if (!out) out = &o;
        return rethrow_after(fsched_graph_wait(g_, out), *out);
    }
    /* fsched_graph_wait_for: FSCHED_ERR_TIMEOUT while the run goes on; else as wait. */
    template <class Rep, class Period>
    FSCHED__NODISCARD fsched_result wait_for(const std::chrono::duration<Rep, Period> &timeout,
                                             fsched_graph_outcome *out = nullptr) {
        fsched_graph_outcome o;
        if (!out) out = &o;
        return rethrow_after(fsched_graph_wait_for(g_, detail::to_ns(timeout), out), *out);
    }
    /* fsched_graph_cancel: the tasks of the current run that have not started do not. */
    fsched_result cancel() noexcept { return fsched_graph_cancel(g_); }
    fsched_graph *get() const noexcept { return g_; }

private:
    void keep(detail::graph_callable *c) noexcept {
        /* relaxed: a guess the CAS checks; release: a wait that finds c on the list sees
           its task */
        c->next = callables_.load(std::memory_order_relaxed);
        while (!callables_.compare_exchange_weak(c->next, c, std::memory_order_release,
                                                 std::memory_order_relaxed)) {
        }
    }
    /* The callable of task t, or null (a task added with the C calls). */
    detail::graph_callable *callable_of(const fsched_graph_task *t) const noexcept {
        /* acquire: pairs with keep's release */
        detail::graph_callable *c = callables_.load(std::memory_order_acquire);
        while (c && c->task != t) c = c->next;
        return c;
    }
    fsched_result rethrow_after(fsched_result r, const fsched_graph_outcome &o) {
#if FSCHED__CPP_EXCEPTIONS
        detail::graph_callable *c;
        /* the result of the outcome alone: a call's own errors are never this one */
        if (r == FSCHED_ERR_TASK_FAILED && (c = callable_of(o.failed)) != nullptr) {
            std::exception_ptr e = c->thrown.take();
            if (e) std::rethrow_exception(e);
        }
#else
        (void)o;
#endif
        return r;
    }
    /* Ends the last run as the destructor does (see above): a thrown exception no wait
       took goes to the unobserved-exception handler. Whether the run ended. */
    bool end_run() noexcept {
        fsched_graph_outcome o = fsched_graph_outcome();
        (void)fsched_graph_cancel(g_); /* nothing when the run has ended */
        fsched_result r = fsched_graph_wait(g_, &o);
#if FSCHED__CPP_EXCEPTIONS
        detail::graph_callable *c;
        if (r == FSCHED_ERR_TASK_FAILED && (c = callable_of(o.failed)) != nullptr) {
            std::exception_ptr e = c->thrown.take();
            if (e) detail::report_unobserved(std::move(e));
        }
#else
        (void)r;
#endif
        return fsched_graph_destroy(g_) == FSCHED_OK;
    }
    /* Relaxed, `ran_` and the list left to a run: the owner's own (see the constructors). */
    void close() noexcept {
        if (!g_) return;
        /* a graph never run through this owner is destroyed at once (unless the C calls
           run it) */
        bool destroyed =
            !ran_.load(std::memory_order_relaxed) && fsched_graph_destroy(g_) == FSCHED_OK;
        if (!destroyed && !end_run()) { /* destroyed by its own task: left to the run */
            g_ = nullptr;
            callables_.store(nullptr, std::memory_order_relaxed);
            return;
        }
        g_ = nullptr;
        ran_.store(false, std::memory_order_relaxed);
        /* acquire: the callables that running tasks added */
        detail::graph_callable *c = callables_.exchange(nullptr, std::memory_order_acquire);
        while (c) {
            detail::graph_callable *next = c->next;
            delete c;
            c = next;
        }
    }

    fsched_graph *g_;
    std::atomic<detail::graph_callable *> callables_;
    std::atomic<bool> ran_;
};

/* A fiber-aware mutex (fsched_mutex) with the standard's Lockable and TimedLockable
   shape: std::lock_guard, std::unique_lock and std::scoped_lock work with it. lock throws
   std::system_error when the C call fails (misuse); unlock of a mutex that is not locked
   is refused and, in debug builds, logged. */
class mutex {
public:
    mutex() noexcept : m_() { (void)fsched_mutex_init(&m_); }
    mutex(const mutex &) = delete;
    mutex &operator=(const mutex &) = delete;
    ~mutex() { (void)fsched_mutex_destroy(&m_); }

    void lock() { detail::check(fsched_mutex_lock(&m_), "fsched::mutex::lock"); }
    bool try_lock() noexcept { return fsched_mutex_try_lock(&m_) == FSCHED_OK; }
    template <class Rep, class Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period> &timeout) {
        return detail::timed(fsched_mutex_lock_for(&m_, detail::to_ns(timeout)),
                             "fsched::mutex::try_lock_for");
    }
    template <class Clock, class Duration>
    bool try_lock_until(const std::chrono::time_point<Clock, Duration> &deadline) {
        return try_lock_for(deadline - Clock::now());
    }
    void unlock() noexcept { (void)fsched_mutex_unlock(&m_); }
    fsched_mutex *native_handle() noexcept { return &m_; }

private:
    fsched_mutex m_;
};

#if FSCHED__STD_CV_STATUS
using std::cv_status;
#else
enum class cv_status { no_timeout, timeout };
#endif

/* A fiber-aware condition variable (fsched_cond) for std::unique_lock<fsched::mutex>,
   shaped after std::condition_variable. Timed waits measure with fsched_clock_ns (a
   wait_until with its own clock converts once per wait). */
class condition_variable {
public:
    condition_variable() noexcept : c_() { (void)fsched_cond_init(&c_); }
    condition_variable(const condition_variable &) = delete;
    condition_variable &operator=(const condition_variable &) = delete;
    ~condition_variable() { (void)fsched_cond_destroy(&c_); }

    void notify_one() noexcept { (void)fsched_cond_signal(&c_); }
    void notify_all() noexcept { (void)fsched_cond_broadcast(&c_); }

    /* Throws std::system_error on a failure; for want of memory (FSCHED_ERR_OUT_OF_MEMORY)
       with the mutex let go: `lock` then owns nothing. */
    void wait(std::unique_lock<mutex> &lock) {
        detail::check(disown_on_oom(lock, fsched_cond_wait(&c_, lock.mutex()->native_handle())),
                      "fsched::condition_variable::wait");
    }
    template <class Predicate> void wait(std::unique_lock<mutex> &lock, Predicate pred) {
        while (!pred()) wait(lock);
    }
    template <class Rep, class Period>
    cv_status wait_for(std::unique_lock<mutex> &lock,
                       const std::chrono::duration<Rep, Period> &timeout) {
        return wait_ns(lock, detail::to_ns(timeout)) ? cv_status::no_timeout
                                                     : cv_status::timeout;
    }
    template <class Rep, class Period, class Predicate>
    bool wait_for(std::unique_lock<mutex> &lock, const std::chrono::duration<Rep, Period> &timeout,
                  Predicate pred) {
        const std::uint64_t total = detail::to_ns(timeout), start = fsched_clock_ns();
        while (!pred()) {
            const std::uint64_t spent = fsched_clock_ns() - start;
            if (spent >= total || !wait_ns(lock, total - spent)) return pred();
        }
        return true;
    }
    template <class Clock, class Duration>
    cv_status wait_until(std::unique_lock<mutex> &lock,
                         const std::chrono::time_point<Clock, Duration> &deadline) {
        (void)wait_for(lock, deadline - Clock::now());
        return Clock::now() < deadline ? cv_status::no_timeout : cv_status::timeout;
    }
    template <class Clock, class Duration, class Predicate>
    bool wait_until(std::unique_lock<mutex> &lock,
                    const std::chrono::time_point<Clock, Duration> &deadline, Predicate pred) {
        while (!pred())
            if (wait_until(lock, deadline) == cv_status::timeout) return pred();
        return true;
    }
    fsched_cond *native_handle() noexcept { return &c_; }

private:
    bool wait_ns(std::unique_lock<mutex> &lock, std::uint64_t ns) {
        return detail::timed(
            disown_on_oom(lock, fsched_cond_wait_for(&c_, lock.mutex()->native_handle(), ns)),
            "fsched::condition_variable::wait_for");
    }
    /* FSCHED_ERR_OUT_OF_MEMORY returns without the mutex: the lock stops owning it, so
       that it does not unlock what another may hold by then */
    static fsched_result disown_on_oom(std::unique_lock<mutex> &lock, fsched_result r) {
        if (r == FSCHED_ERR_OUT_OF_MEMORY)
            lock = std::unique_lock<mutex>(*lock.release(), std::defer_lock);
        return r;
    }
    fsched_cond c_;
};

/* fsched_event: auto-reset (each set releases one waiter) unless manual_reset. */
class event {
public:
    explicit event(bool manual_reset = false, bool initially_set = false) noexcept : e_() {
        (void)fsched_event_init(&e_, manual_reset, initially_set);
    }
    event(const event &) = delete;
    event &operator=(const event &) = delete;
    ~event() { (void)fsched_event_destroy(&e_); }

    fsched_result set() noexcept { return fsched_event_set(&e_); }
    fsched_result reset() noexcept { return fsched_event_reset(&e_); }
    bool is_set() const noexcept { return fsched_event_is_set(&e_) != 0; }
    FSCHED__NODISCARD fsched_result wait() noexcept { return fsched_event_wait(&e_); }
    template <class Rep, class Period>
    FSCHED__NODISCARD fsched_result
    wait_for(const std::chrono::duration<Rep, Period> &timeout) noexcept {
        return fsched_event_wait_for(&e_, detail::to_ns(timeout));
    }
    fsched_event *native_handle() noexcept { return &e_; }

private:
    fsched_event e_;
};

/* fsched_sema: a counting semaphore. */
class semaphore {
public:
    explicit semaphore(std::int64_t initial = 0) noexcept : s_() {
        (void)fsched_sema_init(&s_, initial);
    }
    semaphore(const semaphore &) = delete;
    semaphore &operator=(const semaphore &) = delete;
    ~semaphore() { (void)fsched_sema_destroy(&s_); }

    FSCHED__NODISCARD fsched_result acquire() noexcept { return fsched_sema_acquire(&s_); }
    template <class Rep, class Period>
    FSCHED__NODISCARD fsched_result
    acquire_for(const std::chrono::duration<Rep, Period> &timeout) noexcept {
        return fsched_sema_acquire_for(&s_, detail::to_ns(timeout));
    }
    /* FSCHED_OK, or FSCHED_ERR_TIMEOUT at once when the count is zero. */
    FSCHED__NODISCARD fsched_result try_acquire() noexcept { return fsched_sema_try_acquire(&s_); }
    fsched_result release(std::int64_t n = 1) noexcept { return fsched_sema_release(&s_, n); }
    fsched_sema *native_handle() noexcept { return &s_; }

private:
    fsched_sema s_;
};

/* fsched_sleep_for and fsched_yield: suspend the calling fiber (or thread). */
template <class Rep, class Period> void sleep_for(const std::chrono::duration<Rep, Period> &d) {
    fsched_sleep_for(detail::to_ns(d));
}
inline void yield() noexcept { fsched_yield(); }

} // namespace fsched

#endif /* FIBERSCHED_CPP_H */

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
