/* Echo servers: N connections to 127.0.0.1 (1,000 and 10,000 by default) each make M
   request/response round trips of a 64-byte message, one message in flight per
   connection (M: about 200,000 messages per run in all; --quick: 40,000, on 100 and 500
   connections). Servers, side by side in one run:

   fibersched                  examples/echo_server.c, included here: a task per
                               connection on non-blocking sockets, waiting in
                               fsched_wait_fd; 64 KiB slab stacks
   thread per connection       blocking sockets, a detached thread per connection with a
                               64 KiB stack, the same buffer size
   Go                          a goroutine per connection (bench_go.go echo, GOMAXPROCS =
                               workers), when Go was found at configure time

   Every server runs in a fresh process (this program started again with --server=, or
   the Go program); the client is a child of this process (fork), C, epoll-driven, on one
   thread. The client first opens the N connections (a few hundred connects in flight at
   a time) and makes one round trip on each; then it makes the timed M round trips per
   connection, all connections at once. Each message's content depends on its connection
   and round, and every byte of every echo is checked; a wrong or missing echo ends the
   program with an error. Reported per server and connection count, median of the
   repetitions: messages per second (timed phase), the server's resident memory per
   connection (VmRSS growth from before the first connect until every connection has
   made its first round trip, divided by N), the kernel stacks per connection (growth of
   KernelStack in /proc/meminfo over the same span: a thread's costs the kernel's memory,
   which VmRSS leaves out), the server's CPU time per message (timed phase, from
   /proc/PID/stat: 10 ms ticks) and its busiest thread's share of that time (from
   /proc/PID/task: how evenly the work spread over the threads; "-" for more than 64
   threads). Each repetition starts the servers in rotating order. Targets: fibersched
   serves at least 1.1x Go's messages per second at every connection count, at the
   largest with less resident memory per connection than a thread per connection, and
   with more than one worker its busiest thread takes at most 1.2x an even share of its
   CPU time (60% of it with two workers).
   Linux only (epoll, /proc). Raises RLIMIT_NOFILE to what 10,000 connections need (the
   hard limit too when run as root).
   Usage: bench_echo [--quick] [--reps=N] [--conns=N] [--rounds=M] [--workers=N] */
#define ECHO_SERVER_NO_MAIN
#include "../examples/echo_server.c"
#include "bench_util.h"

#include <dirent.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/resource.h>

#define MSG 64          /* bytes per message */
#define IN_FLIGHT 256   /* connects the client has outstanding at a time */
#define CLIENT_WAIT_MS 10000 /* no progress for this long: the server is broken */

/* ---- the servers in this program, each run in a process of its own ---- */

static void block_sigterm(sigset_t *set) {
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    /* before any thread starts, so that all of them inherit it and sigwait takes it */
    pthread_sigmask(SIG_BLOCK, set, NULL);
}

/* Prints "port P", serves until SIGTERM, stops cleanly: exit status 0. */
static int server_fibersched(int workers) {
    fsched_sched *s;
    echo_server srv;
    sigset_t set;
    int sig;
    block_sigterm(&set);
    if (echo_sched_create((uint32_t)workers, &s) != FSCHED_OK) bench_fail("fsched_create");
    if (echo_server_start(&srv, s, 0) != 0) bench_fail("echo_server_start");
    printf("port %d\n", srv.port);
    fflush(stdout);
    sigwait(&set, &sig);
    echo_server_stop(&srv);
    if (fsched_destroy(s) != FSCHED_OK) bench_fail("fsched_destroy");
    return 0;
}

static struct {
    int listen_fd;
    atomic_int stopping;
    pthread_mutex_t lock;
    pthread_cond_t ended; /* signalled when `live` drops to 0 */
    long live;            /* connection threads running */
} threads_srv = {-1, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

static void *thread_connection(void *arg) {
    int fd = (int)(intptr_t)arg;
    char buf[ECHO_BUFFER];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf), w = 0;
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        while (w < n) {
            ssize_t k = write(fd, buf + w, (size_t)(n - w));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break;
            w += k;
        }
        if (w < n) break;
    }
    close(fd);
    pthread_mutex_lock(&threads_srv.lock);
    if (--threads_srv.live == 0) pthread_cond_signal(&threads_srv.ended);
    pthread_mutex_unlock(&threads_srv.lock);
    return NULL;
}

