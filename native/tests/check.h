/* check.h - the C test driver's one assertion: counts checks and failures, goes on. */
#ifndef SHIFT_TESTS_CHECK_H
#define SHIFT_TESTS_CHECK_H

#include <stdio.h>

extern int checks, failures;
#define CHECK(c)                                                                        \
    do {                                                                                \
        checks++;                                                                       \
        if (!(c)) {                                                                     \
            failures++;                                                                 \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);        \
        }                                                                               \
    } while (0)

/* wire.c: one-host fabrics joined by the wire as bytes */
void test_wire(void);
/* shared_cq.c: several endpoints on one CQ pair */
void test_shared_cq(void);

#endif
