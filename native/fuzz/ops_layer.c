/*
 * ops_layer.c - steps on the layer and its simnic binding: connections, lone
 * endpoints over the hostile backend, posts, polls, progress, timers, control input.
 */
#include "ops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------- connections ------- */

/* A fabric's shared CQ pairs, one per host, made once (a small cqe: the QPs' shares
 * run out, ENOMEM). 0 if h is no live fabric or a pair could not be made. */
static int shared_cqs(sn_fabric h)
{
    fz_fab *f = fab_of(h);
    for (int host = 0; f && host < 2; host++) {
        if (f->cq[host])
            continue;
        int r = shift_sim_cq_create(h, host, 48, &f->cq[host]);
        FZ_CHECK(r == 0 || r == ENOMEM, r, host);
        if (r)
            return 0;
    }
    return f != NULL;
}

/* Destroy a fabric's shared CQ pairs: EBUSY while a live connection of it is on them
 * (busy), else gone. */
void drop_shared_cqs(fz_fab *f, int busy)
{
    for (int host = 0; host < 2; host++) {
        if (!f->cq[host])
            continue;
        int r = shift_sim_cq_destroy(f->cq[host]);
        FZ_CHECK(busy ? r == EBUSY : r == 0, r, busy);
        FZ_CHECK(shift_cq_destroy(f->cq[host]) == (busy ? EBUSY : EINVAL), busy, 0);
        if (!busy)
            f->cq[host] = NULL;
    }
}

void op_sim_connect(void)
{
    unsigned ci = fz_pick(W->in, NCONN), fi = fz_pick(W->in, NFAB);
    fz_conn *c = &W->conn[ci];
    sn_fabric h = fz_u8(W->in) < 240 ? W->fab[fi].h : pick(T_FAB);
    struct shift_conn_attr a = {(int)fz_small(W->in, 3), 1 + fz_small(W->in, 8),
                                1 + fz_small(W->in, 8), fz_small(W->in, 4),
                                fz_small(W->in, 4)};
    shift_conn out;
    /* the byte that chose a NULL attr at 250 and above: at 253 and above (few inputs of
     * the corpus change), the connection goes on the fabric's shared CQ pairs - at 253
     * with the hosts' pairs swapped, which the call refuses */
    uint8_t b = fz_u8(W->in);
    int on_cq = b >= 253 && shared_cqs(h);
    fz_fab *f = fab_of(h);
    shift_cq qa = on_cq ? f->cq[b == 253] : NULL, qb = on_cq ? f->cq[b != 253] : NULL;
    int r = shift_sim_connect_on_cq(h, b < 250 || on_cq ? &a : NULL, qa, qb,
                                    c->live ? NULL : &out);
    if (on_cq && b == 253)
        FZ_CHECK(r == EINVAL, r, 0);
    if (r || c->live)
        return;
    fz_note("connection %u: design %d, max_send_wr %u, max_recv_wr %u, flags %u", ci,
            a.design, a.max_send_wr, a.max_recv_wr, a.flags);
    FZ_CHECK(fab_of(h) != NULL, r, 0);
    memset(c, 0, sizeof *c);
    c->h = out;
    c->live = 1;
    c->fab = (int)(fab_of(h) - W->fab);
    c->on_cq = on_cq;
    for (int host = 0; host < 2; host++) {
        fz_ep *e = &c->ep[host];
        FZ_CHECK(shift_sim_ep(out, host, &e->h) == 0, host, 0);
        e->live = 1;
        e->owner = OWNER_CONN + (int)ci * 2 + host;
        e->cap = host == 0 ? a.max_send_wr : a.max_recv_wr;
        e->check_ids = 2;
    }
}

fz_conn *conn_of(shift_conn h)
{
    for (int i = 0; i < NCONN; i++)
        if (W->conn[i].live && W->conn[i].h == h)
            return &W->conn[i];
    return NULL;
}

