/*
 * script_backend.c - a hostile backend for the fuzz harness: every answer of every
 * operation is drawn from the fuzz input. It fails any call with any errno, returns
 * completions with forged wr_ids, statuses and opcodes, more completions than asked,
 * QP states and PSNs out of thin air, (when it offers sq_pending) forged WRs, and (when
 * it offers async_event) any events. It keeps only the promises of the backend contract
 * that no check could verify: a pointer it returns points at memory it owns, and a
 * failed post names a WR of the chain (or none).
 */
#include "script_backend.h"

#include <errno.h>
#include <string.h>

#define PROBE_WR_ID UINT64_MAX

static const int errnos[] = {EINVAL, ENOMEM, EIO, ENETDOWN, ENETUNREACH, EAGAIN, EBUSY};

static int any_errno(fz_in *in) { return errnos[fz_pick(in, sizeof errnos / sizeof *errnos)]; }

/* 0 most of the time, else an errno */
static int verdict(fz_script *s) { return fz_u8(s->in) < 192 ? 0 : any_errno(s->in); }

static int s_create_qp(void *c, int path, const struct shift_backend_qp_cap *cap, void **qp)
{
    fz_script *s = c;
    if ((path != 1 && path != 2) || !cap || !qp)
        return EINVAL;
    int err = verdict(s);
    if (!err)
        *qp = &s->qp_tag[path];
    return err;
}

static int s_destroy_qp(void *c, void *qp)
{
    (void)c;
    (void)qp;
    return 0;
}

static int s_modify_qp(void *c, void *qp, int state, uint32_t rq_psn, uint32_t sq_psn)
{
    (void)qp, (void)state, (void)rq_psn, (void)sq_psn;
    return verdict(c);
}

static int s_query_qp(void *c, void *qp, int *state, uint32_t *rq_psn, uint32_t *sq_psn)
{
    fz_script *s = c;
    (void)qp;
    int err = verdict(s);
    if (err)
        return err;
    *state = (int)fz_small(s->in, 7);
    *rq_psn = fz_u32(s->in);
    *sq_psn = fz_u32(s->in);
    return 0;
}

static int s_reset_qp(void *c, void *qp, uint32_t incarnation)
{
    (void)qp;
    (void)incarnation;
    return verdict(c);
}

static int s_post_send(void *c, void *qp, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    fz_script *s = c;
    (void)qp;
    int err = verdict(s);
    if (!err)
        return 0;
    /* fail at the k-th WR of the chain (a cycle is cut at 64) */
    unsigned k = fz_pick(s->in, 8);
    struct shift_send_wr *w = wr;
    for (unsigned i = 0; i < k && w && w->next && i < 64; i++)
        w = w->next;
    if (bad)
        *bad = w;
    return err;
}

static int s_post_recv(void *c, void *qp, struct shift_recv_wr *wr)
{
    (void)qp, (void)wr;
    return verdict(c);
}

static int s_ring(void *c, void *qp)
{
    (void)qp;
    return verdict(c);
}

static uint64_t forged_wr_id(fz_in *in)
{
    switch (fz_pick(in, 4)) {
    case 0:
        return fz_small(in, 24); /* near the layer's sequence numbers */
    case 1:
        return PROBE_WR_ID;
    case 2:
        return fz_u64(in);
    default:
        return fz_u8(in);
    }
}

static int s_poll_cq(void *c, void *qp, int n, struct shift_wc *wc)
{
    static const int statuses[] = {SHIFT_WC_SUCCESS, SHIFT_WC_SUCCESS, SHIFT_WC_WR_FLUSH_ERR,
                                   SHIFT_WC_RETRY_EXC_ERR, SHIFT_WC_LOC_PROT_ERR,
                                   SHIFT_WC_REM_ACCESS_ERR, SHIFT_WC_FATAL_ERR, 99};
    static const int opcodes[] = {SHIFT_WC_SEND, SHIFT_WC_RDMA_WRITE, SHIFT_WC_RDMA_READ,
                                  SHIFT_WC_COMP_SWAP, SHIFT_WC_FETCH_ADD, SHIFT_WC_RECV,
                                  SHIFT_WC_RECV_RDMA_WITH_IMM, 77};
    fz_script *s = c;
    (void)qp;
    uint8_t b = fz_u8(s->in);
    if (b < 96 || n < 1)
        return 0;
    if (b < 112)
        return -any_errno(s->in);
    int k = b < 240 ? 1 : 1 + (int)fz_pick(s->in, (unsigned)n); /* at most n */
    for (int i = 0; i < k; i++) {
        memset(&wc[i], 0, sizeof wc[i]);
        wc[i].wr_id = forged_wr_id(s->in);
        wc[i].status = statuses[fz_pick(s->in, 8)];
        wc[i].opcode = opcodes[fz_pick(s->in, 8)];
        wc[i].byte_len = fz_u32(s->in);
        wc[i].qp_num = wc[i].byte_len & 3; /* (on a shared CQ: whose, or nobody's) */
    }
    return b == 255 ? k + (int)fz_u8(s->in) : k; /* 255: claims more than it wrote */
}

