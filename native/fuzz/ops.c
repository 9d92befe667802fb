/*
 * ops.c - the fuzz target's steps: one call of the public API each, with what its
 * answer must be where the harness knows (a live object answers 0, a dead or forged
 * handle an error, an owned object EBUSY), and the harness's records kept in step.
 */
#include "world.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

extern long fz_alloc_countdown;

static const int errs[] = {EINVAL, ENOMEM, EIO, ENETDOWN, ENETUNREACH, EAGAIN, 0};

/* ------------------------------------------------------------- fabrics -------- */

static void op_fabric_create(void)
{
    fz_fab *f = &W->fab[fz_pick(W->in, NFAB)];
    struct sn_fabric_attr a = {fz_u8(W->in) < 200 ? 4096u << fz_pick(W->in, 5) : fz_u64(W->in),
                               fz_small(W->in, 8), fz_small(W->in, 8), (int)fz_small(W->in, 2)};
    int use_attr = fz_u8(W->in) & 1;
    if (f->live) {
        FZ_CHECK(sn_fabric_create(use_attr ? &a : NULL, NULL) == EINVAL, 0, 0);
        return;
    }
    sn_fabric h;
    int r = sn_fabric_create(use_attr ? &a : NULL, &h);
    if (r) {
        FZ_CHECK(r == EINVAL || r == ENOMEM, r, 0);
        FZ_CHECK(h == NULL, r, 0);
        return;
    }
    memset(f, 0, sizeof *f);
    f->h = h;
    f->live = 1;
    for (int host = 0; host < 2; host++)
        FZ_CHECK(sn_host_mem(h, host, &f->mem[host], &f->size) == 0, host, 0);
    for (int p = 1; p <= 2; p++)
        f->link[p] = f->alive[0][p] = f->alive[1][p] = 1;
}

static void forget_fabric(fz_fab *f)
{
    sn_fabric h = f->h;
    f->live = 0;
    for (int i = 0; i < NRAW; i++) {
        fz_raw *r = &W->raw[i];
        if (r->qp_live && &W->fab[r->qp_fab] == f)
            r->qp_live = 0;
        if (r->cq_live && &W->fab[r->cq_fab] == f)
            r->cq_live = 0;
        if (r->mr_live && &W->fab[r->mr_fab] == f)
            r->mr_live = 0;
    }
    f->h = h; /* kept: a stale handle to try later */
}

static void op_fabric_destroy(void)
{
    sn_fabric h = pick(T_FAB);
    fz_fab *f = fab_of(h);
    int users = 0;
    for (int i = 0; i < NCONN; i++)
        users += W->conn[i].live && f && &W->fab[W->conn[i].fab] == f;
    int r = sn_fabric_destroy(h);
    if (!f) {
        FZ_CHECK(r == EBADF, r, 0);
    } else if (users) {
        FZ_CHECK(r == EBUSY, r, users);
    } else {
        FZ_CHECK(r == 0, r, 0);
        forget_fabric(f);
    }
}

static void op_fabric_queries(void)
{
    sn_fabric h = pick(T_FAB);
    int host = pick_host(), path = pick_path(), dir = (int)fz_small(W->in, 2);
    uint8_t *base;
    size_t size;
    struct sn_counters c;
    int live = fab_of(h) != NULL;
    int r = sn_host_mem(h, host, fz_u8(W->in) & 1 ? &base : NULL, &size);
    FZ_CHECK(live ? (r == 0 || r == EINVAL) : r == EBADF, r, live);
    r = sn_counters_get(h, fz_u8(W->in) & 1 ? &c : NULL);
    FZ_CHECK(live ? (r == 0 || r == EINVAL) : r == EBADF, r, live);
    FZ_CHECK(sn_wire_len(h, path, dir) >= 0, path, dir);
    FZ_CHECK(sn_wire_head_kind(h, path, dir) >= 0, path, dir);
    FZ_CHECK(live || sn_path_healthy(h, path) == 0, path, 0);
    FZ_CHECK(live || sn_nic_alive(h, host, path) == 0, host, path);
}

/* --------------------------------------------------------- raw CQ, QP, MR ----- */

static void op_reg_mr(void)
{
    fz_raw *s = &W->raw[fz_pick(W->in, NRAW)];
    unsigned fi = fz_pick(W->in, NFAB);
    sn_fabric h = fz_u8(W->in) < 240 ? W->fab[fi].h : pick(T_FAB);
    int host = pick_host(), nic = pick_path(), access = (int)fz_small(W->in, 32);
    size_t len = fz_u8(W->in) < 200 ? 1 + fz_small(W->in, 8192) : fz_u64(W->in);
    uint64_t addr = pick_addr(0, 0);
    sn_mr m;
    int r = sn_reg_mr(h, host, nic, addr, len, access, s->mr_live ? NULL : &m);
    if (r || s->mr_live)
        return;
    FZ_CHECK(fab_of(h) != NULL, r, 0); /* registered on a live fabric only */
    s->mr = m;
    s->mr_live = 1;
    s->mr_fab = (int)(fab_of(h) - W->fab);
    FZ_CHECK(sn_mr_keys(m, &s->lkey, &s->rkey) == 0, 0, 0);
}

