/* check.h - the C test driver's one assertion: counts checks and failures, goes on. */
#ifndef SHIFT_TESTS_CHECK_H
#define SHIFT_TESTS_CHECK_H

#include <stdint.h>
#include <stdio.h>

#include "simnic.h"

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
/* the packet parser fed mutations of a good packet (wire.c) */
void parser_random(sn_fabric f, const uint8_t *good, int glen, uint64_t seed, int *taken,
                   int *refused);
/* ud.c: UD QPs and datagrams; simnic's table of entry points */
void test_ud(void);
/* shared_cq.c: several endpoints on one CQ pair */
void test_shared_cq(void);

#endif
