/* A Jacobi stencil over MPI ranks, each of them running a scheduler, with the halo
   exchange overlapped with the computation.

   The grid (nx columns by ny rows inside a fixed border) is cut into slabs of whole rows,
   one per rank. A step replaces every cell by the mean of its four neighbours, read from
   the grid of the step before. The first and last rows of a slab need a row of the
   neighbouring slab (a halo), sent by the neighbour at the start of the step; the other
   rows need nothing from outside, and are computed while the halos travel.

   The halos are sent with MPI_Isend and MPI_Irecv. MPI finds out that a request has
   completed, and moves large messages along, only inside an MPI call: the scheduler's
   poll hook makes that call (MPI_Testsome) on a worker between two tasks, at most every
   --poll-us microseconds (default 20), and before an idle worker sleeps; it sets the
   event that the task of a boundary row waits for. The tasks of the interior rows run
   meanwhile. With --blocking, each step waits for its halos in MPI_Waitall first and
   then computes every row, as a program without the hook would.

   Each rank runs one worker unless --workers says more: ranks on one machine share its
   cores. --block sets the interior rows of a task: the hook runs between tasks, so
   smaller tasks move the messages along sooner. --serialize takes a lock around every
   MPI call, as the program does when the library offers less than MPI_THREAD_MULTIPLE.

   Rank 0 gathers the result and compares it with the same steps computed serially: the
   same operations in the same order, so every cell must agree to the bit. --bench runs
   both ways, alternating, and prints the medians.

   Build: mpicc -O2 -pthread examples/mpi/stencil.c -o stencil
   Run:   mpirun -np 4 --oversubscribe ./stencil   (as root, add --allow-run-as-root)
   Usage: stencil [--blocking | --bench] [--nx columns] [--ny rows] [--steps n]
                  [--block rows] [--workers n] [--poll-us us] [--reps n] [--serialize] */
#define FIBERSCHED_IMPLEMENTATION
#include "../../fibersched.h"

#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CELLS ((size_t)1 << 26) /* the serial check keeps two whole grids on rank 0 */
#define MAX_REPS 99

typedef struct config {
    size_t nx, ny, steps;
    size_t block;      /* interior rows per task */
    uint32_t workers;  /* per rank */
    uint64_t poll_ns;  /* the hook's interval */
    int reps;          /* --bench: runs of each kind */
    int blocking, bench, serialize;
} config;

/* A rank's slab: its rows 1..rows of a grid of stride doubles a row, between two halo
   rows (0 and rows + 1), in two copies: the step reads one and writes the other. Columns
   0 and nx + 1, and the halo rows of the first and last slabs, are the fixed border. */
typedef struct slab {
    size_t nx, ny, stride, rows;
    size_t first;      /* the global row of row 1 */
    double *grid[2];
    int above, below;  /* neighbouring ranks, or MPI_PROC_NULL at the border */
} slab;

/* What the hook and the tasks share. The lock guards the request table (a task posts
   while the hook may be testing on another worker); when the MPI library allows only one
   thread in it at a time, every MPI call takes it too, and never across a wait of the
   scheduler. */
typedef struct exchange {
    pthread_mutex_t lock;
    int serialize;
    MPI_Request req[4];      /* receive from above, from below, send up, send down */
    int pending;             /* requests not yet completed */
    fsched_event arrived[2]; /* the halo from above, from below (auto-reset: once a step) */
    fsched_wait_group step;  /* the step's tasks and requests */
    uint64_t polls;          /* calls of the hook that tested */
} exchange;

/* A task: rows [row0, row1) from cur into next, after the halo it reads has arrived. */
typedef struct rows_job {
    const slab *sl;
    exchange *ex;
    const double *cur;
    double *next;
    size_t row0, row1;
    fsched_event *halo; /* NULL: nothing to wait for */
} rows_job;

/* The steps of one run, as a task (see run_steps). */
typedef struct run_state {
    const config *cfg;
    const slab *sl;
    exchange *ex;
    fsched_sched *sched;
    rows_job *jobs[2]; /* the tasks of a step that reads grid[0], grid[1] */
    size_t njobs;
    int overlapped;
} run_state;

enum { FROM_ABOVE, FROM_BELOW, TO_ABOVE, TO_BELOW };
enum { TAG_DOWN, TAG_UP }; /* the direction a row travels */

