/*
 * ud.c - UD queue pairs and datagrams: their life (RESET, INIT with a Q_Key, RTR, RTS),
 * a datagram on the wire at post time and its completions at both ends, what is
 * discarded (a bad Q_Key, no receive WR, an RC QP's number), lost (a dropped packet, a
 * dead link or NIC), FIFO order with RC's packets, datagrams between one-host fabrics as
 * bytes, the parser on malformed and random datagrams, and simnic's table of entry
 * points.
 */
#include "check.h"
#include "simnic.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum { GRH = 40, QKEY = 0x11111111 };

typedef struct {
    sn_fabric f;
    uint8_t *mem[2];
    sn_cq cq[2];
    sn_qp ud[2];       /* a UD QP per host, on NIC 1 */
    sn_mr mr[2];
    uint32_t lkey[2], qpn[2];
} ud_t;

static void ud_up(sn_qp qp, uint32_t qkey)
{
    struct sn_qp_attr a = {.qp_state = SHIFT_QPS_INIT, .qkey = qkey};
    CHECK(sn_modify_qp(qp, &a, SN_QP_STATE | SN_QP_QKEY) == 0);
    a = (struct sn_qp_attr){.qp_state = SHIFT_QPS_RTR};
    CHECK(sn_modify_qp(qp, &a, SN_QP_STATE) == 0);
    a = (struct sn_qp_attr){.qp_state = SHIFT_QPS_RTS, .sq_psn = 100};
    CHECK(sn_modify_qp(qp, &a, SN_QP_STATE | SN_QP_SQ_PSN) == 0);
}

enum { UD_MEM = 8192 + 2 * SHIFT_MAX_MSG };

static void ud_open(ud_t *u)
{
    memset(u, 0, sizeof *u);
    struct sn_fabric_attr fa;
    sn_fabric_attr_init(&fa); /* hardware's: device_fatal, ack_before_cqe */
    fa.mem_size = UD_MEM;     /* (room for a whole message and its GRH past 4 KiB) */
    CHECK(sn_fabric_create(&fa, &u->f) == 0);
    for (int h = 0; h < 2; h++) {
        size_t size;
        CHECK(sn_host_mem(u->f, h, &u->mem[h], &size) == 0 && size >= UD_MEM);
        CHECK(sn_create_cq(u->f, h, 64, &u->cq[h]) == 0);
        struct sn_qp_init_attr qa = {u->cq[h], u->cq[h], 8, 8, 64};
        CHECK(sn_create_ud_qp(u->f, h, 1, &qa, &u->ud[h]) == 0);
        CHECK(sn_reg_mr(u->f, h, 1, (uint64_t)(uintptr_t)u->mem[h], UD_MEM,
                        SHIFT_ACCESS_LOCAL_WRITE, &u->mr[h]) == 0);
        CHECK(sn_mr_keys(u->mr[h], &u->lkey[h], NULL) == 0);
        struct sn_qp_attr q;
        CHECK(sn_query_qp(u->ud[h], &q) == 0 && q.ud == 1 && q.qp_state == SHIFT_QPS_RESET);
        u->qpn[h] = q.qp_num;
        ud_up(u->ud[h], QKEY);
    }
}

static int recv_at(ud_t *u, int h, uint64_t id, uint32_t off, uint32_t len)
{
    struct shift_recv_wr r = {.wr_id = id, .num_sge = 1,
                              .sg = {(uint64_t)(uintptr_t)(u->mem[h] + off), len, u->lkey[h]}};
    return sn_post_recv(u->ud[h], &r, NULL);
}

static struct shift_send_wr dgram(ud_t *u, int h, uint64_t id, uint32_t off, uint32_t len)
{
    return (struct shift_send_wr){
        .wr_id = id, .opcode = SHIFT_WR_SEND, .send_flags = SHIFT_SEND_SIGNALED,
        .num_sge = len ? 1 : 0,
        .sg = {(uint64_t)(uintptr_t)(u->mem[h] + off), len, u->lkey[h]}};
}

