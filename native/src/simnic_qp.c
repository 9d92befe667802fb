/*
 * simnic_qp.c - simnic's queue pairs: the QP state machine (RESET, INIT, RTR, RTS, ERR
 * and its flushes), creating, querying, connecting and reconnecting them, and the verbs
 * that post to them (send, receive, doorbell, reading the send queue back).
 */
#include "simnic_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A QP the caller may act on: EINVAL for a bad handle, EBUSY for one a connection owns
 * (its data path and its lifetime are the layer's). */
int caller_qp(sn_qp q, sn_qp_s **out)
{
    *out = sn__qp(q);
    if (!*out)
        return EINVAL;
    return (*out)->owned ? EBUSY : 0;
}

/* ------------------------------------------------------------- QP state ----- */

static void qp_flush_all(sn_qp_s *qp, uint64_t err_idx, int err_status)
{
    /* indices from una: err_idx gets err_status, the others WR_FLUSH_ERR, behind what
     * the NIC had made and not yet written, which it writes first */
    uint64_t una = qp->una, tail = qp->tail;
    cq_write_all(qp->scq);
    cq_write_all(qp->rcq);
    qp->una = qp->nxt = qp->db = qp->tail;
    for (uint64_t k = una; k < tail; k++) {
        sn_wqe *w = &qp->sq[k % qp->sq_cap];
        send_cqe(qp, &w->wr, k == err_idx ? err_status : SHIFT_WC_WR_FLUSH_ERR, k);
    }
    while (qp->rq_head < qp->rq_tail) {
        sn_rwqe r = qp->rq[qp->rq_head % qp->rq_cap];
        qp->rq_head++;
        recv_cqe(qp, &r, SHIFT_WC_WR_FLUSH_ERR, SHIFT_WC_RECV, 0, 0, 0);
    }
}

void qp_to_err(sn_qp_s *qp)
{
    qp->state = SHIFT_QPS_ERR;
    qp_flush_all(qp, UINT64_MAX, 0);
}

/* complete WQE err_idx with an error, flush the rest, QP to ERR */
void qp_fail(sn_qp_s *qp, uint64_t err_idx, int status)
{
    qp->state = SHIFT_QPS_ERR;
    qp_flush_all(qp, err_idx, status);
}

void qp_empty(sn_qp_s *qp)
{
    qp->una = qp->nxt = qp->db = qp->good = qp->done = qp->tail;
    qp->rq_head = qp->rq_tail;
    memset(qp->saved, 0, sizeof qp->saved);
    qp->saved_next = 0;
}

static void qp_set_sq_psn(sn_qp_s *qp, uint32_t psn) { qp->psn_base = psn - (uint32_t)qp->tail; }

static void qp_rts_fresh(sn_qp_s *qp)
{
    qp_empty(qp);
    qp->state = SHIFT_QPS_RTS;
    qp->silent = 0;
    qp->epsn = 0;
    qp_set_sq_psn(qp, 0);
    qp->retries_left = qp->f->attr.retry_cnt;
    qp->rnr_left = qp->f->attr.rnr_retry;
}

static int modify_state(sn_qp_s *qp, const struct sn_qp_attr *attr, int mask)
{
    if (!attr || (mask & ~(SN_QP_STATE | SN_QP_DEST_QPN | SN_QP_RQ_PSN | SN_QP_SQ_PSN |
                           SN_QP_ACCESS)))
        return EINVAL;
    if ((mask & SN_QP_ACCESS) && (attr->access & ~0xf))
        return EINVAL;
    int to = (mask & SN_QP_STATE) ? attr->qp_state : qp->state;
    int from = qp->state;
    if (to < SHIFT_QPS_RESET || to > SHIFT_QPS_ERR || to == SHIFT_QPS_SQD || to == SHIFT_QPS_SQE)
        return EINVAL;
    if (mask & SN_QP_DEST_QPN) {
        sn_qp_s *d = qp_by_qpn(qp->f, attr->dest_qp_num);
        if (qp->f->local >= 0 ? attr->dest_qp_num >= (1u << 24) /* any QPN: 24 bits */
                              : !d || d->host == qp->host || d->nic != qp->nic || d->ud)
            return EINVAL;
        if (to != SHIFT_QPS_RTR)
            return EINVAL;
    }
    switch (to) {
    case SHIFT_QPS_RESET:
        /* the queues are emptied without completions; the QP keeps its destination,
         * so RTR may omit it (the connection manager remembers the pair) */
        qp_empty(qp);
        qp->state = SHIFT_QPS_RESET;
        qp->silent = 0;
        return 0;
    case SHIFT_QPS_ERR:
        if (from != SHIFT_QPS_ERR) {
            qp->state = SHIFT_QPS_ERR;
            qp_flush_all(qp, UINT64_MAX, 0);
        }
        return 0;
    case SHIFT_QPS_INIT:
        if (from != SHIFT_QPS_RESET && from != SHIFT_QPS_INIT)
            return EINVAL;
        qp->state = SHIFT_QPS_INIT;
        return 0;
    case SHIFT_QPS_RTR:
        if (from != SHIFT_QPS_INIT)
            return EINVAL;
        if (!(mask & SN_QP_DEST_QPN) && !qp->has_dest)
            return EINVAL;
        if (!(mask & SN_QP_RQ_PSN))
            return EINVAL;
        if (mask & SN_QP_DEST_QPN) {
            qp->dest_qpn = attr->dest_qp_num;
            qp->has_dest = 1;
        }
        qp->epsn = attr->rq_psn;
        qp->state = SHIFT_QPS_RTR;
        return 0;
    case SHIFT_QPS_RTS:
        if (from == SHIFT_QPS_RTR) {
            if (!(mask & SN_QP_SQ_PSN))
                return EINVAL;
        } else if (from != SHIFT_QPS_RTS) {
            return EINVAL;
        }
        if (mask & SN_QP_SQ_PSN) {
            if (qp->tail != qp->una)
                return EINVAL; /* PSNs of outstanding WQEs are fixed */
            qp_set_sq_psn(qp, attr->sq_psn);
        }
        if (mask & SN_QP_RQ_PSN)
            return EINVAL;
        qp->retries_left = qp->f->attr.retry_cnt;
        qp->rnr_left = qp->f->attr.rnr_retry;
        qp->state = SHIFT_QPS_RTS;
        qp_kick(qp);
        return 0;
    default:
        return EINVAL;
    }
}

/* the state transition, then (only if it succeeded) the access flags */
int sn__modify(sn_qp_s *qp, const struct sn_qp_attr *attr, int mask)
{
    if (qp->ud)
        return ud_modify(qp, attr, mask);
    int err = modify_state(qp, attr, mask);
    if (!err && (mask & SN_QP_ACCESS))
        qp->access = attr->access;
    return err;
}

/* ------------------------------------------------------------- QPs ---------- */

void qp_release(sn_qp_s *qp)
{
    h_free(qp->h);
    free(qp->sq);
    free(qp->rq);
    free(qp);
}

int sn_create_qp(sn_fabric fh, int host, int nic, const struct sn_qp_init_attr *attr,
                 sn_qp *out)
{
    return qp_create(fh, host, nic, attr, 0, out);
}

/* an RC or UD QP: one number space for both, so a packet's destination names one QP */
int qp_create(sn_fabric fh, int host, int nic, const struct sn_qp_init_attr *attr, int ud,
              sn_qp *out)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return EBADF;
    if (!out || !attr || !here(f, host) || !valid_path(nic))
        return EINVAL;
    *out = NULL;
    sn_cq_s *scq = h_get(attr->send_cq, H_CQ), *rcq = h_get(attr->recv_cq, H_CQ);
    if (!scq || !rcq || scq->f != f || rcq->f != f || scq->host != host || rcq->host != host)
        return EINVAL;
    if (scq->owned || rcq->owned)
        return EBUSY;
    if (attr->max_send_wr < 1 || attr->max_send_wr > 16384 || attr->max_recv_wr > 16384 ||
        attr->max_inline_data > SHIFT_MAX_INLINE)
        return EINVAL;
    sn_nic *n = &f->host[host].nic[nic];
    if (f->nqps >= 1u << 20)
        return ENOMEM;
    if (f->nqps == f->capqps) {
        uint32_t cap = f->capqps ? f->capqps * 2 : 8;
        sn_qp_s **q = realloc(f->qps, cap * sizeof *q);
        if (!q)
            return ENOMEM;
        f->qps = q;
        f->capqps = cap;
    }
    if (n->nqp == n->capqp) {
        int cap = n->capqp ? n->capqp * 2 : 4;
        sn_qp_s **q = realloc(n->qps, (size_t)cap * sizeof *q);
        if (!q)
            return ENOMEM;
        n->qps = q;
        n->capqp = cap;
    }
    sn_qp_s *qp = calloc(1, sizeof *qp);
    if (!qp)
        return ENOMEM;
    qp->sq_cap = attr->max_send_wr;
    qp->rq_cap = attr->max_recv_wr ? attr->max_recv_wr : 1;
    qp->sq = calloc(qp->sq_cap, sizeof *qp->sq);
    qp->rq = calloc(qp->rq_cap, sizeof *qp->rq);
    if (!qp->sq || !qp->rq) {
        free(qp->sq);
        free(qp->rq);
        free(qp);
        return ENOMEM;
    }
    if (!attr->max_recv_wr)
        qp->rq_cap = 0;
    qp->f = f;
    qp->host = host;
    qp->nic = nic;
    qp->qpn = f->qpn_base + f->nqps;
    qp->ud = ud;
    qp->state = SHIFT_QPS_RESET;
    qp->scq = scq;
    qp->rcq = rcq;
    qp->max_inline = attr->max_inline_data;
    qp->access = SHIFT_ACCESS_REMOTE_WRITE | SHIFT_ACCESS_REMOTE_READ | SHIFT_ACCESS_REMOTE_ATOMIC;
    qp->retries_left = f->attr.retry_cnt;
    qp->rnr_left = f->attr.rnr_retry;
    qp->h = h_new(qp, H_QP);
    if (!qp->h) {
        free(qp->sq);
        free(qp->rq);
        free(qp);
        return ENOMEM;
    }
    scq->refs++;
    rcq->refs++;
    f->qps[f->nqps++] = qp;
    n->qps[n->nqp++] = qp;
    *out = H_PTR(qp->h);
    return 0;
}