/* One step over rows [row0, row1): each cell of columns 1..nx becomes the mean of its
   four neighbours in cur. The tasks and the serial check both call this, so that they
   compute every cell with the same operations in the same order. */
static void relax_rows(const double *restrict cur, double *restrict next, size_t stride,
                       size_t nx, size_t row0, size_t row1) {
    size_t i, j;
    for (i = row0; i < row1; i++) {
        const double *up = cur + (i - 1) * stride, *mid = cur + i * stride;
        const double *down = cur + (i + 1) * stride;
        double *out = next + i * stride;
        for (j = 1; j <= nx; j++)
            out[j] = 0.25 * ((up[j] + down[j]) + (mid[j - 1] + mid[j + 1]));
    }
}

/* Global row i (0 and ny + 1 are the border), column j: a hot top edge, the other edges
   cold, and the inside scrambled so that a cell computed from the wrong neighbours
   shows. */
static double initial_value(size_t i, size_t j, size_t ny, size_t nx) {
    uint64_t x;
    if (i == 0) return 1.0;
    if (i == ny + 1 || j == 0 || j == nx + 1) return 0.0;
    x = (uint64_t)i * 0x9e3779b97f4a7c15ull ^ (uint64_t)j * 0xc2b2ae3d27d4eb4full;
    x ^= x >> 31; /* a few rounds of mixing, as in splitmix64 */
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (double)(x >> 11) * 0x1p-53; /* [0, 1) */
}

/* Rank r's share of ny rows: the first ny % ranks slabs get a row more. Returns the
   count and sets *first to the global row of its first. */
static size_t share(size_t ny, int ranks, int r, size_t *first) {
    size_t n = (size_t)ranks, k = (size_t)r, extra = ny % n;
    *first = 1 + k * (ny / n) + (k < extra ? k : extra);
    return ny / n + (k < extra);
}

static void fill_slab(slab *sl) {
    size_t k, j, g;
    for (k = 0; k <= sl->rows + 1; k++) {
        g = sl->first - 1 + k;
        for (j = 0; j < sl->stride; j++)
            sl->grid[0][k * sl->stride + j] = sl->grid[1][k * sl->stride + j] =
                initial_value(g, j, sl->ny, sl->nx);
    }
}

static void mpi_enter(exchange *ex) {
    if (ex->serialize) pthread_mutex_lock(&ex->lock);
}

static void mpi_leave(exchange *ex) {
    if (ex->serialize) pthread_mutex_unlock(&ex->lock);
}

/* Posts the step's four transfers: the halos into cur's rows 0 and rows + 1, and this
   slab's first and last rows to the neighbours (to MPI_PROC_NULL at the border, which
   completes at once and leaves the border alone). */
static void post_halos(exchange *ex, const slab *sl, double *cur) {
    int n = (int)sl->nx;
    pthread_mutex_lock(&ex->lock);
    MPI_Irecv(cur + 1, n, MPI_DOUBLE, sl->above, TAG_DOWN, MPI_COMM_WORLD,
              &ex->req[FROM_ABOVE]);
    MPI_Irecv(cur + (sl->rows + 1) * sl->stride + 1, n, MPI_DOUBLE, sl->below, TAG_UP,
              MPI_COMM_WORLD, &ex->req[FROM_BELOW]);
    MPI_Isend(cur + sl->stride + 1, n, MPI_DOUBLE, sl->above, TAG_UP, MPI_COMM_WORLD,
              &ex->req[TO_ABOVE]);
    MPI_Isend(cur + sl->rows * sl->stride + 1, n, MPI_DOUBLE, sl->below, TAG_DOWN,
              MPI_COMM_WORLD, &ex->req[TO_BELOW]);
    ex->pending = 4;
    pthread_mutex_unlock(&ex->lock);
}

/* The poll hook: completes what it can and lets the waiters go. It must not wait, so
   when the lock is taken (a task posting) it says "still outstanding" and is called
   again soon. */
