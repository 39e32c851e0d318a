#!/usr/bin/env bash
# Checks the Promela model of the sleep protocol with Spin: each scenario must verify
# with no error, and must fail when the fix it guards is taken out of the model.
#
#   tests/model/check.sh        (needs spin and a C compiler)
set -euo pipefail
model=$(cd "$(dirname "$0")" && pwd)/sleep.pml
work=$(mktemp -d /tmp/fibersched-spin.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"

# verify NAME EXPECT SPIN-ARGS...: EXPECT is "ok" (no error) or "error" (one found)
verify() {
  local name=$1 expect=$2 errors out
  shift 2
  rm -f pan pan.* ./*.trail
  spin "$@" -a "$model" >spin.log 2>&1 || { cat spin.log; return 1; }
  cc -O2 -w -DSAFETY -o pan pan.c
  out=$(./pan -m400000 2>&1)
  errors=$(printf '%s\n' "$out" | sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p')
  printf '%-38s %s error(s), %s states\n' "$name" "$errors" \
    "$(printf '%s\n' "$out" | sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p')"
  if [ "$expect" = ok ] && [ "$errors" != 0 ]; then
    printf '%s\n' "$out"
    spin "$@" -t -p "$model" | tail -40
    return 1
  fi
  if [ "$expect" = error ] && [ "$errors" = 0 ]; then
    echo "the model no longer finds the bug its fix guards against"
    return 1
  fi
}

verify "fiber: a job and a ready fiber"        ok
verify "  without passing the search on"      error -DLOST_WAKE
verify "  looking before leaving idle"        error -DLOOK_FIRST
verify "jobs: a batch from the injector"      ok    -DJOBS
verify "  only a fiber passes the search on"  error -DJOBS -DFIBER_ONLY
verify "three workers, all asleep"            ok    -DNW=3 -DASLEEP
verify "drain: a run ending on a plain thread" ok   -DDRAIN
verify "  without telling the drainer"        error -DDRAIN -DMUTE_END
echo "spin: the sleep protocol holds, and each seeded bug is found"