int sn_destroy_qp(sn_qp q)
{
    sn_qp_s *qp;
    int err = caller_qp(q, &qp);
    if (err)
        return err;
    sn_fab *f = qp->f;
    sn_nic *n = &f->host[qp->host].nic[qp->nic];
    for (int i = 0; i < n->nqp; i++)
        if (n->qps[i] == qp) {
            memmove(&n->qps[i], &n->qps[i + 1], (size_t)(n->nqp - i - 1) * sizeof *n->qps);
            n->nqp--;
            break;
        }
    if (n->rr >= n->nqp)
        n->rr = 0;
    /* its packets can no longer reach it: qp_by_qpn will find nothing */
    f->qps[qp->qpn - f->qpn_base] = NULL;
    qp->scq->refs--;
    qp->rcq->refs--;
    qp_release(qp);
    return 0;
}

/* Does the NIC still owe host memory completions on qp's CQs (ack_before_cqe)? */
static int owes_cqes(const sn_qp_s *qp)
{
    return qp->scq->written < qp->scq->tail || qp->rcq->written < qp->rcq->tail;
}

int sn_modify_qp(sn_qp q, const struct sn_qp_attr *attr, int mask)
{
    sn_qp_s *qp = sn__qp(q);
    if (!qp || !attr)
        return EINVAL;
    /* a reset waits for the completions the NIC owes, as sn_reset_qp does (a driver's
     * modify to RESET cannot take back a CQE already on its way to memory) */
    if ((mask & SN_QP_STATE) && attr->qp_state == SHIFT_QPS_RESET && owes_cqes(qp))
        return EBUSY;
    return sn__modify(qp, attr, mask);
}

