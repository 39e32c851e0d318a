/* The Lace peer (bench_lace.c), when meson's lace_source option is set. Each call runs
   one computation on `workers` Lace workers and returns its result. */
long bench_fib_lace(int n, int workers);
long bench_skynet_lace(long leaves, int workers);
/* bench_uts_lace.c: the nodes of a UTS tree (tests/uts.h), and its depth in *max_depth */
struct uts_tree;
unsigned long long bench_uts_lace(const struct uts_tree *tree, int workers, int *max_depth);

/* Lace's workers spin while idle: they are started once per worker count and suspended
   between runs, so that they take no processor from the other candidates. Resuming
   starts `workers` of them (stopping others first); bench_lace_workers() says how many
   run. */
void bench_lace_resume(int workers);
void bench_lace_suspend(void);
int bench_lace_workers(void);
