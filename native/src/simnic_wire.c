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