static struct sn_counters counters(sn_fabric f)
{
    struct sn_counters c;
    CHECK(sn_counters_get(f, &c) == 0);
    return c;
}

/* the transitions verbs allows a UD QP, and nothing of RC's */
static void test_ud_life(void)
{
    ud_t u;
    ud_open(&u);
    struct sn_qp_init_attr qa = {u.cq[0], u.cq[0], 4, 4, 0};
    sn_qp qp, rc;
    CHECK(sn_create_ud_qp(u.f, SN_HOST_A, 2, &qa, &qp) == 0);
    CHECK(sn_create_qp(u.f, SN_HOST_A, 2, &qa, &rc) == 0);
    struct sn_qp_attr a = {.qp_state = SHIFT_QPS_INIT}, q;
    CHECK(sn_modify_qp(qp, &a, SN_QP_STATE) == EINVAL);           /* no Q_Key */
    a.qkey = 7;
    CHECK(sn_modify_qp(rc, &a, SN_QP_STATE | SN_QP_QKEY) == EINVAL); /* RC has none */
    CHECK(sn_modify_qp(qp, &a, SN_QP_STATE | SN_QP_QKEY) == 0);
    a = (struct sn_qp_attr){.qp_state = SHIFT_QPS_RTR, .dest_qp_num = u.qpn[1], .rq_psn = 1};
    CHECK(sn_modify_qp(qp, &a, SN_QP_STATE | SN_QP_DEST_QPN) == EINVAL); /* no destination */
    CHECK(sn_modify_qp(qp, &a, SN_QP_STATE | SN_QP_RQ_PSN) == EINVAL);
    CHECK(sn_modify_qp(qp, &a, SN_QP_STATE) == 0);
    struct shift_send_wr w = dgram(&u, 0, 1, 0, 4);
    CHECK(sn_post_send_ud(qp, &w, u.qpn[1], QKEY) == EINVAL);       /* RTR: no sends */
    a = (struct sn_qp_attr){.qp_state = SHIFT_QPS_RTS};
    CHECK(sn_modify_qp(qp, &a, SN_QP_STATE) == EINVAL);            /* RTS needs sq_psn */
    a.sq_psn = 5;
    CHECK(sn_modify_qp(qp, &a, SN_QP_STATE | SN_QP_SQ_PSN) == 0);
    CHECK(sn_query_qp(qp, &q) == 0 && q.qp_state == SHIFT_QPS_RTS && q.qkey == 7 &&
          q.sq_psn == 5 && q.ud == 1 && q.dest_qp_num == 0);
    /* QP numbers: one space for RC and UD QPs of both hosts */
    CHECK(sn_query_qp(rc, &q) == 0 && q.ud == 0);
    uint32_t nums[4] = {u.qpn[0], u.qpn[1], 0, q.qp_num};
    CHECK(sn_query_qp(qp, &q) == 0);
    nums[2] = q.qp_num;
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            CHECK(nums[i] != nums[j]);
    /* the verbs of one kind refuse the other */
    CHECK(sn_post_send(qp, &w, NULL) == EINVAL);
    CHECK(sn_post_send_ud(rc, &w, u.qpn[1], QKEY) == EINVAL);
    CHECK(sn_connect(qp, u.ud[1]) == EINVAL);
    CHECK(sn_reset_qp(qp, 1) == EINVAL && sn_reconnect(qp) == EINVAL);
    /* an RC QP cannot name a UD one as its destination */
    struct sn_qp_init_attr qb = {u.cq[1], u.cq[1], 4, 4, 0};
    sn_qp rcb;
    CHECK(sn_create_qp(u.f, SN_HOST_B, 2, &qb, &rcb) == 0);
    a = (struct sn_qp_attr){.qp_state = SHIFT_QPS_INIT};
    CHECK(sn_modify_qp(rcb, &a, SN_QP_STATE) == 0);
    a = (struct sn_qp_attr){.qp_state = SHIFT_QPS_RTR, .dest_qp_num = nums[2]};
    CHECK(sn_modify_qp(rcb, &a, SN_QP_STATE | SN_QP_DEST_QPN | SN_QP_RQ_PSN) == EINVAL);
    CHECK(sn_destroy_qp(rcb) == 0);
    CHECK(sn_post_send_ud(qp, NULL, u.qpn[1], QKEY) == EINVAL);
    CHECK(sn_post_send_ud(NULL, &w, u.qpn[1], QKEY) == EINVAL);
    CHECK(sn_post_send_ud(qp, &w, 1u << 24, QKEY) == EINVAL);
    w.opcode = SHIFT_WR_RDMA_WRITE;
    CHECK(sn_post_send_ud(qp, &w, u.qpn[1], QKEY) == EINVAL);
    w = dgram(&u, 0, 1, 0, SHIFT_MAX_MSG + 1);
    CHECK(sn_post_send_ud(qp, &w, u.qpn[1], QKEY) == EINVAL);
    CHECK(sn_wire_len(u.f, 2, SN_AtoB) == 0); /* none of them left */
    /* RESET empties it; ERR flushes a post */
    a = (struct sn_qp_attr){.qp_state = SHIFT_QPS_ERR};
    CHECK(sn_modify_qp(qp, &a, SN_QP_STATE) == 0);
    w = dgram(&u, 0, 9, 0, 4);
    CHECK(sn_post_send_ud(qp, &w, u.qpn[1], QKEY) == 0);
    struct shift_wc wc;
    CHECK(sn_poll_cq(u.cq[0], 1, &wc) == 1 && wc.wr_id == 9 &&
          wc.status == SHIFT_WC_WR_FLUSH_ERR);
    CHECK(sn_wire_len(u.f, 2, SN_AtoB) == 0);
    a.qp_state = SHIFT_QPS_RESET;
    CHECK(sn_modify_qp(qp, &a, SN_QP_STATE) == 0);
    CHECK(sn_query_qp(qp, &q) == 0 && q.qp_state == SHIFT_QPS_RESET);
    CHECK(sn_destroy_qp(qp) == 0 && sn_destroy_qp(rc) == 0);
    CHECK(sn_fabric_destroy(u.f) == 0);
}

