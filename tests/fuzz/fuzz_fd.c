/* Fuzzes the waits on the outside world: fsched_wait_fd on pipes, socket pairs and a
   regular file, from tasks, plain threads, the driving thread (bound or not) and the
   poll hook (which only looks); fsched_close_fd while waits are armed and fd numbers
   reused after it (a new pipe takes the number back); bogus fds (negative, closed) and
   events; pipes filled and drained; a poll hook that completes requests of a make-
   believe device, installed, replaced and removed (from the hook too) with odd
   intervals; timeouts from 0 to the largest; a destroy at any point, which must cancel
   the waits in flight. Built with FIBERSCHED_IO_POLL it fuzzes the poll() poller.

   An input whose first byte is FZ_EDGE_FORMAT drives FSCHED_EDGE waits too (any other
   is read as before, so that the inputs kept keep their meaning): edge waits on the
   slots mixed with plain ones, with and without the EAGAIN they promise (or the short
   read that stands for it, which may leave the peer's end unread); a socket pair
   every edge op shares, where two edge waits for one direction break the promise (they
   must end late, never hang); a number taken by a new file after fsched_close_fd, a
   plain close() or dup2(), while a dup keeps the old file's registration alive and
   the old file stirs (after fsched_close_fd an edge wait on the new, empty file must
   not return FSCHED_OK, and a read after one never sees the old file's byte); bogus
   fds and events with the flag, a scheduler's own fds, waits of more than a look from
   a poll hook. The sweep's period is shortened, so that its bound shows within the
   watchdog's limit.

   A wait that could only end by a write or a completion is ended by the rescuer (it
   writes a byte to every pipe, drains full ones and completes the device's requests)
   once some actor has waited for long, so that a hang is a bug the watchdog names. */
#define _GNU_SOURCE
#define FIBERSCHED_IMPLEMENTATION
#include "../../fibersched.h"
#include "fuzz.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/socket.h>

#define FZ_OPS_MAX 40
#define FZ_SLOTS 4
#define FZ_THREADS_MAX 6
#define FZ_RESCUE_MS 20
#define FZ_WAITS FZ_OPS_MAX
#define FZ_CLOSED_FD 900 /* a number no input opens (checked) */
#define FZ_EDGE_FORMAT 0xED /* first byte of an input that drives FSCHED_EDGE waits too */
#define FZ_VERIFY_NS (40 * FZ_MS) /* FIBERSCHED_FD_VERIFY_NS here: the sweep's bound */

enum { OP_OPEN, OP_WRITE, OP_FILL, OP_DRAIN, OP_CLOSE, OP_WAIT, OP_WAIT_BOGUS, OP_WAIT_FILE,
       OP_SUBMIT, OP_SET_POLL, OP_CLOSE_BOGUS, OP_YIELD, OP_PLAIN_REUSE, OP_DESTROY,
       OP_COUNT_LEVEL, /* the ops of inputs without FZ_EDGE_FORMAT */
       OP_WAIT_EDGE = OP_COUNT_LEVEL, OP_EDGE_SHARED, OP_EDGE_REUSE, OP_COUNT };
static const char *const op_names[OP_COUNT] = {
    "open a pipe", "write", "fill", "drain", "fsched_close_fd", "fsched_wait_fd",
    "fsched_wait_fd (bogus)", "fsched_wait_fd (file)", "device request", "fsched_set_poll",
    "fsched_close_fd (bogus)", "yield", "close and reuse", "fsched_destroy",
    "fsched_wait_fd (edge)", "fsched_wait_fd (edge, shared pair)",
    "fsched_wait_fd (edge, number reused)"};

enum { CTX_MAIN, CTX_TASK, CTX_THREAD, CTX_POLL, CTX_COUNT };

typedef struct fz_op {
    uint8_t code, ctx, slot, end, events, variant;
    uint32_t index;
    uint64_t t;
    int in_hook;
} fz_op;

typedef struct slot {
    int fd[2];          /* read end, write end; -1 when closed */
    int last[2];        /* the numbers they had */
    int socket;         /* a socket pair (both ends read and write) */
} slot;

/* A wait on a slot's fd under way, by the number it waits on: that number may name
   another file by the time the wait is armed (see wait_stale). */
typedef struct fd_wait {
    uint64_t since; /* 0: a free entry */
    int fd;
    int endless;    /* without a timeout */
    int plain;      /* outside every scheduler: in poll(), which fsched_close_fd does not end */
} fd_wait;

typedef struct request {
    fsched_event done;
    FZ_ATOMIC(int) refs;
    uint64_t due;
    struct request *next;
} request;

typedef struct world {
    fsched_sched *s;
    FZ_ATOMIC(int) destroyed;
    int single, failing, main_bound;
    fz_alloc_state alloc;
    pthread_mutex_t lock; /* the slots, the device */
    slot slots[FZ_SLOTS];
    fd_wait waits[FZ_WAITS];
    request *queue;
    int file_fd;
    int edge_format;  /* the input drives FSCHED_EDGE waits too */
    int shared[2];    /* a socket pair every edge op may wait on ([0]) or poke ([1]) */
    int own_fd;       /* one of the scheduler's own fds (its poller's), or -1 */
    FZ_ATOMIC(int) actors;
    FZ_ATOMIC(int) stop_rescuer;
    FZ_ATOMIC(uint64_t) waiting_since;
    FZ_ATOMIC(int) hook_installed;
    fz_op hook_ops[FZ_OPS_MAX];
    int hook_head, hook_tail;
    fz_thread threads[FZ_THREADS_MAX];
    int n_threads;
    fz_thread rescuer;
    fz_actor *driver;
} world;