static void op_mr_keys(void)
{
    uint32_t l, k;
    int r = sn_mr_keys(pick(T_MR), fz_u8(W->in) & 1 ? &l : NULL, fz_u8(W->in) & 1 ? &k : NULL);
    FZ_CHECK(r == 0 || r == EINVAL, r, 0);
}

static void op_dereg_mr(void)
{
    sn_mr m = pick(T_MR);
    int r = sn_dereg_mr(m);
    for (int i = 0; i < NRAW; i++)
        if (W->raw[i].mr_live && W->raw[i].mr == m) {
            FZ_CHECK(r == 0, r, i);
            W->raw[i].mr_live = 0;
            return;
        }
    FZ_CHECK(r == EINVAL || r == EBUSY, r, 0);
}

static void op_create_cq(void)
{
    fz_raw *s = &W->raw[fz_pick(W->in, NRAW)];
    unsigned fi = fz_pick(W->in, NFAB);
    sn_fabric h = fz_u8(W->in) < 240 ? W->fab[fi].h : pick(T_FAB);
    int host = pick_host(), cqe = fz_u8(W->in) < 240 ? (int)fz_small(W->in, 40) : (int)fz_u32(W->in);
    sn_cq cq;
    int r = sn_create_cq(h, host, cqe, s->cq_live ? NULL : &cq);
    if (r || s->cq_live)
        return;
    FZ_CHECK(fab_of(h) != NULL, r, 0);
    s->cq = cq;
    s->cq_live = 1;
    s->cq_fab = (int)(fab_of(h) - W->fab);
}

static void op_destroy_cq(void)
{
    sn_cq cq = pick(T_CQ);
    int r = sn_destroy_cq(cq);
    for (int i = 0; i < NRAW; i++)
        if (W->raw[i].cq_live && W->raw[i].cq == cq) {
            FZ_CHECK(r == 0 || r == EBUSY, r, i); /* EBUSY: a QP still uses it */
            if (!r)
                W->raw[i].cq_live = 0;
            return;
        }
    FZ_CHECK(r == EINVAL, r, 0);
}

static void op_poll_raw_cq(void)
{
    struct shift_wc wc[16]; /* room for n (at most 15) */
    int n = fz_u8(W->in) < 240 ? (int)(fz_small(W->in, 9) % 16) : -(int)fz_u8(W->in);
    int r = sn_poll_cq(pick(T_CQ), n, fz_u8(W->in) < 250 ? wc : NULL);
    FZ_CHECK(r <= (n > 0 ? n : 0), r, n);
    if (r > 0)
        took(OWNER_RAW, wc, r, 2);
}

static void op_create_qp(void)
{
    fz_raw *s = &W->raw[fz_pick(W->in, NRAW)];
    unsigned fi = fz_pick(W->in, NFAB);
    sn_fabric h = fz_u8(W->in) < 240 ? W->fab[fi].h : pick(T_FAB);
    int host = pick_host(), nic = pick_path();
    struct sn_qp_init_attr a = {pick(T_CQ), pick(T_CQ), fz_small(W->in, 9), fz_small(W->in, 9),
                                fz_small(W->in, 80)};
    sn_qp qp;
    int r = sn_create_qp(h, host, nic, fz_u8(W->in) < 250 ? &a : NULL, s->qp_live ? NULL : &qp);
    if (r || s->qp_live)
        return;
    FZ_CHECK(fab_of(h) != NULL, r, 0);
    s->qp = qp;
    s->qp_live = 1;
    s->qp_fab = (int)(fab_of(h) - W->fab);
}

/* the QP is one a connection owns (handed out by shift_sim_qp, connection live) */
static int owned_qp(sn_qp q)
{
    for (int i = 0; i < NCONN; i++)
        for (int h = 0; h < 2; h++)
            for (int p = 1; p <= 2; p++)
                if (W->conn[i].live && q && W->conn[i].qp[h][p] == q)
                    return 1;
    return 0;
}

static void op_destroy_qp(void)
{
    sn_qp q = pick(T_QP);
    int raw = raw_qp_of(q), owned = owned_qp(q);
    int r = sn_destroy_qp(q);
    if (raw >= 0) {
        FZ_CHECK(r == 0, r, raw);
        W->raw[raw].qp_live = 0;
    } else {
        /* (a guessed handle may hit a connection's QP the harness was never shown) */
        FZ_CHECK(owned ? r == EBUSY : r == EINVAL || r == EBUSY, r, owned);
    }
}

