/*
 * ops_ud.c - UD traffic in few bytes: a pair of UD QPs (one per host, on one NIC) of a
 * two-host fabric, brought up with Q_Keys that may differ, then receives, datagrams of
 * hostile lengths, opcodes, destinations and Q_Keys, deliveries, drops, polls, packets
 * rewritten as bytes, any transition, a NIC's death, and everything torn down again. Reached from op_create_qp's byte values that once meant a
 * NULL attribute (no step was appended: that would change what every committed input
 * means). The step's objects are its own: it checks its completions itself.
 */
#include "ops.h"

#include <errno.h>
#include <string.h>

enum { UD_GRH = 40, UD_MEM = 8192, UD_ODD = 1 }; /* receive WR ids are odd */

typedef struct {
    sn_fabric h;
    int nic;
    sn_cq cq[2];
    sn_qp qp[2];
    sn_mr mr[2];
    uint8_t *base[2];
    uint32_t lkey[2], qpn[2], qkey[2];
    uint64_t next_id;
} ud_pair;

static void ud_close(ud_pair *u)
{
    for (int h = 0; h < 2; h++) {
        if (u->qp[h])
            FZ_CHECK(sn_destroy_qp(u->qp[h]) == 0, h, 0);
        if (u->cq[h])
            FZ_CHECK(sn_destroy_cq(u->cq[h]) == 0, h, 0);
        if (u->mr[h])
            FZ_CHECK(sn_dereg_mr(u->mr[h]) == 0, h, 0);
    }
}

/* host h's end: CQ, UD QP, region at the start of its memory, RESET -> RTS; 0 or not */
static int ud_open_end(ud_pair *u, int h)
{
    size_t size;
    if (sn_host_mem(u->h, h, &u->base[h], &size) || size < UD_MEM)
        return -1; /* a one-host fabric, or a small one */
    struct sn_qp_init_attr a = {.max_send_wr = 1 + fz_small(W->in, 8), .max_recv_wr = 8,
                                .max_inline_data = fz_small(W->in, 80)};
    if (sn_create_cq(u->h, h, 32, &u->cq[h]))
        return -1; /* (an injected allocation failure) */
    a.send_cq = a.recv_cq = u->cq[h];
    if (sn_create_ud_qp(u->h, h, u->nic, &a, &u->qp[h]))
        return -1;
    if (sn_reg_mr(u->h, h, u->nic, (uint64_t)(uintptr_t)u->base[h], UD_MEM,
                  SHIFT_ACCESS_LOCAL_WRITE, &u->mr[h]))
        return -1; /* (its NIC is dead) */
    FZ_CHECK(sn_mr_keys(u->mr[h], &u->lkey[h], NULL) == 0, h, 0);
    struct sn_qp_attr q = {.qp_state = SHIFT_QPS_INIT, .qkey = u->qkey[h]};
    FZ_CHECK(sn_modify_qp(u->qp[h], &q, SN_QP_STATE | SN_QP_QKEY) == 0, h, 0);
    q = (struct sn_qp_attr){.qp_state = SHIFT_QPS_RTR};
    FZ_CHECK(sn_modify_qp(u->qp[h], &q, SN_QP_STATE) == 0, h, 0);
    q = (struct sn_qp_attr){.qp_state = SHIFT_QPS_RTS, .sq_psn = fz_u32(W->in)};
    FZ_CHECK(sn_modify_qp(u->qp[h], &q, SN_QP_STATE | SN_QP_SQ_PSN) == 0, h, 0);
    FZ_CHECK(sn_query_qp(u->qp[h], &q) == 0 && q.ud == 1 && q.qkey == u->qkey[h], h, 0);
    u->qpn[h] = q.qp_num;
    return 0;
}

static void ud_recv(ud_pair *u, int h)
{
    uint32_t off = fz_small(W->in, 4) * 1024, len = fz_small(W->in, 120);
    struct shift_recv_wr r = {.wr_id = u->next_id++ * 2 + UD_ODD, .num_sge = 1,
                              .sg = {(uint64_t)(uintptr_t)(u->base[h] + off), len, u->lkey[h]}};
    if (fz_u8(W->in) >= 240)
        r.sg.lkey ^= 0x100; /* a key of no region */
    int e = sn_post_recv(u->qp[h], &r, NULL);
    FZ_CHECK(e == 0 || e == ENOMEM || e == EINVAL, e, h); /* (EINVAL: in RESET) */
}

static void ud_send(ud_pair *u, int h)
{
    static const int ops[4] = {SHIFT_WR_SEND, SHIFT_WR_SEND_WITH_IMM, SHIFT_WR_SEND,
                               SHIFT_WR_RDMA_WRITE};
    uint8_t fl = fz_u8(W->in);
    uint32_t len = fl & 1 ? fz_small(W->in, SHIFT_MAX_MSG) : fz_small(W->in, 72);
    struct shift_send_wr w = {
        .wr_id = u->next_id++ * 2, .opcode = ops[fz_pick(W->in, 4)], .num_sge = len ? 1 : 0,
        .send_flags = (fl & 2 ? SHIFT_SEND_SIGNALED : 0) | (fl & 4 ? SHIFT_SEND_INLINE : 0),
        .sg = {(uint64_t)(uintptr_t)u->base[h] + UD_MEM / 2, len, u->lkey[h]},
        .imm_data = fz_u32(W->in)};
    if (fl & 8)
        w.sg.lkey ^= 0x100;
    uint32_t dest = fl & 16 ? pick_qpn() : u->qpn[!h];
    uint32_t qkey = fl & 32 ? fz_small(W->in, 4) : u->qkey[!h];
    int e = sn_post_send_ud(u->qp[h], &w, dest, qkey);
    FZ_CHECK(e == 0 || e == EINVAL || e == ENOMEM, e, h);
}

