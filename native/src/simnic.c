/* simnic.c - a deterministic software RC NIC pair per path, a wire, and faults. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------- helpers ------ */

static int valid_host(int h) { return h == SN_HOST_A || h == SN_HOST_B; }
static int valid_path(int p) { return p == 1 || p == 2; }
static int valid_dir(int d) { return d == SN_AtoB || d == SN_BtoA; }
static int dir_from(int host) { return host == SN_HOST_A ? SN_AtoB : SN_BtoA; }
static int psn_diff(uint32_t a, uint32_t b) { return (int)(int32_t)(a - b); }

sn_fab *sn__fab(sn_fabric f) { return h_get(f, H_FABRIC); }
sn_qp_s *sn__qp(sn_qp qp) { return h_get(qp, H_QP); }
sn_mr_s *sn__mr(sn_mr mr) { return h_get(mr, H_MR); }

/* A QP the caller may act on: EINVAL for a bad handle, EBUSY for one a connection owns
 * (its data path and its lifetime are the layer's). */
static int caller_qp(sn_qp q, sn_qp_s **out)
{
    *out = sn__qp(q);
    if (!*out)
        return EINVAL;
    return (*out)->owned ? EBUSY : 0;
}

static sn_pkt *pkt_new(sn_fab *f, uint32_t len)
{
    sn_pkt *p = f->freel;
    if (p) {
        f->freel = p->next;
    } else {
        p = calloc(1, sizeof *p);
        if (!p)
            return NULL;
    }
    uint8_t *heap = (p->data && p->data != p->small) ? p->data : NULL;
    uint32_t cap = heap ? p->cap : 0;
    memset(p, 0, sizeof *p);
    if (len <= sizeof p->small) {
        free(heap);
        p->data = p->small;
        p->cap = sizeof p->small;
    } else if (heap && cap >= len) {
        p->data = heap;
        p->cap = cap;
    } else {
        free(heap);
        p->data = malloc(len);
        if (!p->data) {
            free(p);
            return NULL;
        }
        p->cap = len;
    }
    p->len = len;
    return p;
}

static void pkt_free(sn_fab *f, sn_pkt *p)
{
    p->next = f->freel;
    f->freel = p;
}

static void chan_push(sn_fab *f, int path, int dir, sn_pkt *p)
{
    if (!f->link[path]) {
        f->ctr.lost++;
        pkt_free(f, p);
        return;
    }
    sn_chan *c = &f->wire[path][dir];
    p->next = NULL;
    if (c->tail)
        c->tail->next = p;
    else
        c->head = p;
    c->tail = p;
    c->n++;
}

static sn_pkt *chan_pop(sn_chan *c)
{
    sn_pkt *p = c->head;
    if (!p)
        return NULL;
    c->head = p->next;
    if (!c->head)
        c->tail = NULL;
    c->n--;
    return p;
}

static void chan_clear(sn_fab *f, int path)
{
    for (int d = 0; d < 2; d++) {
        sn_pkt *p;
        while ((p = chan_pop(&f->wire[path][d]))) {
            f->ctr.lost++;
            pkt_free(f, p);
        }
    }
}

/* remove the packets addressed to either QP of a pair from a path */
static void chan_purge(sn_fab *f, int path, uint32_t qa, uint32_t qb)
{
    for (int d = 0; d < 2; d++) {
        sn_chan *c = &f->wire[path][d];
        sn_pkt *keep_h = NULL, *keep_t = NULL, *p;
        uint32_t n = 0;
        while ((p = chan_pop(c))) {
            if (p->dst_qpn == qa || p->dst_qpn == qb) {
                pkt_free(f, p);
                continue;
            }
            p->next = NULL;
            if (keep_t)
                keep_t->next = p;
            else
                keep_h = p;
            keep_t = p;
            n++;
        }
        c->head = keep_h;
        c->tail = keep_t;
        c->n = n;
    }
}

