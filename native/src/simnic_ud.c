/*
 * simnic_ud.c - UD queue pairs: datagrams between a host's QP and any QP of the peer's
 * NIC on the same path. A datagram is one packet, put on the path's channel when it is
 * posted (UD has no requester state: no Transmit, no ACK, no retransmission), delivered
 * in FIFO order with the path's other packets, lost with them, and received into the
 * oldest receive WR of the UD QP it names if its Q_Key matches; otherwise discarded.
 */
#include "simnic_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { UD_GRH = 40 }; /* the room a UD receive buffer keeps for a Global Route Header */

int sn_create_ud_qp(sn_fabric f, int host, int nic, const struct sn_qp_init_attr *attr,
                    sn_qp *out)
{
    return qp_create(f, host, nic, attr, 1, out);
}

/* ------------------------------------------------------------ transitions --- */

/* the transition to `to` from the QP's state, as verbs allows it for UD */
static int ud_transition_ok(const sn_qp_s *qp, int to, int mask)
{
    switch (to) {
    case SHIFT_QPS_RESET:
    case SHIFT_QPS_ERR:
        return 1;
    case SHIFT_QPS_INIT: /* RESET -> INIT names the Q_Key (ibv_modify_qp's UD rule) */
        return (qp->state == SHIFT_QPS_RESET && (mask & SN_QP_QKEY)) ||
               qp->state == SHIFT_QPS_INIT;
    case SHIFT_QPS_RTR:
        return qp->state == SHIFT_QPS_INIT && !(mask & SN_QP_SQ_PSN);
    case SHIFT_QPS_RTS:
        return (qp->state == SHIFT_QPS_RTR && (mask & SN_QP_SQ_PSN)) ||
               qp->state == SHIFT_QPS_RTS;
    default:
        return 0;
    }
}

int ud_modify(sn_qp_s *qp, const struct sn_qp_attr *attr, int mask)
{
    /* a UD QP has no destination, no expected PSN and no remote access to set */
    if (!attr || (mask & ~(SN_QP_STATE | SN_QP_SQ_PSN | SN_QP_QKEY)))
        return EINVAL;
    int to = (mask & SN_QP_STATE) ? attr->qp_state : qp->state;
    if (!ud_transition_ok(qp, to, mask))
        return EINVAL;
    if (to == SHIFT_QPS_RESET) {
        qp_empty(qp);
        qp->state = SHIFT_QPS_RESET;
        qp->silent = 0;
        return 0;
    }
    if (to == SHIFT_QPS_ERR) {
        if (qp->state != SHIFT_QPS_ERR)
            qp_to_err(qp);
        return 0;
    }
    if (mask & SN_QP_QKEY)
        qp->qkey = attr->qkey;
    if (mask & SN_QP_SQ_PSN)
        qp->psn_base = attr->sq_psn - (uint32_t)qp->tail;
    qp->state = to;
    return 0;
}

/* ------------------------------------------------------------ the send ------- */

static int ud_wr_check(const sn_qp_s *qp, const struct shift_send_wr *wr, uint32_t dest_qpn)
{
    if (!qp->ud || !wr || dest_qpn >= (1u << 24))
        return EINVAL;
    if (wr->opcode != SHIFT_WR_SEND && wr->opcode != SHIFT_WR_SEND_WITH_IMM)
        return EINVAL;
    int err = shift_send_wr_check(wr, qp->max_inline);
    if (err)
        return err;
    if (qp->state != SHIFT_QPS_RTS && qp->state != SHIFT_QPS_ERR)
        return EINVAL;
    return qp->tail - qp->done >= qp->sq_cap ? ENOMEM : 0;
}

/* the payload's bytes: inline ones were given with the WR, others lie in a region of the
 * QP's NIC that the lkey names; NULL if the lkey does not cover them */
static const uint8_t *ud_payload(sn_qp_s *qp, const struct shift_send_wr *wr)
{
    if (wr->send_flags & SHIFT_SEND_INLINE)
        return (const uint8_t *)(uintptr_t)wr->sg.addr;
    sn_mr_s *mr = mr_lookup(qp->f, qp->host, qp->nic, wr->sg.lkey, 0);
    if (!mr || !mr_covers(mr, wr->sg.addr, wr->sg.length))
        return NULL;
    return (const uint8_t *)(uintptr_t)wr->sg.addr;
}

