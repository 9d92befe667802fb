/*
 * ops_app.c - what an application does, as single steps so that few bytes reach
 * deep states: traffic, its event loop, raw RC traffic over a misbehaving wire, a QP
 * walked through its states, a whole failover and fail-back.
 */
#include "ops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------ an application's steps ----- */

/* Traffic as an application makes it (valid keys and buffers): receives on the
 * responder, a chain of sends on the requester. Reaches deep states in few bytes. */

void op_traffic(void)
{
    fz_conn *c = &W->conn[fz_pick(W->in, NCONN)];
    if (c->live)
        op_traffic_on(c);
}

void op_traffic_on(fz_conn *c)
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
void op_raw_traffic(void)
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

/* Path 1 of f goes down (up = 0) or comes back: its link, or host's NIC; the harness
 * records what the fabric says it did. */
static void set_path1(fz_fab *f, int link, int host, int up)
{
    int r = link ? (up ? sn_link_up(f->h, 1) : sn_link_down(f->h, 1))
                 : (up ? sn_nic_recover(f->h, host, 1) : sn_nic_fail(f->h, host, 1));
    fz_note("path 1 %s of host %d %s: %d", link ? "link" : "NIC", host, up ? "up" : "down", r);
    if (r == 1 && link)
        link_set(f, 1, up);
    else if (r == 1)
        nic_set(f, host, 1, up);
}

/* A whole failover and fail-back on a live connection, as a NIC or link dies and
 * comes back under traffic: the states between are what the other steps rarely meet. */
void op_failover_cycle(void)
{
    fz_conn *c = &W->conn[fz_pick(W->in, NCONN)];
    if (!c->live)
        return;
    fz_fab *f = &W->fab[c->fab];
    int host = (int)fz_pick(W->in, 2), link = fz_u8(W->in) & 1;
    op_traffic_on(c);
    set_path1(f, link, host, 0);
    settle_conn(c, 1 + (int)fz_pick(W->in, 12), 1);
    set_path1(f, link, host, 1);
    settle_conn(c, 1 + (int)fz_pick(W->in, 12), 0);
    op_traffic_on(c); /* the fence */
    settle_conn(c, 1 + (int)fz_pick(W->in, 12), 0);
}

/* A raw QP walked through the states as a verbs application connects one, with the
 * attribute mask of each step chosen by the input. */
void op_qp_walk(void)
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
        FZ_CHECK(r == 0 || r == EINVAL || (r == EBUSY && i == 0), r, i); /* (owed CQEs) */
    }
}

/* Let a connection run as an application's loop does: the wire moves, both sides
 * poll and make progress; now and then (timers) they read their NICs' events and a
 * timer fires. */
void settle_conn(fz_conn *c, int rounds, int timers)
{
    for (int i = 0; i < rounds && c->live; i++) {
        sn_pump(W->fab[c->fab].h, 256);
        for (int h = 0; h < 2; h++) {
            struct shift_wc wc[16];
            for (int p = 1; timers && p <= 2; p++)
                ep_async(c->ep[h].h, p); /* with the timers: the NICs' events */
            int r = shift_poll_cq(c->ep[h].h, 16, wc);
            FZ_CHECK(r >= -4095 && r <= 16, r, h); /* (-errno: an injected backend error) */
            if (r > 0)
                took(c->ep[h].owner, wc, r, c->ep[h].check_ids);
            r = shift_progress(c->ep[h].h);
            if (r != SHIFT_STEP_NONE)
                fz_note("host %d progress: step %d", h, r);
            FZ_CHECK(r >= SHIFT_STEP_NONE && r <= SHIFT_STEP_RELEASE, r, h);
            if (timers)
                shift_sim_timeout(c->h, h, 1 + (i & 1));
        }
    }
}

void op_settle(void)
{
    fz_conn *c = &W->conn[fz_pick(W->in, NCONN)];
    int rounds = 1 + (int)fz_pick(W->in, 12), timers = fz_u8(W->in) & 1;
    settle_conn(c, rounds, timers);
}
