/*
 * wire.c - two one-host fabrics (sn_host_create), each holding one host, joined only by
 * the wire as bytes (sn_wire_take on one, sn_wire_put on the other): RC traffic in both
 * directions over process memory, the guards of a one-host fabric, and the packet parser
 * fed malformed and random bytes.
 */
#include "check.h"
#include "simnic.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { BUF = 4096 };

typedef struct {
    sn_fabric f[2];        /* f[h] holds host h only */
    uint8_t *mem[2];       /* plain process memory */
    sn_cq cq[2];
    sn_qp qp[2];
    sn_mr mr[2];
    uint32_t lkey[2], rkey[2];
} split_t;

static int other(int h) { return 1 - h; }

/* bring up host h's end toward the peer's QP number, as a verbs program does */
static void bring_up(split_t *s, int h, uint32_t peer_qpn)
{
    struct sn_qp_attr a = {.qp_state = SHIFT_QPS_INIT};
    CHECK(sn_modify_qp(s->qp[h], &a, SN_QP_STATE) == 0);
    a = (struct sn_qp_attr){.qp_state = SHIFT_QPS_RTR, .dest_qp_num = peer_qpn, .rq_psn = 7};
    CHECK(sn_modify_qp(s->qp[h], &a, SN_QP_STATE | SN_QP_DEST_QPN | SN_QP_RQ_PSN) == 0);
    a = (struct sn_qp_attr){.qp_state = SHIFT_QPS_RTS, .sq_psn = 7};
    CHECK(sn_modify_qp(s->qp[h], &a, SN_QP_STATE | SN_QP_SQ_PSN) == 0);
}

static void split_open(split_t *s)
{
    memset(s, 0, sizeof *s);
    struct sn_fabric_attr fa = {.retry_cnt = 2, .rnr_retry = 7};
    for (int h = 0; h < 2; h++) {
        CHECK(sn_host_create(&fa, h, &s->f[h]) == 0);
        s->mem[h] = calloc(1, BUF);
        CHECK(sn_create_cq(s->f[h], h, 64, &s->cq[h]) == 0);
        struct sn_qp_init_attr qa = {s->cq[h], s->cq[h], 16, 16, 64};
        CHECK(sn_create_qp(s->f[h], h, 1, &qa, &s->qp[h]) == 0);
        CHECK(sn_reg_mr(s->f[h], h, 1, (uint64_t)(uintptr_t)s->mem[h], BUF, 15, &s->mr[h]) == 0);
        CHECK(sn_mr_keys(s->mr[h], &s->lkey[h], &s->rkey[h]) == 0);
    }
    struct sn_qp_attr q[2];
    for (int h = 0; h < 2; h++)
        CHECK(sn_query_qp(s->qp[h], &q[h]) == 0);
    CHECK(q[0].qp_num < SN_QPN_HOST_B && q[1].qp_num >= SN_QPN_HOST_B); /* QPNs name hosts */
    for (int h = 0; h < 2; h++)
        bring_up(s, h, q[other(h)].qp_num);
}

static void split_close(split_t *s)
{
    for (int h = 0; h < 2; h++) {
        CHECK(sn_fabric_destroy(s->f[h]) == 0);
        free(s->mem[h]);
    }
}

/* every packet host h sent on path 1 crosses to the peer and is delivered there */
static int carry(split_t *s, int h)
{
    uint8_t pkt[SN_WIRE_MAX];
    int dir = h == SN_HOST_A ? SN_AtoB : SN_BtoA, moved = 0, n;
    while (sn_transmit(s->f[h], h, 1) > 0)
        moved++;
    while ((n = sn_wire_take(s->f[h], 1, dir, pkt, sizeof pkt)) > 0) {
        CHECK(sn_wire_put(s->f[other(h)], 1, dir, pkt, (uint32_t)n) == 0);
        CHECK(sn_deliver(s->f[other(h)], 1, dir) == 1);
        moved++;
    }
    CHECK(n == 0);
    return moved;
}

