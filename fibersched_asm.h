/* fibersched_asm.h - context switch for fibersched.h - MIT license (see fibersched.h)

   Included by fibersched.h inside its implementation; not meant to be included on its own.

   The asm backend provides two symbols per architecture, written as top-level assembly so
   that they are real functions (never inlined, visible to debuggers and profilers):

       void *fsched__asm_switch(void **save_sp, void *load_sp, void *pass);

           Pushes the callee-saved registers of the running context onto its own stack,
           stores the stack pointer in *save_sp, loads load_sp, pops the registers saved
           there and returns `pass` in the context that was resumed. The store to *save_sp
           is a release store (a barrier before it on weakly ordered machines): a thread
           that reads the saved pointer with acquire ordering also sees the registers saved
           below it, so it may resume the context. On x86 the switch returns with an
           indirect jump instead of `ret`: a `ret` into another context always misses the
           return-stack predictor, a jump between two contexts is predicted.

       fsched__asm_entry

           The first frame of every fiber. fsched__asm_make_stack() builds an initial
           register image whose return address is this trampoline and whose callee-saved
           registers hold the entry function and a trap. The trampoline calls
           entry(pass); if entry ever returns, it calls trap(), which reports the error and
           ends the process. Its unwind information marks the return address as undefined,
           so debuggers and unwinders stop there.

       void *fsched__asm_make_stack(void *lo, void *hi, void (*entry)(void *),
                                    void (*trap)(void));

           Builds that image at the top of [lo, hi) and returns the stack pointer to pass
           as load_sp.

   Floating-point control state. The x86 ABIs (System V and Windows) make the control bits
   of MXCSR and the x87 control word callee-saved. By default they are not switched:
   fibers share the thread's floating-point environment (rounding mode, exception masks,
   flush-to-zero), so a fiber that changes it must restore it before it switches away.
   Reading the two words costs more than the whole rest of a switch (bench/bench_switch.c
   measures both builds side by side), and code that changes them is rare.
   FIBERSCHED_FPU_CONTROL=1 saves and restores them with every x86 context, as the ABIs
   ask; a new fiber then starts with the control words of the thread that created it. On
   the other architectures the floating-point control register (FPCR, FPSCR, fcsr, FPSCR)
   is never switched.

   Register policies worth knowing:
   - AArch64: x18 is the platform register (TEB on Windows, reserved on Apple platforms); it
     is never touched, so fibers see the thread's value. The shadow call stack
     (-fsanitize=shadow-call-stack), which keeps its pointer in x18, is not supported.
   - ppc64le: r13 (thread pointer) is never touched; r2 (TOC) is saved, VRSAVE is not.
   - x86: not compatible with CET shadow stacks (a switch returns to another context).
*/
#ifndef FIBERSCHED_ASM_H
#define FIBERSCHED_ASM_H

#ifndef FIBERSCHED_FPU_CONTROL
#define FIBERSCHED_FPU_CONTROL 0
#endif

/* ---- backend and architecture selection ----------------------------------------- */

#if defined(FIBERSCHED_CONTEXT_ASM) + defined(FIBERSCHED_CONTEXT_UCONTEXT) + \
    defined(FIBERSCHED_CONTEXT_WINFIBER) > 1
#error "fibersched: define at most one of FIBERSCHED_CONTEXT_ASM, _UCONTEXT, _WINFIBER"
#endif

#if defined(__x86_64__) && defined(_WIN32) && defined(__GNUC__)
#define FSCHED__ASM_X86_64_WIN 1
#elif defined(__x86_64__) && defined(__GNUC__)
#define FSCHED__ASM_X86_64_SYSV 1
#elif defined(__i386__) && defined(__GNUC__) && !defined(_WIN32) && !defined(__APPLE__)
#define FSCHED__ASM_I386 1
#elif defined(__aarch64__) && defined(__GNUC__) && !defined(_WIN32)
#define FSCHED__ASM_AARCH64 1
#elif defined(__arm__) && defined(__GNUC__) && !defined(_WIN32) && !defined(__APPLE__)
#define FSCHED__ASM_ARM 1
#elif defined(__riscv) && defined(__GNUC__) && __riscv_xlen == 64
#define FSCHED__ASM_RISCV64 1
#elif defined(__powerpc64__) && defined(__GNUC__) && defined(_CALL_ELF) && _CALL_ELF == 2
#define FSCHED__ASM_PPC64LE 1
#endif

#if defined(FSCHED__ASM_X86_64_WIN) || defined(FSCHED__ASM_X86_64_SYSV) || \
    defined(FSCHED__ASM_I386) || defined(FSCHED__ASM_AARCH64) || defined(FSCHED__ASM_ARM) || \
    defined(FSCHED__ASM_RISCV64) || defined(FSCHED__ASM_PPC64LE)
#define FSCHED__ASM_AVAILABLE 1
#endif

#if defined(FIBERSCHED_CONTEXT_ASM)
#ifndef FSCHED__ASM_AVAILABLE
#error "fibersched: FIBERSCHED_CONTEXT_ASM has no assembly for this architecture or compiler"
#endif
#define FSCHED__CTX_ASM 1
#elif defined(FIBERSCHED_CONTEXT_UCONTEXT)
#define FSCHED__CTX_UCONTEXT 1
#elif defined(FIBERSCHED_CONTEXT_WINFIBER)
#define FSCHED__CTX_WINFIBER 1
#elif defined(FSCHED__ASM_AVAILABLE)
#define FSCHED__CTX_ASM 1
#elif defined(_WIN32)
#define FSCHED__CTX_WINFIBER 1
#elif defined(__unix__) || defined(__APPLE__)
#define FSCHED__CTX_UCONTEXT 1
#else
#error "fibersched: no context backend for this target; port fibersched_asm.h"
#endif

#if defined(FSCHED__CTX_ASM)

#if !defined(FSCHED__ASM_X86_64_SYSV) && !defined(FSCHED__ASM_X86_64_WIN) && \
    !defined(FSCHED__ASM_I386)
#undef FIBERSCHED_FPU_CONTROL
#define FIBERSCHED_FPU_CONTROL 0 /* switched on x86 only; see the top of this file */
#endif

/* ---- symbol spelling per object format ------------------------------------------ */

#if defined(FIBERSCHED_STATIC)
#define FSCHED__ASM_BIND(s) "" /* local symbols: each translation unit has its own copy */
#elif defined(__APPLE__)
#define FSCHED__ASM_BIND(s) ".globl " s "\n.private_extern " s "\n"
#elif defined(_WIN32)
#define FSCHED__ASM_BIND(s) ".globl " s "\n"
#else
#define FSCHED__ASM_BIND(s) ".globl " s "\n.hidden " s "\n"
#endif