/* a datagram: on the wire at post time, its send completion at once, its receive at
 * delivery with the source QP and the GRH's room */
static void test_ud_datagram(void)
{
    ud_t u;
    ud_open(&u);
    struct shift_wc wc;
    memset(u.mem[1] + 1000, 0xee, GRH);
    memcpy(u.mem[0], "datagram", 8);
    CHECK(recv_at(&u, 1, 71, 1000, GRH + 64) == 0);
    struct shift_send_wr w = dgram(&u, 0, 5, 0, 8);
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY) == 0);
    CHECK(sn_wire_len(u.f, 1, SN_AtoB) == 1 && sn_wire_head_kind(u.f, 1, SN_AtoB) == 4);
    CHECK(sn_poll_cq(u.cq[0], 1, &wc) == 1 && wc.wr_id == 5 &&
          wc.status == SHIFT_WC_SUCCESS && wc.opcode == SHIFT_WC_SEND && wc.byte_len == 8);
    CHECK(sn_transmit(u.f, SN_HOST_A, 1) == 0); /* nothing for Transmit: it is out */
    CHECK(sn_poll_cq(u.cq[1], 1, &wc) == 0);
    CHECK(sn_deliver(u.f, 1, SN_AtoB) == 1);
    CHECK(sn_poll_cq(u.cq[1], 1, &wc) == 1 && wc.wr_id == 71 &&
          wc.status == SHIFT_WC_SUCCESS && wc.opcode == SHIFT_WC_RECV &&
          wc.byte_len == GRH + 8 && wc.src_qp == u.qpn[0] && wc.qp_num == u.qpn[1] &&
          wc.wc_flags == 0);
    CHECK(memcmp(u.mem[1] + 1000 + GRH, "datagram", 8) == 0);
    CHECK(u.mem[1][1000] == 0xee && u.mem[1][1000 + GRH - 1] == 0xee); /* no GRH written */
    CHECK(sn_wire_len(u.f, 1, SN_BtoA) == 0); /* no ACK */
    /* with an immediate, unsignaled: no send completion */
    CHECK(recv_at(&u, 1, 72, 2000, GRH + 64) == 0);
    w = dgram(&u, 0, 6, 0, 0);
    w.opcode = SHIFT_WR_SEND_WITH_IMM;
    w.imm_data = 0xabcd;
    w.send_flags = 0;
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY) == 0);
    CHECK(sn_poll_cq(u.cq[0], 1, &wc) == 0);
    CHECK(sn_deliver(u.f, 1, SN_AtoB) == 1);
    CHECK(sn_poll_cq(u.cq[1], 1, &wc) == 1 && wc.wr_id == 72 && wc.byte_len == GRH &&
          wc.imm_data == 0xabcd && wc.wc_flags == SHIFT_WC_WITH_IMM);
    /* a whole message, B to A */
    memset(u.mem[1], 0x5a, SHIFT_MAX_MSG);
    CHECK(recv_at(&u, 0, 73, 4096, GRH + SHIFT_MAX_MSG) == 0);
    w = dgram(&u, 1, 7, 0, SHIFT_MAX_MSG);
    CHECK(sn_post_send_ud(u.ud[1], &w, u.qpn[0], QKEY) == 0);
    CHECK(sn_deliver(u.f, 1, SN_BtoA) == 1);
    CHECK(sn_poll_cq(u.cq[0], 1, &wc) == 1 && wc.wr_id == 73 && wc.status == SHIFT_WC_SUCCESS &&
          wc.byte_len == GRH + SHIFT_MAX_MSG && wc.src_qp == u.qpn[1]);
    CHECK(u.mem[0][4096 + GRH] == 0x5a && u.mem[0][4096 + GRH + SHIFT_MAX_MSG - 1] == 0x5a);
    CHECK(sn_poll_cq(u.cq[1], 1, &wc) == 1 && wc.wr_id == 7);
    CHECK(sn_fabric_destroy(u.f) == 0);
}

