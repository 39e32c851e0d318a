/* Board support for the tests on the MPS2 boards of qemu-system-arm (Cortex-M3 AN385,
   Cortex-M4F AN386): the vector table and reset, the system calls newlib needs, through
   semihosting (output on the emulator's stdout and stderr, the exit status), a heap that
   grows wherever the stack pointer is (fiber stacks live in the heap), a clock from
   timer 1 kept up by SysTick, and fault reports.

   newlib's own semihosting library (librdimon) refuses to grow the heap when the stack
   pointer is below the break, which is the case in every task running on a fiber stack
   taken from the heap: malloc then fails inside tasks. This _sbrk only checks the heap's
   own limit. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "board.h"

extern uint32_t __bss_start__[], __bss_end__[], __stack_top[];
extern char __heap_start[], __heap_end[];
extern void __libc_init_array(void);
int main(int argc, char **argv); /* tests declare main(void) too: the extra arguments go unread */

/* ---- semihosting ---- */

#define SEMI_OPEN 0x01
#define SEMI_WRITE 0x05
#define SEMI_EXIT_EXTENDED 0x20
#define SEMI_APPLICATION_EXIT 0x20026

static int semihost(int op, void *arg) {
    register int r0 __asm__("r0") = op;
    register void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

static int console[3] = {-1, -1, -1}; /* semihosting handles of stdin, stdout, stderr */

static int console_open(int fd) {
    if (console[fd] < 0) {
        /* ":tt" is the console; modes 0, 4 and 8 are "r", "w" and "a" */
        uint32_t block[3] = {(uint32_t)(uintptr_t) ":tt", (uint32_t)(fd == 0 ? 0 : fd * 4), 3};
        console[fd] = semihost(SEMI_OPEN, block);
    }
    return console[fd];
}

static void (*exit_hook)(int status);

void board_at_exit(void (*hook)(int status)) { exit_hook = hook; }

void _exit(int status) {
    uint32_t block[2] = {SEMI_APPLICATION_EXIT, (uint32_t)status};
    void (*hook)(int) = exit_hook;
    exit_hook = NULL;
    if (hook) hook(status); /* may end the program itself, with another status */
    for (;;) semihost(SEMI_EXIT_EXTENDED, block);
}

int _write(int fd, const char *buf, int len) {
    uint32_t block[3];
    int left;
    if (fd != 1 && fd != 2) {
        errno = EBADF;
        return -1;
    }
    block[0] = (uint32_t)console_open(fd);
    block[1] = (uint32_t)(uintptr_t)buf;
    block[2] = (uint32_t)len;
    left = semihost(SEMI_WRITE, block); /* bytes not written */
    return len - left;
}

int _read(int fd, char *buf, int len) {
    (void)fd;
    (void)buf;
    (void)len;
    return 0; /* no input */
}

int _close(int fd) {
    (void)fd;
    return 0;
}

int _lseek(int fd, int offset, int whence) {
    (void)fd;
    (void)offset;
    (void)whence;
    errno = ESPIPE;
    return -1;
}

int _fstat(int fd, struct stat *st) {
    (void)fd;
    memset(st, 0, sizeof *st);
    st->st_mode = S_IFCHR; /* a console: line-buffered */
    return 0;
}

int _isatty(int fd) {
    (void)fd;
    return 1;
}

int _getpid(void) { return 1; }

int _kill(int pid, int sig) {
    (void)pid;
    (void)sig;
    errno = EINVAL;
    return -1;
}

/* ---- the heap ---- */

static char *heap_break = __heap_start;
static size_t heap_limit_bytes; /* 0: up to __heap_end */

void *_sbrk(ptrdiff_t increment) {
    char *old = heap_break;
    char *limit = heap_limit_bytes ? __heap_start + heap_limit_bytes : __heap_end;
    if (increment > limit - heap_break || increment < __heap_start - heap_break) {
        errno = ENOMEM;
        return (void *)-1;
    }
    heap_break += increment;
    return old;
}

void board_heap_limit(size_t bytes) {
    size_t whole = (size_t)(__heap_end - __heap_start);
    heap_limit_bytes = bytes < whole ? bytes : 0;
}

size_t board_heap_used(void) { return (size_t)(heap_break - __heap_start); }

/* ---- the clock: timer 1 counts down through all 32 bits at the core's clock (a period
   of 172 s at 25 MHz), and every reading adds what it counted since the last one, modulo
   2^32. SysTick's interrupt, every 0.67 s, reads it too, so that no two readings are a
   period apart unless interrupts stay masked that long. Nothing depends on when a wrap's
   interrupt comes (an emulator may pend one well after the counter wrapped). It starts
   a second before its first wrap, so that every run of a test crosses one. ---- */

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define TIMER1_CTRL (*(volatile uint32_t *)0x40001000u)
#define TIMER1_VALUE (*(volatile uint32_t *)0x40001004u)
#define TIMER1_RELOAD (*(volatile uint32_t *)0x40001008u)
#define SCB_CPACR (*(volatile uint32_t *)0xE000ED88u)
#define SCB_CFSR (*(volatile uint32_t *)0xE000ED28u)
#define SCB_HFSR (*(volatile uint32_t *)0xE000ED2Cu)
#define SCB_MMFAR (*(volatile uint32_t *)0xE000ED34u)
#define SCB_BFAR (*(volatile uint32_t *)0xE000ED38u)

#define CORE_HZ 25000000u /* the MPS2 boards' core clock */
#define TICK_RELOAD 0x00FFFFFFu /* SysTick: the full 24 bits, 0.67 s a period */

static uint32_t clock_count;  /* timer 1 at the last reading */
static uint64_t clock_cycles; /* cycles counted up to it */

static void (*board_timer_hook)(void);

uint64_t board_clock_ns(void *user) {
    uint32_t masked, now;
    uint64_t cycles;
    (void)user;
    /* masked: a handler's reading stays out of this one's */
    __asm__ volatile("mrs %0, primask\n cpsid i" : "=r"(masked) : : "memory");
    now = TIMER1_VALUE;
    clock_cycles += (uint32_t)(clock_count - now); /* it counts down, wrapping at 2^32 */
    clock_count = now;
    cycles = clock_cycles;
    __asm__ volatile("msr primask, %0" : : "r"(masked) : "memory");
    return cycles * 1000u / (CORE_HZ / 1000000u);
}

static void board_clock_start(void) {
    TIMER1_CTRL = 0;
    TIMER1_RELOAD = 0xFFFFFFFFu;
    TIMER1_VALUE = CORE_HZ; /* then it wraps to the reload */
    clock_count = CORE_HZ;
    TIMER1_CTRL = 1u; /* enabled, no interrupt */
    SYST_RVR = TICK_RELOAD;
    SYST_CVR = 0;
    SYST_CSR = 7; /* the core's clock, the interrupt, enabled */
}

/* ---- faults: say what happened and where, then fail the test ---- */

static void (*fault_hook)(const void *address);

void board_set_fault_hook(void (*hook)(const void *address)) { fault_hook = hook; }

void board_fault_report(uint32_t *frame) {
    if (fault_hook) /* the faulting address when the MPU recorded one, else the stack's */
        fault_hook(SCB_CFSR & 0x80u ? (const void *)(uintptr_t)SCB_MMFAR : (const void *)frame);
    fprintf(stderr, "board: fault: CFSR %08lx HFSR %08lx MMFAR %08lx BFAR %08lx PC %08lx LR %08lx\n",
            (unsigned long)SCB_CFSR, (unsigned long)SCB_HFSR, (unsigned long)SCB_MMFAR,
            (unsigned long)SCB_BFAR, (unsigned long)frame[6], (unsigned long)frame[5]);
    _exit(70);
}

__attribute__((naked)) void board_fault_handler(void) {
    __asm__ volatile(
        "tst lr, #4\n"
        "ite eq\n"
        "mrseq r0, msp\n"
        "mrsne r0, psp\n"
        "b board_fault_report\n");
}

static void board_unexpected(void) {
    fprintf(stderr, "board: unexpected interrupt\n");
    _exit(71);
}

/* ---- a fast timer: CMSDK APB timer 0 (interrupt 8), counting down at the core's
   clock from its reload value ---- */

#define TIMER0_CTRL (*(volatile uint32_t *)0x40000000u)
#define TIMER0_RELOAD (*(volatile uint32_t *)0x40000008u)
#define TIMER0_VALUE (*(volatile uint32_t *)0x40000004u)
#define TIMER0_INTCLEAR (*(volatile uint32_t *)0x4000000Cu)
#define NVIC_ISER0 (*(volatile uint32_t *)0xE000E100u)
#define NVIC_ICER0 (*(volatile uint32_t *)0xE000E180u)
#define TIMER0_IRQ 8u

static void (*volatile board_fast_hook)(void);

static void board_timer0(void) {
    TIMER0_INTCLEAR = 1;
    if (board_fast_hook) board_fast_hook();
}

void board_timer_start(uint32_t period_us, void (*hook)(void)) {
    board_fast_hook = hook;
    TIMER0_CTRL = 0;
    TIMER0_RELOAD = period_us * (CORE_HZ / 1000000u) - 1u;
    TIMER0_VALUE = TIMER0_RELOAD;
    TIMER0_INTCLEAR = 1;
    NVIC_ISER0 = 1u << TIMER0_IRQ;
    TIMER0_CTRL = 1u | 8u; /* enabled, interrupt enabled */
}

void board_timer_stop(void) {
    TIMER0_CTRL = 0;
    NVIC_ICER0 = 1u << TIMER0_IRQ;
    __asm__ volatile("dsb\n isb" ::: "memory");
    TIMER0_INTCLEAR = 1;
    board_fast_hook = NULL;
}

void board_wait_for_interrupt(void *user) {
    (void)user;
    __asm__ volatile("wfi" ::: "memory");
}

static void board_systick(void) {
    (void)board_clock_ns(NULL); /* a reading at least every 0.67 s */
    if (board_timer_hook) board_timer_hook();
}

void board_set_timer_hook(void (*hook)(void)) { board_timer_hook = hook; }

void board_reset(void);

__attribute__((section(".vectors"), used)) static void (*const vectors[16 + 32])(void) = {
    (void (*)(void))(uintptr_t)__stack_top,
    board_reset,
    board_unexpected,    /* NMI */
    board_fault_handler, /* HardFault */
    board_fault_handler, /* MemManage */
    board_fault_handler, /* BusFault */
    board_fault_handler, /* UsageFault */
    0, 0, 0, 0,
    board_unexpected, /* SVCall */
    board_unexpected, /* debug monitor */
    0,
    board_unexpected, /* PendSV */
    board_systick,
    /* external interrupts: timer 0 (8), else none expected */
    board_unexpected, board_unexpected, board_unexpected, board_unexpected,
    board_unexpected, board_unexpected, board_unexpected, board_unexpected,
    board_timer0,     board_unexpected, board_unexpected, board_unexpected,
    board_unexpected, board_unexpected, board_unexpected, board_unexpected,
    board_unexpected, board_unexpected, board_unexpected, board_unexpected,
    board_unexpected, board_unexpected, board_unexpected, board_unexpected,
    board_unexpected, board_unexpected, board_unexpected, board_unexpected,
    board_unexpected, board_unexpected, board_unexpected, board_unexpected,
};

/* crti/crtn's hooks, run by __libc_init_array and __libc_fini_array: nothing here */
void _init(void) {}
void _fini(void) {}

/* Interrupts and faults run on a stack of their own (MSP), the program's thread on the
   main stack (PSP): a handler's frames then never land on a fiber's stack, and a fault
   in a fiber's stack guard can still be reported. */
uint64_t board_handler_stack[512];

void board_start(void);

__attribute__((naked)) void board_reset(void) {
    __asm__ volatile(
        "ldr r0, =__stack_top\n"
        "msr psp, r0\n"
        "movs r0, #2\n" /* CONTROL.SPSEL: thread mode on PSP */
        "msr control, r0\n"
        "isb\n"
        "ldr r0, =board_handler_stack + 4096\n"
        "msr msp, r0\n"
        "b board_start\n");
}

void board_start(void) {
    uint32_t *p;
    for (p = __bss_start__; p < __bss_end__; p++) *p = 0;
#if defined(__ARM_FP)
    SCB_CPACR |= 0xFu << 20; /* CP10, CP11: the FPU, full access */
    __asm__ volatile("dsb\n isb" ::: "memory");
#endif
    board_clock_start();
    static char name[] = "test", *argv[] = {name, NULL};
    __libc_init_array();
    exit(main(1, argv));
}
