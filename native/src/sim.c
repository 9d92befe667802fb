/* sim.c - the SHIFT core's backend table over simnic, and a connection helper. */
#include "shift_sim.h"
#include "simnic_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { SIM_INBOX = 8, SIM_CTL_MAX = 256 };

typedef struct sim_ctx {
    sn_fab *f;
    sn_fabric fh;
    int host;
    sn_qp qph[3];
    sn_cq cqh[3];
    shift_ep ep;
    struct { uint32_t after; int err; } fault[SHIFT_OP_COUNT]; /* shift_sim_fail_op */
    /* the events of each NIC this endpoint read: as a device context's, every endpoint
     * on a NIC reads each of its events (a verbs layer fans one context's event out to
     * every endpoint on the device) */
    sn_events read[3];
    uint64_t calls[SHIFT_OP_COUNT]; /* the endpoint's calls of each op (tests) */
    /* the control messages each path's QP received and the layer has not read
     * (ctl_recv), oldest first; one past SIM_INBOX is lost, as on a full receive queue */
    struct {
        uint8_t msg[SIM_INBOX][SIM_CTL_MAX];
        uint32_t len[SIM_INBOX];
        unsigned head, count;
    } inbox[3];
} sim_ctx;

typedef struct conn_s {
    uint64_t h;
    sn_fab *f;
    sim_ctx ctx[2];
    shift_ep ep[2];
} conn_s;

/* the injected error of op, if this call is the one to fail (else 0) */
static int fault(void *c, int op)
{
    sim_ctx *x = c;
    x->calls[op]++;
    if (!x->fault[op].err)
        return 0;
    if (x->fault[op].after) {
        x->fault[op].after--;
        return 0;
    }
    int err = x->fault[op].err;
    x->fault[op].err = 0;
    return err;
}

static int b_create_qp(void *c, int path, const struct shift_backend_qp_cap *cap, void **qp)
{
    sim_ctx *x = c;
    if (path != 1 && path != 2)
        return EINVAL;
    sn_cq cq;
    int err = sn_create_cq(x->fh, x->host, (int)(cap->max_send_wr + cap->max_recv_wr + 8), &cq);
    if (err)
        return err;
    struct sn_qp_init_attr a = {cq, cq, cap->max_send_wr, cap->max_recv_wr, cap->max_inline_data};
    sn_qp q;
    err = sn_create_qp(x->fh, x->host, path, &a, &q);
    if (err) {
        sn_destroy_cq(cq);
        return err;
    }
    x->qph[path] = q;
    x->cqh[path] = cq;
    *qp = sn__qp(q);
    ((sn_qp_s *)*qp)->owned = 1;
    sn__cq(cq)->owned = 1;
    return 0;
}

/* A shared CQ of the host (shift_cq_create): owned, as a connection's own CQs are. */
static int b_create_cq(void *c, int path, uint32_t cqe, void **cq)
{
    sim_ctx *x = c;
    if (path != 1 && path != 2)
        return EINVAL;
    sn_cq h;
    int err = sn_create_cq(x->fh, x->host, (int)cqe, &h);
    if (err)
        return err;
    sn__cq(h)->owned = 1;
    *cq = h;
    return 0;
}

static int b_destroy_cq(void *c, void *cq)
{
    (void)c;
    sn_cq_s *q = sn__cq(cq);
    if (!q)
        return EINVAL;
    q->owned = 0;
    return sn_destroy_cq(cq);
}