static uint32_t pick_qpn(void)
{
    sn_qp q = pick(T_QP);
    struct sn_qp_attr a;
    if (fz_u8(W->in) < 220 && sn_query_qp(q, &a) == 0)
        return a.qp_num;
    return fz_u32(W->in);
}

static void op_modify_qp(void)
{
    sn_qp q = pick(T_QP);
    struct sn_qp_attr a = {(int)fz_small(W->in, 7), pick_qpn(), fz_small(W->in, 4),
                           fz_small(W->in, 4), 0, 0, 0};
    int mask = (int)fz_small(W->in, 16);
    int r = sn_modify_qp(q, fz_u8(W->in) < 250 ? &a : NULL, mask);
    FZ_CHECK(r == 0 || r == EINVAL, r, 0);
}

static void op_query_qp(void)
{
    struct sn_qp_attr a;
    sn_qp q = pick(T_QP);
    int r = sn_query_qp(q, fz_u8(W->in) < 250 ? &a : NULL);
    FZ_CHECK(r == 0 || r == EINVAL, r, 0);
    FZ_CHECK(raw_qp_of(q) < 0 || r == 0 || r == EINVAL, r, 0);
}

static void op_connect_qps(void)
{
    int r = sn_connect(pick(T_QP), pick(T_QP));
    FZ_CHECK(r == 0 || r == EINVAL, r, 0);
}

static void op_reconnect(void)
{
    int r = sn_reconnect(pick(T_QP));
    FZ_CHECK(r == 0 || r == EINVAL || r == ENOTCONN || r == ENETUNREACH, r, 0);
}

static void op_post_raw_send(void)
{
    sn_qp q = pick(T_QP);
    int cyc, n = make_send_chain(OWNER_RAW, &cyc);
    struct shift_send_wr *bad = &swr[0];
    int ask = fz_u8(W->in) < 240;
    void *head = fz_u8(W->in) < 250 ? &swr[0] : NULL; /* NULL: an empty post */
    int r = sn_post_send(q, head, ask ? &bad : NULL);
    if (owned_qp(q))
        FZ_CHECK(r == EBUSY, r, 0); /* the layer's data path: not the caller's */
    settle_ids(send_nodes, chain_ids, n, cyc || (r && !ask), r, bad, raw_qp_of(q) >= 0 && head);
}

static void op_post_raw_recv(void)
{
    sn_qp q = pick(T_QP);
    int cyc, n = make_recv_chain(OWNER_RAW, &cyc);
    struct shift_recv_wr *bad = &rwr[0];
    int ask = fz_u8(W->in) < 240;
    void *head = fz_u8(W->in) < 250 ? &rwr[0] : NULL; /* NULL: an empty post */
    int r = sn_post_recv(q, head, ask ? &bad : NULL);
    if (owned_qp(q))
        FZ_CHECK(r == EBUSY, r, 0);
    settle_ids(recv_nodes, chain_ids, n, cyc || (r && !ask), r, bad, raw_qp_of(q) >= 0 && head);
}

static void op_ring(void)
{
    sn_qp q = pick(T_QP);
    int r = sn_ring(q);
    FZ_CHECK(raw_qp_of(q) < 0 || r == 0, r, 0);
}

/* a control message: well-formed with hostile fields, or any bytes */
static uint32_t make_ctl(uint8_t *msg)
{
    uint8_t b = fz_u8(W->in);
    if (b < 160) {
        const uint32_t magic = 0x53484654u, epoch = fz_small(W->in, 4), pad = 0;
        const uint8_t kind = (uint8_t)fz_small(W->in, 3), reply = fz_u8(W->in) & 1;
        const uint16_t pad16 = 0;
        const int64_t count = fz_u8(W->in) < 200 ? (int64_t)fz_small(W->in, 8) - 1
                                                 : (int64_t)fz_u64(W->in);
        memcpy(msg, &magic, 4);
        msg[4] = kind;
        msg[5] = reply;
        memcpy(msg + 6, &pad16, 2);
        memcpy(msg + 8, &epoch, 4);
        memcpy(msg + 12, &pad, 4);
        memcpy(msg + 16, &count, 8);
        return b < 150 ? 24 : fz_small(W->in, 300);
    }
    uint32_t len = fz_small(W->in, 300);
    fz_bytes(W->in, msg, len < 300 ? len : 300);
    return len;
}

static void op_ctl_send_raw(void)
{
    uint8_t msg[300] = {0};
    sn_qp q = pick(T_QP);
    uint32_t len = make_ctl(msg);
    int r = sn_ctl_send(q, fz_u8(W->in) < 250 ? msg : NULL, len);
    FZ_CHECK(!owned_qp(q) || r == EBUSY, r, 0);
}