static void run_op(world *w, const fz_op *op, int ctx);

static int sched_gone(const world *w) { return w->destroyed; }

static void nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    FZ_CHECK(flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0);
}

/* ---- slots and the waits on them ---- */

/* Under the lock: whether a wait without a timeout is under way on number fd (only one
   outside every scheduler, with `plain`). */
static int waited_endless(const world *w, int fd, int plain) {
    int k;
    for (k = 0; k < FZ_WAITS; k++)
        if (w->waits[k].since && w->waits[k].fd == fd && w->waits[k].endless &&
            (w->waits[k].plain || !plain))
            return 1;
    return 0;
}

/* Under the lock: whether a wait without a timeout names a number no slot holds. Its fd
   was closed by fsched_close_fd before the wait was armed (which the close cannot end):
   it waits on whatever file takes the number next, maybe only once it is there. */
static int wait_stale(const world *w) {
    int k, s, held;
    for (k = 0; k < FZ_WAITS; k++) {
        if (!w->waits[k].since || !w->waits[k].endless) continue;
        held = w->waits[k].fd == w->shared[0]; /* never closed */
        for (s = 0; s < FZ_SLOTS; s++)
            held |= w->slots[s].fd[0] == w->waits[k].fd || w->slots[s].fd[1] == w->waits[k].fd;
        if (!held) return 1;
    }
    return 0;
}

/* Opens slot k if it is closed: a pipe, or a socket pair. Under the lock. A wait that
   names a free number may be armed on the new fds: only a socket pair (both ends become
   readable and writable) can end it, and only numbers kept open can (a pipe's end closed
   again would drop the wait's registration without a word). */
static void slot_open(world *w, slot *sl, int socket) {
    int fds[2], k;
    if (sl->fd[0] >= 0 || sl->fd[1] >= 0) return;
    if (wait_stale(w)) socket = 1;
    if (socket ? socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0 : pipe(fds) != 0) return;
    for (k = 0; k < 2; k++) {
        nonblocking(fds[k]);
        FZ_CHECK(fds[k] < FZ_CLOSED_FD);
        sl->fd[k] = sl->last[k] = fds[k];
    }
    sl->socket = socket;
}

/* Under the lock: records a wait about to begin on fd; its entry, or -1. */
static int wait_add(world *w, int fd, uint64_t timeout, int plain) {
    int k;
    for (k = 0; k < FZ_WAITS; k++)
        if (!w->waits[k].since) {
            w->waits[k].since = fz_now();
            w->waits[k].fd = fd;
            w->waits[k].endless = fz_endless(timeout);
            w->waits[k].plain = plain;
            return k;
        }
    return -1;
}

static void wait_drop(world *w, int k) {
    pthread_mutex_lock(&w->lock);
    w->waits[k].since = 0;
    pthread_mutex_unlock(&w->lock);
}

static void put(int fd) {
    char c = 'x';
    ssize_t n = write(fd, &c, 1);
    (void)n;
}

static void drain(int fd) {
    char buf[4096];
    while (read(fd, buf, sizeof buf) > 0) {
    }
}

/* Keeps an edge wait's promise as a reader that asked for more than was there: reads
   until one read moves fewer bytes than it asked, which on a pipe or a stream socket
   stands for EAGAIN; data and the peer's end may come together, the end unread. */
static void read_short(int fd) {
    char buf[4096];
    while (read(fd, buf, sizeof buf) == (ssize_t)sizeof buf) {
    }
}

/* The promise of an edge wait, kept one way or the other. */
static void keep_promise(int fd, uint8_t variant) {
    if (variant & 0x10) read_short(fd);
    else drain(fd);
}

/* ---- waits ---- */

static void expect_fd_wait(world *w, fsched_result r, uint32_t events, uint32_t ready,
                           uint64_t t, const char *what) {
    if (fz_endless(t))
        FZ_EXPECT(r, what, FSCHED_OK, FSCHED_ERR_CANCELLED, FSCHED_ERR_OUT_OF_MEMORY,
                  FSCHED_ERR_INVALID_ARGUMENT);
    else
        FZ_EXPECT(r, what, FSCHED_OK, FSCHED_ERR_TIMEOUT, FSCHED_ERR_CANCELLED,
                  FSCHED_ERR_OUT_OF_MEMORY, FSCHED_ERR_INVALID_ARGUMENT);
    if (r == FSCHED_OK) FZ_CHECK(ready != 0 && (ready & ~events) == 0);
    if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
}

/* The timeout of a wait: the extremes, or 0 (a look) in a hook. */
static uint64_t wait_timeout(const world *w, const fz_op *op) {
    (void)w;
    return op->in_hook ? 0 : op->t;
}

/* A wait from a poll hook that would do more than look: refused (a wait on a closed
   number is refused for that first, and one begun while the scheduler closes cancelled). */
static void expect_hook_wait(world *w, fsched_result r) {
    FZ_EXPECT(r, "fsched_wait_fd from a poll hook", FSCHED_ERR_WRONG_STATE,
              FSCHED_ERR_INVALID_ARGUMENT, FSCHED_ERR_CANCELLED, FSCHED_ERR_OUT_OF_MEMORY);
    if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
}

