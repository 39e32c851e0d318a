#!/usr/bin/env bash
# gdb sees fibers: builds tests/gdb/blocked.c (tasks blocked on an event, a mutex, a sleep,
# a wait group, a join, a parallel loop and a spawn/sync child) and checks `info fibers`
# and `fiber bt` on it with tests/gdb/check.py. Natively with gcc and clang at -O0 and
# -O2, each on the live process and then on a core file gdb wrote of it there, and on a
# core file of a crash (where the kernel writes one); then with the extension auto-loaded
# from the text the program embeds in its .debug_gdb_scripts section (no file next to it,
# gdb started elsewhere), live and on its core; then on every other ABI of the assembly
# switch under qemu-user's gdb stub with gdb-multiarch. One line per check.
#
#   tools/check-gdb.sh          (needs gdb; skips an ABI whose compiler, qemu or
#                                gdb-multiarch is missing)
#   tools/check-gdb.sh --all    (a missing tool fails instead)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
all=0
[ "${1:-}" = --all ] && all=1
work=$(mktemp -d "${TMPDIR:-/tmp}/fibersched-gdb.XXXXXX")
trap 'rm -rf "$work"' EXIT
failed=0

# gdb in batch mode, its output kept in a log shown when the check fails
check() {
  local name=$1; shift
  if timeout 600 "$@" -x "$root/tests/gdb/check.py" >"$work/$name.log" 2>&1 &&
    grep -q "gdb check: ok" "$work/$name.log"; then
    echo "check-gdb: $name: ok"
  else
    cat "$work/$name.log" >&2
    echo "check-gdb: $name: FAILED" >&2
    failed=1
  fi
}

missing() {
  if [ "$all" = 1 ]; then
    echo "check-gdb: $1: FAILED: $2 is missing" >&2
    failed=1
  else
    echo "check-gdb: $1: skipped ($2 is missing)"
  fi
}

src=$root/tests/gdb/blocked.c
tool=$root/tools/fibersched-gdb.py
for cc in gcc clang; do
  for opt in -O0 -O2; do
    exe=$work/blocked-$cc$opt
    "$cc" -g "$opt" -pthread -o "$exe" "$src"
    FIBERSCHED_GDB_CORE=$exe.core check "$cc $opt" gdb -nx -batch -x "$tool" "$exe"
    check "$cc $opt, core file" gdb -nx -batch -x "$tool" "$exe" "$exe.core"
    rm -f "$exe.core"
  done
done

# a core file the kernel wrote when the program crashed (aborted where check.py stops it),
# where its pattern writes one in the current directory
mkdir "$work/crash"
exe=$work/crash/blocked
gcc -g -O2 -pthread -DCRASH_WHEN_READY -o "$exe" "$src"
(cd "$work/crash" && ulimit -c unlimited && "$exe") >/dev/null 2>&1 || true
core=$(find "$work/crash" -maxdepth 1 -name 'core*' | head -n 1)
if [ -n "$core" ]; then
  check "core file of a crash" gdb -nx -batch -x "$tool" "$exe" "$core"
  rm -f "$core"
else
  echo "check-gdb: core file of a crash: skipped (none written: the kernel's core_pattern" \
    "is $(cat /proc/sys/kernel/core_pattern 2>/dev/null || echo unknown))"
fi

# the program embeds the extension: gdb, started in an empty directory with only the
# program allowed to auto-load, has no file to find
mkdir "$work/autoload" "$work/elsewhere"
exe=$work/autoload/blocked
gcc -g -O2 -pthread -DFIBERSCHED_GDB_SCRIPT -o "$exe" "$src"
allow=(-iex "add-auto-load-safe-path $exe")
cd "$work/elsewhere"
FIBERSCHED_GDB_CORE=$exe.core check "auto-loaded" gdb -nx -batch "${allow[@]}" "$exe"
check "auto-loaded, core file" gdb -nx -batch "${allow[@]}" "$exe" "$exe.core"
rm -f "$exe.core"
cd "$root"

# other ABIs: static programs under qemu-user, stopped at their first instruction until
# gdb-multiarch connects to the emulator's gdb stub (qemu-i386 one instruction per block, as
# in tests/cross/i686.ini). Columns: name, compiler prefix, emulator, compiler and emulator
# flags (- for none).
port=$((20000 + $$ % 20000))
while read -r name triple qemu cflags qflags; do
  [ "$cflags" = - ] && cflags=
  [ "$qflags" = - ] && qflags=
  for t in "$triple-gcc" "$qemu" gdb-multiarch; do
    if ! command -v "$t" >/dev/null 2>&1; then
      missing "$name" "$t"
      continue 2
    fi
  done
  exe=$work/blocked-$name
  # shellcheck disable=SC2086
  "$triple-gcc" -g -O1 -pthread -static $cflags -o "$exe" "$src"
  port=$((port + 1))
  # shellcheck disable=SC2086
  "$qemu" $qflags -g "$port" "$exe" >"$work/$name.out" 2>&1 &
  check "$name" gdb-multiarch -nx -batch -ex "set tcp connect-timeout 60" -ex "file $exe" \
    -ex "target remote localhost:$port" -x "$tool"
  wait $! || { cat "$work/$name.out" >&2; echo "check-gdb: $name: the program failed" >&2; failed=1; }
done <<'EOF'
aarch64     aarch64-linux-gnu     qemu-aarch64 -      -
armhf       arm-linux-gnueabihf   qemu-arm     -marm   -
armhf-thumb arm-linux-gnueabihf   qemu-arm     -mthumb -
riscv64     riscv64-linux-gnu     qemu-riscv64 -      -
ppc64le     powerpc64le-linux-gnu qemu-ppc64le -      -
i686        i686-linux-gnu        qemu-i386    -      -singlestep
EOF
exit "$failed"
