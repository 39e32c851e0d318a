#!/usr/bin/env python3
"""Bar charts (SVG) of the benchmarks' Markdown tables, for the README.

Input: saved benchmark outputs, bench/results/<bench>.txt: the first line is
"# <command> (<date, machine>)", the rest the benchmark's standard output unchanged.
Output: one SVG per table, docs/charts/<bench>.svg (or <bench>-<n>.svg when the output
has several tables): per group of rows, each candidate's time relative to fibersched's
at the same setting (fibersched = 1.00x, lower is better).

    python3 tools/bench_charts.py                 # every file in bench/results/
    python3 tools/bench_charts.py bench/results/bench_fib.txt
    python3 tools/bench_charts.py --check         # regenerate apart and compare: exit 1 if
                                                  # a table fails or a chart is out of date

Standard library only, so that regenerating needs nothing but Python 3.
"""

import argparse
import math
import os
import re
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
#   reference_prefix  instead of reference: the first row whose name starts so
#   wide       True when candidates are columns and groups are rows (see chart_wide);
#              ignore: columns of such a table that are no candidate
#   skip       indexes (1-based) of tables that compare nothing with a peer
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
    "bench_wake": {
        "values": [("median us/trip", None, "us")],
        "group_by": lambda r: "threads: " + r["threads"],
        "reference": "fibersched: fsched_event",
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


def parse_output(text):
    """(command, tables): each table is {"title", "header", "rows"}, its title the nearest
    line of text above it (the first output line for the first table)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        raise ParseError("first line is not '# <command>'")
    command = lines[0][2:].strip()
    tables, last_text, i = [], None, 1
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
    return command, tables


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
    return next((n for n in names if n.startswith(cfg["reference_prefix"])), None)


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
    command, tables = parse_output(text)
    if not tables:
        raise ParseError("no table")
    out = []
    for n, table in enumerate(tables, 1):
        if n in cfg.get("skip", ()):
            continue
        try:
            groups = (chart_wide if cfg.get("wide") else chart_long)(cfg, table)
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


def check():
    """Regenerates every chart apart and compares with the committed ones: fails on a
    table that does not parse, invalid XML, a chart that differs, is missing or is stale."""
    paths = saved_outputs()
    if not paths:
        print("bench_charts: no saved outputs in bench/results", file=sys.stderr)
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
    for e in errors:
        print("bench_charts: " + e, file=sys.stderr)
    if errors:
        print("bench_charts: regenerate with: python3 tools/bench_charts.py", file=sys.stderr)
        return 1
    print("bench_charts: %d charts from %d outputs, all up to date" % (len(written), len(paths)))
    return 0


def main():
    ap = argparse.ArgumentParser(description="SVG charts of saved benchmark outputs")
    ap.add_argument("files", nargs="*", help="saved outputs (default: every bench/results/*.txt)")
    ap.add_argument("--out", default=CHARTS, help="directory of the charts (default: docs/charts)")
    ap.add_argument("--check", action="store_true",
                    help="regenerate into a temporary directory and compare with docs/charts")
    args = ap.parse_args()
    if args.check:
        return check()
    paths = args.files or saved_outputs()
    if not paths:
        print("bench_charts: no saved outputs", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    written, errors = generate(paths, args.out)
    for e in errors:
        print("bench_charts: " + e, file=sys.stderr)
    for name in written:
        print(shown(os.path.join(args.out, name)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
