/* Cost of one context switch, side by side in one run:

   floor             a minimal switch written here: pushes the callee-saved integer
                     registers, swaps stack pointers, pops, jumps to the resumed context's
                     return address (x86-64, AArch64); also shown returning with `ret`
   fibersched        fsched_fiber_switch(), the public API (state checks included), built
                     with NDEBUG as the benchmarks are
   fibersched, default build
                     the same without NDEBUG, as `cc -O2` builds it: with the debug
                     checks (bench_switch_variant.c)
   fibersched, FIBERSCHED_FPU_CONTROL=1
                     the same, also switching the x86 floating-point control words
                     (bench_switch_variant.c)
   fsched__asm_switch
                     the library's assembly primitive alone, without the API around it
   swapcontext       POSIX ucontext (saves the signal mask: a system call per switch)
   Boost.Context     boost::context::fiber (bench_switch_boost.cpp), when available

   Each candidate ping-pongs between the main context and one coroutine; a round trip is
   two switches. Reported: the median over repetitions of nanoseconds per switch.
   Usage: bench_switch [--quick] */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "bench_util.h"

#include <ucontext.h>

double bench_fpu_switch(long round_trips);     /* bench_switch_variant.c, FPU control */
double bench_default_switch(long round_trips); /* bench_switch_variant.c, without NDEBUG */
#if defined(FSCHED_BENCH_BOOST)
double bench_boost_fiber_switch(long round_trips); /* bench_switch_boost.cpp */
#endif

/* ---- the floor: callee-saved integer registers only ----
   Two forms. The floor returns into the other context with an indirect jump, which the
   branch predictor learns; the `ret` form is shown because the return-stack predictor
   misses every such return, and on some processors that dominates the cost. */

#if defined(__x86_64__) && !defined(_WIN32)
#define HAVE_FLOOR 1
#define FLOOR_PUSH "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
#define FLOOR_POP "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
void floor_switch_jmp(void **save_sp, void *load_sp);
void floor_switch_ret(void **save_sp, void *load_sp);
void floor_entry(void);
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        "floor_switch_jmp:\n" FLOOR_PUSH
        "    movq %rsp, (%rdi)\n    movq %rsi, %rsp\n" FLOOR_POP
        "    popq %rcx\n    jmp *%rcx\n"
        ".p2align 4\n"
        "floor_switch_ret:\n" FLOOR_PUSH
        "    movq %rsp, (%rdi)\n    movq %rsi, %rsp\n" FLOOR_POP
        "    ret\n"
        "floor_entry:\n"
        "    callq *%rbx\n"
        "    ud2\n"
        ".popsection\n"
        ".pushsection .note.GNU-stack,\"\",%progbits\n.popsection\n");
static void *floor_make(unsigned char *top, void (*fn)(void)) {
    uintptr_t *sp = (uintptr_t *)((uintptr_t)top & ~(uintptr_t)15);
    *--sp = 0;
    *--sp = 0;
    *--sp = (uintptr_t)floor_entry;
    *--sp = 0;               /* rbp */
    *--sp = (uintptr_t)fn;   /* rbx */
    *--sp = 0; *--sp = 0; *--sp = 0; *--sp = 0; /* r12-r15 */
    return sp;
}
#elif defined(__aarch64__)
#define HAVE_FLOOR 1
#define FLOOR_SAVE \
    "    sub sp, sp, #96\n" \
    "    stp x19, x20, [sp, #0]\n    stp x21, x22, [sp, #16]\n    stp x23, x24, [sp, #32]\n" \
    "    stp x25, x26, [sp, #48]\n    stp x27, x28, [sp, #64]\n    stp x29, x30, [sp, #80]\n" \
    "    mov x9, sp\n    str x9, [x0]\n    mov sp, x1\n" \
    "    ldp x19, x20, [sp, #0]\n    ldp x21, x22, [sp, #16]\n    ldp x23, x24, [sp, #32]\n" \
    "    ldp x25, x26, [sp, #48]\n    ldp x27, x28, [sp, #64]\n    ldp x29, x30, [sp, #80]\n" \
    "    add sp, sp, #96\n"
