/*
 * simnic_wire.c - the wire between the hosts and its faults: packets and the two FIFO
 * channels of each path, the control channel that carries the layer's messages, losing
 * the head packet (Drop), links and NICs going down and up, the deterministic pump, and
 * the wire's state for tests.
 */
#include "simnic_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------- packets and channels --- */

sn_pkt *pkt_new(sn_fab *f, uint32_t len)
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

void chan_push(sn_fab *f, int path, int dir, sn_pkt *p)
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

void chan_clear(sn_fab *f, int path)
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
void chan_purge(sn_fab *f, int path, uint32_t qa, uint32_t qb)
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

/* --------------------------------------------------- the control channel --- */

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
    p->inc = qp->inc;
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

/* ----------------------------------------------------- the wire's events --- */

int sn_drop(sn_fabric fh, int path, int dir)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return -EBADF;
    if (!valid_path(path) || !valid_dir(dir))
        return -EINVAL;
    sn_chan *c = &f->wire[path][dir];
    if (!c->head) /* (a control message is lost like any packet: the spec's Drop) */
        return 0;
    pkt_free(f, chan_pop(c));
    f->ctr.dropped++;
    return 1;
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
    for (int h = 0; h < 2; h++) /* each end's port is ACTIVE again */
        if (here(f, h))
            f->host[h].nic[path].raised.active++;
    return 1;
}

/* the fabric and NIC an event names: 0, or -EBADF / -EINVAL */
static int event_nic(sn_fabric fh, int host, int nic, sn_fab **f, sn_nic **n)
{
    *f = sn__fab(fh);
    if (!*f)
        return -EBADF;
    if (!here(*f, host) || !valid_path(nic))
        return -EINVAL;
    *n = &(*f)->host[host].nic[nic];
    return 0;
}

int sn_nic_fail(sn_fabric fh, int host, int nic)
{
    sn_fab *f;
    sn_nic *n;
    int e = event_nic(fh, host, nic, &f, &n);
    if (e)
        return e;
    if (!n->alive)
        return 0;
    n->alive = 0;
    chan_clear(f, nic);
    for (int i = 0; i < n->nqp; i++) {
        cq_lose_unwritten(n->qps[i]->scq, nic);
        cq_lose_unwritten(n->qps[i]->rcq, nic);
    }
    for (int i = 0; i < n->nqp; i++) {
        sn_qp_s *qp = n->qps[i];
        if (f->attr.device_fatal && qp->state != SHIFT_QPS_RESET) {
            /* no flush: the device writes nothing more - not even the flush of a post
             * to a QP already in error (its event tells every reader the same) */
            qp->state = SHIFT_QPS_ERR;
            qp->silent = 1;
        } else if (qp->state != SHIFT_QPS_ERR && qp->state != SHIFT_QPS_RESET) {
            qp_to_err(qp);
        }
        /* the responder state lives in the NIC and dies with it */
        qp->epsn = 0;
        memset(qp->saved, 0, sizeof qp->saved);
    }
    n->raised.fatal += (uint32_t)f->attr.device_fatal; /* raised whatever its QPs' state */
    return 1;
}

int sn_async_event(sn_fabric fh, int host, int nic, int *event)
{
    sn_fab *f;
    sn_nic *n;
    int e = event_nic(fh, host, nic, &f, &n);
    if (e)
        return e;
    if (!event)
        return -EINVAL;
    return sn__async_event(n, &n->read, event);
}

int sn__async_event(const sn_nic *n, sn_events *read, int *event)
{
    if (read->fatal != n->raised.fatal) {
        read->fatal++;
        *event = SN_ASYNC_DEVICE_FATAL;
        return 1;
    }
    if (read->active != n->raised.active) {
        read->active++;
        *event = SN_ASYNC_PORT_ACTIVE;
        return 1;
    }
    return 0;
}

int sn_nic_recover(sn_fabric fh, int host, int nic)
{
    sn_fab *f;
    sn_nic *n;
    int e = event_nic(fh, host, nic, &f, &n);
    if (e)
        return e;
    if (n->alive)
        return 0;
    n->alive = 1; /* its QPs stay in ERR until reconnected */
    n->idle = 0;
    n->raised.active++;
    return 1;
}

/* the oldest completion a CQ holds unwritten, if NIC nic made it */
static int cq_writes_next(sn_cq_s *cq, int nic)
{
    if (!cq || cq->written == cq->tail || cq->src[cq->written % cq->cap].nic != nic)
        return 0;
    cq->written++;
    return 1;
}

int sn_write_cqe(sn_fabric fh, int host, int nic)
{
    sn_fab *f;
    sn_nic *n;
    int e = event_nic(fh, host, nic, &f, &n);
    if (e)
        return e;
    if (!n->alive)
        return 0;
    for (int i = 0; i < n->nqp; i++)
        if (cq_writes_next(n->qps[i]->rcq, nic) || cq_writes_next(n->qps[i]->scq, nic))
            return 1;
    return 0;
}

