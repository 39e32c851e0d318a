/* A unit that asks for fsched_join as a plain call, in a program whose other units take
   its inline path: the two mix freely, each half queued on the same ring. */
#if !defined(FIBERSCHED_NO_INLINE_JOIN)
#define FIBERSCHED_NO_INLINE_JOIN
#endif
#include "fibersched.h"

#include "units.h"

void units_fib_call(void *p) {
    units_fib *f = (units_fib *)p, x, y;
    f->status = FSCHED_OK;
    if (f->n < 2) {
        f->r = f->n;
        return;
    }
    x.n = f->n - 1;
    y.n = f->n - 2;
    /* the inline path's unit next, then this one's again */
    f->status = fsched_join(units_fib_inline, &x, units_fib_call, &y);
    f->r = x.r + y.r;
    if (x.status != FSCHED_OK) f->status = x.status;
    if (y.status != FSCHED_OK) f->status = y.status;
}

int units_join_is_inline_here(void) {
#if defined(FSCHED__JOIN_INLINE)
    return 1;
#else
    return 0;
#endif
}
