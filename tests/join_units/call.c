/* A unit that asks for fsched_join as a plain call, in a program whose other units take
   its inline path: the two mix freely, each half queued on the same ring. */
#if !defined(FIBERSCHED_NO_INLINE_JOIN)
#define FIBERSCHED_NO_INLINE_JOIN
#endif
#include "fibersched.h"

#include "units.h"

void units_fib_call(void *p) {
    /* the inline path's unit next, then this one's again */
    UNITS_FIB((units_fib *)p, units_fib_inline, units_fib_call);
}

int units_join_is_inline_here(void) {
#if defined(FSCHED__JOIN_INLINE)
    return 1;
#else
    return 0;
#endif
}
