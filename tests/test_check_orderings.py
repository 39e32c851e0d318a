#!/usr/bin/env python3
"""tools/check_orderings.py on a header of its own: each atomic operation weaker than
seq_cst with its argument where the rule lets it stand (on its statement, in the comment
above, for a paragraph, for a function or a loop) passes, and each one without (no
comment, a comment naming another ordering, one whose paragraph ended before it, a wrapper
whose ordering is no constant, the C++ layer's) is found with its message.
Standard library only."""

import contextlib
import io
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import check_orderings  # noqa: E402

failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print("test_check_orderings: FAILED: " + what)


# Every weak operation here has its argument; the ones marked NONE and OTHER are the
# places the tests take it away.
CLEAN = """\
/* declarations: a public macro's look, relaxed: a hint */
#define FSCHED_PEEK(p) __atomic_load_n((p), __ATOMIC_RELAXED)

#if defined(FIBERSCHED_IMPLEMENTATION) && !defined(FIBERSCHED_IMPLEMENTATION_ONCE)
#define FIBERSCHED_IMPLEMENTATION_ONCE

#define FSCHED__RELAXED __ATOMIC_RELAXED
#define FSCHED__ACQUIRE __ATOMIC_ACQUIRE
#define FSCHED__RELEASE __ATOMIC_RELEASE
#define FSCHED__ACQ_REL __ATOMIC_ACQ_REL
#define FSCHED__SEQ_CST __ATOMIC_SEQ_CST
#define FSCHED__LOAD(p, mo) __atomic_load_n((p), (mo))
#define FSCHED__STORE(p, v, mo) __atomic_store_n((p), (v), (mo))
#define FSCHED__FETCH_ADD(p, v, mo) __atomic_fetch_add((p), (v), (mo))
#define FSCHED__FETCH_SUB(p, v, mo) __atomic_fetch_sub((p), (v), (mo))
#define FSCHED__FETCH_OR(p, v, mo) __atomic_fetch_or((p), (v), (mo))
#define FSCHED__FETCH_AND(p, v, mo) __atomic_fetch_and((p), (v), (mo))
#define FSCHED__EXCHANGE(p, v, mo) __atomic_exchange_n((p), (v), (mo))
#define FSCHED__CAS(p, expected, desired, succ, fail) \\
    __atomic_compare_exchange_n((p), (expected), (desired), 0, (succ), (fail))
#define FSCHED__CAS_WEAK(p, expected, desired, succ, fail) \\
    __atomic_compare_exchange_n((p), (expected), (desired), 1, (succ), (fail))
#define FSCHED__FENCE(mo) __atomic_thread_fence(mo)

/* a macro of the implementation: its directive is its statement */
#define FSCHED__HINT(p) FSCHED__LOAD((p), FSCHED__RELAXED) /* relaxed: a hint */

static unsigned a, b, c;

static unsigned fsched__same_statement(void) {
    unsigned x = FSCHED__LOAD(&a, FSCHED__ACQUIRE); /* acquire: pairs with the store */
    FSCHED__STORE(&b, 1u, /* release: publishes x */
                  FSCHED__RELEASE);
    if (FSCHED__FETCH_ADD(&c, 1u, FSCHED__RELAXED) == 0) { /* relaxed: a count */
        x++;
    }
    return x + FSCHED__HINT(&a);
}

static void fsched__above(void) {
    unsigned e = 0;
    FSCHED__FETCH_SUB(&a, 1u, FSCHED__SEQ_CST);
    /* acq_rel: the one CAS both takes and gives */
    FSCHED__CAS(&a, &e, 1u, FSCHED__ACQ_REL, FSCHED__RELAXED);

    /* Relaxed: statistics, read
       by nobody who needs order. */
    FSCHED__FETCH_OR(&b, 1u, FSCHED__RELAXED);
#if defined(TWO)
    e = 2;
#else
    FSCHED__FETCH_OR(&b, 2u, FSCHED__RELAXED);
#endif

    FSCHED__FETCH_AND(&b, 1u, FSCHED__RELAXED); /* NONE */
    if (e) {
        /* relaxed: inside the block only */
        FSCHED__EXCHANGE(&c, 1u, FSCHED__RELAXED);
    }
    FSCHED__EXCHANGE(&c, 2u, FSCHED__RELAXED); /* NONE */
}

/* Release: every store here publishes the fields written before it. */
static void fsched__function(void) {
    FSCHED__STORE(&a, 1u, FSCHED__RELEASE);

    FSCHED__STORE(&b, 1u, FSCHED__RELEASE); /* OTHER */
}

static void fsched__loop(void) {
    unsigned e = 0;
    /* acquire: pairs with the owner's release */
    while (!FSCHED__CAS_WEAK(&a, &e, 1u, FSCHED__ACQUIRE, FSCHED__RELAXED)) {
        e = 0;

        FSCHED__FENCE(FSCHED__ACQUIRE);
    }
#if defined(ONE)
    /* relaxed: only this thread writes c */
    FSCHED__STORE(&c, 1u, FSCHED__RELAXED);
#else
    FSCHED__STORE(&c, 2u, FSCHED__RELAXED); /* NONE */
#endif
}

#endif /* FIBERSCHED_IMPLEMENTATION */

#include <atomic>
namespace fsched {
inline int cpp(std::atomic<int> &n) {
    n.store(1, std::memory_order_seq_cst);
    return n.fetch_add(1, std::memory_order_relaxed); /* relaxed: a count */
}
}
"""


