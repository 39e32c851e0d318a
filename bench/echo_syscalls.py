#!/usr/bin/env python3
"""System calls per message of an echo server, by name, counted with strace.

Starts a server that prints "port P" and echoes what each connection sends (the servers
bench_echo compares: `bench_echo --server=fibersched --workers=N`, or
`bench_go echo --workers=N --buffer=4096`), opens --conns connections and makes one round
trip of a 64-byte message on each (so that accepts, first reads and registrations fall
outside the count). Then, twice, it attaches `strace -f -c` to every thread of the
server, makes round trips (one message in flight per connection, as bench_echo's client
does) and detaches: about --rounds/4 round trips per connection the first time, --rounds
the second, counted over all connections, so that every connection stays busy until the
count is reached (with a count per connection, those done early sit idle while the
others finish, and fibersched's sweep asks about their fds again). Each call's count per
message is the difference of the two spans' counts over the difference of their
messages: what happens once per span (the idle moments while the tracer attaches)
cancels out, as far as the spans match; a small negative count is that noise.

Tracing slows each call of the server by tens of microseconds, and the client is this
script (one thread, epoll), slower than bench_echo's: the server sees other batches than
under bench_echo, so the calls that serve a batch (epoll_wait, futex, sched_yield,
nanosleep) and the reads that find the next message already there vary from run to run
and with the machine's load; the calls made per message (write, the read that gets it,
epoll_ctl) do not. Compare the servers in one run, on an idle machine.

    python3 bench/echo_syscalls.py [--conns=1000] [--rounds=100] [--workers=2] \\
        BUILD/bench/bench_echo BUILD/bench/bench_go

Each argument is a server's program: bench_echo runs its fibersched server, bench_go its
Go one. Needs Linux, strace, and the right to trace one's own children (ptrace_scope 0
or 1: the server is this script's child). Prints, per server, every call made meanwhile
with its count per message, and the total.
"""
import argparse
import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time

MSG = 64


def server_command(path, workers):
    name = os.path.basename(path)
    if "bench_go" in name:
        return "Go", [path, "echo", "--workers=%d" % workers, "--buffer=4096"]
    return "fibersched", [path, "--server=fibersched", "--workers=%d" % workers]


def message(conn, rnd):
    return bytes(((conn * 31 + rnd * 7 + k) & 0xFF) for k in range(MSG))


class Client:
    """conns connections, each with one message in flight while it runs."""

    def __init__(self, port, conns):
        self.ep = select.epoll()
        self.socks = []
        for i in range(conns):
            s = socket.create_connection(("127.0.0.1", port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.setblocking(False)
            self.socks.append(s)
            self.ep.register(s.fileno(), select.EPOLLIN)
        self.by_fd = {s.fileno(): i for i, s in enumerate(self.socks)}
        self.sent = [0] * conns  # messages each connection sent so far

    def run(self, messages):
        """Round trips on every connection at once until `messages` echoes came back,
        then those in flight: every connection stays busy to the end (one that finished
        early would sit idle, which is not what a message costs). Checks each echo;
        returns the echoes."""
        conns = len(self.socks)
        got = [b""] * conns
        echoed = in_flight = 0
        for i, s in enumerate(self.socks):
            s.sendall(message(i, self.sent[i]))
            in_flight += 1
        while in_flight:
            events = self.ep.poll(60.0)
            if not events:
                sys.exit("echo_syscalls: no echo for 60 s")
            for fd, _ in events:
                i = self.by_fd[fd]
                s = self.socks[i]
                try:
                    data = s.recv(4096)
                except BlockingIOError:
                    continue
                if not data:
                    sys.exit("echo_syscalls: the server hung up")
                got[i] += data
                if len(got[i]) < MSG:
                    continue
                if got[i] != message(i, self.sent[i]):
                    sys.exit("echo_syscalls: a wrong echo on connection %d" % i)
                got[i] = b""
                self.sent[i] += 1
                echoed += 1
                if echoed + in_flight - 1 < messages:
                    s.sendall(message(i, self.sent[i]))
                else:
                    in_flight -= 1
        return echoed

    def close(self):
        for s in self.socks:
            s.close()
        self.ep.close()


def all_traced(pid):
    """Whether every thread of pid has a tracer."""
    try:
        tids = os.listdir("/proc/%d/task" % pid)
        for tid in tids:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                if re.search(r"^TracerPid:\s+0$", f.read(), re.M):
                    return False
        return True
    except OSError:
        return False


def parse_summary(text):
    """{syscall: calls} from strace -c's table."""
    calls = {}
    for line in text.splitlines():
        f = line.split()
        # % time, seconds, usecs/call, calls, [errors,] syscall
        if len(f) >= 5 and re.match(r"^[0-9.]+$", f[0]) and f[-1] != "total":
            try:
                calls[f[-1]] = int(f[3])
            except ValueError:
                pass
    return calls


def traced_run(server, client, messages):
    """{syscall: calls} of the server, and the messages echoed, while the client makes
    about `messages` round trips over all connections."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        tracer = subprocess.Popen(["strace", "-f", "-c", "-o", out.name, "-p", str(server.pid)],
                                  stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while not all_traced(server.pid):
            if time.time() > deadline:
                tracer.kill()
                sys.exit("echo_syscalls: strace did not attach (ptrace allowed?)")
            time.sleep(0.05)
        time.sleep(0.05)  # the tracer's own setup settles (idle longer, and the sweep asks again)
        echoed = client.run(messages)
        tracer.send_signal(signal.SIGINT)  # detaches and writes the summary
        tracer.wait()
        return parse_summary(open(out.name).read()), echoed


def measure(path, conns, rounds, workers):
    name, cmd = server_command(path, workers)
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    m = re.match(r"\s*port (\d+)", line)
    if not m:
        server.kill()
        sys.exit("echo_syscalls: %s printed no port" % cmd[0])
    client = Client(int(m.group(1)), conns)
    client.run(conns)  # every connection accepted and echoing
    t0 = time.time()
    few, few_echoed = traced_run(server, client, conns * max(1, rounds // 4))
    many, many_echoed = traced_run(server, client, conns * rounds)
    seconds = time.time() - t0
    calls = {sc: many.get(sc, 0) - few.get(sc, 0) for sc in set(few) | set(many)}
    client.close()
    server.send_signal(signal.SIGTERM)
    server.wait()
    return name, calls, many_echoed - few_echoed, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conns", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("servers", nargs="+")
    a = ap.parse_args()
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = a.conns + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    for path in a.servers:
        name, calls, messages, seconds = measure(path, a.conns, a.rounds, a.workers)
        total = sum(calls.values())
        print("%s: %d connections, %d workers: traced about %d and %d round trips per "
              "connection (%.1f s); the difference, %d messages:" %
              (name, a.conns, a.workers, max(1, a.rounds // 4), a.rounds, seconds, messages))
        for sc, n in sorted(calls.items(), key=lambda kv: -kv[1]):
            print("  %-16s %7.4f per message  (%d calls)" % (sc, n / messages, n))
        print("  %-16s %7.3f per message\n" % ("total", total / messages))


if __name__ == "__main__":
    main()
