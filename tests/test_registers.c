/* Register preservation across the assembly context switch. For the architecture the file
   is compiled for, every callee-saved integer and floating-point/vector register of the
   ABI is filled with a value unique to (participant, register); a ring of the thread's own
   context and four fibers then passes a million switches around, and every register of
   every participant is compared afterwards. Two helpers are written in assembly per
   architecture: test_fill_and_call() loads the values, calls the loop, and stores what the
   registers hold when the loop returns; test_switch_loop() is that loop, calling
   fsched_fiber_switch() without touching a callee-saved register. Skipped (exit code 77)
   where the library has no assembly context switch.

   What it cannot see: a register that fsched_fiber_switch's own compiled code saves on
   entry and restores on return (the frame pointer x29 of AArch64 builds that keep frame
   pointers, for one) is repaired by that code whatever the assembly does, so there the
   test only sees what a lost register does to the library's C code. */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"
#include "check.h"

#include <stdint.h>
#include <stdio.h>

/* ---- registers per ABI ------------------------------------------------------------- */

/* Each participant has one array of 64-bit slots: the integer registers first (on 32-bit
   targets a register uses the low 32 bits of its slot and the high half stays 0), then the
   64-bit floating-point registers, then the 128-bit vector registers (two slots each, at a
   16-byte aligned offset). TEST_NGPR/TEST_NFPR/TEST_NVEC count registers, not slots. */

#if defined(FSCHED__CTX_ASM) && defined(FSCHED__ASM_X86_64_SYSV)
#define TEST_ARCH "x86-64 System V"
#define TEST_NGPR 6
#define TEST_GPR_NAMES "rbx", "rbp", "r12", "r13", "r14", "r15"
#define TEST_GPR_BITS 64
#define TEST_NFPR 0
#define TEST_NVEC 0
#elif defined(FSCHED__CTX_ASM) && defined(FSCHED__ASM_X86_64_WIN)
#define TEST_ARCH "x86-64 Windows"
#define TEST_NGPR 8
#define TEST_GPR_NAMES "rbx", "rbp", "rdi", "rsi", "r12", "r13", "r14", "r15"
#define TEST_GPR_BITS 64
#define TEST_NFPR 0
#define TEST_NVEC 10
#define TEST_VEC_PREFIX "xmm"
#define TEST_VEC_FIRST 6
#elif defined(FSCHED__CTX_ASM) && defined(FSCHED__ASM_I386)
#define TEST_ARCH "i386 System V"
#define TEST_NGPR 4
#define TEST_GPR_NAMES "ebx", "esi", "edi", "ebp"
#define TEST_GPR_BITS 32
#define TEST_NFPR 0
#define TEST_NVEC 0
#elif defined(FSCHED__CTX_ASM) && defined(FSCHED__ASM_AARCH64)
#define TEST_ARCH "AArch64"
#define TEST_NGPR 11
#define TEST_GPR_PREFIX "x"
#define TEST_GPR_FIRST 19
#define TEST_GPR_BITS 64
#define TEST_NFPR 8
#define TEST_FPR_PREFIX "d"
#define TEST_FPR_FIRST 8
#define TEST_NVEC 0
#elif defined(FSCHED__CTX_ASM) && defined(FSCHED__ASM_ARM) && \
    (!defined(__ARM_ARCH_ISA_THUMB) || __ARM_ARCH_ISA_THUMB >= 2 ||    \
     defined(__ARM_ARCH_ISA_ARM))
/* The helper below needs A32 or Thumb-2; a Thumb-1-only core (ARMv6-M) is skipped. */
#if defined(__thumb__)
#define TEST_ARM_MODE "Thumb-2"
#else
#define TEST_ARM_MODE "A32"
#endif
#if defined(FSCHED__ARM_THUMB1)
#define TEST_ARM_SEQ ", Thumb-1 switch sequence"
#else
#define TEST_ARM_SEQ ""
#endif
#define TEST_ARCH "ARM " TEST_ARM_MODE TEST_ARM_SEQ
#define TEST_NGPR 8
#define TEST_GPR_PREFIX "r"
#define TEST_GPR_FIRST 4
#define TEST_GPR_BITS 32
/* d8-d15 with a double-precision VFP, s16-s31 with a single-precision one (Cortex-M4F).
   The library's Thumb-1 sequence is for cores without a VFP (ARMv6-M) and saves no VFP
   registers, so when it is forced on a VFP build (FSCHED__ASM_ARM_THUMB1) only r4-r11
   are checked. */
#if defined(__ARM_FP) && (__ARM_FP & 8) && !defined(FSCHED__ARM_THUMB1)
#define TEST_NFPR 8
#define TEST_FPR_PREFIX "d"
#define TEST_FPR_FIRST 8
#elif defined(__ARM_FP) && (__ARM_FP & 4) && !defined(FSCHED__ARM_THUMB1)
#define TEST_NFPR 16
#define TEST_FPR_PREFIX "s"
#define TEST_FPR_FIRST 16
#define TEST_FPR_BITS 32
#else
#define TEST_NFPR 0
#endif
#define TEST_NVEC 0
#elif defined(FSCHED__CTX_ASM) && defined(FSCHED__ASM_ARM)
#define TEST_SKIP_WHY "the test's assembly needs A32 or Thumb-2"
#elif defined(FSCHED__CTX_ASM) && defined(FSCHED__ASM_RISCV64)
#define TEST_ARCH "RISC-V 64"
#define TEST_NGPR 12
#define TEST_GPR_PREFIX "s"
#define TEST_GPR_FIRST 0
#define TEST_GPR_BITS 64
#if defined(__riscv_flen) && __riscv_flen >= 64
#define TEST_NFPR 12
#define TEST_FPR_PREFIX "fs"
#define TEST_FPR_FIRST 0
#else
#define TEST_NFPR 0
#endif
#define TEST_NVEC 0
#elif defined(FSCHED__CTX_ASM) && defined(FSCHED__ASM_PPC64LE)
#define TEST_ARCH "ppc64le ELFv2"
#define TEST_NGPR 18
#define TEST_GPR_PREFIX "r"
#define TEST_GPR_FIRST 14
#define TEST_GPR_BITS 64
#define TEST_NFPR 18
#define TEST_FPR_PREFIX "f"
#define TEST_FPR_FIRST 14
#if defined(__ALTIVEC__)
#define TEST_NVEC 12
#define TEST_VEC_PREFIX "v"
#define TEST_VEC_FIRST 20
#else
#define TEST_NVEC 0
#endif
#endif

