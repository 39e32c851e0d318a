#!/usr/bin/env python3
"""Summarizes a fibersched trace (FIBERSCHED_TRACE, fsched_trace_write_json) as text,
and optionally draws it as an SVG timeline.

    python3 tools/trace_summary.py trace.json [--svg out.svg] [--top N] [--exe PROGRAM]
    python3 tools/trace_summary.py --self-test

The trace is Chrome trace-event JSON: each scheduler slot is a process ("worker 0", ...)
and each of its fibers a thread; spans ("X") are tasks, join halves and loop pieces run
apart, spawn/sync children, graph tasks, pipeline advances, linear-pipeline stages,
blocked fibers and worker sleeps; steals are instants ("i"). Each event's category
("cat") is its kind.

The summary has two tables. The first splits each worker thread's time, so that
busy + sleep + idle = the span:
  busy     some fiber of the worker ran work (any span of work, less the time that
           fiber was blocked inside it)
  sleep    the worker thread slept for lack of work
  idle     neither (looking for work, or events the trace dropped)
  stolen   the part of busy spent on work taken from another worker (join halves, loop
           pieces and spawn/sync children that ran apart)
The second counts the fibers' waits, which are not the worker's time: while a fiber is
blocked its worker runs other fibers.
  waits    blocked spans; blocked: their total time (summed over the fibers); longest
Times are in milliseconds from the first event. Python standard library only (and, with
--exe, binutils' nm).

The SVG draws each worker as a lane, its fibers as rows and nested spans (a blocked span
inside the task that waited) one under the other, each labelled inside its bar when the
label fits (cut short with an ellipsis, or left to the tooltip, when it does not): no two
labels overlap. It uses a monospace font, whose widths are known.

Spans of work carry the user's function (args.fn); unnamed ones are named by it when the
program that wrote the trace is given (--exe, not stripped): the trace's code anchor says
where fsched_trace_write_json was loaded, which gives the offset to the addresses in the
program's symbol table. A spawn/sync task NAME runs as NAME_fsched_run: it is named NAME.
"""

import argparse
import bisect
import json
import subprocess
import sys
from xml.sax.saxutils import escape

WORK_KINDS = ("task", "join", "child", "graph task", "advance", "stage")
KINDS = WORK_KINDS + ("blocked", "sleep", "steal")
# the legend's words for each kind
LEGEND = {
    "task": "task",
    "join": "join half / loop piece, run apart",
    "child": "spawn/sync child, run apart",
    "graph task": "graph task",
    "advance": "node advance",
    "stage": "pipeline stage",
    "blocked": "blocked: the fiber waits",
    "sleep": "worker asleep",
    "steal": "steal",
}
# colour-blind-friendly palette, one per kind
COLOURS = {
    "task": "#4e79a7",
    "join": "#f28e2b",
    "child": "#edc948",
    "graph task": "#59a14f",
    "advance": "#b07aa1",
    "stage": "#76b7b2",
    "blocked": "#e15759",
    "sleep": "#bab0ac",
    "steal": "#222222",
}
TASK_SUFFIX = "_fsched_run"
FONT = "ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, 'Liberation Mono', monospace"
CHAR_EM = 0.62  # a monospace character's advance, in em (0.6 in the common fonts)


class Event:
    __slots__ = ("name", "kind", "pid", "tid", "start", "dur", "fn", "waits_on")

    def __init__(self, name, kind, pid, tid, start, dur, fn=None, waits_on=None):
        self.name, self.kind, self.pid, self.tid = name, kind, pid, tid
        self.start, self.dur = start, dur  # integer nanoseconds
        self.fn = fn  # the user's function's address, for spans of work
        self.waits_on = waits_on  # what a blocked fiber waited on

    @property
    def end(self):
        return self.start + self.dur


