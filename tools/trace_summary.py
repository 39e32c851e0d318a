#!/usr/bin/env python3
"""Summarizes a fibersched trace (FIBERSCHED_TRACE, fsched_trace_write_json) as text,
and optionally draws it as an SVG timeline.

    python3 tools/trace_summary.py trace.json [--svg out.svg] [--top N] [--exe PROGRAM]
    python3 tools/trace_summary.py --self-test

The trace is Chrome trace-event JSON: each scheduler slot is a process ("worker 0", ...)
and each of its fibers a thread; spans ("X") are tasks, stolen join halves, graph tasks
(by name), pipeline advances (by node label), linear-pipeline stages, blocked fibers and
worker sleeps; steals are instants ("i").

Per worker the summary gives:
  busy     time some fiber of the worker ran work (any task-like span, less the time that
           fiber was blocked inside it)
  stolen   the part of busy spent in join halves taken from another worker
  blocked  time at least one of the worker's fibers waited (overlaps busy: the worker
           runs other fibers meanwhile)
  sleep    time the worker thread slept for lack of work
  idle     the rest of the span: neither busy nor asleep (looking for work, or events
           the trace dropped)
Times are in milliseconds from the first event. Python standard library only (and, with
--exe, binutils' nm).

Tasks spawned without a name and join halves are recorded by their function's address.
Given the program that wrote the trace (--exe, not stripped), they are named by the
function's symbol: the trace's code anchor says where fsched_trace_write_json was loaded,
which gives the offset to the addresses in the program's symbol table.
"""

import argparse
import bisect
import json
import subprocess
import sys
from xml.sax.saxutils import escape

WORK_KINDS = ("task", "join", "graph task", "advance", "stage")
KINDS = WORK_KINDS + ("blocked", "sleep", "steal")
# colour-blind-friendly palette, one per kind
COLOURS = {
    "task": "#4e79a7",
    "join": "#f28e2b",
    "graph task": "#59a14f",
    "advance": "#b07aa1",
    "stage": "#76b7b2",
    "blocked": "#e15759",
    "sleep": "#bab0ac",
    "steal": "#222222",
}
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"


class Event:
    __slots__ = ("name", "kind", "pid", "tid", "start", "dur", "fn")

    def __init__(self, name, kind, pid, tid, start, dur, fn=None):
        self.name, self.kind, self.pid, self.tid = name, kind, pid, tid
        self.start, self.dur = start, dur  # integer nanoseconds
        self.fn = fn  # the function's address, for tasks and join halves

    @property
    def end(self):
        return self.start + self.dur


def kind_of(ev):
    """The recorded kind, from what the writer puts in each: steals are the only
    instants, and each span kind has its own argument (or none)."""
    if ev.get("ph") == "i":
        return "steal"
    args = ev.get("args") or {}
    name = ev.get("name", "")
    if "fn" in args:
        return "join" if name == "join" else "task"
    if "status" in args:
        return "graph task"
    if "stage" in args:
        return "stage"
    if name in ("blocked", "sleep"):
        return name
    return "advance"


def to_ns(us):
    # the writer prints microseconds with three decimals: exact in integer nanoseconds
    return int(round(float(us) * 1000))