void floor_switch_jmp(void **save_sp, void *load_sp);
void floor_switch_ret(void **save_sp, void *load_sp);
void floor_entry(void);
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        "floor_switch_jmp:\n" FLOOR_SAVE "    br x30\n"
        ".p2align 4\n"
        "floor_switch_ret:\n" FLOOR_SAVE "    ret\n"
        "floor_entry:\n"
        "    blr x19\n"
        "    brk #0\n"
        ".popsection\n"
        ".pushsection .note.GNU-stack,\"\",%progbits\n.popsection\n");
static void *floor_make(unsigned char *top, void (*fn)(void)) {
    uintptr_t *sp = (uintptr_t *)((uintptr_t)top & ~(uintptr_t)15) - 12;
    memset(sp, 0, 12 * sizeof *sp);
    sp[0] = (uintptr_t)fn;          /* x19 */
    sp[11] = (uintptr_t)floor_entry; /* x30 */
    return sp;
}
#endif

#if defined(HAVE_FLOOR)
static void *floor_main_sp, *floor_co_sp;
static void (*floor_switch)(void **, void *);
static void floor_co(void) {
    for (;;) floor_switch(&floor_co_sp, floor_main_sp);
}
static double floor_run(void (*sw)(void **, void *), long n) {
    static unsigned char stack[64 * 1024] __attribute__((aligned(16)));
    double t0, t1;
    long i;
    floor_switch = sw;
    floor_co_sp = floor_make(stack + sizeof stack, floor_co);
    sw(&floor_main_sp, floor_co_sp); /* first entry */
    t0 = bench_now();
    for (i = 0; i < n; i++) sw(&floor_main_sp, floor_co_sp);
    t1 = bench_now();
    return (t1 - t0) / (2.0 * (double)n);
}
static double bench_floor(long n) { return floor_run(floor_switch_jmp, n); }
static double bench_floor_ret(long n) { return floor_run(floor_switch_ret, n); }
#endif

/* ---- fibersched, public API ---- */

static fsched_fiber *api_main, *api_co;
static void api_body(void *arg) {
    (void)arg;
    for (;;) fsched_fiber_switch(api_main);
}
static double bench_api(long n) {
    fsched_fiber_desc d;
    double t0, t1;
    long i;
    memset(&d, 0, sizeof d);
    d.stack_size = 64 * 1024;
    api_main = fsched_fiber_current();
    if (fsched_fiber_create(&d, api_body, NULL, &api_co) != FSCHED_OK) abort();
    fsched_fiber_switch(api_co);
    t0 = bench_now();
    for (i = 0; i < n; i++) fsched_fiber_switch(api_co);
    t1 = bench_now();
    fsched_fiber_destroy(api_co);
    return (t1 - t0) / (2.0 * (double)n);
}

/* ---- fibersched, the assembly primitive alone ---- */

#if defined(FSCHED__CTX_ASM)
static void *raw_main_sp, *raw_co_sp;
static void raw_body(void *pass) {
    (void)pass;
    for (;;) fsched__asm_switch(&raw_co_sp, raw_main_sp, NULL);
}
static double bench_raw(long n) {
    static unsigned char stack[64 * 1024] __attribute__((aligned(16)));
    double t0, t1;
    long i;
    raw_co_sp = fsched__asm_make_stack(stack, stack + sizeof stack, raw_body, fsched__fiber_trap);
    fsched__asm_switch(&raw_main_sp, raw_co_sp, NULL);
    t0 = bench_now();
    for (i = 0; i < n; i++) fsched__asm_switch(&raw_main_sp, raw_co_sp, NULL);
    t1 = bench_now();
    return (t1 - t0) / (2.0 * (double)n);
}
#endif

/* ---- swapcontext ---- */

