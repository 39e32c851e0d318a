/* An echo server with one task per connection, written as plain blocking code. A
   connection's task reads what its peer sent and writes it back; where a blocking program
   would sit in read(), write() or accept(), the task's non-blocking socket says EAGAIN and
   the task waits with fsched_wait_fd, which suspends only its fiber. The worker threads
   serve the other connections meanwhile: a few threads serve thousands of connections,
   each costing a task and the stack pages it touched. The tasks are movable
   (desc.movable_tasks): a connection woken while its worker is busy with others may go
   on on an idle worker, so that connections spread over the workers; its code therefore
   reads errno only in helpers that do not wait (see echo_read).

   Run without arguments, the program checks itself: it starts the server on a free port
   of 127.0.0.1, lets 200 client tasks (in the same scheduler) each send a few messages of
   various sizes, checks every byte that comes back, stops the server and prints a
   summary. With --serve PORT it serves 127.0.0.1:PORT until killed (try
   `nc 127.0.0.1 PORT`).

   bench/bench_echo.c includes this file, with ECHO_SERVER_NO_MAIN defined to leave out
   main, and measures the server against a thread per connection and Go.

   Build: cc -O2 -pthread examples/echo_server.c -o echo_server
   Run:   ./echo_server [--serve PORT] */
/* first: the implementation asks for the POSIX declarations (sockets included) that
   -std=c11 hides */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
/* fsched_wait_fd waits on POSIX descriptors only */
#if !defined(ECHO_SERVER_NO_MAIN)
int main(void) {
    printf("echo_server: needs POSIX sockets; skipped\n");
    return 77; /* the exit status by which Meson counts a test as skipped */
}
#endif
#else

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

#define ECHO_BUFFER 4096            /* bytes a connection reads at a time */
#define ECHO_STACK_SIZE (64u << 10) /* a connection's whole stack, as a thread's might be */

typedef struct echo_server {
    fsched_sched *sched;
    int listen_fd;
    int port;                 /* where it listens (the kernel's choice when asked for 0) */
    fsched_wait_group tasks;  /* the accept loop and every connection */
    atomic_int stopping;
    long accepted;            /* written by the accept loop; read after `tasks` ended */
    atomic_long echoed;       /* bytes, added by each connection as it ends */
} echo_server;

/* What a connection's task is given (copied into the task). */
typedef struct echo_connection_arg {
    echo_server *server;
    int fd;
} echo_connection_arg;

/* A scheduler for many connections: slab stacks are carved from mappings shared by many
   stacks, so that a connection holds only the stack pages its task touched. */
static fsched_result echo_sched_create(uint32_t workers, fsched_sched **out) {
    fsched_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.workers = workers; /* 0: one per CPU */
    desc.stack_kind = FSCHED_STACK_SLAB;
    desc.stack_size = ECHO_STACK_SIZE;
    desc.movable_tasks = 1; /* woken connections may go on on an idle worker */
    return fsched_create(&desc, out);
}

static int set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

/* Small messages go out at once instead of waiting for the peer's acknowledgement of
   the previous one (Nagle's algorithm), as in most servers. */