class Trace:
    def __init__(self, doc):
        raw = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
        if not isinstance(raw, list):
            raise ValueError("no traceEvents list")
        self.process_names = {}
        self.events = []
        self.skipped = 0
        self.anchor = None  # (symbol, address) of the writer's code
        for ev in raw:
            if not isinstance(ev, dict):
                self.skipped += 1
                continue
            ph = ev.get("ph")
            try:
                if ph == "M":
                    if ev.get("name") == "process_name":
                        self.process_names[int(ev["pid"])] = str(ev["args"]["name"])
                    elif ev.get("name") == "code_anchor":
                        self.anchor = (str(ev["args"]["symbol"]), int(ev["args"]["address"], 16))
                    continue
                if ph not in ("X", "i"):
                    self.skipped += 1
                    continue
                dur = to_ns(ev["dur"]) if ph == "X" else 0
                fn = (ev.get("args") or {}).get("fn")
                self.events.append(Event(str(ev.get("name", "")), kind_of(ev), int(ev["pid"]),
                                         int(ev.get("tid", 0)), to_ns(ev["ts"]), max(dur, 0),
                                         int(fn, 16) if fn else None))
            except (KeyError, TypeError, ValueError):
                self.skipped += 1  # e.g. a line cut short: summarize what is whole
        self.events.sort(key=lambda e: (e.pid, e.tid, e.start, -e.dur, e.kind, e.name))
        self.pids = sorted(set(self.process_names) | {e.pid for e in self.events})

    def name_functions(self, symbols):
        """Names unnamed tasks and join halves by the symbol of their function, from the
        program's symbols (sorted (address, name) pairs, see parse_nm). Returns how many
        were named; 0 without a code anchor or when the anchor's symbol is not there."""
        if not self.anchor:
            return 0
        anchor = [a for a, name in symbols if name == self.anchor[0]]
        if not anchor:
            return 0
        offset = self.anchor[1] - anchor[0]
        addresses = [a for a, _ in symbols]
        named = 0
        for e in self.events:
            if e.fn is None or e.name not in ("task", "join"):
                continue
            i = bisect.bisect_right(addresses, e.fn - offset) - 1
            if i >= 0:
                e.name = symbols[i][1] if e.name == "task" else "join " + symbols[i][1]
                named += 1
        return named

    def worker_name(self, pid):
        return self.process_names.get(pid, "slot %d" % (pid - 1))

    def span(self):
        if not self.events:
            return 0, 0
        return min(e.start for e in self.events), max(e.end for e in self.events)


def parse_nm(text):
    """Function symbols from `nm` output (static ones included): sorted (address, name)."""
    symbols = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("t", "T", "w", "W"):
            try:
                symbols.append((int(parts[0], 16), parts[2]))
            except ValueError:
                pass
    symbols.sort()
    return symbols


def read_symbols(program):
    out = subprocess.run(["nm", "--defined-only", program], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, check=True)
    return parse_nm(out.stdout)


# ---- interval arithmetic on sorted, disjoint [start, end) lists ----

def union(intervals):
    out = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def subtract(a, b):
    """a minus b; both unions."""
    out, j = [], 0
    for s, e in a:
        while j < len(b) and b[j][1] <= s:
            j += 1
        k, cur = j, s
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def length(intervals):
    return sum(e - s for s, e in intervals)


def summarize(trace):
    """Per worker: busy, stolen, blocked, sleep, idle (ns), tasks, steals."""
    t0, t1 = trace.span()
    rows = []
    for pid in trace.pids:
        evs = [e for e in trace.events if e.pid == pid]
        running, stolen = [], []
        for tid in sorted({e.tid for e in evs}):
            on = [e for e in evs if e.tid == tid]
            blocked = union((e.start, e.end) for e in on if e.kind == "blocked")
            running += subtract(union((e.start, e.end) for e in on if e.kind in WORK_KINDS),
                                blocked)
            stolen += subtract(union((e.start, e.end) for e in on if e.kind == "join"), blocked)
        busy = length(union(running))
        sleep_iv = subtract(union((e.start, e.end) for e in evs if e.kind == "sleep"),
                            union(running))
        sleep = length(sleep_iv)
        rows.append({
            "pid": pid,
            "name": trace.worker_name(pid),
            "busy": busy,
            "stolen": length(union(stolen)),
            "blocked": length(union((e.start, e.end) for e in evs if e.kind == "blocked")),
            "sleep": sleep,
            "idle": max(0, (t1 - t0) - busy - sleep),
            "tasks": sum(1 for e in evs if e.kind in WORK_KINDS),
            "steals": sum(1 for e in evs if e.kind == "steal"),
        })
    return {"start": t0, "end": t1, "workers": rows}


