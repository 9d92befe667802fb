/*
 * simnic_fabric.c - simnic's resources: the fabric (two hosts' memory, two NICs each,
 * two links), memory regions and their keys, completion queues, and the completions the
 * NIC writes to them.
 */
#include "simnic_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ----------------------------------------------------- completions ---------- */

/* a completion into the CQ: in host memory with every one made before it, or, when
 * `unwritten`, made but not yet written (sn_write_cqe) */
static void cq_push(sn_cq_s *cq, sn_qp_s *qp, const struct shift_wc *wc, uint64_t idx,
                    int unwritten)
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
    cq->src[cq->tail % cq->cap].nic = qp ? qp->nic : 0;
    cq->tail++;
    if (!unwritten)
        cq->written = cq->tail;
}

void cq_write_all(sn_cq_s *cq)
{
    if (cq)
        cq->written = cq->tail;
}

/* the unwritten completions NIC nic made die with it; the others keep their order */
void cq_lose_unwritten(sn_cq_s *cq, int nic)
{
    if (!cq)
        return;
    uint64_t keep = cq->written;
    for (uint64_t k = cq->written; k < cq->tail; k++) {
        uint32_t from = (uint32_t)(k % cq->cap), to = (uint32_t)(keep % cq->cap);
        if (cq->src[from].nic == nic)
            continue;
        cq->ring[to] = cq->ring[from];
        cq->src[to] = cq->src[from];
        keep++;
    }
    cq->tail = keep;
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
void send_cqe(sn_qp_s *qp, const struct shift_send_wr *wr, int status, uint64_t idx)
{
    struct shift_wc wc = {0};
    wc.wr_id = wr->wr_id;
    wc.status = status;
    wc.opcode = wc_opcode(wr->opcode);
    wc.byte_len = wr->num_sge ? wr->sg.length : 0;
    wc.qp_num = qp->qpn;
    cq_push(qp->scq, qp, &wc, idx, 0);
}

void recv_cqe(sn_qp_s *qp, const sn_rwqe *r, int status, int opcode, uint32_t len,
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
    cq_push(qp->rcq, qp, &wc, UINT64_MAX,
            status == SHIFT_WC_SUCCESS && qp->f->attr.ack_before_cqe);
}

/* A UD receive completion is written at once: no ACK goes before it (ack_before_cqe
 * orders a completion after the ACK of its request, and a datagram has none). */
void ud_recv_cqe(sn_qp_s *qp, const sn_rwqe *r, int status, uint32_t len, int has_imm,
                 uint32_t imm, uint32_t src_qp)
{
    struct shift_wc wc = {
        .wr_id = r->wr_id,
        .status = status,
        .opcode = SHIFT_WC_RECV,
        .byte_len = len,
        .qp_num = qp->qpn,
        .src_qp = src_qp,
        .imm_data = has_imm ? imm : 0,
        .wc_flags = has_imm ? SHIFT_WC_WITH_IMM : 0,
    };
    cq_push(qp->rcq, qp, &wc, UINT64_MAX, 0);
}

/* ------------------------------------------------------------- fabric ------- */

void sn_fabric_attr_init(struct sn_fabric_attr *attr)
{
    if (!attr)
        return;
    *attr = (struct sn_fabric_attr){.mem_size = 65536, .retry_cnt = 7,
                                    .rnr_retry = SN_RNR_FOREVER, .rnr_nak = 1,
                                    .ack_before_cqe = 1, .device_fatal = 1};
}

/* a fabric of both hosts (local -1), or of one with process memory (local 0 or 1) */
static int fabric_new(const struct sn_fabric_attr *attr, int local, sn_fabric *out)
{
    if (!out)
        return EINVAL;
    *out = NULL;
    struct sn_fabric_attr a = {.mem_size = 65536, .retry_cnt = 7, .rnr_retry = 7};
    if (attr) {
        if (attr->mem_size > ((size_t)1 << 30) || attr->retry_cnt > 7 || attr->rnr_retry > 7 ||
            (attr->rnr_nak != 0 && attr->rnr_nak != 1) ||
            (attr->ack_before_cqe != 0 && attr->ack_before_cqe != 1) ||
            (attr->device_fatal != 0 && attr->device_fatal != 1))
            return EINVAL;
        a = *attr;
        if (!a.mem_size)
            a.mem_size = 65536;
    }
    sn_fab *f = calloc(1, sizeof *f);
    if (!f)
        return ENOMEM;
    f->attr = a;
    f->local = local;
    f->qpn_base = SN_QPN_BASE + (local == SN_HOST_B ? SN_QPN_HOST_B : 0);
    for (int h = 0; h < 2; h++) {
        f->host[h].mem = local < 0 ? calloc(1, a.mem_size) : NULL;
        if (local < 0 && !f->host[h].mem) {
            free(f->host[0].mem);
            free(f);
            return ENOMEM;
        }
        f->host[h].size = local < 0 ? a.mem_size : 0;
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

int sn_fabric_create(const struct sn_fabric_attr *attr, sn_fabric *out)
{
    return fabric_new(attr, -1, out);
}

int sn_host_create(const struct sn_fabric_attr *attr, int host, sn_fabric *out)
{
    if (!valid_host(host)) {
        if (out)
            *out = NULL;
        return EINVAL;
    }
    return fabric_new(attr, host, out);
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
    if (f->local >= 0)
        return ENOTSUP; /* one host: its memory is the process's */
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
    if (!out || !here(f, host) || !valid_path(nic))
        return EINVAL;
    *out = NULL;
    if (access & ~0xf)
        return EINVAL;
    if ((access & (SHIFT_ACCESS_REMOTE_WRITE | SHIFT_ACCESS_REMOTE_ATOMIC)) &&
        !(access & SHIFT_ACCESS_LOCAL_WRITE))
        return EINVAL;
    if (length == 0)
        return EINVAL;
    if (f->local >= 0) {
        if (addr == 0 || addr + length < addr) /* the process's memory: no wrap-around */
            return EFAULT;
    } else {
        uint64_t base = (uint64_t)(uintptr_t)f->host[host].mem, size = f->host[host].size;
        if (addr < base || length > size || addr - base > size - length)
            return EFAULT;
    }
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
    if (!out || !here(f, host) || cqe < 1 || cqe > 65536)
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
    if (cq->refs || cq->owned)
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
    while (k < n && cq->head < cq->written) {
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
    if (cq->owned) /* (its completions are the layer's: a poll here would steal them) */
        return -EBUSY;
    return sn__poll_cq(cq, n, wc);
}