static int poll_halos(void *user) {
    exchange *ex = (exchange *)user;
    int done, i, index[4], more;
    if (pthread_mutex_trylock(&ex->lock) != 0) return 1;
    if (ex->pending > 0) {
        ex->polls++;
        MPI_Testsome(4, ex->req, &done, index, MPI_STATUSES_IGNORE);
        for (i = 0; i < done && done != MPI_UNDEFINED; i++) {
            if (index[i] == FROM_ABOVE || index[i] == FROM_BELOW)
                fsched_event_set(&ex->arrived[index[i]]);
            /* a send counts too: its row must not be overwritten before it has left */
            fsched_wait_group_done(&ex->step);
            ex->pending--;
        }
    }
    more = ex->pending > 0;
    pthread_mutex_unlock(&ex->lock);
    return more;
}

static void relax_task(void *arg) {
    const rows_job *job = (const rows_job *)arg;
    if (job->halo) fsched_event_wait(job->halo);
    relax_rows(job->cur, job->next, job->sl->stride, job->sl->nx, job->row0, job->row1);
    fsched_wait_group_done(&job->ex->step);
}

/* The step's tasks, for one parity (which copy is read): the first and the last row,
   then the interior rows [2, rows) in blocks. A worker runs its own tasks newest first:
   the interior first, and the boundary rows last, when their halos have most likely
   arrived. */
static size_t make_jobs(const slab *sl, const config *cfg, exchange *ex, int parity,
                        int overlapped, rows_job *jobs) {
    size_t n = 0, r;
    jobs[n].row0 = 1;
    jobs[n].row1 = 2;
    jobs[n++].halo = overlapped ? &ex->arrived[FROM_ABOVE] : NULL;
    jobs[n].row0 = sl->rows;
    jobs[n].row1 = sl->rows + 1;
    jobs[n++].halo = overlapped ? &ex->arrived[FROM_BELOW] : NULL;
    for (r = 2; r < sl->rows; r += cfg->block) {
        jobs[n].row0 = r;
        jobs[n].row1 = r + cfg->block < sl->rows ? r + cfg->block : sl->rows;
        jobs[n++].halo = NULL;
    }
    for (r = 0; r < n; r++) {
        jobs[r].sl = sl;
        jobs[r].ex = ex;
        jobs[r].cur = sl->grid[parity];
        jobs[r].next = sl->grid[!parity];
    }
    return n;
}

/* The steps, run as a task, so that a rank's computation stays on its workers: at the
   end of a step the last task wakes this one on the same worker, without waking another
   thread. The rows are plain spawns counted by hand, not wait-group spawns: the wait
   would run those still queued itself, inside the wait, where the poll hook is not
   called between them. */
static void run_steps(void *arg) {
    const run_state *rs = (const run_state *)arg;
    exchange *ex = rs->ex;
    size_t step, k;
    for (step = 0; step < rs->cfg->steps; step++) {
        int parity = (int)(step % 2);
        double *cur = rs->sl->grid[parity];
        /* the wait below ends when the tasks have run and, overlapped, the hook has seen
           all four requests complete */
        fsched_wait_group_add(&ex->step, (int64_t)rs->njobs + (rs->overlapped ? 4 : 0));
        post_halos(ex, rs->sl, cur);
        if (!rs->overlapped) { /* the worker waits in MPI, and computes nothing meanwhile */
            mpi_enter(ex);
            MPI_Waitall(4, ex->req, MPI_STATUSES_IGNORE);
            mpi_leave(ex);
        }
        for (k = 0; k < rs->njobs; k++)
            if (fsched_spawn(rs->sched, relax_task, &rs->jobs[parity][k]) != FSCHED_OK)
                relax_task(&rs->jobs[parity][k]); /* out of memory: run it here */
        fsched_wait_group_wait(&ex->step);
    }
}

static int check(fsched_result r, const char *what) {
    if (r == FSCHED_OK) return 1;
    fprintf(stderr, "%s: %s\n", what, fsched_result_string(r));
    return 0;
}

/* Runs the configured steps from the initial grid and returns this rank's time in ns
   (0 when something failed). The result is in sl->grid[steps % 2]. */
