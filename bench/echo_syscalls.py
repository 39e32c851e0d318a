#!/usr/bin/env python3
"""System calls per message of an echo server, by name, counted with strace.

Starts a server that prints "port P" and echoes what each connection sends (the servers
bench_echo compares: `bench_echo --server=fibersched --workers=N`, or
`bench_go echo --workers=N --buffer=4096`), opens --conns connections and makes one round
trip of a 64-byte message on each (so that accepts, first reads and registrations fall
outside the count), then twice attaches `strace -f -c` to every thread of the server,
makes round trips on every connection (one message in flight per connection, as
bench_echo's client does) and detaches: --rounds/4 round trips the first time, --rounds
the second. Each system call's count per message is the difference of the two counts
over the difference of the messages: what the server does once per traced span (while
the tracer attaches, the connections sit idle and fibersched's sweep asks once more
about each of their fds) cancels out, as far as the two spans match: a small negative
count (epoll_ctl, thread starts) is that noise. Tracing slows every call of the server
by tens of microseconds, which changes its batches (and how often a read after an echo
finds the next message already there): compare the servers in one run, on an idle
machine. The client is this script (one thread,
epoll), slower than bench_echo's: the server sees smaller batches, so figures for
calls that serve a batch (epoll_wait, futex) are upper bounds of what bench_echo's load
gives; the calls made per message (read, write, epoll_ctl) are the same.

    python3 bench/echo_syscalls.py [--conns=1000] [--rounds=40] [--workers=2] \\
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
    """conns connections, each with one message in flight."""

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

    def rounds(self, first, count):
        """Round trips first .. first+count-1 on every connection; checks each echo."""
        conns = len(self.socks)
        got = [b""] * conns
        rnd = [first] * conns
        done = 0
        for i, s in enumerate(self.socks):
            s.sendall(message(i, first))
        while done < conns:
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
                if got[i] != message(i, rnd[i]):
                    sys.exit("echo_syscalls: a wrong echo on connection %d" % i)
                got[i] = b""
                rnd[i] += 1
                if rnd[i] == first + count:
                    done += 1
                else:
                    s.sendall(message(i, rnd[i]))

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


def traced_rounds(server, client, first, count):
    """{syscall: calls} of the server while the client makes `count` round trips on
    every connection."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        tracer = subprocess.Popen(["strace", "-f", "-c", "-o", out.name, "-p", str(server.pid)],
                                  stderr=subprocess.DEVNULL)
        deadline = time.time() + 10
        while not all_traced(server.pid):
            if time.time() > deadline:
                tracer.kill()
                sys.exit("echo_syscalls: strace did not attach (ptrace allowed?)")
            time.sleep(0.05)
        time.sleep(0.2)  # the tracer's own setup settles
        client.rounds(first, count)
        tracer.send_signal(signal.SIGINT)  # detaches and writes the summary
        tracer.wait()
        return parse_summary(open(out.name).read())


def measure(path, conns, rounds, workers):
    name, cmd = server_command(path, workers)
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = server.stdout.readline()
    m = re.match(r"\s*port (\d+)", line)
    if not m:
        server.kill()
        sys.exit("echo_syscalls: %s printed no port" % cmd[0])
    client = Client(int(m.group(1)), conns)
    client.rounds(0, 1)  # every connection accepted and echoing
    short = max(1, rounds // 4)
    t0 = time.time()
    few = traced_rounds(server, client, 1, short)
    many = traced_rounds(server, client, 1 + short, rounds)
    seconds = time.time() - t0
    calls = {sc: many.get(sc, 0) - few.get(sc, 0) for sc in set(few) | set(many)}
    client.close()
    server.send_signal(signal.SIGTERM)
    server.wait()
    return name, calls, conns * (rounds - short), seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conns", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=40)
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
        print("%s: %d connections, %d workers: traced %d and %d round trips per connection "
              "(%.1f s); the difference, %d messages:" % (name, a.conns, a.workers,
                                                          max(1, a.rounds // 4), a.rounds,
                                                          seconds, messages))
        for sc, n in sorted(calls.items(), key=lambda kv: -kv[1]):
            print("  %-16s %7.4f per message  (%d calls)" % (sc, n / messages, n))
        print("  %-16s %7.3f per message\n" % ("total", total / messages))


if __name__ == "__main__":
    main()