static void settle(split_t *s)
{
    while (carry(s, 0) + carry(s, 1) > 0)
        ;
}

static struct shift_send_wr wr_to(split_t *s, int h, uint64_t id, int op, uint32_t off,
                                  uint32_t len, uint32_t roff)
{
    return (struct shift_send_wr){
        .wr_id = id, .opcode = op, .send_flags = SHIFT_SEND_SIGNALED, .num_sge = 1,
        .sg = {(uint64_t)(uintptr_t)(s->mem[h] + off), len, s->lkey[h]},
        .remote_addr = (uint64_t)(uintptr_t)(s->mem[other(h)] + roff),
        .rkey = s->rkey[other(h)], .compare_add = 5};
}

static int poll_one(sn_cq cq, struct shift_wc *wc)
{
    return sn_poll_cq(cq, 1, wc);
}

static void test_split_traffic(void)
{
    split_t s;
    split_open(&s);
    struct shift_wc wc;
    /* A WRITEs into B's memory */
    memcpy(s.mem[0], "over the wire", 13);
    struct shift_send_wr w = wr_to(&s, 0, 1, SHIFT_WR_RDMA_WRITE, 0, 13, 100);
    CHECK(sn_post_send(s.qp[0], &w, NULL) == 0);
    settle(&s);
    CHECK(memcmp(s.mem[1] + 100, "over the wire", 13) == 0);
    CHECK(poll_one(s.cq[0], &wc) == 1 && wc.wr_id == 1 && wc.status == SHIFT_WC_SUCCESS);
    /* B SENDs into a receive A posted: the other direction */
    struct shift_recv_wr r = {.wr_id = 9, .num_sge = 1,
                              .sg = {(uint64_t)(uintptr_t)(s.mem[0] + 200), 64, s.lkey[0]}};
    CHECK(sn_post_recv(s.qp[0], &r, NULL) == 0);
    memcpy(s.mem[1] + 300, "pong", 4);
    w = wr_to(&s, 1, 2, SHIFT_WR_SEND, 300, 4, 0);
    CHECK(sn_post_send(s.qp[1], &w, NULL) == 0);
    settle(&s);
    CHECK(poll_one(s.cq[0], &wc) == 1 && wc.wr_id == 9 && wc.byte_len == 4);
    CHECK(memcmp(s.mem[0] + 200, "pong", 4) == 0);
    CHECK(poll_one(s.cq[1], &wc) == 1 && wc.wr_id == 2 && wc.status == SHIFT_WC_SUCCESS);
    /* A READs B's memory back; then a FETCH_AND_ADD returns the old value */
    w = wr_to(&s, 0, 3, SHIFT_WR_RDMA_READ, 500, 13, 100);
    CHECK(sn_post_send(s.qp[0], &w, NULL) == 0);
    settle(&s);
    CHECK(poll_one(s.cq[0], &wc) == 1 && wc.wr_id == 3 && wc.status == SHIFT_WC_SUCCESS);
    CHECK(memcmp(s.mem[0] + 500, "over the wire", 13) == 0);
    uint64_t before = 40;
    memcpy(s.mem[1] + 1024, &before, 8);
    w = wr_to(&s, 0, 4, SHIFT_WR_ATOMIC_FETCH_AND_ADD, 1024, 8, 1024);
    CHECK(sn_post_send(s.qp[0], &w, NULL) == 0);
    settle(&s);
    uint64_t old = 0, now = 0;
    memcpy(&old, s.mem[0] + 1024, 8);
    memcpy(&now, s.mem[1] + 1024, 8);
    CHECK(poll_one(s.cq[0], &wc) == 1 && wc.wr_id == 4 && old == 40 && now == 45);
    /* a request lost on the wire: A's timer goes back and the retransmission executes */
    w = wr_to(&s, 0, 5, SHIFT_WR_RDMA_WRITE, 0, 4, 2000);
    CHECK(sn_post_send(s.qp[0], &w, NULL) == 0);
    CHECK(sn_transmit(s.f[0], 0, 1) == 1 && sn_drop(s.f[0], 1, SN_AtoB) == 1);
    CHECK(sn_timeout(s.f[0], 0, 1) == 1);
    settle(&s);
    CHECK(poll_one(s.cq[0], &wc) == 1 && wc.wr_id == 5 && wc.status == SHIFT_WC_SUCCESS);
    CHECK(memcmp(s.mem[1] + 2000, "over", 4) == 0);
    split_close(&s);
}