static uint64_t run(const config *cfg, slab *sl, exchange *ex, fsched_sched *sched,
                    rows_job *jobs[2], size_t njobs, int overlapped) {
    run_state rs;
    fsched_wait_group done;
    fsched_result r;
    uint64_t t0, t;
    int parity;

    fill_slab(sl);
    for (parity = 0; parity < 2; parity++)
        make_jobs(sl, cfg, ex, parity, overlapped, jobs[parity]);
    rs.cfg = cfg;
    rs.sl = sl;
    rs.ex = ex;
    rs.sched = sched;
    rs.jobs[0] = jobs[0];
    rs.jobs[1] = jobs[1];
    rs.njobs = njobs;
    rs.overlapped = overlapped;
    ex->polls = 0;
    if (overlapped && !check(fsched_set_poll(sched, poll_halos, ex, cfg->poll_ns),
                             "fsched_set_poll"))
        return 0;
    fsched_wait_group_init(&done);
    mpi_enter(ex);
    MPI_Barrier(MPI_COMM_WORLD);
    mpi_leave(ex);

    t0 = fsched_clock_ns();
    r = fsched_wait_group_spawn(&done, sched, run_steps, &rs);
    /* this thread is outside the scheduler: it sleeps here, the workers compute */
    fsched_wait_group_wait(&done);
    t = fsched_clock_ns() - t0;

    fsched_wait_group_destroy(&done);
    if (!check(r, "fsched_wait_group_spawn")) return 0;
    if (overlapped && !check(fsched_set_poll(sched, NULL, NULL, 0), "fsched_set_poll"))
        return 0;
    return t ? t : 1;
}

/* Gathers every slab's rows on rank 0 and compares them with the serial result (rank 0's
   `expected`, rows 1..ny of a whole grid). Every rank returns the count of cells that
   differ. */