#if defined(TEST_ARCH)

#ifndef TEST_FPR_BITS
#define TEST_FPR_BITS 64
#endif
#define TEST_SLOTS (TEST_NGPR + TEST_NFPR + 2 * TEST_NVEC)
#define TEST_NREGS (TEST_NGPR + TEST_NFPR + TEST_NVEC)

/* The two functions written in assembly below are local symbols of this file. On ELF they
   are declared hidden so that the compiler takes their addresses PC-relative: a GOT
   reference to a local symbol becomes one to its section, and aarch64 links it to the
   start of .text instead of the function. */
#if defined(__ELF__)
#define TEST_ASM_DECL __attribute__((visibility("hidden")))
#else
#define TEST_ASM_DECL
#endif

/* Loads every callee-saved register from values[], calls fn(arg), stores every
   callee-saved register into observed[], restores the caller's registers and returns. */
TEST_ASM_DECL void test_fill_and_call(const uint64_t *values, uint64_t *observed,
                                      void (*fn)(void *), void *arg);

/* What test_switch_loop calls, through these pointers (no symbol names, PLT stubs or TOC
   entries to get right in the assembly). */
typedef struct test_loop_ops {
    fsched_fiber *(*next)(void);                 /* the fiber to switch to; NULL: return */
    fsched_result (*switch_to)(fsched_fiber *);  /* fsched_fiber_switch */
    void (*failed)(fsched_result);               /* reports a failed switch; never returns */
} test_loop_ops;

/* The loop that switches, passed as fn to test_fill_and_call with a test_loop_ops as arg:
   while ((f = ops->next()) != NULL) { r = ops->switch_to(f); if (r) ops->failed(r); }.
   It uses only caller-saved registers and keeps ops on its stack, so the callee-saved
   registers reach fsched_fiber_switch holding the test values. A loop in C could not
   promise that: a function that keeps anything in a callee-saved register (or pushes one
   only to align the stack, or uses one as its frame pointer) saves it on entry and
   restores it on return, which repairs a register the switch failed to restore, and when
   every context holds the same value there (the address of a global, say), nothing shows
   the loss. ops->next runs between switches and may do as it likes. */
TEST_ASM_DECL void test_switch_loop(void *ops);

/* ---- symbol spelling per object format --------------------------------------------- */

#if defined(__APPLE__)
#define TEST_SYM(n) "_" n
#define TEST_BEGIN ".text\n"
#define TEST_TYPE(s) ""
#define TEST_SIZE(s) ""
#define TEST_END ""
#elif defined(_WIN32)
#define TEST_SYM(n) n
#define TEST_BEGIN ".text\n" /* gas for COFF has no .pushsection */
#define TEST_TYPE(s) ".def " s "\n.scl 3\n.type 32\n.endef\n"
#define TEST_SIZE(s) ""
#define TEST_END ""
#else
#define TEST_SYM(n) n
#define TEST_BEGIN ".pushsection .text\n"
#define TEST_TYPE(s) ".type " s ",%function\n"
#define TEST_SIZE(s) ".size " s ",.-" s "\n"
#define TEST_END ".popsection\n.pushsection .note.GNU-stack,\"\",%progbits\n.popsection\n"
#endif
#define TEST_FN TEST_SYM("test_fill_and_call")
#define TEST_LOOP TEST_SYM("test_switch_loop")

/* ---- test_fill_and_call per architecture ------------------------------------------- */

#if defined(FSCHED__ASM_X86_64_SYSV)
/* rdi = values, rsi = observed, rdx = fn, rcx = arg. Six pushes and observed make seven
   words on top of the return address: rsp is 16-byte aligned at the call. */
#if defined(__CET__)
#define TEST_ENDBR "    endbr64\n"
#else
#define TEST_ENDBR ""
#endif
__asm__(
    TEST_BEGIN
    TEST_TYPE(TEST_FN)
    ".p2align 4\n"
    TEST_FN ":\n"
    "    .cfi_startproc\n"
    TEST_ENDBR
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
    "    pushq %rsi\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    movq %rdx, %rax\n"
    "    movq 0(%rdi), %rbx\n"
    "    movq 8(%rdi), %rbp\n"
    "    movq 16(%rdi), %r12\n"
    "    movq 24(%rdi), %r13\n"
    "    movq 32(%rdi), %r14\n"
    "    movq 40(%rdi), %r15\n"
    "    movq %rcx, %rdi\n"
    "    callq *%rax\n"
    "    movq (%rsp), %rax\n"
    "    movq %rbx, 0(%rax)\n"
    "    movq %rbp, 8(%rax)\n"
    "    movq %r12, 16(%rax)\n"
    "    movq %r13, 24(%rax)\n"
    "    movq %r14, 32(%rax)\n"
    "    movq %r15, 40(%rax)\n"
    "    addq $8, %rsp\n"
    "    .cfi_adjust_cfa_offset -8\n"
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
    "    ret\n"
    "    .cfi_endproc\n"
    TEST_SIZE(TEST_FN)
    TEST_END);

#elif defined(FSCHED__ASM_X86_64_WIN)
/* rcx = values, rdx = observed, r8 = fn, r9 = arg. Eight pushes, then 200 bytes: the
   callee's 32-byte home space at 0, xmm6-xmm15 at 32..191, observed at 192; rsp is 16-byte
   aligned at the call. The prologue is described to SEH so that stack walks pass it. */
