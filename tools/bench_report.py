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
    python3 tools/bench_report.py run footprint -- bench/footprint.sh
    python3 tools/bench_report.py update                  # README and charts from bench/results
    python3 tools/bench_report.py check                   # exit 1 when they disagree

`check` fails when a README block or a chart differs from what its saved output gives,
and when a figure in the prose of a README section (a number with a unit: ms, ns, us, x,
%, B, KB, MB) is not a number with that unit in the saved outputs that section shows
(or names in "<!-- figures from NAME NAME2 -->"), rounded as the prose writes it (a
table cell has its column's unit), and when such a figure is in a section that names no
saved output. A setting rather
than a measurement is written as code (`--poll-us=20`), in binary units (16 KiB stacks)
or with its unit in words.

Standard library only, so that regenerating needs nothing but Python 3.
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
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
    for u in UNITS:
        if re.search(r"(?<![A-Za-z])%s(?![A-Za-z])" % re.escape(u), column):
            return u
    return ""


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


def run(name, argv, build, cc):
    """Runs a benchmark (build/bench/<name> with argv, or the command after --), saves its
    output with the header lines, and updates the README and the charts."""
    if argv and argv[0] == "--":
        argv = argv[1:]
        cmd = argv
    elif argv and "/" in argv[0]:  # argparse may have taken the "--" before a command
        cmd = argv
    else:
        cmd = [os.path.join(build, "bench", name)] + argv
    if not cmd:
        print("bench_report: no command", file=sys.stderr)
        return 2
    shown_cmd = " ".join([shown(cmd[0]) if os.path.exists(cmd[0]) else cmd[0]] + cmd[1:])
    started = datetime.datetime.now(datetime.timezone.utc)
    machine = machine_line()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout)
        print("bench_report: %s failed (exit %d), nothing saved" % (shown_cmd, proc.returncode),
              file=sys.stderr)
        return 1
    header = [("command", shown_cmd), ("date", started.strftime("%Y-%m-%d")),
              ("machine", machine), ("compiler", compiler_line(build, cc, os.path.basename(cmd[0]))),
              ("peers", peers_line(build, proc.stdout))]
    text = "".join("# %s: %s\n" % kv for kv in header) + proc.stdout
    try:
        parse_output(text)
    except ParseError as e:
        sys.stdout.write(proc.stdout)
        print("bench_report: the output of %s: %s; nothing saved" % (shown_cmd, e), file=sys.stderr)
        return 1
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, name + ".txt")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print(shown(path))
    return update()


# ---- the README's blocks ----

README = os.path.join(ROOT, "README.md")
BLOCK = re.compile(r"<!-- bench (\S+)((?: [^>]*?)?) -->\n(.*?)<!-- end bench -->\n", re.S)


def saved(name):
    path = os.path.join(RESULTS, name + ".txt")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        raise ParseError("no saved output %s" % shown(path))


def block_spec(args):
    """{"table": n, "columns": [...], "chart": bool} from the words after the name."""
    spec = {"table": 1, "columns": None, "chart": False}
    m = re.search(r"\btable (\d+)", args)
    if m:
        spec["table"] = int(m.group(1))
    m = re.search(r"\bcolumns (.+?)(?= chart(-only)?\b|$)", args.strip())
    if m:
        spec["columns"] = [c.strip() for c in m.group(1).split("|")]
    spec["chart"] = bool(re.search(r"\bchart(-only)?\b", args))
    spec["table_shown"] = not re.search(r"\bchart-only\b", args)
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


def block_text(name, args):
    spec = block_spec(args)
    meta, tables = parse_output(saved(name))
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
        alt = table["title"] or name
        out += ["", "![%s](docs/charts/%s.svg)" % (alt.replace("]", ")").replace("[", "("), chart)]
    return "\n".join(out) + "\n"


def readme_updated(text):
    """The README with every block regenerated; ([names shown], [errors])."""
    names, errors = [], []

    def fill(m):
        name, args = m.group(1), m.group(2)
        try:
            body = block_text(name, args)
        except ParseError as e:
            errors.append("README block %s: %s" % (name, e))
            return m.group(0)
        names.append(name)
        return "<!-- bench %s%s -->\n%s<!-- end bench -->\n" % (name, args, body)

    return BLOCK.sub(fill, text), names, errors


# ---- the prose's figures ----

FIGURE = re.compile(r"(?<![\w.^/])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?"
                    r"(?:(x)|\s?(ms|ns|us|µs|%|B|KB|MB))(?![\w/])")


def prose_of(lines):
    """The section's text that is prose: no code, blocks, comments, images or link targets."""
    out, fence, in_block = [], False, False
    for n, line in lines:
        if line.startswith("```"):
            fence = not fence
            continue
        if line.startswith("<!-- bench "):
            in_block = True
        if line.startswith("<!-- end bench"):
            in_block = False
            continue
        if fence or in_block or line.startswith("    ") or line.startswith("!["):
            continue
        line = re.sub(r"`[^`]*`", "", line)
        line = re.sub(r"<!--.*?-->", "", line)
        line = re.sub(r"\]\([^)]*\)", "]", line)
        out.append((n, line))
    return out