/* A QP on a shared CQ: its send and receive completions go there; it is the host's */
static int b_create_qp_cq(void *c, int path, const struct shift_backend_qp_cap *cap, void *cq,
                          void **qp)
{
    sim_ctx *x = c;
    sn_cq_s *q = sn__cq(cq);
    if ((path != 1 && path != 2) || !q || q->host != x->host)
        return EINVAL;
    struct sn_qp_init_attr a = {cq, cq, cap->max_send_wr, cap->max_recv_wr,
                                cap->max_inline_data};
    sn_qp h;
    q->owned = 0; /* (owned CQs take no new QP from simnic's callers: this is the owner) */
    int err = sn_create_qp(x->fh, x->host, path, &a, &h);
    q->owned = 1;
    if (err)
        return err;
    x->qph[path] = h;
    x->cqh[path] = NULL; /* not its own: the pair's owner destroys it */
    *qp = sn__qp(h);
    ((sn_qp_s *)*qp)->owned = 1;
    return 0;
}

static int path_of(sim_ctx *x, void *qp)
{
    return sn__qp(x->qph[1]) == qp ? 1 : sn__qp(x->qph[2]) == qp ? 2 : 0;
}

static int b_destroy_qp(void *c, void *qp)
{
    sim_ctx *x = c;
    int p = path_of(x, qp);
    if (!p)
        return EINVAL;
    ((sn_qp_s *)qp)->owned = 0;
    sn_destroy_qp(x->qph[p]);
    if (x->cqh[p]) {
        sn__cq(x->cqh[p])->owned = 0;
        sn_destroy_cq(x->cqh[p]);
    }
    x->qph[p] = NULL;
    x->cqh[p] = NULL;
    return 0;
}

static int b_modify_qp(void *c, void *qp, int state, uint32_t rq_psn, uint32_t sq_psn)
{
    int err = fault(c, SHIFT_OP_MODIFY_QP);
    if (err)
        return err;
    struct sn_qp_attr a = {0};
    int mask = SN_QP_STATE;
    a.qp_state = state;
    if (state == SHIFT_QPS_RTR) {
        a.rq_psn = rq_psn;
        mask |= SN_QP_RQ_PSN;
    } else if (state == SHIFT_QPS_RTS && ((sn_qp_s *)qp)->state == SHIFT_QPS_RTR) {
        a.sq_psn = sq_psn;
        mask |= SN_QP_SQ_PSN;
    }
    return sn__modify(qp, &a, mask);
}

static int b_query_qp(void *c, void *qp, int *state, uint32_t *rq_psn, uint32_t *sq_psn)
{
    sn_qp_s *q = qp;
    struct sn_qp_attr a;
    int err = fault(c, SHIFT_OP_QUERY_QP);
    if (!err)
        err = sn_query_qp(H_PTR(q->h), &a);
    if (err)
        return err;
    *state = a.qp_state;
    *rq_psn = a.rq_psn;
    *sq_psn = a.sq_psn;
    return 0;
}

static int b_reset_qp(void *c, void *qp, uint32_t incarnation)
{
    int err = fault(c, SHIFT_OP_RESET_QP);
    return err ? err : sn__reset_qp(qp, incarnation);
}

static int b_post_send(void *c, void *qp, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    int err = fault(c, SHIFT_OP_POST_SEND);
    if (err) {
        if (bad)
            *bad = wr;
        return err;
    }
    return sn__post_send(qp, wr, bad);
}

static int b_post_recv(void *c, void *qp, struct shift_recv_wr *wr)
{
    int err = fault(c, SHIFT_OP_POST_RECV);
    return err ? err : sn__post_recv(qp, wr, NULL);
}

static int b_ring(void *c, void *qp)
{
    int err = fault(c, SHIFT_OP_RING);
    return err ? err : sn__ring(qp);
}

static int b_poll_cq(void *c, void *qp, int n, struct shift_wc *wc)
{
    int err = fault(c, SHIFT_OP_POLL_CQ);
    if (err)
        return -err;
    return sn__poll_cq(((sn_qp_s *)qp)->scq, n, wc);
}

static int b_sq_pending(void *c, void *qp, uint32_t i, struct shift_send_wr *out)
{
    int err = fault(c, SHIFT_OP_SQ_PENDING);
    if (err)
        return -err;
    return sn__sq_pending(qp, i, out);
}