/* the datagram of WQE idx onto the path: 0, or ENOMEM (out of packets: nothing sent) */
static int ud_emit(sn_qp_s *qp, const struct shift_send_wr *wr, const uint8_t *src,
                   uint32_t dest_qpn, uint32_t qkey, uint64_t idx)
{
    uint32_t len = wr->num_sge ? wr->sg.length : 0;
    sn_pkt *p = pkt_new(qp->f, len);
    if (!p)
        return ENOMEM;
    p->kind = PKT_UD;
    p->op = (uint8_t)wr->opcode;
    p->dst_qpn = dest_qpn;
    p->psn = qp_psn(qp, idx);
    p->imm = wr->opcode == SHIFT_WR_SEND_WITH_IMM ? wr->imm_data : 0;
    p->rkey = qkey;
    p->raddr = qp->qpn;
    if (len)
        memcpy(p->data, src, len);
    qp->f->ctr.transmitted++;
    chan_push(qp->f, qp->nic, dir_from(qp->host), p);
    return 0;
}

int sn_post_send_ud(sn_qp q, const struct shift_send_wr *wr, uint32_t dest_qpn,
                    uint32_t qkey)
{
    sn_qp_s *qp;
    int err = caller_qp(q, &qp);
    if (!err)
        err = ud_wr_check(qp, wr, dest_qpn);
    if (err)
        return err;
    uint32_t len = wr->num_sge ? wr->sg.length : 0;
    const uint8_t *src = len ? ud_payload(qp, wr) : NULL;
    sn_wqe *w = &qp->sq[qp->tail % qp->sq_cap];
    *w = (sn_wqe){.wr = *wr};
    w->wr.next = NULL;
    uint64_t idx = qp->tail;
    if (qp->silent || !qp->f->host[qp->host].nic[qp->nic].alive) {
        qp->tail++;
        qp->una = qp->nxt = qp->db = qp->tail;
        return 0; /* a dead device takes the WR and completes nothing */
    }
    if (qp->state == SHIFT_QPS_ERR) {
        qp->tail++;
        qp->una = qp->nxt = qp->db = qp->tail;
        send_cqe(qp, &w->wr, SHIFT_WC_WR_FLUSH_ERR, idx);
        return 0;
    }
    if (len && !src) { /* a local protection error: the WR fails, the QP goes to ERR */
        qp->tail++;
        qp_fail(qp, idx, SHIFT_WC_LOC_PROT_ERR);
        return 0;
    }
    err = ud_emit(qp, wr, src, dest_qpn, qkey, idx);
    if (err)
        return err;
    qp->tail++;
    qp->una = qp->nxt = qp->db = qp->tail;
    if (wr->send_flags & SHIFT_SEND_SIGNALED)
        send_cqe(qp, &w->wr, SHIFT_WC_SUCCESS, idx);
    return 0;
}

/* ------------------------------------------------------------ the receive ---- */

/* the UD QP that takes a datagram arriving at NIC path of host, or NULL */
static sn_qp_s *ud_receiver(sn_fab *f, int host, int path, const sn_pkt *p)
{
    sn_qp_s *qp = qp_by_qpn(f, p->dst_qpn);
    if (!qp || !qp->ud || qp->host != host || qp->nic != path)
        return NULL;
    if (qp->state != SHIFT_QPS_RTR && qp->state != SHIFT_QPS_RTS)
        return NULL;
    if (qp->qkey != p->rkey || qp->rq_head == qp->rq_tail)
        return NULL;
    return qp;
}

/* the datagram into the receive WR r: the completion's status */
static int ud_place(sn_fab *f, sn_qp_s *qp, const sn_rwqe *r, const sn_pkt *p)
{
    uint64_t total = (uint64_t)UD_GRH + p->len;
    if (!r->num_sge || r->sg.length < total)
        return SHIFT_WC_LOC_LEN_ERR;
    sn_mr_s *mr = mr_lookup(f, qp->host, qp->nic, r->sg.lkey, 0);
    if (!mr || !(mr->access & SHIFT_ACCESS_LOCAL_WRITE) || !mr_covers(mr, r->sg.addr, total))
        return SHIFT_WC_LOC_PROT_ERR;
    if (p->len)
        memcpy((uint8_t *)(uintptr_t)r->sg.addr + UD_GRH, p->data, p->len);
    return SHIFT_WC_SUCCESS;
}

void ud_deliver(sn_fab *f, int host, int path, sn_pkt *p)
{
    sn_qp_s *qp = ud_receiver(f, host, path, p);
    if (!qp) {
        f->ctr.ud_discarded++;
        pkt_free(f, p);
        return;
    }
    sn_rwqe r = qp->rq[qp->rq_head % qp->rq_cap];
    qp->rq_head++;
    int status = ud_place(f, qp, &r, p);
    if (status == SHIFT_WC_SUCCESS)
        f->ctr.executed++;
    ud_recv_cqe(qp, &r, status, UD_GRH + p->len, p->op == SHIFT_WR_SEND_WITH_IMM, p->imm,
                (uint32_t)p->raddr);
    pkt_free(f, p);
}
