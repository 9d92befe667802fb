/*
 * simnic_rc.c - the RC transport: the requester transmits the next request of a QP
 * (Transmit); a delivered packet (Deliver) goes to its QP: a request to the responder,
 * which checks and executes it and answers, an ACK, NAK or response to the requester,
 * a control message to the layer's handler; the retransmission timer goes back or
 * gives up (Timeout).
 */
#include "simnic_internal.h"

#include <errno.h>
#include <string.h>

static int psn_diff(uint32_t a, uint32_t b) { return (int)(int32_t)(a - b); }

/* the MR a key names on a NIC, with the access asked; NULL if none */
sn_mr_s *mr_lookup(sn_fab *f, int host, int nic, uint32_t key, int remote)
{
    int code = (int)(key >> 24), idx = (int)((key >> 8) & 0xffff);
    if (code != host * 2 + nic)
        return NULL;
    sn_nic *n = &f->host[host].nic[nic];
    if (idx >= n->nmr || !n->mrs[idx])
        return NULL;
    sn_mr_s *mr = n->mrs[idx];
    if ((remote ? mr->rkey : mr->lkey) != key)
        return NULL;
    return mr;
}

int mr_covers(const sn_mr_s *mr, uint64_t addr, uint64_t len)
{
    return addr >= mr->addr && len <= mr->len && addr - mr->addr <= mr->len - len;
}

/* ------------------------------------------------------------- the events --- */

static int is_two_sided(int op)
{
    return op == SHIFT_WR_SEND || op == SHIFT_WR_SEND_WITH_IMM ||
           op == SHIFT_WR_RDMA_WRITE_WITH_IMM;
}

static int is_atomic(int op)
{
    return op == SHIFT_WR_ATOMIC_CMP_AND_SWP || op == SHIFT_WR_ATOMIC_FETCH_AND_ADD;
}

static int needs_response(int op) { return op == SHIFT_WR_RDMA_READ || is_atomic(op); }

int sn_transmit(sn_fabric fh, int host, int path)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return -EBADF;
    if (!here(f, host) || !valid_path(path))
        return -EINVAL;
    sn_nic *n = &f->host[host].nic[path];
    if (!n->alive || n->idle || n->nqp == 0)
        return 0;
    sn_qp_s *qp = NULL;
    for (int i = 0; i < n->nqp; i++) {
        sn_qp_s *c = n->qps[(n->rr + i) % n->nqp];
        if (c->state == SHIFT_QPS_RTS && c->nxt < c->db && c->has_dest) {
            qp = c;
            n->rr = (n->rr + i + 1) % n->nqp;
            break;
        }
    }
    if (!qp) {
        n->idle = 1;
        return 0;
    }
    uint64_t k = qp->nxt;
    sn_wqe *w = &qp->sq[k % qp->sq_cap];
    const struct shift_send_wr *wr = &w->wr;
    uint32_t len = wr->num_sge ? wr->sg.length : 0;
    uint32_t plen = (wr->opcode == SHIFT_WR_RDMA_READ || is_atomic(wr->opcode)) ? 0 : len;
    const uint8_t *src = NULL;
    if (plen) {
        if (wr->send_flags & SHIFT_SEND_INLINE) {
            src = w->inl;
        } else {
            sn_mr_s *mr = mr_lookup(f, host, path, wr->sg.lkey, 0);
            if (!mr || !mr_covers(mr, wr->sg.addr, len)) {
                qp_fail(qp, k, SHIFT_WC_LOC_PROT_ERR);
                return 1;
            }
            src = (const uint8_t *)(uintptr_t)wr->sg.addr;
        }
    }
    sn_pkt *p = pkt_new(f, plen);
    if (!p)
        return -ENOMEM;
    p->kind = PKT_REQ;
    p->op = (uint8_t)wr->opcode;
    p->dst_qpn = qp->dest_qpn;
    p->inc = qp->inc;
    p->psn = qp_psn(qp, k);
    p->imm = wr->imm_data;
    p->rkey = wr->rkey;
    p->raddr = wr->remote_addr;
    p->cmp = wr->compare_add;
    p->swap = wr->swap;
    p->val = len; /* requested length for READ */
    if (plen)
        memcpy(p->data, src, plen);
    qp->nxt++;
    f->ctr.transmitted++;
    chan_push(f, path, dir_from(host), p);
    return 1;
}