/* A responder QP's access flags gate remote operations: an atomic to a QP that allows
 * only WRITEs is NAKed as an invalid request, and both QPs go to ERR */
static void test_qp_access(void)
{
    split_t s;
    split_open(&s);
    struct shift_wc wc;
    struct sn_qp_attr a = {.access = SHIFT_ACCESS_REMOTE_WRITE}, q;
    CHECK(sn_modify_qp(s.qp[1], &a, SN_QP_ACCESS) == 0); /* RTS to RTS, the flags */
    CHECK(sn_query_qp(s.qp[1], &q) == 0 && q.access == SHIFT_ACCESS_REMOTE_WRITE);
    a.access = 0x10;
    CHECK(sn_modify_qp(s.qp[1], &a, SN_QP_ACCESS) == EINVAL);
    struct shift_send_wr w = wr_to(&s, 0, 1, SHIFT_WR_RDMA_WRITE, 0, 8, 0);
    CHECK(sn_post_send(s.qp[0], &w, NULL) == 0);
    settle(&s);
    CHECK(poll_one(s.cq[0], &wc) == 1 && wc.status == SHIFT_WC_SUCCESS); /* allowed */
    w = wr_to(&s, 0, 2, SHIFT_WR_ATOMIC_FETCH_AND_ADD, 64, 8, 64);
    CHECK(sn_post_send(s.qp[0], &w, NULL) == 0);
    settle(&s);
    CHECK(poll_one(s.cq[0], &wc) == 1 && wc.wr_id == 2 && wc.status == SHIFT_WC_REM_INV_REQ_ERR);
    CHECK(sn_query_qp(s.qp[1], &q) == 0 && q.qp_state == SHIFT_QPS_ERR);
    split_close(&s);
}

static void test_one_host_guards(void)
{
    split_t s;
    split_open(&s);
    sn_cq cq;
    sn_qp qp;
    sn_mr mr;
    uint8_t *base;
    size_t size;
    struct sn_qp_init_attr qa = {s.cq[0], s.cq[0], 4, 4, 0};
    /* nothing of the other host exists here */
    CHECK(sn_create_cq(s.f[0], SN_HOST_B, 4, &cq) == EINVAL);
    CHECK(sn_create_qp(s.f[0], SN_HOST_B, 1, &qa, &qp) == EINVAL);
    CHECK(sn_reg_mr(s.f[0], SN_HOST_B, 1, 4096, 64, 1, &mr) == EINVAL);
    CHECK(sn_transmit(s.f[0], SN_HOST_B, 1) == -EINVAL);
    CHECK(sn_timeout(s.f[0], SN_HOST_B, 1) == -EINVAL);
    CHECK(sn_nic_fail(s.f[0], SN_HOST_B, 1) == -EINVAL);
    sn_fabric none = s.f[0];
    CHECK(sn_host_create(NULL, 2, &none) == EINVAL && none == NULL);
    /* the host's memory is the process's; its packets leave only by the wire */
    CHECK(sn_host_mem(s.f[0], SN_HOST_A, &base, &size) == ENOTSUP);
    CHECK(sn_reg_mr(s.f[0], SN_HOST_A, 1, UINT64_MAX - 8, 64, 1, &mr) == EFAULT);
    CHECK(sn_deliver(s.f[0], 1, SN_AtoB) == -EINVAL);
    CHECK(sn_reconnect(s.qp[0]) == ENOTSUP);
    CHECK(sn_connect(s.qp[0], s.qp[0]) == EINVAL);
    struct sn_qp_attr a = {.qp_state = SHIFT_QPS_RESET};
    CHECK(sn_modify_qp(s.qp[0], &a, SN_QP_STATE) == 0);
    a.qp_state = SHIFT_QPS_INIT;
    CHECK(sn_modify_qp(s.qp[0], &a, SN_QP_STATE) == 0);
    a = (struct sn_qp_attr){.qp_state = SHIFT_QPS_RTR, .dest_qp_num = 1u << 24};
    CHECK(sn_modify_qp(s.qp[0], &a, SN_QP_STATE | SN_QP_DEST_QPN | SN_QP_RQ_PSN) == EINVAL);
    split_close(&s);
}

