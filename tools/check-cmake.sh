#!/usr/bin/env bash
# Builds and runs the CMake consumer (tests/cmake) in each way a CMake project can take
# fibersched: add_subdirectory, FetchContent (offline, from a tarball of this tree) and
# find_package after `cmake --install`. One line per way; any failure fails the script.
#
#   tools/check-cmake.sh            (needs cmake and a C compiler)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
consumer=$root/tests/cmake
work=$(mktemp -d "${TMPDIR:-/tmp}/fibersched-cmake.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Few jobs: the machines are shared. Release: what consumers ship, and the optimizer finds
# warnings (uninitialized values) that -O0 misses. Ninja when present, as it starts faster.
jobs=${JOBS:-2}
common=(-DCMAKE_BUILD_TYPE=Release)
if [ -z "${CMAKE_GENERATOR:-}" ] && command -v ninja >/dev/null 2>&1; then
  common+=(-G Ninja)
fi

# Output of each step goes to a log, shown only when the step fails.
run() {
  local log=$1; shift
  if ! "$@" >>"$log" 2>&1; then
    cat "$log" >&2
    echo "check-cmake: FAILED: $*" >&2
    return 1
  fi
}

# configure, build and run the consumer; $1 names the way, the rest are -D options
consume() {
  local way=$1; shift
  local build=$work/consumer-$way log=$work/$way.log out
  run "$log" cmake -S "$consumer" -B "$build" "${common[@]}" -DFIBERSCHED_CONSUME="$way" "$@"
  run "$log" cmake --build "$build" --parallel "$jobs"
  if ! out=$("$build/consumer" 2>&1); then
    cat "$log" >&2
    printf '%s\n' "$out" >&2
    echo "check-cmake: FAILED: the consumer ($way) failed" >&2
    return 1
  fi
  printf 'cmake %-8s %s\n' "$way:" "$out"
}

# (1) add_subdirectory of this tree
consume subdir -DFIBERSCHED_SOURCE="$root"

# (2) FetchContent of a source tarball holding what the CMake build needs, taken from the
#     working tree (uncommitted changes included); a file:// URL needs no network.
tar -czf "$work/fibersched-src.tar.gz" -C "$root" --transform 's,^,fibersched/,' \
  CMakeLists.txt cmake fibersched.h fibersched_asm.h LICENSE
consume fetch -DFIBERSCHED_SOURCE="file://$work/fibersched-src.tar.gz"

# (3) install this tree into a prefix, then find_package from there
run "$work/install.log" cmake -S "$root" -B "$work/fibersched-build" "${common[@]}" \
  -DCMAKE_INSTALL_PREFIX="$work/prefix"
run "$work/install.log" cmake --build "$work/fibersched-build"
run "$work/install.log" cmake --install "$work/fibersched-build"
consume package -DCMAKE_PREFIX_PATH="$work/prefix"
