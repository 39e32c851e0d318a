/* Footprint, the reference: the same board support and C library as the other programs,
   without the library (bench/footprint.sh subtracts its sizes). */
#include <stdio.h>
#include <stdlib.h>

#include "board.h"

int main(void) {
    void *p = malloc(64);
    printf("heap %lu\n", (unsigned long)board_heap_used());
    free(p);
    return 0;
}
