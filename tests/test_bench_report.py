#!/usr/bin/env python3
"""tools/bench_report.py's check, on a README of its own: a block and the figures quoted
beside it agree with a saved output, and each kind of disagreement is found (a table
edited by hand, a figure typed by hand, a block naming no saved output, a header line
missing). Uses the saved outputs in bench/results; standard library only."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import bench_report  # noqa: E402

failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("test_bench_report: FAILED: " + what)


def main():
    name = "bench_switch"
    meta, tables = bench_report.parse_output(bench_report.saved(name))
    for key in bench_report.HEADER_KEYS:
        check(meta.get(key), "the saved output says its " + key)
    row = tables[0]["rows"][0]
    value = row["ns/switch"]  # as printed, e.g. "2.46"
    wrong = "%.2f" % (float(value) + 1.5)

    readme = ("# X\n\n### Switch\n\n<!-- bench %s chart -->\n<!-- end bench -->\n\n"
              "It takes %s ns, %s.\n" % (name, value, row["vs floor"]))
    filled, names, errors = bench_report.readme_updated(readme)
    check(names == [name] and not errors, "the block is filled: %r" % errors)
    check(row["candidate"] in filled and "<sub>bench/results/%s.txt: `" % name in filled,
          "the block holds the table and where it comes from")
    check(("docs/charts/%s.svg" % name) in filled, "the block shows its chart")
    check(bench_report.readme_updated(filled)[0] == filled, "filling again changes nothing")
    check(bench_report.prose_errors(filled) == [], "the quoted figures are found: %r"
          % bench_report.prose_errors(filled))
    # rounded as written: one decimal of a two-decimal figure is still found
    rounded = filled.replace("It takes %s ns" % value, "It takes %.1f ns" % float(value))
    check(bench_report.prose_errors(rounded) == [], "a figure rounded as written is found")

    typed = filled.replace("It takes %s ns" % value, "It takes %s ns" % wrong)
    errors = bench_report.prose_errors(typed)
    check(len(errors) == 1 and wrong in errors[0], "a figure typed by hand is found: %r" % errors)

    edited = filled.replace(" " + value + " |", " " + wrong + " |", 1)
    check(edited != filled, "the test edits a cell")
    check(bench_report.readme_updated(edited)[0] != edited, "a table edited by hand is found")

    # a setting, in code or in binary units, is not a figure
    settings = filled + "\nWith `--poll-us=20` and 16 KiB stacks.\n"
    check(bench_report.prose_errors(settings) == [], "settings are not figures")

    # a figure in a section that names no saved output was typed by hand
    orphan = filled + "\n### Elsewhere\n\nIt takes %s ns there too.\n" % value
    errors = bench_report.prose_errors(orphan)
    check(len(errors) == 1 and "names no saved output" in errors[0],
          "a figure under no saved output is found: %r" % errors)
    # a figure is looked for with its unit: the switch's time is no ratio
    unit = filled.replace("It takes %s ns" % value, "It takes %sx" % value)
    check(len(bench_report.prose_errors(unit)) == 1, "a figure is found with its own unit")

    missing = readme.replace(name, "bench_nothing_saved")
    check(bench_report.readme_updated(missing)[2] != [], "a block naming no saved output fails")

    text = bench_report.saved(name)
    cut = "".join(l for l in text.splitlines(True) if not l.startswith("# peers:"))
    try:
        bench_report.parse_output(cut)
        check(False, "an output without its peers line is refused")
    except bench_report.ParseError as e:
        check("peers" in str(e), "the refusal names the missing line: %s" % e)
    if failures:
        return 1
    print("test_bench_report: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