static void *thread_acceptor(void *arg) {
    pthread_attr_t attr;
    (void)arg;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10); /* small, so that 10,000 of them fit */
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (;;) {
        pthread_t t;
        int fd = accept(threads_srv.listen_fd, NULL, NULL), e;
        if (fd < 0) {
            if (atomic_load(&threads_srv.stopping)) break;
            if (errno == EINTR || errno == ECONNABORTED) continue;
            bench_fail("accept: %s", strerror(errno));
        }
        set_nodelay(fd);
        pthread_mutex_lock(&threads_srv.lock);
        threads_srv.live++;
        pthread_mutex_unlock(&threads_srv.lock);
        e = pthread_create(&t, &attr, thread_connection, (void *)(intptr_t)fd);
        if (e != 0) bench_fail("pthread_create: %s", strerror(e));
    }
    pthread_attr_destroy(&attr);
    return NULL;
}

static int server_threads(void) {
    struct sockaddr_in addr;
    socklen_t len = sizeof addr;
    pthread_t acceptor;
    sigset_t set;
    int sig, one = 1;
    block_sigterm(&set);
    signal(SIGPIPE, SIG_IGN);
    threads_srv.listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)setsockopt(threads_srv.listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (threads_srv.listen_fd < 0 ||
        bind(threads_srv.listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(threads_srv.listen_fd, 4096) != 0 ||
        getsockname(threads_srv.listen_fd, (struct sockaddr *)&addr, &len) != 0)
        bench_fail("thread server: %s", strerror(errno));
    if (pthread_create(&acceptor, NULL, thread_acceptor, NULL) != 0)
        bench_fail("pthread_create");
    printf("port %d\n", ntohs(addr.sin_port));
    fflush(stdout);
    sigwait(&set, &sig);
    atomic_store(&threads_srv.stopping, 1);
    shutdown(threads_srv.listen_fd, SHUT_RDWR); /* wakes the accept (Linux) */
    pthread_join(acceptor, NULL);
    close(threads_srv.listen_fd);
    pthread_mutex_lock(&threads_srv.lock);
    while (threads_srv.live > 0) pthread_cond_wait(&threads_srv.ended, &threads_srv.lock);
    pthread_mutex_unlock(&threads_srv.lock);
    return 0;
}

/* ---- the client: a child process, one thread, epoll ---- */

enum { CONNECTING, ECHOING, IDLE };

typedef struct client_conn {
    int fd, state;
    uint32_t round; /* of the message in flight */
    uint32_t got;   /* bytes of its echo received */
    unsigned char in[MSG];
} client_conn;

/* Ends the client with a message: the parent then fails the run. */
static void client_fail(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2), noreturn))
#endif
    ;