static void respond(sn_fab *f, sn_qp_s *qp, int syn, uint32_t psn, uint64_t val,
                    const void *data, uint32_t len)
{
    sn_pkt *a = pkt_new(f, len);
    if (!a)
        return; /* out of memory: as if lost on the wire */
    a->kind = PKT_ACK;
    a->op = (uint8_t)syn;
    a->dst_qpn = qp->dest_qpn;
    a->inc = qp->inc;
    a->psn = psn;
    a->val = val;
    if (len)
        memcpy(a->data, data, len);
    chan_push(f, qp->nic, dir_from(qp->host), a);
}

/* a fatal responder error: NAK it and move the responder QP to ERR */
static void responder_fatal(sn_fab *f, sn_qp_s *qp, int syn, uint32_t psn)
{
    respond(f, qp, syn, psn, 0, NULL, 0);
    qp_to_err(qp);
}

/* the QP's access flags allow this remote operation (a SEND needs none) */
static int qp_accepts(const sn_qp_s *qp, int op)
{
    if (op == SHIFT_WR_RDMA_WRITE || op == SHIFT_WR_RDMA_WRITE_WITH_IMM)
        return (qp->access & SHIFT_ACCESS_REMOTE_WRITE) != 0;
    if (op == SHIFT_WR_RDMA_READ)
        return (qp->access & SHIFT_ACCESS_REMOTE_READ) != 0;
    if (is_atomic(op))
        return (qp->access & SHIFT_ACCESS_REMOTE_ATOMIC) != 0;
    return 1;
}