__asm__(
    TEST_BEGIN
    TEST_TYPE(TEST_FN)
    ".p2align 4\n"
    ".seh_proc " TEST_FN "\n"
    TEST_FN ":\n"
    "    .irp r, rbp, rbx, rdi, rsi, r12, r13, r14, r15\n"
    "    pushq %\\r\n"
    "    .seh_pushreg %\\r\n"
    "    .endr\n"
    "    subq $200, %rsp\n"
    "    .seh_stackalloc 200\n"
    "    .irp i, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15\n"
    "    movaps %xmm\\i, 32 + (\\i - 6) * 16(%rsp)\n"
    "    .seh_savexmm %xmm\\i, 32 + (\\i - 6) * 16\n"
    "    .endr\n"
    "    .seh_endprologue\n"
    "    movq %rdx, 192(%rsp)\n"
    "    movq %r8, %rax\n"
    "    movq 0(%rcx), %rbx\n"
    "    movq 8(%rcx), %rbp\n"
    "    movq 16(%rcx), %rdi\n"
    "    movq 24(%rcx), %rsi\n"
    "    movq 32(%rcx), %r12\n"
    "    movq 40(%rcx), %r13\n"
    "    movq 48(%rcx), %r14\n"
    "    movq 56(%rcx), %r15\n"
    "    .irp i, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15\n"
    "    movdqu 64 + (\\i - 6) * 16(%rcx), %xmm\\i\n"
    "    .endr\n"
    "    movq %r9, %rcx\n"
    "    callq *%rax\n"
    "    movq 192(%rsp), %rax\n"
    "    movq %rbx, 0(%rax)\n"
    "    movq %rbp, 8(%rax)\n"
    "    movq %rdi, 16(%rax)\n"
    "    movq %rsi, 24(%rax)\n"
    "    movq %r12, 32(%rax)\n"
    "    movq %r13, 40(%rax)\n"
    "    movq %r14, 48(%rax)\n"
    "    movq %r15, 56(%rax)\n"
    "    .irp i, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15\n"
    "    movdqu %xmm\\i, 64 + (\\i - 6) * 16(%rax)\n"
    "    movaps 32 + (\\i - 6) * 16(%rsp), %xmm\\i\n"
    "    .endr\n"
    "    addq $200, %rsp\n"
    "    .irp r, r15, r14, r13, r12, rsi, rdi, rbx, rbp\n"
    "    popq %\\r\n"
    "    .endr\n"
    "    ret\n"
    ".seh_endproc\n"
    TEST_END);

#elif defined(FSCHED__ASM_I386)
/* Arguments on the stack. After four pushes they are at 20(%esp) (values), 24 (observed),
   28 (fn), 32 (arg); esp is then 12 mod 16, and 8 bytes of padding plus the pushed
   argument make it 16-byte aligned at the call. */
#if defined(__CET__)
#define TEST_ENDBR "    endbr32\n"
#else
#define TEST_ENDBR ""
#endif
__asm__(
    TEST_BEGIN
    TEST_TYPE(TEST_FN)
    ".p2align 4\n"
    TEST_FN ":\n"
    "    .cfi_startproc\n"
    TEST_ENDBR
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
    "    movl 20(%esp), %eax\n"
    "    movl 28(%esp), %ecx\n"
    "    movl 32(%esp), %edx\n"
    "    subl $8, %esp\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    pushl %edx\n"
    "    .cfi_adjust_cfa_offset 4\n"
    "    movl 0(%eax), %ebx\n"
    "    movl 8(%eax), %esi\n"
    "    movl 16(%eax), %edi\n"
    "    movl 24(%eax), %ebp\n"
    "    calll *%ecx\n"
    "    addl $12, %esp\n"
    "    .cfi_adjust_cfa_offset -12\n"
    "    movl 24(%esp), %eax\n"
    "    movl %ebx, 0(%eax)\n"
    "    movl %esi, 8(%eax)\n"
    "    movl %edi, 16(%eax)\n"
    "    movl %ebp, 24(%eax)\n"
    "    popl %edi\n"
    "    .cfi_adjust_cfa_offset -4\n"
    "    popl %esi\n"
    "    .cfi_adjust_cfa_offset -4\n"
    "    popl %ebx\n"
    "    .cfi_adjust_cfa_offset -4\n"
    "    popl %ebp\n"
    "    .cfi_adjust_cfa_offset -4\n"
    "    ret\n"
    "    .cfi_endproc\n"
    TEST_SIZE(TEST_FN)
    TEST_END);

#elif defined(FSCHED__ASM_AARCH64)
/* x0 = values, x1 = observed, x2 = fn, x3 = arg. A 176-byte frame: x29/x30 at 0, x19-x28
   at 16..95, d8-d15 at 96..159, observed at 160. The CFA stays sp-based because x29 holds
   a test value during the call. */
