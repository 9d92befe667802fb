/*
 * ops_simnic.c - steps on simnic: fabrics, raw CQs, QPs and MRs (with what their
 * answers must be), control messages and handlers that re-enter the API, the wire, faults.
 */
#include "ops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------- fabrics -------- */

void op_fabric_create(void)
{
    fz_fab *f = &W->fab[fz_pick(W->in, NFAB)];
    struct sn_fabric_attr a = {fz_u8(W->in) < 200 ? 4096u << fz_pick(W->in, 5) : fz_u64(W->in),
                               fz_small(W->in, 8), fz_small(W->in, 8), (int)fz_small(W->in, 2),
                               (int)fz_small(W->in, 2), 0};
    uint8_t b = fz_u8(W->in);
    int use_attr = b & 1;
    /* device_fatal 1, or 2 (EINVAL), from the byte's top 8 values: the corpus was built
     * before it, and its inputs (but 3% of fabrics made with attributes) decode as then */
    a.device_fatal = b < 248 ? 0 : 1 + ((b >> 2) & 1);
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
    FZ_CHECK(!use_attr || a.device_fatal < 2, r, a.device_fatal);
    memset(f, 0, sizeof *f);
    f->h = h;
    f->live = 1;
    f->fatal = use_attr && a.device_fatal;
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

void op_fabric_destroy(void)
{
    sn_fabric h = pick(T_FAB);
    fz_fab *f = fab_of(h);
    int users = 0, on_cq = 0;
    for (int i = 0; i < NCONN; i++) {
        users += W->conn[i].live && f && &W->fab[W->conn[i].fab] == f;
        on_cq += W->conn[i].live && f && &W->fab[W->conn[i].fab] == f && W->conn[i].on_cq;
    }
    if (f) /* (reads no input: the corpus's meaning stays) */
        drop_shared_cqs(f, on_cq > 0);
    users += f && (f->cq[0] || f->cq[1]);
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

void op_fabric_queries(void)
{
    sn_fabric h = pick(T_FAB);
    int host = pick_host(), path = pick_path(), dir = (int)fz_small(W->in, 2);
    uint8_t *base;
    size_t size;
    struct sn_counters c;
    int live = fab_of(h) != NULL;
    int r = sn_host_mem(h, host, fz_u8(W->in) & 1 ? &base : NULL, &size);
    FZ_CHECK(live ? (r == 0 || r == EINVAL) : r == EBADF, r, live);
    uint8_t b = fz_u8(W->in);
    r = sn_counters_get(h, b & 1 ? &c : NULL);
    FZ_CHECK(live ? (r == 0 || r == EINVAL) : r == EBADF, r, live);
    FZ_CHECK(sn_wire_len(h, path, dir) >= 0, path, dir);
    FZ_CHECK(sn_wire_head_kind(h, path, dir) >= 0, path, dir);
    FZ_CHECK(live || sn_path_healthy(h, path) == 0, path, 0);
    FZ_CHECK(live || sn_nic_alive(h, host, path) == 0, host, path);
    int ev = 0; /* NULL for one in 8 of the counters' byte (no more input read) */
    r = sn_async_event(h, host, path, (b & 14) == 14 ? NULL : &ev);
    if (!live)
        FZ_CHECK(r == -EBADF, r, 0);
    else if (host < 0 || host > 1 || path < 1 || path > 2 || (b & 14) == 14)
        FZ_CHECK(r == -EINVAL, r, host);
    else
        read_events(fab_of(h), host, path, r, ev);
}

/* --------------------------------------------------------- raw CQ, QP, MR ----- */

void op_reg_mr(void)
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

void op_mr_keys(void)
{
    uint32_t l, k;
    int r = sn_mr_keys(pick(T_MR), fz_u8(W->in) & 1 ? &l : NULL, fz_u8(W->in) & 1 ? &k : NULL);
    FZ_CHECK(r == 0 || r == EINVAL, r, 0);
}

void op_dereg_mr(void)
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

void op_create_cq(void)
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

void op_destroy_cq(void)
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
    FZ_CHECK(r == EINVAL || r == EBUSY, r, 0); /* (a guessed handle: a connection's CQ) */
}

void op_poll_raw_cq(void)
{
    struct shift_wc wc[16]; /* room for n (at most 15) */
    int n = fz_u8(W->in) < 240 ? (int)(fz_small(W->in, 9) % 16) : -(int)fz_u8(W->in);
    int r = sn_poll_cq(pick(T_CQ), n, fz_u8(W->in) < 250 ? wc : NULL);
    FZ_CHECK(r <= (n > 0 ? n : 0), r, n);
    if (r > 0)
        took(OWNER_RAW, wc, r, 2);
}

void op_create_qp(void)
{
    fz_raw *s = &W->raw[fz_pick(W->in, NRAW)];
    unsigned fi = fz_pick(W->in, NFAB);
    sn_fabric h = fz_u8(W->in) < 240 ? W->fab[fi].h : pick(T_FAB);
    int host = pick_host(), nic = pick_path();
    struct sn_qp_init_attr a = {pick(T_CQ), pick(T_CQ), fz_small(W->in, 9), fz_small(W->in, 9),
                                fz_small(W->in, 80)};
    sn_qp qp;
    uint8_t b = fz_u8(W->in);
    if (b >= 250 && b < 253) { /* (values that meant a NULL attr: UD traffic now) */
        ud_traffic(h);
        return;
    }
    int r = sn_create_qp(h, host, nic, b < 250 ? &a : NULL, s->qp_live ? NULL : &qp);
    if (r || s->qp_live)
        return;
    FZ_CHECK(fab_of(h) != NULL, r, 0);
    s->qp = qp;
    s->qp_live = 1;
    s->qp_fab = (int)(fab_of(h) - W->fab);
}

/* the QP is one a connection owns (handed out by shift_sim_qp, connection live) */
int owned_qp(sn_qp q)
{
    for (int i = 0; i < NCONN; i++)
        for (int h = 0; h < 2; h++)
            for (int p = 1; p <= 2; p++)
                if (W->conn[i].live && q && W->conn[i].qp[h][p] == q)
                    return 1;
    return 0;
}

void op_destroy_qp(void)
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

uint32_t pick_qpn(void)
{
    sn_qp q = pick(T_QP);
    struct sn_qp_attr a;
    if (fz_u8(W->in) < 220 && sn_query_qp(q, &a) == 0)
        return a.qp_num;
    return fz_u32(W->in);
}

void op_modify_qp(void)
{
    sn_qp q = pick(T_QP);
    struct sn_qp_attr a = {(int)fz_small(W->in, 7), pick_qpn(), fz_small(W->in, 4),
                           fz_small(W->in, 4), 0, 0, 0, (int)fz_small(W->in, 16), 0, 0};
    int mask = (int)fz_small(W->in, 32);
    int given = fz_u8(W->in) < 250;
    int r = sn_modify_qp(q, given ? &a : NULL, mask);
    /* (a reset waits while the NIC owes the QP's completions to host memory: EBUSY) */
    int reset = given && (mask & SN_QP_STATE) && a.qp_state == SHIFT_QPS_RESET;
    FZ_CHECK(r == 0 || r == EINVAL || (r == EBUSY && reset), r, 0);
}

void op_query_qp(void)
{
    struct sn_qp_attr a;
    sn_qp q = pick(T_QP);
    int r = sn_query_qp(q, fz_u8(W->in) < 250 ? &a : NULL);
    FZ_CHECK(r == 0 || r == EINVAL, r, 0);
    FZ_CHECK(raw_qp_of(q) < 0 || r == 0 || r == EINVAL, r, 0);
}

void op_connect_qps(void)
{
    int r = sn_connect(pick(T_QP), pick(T_QP));
    FZ_CHECK(r == 0 || r == EINVAL, r, 0);
}

void op_reconnect(void)
{
    int r = sn_reconnect(pick(T_QP));
    FZ_CHECK(r == 0 || r == EINVAL || r == ENOTCONN || r == ENETUNREACH, r, 0);
}

void op_post_raw_send(void)
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

void op_post_raw_recv(void)
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

void op_ring(void)
{
    sn_qp q = pick(T_QP);
    int r = sn_ring(q);
    FZ_CHECK(raw_qp_of(q) < 0 || r == 0, r, 0);
}

/* a control message: well-formed with hostile fields, or any bytes */
uint32_t make_ctl(uint8_t *msg)
{
    uint8_t b = fz_u8(W->in);
    if (b < 160) {
        const uint32_t magic = 0x53484654u, seq = fz_small(W->in, 4), pad = 0;
        const uint8_t kind = (uint8_t)fz_small(W->in, 3), reply = fz_u8(W->in) & 1;
        const uint16_t pad16 = 0;
        const int64_t count = fz_u8(W->in) < 200 ? (int64_t)fz_small(W->in, 8) - 1
                                                 : (int64_t)fz_u64(W->in);
        memcpy(msg, &magic, 4);
        msg[4] = kind;
        msg[5] = reply;
        memcpy(msg + 6, &pad16, 2);
        memcpy(msg + 8, &seq, 4);
        memcpy(msg + 12, &pad, 4);
        memcpy(msg + 16, &count, 8);
        return b < 150 ? 24 : fz_small(W->in, 300);
    }
    uint32_t len = fz_small(W->in, 300);
    fz_bytes(W->in, msg, len < 300 ? len : 300);
    return len;
}

void op_ctl_send_raw(void)
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

void op_set_handler(void)
{
    sn_qp q = pick(T_QP);
    int r = sn_set_ctl_handler(q, fz_u8(W->in) & 1 ? on_ctl : NULL, NULL);
    if (owned_qp(q))
        FZ_CHECK(r == EBUSY, r, 0);
    else if (raw_qp_of(q) >= 0)
        FZ_CHECK(r == 0, r, 0);
}

/* ----------------------------------------------------------- wire, faults ----- */

/* the wire as bytes: the head packet taken off (into a buffer that may be too small),
 * then perhaps a byte of it changed and put back: a parser's input */
static void wire_take_put(sn_fabric h, int path, int dir)
{
    uint8_t buf[SN_WIRE_MAX];
    uint32_t cap = fz_u8(W->in) < 200 ? (uint32_t)sizeof buf : fz_small(W->in, SN_WIRE_MAX);
    if (cap > sizeof buf)
        cap = (uint32_t)sizeof buf; /* (cap is the buffer's size: the caller's promise) */
    int n = sn_wire_take(h, path, dir, buf, cap);
    FZ_CHECK(n >= 0 || n == -ENOSPC || n == -EINVAL || (n == -EBADF && !fab_of(h)), n, (int)cap);
    if (n <= 0 || !(fz_u8(W->in) & 1))
        return;
    buf[fz_small(W->in, (uint32_t)n) % (uint32_t)n] ^= fz_u8(W->in); /* fz_small may pass n */
    int r = sn_wire_put(h, path, dir, buf, (uint32_t)n);
    FZ_CHECK(r == 0 || r == EINVAL || r == ENOMEM, r, n);
}

/* bytes from the input put on the wire, with a version byte and length that may agree */
static void wire_put_bytes(sn_fabric h, int path, int dir)
{
    uint8_t buf[SN_WIRE_HEADER + 64];
    uint32_t len = fz_small(W->in, (uint32_t)sizeof buf + 1);
    if (len > sizeof buf)
        len = (uint32_t)sizeof buf;
    for (uint32_t i = 0; i < len; i++)
        buf[i] = fz_u8(W->in);
    if (len >= SN_WIRE_HEADER && fz_u8(W->in) < 200) {
        buf[0] = 1;
        buf[3] = 0;
        memset(buf + 12, 0, 4);
        buf[12] = (uint8_t)(len - SN_WIRE_HEADER);
    }
    int r = sn_wire_put(h, path, dir, len ? buf : NULL, len);
    FZ_CHECK(r == 0 || r == EINVAL || r == ENOMEM || (r == EBADF && !fab_of(h)), r, (int)len);
}

void op_wire(void)
{
    sn_fabric h = pick(T_FAB);
    int host = pick_host(), path = pick_path(), dir = (int)fz_small(W->in, 2);
    int r;
    switch (fz_pick(W->in, 8)) {
    case 7:
        r = sn_write_cqe(h, host, path);
        break;
    case 5:
        wire_take_put(h, path, dir);
        return;
    case 6:
        wire_put_bytes(h, path, dir);
        return;
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
    default: /* (a budget past 2^16 is cut: RNR NAKs retried for ever keep the wire
              * moving, so a budget of 2^32 steps is a hang of the harness's making) */
        r = (int)sn_pump(h, (long)(fz_small(W->in, 64) & 0xffff));
        FZ_CHECK(r >= 0 || (r == -EBADF && !fab_of(h)), r, 0);
        return;
    }
    FZ_CHECK(r == 0 || r == 1 || r == -EINVAL || r == -ENOMEM || (r == -EBADF && !fab_of(h)),
             r, 0); /* (ENOMEM: an allocation the input failed) */
}

void op_fault(void)
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
            link_set(f, path, kind == 1);
        else
            nic_set(f, host, path, kind == 3);
    }
}