/* the QP may have a packet to send: its NIC's transmit must look again */
static void qp_kick(sn_qp_s *qp) { qp->f->host[qp->host].nic[qp->nic].idle = 0; }

static sn_qp_s *qp_by_qpn(sn_fab *f, uint32_t qpn)
{
    if (qpn < SN_QPN_BASE || qpn - SN_QPN_BASE >= f->nqps)
        return NULL;
    return f->qps[qpn - SN_QPN_BASE];
}

/* the MR a key names on a NIC, with the access asked; NULL if none */
static sn_mr_s *mr_lookup(sn_fab *f, int host, int nic, uint32_t key, int remote)
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

static int mr_covers(const sn_mr_s *mr, uint64_t addr, uint64_t len)
{
    return addr >= mr->addr && len <= mr->len && addr - mr->addr <= mr->len - len;
}

/* -------------------------------------------------------------- CQ ---------- */

static void qp_to_err(sn_qp_s *qp);

static void cq_push(sn_cq_s *cq, sn_qp_s *qp, const struct shift_wc *wc, uint64_t idx)
{
    if (cq->tail - cq->head >= cq->cap) {
        cq->overrun = 1;
        if (qp && qp->state != SHIFT_QPS_ERR)
            qp_to_err(qp);
        return;
    }
    cq->ring[cq->tail % cq->cap] = *wc;
    cq->src[cq->tail % cq->cap].qpn = idx == UINT64_MAX ? 0 : qp->qpn;
    cq->src[cq->tail % cq->cap].idx = idx;
    cq->tail++;
}

static int wc_opcode(int wr_opcode)
{
    switch (wr_opcode) {
    case SHIFT_WR_RDMA_WRITE:
    case SHIFT_WR_RDMA_WRITE_WITH_IMM:
        return SHIFT_WC_RDMA_WRITE;
    case SHIFT_WR_RDMA_READ:
        return SHIFT_WC_RDMA_READ;
    case SHIFT_WR_ATOMIC_CMP_AND_SWP:
        return SHIFT_WC_COMP_SWAP;
    case SHIFT_WR_ATOMIC_FETCH_AND_ADD:
        return SHIFT_WC_FETCH_ADD;
    default:
        return SHIFT_WC_SEND;
    }
}

/* idx: the WQE's index in the send queue (the poll frees the slots up to it) */
static void send_cqe(sn_qp_s *qp, const struct shift_send_wr *wr, int status, uint64_t idx)
{
    struct shift_wc wc = {0};
    wc.wr_id = wr->wr_id;
    wc.status = status;
    wc.opcode = wc_opcode(wr->opcode);
    wc.byte_len = wr->num_sge ? wr->sg.length : 0;
    wc.qp_num = qp->qpn;
    cq_push(qp->scq, qp, &wc, idx);
}

static void recv_cqe(sn_qp_s *qp, const sn_rwqe *r, int status, int opcode, uint32_t len,
                     int has_imm, uint32_t imm)
{
    struct shift_wc wc = {0};
    wc.wr_id = r->wr_id;
    wc.status = status;
    wc.opcode = opcode;
    wc.byte_len = len;
    wc.qp_num = qp->qpn;
    if (has_imm) {
        wc.imm_data = imm;
        wc.wc_flags = SHIFT_WC_WITH_IMM;
    }
    cq_push(qp->rcq, qp, &wc, UINT64_MAX);
}

/* ------------------------------------------------------------- QP state ----- */