/* a well-formed header for a packet of kind, op and payload length */
static void header(uint8_t *b, int kind, int op, uint32_t len, uint64_t val)
{
    memset(b, 0, SN_WIRE_HEADER);
    b[0] = 2; /* the encoding's version */
    b[1] = (uint8_t)kind;
    b[2] = (uint8_t)op;
    for (int i = 0; i < 4; i++)
        b[12 + i] = (uint8_t)(len >> (8 * i));
    for (int i = 0; i < 8; i++)
        b[48 + i] = (uint8_t)(val >> (8 * i));
}

static uint64_t malformed(sn_fabric f)
{
    struct sn_counters c;
    CHECK(sn_counters_get(f, &c) == 0);
    return c.malformed;
}

static void test_parser_rejects(void)
{
    split_t s;
    split_open(&s);
    sn_fabric b = s.f[1];
    uint8_t pkt[SN_WIRE_MAX + 8];
    struct { int kind, op; uint32_t len; uint64_t val; } bad[] = {
        {0, 0, 0, 0},                                 /* no such kind */
        {5, 0, 0, 0},
        {4, 0, 0, 0},                                 /* a datagram that is no SEND */
        {1, 7, 0, 0},                                 /* no such opcode */
        {1, SHIFT_WR_RDMA_READ, 0, SHIFT_MAX_MSG + 1}, /* a READ of more than a message */
        {1, SHIFT_WR_RDMA_READ, 8, 8},                /* a READ request with a payload */
        {1, SHIFT_WR_ATOMIC_CMP_AND_SWP, 8, 0},       /* an atomic with a payload */
        {2, 5, 0, 0},                                 /* no such syndrome */
        {3, 0, 0, 0},                                 /* an empty control message */
        {3, 0, 257, 0},                               /* a control message too long */
    };
    uint64_t before = malformed(b);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        header(pkt, bad[i].kind, bad[i].op, bad[i].len, bad[i].val);
        CHECK(sn_wire_put(b, 1, SN_AtoB, pkt, SN_WIRE_HEADER + bad[i].len) == EINVAL);
    }
    header(pkt, 1, SHIFT_WR_RDMA_WRITE, 16, 0);
    CHECK(sn_wire_put(b, 1, SN_AtoB, pkt, SN_WIRE_HEADER - 1) == EINVAL);  /* truncated */
    CHECK(sn_wire_put(b, 1, SN_AtoB, pkt, SN_WIRE_HEADER + 15) == EINVAL); /* len disagrees */
    CHECK(sn_wire_put(b, 1, SN_AtoB, pkt, SN_WIRE_MAX + 8) == EINVAL);     /* too long */
    pkt[0] = 1;
    CHECK(sn_wire_put(b, 1, SN_AtoB, pkt, SN_WIRE_HEADER + 16) == EINVAL); /* version */
    pkt[0] = 2;
    pkt[3] = 1;
    CHECK(sn_wire_put(b, 1, SN_AtoB, pkt, SN_WIRE_HEADER + 16) == EINVAL); /* reserved */
    CHECK(malformed(b) == before + sizeof bad / sizeof bad[0] + 5);
    CHECK(sn_wire_len(b, 1, SN_AtoB) == 0); /* none reached the wire */
    CHECK(sn_wire_put(b, 3, SN_AtoB, pkt, 0) == EINVAL && sn_wire_put(b, 1, 2, pkt, 0) == EINVAL);
    CHECK(sn_wire_put(NULL, 1, SN_AtoB, pkt, 0) == EBADF);
    CHECK(sn_wire_take(NULL, 1, SN_AtoB, pkt, 0) == -EBADF);
    CHECK(sn_wire_take(b, 1, SN_AtoB, NULL, 0) == -EINVAL);
    /* a buffer too small leaves the packet where it is */
    struct shift_send_wr w = wr_to(&s, 0, 1, SHIFT_WR_RDMA_WRITE, 0, 32, 0);
    CHECK(sn_post_send(s.qp[0], &w, NULL) == 0 && sn_transmit(s.f[0], 0, 1) == 1);
    CHECK(sn_wire_take(s.f[0], 1, SN_AtoB, pkt, SN_WIRE_HEADER + 31) == -ENOSPC);
    CHECK(sn_wire_len(s.f[0], 1, SN_AtoB) == 1);
    CHECK(sn_wire_take(s.f[0], 1, SN_AtoB, pkt, sizeof pkt) == SN_WIRE_HEADER + 32);
    split_close(&s);
}