int sn_query_qp(sn_qp q, struct sn_qp_attr *attr)
{
    sn_qp_s *qp = sn__qp(q);
    if (!qp || !attr)
        return EINVAL;
    memset(attr, 0, sizeof *attr);
    attr->qp_state = qp->state;
    attr->dest_qp_num = qp->has_dest ? qp->dest_qpn : 0;
    attr->rq_psn = qp->epsn;
    attr->sq_psn = qp_psn(qp, qp->tail);
    attr->qp_num = qp->qpn;
    attr->nic = qp->nic;
    attr->host = qp->host;
    attr->access = qp->access;
    attr->qkey = qp->qkey;
    attr->ud = qp->ud;
    return 0;
}

int sn_connect(sn_qp a, sn_qp b)
{
    sn_qp_s *x = sn__qp(a), *y = sn__qp(b);
    if (!x || !y || x == y || x->f != y->f || x->host == y->host || x->nic != y->nic ||
        x->ud || y->ud)
        return EINVAL;
    if ((x->state != SHIFT_QPS_RESET && x->state != SHIFT_QPS_INIT) ||
        (y->state != SHIFT_QPS_RESET && y->state != SHIFT_QPS_INIT))
        return EINVAL;
    x->dest_qpn = y->qpn;
    y->dest_qpn = x->qpn;
    x->has_dest = y->has_dest = 1;
    qp_rts_fresh(x);
    qp_rts_fresh(y);
    return 0;
}

