#!/usr/bin/env python3
"""Every benchmark figure of the README, from saved benchmark outputs.

A saved output, bench/results/<name>.txt, is a few "# key: value" lines that say how and
where it was measured (command, date, machine, compiler, peers and their versions, all
found by this script when it runs the benchmark), then the benchmark's standard output
unchanged. From them this script writes:

- the README's tables: each block between "<!-- bench NAME [table N] [columns A|B|C]
  [chart | chart-only] -->" and "<!-- end bench -->" is the table of the saved output
  NAME (its N-th, the columns named, in that order; none with chart-only), a line saying
  where it comes from, and its chart;
- charts (SVG), docs/charts/<name>.svg (<name>-<n>.svg when the output has several
  tables): per group of rows, each candidate's time relative to fibersched's at the
  same setting (fibersched = 1.00x, lower is better).

    python3 tools/bench_report.py run bench_fib --reps=9   # build-bench/bench/bench_fib,
                                                          # saved, then the README updated
    python3 tools/bench_report.py run --cc arm-none-eabi-gcc footprint -- bench/footprint.sh
    python3 tools/bench_report.py update                  # README and charts from bench/results
    python3 tools/bench_report.py check                   # exit 1 when they disagree

`run` saves nothing when the command fails, or when its output would not make its
tables and charts (no table, no fibersched row to compare with, a block's column missing).

`check` fails when a README block or a chart differs from what its saved output gives;
when a block's markers are not exactly "<!-- bench ... -->" and "<!-- end bench -->", in
pairs, unnested (`update` then leaves the README alone); when an image points into
docs/charts at no chart; and when a figure in the prose of a README section is not a
number with its unit in the saved outputs that section shows (or names in "<!-- figures
from NAME NAME2 -->"), rounded as the prose writes it, or sits in a section that names no
saved output. A figure is a number with a unit (ms, ns, us, x, %, B, KB, MB), or a number
with decimals beside one, which shares its unit ("42.1 and 23.9 ms"); a table cell has
its column's unit. The check is a guard against figures typed by hand, not a proof: a
typed value that equals another figure of that unit in the section's outputs passes. A
setting rather than a measurement is written as code (`--poll-us=20`), in binary units
(16 KiB stacks) or with its unit in words.

Standard library only, so that regenerating needs nothing but Python 3.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import xml.dom.minidom

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
CHARTS = os.path.join(ROOT, "docs", "charts")


def workers_title(row):
    n = row["workers"]
    return "%s worker%s" % (n, "" if n == "1" else "s")


# How each benchmark's table maps onto a chart. Keys:
#   label      column that names a bar (default: "candidate", else the first column)
#   values     columns charted, one group of bars per column: [(column, group title or
#              None, unit)]; with one column its group title comes from group_by
#   group_by   function of a row giving its group's title (rows of one group share a
#              reference), or None: the whole table is one group
#   panel_by   function of a row giving the panel (side by side) its group is drawn in
#   names      shorter names shown for candidates
#   reference  name of fibersched's row every ratio of a group is taken against (the one
#              the benchmark's own "vs fibersched" column uses)
#   reference_prefix  instead of reference: the first row whose name starts so (or with
#              the first of several prefixes that one row has)
#   wide       True when candidates are columns and groups are rows (see chart_wide);
#              ignore: columns of such a table that are no candidate
#   skip       indexes (1-based) of tables that compare nothing with a peer
#   only       a title's beginning: only the tables whose title begins so are charted
#   charts     False: the output has no chart (its tables are shown as tables only)
#   tables     {n: keys}: keys that differ for the n-th table
# A benchmark missing here gets DEFAULT: "candidate" (or the first column) names bars, the first
# column with a time unit is charted, the first row of fibersched is the reference.
CONFIG = {
    "bench_fib": {
        "values": [("median ms", None, "ms")],
        "group_by": workers_title,
        "reference": "fibersched: fsched_join",
    },
    "bench_skynet": {
        "values": [("median ms", None, "ms")],
        "reference": "fibersched: fsched_wait_group_spawn",
    },
    "bench_cilk": {
        # 8 kernels x 2 worker counts: side by side, short names, or the chart is too tall
        "values": [("median ms", None, "ms")],
        "group_by": lambda r: "%s (%s)" % (r["kernel"], r["size"]),
        "panel_by": workers_title,
        "reference": "fibersched: FSCHED_SPAWN/SYNC",
        "names": {"fibersched: FSCHED_SPAWN/SYNC": "fibersched", "Lace: SPAWN/SYNC": "Lace",
                  "oneTBB: task_group": "oneTBB", "OpenMP tasks": "OpenMP"},
    },
    "bench_uts": {
        "values": [("median ms", None, "ms")],
        "group_by": lambda r: "tree " + r["tree"],
        "reference": "fibersched: wait group per node",
    },
    "bench_blocked": {
        # one table, several measures: a group per measure, the candidates in each
        "values": [("cold ms", "cold: block and release, fresh stacks", "ms"),
                   ("warm ms", "warm: block and release, stacks reused", "ms"),
                   ("warm release ms", "warm: the release alone", "ms"),
                   ("RSS B/task", "resident memory per blocked task", "B")],
        "reference": "fibersched, slab 16 KiB",
    },
    "bench_yield": {
        "values": [("median ns", None, "ns")],
        "reference_prefix": "fibersched:",
    },
    "bench_switch": {
        "values": [("ns/switch", None, "ns")],
        "reference": "fibersched: fsched_fiber_switch",
    },
    "bench_graph": {
        # the summary, a row per shape and a column per candidate
        "only": "summary:",
        "wide": True,
        "ignore": ("fibersched / oneTBB", "fibersched build ms", "oneTBB build ms"),
        "names": {"fibersched run ms": "fibersched", "oneTBB run ms": "oneTBB"},
    },
    "bench_pipeline": {
        # linear pipelines against fibersched's; node pipelines against the debugging
        # scheduler, as the benchmark's own ratios are
        "values": [("median ms", None, "ms")],
        "reference_prefix": ("fibersched:", "debugging scheduler"),
        "names": {"fibersched: fsched_parallel_pipeline": "fibersched",
                  "oneTBB: parallel_pipeline (3 serial filters)": "oneTBB: parallel_pipeline"},
    },
    "bench_echo": {"charts": False},
    "bench_idle": {"charts": False},
    "footprint": {"charts": False},
    "bench_fib_n25": {"charts": False},
    "bench_fib_n25_pinned": {"charts": False},
    "bench_wake": {
        "values": [("median us/trip", None, "us")],
        "group_by": lambda r: "threads: " + r["threads"],
        "reference": "fibersched: fsched_event",
        "skip": (2,),  # calls from main against calls from a task: no peer
    },
}

DEFAULT = {"reference_prefix": "fibersched"}

UNITS = ("ms", "us", "ns", "B")

# ---- parsing ----


class ParseError(Exception):
    pass


def split_row(line):
    cells = line.strip()
    if not (cells.startswith("|") and cells.endswith("|")):
        raise ParseError("not a table row: %r" % line)
    # backticks are Markdown code spans in tables edited by hand; a chart shows plain text
    return [c.strip().replace("`", "") for c in cells[1:-1].split("|")]


HEADER_KEYS = ("command", "date", "machine", "compiler", "peers")


def parse_output(text):
    """(meta, tables): meta is the "# key: value" lines at the top; each table is
    {"title", "header", "rows", "lines"}, its title the nearest line of text above it."""
    lines = text.splitlines()
    meta, i = {}, 0
    while i < len(lines) and lines[i].startswith("# "):
        key, sep, value = lines[i][2:].partition(": ")
        if not sep:
            raise ParseError("header line %d is not '# key: value'" % (i + 1))
        meta[key.strip()] = value.strip()
        i += 1
    missing = [k for k in HEADER_KEYS if k not in meta]
    if missing:
        raise ParseError("no '# %s: ...' line at the top" % missing[0])
    tables, last_text = [], None
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                block.append(lines[i])
                i += 1
            if len(block) < 3 or not re.fullmatch(r"\|[\s:|-]+\|", block[1].strip()):
                raise ParseError("table without a header and separator at line %d"
                                 % (i - len(block) + 1))
            header = split_row(block[0])
            rows = []
            for raw in block[2:]:
                cells = split_row(raw)
                if len(cells) != len(header):
                    raise ParseError("row with %d cells under %d columns: %r"
                                     % (len(cells), len(header), raw))
                rows.append(dict(zip(header, cells)))
            tables.append({"title": last_text or "", "header": header, "rows": rows})
            continue
        if line and not line.startswith(("target:", "peer:", "note:")):
            last_text = line
        i += 1
    return meta, tables


def source_line(meta):
    """Where a saved output comes from, in one line (charts' foot, README's tables)."""
    parts = ["`%s`" % meta["command"], meta["date"], meta["machine"], meta["compiler"]]
    if meta["peers"] != "none":
        parts.append(meta["peers"])
    return "; ".join(parts)


def number(cell):
    """The first number in a cell ("52.7 ms", "0.793 / 0.425 (1.87x)", "1.21%"), or None."""
    m = re.search(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?", cell)
    if not m:
        return None
    return float(m.group(0).replace(",", ""))


def unit_of(column):
    """The unit a chart's axis shows for a column: a time or a size, else ""."""
    unit = column_unit(column)
    return unit if unit in UNITS else ""