static long long compare(const config *cfg, const slab *sl, exchange *ex, int rank,
                         int ranks, const double *expected, double *gathered) {
    const double *mine = sl->grid[cfg->steps % 2] + sl->stride;
    int *counts = NULL, *offsets = NULL, r;
    long long mismatch = 0;
    size_t i;

    if (rank == 0) {
        counts = (int *)malloc((size_t)ranks * sizeof *counts);
        offsets = (int *)malloc((size_t)ranks * sizeof *offsets);
        if (!counts || !offsets) MPI_Abort(MPI_COMM_WORLD, 1);
        for (r = 0; r < ranks; r++) {
            size_t first, rows = share(cfg->ny, ranks, r, &first);
            counts[r] = (int)(rows * sl->stride);
            offsets[r] = (int)((first - 1) * sl->stride);
        }
    }
    mpi_enter(ex);
    MPI_Gatherv(mine, (int)(sl->rows * sl->stride), MPI_DOUBLE, gathered, counts, offsets,
                MPI_DOUBLE, 0, MPI_COMM_WORLD);
    mpi_leave(ex);
    if (rank == 0) {
        for (i = 0; i < cfg->ny * sl->stride; i++)
            if (gathered[i] != expected[sl->stride + i] && !mismatch++)
                fprintf(stderr, "mismatch at row %zu, column %zu: %.17g, serially %.17g\n",
                        i / sl->stride + 1, i % sl->stride, gathered[i],
                        expected[sl->stride + i]);
        free(counts);
        free(offsets);
    }
    mpi_enter(ex);
    MPI_Bcast(&mismatch, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    mpi_leave(ex);
    return mismatch;
}

/* The slowest rank's time: the run is over when every rank has finished it. */
static uint64_t slowest(exchange *ex, uint64_t ns) {
    unsigned long long mine = ns, max = 0;
    mpi_enter(ex);
    MPI_Allreduce(&mine, &max, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    mpi_leave(ex);
    return (uint64_t)max;
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, int n) {
    qsort(v, (size_t)n, sizeof *v, compare_u64);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int parse_size(const char *text, size_t lo, size_t hi, size_t *out) {
    char *end;
    long long v;
    if (!text) return 0;
    v = strtoll(text, &end, 10);
    if (*end != '\0' || v < (long long)lo || v > (long long)hi) return 0;
    *out = (size_t)v;
    return 1;
}

static int parse_args(int argc, char **argv, config *cfg) {
    size_t v;
    int i;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--blocking")) cfg->blocking = 1;
        else if (!strcmp(a, "--bench")) cfg->bench = 1;
        else if (!strcmp(a, "--serialize")) cfg->serialize = 1;
        else if (!strcmp(a, "--nx") && parse_size(next, 1, 1 << 24, &cfg->nx)) i++;
        else if (!strcmp(a, "--ny") && parse_size(next, 1, 1 << 24, &cfg->ny)) i++;
        else if (!strcmp(a, "--steps") && parse_size(next, 1, 1000000, &cfg->steps)) i++;
        else if (!strcmp(a, "--block") && parse_size(next, 1, 1 << 24, &cfg->block)) i++;
        else if (!strcmp(a, "--workers") && parse_size(next, 1, 256, &v)) {
            cfg->workers = (uint32_t)v;
            i++;
        } else if (!strcmp(a, "--poll-us") && parse_size(next, 1, 1000000, &v)) {
            cfg->poll_ns = (uint64_t)v * 1000;
            i++;
        } else if (!strcmp(a, "--reps") && parse_size(next, 1, MAX_REPS, &v)) {
            cfg->reps = (int)v;
            i++;
        } else
            return 0;
    }
    return !(cfg->blocking && cfg->bench) &&
           (cfg->nx + 2) * (cfg->ny + 2) <= MAX_CELLS;
}

int main(int argc, char **argv) {
    config cfg = {.nx = 4096, .ny = 1024, .steps = 100, .block = 8, .workers = 1,
                  .poll_ns = 20000, .reps = 5};
    fsched_desc desc = {0};
    fsched_sched *sched;
    exchange ex;
    slab sl;
    rows_job *jobs[2];
    double *serial[2] = {NULL, NULL}, *gathered = NULL;
    uint64_t times[2][MAX_REPS];
    size_t njobs, i, step;
    long long mismatch = 0;
    int provided, rank, ranks, rep, kind, status = 0;

    /* The hook calls MPI on whichever worker runs it, the steps task on its own, and this
       thread between runs: that needs MPI_THREAD_MULTIPLE, or at least SERIALIZED with a
       lock around every call. */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (!parse_args(argc, argv, &cfg) || cfg.ny < 2 * (size_t)ranks) {
        if (rank == 0)
            fprintf(stderr,
                    "usage: %s [--blocking | --bench] [--nx columns] [--ny rows] "
                    "[--steps n] [--block rows] [--workers n] [--poll-us us] [--reps n] "
                    "[--serialize]\n(at least 2 rows a rank; at most %zu cells)\n",
                    argv[0], MAX_CELLS);
        MPI_Finalize();
        return 2;
    }
    if (provided < MPI_THREAD_SERIALIZED) {
        if (rank == 0)
            fprintf(stderr, "this MPI library takes calls from its main thread only\n");
        MPI_Finalize();
        return 1;
    }

    memset(&ex, 0, sizeof ex);
    pthread_mutex_init(&ex.lock, NULL);
    ex.serialize = cfg.serialize || provided < MPI_THREAD_MULTIPLE;
    for (i = 0; i < 4; i++) ex.req[i] = MPI_REQUEST_NULL;
    fsched_event_init(&ex.arrived[0], 0, 0);
    fsched_event_init(&ex.arrived[1], 0, 0);
    fsched_wait_group_init(&ex.step);

    sl.nx = cfg.nx;
    sl.ny = cfg.ny;
    sl.stride = cfg.nx + 2;
    sl.rows = share(cfg.ny, ranks, rank, &sl.first);
    sl.above = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    sl.below = rank < ranks - 1 ? rank + 1 : MPI_PROC_NULL;
    sl.grid[0] = (double *)malloc((sl.rows + 2) * sl.stride * sizeof(double));
    sl.grid[1] = (double *)malloc((sl.rows + 2) * sl.stride * sizeof(double));
    njobs = (sl.rows + cfg.block - 1) / cfg.block + 2;
    jobs[0] = (rows_job *)malloc(njobs * sizeof(rows_job));
    jobs[1] = (rows_job *)malloc(njobs * sizeof(rows_job));
    if (!sl.grid[0] || !sl.grid[1] || !jobs[0] || !jobs[1]) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    njobs = make_jobs(&sl, &cfg, &ex, 0, 0, jobs[0]);

    /* The serial reference on rank 0: the whole grid, the same steps. */
    if (rank == 0) {
        size_t cells = (cfg.ny + 2) * sl.stride, row, j;
        serial[0] = (double *)malloc(cells * sizeof(double));
        serial[1] = (double *)malloc(cells * sizeof(double));
        gathered = (double *)malloc(cfg.ny * sl.stride * sizeof(double));
        if (!serial[0] || !serial[1] || !gathered) {
            fprintf(stderr, "rank 0: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (row = 0; row < cfg.ny + 2; row++)
            for (j = 0; j < sl.stride; j++)
                serial[0][row * sl.stride + j] = serial[1][row * sl.stride + j] =
                    initial_value(row, j, cfg.ny, cfg.nx);
        for (step = 0; step < cfg.steps; step++)
            relax_rows(serial[step % 2], serial[(step + 1) % 2], sl.stride, cfg.nx, 1,
                       cfg.ny + 1);
    }

    /* A few workers a rank: ranks on one machine share its cores. */
    desc.workers = cfg.workers;
    if (!check(fsched_create(&desc, &sched), "fsched_create")) MPI_Abort(MPI_COMM_WORLD, 1);

    if (rank == 0)
        printf("%d rank%s x %u worker%s (%s%s), %zu x %zu cells, %zu steps, "
               "%zu rows a rank, %zu a task\n",
               ranks, ranks == 1 ? "" : "s", (unsigned)cfg.workers,
               cfg.workers == 1 ? "" : "s",
               provided == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE"
                                               : "MPI_THREAD_SERIALIZED",
               ex.serialize ? ", calls serialized" : "", cfg.nx, cfg.ny, cfg.steps, sl.rows,
               cfg.block);

    if (!cfg.bench) {
        uint64_t ns = run(&cfg, &sl, &ex, sched, jobs, njobs, !cfg.blocking);
        if (!ns) MPI_Abort(MPI_COMM_WORLD, 1);
        ns = slowest(&ex, ns);
        mismatch = compare(&cfg, &sl, &ex, rank, ranks, serial[cfg.steps % 2], gathered);
        if (rank == 0) {
            printf("%s: %.1f ms (%.3f ms a step)\n",
                   cfg.blocking ? "blocking (MPI_Waitall, then every row)"
                                : "overlapped (the poll hook, interior rows meanwhile)",
                   ns / 1e6, ns / 1e6 / (double)cfg.steps);
            if (!cfg.blocking)
                printf("the poll hook tested %.1f times a step on rank 0\n",
                       (double)ex.polls / (double)cfg.steps);
        }
    } else {
        /* Alternating, the first kind changing every rep, so that a drift in the
           machine's speed falls on both. */
        for (rep = 0; rep < cfg.reps && !mismatch; rep++) {
            for (kind = 0; kind < 2 && !mismatch; kind++) {
                int overlapped = (kind + rep) % 2;
                uint64_t ns = run(&cfg, &sl, &ex, sched, jobs, njobs, overlapped);
                if (!ns) MPI_Abort(MPI_COMM_WORLD, 1);
                times[overlapped][rep] = slowest(&ex, ns);
                mismatch = compare(&cfg, &sl, &ex, rank, ranks, serial[cfg.steps % 2],
                                   gathered);
            }
            if (rank == 0 && !mismatch)
                printf("rep %d: blocking %8.2f ms   overlapped %8.2f ms\n", rep + 1,
                       times[0][rep] / 1e6, times[1][rep] / 1e6);
        }
        if (rank == 0 && !mismatch) {
            uint64_t b = median(times[0], cfg.reps), o = median(times[1], cfg.reps);
            printf("median of %d: blocking %.2f ms, overlapped %.2f ms: %.2fx, %.2f ms "
                   "saved (%.1f us a step)\n",
                   cfg.reps, b / 1e6, o / 1e6, (double)b / (double)o,
                   ((double)b - (double)o) / 1e6,
                   ((double)b - (double)o) / 1e3 / (double)cfg.steps);
        }
    }

    if (!check(fsched_destroy(sched), "fsched_destroy")) status = 1;
    fsched_wait_group_destroy(&ex.step);
    fsched_event_destroy(&ex.arrived[0]);
    fsched_event_destroy(&ex.arrived[1]);
    pthread_mutex_destroy(&ex.lock);
    free(jobs[0]);
    free(jobs[1]);
    free(sl.grid[0]);
    free(sl.grid[1]);
    free(serial[0]);
    free(serial[1]);
    free(gathered);
    if (mismatch) {
        if (rank == 0)
            fprintf(stderr, "%lld cells differ from the serial computation\n", mismatch);
        status = 1;
    } else if (rank == 0) {
        printf("every cell matches the serial computation\n");
    }
    MPI_Finalize();
    return status;
}
