/* Parallel quicksort of a few million random ints: partition, then sort the two parts
   at once with fsched_join; parts below a cutoff go to the C library's qsort. The result
   is checked for order and against qsort of the whole array, and both are timed.

   Build: cc -O2 -pthread examples/quicksort.c -o quicksort */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 2000000
#define CUTOFF 8192 /* parts this small are sorted serially */

static int compare_ints(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    return (a > b) - (a < b); /* not a - b, which overflows */
}

/* A part of the array still to sort. */
typedef struct part {
    int *a;
    size_t n;
} part;

static void swap(int *a, int *b) {
    int t = *a;
    *a = *b;
    *b = t;
}

/* Hoare partition around the median of three: returns k with 0 < k < n such that every
   element of a[0, k) is <= every element of a[k, n). */
static size_t partition(int *a, size_t n) {
    size_t mid = n / 2, i, j;
    int pivot;
    if (a[mid] < a[0]) swap(&a[mid], &a[0]);
    if (a[n - 1] < a[0]) swap(&a[n - 1], &a[0]);
    if (a[n - 1] < a[mid]) swap(&a[n - 1], &a[mid]);
    pivot = a[mid];
    i = 0;
    j = n - 1;
    for (;;) {
        while (a[i] < pivot) i++;
        while (a[j] > pivot) j--;
        if (i >= j) return j + 1;
        swap(&a[i], &a[j]);
        i++;
        j--;
    }
}

/* A task: sorts one part. The two halves are described on this task's stack, which is
   safe because fsched_join returns only when both have been sorted. */
static void sort_part(void *arg) {
    part *p = (part *)arg;
    part left, right;
    size_t k;
    if (p->n <= CUTOFF) {
        qsort(p->a, p->n, sizeof *p->a, compare_ints);
        return;
    }
    k = partition(p->a, p->n);
    left.a = p->a;
    left.n = k;
    right.a = p->a + k;
    right.n = p->n - k;
    fsched_join(sort_part, &left, sort_part, &right);
}

int main(void) {
    int *data = (int *)malloc(COUNT * sizeof *data);
    int *reference = (int *)malloc(COUNT * sizeof *reference);
    fsched_sched *sched;
    fsched_result r;
    part whole;
    uint64_t rng = 0x2545f4914f6cdd1dull, t0, t1, t2;
    size_t i;
    int sorted = 1, same;

    if (!data || !reference) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (i = 0; i < COUNT; i++) { /* xorshift64: the same "random" ints every run */
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        data[i] = (int)(uint32_t)(rng >> 32);
    }
    memcpy(reference, data, COUNT * sizeof *data);

    r = fsched_create(NULL, &sched); /* one worker per CPU */
    if (r != FSCHED_OK) {
        fprintf(stderr, "fsched_create: %s\n", fsched_result_string(r));
        return 1;
    }
    /* fsched_join is called from tasks or bound threads: bind this thread, so that it
       sorts too rather than waiting idle. */
    r = fsched_bind(sched);
    if (r != FSCHED_OK) {
        fprintf(stderr, "fsched_bind: %s\n", fsched_result_string(r));
        return 1;
    }
    whole.a = data;
    whole.n = COUNT;
    t0 = fsched_clock_ns();
    sort_part(&whole);
    t1 = fsched_clock_ns();
    qsort(reference, COUNT, sizeof *reference, compare_ints);
    t2 = fsched_clock_ns();
    fsched_unbind();

    for (i = 1; i < COUNT; i++)
        if (data[i - 1] > data[i]) sorted = 0;
    same = memcmp(data, reference, COUNT * sizeof *data) == 0;
    printf("sorted %d ints: parallel %.1f ms on %u workers and this thread, qsort %.1f ms\n",
           COUNT, (double)(t1 - t0) / 1e6, (unsigned)fsched_worker_count(sched),
           (double)(t2 - t1) / 1e6);
    printf("in order: %s; same as qsort: %s\n", sorted ? "yes" : "NO", same ? "yes" : "NO");

    fsched_destroy(sched);
    free(data);
    free(reference);
    return sorted && same ? 0 : 1;
}