def line_of(text, needle, nth=1):
    lines = text.split("\n")
    found = [i + 1 for i, line in enumerate(lines) if needle in line]
    return found[nth - 1]


def errors_at(text):
    return ["%d: %s" % e for e in check_orderings.check(text).errors]


def test_clean():
    report = check_orderings.check(CLEAN)
    wanted = ["%d: FSCHED__FETCH_AND (relaxed) has no argument for its ordering"
              % line_of(CLEAN, "FSCHED__FETCH_AND(&b"),
              "%d: FSCHED__EXCHANGE (relaxed) has no argument for its ordering"
              % line_of(CLEAN, "FSCHED__EXCHANGE(&c, 2u"),
              "%d: FSCHED__STORE (relaxed) has no argument for its ordering"
              % line_of(CLEAN, "FSCHED__STORE(&c, 2u")]
    check(errors_at(CLEAN) == wanted,
          "a paragraph ends at a blank line, the end of its block and its branch, not at an "
          "#if of its own: %r"
          % errors_at(CLEAN))
    ops = [(op.name, "/".join(op.orderings)) for op in report.operations]
    check(ops == [("__atomic_load_n", "relaxed"),  # in FSCHED_PEEK, the declarations'
                  ("FSCHED__LOAD", "relaxed"),  # in FSCHED__HINT
                  ("FSCHED__LOAD", "acquire"), ("FSCHED__STORE", "release"),
                  ("FSCHED__FETCH_ADD", "relaxed"),
                  ("FSCHED__FETCH_SUB", "seq_cst"), ("FSCHED__CAS", "acq_rel/relaxed"),
                  ("FSCHED__FETCH_OR", "relaxed"), ("FSCHED__FETCH_OR", "relaxed"),
                  ("FSCHED__FETCH_AND", "relaxed"),
                  ("FSCHED__EXCHANGE", "relaxed"), ("FSCHED__EXCHANGE", "relaxed"),
                  ("FSCHED__STORE", "release"), ("FSCHED__STORE", "release"),
                  ("FSCHED__CAS_WEAK", "acquire/relaxed"), ("FSCHED__FENCE", "acquire"),
                  ("FSCHED__STORE", "relaxed"), ("FSCHED__STORE", "relaxed"),
                  ("store", "seq_cst"), ("fetch_add", "relaxed")],
          "every operation of every form is found, with its orderings, in the "
          "declarations' macros, the implementation and the C++ layer: %r" % ops)
    argued = dict((op.line, op.argument) for op in report.operations)
    check(argued[line_of(CLEAN, "FSCHED__STORE(&b, 1u, /*")] ==
          line_of(CLEAN, "FSCHED__STORE(&b, 1u, /*"),
          "a comment on a later line of the statement argues for it")
    check(argued[line_of(CLEAN, "FSCHED__FETCH_OR(&b")] == line_of(CLEAN, "by nobody"),
          "a comment block argues for the statement below it, at its last line")
    check(argued[line_of(CLEAN, "FSCHED__FETCH_OR(&b, 2u")] == line_of(CLEAN, "by nobody"),
          "... and for its paragraph, into an #if of its own")
    check(argued[line_of(CLEAN, "FSCHED__FENCE(FSCHED__ACQUIRE)")] ==
          line_of(CLEAN, "pairs with the owner's"),
          "a comment above a loop argues for the whole loop, across a blank line")
    check(argued[line_of(CLEAN, "FSCHED__FETCH_SUB(&a")] is None, "seq_cst needs nothing")