int sn__reconnect(sn_qp_s *qp)
{
    sn_fab *f = qp->f;
    if (!qp->has_dest)
        return EINVAL;
    sn_qp_s *peer = qp_by_qpn(f, qp->dest_qpn);
    if (!peer)
        return ENOTCONN;
    int p = qp->nic;
    if (!f->link[p] || !f->host[0].nic[p].alive || !f->host[1].nic[p].alive)
        return ENETUNREACH;
    chan_purge(f, p, qp->qpn, peer->qpn);
    peer->dest_qpn = qp->qpn;
    peer->has_dest = 1;
    qp_rts_fresh(qp);
    qp_rts_fresh(peer);
    /* a new incarnation at both ends, as if each had reset its own */
    qp->inc = peer->inc = (qp->inc > peer->inc ? qp->inc : peer->inc) + 1;
    return 0;
}

int sn__reset_qp(sn_qp_s *qp, uint32_t inc)
{
    if (!qp->has_dest)
        return EINVAL;
    if (!qp->f->host[qp->host].nic[qp->nic].alive)
        return ENETDOWN;
    if (owes_cqes(qp))
        return EBUSY;
    qp_rts_fresh(qp);
    qp->inc = inc;
    return 0;
}

int sn_reset_qp(sn_qp q, uint32_t inc)
{
    sn_qp_s *qp;
    int err = caller_qp(q, &qp);
    return err ? err : sn__reset_qp(qp, inc);
}

int sn_reconnect(sn_qp q)
{
    sn_qp_s *qp = sn__qp(q);
    if (!qp)
        return EINVAL;
    if (qp->f->local >= 0)
        return ENOTSUP; /* one host: the peer's end is not here to reset */
    return sn__reconnect(qp);
}

