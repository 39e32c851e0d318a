/* A sensor on a microcontroller, without an operating system: a timer interrupt samples
   the sensor every millisecond into a ring and sets an event; a filter task wakes on the
   event, drains the ring and keeps a moving average; every 100 samples the interrupt
   also spawns a report task that the scheduler runs later. Between interrupts the only
   thread sleeps (`wfi`, through the idle hook). At the end every sample must have been
   filtered once, the average must match the same filter run over the same samples, and
   the clock must have seen at least the time the samples took (a millisecond each).

   Built for the MPS2 boards of qemu-system-arm with the test board support (vector table,
   semihosting, a clock, timer 0):
     meson setup build-m3 --cross-file tests/cross/cortex-m3.ini
     meson test -C build-m3 example-sensor
   On your board, replace board_timer_start/_stop, board_clock_ns and
   board_wait_for_interrupt with your own timer, clock and `__WFI()`. */
#define FIBERSCHED_NO_OS
#define FIBERSCHED_DEFAULT_STACK_SIZE (4u * 1024u)
#define FIBERSCHED_IMPLEMENTATION
#include "../../fibersched.h"

#include <stdio.h>
#include <string.h>

#include "board.h"

#define SAMPLES 500
#define PERIOD_US 1000u
#define RING 32u    /* samples the filter may lag behind the interrupt */
#define WINDOW 16u  /* the moving average's length */

static fsched_sched *sched;
static fsched_event sample_ready;
static fsched_wait_group reports;

/* The interrupt writes `head`, the filter task `tail`: one writer each, on one core. */
static volatile int16_t ring[RING];
static volatile uint32_t head, tail, overruns;
static volatile int sampling_done;

/* A sensor: a triangle wave with a little deterministic noise. */
static int16_t read_sensor(uint32_t n) {
    int32_t tri = (int32_t)(n % 200u) < 100 ? (int32_t)(n % 200u) : 200 - (int32_t)(n % 200u);
    return (int16_t)(tri * 10 + (int32_t)((n * 7919u) % 13u) - 6);
}

typedef struct report {
    uint32_t samples;
} report;

static void report_task(void *arg) {
    const report *r = (const report *)arg; /* copied into the task record: no allocation */
    printf("sensor: %lu samples taken\n", (unsigned long)r->samples);
    fsched_wait_group_done(&reports);
}

/* Timer 0's interrupt: sample, hand over, wake the filter. */
static void on_timer(void) {
    uint32_t h = head;
    if (sampling_done) return;
    if (h - tail == RING) {
        overruns++; /* the filter fell behind by a whole ring: a sample is lost */
    } else {
        ring[h % RING] = read_sensor(h);
        head = h + 1;
    }
    fsched_event_set(&sample_ready);
    if ((h + 1) % 100u == 0) {
        report r;
        r.samples = h + 1;
        /* from the scheduler's reserve of interrupt tasks; fails rather than allocate */
        fsched_wait_group_add(&reports, 1);
        if (fsched_spawn_copy(sched, report_task, &r, sizeof r) != FSCHED_OK)
            fsched_wait_group_done(&reports); /* dropped: no interrupt task left */
    }
    if (h + 1 == SAMPLES) {
        sampling_done = 1;
        board_timer_stop();
        fsched_event_set(&sample_ready);
    }
}

typedef struct filter {
    int32_t window[WINDOW];
    int32_t sum;
    uint32_t count;
} filter;

static int32_t filter_add(filter *f, int32_t x) {
    f->sum += x - f->window[f->count % WINDOW];
    f->window[f->count % WINDOW] = x;
    f->count++;
    return f->sum / (int32_t)(f->count < WINDOW ? f->count : WINDOW);
}

static filter live;
static int32_t live_average;

static void filter_task(void *arg) {
    (void)arg;
    for (;;) {
        while (tail != head) { /* drain what the interrupt handed over */
            live_average = filter_add(&live, ring[tail % RING]);
            tail = tail + 1;
        }
        if (sampling_done && tail == head) break;
        fsched_event_wait(&sample_ready); /* the thread sleeps in wfi meanwhile */
    }
}

static void sleep_until_interrupt(void *user) { board_wait_for_interrupt(user); }

int main(void) {
    fsched_desc d;
    fsched_wait_group tasks;
    filter check;
    int32_t expected = 0;
    uint32_t i;
    uint64_t start, elapsed_ms;
    memset(&d, 0, sizeof d);
    d.clock = board_clock_ns;
    d.idle = sleep_until_interrupt;
    d.interrupt_tasks = 4;
    if (fsched_create(&d, &sched) != FSCHED_OK || fsched_bind(sched) != FSCHED_OK) return 1;
    fsched_event_init(&sample_ready, 0, 0);
    fsched_wait_group_init(&reports);
    fsched_wait_group_init(&tasks);

    start = fsched_clock_ns();
    board_timer_start(PERIOD_US, on_timer);
    fsched_wait_group_spawn(&tasks, sched, filter_task, NULL);
    fsched_wait_group_wait(&tasks);   /* until the filter has seen the last sample */
    fsched_wait_group_wait(&reports); /* and every report spawned by the interrupt ran */

    elapsed_ms = (fsched_clock_ns() - start) / 1000000u;
    memset(&check, 0, sizeof check);
    for (i = 0; i < SAMPLES; i++) expected = filter_add(&check, read_sensor(i));
    printf("sensor: %lu samples in %lu ms, %lu lost, average %ld (expected %ld)\n",
           (unsigned long)live.count, (unsigned long)elapsed_ms, (unsigned long)overruns,
           (long)live_average, (long)expected);

    fsched_unbind();
    fsched_destroy(sched);
    fsched_wait_group_destroy(&tasks);
    fsched_wait_group_destroy(&reports);
    fsched_event_destroy(&sample_ready);
    /* the samples came a period apart: at least that long, and nowhere near a wrap */
    if (elapsed_ms < (SAMPLES - 1) * PERIOD_US / 1000u || elapsed_ms > 60000u) {
        printf("sensor: the clock is wrong: %lu ms for %d samples %lu us apart\n",
               (unsigned long)elapsed_ms, SAMPLES, (unsigned long)PERIOD_US);
        return 1;
    }
    return live.count == SAMPLES && overruns == 0 && live_average == expected ? 0 : 1;
}