__asm__(
    TEST_BEGIN
    TEST_TYPE(TEST_FN)
    ".p2align 4\n"
    TEST_FN ":\n"
    "    .cfi_startproc\n"
    "    stp x29, x30, [sp, #-176]!\n"
    "    .cfi_def_cfa_offset 176\n"
    "    .cfi_offset x29, -176\n"
    "    .cfi_offset x30, -168\n"
    "    mov x29, sp\n"
    "    stp x19, x20, [sp, #16]\n"
    "    stp x21, x22, [sp, #32]\n"
    "    stp x23, x24, [sp, #48]\n"
    "    stp x25, x26, [sp, #64]\n"
    "    stp x27, x28, [sp, #80]\n"
    "    stp d8, d9, [sp, #96]\n"
    "    stp d10, d11, [sp, #112]\n"
    "    stp d12, d13, [sp, #128]\n"
    "    stp d14, d15, [sp, #144]\n"
    "    str x1, [sp, #160]\n"
    "    .irp i, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28\n"
    "    .cfi_offset x\\i, 16 + (\\i - 19) * 8 - 176\n"
    "    .endr\n"
    "    .irp i, 8, 9, 10, 11, 12, 13, 14, 15\n"
    "    .cfi_offset 64 + \\i, 96 + (\\i - 8) * 8 - 176\n"
    "    .endr\n"
    "    .irp i, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29\n"
    "    ldr x\\i, [x0, #(\\i - 19) * 8]\n"
    "    .endr\n"
    "    .irp i, 8, 9, 10, 11, 12, 13, 14, 15\n"
    "    ldr d\\i, [x0, #88 + (\\i - 8) * 8]\n"
    "    .endr\n"
    "    mov x16, x2\n"
    "    mov x0, x3\n"
    "    blr x16\n"
    "    ldr x1, [sp, #160]\n"
    "    .irp i, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29\n"
    "    str x\\i, [x1, #(\\i - 19) * 8]\n"
    "    .endr\n"
    "    .irp i, 8, 9, 10, 11, 12, 13, 14, 15\n"
    "    str d\\i, [x1, #88 + (\\i - 8) * 8]\n"
    "    .endr\n"
    "    ldp x19, x20, [sp, #16]\n"
    "    ldp x21, x22, [sp, #32]\n"
    "    ldp x23, x24, [sp, #48]\n"
    "    ldp x25, x26, [sp, #64]\n"
    "    ldp x27, x28, [sp, #80]\n"
    "    ldp d8, d9, [sp, #96]\n"
    "    ldp d10, d11, [sp, #112]\n"
    "    ldp d12, d13, [sp, #128]\n"
    "    ldp d14, d15, [sp, #144]\n"
    "    ldp x29, x30, [sp], #176\n"
    "    .cfi_def_cfa_offset 0\n"
    "    ret\n"
    "    .cfi_endproc\n"
    TEST_SIZE(TEST_FN)
    TEST_END);

#elif defined(FSCHED__ASM_ARM)
/* r0 = values, r1 = observed, r2 = fn, r3 = arg. observed is pushed with r4-r11 and lr
   (ten words keep sp 8-byte aligned), then d8-d15; observed ends up at [sp, #64] with the
   VFP registers, at [sp] without. Each 32-bit register uses the low word of its slot. */
#if defined(__thumb__)
#define TEST_ARM_DIRECTIVES ".thumb\n.thumb_func\n"
#else
#define TEST_ARM_DIRECTIVES ".arm\n"
#endif
#if TEST_NFPR && TEST_FPR_FIRST == 16 /* s16-s31, each in the low word of its slot */
#define TEST_ARM_VFP_SAVE "    vpush {s16-s31}\n    .vsave {d8-d15}\n" /* the same 64 bytes */
#define TEST_ARM_VFP_LOAD                                                                 \
    "    .irp i, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31\n"      \
    "    vldr s\\i, [r0, #64 + (\\i - 16) * 8]\n"                                        \
    "    .endr\n"
#define TEST_ARM_OBSERVED "    ldr r0, [sp, #64]\n"
#define TEST_ARM_VFP_STORE                                                                \
    "    .irp i, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31\n"      \
    "    vstr s\\i, [r0, #64 + (\\i - 16) * 8]\n"                                        \
    "    .endr\n"
#define TEST_ARM_VFP_RESTORE "    vpop {s16-s31}\n"
#elif TEST_NFPR
#define TEST_ARM_VFP_SAVE "    vpush {d8-d15}\n    .vsave {d8-d15}\n"
#define TEST_ARM_VFP_LOAD                                                                 \
    "    .irp i, 8, 9, 10, 11, 12, 13, 14, 15\n"                                          \
    "    vldr d\\i, [r0, #64 + (\\i - 8) * 8]\n"                                          \
    "    .endr\n"
#define TEST_ARM_OBSERVED "    ldr r0, [sp, #64]\n"
#define TEST_ARM_VFP_STORE                                                                \
    "    .irp i, 8, 9, 10, 11, 12, 13, 14, 15\n"                                          \
    "    vstr d\\i, [r0, #64 + (\\i - 8) * 8]\n"                                          \
    "    .endr\n"
#define TEST_ARM_VFP_RESTORE "    vpop {d8-d15}\n"
#else
#define TEST_ARM_VFP_SAVE ""
#define TEST_ARM_VFP_LOAD ""
#define TEST_ARM_OBSERVED "    ldr r0, [sp]\n"
#define TEST_ARM_VFP_STORE ""
#define TEST_ARM_VFP_RESTORE ""
#endif
__asm__(
    TEST_BEGIN
    ".syntax unified\n"
    ".p2align 2\n"
    TEST_TYPE(TEST_FN)
    TEST_ARM_DIRECTIVES
    TEST_FN ":\n"
    "    .fnstart\n"
    "    push {r1, r4-r11, lr}\n"
    "    .save {r1, r4-r11, lr}\n"
    TEST_ARM_VFP_SAVE
    "    .irp i, 4, 5, 6, 7, 8, 9, 10, 11\n"
    "    ldr r\\i, [r0, #(\\i - 4) * 8]\n"
    "    .endr\n"
    TEST_ARM_VFP_LOAD
    "    mov r12, r2\n"
    "    mov r0, r3\n"
    "    blx r12\n"
    TEST_ARM_OBSERVED
    "    .irp i, 4, 5, 6, 7, 8, 9, 10, 11\n"
    "    str r\\i, [r0, #(\\i - 4) * 8]\n"
    "    .endr\n"
    TEST_ARM_VFP_STORE
    TEST_ARM_VFP_RESTORE
    "    pop {r1, r4-r11, pc}\n"
    "    .fnend\n"
    TEST_SIZE(TEST_FN)
    TEST_END);

#elif defined(FSCHED__ASM_RISCV64)
/* a0 = values, a1 = observed, a2 = fn, a3 = arg. A 208-byte frame: s0-s11 at 0..95,
   fs0-fs11 at 96..191, observed at 192, ra at 200. */