int sn__post_send(sn_qp_s *qp, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    for (; wr; wr = wr->next) {
        int err = qp->ud ? EINVAL : shift_send_wr_check(wr, qp->max_inline); /* UD: _ud */
        if (!err && qp->state != SHIFT_QPS_RTS && qp->state != SHIFT_QPS_ERR)
            err = EINVAL;
        if (!err && qp->tail - qp->done >= qp->sq_cap)
            err = ENOMEM;
        if (err) {
            if (bad)
                *bad = wr;
            return err;
        }
        sn_wqe *w = &qp->sq[qp->tail % qp->sq_cap];
        w->wr = *wr;
        w->wr.next = NULL;
        w->inl_len = 0;
        if ((wr->send_flags & SHIFT_SEND_INLINE) && wr->num_sge && wr->sg.length) {
            memcpy(w->inl, (const void *)(uintptr_t)wr->sg.addr, wr->sg.length);
            w->inl_len = wr->sg.length;
        }
        qp->tail++;
        if (qp->silent)
            continue; /* a dead device completes nothing */
        if (qp->state == SHIFT_QPS_ERR) {
            /* written to the queue and flushed at once; the slot is freed at the poll */
            qp->una = qp->nxt = qp->db = qp->tail;
            send_cqe(qp, &w->wr, SHIFT_WC_WR_FLUSH_ERR, qp->tail - 1);
        } else if (!(wr->send_flags & SHIFT_SEND_NO_DOORBELL)) {
            qp->db = qp->tail;
            qp_kick(qp);
        }
    }
    return 0;
}

/* The i-th WR of the send queue not yet covered by a polled successful completion
 * (inline data pointing at the queue's copy): 0, or 1 if a polled error completion
 * covers it; -ENOENT past the last, -EOVERFLOW if its slot was reused. */
int sn__sq_pending(sn_qp_s *qp, uint32_t i, struct shift_send_wr *out)
{
    uint64_t idx = qp->good + i;
    if (idx >= qp->tail)
        return -ENOENT;
    if (qp->tail - qp->good > qp->sq_cap)
        return -EOVERFLOW;
    const sn_wqe *w = &qp->sq[idx % qp->sq_cap];
    *out = w->wr;
    if (w->inl_len)
        out->sg.addr = (uint64_t)(uintptr_t)w->inl;
    return idx < qp->done;
}

int sn_post_send(sn_qp q, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    sn_qp_s *qp;
    int err = caller_qp(q, &qp);
    if (err)
        return err;
    if (!wr) {
        if (bad)
            *bad = NULL;
        return EINVAL;
    }
    return sn__post_send(qp, wr, bad);
}

int sn__ring(sn_qp_s *qp)
{
    qp->db = qp->tail;
    qp_kick(qp);
    return 0;
}

int sn_ring(sn_qp q)
{
    sn_qp_s *qp;
    int err = caller_qp(q, &qp);
    if (err)
        return err;
    return sn__ring(qp);
}

int sn__post_recv(sn_qp_s *qp, struct shift_recv_wr *wr, struct shift_recv_wr **bad)
{
    /* a QP in ERR flushes each WR at once, so the queue never fills: one call takes
     * at most a queue's worth (a cyclic chain ends in ENOMEM, not a hang) */
    uint32_t flushed = 0;
    for (; wr; wr = wr->next) {
        int err = 0;
        if (wr->num_sge < 0 || wr->num_sge > 1)
            err = EINVAL;
        else if (qp->state == SHIFT_QPS_RESET || qp->rq_cap == 0)
            err = EINVAL;
        else if (qp->rq_tail - qp->rq_head + flushed >= qp->rq_cap)
            err = ENOMEM;
        if (err) {
            if (bad)
                *bad = wr;
            return err;
        }
        sn_rwqe r = {wr->wr_id, wr->sg, wr->num_sge};
        if (qp->state == SHIFT_QPS_ERR && !qp->silent) {
            recv_cqe(qp, &r, SHIFT_WC_WR_FLUSH_ERR, SHIFT_WC_RECV, 0, 0, 0);
            flushed++;
            continue;
        }
        qp->rq[qp->rq_tail % qp->rq_cap] = r;
        qp->rq_tail++;
    }
    return 0;
}

int sn_post_recv(sn_qp q, struct shift_recv_wr *wr, struct shift_recv_wr **bad)
{
    sn_qp_s *qp;
    int err = caller_qp(q, &qp);
    if (err)
        return err;
    if (!wr) {
        if (bad)
            *bad = NULL;
        return EINVAL;
    }
    return sn__post_recv(qp, wr, bad);
}
