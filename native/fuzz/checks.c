/*
 * checks.c - what a user relies on, checked after every call: queries answer,
 * counters never go back, no phantom or duplicate completion, completed never
 * exceeds posted, held <= outstanding <= capacity, a path reports healthy exactly
 * when its link and both NICs are up.
 */
#include "world.h"

#include <stdio.h>
#include <stdlib.h>

void fz_fail(const char *what, long a, long b)
{
    fprintf(stderr, "fuzz check failed: %s (%ld, %ld)\n", what, a, b);
    abort();
}

/* a completion the application took from owner's endpoint or CQ; check_ids: 0 none
 * (forged by a backend in direct mode), 1 ids, 2 ids and their kind */
void check_completion(int owner, const struct shift_wc *wc, int check_ids)
{
    if (!check_ids)
        return;
    uint64_t id = wc->wr_id;
    FZ_CHECK(id > 0 && id < W->nid, id, owner); /* phantom: never posted */
    fz_id *r = &W->id[id];
    FZ_CHECK(r->owner == owner, r->owner, owner);
    int recv = (wc->opcode & SHIFT_WC_RECV) != 0;
    if (check_ids >= 2) /* 1: the opcode is a hostile backend's, passed through */
        FZ_CHECK(r->kind == (recv ? KIND_RECV : KIND_SEND), r->kind, wc->opcode);
    FZ_CHECK(r->state != ID_REJECTED, id, wc->status); /* phantom: its post failed */
    FZ_CHECK(r->state != ID_DONE, id, wc->status);     /* duplicate */
    FZ_CHECK(r->state == ID_POSTED, id, r->state);
    if (!r->wild)
        r->state = ID_DONE;
}

static void check_monotone(const struct shift_ep_info *a, const struct shift_ep_info *b)
{
#define GROWS(f) FZ_CHECK(b->f >= a->f, a->f, b->f)
    GROWS(epoch);
    GROWS(sends_posted);
    GROWS(sends_completed);
    GROWS(recvs_posted);
    GROWS(recvs_completed);
    GROWS(failovers);
    GROWS(replayed_wrs);
    GROWS(skipped_wrs);
    GROWS(refused_wrs);
    GROWS(failbacks);
    GROWS(ctl_sent);
    GROWS(ctl_received);
    GROWS(ctl_rejected);
    GROWS(backend_errors);
    GROWS(events_dropped);
#undef GROWS
    FZ_CHECK(b->qp_num == a->qp_num, a->qp_num, b->qp_num); /* the application's QP */
}

void check_ep(fz_ep *e)
{
    struct shift_ep_info info;
    int r = shift_ep_query(e->h, &info);
    /* a backend that cannot read its send queue back (direct mode) fails the query
     * with its errno (native/README: every backend result is checked) */
    FZ_CHECK(r >= 0 && r < 4096, r, 0);
    if (r)
        return;
    FZ_CHECK(info.state >= SHIFT_STATE_DEFAULT && info.state <= SHIFT_STATE_ERROR, info.state, 0);
    FZ_CHECK(shift_state_name(info.state) != NULL, info.state, 0);
    FZ_CHECK(shift_state_name(info.send_state) != NULL, info.send_state, 0);
    FZ_CHECK(shift_recv_state_name(info.recv_state) != NULL, info.recv_state, 0);
    /* the role's side: a requester's send side, a responder's receive side (or Error) */
    FZ_CHECK(info.role != SHIFT_ROLE_REQUESTER || info.state == info.send_state, info.state,
             info.send_state);
    FZ_CHECK((info.fresh | info.asked | info.sent_ctr | info.replayed) <= 1, info.fresh,
             info.asked);
    FZ_CHECK(info.held <= info.outstanding, info.held, info.outstanding);
    FZ_CHECK(info.outstanding <= e->cap, info.outstanding, e->cap);
    FZ_CHECK(info.sends_completed <= info.sends_posted, info.sends_completed, info.sends_posted);
    FZ_CHECK(info.recvs_completed <= info.recvs_posted, info.recvs_completed, info.recvs_posted);
    FZ_CHECK(info.peer_ctr >= -1 || !e->check_ids, info.peer_ctr, 0);
    if (e->have_last)
        check_monotone(&e->last, &info);
    e->last = info;
    e->have_last = 1;
}

static void check_fabric(fz_fab *f)
{
    for (int p = 1; p <= 2; p++) {
        FZ_CHECK(sn_link_is_up(f->h, p) == f->link[p], p, f->link[p]);
        for (int h = 0; h < 2; h++)
            FZ_CHECK(sn_nic_alive(f->h, h, p) == f->alive[h][p], h, p);
        int healthy = f->link[p] && f->alive[0][p] && f->alive[1][p];
        FZ_CHECK(sn_path_healthy(f->h, p) == healthy, p, healthy);
        for (int d = 0; d < 2; d++) {
            int k = sn_wire_head_kind(f->h, p, d), n = sn_wire_len(f->h, p, d);
            FZ_CHECK(k >= 0 && k <= 4 && (k == 0) == (n == 0), k, n); /* kind 4: a datagram */
            FZ_CHECK(f->link[p] || n == 0, p, n); /* a dead link carries nothing */
        }
    }
    struct sn_counters c;
    FZ_CHECK(sn_counters_get(f->h, &c) == 0, 0, 0);
#define GROWS(x) FZ_CHECK(c.x >= f->last.x, f->last.x, c.x)
    GROWS(transmitted);
    GROWS(delivered);
    GROWS(dropped);
    GROWS(lost);
    GROWS(executed);
    GROWS(duplicates);
    GROWS(timeouts);
#undef GROWS
    FZ_CHECK(c.executed + c.duplicates <= c.delivered, c.executed, c.delivered);
    f->last = c;
}

void check_world(void)
{
    for (int i = 0; i < NFAB; i++)
        if (W->fab[i].live)
            check_fabric(&W->fab[i]);
    for (int i = 0; i < NCONN; i++)
        if (W->conn[i].live)
            for (int h = 0; h < 2; h++)
                check_ep(&W->conn[i].ep[h]);
    for (int i = 0; i < NLONE; i++)
        if (W->lone[i].ep.live)
            check_ep(&W->lone[i].ep);
    for (int i = 0; i < NRAW; i++)
        if (W->raw[i].qp_live) {
            struct sn_qp_attr a;
            FZ_CHECK(sn_query_qp(W->raw[i].qp, &a) == 0, i, 0);
            FZ_CHECK(shift_qp_state_name(a.qp_state) != NULL, a.qp_state, 0);
            FZ_CHECK(a.qp_state != SHIFT_QPS_SQD && a.qp_state != SHIFT_QPS_SQE, a.qp_state, 0);
        }
}