#if defined(__APPLE__)
#define FSCHED__ASM_NAME(n) "_" n
#define FSCHED__ASM_SECTION_BEGIN ".pushsection __TEXT,__text,regular,pure_instructions\n"
#define FSCHED__ASM_SECTION_END ".popsection\n"
#define FSCHED__ASM_TYPE(s) ""
#define FSCHED__ASM_SIZE(s) ""
#elif defined(_WIN32)
#define FSCHED__ASM_NAME(n) n
#define FSCHED__ASM_SECTION_BEGIN ".text\n" /* gas for COFF has no .pushsection */
#define FSCHED__ASM_SECTION_END ""
#if defined(FIBERSCHED_STATIC)
#define FSCHED__ASM_TYPE(s) ".def " s "\n.scl 3\n.type 32\n.endef\n"
#else
#define FSCHED__ASM_TYPE(s) ".def " s "\n.scl 2\n.type 32\n.endef\n"
#endif
#define FSCHED__ASM_SIZE(s) ""
#else
#define FSCHED__ASM_NAME(n) n
#define FSCHED__ASM_SECTION_BEGIN ".pushsection .text\n"
#define FSCHED__ASM_SECTION_END ".popsection\n.pushsection .note.GNU-stack,\"\",%progbits\n.popsection\n"
#define FSCHED__ASM_TYPE(s) ".type " s ",%function\n"
#define FSCHED__ASM_SIZE(s) ".size " s ",.-" s "\n"
#endif

#define FSCHED__ASM_SWITCH FSCHED__ASM_NAME("fsched__asm_switch")
#define FSCHED__ASM_ENTRY FSCHED__ASM_NAME("fsched__asm_entry")
#define FSCHED__ASM_FUNC(s, align) FSCHED__ASM_BIND(s) FSCHED__ASM_TYPE(s) align s ":\n"
/* A local label in each switch just after the stack pointer of the resumed context is
   loaded: there, the switch's unwind information describes the frame that context saved,
   so a debugger that puts a suspended fiber's saved stack pointer in sp and this label in
   pc sees that fiber's backtrace (tools/fibersched-gdb.py, `fiber bt`). */
#define FSCHED__ASM_RESUME FSCHED__ASM_NAME("fsched__asm_resume") ":\n"

#ifdef __cplusplus
extern "C" {
#endif
/* Hidden even for FIBERSCHED_STATIC's local symbols: the compiler must reach them
   directly, not through the global offset table. */
#if defined(__ELF__)
#define FSCHED__ASM_DECL __attribute__((visibility("hidden")))
#else
#define FSCHED__ASM_DECL
#endif
FSCHED__ASM_DECL void *fsched__asm_switch(void **save_sp, void *load_sp, void *pass);
/* The same function seen as returning an int: lets a caller that passes pass = 0 return its
   result directly, as a tail call. */
FSCHED__ASM_DECL fsched_result fsched__asm_switch_result(void **save_sp, void *load_sp,
                                                         void *pass) __asm__(FSCHED__ASM_SWITCH);
FSCHED__ASM_DECL void fsched__asm_entry(void);
#ifdef __cplusplus
}
#endif

#include <stdint.h>

/* Pushes one machine word below *sp (the stack grows down on every supported target). */
static inline uintptr_t *fsched__asm_push(uintptr_t *sp, uintptr_t value) {
    *--sp = value;
    return sp;
}

/* ================================================================================= */
#if defined(FSCHED__ASM_X86_64_SYSV)
/* x86-64 System V: rbx, rbp, r12-r15 and the MXCSR / x87 control words are callee-saved.
   Frame, from high to low: return address, rbp, rbx, r12, r13, r14, r15, [fpu word]. */

#if FIBERSCHED_FPU_CONTROL
/* MXCSR at 0(%rsp), the x87 control word at 4(%rsp). */
#define FSCHED__X64_FPU_SAVE                                                                \
    "    subq $8, %rsp\n"                                                                   \
    "    .cfi_adjust_cfa_offset 8\n"                                                        \
    "    stmxcsr (%rsp)\n"                                                                  \
    "    fnstcw 4(%rsp)\n"
#define FSCHED__X64_FPU_LOAD                                                                \
    "    ldmxcsr (%rsp)\n"                                                                  \
    "    fldcw 4(%rsp)\n"                                                                   \
    "    addq $8, %rsp\n"                                                                   \
    "    .cfi_adjust_cfa_offset -8\n"
#else
#define FSCHED__X64_FPU_SAVE ""
#define FSCHED__X64_FPU_LOAD ""
#endif

#if defined(__CET__)
#define FSCHED__X64_ENDBR "    endbr64\n"
#else
#define FSCHED__X64_ENDBR ""
#endif
/* The return: an indirect jump, exempt from indirect-branch tracking where that is on. */
#if defined(__CET__) && (__CET__ & 1)
#define FSCHED__X86_JUMP(reg) "    notrack jmp *" reg "\n"
#else
#define FSCHED__X86_JUMP(reg) "    jmp *" reg "\n"
#endif

__asm__(
    FSCHED__ASM_SECTION_BEGIN
    FSCHED__ASM_FUNC(FSCHED__ASM_SWITCH, ".p2align 4\n")
    "    .cfi_startproc\n"
    FSCHED__X64_ENDBR
    "    pushq %rbp\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    .cfi_rel_offset %rbp, 0\n"
    "    pushq %rbx\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    .cfi_rel_offset %rbx, 0\n"
    "    pushq %r12\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    .cfi_rel_offset %r12, 0\n"
    "    pushq %r13\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    .cfi_rel_offset %r13, 0\n"
    "    pushq %r14\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    .cfi_rel_offset %r14, 0\n"
    "    pushq %r15\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    .cfi_rel_offset %r15, 0\n"
    FSCHED__X64_FPU_SAVE
    "    movq %rsp, (%rdi)\n"
    "    movq %rsi, %rsp\n"
    FSCHED__ASM_RESUME
    FSCHED__X64_FPU_LOAD
    "    popq %r15\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    popq %r14\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    popq %r13\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    popq %r12\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    popq %rbx\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    popq %rbp\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    movq %rdx, %rax\n"
    "    popq %rcx\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    .cfi_register %rip, %rcx\n"
    FSCHED__X86_JUMP("%rcx")
    "    .cfi_endproc\n"
    FSCHED__ASM_SIZE(FSCHED__ASM_SWITCH)
    /* Entered by the jump above with rsp 16-byte aligned, rax = pass, rbx = entry,
       r12 = trap. */
    FSCHED__ASM_FUNC(FSCHED__ASM_ENTRY, ".p2align 4\n")
    "    .cfi_startproc\n"
    "    .cfi_undefined %rip\n"
    "    movq %rax, %rdi\n"
    "    callq *%rbx\n"
    "    callq *%r12\n"
    "    ud2\n"
    "    .cfi_endproc\n"
    FSCHED__ASM_SIZE(FSCHED__ASM_ENTRY)
    FSCHED__ASM_SECTION_END);