static int b_reg_mr(void *c, int path, uint64_t addr, size_t len, int access, uint32_t *lkey,
                    uint32_t *rkey, void **mr)
{
    sim_ctx *x = c;
    sn_mr m;
    int err = fault(c, SHIFT_OP_REG_MR);
    if (err)
        return err;
    err = sn_reg_mr(x->fh, x->host, path, addr, len, access, &m);
    if (err)
        return err;
    sn_mr_keys(m, lkey, rkey);
    sn__mr(m)->owned = 1;
    *mr = m;
    return 0;
}

static int b_dereg_mr(void *c, void *mr)
{
    (void)c;
    sn_mr_s *m = sn__mr(mr);
    if (!m)
        return EINVAL;
    m->owned = 0;
    return sn_dereg_mr(mr);
}

/* (not injected: asked once, when the endpoint is made) */
static int b_query_qp_num(void *c, void *qp, uint32_t *qpn)
{
    (void)c;
    *qpn = ((sn_qp_s *)qp)->qpn;
    return 0;
}

static int b_ctl_send(void *c, void *qp, const void *msg, uint32_t len)
{
    int err = fault(c, SHIFT_OP_CTL_SEND);
    return err ? err : sn__ctl_send(qp, msg, len);
}

/* The oldest message of qp's inbox. An injected fault reads none: it waits. */
static int b_ctl_recv(void *c, void *qp, void *buf, uint32_t cap)
{
    sim_ctx *x = c;
    int err = fault(c, SHIFT_OP_CTL_RECV);
    if (err)
        return -err;
    int p = path_of(x, qp);
    if (!p || !x->inbox[p].count)
        return 0;
    unsigned slot = x->inbox[p].head;
    uint32_t len = x->inbox[p].len[slot] < cap ? x->inbox[p].len[slot] : cap;
    memcpy(buf, x->inbox[p].msg[slot], len);
    x->inbox[p].head = (slot + 1) % SIM_INBOX;
    x->inbox[p].count--;
    return (int)len;
}

/* One event of qp's NIC this endpoint has not read. An injected fault reads none: the
 * event waits for the next call. */
static int b_async_event(void *c, void *qp, int *event)
{
    sim_ctx *x = c;
    int nic = ((sn_qp_s *)qp)->nic, err = fault(c, SHIFT_OP_ASYNC_EVENT);
    if (err)
        return -err;
    if (!event || nic < 1 || nic > 2)
        return -EINVAL;
    return sn__async_event(&x->f->host[x->host].nic[nic], &x->read[nic], event);
}

/* The first PSN a QP sends with, as a verbs program draws one (lrand48() & 0xffffff):
 * from its number here, so that a run stays reproducible. */
static uint32_t first_psn(uint32_t qpn) { return (qpn * 2654435761u >> 8) & 0xffffff; }

/* Simnic's port address of host's NIC nic: a link-local GID whose interface ID names
 * them (RoCE: LID 0), what ibv_query_gid gives. */
static void sim_gid(int host, int nic, uint8_t gid[16])
{
    memset(gid, 0, 16);
    gid[0] = 0xfe;
    gid[1] = 0x80;
    gid[8] = 0x02;
    gid[11] = 0xff;
    gid[12] = 0xfe;
    gid[14] = (uint8_t)host;
    gid[15] = (uint8_t)nic;
}

static int b_local_info(void *c, void *qp, struct shift_path_info *out)
{
    sn_qp_s *q = qp;
    int err = fault(c, SHIFT_OP_LOCAL_INFO);
    if (err)
        return err;
    *out = (struct shift_path_info){.qp_num = q->qpn, .psn = first_psn(q->qpn), .port = 1};
    sim_gid(q->host, q->nic, out->gid);
    return 0;
}

/* RTR against the remote's QP: reachable from this QP's port only on its path, at the
 * other host's NIC of the same index (rail-aligned), as an address handle is */