/* 20,000 random and mutated copies of a good packet (glen bytes) put on path 1 towards
 * host B of f and delivered: whatever parses is acted on as a packet (a bad rkey is
 * NAKed, a stray PSN discarded, a datagram discarded or received), the rest is refused;
 * nothing else happens. What B answers is taken off the wire. */
void parser_random(sn_fabric f, const uint8_t *good, int glen, uint64_t seed, int *taken,
                   int *refused)
{
    uint8_t pkt[SN_WIRE_MAX];
    for (int i = 0; i < 20000; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        uint32_t len = (uint32_t)(seed >> 33) % (SN_WIRE_HEADER + 64);
        memcpy(pkt, good, (size_t)glen);
        for (int k = 0; k < 1 + (int)(seed >> 60); k++) { /* mutate a few bytes */
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            pkt[(seed >> 40) % (uint32_t)glen] = (uint8_t)(seed >> 24);
        }
        if (i % 2 || len > (uint32_t)glen)
            len = (uint32_t)glen;
        int r = sn_wire_put(f, 1, SN_AtoB, pkt, len);
        CHECK(r == 0 || r == EINVAL);
        if (r == 0) {
            ++*taken;
            CHECK(sn_deliver(f, 1, SN_AtoB) == 1);
        } else {
            ++*refused;
        }
        uint8_t out[SN_WIRE_MAX];
        while (sn_wire_take(f, 1, SN_BtoA, out, sizeof out) > 0)
            ;
    }
}

/* the random test from an RC WRITE (datagrams: ud.c's parser test) */
static void test_parser_random(void)
{
    split_t s;
    split_open(&s);
    uint8_t good[SN_WIRE_MAX];
    struct shift_send_wr w = wr_to(&s, 0, 1, SHIFT_WR_RDMA_WRITE, 0, 24, 0);
    CHECK(sn_post_send(s.qp[0], &w, NULL) == 0 && sn_transmit(s.f[0], 0, 1) == 1);
    int glen = sn_wire_take(s.f[0], 1, SN_AtoB, good, sizeof good);
    CHECK(glen == SN_WIRE_HEADER + 24);
    int taken = 0, refused = 0;
    parser_random(s.f[1], good, glen, 0x5348494654ULL, &taken, &refused);
    CHECK(taken > 0 && refused > 0);
    CHECK(malformed(s.f[1]) == (uint64_t)refused);
    split_close(&s);
}

void test_wire(void)
{
    test_split_traffic();
    test_qp_access();
    test_one_host_guards();
    test_parser_rejects();
    test_parser_random();
}