def kind_of(ev):
    """The recorded kind: the event's category; in traces written before categories,
    inferred from what each kind carried (steals are the only instants)."""
    if ev.get("cat") in KINDS:
        return ev["cat"]
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
                args = ev.get("args") or {}
                fn = args.get("fn")
                self.events.append(Event(str(ev.get("name", "")), kind_of(ev), int(ev["pid"]),
                                         int(ev.get("tid", 0)), to_ns(ev["ts"]), max(dur, 0),
                                         int(fn, 16) if fn else None, args.get("waits_on")))
            except (KeyError, TypeError, ValueError):
                self.skipped += 1  # e.g. a line cut short: summarize what is whole
        self.events.sort(key=lambda e: (e.pid, e.tid, e.start, -e.dur, e.kind, e.name))
        self.pids = sorted(set(self.process_names) | {e.pid for e in self.events})

    def name_functions(self, symbols):
        """Names the spans of work the user named not (named as their kind) by the symbol
        of their function, from the program's symbols (sorted (address, name) pairs, see
        parse_nm). Returns how many were named; 0 without a code anchor or when the
        anchor's symbol is not there."""
        if not self.anchor:
            return 0
        anchor = [a for a, name in symbols if name == self.anchor[0]]
        if not anchor:
            return 0
        offset = self.anchor[1] - anchor[0]
        addresses = [a for a, _ in symbols]
        named = 0
        for e in self.events:
            if e.fn is None or e.name != e.kind:
                continue
            i = bisect.bisect_right(addresses, e.fn - offset) - 1
            if i >= 0:
                name = symbols[i][1]
                e.name = name[:-len(TASK_SUFFIX)] if name.endswith(TASK_SUFFIX) else name
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
    """Per worker: busy, stolen, sleep, idle (ns), tasks, steals; and its fibers' waits:
    waits, blocked (summed over the fibers), longest."""
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
            stolen += subtract(union((e.start, e.end) for e in on
                                     if e.kind in ("join", "child")), blocked)
        busy = length(union(running))
        sleep_iv = subtract(union((e.start, e.end) for e in evs if e.kind == "sleep"),
                            union(running))
        sleep = length(sleep_iv)
        waits = [e.dur for e in evs if e.kind == "blocked"]
        rows.append({
            "pid": pid,
            "name": trace.worker_name(pid),
            "busy": busy,
            "stolen": length(union(stolen)),
            "sleep": sleep,
            "idle": max(0, (t1 - t0) - busy - sleep),
            "tasks": sum(1 for e in evs if e.kind in WORK_KINDS),
            "steals": sum(1 for e in evs if e.kind == "steal"),
            "waits": len(waits),
            "blocked": sum(waits),
            "longest": max(waits) if waits else 0,
        })
    return {"start": t0, "end": t1, "workers": rows}


def longest(trace, n):
    spans = [e for e in trace.events if e.kind != "steal"]
    spans.sort(key=lambda e: (-e.dur, e.start, e.pid, e.tid, e.name))
    return spans[:n]


def ms(ns):
    return "%.3f" % (ns / 1e6)


def table(rows, right_from=1):
    """Rows of cells as aligned lines: the first columns left-aligned, the rest right."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) if i < right_from else c.rjust(w)
                      for i, (c, w) in enumerate(zip(row, widths))).rstrip() for row in rows]


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
    s = summarize(trace)
    many = len(s["workers"]) > 1
    total = {k: sum(r[k] for r in s["workers"]) for k in
             ("busy", "stolen", "sleep", "idle", "tasks", "steals", "waits", "blocked")}
    total["longest"] = max([r["longest"] for r in s["workers"]] or [0])
    out.append("")
    out.append("worker threads: busy + sleep + idle = the span")
    rows = [("worker", "busy", "busy%", "sleep", "idle", "stolen", "tasks", "steals")]
    everyone = [(r, 1) for r in s["workers"]]
    if many:
        everyone.append((dict(total, name="all"), len(s["workers"])))
    for r, threads in everyone:
        cap = (t1 - t0) * threads
        rows.append((r["name"], ms(r["busy"]), "%.1f" % (100.0 * r["busy"] / cap if cap else 0),
                     ms(r["sleep"]), ms(r["idle"]), ms(r["stolen"]), str(r["tasks"]),
                     str(r["steals"])))
    out.extend(table(rows))
    out.append("  (stolen: the part of busy spent on work taken from another worker)")
    out.append("")
    out.append("fibers' waits: not the workers' time (while a fiber is blocked, its worker "
               "runs others)")
    rows = [("worker", "waits", "blocked", "longest")]
    for r, _ in everyone:
        rows.append((r["name"], str(r["waits"]), ms(r["blocked"]), ms(r["longest"])))
    out.extend(table(rows))
    out.append("  (blocked: the time of all the waits, summed over the fibers)")
    spans = longest(trace, top)
    if spans:
        out.append("")
        out.append("longest %d spans:" % len(spans))
        rows = [("duration", "start", "kind", "worker", "fiber", "name")]
        for e in spans:
            name = e.name
            if e.kind == "blocked" and e.waits_on:
                name = "blocked on " + e.waits_on
            rows.append((ms(e.dur), ms(e.start - t0), e.kind, trace.worker_name(e.pid),
                         str(e.tid), name))
        widths = [max(len(row[i]) for row in rows) for i in range(6)]
        for row in rows:
            out.append("  ".join(c.rjust(w) if i < 2 else c.ljust(w)
                                 for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    return "\n".join(out) + "\n"


# ---- the SVG timeline ----

def text_width(text, size):
    """The width of text in the SVG's monospace font at size (pixels), a little more
    than the common fonts' advance so that what is laid out by it fits."""
    return len(text) * CHAR_EM * size


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