/* discarded at the receiver, counted, the receive WR kept for the next datagram */
static void test_ud_discarded(void)
{
    ud_t u;
    ud_open(&u);
    struct shift_wc wc;
    struct shift_send_wr w = dgram(&u, 0, 1, 0, 4);
    uint64_t before = counters(u.f).ud_discarded;
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY) == 0); /* no receive WR */
    CHECK(sn_deliver(u.f, 1, SN_AtoB) == 1);
    CHECK(counters(u.f).ud_discarded == before + 1);
    CHECK(recv_at(&u, 1, 50, 0, 128) == 0);
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY + 1) == 0); /* bad Q_Key */
    CHECK(sn_deliver(u.f, 1, SN_AtoB) == 1);
    CHECK(counters(u.f).ud_discarded == before + 2);
    struct sn_qp_init_attr qa = {u.cq[1], u.cq[1], 4, 4, 0};
    sn_qp rc;
    CHECK(sn_create_qp(u.f, SN_HOST_B, 1, &qa, &rc) == 0);
    struct sn_qp_attr q;
    CHECK(sn_query_qp(rc, &q) == 0);
    CHECK(sn_post_send_ud(u.ud[0], &w, q.qp_num, QKEY) == 0); /* an RC QP's number */
    CHECK(sn_deliver(u.f, 1, SN_AtoB) == 1);
    CHECK(sn_post_send_ud(u.ud[0], &w, 0xfffff0, QKEY) == 0); /* no QP at all */
    CHECK(sn_deliver(u.f, 1, SN_AtoB) == 1);
    CHECK(counters(u.f).ud_discarded == before + 4);
    CHECK(sn_poll_cq(u.cq[1], 1, &wc) == 0);
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY) == 0); /* the WR was kept */
    CHECK(sn_deliver(u.f, 1, SN_AtoB) == 1);
    CHECK(sn_poll_cq(u.cq[1], 1, &wc) == 1 && wc.wr_id == 50 && wc.status == SHIFT_WC_SUCCESS);
    /* a receive buffer without the GRH's room: a length error, the QP stays */
    CHECK(recv_at(&u, 1, 51, 0, GRH + 3) == 0);
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY) == 0);
    CHECK(sn_deliver(u.f, 1, SN_AtoB) == 1);
    CHECK(sn_poll_cq(u.cq[1], 1, &wc) == 1 && wc.wr_id == 51 &&
          wc.status == SHIFT_WC_LOC_LEN_ERR);
    CHECK(sn_query_qp(u.ud[1], &q) == 0 && q.qp_state == SHIFT_QPS_RTS);
    /* a payload the lkey does not cover: the send fails and its QP goes to ERR */
    w.sg.lkey ^= 0x100;
    CHECK(sn_poll_cq(u.cq[0], 8, (struct shift_wc[8]){0}) >= 1);
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY) == 0);
    CHECK(sn_poll_cq(u.cq[0], 1, &wc) == 1 && wc.status == SHIFT_WC_LOC_PROT_ERR);
    CHECK(sn_query_qp(u.ud[0], &q) == 0 && q.qp_state == SHIFT_QPS_ERR);
    CHECK(sn_wire_len(u.f, 1, SN_AtoB) == 0);
    CHECK(sn_fabric_destroy(u.f) == 0);
}