static void qp_flush_all(sn_qp_s *qp, uint64_t err_idx, int err_status)
{
    /* indices from una: err_idx gets err_status, the others WR_FLUSH_ERR */
    uint64_t una = qp->una, tail = qp->tail;
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

static void qp_to_err(sn_qp_s *qp)
{
    qp->state = SHIFT_QPS_ERR;
    qp_flush_all(qp, UINT64_MAX, 0);
}

/* complete WQE err_idx with an error, flush the rest, QP to ERR */
static void qp_fail(sn_qp_s *qp, uint64_t err_idx, int status)
{
    qp->state = SHIFT_QPS_ERR;
    qp_flush_all(qp, err_idx, status);
}

static void qp_empty(sn_qp_s *qp)
{
    qp->una = qp->nxt = qp->db = qp->good = qp->done = qp->tail;
    qp->rq_head = qp->rq_tail;
    memset(qp->saved, 0, sizeof qp->saved);
    qp->saved_next = 0;
}

static void qp_set_sq_psn(sn_qp_s *qp, uint32_t psn) { qp->psn_base = psn - (uint32_t)qp->tail; }
static uint32_t qp_psn(const sn_qp_s *qp, uint64_t idx) { return qp->psn_base + (uint32_t)idx; }

static void qp_rts_fresh(sn_qp_s *qp)
{
    qp_empty(qp);
    qp->state = SHIFT_QPS_RTS;
    qp->epsn = 0;
    qp_set_sq_psn(qp, 0);
    qp->retries_left = qp->f->attr.retry_cnt;
    qp->rnr_left = qp->f->attr.rnr_retry;
}

int sn__modify(sn_qp_s *qp, const struct sn_qp_attr *attr, int mask)
{
    if (!attr || (mask & ~(SN_QP_STATE | SN_QP_DEST_QPN | SN_QP_RQ_PSN | SN_QP_SQ_PSN)))
        return EINVAL;
    int to = (mask & SN_QP_STATE) ? attr->qp_state : qp->state;
    int from = qp->state;
    if (to < SHIFT_QPS_RESET || to > SHIFT_QPS_ERR || to == SHIFT_QPS_SQD || to == SHIFT_QPS_SQE)
        return EINVAL;
    if (mask & SN_QP_DEST_QPN) {
        sn_qp_s *d = qp_by_qpn(qp->f, attr->dest_qp_num);
        if (!d || d->host == qp->host || d->nic != qp->nic)
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

/* ------------------------------------------------------------- fabric ------- */

int sn_fabric_create(const struct sn_fabric_attr *attr, sn_fabric *out)
{
    if (!out)
        return EINVAL;
    *out = NULL;
    struct sn_fabric_attr a = {65536, 7, 7, 0};
    if (attr) {
        if (attr->mem_size > ((size_t)1 << 30) || attr->retry_cnt > 7 || attr->rnr_retry > 7 ||
            (attr->rnr_nak != 0 && attr->rnr_nak != 1))
            return EINVAL;
        a = *attr;
        if (!a.mem_size)
            a.mem_size = 65536;
    }
    sn_fab *f = calloc(1, sizeof *f);
    if (!f)
        return ENOMEM;
    f->attr = a;
    for (int h = 0; h < 2; h++) {
        f->host[h].mem = calloc(1, a.mem_size);
        if (!f->host[h].mem) {
            free(f->host[0].mem);
            free(f);
            return ENOMEM;
        }
        f->host[h].size = a.mem_size;
        f->host[h].nic[1].alive = f->host[h].nic[2].alive = 1;
    }
    f->link[1] = f->link[2] = 1;
    f->h = h_new(f, H_FABRIC);
    if (!f->h) {
        free(f->host[0].mem);
        free(f->host[1].mem);
        free(f);
        return ENOMEM;
    }
    *out = H_PTR(f->h);
    return 0;
}

static void qp_release(sn_qp_s *qp)
{
    h_free(qp->h);
    free(qp->sq);
    free(qp->rq);
    free(qp);
}

int sn_fabric_destroy(sn_fabric fh)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return EBADF;
    if (f->users)
        return EBUSY;
    for (uint32_t i = 0; i < f->nqps; i++)
        if (f->qps[i])
            qp_release(f->qps[i]);
    for (uint32_t i = 0; i < f->ncqs; i++)
        if (f->cqs[i]) {
            h_free(f->cqs[i]->h);
            free(f->cqs[i]->ring);
            free(f->cqs[i]->src);
            free(f->cqs[i]);
        }
    for (int h = 0; h < 2; h++) {
        for (int n = 1; n <= 2; n++) {
            sn_nic *nic = &f->host[h].nic[n];
            for (int i = 0; i < nic->nmr; i++)
                if (nic->mrs[i]) {
                    h_free(nic->mrs[i]->h);
                    free(nic->mrs[i]);
                }
            free(nic->mrs);
            free(nic->qps);
        }
        free(f->host[h].mem);
    }
    for (int p = 1; p <= 2; p++)
        chan_clear(f, p);
    while (f->freel) {
        sn_pkt *p = f->freel;
        f->freel = p->next;
        if (p->data != p->small)
            free(p->data);
        free(p);
    }
    free(f->qps);
    free(f->cqs);
    h_free(f->h);
    free(f);
    return 0;
}

int sn_host_mem(sn_fabric fh, int host, uint8_t **base, size_t *size)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return EBADF;
    if (!valid_host(host) || !base || !size)
        return EINVAL;
    *base = f->host[host].mem;
    *size = f->host[host].size;
    return 0;
}

int sn_counters_get(sn_fabric fh, struct sn_counters *out)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return EBADF;
    if (!out)
        return EINVAL;
    *out = f->ctr;
    return 0;
}