static void on_ctl(void *arg, sn_qp qp, const void *msg, uint32_t len)
{
    (void)arg, (void)qp, (void)msg, (void)len;
    if (W->depth)
        return;
    W->depth++; /* re-enter the API from inside the delivery */
    run_op();
    W->depth--;
}

static void op_set_handler(void)
{
    sn_qp q = pick(T_QP);
    int r = sn_set_ctl_handler(q, fz_u8(W->in) & 1 ? on_ctl : NULL, NULL);
    if (owned_qp(q))
        FZ_CHECK(r == EBUSY, r, 0);
    else if (raw_qp_of(q) >= 0)
        FZ_CHECK(r == 0, r, 0);
}

/* ----------------------------------------------------------- wire, faults ----- */

static void op_wire(void)
{
    sn_fabric h = pick(T_FAB);
    int host = pick_host(), path = pick_path(), dir = (int)fz_small(W->in, 2);
    int r;
    switch (fz_pick(W->in, 5)) {
    case 0:
        r = sn_transmit(h, host, path);
        break;
    case 1:
        r = sn_deliver(h, path, dir);
        break;
    case 2:
        r = sn_drop(h, path, dir);
        break;
    case 3:
        r = sn_timeout(h, host, path);
        break;
    default:
        r = (int)sn_pump(h, (long)fz_small(W->in, 64));
        FZ_CHECK(r >= 0 || (r == -EBADF && !fab_of(h)), r, 0);
        return;
    }
    FZ_CHECK(r == 0 || r == 1 || r == -EINVAL || r == -ENOMEM || (r == -EBADF && !fab_of(h)),
             r, 0); /* (ENOMEM: an allocation the input failed) */
}

static void op_fault(void)
{
    sn_fabric h = pick(T_FAB);
    int host = pick_host(), path = pick_path(), kind = (int)fz_pick(W->in, 4), r;
    switch (kind) {
    case 0:
        r = sn_link_down(h, path);
        break;
    case 1:
        r = sn_link_up(h, path);
        break;
    case 2:
        r = sn_nic_fail(h, host, path);
        break;
    default:
        r = sn_nic_recover(h, host, path);
        break;
    }
    fz_fab *f = fab_of(h);
    FZ_CHECK(f ? r == 0 || r == 1 || r == -EINVAL : r == -EBADF, r, kind);
    if (f && r == 1) {
        if (kind < 2)
            f->link[path] = kind == 1;
        else
            f->alive[host][path] = kind == 3;
    }
}

/* ---------------------------------------------------------- connections ------- */

static void op_sim_connect(void)
{
    unsigned ci = fz_pick(W->in, NCONN), fi = fz_pick(W->in, NFAB);
    fz_conn *c = &W->conn[ci];
    sn_fabric h = fz_u8(W->in) < 240 ? W->fab[fi].h : pick(T_FAB);
    struct shift_conn_attr a = {(int)fz_small(W->in, 3), 1 + fz_small(W->in, 8),
                                1 + fz_small(W->in, 8), fz_small(W->in, 4),
                                fz_small(W->in, 4)};
    shift_conn out;
    int r = shift_sim_connect(h, fz_u8(W->in) < 250 ? &a : NULL, c->live ? NULL : &out);
    if (r || c->live)
        return;
    FZ_CHECK(fab_of(h) != NULL, r, 0);
    memset(c, 0, sizeof *c);
    c->h = out;
    c->live = 1;
    c->fab = (int)(fab_of(h) - W->fab);
    for (int host = 0; host < 2; host++) {
        fz_ep *e = &c->ep[host];
        FZ_CHECK(shift_sim_ep(out, host, &e->h) == 0, host, 0);
        e->live = 1;
        e->owner = OWNER_CONN + (int)ci * 2 + host;
        e->cap = host == 0 ? a.max_send_wr : a.max_recv_wr;
        e->check_ids = 2;
    }
}

static fz_conn *conn_of(shift_conn h)
{
    for (int i = 0; i < NCONN; i++)
        if (W->conn[i].live && W->conn[i].h == h)
            return &W->conn[i];
    return NULL;
}

static void op_sim_close(void)
{
    shift_conn h = pick(T_CONN);
    fz_conn *c = conn_of(h);
    int r = shift_sim_close(h);
    FZ_CHECK(c ? r == 0 : r == EINVAL, r, 0);
    if (c)
        c->live = c->ep[0].live = c->ep[1].live = 0;
}

static void op_sim_misc(void)
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
                              fz_small(W->in, 6), errs[fz_pick(W->in, 7)]);
        FZ_CHECK(r == 0 || r == EINVAL, r, 0);
        break;
    }
}

static void op_sim_reg_mr(void)
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

