/* What the units of the join test share. */
#ifndef FIBERSCHED_TEST_JOIN_UNITS_H
#define FIBERSCHED_TEST_JOIN_UNITS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct units_fib {
    int n;
    long r;
    fsched_result status;
} units_fib;

void units_fib_inline(void *p); /* main.c: fsched_join inline, where the target has it */
void units_fib_call(void *p);   /* call.c: fsched_join as a call */
void units_fib_cpp(void *p);    /* cpp.cpp: inline from C++ (only with JOIN_UNITS_CPP) */
int units_join_is_inline_here(void); /* whether call.c's unit has the inline path */

#ifdef __cplusplus
}
#endif

#endif
