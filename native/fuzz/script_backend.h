/* script_backend.h - a backend whose every answer the fuzz input chooses. */
#ifndef FUZZ_SCRIPT_BACKEND_H
#define FUZZ_SCRIPT_BACKEND_H

#include "input.h"
#include "shift.h"

typedef struct {
    fz_in *in;                 /* where its answers come from */
    int qp_tag[3];             /* their addresses are its QP and MR handles */
    uint8_t inline_data[SHIFT_MAX_MSG]; /* what its forged inline WRs point at */
} fz_script;

extern const struct shift_backend_ops fz_script_ops;    /* without sq_pending */
extern const struct shift_backend_ops fz_script_ops_sq; /* with it: direct mode */
extern const struct shift_backend_ops fz_script_ops_ev;    /* both with async_event */
extern const struct shift_backend_ops fz_script_ops_sq_ev;
extern const struct shift_backend_ops fz_script_ops_cq;    /* a shared CQ's, forged */

#endif