static ucontext_t uc_main, uc_co;
static void uc_body(void) {
    for (;;) swapcontext(&uc_co, &uc_main);
}
static double bench_ucontext(long n) {
    static unsigned char stack[64 * 1024] __attribute__((aligned(16)));
    double t0, t1;
    long i;
    getcontext(&uc_co);
    uc_co.uc_stack.ss_sp = stack;
    uc_co.uc_stack.ss_size = sizeof stack;
    uc_co.uc_link = NULL;
    makecontext(&uc_co, uc_body, 0);
    swapcontext(&uc_main, &uc_co);
    n /= 50; /* two system calls per round trip: fewer rounds suffice */
    if (n < 1000) n = 1000;
    t0 = bench_now();
    for (i = 0; i < n; i++) swapcontext(&uc_main, &uc_co);
    t1 = bench_now();
    return (t1 - t0) / (2.0 * (double)n);
}

/* ---- the table ---- */

typedef struct candidate {
    const char *name;
    double (*run)(long round_trips);
    double samples[64];
    double median;
} candidate;

int main(int argc, char **argv) {
    candidate c[8];
    int nc = 0, reps = bench_quick(argc, argv) ? 5 : 21, r, i;
    long n = bench_quick(argc, argv) ? 200000 : 2000000;
    double floor_ns = 0, boost_ns = 0;
    memset(c, 0, sizeof c);
#if defined(HAVE_FLOOR)
    c[nc].name = "floor (callee-saved integer registers only)";
    c[nc++].run = bench_floor;
    c[nc].name = "floor, returning with ret";
    c[nc++].run = bench_floor_ret;
#endif
    c[nc].name = "fibersched: fsched_fiber_switch";
    c[nc++].run = bench_api;
    c[nc].name = "fibersched: fsched_fiber_switch, default build (no NDEBUG)";
    c[nc++].run = bench_default_switch;
    c[nc].name = "fibersched: fsched_fiber_switch, FIBERSCHED_FPU_CONTROL=1";
    c[nc++].run = bench_fpu_switch;
#if defined(FSCHED__CTX_ASM)
    c[nc].name = "fibersched: assembly primitive alone";
    c[nc++].run = bench_raw;
#endif
#if defined(FSCHED_BENCH_BOOST)
    c[nc].name = "Boost.Context fiber";
    c[nc++].run = bench_boost_fiber_switch;
#endif
    c[nc].name = "swapcontext";
    c[nc++].run = bench_ucontext;

    for (i = 0; i < nc; i++) c[i].run(n / 10); /* warm up */
    for (r = 0; r < reps; r++)
        for (i = 0; i < nc; i++) {
            int k = (i + r) % nc; /* rotate the order between repetitions */
            c[k].samples[r] = c[k].run(n) * 1e9;
        }
    for (i = 0; i < nc; i++) {
        c[i].median = bench_median(c[i].samples, reps);
        if (strcmp(c[i].name, "floor (callee-saved integer registers only)") == 0) floor_ns = c[i].median;
        if (strncmp(c[i].name, "Boost", 5) == 0) boost_ns = c[i].median;
    }
    printf("context switch: median of %d repetitions, %ld round trips each\n\n", reps, n);
    printf("| %-58s | %9s | %8s | %8s |\n", "candidate", "ns/switch", "vs floor", "vs Boost");
    printf("|%s|%s|%s|%s|\n", "------------------------------------------------------------",
           "-----------", "----------", "----------");
    for (i = 0; i < nc; i++) {
        char vf[16] = "-", vb[16] = "-";
        if (floor_ns > 0) snprintf(vf, sizeof vf, "%.2fx", c[i].median / floor_ns);
        if (boost_ns > 0) snprintf(vb, sizeof vb, "%.2fx", c[i].median / boost_ns);
        printf("| %-58s | %9.2f | %8s | %8s |\n", c[i].name, c[i].median, vf, vb);
    }
    return 0;
}
