#!/usr/bin/env python3
"""tools/check_layers.py on headers of its own: a header whose calls keep to its layers
passes, and each way of breaking them is found with its message (a call up, through a
macro, by reference, sideways; a private function nothing uses; a banner in no layer or
after a higher layer's; a
table entry that names no banner; the C++ layer calling a private function other than
the declarations' plumbing of their macros).
Standard library only."""

import contextlib
import io
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_layers  # noqa: E402

failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("test_check_layers: FAILED: " + what)


# Every layer calls down, through a macro too; a call written in a comment or a string,
# a member named like a function, a brace opened by either head of an #if, extern "C"
# and a table of function pointers at file scope are no uses of their own.
CLEAN = """\
/* the declarations: a public macro uses a private function, and one they declare */
#define FSCHED_COUNT() fsched__count_for_users()
#define FSCHED_PLUMB() fsched__plumbing()
FIBERSCHED_API int fsched__plumbing(void);

#if defined(FIBERSCHED_IMPLEMENTATION) && !defined(FIBERSCHED_IMPLEMENTATION_ONCE)
#define FIBERSCHED_IMPLEMENTATION_ONCE

/* The layers.
   LAYER low: low
   LAYER middle: middle; shared
   LAYER high: high
   LAYER side (beside high): side */

#ifdef __cplusplus
extern "C" {
#endif
int fsched__outside(void);
#ifdef __cplusplus
}
#endif

/* ===================== */
/*  low: the bottom       */
/* ===================== */

#define FSCHED__LOW(x) fsched__low(x)

static int fsched__low(int x) {
    return x + 1; /* LOW BODY */
}

static int fsched__count_for_users(void) { return 0; }

/* ---- two heads ---- */

#if defined(WIDE)
static int fsched__two_heads(long a) {
#else
static int fsched__two_heads(int a) {
#endif
    return fsched__low((int)a);
}

/* ===================== */
/*  middle: above it      */
/* ===================== */

struct fsched__hooks { int (*fsched__side)(int); };

static int fsched__middle(int x) {
    struct fsched__hooks h;
    h.fsched__side = 0; /* a member, not the function */
    return FSCHED__LOW(x) + fsched__two_heads(x);
}

static int (*const fsched__table[])(int) = {fsched__low, fsched__middle};

/* ---- shared: used from above, a part of the middle ---- */

static int fsched__helper(int x) { return fsched__middle(x); }

/* ===================== */
/*  high: the top         */
/* ===================== */

FIBERSCHED_API int fsched_high(void) {
    /* fsched__side(1) would call sideways */
    const char *s = "fsched__side(1)";
    (void)s;
    return fsched__helper(2) + fsched__table[0](1);
}

/* ===================== */
/*  side: beside high     */
/* ===================== */

static int fsched__side(int x) { return fsched__middle(x); }
FIBERSCHED_API int fsched_side(void) { return fsched__side(0); }
FIBERSCHED_API int fsched__plumbing(void) { return 0; }

#endif /* FIBERSCHED_IMPLEMENTATION */

namespace fsched {
inline int high() { return fsched_high(); }
inline int plumbing() { return fsched__plumbing(); } /* the macros' own, declared above */
}
"""


def line_of(text, needle):
    return text.split("\n").index(next(l for l in text.split("\n") if needle in l)) + 1


def errors(text):
    return [message for line, message in check_layers.check(text).errors]


def errors_at(text):
    return ["%d: %s" % e for e in check_layers.check(text).errors]


