/* fsched_join's inline path from a C++ unit, the implementation being C. */
#include "fibersched.h"

#include "units.h"

void units_fib_cpp(void *p) {
    units_fib *f = static_cast<units_fib *>(p), x, y;
    f->status = FSCHED_OK;
    if (f->n < 2) {
        f->r = f->n;
        return;
    }
    x.n = f->n - 1;
    y.n = f->n - 2;
    f->status = fsched_join(units_fib_cpp, &x, units_fib_inline, &y);
    f->r = x.r + y.r;
    if (x.status != FSCHED_OK) f->status = x.status;
    if (y.status != FSCHED_OK) f->status = y.status;
}