#if TEST_NFPR
#define TEST_RV_FPR(op, base) \
    "    .irp i, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11\n" \
    "    " op " fs\\i, 96 + \\i * 8(" base ")\n"           \
    "    .endr\n"
#else
#define TEST_RV_FPR(op, base) ""
#endif
#define TEST_RV_GPR(op, base) \
    "    .irp i, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11\n" \
    "    " op " s\\i, \\i * 8(" base ")\n"                 \
    "    .endr\n"
__asm__(
    TEST_BEGIN
    TEST_TYPE(TEST_FN)
    ".p2align 2\n"
    TEST_FN ":\n"
    "    .cfi_startproc\n"
    "    addi sp, sp, -208\n"
    "    .cfi_def_cfa_offset 208\n"
    "    sd ra, 200(sp)\n"
    "    .cfi_offset ra, -8\n"
    "    sd a1, 192(sp)\n"
    TEST_RV_GPR("sd", "sp")
    "    .irp i, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11\n"
    "    .cfi_offset s\\i, \\i * 8 - 208\n"
    "    .endr\n"
    TEST_RV_FPR("fsd", "sp")
    TEST_RV_GPR("ld", "a0")
    TEST_RV_FPR("fld", "a0")
    "    mv t1, a2\n"
    "    mv a0, a3\n"
    "    jalr t1\n"
    "    ld a1, 192(sp)\n"
    TEST_RV_GPR("sd", "a1")
    TEST_RV_FPR("fsd", "a1")
    TEST_RV_GPR("ld", "sp")
    TEST_RV_FPR("fld", "sp")
    "    ld ra, 200(sp)\n"
    "    addi sp, sp, 208\n"
    "    .cfi_def_cfa_offset 0\n"
    "    ret\n"
    "    .cfi_endproc\n"
    TEST_SIZE(TEST_FN)
    TEST_END);

#elif defined(FSCHED__ASM_PPC64LE)
/* r3 = values, r4 = observed, r5 = fn, r6 = arg. The link register is saved in the
   caller's frame (16), then a 528-byte frame: back chain at 0, the TOC save slot at 24
   (r2 is kept there across the indirect call), observed at 32, r14-r31 at 40..183,
   f14-f31 at 184..327, v20-v31 at 336..527 (16-byte aligned, as lvx/stvx need). The
   indirect call goes through r12 and ctr, as ELFv2 asks. The function uses no TOC. */
#if TEST_NVEC
#define TEST_PPC_VEC(op, base, off) \
    "    .irp i, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31\n" \
    "    li 12, " off " + (\\i - 20) * 16\n"                          \
    "    " op " \\i, " base ", 12\n"                                  \
    "    .endr\n"
#else
#define TEST_PPC_VEC(op, base, off) ""
#endif
#define TEST_PPC_REGS(op, base, off) \
    "    .irp i, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31\n" \
    "    " op " \\i, " off " + (\\i - 14) * 8(" base ")\n"                               \
    "    .endr\n"
__asm__(
    TEST_BEGIN
    TEST_TYPE(TEST_FN)
    ".p2align 4\n"
    TEST_FN ":\n"
    "    .cfi_startproc\n"
    "    mflr 0\n"
    "    std 0, 16(1)\n"
    "    stdu 1, -528(1)\n"
    "    .cfi_def_cfa_offset 528\n"
    "    .cfi_offset lr, 16\n"
    "    std 2, 24(1)\n"
    "    std 4, 32(1)\n"
    TEST_PPC_REGS("std", "1", "40")
    TEST_PPC_REGS("stfd", "1", "184")
    TEST_PPC_VEC("stvx", "1", "336")
    "    .irp i, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31\n"
    "    .cfi_offset \\i, 40 + (\\i - 14) * 8 - 528\n"
    "    .cfi_offset 32 + \\i, 184 + (\\i - 14) * 8 - 528\n"
    "    .endr\n"
    TEST_PPC_REGS("ld", "3", "0")
    TEST_PPC_REGS("lfd", "3", "144")
    TEST_PPC_VEC("lvx", "3", "288")
    "    mr 12, 5\n"
    "    mtctr 12\n"
    "    mr 3, 6\n"
    "    bctrl\n"
    "    ld 2, 24(1)\n"
    "    ld 4, 32(1)\n"
    TEST_PPC_REGS("std", "4", "0")
    TEST_PPC_REGS("stfd", "4", "144")
    TEST_PPC_VEC("stvx", "4", "288")
    TEST_PPC_REGS("ld", "1", "40")
    TEST_PPC_REGS("lfd", "1", "184")
    TEST_PPC_VEC("lvx", "1", "336")
    "    addi 1, 1, 528\n"
    "    .cfi_def_cfa_offset 0\n"
    "    ld 0, 16(1)\n"
    "    mtlr 0\n"
    "    blr\n"
    "    .cfi_endproc\n"
    TEST_SIZE(TEST_FN)
    TEST_END);
#endif

/* ---- test_switch_loop per architecture --------------------------------------------- */

#if defined(FSCHED__ASM_X86_64_SYSV)
/* rdi = ops, kept at (%rsp); the push also aligns rsp to 16 bytes for the calls. */
__asm__(
    TEST_BEGIN
    TEST_TYPE(TEST_LOOP)
    ".p2align 4\n"
    TEST_LOOP ":\n"
    "    .cfi_startproc\n"
    TEST_ENDBR
    "    pushq %rdi\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "1:  movq (%rsp), %rax\n"
    "    callq *0(%rax)\n"
    "    testq %rax, %rax\n"
    "    jz 2f\n"
    "    movq %rax, %rdi\n"
    "    movq (%rsp), %rax\n"
    "    callq *8(%rax)\n"
    "    testl %eax, %eax\n"
    "    jz 1b\n"
    "    movl %eax, %edi\n"
    "    movq (%rsp), %rax\n"
    "    callq *16(%rax)\n"
    "    ud2\n"
    "2:  popq %rdi\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    ret\n"
    "    .cfi_endproc\n"
    TEST_SIZE(TEST_LOOP)
    TEST_END);

