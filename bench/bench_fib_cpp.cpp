/* bench_fib compiled as C++ with exceptions, and without peers: what the catching around
   every FSCHED_TASK costs C++ callers of spawn and sync (a child's exception is caught
   where it ran and rethrown at its sync), beside fsched_join, which has none. Compare
   its FSCHED_SPAWN/SYNC row with bench_fib's, the C build of the same code.
   Usage: as bench_fib. */
#include "bench_fib.c"