static void set_nodelay(int fd) {
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Waits until fd is ready for `events`: 0, or -1 when the wait ended otherwise (timed
   out, or cancelled by fsched_close_fd). Only this task's fiber waits. The waits below
   come right after EAGAIN or a short read, with one task per fd and direction: they
   pass FSCHED_EDGE, which spares a system call per wait. */
static int echo_wait(int fd, uint32_t events, uint64_t timeout_ns) {
    return fsched_wait_fd(fd, events, timeout_ns, NULL) == FSCHED_OK ? 0 : -1;
}

static int would_block(ssize_t err) {
    return err == EAGAIN || err == EWOULDBLOCK;
}

/* read(), write() and accept() for a movable task: the result, or -errno. errno is
   thread-local, and a movable task may resume on another thread after a wait, where a
   compiler may still use errno's address computed before the wait (glibc declares the
   function that returns it const): these helpers read it where no wait intervenes, and
   are not inlined into the code that waits. */
#define ECHO_NOINLINE __attribute__((noinline))

static ECHO_NOINLINE ssize_t echo_read(int fd, void *buf, size_t n) {
    ssize_t r = read(fd, buf, n);
    return r < 0 ? -(ssize_t)errno : r;
}

static ECHO_NOINLINE ssize_t echo_write(int fd, const void *p, size_t n) {
    ssize_t r = write(fd, p, n);
    return r < 0 ? -(ssize_t)errno : r;
}

static ECHO_NOINLINE int echo_accept(int listen_fd) {
    int fd = accept(listen_fd, NULL, NULL);
    return fd < 0 ? -errno : fd;
}

/* Writes all n bytes as a blocking write would: 0, or -1 on an error. */
static int write_all(int fd, const char *p, size_t n, uint64_t timeout_ns) {
    while (n > 0) {
        ssize_t w = echo_write(fd, p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w == -EINTR) {
            continue;
        } else if (w < 0 && would_block(-w)) {
            if (echo_wait(fd, FSCHED_WRITABLE | FSCHED_EDGE, timeout_ns) != 0) return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

/* One connection: echo until the peer hangs up. */
static void echo_connection(void *data) {
    const echo_connection_arg *arg = (const echo_connection_arg *)data;
    echo_server *srv = arg->server;
    int fd = arg->fd;
    char buf[ECHO_BUFFER];
    long echoed = 0;
    for (;;) {
        ssize_t n = echo_read(fd, buf, sizeof buf);
        if (n > 0) {
            if (write_all(fd, buf, (size_t)n, FSCHED_FOREVER) != 0) break;
            echoed += n;
            /* fewer bytes than asked: the socket had no more, which FSCHED_EDGE takes
               as EAGAIN (the read that would say so is saved; a hang-up behind the
               data still answers the wait) */
            if ((size_t)n < sizeof buf &&
                echo_wait(fd, FSCHED_READABLE | FSCHED_EDGE, FSCHED_FOREVER) != 0)
                break;
        } else if (n == 0) {
            break; /* the peer hung up */
        } else if (n == -EINTR) {
            continue;
        } else if (!would_block(-n) ||
                   echo_wait(fd, FSCHED_READABLE | FSCHED_EDGE, FSCHED_FOREVER) != 0) {
            break; /* reset by the peer, or the wait was cancelled */
        }
    }
    atomic_fetch_add(&srv->echoed, echoed);
    fsched_close_fd(fd); /* rather than close(): the scheduler's poller knows the fd */
    fsched_wait_group_done(&srv->tasks);
}

/* Accepts connections and starts a task for each, until the server stops. */
static void echo_accept_loop(void *data) {
    echo_server *srv = (echo_server *)data;
    while (!atomic_load(&srv->stopping)) {
        echo_connection_arg arg;
        int fd = echo_accept(srv->listen_fd);
        if (fd < 0) {
            if (would_block(-fd)) {
                /* cancelled when echo_server_stop closes the listening socket */
                if (echo_wait(srv->listen_fd, FSCHED_READABLE | FSCHED_EDGE, FSCHED_FOREVER) != 0)
                    break;
            } else if (fd == -EMFILE || fd == -ENFILE || fd == -ENOBUFS || fd == -ENOMEM) {
                fsched_sleep_for(10000000); /* out of resources: let connections end */
            } else if (fd != -EINTR && fd != -ECONNABORTED) {
                break; /* the socket was closed under us: the server stops */
            }
            continue;
        }
        if (set_nonblocking(fd) != 0) {
            close(fd);
            continue;
        }
        set_nodelay(fd);
        arg.server = srv;
        arg.fd = fd;
        fsched_wait_group_add(&srv->tasks, 1);
        if (fsched_spawn_copy(srv->sched, echo_connection, &arg, sizeof arg) != FSCHED_OK) {
            fsched_wait_group_done(&srv->tasks);
            close(fd);
            continue;
        }
        srv->accepted++;
    }
    fsched_wait_group_done(&srv->tasks);
}

/* Listens on 127.0.0.1:port (0: any free port, then found in srv->port) and starts the
   accept loop on s. 0, or -1 with a message. */
static int echo_server_start(echo_server *srv, fsched_sched *s, int port) {
    struct sockaddr_in addr;
    socklen_t len = sizeof addr;
    int one = 1;
    memset(srv, 0, sizeof *srv);
    srv->sched = s;
    atomic_init(&srv->stopping, 0);
    atomic_init(&srv->echoed, 0);
    /* a peer that hangs up must not end the process: writes fail with EPIPE instead */
    signal(SIGPIPE, SIG_IGN);
    srv->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    if (srv->listen_fd < 0) {
        perror("socket");
        return -1;
    }
    /* a restarted server binds its port again while old connections linger */
    (void)setsockopt(srv->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(srv->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(srv->listen_fd, 4096) != 0 || /* the kernel caps it at net.core.somaxconn */
        set_nonblocking(srv->listen_fd) != 0 ||
        getsockname(srv->listen_fd, (struct sockaddr *)&addr, &len) != 0) {
        perror("echo server");
        close(srv->listen_fd);
        return -1;
    }
    srv->port = ntohs(addr.sin_port);
    fsched_wait_group_init(&srv->tasks);
    fsched_wait_group_add(&srv->tasks, 1);
    if (fsched_spawn(s, echo_accept_loop, srv) != FSCHED_OK) {
        fprintf(stderr, "echo server: cannot start the accept loop\n");
        fsched_wait_group_destroy(&srv->tasks);
        close(srv->listen_fd);
        return -1;
    }
    return 0;
}

/* Stops accepting, then waits until every connection has ended (its peer hung up). */
static void echo_server_stop(echo_server *srv) {
    atomic_store(&srv->stopping, 1);
    fsched_close_fd(srv->listen_fd); /* ends the accept loop's wait */
    fsched_wait_group_wait(&srv->tasks);
    fsched_wait_group_destroy(&srv->tasks);
}

#if !defined(ECHO_SERVER_NO_MAIN)

#define CLIENTS 200
#define MESSAGES 5                       /* per client */
#define MAX_MESSAGE 6000                 /* bytes: larger ones take the server two reads */
#define CLIENT_TIMEOUT 10000000000ull    /* ns: a broken server fails the check, not hangs */

typedef struct echo_client {
    int id, port;
    long long sent;    /* bytes */
    const char *error; /* what went wrong, or NULL */
} echo_client;

/* Message m of client id: its length and content differ from client to client and from
   message to message, so that bytes from another connection or message would show. */
static size_t message_length(int id, int m) {
    return 1 + (size_t)(id * 131 + m * 977) % MAX_MESSAGE;
}

static void message_fill(char *p, size_t n, int id, int m) {
    size_t i;
    for (i = 0; i < n; i++) p[i] = (char)(id * 7 + m * 13 + (int)(i * 31 % 251));
}

/* Connects to 127.0.0.1:port as a blocking connect would: the fd, or -1. */
static int echo_connect(int port) {
    struct sockaddr_in addr;
    socklen_t len = sizeof(int);
    int fd = socket(AF_INET, SOCK_STREAM, 0), err = 0;
    if (fd < 0) return -1;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (set_nonblocking(fd) != 0) {
        close(fd);
        return -1;
    }
    set_nodelay(fd);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        /* in progress: the socket turns writable once connected or refused */
        if (errno != EINPROGRESS || echo_wait(fd, FSCHED_WRITABLE, CLIENT_TIMEOUT) != 0 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
            fsched_close_fd(fd);
            return -1;
        }
    }
    return fd;
}

/* A client: sends its messages one at a time and checks each echo. */
static void echo_client_run(void *data) {
    echo_client *c = (echo_client *)data;
    char out[MAX_MESSAGE], in[MAX_MESSAGE];
    int fd = echo_connect(c->port), m;
    if (fd < 0) {
        c->error = "cannot connect";
        return;
    }
    for (m = 0; m < MESSAGES && !c->error; m++) {
        size_t n = message_length(c->id, m), got = 0;
        message_fill(out, n, c->id, m);
        if (write_all(fd, out, n, CLIENT_TIMEOUT) != 0) {
            c->error = "write failed";
            break;
        }
        while (got < n) { /* the echo may come back in pieces */
            ssize_t r = echo_read(fd, in + got, n - got);
            if (r > 0) got += (size_t)r;
            else if (r == 0) c->error = "the server hung up";
            else if (r == -EINTR) continue;
            else if (!would_block(-r)) c->error = "read failed";
            else if (echo_wait(fd, FSCHED_READABLE | FSCHED_EDGE, CLIENT_TIMEOUT) != 0)
                c->error = "no echo within 10 s";
            if (c->error) break;
        }
        if (!c->error && memcmp(in, out, n) != 0) c->error = "the echo differs";
        c->sent += (long long)n;
    }
    fsched_close_fd(fd);
}

/* --serve PORT: until killed. */
static int serve(int port) {
    fsched_sched *sched;
    echo_server srv;
    fsched_result r = echo_sched_create(0, &sched);
    if (r != FSCHED_OK) {
        fprintf(stderr, "fsched_create: %s\n", fsched_result_string(r));
        return 1;
    }
    if (echo_server_start(&srv, sched, port) != 0) return 1;
    printf("echoing on 127.0.0.1:%d with %u workers\n", srv.port,
           (unsigned)fsched_worker_count(sched));
    fflush(stdout);
    fsched_wait_group_wait(&srv.tasks); /* returns only if accepting fails */
    return 1;
}

int main(int argc, char **argv) {
    static echo_client clients[CLIENTS];
    fsched_sched *sched;
    fsched_wait_group done;
    echo_server srv;
    fsched_result r;
    long long sent = 0;
    uint64_t t0, t1;
    int i, failed = 0;

    if (argc == 3 && strcmp(argv[1], "--serve") == 0) return serve(atoi(argv[2]));
    if (argc != 1) {
        fprintf(stderr, "usage: %s [--serve PORT]\n", argv[0]);
        return 2;
    }

    r = echo_sched_create(0, &sched);
    if (r != FSCHED_OK) {
        fprintf(stderr, "fsched_create: %s\n", fsched_result_string(r));
        return 1;
    }
    if (echo_server_start(&srv, sched, 0) != 0) return 1;

    /* The clients are tasks of the same scheduler, written the same way. */
    t0 = fsched_clock_ns();
    fsched_wait_group_init(&done);
    for (i = 0; i < CLIENTS; i++) {
        clients[i].id = i;
        clients[i].port = srv.port;
        r = fsched_wait_group_spawn(&done, sched, echo_client_run, &clients[i]);
        if (r != FSCHED_OK) {
            fprintf(stderr, "spawn: %s\n", fsched_result_string(r));
            return 1;
        }
    }
    fsched_wait_group_wait(&done); /* this thread is outside the scheduler: it blocks */
    fsched_wait_group_destroy(&done);
    t1 = fsched_clock_ns();

    /* Every client has hung up, so the connections end and the server stops. */
    echo_server_stop(&srv);
    fsched_destroy(sched);

    for (i = 0; i < CLIENTS; i++) {
        sent += clients[i].sent;
        if (clients[i].error) {
            if (failed++ < 5) fprintf(stderr, "client %d: %s\n", i, clients[i].error);
        }
    }
    printf("%d clients sent %d messages each (%lld bytes) to 127.0.0.1:%d in %.1f ms\n",
           CLIENTS, MESSAGES, sent, srv.port, (double)(t1 - t0) * 1e-6);
    printf("server: %ld connections accepted, %lld bytes echoed; ", srv.accepted,
           (long long)atomic_load(&srv.echoed));
    if (failed) printf("%d clients FAILED\n", failed);
    else if (srv.accepted != CLIENTS || atomic_load(&srv.echoed) != sent)
        printf("the counts DIFFER\n");
    else printf("every byte came back\n");
    return failed || srv.accepted != CLIENTS || atomic_load(&srv.echoed) != sent ? 1 : 0;
}

#endif /* !ECHO_SERVER_NO_MAIN */
#endif /* !_WIN32 */