def pick_reference(cfg, names):
    if "reference" in cfg:
        return cfg["reference"] if cfg["reference"] in names else None
    prefixes = cfg["reference_prefix"]
    if isinstance(prefixes, str):
        prefixes = (prefixes,)
    return next((n for p in prefixes for n in names if n.startswith(p)), None)


class Group:
    """Bars sharing one reference: a row group of a table (and one measure of it)."""

    def __init__(self, panel, title, unit):
        self.panel, self.title, self.unit = panel, title, unit
        self.bars = []  # (name, value, value as printed)
        self.ref = None

    def finish(self, cfg):
        if not self.bars:
            raise ParseError("group %r: no values" % self.title)
        self.ref = pick_reference(cfg, [b[0] for b in self.bars])
        if self.ref is None:
            raise ParseError("group %r has no fibersched reference row" % self.title)
        if dict((b[0], b[1]) for b in self.bars)[self.ref] <= 0:
            raise ParseError("group %r: the reference value is not positive" % self.title)
        return self


def chart_long(cfg, table):
    """Groups of bars from a table whose rows are candidates."""
    header, rows = table["header"], table["rows"]
    label = cfg.get("label", "candidate" if "candidate" in header else header[0])
    values = cfg.get("values")
    if not values:
        col = next((c for c in header[1:] if unit_of(c)), None)
        if col is None:
            raise ParseError("no column with a unit among %s" % header)
        values = [(col, None, unit_of(col))]
    for col in [label] + [v[0] for v in values]:
        if col not in header:
            raise ParseError("no column %r among %s" % (col, header))
    group_by, panel_by = cfg.get("group_by"), cfg.get("panel_by")
    groups = {}
    for col, col_title, unit in values:
        for row in rows:
            try:
                title = group_by(row) if group_by else (col_title or "")
                panel = panel_by(row) if panel_by else None
            except KeyError as e:
                raise ParseError("no column %s for the groups" % e)
            if len(values) > 1 and group_by:
                title = "%s, %s" % (col_title, title)
            g = groups.setdefault((panel, title, col), Group(panel, title, unit))
            v = number(row[col])
            if v is not None:  # "-": not measured
                g.bars.append((row[label], v, row[col]))
    return [g.finish(cfg) for g in groups.values()]


def chart_wide(cfg, table):
    """Groups from a table whose rows are cases and whose columns are candidates (first
    column the case, then one column per candidate): one group per row."""
    header = table["header"]
    groups = []
    for row in table["rows"]:
        g = Group(None, row[header[0]], "")
        for c in header[1:]:
            if c in cfg.get("ignore", ()) or number(row[c]) is None:
                continue
            # such cells carry their unit and the peers' ratio, "70.7 ms (1.34x)": keep "70.7 ms"
            g.bars.append((c, number(row[c]), re.sub(r"\s*\(.*\)$", "", row[c])))
        groups.append(g.finish(cfg))
    return groups