def test_uncovered():
    # each argument taken away leaves its operation without one
    for needle, comment, name in (
            ("FSCHED__LOAD(&a, FSCHED__ACQUIRE)", "/* acquire: pairs with the store */",
             "FSCHED__LOAD (acquire)"),
            ("FSCHED__FETCH_ADD(&c", "/* relaxed: a count */", "FSCHED__FETCH_ADD (relaxed)"),
            ("FSCHED__HINT(p)", "/* relaxed: a hint */", "FSCHED__LOAD (relaxed)")):
        text = CLEAN.replace(CLEAN.split("\n")[line_of(CLEAN, needle) - 1],
                             CLEAN.split("\n")[line_of(CLEAN, needle) - 1].replace(comment, ""))
        check(errors_at(text)[:1] == ["%d: %s has no argument for its ordering"
                                      % (line_of(text, needle), name)]
              and len(errors_at(text)) == 4,
              "%s without its comment is found: %r" % (name, errors_at(text)))

    text = CLEAN.replace("/* acq_rel: the one CAS", "/* seq_cst would do: the one CAS")
    check(errors_at(text)[:1] == ["%d: FSCHED__CAS (acq_rel/relaxed) has no argument for its "
                                  "ordering" % line_of(text, "FSCHED__CAS(&a")],
          "a comment naming no ordering of the CAS is no argument: %r" % errors_at(text))
    text = CLEAN.replace("/* acq_rel: the one CAS", "/* relaxed on failure: the one CAS")
    check(len(errors_at(text)) == 3, "naming one of the CAS's orderings is enough")

    text = CLEAN.replace("/* Release: every store here", "/* Acquire: every store here")
    check(all("%d: FSCHED__STORE (release) has no argument for its ordering" % line_of(text, n)
              in errors_at(text) for n in ("FSCHED__STORE(&a, 1u, FSCHED__RELEASE)", "OTHER")),
          "a comment naming another ordering is no argument: %r" % errors_at(text))
    text = CLEAN.replace("/* Release: every store here publishes the fields written before "
                         "it. */\n", "")
    check(len(errors_at(text)) == 5, "without the function's comment, both its stores lack one")
    text = CLEAN.replace("\nstatic void fsched__function(void) {",
                         "\n\nstatic void fsched__function(void) {")
    check(len(errors_at(text)) == 5,
          "a comment a blank line above the function covers nothing: %r" % errors_at(text))

    text = CLEAN.replace("FSCHED__STORE(&c, 1u, FSCHED__RELAXED);",
                         "FSCHED__STORE(&c, 1u, FSCHED__RELAXED);\n"
                         "    /* a second comment starts another paragraph */\n"
                         "    FSCHED__STORE(&c, 3u, FSCHED__RELAXED);")
    check(len(errors_at(text)) == 4 and "%d: FSCHED__STORE (relaxed) has no argument for its "
          "ordering" % line_of(text, "FSCHED__STORE(&c, 3u") in errors_at(text),
          "a paragraph ends at the next comment: %r" % errors_at(text))

    text = CLEAN.replace("FSCHED__FETCH_SUB(&a, 1u, FSCHED__SEQ_CST);",
                         "FSCHED__FETCH_SUB(&a, 1u, order);")
    check(errors_at(text)[:1] == ["%d: FSCHED__FETCH_SUB: its ordering is not one of the "
                                  "constants" % line_of(text, "FSCHED__FETCH_SUB(&a")],
          "a wrapper whose ordering is no constant is found: %r" % errors_at(text))

    text = CLEAN.replace(" /* relaxed: a count */\n}", "\n}")
    check(errors_at(text)[-1:] == ["%d: fetch_add (relaxed) has no argument for its ordering"
                                   % line_of(text, "n.fetch_add")],
          "an operation of the C++ layer is found: %r" % errors_at(text))

    text = CLEAN.replace("/* declarations: a public macro's look, relaxed: a hint */",
                         "/* declarations */")
    check(errors_at(text)[:1] == ["%d: __atomic_load_n (relaxed) has no argument for its "
                                  "ordering" % line_of(text, "#define FSCHED_PEEK")],
          "an operation of a public macro is found: %r" % errors_at(text))


def test_main():
    clean = CLEAN.replace("/* NONE */", "/* relaxed: here */")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "h.h")
        for text, rc, last in ((clean, 0, "20 atomic operations, 18 weaker than seq_cst: each "
                                "has its argument"),
                               (CLEAN, 1, "3 errors: 3 of 18 operations weaker than seq_cst "
                                "have no argument")):
            with open(path, "w") as f:
                f.write(text)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                got = check_orderings.main([path, "--list"])
            printed = out.getvalue().splitlines()
            check(got == rc, "exit %d: %r" % (rc, printed))
            check(printed and printed[-1] == "%s: %s" % (path, last),
                  "the last line sums up: %r" % printed[-1:])
            check("%s:%d: FSCHED__FETCH_OR (relaxed): argued at %d"
                  % (path, line_of(text, "FSCHED__FETCH_OR(&b"), line_of(text, "by nobody"))
                  in printed, "--list prints each operation and its argument")
            check("%s:%d: FSCHED__FETCH_SUB (seq_cst)"
                  % (path, line_of(text, "FSCHED__FETCH_SUB(&a")) in printed, "--list prints the seq_cst ones too")


def main():
    test_clean()
    test_uncovered()
    test_main()
    if failures:
        print("test_check_orderings: %d checks failed" % failures)
        return 1
    print("test_check_orderings: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