static void responder(sn_fab *f, sn_qp_s *qp, sn_pkt *p)
{
    int d = psn_diff(p->psn, qp->epsn);
    if (d > 0)
        return; /* ahead of the expected PSN: discarded (the requester will time out) */
    int op = p->op;
    if (!qp_accepts(qp, op)) {
        responder_fatal(f, qp, SYN_INV_REQ, p->psn);
        return;
    }
    if (d < 0) {
        f->ctr.duplicates++;
        if (op == SHIFT_WR_RDMA_READ) {
            uint32_t len = (uint32_t)p->val;
            sn_mr_s *mr = len ? mr_lookup(f, qp->host, qp->nic, p->rkey, 1) : NULL;
            if (len && (!mr || !(mr->access & SHIFT_ACCESS_REMOTE_READ) ||
                        !mr_covers(mr, p->raddr, len))) {
                responder_fatal(f, qp, SYN_REM_ACCESS, p->psn);
                return;
            }
            respond(f, qp, SYN_ACK, p->psn, 0, (const void *)(uintptr_t)p->raddr, len);
        } else if (is_atomic(op)) {
            for (int i = 0; i < SN_SAVED; i++)
                if (qp->saved[i].valid && qp->saved[i].psn == p->psn) {
                    respond(f, qp, SYN_ACK, p->psn, qp->saved[i].val, NULL, 0);
                    return;
                }
            responder_fatal(f, qp, SYN_INV_REQ, p->psn);
        } else {
            respond(f, qp, SYN_ACK, p->psn, 0, NULL, 0);
        }
        return;
    }
    /* the expected PSN: execute */
    sn_rwqe *r = NULL;
    if (is_two_sided(op)) {
        if (qp->rq_head == qp->rq_tail) {
            if (f->attr.rnr_nak)
                respond(f, qp, SYN_RNR, p->psn, 0, NULL, 0);
            return; /* receiver not ready */
        }
        r = &qp->rq[qp->rq_head % qp->rq_cap];
    }
    uint64_t val = 0;
    const void *rdata = NULL;
    uint32_t rlen = 0;
    switch (op) {
    case SHIFT_WR_RDMA_WRITE:
    case SHIFT_WR_RDMA_WRITE_WITH_IMM:
        if (p->len) {
            sn_mr_s *mr = mr_lookup(f, qp->host, qp->nic, p->rkey, 1);
            if (!mr || !(mr->access & SHIFT_ACCESS_REMOTE_WRITE) ||
                !mr_covers(mr, p->raddr, p->len)) {
                responder_fatal(f, qp, SYN_REM_ACCESS, p->psn);
                return;
            }
            memcpy((void *)(uintptr_t)p->raddr, p->data, p->len);
        }
        if (r) {
            sn_rwqe rr = *r;
            qp->rq_head++;
            recv_cqe(qp, &rr, SHIFT_WC_SUCCESS, SHIFT_WC_RECV_RDMA_WITH_IMM, p->len, 1, p->imm);
        }
        break;
    case SHIFT_WR_SEND:
    case SHIFT_WR_SEND_WITH_IMM: {
        sn_rwqe rr = *r;
        int has_imm = op == SHIFT_WR_SEND_WITH_IMM;
        if (p->len) {
            if (!rr.num_sge || rr.sg.length < p->len) {
                qp->rq_head++;
                recv_cqe(qp, &rr, SHIFT_WC_LOC_LEN_ERR, SHIFT_WC_RECV, p->len, has_imm, p->imm);
                responder_fatal(f, qp, SYN_INV_REQ, p->psn);
                return;
            }
            sn_mr_s *mr = mr_lookup(f, qp->host, qp->nic, rr.sg.lkey, 0);
            if (!mr || !(mr->access & SHIFT_ACCESS_LOCAL_WRITE) ||
                !mr_covers(mr, rr.sg.addr, p->len)) {
                qp->rq_head++;
                recv_cqe(qp, &rr, SHIFT_WC_LOC_PROT_ERR, SHIFT_WC_RECV, p->len, has_imm, p->imm);
                responder_fatal(f, qp, SYN_REM_OP, p->psn);
                return;
            }
            memcpy((void *)(uintptr_t)rr.sg.addr, p->data, p->len);
        }
        qp->rq_head++;
        recv_cqe(qp, &rr, SHIFT_WC_SUCCESS, SHIFT_WC_RECV, p->len, has_imm, p->imm);
        break;
    }
    case SHIFT_WR_RDMA_READ: {
        uint32_t len = (uint32_t)p->val;
        if (len) {
            sn_mr_s *mr = mr_lookup(f, qp->host, qp->nic, p->rkey, 1);
            if (!mr || !(mr->access & SHIFT_ACCESS_REMOTE_READ) ||
                !mr_covers(mr, p->raddr, len)) {
                responder_fatal(f, qp, SYN_REM_ACCESS, p->psn);
                return;
            }
            rdata = (const void *)(uintptr_t)p->raddr;
            rlen = len;
        }
        break;
    }
    case SHIFT_WR_ATOMIC_CMP_AND_SWP:
    case SHIFT_WR_ATOMIC_FETCH_AND_ADD: {
        if ((uint32_t)p->val != 8 || (p->raddr & 7)) {
            responder_fatal(f, qp, SYN_INV_REQ, p->psn);
            return;
        }
        sn_mr_s *mr = mr_lookup(f, qp->host, qp->nic, p->rkey, 1);
        if (!mr || !(mr->access & SHIFT_ACCESS_REMOTE_ATOMIC) || !mr_covers(mr, p->raddr, 8)) {
            responder_fatal(f, qp, SYN_REM_ACCESS, p->psn);
            return;
        }
        uint64_t old;
        memcpy(&old, (const void *)(uintptr_t)p->raddr, 8);
        uint64_t nv = op == SHIFT_WR_ATOMIC_FETCH_AND_ADD ? old + p->cmp
                      : (old == p->cmp ? p->swap : old);
        memcpy((void *)(uintptr_t)p->raddr, &nv, 8);
        qp->saved[qp->saved_next].psn = p->psn;
        qp->saved[qp->saved_next].val = old;
        qp->saved[qp->saved_next].valid = 1;
        qp->saved_next = (qp->saved_next + 1) % SN_SAVED;
        val = old;
        break;
    }
    default:
        responder_fatal(f, qp, SYN_INV_REQ, p->psn);
        return;
    }
    qp->epsn++;
    f->ctr.executed++;
    respond(f, qp, SYN_ACK, p->psn, val, rdata, rlen);
}

