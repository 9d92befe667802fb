/*
 * alloc.c - allocation failure injection for the fuzz build. The core's sources are
 * compiled with -Dmalloc=fz_malloc -Dcalloc=fz_calloc -Drealloc=fz_realloc, so an
 * input can make its k-th next allocation fail and reach every ENOMEM path.
 */
#include <stdlib.h>

long fz_alloc_countdown = -1; /* allocations until one fails; -1: none fails */

static int fail_now(void)
{
    if (fz_alloc_countdown < 0)
        return 0;
    return fz_alloc_countdown-- == 0;
}

void *fz_malloc(size_t n);
void *fz_calloc(size_t n, size_t size);
void *fz_realloc(void *p, size_t n);

void *fz_malloc(size_t n) { return fail_now() ? NULL : malloc(n); }
void *fz_calloc(size_t n, size_t size) { return fail_now() ? NULL : calloc(n, size); }
void *fz_realloc(void *p, size_t n) { return fail_now() ? NULL : realloc(p, n); }