static int b_rtr_qp(void *c, void *qp, const struct shift_path_info *remote)
{
    sn_qp_s *q = qp;
    int err = fault(c, SHIFT_OP_RTR_QP);
    if (err)
        return err;
    uint8_t gid[16];
    sim_gid(1 - q->host, q->nic, gid);
    if (memcmp(gid, remote->gid, sizeof gid) != 0 || remote->lid != 0 || remote->port != 1)
        return EINVAL;
    struct sn_qp_attr a = {.qp_state = SHIFT_QPS_RTR, .dest_qp_num = remote->qp_num,
                           .rq_psn = remote->psn};
    return sn__modify(q, &a, SN_QP_STATE | SN_QP_DEST_QPN | SN_QP_RQ_PSN);
}

static const struct shift_backend_ops sim_ops = {
    .create_qp = b_create_qp,
    .destroy_qp = b_destroy_qp,
    .modify_qp = b_modify_qp,
    .query_qp = b_query_qp,
    .reset_qp = b_reset_qp,
    .post_send = b_post_send,
    .post_recv = b_post_recv,
    .ring = b_ring,
    .poll_cq = b_poll_cq,
    .reg_mr = b_reg_mr,
    .dereg_mr = b_dereg_mr,
    .ctl_send = b_ctl_send,
    .ctl_recv = b_ctl_recv,
    .sq_pending = b_sq_pending,
    .query_qp_num = b_query_qp_num,
    .async_event = b_async_event,
    .create_cq = b_create_cq,
    .destroy_cq = b_destroy_cq,
    .create_qp_cq = b_create_qp_cq,
    .local_info = b_local_info,
    .rtr_qp = b_rtr_qp,
};

/* A control message reached one of x's QPs: it waits in the path's inbox, and the layer
 * reads it at once (the spec's DeliverControl is one step: delivery and taking). */
static void on_ctl(void *arg, sn_qp qp, const void *msg, uint32_t len)
{
    sim_ctx *x = arg;
    int p = x->qph[1] == qp ? 1 : 2;
    if (x->inbox[p].count < SIM_INBOX && len <= SIM_CTL_MAX) {
        unsigned slot = (x->inbox[p].head + x->inbox[p].count++) % SIM_INBOX;
        memcpy(x->inbox[p].msg[slot], msg, len);
        x->inbox[p].len[slot] = len;
    }
    shift_ctl_poll(x->ep);
}

static conn_s *conn_get(shift_conn c) { return h_get(c, H_CONN); }

/* the context of a shared CQ pair shift_sim_cq_create made on host of f, or NULL */
static sim_ctx *sim_cq_of(shift_cq cq, const sn_fab *f, int host)
{
    const struct shift_backend_ops *ops;
    sim_ctx *x = shift__cq_ctx(cq, &ops);
    return x && ops == &sim_ops && x->f == f && x->host == host ? x : NULL;
}

int shift_sim_cq_create(sn_fabric fh, int host, uint32_t cqe, shift_cq *out)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return EBADF;
    if (!out || (host != 0 && host != 1) || f->local >= 0)
        return EINVAL;
    *out = NULL;
    sim_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return ENOMEM;
    *x = (sim_ctx){.f = f, .fh = fh, .host = host};
    struct shift_cq_attr a = {.cqe = cqe};
    int err = shift_cq_create(&sim_ops, x, &a, out);
    if (err) {
        free(x);
        return err;
    }
    shift__cq_own(*out, 1);
    f->users++;
    return 0;
}

int shift_sim_cq_destroy(shift_cq cq)
{
    const struct shift_backend_ops *ops;
    sim_ctx *x = shift__cq_ctx(cq, &ops);
    if (!x || ops != &sim_ops)
        return EINVAL;
    shift__cq_own(cq, 0);
    int err = shift_cq_destroy(cq);
    if (err) {
        shift__cq_own(cq, 1);
        return err; /* EBUSY: a connection's endpoints are on it */
    }
    x->f->users--;
    free(x);
    return 0;
}