static void *fsched__asm_make_stack(void *lo, void *hi, void (*entry)(void *),
                                    void (*trap)(void)) {
    uintptr_t *sp = (uintptr_t *)((uintptr_t)hi & ~(uintptr_t)15);
    (void)lo;
    sp = fsched__asm_push(sp, 0); /* keeps the trampoline's rsp 16-byte aligned */
    sp = fsched__asm_push(sp, 0);
    sp = fsched__asm_push(sp, (uintptr_t)fsched__asm_entry); /* return address */
    sp = fsched__asm_push(sp, 0);                             /* rbp: ends the frame chain */
    sp = fsched__asm_push(sp, (uintptr_t)entry);              /* rbx */
    sp = fsched__asm_push(sp, (uintptr_t)trap);               /* r12 */
    sp = fsched__asm_push(sp, 0);                             /* r13 */
    sp = fsched__asm_push(sp, 0);                             /* r14 */
    sp = fsched__asm_push(sp, 0);                             /* r15 */
#if FIBERSCHED_FPU_CONTROL
    {   /* a new fiber starts with the control words of the thread that creates it */
        uint32_t mxcsr = 0;
        uint16_t fpucw = 0;
        __asm__ __volatile__("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(fpucw));
        sp = fsched__asm_push(sp, (uintptr_t)mxcsr | ((uintptr_t)fpucw << 32));
    }
#endif
    return sp;
}

/* ================================================================================= */
#elif defined(FSCHED__ASM_X86_64_WIN)
/* x86-64 Windows: rbx, rbp, rdi, rsi, r12-r15, xmm6-xmm15 (all 128 bits) and the MXCSR /
   x87 control words are callee-saved. The TIB fields that describe the current stack
   (stack base, stack limit, deallocation stack) and the fiber data pointer are switched
   too, so that __chkstk stack probes and structured exception handling see the fiber's
   stack, and so is ExceptionList, which x64 Windows leaves unused but Wine walks for its
   own handler frames. Frame, from high to low: return address, rbp, rbx, rdi, rsi, r12-r15,
   then 216 bytes: xmm6-xmm15 at 0..159, MXCSR at 160, x87 control word at 164, the TIB
   fields at 168 (StackBase), 176 (StackLimit), 184 (DeallocationStack), 192 (FiberData),
   200 (ExceptionList), and 8 bytes of padding that keep the xmm slots 16-byte aligned. */

#if FIBERSCHED_FPU_CONTROL
#define FSCHED__WIN64_FPU_SAVE "    stmxcsr 0xa0(%rsp)\n    fnstcw 0xa4(%rsp)\n"
#define FSCHED__WIN64_FPU_LOAD "    ldmxcsr 0xa0(%rsp)\n    fldcw 0xa4(%rsp)\n"
#else
#define FSCHED__WIN64_FPU_SAVE ""
#define FSCHED__WIN64_FPU_LOAD ""
#endif
#if defined(__CET__) && (__CET__ & 1)
#define FSCHED__X86_JUMP(reg) "    notrack jmp *" reg "\n"
#else
#define FSCHED__X86_JUMP(reg) "    jmp *" reg "\n"
#endif

__asm__(
    FSCHED__ASM_SECTION_BEGIN
    FSCHED__ASM_FUNC(FSCHED__ASM_SWITCH, ".p2align 4\n")
    "    pushq %rbp\n"
    "    pushq %rbx\n"
    "    pushq %rdi\n"
    "    pushq %rsi\n"
    "    pushq %r12\n"
    "    pushq %r13\n"
    "    pushq %r14\n"
    "    pushq %r15\n"
    "    subq $0xd8, %rsp\n"
    "    movaps %xmm6, 0x00(%rsp)\n"
    "    movaps %xmm7, 0x10(%rsp)\n"
    "    movaps %xmm8, 0x20(%rsp)\n"
    "    movaps %xmm9, 0x30(%rsp)\n"
    "    movaps %xmm10, 0x40(%rsp)\n"
    "    movaps %xmm11, 0x50(%rsp)\n"
    "    movaps %xmm12, 0x60(%rsp)\n"
    "    movaps %xmm13, 0x70(%rsp)\n"
    "    movaps %xmm14, 0x80(%rsp)\n"
    "    movaps %xmm15, 0x90(%rsp)\n"
    FSCHED__WIN64_FPU_SAVE
    "    movq %gs:0x08, %rax\n"
    "    movq %rax, 0xa8(%rsp)\n"
    "    movq %gs:0x10, %rax\n"
    "    movq %rax, 0xb0(%rsp)\n"
    "    movq %gs:0x1478, %rax\n"
    "    movq %rax, 0xb8(%rsp)\n"
    "    movq %gs:0x20, %rax\n"
    "    movq %rax, 0xc0(%rsp)\n"
    "    movq %gs:0x00, %rax\n"
    "    movq %rax, 0xc8(%rsp)\n"
    "    movq %rsp, (%rcx)\n"
    "    movq %rdx, %rsp\n"
    FSCHED__ASM_RESUME
    "    movq 0xa8(%rsp), %rax\n"
    "    movq %rax, %gs:0x08\n"
    "    movq 0xb0(%rsp), %rax\n"
    "    movq %rax, %gs:0x10\n"
    "    movq 0xb8(%rsp), %rax\n"
    "    movq %rax, %gs:0x1478\n"
    "    movq 0xc0(%rsp), %rax\n"
    "    movq %rax, %gs:0x20\n"
    "    movq 0xc8(%rsp), %rax\n"
    "    movq %rax, %gs:0x00\n"
    FSCHED__WIN64_FPU_LOAD
    "    movaps 0x00(%rsp), %xmm6\n"
    "    movaps 0x10(%rsp), %xmm7\n"
    "    movaps 0x20(%rsp), %xmm8\n"
    "    movaps 0x30(%rsp), %xmm9\n"
    "    movaps 0x40(%rsp), %xmm10\n"
    "    movaps 0x50(%rsp), %xmm11\n"
    "    movaps 0x60(%rsp), %xmm12\n"
    "    movaps 0x70(%rsp), %xmm13\n"
    "    movaps 0x80(%rsp), %xmm14\n"
    "    movaps 0x90(%rsp), %xmm15\n"
    "    addq $0xd8, %rsp\n"
    "    popq %r15\n"
    "    popq %r14\n"
    "    popq %r13\n"
    "    popq %r12\n"
    "    popq %rsi\n"
    "    popq %rdi\n"
    "    popq %rbx\n"
    "    popq %rbp\n"
    "    movq %r8, %rax\n"
    "    popq %r11\n"
    FSCHED__X86_JUMP("%r11")
    /* Entered by the jump above with rsp 16-byte aligned and a null return address at
       [rsp], which ends every stack walk; rax = pass, rbx = entry, rsi = trap. The SEH
       unwind data describes the 32-byte home space it reserves for its callees. */
    FSCHED__ASM_BIND(FSCHED__ASM_ENTRY) FSCHED__ASM_TYPE(FSCHED__ASM_ENTRY)
    ".seh_proc " FSCHED__ASM_ENTRY "\n"
    ".p2align 4\n"
    FSCHED__ASM_ENTRY ":\n"
    "    subq $32, %rsp\n"
    ".seh_stackalloc 32\n"
    ".seh_endprologue\n"
    "    movq %rax, %rcx\n"
    "    callq *%rbx\n"
    "    callq *%rsi\n"
    "    ud2\n"
    ".seh_endproc\n"
    FSCHED__ASM_SECTION_END);

static void *fsched__asm_make_stack(void *lo, void *hi, void (*entry)(void *),
                                    void (*trap)(void)) {
    uintptr_t *sp = (uintptr_t *)((uintptr_t)hi & ~(uintptr_t)15);
    uintptr_t *frame;
    sp = fsched__asm_push(sp, 0);
    sp = fsched__asm_push(sp, 0); /* the trampoline's null return address */
    sp = fsched__asm_push(sp, (uintptr_t)fsched__asm_entry); /* return address */
    sp = fsched__asm_push(sp, 0);                             /* rbp */
    sp = fsched__asm_push(sp, (uintptr_t)entry);              /* rbx */
    sp = fsched__asm_push(sp, 0);                             /* rdi */
    sp = fsched__asm_push(sp, (uintptr_t)trap);               /* rsi */
    sp = fsched__asm_push(sp, 0);                             /* r12 */
    sp = fsched__asm_push(sp, 0);                             /* r13 */
    sp = fsched__asm_push(sp, 0);                             /* r14 */
    sp = fsched__asm_push(sp, 0);                             /* r15 */
    sp -= 0xd8 / sizeof(uintptr_t);
    frame = sp;
    {
        unsigned char *bytes = (unsigned char *)frame;
        unsigned i;
        uint32_t mxcsr = 0x1f80; /* the defaults, unused unless FIBERSCHED_FPU_CONTROL */
        uint16_t fpucw = 0x037f;
        for (i = 0; i < 0xa0; i++) bytes[i] = 0; /* xmm6-xmm15 */
#if FIBERSCHED_FPU_CONTROL
        __asm__ __volatile__("stmxcsr %0\n\tfnstcw %1" : "=m"(mxcsr), "=m"(fpucw));
#endif
        *(uint32_t *)(bytes + 0xa0) = mxcsr;
        *(uint32_t *)(bytes + 0xa4) = fpucw;
        *(uintptr_t *)(bytes + 0xa8) = (uintptr_t)hi; /* StackBase: highest address */
        *(uintptr_t *)(bytes + 0xb0) = (uintptr_t)lo; /* StackLimit: lowest usable */
        *(uintptr_t *)(bytes + 0xb8) = (uintptr_t)lo; /* DeallocationStack (guard below) */
        {
            uintptr_t fiber_data;
            __asm__ __volatile__("movq %%gs:0x20, %0" : "=r"(fiber_data));
            *(uintptr_t *)(bytes + 0xc0) = fiber_data; /* FiberData of the creator */
        }
        *(uintptr_t *)(bytes + 0xc8) = ~(uintptr_t)0; /* ExceptionList: end of chain */
    }
    return sp;
}

/* ================================================================================= */
#elif defined(FSCHED__ASM_I386)
/* i386 System V: ebx, esi, edi, ebp and the x87 control word (and MXCSR with SSE) are
   callee-saved. Arguments arrive on the stack. Frame, from high to low: return address,
   ebp, ebx, esi, edi, [MXCSR, x87 control word]. */

#if FIBERSCHED_FPU_CONTROL && defined(__SSE__)
#define FSCHED__X86_MXCSR_SAVE "    stmxcsr (%esp)\n"
#define FSCHED__X86_MXCSR_LOAD "    ldmxcsr (%esp)\n"
#else
#define FSCHED__X86_MXCSR_SAVE ""
#define FSCHED__X86_MXCSR_LOAD ""
#endif
#if FIBERSCHED_FPU_CONTROL
#define FSCHED__X86_FPU_SAVE                                                                \
    "    subl $8, %esp\n"                                                                   \
    "    .cfi_adjust_cfa_offset 8\n"                                                        \
    FSCHED__X86_MXCSR_SAVE                                                                  \
    "    fnstcw 4(%esp)\n"
#define FSCHED__X86_FPU_LOAD                                                                \
    FSCHED__X86_MXCSR_LOAD                                                                  \
    "    fldcw 4(%esp)\n"                                                                   \
    "    addl $8, %esp\n"                                                                   \
    "    .cfi_adjust_cfa_offset -8\n"
#else
#define FSCHED__X86_FPU_SAVE ""
#define FSCHED__X86_FPU_LOAD ""
#endif
#if defined(__CET__) && (__CET__ & 1)
#define FSCHED__X86_JUMP(reg) "    notrack jmp *" reg "\n"
#else
#define FSCHED__X86_JUMP(reg) "    jmp *" reg "\n"
#endif

__asm__(
    FSCHED__ASM_SECTION_BEGIN
    FSCHED__ASM_FUNC(FSCHED__ASM_SWITCH, ".p2align 4\n")
    "    .cfi_startproc\n"
    "    movl 4(%esp), %ecx\n"
    "    movl 8(%esp), %edx\n"
    "    movl 12(%esp), %eax\n"
    "    pushl %ebp\n"
    "    .cfi_adjust_cfa_offset 4\n"
    "    .cfi_rel_offset %ebp, 0\n"
    "    pushl %ebx\n"
    "    .cfi_adjust_cfa_offset 4\n"
    "    .cfi_rel_offset %ebx, 0\n"
    "    pushl %esi\n"
    "    .cfi_adjust_cfa_offset 4\n"
    "    .cfi_rel_offset %esi, 0\n"
    "    pushl %edi\n"
    "    .cfi_adjust_cfa_offset 4\n"
    "    .cfi_rel_offset %edi, 0\n"
    FSCHED__X86_FPU_SAVE
    "    movl %esp, (%ecx)\n"
    "    movl %edx, %esp\n"
    FSCHED__ASM_RESUME
    FSCHED__X86_FPU_LOAD
    "    popl %edi\n"
    "    .cfi_adjust_cfa_offset -4\n"
    "    popl %esi\n"
    "    .cfi_adjust_cfa_offset -4\n"
    "    popl %ebx\n"
    "    .cfi_adjust_cfa_offset -4\n"
    "    popl %ebp\n"
    "    .cfi_adjust_cfa_offset -4\n"
    "    popl %ecx\n"
    "    .cfi_adjust_cfa_offset -4\n"
    "    .cfi_register %eip, %ecx\n"
    FSCHED__X86_JUMP("%ecx")
    "    .cfi_endproc\n"
    FSCHED__ASM_SIZE(FSCHED__ASM_SWITCH)
    /* Entered by the jump above with esp 16-byte aligned, eax = pass, ebx = entry,
       esi = trap. */
    FSCHED__ASM_FUNC(FSCHED__ASM_ENTRY, ".p2align 4\n")
    "    .cfi_startproc\n"
    "    .cfi_undefined %eip\n"
    "    subl $12, %esp\n"
    "    pushl %eax\n"
    "    calll *%ebx\n"
    "    calll *%esi\n"
    "    ud2\n"
    "    .cfi_endproc\n"
    FSCHED__ASM_SIZE(FSCHED__ASM_ENTRY)
    FSCHED__ASM_SECTION_END);

static void *fsched__asm_make_stack(void *lo, void *hi, void (*entry)(void *),
                                    void (*trap)(void)) {
    uintptr_t *sp = (uintptr_t *)((uintptr_t)hi & ~(uintptr_t)15);
    (void)lo;
    sp = fsched__asm_push(sp, 0);
    sp = fsched__asm_push(sp, 0);
    sp = fsched__asm_push(sp, 0);
    sp = fsched__asm_push(sp, 0); /* the trampoline starts 16-byte aligned here */
    sp = fsched__asm_push(sp, (uintptr_t)fsched__asm_entry);
    sp = fsched__asm_push(sp, 0);                /* ebp */
    sp = fsched__asm_push(sp, (uintptr_t)entry); /* ebx */
    sp = fsched__asm_push(sp, (uintptr_t)trap);  /* esi */
    sp = fsched__asm_push(sp, 0);                /* edi */
#if FIBERSCHED_FPU_CONTROL
    {
        uint32_t mxcsr = 0x1f80;
        uint16_t fpucw = 0;
#if defined(__SSE__)
        __asm__ __volatile__("stmxcsr %0" : "=m"(mxcsr));
#endif
        __asm__ __volatile__("fnstcw %0" : "=m"(fpucw));
        sp = fsched__asm_push(sp, fpucw); /* 4(%esp) */
        sp = fsched__asm_push(sp, mxcsr); /* 0(%esp) */
    }
#endif
    return sp;
}

/* ================================================================================= */
#elif defined(FSCHED__ASM_AARCH64)
/* AArch64 (AAPCS64): x19-x28, x29 (frame pointer), x30 (link register), sp and the low 64
   bits of v8-v15 (d8-d15) are callee-saved. A 160-byte frame: d8-d15 at 0..63, x19-x28 at
   64..143, x29 at 144, x30 at 152. x18 is left alone (see the top of this file). */

__asm__(
    FSCHED__ASM_SECTION_BEGIN
    FSCHED__ASM_FUNC(FSCHED__ASM_SWITCH, ".p2align 4\n")
    "    .cfi_startproc\n"
    "    sub sp, sp, #160\n"
    "    .cfi_def_cfa_offset 160\n"
    "    stp d8, d9, [sp, #0]\n"
    "    stp d10, d11, [sp, #16]\n"
    "    stp d12, d13, [sp, #32]\n"
    "    stp d14, d15, [sp, #48]\n"
    "    stp x19, x20, [sp, #64]\n"
    "    stp x21, x22, [sp, #80]\n"
    "    stp x23, x24, [sp, #96]\n"
    "    stp x25, x26, [sp, #112]\n"
    "    stp x27, x28, [sp, #128]\n"
    "    stp x29, x30, [sp, #144]\n"
    "    .cfi_offset x19, -96\n"
    "    .cfi_offset x20, -88\n"
    "    .cfi_offset x21, -80\n"
    "    .cfi_offset x22, -72\n"
    "    .cfi_offset x23, -64\n"
    "    .cfi_offset x24, -56\n"
    "    .cfi_offset x25, -48\n"
    "    .cfi_offset x26, -40\n"
    "    .cfi_offset x27, -32\n"
    "    .cfi_offset x28, -24\n"
    "    .cfi_offset x29, -16\n"
    "    .cfi_offset x30, -8\n"
    "    mov x9, sp\n"
    "    stlr x9, [x0]\n"
    "    mov sp, x1\n"
    FSCHED__ASM_RESUME
    "    ldp d8, d9, [sp, #0]\n"
    "    ldp d10, d11, [sp, #16]\n"
    "    ldp d12, d13, [sp, #32]\n"
    "    ldp d14, d15, [sp, #48]\n"
    "    ldp x19, x20, [sp, #64]\n"
    "    ldp x21, x22, [sp, #80]\n"
    "    ldp x23, x24, [sp, #96]\n"
    "    ldp x25, x26, [sp, #112]\n"
    "    ldp x27, x28, [sp, #128]\n"
    "    ldp x29, x30, [sp, #144]\n"
    "    add sp, sp, #160\n"
    "    .cfi_def_cfa_offset 0\n"
    "    mov x0, x2\n"
    "    ret\n"
    "    .cfi_endproc\n"
    FSCHED__ASM_SIZE(FSCHED__ASM_SWITCH)
    /* Entered by the `ret` above: x0 = pass, x19 = entry, x20 = trap, x29 = 0. */
    FSCHED__ASM_FUNC(FSCHED__ASM_ENTRY, ".p2align 4\n")
    "    .cfi_startproc\n"
    "    .cfi_undefined x30\n"
    "    blr x19\n"
    "    blr x20\n"
    "    brk #0x3e8\n"
    "    .cfi_endproc\n"
    FSCHED__ASM_SIZE(FSCHED__ASM_ENTRY)
    FSCHED__ASM_SECTION_END);

static void *fsched__asm_make_stack(void *lo, void *hi, void (*entry)(void *),
                                    void (*trap)(void)) {
    uintptr_t *sp = (uintptr_t *)((uintptr_t)hi & ~(uintptr_t)15);
    unsigned i;
    (void)lo;
    sp -= 160 / sizeof(uintptr_t);
    for (i = 0; i < 160 / sizeof(uintptr_t); i++) sp[i] = 0; /* d8-d15, x21-x28, x29 = 0 */
    sp[8] = (uintptr_t)entry;                 /* x19 */
    sp[9] = (uintptr_t)trap;                  /* x20 */
    sp[19] = (uintptr_t)fsched__asm_entry;    /* x30 */
    return sp;
}

/* ================================================================================= */
#elif defined(FSCHED__ASM_ARM)
/* 32-bit ARM (AAPCS), A32 or Thumb-2: r4-r11, sp, lr, and with a VFP unit d8-d15 (s16-s31
   on single-precision units such as Cortex-M4F) are callee-saved. ARMv6-M (Cortex-M0/M0+,
   Thumb-1) can push only low registers, so it has its own sequence. The frame keeps sp
   8-byte aligned: r3 is pushed as padding. */

#if defined(__thumb__)
#define FSCHED__ARM_MODE ".thumb\n"
#define FSCHED__ARM_FUNC_KIND(s) ".thumb_func\n"
#else
#define FSCHED__ARM_MODE ".arm\n"
#define FSCHED__ARM_FUNC_KIND(s) ""
#endif

#if (defined(__ARM_ARCH_ISA_THUMB) && __ARM_ARCH_ISA_THUMB == 1 && \
     !defined(__ARM_ARCH_ISA_ARM)) || defined(FSCHED__ASM_ARM_THUMB1)