def charts_of(bench, text):
    """[(file name, title, command, groups, display names)] for one saved output."""
    cfg = dict(DEFAULT)
    cfg.update(CONFIG.get(bench, {}))
    meta, tables = parse_output(text)
    command = "%s (%s, %s)" % (meta["command"], meta["date"], meta["machine"])
    if not tables:
        raise ParseError("no table")
    out = []
    if cfg.get("charts") is False:
        return out
    for n, table in enumerate(tables, 1):
        if n in cfg.get("skip", ()) or not table["title"].startswith(cfg.get("only", "")):
            continue
        tcfg = dict(cfg)
        tcfg.update(cfg.get("tables", {}).get(n, {}))
        try:
            groups = (chart_wide if tcfg.get("wide") else chart_long)(tcfg, table)
        except ParseError as e:
            raise ParseError("table %d: %s" % (n, e))
        if not groups:
            raise ParseError("table %d: no rows" % n)
        name = bench if len(tables) == 1 else "%s-%d" % (bench, n)
        out.append((name + ".svg", table["title"], command, groups, cfg.get("names", {})))
    return out


# ---- drawing ----

WIDTH = 700
FONT = ("-apple-system, BlinkMacSystemFont, &quot;Segoe UI&quot;, Helvetica, Arial, "
        "sans-serif")
INK, MUTED, GRID = "#1f2328", "#59636e", "#d1d9e0"
FS_REF, FS_OTHER, PEER = "#0969da", "#54aeff", "#8c959f"

# Rough advance widths (in em) of a sans-serif font, enough to lay out labels: there is
# no font metrics library in the standard library.
_NARROW = set("iljt.,:;|!'()[]/ fr-")
_WIDE = set("mwMW%@")


def text_width(s, size):
    w = 0.0
    for ch in s:
        if ch in _NARROW:
            w += 0.32
        elif ch in _WIDE:
            w += 0.86
        elif ch.isupper() or ch == "_":
            w += 0.66
        else:
            w += 0.56
    return w * size


def wrap(s, size, width):
    """Lines of s, each at most width px wide where spaces allow."""
    lines, cur = [], ""
    for word in s.split(" "):
        trial = word if not cur else cur + " " + word
        if cur and text_width(trial, size) > width:
            lines.append(cur)
            cur = word
        else:
            cur = trial
    lines.append(cur)
    return lines


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def fmt(x):
    """Coordinates with one decimal, the same bytes on every platform."""
    s = "%.1f" % x
    return s[:-2] if s.endswith(".0") else s


def ratio_text(r):
    return "%.2fx" % r if r < 100 else "%.0fx" % r


def nice_step(span, most):
    """A round step (1, 2, 2.5 or 5 times a power of ten) giving at most `most` steps."""
    base = 10 ** math.floor(math.log10(span / most))
    for m in (1, 2, 2.5, 5, 10):
        if span / (base * m) <= most:
            return base * m
    return base * 10


class Scale:
    """Ratio -> fraction of the bar area. Linear from 0, or logarithmic over whole decades
    when the ratios span more than 10x (a linear axis would squash all but the longest)."""

    def __init__(self, ratios):
        lo, hi = min(ratios), max(ratios)
        self.log = hi / lo > 10
        if self.log:
            # a decade below the shortest bar, so that a bar at a tick (1.00x) still shows
            self.lo = math.floor(math.log10(lo * 0.7))
            self.hi = math.ceil(math.log10(hi) - 1e-9)
            if self.hi <= self.lo:
                self.hi = self.lo + 1
            self.ticks = [10.0 ** e for e in range(self.lo, self.hi + 1)]
        else:
            step = nice_step(max(hi, 1.0), 5)
            self.top = math.ceil(max(hi, 1.0) / step - 1e-9) * step
            self.ticks = [i * step for i in range(int(round(self.top / step)) + 1)]

    def __call__(self, r):
        if self.log:
            return (math.log10(r) - self.lo) / (self.hi - self.lo)
        return r / self.top

    def tick_text(self, t):
        if self.log:
            return ("%g" % t) + "x"
        return ("%.2f" % t).rstrip("0").rstrip(".") + "x"


def ordered(xs):
    seen = []
    for x in xs:
        if x not in seen:
            seen.append(x)
    return seen