/* Host h's endpoint of connection c, in its context there (joined or not), on its shared
 * CQ pair cq (NULL: CQs of its own), with attr's flags and `extra`. */
static int open_endpoint(conn_s *c, sn_fabric fh, int h, const struct shift_conn_attr *attr,
                         unsigned extra, shift_cq cq)
{
    sim_ctx *x = &c->ctx[h];
    x->f = sn__fab(fh);
    x->fh = fh;
    x->host = h;
    for (int n = 1; n <= 2; n++) /* (an event before it opened is none of its events) */
        x->read[n] = x->f->host[h].nic[n].raised;
    struct shift_ep_attr ea = {h == SN_HOST_A ? SHIFT_ROLE_REQUESTER : SHIFT_ROLE_RESPONDER,
                               attr->design, attr->max_send_wr, attr->max_recv_wr,
                               attr->ctl_retries, attr->flags | extra};
    int err = shift_ep_create_on_cq(&sim_ops, x, &ea, cq, &c->ep[h]);
    if (!err)
        x->ep = c->ep[h];
    return err;
}

/* x's layer takes the control messages its QPs receive (owned QPs: set here, inside) */
static void take_ctl(sim_ctx *x)
{
    for (int p = 1; p <= 2; p++) {
        sn_qp_s *q = sn__qp(x->qph[p]);
        q->ctl_fn = on_ctl;
        q->ctl_arg = x;
    }
}

int shift_sim_connect(sn_fabric fh, const struct shift_conn_attr *attr, shift_conn *out)
{
    return shift_sim_connect_on_cq(fh, attr, NULL, NULL, out);
}

int shift_sim_connect_on_cq(sn_fabric fh, const struct shift_conn_attr *attr, shift_cq cq_a,
                            shift_cq cq_b, shift_conn *out)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return EBADF;
    if (!attr || !out)
        return EINVAL;
    *out = NULL;
    const shift_cq cq[2] = {cq_a, cq_b};
    for (int h = 0; h < 2; h++)
        if (cq[h] && !sim_cq_of(cq[h], f, h))
            return EINVAL; /* not a shared CQ pair of this host of this fabric */
    if (attr->flags & SHIFT_EP_TWO_PHASE)
        return EINVAL; /* (it connects both paths itself: shift_sim_open sets up in two) */
    conn_s *c = calloc(1, sizeof *c);
    if (!c)
        return ENOMEM;
    c->f = f;
    int err = 0, made = 0;
    for (int h = 0; h < 2; h++) {
        err = open_endpoint(c, fh, h, attr, 0, cq[h]);
        if (err)
            goto fail;
        made++;
    }
    for (int p = 1; p <= 2; p++) {
        err = sn_connect(c->ctx[0].qph[p], c->ctx[1].qph[p]);
        if (err)
            goto fail;
    }
    for (int h = 0; h < 2; h++)
        take_ctl(&c->ctx[h]);
    c->h = h_new(c, H_CONN);
    if (!c->h) {
        err = ENOMEM;
        goto fail;
    }
    for (int h = 0; h < 2; h++)
        shift__ep_own(c->ep[h], 1);
    f->users++;
    *out = H_PTR(c->h);
    return 0;
fail:
    for (int h = 0; h < made; h++)
        shift_ep_destroy(c->ep[h]);
    free(c);
    return err;
}

/* One host's endpoint, made alone: its QPs stay in RESET until the application
 * connects them (shift_ep_connect); only the wire joins it to the peer's. */