/* ------------------------------------------------------------- MRs ---------- */

int sn_reg_mr(sn_fabric fh, int host, int nic, uint64_t addr, size_t length, int access,
              sn_mr *out)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return EBADF;
    if (!out || !valid_host(host) || !valid_path(nic))
        return EINVAL;
    *out = NULL;
    if (access & ~0xf)
        return EINVAL;
    if ((access & (SHIFT_ACCESS_REMOTE_WRITE | SHIFT_ACCESS_REMOTE_ATOMIC)) &&
        !(access & SHIFT_ACCESS_LOCAL_WRITE))
        return EINVAL;
    if (length == 0)
        return EINVAL;
    uint64_t base = (uint64_t)(uintptr_t)f->host[host].mem, size = f->host[host].size;
    if (addr < base || length > size || addr - base > size - length)
        return EFAULT;
    sn_nic *n = &f->host[host].nic[nic];
    if (!n->alive)
        return EIO;
    if (n->nmr >= 0xffff)
        return ENOMEM;
    if (n->nmr == n->capmr) {
        int cap = n->capmr ? n->capmr * 2 : 8;
        sn_mr_s **m = realloc(n->mrs, (size_t)cap * sizeof *m);
        if (!m)
            return ENOMEM;
        n->mrs = m;
        n->capmr = cap;
    }
    sn_mr_s *mr = calloc(1, sizeof *mr);
    if (!mr)
        return ENOMEM;
    mr->f = f;
    mr->host = host;
    mr->nic = nic;
    mr->idx = n->nmr;
    mr->addr = addr;
    mr->len = length;
    mr->access = access;
    uint32_t salt = ((uint32_t)mr->idx * 37u + 11u) & 0x7f;
    mr->lkey = ((uint32_t)(host * 2 + nic) << 24) | ((uint32_t)mr->idx << 8) | salt;
    mr->rkey = mr->lkey | 0x80;
    mr->h = h_new(mr, H_MR);
    if (!mr->h) {
        free(mr);
        return ENOMEM;
    }
    n->mrs[n->nmr++] = mr;
    *out = H_PTR(mr->h);
    return 0;
}

int sn_mr_keys(sn_mr m, uint32_t *lkey, uint32_t *rkey)
{
    sn_mr_s *mr = h_get(m, H_MR);
    if (!mr)
        return EINVAL;
    if (lkey)
        *lkey = mr->lkey;
    if (rkey)
        *rkey = mr->rkey;
    return 0;
}