def longest(trace, n):
    spans = [e for e in trace.events if e.kind != "steal"]
    spans.sort(key=lambda e: (-e.dur, e.start, e.pid, e.tid, e.name))
    return spans[:n]


def ms(ns):
    return "%.3f" % (ns / 1e6)


def format_summary(trace, top):
    t0, t1 = trace.span()
    out = []
    if trace.skipped:
        out.append("note: %d malformed or unknown events ignored" % trace.skipped)
    out.append("span: %s ms (%d events: %d spans, %d steals; times in ms from the first "
               "event, at %s ms in the trace)"
               % (ms(t1 - t0), len(trace.events),
                  sum(1 for e in trace.events if e.kind != "steal"),
                  sum(1 for e in trace.events if e.kind == "steal"), ms(t0)))
    out.append("")
    s = summarize(trace)
    head = ("worker", "busy", "stolen", "blocked", "sleep", "idle", "busy%", "tasks", "steals")
    table = [head]
    total = {k: 0 for k in ("busy", "stolen", "blocked", "sleep", "idle", "tasks", "steals")}
    for r in s["workers"]:
        pct = 100.0 * r["busy"] / (t1 - t0) if t1 > t0 else 0.0
        table.append((r["name"], ms(r["busy"]), ms(r["stolen"]), ms(r["blocked"]),
                      ms(r["sleep"]), ms(r["idle"]), "%.1f" % pct, str(r["tasks"]),
                      str(r["steals"])))
        for k in total:
            total[k] += r[k]
    if len(s["workers"]) > 1:
        cap = (t1 - t0) * len(s["workers"])
        table.append(("all", ms(total["busy"]), ms(total["stolen"]), ms(total["blocked"]),
                      ms(total["sleep"]), ms(total["idle"]),
                      "%.1f" % (100.0 * total["busy"] / cap if cap else 0.0),
                      str(total["tasks"]), str(total["steals"])))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for row in table:
        out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    spans = longest(trace, top)
    if spans:
        out.append("")
        out.append("longest %d spans:" % len(spans))
        table = [("duration", "start", "kind", "worker", "fiber", "name")]
        for e in spans:
            table.append((ms(e.dur), ms(e.start - t0), e.kind, trace.worker_name(e.pid),
                          str(e.tid), e.name))
        widths = [max(len(row[i]) for row in table) for i in range(6)]
        for row in table:
            out.append("  ".join(c.rjust(w) if i < 2 else c.ljust(w)
                                 for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    return "\n".join(out) + "\n"


# ---- the SVG timeline ----

def nice_step(span_ms, ticks=8):
    if span_ms <= 0:
        return 1.0
    raw = span_ms / ticks
    p = 10.0 ** int("%d" % (len(str(int(raw))) - 1)) if raw >= 1 else 1.0
    while p > raw:
        p /= 10.0
    for m in (1, 2, 5, 10):
        if p * m >= raw:
            return p * m
    return p * 10


def depths(spans):
    """Nesting depth of each span of one track (spans there always nest)."""
    stack, out = [], {}
    for e in sorted(spans, key=lambda e: (e.start, -e.dur)):
        while stack and stack[-1].end <= e.start:
            stack.pop()
        out[id(e)] = len(stack)
        stack.append(e)
    return out


def pack_rows(trace, pid):
    """Fiber tracks of a worker packed into as few rows as their extents allow, so that a
    worker with many short-lived fibers still fits in a few rows."""
    extent = {}
    for e in trace.events:
        if e.pid == pid and e.kind != "steal":
            s, t = extent.get(e.tid, (e.start, e.end))
            extent[e.tid] = (min(s, e.start), max(t, e.end))
    rows, row_end, assign = 0, [], {}
    for tid in sorted(extent, key=lambda t: (extent[t][0], t)):
        for r in range(rows):
            if row_end[r] <= extent[tid][0]:
                break
        else:
            r = rows
            rows += 1
            row_end.append(0)
        assign[tid] = r
        row_end[r] = extent[tid][1]
    return assign, max(rows, 1)


def fmt(x):
    return ("%.2f" % x).rstrip("0").rstrip(".")


def render_svg(trace, title="fibersched trace", width=900):
    t0, t1 = trace.span()
    span = max(t1 - t0, 1)
    left, right, top = 110, 16, 58
    row_h, lane_gap = 16, 10
    plot_w = width - left - right
    x = lambda ns: left + (ns - t0) * plot_w / span
    out = []
    body = []
    y = top
    present = sorted({e.kind for e in trace.events}, key=KINDS.index)
    for pid in trace.pids:
        assign, rows = pack_rows(trace, pid)
        lane_h = rows * row_h
        body.append('<rect x="%d" y="%d" width="%d" height="%d" fill="#f6f6f6"/>'
                    % (left, y, plot_w, lane_h))
        body.append('<text x="%d" y="%s" text-anchor="end" font-size="12">%s</text>'
                    % (left - 8, fmt(y + lane_h / 2 + 4), escape(trace.worker_name(pid))))
        evs = [e for e in trace.events if e.pid == pid and e.kind != "steal"]
        by_track = {}
        for e in evs:
            by_track.setdefault(e.tid, []).append(e)
        for tid in sorted(by_track):
            d = depths(by_track[tid])
            for e in sorted(by_track[tid], key=lambda e: (d[id(e)], e.start, e.name)):
                depth = d[id(e)]
                inset = min(depth * 2, 6)
                ry = y + assign[tid] * row_h + 1 + inset
                rh = max(row_h - 2 - 2 * inset, 2)
                rx, rw = x(e.start), max(x(e.end) - x(e.start), 0.5)
                tip = "%s (%s) %s, fiber %d: %s ms at %s ms" % (
                    e.name, e.kind, trace.worker_name(pid), e.tid, ms(e.dur), ms(e.start - t0))
                body.append('<rect x="%s" y="%s" width="%s" height="%s" fill="%s"%s>'
                            '<title>%s</title></rect>'
                            % (fmt(rx), fmt(ry), fmt(rw), fmt(rh), COLOURS[e.kind],
                               ' fill-opacity="0.85"' if e.kind == "blocked" else "",
                               escape(tip)))
                if rw > 6.2 * len(e.name) + 6 and rh >= 10:
                    body.append('<text x="%s" y="%s" font-size="9" fill="#fff" '
                                'pointer-events="none">%s</text>'
                                % (fmt(rx + 3), fmt(ry + rh / 2 + 3), escape(e.name)))
        for e in trace.events:
            if e.pid == pid and e.kind == "steal":
                sx = x(e.start)
                body.append('<path d="M%s %d l-3 -5 h6 z" fill="%s"><title>steal: %s, fiber %d,'
                            ' at %s ms</title></path>'
                            % (fmt(sx), y, COLOURS["steal"], escape(trace.worker_name(pid)),
                               e.tid, ms(e.start - t0)))
        y += lane_h + lane_gap
    axis_y = y + 2
    height = axis_y + 40
    step = nice_step(span / 1e6)
    ticks = []
    k = 0
    while k * step * 1e6 <= span + 1e-9:
        tx = x(t0 + k * step * 1e6)
        ticks.append('<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#ddd"/>'
                     % (fmt(tx), top - 4, fmt(tx), axis_y))
        ticks.append('<text x="%s" y="%d" text-anchor="middle" font-size="10">%s</text>'
                     % (fmt(tx), axis_y + 14, fmt(k * step)))
        k += 1
    out.append('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
               'viewBox="0 0 %d %d" font-family="%s">' % (width, height, width, height, FONT))
    out.append('<rect width="100%" height="100%" fill="#fff"/>')
    out.append('<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>'
               % (left, escape(title)))
    lx = left
    for kind in present:
        out.append('<rect x="%d" y="32" width="10" height="10" fill="%s"/>'
                   '<text x="%d" y="41" font-size="11">%s</text>'
                   % (lx, COLOURS[kind], lx + 14, kind))
        lx += 14 + 7 * len(kind) + 14
    out.extend(ticks)
    out.extend(body)
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>'
               % (left, axis_y, left + plot_w, axis_y))
    out.append('<text x="%d" y="%d" text-anchor="middle" font-size="11">ms from the first '
               'event</text>' % (left + plot_w // 2, axis_y + 32))
    if not trace.events:
        out.append('<text x="%d" y="%d" font-size="12">empty trace: no events</text>'
                   % (left, top + 14))
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---- self-test ----

def synthetic():
    """Two workers with known times (microseconds, as the writer prints them)."""
    M = lambda pid, name: {"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                           "args": {"name": name}}
    X = lambda name, ts, dur, pid, tid, args=None: dict(
        {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid},
        **({"args": args} if args else {}))
    I = lambda ts, pid, tid: {"name": "steal", "ph": "i", "s": "t", "ts": ts, "pid": pid,
                              "tid": tid, "args": {"victim": 0}}
    return {"displayTimeUnit": "ns", "traceEvents": [
        M(1, "worker 0"),
        # fiber 1: a 10 ms task blocked from 2 to 5 ms (7 ms running), then the worker
        # sleeps 12-14 ms
        X("blocked", 2000.000, 3000.000, 1, 1),
        X("task", 0.000, 10000.000, 1, 1, {"fn": "0x1"}),
        X("sleep", 12000.000, 2000.000, 1, 1),
        # fiber 2: a stolen join half while fiber 1 waits
        I(3000.000, 1, 2),
        X("join", 3000.000, 2000.000, 1, 2, {"fn": "0x2"}),
        M(2, "worker 1"),
        X("parse <a> & b", 0.000, 4000.000, 2, 1, {"status": 0}),
        X("node", 5000.000, 1000.000, 2, 1),
        X("stage", 6000.000, 2000.000, 2, 1, {"stage": 1}),
        I(5000.000, 2, 1),
        # a blocked span whose enclosing task was dropped (the buffer was full)
        X("blocked", 9000.000, 2000.000, 2, 2),
    ]}


def self_test():
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append("%s: got %r, want %r" % (what, got, want))

    trace = Trace(json.loads(json.dumps(synthetic())))
    s = summarize(trace)
    expect("span", (s["start"], s["end"]), (0, 14000000))
    want = [
        {"pid": 1, "name": "worker 0", "busy": 9000000, "stolen": 2000000,
         "blocked": 3000000, "sleep": 2000000, "idle": 3000000, "tasks": 2, "steals": 1},
        {"pid": 2, "name": "worker 1", "busy": 7000000, "stolen": 0, "blocked": 2000000,
         "sleep": 0, "idle": 7000000, "tasks": 3, "steals": 1},
    ]
    expect("workers", s["workers"], want)
    expect("kinds", [e.kind for e in trace.events],
           ["task", "blocked", "sleep", "join", "steal", "graph task", "advance", "steal",
            "stage", "blocked"])
    expect("longest", [(e.name, e.dur) for e in longest(trace, 3)],
           [("task", 10000000), ("parse <a> & b", 4000000), ("blocked", 3000000)])
    text = format_summary(trace, 3)
    for line in ("span: 14.000 ms",
                 "worker 0   9.000   2.000    3.000  2.000   3.000   64.3      2       1",
                 "worker 1   7.000   0.000    2.000  0.000   7.000   50.0      3       1",
                 "all       16.000   2.000    5.000  2.000  10.000   57.1      5       2",
                 "10.000  0.000  task        worker 0  1      task"):
        if line not in text:
            failures.append("summary lacks %r:\n%s" % (line, text))
    svg = render_svg(trace)
    try:
        import xml.dom.minidom
        dom = xml.dom.minidom.parseString(svg)
        expect("svg width", dom.documentElement.getAttribute("width"), "900")
        expect("svg titles", len(dom.getElementsByTagName("title")), len(trace.events))
    except Exception as err:  # any parse error is the failure being tested for
        failures.append("SVG does not parse: %s" % err)
    expect("deterministic", render_svg(Trace(synthetic())), svg)
    expect("interval subtract", subtract([(0, 10), (12, 20)], [(2, 3), (9, 13), (15, 30)]),
           [(0, 2), (3, 9), (13, 15)])
    empty = Trace({"traceEvents": []})
    expect("empty span", empty.span(), (0, 0))
    try:
        xml.dom.minidom.parseString(render_svg(empty))
    except Exception as err:
        failures.append("empty SVG does not parse: %s" % err)
    # names from a symbol table: the program was loaded 0x5000 above its symbols' addresses
    named = Trace(dict(synthetic(), traceEvents=[
        {"name": "code_anchor", "ph": "M", "pid": 0, "tid": 0,
         "args": {"symbol": "fsched_trace_write_json", "address": "0x5300"}}] + [
        dict(e, args={"fn": {"0x1": "0x5120", "0x2": "0x5210"}[e["args"]["fn"]]})
        if "fn" in e.get("args", {}) else e for e in synthetic()["traceEvents"]]))
    nm = ("0000000000000100 T fetch_page\n0000000000000200 t split_half\n"
          "0000000000000300 T fsched_trace_write_json\n0000000000000400 D data\n")
    expect("named", named.name_functions(parse_nm(nm)), 2)
    expect("names", sorted(e.name for e in named.events if e.fn is not None),
           ["fetch_page", "join split_half"])
    cut = Trace({"traceEvents": [{"name": "task", "ph": "X", "ts": 1.0, "pid": 1, "tid": 1}]})
    expect("malformed event skipped", (len(cut.events), cut.skipped), (0, 1))
    for f in failures:
        print("FAIL", f)
    print("self-test: %s" % ("ok" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


def main(argv=None):
    p = argparse.ArgumentParser(description="Summarize a fibersched trace (Chrome JSON).")
    p.add_argument("trace", nargs="?", help="trace.json from fsched_trace_write_json")
    p.add_argument("--svg", help="also write an SVG timeline here")
    p.add_argument("--top", type=int, default=10, help="longest spans to list (default 10)")
    p.add_argument("--title", default=None, help="the SVG's title (default: the file name)")
    p.add_argument("--exe", help="the program that wrote the trace: names unnamed tasks and "
                   "join halves by their functions' symbols (needs nm)")
    p.add_argument("--self-test", action="store_true", help="check this script and exit")
    a = p.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.trace:
        p.error("a trace file is needed")
    try:
        with open(a.trace, encoding="utf-8") as f:
            doc = json.load(f)
        trace = Trace(doc)
    except (OSError, ValueError) as err:
        print("%s: cannot read the trace: %s" % (a.trace, err), file=sys.stderr)
        return 1
    if a.exe:
        try:
            if not trace.name_functions(read_symbols(a.exe)):
                print("%s: no function named: the trace has no code anchor, or %s lacks "
                      "its symbol" % (a.trace, a.exe), file=sys.stderr)
        except (OSError, subprocess.CalledProcessError) as err:
            print("%s: cannot read its symbols: %s" % (a.exe, err), file=sys.stderr)
            return 1
    if not trace.events:
        print("%s: empty trace: no events recorded" % a.trace)
    else:
        sys.stdout.write(format_summary(trace, max(a.top, 0)))
    if a.svg:
        title = a.title if a.title is not None else "fibersched trace: %s" % a.trace.replace(
            "\\", "/").split("/")[-1]
        with open(a.svg, "w", encoding="utf-8", newline="\n") as f:
            f.write(render_svg(trace, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