/* `edge`: FSCHED_EDGE or 0. In a poll hook (not the ops a hook left, run by the driver
   at the end) it may wait for more than a look, and is refused. An edge wait on a read
   end (or a socket) may keep its promise first: it reads until EAGAIN, or a short read. */
static void op_wait(world *w, const fz_op *op, int ctx, uint32_t edge) {
    slot *sl = &w->slots[op->slot];
    uint32_t events = op->events % 3 + 1, ready = 0;
    uint64_t t = wait_timeout(w, op);
    int fd, k = -1, end = op->end & 1, plain = fsched_current() == NULL;
    int hook_waits = edge && ctx == CTX_POLL && (op->variant & 2);
    fsched_result r;
    pthread_mutex_lock(&w->lock);
    fd = sl->fd[end];
    if (fd < 0) { /* closed: the number it had, which another slot may have taken */
        fd = sl->last[end];
        if (fz_endless(t)) t = FZ_MS;
    }
    /* a read end is never writable, a pipe's write end never readable: only timed */
    if (!sl->socket && events != (end ? FSCHED_WRITABLE : FSCHED_READABLE) && fz_endless(t))
        t = FZ_MS;
    if (edge && (op->variant & 1) && sl->fd[end] >= 0 && (events & FSCHED_READABLE) &&
        (sl->socket || end == 0))
        keep_promise(fd, op->variant); /* EAGAIN, or a short read, since the last wait */
    if (fd >= 0 && !hook_waits) k = wait_add(w, fd, t, plain);
    pthread_mutex_unlock(&w->lock);
    if (hook_waits && fd >= 0) { /* a wait of more than a look, with the flag too */
        expect_hook_wait(w, fsched_wait_fd(fd, events | edge, op->t ? op->t : 1, &ready));
        return;
    }
    if (k < 0) return;
    if (!w->waiting_since) w->waiting_since = fz_now();
    r = fsched_wait_fd(fd, events | edge, t, &ready);
    wait_drop(w, k);
    expect_fd_wait(w, r, events, ready, t,
                   edge ? "fsched_wait_fd (FSCHED_EDGE)" : "fsched_wait_fd");
    if (r == FSCHED_ERR_CANCELLED && plain)
        FZ_CHECK(0); /* a plain thread's wait is not in a scheduler: nothing cancels it */
}

/* A wait on a scheduler's own fd (its epoll set or wake fd), with FSCHED_EDGE or not,
   by the driving thread, which alone destroys (so the fd is still the scheduler's):
   refused, as the header says. */
static void op_wait_own(world *w, const fz_op *op, int ctx) {
    uint32_t ready = 12345, ev = FSCHED_READABLE | (op->variant & 0x80 ? FSCHED_EDGE : 0u);
    fsched_result r;
    if (ctx != CTX_MAIN || op->in_hook || w->destroyed || w->own_fd < 0) return;
    r = fsched_wait_fd(w->own_fd, ev, op->t, &ready);
    FZ_EXPECT(r, "fsched_wait_fd on a scheduler's own fd", FSCHED_ERR_INVALID_ARGUMENT,
              FSCHED_ERR_OUT_OF_MEMORY);
    if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
    FZ_CHECK(ready == 12345);
    FZ_EXPECT(fsched_close_fd(w->own_fd), "fsched_close_fd on a scheduler's own fd",
              FSCHED_ERR_INVALID_ARGUMENT);
}

static void op_wait_bogus(world *w, const fz_op *op, int ctx) {
    static const int fds[] = {-1, INT_MIN, -1000, FZ_CLOSED_FD, FZ_CLOSED_FD + 1, INT_MAX,
                              65536};
    static const uint32_t events[] = {0, 4, 0xffffffffu, FSCHED_READABLE | 8, FSCHED_READABLE};
    int fd = fds[op->variant % 7];
    uint32_t ev = events[op->events % 5], ready = 12345;
    uint64_t t = wait_timeout(w, op);
    fsched_result r;
    if (w->edge_format) {
        if ((op->variant & 0x70) == 0x70) {
            op_wait_own(w, op, ctx);
            return;
        }
        if (op->variant & 0x80) ev |= FSCHED_EDGE;
        if (ctx == CTX_POLL && (op->variant & 0x08)) t = op->t; /* more than a look */
    }
    FZ_CHECK(fd < 0 || fcntl(fd, F_GETFD) == -1); /* not open */
    r = fsched_wait_fd(fd, ev, t, &ready);
    FZ_EXPECT(r, "fsched_wait_fd on a bad fd or events", FSCHED_ERR_INVALID_ARGUMENT,
              FSCHED_ERR_CANCELLED, FSCHED_ERR_OUT_OF_MEMORY);
    if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
    if (r == FSCHED_ERR_CANCELLED) FZ_CHECK(sched_gone(w) && fsched_current() != NULL);
    FZ_CHECK(ready == 12345);
}

/* A regular file or a character device: always ready, as poll() says. */
static void op_wait_file(world *w, const fz_op *op) {
    uint32_t events = op->events % 3 + 1, ready = 0;
    uint32_t edge = w->edge_format && (op->variant & 1) ? FSCHED_EDGE : 0u;
    fsched_result r = fsched_wait_fd(w->file_fd, events | edge, wait_timeout(w, op), &ready);
    FZ_EXPECT(r, "fsched_wait_fd on a regular file", FSCHED_OK, FSCHED_ERR_CANCELLED,
              FSCHED_ERR_OUT_OF_MEMORY);
    if (r == FSCHED_OK) FZ_CHECK(ready == events);
    if (r == FSCHED_ERR_CANCELLED) FZ_CHECK(sched_gone(w));
}