def test_clean():
    report = check_layers.check(CLEAN)
    check(report.errors == [], "a header that keeps to its layers passes: %r" % report.errors)
    check([layer.name for layer in report.layers] == ["low", "middle", "high", "side"],
          "the layers are read bottom to top")
    check(report.layers[3].level == report.layers[2].level, "side is on high's level")
    layers = dict((f.name, check_layers.layer_name(f)) for f in report.functions)
    check(layers == {"fsched__low": "low", "fsched__count_for_users": "low",
                     "fsched__two_heads": "low", "fsched__middle": "middle",
                     "fsched_high": "high", "fsched__helper": "middle",
                     "fsched__side": "side", "fsched_side": "side",
                     "fsched__plumbing": "side"},
          "every function is found, in the layer of its banner: %r" % layers)
    uses = set((u.caller.name, u.callee, u.called, u.macro) for u in report.uses)
    check(("fsched__middle", "fsched__low", True, "FSCHED__LOW") in uses,
          "a macro's use is a call of the function it names")
    check(("fsched__two_heads", "fsched__low", True, None) in uses,
          "the body under two heads is read")
    check(("fsched__table", "fsched__middle", False, None) in uses,
          "a table at file scope refers to its functions")
    check(not any(u.callee == "fsched__side" and u.caller.name != "fsched_side"
                  for u in report.uses),
          "comments, strings and members are no uses: %r" % sorted(uses))


def test_upward():
    text = CLEAN.replace("/* LOW BODY */", "fsched__middle(x);")
    check(errors_at(text) == ["%d: fsched__low (low) calls fsched__middle (middle, defined at "
                              "%d)" % (line_of(text, "fsched__middle(x);"),
                                       line_of(text, "static int fsched__middle("))],
          "a call up is found, at its line: %r" % errors_at(text))

    text = CLEAN.replace("#define FSCHED__LOW(x) fsched__low(x)",
                         "#define FSCHED__LOW(x) fsched__low(x)\n"
                         "#define FSCHED__UP() fsched_high()").replace(
        "/* LOW BODY */", "(void)FSCHED__UP(); (void)FSCHED__UP();")
    check(errors(text) == ["fsched__low (low) calls fsched_high (high, defined at %d) through "
                           "FSCHED__UP, 2 times" % line_of(text, "FIBERSCHED_API int fsched_high")],
          "a call up through a macro is found once: %r" % errors(text))

    text = CLEAN.replace("/* LOW BODY */", "(void)&fsched__helper;")
    check(errors(text) == ["fsched__low (low) refers to fsched__helper (middle, defined at %d)"
                           % line_of(text, "static int fsched__helper(")],
          "a reference up is found: %r" % errors(text))


def test_sideways():
    text = CLEAN.replace("(void)s;", "(void)s; (void)fsched__side(1);")
    check(errors(text) == ["fsched_high (high) calls fsched__side (side, defined at %d)"
                           % line_of(text, "static int fsched__side(")],
          "a call sideways is found: %r" % errors(text))
    text = CLEAN.replace("LAYER side (beside high)", "LAYER side (beside middle)")
    check(errors(text) == ["layer side: beside middle, which is not a layer of the level "
                           "below"], "beside only the level below: %r" % errors(text))


def test_unused():
    text = CLEAN.replace("static int fsched__count_for_users",
                         "static void fsched__orphan(void) { fsched__orphan(); }\n"
                         "static int fsched__count_for_users")
    check(errors_at(text) == ["%d: fsched__orphan (low) is defined but used from nowhere"
                              % line_of(text, "fsched__orphan(void)")],
          "a private function used only by itself is found: %r" % errors_at(text))
    text = CLEAN.replace("#define FSCHED_COUNT() fsched__count_for_users()", "")
    check(errors(text) == ["fsched__count_for_users (low) is defined but used from nowhere"],
          "a private function the public macro no longer uses is found: %r" % errors(text))


def test_parenthesized_name():
    text = CLEAN.replace("static int fsched__count_for_users",
                         "static int fsched__behind(void) { return 0; }\n"
                         "FIBERSCHED_API int(fsched_paren)(void) { return fsched__behind(); }\n"
                         "static int fsched__count_for_users")
    report = check_layers.check(text)
    check(report.errors == [], "a definition as (name)(...) is a function: %r" % report.errors)
    check("fsched_paren" in [f.name for f in report.functions],
          "it is found by its name: %r" % [f.name for f in report.functions])