#define FSCHED__ARM_THUMB1 1
#endif

#if defined(FSCHED__ARM_THUMB1)
#define FSCHED__ARM_VFP_WORDS 0
#define FSCHED__ARM_SAVE                                                                    \
    "    push {r4-r7, lr}\n"                                                                \
    "    .cfi_adjust_cfa_offset 20\n"                                                       \
    "    .cfi_rel_offset r4, 0\n"                                                           \
    "    .cfi_rel_offset r5, 4\n"                                                           \
    "    .cfi_rel_offset r6, 8\n"                                                           \
    "    .cfi_rel_offset r7, 12\n"                                                          \
    "    .cfi_rel_offset lr, 16\n"                                                          \
    "    mov r4, r8\n"                                                                      \
    "    mov r5, r9\n"                                                                      \
    "    mov r6, r10\n"                                                                     \
    "    mov r7, r11\n"                                                                     \
    "    push {r3-r7}\n"                                                                    \
    "    .cfi_adjust_cfa_offset 20\n"                                                       \
    "    .cfi_rel_offset r8, 4\n"                                                           \
    "    .cfi_rel_offset r9, 8\n"                                                           \
    "    .cfi_rel_offset r10, 12\n"                                                         \
    "    .cfi_rel_offset r11, 16\n"