static void op_ep_create(void)
{
    fz_lone *l = &W->lone[fz_pick(W->in, NLONE)];
    struct shift_backend_ops broken = fz_script_ops;
    const struct shift_backend_ops *ops = &fz_script_ops;
    switch (fz_pick(W->in, 4)) {
    case 0:
        ops = &fz_script_ops_sq;
        break;
    case 1:
        broken.ring = NULL; /* a table without an op it needs */
        ops = fz_u8(W->in) & 1 ? &broken : NULL;
        break;
    default:
        break;
    }
    struct shift_ep_attr a = {(int)fz_small(W->in, 2), (int)fz_small(W->in, 3),
                              1 + fz_small(W->in, 8), 1 + fz_small(W->in, 8),
                              fz_small(W->in, 4), fz_small(W->in, 4)};
    l->ctx.in = W->in;
    shift_ep out;
    int r = shift_ep_create(ops, &l->ctx, fz_u8(W->in) < 250 ? &a : NULL,
                            l->ep.live ? NULL : &out);
    if (r || l->ep.live)
        return;
    FZ_CHECK(ops == &fz_script_ops || ops == &fz_script_ops_sq, 0, 0);
    memset(&l->ep, 0, sizeof l->ep);
    l->ep.h = out;
    l->ep.live = 1;
    l->ep.owner = OWNER_LONE + (int)(l - W->lone);
    l->ep.cap = a.role == SHIFT_ROLE_REQUESTER ? a.max_send_wr : a.max_recv_wr;
    /* in direct mode completions are the backend's, forged or not; otherwise the
     * layer maps them to the application's ids (a forged opcode still passes) */
    l->ep.check_ids = ops == &fz_script_ops_sq && !(a.flags & SHIFT_EP_COPY_POSTS) ? 0 : 1;
}

static void op_ep_destroy(void)
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

static void op_ep_post_send(void)
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

static void op_ep_post_recv(void)
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

static void op_ep_poll(void)
{
    shift_ep h = pick(T_EP);
    fz_ep *e = ep_of(h);
    struct shift_wc wc[16]; /* room for n (at most 15) */
    if (fz_u8(W->in) & 1) {
        int r = shift_poll_step(h, fz_u8(W->in) < 250 ? wc : NULL);
        FZ_CHECK(r <= 2 && (e || r == -EINVAL), r, 0);
        if (r == 1 && e)
            took(e->owner, wc, 1, e->check_ids);
        return;
    }
    int n = fz_u8(W->in) < 240 ? (int)(fz_small(W->in, 9) % 16) : -(int)fz_u8(W->in);
    int r = shift_poll_cq(h, n, fz_u8(W->in) < 250 ? wc : NULL);
    FZ_CHECK(r <= (n > 0 ? n : 0) && (e || r == -EINVAL), r, n);
    if (r > 0 && e)
        took(e->owner, wc, r, e->check_ids);
}

static void op_ep_step(void)
{
    shift_ep h = pick(T_EP);
    int live = ep_of(h) != NULL, r;
    if (fz_u8(W->in) & 1) {
        r = shift_progress(h);
        FZ_CHECK(live ? r >= SHIFT_STEP_NONE && r <= SHIFT_STEP_RELEASE : r == -EINVAL, r, 0);
    } else {
        r = shift_timer(h, pick_path());
        FZ_CHECK(r == 0 || r == 1 || r == -EINVAL, r, 0);
    }
}

static void op_ctl_input(void)
{
    uint8_t msg[300] = {0};
    shift_ep h = pick(T_EP);
    int path = pick_path();
    uint32_t len = make_ctl(msg);
    int r = shift_ctl_input(h, path, fz_u8(W->in) < 250 ? msg : NULL, len);
    FZ_CHECK(r == 0 || r == EINVAL, r, 0);
}

static void op_ep_keys(void)
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

static void op_ep_query(void)
{
    struct shift_ep_info info;
    shift_ep h = pick(T_EP);
    int r = shift_ep_query(h, fz_u8(W->in) < 250 ? &info : NULL);
    FZ_CHECK(r == 0 || r == EINVAL, r, 0);
}

/* ------------------------------------------------ an application's steps ----- */

/* Traffic as an application makes it (valid keys and buffers): receives on the
 * responder, a chain of sends on the requester. Reaches deep states in few bytes. */
static void op_traffic_on(fz_conn *c);
static void settle_conn(fz_conn *c, int rounds, int timers);

static void op_traffic(void)
{
    fz_conn *c = &W->conn[fz_pick(W->in, NCONN)];
    if (c->live)
        op_traffic_on(c);
}