/* Not under a plain thread's wait without a timeout: fsched_close_fd does not end it (as
   the header says), and poll() sleeps on the closed file, looking at the number again
   only when that file stirs: a new file that took the number would leave it waiting for
   ever, nothing the rescuer does could end it. */
static void op_close(world *w, const fz_op *op) {
    slot *sl = &w->slots[op->slot];
    int end = op->end & 1, fd;
    pthread_mutex_lock(&w->lock);
    fd = sl->fd[end];
    if (fd >= 0 && !waited_endless(w, fd, 1)) {
        FZ_EXPECT(fsched_close_fd(fd), "fsched_close_fd", FSCHED_OK);
        sl->fd[end] = -1;
    }
    pthread_mutex_unlock(&w->lock);
}

static void op_close_bogus(world *w, const fz_op *op) {
    (void)w;
    FZ_EXPECT(fsched_close_fd(op->variant & 1 ? -1 : INT_MIN), "fsched_close_fd(negative)",
              FSCHED_ERR_INVALID_ARGUMENT);
    FZ_CHECK(fcntl(FZ_CLOSED_FD, F_GETFD) == -1);
    FZ_EXPECT(fsched_close_fd(FZ_CLOSED_FD), "fsched_close_fd(closed)", FSCHED_ERR_INVALID_ARGUMENT);
}

/* A number reused after a plain close() (or taken by dup2): the waits of the old file
   wait on, those on the new one see it. Not under a wait without a timeout on the number
   (whichever slot it came by): the kernel drops the old file's registration without a
   word, and such a wait would wait for ever (as the header says; fsched_close_fd is the
   way), nothing the rescuer does could end it. No pipe made for a moment while a wait
   names a free number (see slot_open). */
static void op_plain_reuse(world *w, const fz_op *op) {
    slot *sl = &w->slots[op->slot];
    int end = op->end & 1;
    pthread_mutex_lock(&w->lock);
    if (sl->fd[end] >= 0 && !waited_endless(w, sl->fd[end], 0)) {
        if (op->variant & 1) {
            int fds[2];
            if (!wait_stale(w) && pipe(fds) == 0) { /* the new pipe's read end takes the number */
                nonblocking(fds[0]);
                FZ_CHECK(dup2(fds[0], sl->fd[end]) == sl->fd[end]);
                close(fds[0]);
                close(fds[1]);
            }
        } else {
            close(sl->fd[end]);
            sl->fd[end] = -1;
            slot_open(w, sl, sl->socket); /* usually the same numbers again */
        }
    }
    pthread_mutex_unlock(&w->lock);
}

/* ---- FSCHED_EDGE: the shared pair, and numbers reused under edge waits ---- */

/* An edge wait on the socket pair every such op shares: its promise kept (read until
   EAGAIN, or a short read, first) or not, its peer written first or not; two of these at once for one
   direction break the promise. Whatever the rescuer's writes do, the sweep ends any wait
   left behind: the watchdog says when one hangs. */
static void op_edge_shared(world *w, const fz_op *op) {
    uint32_t events = op->events % 3 + 1, ready = 0;
    uint64_t t = wait_timeout(w, op);
    int k;
    fsched_result r;
    pthread_mutex_lock(&w->lock);
    if (op->variant & 1) keep_promise(w->shared[0], op->variant);
    if (op->variant & 2) put(w->shared[1]);
    if (op->variant & 4) drain(w->shared[1]); /* the peer's side: room to write */
    k = wait_add(w, w->shared[0], t, fsched_current() == NULL);
    pthread_mutex_unlock(&w->lock);
    if (k < 0) return;
    if (!w->waiting_since) w->waiting_since = fz_now();
    r = fsched_wait_fd(w->shared[0], events | FSCHED_EDGE, t, &ready);
    wait_drop(w, k);
    expect_fd_wait(w, r, events, ready, t, "fsched_wait_fd (FSCHED_EDGE, shared)");
    if (r == FSCHED_OK && (op->variant & 8)) { /* a level wait after it: the data is there */
        r = fsched_wait_fd(w->shared[0], ready, op->in_hook ? 0 : 2 * FZ_MS, &ready);
        FZ_EXPECT(r, "fsched_wait_fd (level, after an edge)", FSCHED_OK, FSCHED_ERR_TIMEOUT,
                  FSCHED_ERR_CANCELLED, FSCHED_ERR_OUT_OF_MEMORY);
    }
}

/* The byte read from fd after a wait, or 0 (EAGAIN, or the end): never the old file's. */
static char read_new(int fd) {
    char c = 0;
    ssize_t n = read(fd, &c, 1);
    if (n == 1) {
        if (c == 'o') fz_fail(__FILE__, __LINE__, "fd %d: a read after an edge wait on a "
                                                  "reused number gave the old file's byte", fd);
        return c;
    }
    return 0;
}

