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

/* fib(f->n) into f->r through fsched_join as the including unit compiles it, the halves
   running a_fn(n - 1) and b_fn(n - 2); f->status is the first error seen. */
#define UNITS_FIB(f, a_fn, b_fn)                                                          \
    do {                                                                                  \
        units_fib units_x_, units_y_;                                                     \
        (f)->status = FSCHED_OK;                                                          \
        if ((f)->n < 2) {                                                                 \
            (f)->r = (f)->n;                                                              \
            break;                                                                        \
        }                                                                                 \
        units_x_.n = (f)->n - 1;                                                          \
        units_y_.n = (f)->n - 2;                                                          \
        (f)->status = fsched_join(a_fn, &units_x_, b_fn, &units_y_);                      \
        (f)->r = units_x_.r + units_y_.r;                                                 \
        if (units_x_.status != FSCHED_OK) (f)->status = units_x_.status;                  \
        if (units_y_.status != FSCHED_OK) (f)->status = units_y_.status;                  \
    } while (0)

void units_fib_inline(void *p); /* main.c: fsched_join inline, where the target has it */
void units_fib_call(void *p);   /* call.c: fsched_join as a call */
void units_fib_cpp(void *p);    /* cpp.cpp: inline from C++ (only with JOIN_UNITS_CPP) */
int units_join_is_inline_here(void); /* whether call.c's unit has the inline path */

#ifdef __cplusplus
}
#endif

#endif