static void op_traffic_on(fz_conn *c)
{
    static const int opcodes[] = {SHIFT_WR_RDMA_WRITE, SHIFT_WR_RDMA_WRITE_WITH_IMM,
                                  SHIFT_WR_SEND, SHIFT_WR_SEND_WITH_IMM, SHIFT_WR_RDMA_WRITE,
                                  SHIFT_WR_RDMA_READ, SHIFT_WR_ATOMIC_FETCH_AND_ADD,
                                  SHIFT_WR_ATOMIC_CMP_AND_SWP};
    fz_fab *f = &W->fab[c->fab];
    for (int h = 0; c->nkeys < 2 && h < 2; h++) /* both hosts' first 4 KiB, both NICs */
        if (shift_sim_reg_mr(c->h, h, (uint64_t)(uintptr_t)f->mem[h], 4096, 15,
                             &c->keys[c->nkeys]) == 0)
            c->nkeys++;
    if (c->nkeys < 2)
        return;
    int n = 1 + (int)fz_pick(W->in, MAXCHAIN), cyc = 0;
    for (int i = 0; i < n; i++) {
        struct shift_recv_wr *w = &rwr[i];
        memset(w, 0, sizeof *w);
        chain_ids[i] = new_id(KIND_RECV, c->ep[1].owner);
        w->wr_id = chain_ids[i];
        w->num_sge = 1;
        w->sg = (struct shift_sge){(uint64_t)(uintptr_t)(f->mem[1] + 2048 + 64 * i), 64,
                                   c->keys[1].lkey};
        w->next = i + 1 < n ? &rwr[i + 1] : NULL;
    }
    struct shift_recv_wr *rbad = NULL;
    int r = shift_post_recv(c->ep[1].h, &rwr[0], &rbad);
    settle_ids(recv_nodes, chain_ids, n, cyc, r, rbad, 1);
    n = 1 + (int)fz_pick(W->in, MAXCHAIN);
    for (int i = 0; i < n; i++) {
        struct shift_send_wr *w = &swr[i];
        uint8_t b = fz_u8(W->in);
        memset(w, 0, sizeof *w);
        chain_ids[i] = new_id(KIND_SEND, c->ep[0].owner);
        w->wr_id = chain_ids[i];
        w->opcode = opcodes[b & 7];
        w->send_flags = (b & 0x10 ? 0 : SHIFT_SEND_SIGNALED) |
                        (b & 0x20 ? SHIFT_SEND_INELIGIBLE : 0) |
                        ((b & 0xc0) == 0xc0 ? SHIFT_SEND_INLINE : 0);
        w->num_sge = 1;
        w->sg = (struct shift_sge){(uint64_t)(uintptr_t)(f->mem[0] + 8 * i), 8, c->keys[0].lkey};
        w->remote_addr = (uint64_t)(uintptr_t)(f->mem[1] + 8 * (b & 15));
        w->rkey = c->keys[1].rkey;
        w->compare_add = 1;
        w->next = i + 1 < n ? &swr[i + 1] : NULL;
    }
    struct shift_send_wr *sbad = NULL;
    r = shift_post_send(c->ep[0].h, &swr[0], &sbad);
    settle_ids(send_nodes, chain_ids, n, cyc, r, sbad, 1);
}

/* Two raw QPs of one fabric joined as a pair, keys on both hosts, and RC traffic
 * between them with the wire misbehaving: drops, timeouts, retransmitted READs and
 * atomics (duplicates), receivers not ready. */