static int s_reg_mr(void *c, int path, uint64_t addr, size_t len, int access, uint32_t *lkey,
                    uint32_t *rkey, void **mr)
{
    fz_script *s = c;
    (void)addr, (void)len, (void)access;
    int err = verdict(s);
    if (err)
        return err;
    *lkey = fz_u32(s->in);
    *rkey = fz_u32(s->in);
    *mr = &s->qp_tag[path == 2 ? 2 : 1];
    return 0;
}

static int s_dereg_mr(void *c, void *mr)
{
    (void)c, (void)mr;
    return 0;
}

static int s_ctl_send(void *c, void *qp, const void *msg, uint32_t len)
{
    (void)qp, (void)msg, (void)len;
    return verdict(c);
}

static int s_sq_pending(void *c, void *qp, uint32_t i, struct shift_send_wr *out)
{
    fz_script *s = c;
    (void)qp;
    uint8_t b = fz_u8(s->in);
    if (b < 64 || i > 40)
        return -ENOENT;
    if (b < 72)
        return -any_errno(s->in);
    memset(out, 0, sizeof *out);
    out->wr_id = fz_u64(s->in);
    out->opcode = (int)fz_small(s->in, 7);
    out->send_flags = fz_u16(s->in) & 0x3ff;
    out->num_sge = (int)fz_small(s->in, 2);
    out->sg.length = fz_small(s->in, SHIFT_MAX_INLINE + 1);
    /* inline data is readable where it says (the contract); any length, any flag */
    out->sg.addr = (uint64_t)(uintptr_t)s->inline_data;
    out->sg.lkey = fz_u32(s->in);
    out->rkey = fz_u32(s->in);
    return b & 1;
}

/* the NIC's asynchronous events: none (past the input's end too, which ends the
 * layer's reading loop), any errno, or one event of any kind, mostly its death */
static int s_async_event(void *c, void *qp, int *event)
{
    fz_script *s = c;
    (void)qp;
    uint8_t b = fz_u8(s->in);
    if (b < 128)
        return 0;
    if (b < 144)
        return -any_errno(s->in);
    *event = b < 240 ? SHIFT_ASYNC_DEVICE_FATAL : (int)fz_u32(s->in);
    return 1;
}

/* A shared CQ (fz_script_ops_cq): its QPs' numbers mostly small, so that forged
 * completions name them, and now and then two alike, which the layer refuses */
static int s_qp_num(void *c, void *qp, uint32_t *qpn)
{
    fz_script *s = c;
    (void)qp;
    int err = verdict(s);
    if (!err)
        *qpn = fz_small(s->in, 4);
    return err;
}

static int s_create_cq(void *c, int path, uint32_t cqe, void **cq)
{
    fz_script *s = c;
    (void)cqe;
    int err = verdict(s);
    if (!err)
        *cq = &s->qp_tag[path == 2 ? 2 : 1];
    return err;
}

static int s_destroy_cq(void *c, void *cq)
{
    (void)c, (void)cq;
    return 0;
}

static int s_create_qp_cq(void *c, int path, const struct shift_backend_qp_cap *cap, void *cq,
                          void **qp)
{
    (void)cq;
    return s_create_qp(c, path, cap, qp);
}

#define SCRIPT_OPS                                                                           \
    .create_qp = s_create_qp, .destroy_qp = s_destroy_qp, .modify_qp = s_modify_qp,          \
    .query_qp = s_query_qp, .reset_qp = s_reset_qp, .post_send = s_post_send,                \
    .post_recv = s_post_recv, .ring = s_ring, .poll_cq = s_poll_cq, .reg_mr = s_reg_mr,      \
    .dereg_mr = s_dereg_mr, .ctl_send = s_ctl_send

const struct shift_backend_ops fz_script_ops = {SCRIPT_OPS};
const struct shift_backend_ops fz_script_ops_sq = {SCRIPT_OPS, .sq_pending = s_sq_pending};
/* both again with async_event: a NIC that dies in fatal error, or events out of thin air */
const struct shift_backend_ops fz_script_ops_ev = {SCRIPT_OPS, .async_event = s_async_event};
const struct shift_backend_ops fz_script_ops_sq_ev = {SCRIPT_OPS, .sq_pending = s_sq_pending,
                                                      .async_event = s_async_event};
/* a shared CQ's (shift_cq_create): every answer forged, the QP numbers too */
const struct shift_backend_ops fz_script_ops_cq = {SCRIPT_OPS, .query_qp_num = s_qp_num,
                                                   .create_cq = s_create_cq,
                                                   .destroy_cq = s_destroy_cq,
                                                   .create_qp_cq = s_create_qp_cq};