def pack_rows(extent):
    """Fiber tracks ({tid: (start, end)}) packed into as few rows as their extents allow,
    so that a worker with many short-lived fibers still fits in a few rows: {tid: row}."""
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


def ink(colour):
    """Black or white, whichever reads better on colour."""
    r, g, b = (int(colour[i:i + 2], 16) / 255.0 for i in (1, 3, 5))
    return "#111" if 0.299 * r + 0.587 * g + 0.114 * b > 0.55 else "#fff"


def fitted(label, room, size):
    """label, or its start with an ellipsis, in room pixels; None when not even that fits."""
    if text_width(label, size) <= room:
        return label
    keep = int(room / (CHAR_EM * size)) - 1
    return label[:keep] + "\u2026" if keep >= 3 else None


def span_label(e):
    if e.kind == "blocked":
        return "blocked on " + e.waits_on if e.waits_on else "blocked"
    return e.name


class Svg:
    def __init__(self):
        self.items = []

    def text(self, x, y, size, text, anchor="start", fill=None, bold=False):
        self.items.append('<text x="%s" y="%s" font-size="%s"%s%s%s>%s</text>' % (
            fmt(x), fmt(y), fmt(size), ' text-anchor="%s"' % anchor if anchor != "start" else "",
            ' fill="%s"' % fill if fill else "", ' font-weight="bold"' if bold else "",
            escape(text)))

    def rect(self, x, y, w, h, fill, tip=None, extra=""):
        self.items.append('<rect x="%s" y="%s" width="%s" height="%s" fill="%s"%s>%s</rect>'
                          % (fmt(x), fmt(y), fmt(w), fmt(h), fill, extra,
                             "<title>%s</title>" % escape(tip) if tip else ""))