int shift_sim_open(sn_fabric fh, int host, const struct shift_conn_attr *attr, shift_conn *out)
{
    sn_fab *f = sn__fab(fh);
    if (!f)
        return EBADF;
    if (!attr || !out || (host != SN_HOST_A && host != SN_HOST_B))
        return EINVAL;
    *out = NULL;
    conn_s *c = calloc(1, sizeof *c);
    if (!c)
        return ENOMEM;
    int err = open_endpoint(c, fh, host, attr, SHIFT_EP_TWO_PHASE, NULL);
    if (err) {
        free(c);
        return err;
    }
    c->f = f;
    c->h = h_new(c, H_CONN);
    if (!c->h) {
        shift_ep_destroy(c->ep[host]);
        free(c);
        return ENOMEM;
    }
    take_ctl(&c->ctx[host]);
    shift__ep_own(c->ep[host], 1);
    f->users++;
    *out = H_PTR(c->h);
    return 0;
}

int shift_sim_close(shift_conn ch)
{
    conn_s *c = conn_get(ch);
    if (!c)
        return EINVAL;
    for (int h = 0; h < 2; h++) {
        if (!c->ep[h])
            continue; /* (a host opened alone) */
        shift__ep_own(c->ep[h], 0);
        shift_ep_destroy(c->ep[h]);
    }
    c->f->users--;
    h_free(c->h);
    free(c);
    return 0;
}

int shift_sim_ep(shift_conn ch, int host, shift_ep *out)
{
    conn_s *c = conn_get(ch);
    if (!c || !out || (host != 0 && host != 1) || !c->ep[host])
        return EINVAL;
    *out = c->ep[host];
    return 0;
}

int shift_sim_qp(shift_conn ch, int host, int path, sn_qp *out)
{
    conn_s *c = conn_get(ch);
    if (!c || !out || (host != 0 && host != 1) || (path != 1 && path != 2) || !c->ep[host])
        return EINVAL;
    *out = c->ctx[host].qph[path];
    return 0;
}

int shift_sim_reg_mr(shift_conn ch, int host, uint64_t addr, size_t length, int access,
                     struct shift_mr_keys *keys)
{
    conn_s *c = conn_get(ch);
    if (!c || !keys || (host != 0 && host != 1) || !c->ep[host])
        return EINVAL;
    int err = shift_reg_mr(c->ep[host], addr, length, access, keys);
    if (err || !c->ep[1 - host])
        return err; /* (a host opened alone: its layer announces the keys in-band) */
    return shift_add_remote_keys(c->ep[1 - host], keys->rkey, keys->rkey_backup);
}

int shift_sim_dereg_mr(shift_conn ch, int host, const struct shift_mr_keys *keys)
{
    conn_s *c = conn_get(ch);
    if (!c || !keys || (host != 0 && host != 1) || !c->ep[host])
        return EINVAL;
    int err = shift_dereg_mr(c->ep[host], keys);
    if (err || !c->ep[1 - host])
        return err;
    /* (a region registered on the endpoint alone left the peer's keys unknown) */
    shift_del_remote_keys(c->ep[1 - host], keys->rkey);
    return 0;
}

int shift_sim_timeout(shift_conn ch, int host, int path)
{
    conn_s *c = conn_get(ch);
    if (!c)
        return -EINVAL;
    if ((host != 0 && host != 1) || (path != 1 && path != 2) || !c->ep[host])
        return -EINVAL;
    if (sn__timeout(c->f, host, path) > 0)
        return 1;
    return shift_timer(c->ep[host], path);
}

int shift_sim_fail_op(shift_conn ch, int host, int op, uint32_t after, int err)
{
    conn_s *c = conn_get(ch);
    if (!c || (host != 0 && host != 1) || !c->ep[host] || op < 0 || op >= SHIFT_OP_COUNT ||
        err < 0 || err > 4095)
        return EINVAL;
    c->ctx[host].fault[op].after = after;
    c->ctx[host].fault[op].err = err;
    return 0;
}

uint64_t shift__sim_calls(struct shift_conn_opaque *ch, int host, int op)
{
    conn_s *c = conn_get(ch);
    if (!c || (host != 0 && host != 1) || op < 0 || op >= SHIFT_OP_COUNT)
        return 0;
    return c->ctx[host].calls[op];
}