/* complete WQEs [una, upto) successfully; stop early before a READ/atomic whose
 * response is missing (implicit NAK: go back to it). Returns the index reached. */
static uint64_t complete_upto(sn_qp_s *qp, uint64_t upto)
{
    uint64_t k = qp->una;
    for (; k < upto; k++) {
        sn_wqe *w = &qp->sq[k % qp->sq_cap];
        if (needs_response(w->wr.opcode))
            break;
        if (w->wr.send_flags & SHIFT_SEND_SIGNALED)
            send_cqe(qp, &w->wr, SHIFT_WC_SUCCESS, k);
    }
    if (k > qp->una) {
        qp->retries_left = qp->f->attr.retry_cnt;
        qp->rnr_left = qp->f->attr.rnr_retry;
    }
    qp->una = k;
    if (qp->nxt < k)
        qp->nxt = k;
    return k;
}

static void requester_ack(sn_fab *f, sn_qp_s *qp, sn_pkt *p)
{
    int d = psn_diff(p->psn, qp_psn(qp, qp->una));
    if (d < 0)
        return; /* stale */
    uint64_t i = qp->una + (uint64_t)d;
    if (i >= qp->nxt && i >= qp->tail)
        return; /* not a PSN this QP sent */
    if (i >= qp->tail)
        return;
    uint64_t k = complete_upto(qp, i);
    if (k < i) {
        /* a READ/atomic response is missing: an implicit NAK, which goes back to it and
         * costs a retry (rxe_comp.c: check_psn, COMPST_ERROR_RETRY; spec: ImplicitNak) */
        if (qp->retries_left == 0) {
            qp_fail(qp, k, SHIFT_WC_RETRY_EXC_ERR);
            return;
        }
        qp->retries_left--;
        qp->nxt = k;
        qp_kick(qp);
        return;
    }
    sn_wqe *w = &qp->sq[i % qp->sq_cap];
    switch (p->op) {
    case SYN_ACK: {
        int op = w->wr.opcode;
        if (needs_response(op)) {
            uint32_t len = op == SHIFT_WR_RDMA_READ ? (w->wr.num_sge ? w->wr.sg.length : 0) : 8;
            if (op == SHIFT_WR_RDMA_READ && p->len != len) {
                qp->nxt = i; /* a re-ACK without the data: go back */
                qp_kick(qp);
                return;
            }
            if (len) {
                sn_mr_s *mr = w->wr.num_sge ? mr_lookup(f, qp->host, qp->nic, w->wr.sg.lkey, 0)
                                            : NULL;
                if (!mr || !(mr->access & SHIFT_ACCESS_LOCAL_WRITE) ||
                    !mr_covers(mr, w->wr.sg.addr, len)) {
                    qp_fail(qp, i, SHIFT_WC_LOC_PROT_ERR);
                    return;
                }
                if (op == SHIFT_WR_RDMA_READ)
                    memcpy((void *)(uintptr_t)w->wr.sg.addr, p->data, len);
                else
                    memcpy((void *)(uintptr_t)w->wr.sg.addr, &p->val, 8);
            }
        }
        if (w->wr.send_flags & SHIFT_SEND_SIGNALED)
            send_cqe(qp, &w->wr, SHIFT_WC_SUCCESS, i);
        qp->una = i + 1;
        if (qp->nxt < qp->una)
            qp->nxt = qp->una;
        qp->retries_left = f->attr.retry_cnt;
        qp->rnr_left = f->attr.rnr_retry;
        break;
    }
    case SYN_RNR: /* go back to the WR and retransmit: rnr_retry times, or for ever */
        if (f->attr.rnr_retry == SN_RNR_FOREVER || qp->rnr_left > 0) {
            if (f->attr.rnr_retry != SN_RNR_FOREVER)
                qp->rnr_left--;
            qp->nxt = i;
            qp_kick(qp);
        } else {
            qp_fail(qp, i, SHIFT_WC_RNR_RETRY_EXC_ERR);
        }
        break;
    case SYN_INV_REQ:
        qp_fail(qp, i, SHIFT_WC_REM_INV_REQ_ERR);
        break;
    case SYN_REM_ACCESS:
        qp_fail(qp, i, SHIFT_WC_REM_ACCESS_ERR);
        break;
    default:
        qp_fail(qp, i, SHIFT_WC_REM_OP_ERR);
        break;
    }
}