def test_banners_and_table():
    text = CLEAN.replace("#ifdef __cplusplus\nextern",
                         "/* ---- stray ---- */\n\n#ifdef __cplusplus\nextern")
    check(errors_at(text) == ["%d: banner \"stray\" maps to no layer"
                              % line_of(text, "---- stray")],
          "a banner before every section, named nowhere, is found: %r" % errors_at(text))
    text = CLEAN.replace("/*  side: beside high     */", "/*  aside: beside high    */")
    check(sorted(errors(text)) == ["banner \"aside: beside high\" maps to no layer",
                                   "layer side: \"side\" names no banner"],
          "a section in no layer, and the entry that names nothing, are found: %r"
          % errors(text))
    text = CLEAN.replace("LAYER middle: middle; shared", "LAYER middle: middle")
    check(errors(text) == [], "a part banner falls to its section's layer: %r" % errors(text))
    layers = dict((f.name, check_layers.layer_name(f)) for f in check_layers.check(text).functions)
    check(layers["fsched__helper"] == "middle", "... which is middle's here")
    text = CLEAN.replace("LAYER low: low", "LAYER low: low; late").replace(
        "/* ---- shared:", "/* ---- late: low's, but after the middle ---- */\n\n/* ---- shared:")
    check(errors_at(text) == ["%d: banner \"late: low's, but after the middle\" (low) comes after "
                              "layer middle: the file reads bottom up" % line_of(text, "---- late:")],
          "a banner of a lower layer after a higher one is found: %r" % errors_at(text))
    text = CLEAN.replace("LAYER high: high", "LAYER high: high; low")
    check("banner \"low: the bottom\" is in layers low and high" in errors(text),
          "a banner in two layers is found: %r" % errors(text))
    text = CLEAN.replace("   LAYER middle: middle; shared\n",
                         "   LAYER middle: middle;\n         shared\n")
    check(errors(text) == [], "a LAYER line continues on a deeper line: %r" % errors(text))


def test_cpp():
    text = CLEAN.replace("return fsched_high(); }", "return fsched__helper(0); }")
    check(errors(text) == ["C++ calls fsched__helper (middle, defined at %d), which is private"
                           % line_of(text, "static int fsched__helper(")],
          "the C++ layer calling a private function is found: %r" % errors(text))
    text = CLEAN.replace("FIBERSCHED_API int fsched__plumbing(void);\n", "")
    check(errors(text) == ["C++ calls fsched__plumbing (side, defined at %d), which is private"
                           % line_of(text, "int fsched__plumbing(void) {")],
          "only the private functions the declarations declare are the C++ layer's: %r"
          % errors(text))


def test_main():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "h.h")
        for text, rc, last in ((CLEAN, 0, "9 functions, "),
                               (CLEAN.replace("/* LOW BODY */", "fsched__middle(x);"), 1,
                                "1 error in")):
            with open(path, "w") as f:
                f.write(text)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                got = check_layers.main([path, "--list", "--table"])
            printed = out.getvalue().splitlines()
            check(got == rc, "exit %d: %r" % (rc, printed))
            check(printed and printed[-1].startswith(path + ": ") and last in printed[-1],
                  "the last line sums up: %r" % printed[-1:])
            check("%s:%d: fsched__middle (middle)" % (path, line_of(text, "int fsched__middle("))
                  in printed, "--list prints the layer of every function")
            check("side (level 2): side" in printed, "--table prints the table read")


def main():
    test_clean()
    test_upward()
    test_sideways()
    test_unused()
    test_parenthesized_name()
    test_banners_and_table()
    test_cpp()
    test_main()
    if failures:
        print("test_check_layers: %d checks failed" % failures)
        return 1
    print("test_check_layers: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