#define FSCHED__ARM_LOAD                                                                    \
    "    pop {r3-r7}\n"                                                                     \
    "    .cfi_adjust_cfa_offset -20\n"                                                      \
    "    mov r8, r4\n"                                                                      \
    "    mov r9, r5\n"                                                                      \
    "    mov r10, r6\n"                                                                     \
    "    mov r11, r7\n"                                                                     \
    "    mov r0, r2\n"                                                                      \
    "    pop {r4-r7, pc}\n"
#else
#if defined(__ARM_FP) && (__ARM_FP & 8)
#define FSCHED__ARM_VFP_WORDS 16
#define FSCHED__ARM_VFP_SAVE "    vpush {d8-d15}\n    .cfi_adjust_cfa_offset 64\n"
#define FSCHED__ARM_VFP_LOAD "    vpop {d8-d15}\n    .cfi_adjust_cfa_offset -64\n"
#elif defined(__ARM_FP) && (__ARM_FP & 4)
#define FSCHED__ARM_VFP_WORDS 16
#define FSCHED__ARM_VFP_SAVE "    vpush {s16-s31}\n    .cfi_adjust_cfa_offset 64\n"
#define FSCHED__ARM_VFP_LOAD "    vpop {s16-s31}\n    .cfi_adjust_cfa_offset -64\n"
#else
#define FSCHED__ARM_VFP_WORDS 0
#define FSCHED__ARM_VFP_SAVE ""
#define FSCHED__ARM_VFP_LOAD ""
#endif
#define FSCHED__ARM_SAVE                                                                    \
    "    push {r3-r11, lr}\n"                                                               \
    "    .cfi_adjust_cfa_offset 40\n"                                                       \
    "    .cfi_rel_offset r4, 4\n"                                                           \
    "    .cfi_rel_offset r5, 8\n"                                                           \
    "    .cfi_rel_offset r6, 12\n"                                                          \
    "    .cfi_rel_offset r7, 16\n"                                                          \
    "    .cfi_rel_offset r8, 20\n"                                                          \
    "    .cfi_rel_offset r9, 24\n"                                                          \
    "    .cfi_rel_offset r10, 28\n"                                                         \
    "    .cfi_rel_offset r11, 32\n"                                                         \
    "    .cfi_rel_offset lr, 36\n"                                                          \
    FSCHED__ARM_VFP_SAVE
