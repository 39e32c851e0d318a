/* The Lace peer (bench_lace.c), when meson's lace_source option is set. Each call runs
   one computation on `workers` Lace workers and returns its result. */
long bench_fib_lace(int n, int workers);
long bench_skynet_lace(long leaves, int workers);
