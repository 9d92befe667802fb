/*
 * input.h - the fuzz input as a stream of choices. Every draw past the end yields
 * zeros, so any byte string is a complete program (libFuzzer mutates freely).
 */
#ifndef FUZZ_INPUT_H
#define FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t n;
} fz_in;

static inline int fz_more(const fz_in *in) { return in->n > 0; }

static inline uint8_t fz_u8(fz_in *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static inline uint16_t fz_u16(fz_in *in) { return (uint16_t)(fz_u8(in) | fz_u8(in) << 8); }

static inline uint32_t fz_u32(fz_in *in)
{
    return (uint32_t)fz_u16(in) | (uint32_t)fz_u16(in) << 16;
}

static inline uint64_t fz_u64(fz_in *in) { return (uint64_t)fz_u32(in) | (uint64_t)fz_u32(in) << 32; }

/* a choice among n (n >= 1) */
static inline unsigned fz_pick(fz_in *in, unsigned n) { return n ? fz_u8(in) % n : 0; }

/* mostly a small value, now and then anything: boundaries hide at both ends */
static inline uint32_t fz_small(fz_in *in, uint32_t lim)
{
    uint8_t b = fz_u8(in);
    if (b < 224)
        return lim ? b % lim : 0;
    if (b < 240)
        return lim + (b & 3) - 1; /* around the limit */
    return fz_u32(in);
}

static inline void fz_bytes(fz_in *in, void *out, size_t len)
{
    for (size_t i = 0; i < len; i++)
        ((uint8_t *)out)[i] = fz_u8(in);
}

#endif