/* A pipe with the old file's byte waited on with FSCHED_EDGE (registered); its number
   then taken by a new, empty pipe (made first): after fsched_close_fd, a plain close(), or a
   dup2() over it, while a dup may keep the old file (and its registration) alive and the
   old file is written again. After fsched_close_fd the new file's first edge wait must
   not be answered (nothing is there: a stale event latched it); after a plain close
   or dup2 it may be, late or early (the header allows it). Then a byte on the new file
   answers an edge wait (in time: the sweep's bound) and a read gets it. Any context: a
   plain thread's wait is a poll(), a hook's a look. */
static void op_edge_reuse(world *w, const fz_op *op) {
    int a[2], b[2], keep = -1, n, how = op->variant % 3; /* fsched_close_fd, close, dup2 */
    uint64_t t = op->in_hook ? 0 : (op->t % (3 * FZ_MS)) + 1;
    fsched_result r;
    pthread_mutex_lock(&w->lock);
    /* no pipe while a wait names a free number (see slot_open) */
    if (wait_stale(w) || pipe(a) != 0) {
        pthread_mutex_unlock(&w->lock);
        return;
    }
    nonblocking(a[0]);
    nonblocking(a[1]);
    FZ_CHECK(write(a[1], "o", 1) == 1);
    if (op->variant & 4) keep = dup(a[0]);
    pthread_mutex_unlock(&w->lock);
    n = a[0];
    r = fsched_wait_fd(n, FSCHED_READABLE | FSCHED_EDGE, op->in_hook ? 0 : 2 * FZ_MS, NULL);
    FZ_EXPECT(r, "fsched_wait_fd (edge, the old file)", FSCHED_OK, FSCHED_ERR_CANCELLED,
              FSCHED_ERR_OUT_OF_MEMORY);
    pthread_mutex_lock(&w->lock); /* no other op makes an fd meanwhile */
    FZ_CHECK(pipe(b) == 0); /* first: a write end at the number would be closed next */
    if (how == 0) FZ_EXPECT(fsched_close_fd(n), "fsched_close_fd", FSCHED_OK);
    else if (how == 1) close(n);
    FZ_CHECK(dup2(b[0], n) == n);
    close(b[0]);
    nonblocking(n);
    /* the old file stirs: an event of its registration, if a dup kept it */
    FZ_CHECK(write(a[1], "o", 1) == 1 || keep < 0);
    pthread_mutex_unlock(&w->lock);
    r = fsched_wait_fd(n, FSCHED_READABLE | FSCHED_EDGE, t, NULL);
    FZ_EXPECT(r, "fsched_wait_fd (edge, a new empty file)", FSCHED_OK, FSCHED_ERR_TIMEOUT,
              FSCHED_ERR_CANCELLED, FSCHED_ERR_OUT_OF_MEMORY);
    if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
    if (r == FSCHED_OK && how == 0)
        fz_fail(__FILE__, __LINE__, "fd %d: an edge wait on the new, empty file after "
                                    "fsched_close_fd was answered", n);
    FZ_CHECK(read_new(n) == 0); /* empty: the promise for the next wait */
    put(b[1]);
    r = fsched_wait_fd(n, FSCHED_READABLE | FSCHED_EDGE, op->in_hook ? 0 : FSCHED_FOREVER,
                       NULL);
    FZ_EXPECT(r, "fsched_wait_fd (edge, a byte on the new file)", FSCHED_OK,
              FSCHED_ERR_CANCELLED, FSCHED_ERR_OUT_OF_MEMORY);
    if (r == FSCHED_OK) FZ_CHECK(read_new(n) == 'x');
    pthread_mutex_lock(&w->lock);
    FZ_EXPECT(fsched_close_fd(n), "fsched_close_fd", FSCHED_OK);
    close(b[1]);
    close(a[1]);
    if (keep >= 0) close(keep);
    pthread_mutex_unlock(&w->lock);
}

/* ---- the device: requests the poll hook completes ---- */

static void request_drop(request *q) {
    if (--q->refs == 0) {
        FZ_EXPECT(fsched_event_destroy(&q->done), "fsched_event_destroy", FSCHED_OK);
        free(q);
    }
}

/* Completes the requests that are due (all of them with `all`); whether some are left. */
static int device_complete(world *w, int all) {
    request *due = NULL, **p, *q;
    uint64_t now = fz_now();
    int left;
    pthread_mutex_lock(&w->lock);
    for (p = &w->queue; (q = *p) != NULL;) {
        if (all || q->due <= now) {
            *p = q->next;
            q->next = due;
            due = q;
        } else {
            p = &q->next;
        }
    }
    left = w->queue != NULL;
    pthread_mutex_unlock(&w->lock);
    while ((q = due) != NULL) {
        due = q->next;
        FZ_EXPECT(fsched_event_set(&q->done), "fsched_event_set", FSCHED_OK);
        request_drop(q);
    }
    return left;
}