#elif defined(FSCHED__ASM_X86_64_WIN)
/* rcx = ops, kept at 32(%rsp) above the callees' home space; rsp is 16-byte aligned at
   the calls. */
__asm__(
    TEST_BEGIN
    TEST_TYPE(TEST_LOOP)
    ".p2align 4\n"
    ".seh_proc " TEST_LOOP "\n"
    TEST_LOOP ":\n"
    "    subq $40, %rsp\n"
    "    .seh_stackalloc 40\n"
    "    .seh_endprologue\n"
    "    movq %rcx, 32(%rsp)\n"
    "1:  movq 32(%rsp), %rax\n"
    "    callq *0(%rax)\n"
    "    testq %rax, %rax\n"
    "    jz 2f\n"
    "    movq %rax, %rcx\n"
    "    movq 32(%rsp), %rax\n"
    "    callq *8(%rax)\n"
    "    testl %eax, %eax\n"
    "    jz 1b\n"
    "    movl %eax, %ecx\n"
    "    movq 32(%rsp), %rax\n"
    "    callq *16(%rax)\n"
    "    ud2\n"
    "2:  addq $40, %rsp\n"
    "    ret\n"
    ".seh_endproc\n"
    TEST_END);

#elif defined(FSCHED__ASM_I386)
/* ops arrives at 4(%esp), 32(%esp) after the 28-byte frame, which makes esp 16-byte
   aligned at the calls; a call's argument goes to (%esp). */
__asm__(
    TEST_BEGIN
    TEST_TYPE(TEST_LOOP)
    ".p2align 4\n"
    TEST_LOOP ":\n"
    "    .cfi_startproc\n"
    TEST_ENDBR
    "    subl $28, %esp\n"
    "    .cfi_adjust_cfa_offset 28\n"
    "1:  movl 32(%esp), %eax\n"
    "    calll *0(%eax)\n"
    "    testl %eax, %eax\n"
    "    jz 2f\n"
    "    movl %eax, (%esp)\n"
    "    movl 32(%esp), %eax\n"
    "    calll *4(%eax)\n"
    "    testl %eax, %eax\n"
    "    jz 1b\n"
    "    movl %eax, (%esp)\n"
    "    movl 32(%esp), %eax\n"
    "    calll *8(%eax)\n"
    "    ud2\n"
    "2:  addl $28, %esp\n"
    "    .cfi_adjust_cfa_offset -28\n"
    "    ret\n"
    "    .cfi_endproc\n"
    TEST_SIZE(TEST_LOOP)
    TEST_END);

#elif defined(FSCHED__ASM_AARCH64)
/* x0 = ops, kept at [sp, #16]; only the link register is saved. No frame record: x29
   holds a test value and is neither changed nor saved here. */
__asm__(
    TEST_BEGIN
    TEST_TYPE(TEST_LOOP)
    ".p2align 4\n"
    TEST_LOOP ":\n"
    "    .cfi_startproc\n"
    "    str x30, [sp, #-32]!\n"
    "    .cfi_def_cfa_offset 32\n"
    "    .cfi_offset x30, -32\n"
    "    str x0, [sp, #16]\n"
    "1:  ldr x16, [sp, #16]\n"
    "    ldr x16, [x16, #0]\n"
    "    blr x16\n"
    "    cbz x0, 2f\n"
    "    ldr x16, [sp, #16]\n"
    "    ldr x16, [x16, #8]\n"
    "    blr x16\n"
    "    cbz w0, 1b\n"
    "    ldr x16, [sp, #16]\n"
    "    ldr x16, [x16, #16]\n"
    "    blr x16\n"
    "    brk #1\n"
    "2:  ldr x30, [sp], #32\n"
    "    .cfi_def_cfa_offset 0\n"
    "    ret\n"
    "    .cfi_endproc\n"
    TEST_SIZE(TEST_LOOP)
    TEST_END);

#elif defined(FSCHED__ASM_ARM)
/* r0 = ops, pushed with lr (8 bytes keep sp 8-byte aligned) and kept at [sp]. */
__asm__(
    TEST_BEGIN
    ".syntax unified\n"
    ".p2align 2\n"
    TEST_TYPE(TEST_LOOP)
    TEST_ARM_DIRECTIVES
    TEST_LOOP ":\n"
    "    .fnstart\n"
    "    push {r0, lr}\n"
    "    .save {lr}\n"
    "    .pad #4\n"
    "1:  ldr r1, [sp]\n"
    "    ldr r1, [r1, #0]\n"
    "    blx r1\n"
    "    cmp r0, #0\n"
    "    beq 2f\n"
    "    ldr r1, [sp]\n"
    "    ldr r1, [r1, #4]\n"
    "    blx r1\n"
    "    cmp r0, #0\n"
    "    beq 1b\n"
    "    ldr r1, [sp]\n"
    "    ldr r1, [r1, #8]\n"
    "    blx r1\n"
    "    bkpt #0\n"
    "2:  pop {r0, pc}\n"
    "    .fnend\n"
    TEST_SIZE(TEST_LOOP)
    TEST_END);

#elif defined(FSCHED__ASM_RISCV64)
/* a0 = ops, kept at 0(sp); ra at 8(sp). */
__asm__(
    TEST_BEGIN
    TEST_TYPE(TEST_LOOP)
    ".p2align 2\n"
    TEST_LOOP ":\n"
    "    .cfi_startproc\n"
    "    addi sp, sp, -16\n"
    "    .cfi_def_cfa_offset 16\n"
    "    sd ra, 8(sp)\n"
    "    .cfi_offset ra, -8\n"
    "    sd a0, 0(sp)\n"
    "1:  ld t1, 0(sp)\n"
    "    ld t1, 0(t1)\n"
    "    jalr t1\n"
    "    beqz a0, 2f\n"
    "    ld t1, 0(sp)\n"
    "    ld t1, 8(t1)\n"
    "    jalr t1\n"
    "    beqz a0, 1b\n"
    "    ld t1, 0(sp)\n"
    "    ld t1, 16(t1)\n"
    "    jalr t1\n"
    "    ebreak\n"
    "2:  ld ra, 8(sp)\n"
    "    addi sp, sp, 16\n"
    "    .cfi_def_cfa_offset 0\n"
    "    ret\n"
    "    .cfi_endproc\n"
    TEST_SIZE(TEST_LOOP)
    TEST_END);