#define FSCHED__ARM_LOAD FSCHED__ARM_VFP_LOAD "    mov r0, r2\n    pop {r3-r11, pc}\n"
#endif

/* The saved stack pointer is published with release ordering (see the top). */
#if defined(FIBERSCHED_NO_THREADS) || !defined(__ARM_ARCH) || __ARM_ARCH < 6
#define FSCHED__ARM_RELEASE ""
#elif defined(__ARM_ARCH_PROFILE) && __ARM_ARCH_PROFILE == 'M'
#define FSCHED__ARM_RELEASE "    dmb\n"
#elif __ARM_ARCH >= 7
#define FSCHED__ARM_RELEASE "    dmb ish\n"
#else
#define FSCHED__ARM_RELEASE "    mov r3, #0\n    mcr p15, 0, r3, c7, c10, 5\n"
#endif

__asm__(
    FSCHED__ASM_SECTION_BEGIN
    ".syntax unified\n"
    ".cfi_sections .debug_frame\n" /* for debuggers; exceptions use the EHABI tables */
    FSCHED__ARM_MODE
    ".p2align 2\n"
    FSCHED__ARM_FUNC_KIND(FSCHED__ASM_SWITCH)
    FSCHED__ASM_FUNC(FSCHED__ASM_SWITCH, "")
    ".fnstart\n"
    ".cantunwind\n"
    ".cfi_startproc\n"
    FSCHED__ARM_SAVE
    FSCHED__ARM_RELEASE
    "    mov r3, sp\n"
    "    str r3, [r0]\n"
    "    mov sp, r1\n"
    FSCHED__ASM_RESUME
    FSCHED__ARM_LOAD
    ".cfi_endproc\n"
    ".fnend\n"
    FSCHED__ASM_SIZE(FSCHED__ASM_SWITCH)
    /* Entered by the `pop {.., pc}` above: r0 = pass, r4 = entry, r5 = trap. The EHABI
       entry says "cannot unwind" and the CFI leaves lr undefined: backtraces end here. */
    ".p2align 2\n"
    FSCHED__ARM_FUNC_KIND(FSCHED__ASM_ENTRY)
    FSCHED__ASM_FUNC(FSCHED__ASM_ENTRY, "")
    ".fnstart\n"
    ".cantunwind\n"
    ".cfi_startproc\n"
    ".cfi_undefined lr\n"
    "    blx r4\n"
    "    blx r5\n"
    "    bkpt #0\n"
    ".cfi_endproc\n"
    ".fnend\n"
    FSCHED__ASM_SIZE(FSCHED__ASM_ENTRY)
    FSCHED__ASM_SECTION_END);