static void op_submit(world *w, const fz_op *op) {
    request *q = (request *)calloc(1, sizeof *q);
    uint64_t t = op->in_hook ? 0 : op->t;
    fsched_result r;
    FZ_CHECK(q != NULL);
    FZ_EXPECT(fsched_event_init(&q->done, 0, 0), "fsched_event_init", FSCHED_OK);
    q->refs = 2;
    q->due = fz_now() + (op->variant % 4) * 200 * FZ_US;
    pthread_mutex_lock(&w->lock);
    q->next = w->queue;
    w->queue = q;
    pthread_mutex_unlock(&w->lock);
    if (!w->waiting_since) w->waiting_since = fz_now();
    r = fz_endless(t) ? fsched_event_wait(&q->done) : fsched_event_wait_for(&q->done, t);
    if (fz_endless(t)) FZ_EXPECT(r, "fsched_event_wait", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
    else FZ_EXPECT(r, "fsched_event_wait_for", FSCHED_OK, FSCHED_ERR_TIMEOUT,
                   FSCHED_ERR_OUT_OF_MEMORY);
    request_drop(q);
}

static int poll_hook(void *user) {
    world *w = (world *)user;
    int more = device_complete(w, 0);
    fz_op op;
    pthread_mutex_lock(&w->lock);
    if (w->hook_head == w->hook_tail) {
        pthread_mutex_unlock(&w->lock);
        return more;
    }
    op = w->hook_ops[w->hook_head++ % FZ_OPS_MAX];
    more = 1;
    pthread_mutex_unlock(&w->lock);
    op.in_hook = 1;
    run_op(w, &op, CTX_POLL);
    w->actors--;
    return more;
}

static void op_set_poll(world *w, const fz_op *op) {
    static const uint64_t intervals[] = {0, 1, 1000, 50 * FZ_US, FZ_MS, (uint64_t)1 << 40,
                                         UINT64_MAX - 1, UINT64_MAX};
    uint64_t interval = intervals[op->variant % 8];
    int install = !(op->events & 1);
    fsched_result r;
    r = fsched_set_poll(w->s, install ? poll_hook : NULL, w, interval);
    if (sched_gone(w)) FZ_EXPECT(r, "fsched_set_poll", FSCHED_OK, FSCHED_ERR_INVALID_ARGUMENT);
    else FZ_EXPECT(r, "fsched_set_poll", FSCHED_OK);
    if (r == FSCHED_OK) w->hook_installed = install;
}

/* ---- the rescuer ---- */

static void poke(world *w) {
    int k;
    pthread_mutex_lock(&w->lock);
    for (k = 0; k < FZ_SLOTS; k++) {
        slot *sl = &w->slots[k];
        /* drained before the writes: a drain after them took the byte a reader waited
           for, and no reader was left to ask for another rescue */
        if (sl->fd[0] >= 0 && (fz_now() & 1)) drain(sl->fd[0]); /* writers of full pipes */
        if (sl->fd[1] >= 0) put(sl->fd[1]);
        if (sl->socket && sl->fd[0] >= 0) put(sl->fd[0]);
    }
    if (w->shared[1] >= 0) {
        if (fz_now() & 1) drain(w->shared[1]); /* writers waiting for room */
        put(w->shared[1]);
    }
    pthread_mutex_unlock(&w->lock);
    device_complete(w, 1);
}

/* Whether a wait on a slot has been under way for long: a poke may leave it waiting
   (it drains a full pipe only now and then), and it asks for no other. */
static int slot_wait_old(world *w) {
    uint64_t now = fz_now();
    int k, old = 0;
    pthread_mutex_lock(&w->lock);
    for (k = 0; k < FZ_WAITS; k++)
        old |= w->waits[k].since && now - w->waits[k].since > FZ_RESCUE_MS * FZ_MS;
    pthread_mutex_unlock(&w->lock);
    return old;
}

static void *rescuer_main(void *p) {
    world *w = (world *)p;
    fz_actor *me = fz_actor_new();
    while (!w->stop_rescuer) {
        uint64_t since = w->waiting_since;
        fz_nap(2 * FZ_MS);
        if ((since && fz_now() - since > FZ_RESCUE_MS * FZ_MS) || slot_wait_old(w)) {
            fz_step(me, "rescuer: writing to the pipes", 0);
            w->waiting_since = 0;
            poke(w);
            fz_step_end(me);
        }
    }
    return NULL;
}

static void settle(world *w, const char *why) {
    fz_step(w->driver, why, 0);
    while (w->actors > 0) {
        w->waiting_since = 1;
        if (w->main_bound) { /* runs queued tasks: a yield even without memory for a timer */
            fsched_yield();
            fsched_sleep_for(100 * FZ_US);
        } else {
            fz_nap(100 * FZ_US);
        }
    }
    fz_step_end(w->driver);
}

static void destroy_sched(world *w, uint32_t index) {
    fsched_result r;
    if (w->destroyed) {
        FZ_EXPECT(fsched_destroy(w->s), "fsched_destroy twice", FSCHED_ERR_INVALID_ARGUMENT);
        return;
    }
    fz_step(w->driver, "fsched_destroy (draining)", index);
    w->destroyed = 1;
    w->waiting_since = 1;
    r = fsched_destroy(w->s);
    FZ_EXPECT(r, "fsched_destroy", FSCHED_OK);
    fz_step_end(w->driver);
    w->main_bound = 0;
    if (w->alloc.live != 0)
        fz_fail(__FILE__, __LINE__, "%llu bytes still allocated after fsched_destroy",
                (unsigned long long)w->alloc.live);
}

/* ---- contexts ---- */

typedef struct async_op {
    world *w;
    fz_op op;
} async_op;

static void task_op(void *p) {
    async_op *a = (async_op *)p;
    fz_actor *me = fz_actor_new();
    fz_step(me, op_names[a->op.code], a->op.index);
    run_op(a->w, &a->op, CTX_TASK);
    fz_step_end(me);
    a->w->actors--;
    free(a);
}

static void *thread_op(void *p) {
    async_op *a = (async_op *)p;
    fz_actor *me = fz_actor_new();
    fz_step(me, op_names[a->op.code], a->op.index);
    run_op(a->w, &a->op, CTX_THREAD);
    fz_step_end(me);
    a->w->actors--;
    free(a);
    return NULL;
}

static void launch(world *w, const fz_op *op) {
    async_op *a;
    fsched_result r;
    int ctx = op->ctx;
    if (w->destroyed && (ctx == CTX_TASK || ctx == CTX_POLL)) ctx = CTX_THREAD;
    if (ctx == CTX_THREAD && w->n_threads == FZ_THREADS_MAX) ctx = CTX_MAIN;
    if (ctx == CTX_MAIN) {
        fz_step(w->driver, op_names[op->code], op->index);
        run_op(w, op, CTX_MAIN);
        fz_step_end(w->driver);
        return;
    }
    w->actors++;
    if (ctx == CTX_POLL) {
        pthread_mutex_lock(&w->lock);
        w->hook_ops[w->hook_tail++ % FZ_OPS_MAX] = *op;
        pthread_mutex_unlock(&w->lock);
        return;
    }
    a = (async_op *)malloc(sizeof *a);
    FZ_CHECK(a != NULL);
    a->w = w;
    a->op = *op;
    if (ctx == CTX_THREAD) {
        FZ_CHECK(fz_thread_start(&w->threads[w->n_threads++], thread_op, a));
        return;
    }
    r = fsched_spawn(w->s, task_op, a);
    FZ_EXPECT(r, "fsched_spawn", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
    if (r == FSCHED_OK) return;
    FZ_CHECK(w->failing);
    w->actors--;
    free(a);
}

static void run_op(world *w, const fz_op *op, int ctx) {
    slot *sl = &w->slots[op->slot];
    switch (op->code) {
    case OP_OPEN:
        pthread_mutex_lock(&w->lock);
        slot_open(w, sl, op->variant & 1);
        pthread_mutex_unlock(&w->lock);
        break;
    case OP_WRITE:
    case OP_FILL:
    case OP_DRAIN:
        pthread_mutex_lock(&w->lock);
        if (op->code == OP_DRAIN && sl->fd[0] >= 0) drain(sl->fd[0]);
        else if (op->code == OP_WRITE && sl->fd[1] >= 0) put(sl->fd[1]);
        else if (op->code == OP_FILL && sl->fd[1] >= 0) {
            char buf[4096];
            memset(buf, 'f', sizeof buf);
            while (write(sl->fd[1], buf, sizeof buf) > 0) {
            }
        }
        pthread_mutex_unlock(&w->lock);
        break;
    case OP_CLOSE: op_close(w, op); break;
    case OP_WAIT: op_wait(w, op, ctx, 0); break;
    case OP_WAIT_EDGE: op_wait(w, op, ctx, FSCHED_EDGE); break;
    case OP_EDGE_SHARED: op_edge_shared(w, op); break;
    case OP_EDGE_REUSE: op_edge_reuse(w, op); break;
    case OP_WAIT_BOGUS: op_wait_bogus(w, op, ctx); break;
    case OP_WAIT_FILE: op_wait_file(w, op); break;
    case OP_SUBMIT:
        if (!op->in_hook) op_submit(w, op);
        break;
    case OP_SET_POLL: op_set_poll(w, op); break;
    case OP_CLOSE_BOGUS: op_close_bogus(w, op); break;
    case OP_YIELD:
        if (!op->in_hook) fsched_yield();
        break;
    case OP_PLAIN_REUSE: op_plain_reuse(w, op); break;
    default: break;
    }
}

static fz_op op_read(const world *w, fz_in *in, uint32_t index) {
    fz_op op;
    memset(&op, 0, sizeof op);
    op.code = (uint8_t)fz_below(in, w->edge_format ? OP_COUNT : OP_COUNT_LEVEL);
    op.ctx = (uint8_t)fz_below(in, CTX_COUNT);
    op.slot = (uint8_t)fz_below(in, FZ_SLOTS);
    op.end = fz_u8(in);
    op.events = op.end >> 1;
    op.variant = fz_u8(in);
    op.t = fz_timeout(in);
    op.index = index;
    return op;
}

static fsched_result create(world *w, fz_in *in) {
    fsched_desc d;
    fsched_allocator a;
    uint8_t shape = fz_u8(in);
    fsched_result r;
    memset(&d, 0, sizeof d);
    d.workers = shape % 4;
    d.single_threaded = (shape >> 2) % 4 == 0;
    if (d.single_threaded) d.workers = 0; /* else refused */
    d.stack_size = 64 * 1024;
    d.logger = fz_logger();
    fz_allocator_from(in, &w->alloc, &a);
    d.allocator = a;
    w->failing = w->alloc.mode != 0;
    w->single = d.single_threaded;
    fz_step(w->driver, "fsched_create", 0);
    r = fsched_create(&d, &w->s);
    fz_step_end(w->driver);
    FZ_EXPECT(r, "fsched_create", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
    if (r == FSCHED_ERR_OUT_OF_MEMORY) FZ_CHECK(w->failing);
    if (r == FSCHED_OK && (w->single || (shape >> 4) & 1)) {
        r = fsched_bind(w->s);
        FZ_EXPECT(r, "fsched_bind", FSCHED_OK);
        w->main_bound = 1;
    }
    return r;
}

/* The poller made before any slot opens (the library's own fds take their numbers
   first, so that no slot's stale number names one of them, which a wait is refused),
   by a wait that times out in a task. */
static void warm_up(void *p) {
    world *w = (world *)p;
    int fds[2];
    fsched_result r;
    FZ_CHECK(pipe(fds) == 0);
    r = fsched_wait_fd(fds[0], FSCHED_READABLE, 1000, NULL);
    FZ_EXPECT(r, "fsched_wait_fd (first)", FSCHED_ERR_TIMEOUT, FSCHED_ERR_OUT_OF_MEMORY,
              FSCHED_ERR_SYSTEM);
    if (r != FSCHED_ERR_TIMEOUT) FZ_CHECK(w->failing);
#if defined(FSCHED__IO_EPOLL)
    if (w->s->io) w->own_fd = w->s->io->epfd; /* read once it is made, by its task */
#else
    if (w->s->io) w->own_fd = w->s->io->wake_read;
#endif
    close(fds[0]);
    close(fds[1]);
    w->actors--;
}

static void drive(world *w, fz_in *in) {
    uint32_t i;
    fsched_result r;
    w->actors++;
    r = fsched_spawn(w->s, warm_up, w);
    FZ_EXPECT(r, "fsched_spawn", FSCHED_OK, FSCHED_ERR_OUT_OF_MEMORY);
    if (r != FSCHED_OK) {
        w->actors--;
        return;
    }
    settle(w, "the first fd wait");
    for (i = 1; i <= FZ_OPS_MAX && !fz_done(in); i++) {
        fz_op op = op_read(w, in, i);
        if (op.code == OP_DESTROY) {
            if (!w->destroyed && w->main_bound && !w->single && (op.variant & 1)) {
                FZ_EXPECT(fsched_unbind(), "fsched_unbind", FSCHED_OK);
                w->main_bound = 0;
            }
            destroy_sched(w, i);
        } else {
            launch(w, &op);
        }
    }
}

static void finish(world *w) {
    int k;
    if (!w->destroyed) {
        fz_step(w->driver, "fsched_set_poll(NULL)", 0);
        FZ_EXPECT(fsched_set_poll(w->s, NULL, NULL, 0), "fsched_set_poll(NULL)", FSCHED_OK);
        fz_step_end(w->driver);
    }
    for (;;) { /* what no hook will run now */
        fz_op op;
        pthread_mutex_lock(&w->lock);
        if (w->hook_head == w->hook_tail) {
            pthread_mutex_unlock(&w->lock);
            break;
        }
        op = w->hook_ops[w->hook_head++ % FZ_OPS_MAX];
        pthread_mutex_unlock(&w->lock);
        op.in_hook = 1;
        run_op(w, &op, CTX_MAIN);
        w->actors--;
    }
    if (!w->single || w->main_bound || w->destroyed)
        settle(w, "waiting for the operations' tasks and threads");
    destroy_sched(w, 0);
    settle(w, "waiting for the operations' threads");
    for (k = 0; k < w->n_threads; k++) fz_thread_join(&w->threads[k]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_in in = {data, size, 0};
    world *w = (world *)calloc(1, sizeof *w);
    int k;
    FZ_CHECK(w != NULL);
    fz_input_begin();
    signal(SIGPIPE, SIG_IGN); /* writes to a pipe whose reader closed fail with EPIPE */
    w->driver = fz_actor_new();
    pthread_mutex_init(&w->lock, NULL);
    for (k = 0; k < FZ_SLOTS; k++)
        w->slots[k].fd[0] = w->slots[k].fd[1] = w->slots[k].last[0] = w->slots[k].last[1] = -1;
    w->file_fd = open("/dev/null", O_RDWR);
    FZ_CHECK(w->file_fd >= 0);
    w->own_fd = -1;
    w->shared[0] = w->shared[1] = -1;
    if (size && data[0] == FZ_EDGE_FORMAT) {
        w->edge_format = 1;
        in.i = 1;
        FZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, w->shared) == 0);
        nonblocking(w->shared[0]);
        nonblocking(w->shared[1]);
    }
#if defined(FSCHED__IO_EPOLL)
    /* the sweep's bound, within the watchdog's limit (relaxed: a setting) */
    __atomic_store_n(&fsched__fd_verify_ns, FZ_VERIFY_NS, __ATOMIC_RELAXED);
#endif
    if (create(w, &in) == FSCHED_OK) {
        FZ_CHECK(fz_thread_start(&w->rescuer, rescuer_main, w));
        drive(w, &in);
        finish(w);
        w->stop_rescuer = 1;
        fz_thread_join(&w->rescuer);
    }
    device_complete(w, 1);
    for (k = 0; k < FZ_SLOTS; k++) {
        if (w->slots[k].fd[0] >= 0) FZ_EXPECT(fsched_close_fd(w->slots[k].fd[0]), "fsched_close_fd", FSCHED_OK);
        if (w->slots[k].fd[1] >= 0) FZ_EXPECT(fsched_close_fd(w->slots[k].fd[1]), "fsched_close_fd", FSCHED_OK);
    }
    close(w->file_fd);
    if (w->shared[0] >= 0) {
        close(w->shared[0]);
        close(w->shared[1]);
    }
    pthread_mutex_destroy(&w->lock);
    free(w);
    return 0;
}