void op_sim_close(void)
{
    shift_conn h = pick(T_CONN);
    fz_conn *c = conn_of(h);
    int r = shift_sim_close(h);
    FZ_CHECK(c ? r == 0 : r == EINVAL, r, 0);
    if (c)
        c->live = c->ep[0].live = c->ep[1].live = 0;
}

void op_sim_misc(void)
{
    shift_conn h = pick(T_CONN);
    fz_conn *c = conn_of(h);
    int host = pick_host(), path = pick_path(), r;
    switch (fz_pick(W->in, 4)) {
    case 0: {
        shift_ep ep;
        r = shift_sim_ep(h, host, fz_u8(W->in) < 250 ? &ep : NULL);
        if (c && !r)
            FZ_CHECK(ep == c->ep[host].h, host, 0);
        break;
    }
    case 1: {
        sn_qp q;
        r = shift_sim_qp(h, host, path, fz_u8(W->in) < 250 ? &q : NULL);
        if (c && !r)
            c->qp[host][path] = q;
        break;
    }
    case 2:
        r = shift_sim_timeout(h, host, path);
        FZ_CHECK(r == 0 || r == 1 || r == -EINVAL, r, 0);
        break;
    default:
        r = shift_sim_fail_op(h, host, (int)fz_small(W->in, SHIFT_OP_COUNT),
                              fz_small(W->in, 6), fz_errnos[fz_pick(W->in, 7)]);
        FZ_CHECK(r == 0 || r == EINVAL, r, 0);
        break;
    }
}

void op_sim_reg_mr(void)
{
    shift_conn h = pick(T_CONN);
    fz_conn *c = conn_of(h);
    int host = pick_host();
    size_t len = 1 + fz_small(W->in, 8192);
    struct shift_mr_keys k;
    int r = shift_sim_reg_mr(h, host, pick_addr(0, 0), len, (int)fz_small(W->in, 16),
                             fz_u8(W->in) < 250 ? &k : NULL);
    if (c && !r && c->nkeys < 2)
        c->keys[c->nkeys++] = k;
}

/* ------------------------------------------------------------ endpoints ------- */

/* The lone endpoints' shared CQ pair over the forged backend, made once (NULL if the
 * backend refused it); its answers, as every answer of that backend, are the input's. */
static shift_cq lone_cq(void)
{
    if (!W->lone_cq) {
        W->cq_ctx.in = W->in;
        struct shift_cq_attr qa = {.cqe = 40};
        int r = shift_cq_create(&fz_script_ops_cq, &W->cq_ctx, &qa, &W->lone_cq);
        FZ_CHECK(r == 0 || r == EINVAL || r == ENOMEM || r == EIO || r == ENETDOWN ||
                     r == ENETUNREACH || r == EAGAIN || r == EBUSY, r, 0);
    }
    return W->lone_cq;
}