/* everything on the channel from host h delivered */
static void ud_deliver_all(ud_pair *u, int h)
{
    int dir = h == SN_HOST_A ? SN_AtoB : SN_BtoA;
    for (int n = sn_wire_len(u->h, u->nic, dir); n > 0; n--)
        FZ_CHECK(sn_deliver(u->h, u->nic, dir) == 1, n, h);
}

/* a receive WR at the peer, a datagram to it, and the path's channel delivered: the
 * round a datagram needs, in one choice (its parameters still hostile) */
static void ud_round(ud_pair *u, int h)
{
    ud_recv(u, !h);
    ud_send(u, h);
    ud_deliver_all(u, h);
}

/* the channel's head packet as bytes, rewritten - its kind (a datagram made a request
 * for a UD QP, or any kind) or any byte - and put back: the parser's datagrams */
static void ud_rewrite(ud_pair *u, int h)
{
    int dir = h == SN_HOST_A ? SN_AtoB : SN_BtoA;
    uint8_t buf[SN_WIRE_MAX];
    int n = sn_wire_take(u->h, u->nic, dir, buf, sizeof buf);
    FZ_CHECK(n >= 0, n, h);
    if (n <= 0)
        return;
    if (fz_u8(W->in) & 1)
        buf[1] = (uint8_t)fz_small(W->in, 5);
    else
        buf[fz_small(W->in, (uint32_t)n) % (uint32_t)n] ^= fz_u8(W->in);
    int r = sn_wire_put(u->h, u->nic, dir, buf, (uint32_t)n);
    FZ_CHECK(r == 0 || r == EINVAL || r == ENOMEM, r, n);
    ud_deliver_all(u, h);
}

/* a transition to any state, with or without an SQ PSN and a Q_Key */
static void ud_modify_any(ud_pair *u, int h)
{
    uint8_t fl = fz_u8(W->in);
    struct sn_qp_attr q = {.qp_state = (int)fz_small(W->in, 8), .sq_psn = fl,
                           .qkey = u->qkey[h]};
    int mask = SN_QP_STATE | (fl & 1 ? SN_QP_SQ_PSN : 0) | (fl & 2 ? SN_QP_QKEY : 0);
    int r = sn_modify_qp(u->qp[h], &q, mask);
    FZ_CHECK(r == 0 || r == EINVAL, r, h);
}

/* host h's NIC dies (the harness's books kept, as op_fault does) */
static void ud_nic_dies(ud_pair *u, int h)
{
    fz_fab *f = fab_of(u->h);
    if (f && sn_nic_fail(u->h, h, u->nic) == 1)
        nic_set(f, h, u->nic, 0);
}

/* what the step's CQs give back: its own WRs, datagrams with the GRH's room; or an
 * overrun, when flushes and datagrams filled a CQ faster than the polls emptied it */
static void ud_poll(ud_pair *u, int h)
{
    struct shift_wc wc[8];
    int n = sn_poll_cq(u->cq[h], 8, wc);
    FZ_CHECK((n >= 0 && n <= 8) || n == -EOVERFLOW, n, h); /* (a CQ of 32 can overrun) */
    for (int i = 0; i < n; i++) {
        int recv = (wc[i].wr_id & 1) == UD_ODD;
        FZ_CHECK(wc[i].wr_id < u->next_id * 2, (long)wc[i].wr_id, h);
        FZ_CHECK(wc[i].qp_num == u->qpn[h], (long)wc[i].qp_num, h);
        FZ_CHECK(recv == (wc[i].opcode == SHIFT_WC_RECV), wc[i].opcode, h);
        if (recv && wc[i].status == SHIFT_WC_SUCCESS)
            FZ_CHECK(wc[i].byte_len >= UD_GRH && wc[i].byte_len <= UD_GRH + SHIFT_MAX_MSG,
                     wc[i].byte_len, h);
    }
}

void ud_traffic(sn_fabric h)
{
    ud_pair u = {.h = h, .nic = pick_path()};
    u.qkey[0] = fz_small(W->in, 4);
    u.qkey[1] = fz_u8(W->in) < 224 ? u.qkey[0] : fz_small(W->in, 4);
    if (ud_open_end(&u, SN_HOST_A) == 0 && ud_open_end(&u, SN_HOST_B) == 0) {
        uint32_t steps = fz_small(W->in, 16);
        for (uint32_t k = steps < 64 ? steps : 64; k > 0; k--) { /* (fz_small: up to 2^32) */
            int host = (int)fz_pick(W->in, 2), dir = host == SN_HOST_A ? SN_AtoB : SN_BtoA;
            switch (fz_pick(W->in, 9)) {
            case 8: ud_nic_dies(&u, host); break;
            case 7: ud_rewrite(&u, host); break;
            case 6: ud_round(&u, host); break;
            case 0: ud_recv(&u, host); break;
            case 1: ud_send(&u, host); break;
            case 2: FZ_CHECK(sn_deliver(h, u.nic, dir) >= 0, host, 0); break;
            case 3: FZ_CHECK(sn_drop(h, u.nic, dir) >= 0, host, 0); break;
            case 4: ud_poll(&u, host); break;
            default: ud_modify_any(&u, host); break;
            }
        }
        ud_poll(&u, SN_HOST_A);
        ud_poll(&u, SN_HOST_B);
    }
    ud_close(&u);
}