/* lost as any packet: dropped, on a dead link, at a dead NIC; in FIFO order with RC */
static void test_ud_lost_and_ordered(void)
{
    ud_t u;
    ud_open(&u);
    struct shift_wc wc[4];
    struct shift_send_wr w = dgram(&u, 0, 1, 0, 4);
    CHECK(recv_at(&u, 1, 60, 0, 128) == 0);
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY) == 0);
    struct sn_counters c0 = counters(u.f);
    CHECK(sn_drop(u.f, 1, SN_AtoB) == 1);
    CHECK(counters(u.f).dropped == c0.dropped + 1 && sn_poll_cq(u.cq[1], 4, wc) == 0);
    /* an RC request, then a datagram: delivered in that order */
    struct sn_qp_init_attr qa = {u.cq[0], u.cq[0], 4, 4, 0};
    sn_qp rc[2];
    CHECK(sn_create_qp(u.f, SN_HOST_A, 1, &qa, &rc[0]) == 0);
    qa.send_cq = qa.recv_cq = u.cq[1];
    CHECK(sn_create_qp(u.f, SN_HOST_B, 1, &qa, &rc[1]) == 0);
    CHECK(sn_connect(rc[0], rc[1]) == 0);
    sn_mr rmr;
    uint32_t rkey;
    CHECK(sn_reg_mr(u.f, SN_HOST_B, 1, (uint64_t)(uintptr_t)(u.mem[1] + 4096), 64,
                    SHIFT_ACCESS_LOCAL_WRITE | SHIFT_ACCESS_REMOTE_WRITE, &rmr) == 0);
    CHECK(sn_mr_keys(rmr, NULL, &rkey) == 0);
    struct shift_send_wr rw = dgram(&u, 0, 2, 0, 4);
    rw.opcode = SHIFT_WR_RDMA_WRITE;
    rw.remote_addr = (uint64_t)(uintptr_t)(u.mem[1] + 4096);
    rw.rkey = rkey;
    CHECK(sn_post_send(rc[0], &rw, NULL) == 0 && sn_transmit(u.f, SN_HOST_A, 1) == 1);
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY) == 0);
    CHECK(sn_wire_len(u.f, 1, SN_AtoB) == 2 && sn_wire_head_kind(u.f, 1, SN_AtoB) == 1);
    CHECK(sn_deliver(u.f, 1, SN_AtoB) == 1 && sn_wire_head_kind(u.f, 1, SN_AtoB) == 4);
    CHECK(sn_deliver(u.f, 1, SN_AtoB) == 1);
    CHECK(sn_poll_cq(u.cq[1], 4, wc) == 1 && wc[0].wr_id == 60 && wc[0].src_qp == u.qpn[0]);
    /* a dead link loses it on the way; a dead NIC at the end */
    CHECK(sn_link_down(u.f, 1) == 1);
    CHECK(recv_at(&u, 1, 61, 0, 128) == 0);
    c0 = counters(u.f);
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY) == 0);
    CHECK(sn_wire_len(u.f, 1, SN_AtoB) == 0 && counters(u.f).lost == c0.lost + 1);
    CHECK(sn_link_up(u.f, 1) == 1);
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY) == 0);
    CHECK(sn_nic_fail(u.f, SN_HOST_B, 1) == 1);
    CHECK(sn_wire_len(u.f, 1, SN_AtoB) == 0); /* (a dying NIC clears its path) */
    CHECK(sn_nic_recover(u.f, SN_HOST_B, 1) == 1);
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY) == 0);
    CHECK(sn_nic_fail(u.f, SN_HOST_A, 2) == 1); /* (another path: this one lives) */
    c0 = counters(u.f);
    CHECK(sn_deliver(u.f, 1, SN_AtoB) == 1); /* B's UD QP died with its NIC: in ERR */
    CHECK(counters(u.f).ud_discarded == c0.ud_discarded + 1);
    /* the sender's NIC dies: its UD QP completes nothing more (device_fatal) */
    CHECK(sn_nic_fail(u.f, SN_HOST_A, 1) == 1);
    while (sn_poll_cq(u.cq[0], 4, wc) > 0)
        ;
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY) == 0);
    CHECK(sn_poll_cq(u.cq[0], 4, wc) == 0 && sn_wire_len(u.f, 1, SN_AtoB) == 0);
    int ev;
    CHECK(sn_async_event(u.f, SN_HOST_A, 1, &ev) == 1 && ev == SN_ASYNC_DEVICE_FATAL);
    CHECK(sn_fabric_destroy(u.f) == 0);
}