static void client_fail(const char *fmt, ...) {
    va_list ap;
    fputs("bench_echo client: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    _exit(1);
}

/* Message `round` of connection i: its bytes depend on both. */
static void message_make(unsigned char *p, long i, uint32_t round) {
    int k;
    for (k = 0; k < MSG; k++) p[k] = (unsigned char)(i * 131 + round * 29 + (uint32_t)k * 7);
}

static void client_send(client_conn *c, long i) {
    unsigned char msg[MSG];
    ssize_t w;
    message_make(msg, i, c->round);
    c->got = 0;
    /* a socket with at most one small message in flight has room for the next one */
    do w = write(c->fd, msg, MSG);
    while (w < 0 && errno == EINTR);
    if (w != MSG) client_fail("connection %ld: write: %s", i, w < 0 ? strerror(errno) : "short");
}

/* Reads what there is of connection i's echo: 1 once it is complete and checked. */
static int client_receive(client_conn *c, long i) {
    unsigned char want[MSG];
    ssize_t n = read(c->fd, c->in + c->got, MSG - c->got);
    if (n < 0 && (errno == EINTR || would_block(errno))) return 0;
    if (n <= 0) client_fail("connection %ld: %s", i, n < 0 ? strerror(errno) : "server hung up");
    c->got += (uint32_t)n;
    if (c->got < MSG) return 0;
    message_make(want, i, c->round);
    if (memcmp(want, c->in, MSG) != 0) client_fail("connection %ld: %s", i, "wrong echo");
    return 1;
}

static int client_wait(int ep, struct epoll_event *ev, int max) {
    int n;
    do n = epoll_wait(ep, ev, max, CLIENT_WAIT_MS);
    while (n < 0 && errno == EINTR);
    if (n <= 0) client_fail("epoll_wait: %s", n < 0 ? strerror(errno) : "no progress for 10 s");
    return n;
}

/* Opens the connections and makes one round trip on each, reports "ready" (a byte on
   `report`), waits for a byte on `go`, makes `rounds` more on each, reports the seconds
   they took (a double) and exits. */
static void client_main(int port, long conns, long rounds, int report, int go) {
    struct sockaddr_in addr;
    struct epoll_event ev[512], e;
    client_conn *c = (client_conn *)calloc((size_t)conns, sizeof *c);
    long next = 0, pending = 0, ready = 0, done = 0, i;
    int ep = epoll_create1(0), k, n;
    double t0, t1;
    char byte = 'r';
    if (!c || ep < 0) client_fail("out of memory");
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

    while (ready < conns) {
        for (; next < conns && pending < IN_FLIGHT; next++, pending++) {
            c[next].fd = socket(AF_INET, SOCK_STREAM, 0);
            if (c[next].fd < 0) client_fail("socket %ld: %s", next, strerror(errno));
            set_nonblocking(c[next].fd);
            set_nodelay(c[next].fd);
            if (connect(c[next].fd, (struct sockaddr *)&addr, sizeof addr) != 0 &&
                errno != EINPROGRESS)
                client_fail("connect %ld: %s", next, strerror(errno));
            e.events = EPOLLOUT | EPOLLIN;
            e.data.u64 = (uint64_t)next;
            if (epoll_ctl(ep, EPOLL_CTL_ADD, c[next].fd, &e) != 0)
                client_fail("epoll_ctl %ld: %s", next, strerror(errno));
        }
        n = client_wait(ep, ev, 512);
        for (k = 0; k < n; k++) {
            client_conn *cc = &c[ev[k].data.u64];
            i = (long)ev[k].data.u64;
            if (cc->state == CONNECTING) {
                int err = 0;
                socklen_t len = sizeof err;
                if (getsockopt(cc->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
                    client_fail("connect %ld: %s", i, strerror(err));
                e.events = EPOLLIN;
                e.data.u64 = (uint64_t)i;
                epoll_ctl(ep, EPOLL_CTL_MOD, cc->fd, &e);
                cc->state = ECHOING;
                client_send(cc, i);
            } else if (cc->state == ECHOING && client_receive(cc, i)) {
                cc->state = IDLE;
                pending--;
                ready++;
            }
        }
    }
    if (write(report, &byte, 1) != 1 || read(go, &byte, 1) != 1) _exit(1);

    t0 = bench_now();
    for (i = 0; i < conns; i++) {
        c[i].round = 1;
        client_send(&c[i], i);
    }
    while (done < conns) {
        n = client_wait(ep, ev, 512);
        for (k = 0; k < n; k++) {
            client_conn *cc = &c[ev[k].data.u64];
            i = (long)ev[k].data.u64;
            if (!client_receive(cc, i)) continue;
            if (cc->round == (uint32_t)rounds) done++;
            else {
                cc->round++;
                client_send(cc, i);
            }
        }
    }
    t1 = bench_now();
    t1 -= t0;
    if (write(report, &t1, sizeof t1) != (ssize_t)sizeof t1) _exit(1);
    _exit(0); /* closes every connection: the server's end of each sees end of file */
}

/* ---- the parent: servers in fresh processes, a client per run ---- */

/* A /proc/meminfo or /proc/PID/status line's value in bytes ("Name:  123 kB"), or 0. */
static long proc_kb(const char *path, const char *name) {
    char line[256];
    size_t n = strlen(name);
    long kb = 0;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            kb = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return kb * 1024;
}

static long server_rss(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    return proc_kb(path, "VmRSS");
}

/* The CPU time in a /proc stat file (a process's: all its threads; or a thread's), in
   clock ticks; 0 when it cannot be read. */
static unsigned long stat_ticks(const char *path) {
    char buf[1024];
    unsigned long utime = 0, stime = 0;
    const char *p;
    size_t n;
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    p = strrchr(buf, ')'); /* after the command name, which may hold spaces */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime,
                     &stime) != 2)
        return 0;
    return utime + stime;
}

/* The CPU time the process has used (all its threads), in seconds. */
static double server_cpu(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    return (double)stat_ticks(path) / (double)sysconf(_SC_CLK_TCK);
}

/* The CPU ticks of each thread of a process (at most THREADS_SEEN of them), by thread id. */
#define THREADS_SEEN 64
typedef struct thread_ticks {
    int n;
    long tid[THREADS_SEEN];
    unsigned long ticks[THREADS_SEEN];
} thread_ticks;

static void server_thread_ticks(pid_t pid, thread_ticks *out) {
    char path[96];
    struct dirent *e;
    DIR *d;
    out->n = 0;
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    if (!(d = opendir(path))) return;
    while ((e = readdir(d)) != NULL && out->n < THREADS_SEEN) {
        long tid = strtol(e->d_name, NULL, 10);
        if (tid <= 0) continue;
        snprintf(path, sizeof path, "/proc/%d/task/%ld/stat", (int)pid, tid);
        out->tid[out->n] = tid;
        out->ticks[out->n++] = stat_ticks(path);
    }
    closedir(d);
}

/* The busiest thread's share of the CPU time the threads used between two looks, in
   percent (0: none used, or more threads than were looked at). */
static double busiest_share(const thread_ticks *before, const thread_ticks *after) {
    unsigned long total = 0, most = 0;
    int i, j;
    if (after->n >= THREADS_SEEN) return 0;
    for (i = 0; i < after->n; i++) {
        unsigned long used = after->ticks[i];
        for (j = 0; j < before->n; j++)
            if (before->tid[j] == after->tid[i]) used -= before->ticks[j];
        total += used;
        if (used > most) most = used;
    }
    return total ? 100.0 * (double)most / (double)total : 0;
}

typedef struct echo_candidate {
    const char *name;
    char *argv[8];
    double rate[BENCH_MAX_REPS], rss[BENCH_MAX_REPS], kstack[BENCH_MAX_REPS],
        cpu[BENCH_MAX_REPS], busiest[BENCH_MAX_REPS];
} echo_candidate;

static void read_all(int fd, void *p, size_t n, const char *what) {
    ssize_t r;
    do r = read(fd, p, n);
    while (r < 0 && errno == EINTR);
    if (r != (ssize_t)n) bench_fail("%s: the client failed", what);
}

/* One run: the candidate's server in a fresh process, the client in a child of this one;
   records repetition `rep`. */
static void candidate_run(echo_candidate *c, long conns, long rounds, int rep) {
    int report[2], go[2], port, status;
    char ready;
    long rss0, rss1, ks0, ks1;
    double cpu0, cpu1, seconds;
    thread_ticks threads0, threads1;
    pid_t server, client;
    FILE *out = bench_child_start(c->argv, &server);
    if (fscanf(out, " port %d", &port) != 1) bench_fail("%s: no port from %s", c->name, c->argv[0]);
    rss0 = server_rss(server);
    ks0 = proc_kb("/proc/meminfo", "KernelStack");
    if (pipe(report) != 0 || pipe(go) != 0) bench_fail("pipe failed");
    fflush(stdout);
    client = fork();
    if (client < 0) bench_fail("fork failed");
    if (client == 0) {
        fclose(out);
        close(report[0]);
        close(go[1]);
        client_main(port, conns, rounds, report[1], go[0]);
    }
    close(report[1]);
    close(go[0]);

    read_all(report[0], &ready, 1, c->name); /* every connection open, one echo each */
    rss1 = server_rss(server);
    ks1 = proc_kb("/proc/meminfo", "KernelStack");
    server_thread_ticks(server, &threads0);
    cpu0 = server_cpu(server);
    if (write(go[1], "g", 1) != 1) bench_fail("%s: the client failed", c->name);
    read_all(report[0], &seconds, sizeof seconds, c->name);
    cpu1 = server_cpu(server);
    server_thread_ticks(server, &threads1);
    close(report[0]);
    close(go[1]);
    if (waitpid(client, &status, 0) != client || !WIFEXITED(status) || WEXITSTATUS(status))
        bench_fail("%s: the client failed", c->name);

    kill(server, SIGTERM); /* the connections have ended: it stops cleanly */
    if (!bench_child_end(out, server)) bench_fail("%s: %s failed", c->name, c->argv[0]);
    c->rate[rep] = (double)conns * (double)rounds / seconds;
    c->rss[rep] = (double)(rss1 - rss0) / (double)conns;
    c->kstack[rep] = (double)(ks1 - ks0) / (double)conns;
    c->cpu[rep] = (cpu1 - cpu0) * 1e6 / ((double)conns * (double)rounds);
    c->busiest[rep] = busiest_share(&threads0, &threads1);
}

/* Descriptors for `conns` connections in each process, raising the limits as far as
   allowed (the hard one only as root). */
static void raise_fd_limit(long conns) {
    struct rlimit rl;
    rlim_t want = (rlim_t)conns + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) bench_fail("getrlimit failed");
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
        struct rlimit hard = {want, want};
        if (setrlimit(RLIMIT_NOFILE, &hard) == 0) rl = hard;
    }
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
        bench_fail("%ld connections need %ld descriptors per process; the hard limit is %ld "
                   "(ulimit -Hn, or run as root)",
                   conns, (long)want, (long)rl.rlim_max);
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) bench_fail("setrlimit failed");
}

