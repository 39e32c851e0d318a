/* The board's clock never goes backwards and keeps pace: read with interrupts masked for
   most of each of four SysTick periods (as the library reads it before its idle hook),
   across the wrap of its own counter a second after reset, and then against SysTick's
   interrupts, which come every 2^24 cycles of the same core clock. */
#define FIBERSCHED_IMPLEMENTATION
#include "../../fibersched.h"
#include "../check.h"
#include "board.h"

#define PERIOD_NS 671088640ull /* a SysTick period: 2^24 cycles at 25 MHz */

static volatile uint32_t ticks;
static volatile uint64_t tick_at[4]; /* the clock at SysTick's first four interrupts */

static void on_tick(void) {
    if (ticks < 4) tick_at[ticks] = board_clock_ns(NULL);
    ticks++;
}

int main(void) {
    uint64_t start = board_clock_ns(NULL), prev = start, now;
    while (prev - start < 4 * PERIOD_NS) {
        uint64_t window = prev;
        __asm__ volatile("cpsid i" ::: "memory"); /* a fifth of a period masked */
        do {
            now = board_clock_ns(NULL);
            if (now < prev) {
                fprintf(stderr, "test_clock: the clock went back %llu ns, from %llu to %llu\n",
                        (unsigned long long)(prev - now), (unsigned long long)prev,
                        (unsigned long long)now);
                return 1;
            }
            prev = now;
        } while (now - window < PERIOD_NS / 5);
        __asm__ volatile("cpsie i\n isb" ::: "memory");
    }
    CHECK(prev > 1000000000ull); /* past the counter's first wrap */
    /* four interrupts of SysTick, three of its periods apart */
    board_set_timer_hook(on_tick);
    while (ticks < 4) __asm__ volatile("wfi" ::: "memory");
    board_set_timer_hook(NULL);
    now = tick_at[3] - tick_at[0];
    printf("test_clock: %llu ms masked, then three SysTick periods in %llu us (%llu us each)\n",
           (unsigned long long)((prev - start) / 1000000u), (unsigned long long)(now / 1000u),
           (unsigned long long)(PERIOD_NS / 1000u));
    /* an emulator may deliver an interrupt late, by some milliseconds */
    CHECK(now > 3 * PERIOD_NS - 50000000ull && now < 3 * PERIOD_NS + 50000000ull);
    printf("test_clock: ok\n");
    return 0;
}