static void *fsched__asm_make_stack(void *lo, void *hi, void (*entry)(void *),
                                    void (*trap)(void)) {
    uintptr_t *sp = (uintptr_t *)((uintptr_t)hi & ~(uintptr_t)15);
    unsigned i;
    (void)lo;
    sp = fsched__asm_push(sp, 0);
    sp = fsched__asm_push(sp, 0);
#if defined(FSCHED__ARM_THUMB1)
    /* push {r4-r7, lr}, then push {r3, r8-r11} (r8-r11 travel through r4-r7) */
    sp = fsched__asm_push(sp, (uintptr_t)fsched__asm_entry); /* pc */
    sp = fsched__asm_push(sp, 0);                             /* r7 */
    sp = fsched__asm_push(sp, 0);                             /* r6 */
    sp = fsched__asm_push(sp, (uintptr_t)trap);               /* r5 */
    sp = fsched__asm_push(sp, (uintptr_t)entry);              /* r4 */
    for (i = 0; i < 5; i++) sp = fsched__asm_push(sp, 0);     /* r11, r10, r9, r8, r3 */
#else
    sp = fsched__asm_push(sp, (uintptr_t)fsched__asm_entry);  /* pc */
    for (i = 0; i < 6; i++) sp = fsched__asm_push(sp, 0);      /* r11 .. r6 */
    sp = fsched__asm_push(sp, (uintptr_t)trap);                /* r5 */
    sp = fsched__asm_push(sp, (uintptr_t)entry);               /* r4 */
    sp = fsched__asm_push(sp, 0);                              /* r3 (padding) */
#if FSCHED__ARM_VFP_WORDS
    for (i = 0; i < FSCHED__ARM_VFP_WORDS; i++) sp = fsched__asm_push(sp, 0);
#endif
#endif
    return sp;
}

/* ================================================================================= */
#elif defined(FSCHED__ASM_RISCV64)
/* RISC-V 64: ra, sp, s0-s11 and, with the F or D extension, fs0-fs11 are callee-saved.
   A 208-byte frame: ra at 0, s0-s11 at 8..103, fs0-fs11 at 104..199. */

#if defined(__riscv_flen) && __riscv_flen >= 64
#define FSCHED__RV_FS(op, r, off) "    f" op "d " r ", " off "(sp)\n"
#elif defined(__riscv_flen) && __riscv_flen == 32
#define FSCHED__RV_FS(op, r, off) "    f" op "w " r ", " off "(sp)\n"
#else
#define FSCHED__RV_FS(op, r, off) ""
#endif
#define FSCHED__RV_REGS(op, fop)                                                            \
    "    " op " ra, 0(sp)\n"                                                                \
    "    " op " s0, 8(sp)\n"                                                                \
    "    " op " s1, 16(sp)\n"                                                               \
    "    " op " s2, 24(sp)\n"                                                               \
    "    " op " s3, 32(sp)\n"                                                               \
    "    " op " s4, 40(sp)\n"                                                               \
    "    " op " s5, 48(sp)\n"                                                               \
    "    " op " s6, 56(sp)\n"                                                               \
    "    " op " s7, 64(sp)\n"                                                               \
    "    " op " s8, 72(sp)\n"                                                               \
    "    " op " s9, 80(sp)\n"                                                               \
    "    " op " s10, 88(sp)\n"                                                              \
    "    " op " s11, 96(sp)\n"                                                              \
    FSCHED__RV_FS(fop, "fs0", "104") FSCHED__RV_FS(fop, "fs1", "112")                     \
    FSCHED__RV_FS(fop, "fs2", "120") FSCHED__RV_FS(fop, "fs3", "128")                     \
    FSCHED__RV_FS(fop, "fs4", "136") FSCHED__RV_FS(fop, "fs5", "144")                     \
    FSCHED__RV_FS(fop, "fs6", "152") FSCHED__RV_FS(fop, "fs7", "160")                     \
    FSCHED__RV_FS(fop, "fs8", "168") FSCHED__RV_FS(fop, "fs9", "176")                     \
    FSCHED__RV_FS(fop, "fs10", "184") FSCHED__RV_FS(fop, "fs11", "192")

__asm__(
    FSCHED__ASM_SECTION_BEGIN
    FSCHED__ASM_FUNC(FSCHED__ASM_SWITCH, ".p2align 2\n")
    "    .cfi_startproc\n"
    "    addi sp, sp, -208\n"
    "    .cfi_def_cfa_offset 208\n"
    FSCHED__RV_REGS("sd", "s")
    "    .cfi_offset ra, -208\n"
    "    fence rw, w\n" /* release: the registers above before the pointer */
    "    sd sp, 0(a0)\n"
    "    mv sp, a1\n"
    FSCHED__ASM_RESUME
    FSCHED__RV_REGS("ld", "l")
    "    addi sp, sp, 208\n"
    "    .cfi_def_cfa_offset 0\n"
    "    mv a0, a2\n"
    "    ret\n"
    "    .cfi_endproc\n"
    FSCHED__ASM_SIZE(FSCHED__ASM_SWITCH)
    /* Entered by the `ret` above: a0 = pass, s1 = entry, s2 = trap, s0 = 0. */
    FSCHED__ASM_FUNC(FSCHED__ASM_ENTRY, ".p2align 2\n")
    "    .cfi_startproc\n"
    "    .cfi_undefined ra\n"
    "    jalr s1\n"
    "    jalr s2\n"
    "    ebreak\n"
    "    .cfi_endproc\n"
    FSCHED__ASM_SIZE(FSCHED__ASM_ENTRY)
    FSCHED__ASM_SECTION_END);

static void *fsched__asm_make_stack(void *lo, void *hi, void (*entry)(void *),
                                    void (*trap)(void)) {
    uintptr_t *sp = (uintptr_t *)((uintptr_t)hi & ~(uintptr_t)15);
    unsigned i;
    (void)lo;
    sp -= 208 / sizeof(uintptr_t);
    for (i = 0; i < 208 / sizeof(uintptr_t); i++) sp[i] = 0;
    sp[0] = (uintptr_t)fsched__asm_entry; /* ra */
    sp[2] = (uintptr_t)entry;             /* s1 */
    sp[3] = (uintptr_t)trap;              /* s2 */
    return sp;
}

