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

    # a number without a unit of its own takes the unit of the figure it leads into
    led = filled.replace("It takes %s ns" % value, "It takes %s and %s ns" % (wrong, value))
    check(len(bench_report.prose_errors(led)) == 1, "a number leading into a figure is checked")
    split = filled.replace("It takes %s ns" % value, "It takes %s\nns" % wrong)
    check(len(bench_report.prose_errors(split)) == 1, "a figure split over two lines is checked")

    # markers: anything but a well-formed start and end is an error, and the README is
    # left as it is
    for bad in (filled.replace("<!-- end bench -->", "<!-- end bench-->"),
                filled.replace("<!-- end bench -->", "<!-- end bench --> "),
                filled.replace("<!-- end bench -->\n", ""),
                filled.replace("<!-- bench %s chart -->" % name, "<!--bench %s chart -->" % name),
                filled + "\n<!-- end bench -->\n",
                filled.replace("<!-- end bench -->", "<!-- bench %s -->\n<!-- end bench -->" % name, 1),
                readme.replace(" chart -->", " chart tabel 2 -->"),
                readme.replace(" chart -->", " table 1 table 1 -->")):
        new, _, errs = bench_report.readme_updated(bad)
        check(errs != [] and new == bad, "a wrong marker is an error: %r" % bad[:120])
    # blocks are compared where they are: the first of two copies, edited, is found
    twice = filled.replace("<!-- end bench -->\n", "<!-- end bench -->\n" + filled.split(
        "### Switch\n\n", 1)[1].split("It takes")[0], 1)
    new, _, errs = bench_report.readme_updated(twice)
    check(new == twice and not errs, "two copies of a block are filled alike")
    first_edited = twice.replace(" " + value + " |", " " + wrong + " |", 1)
    check(bench_report.blocks_differing(first_edited, new) != [], "an edited first copy is found")
    # a chart that the output does not have is refused
    check(bench_report.readme_updated(readme.replace(" chart -->", " table 1 chart -->").replace(
        name, "bench_echo"))[2] != [], "a chart of an output without charts is refused")

    # run saves nothing from a failed or tableless command, or under a name that is a path
    path = os.path.join(bench_report.RESULTS, name + ".txt")
    before = open(path, "rb").read()
    build = os.path.join(ROOT, "build-bench")
    check(bench_report.run(name, [], build, "", ["/bin/sh", "-c", "echo hello"]) == 1,
          "an output without a table is refused")
    check(bench_report.run(name, [], build, "", ["/bin/sh", "-c", "exit 3"]) == 1,
          "a failed command is refused")
    check(bench_report.run(name, [], build, "", ["/nonexistent/command"]) == 1,
          "a command that does not exist is refused")
    check(open(path, "rb").read() == before, "the saved output is as it was")
    check(bench_report.run("../escaped", [], build, "", ["/bin/true"]) == 2,
          "a name that is a path is refused")

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