def render(title, command, groups, names):
    """The SVG text of one chart: groups of bars one under the other, in panels side by
    side when the groups have panels (the same group titles in every panel)."""
    pad, panel_gap = 16, 24
    name_size, value_size, title_size, small = 12, 11, 15, 11
    bar_h, row_gap, group_gap = 14, 5, 12
    line_h = name_size + 2

    panels = ordered(g.panel for g in groups)
    titles = ordered(g.title for g in groups)
    by_key = dict(((g.panel, g.title), g) for g in groups)
    pw = (WIDTH - 2 * pad - (len(panels) - 1) * panel_gap) / len(panels)

    # each bar: (shown name, ratio, label, colour); the columns fit their longest entry
    rows_of = {}
    for g in groups:
        refv = dict((b[0], b[1]) for b in g.bars)[g.ref]
        rows = []
        for name, v, printed in g.bars:
            r = v / refv
            colour = (FS_REF if name == g.ref
                      else FS_OTHER if name.startswith("fibersched") else PEER)
            label = "%s (%s%s)" % (ratio_text(r), printed, " " + g.unit if g.unit else "")
            rows.append((names.get(name, name), r, label, colour))
        rows_of[(g.panel, g.title)] = rows
    every = [row for rows in rows_of.values() for row in rows]
    scale = Scale([r for _, r, _, _ in every if r > 0])
    name_w = min(max(text_width(n, name_size) for n, _, _, _ in every),
                 300 if len(panels) == 1 else pw * 0.4)
    value_w = max(text_width(lab, value_size) for _, _, lab, _ in every)

    def name_lines(n):
        return wrap(n, name_size, name_w) if text_width(n, name_size) > name_w else [n]

    def bar_x(i):
        """The bar area of panel i: (left, right)."""
        left = pad + i * (pw + panel_gap) + name_w + 10
        return left, pad + i * (pw + panel_gap) + pw - value_w - 8

    head, grid, bars, labels, foot = [], [], [], [], []
    y = pad
    for line in wrap(title, title_size * 1.08, WIDTH - 2 * pad):  # bold: wider
        y += title_size + 3
        head.append('<text x="%d" y="%s" font-size="%d" font-weight="600">%s</text>'
                    % (pad, fmt(y), title_size, esc(line)))
    y += small + 6
    head.append('<text x="%d" y="%s" font-size="%d" fill="%s">%s</text>' % (
        pad, fmt(y), small, MUTED,
        esc("relative to %s (= 1.00x); lower is better%s"
            % (", ".join(ordered(g.ref for g in groups)),
               "; logarithmic scale" if scale.log else ""))))
    y += 8
    if panels != [None]:
        y += small + 10
        for i, panel in enumerate(panels):
            head.append('<text x="%s" y="%s" font-size="%d" font-weight="600">%s</text>'
                        % (fmt(pad + i * (pw + panel_gap)), fmt(y), small + 2, esc(panel or "")))
    plot_top = y + 6
    y = plot_top

    for title_ in titles:
        if title_:
            y += small + 6
            bars.append('<text x="%d" y="%s" font-size="%d" font-weight="600">%s</text>'
                        % (pad, fmt(y), small + 1, esc(title_)))
            y += 6
        bottom = y
        for i, panel in enumerate(panels):
            x0, x1 = bar_x(i)
            xref = x0 + scale(1.0) * (x1 - x0)
            py = y
            for name, r, label, colour in rows_of.get((panel, title_), []):
                lines = name_lines(name)
                h = max(bar_h, len(lines) * line_h)
                mid = py + h / 2
                ty = mid - (len(lines) - 1) * line_h / 2 + name_size * 0.35
                for k, line in enumerate(lines):
                    bars.append('<text x="%s" y="%s" font-size="%d" text-anchor="end"%s>%s</text>'
                                % (fmt(x0 - 8), fmt(ty + k * line_h), name_size,
                                   ' font-weight="600"' if colour == FS_REF else "", esc(line)))
                xe = max(x0 + scale(r) * (x1 - x0), x0 + 1) if r > 0 else x0
                bars.append('<rect x="%s" y="%s" width="%s" height="%d" fill="%s">'
                            '<title>%s</title></rect>'
                            % (fmt(x0), fmt(mid - bar_h / 2), fmt(xe - x0), bar_h, colour,
                               esc(name + ": " + label)))
                # a label across the 1.00x line gets a white ground, to stay readable
                lw = text_width(label, value_size)
                if xe + 3 < xref < xe + 7 + lw:
                    labels.append('<rect x="%s" y="%s" width="%s" height="%d" fill="#ffffff"/>'
                                  % (fmt(xe + 3), fmt(mid - value_size / 2 - 1), fmt(lw + 4),
                                     value_size + 2))
                labels.append('<text x="%s" y="%s" font-size="%d" stroke="#ffffff" '
                              'stroke-width="3" paint-order="stroke">%s</text>'
                              % (fmt(xe + 5), fmt(mid + value_size * 0.35), value_size, esc(label)))
                py += h + row_gap
            bottom = max(bottom, py)
        y = bottom + group_gap - row_gap
    plot_bottom = y

    # per panel: the grid behind the bars, the 1.00x line over them
    for i in range(len(panels)):
        x0, x1 = bar_x(i)
        for t in scale.ticks:
            x = x0 + scale(t) * (x1 - x0)
            grid.append('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1"/>'
                        % (fmt(x), fmt(plot_top), fmt(x), fmt(plot_bottom), GRID))
            grid.append('<text x="%s" y="%s" font-size="%d" fill="%s" '
                        'text-anchor="middle">%s</text>'
                        % (fmt(x), fmt(plot_bottom + small + 4), small, MUTED, scale.tick_text(t)))
        x = x0 + scale(1.0) * (x1 - x0)
        bars.append('<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5" '
                    'stroke-dasharray="4 3"/>'
                    % (fmt(x), fmt(plot_top), fmt(x), fmt(plot_bottom), INK))

    y = plot_bottom + small + 4
    for line in wrap(command, small, WIDTH - 2 * pad):
        y += small + 6
        foot.append('<text x="%d" y="%s" font-size="%d" fill="%s">%s</text>'
                    % (pad, fmt(y), small, MUTED, esc(line)))
    height = int(math.ceil(y + pad))

    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
           'font-family="%s" fill="%s">' % (WIDTH, height, WIDTH, height, FONT, INK),
           "<title>%s</title>" % esc(title),
           # opaque background: the page behind is dark on GitHub's dark theme
           '<rect width="%d" height="%d" fill="#ffffff"/>' % (WIDTH, height)]
    out.extend(head + grid + bars + labels + foot)
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---- running a benchmark and saving its output ----


def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    except OSError:
        return ""
    return out.splitlines()[0].strip() if out.strip() else ""


def machine_line():
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "")
    except OSError:
        pass
    parts = [model or platform.processor() or "unknown processor",
             "%d CPUs (%s)" % (os.cpu_count() or 1, platform.machine()),
             "%s %s" % (platform.system(), platform.release())]
    if hasattr(os, "getloadavg"):
        parts.append("load average %.2f at the start" % os.getloadavg()[0])
    return ", ".join(parts)


