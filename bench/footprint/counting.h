/* The bytes the library asks the heap for, counted as asked (the C library's own padding
   and the granularity it grows its heap by are its own). Included before the library. */
#ifndef FOOTPRINT_COUNTING_H
#define FOOTPRINT_COUNTING_H
#include <stdlib.h>

static size_t footprint_asked;

static void *footprint_malloc(size_t n) {
    footprint_asked += n;
    return malloc(n);
}

#define FIBERSCHED_MALLOC(n) footprint_malloc(n)
#define FIBERSCHED_FREE(p) free(p)
#endif