#elif defined(FSCHED__ASM_PPC64LE)
/* r3 = ops. The link register goes to the caller's frame (16), then a 48-byte frame: back
   chain at 0, r2 at 24 (the TOC save slot, reloaded after each indirect call), ops at
   32. Calls go through r12 and ctr. */
#define TEST_PPC_CALL(off)                                                                \
    "    ld 12, 32(1)\n"                                                                  \
    "    ld 12, " off "(12)\n"                                                            \
    "    mtctr 12\n"                                                                      \
    "    bctrl\n"                                                                         \
    "    ld 2, 24(1)\n"
__asm__(
    TEST_BEGIN
    TEST_TYPE(TEST_LOOP)
    ".p2align 4\n"
    TEST_LOOP ":\n"
    "    .cfi_startproc\n"
    "    mflr 0\n"
    "    std 0, 16(1)\n"
    "    stdu 1, -48(1)\n"
    "    .cfi_def_cfa_offset 48\n"
    "    .cfi_offset lr, 16\n"
    "    std 2, 24(1)\n"
    "    std 3, 32(1)\n"
    "1:\n"
    TEST_PPC_CALL("0")
    "    cmpdi 3, 0\n"
    "    beq 2f\n"
    TEST_PPC_CALL("8")
    "    cmpwi 3, 0\n"
    "    beq 1b\n"
    TEST_PPC_CALL("16")
    "    trap\n"
    "2:  addi 1, 1, 48\n"
    "    .cfi_def_cfa_offset 0\n"
    "    ld 0, 16(1)\n"
    "    mtlr 0\n"
    "    blr\n"
    "    .cfi_endproc\n"
    TEST_SIZE(TEST_LOOP)
    TEST_END);
#endif

/* ---- the ring ---------------------------------------------------------------------- */

#define FIBERS 4                      /* fibers in the ring, besides the thread's context */
#define PARTICIPANTS (FIBERS + 1)     /* participant 0 is the thread's own context */
#define ROUNDS 200000L                /* switches made by each participant in its loop */
#define FIBER_STACK (64 * 1024)

typedef struct participant {
    _Alignas(16) uint64_t values[TEST_SLOTS];
    _Alignas(16) uint64_t observed[TEST_SLOTS];
    int index;
    fsched_fiber *self;
    fsched_fiber *next;
    long rounds;  /* switches made in its ring loop */
    int finished; /* returned from test_fill_and_call */
} participant;

static participant ring[PARTICIPANTS];
static int turn;                     /* the participant that runs now */
static unsigned long ring_switches;  /* fsched_fiber_switch calls made by the ring loops */
static unsigned long final_switches; /* switches that let the fibers finish */
static int finishing;                /* the next fiber to let finish */

/* A 64-bit value unique to (participant, slot). Multiplying by an odd constant is a
   bijection modulo 2^64 and modulo 2^32, so distinct keys give distinct values, and
   distinct low halves for the 32-bit registers too. */
static uint64_t test_value(unsigned p, unsigned slot) {
    uint64_t key = ((uint64_t)(p + 1) << 8) | (uint64_t)(slot + 1);
    uint64_t v = key * UINT64_C(0x9E3779B97F4A7C15);
    if (slot < TEST_NGPR && TEST_GPR_BITS == 32) v &= UINT64_C(0xffffffff);
    if (slot >= TEST_NGPR && slot < TEST_NGPR + TEST_NFPR && TEST_FPR_BITS == 32)
        v &= UINT64_C(0xffffffff);
    return v;
}

static void slot_name(unsigned slot, char *buf, size_t size) {
    if (slot < TEST_NGPR) {
#if defined(TEST_GPR_NAMES)
        static const char *const names[] = {TEST_GPR_NAMES};
        snprintf(buf, size, "%s", names[slot]);
#else
        snprintf(buf, size, "%s%u", TEST_GPR_PREFIX, (unsigned)TEST_GPR_FIRST + slot);
#endif
        return;
    }
    slot -= TEST_NGPR;
#if TEST_NFPR
    if (slot < TEST_NFPR) {
        snprintf(buf, size, "%s%u", TEST_FPR_PREFIX, (unsigned)TEST_FPR_FIRST + slot);
        return;
    }
#endif
    slot -= TEST_NFPR;
#if TEST_NVEC
    snprintf(buf, size, "%s%u (bytes %s)", TEST_VEC_PREFIX,
             (unsigned)TEST_VEC_FIRST + slot / 2, slot % 2 ? "8-15" : "0-7");
#else
    snprintf(buf, size, "slot %u", slot);
#endif
}

static void switch_failed(fsched_result r) {
    fprintf(stderr, "test_registers: fsched_fiber_switch returned %s\n",
            fsched_result_string(r));
    fflush(stderr);
    abort();
}

/* The next switch of ring[turn], the participant that runs: to the next participant, or
   NULL once it has made ROUNDS switches. */
static fsched_fiber *ring_next(void) {
    participant *p = &ring[turn];
    CHECK(fsched_fiber_current() == p->self);
    if (p->rounds >= ROUNDS) return NULL;
    p->rounds++;
    ring_switches++;
    turn = (p->index + 1) % PARTICIPANTS;
    return p->next;
}

/* The thread's own context: its ring switches, then, with its registers still filled,
   one switch to each fiber in turn. Every fiber is suspended inside its last switch;
   resumed, it leaves its loop, stores its registers and finishes, and a finished fiber
   passes control to the fiber that last switched to it: back here. */