/* -------------------------------------------- the pump, the wire's state --- */

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
                while (here(f, h) && steps < budget && sn_transmit(fh, h, p) > 0) {
                    steps++;
                    moved = 1;
                }
            for (int d = 0; d < 2; d++)
                while ((f->local < 0 || d != dir_from(f->local)) && steps < budget &&
                       sn_deliver(fh, p, d) > 0) {
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

/* -------------------------------------------------- the wire as bytes ------- */
/* A packet's encoding, little-endian: version, kind, op, 0; dst_qpn, psn, len, imm,
 * rkey (32 bits each); raddr, cmp, swap, val (64 bits each); the sending QP's
 * incarnation (32 bits); then len payload bytes. A datagram (kind 4) carries its Q_Key
 * in rkey and its source QP number in raddr, as UD's DETH does. */
enum { WIRE_VERSION = 2, CTL_MAX = 256 };

static void put_le(uint8_t *b, uint64_t v, int n)
{
    for (int i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le(const uint8_t *b, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static void encode(const sn_pkt *p, uint8_t *b)
{
    b[0] = WIRE_VERSION;
    b[1] = p->kind;
    b[2] = p->op;
    b[3] = 0;
    put_le(b + 4, p->dst_qpn, 4);
    put_le(b + 8, p->psn, 4);
    put_le(b + 12, p->len, 4);
    put_le(b + 16, p->imm, 4);
    put_le(b + 20, p->rkey, 4);
    put_le(b + 24, p->raddr, 8);
    put_le(b + 32, p->cmp, 8);
    put_le(b + 40, p->swap, 8);
    put_le(b + 48, p->val, 8);
    put_le(b + 56, p->inc, 4);
    memcpy(b + SN_WIRE_HEADER, p->data, p->len);
}

/* A datagram's header: a SEND (its imm 0) or SEND_WITH_IMM, QP numbers of 24 bits,
 * and nothing in the fields of RC (cmp, swap, val, the incarnation): a UD QP has none. */
static int datagram_ok(const uint8_t *b)
{
    int op = b[2];
    if (op != SHIFT_WR_SEND && op != SHIFT_WR_SEND_WITH_IMM)
        return 0;
    if (op == SHIFT_WR_SEND && get_le(b + 16, 4) != 0)
        return 0;
    if (get_le(b + 4, 4) >= (1u << 24) || get_le(b + 24, 8) >= (1u << 24))
        return 0;
    return get_le(b + 32, 8) == 0 && get_le(b + 40, 8) == 0 && get_le(b + 48, 8) == 0 &&
           get_le(b + 56, 4) == 0;
}

/* Would the NICs act on a packet of this kind, op and payload without harm? A request's
 * op is a WR opcode, a READ asks for at most one message; an ACK's op is a syndrome; a
 * control message is at most CTL_MAX bytes; a datagram as datagram_ok says. */
static int well_formed(const uint8_t *b, uint32_t len)
{
    int kind = b[1], op = b[2];
    uint64_t val = get_le(b + 48, 8);
    switch (kind) {
    case PKT_REQ:
        if (op < SHIFT_WR_RDMA_WRITE || op > SHIFT_WR_ATOMIC_FETCH_AND_ADD)
            return 0;
        if (op == SHIFT_WR_RDMA_READ)
            return len == 0 && val <= SHIFT_MAX_MSG;
        return op < SHIFT_WR_RDMA_READ || len == 0;
    case PKT_ACK:
        return op >= SYN_ACK && op <= SYN_REM_OP;
    case PKT_CTL:
        return len >= 1 && len <= CTL_MAX;
    case PKT_UD:
        return datagram_ok(b);
    default:
        return 0;
    }
}

int sn_wire_take(sn_fabric fh, int path, int dir, void *buf, uint32_t cap)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return -EBADF;
    if (!valid_path(path) || !valid_dir(dir) || !buf)
        return -EINVAL;
    sn_chan *c = &f->wire[path][dir];
    if (!c->head)
        return 0;
    if (cap < SN_WIRE_HEADER + c->head->len)
        return -ENOSPC;
    sn_pkt *p = chan_pop(c);
    uint32_t n = SN_WIRE_HEADER + p->len;
    encode(p, buf);
    pkt_free(f, p);
    return (int)n;
}

int sn_wire_put(sn_fabric fh, int path, int dir, const void *buf, uint32_t len)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return EBADF;
    if (!valid_path(path) || !valid_dir(dir) || (!buf && len))
        return EINVAL;
    const uint8_t *b = buf;
    if (len < SN_WIRE_HEADER || len > SN_WIRE_MAX || b[0] != WIRE_VERSION || b[3] != 0 ||
        get_le(b + 12, 4) != len - SN_WIRE_HEADER ||
        !well_formed(b, len - SN_WIRE_HEADER)) {
        f->ctr.malformed++;
        return EINVAL;
    }
    sn_pkt *p = pkt_new(f, len - SN_WIRE_HEADER);
    if (!p)
        return ENOMEM;
    p->kind = b[1];
    p->op = b[2];
    p->dst_qpn = (uint32_t)get_le(b + 4, 4);
    p->psn = (uint32_t)get_le(b + 8, 4);
    p->imm = (uint32_t)get_le(b + 16, 4);
    p->rkey = (uint32_t)get_le(b + 20, 4);
    p->raddr = get_le(b + 24, 8);
    p->cmp = get_le(b + 32, 8);
    p->swap = get_le(b + 40, 8);
    p->val = get_le(b + 48, 8);
    p->inc = (uint32_t)get_le(b + 56, 4);
    memcpy(p->data, b + SN_WIRE_HEADER, p->len);
    chan_push(f, path, dir, p);
    return 0;
}