def render_svg(trace, title="fibersched trace", width=900):
    t0, t1 = trace.span()
    span = max(t1 - t0, 1)
    summary = {r["pid"]: r for r in summarize(trace)["workers"]}
    row_h, fiber_gap, lane_gap, label_size = 14, 3, 12, 9
    names = [trace.worker_name(pid) for pid in trace.pids] + ["busy 100%"]
    left = int(max(text_width(n, 12) for n in names)) + 18
    right = 16
    width = max(width, int(text_width(title, 14)) + left + right)
    plot_w = width - left - right
    x = lambda ns: left + (ns - t0) * plot_w / span
    head, body = Svg(), Svg()

    # the title, then the legend, wrapped to the width
    head.text(left, 20, 14, title, bold=True)
    present = sorted({e.kind for e in trace.events}, key=KINDS.index)
    lx, ly = left, 32
    for kind in present:
        item_w = 14 + text_width(LEGEND[kind], 11) + 18
        if lx > left and lx + item_w > width - right:
            lx, ly = left, ly + 16
        if kind == "steal":
            head.items.append('<path d="M%s %d l-4 -7 h8 z" fill="%s"/>'
                              % (fmt(lx + 5), ly + 10, COLOURS[kind]))
        else:
            head.rect(lx, ly, 10, 10, COLOURS[kind])
        head.text(lx + 14, ly + 9, 11, LEGEND[kind])
        lx += item_w
    top = ly + 28

    y = top
    for pid in trace.pids:
        evs = [e for e in trace.events if e.pid == pid and e.kind != "steal"]
        by_track, extent = {}, {}
        for e in evs:
            by_track.setdefault(e.tid, []).append(e)
            s, t = extent.get(e.tid, (e.start, e.end))
            extent[e.tid] = (min(s, e.start), max(t, e.end))
        depth = {}
        for spans in by_track.values():
            depth.update(depths(spans))
        assign, rows = pack_rows(extent)
        # each row as deep as the deepest nesting of its tracks: one level under another
        levels = [1] * rows
        for tid, spans in by_track.items():
            levels[assign[tid]] = max(levels[assign[tid]], 1 + max(depth[id(e)] for e in spans))
        row_y = [y]
        for r in range(rows):
            row_y.append(row_y[-1] + levels[r] * row_h + fiber_gap)
        lane_h = max(row_y[-1] - fiber_gap - y, row_h)
        body.rect(left, y, plot_w, lane_h, "#f4f4f4")
        middle = y + lane_h / 2
        body.text(left - 8, middle + (4 if lane_h < 2 * 14 + 4 else -2), 12,
                  trace.worker_name(pid), anchor="end")
        if pid in summary and lane_h >= 2 * 14 + 4:
            busy = 100.0 * summary[pid]["busy"] / span
            body.text(left - 8, middle + 12, 10, "busy %d%%" % round(busy), anchor="end",
                      fill="#555")
        for tid in sorted(by_track):
            for e in sorted(by_track[tid], key=lambda e: (depth[id(e)], e.start, e.name)):
                ry = row_y[assign[tid]] + depth[id(e)] * row_h
                rx, rw = x(e.start), max(x(e.end) - x(e.start), 0.5)
                label = span_label(e)
                tip = "%s (%s) %s, fiber %d: %s ms at %s ms" % (
                    label, LEGEND[e.kind], trace.worker_name(pid), e.tid, ms(e.dur),
                    ms(e.start - t0))
                body.rect(rx, ry + 1, rw, row_h - 2, COLOURS[e.kind], tip)
                shown = fitted(label, rw - 5, label_size)
                if shown:
                    body.items.append(
                        '<text x="%s" y="%s" font-size="%d" fill="%s" pointer-events="none">'
                        '%s</text>' % (fmt(rx + 3), fmt(ry + row_h / 2 + 3), label_size,
                                       ink(COLOURS[e.kind]), escape(shown)))
        for e in trace.events:
            if e.pid == pid and e.kind == "steal":
                body.items.append('<path d="M%s %d l-3 -5 h6 z" fill="%s"><title>steal: %s, '
                                  'fiber %d, at %s ms</title></path>'
                                  % (fmt(x(e.start)), y, COLOURS["steal"],
                                     escape(trace.worker_name(pid)), e.tid, ms(e.start - t0)))
        y += lane_h + lane_gap
    axis_y = y + 2
    height = axis_y + 40
    step = nice_step(span / 1e6)
    ticks = Svg()
    k = 0
    while k * step * 1e6 <= span + 1e-9:
        tx = x(t0 + k * step * 1e6)
        ticks.items.append('<line x1="%s" y1="%d" x2="%s" y2="%d" stroke="#ddd"/>'
                           % (fmt(tx), top - 4, fmt(tx), axis_y))
        ticks.text(tx, axis_y + 14, 10, fmt(k * step), anchor="middle")
        k += 1
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'viewBox="0 0 %d %d" font-family="%s">' % (width, height, width, height,
                                                       FONT),
           '<rect width="100%" height="100%" fill="#fff"/>']
    out.extend(head.items)
    out.extend(ticks.items)
    out.extend(body.items)
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>'
               % (left, axis_y, left + plot_w, axis_y))
    axis = Svg()
    axis.text(left + plot_w / 2, axis_y + 32, 11, "ms from the first event", anchor="middle")
    if not trace.events:
        axis.text(left, top + 14, 12, "empty trace: no events")
    out.extend(axis.items)
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---- self-test ----

