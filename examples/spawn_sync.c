/* N-queens counted in parallel with spawn and sync, checked against the same count done
   serially, with the time each took.

   A task defined with FSCHED_TASK spawns one child per free column of its row (so the
   number of children varies from node to node) and then syncs them, newest first, adding
   up their counts. A spawn only writes the child's argument into the next frame of the
   task tree's frame stack; a child that no idle worker took by the time its parent syncs
   it runs right there, like a plain call. Near the leaves the recursion is serial: the
   leaves are then big enough for the spawns not to show at all.

   Build: cc -O2 -pthread examples/spawn_sync.c -o spawn_sync
   Usage: spawn_sync [n]     (default 12; about 6 times the time per step of n) */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <stdio.h>
#include <stdlib.h>

#define SERIAL_ROWS 5 /* the last rows are counted without spawning */

/* A partial board: queens placed in rows 0..row-1, as bit masks of the attacked columns
   and diagonals of the next row. It is the task's argument, copied into the frame. */
typedef struct board {
    int n, row;
    uint32_t cols, left, right;
} board;

/* The columns of the next row that no queen attacks. */
static uint32_t free_columns(board b) { return ((1u << b.n) - 1u) & ~(b.cols | b.left | b.right); }

/* The board with a queen in the next row, in the column of `bit`. */
static board place(board b, uint32_t bit) {
    board next = b;
    next.row = b.row + 1;
    next.cols = b.cols | bit;
    next.left = (b.left | bit) << 1;
    next.right = (b.right | bit) >> 1;
    return next;
}

static uint64_t count_serial(board b) {
    uint32_t cols = free_columns(b);
    uint64_t count = 0;
    if (b.row == b.n) return 1;
    for (; cols; cols &= cols - 1u) count += count_serial(place(b, cols & (0u - cols)));
    return count;
}

FSCHED_TASK(uint64_t, count_queens, board, b) {
    uint32_t cols = free_columns(b);
    uint64_t count = 0;
    int children = 0;
    if (b.n - b.row <= SERIAL_ROWS) return count_serial(b);
    for (; cols; cols &= cols - 1u, children++)
        FSCHED_SPAWN(count_queens, place(b, cols & (0u - cols))); /* one child per column */
    while (children-- > 0) count += FSCHED_SYNC(count_queens);
    return count;
}

int main(int argc, char **argv) {
    fsched_sched *sched;
    board empty;
    uint64_t parallel = 0, serial, t0, t1, t2;
    fsched_result r;
    int n = 12;

    if (argc > 1) {
        char *end;
        long v = strtol(argv[1], &end, 10);
        if (*end != '\0' || v < 1 || v > 20) {
            fprintf(stderr, "usage: %s [n]   with 1 <= n <= 20\n", argv[0]);
            return 2;
        }
        n = (int)v;
    }
    r = fsched_create(NULL, &sched); /* NULL: defaults, one worker per CPU */
    if (r != FSCHED_OK) {
        fprintf(stderr, "fsched_create: %s\n", fsched_result_string(r));
        return 1;
    }
    /* FSCHED_RUN needs a task or a bound thread: this thread takes part */
    r = fsched_bind(sched);
    if (r != FSCHED_OK) {
        fprintf(stderr, "fsched_bind: %s\n", fsched_result_string(r));
        return 1;
    }
    empty.n = n;
    empty.row = 0;
    empty.cols = empty.left = empty.right = 0;
    t0 = fsched_clock_ns();
    r = FSCHED_RUN(count_queens, empty, &parallel);
    t1 = fsched_clock_ns();
    serial = count_serial(empty);
    t2 = fsched_clock_ns();
    fsched_unbind();
    fsched_destroy(sched);
    if (r != FSCHED_OK) {
        fprintf(stderr, "FSCHED_RUN: %s\n", fsched_result_string(r));
        return 1;
    }
    printf("%d-queens: %llu solutions in parallel (%.1f ms), %llu serially (%.1f ms)\n", n,
           (unsigned long long)parallel, (double)(t1 - t0) / 1e6, (unsigned long long)serial,
           (double)(t2 - t1) / 1e6);
    if (parallel != serial) {
        fprintf(stderr, "the counts differ\n");
        return 1;
    }
    return 0;
}