void op_ep_create(void)
{
    fz_lone *l = &W->lone[fz_pick(W->in, NLONE)];
    struct shift_backend_ops broken = fz_script_ops;
    const struct shift_backend_ops *ops = &fz_script_ops;
    switch (fz_pick(W->in, 4)) {
    case 0:
        ops = &fz_script_ops_sq;
        break;
    case 1: {
        /* a table without an op it needs, or none; or one with async_event, from even
         * bytes >= 192 that meant none when the corpus was built (few inputs change) */
        static const struct shift_backend_ops *const ev[2] = {&fz_script_ops_ev,
                                                               &fz_script_ops_sq_ev};
        uint8_t b = fz_u8(W->in);
        broken.ring = NULL;
        ops = b & 1 ? &broken : b < 192 ? NULL : ev[(b >> 1) & 1];
        break;
    }
    default:
        break;
    }
    struct shift_ep_attr a = {(int)fz_small(W->in, 2), (int)fz_small(W->in, 3),
                              1 + fz_small(W->in, 8), 1 + fz_small(W->in, 8),
                              fz_small(W->in, 4), fz_small(W->in, 4)};
    l->ctx.in = W->in;
    shift_ep out;
    /* the byte that chose a NULL attr at 250 and above: at 253 and above (few inputs of
     * the corpus change), the endpoint goes on the lone endpoints' shared CQ pair - at
     * 253 with the table chosen above, of another backend than the pair's: refused */
    uint8_t b = fz_u8(W->in);
    shift_cq cq = b >= 253 ? lone_cq() : NULL;
    if (cq && b > 253)
        ops = &fz_script_ops_cq;
    const struct shift_ep_attr *ap = b < 250 || cq ? &a : NULL;
    shift_ep *op = l->ep.live ? NULL : &out;
    int r = cq ? shift_ep_create_on_cq(ops, &l->ctx, ap, cq, op)
               : shift_ep_create(ops, &l->ctx, ap, op);
    if (cq && b == 253)
        FZ_CHECK(r == EINVAL, r, 0);
    if (r || l->ep.live)
        return;
    FZ_CHECK(ops && ops != &broken, 0, 0);
    memset(&l->ep, 0, sizeof l->ep);
    l->ep.h = out;
    l->ep.live = 1;
    l->ep.owner = OWNER_LONE + (int)(l - W->lone);
    l->ep.cap = a.role == SHIFT_ROLE_REQUESTER ? a.max_send_wr : a.max_recv_wr;
    /* in direct mode completions are the backend's, forged or not; otherwise the
     * layer maps them to the application's ids (a forged opcode still passes) */
    l->ep.check_ids = ops->sq_pending && !(a.flags & SHIFT_EP_COPY_POSTS) ? 0 : 1;
}

void op_ep_destroy(void)
{
    shift_ep h = pick(T_EP);
    fz_ep *e = ep_of(h);
    int r = shift_ep_destroy(h);
    if (!e) {
        FZ_CHECK(r == EINVAL, r, 0);
    } else if (e->owner >= OWNER_LONE) {
        FZ_CHECK(r == 0, r, 0);
        e->live = 0;
    } else {
        FZ_CHECK(r == EBUSY, r, 0); /* its connection owns it */
    }
}

void op_ep_post_send(void)
{
    shift_ep h = pick(T_EP);
    fz_ep *e = ep_of(h);
    int cyc, n = make_send_chain(e ? e->owner : OWNER_RAW, &cyc);
    struct shift_send_wr *bad = &swr[0];
    int ask = fz_u8(W->in) < 240;
    void *head = fz_u8(W->in) < 250 ? &swr[0] : NULL; /* NULL: an empty post */
    int r = shift_post_send(h, head, ask ? &bad : NULL);
    FZ_CHECK(e || r == EINVAL, r, 0);
    settle_ids(send_nodes, chain_ids, n, cyc || (r && !ask), r, bad, e && head);
}

void op_ep_post_recv(void)
{
    shift_ep h = pick(T_EP);
    fz_ep *e = ep_of(h);
    int cyc, n = make_recv_chain(e ? e->owner : OWNER_RAW, &cyc);
    struct shift_recv_wr *bad = &rwr[0];
    int ask = fz_u8(W->in) < 240;
    void *head = fz_u8(W->in) < 250 ? &rwr[0] : NULL; /* NULL: an empty post */
    int r = shift_post_recv(h, head, ask ? &bad : NULL);
    FZ_CHECK(e || r == EINVAL, r, 0);
    settle_ids(recv_nodes, chain_ids, n, cyc || (r && !ask), r, bad, e && head);
}

