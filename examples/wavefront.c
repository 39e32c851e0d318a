/* A wavefront computation as a dependency graph: the edit distance between two long
   sequences by dynamic programming. Cell (i, j) of the table holds the distance between
   the first i letters of one sequence and the first j letters of the other, computed
   from the cells above, to the left and diagonally above-left of it.

   The table is cut into square blocks, one graph task each. Block (i, j) needs the last
   row of block (i-1, j) and the last column of block (i, j-1), so it gets two edges: from
   the block above and from the block to the left (the diagonal neighbour comes before
   both). Running the graph, a front of ready blocks sweeps from the top-left corner to
   the bottom-right one, and the blocks on one anti-diagonal run in parallel. Every cell
   is then checked against the same recurrence computed serially, row by row, and both
   are timed.

   Build: cc -O2 -pthread examples/wavefront.c -o wavefront
   Usage: wavefront [length] [block]     (default 4096 and 128) */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LENGTH 8192 /* two tables of about (length + 1)^2 ints: 512 MiB */
#define RUNS 5          /* each way; the best time counts */

/* The two sequences and a table of (n + 1) x (m + 1) cells, row by row. */
typedef struct problem {
    const char *a, *b;
    size_t n, m;
    size_t stride; /* m + 1 */
} problem;

/* The recurrence for the cells of rows [row0, row1) and columns [col0, col1), all >= 1:
   the cheapest of replacing a letter (free when they match), deleting one and inserting
   one. The cells above row0 and left of col0 must be done. Tasks and the serial
   computation both call this. */
static void fill_cells(const problem *p, int *table, size_t row0, size_t row1, size_t col0,
                       size_t col1) {
    size_t i, j;
    for (i = row0; i < row1; i++) {
        const int *up = table + (i - 1) * p->stride;
        int *row = table + i * p->stride;
        char letter = p->a[i - 1];
        for (j = col0; j < col1; j++) {
            int best = up[j - 1] + (letter != p->b[j - 1]); /* diagonal: replace or keep */
            if (up[j] + 1 < best) best = up[j] + 1;         /* from above: delete */
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1; /* from the left: insert */
            row[j] = best;
        }
    }
}

/* Row 0 and column 0: the distance to an empty prefix is the other prefix's length. */
static void fill_borders(const problem *p, int *table) {
    size_t i;
    for (i = 0; i <= p->m; i++) table[i] = (int)i;
    for (i = 1; i <= p->n; i++) table[i * p->stride] = (int)i;
}

/* What a block task gets: the problem, the table and its range of cells. */
typedef struct block_job {
    const problem *p;
    int *table;
    size_t row0, row1, col0, col1;
} block_job;

/* A graph task: returns 0 for success. It needs nothing from its predecessors but the
   cells they wrote; that they finished before it started makes those cells visible. */
static int compute_block(fsched_graph_task *self, void *arg) {
    const block_job *job = (const block_job *)arg;
    (void)self;
    fill_cells(job->p, job->table, job->row0, job->row1, job->col0, job->col1);
    return 0;
}

/* Sequences over ACGT: a is random, b a copy of it with a few changes (a letter
   replaced, dropped or inserted here and there), so that the distance can be no more
   than the number of changes. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t next_random(void) {
    rng_state ^= rng_state << 13; /* xorshift64 */
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static size_t make_sequences(char *a, char *b, size_t n, size_t *changes) {
    static const char letters[4] = {'A', 'C', 'G', 'T'};
    size_t i, m = 0;
    *changes = 0;
    for (i = 0; i < n; i++) a[i] = letters[next_random() % 4];
    for (i = 0; i < n; i++) {
        uint32_t dice = next_random() % 64;
        if (dice == 0) { /* dropped */
            ++*changes;
        } else if (dice == 1) { /* another letter inserted before it */
            b[m++] = letters[next_random() % 4];
            b[m++] = a[i];
            ++*changes;
        } else if (dice < 6) { /* replaced (possibly by itself) */
            b[m++] = letters[next_random() % 4];
            ++*changes;
        } else {
            b[m++] = a[i];
        }
    }
    return m;
}

static int parse_size(const char *text, size_t lo, size_t hi, size_t *out) {
    char *end;
    long v = strtol(text, &end, 10);
    if (*end != '\0' || v < (long)lo || v > (long)hi) return 0;
    *out = (size_t)v;
    return 1;
}

static int check(fsched_result r, const char *what) {
    if (r == FSCHED_OK) return 1;
    fprintf(stderr, "%s: %s\n", what, fsched_result_string(r));
    return 0;
}