def synthetic():
    """Two workers with known times (microseconds, as the writer prints them)."""
    M = lambda pid, name: {"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                           "args": {"name": name}}
    X = lambda name, cat, ts, dur, pid, tid, args=None: dict(
        {"name": name, "cat": cat, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid},
        **({"args": args} if args else {}))
    I = lambda ts, pid, tid: {"name": "steal", "cat": "steal", "ph": "i", "s": "t", "ts": ts,
                              "pid": pid, "tid": tid, "args": {"victim": 0}}
    return {"displayTimeUnit": "ns", "traceEvents": [
        M(1, "worker 0"),
        # fiber 1: a 10 ms task blocked from 2 to 5 ms (7 ms running), then the worker
        # sleeps 12-14 ms
        X("blocked", "blocked", 2000.000, 3000.000, 1, 1, {"waits_on": "event"}),
        X("task", "task", 0.000, 10000.000, 1, 1, {"fn": "0x1"}),
        X("sleep", "sleep", 12000.000, 2000.000, 1, 1),
        # fiber 2: a join half run apart while fiber 1 waits
        I(3000.000, 1, 2),
        X("join", "join", 3000.000, 2000.000, 1, 2, {"fn": "0x2"}),
        M(2, "worker 1"),
        X("parse <a> & b", "graph task", 0.000, 4000.000, 2, 1, {"fn": "0x3", "status": 0}),
        X("node", "advance", 5000.000, 1000.000, 2, 1, {"fn": "0x4"}),
        X("stage", "stage", 6000.000, 1000.000, 2, 1, {"fn": "0x5", "stage": 1}),
        X("child", "child", 7000.000, 1000.000, 2, 1, {"fn": "0x6"}),
        I(5000.000, 2, 1),
        # a blocked span whose enclosing task was dropped (the buffer was full)
        X("blocked", "blocked", 9000.000, 2000.000, 2, 2, {"waits_on": "mutex"}),
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
        {"pid": 1, "name": "worker 0", "busy": 9000000, "stolen": 2000000, "sleep": 2000000,
         "idle": 3000000, "tasks": 2, "steals": 1, "waits": 1, "blocked": 3000000,
         "longest": 3000000},
        {"pid": 2, "name": "worker 1", "busy": 7000000, "stolen": 1000000, "sleep": 0,
         "idle": 7000000, "tasks": 4, "steals": 1, "waits": 1, "blocked": 2000000,
         "longest": 2000000},
    ]
    expect("workers", s["workers"], want)
    expect("kinds", [e.kind for e in trace.events],
           ["task", "blocked", "sleep", "join", "steal", "graph task", "advance", "steal",
            "stage", "child", "blocked"])
    expect("longest", [(e.name, e.dur) for e in longest(trace, 3)],
           [("task", 10000000), ("parse <a> & b", 4000000), ("blocked", 3000000)])
    text = format_summary(trace, 3)
    for line in ("span: 14.000 ms",
                 "worker threads: busy + sleep + idle = the span",
                 "worker      busy  busy%  sleep    idle  stolen  tasks  steals",
                 "worker 0   9.000   64.3  2.000   3.000   2.000      2       1",
                 "worker 1   7.000   50.0  0.000   7.000   1.000      4       1",
                 "all       16.000   57.1  2.000  10.000   3.000      6       2",
                 "worker    waits  blocked  longest",
                 "worker 0      1    3.000    3.000",
                 "all           2    5.000    3.000",
                 " 3.000  2.000  blocked     worker 0  1      blocked on event"):
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
    expect("fitted", [fitted("consumer", room, 9) for room in (60, 40, 20)],
           ["consumer", "consum\u2026", None])
    expect("interval subtract", subtract([(0, 10), (12, 20)], [(2, 3), (9, 13), (15, 30)]),
           [(0, 2), (3, 9), (13, 15)])
    empty = Trace({"traceEvents": []})
    expect("empty span", empty.span(), (0, 0))
    try:
        xml.dom.minidom.parseString(render_svg(empty))
    except Exception as err:
        failures.append("empty SVG does not parse: %s" % err)
    # names from a symbol table: the program was loaded 0x5000 above its symbols' addresses
    moved = {"0x1": "0x5120", "0x2": "0x5210", "0x3": "0x5100", "0x4": "0x5100",
             "0x5": "0x5100", "0x6": "0x5400"}
    named = Trace(dict(synthetic(), traceEvents=[
        {"name": "code_anchor", "ph": "M", "pid": 0, "tid": 0,
         "args": {"symbol": "fsched_trace_write_json", "address": "0x5300"}}] + [
        dict(e, args=dict(e["args"], fn=moved[e["args"]["fn"]]))
        if "fn" in e.get("args", {}) else e for e in synthetic()["traceEvents"]]))
    nm = ("0000000000000100 T fetch_page\n0000000000000200 t split_half\n"
          "0000000000000300 T fsched_trace_write_json\n0000000000000400 t fib_fsched_run\n"
          "0000000000000500 D data\n")
    expect("named", named.name_functions(parse_nm(nm)), 4)  # the unnamed ones
    expect("names", [(e.kind, e.name) for e in named.events if e.fn is not None],
           [("task", "fetch_page"), ("join", "split_half"), ("graph task", "parse <a> & b"),
            ("advance", "node"), ("stage", "fetch_page"), ("child", "fib")])
    legacy = Trace({"traceEvents": [
        {"name": "join", "ph": "X", "ts": 1.0, "dur": 1.0, "pid": 1, "tid": 1,
         "args": {"fn": "0x1"}},
        {"name": "fetch", "ph": "X", "ts": 1.0, "dur": 1.0, "pid": 1, "tid": 2,
         "args": {"status": 0}}]})
    expect("kinds without categories", [e.kind for e in legacy.events], ["join", "graph task"])
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
    p.add_argument("--exe", help="the program that wrote the trace: names the spans of work "
                   "the user named not by their functions' symbols (needs nm)")
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