static void op_raw_traffic(void)
{
    static const int opcodes[] = {SHIFT_WR_RDMA_WRITE, SHIFT_WR_RDMA_READ, SHIFT_WR_SEND,
                                  SHIFT_WR_ATOMIC_FETCH_AND_ADD, SHIFT_WR_ATOMIC_CMP_AND_SWP,
                                  SHIFT_WR_RDMA_WRITE_WITH_IMM, SHIFT_WR_RDMA_READ,
                                  SHIFT_WR_SEND_WITH_IMM};
    fz_raw *a = &W->raw[fz_pick(W->in, NRAW)], *b = &W->raw[fz_pick(W->in, NRAW)];
    if (!a->qp_live || !b->qp_live || a == b || !a->mr_live || !b->mr_live)
        return;
    struct sn_qp_attr qa, qb;
    if (sn_query_qp(a->qp, &qa) || sn_query_qp(b->qp, &qb))
        return;
    sn_connect(a->qp, b->qp); /* (fails unless both are fresh: then they keep their peer) */
    fz_fab *f = &W->fab[a->qp_fab];
    int n = 1 + (int)fz_pick(W->in, MAXCHAIN), cyc = 0;
    for (int i = 0; i < n; i++) {
        struct shift_recv_wr *w = &rwr[i];
        memset(w, 0, sizeof *w);
        chain_ids[i] = new_id(KIND_RECV, OWNER_RAW);
        w->wr_id = chain_ids[i];
        w->num_sge = 1;
        w->sg = (struct shift_sge){(uint64_t)(uintptr_t)(f->mem[qb.host] + 64 * i),
                                   fz_u8(W->in) & 1 ? 64 : 4, b->lkey};
        w->next = i + 1 < n ? &rwr[i + 1] : NULL;
    }
    struct shift_recv_wr *rbad = NULL;
    int r = sn_post_recv(b->qp, &rwr[0], &rbad);
    settle_ids(recv_nodes, chain_ids, n, cyc, r, rbad, 1);
    n = 1 + (int)fz_pick(W->in, MAXCHAIN);
    for (int i = 0; i < n; i++) {
        struct shift_send_wr *w = &swr[i];
        uint8_t o = fz_u8(W->in);
        memset(w, 0, sizeof *w);
        chain_ids[i] = new_id(KIND_SEND, OWNER_RAW);
        w->wr_id = chain_ids[i];
        w->opcode = opcodes[o & 7];
        w->send_flags = o & 0x80 ? 0 : SHIFT_SEND_SIGNALED;
        w->num_sge = 1;
        w->sg = (struct shift_sge){(uint64_t)(uintptr_t)(f->mem[qa.host] + 8 * i),
                                   o & 0x40 ? 8 : 16, o & 0x20 ? a->lkey : b->lkey};
        w->remote_addr = (uint64_t)(uintptr_t)(f->mem[qb.host] + 8 * ((o >> 3) & 3));
        w->rkey = o & 0x10 ? b->rkey : a->rkey;
        w->next = i + 1 < n ? &swr[i + 1] : NULL;
    }
    struct shift_send_wr *sbad = NULL;
    r = sn_post_send(a->qp, &swr[0], &sbad);
    settle_ids(send_nodes, chain_ids, n, cyc, r, sbad, 1);
    for (int k = 0, steps = (int)fz_pick(W->in, 48); k < steps; k++) {
        int path = qa.nic, host = (int)fz_pick(W->in, 2), dir = (int)fz_pick(W->in, 2);
        switch (fz_pick(W->in, 6)) {
        case 0:
            sn_drop(f->h, path, dir);
            break;
        case 1:
            sn_timeout(f->h, host, path);
            break;
        case 2:
            sn_deliver(f->h, path, dir);
            break;
        default:
            sn_transmit(f->h, host, path);
            break;
        }
    }
    struct shift_wc wc[16];
    for (int h = 0; h < 2; h++) {
        r = sn_poll_cq((h ? b : a)->cq, 16, wc);
        if (r > 0)
            took(OWNER_RAW, wc, r, 2);
    }
}

/* A whole failover and fail-back on a live connection, as a NIC or link dies and
 * comes back under traffic: the states between are what the other steps rarely meet. */
static void op_failover_cycle(void)
{
    fz_conn *c = &W->conn[fz_pick(W->in, NCONN)];
    if (!c->live)
        return;
    fz_fab *f = &W->fab[c->fab];
    int host = (int)fz_pick(W->in, 2), link = fz_u8(W->in) & 1;
    op_traffic_on(c);
    if (link ? sn_link_down(f->h, 1) == 1 : sn_nic_fail(f->h, host, 1) == 1) {
        if (link)
            f->link[1] = 0;
        else
            f->alive[host][1] = 0;
    }
    settle_conn(c, 1 + (int)fz_pick(W->in, 12), 1);
    if (link ? sn_link_up(f->h, 1) == 1 : sn_nic_recover(f->h, host, 1) == 1) {
        if (link)
            f->link[1] = 1;
        else
            f->alive[host][1] = 1;
    }
    settle_conn(c, 1 + (int)fz_pick(W->in, 12), 0);
    op_traffic_on(c); /* the fence */
    settle_conn(c, 1 + (int)fz_pick(W->in, 12), 0);
}

/* A raw QP walked through the states as a verbs application connects one, with the
 * attribute mask of each step chosen by the input. */
static void op_qp_walk(void)
{
    fz_raw *a = &W->raw[fz_pick(W->in, NRAW)];
    if (!a->qp_live)
        return;
    static const int states[] = {SHIFT_QPS_RESET, SHIFT_QPS_INIT, SHIFT_QPS_RTR, SHIFT_QPS_RTS};
    struct sn_qp_attr at = {0};
    at.dest_qp_num = pick_qpn();
    for (int i = 0; i < 4; i++) {
        at.qp_state = states[i];
        at.rq_psn = fz_small(W->in, 3);
        at.sq_psn = fz_small(W->in, 3);
        int mask = SN_QP_STATE | (fz_u8(W->in) & (SN_QP_DEST_QPN | SN_QP_RQ_PSN | SN_QP_SQ_PSN));
        int r = sn_modify_qp(a->qp, &at, mask);
        FZ_CHECK(r == 0 || r == EINVAL, r, i);
    }
}

/* Let a connection run as an application's loop does: the wire moves, both sides
 * poll and make progress; now and then a timer fires. */