def sections(text):
    """[(title, [(line number, line)])] split at every heading outside code."""
    out, fence = [("", [])], False
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fence = not fence
        if not fence and re.match(r"#{1,6} ", line):
            out.append((line.lstrip("#").strip(), []))
        out[-1][1].append((n, line))
    return out


def column_unit(header):
    """The unit of a table column's figures, from its header ("median ms", "RSS B/task",
    "vs fibersched"), or ""."""
    m = re.search(r"(?<![A-Za-z])(ms|us|ns|µs)(?![A-Za-z])", header)
    if m:
        return m.group(1).replace("µs", "us")
    if re.search(r"(?<![A-Za-z])B(?![A-Za-z])|bytes", header):
        return "B"
    if "%" in header:
        return "%"
    if header.startswith("vs ") or " / " in header:
        return "x"
    return ""


TEXT_FIGURE = re.compile(r"(-?\d[\d,]*(?:\.\d+)?)(?:(x)|\s?(ms|ns|us|µs|%|B|KB|MB))?(?![\w])")


def figures_by_unit(text):
    """{unit: [numbers]} of a saved output: a table cell has its column's unit (or its
    own, "1.68%", "0.87x"); a number in a line of text the unit written after it."""
    found, header = {}, None
    for line in text.splitlines():
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
            unit = (m.group(2) or m.group(3) or "").replace("µs", "us")
            found.setdefault(unit, []).append(float(m.group(1).replace(",", "")))
    return found


def found_in(value, decimals, numbers):
    scale = 10 ** decimals
    target = round(value * scale)
    return any(round(x * scale + 1e-9) == target or x == value for x in numbers)


def prose_errors(text):
    errors = []
    for title, lines in sections(text):
        body = "\n".join(l for _, l in lines)
        names = BLOCK.findall(body + "\n")
        sources = [n for n, _, _ in names]
        for m in re.finditer(r"<!-- figures from ([^>]*?) -->", body):
            sources += m.group(1).split()
        if not sources:
            # a figure where no saved output is named was typed by hand
            for n, line in prose_of(lines):
                for m in FIGURE.finditer(line):
                    errors.append("README.md:%d: %r: the section names no saved output"
                                  % (n, m.group(0)))
            continue
        numbers = {}
        for name in sources:
            try:
                for unit, xs in figures_by_unit(saved(name)).items():
                    numbers.setdefault(unit, []).extend(xs)
            except ParseError as e:
                errors.append("README section %r: %s" % (title, e))
        for n, line in prose_of(lines):
            for m in FIGURE.finditer(line):
                value = float(m.group(1).replace(",", "") + "." + (m.group(2) or "0"))
                unit = (m.group(3) or m.group(4)).replace("µs", "us")
                if not found_in(value, len(m.group(2) or ""), numbers.get(unit, [])):
                    errors.append("README.md:%d: %r is in none of %s" % (n, m.group(0), ", ".join(
                        "bench/results/%s.txt" % s for s in sources)))
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


def update():
    """Writes every chart and the README's blocks from the saved outputs."""
    paths = saved_outputs()
    os.makedirs(CHARTS, exist_ok=True)
    written, errors = generate(paths, CHARTS)
    for name in os.listdir(CHARTS):
        if name.endswith(".svg") and name not in written:
            os.remove(os.path.join(CHARTS, name))
    with open(README, encoding="utf-8") as f:
        old = f.read()
    new, names, block_errors = readme_updated(old)
    errors += block_errors + prose_errors(new)
    if new != old:
        with open(README, "w", encoding="utf-8", newline="\n") as f:
            f.write(new)
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
    with open(README, encoding="utf-8") as f:
        text = f.read()
    new, names, block_errors = readme_updated(text)
    errors += block_errors
    if new != text:
        old_blocks = dict((m.group(1) + m.group(2), m.group(0)) for m in BLOCK.finditer(text))
        for m in BLOCK.finditer(new):
            if old_blocks.get(m.group(1) + m.group(2)) != m.group(0):
                errors.append("README block %s: differs from its saved output" % m.group(1))
    errors += prose_errors(text)
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
    r = sub.add_parser("run", help="run a benchmark, save its output, update the README")
    r.add_argument("name", help="bench_<name> of the build directory, or the output's name")
    r.add_argument("--build", default=os.path.join(ROOT, "build-bench"),
                   help="the Meson build directory of the benchmarks (default: build-bench)")
    r.add_argument("--cc", default="", help="the compiler, for a command that compiles itself")
    r.add_argument("args", nargs=argparse.REMAINDER,
                   help="the benchmark's arguments, or -- and a whole command")
    sub.add_parser("update", help="the README's tables and the charts from bench/results")
    sub.add_parser("check", help="exit 1 when the README or a chart disagrees with bench/results")
    argv = sys.argv[1:]
    # run's own options may come after the name: argparse would leave them to the
    # benchmark's arguments, which take everything that follows the name
    if argv[:1] == ["run"]:
        head, i = argv[:2], 2
        while i + 1 < len(argv) and argv[i] in ("--cc", "--build"):
            head += argv[i:i + 2]
            i += 2
        argv = head[:1] + head[2:] + head[1:2] + argv[i:]
    args = ap.parse_args(argv)
    if args.what == "run":
        return run(args.name, args.args, os.path.abspath(args.build), args.cc)
    return update() if args.what == "update" else check()


if __name__ == "__main__":
    sys.exit(main())