int sn_dereg_mr(sn_mr m)
{
    sn_mr_s *mr = h_get(m, H_MR);
    if (!mr)
        return EINVAL;
    if (mr->owned)
        return EBUSY;
    mr->f->host[mr->host].nic[mr->nic].mrs[mr->idx] = NULL;
    h_free(mr->h);
    free(mr);
    return 0;
}

/* ------------------------------------------------------------- CQs ---------- */

int sn_create_cq(sn_fabric fh, int host, int cqe, sn_cq *out)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return EBADF;
    if (!out || !valid_host(host) || cqe < 1 || cqe > 65536)
        return EINVAL;
    *out = NULL;
    if (f->ncqs == f->capcqs) {
        uint32_t cap = f->capcqs ? f->capcqs * 2 : 8;
        sn_cq_s **c = realloc(f->cqs, cap * sizeof *c);
        if (!c)
            return ENOMEM;
        f->cqs = c;
        f->capcqs = cap;
    }
    sn_cq_s *cq = calloc(1, sizeof *cq);
    if (!cq)
        return ENOMEM;
    cq->ring = calloc((size_t)cqe, sizeof *cq->ring);
    cq->src = calloc((size_t)cqe, sizeof *cq->src);
    if (!cq->ring || !cq->src) {
        free(cq->ring);
        free(cq->src);
        free(cq);
        return ENOMEM;
    }
    cq->f = f;
    cq->host = host;
    cq->cap = (uint32_t)cqe;
    cq->h = h_new(cq, H_CQ);
    if (!cq->h) {
        free(cq->ring);
        free(cq->src);
        free(cq);
        return ENOMEM;
    }
    f->cqs[f->ncqs++] = cq;
    *out = H_PTR(cq->h);
    return 0;
}

int sn_destroy_cq(sn_cq c)
{
    sn_cq_s *cq = h_get(c, H_CQ);
    if (!cq)
        return EINVAL;
    if (cq->refs)
        return EBUSY;
    sn_fab *f = cq->f;
    for (uint32_t i = 0; i < f->ncqs; i++)
        if (f->cqs[i] == cq)
            f->cqs[i] = NULL;
    h_free(cq->h);
    free(cq->ring);
    free(cq->src);
    free(cq);
    return 0;
}

/* a polled completion frees the send queue slots up to its WQE */
static void sq_retire(sn_cq_s *cq, const struct sn_cqe_src *s, int status)
{
    sn_qp_s *qp = qp_by_qpn(cq->f, s->qpn);
    if (!qp || qp->scq != cq || s->idx >= qp->tail)
        return;
    if (s->idx >= qp->done)
        qp->done = s->idx + 1;
    if (status == SHIFT_WC_SUCCESS && s->idx >= qp->good)
        qp->good = s->idx + 1;
}

int sn__poll_cq(sn_cq_s *cq, int n, struct shift_wc *wc)
{
    int k = 0;
    while (k < n && cq->head < cq->tail) {
        uint32_t slot = (uint32_t)(cq->head % cq->cap);
        wc[k] = cq->ring[slot];
        if (cq->src[slot].qpn)
            sq_retire(cq, &cq->src[slot], wc[k].status);
        k++;
        cq->head++;
    }
    if (k == 0 && cq->overrun)
        return -EOVERFLOW;
    return k;
}

int sn_poll_cq(sn_cq c, int n, struct shift_wc *wc)
{
    sn_cq_s *cq = h_get(c, H_CQ);
    if (!cq || n < 0 || (n > 0 && !wc))
        return -EINVAL;
    return sn__poll_cq(cq, n, wc);
}

/* ------------------------------------------------------------- QPs ---------- */

