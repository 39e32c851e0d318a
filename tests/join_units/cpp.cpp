/* fsched_join's inline path from a C++ unit, the implementation being C. */
#include "fibersched.h"

#include "units.h"

void units_fib_cpp(void *p) {
    UNITS_FIB(static_cast<units_fib *>(p), units_fib_cpp, units_fib_inline);
}