int sn_deliver(sn_fabric fh, int path, int dir)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return -EBADF;
    if (!valid_path(path) || !valid_dir(dir))
        return -EINVAL;
    if (f->local >= 0 && dir == dir_from(f->local))
        return -EINVAL; /* leaving this host: sn_wire_take's */
    sn_pkt *p = chan_pop(&f->wire[path][dir]);
    if (!p)
        return 0;
    f->ctr.delivered++;
    int host = dir == SN_AtoB ? SN_HOST_B : SN_HOST_A;
    if (p->kind == PKT_UD && f->host[host].nic[path].alive) {
        ud_deliver(f, host, path, p); /* (a dead NIC loses it below, as any packet) */
        return 1;
    }
    sn_qp_s *qp = qp_by_qpn(f, p->dst_qpn);
    if (!f->host[host].nic[path].alive || !qp || qp->host != host || qp->nic != path ||
        p->inc != qp->inc) {
        f->ctr.lost++;
        pkt_free(f, p);
        return 1;
    }
    if (qp->ud) { /* an RC packet for a UD QP's number (a datagram went above) */
        f->ctr.lost++;
        pkt_free(f, p);
        return 1;
    }
    switch (p->kind) {
    case PKT_REQ:
        if (qp->state == SHIFT_QPS_RTS || qp->state == SHIFT_QPS_RTR)
            responder(f, qp, p);
        break;
    case PKT_ACK:
        if (qp->state == SHIFT_QPS_RTS)
            requester_ack(f, qp, p);
        break;
    case PKT_CTL:
        if (qp->state == SHIFT_QPS_RTS && qp->ctl_fn) {
            /* the handler may post, poll or even free packets: detach p first */
            uint8_t buf[256];
            uint32_t len = p->len < sizeof buf ? p->len : (uint32_t)sizeof buf;
            memcpy(buf, p->data, len);
            pkt_free(f, p);
            qp->ctl_fn(qp->ctl_arg, H_PTR(qp->h), buf, len);
            return 1;
        }
        break;
    default:
        break;
    }
    pkt_free(f, p);
    return 1;
}

int sn__timeout(sn_fab *f, int host, int path)
{
    sn_nic *n = &f->host[host].nic[path];
    if (!n->alive)
        return 0;
    int count = 0;
    for (int i = 0; i < n->nqp; i++) {
        sn_qp_s *qp = n->qps[i];
        if (qp->state != SHIFT_QPS_RTS || qp->una >= qp->nxt)
            continue;
        count++;
        if (qp->retries_left > 0) {
            qp->retries_left--;
            qp->nxt = qp->una;
            qp_kick(qp);
            f->ctr.timeouts++;
        } else {
            qp_fail(qp, qp->una, SHIFT_WC_RETRY_EXC_ERR);
        }
    }
    return count;
}

int sn_timeout(sn_fabric fh, int host, int path)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return -EBADF;
    if (!here(f, host) || !valid_path(path))
        return -EINVAL;
    return sn__timeout(f, host, path) > 0;
}