static void settle_conn(fz_conn *c, int rounds, int timers)
{
    for (int i = 0; i < rounds && c->live; i++) {
        sn_pump(W->fab[c->fab].h, 256);
        for (int h = 0; h < 2; h++) {
            struct shift_wc wc[16];
            int r = shift_poll_cq(c->ep[h].h, 16, wc);
            FZ_CHECK(r >= -4095 && r <= 16, r, h); /* (-errno: an injected backend error) */
            if (r > 0)
                took(c->ep[h].owner, wc, r, c->ep[h].check_ids);
            r = shift_progress(c->ep[h].h);
            FZ_CHECK(r >= SHIFT_STEP_NONE && r <= SHIFT_STEP_RELEASE, r, h);
            if (timers)
                shift_sim_timeout(c->h, h, 1 + (i & 1));
        }
    }
}

static void op_settle(void)
{
    fz_conn *c = &W->conn[fz_pick(W->in, NCONN)];
    int rounds = 1 + (int)fz_pick(W->in, 12), timers = fz_u8(W->in) & 1;
    settle_conn(c, rounds, timers);
}

/* ------------------------------------------------------------- the rest ------- */

static void op_names(void)
{
    int v = fz_u8(W->in) < 200 ? (int)(fz_small(W->in, 25) - 1u) : (int)fz_u32(W->in);
    FZ_CHECK(shift_wc_status_str(v) != NULL, v, 0);
    FZ_CHECK((shift_wc_status_name(v) != NULL) == (v >= 0 && v <= SHIFT_WC_GENERAL_ERR), v, 0);
    FZ_CHECK((shift_qp_state_name(v) != NULL) == (v >= 0 && v <= SHIFT_QPS_ERR), v, 0);
    FZ_CHECK((shift_state_name(v) != NULL) == (v >= 0 && v <= SHIFT_STATE_ERROR), v, 0);
    FZ_CHECK((shift_design_name(v) != NULL) == (v >= 0 && v <= SHIFT_DESIGN_NO_FAILOVER), v, 0);
    FZ_CHECK(shift_backup_state_bytes(fz_small(W->in, 64), fz_small(W->in, 64)) > 0, 0, 0);
    int cyc;
    make_send_chain(OWNER_RAW, &cyc);
    int r = shift_send_wr_check(fz_u8(W->in) < 250 ? &swr[0] : NULL, fz_small(W->in, 80));
    FZ_CHECK(r == 0 || r == EINVAL, r, 0);
}

static void op_alloc_fail(void)
{
    /* the k-th next allocation fails (or none) */
    fz_alloc_countdown = fz_u8(W->in) < 200 ? (long)fz_small(W->in, 12) : -1;
}

typedef void (*op_fn)(void);
#define OP(f) {f, #f}

static const struct {
    op_fn fn;
    const char *name;
} ops[] = {
    OP(op_fabric_create),
    OP(op_fabric_destroy),
    OP(op_fabric_queries),
    OP(op_reg_mr),
    OP(op_mr_keys),
    OP(op_dereg_mr),
    OP(op_create_cq),
    OP(op_destroy_cq),
    OP(op_poll_raw_cq),
    OP(op_create_qp),
    OP(op_destroy_qp),
    OP(op_modify_qp),
    OP(op_query_qp),
    OP(op_connect_qps),
    OP(op_reconnect),
    OP(op_post_raw_send),
    OP(op_post_raw_recv),
    OP(op_ring),
    OP(op_ctl_send_raw),
    OP(op_set_handler),
    OP(op_failover_cycle),
    OP(op_wire),
    OP(op_wire),
    OP(op_fault),
    OP(op_sim_connect),
    OP(op_sim_close),
    OP(op_sim_misc),
    OP(op_sim_reg_mr),
    OP(op_ep_create),
    OP(op_ep_destroy),
    OP(op_ep_post_send),
    OP(op_ep_post_send),
    OP(op_ep_post_recv),
    OP(op_ep_post_recv),
    OP(op_ep_poll),
    OP(op_ep_poll),
    OP(op_ep_step),
    OP(op_ep_step),
    OP(op_ctl_input),
    OP(op_ep_keys),
    OP(op_ep_query),
    OP(op_names),
    OP(op_alloc_fail),
    OP(op_traffic),
    OP(op_traffic),
    OP(op_raw_traffic),
    OP(op_raw_traffic),
    OP(op_qp_walk),
    OP(op_settle),
    OP(op_settle),
    OP(op_settle),
    OP(op_fault),
};

int fz_trace; /* FZ_TRACE=1: print each step (for reading a crashing input) */

void run_op(void)
{
    unsigned k = fz_pick(W->in, sizeof ops / sizeof *ops);
    if (fz_trace)
        fprintf(stderr, "%*s%s\n", 2 * W->depth, "", ops[k].name);
    ops[k].fn();
}