def meson_info(build, what):
    try:
        with open(os.path.join(build, "meson-info", "intro-%s.json" % what), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return []


def compiler_line(build, cc, name=""):
    """The compiler and the flags that matter for speed: as the build directory compiled
    bench/<name>.c (its -O and NDEBUG), or the compiler named by --cc for a command that
    compiles on its own."""
    if cc:
        return first_line([cc, "--version"]) or cc
    compiler = ""
    try:
        with open(os.path.join(build, "meson-logs", "meson-log.txt"), encoding="utf-8") as f:
            for line in f:
                m = re.match(r"C compiler for the host machine: .*?\((\w+) ([\d.]+)", line)
                if m:
                    compiler = "%s %s" % (m.group(1), m.group(2))
    except OSError:
        pass
    flags = []
    try:
        with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
            commands = json.load(f)
        entry = next((e for e in commands
                      if re.search(r"bench/%s\.c(pp)?$" % re.escape(name),
                                   e["file"].replace("\\", "/"))), None)
        if entry:
            words = entry["command"].split()
            flags = [w for w in words if re.fullmatch(r"-O\w*", w)][-1:]
            flags += [w for w in words if w == "-DNDEBUG"][:1]
    except (OSError, ValueError, KeyError):
        pass
    return " ".join([compiler or "unknown compiler"] + flags)


def lace_version(source):
    try:
        with open(os.path.join(source, "CMakeLists.txt"), encoding="utf-8") as f:
            m = re.search(r"project\s*\(\s*lace\s+VERSION\s+([\d.]+)", f.read(), re.I)
            return m.group(1) if m else "of unknown version"
    except OSError:
        return "of unknown version"


# Peers as the outputs name them, and how to find the version the build used.
def peers_line(build, text):
    deps = {}
    for d in meson_info(build, "dependencies"):
        deps.setdefault(d["name"], d.get("version") or "")
    opts = dict((o["name"], o["value"]) for o in meson_info(build, "buildoptions"))
    found = []
    if "oneTBB" in text and "tbb" in deps:
        found.append("oneTBB " + deps["tbb"])
    if "OpenMP" in text and "openmp" in deps:
        found.append("OpenMP %s (%s)" % (deps["openmp"], compiler_line(build, "").split(" -")[0]))
    if "Boost" in text and "boost" in deps:
        found.append("Boost " + deps["boost"])
    if "Lace" in text and opts.get("lace_source"):
        found.append("Lace " + lace_version(opts["lace_source"]))
    if re.search(r"\bGo\b", text):
        go = first_line(["go", "version"])
        m = re.search(r"go(\d[\d.]*)", go)
        found.append("Go " + (m.group(1) if m else "of unknown version"))
    if "MPI" in text:
        found.append(first_line(["mpirun", "--version"]) or "MPI of unknown version")
    return ", ".join(found) or "none"


NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def run(name, argv, build, cc, command):
    """Runs a benchmark (build/bench/<name> with argv, or `command`), checks its output as
    the README and the charts will use it, saves it with the header lines, and updates
    the README and the charts. Nothing is saved when any of that fails."""
    if not NAME.fullmatch(name):
        print("bench_report: %r is not a name for a saved output" % name, file=sys.stderr)
        return 2
    cmd = command if command is not None else [os.path.join(build, "bench", name)] + argv
    if not cmd:
        print("bench_report: no command", file=sys.stderr)
        return 2
    shown_cmd = shlex.join([shown(cmd[0]) if os.path.exists(cmd[0]) else cmd[0]] + cmd[1:])
    started = datetime.datetime.now(datetime.timezone.utc)
    machine = machine_line()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, check=False)
    except OSError as e:
        print("bench_report: %s: %s; nothing saved" % (shown_cmd, e), file=sys.stderr)
        return 1
    sys.stderr.write(proc.stderr.decode("utf-8", "replace"))
    try:
        out = proc.stdout.decode("utf-8")
    except UnicodeDecodeError as e:
        print("bench_report: the output of %s is not UTF-8 (%s); nothing saved" % (shown_cmd, e),
              file=sys.stderr)
        return 1
    if proc.returncode != 0:
        sys.stdout.write(out)
        print("bench_report: %s failed (exit %d), nothing saved" % (shown_cmd, proc.returncode),
              file=sys.stderr)
        return 1
    header = [("command", shown_cmd), ("date", started.strftime("%Y-%m-%d")),
              ("machine", machine), ("compiler", compiler_line(build, cc, os.path.basename(cmd[0]))),
              ("peers", peers_line(build, out))]
    text = "".join("# %s: %s\n" % kv for kv in header) + out
    problems = []
    if out.startswith("# "):
        problems.append("it begins with a line that would read as a header line")
    try:
        charts_of(name, text)
        with open(README, encoding="utf-8") as f:
            blocks, block_errors = readme_blocks(f.read().splitlines())
        for blk in blocks:
            if blk["name"] == name:
                block_text(name, blk["args"], text)
    except (ParseError, OSError) as e:
        problems.append(str(e))
    if problems:
        sys.stdout.write(out)
        print("bench_report: the output of %s: %s; nothing saved" % (shown_cmd, problems[0]),
              file=sys.stderr)
        return 1
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name + ".txt")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print(shown(path))
    return update()


# ---- the README's blocks ----

README = os.path.join(ROOT, "README.md")
START = re.compile(r"<!-- bench ([A-Za-z0-9_][A-Za-z0-9_.-]*)((?: [^<>]*?)?) -->")
END = "<!-- end bench -->"
FENCE = re.compile(r"(```+|~~~+)")


def fence_step(line, fence):
    """The code fence after `line` (None outside one), and whether line opens or closes one."""
    m = FENCE.match(line.lstrip())
    if m and (fence is None or (m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence))):
        return (None if fence else m.group(1)), True
    return fence, False
SPEC_WORD = re.compile(r"(table \d+|chart-only|chart)(?= |$)|columns (.+?)(?= (?:table \d+|chart-only|chart)(?= |$)|$)")


def readme_blocks(lines):
    """The README's blocks, [{"name", "args", "start", "end"}] (line indexes of the
    markers), and [errors]: a marker line that is not exactly a start or an end, a start
    inside a block, an end outside one, a block without its end. Markers in code fences
    are text."""
    blocks, errors, fence, open_block = [], [], None, None
    for i, line in enumerate(lines):
        fence, marker = fence_step(line, fence)
        if marker or fence:
            continue
        start, end = START.fullmatch(line), line == END
        if not start and not end:
            if re.match(r"\s*<!--\s*(end\s*)?bench", line):
                errors.append("README.md:%d: a marker that is neither %r nor %r: %r"
                              % (i + 1, "<!-- bench NAME ... -->", END, line))
            continue
        if start:
            if open_block:
                errors.append("README.md:%d: a block begins inside the block of line %d"
                              % (i + 1, open_block["start"] + 1))
            open_block = {"name": start.group(1), "args": start.group(2), "start": i}
        elif not open_block:
            errors.append("README.md:%d: an end of a block that did not begin" % (i + 1))
        else:
            open_block["end"] = i
            blocks.append(open_block)
            open_block = None
    if open_block:
        errors.append("README.md:%d: a block without its end (%s)" % (open_block["start"] + 1, END))
    return blocks, errors