/* two one-host fabrics joined by bytes: B's UD QP numbers lie above SN_QPN_HOST_B; an
 * RC request for a UD QP's number (a one-host fabric's RC QP may name any) is lost */
static void test_ud_split(void)
{
    sn_fabric f[2];
    uint8_t *mem[2];
    sn_cq cq[2];
    sn_qp qp[2];
    sn_mr mr[2];
    uint32_t lkey[2], qpn[2];
    for (int h = 0; h < 2; h++) {
        CHECK(sn_host_create(NULL, h, &f[h]) == 0);
        mem[h] = calloc(1, 4096);
        CHECK(sn_create_cq(f[h], h, 16, &cq[h]) == 0);
        struct sn_qp_init_attr qa = {cq[h], cq[h], 4, 4, 0};
        CHECK(sn_create_ud_qp(f[h], h, 2, &qa, &qp[h]) == 0);
        CHECK(sn_reg_mr(f[h], h, 2, (uint64_t)(uintptr_t)mem[h], 4096, 1, &mr[h]) == 0);
        CHECK(sn_mr_keys(mr[h], &lkey[h], NULL) == 0);
        struct sn_qp_attr q;
        CHECK(sn_query_qp(qp[h], &q) == 0);
        qpn[h] = q.qp_num;
        ud_up(qp[h], QKEY);
    }
    CHECK(qpn[0] < SN_QPN_HOST_B && qpn[1] >= SN_QPN_HOST_B);
    struct shift_recv_wr r = {.wr_id = 3, .num_sge = 1,
                              .sg = {(uint64_t)(uintptr_t)(mem[1] + 512), 256, lkey[1]}};
    CHECK(sn_post_recv(qp[1], &r, NULL) == 0);
    memcpy(mem[0], "bytes", 5);
    struct shift_send_wr w = {.wr_id = 1, .opcode = SHIFT_WR_SEND, .num_sge = 1,
                              .sg = {(uint64_t)(uintptr_t)mem[0], 5, lkey[0]}};
    CHECK(sn_post_send_ud(qp[0], &w, qpn[1], QKEY) == 0);
    uint8_t pkt[SN_WIRE_MAX];
    int n = sn_wire_take(f[0], 2, SN_AtoB, pkt, sizeof pkt);
    CHECK(n == SN_WIRE_HEADER + 5);
    CHECK(sn_wire_put(f[1], 2, SN_AtoB, pkt, (uint32_t)n) == 0);
    CHECK(sn_deliver(f[1], 2, SN_AtoB) == 1);
    struct shift_wc wc;
    CHECK(sn_poll_cq(cq[1], 1, &wc) == 1 && wc.wr_id == 3 && wc.src_qp == qpn[0] &&
          wc.byte_len == GRH + 5 && memcmp(mem[1] + 512 + GRH, "bytes", 5) == 0);
    CHECK(sn_poll_cq(cq[0], 1, &wc) == 0); /* unsignaled */
    struct sn_qp_init_attr qa = {cq[0], cq[0], 4, 4, 0};
    sn_qp rc;
    CHECK(sn_create_qp(f[0], SN_HOST_A, 2, &qa, &rc) == 0);
    struct sn_qp_attr a = {.qp_state = SHIFT_QPS_INIT};
    CHECK(sn_modify_qp(rc, &a, SN_QP_STATE) == 0);
    a = (struct sn_qp_attr){.qp_state = SHIFT_QPS_RTR, .dest_qp_num = qpn[1]};
    CHECK(sn_modify_qp(rc, &a, SN_QP_STATE | SN_QP_DEST_QPN | SN_QP_RQ_PSN) == 0);
    a = (struct sn_qp_attr){.qp_state = SHIFT_QPS_RTS};
    CHECK(sn_modify_qp(rc, &a, SN_QP_STATE | SN_QP_SQ_PSN) == 0);
    CHECK(sn_post_recv(qp[1], &r, NULL) == 0);
    w = (struct shift_send_wr){.wr_id = 2, .opcode = SHIFT_WR_SEND, .num_sge = 1,
                               .send_flags = SHIFT_SEND_SIGNALED,
                               .sg = {(uint64_t)(uintptr_t)mem[0], 5, lkey[0]}};
    CHECK(sn_post_send(rc, &w, NULL) == 0 && sn_transmit(f[0], SN_HOST_A, 2) == 1);
    n = sn_wire_take(f[0], 2, SN_AtoB, pkt, sizeof pkt);
    struct sn_counters c0, c1;
    CHECK(sn_counters_get(f[1], &c0) == 0);
    CHECK(n > 0 && sn_wire_put(f[1], 2, SN_AtoB, pkt, (uint32_t)n) == 0);
    CHECK(sn_deliver(f[1], 2, SN_AtoB) == 1);
    CHECK(sn_counters_get(f[1], &c1) == 0 && c1.lost == c0.lost + 1);
    CHECK(sn_poll_cq(cq[1], 1, &wc) == 0 && sn_wire_len(f[1], 2, SN_BtoA) == 0); /* no ACK */
    for (int h = 0; h < 2; h++) {
        CHECK(sn_fabric_destroy(f[h]) == 0);
        free(mem[h]);
    }
}