/* ================================================================================= */
#elif defined(FSCHED__ASM_PPC64LE)
/* ppc64le ELFv2: r14-r31, f14-f31, v20-v31, cr2-cr4, lr, r1 and r2 (TOC) are
   callee-saved. The frame (512 bytes, 320 without AltiVec): back chain at 0, CR at 8,
   LR at 16, r2 at 24, r14-r31 at 32..175, f14-f31 at 176..319, v20-v31 at 320..511. */

#define FSCHED__PPC_GPRS(op)                                                                \
    "    " op " 14, 32(1)\n    " op " 15, 40(1)\n    " op " 16, 48(1)\n"                \
    "    " op " 17, 56(1)\n    " op " 18, 64(1)\n    " op " 19, 72(1)\n"                \
    "    " op " 20, 80(1)\n    " op " 21, 88(1)\n    " op " 22, 96(1)\n"                \
    "    " op " 23, 104(1)\n    " op " 24, 112(1)\n    " op " 25, 120(1)\n"             \
    "    " op " 26, 128(1)\n    " op " 27, 136(1)\n    " op " 28, 144(1)\n"             \
    "    " op " 29, 152(1)\n    " op " 30, 160(1)\n    " op " 31, 168(1)\n"
#define FSCHED__PPC_FPRS(op)                                                                \
    "    " op " 14, 176(1)\n    " op " 15, 184(1)\n    " op " 16, 192(1)\n"             \
    "    " op " 17, 200(1)\n    " op " 18, 208(1)\n    " op " 19, 216(1)\n"             \
    "    " op " 20, 224(1)\n    " op " 21, 232(1)\n    " op " 22, 240(1)\n"             \
    "    " op " 23, 248(1)\n    " op " 24, 256(1)\n    " op " 25, 264(1)\n"             \
    "    " op " 26, 272(1)\n    " op " 27, 280(1)\n    " op " 28, 288(1)\n"             \
    "    " op " 29, 296(1)\n    " op " 30, 304(1)\n    " op " 31, 312(1)\n"
#if defined(__ALTIVEC__)
#define FSCHED__PPC_FRAME "512"
#define FSCHED__PPC_FRAME_BYTES 512
#define FSCHED__PPC_VR(op, v, off) "    li 12, " off "\n    " op " " v ", 1, 12\n"
#define FSCHED__PPC_VRS(op)                                                                 \
    FSCHED__PPC_VR(op, "20", "320") FSCHED__PPC_VR(op, "21", "336")                        \
    FSCHED__PPC_VR(op, "22", "352") FSCHED__PPC_VR(op, "23", "368")                        \
    FSCHED__PPC_VR(op, "24", "384") FSCHED__PPC_VR(op, "25", "400")                        \
    FSCHED__PPC_VR(op, "26", "416") FSCHED__PPC_VR(op, "27", "432")                        \
    FSCHED__PPC_VR(op, "28", "448") FSCHED__PPC_VR(op, "29", "464")                        \
    FSCHED__PPC_VR(op, "30", "480") FSCHED__PPC_VR(op, "31", "496")
#else
#define FSCHED__PPC_FRAME "320"
#define FSCHED__PPC_FRAME_BYTES 320
#define FSCHED__PPC_VRS(op) ""
#endif

__asm__(
    FSCHED__ASM_SECTION_BEGIN
    FSCHED__ASM_FUNC(FSCHED__ASM_SWITCH, ".p2align 4\n")
    "    .cfi_startproc\n"
    "    mflr 0\n"
    "    stdu 1, -" FSCHED__PPC_FRAME "(1)\n"
    "    .cfi_def_cfa_offset " FSCHED__PPC_FRAME "\n"
    "    std 0, 16(1)\n"
    "    .cfi_offset 65, 16 - " FSCHED__PPC_FRAME "\n"
    "    std 2, 24(1)\n"
    "    mfcr 0\n"
    "    std 0, 8(1)\n"
    FSCHED__PPC_GPRS("std")
    FSCHED__PPC_FPRS("stfd")
    FSCHED__PPC_VRS("stvx")
    "    lwsync\n" /* release: the registers above before the pointer */
    "    std 1, 0(3)\n"
    "    mr 1, 4\n"
    FSCHED__ASM_RESUME
    FSCHED__PPC_VRS("lvx")
    FSCHED__PPC_FPRS("lfd")
    FSCHED__PPC_GPRS("ld")
    "    ld 0, 8(1)\n"
    "    mtcrf 0x38, 0\n"
    "    ld 2, 24(1)\n"
    "    ld 0, 16(1)\n"
    "    mtlr 0\n"
    "    addi 1, 1, " FSCHED__PPC_FRAME "\n"
    "    .cfi_def_cfa_offset 0\n"
    "    mr 3, 5\n"
    "    blr\n"
    "    .cfi_endproc\n"
    FSCHED__ASM_SIZE(FSCHED__ASM_SWITCH)
    /* Entered by the `blr` above: r3 = pass, r14 = entry, r15 = trap, and r1 points at a
       frame whose back chain is null. Indirect calls go through r12, as ELFv2 asks. */
    FSCHED__ASM_FUNC(FSCHED__ASM_ENTRY, ".p2align 4\n")
    "    .cfi_startproc\n"
    "    .cfi_undefined 65\n"
    "    mr 12, 14\n"
    "    mtctr 12\n"
    "    bctrl\n"
    "    mr 12, 15\n"
    "    mtctr 12\n"
    "    bctrl\n"
    "    trap\n"
    "    .cfi_endproc\n"
    FSCHED__ASM_SIZE(FSCHED__ASM_ENTRY)
    FSCHED__ASM_SECTION_END);

static void *fsched__asm_make_stack(void *lo, void *hi, void (*entry)(void *),
                                    void (*trap)(void)) {
    uintptr_t *top = (uintptr_t *)((uintptr_t)hi & ~(uintptr_t)15);
    uintptr_t *tramp = top - 128 / sizeof(uintptr_t); /* the trampoline's own frame */
    uintptr_t *sp = tramp - FSCHED__PPC_FRAME_BYTES / sizeof(uintptr_t);
    unsigned i;
    (void)lo;
    for (i = 0; i < (unsigned)(top - sp); i++) sp[i] = 0; /* tramp[0]: null back chain */
    sp[0] = (uintptr_t)tramp;             /* back chain */
    sp[2] = (uintptr_t)fsched__asm_entry; /* lr */
    sp[4] = (uintptr_t)entry;             /* r14 */
    sp[5] = (uintptr_t)trap;              /* r15 */
    return sp;
}

#endif /* architectures */
#endif /* FSCHED__CTX_ASM */
#endif /* FIBERSCHED_ASM_H */