/* The link of path went down or came up, as the fabric said: up, each end's port is
 * ACTIVE again (an event) */
void link_set(fz_fab *f, int path, int up)
{
    f->link[path] = up;
    for (int h = 0; h < 2; h++)
        f->actives[h][path] += (uint32_t)up;
}

/* NIC nic of host died (up = 0) or came back, as the fabric said it did: a death on a
 * device_fatal fabric raises an event, a return its port's ACTIVE */
void nic_set(fz_fab *f, int host, int nic, int up)
{
    uint32_t death = (uint32_t)(!up && f->fatal);
    f->alive[host][nic] = up;
    f->events[host][nic] += death;
    f->actives[host][nic] += (uint32_t)up;
    for (int c = 0; c < NCONN; c++) /* each connection's endpoint on it reads it too */
        if (W->conn[c].live && &W->fab[W->conn[c].fab] == f)
            W->conn[c].ep[host].events[nic] += death;
}

/* sn_async_event answered r (*event ev) for a live fabric's NIC: 1 only for an event
 * not yet read, deaths first, 0 once none waits */
void read_events(fz_fab *f, int host, int nic, int r, int ev)
{
    uint32_t *deaths = &f->events[host][nic], *actives = &f->actives[host][nic];
    FZ_CHECK(r == 0 || r == 1, r, nic);
    FZ_CHECK(r == 1 || (*deaths == 0 && *actives == 0), *deaths, *actives);
    FZ_CHECK(r == 0 || ev == (*deaths ? SN_ASYNC_DEVICE_FATAL : SN_ASYNC_PORT_ACTIVE), ev,
             *deaths);
    if (r && *deaths)
        --*deaths;
    else if (r)
        --*actives;
}
