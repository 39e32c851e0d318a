#!/bin/sh
# The library's footprint on a Cortex-M3 (arm-none-eabi-gcc, newlib): flash (text and
# read-only data), static RAM (data and bss) and the heap fsched_create takes, for a
# minimal program (a scheduler, tasks in a wait group) and a full one (synchronisation,
# fork-join, a parallel loop, a graph, a pipeline), each built with -Os, sections
# collected, NDEBUG, FIBERSCHED_NO_OS and FIBERSCHED_NO_STDIO. Sizes are the program's
# minus those of the same program without the library (bench/footprint/baseline.c, with
# the same board support and C library); the heap is what the library asks for at
# fsched_create (bench/footprint/counting.h), measured by running each program on
# qemu-system-arm's MPS2 AN385 board. A target row compares the minimal program's flash
# with the aim (an RTOS kernel's: FreeRTOS takes six to twelve kilobytes); with --check,
# the script fails when that figure passes its budget, just above what it is now, so
# that growth is seen where it comes in (.ci/run checks it; lower the budget as the
# figure falls).
#   bench/footprint.sh [--check] [extra compiler flags, e.g. -DFIBERSCHED_DEFAULT_STACK_SIZE=8192]
set -eu
target=8192  # bytes of flash for the minimal program: the aim
budget=8192 # bytes of flash for the minimal program: what --check allows
check=0
if [ "${1:-}" = --check ]; then
  check=1
  shift
fi
root=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cflags="-mcpu=cortex-m3 -mthumb -Os -std=c11 -ffunction-sections -fdata-sections
        -DNDEBUG -DFIBERSCHED_NO_OS -DFIBERSCHED_NO_STDIO -I$root -I$root/tests/board $*"
ldflags="--specs=nosys.specs -nostartfiles -T $root/tests/board/mps2.ld -Wl,--gc-sections
         -Wl,--no-warn-rwx-segments -Wl,--no-warn-execstack"

# sizes of $1.elf: "flash ram" (text = code and read-only data; data counts in both)
sizes() {
  arm-none-eabi-size "$out/$1.elf" | awk 'NR == 2 { print $1 + $2, $2 + $3 }'
}

for prog in baseline minimal full; do
  # shellcheck disable=SC2086
  arm-none-eabi-gcc $cflags "$root/bench/footprint/$prog.c" "$root/tests/board/board.c" \
    $ldflags -o "$out/$prog.elf" -lm
done
set -- $(sizes baseline)
base_flash=$1 base_ram=$2
printf '| %-13s | %12s | %16s | %20s |\n' configuration "flash bytes" "static RAM bytes" \
  "heap bytes at create"
printf '|---------------|--------------|------------------|----------------------|\n'
for prog in minimal full; do
  set -- $(sizes "$prog")
  heap=$(timeout 60 qemu-system-arm -machine mps2-an385 -nographic -monitor none \
    -serial none -semihosting-config enable=on,target=native -kernel "$out/$prog.elf" |
    awk '/^heap / { print $2 }')
  printf '| %-13s | %12d | %16d | %20s |\n' "$prog" $(($1 - base_flash)) $(($2 - base_ram)) \
    "${heap:-?}"
  [ "$prog" = minimal ] && minimal=$(($1 - base_flash))
done
verdict() { if [ "$1" -le "$2" ]; then echo "$3"; else echo "$4"; fi; }
echo "target: minimal flash = $minimal B (target <= $target B): $(verdict "$minimal" $target met MISSED)"
if [ "$check" = 1 ]; then
  echo "budget: minimal flash = $minimal B (budget <= $budget B): $(verdict "$minimal" $budget within EXCEEDED)"
  [ "$minimal" -le "$budget" ]
fi