int sn_create_qp(sn_fabric fh, int host, int nic, const struct sn_qp_init_attr *attr,
                 sn_qp *out)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return EBADF;
    if (!out || !attr || !valid_host(host) || !valid_path(nic))
        return EINVAL;
    *out = NULL;
    sn_cq_s *scq = h_get(attr->send_cq, H_CQ), *rcq = h_get(attr->recv_cq, H_CQ);
    if (!scq || !rcq || scq->f != f || rcq->f != f || scq->host != host || rcq->host != host)
        return EINVAL;
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
    qp->qpn = SN_QPN_BASE + f->nqps;
    qp->state = SHIFT_QPS_RESET;
    qp->scq = scq;
    qp->rcq = rcq;
    qp->max_inline = attr->max_inline_data;
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
    f->qps[qp->qpn - SN_QPN_BASE] = NULL;
    qp->scq->refs--;
    qp->rcq->refs--;
    qp_release(qp);
    return 0;
}

int sn_modify_qp(sn_qp q, const struct sn_qp_attr *attr, int mask)
{
    sn_qp_s *qp = sn__qp(q);
    if (!qp)
        return EINVAL;
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
    return 0;
}

int sn_connect(sn_qp a, sn_qp b)
{
    sn_qp_s *x = sn__qp(a), *y = sn__qp(b);
    if (!x || !y || x == y || x->f != y->f || x->host == y->host || x->nic != y->nic)
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
    return 0;
}

int sn_reconnect(sn_qp q)
{
    sn_qp_s *qp = sn__qp(q);
    if (!qp)
        return EINVAL;
    return sn__reconnect(qp);
}