static void put32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

/* a datagram's header fields checked one by one; then random mutations of a good one */
static void test_ud_parser(void)
{
    ud_t u;
    ud_open(&u);
    uint8_t good[SN_WIRE_MAX], pkt[SN_WIRE_MAX];
    memcpy(u.mem[0], "twelve bytes", 12);
    struct shift_send_wr w = dgram(&u, 0, 1, 0, 12);
    w.opcode = SHIFT_WR_SEND_WITH_IMM;
    w.imm_data = 9;
    CHECK(sn_post_send_ud(u.ud[0], &w, u.qpn[1], QKEY) == 0);
    int glen = sn_wire_take(u.f, 1, SN_AtoB, good, sizeof good);
    CHECK(glen == SN_WIRE_HEADER + 12);
    CHECK(good[1] == 4 && good[2] == SHIFT_WR_SEND_WITH_IMM);
    CHECK(sn_wire_put(u.f, 1, SN_AtoB, good, (uint32_t)glen) == 0); /* as it was */
    CHECK(sn_drop(u.f, 1, SN_AtoB) == 1);
    struct { int at, width; uint32_t value; } bad[] = {
        {2, 1, SHIFT_WR_RDMA_WRITE},      /* not a SEND */
        {2, 1, SHIFT_WR_RDMA_READ},
        {4, 4, 1u << 24},                 /* destination QPN past 24 bits */
        {24, 4, 1u << 24},                /* source QPN past 24 bits */
        {28, 4, 1},                       /* (the source's high half) */
        {32, 4, 1},                       /* cmp */
        {40, 4, 1},                       /* swap */
        {48, 4, 1},                       /* val */
        {56, 4, 1},                       /* an incarnation: UD has none */
    };
    uint64_t before = counters(u.f).malformed;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memcpy(pkt, good, (size_t)glen);
        if (bad[i].width == 1)
            pkt[bad[i].at] = (uint8_t)bad[i].value;
        else
            put32(pkt + bad[i].at, bad[i].value);
        CHECK(sn_wire_put(u.f, 1, SN_AtoB, pkt, (uint32_t)glen) == EINVAL);
    }
    memcpy(pkt, good, (size_t)glen);
    pkt[2] = SHIFT_WR_SEND; /* a SEND with an immediate */
    CHECK(sn_wire_put(u.f, 1, SN_AtoB, pkt, (uint32_t)glen) == EINVAL);
    CHECK(counters(u.f).malformed == before + sizeof bad / sizeof bad[0] + 1);
    CHECK(sn_wire_len(u.f, 1, SN_AtoB) == 0);
    int taken = 0, refused = 0;
    parser_random(u.f, good, glen, 0x55d, &taken, &refused);
    CHECK(taken > 0 && refused > 0);
    CHECK(counters(u.f).malformed == before + sizeof bad / sizeof bad[0] + 1 + (uint64_t)refused);
    CHECK(sn_fabric_destroy(u.f) == 0);
}