def saved(name):
    path = os.path.join(RESULTS, name + ".txt")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        raise ParseError("no saved output %s" % shown(path))
    except UnicodeDecodeError as e:
        raise ParseError("%s is not UTF-8 (%s)" % (shown(path), e))


def block_spec(args):
    """{"table": n, "columns": [...] or None, "chart": bool, "table_shown": bool} from the
    words after the name; ParseError on a word it does not know or one given twice."""
    spec = {"table": 1, "columns": None, "chart": False, "table_shown": True}
    rest, seen = args.strip(), set()
    while rest:
        m = SPEC_WORD.match(rest)
        if not m:
            raise ParseError("unknown words %r (known: table N, columns A|B, chart, chart-only)"
                             % rest)
        word = m.group(0)
        kind = word.split(" ")[0]
        if kind == "chart-only":
            kind = "chart"
        if kind in seen:
            raise ParseError("%r given twice" % kind)
        seen.add(kind)
        if kind == "table":
            spec["table"] = int(word.split(" ")[1])
        elif kind == "columns":
            spec["columns"] = [c.strip() for c in word[len("columns "):].split("|")]
            if len(set(spec["columns"])) != len(spec["columns"]) or "" in spec["columns"]:
                raise ParseError("columns %r: each once, none empty" % spec["columns"])
        else:
            spec["chart"] = True
            spec["table_shown"] = word == "chart"
        rest = rest[m.end():].lstrip()
    return spec


def markdown_table(header, rows):
    def cell(c):
        return c.replace("|", "\\|")
    widths = [max([len(h)] + [len(cell(r[h])) for r in rows]) for h in header]
    numeric = [all(number(r[h]) is not None or r[h] in ("-", "") for r in rows) and
               any(number(r[h]) is not None for r in rows) for h in header]
    def line(cells):
        return "| " + " | ".join(c.rjust(w) if num else c.ljust(w)
                                 for c, w, num in zip(cells, widths, numeric)) + " |"
    out = [line(header),
           "|" + "|".join("-" * (w + 1) + ":" if num else "-" * (w + 2)
                          for w, num in zip(widths, numeric)) + "|"]
    out.extend(line([cell(r[h]) for h in header]) for r in rows)
    return "\n".join(out)


def block_text(name, args, text=None):
    """The lines a block shows, from the saved output (or `text`, an output not saved yet)."""
    spec = block_spec(args)
    text = saved(name) if text is None else text
    meta, tables = parse_output(text)
    if not 1 <= spec["table"] <= len(tables):
        raise ParseError("%s has %d tables, no table %d" % (name, len(tables), spec["table"]))
    table = tables[spec["table"] - 1]
    columns = spec["columns"] or table["header"]
    for c in columns:
        if c not in table["header"]:
            raise ParseError("%s table %d has no column %r (it has: %s)"
                             % (name, spec["table"], c, " | ".join(table["header"])))
    out = [markdown_table(columns, table["rows"]), ""] if spec["table_shown"] else []
    out.append("<sub>bench/results/%s.txt: %s</sub>" % (name, source_line(meta)))
    if spec["chart"]:
        chart = name if len(tables) == 1 else "%s-%d" % (name, spec["table"])
        if chart + ".svg" not in [c[0] for c in charts_of(name, text)]:
            raise ParseError("%s table %d has no chart" % (name, spec["table"]))
        alt = table["title"] or name
        out += ["", "![%s](docs/charts/%s.svg)" % (alt.replace("]", ")").replace("[", "("), chart)]
    return "\n".join(out) + "\n"


def readme_updated(text):
    """(the README with every block regenerated, [names shown], [errors]); with errors in
    the markers, the README as it is."""
    lines = text.split("\n")
    blocks, errors = readme_blocks(lines)
    if errors:
        return text, [], errors
    names, out, last = [], [], 0
    for blk in blocks:
        out.extend(lines[last:blk["start"] + 1])
        try:
            body = block_text(blk["name"], blk["args"])
            names.append(blk["name"])
            out.extend(body.rstrip("\n").split("\n"))
        except ParseError as e:
            errors.append("README.md:%d: block %s: %s" % (blk["start"] + 1, blk["name"], e))
            out.extend(lines[blk["start"] + 1:blk["end"]])
        last = blk["end"]
    out.extend(lines[last:])
    return "\n".join(out), names, errors


def blocks_differing(old, new):
    """Line numbers (of the start markers) of the blocks of old that new shows otherwise,
    compared by position."""
    a, b = old.split("\n"), new.split("\n")
    ba, _ = readme_blocks(a)
    bb, _ = readme_blocks(b)
    return [x["start"] + 1 for x, y in zip(ba, bb)
            if a[x["start"]:x["end"] + 1] != b[y["start"]:y["end"] + 1]]


# ---- the prose's figures ----

UNIT = r"(?:ms|ns|us|µs|μs|%|B|KB|MB)"
FIGURE = re.compile(r"(?<![\w.^/])([-−]?)(\d{1,3}(?:,\d{3})+|\d+)?(?:\.(\d+))?"
                    r"(?:([x×X])|(?:\s|&nbsp;|\u00a0|\u202f)*(" + UNIT + r"))(?![A-Za-z0-9])")
BARE = re.compile(r"(?<![\w.^/(])([-−]?)(\d{1,3}(?:,\d{3})+|\d+)\.(\d+)(?![\w.%])")


def unit_name(text):
    return {"µs": "us", "μs": "us", "×": "x", "X": "x"}.get(text, text)


