#!/usr/bin/env python3
"""The SVG timeline of tools/trace_summary.py: no two labels overlap, every label of a span
lies inside its bar, and spans are named by the user's functions.

    python3 tests/test_trace_svg.py [TRACE_RUN]

First on synthetic traces made to crowd the timeline (nested spans, long names, spans end
to end, many workers and fibers), then, given examples/trace_run built, on a real run of
it, named with --exe: its spans must carry the functions of the example (hash_range,
loop_root, consumer, producer, fib) and the graph's task names, none of the scheduler's
own functions, and no span of work may be left named by its kind.

Text boxes are measured as the SVG's monospace font draws them: 0.6 em per character
(DejaVu Sans Mono, Menlo, Consolas...), from 0.8 em above the baseline to 0.2 em below.
Python standard library only (and nm, for the real run). Exits 77 (skipped) when nm is
missing for the real run.
"""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "tools", "trace_summary.py")
NS = "{http://www.w3.org/2000/svg}"
ADVANCE, ASCENT, DESCENT = 0.6, 0.8, 0.2

failures = []


def check(condition, what):
    if not condition:
        failures.append(what)
        print("FAIL " + what)


def text_box(t):
    size = float(t.get("font-size"))
    x, y = float(t.get("x")), float(t.get("y"))
    width = len(t.text or "") * ADVANCE * size
    anchor = t.get("text-anchor", "start")
    x0 = x - width if anchor == "end" else x - width / 2 if anchor == "middle" else x
    return (x0, y - ASCENT * size, x0 + width, y + DESCENT * size)


def intersect(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def inside(inner, outer):
    return (outer[0] <= inner[0] + 1e-6 and inner[2] <= outer[2] + 1e-6 and
            outer[1] <= inner[1] + 1e-6 and inner[3] <= outer[3] + 1e-6)


def check_layout(svg, what):
    """No two texts overlap; each label of a span is inside that span's bar."""
    root = ET.fromstring(svg)
    check("monospace" in root.get("font-family", ""), "%s: a monospace font" % what)
    texts, bars, labels = [], [], []
    last_bar = None
    for el in root.iter():
        if el.tag == NS + "rect" and el.find(NS + "title") is not None:
            last_bar = (float(el.get("x")), float(el.get("y")),
                        float(el.get("x")) + float(el.get("width")),
                        float(el.get("y")) + float(el.get("height")))
            bars.append(last_bar)
        elif el.tag == NS + "text":
            box = text_box(el)
            texts.append((box, el.text))
            if el.get("pointer-events") == "none":  # a span's label, after its bar
                labels.append((box, el.text, last_bar))
    for i in range(len(texts)):
        for j in range(i + 1, len(texts)):
            check(not intersect(texts[i][0], texts[j][0]),
                  "%s: labels overlap: %r at %r and %r at %r"
                  % (what, texts[i][1], texts[i][0], texts[j][1], texts[j][0]))
    for box, text, bar in labels:
        check(bar is not None and inside(box, bar),
              "%s: label %r at %r outside its bar %r" % (what, text, box, bar))
    return root, labels


def render(doc, *args):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        out = subprocess.run([sys.executable, TOOL, path, "--svg", path + ".svg"] + list(args),
                             stdout=subprocess.PIPE, universal_newlines=True, check=True)
        with open(path + ".svg", encoding="utf-8") as f:
            return f.read(), out.stdout


def crowded(seed, workers):
    """A trace of nested spans on many fibers: each fiber runs tasks one after another, a
    task may block (a nested span) and run a nested task meanwhile."""
    rng = random.Random(seed)
    names = ["a", "consumer", "parse_a_very_long_function_name", "x" * 30, "fib", "\u00e9t\u00e9"]
    events = []
    for pid in range(1, workers + 1):
        events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                       "args": {"name": "worker %d" % (pid - 1)}})
        for tid in range(1, rng.randint(2, 6)):
            t = rng.randint(0, 2000)
            while t < 90000:
                dur = rng.choice([1, 5, 40, 300, 2000, 9000, 30000])
                events.append({"name": rng.choice(names), "cat": "task", "ph": "X",
                               "ts": t, "dur": dur, "pid": pid, "tid": tid,
                               "args": {"fn": "0x10"}})
                if dur > 10 and rng.random() < 0.6:
                    b0, b1 = t + dur // 5, t + dur - dur // 5
                    events.append({"name": "blocked", "cat": "blocked", "ph": "X",
                                   "ts": b0, "dur": b1 - b0, "pid": pid, "tid": tid,
                                   "args": {"waits_on": rng.choice(["event", "join"])}})
                    if rng.random() < 0.5:
                        events.append({"name": rng.choice(names), "cat": "join", "ph": "X",
                                       "ts": b0 + 1, "dur": max(b1 - b0 - 2, 0), "pid": pid,
                                       "tid": tid, "args": {"fn": "0x20"}})
                t += dur + rng.choice([0, 0, 3, 500])
            if rng.random() < 0.5:
                events.append({"name": "steal", "cat": "steal", "ph": "i", "s": "t",
                               "ts": rng.randint(0, 90000), "pid": pid, "tid": tid,
                               "args": {"victim": 0}})
    return {"traceEvents": events}


def real_run(program):
    if shutil.which("nm") is None:
        print("nm is missing: the real run is skipped")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        subprocess.run([program, path], check=True, stdout=subprocess.PIPE, timeout=300)
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    svg, summary = render(doc, "--exe", program, "--title", "trace_run")
    root, labels = check_layout(svg, "trace_run")
    tips = [t.text for t in root.iter(NS + "title")]
    named = {tip.split(" (")[0] for tip in tips}
    for function in ("loop_root", "hash_range", "consumer", "producer", "fib", "fetch",
                     "parse a", "parse b", "link"):
        check(function in named, "trace_run: a span names %s: %r" % (function, sorted(named)))
    for tip in tips:
        check("fsched_" not in tip, "trace_run: a span names the scheduler's code: " + tip)
        kind = tip.split(" (")[0]
        check(kind not in ("task", "join", "child", "graph task", "advance", "stage"),
              "trace_run: a span of work named by its kind: " + tip)
    check(any(text in ("hash_range", "fib", "consumer") for _, text, _ in labels),
          "trace_run: bars labelled by functions: %r" % [t for _, t, _ in labels])
    for line in ("worker threads: busy + sleep + idle = the span",
                 "fibers' waits: not the workers' time"):
        check(line in summary, "trace_run: the summary says %r:\n%s" % (line, summary))
    return 0


def main(argv):
    for seed in range(6):
        workers = 1 + seed % 4
        svg, _ = render(crowded(seed, workers))
        check_layout(svg, "crowded trace %d (%d workers)" % (seed, workers))
    status = real_run(argv[1]) if len(argv) > 1 else 0
    if failures:
        print("trace svg: %d failures" % len(failures))
        return 1
    print("trace svg: ok")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