/* the table holds this copy's functions, and a call through it acts as a direct one */
static void test_ops(void)
{
    struct sn_ops ops;
    memset(&ops, 0, sizeof ops);
    sn_get_ops(NULL);
    sn_get_ops(&ops);
    CHECK(ops.size == sizeof ops);
    CHECK(ops.fabric_create == sn_fabric_create && ops.post_send_ud == sn_post_send_ud &&
          ops.create_ud_qp == sn_create_ud_qp && ops.link_is_up == sn_link_is_up &&
          ops.async_event == sn_async_event && ops.poll_cq == sn_poll_cq);
    static const unsigned char zero[sizeof(void (*)(void))];
    const unsigned char *bytes = (const unsigned char *)&ops;
    for (size_t at = offsetof(struct sn_ops, fabric_create); at < sizeof ops;
         at += sizeof zero) /* no entry forgotten (each a function pointer, none NULL) */
        CHECK(memcmp(bytes + at, zero, sizeof zero) != 0);
    sn_fabric f;
    CHECK(ops.fabric_create(NULL, &f) == 0);
    CHECK(ops.nic_alive(f, SN_HOST_B, 2) == 1 && ops.nic_fail(f, SN_HOST_B, 2) == 1);
    CHECK(sn_nic_alive(f, SN_HOST_B, 2) == 0);
    CHECK(ops.fabric_destroy(f) == 0);
}

void test_ud(void)
{
    test_ud_life();
    test_ud_datagram();
    test_ud_discarded();
    test_ud_lost_and_ordered();
    test_ud_split();
    test_ud_parser();
    test_ops();
}