int main(int argc, char **argv) {
    size_t length = 4096, block = 128, changes, cells;
    size_t block_rows, block_cols, bi, bj, i, edges = 0, mismatch = 0;
    problem p;
    char *a, *b;
    int *serial_table, *graph_table;
    block_job *jobs;
    fsched_graph_task **tasks;
    fsched_sched *sched;
    fsched_graph *graph;
    fsched_graph_outcome outcome;
    uint64_t t0, ns, build_ns, serial_ns = UINT64_MAX, graph_ns = UINT64_MAX;
    int run;

    if ((argc > 1 && !parse_size(argv[1], 1, MAX_LENGTH, &length)) ||
        (argc > 2 && !parse_size(argv[2], 1, MAX_LENGTH, &block)) || argc > 3) {
        fprintf(stderr, "usage: %s [length] [block]   with 1 <= both <= %d\n", argv[0],
                MAX_LENGTH);
        return 2;
    }

    /* b may grow by a letter per insertion: up to twice a's length */
    a = (char *)malloc(length);
    b = (char *)malloc(2 * length);
    if (!a || !b) return 1;
    p.a = a;
    p.b = b;
    p.n = length;
    p.m = make_sequences(a, b, length, &changes);
    p.stride = p.m + 1;
    cells = (p.n + 1) * p.stride;
    serial_table = (int *)malloc(cells * sizeof *serial_table);
    graph_table = (int *)malloc(cells * sizeof *graph_table);
    block_rows = (p.n + block - 1) / block;
    block_cols = (p.m + block - 1) / block; /* 0 when every letter was dropped */
    jobs = (block_job *)malloc((block_rows * block_cols + 1) * sizeof *jobs);
    tasks = (fsched_graph_task **)malloc((block_rows * block_cols + 1) * sizeof *tasks);
    if (!serial_table || !graph_table || !jobs || !tasks) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }

    /* The serial computation: the whole table row by row. */
    fill_borders(&p, serial_table);
    for (run = 0; run < RUNS; run++) {
        t0 = fsched_clock_ns();
        fill_cells(&p, serial_table, 1, p.n + 1, 1, p.m + 1);
        ns = fsched_clock_ns() - t0;
        if (ns < serial_ns) serial_ns = ns;
    }

    if (!check(fsched_create(NULL, &sched), "fsched_create")) return 1; /* a worker per CPU */
    if (!check(fsched_graph_create(NULL, &graph), "fsched_graph_create")) return 1;

    /* The graph: a task per block, then an edge from the block above and from the block
       to the left. Tasks are added in row order, so every edge goes from an older task
       to a newer one: the graph refuses edges that would close a cycle, and its check
       costs next to nothing for edges in the order the tasks were added. */
    t0 = fsched_clock_ns();
    for (bi = 0; bi < block_rows; bi++) {
        for (bj = 0; bj < block_cols; bj++) {
            size_t k = bi * block_cols + bj;
            fsched_graph_task_desc desc = {0};
            char name[48];
            block_job *job = &jobs[k];
            job->p = &p;
            job->table = graph_table;
            job->row0 = 1 + bi * block;
            job->row1 = job->row0 + block < p.n + 1 ? job->row0 + block : p.n + 1;
            job->col0 = 1 + bj * block;
            job->col1 = job->col0 + block < p.m + 1 ? job->col0 + block : p.m + 1;
            snprintf(name, sizeof name, "block %zu,%zu", bi, bj);
            desc.name = name; /* copied */
            /* The cost hint: the cells of the block. The graph sums the costs along
               every path to the end and starts the ready block with the longest path
               ahead first: the one nearest the top-left corner, which keeps the front
               even. */
            desc.cost = (uint64_t)(job->row1 - job->row0) * (job->col1 - job->col0);
            if (!check(fsched_graph_add(graph, compute_block, job, &desc, &tasks[k]),
                       "fsched_graph_add"))
                return 1;
            if (bi > 0) { /* the block above */
                if (!check(fsched_graph_precede(graph, tasks[k - block_cols], tasks[k]),
                           "fsched_graph_precede"))
                    return 1;
                edges++;
            }
            if (bj > 0) { /* the block to the left */
                if (!check(fsched_graph_precede(graph, tasks[k - 1], tasks[k]),
                           "fsched_graph_precede"))
                    return 1;
                edges++;
            }
        }
    }
    build_ns = fsched_clock_ns() - t0;

    /* Runs: the graph is built once and run again each time. The table is wiped in
       between (untimed), so that a block that did not run would show. */
    fill_borders(&p, graph_table);
    for (run = 0; run < RUNS; run++) {
        fsched_result r;
        for (i = 1; i <= p.n; i++) /* every cell -1 */
            memset(graph_table + i * p.stride + 1, 0xff, p.m * sizeof *graph_table);
        t0 = fsched_clock_ns();
        if (!check(fsched_graph_run(graph, sched), "fsched_graph_run")) return 1;
        r = fsched_graph_wait(graph, &outcome); /* blocks this thread, not in the scheduler */
        ns = fsched_clock_ns() - t0;
        if (ns < graph_ns) graph_ns = ns;
        if (!check(r, "the graph's run")) return 1; /* a run that did not finish every task */
    }

    for (i = 0; i < cells; i++)
        if (graph_table[i] != serial_table[i] && !mismatch++)
            fprintf(stderr, "mismatch at cell (%zu, %zu): %d, serially %d\n", i / p.stride,
                    i % p.stride, graph_table[i], serial_table[i]);

    printf("edit distance between %zu letters and a copy with %zu changes (%zu letters): "
           "%d\n",
           p.n, changes, p.m, graph_table[cells - 1]);
    printf("%zu x %zu blocks of up to %zu x %zu cells: %zu tasks, %zu edges, built in "
           "%.2f ms\n",
           block_rows, block_cols, block, block, fsched_graph_task_count(graph),
           edges, build_ns / 1e6);
    printf("serial: %.1f ms; graph: %.1f ms on %u workers (%.2fx); best of %d runs each\n",
           serial_ns / 1e6, graph_ns / 1e6, (unsigned)fsched_worker_count(sched),
           graph_ns ? (double)serial_ns / (double)graph_ns : 0.0, RUNS);

    if (!check(fsched_graph_destroy(graph), "fsched_graph_destroy")) return 1;
    if (!check(fsched_destroy(sched), "fsched_destroy")) return 1;
    free(tasks);
    free(jobs);
    free(graph_table);
    free(serial_table);
    free(b);
    free(a);
    if (mismatch) {
        fprintf(stderr, "%zu cells differ from the serial computation\n", mismatch);
        return 1;
    }
    printf("every cell matches the serial computation\n");
    return 0;
}
