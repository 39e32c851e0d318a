/* Footprint, the reference: the same board support and C library as the other programs,
   without the library (bench/footprint.sh subtracts its sizes). */
#include <stdio.h>
#include <stdlib.h>

#include "board.h"

int main(void) {
    void *p = malloc(64);
    /* the board's clock, which the other programs give their schedulers: its cost (a
       64-bit division) is the board's */
    printf("clock %lu\n", (unsigned long)board_clock_ns(NULL));
    printf("heap %lu\n", (unsigned long)board_heap_used());
    free(p);
    return 0;
}