void op_ep_poll(void)
{
    shift_ep h = pick(T_EP);
    fz_ep *e = ep_of(h);
    struct shift_wc wc[16]; /* room for n (at most 15) */
    if (fz_u8(W->in) & 1) {
        int r = shift_poll_step(h, fz_u8(W->in) < 250 ? wc : NULL);
        FZ_CHECK(r <= 2 && (e || r == -EINVAL), r, 0);
        if (r == 1 && e)
            took(e->owner, wc, 1, e->check_ids);
        struct shift_ep_info info;
        /* a connection's completion names the application's QP (simnic tells it) */
        if (r == 1 && e && e->check_ids == 2 && shift_ep_query(h, &info) == 0)
            FZ_CHECK(wc[0].qp_num == info.qp_num && info.qp_num != 0, wc[0].qp_num,
                     info.qp_num);
        return;
    }
    int n = fz_u8(W->in) < 240 ? (int)(fz_small(W->in, 9) % 16) : -(int)fz_u8(W->in);
    int r = shift_poll_cq(h, n, fz_u8(W->in) < 250 ? wc : NULL);
    FZ_CHECK(r <= (n > 0 ? n : 0) && (e || r == -EINVAL), r, n);
    if (r > 0 && e)
        took(e->owner, wc, r, e->check_ids);
}

void op_ep_step(void)
{
    shift_ep h = pick(T_EP);
    int live = ep_of(h) != NULL, r, how = fz_u8(W->in);
    if (how & 1) {
        r = shift_progress(h);
        FZ_CHECK(live ? r >= SHIFT_STEP_NONE && r <= SHIFT_STEP_RELEASE : r == -EINVAL, r, 0);
    } else if (how % 8 == 6) {
        /* the control messages waiting at the backend: a count, or the -errno of a fault
         * injected at ctl_recv (the messages wait) */
        r = shift_ctl_poll(h);
        FZ_CHECK(live ? r > -4096 : r == -EINVAL, r, 0);
    } else {
        int path = pick_path();
        r = shift_timer(h, path);
        FZ_CHECK(r == 0 || r == 1 || r == -EINVAL, r, 0);
        ep_async(h, path); /* the loop that fires a path's timers reads its NIC's events */
    }
}

/* shift_async_event, and what its answer must be: -EINVAL for a bad handle or path; a
 * connection's endpoint 1 only for a death of its NIC not yet read, else 0, or the
 * -errno of a fault injected at async_event (shift_sim_fail_op: then the events wait);
 * a lone one 0, 1 or the hostile backend's -errno */
void ep_async(shift_ep h, int path)
{
    fz_ep *e = ep_of(h);
    int r = shift_async_event(h, path);
    if (!e || (path != 1 && path != 2)) {
        FZ_CHECK(r == -EINVAL, r, path);
    } else if (e->owner >= OWNER_LONE) {
        FZ_CHECK(r >= -4095 && r <= 1, r, path);
    } else if (r < 0) {
        FZ_CHECK(r >= -4095, r, path); /* (injected: nothing was read) */
    } else {
        FZ_CHECK(r == 0 || (r == 1 && e->events[path] > 0), r, e->events[path]);
        e->events[path] = 0; /* it read them all */
    }
}

void op_ctl_input(void)
{
    uint8_t msg[300] = {0};
    shift_ep h = pick(T_EP);
    int path = pick_path();
    uint32_t len = make_ctl(msg);
    int r = shift_ctl_input(h, path, fz_u8(W->in) < 250 ? msg : NULL, len);
    FZ_CHECK(r == 0 || r == -EINVAL, r, 0);
}

void op_ep_keys(void)
{
    shift_ep h = pick(T_EP);
    struct shift_mr_keys k;
    if (fz_u8(W->in) & 1) {
        int r = shift_reg_mr(h, pick_addr(0, 0), 1 + fz_small(W->in, 4096),
                             (int)fz_small(W->in, 16), fz_u8(W->in) < 250 ? &k : NULL);
        FZ_CHECK(r >= 0, r, 0);
    } else {
        int r = shift_add_remote_keys(h, pick_key(), pick_key());
        FZ_CHECK(r == 0 || r == EINVAL || r == ENOMEM, r, 0);
    }
}

void op_ep_query(void)
{
    struct shift_ep_info info;
    shift_ep h = pick(T_EP);
    int r = shift_ep_query(h, fz_u8(W->in) < 250 ? &info : NULL);
    FZ_CHECK(r >= 0 && r < 4096, r, 0); /* 0, EINVAL, or the backend's sq_pending error */
}
