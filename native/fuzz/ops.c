/*
 * ops.c - the table of the fuzz target's steps (its order is the corpus's encoding:
 * append, never reorder; an appended step changes fz_pick's modulus, and so what most
 * committed inputs mean) and the step runner; the steps live in ops_*.c.
 */
#include "ops.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

extern long fz_alloc_countdown;

const int fz_errnos[7] = {EINVAL, ENOMEM, EIO, ENETDOWN, ENETUNREACH, EAGAIN, 0};

/* ------------------------------------------------------------- the rest ------- */

static void op_names(void)
{
    int v = fz_u8(W->in) < 200 ? (int)(fz_small(W->in, 25) - 1u) : (int)fz_u32(W->in);
    FZ_CHECK(shift_wc_status_str(v) != NULL, v, 0);
    FZ_CHECK((shift_wc_status_name(v) != NULL) == (v >= 0 && v <= SHIFT_WC_GENERAL_ERR), v, 0);
    FZ_CHECK((shift_qp_state_name(v) != NULL) == (v >= 0 && v <= SHIFT_QPS_ERR), v, 0);
    FZ_CHECK((shift_state_name(v) != NULL) == (v >= 0 && v <= SHIFT_STATE_ERROR), v, 0);
    FZ_CHECK((shift_recv_state_name(v) != NULL) == (v >= 0 && v <= SHIFT_RECV_FALLBACK), v, 0);
    FZ_CHECK((shift_design_name(v) != NULL) == (v >= 0 && v <= SHIFT_DESIGN_SHIFT_COUNTED), v, 0);
    FZ_CHECK(shift_backup_state_bytes(fz_small(W->in, 64), fz_small(W->in, 64)) > 0, 0, 0);
    int cyc;
    make_send_chain(OWNER_RAW, &cyc);
    int r = shift_send_wr_check(fz_u8(W->in) < 250 ? &swr[0] : NULL, fz_small(W->in, 80));
    FZ_CHECK(r == 0 || r == EINVAL, r, 0);
}

static void op_alloc_fail(void)
{
    /* the k-th next allocation fails (or none) */
    fz_alloc_countdown = fz_u8(W->in) < 200 ? (long)fz_small(W->in, 12) : -1;
}

typedef void (*op_fn)(void);
#define OP(f) {.fn = f, .name = #f}

static const struct {
    op_fn fn;
    const char *name;
} ops[] = {
    OP(op_fabric_create),
    OP(op_fabric_destroy),
    OP(op_fabric_queries),
    OP(op_reg_mr),
    OP(op_mr_keys),
    OP(op_dereg_mr),
    OP(op_create_cq),
    OP(op_destroy_cq),
    OP(op_poll_raw_cq),
    OP(op_create_qp),
    OP(op_destroy_qp),
    OP(op_modify_qp),
    OP(op_query_qp),
    OP(op_connect_qps),
    OP(op_reconnect),
    OP(op_post_raw_send),
    OP(op_post_raw_recv),
    OP(op_ring),
    OP(op_ctl_send_raw),
    OP(op_set_handler),
    OP(op_failover_cycle),
    OP(op_wire),
    OP(op_wire),
    OP(op_fault),
    OP(op_sim_connect),
    OP(op_sim_close),
    OP(op_sim_misc),
    OP(op_sim_reg_mr),
    OP(op_ep_create),
    OP(op_ep_destroy),
    OP(op_ep_post_send),
    OP(op_ep_post_send),
    OP(op_ep_post_recv),
    OP(op_ep_post_recv),
    OP(op_ep_poll),
    OP(op_ep_poll),
    OP(op_ep_step),
    OP(op_ep_step),
    OP(op_ctl_input),
    OP(op_ep_keys),
    OP(op_ep_query),
    OP(op_names),
    OP(op_alloc_fail),
    OP(op_traffic),
    OP(op_traffic),
    OP(op_raw_traffic),
    OP(op_raw_traffic),
    OP(op_qp_walk),
    OP(op_settle),
    OP(op_settle),
    OP(op_settle),
    OP(op_fault),
};

int fz_trace;

/* one line of the trace, indented as the step it belongs to */
void fz_note(const char *fmt, ...)
{
    if (!fz_trace)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%*s  ", 2 * W->depth, "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void run_op(void)
{
    unsigned k = fz_pick(W->in, sizeof ops / sizeof *ops);
    if (fz_trace) /* (and the input left after its choice: where the step's bytes are) */
        fprintf(stderr, "%*s%s %zu\n", 2 * W->depth, "", ops[k].name, W->in->n);
    ops[k].fn();
}