static fsched_fiber *thread_next(void) {
    if (ring[0].rounds < ROUNDS) return ring_next();
    CHECK(fsched_fiber_current() == ring[0].self);
    if (finishing == 1) {
        CHECK(turn == 0);
        CHECK_EQ_U64(ring_switches, (unsigned long)PARTICIPANTS * ROUNDS);
    } else {
        CHECK(turn == finishing - 1);
        CHECK(ring[finishing - 1].finished);
    }
    if (finishing >= PARTICIPANTS) return NULL;
    CHECK(!ring[finishing].finished);
    CHECK(fsched_fiber_get_state(ring[finishing].self) == FSCHED_FIBER_SUSPENDED);
    turn = finishing;
    final_switches++;
    return ring[finishing++].self;
}

static test_loop_ops fiber_ops = {ring_next, fsched_fiber_switch, switch_failed};
static test_loop_ops thread_ops = {thread_next, fsched_fiber_switch, switch_failed};

static void fiber_body(void *arg) {
    participant *p = (participant *)arg;
    CHECK(fsched_fiber_current() == p->self);
    CHECK(turn == p->index);
    test_fill_and_call(p->values, p->observed, test_switch_loop, &fiber_ops);
    CHECK(fsched_fiber_current() == p->self);
    CHECK(turn == p->index && finishing == p->index + 1);
    p->finished = 1;
}

/* Calls test_fill_and_call once without switching: checks the helper itself, so that a
   failure of the ring points at the context switch. */
static void nothing(void *arg) { (void)arg; }

/* Compares observed with values for participants [first, end); with verbose, prints each
   register that differs and, when it is one, whose value it holds instead. */
static unsigned compare(unsigned first, unsigned end, int verbose) {
    unsigned p, s, q, t, bad = 0;
    char name[48], other[48];
    for (p = first; p < end; p++) {
        for (s = 0; s < TEST_SLOTS; s++) {
            uint64_t want = ring[p].values[s], got = ring[p].observed[s];
            if (got == want) continue;
            bad++;
            if (!verbose) continue;
            slot_name(s, name, sizeof name);
            fprintf(stderr,
                    "test_registers: participant %u (%s), register %s: "
                    "expected 0x%016llx, observed 0x%016llx",
                    p, p ? "fiber" : "thread context", name, (unsigned long long)want,
                    (unsigned long long)got);
            for (q = 0; q < PARTICIPANTS; q++)
                for (t = 0; t < TEST_SLOTS; t++)
                    if (ring[q].values[t] == got) {
                        slot_name(t, other, sizeof other);
                        fprintf(stderr, " (the value of participant %u's %s)", q, other);
                    }
            fprintf(stderr, "\n");
        }
    }
    return bad;
}

static void test_ring(void) {
    fsched_fiber_desc d;
    unsigned p, s, q, t;

    memset(ring, 0, sizeof ring);
    for (p = 0; p < PARTICIPANTS; p++) {
        ring[p].index = (int)p;
        for (s = 0; s < TEST_SLOTS; s++) ring[p].values[s] = test_value(p, s);
    }
    for (p = 0; p < PARTICIPANTS; p++) /* the values really are distinct */
        for (s = 0; s < TEST_SLOTS; s++)
            for (q = 0; q < PARTICIPANTS; q++)
                for (t = 0; t < TEST_SLOTS; t++)
                    if (p != q || s != t) CHECK(ring[p].values[s] != ring[q].values[t]);
    CHECK(((uintptr_t)ring[0].values & 15) == 0 && ((uintptr_t)ring[1].values & 15) == 0);

    /* the helper alone */
    test_fill_and_call(ring[0].values, ring[0].observed, nothing, NULL);
    CHECK(compare(0, 1, 1) == 0);
    memset(ring[0].observed, 0, sizeof ring[0].observed);

    memset(&d, 0, sizeof d);
    d.stack_size = FIBER_STACK;
    d.name = "registers";
    ring[0].self = fsched_fiber_current();
    CHECK(ring[0].self != NULL);
    for (p = 1; p < PARTICIPANTS; p++)
        CHECK_OK(fsched_fiber_create(&d, fiber_body, &ring[p], &ring[p].self));
    for (p = 0; p < PARTICIPANTS; p++) ring[p].next = ring[(p + 1) % PARTICIPANTS].self;

    turn = 0;
    finishing = 1;
    test_fill_and_call(ring[0].values, ring[0].observed, test_switch_loop, &thread_ops);
    CHECK(fsched_fiber_current() == ring[0].self);
    CHECK_EQ_U64(ring_switches, (unsigned long)PARTICIPANTS * ROUNDS);
    CHECK_EQ_U64(final_switches, FIBERS);
    for (p = 0; p < PARTICIPANTS; p++) CHECK_EQ_U64(ring[p].rounds, ROUNDS);
    for (p = 1; p < PARTICIPANTS; p++) {
        CHECK(ring[p].finished);
        CHECK(fsched_fiber_get_state(ring[p].self) == FSCHED_FIBER_FINISHED);
        CHECK_OK(fsched_fiber_destroy(ring[p].self));
    }

    if (compare(0, PARTICIPANTS, 1) != 0) {
        fprintf(stderr, "test_registers: %u register values were not preserved (%s)\n",
                compare(0, PARTICIPANTS, 0), TEST_ARCH);
        fflush(stderr);
        CHECK(!"callee-saved registers preserved across fsched_fiber_switch");
    }
    printf("test_registers: ok (%s, %d registers per context, %lu switches)\n", TEST_ARCH,
           TEST_NREGS, ring_switches + final_switches);
}

int main(void) {
    test_watchdog(600);
    test_ring();
    return 0;
}

#else /* no assembly context switch */

#if !defined(TEST_SKIP_WHY)
#define TEST_SKIP_WHY "no assembly context switch for this target or backend"
#endif

int main(void) {
    (void)test_watchdog;
    printf("test_registers: skipped (%s)\n", TEST_SKIP_WHY);
    return TEST_SKIP;
}

#endif