def prose_lines(lines):
    """[(line number, text)] of the prose among `lines` ((number, line) pairs): no code
    (fenced or indented), blocks, comments, images' targets, links' targets or markup.
    A line ending in a number takes the next line's unit ("99.9" and "ms" apart)."""
    out, fence, in_block, in_comment = [], None, False, False
    for n, line in lines:
        fence, marker = fence_step(line, fence)
        if marker or fence:
            continue
        if START.fullmatch(line):
            in_block = True
            continue
        if line == END:
            in_block = False
            continue
        if in_block or (line.startswith("    ") and not re.match(r"\s*([-*+]|\d+\.) ", line)):
            continue
        if in_comment:
            if "-->" not in line:
                continue
            line, in_comment = line.split("-->", 1)[1], False
        line = re.sub(r"<!--.*?-->", "", line)
        if "<!--" in line:
            line, in_comment = line.split("<!--", 1)[0], True
        line = re.sub(r"`[^`]*`", "", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        line = re.sub(r"</?[A-Za-z]+[^>]*>", "", line)
        line = re.sub(r"[*_~]+", " ", line)
        out.append((n, line))
    joined = []
    for n, line in out:
        if joined and re.search(r"\d$", joined[-1][1]) and re.match(r"\s*" + UNIT + r"\b", line):
            joined[-1] = (joined[-1][0], joined[-1][1] + " " + line.lstrip())
            continue
        joined.append((n, line))
    return joined


def figures_in(line):
    """[(text, value, decimals, unit)] of a line of prose: each number with a unit, and
    each number with decimals and no unit of its own, which takes the unit of the nearest
    figure that has one ("42.1 and 23.9 ms", "0.555 ms against 0.479")."""
    found = []
    for m in FIGURE.finditer(line):
        if not (m.group(2) or m.group(3)):
            continue
        value = float((m.group(2) or "0").replace(",", "") + "." + (m.group(3) or "0"))
        found.append((m.start(), m.end(), m.group(0).strip(), -value if m.group(1) else value,
                      len(m.group(3) or ""), unit_name(m.group(4) or m.group(5))))
    bare = []
    for m in BARE.finditer(line):
        if not found or any(a <= m.start() < b for a, b, _, _, _, _ in found):
            continue
        # the unit of a figure it leads into ("42.1 and 23.9 ms", "0.90-1.07x"), else of
        # the last one before it ("0.555 ms against 0.479"), else of the next one
        after = [f for f in found if f[0] >= m.end()]
        before = [f for f in found if f[1] <= m.start()]
        if after and re.fullmatch(r"\s*(and|to|or|-|–|/)\s*", line[m.end():after[0][0]]):
            near = after[0]
        else:
            near = before[-1] if before else after[0]
        value = float(m.group(2).replace(",", "") + "." + m.group(3))
        bare.append((m.start(), m.end(), m.group(0), -value if m.group(1) else value,
                     len(m.group(3)), near[5]))
    return [f[2:] for f in sorted(found + bare)]


def sections(text):
    """[(title, [(line number, line)])] split at every heading outside code (ATX "#", and
    setext: text over a line of "=" or "-")."""
    out, fence, lines = [("", [])], None, text.split("\n")
    for i, line in enumerate(lines):
        fence, marker = fence_step(line, fence)
        if not marker and not fence:
            if re.match(r"#{1,6} ", line):
                out.append((line.lstrip("#").strip(), []))
            elif (i + 1 < len(lines) and re.fullmatch(r"=+|-{2,}", lines[i + 1].strip())
                  and line.strip() and not line.lstrip().startswith(("|", "-", "*", "<", ">"))):
                out.append((line.strip(), []))
        out[-1][1].append((i + 1, line))
    return out


def column_unit(header):
    """The unit of a table column's figures, from its header ("median ms", "RSS B/task",
    "heap bytes", "vs fibersched"), or ""."""
    m = re.search(r"(?<![A-Za-z])(ms|us|ns|µs)(?![A-Za-z])", header)
    if m:
        return unit_name(m.group(1))
    if re.search(r"(?<![A-Za-z])B(?![A-Za-z])|bytes", header):
        return "B"
    if "%" in header:
        return "%"
    if header.startswith("vs ") or " / " in header:
        return "x"
    return ""


TEXT_FIGURE = re.compile(r"(-?\d[\d,]*(?:\.\d+)?)(?:(x)|\s?(" + UNIT + r"))?(?![\w])")


def figures_by_unit(text):
    """{unit: [numbers]} of a saved output, its header lines left out: a table cell has its
    column's unit (or its own, "1.68%", "0.87x"); a number in a line of text the unit
    written after it."""
    found, header = {}, None
    lines = text.splitlines()
    while lines and lines[0].startswith("# "):
        lines = lines[1:]
    for line in lines:
        cells = line.strip()
        if cells.startswith("|"):
            row = [c.strip() for c in cells.strip("|").split("|")]
            if re.fullmatch(r"[\s:|-]+", cells):
                continue
            if header is None:
                header = row
                continue
            for h, c in zip(header, row):
                m = re.fullmatch(r"(-?\d[\d,]*(?:\.\d+)?)\s*(x|%)?", c)
                if m:
                    unit = m.group(2) or column_unit(h)
                    found.setdefault(unit, []).append(float(m.group(1).replace(",", "")))
            continue
        header = None
        for m in TEXT_FIGURE.finditer(line):
            unit = unit_name(m.group(2) or m.group(3) or "")
            found.setdefault(unit, []).append(float(m.group(1).replace(",", "")))
    return found


def found_in(value, decimals, numbers):
    scale = 10 ** decimals
    target = round(value * scale)
    return any(round(x * scale + 1e-9) == target or x == value for x in numbers)


def prose_errors(text):
    errors = []
    for title, lines in sections(text):
        blocks, _ = readme_blocks([l for _, l in lines])
        sources = [blk["name"] for blk in blocks]
        fence = None
        for _, line in lines:
            fence, marker = fence_step(line, fence)
            if not marker and not fence:
                for m in re.finditer(r"<!-- figures from ([^>]*?) -->", line):
                    sources += m.group(1).split()
        sources = list(dict.fromkeys(sources))
        if not sources:
            # a figure where no saved output is named was typed by hand
            for n, line in prose_lines(lines):
                for shown_text, _, _, _ in figures_in(line):
                    errors.append("README.md:%d: %r: the section names no saved output"
                                  % (n, shown_text))
            continue
        numbers = {}
        for name in sources:
            try:
                for unit, xs in figures_by_unit(saved(name)).items():
                    numbers.setdefault(unit, []).extend(xs)
            except ParseError as e:
                errors.append("README section %r: %s" % (title, e))
        for n, line in prose_lines(lines):
            for shown_text, value, decimals, unit in figures_in(line):
                if not found_in(value, decimals, numbers.get(unit, [])):
                    errors.append("README.md:%d: %r (%s) is in none of %s" % (
                        n, shown_text, unit,
                        ", ".join("bench/results/%s.txt" % x for x in sources)))
    return errors


# ---- driver ----



def shown(path):
    """path relative to the repository when inside it, for messages."""
    path = os.path.abspath(path)
    return os.path.relpath(path, ROOT) if os.path.commonpath([path, ROOT]) == ROOT else path


def generate(paths, outdir):
    """Writes the charts of every path into outdir; returns ([written files], [errors])."""
    written, errors = [], []
    for path in paths:
        bench = os.path.splitext(os.path.basename(path))[0]
        try:
            with open(path, encoding="utf-8") as f:
                charts = charts_of(bench, f.read())
        except (ParseError, OSError) as e:
            errors.append("%s: %s" % (shown(path), e))
            continue
        for name, title, command, groups, names in charts:
            svg = render(title, command, groups, names)
            target = os.path.join(outdir, name)
            with open(target, "w", encoding="utf-8", newline="\n") as f:
                f.write(svg)
            try:
                xml.dom.minidom.parseString(svg.encode("utf-8"))
            except Exception as e:  # expat raises its own error types
                errors.append("%s: not valid XML: %s" % (name, e))
            written.append(name)
    return written, errors


def saved_outputs():
    if not os.path.isdir(RESULTS):
        return []
    return sorted(os.path.join(RESULTS, f) for f in os.listdir(RESULTS) if f.endswith(".txt"))


def chart_links(text):
    """Errors for every image of the README in docs/charts that is no chart written."""
    errors = []
    for n, line in enumerate(text.split("\n"), 1):
        for m in re.finditer(r"\]\((docs/charts/[^)]*)\)", line):
            if not os.path.isfile(os.path.join(ROOT, m.group(1))):
                errors.append("README.md:%d: %s is no chart" % (n, m.group(1)))
    return errors


def readme_text():
    with open(README, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ParseError("README.md is not UTF-8 (%s)" % e)


def update():
    """Writes every chart and the README's blocks from the saved outputs; the README is
    left alone while its markers are wrong."""
    paths = saved_outputs()
    os.makedirs(CHARTS, exist_ok=True)
    written, errors = generate(paths, CHARTS)
    for name in os.listdir(CHARTS):
        if name.endswith(".svg") and name not in written:
            os.remove(os.path.join(CHARTS, name))
    names = []
    try:
        old = readme_text()
        new, names, block_errors = readme_updated(old)
        errors += block_errors
        if new != old and not block_errors:
            with open(README, "w", encoding="utf-8", newline="\n") as f:
                f.write(new)
        errors += prose_errors(new) + chart_links(new)
    except ParseError as e:
        errors.append(str(e))
    for e in errors:
        print("bench_report: " + e, file=sys.stderr)
    print("bench_report: %d charts, %d README tables from %d saved outputs"
          % (len(written), len(names), len(paths)))
    return 1 if errors else 0


def check():
    """Regenerates every chart and README block apart and compares with the committed
    ones; checks the prose's figures against the saved outputs."""
    paths = saved_outputs()
    if not paths:
        print("bench_report: no saved outputs in bench/results", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        written, errors = generate(paths, tmp)
        for name in written:
            with open(os.path.join(tmp, name), "rb") as f:
                new = f.read()
            try:
                with open(os.path.join(CHARTS, name), "rb") as f:
                    old = f.read()
            except OSError:
                errors.append("%s: not in docs/charts" % name)
                continue
            if old != new:
                errors.append("%s: differs from what bench/results gives" % name)
    committed = (sorted(f for f in os.listdir(CHARTS) if f.endswith(".svg"))
                 if os.path.isdir(CHARTS) else [])
    for name in committed:
        if name not in written:
            errors.append("%s: made from no saved output" % name)
    names = []
    try:
        text = readme_text()
        new, names, block_errors = readme_updated(text)
        errors += block_errors
        if new != text:
            differing = blocks_differing(text, new)
            errors += ["README.md:%d: the block differs from its saved output" % n
                       for n in differing] or ["README.md differs from what its blocks give"]
        errors += prose_errors(text) + chart_links(text)
    except ParseError as e:
        errors.append(str(e))
    for e in errors:
        print("bench_report: " + e, file=sys.stderr)
    if errors:
        print("bench_report: regenerate with: python3 tools/bench_report.py update "
              "(a prose figure: correct it, or run the benchmark again)", file=sys.stderr)
        return 1
    print("bench_report: %d charts and %d README tables from %d saved outputs, all up to date"
          % (len(written), len(names), len(paths)))
    return 0


def main():
    ap = argparse.ArgumentParser(description="the README's benchmark figures from saved outputs")
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="run a benchmark, save its output, update the README",
                       usage="%(prog)s [--build DIR] [--cc CC] NAME [ARGS... | -- COMMAND...]",
                       allow_abbrev=False)  # --b=... is the benchmark's, not --build
    r.add_argument("name", help="bench_<name> of the build directory, or the output's name")
    r.add_argument("--build", default=os.path.join(ROOT, "build-bench"),
                   help="the Meson build directory of the benchmarks (default: build-bench)")
    r.add_argument("--cc", default="", help="the compiler, for a command that compiles itself")
    sub.add_parser("update", help="the README's tables and the charts from bench/results")
    sub.add_parser("check", help="exit 1 when the README or a chart disagrees with bench/results")
    argv = sys.argv[1:]
    command = None
    if "--" in argv:  # a whole command: taken before argparse, which would drop the "--"
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    if argv[:1] == ["run"]:
        # run's options, before or after the name; what follows the name and its options
        # is the benchmark's arguments
        args, rest = ap.parse_known_args(argv)
        return run(args.name, rest, os.path.abspath(args.build), args.cc, command)
    if command is not None:
        ap.error("-- is for run")
    args = ap.parse_args(argv)
    return update() if args.what == "update" else check()


if __name__ == "__main__":
    sys.exit(main())
