/* Board support of the tests on the MPS2 boards of qemu-system-arm (board.c). */
#ifndef FIBERSCHED_TEST_BOARD_H
#define FIBERSCHED_TEST_BOARD_H
#include <stddef.h>
#include <stdint.h>

/* Nanoseconds since reset, from timer 1: a clock for fsched_desc.clock. Any thread or
   handler. */
uint64_t board_clock_ns(void *user);
/* The heap stops growing after `bytes` (0: the whole of it); and how much it has grown. */
void board_heap_limit(size_t bytes);
size_t board_heap_used(void);
/* Called from the SysTick interrupt, every 0.67 s (2^24 cycles); NULL: none. */
void board_set_timer_hook(void (*hook)(void));
/* Timer 0's interrupt calls `hook` every period_us microseconds, until board_timer_stop. */
void board_timer_start(uint32_t period_us, void (*hook)(void));
void board_timer_stop(void);
/* Called once when the program ends (exit, abort), with its status; it may end the
   program itself (_exit) with another. */
void board_at_exit(void (*hook)(int status));
/* Called by the fault handler, before it reports the fault and fails the test, with the
   faulting address (MMFAR) when the MPU recorded one, else the faulting stack. */
void board_set_fault_hook(void (*hook)(const void *address));
/* An idle hook for fsched_desc.idle: waits for an interrupt (wfi). */
void board_wait_for_interrupt(void *user);
#endif
