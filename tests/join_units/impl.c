/* The implementation of fibersched, alone in its unit: the other units of this test see
   only the declarations, as a program's units do. */
#define FIBERSCHED_IMPLEMENTATION
#include "fibersched.h"