int sn__post_send(sn_qp_s *qp, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    for (; wr; wr = wr->next) {
        int err = shift_send_wr_check(wr, qp->max_inline);
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
        if (qp->state == SHIFT_QPS_ERR) {
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

int sn__ctl_send(sn_qp_s *qp, const void *msg, uint32_t len)
{
    sn_fab *f = qp->f;
    if (!msg || len == 0 || len > 256)
        return EINVAL;
    if (!f->host[qp->host].nic[qp->nic].alive || qp->state != SHIFT_QPS_RTS || !qp->has_dest)
        return EIO;
    sn_pkt *p = pkt_new(f, len);
    if (!p)
        return ENOMEM;
    p->kind = PKT_CTL;
    p->dst_qpn = qp->dest_qpn;
    memcpy(p->data, msg, len);
    chan_push(f, qp->nic, dir_from(qp->host), p);
    return 0;
}

int sn_ctl_send(sn_qp q, const void *msg, uint32_t len)
{
    sn_qp_s *qp;
    int err = caller_qp(q, &qp);
    if (err)
        return err;
    return sn__ctl_send(qp, msg, len);
}

int sn_set_ctl_handler(sn_qp q, sn_ctl_handler fn, void *arg)
{
    sn_qp_s *qp;
    int err = caller_qp(q, &qp);
    if (err)
        return err;
    qp->ctl_fn = fn;
    qp->ctl_arg = arg;
    return 0;
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
    if (!valid_host(host) || !valid_path(path))
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

static void responder(sn_fab *f, sn_qp_s *qp, sn_pkt *p)
{
    int d = psn_diff(p->psn, qp->epsn);
    if (d > 0)
        return; /* ahead of the expected PSN: discarded (the requester will time out) */
    int op = p->op;
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
        qp->nxt = k; /* a READ/atomic response is missing: go back to it */
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
    case SYN_RNR:
        if (qp->rnr_left > 0) {
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
    sn_pkt *p = chan_pop(&f->wire[path][dir]);
    if (!p)
        return 0;
    f->ctr.delivered++;
    int host = dir == SN_AtoB ? SN_HOST_B : SN_HOST_A;
    sn_qp_s *qp = qp_by_qpn(f, p->dst_qpn);
    if (!f->host[host].nic[path].alive || !qp || qp->host != host || qp->nic != path) {
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

int sn_drop(sn_fabric fh, int path, int dir)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return -EBADF;
    if (!valid_path(path) || !valid_dir(dir))
        return -EINVAL;
    sn_chan *c = &f->wire[path][dir];
    if (!c->head || c->head->kind == PKT_CTL)
        return 0;
    pkt_free(f, chan_pop(c));
    f->ctr.dropped++;
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
    if (!valid_host(host) || !valid_path(path))
        return -EINVAL;
    return sn__timeout(f, host, path) > 0;
}

int sn_link_down(sn_fabric fh, int path)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return -EBADF;
    if (!valid_path(path))
        return -EINVAL;
    if (!f->link[path])
        return 0;
    f->link[path] = 0;
    chan_clear(f, path);
    return 1;
}

int sn_link_up(sn_fabric fh, int path)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return -EBADF;
    if (!valid_path(path))
        return -EINVAL;
    if (f->link[path])
        return 0;
    f->link[path] = 1;
    return 1;
}

int sn_nic_fail(sn_fabric fh, int host, int nic)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return -EBADF;
    if (!valid_host(host) || !valid_path(nic))
        return -EINVAL;
    sn_nic *n = &f->host[host].nic[nic];
    if (!n->alive)
        return 0;
    n->alive = 0;
    chan_clear(f, nic);
    for (int i = 0; i < n->nqp; i++) {
        sn_qp_s *qp = n->qps[i];
        if (qp->state != SHIFT_QPS_ERR && qp->state != SHIFT_QPS_RESET)
            qp_to_err(qp);
        /* the responder state lives in the NIC and dies with it */
        qp->epsn = 0;
        memset(qp->saved, 0, sizeof qp->saved);
    }
    return 1;
}

int sn_nic_recover(sn_fabric fh, int host, int nic)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return -EBADF;
    if (!valid_host(host) || !valid_path(nic))
        return -EINVAL;
    sn_nic *n = &f->host[host].nic[nic];
    if (n->alive)
        return 0;
    n->alive = 1; /* its QPs stay in ERR until reconnected */
    n->idle = 0;
    return 1;
}

long sn_pump(sn_fabric fh, long budget)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return -EBADF;
    long steps = 0;
    int moved = 1;
    while (moved && steps < budget) {
        moved = 0;
        for (int p = 1; p <= 2; p++) {
            for (int h = 0; h < 2; h++)
                while (steps < budget && sn_transmit(fh, h, p) > 0) {
                    steps++;
                    moved = 1;
                }
            for (int d = 0; d < 2; d++)
                while (steps < budget && sn_deliver(fh, p, d) > 0) {
                    steps++;
                    moved = 1;
                }
        }
    }
    return steps;
}

int sn_wire_len(sn_fabric fh, int path, int dir)
{
    sn_fab *f = sn__fab(fh);
    if (!f || !valid_path(path) || !valid_dir(dir))
        return 0;
    return (int)f->wire[path][dir].n;
}

int sn_wire_head_kind(sn_fabric fh, int path, int dir)
{
    sn_fab *f = sn__fab(fh);
    if (!f || !valid_path(path) || !valid_dir(dir) || !f->wire[path][dir].head)
        return 0;
    return f->wire[path][dir].head->kind;
}

int sn_path_healthy(sn_fabric fh, int path)
{
    sn_fab *f = sn__fab(fh);
    if (!f || !valid_path(path))
        return 0;
    return f->link[path] && f->host[0].nic[path].alive && f->host[1].nic[path].alive;
}

int sn_nic_alive(sn_fabric fh, int host, int nic)
{
    sn_fab *f = sn__fab(fh);
    if (!f || !valid_host(host) || !valid_path(nic))
        return 0;
    return f->host[host].nic[nic].alive;
}

int sn_link_is_up(sn_fabric fh, int path)
{
    sn_fab *f = sn__fab(fh);
    if (!f || !valid_path(path))
        return 0;
    return f->link[path];
}