int main(int argc, char **argv) {
    static char workers_arg[32], buffer_arg[32];
    static const char *const server_names[] = {"fibersched", "threads"};
    echo_candidate c[3];
    int quick = bench_quick(argc, argv);
    int reps = bench_reps(argc, argv, quick ? 1 : 5);
    long one_conns = bench_option(argc, argv, "--conns=", 0);
    long rounds_opt = bench_option(argc, argv, "--rounds=", 0);
    int workers = (int)bench_option(argc, argv, "--workers=", bench_cpu_count());
    const char *server = NULL;
    long configs[2] = {1000, 10000};
    int nconfigs = 2, nc = 0, i, r, k;
    double vs_go[2] = {0, 0}; /* fibersched's messages per second over Go's, per count */
    double busiest[2] = {0, 0}; /* fibersched's busiest thread's share of its CPU, per count */
    echo_candidate *fs = &c[0], *th = &c[1], *go = NULL;

    for (i = 1; i < argc; i++)
        if (strncmp(argv[i], "--server=", 9) == 0) server = argv[i] + 9;
    if (workers < 1) bench_fail("--workers must be at least 1");
    if (server && strcmp(server, "fibersched") == 0) return server_fibersched(workers);
    if (server && strcmp(server, "threads") == 0) return server_threads();
    if (server) bench_fail("--server=%s: no such server", server);
    if (quick) { /* a smoke test that fits the default limits (1,024 fds, a container's
                    thread count) of any machine */
        configs[0] = 100;
        configs[1] = 500;
    }
    if (one_conns > 0) {
        configs[0] = one_conns;
        nconfigs = 1;
    }

    signal(SIGPIPE, SIG_IGN); /* a client that died fails the run, with a message */
    raise_fd_limit(configs[nconfigs - 1]);
    snprintf(workers_arg, sizeof workers_arg, "--workers=%d", workers);
    snprintf(buffer_arg, sizeof buffer_arg, "--buffer=%d", ECHO_BUFFER);
    memset(c, 0, sizeof c);
    for (i = 0; i < 2; i++, nc++) {
        static char server_arg[2][32];
        snprintf(server_arg[i], sizeof server_arg[i], "--server=%s", server_names[i]);
        c[nc].name = i == 0 ? "fibersched" : "thread per connection";
        c[nc].argv[0] = argv[0];
        c[nc].argv[1] = server_arg[i];
        c[nc].argv[2] = workers_arg;
    }
#if defined(BENCH_GO)
    if (access(BENCH_GO, X_OK) == 0) {
        go = &c[nc];
        c[nc].name = "Go: goroutine per connection";
        c[nc].argv[0] = (char *)BENCH_GO; /* bench_go.go */
        c[nc].argv[1] = (char *)"echo";
        c[nc].argv[2] = workers_arg;
        c[nc++].argv[3] = buffer_arg;
    }
#endif

    printf("echo servers on 127.0.0.1: N connections each make M round trips of a %d-byte "
           "message, one in flight per connection; client: one thread (epoll) in another "
           "process; %d worker(s); median of %d repetitions, each server in a fresh process\n\n",
           MSG, workers, reps);
    printf("| %11s | %-28s | %5s | %12s | %8s | %10s | %14s | %13s | %13s |\n", "connections",
           "server", "M", "msgs/s", "vs Go", "RSS B/conn", "kstack B/conn", "CPU us/msg",
           "busiest CPU %");
    printf("|-------------|------------------------------|-------|--------------|----------|"
           "------------|----------------|---------------|---------------|\n");
    fflush(stdout);
    for (k = 0; k < nconfigs; k++) {
        long conns = configs[k];
        /* about 200,000 messages per run (40,000 with --quick), at least 4 per connection */
        long rounds = rounds_opt > 0 ? rounds_opt : (quick ? 40000 : 200000) / conns;
        if (rounds < 4) rounds = 4;
        for (r = 0; r < reps; r++)
            for (i = 0; i < nc; i++) {
                bench_sleep_ms(100); /* the last server's exit settles */
                candidate_run(&c[(i + r) % nc], conns, rounds, r);
            }
        for (i = 0; i < nc; i++) {
            c[i].rate[0] = bench_median(c[i].rate, reps);
            c[i].rss[0] = bench_median(c[i].rss, reps);
            c[i].kstack[0] = bench_median(c[i].kstack, reps);
            c[i].cpu[0] = bench_median(c[i].cpu, reps);
            c[i].busiest[0] = bench_median(c[i].busiest, reps);
        }
        for (i = 0; i < nc; i++) {
            char ratio[32], share[32];
            if (go && &c[i] == fs) vs_go[k] = c[i].rate[0] / go->rate[0];
            if (&c[i] == fs) busiest[k] = c[i].busiest[0];
            if (go) snprintf(ratio, sizeof ratio, "%.2fx", c[i].rate[0] / go->rate[0]);
            else snprintf(ratio, sizeof ratio, "-");
            if (c[i].busiest[0] > 0) snprintf(share, sizeof share, "%.0f", c[i].busiest[0]);
            else snprintf(share, sizeof share, "-"); /* too many threads to look at */
            printf("| %11ld | %-28s | %5ld | %12.0f | %8s | %10.0f | %14.0f | %13.2f | %13s |\n",
                   conns, c[i].name, rounds, c[i].rate[0], ratio, c[i].rss[0], c[i].kstack[0],
                   c[i].cpu[0], share);
        }
        fflush(stdout);
    }
    printf("\n");
    if (!go) printf("note: Go: not measured (Go not found at configure time)\n");
    bench_quick_note(quick);
    /* messages per second at every connection count; memory at the last (largest) */
    for (k = 0; go && k < nconfigs; k++) {
        char what[96];
        snprintf(what, sizeof what, "fibersched / Go, messages per second, %ld connections",
                 configs[k]);
        bench_target(what, vs_go[k], ">=", 1.1, "x");
    }
    bench_target("fibersched / thread per connection, RSS per connection",
                 fs->rss[0] / th->rss[0], "<=", 1, "x");
    /* balanced: no worker does much more than its share of the server's work */
    for (k = 0; workers > 1 && k < nconfigs; k++) {
        char what[96];
        snprintf(what, sizeof what, "fibersched, busiest thread's share of its CPU, %ld connections",
                 configs[k]);
        bench_target(what, busiest[k], "<=", 120.0 / workers, "%");
    }
    return 0;
}
