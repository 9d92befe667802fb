/*
 * shared_cq.c - several endpoints on one CQ pair (shift_cq): two connections on one
 * fabric whose endpoints share a CQ per host and path, two-way traffic on both, a failure
 * of one connection's default QP while the other goes on, then a NIC failure under both.
 * The same events run with CQs of each endpoint's own; each endpoint's completions (and
 * the memory at each notification) must be the same sequence in both runs. Then the
 * calls' bad inputs, and a full inbox (a fake backend) reported, not lost.
 */
#include "shift_sim.h"
#include "check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { CONNS = 2, MAXWC = 256, REGION = 4096 };

/* what one endpoint's application saw: its completions, and for each receive completion
 * the 8 bytes its notification's WRITE put in memory */
typedef struct {
    struct shift_wc wc[MAXWC];
    uint64_t mem[MAXWC];
    int n;
} seen_t;

typedef struct {
    sn_fabric f;
    shift_cq cq[2];
    shift_conn c[CONNS];
    shift_ep ep[CONNS][2];
    uint8_t *mem[2];
    struct shift_mr_keys k[CONNS][2];
    seen_t seen[CONNS][2];
    uint64_t kept_max;     /* the most completions an endpoint had kept for it by others */
    int hw;                /* hardware's RC: receive completions written, NIC events read */
    int design;
} two_t;

static uint8_t *region(two_t *T, int c, int h) { return T->mem[h] + (size_t)c * 2 * REGION; }

static void two_open(two_t *T, int shared, int hw, int design, unsigned flags)
{
    memset(T, 0, sizeof *T);
    struct sn_fabric_attr a = {.retry_cnt = 1, .rnr_retry = SN_RNR_FOREVER};
    if (hw) {
        sn_fabric_attr_init(&a);
        a.retry_cnt = 1;
    }
    T->hw = hw;
    T->design = design;
    CHECK(sn_fabric_create(&a, &T->f) == 0);
    for (int h = 0; h < 2; h++) {
        size_t size;
        CHECK(sn_host_mem(T->f, h, &T->mem[h], &size) == 0);
        if (shared)
            CHECK(shift_sim_cq_create(T->f, h, 256, &T->cq[h]) == 0);
    }
    struct shift_conn_attr ca = {design, 16, 16, 2, flags};
    for (int c = 0; c < CONNS; c++) {
        CHECK(shift_sim_connect_on_cq(T->f, &ca, T->cq[0], T->cq[1], &T->c[c]) == 0);
        for (int h = 0; h < 2; h++) {
            CHECK(shift_sim_ep(T->c[c], h, &T->ep[c][h]) == 0);
            uint64_t base = (uint64_t)(uintptr_t)region(T, c, h);
            CHECK(shift_sim_reg_mr(T->c[c], h, base, REGION, 15, &T->k[c][h]) == 0);
        }
    }
}

static void two_close(two_t *T)
{
    for (int h = 0; h < 2; h++)
        if (T->cq[h]) {
            CHECK(shift_sim_cq_destroy(T->cq[h]) == EBUSY); /* the connections are on it */
            CHECK(shift_cq_destroy(T->cq[h]) == EBUSY);     /* the binding's */
        }
    for (int c = 0; c < CONNS; c++)
        CHECK(shift_sim_close(T->c[c]) == 0);
    CHECK(sn_fabric_destroy(T->f) == (T->cq[0] ? EBUSY : 0));
    for (int h = 0; h < 2; h++)
        if (T->cq[h]) {
            CHECK(shift_sim_cq_destroy(T->cq[h]) == 0);
            CHECK(shift_sim_cq_destroy(T->cq[h]) == EINVAL);
        }
    if (T->cq[0])
        CHECK(sn_fabric_destroy(T->f) == 0);
}

/* NCCL Simple round k of connection c from host `from`: the peer posts a receive, the
 * sender WRITEs a value into the peer's slot k, then WRITE_WITH_IMM k */
static void round_(two_t *T, int c, int from, uint64_t k)
{
    int to = 1 - from;
    struct shift_recv_wr r = {k, NULL, {0, 0, 0}, 0};
    CHECK(shift_post_recv(T->ep[c][to], &r, NULL) == 0);
    uint64_t v = 100000 * (uint64_t)(c + 1) + 1000 * (uint64_t)(from + 1) + k;
    struct shift_send_wr w[2];
    memset(w, 0, sizeof w);
    w[0] = (struct shift_send_wr){
        .wr_id = 2 * k - 1, .next = &w[1], .num_sge = 1, .opcode = SHIFT_WR_RDMA_WRITE,
        .send_flags = SHIFT_SEND_INLINE,
        .sg = {.addr = (uint64_t)(uintptr_t)&v, .length = 8, .lkey = T->k[c][from].lkey},
        .remote_addr = (uint64_t)(uintptr_t)(region(T, c, to) + 8 * (k % 32)),
        .rkey = T->k[c][to].rkey};
    w[1] = (struct shift_send_wr){.wr_id = 2 * k, .opcode = SHIFT_WR_RDMA_WRITE_WITH_IMM,
                                  .send_flags = SHIFT_SEND_SIGNALED, .imm_data = (uint32_t)k};
    CHECK(shift_post_send(T->ep[c][from], w, NULL) == 0);
}

static void rounds(two_t *T, uint64_t k0, uint64_t k1)
{
    for (uint64_t k = k0; k <= k1; k++) {
        round_(T, 0, 0, k);
        round_(T, 1, 0, k);
        round_(T, 1, 1, k); /* connection 1 two-way */
    }
}

/* the application of connection c, host h, polls: a batch of two, or everything */
static int poll_some(two_t *T, int c, int h, int all)
{
    int moved = 0, r;
    struct shift_wc wc[2];
    seen_t *s = &T->seen[c][h];
    while ((r = shift_poll_cq(T->ep[c][h], 2, wc)) > 0) {
        moved = 1;
        for (int i = 0; i < r && s->n < MAXWC; i++) {
            s->wc[s->n] = wc[i];
            s->mem[s->n] = 0;
            if (wc[i].opcode & SHIFT_WC_RECV)
                memcpy(&s->mem[s->n], region(T, c, h) + 8 * (wc[i].imm_data % 32), 8);
            s->n++;
        }
        if (!all)
            break;
    }
    CHECK(r >= 0);
    for (int d = 0; d < CONNS; d++) {
        struct shift_ep_info info; /* (direct mode's query fails on a send queue in ERR
                                    * past its slots: NoFailover's own-CQ run) */
        if (shift_ep_query(T->ep[d][h], &info) == 0 && info.cq_kept > T->kept_max)
            T->kept_max = info.cq_kept;
    }
    return moved;
}

/* wire, NICs, layers and applications until quiet; `order` flips which connection's
 * application polls first (the first reads the other's completions off a shared CQ) */
static void settle(two_t *T, int order, int timeouts)
{
    for (int round = 0; round < 400; round++) {
        int moved = sn_pump(T->f, 100000) > 0;
        for (int h = 0; h < 2 && T->hw; h++)
            for (int nic = 1; nic <= 2; nic++)
                while (sn_write_cqe(T->f, h, nic) > 0)
                    moved = 1;
        for (int i = 0; i < CONNS; i++) {
            int c = order ? CONNS - 1 - i : i;
            for (int h = 0; h < 2; h++) {
                for (int p = 1; p <= 2 && T->hw; p++)
                    moved |= shift_async_event(T->ep[c][h], p) > 0;
                while (shift_progress(T->ep[c][h]) > 0)
                    moved = 1;
            }
        }
        /* a batch each, the wire moving between them: what one endpoint's poll kept
         * for another and what reaches the CQ after it meet in the other's next poll */
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < CONNS; i++) {
                moved |= poll_some(T, order ? CONNS - 1 - i : i, h, 0);
                moved |= sn_pump(T->f, 3) > 0;
            }
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < CONNS; i++)
                moved |= poll_some(T, order ? CONNS - 1 - i : i, h, 1);
        for (int c = 0; c < CONNS && !moved && timeouts; c++)
            for (int h = 0; h < 2; h++)
                for (int p = 1; p <= 2; p++)
                    moved |= shift_sim_timeout(T->c[c], h, p) > 0;
        if (!moved)
            return;
    }
    CHECK(!"settle: still moving after 400 rounds");
}

static uint64_t failovers(two_t *T, int c, int h)
{
    struct shift_ep_info info;
    CHECK(shift_ep_query(T->ep[c][h], &info) == 0);
    return info.failovers;
}

/* The script both runs play: traffic; connection 0's default QP of A fails alone
 * (connection 1 keeps the default path); traffic; A's NIC 1 dies under both; it recovers;
 * traffic. */
static void script(two_t *T, int nic_fault)
{
    rounds(T, 1, 4);
    settle(T, 0, 0);
    rounds(T, 5, 6);
    sn_qp qp;
    CHECK(shift_sim_qp(T->c[0], 0, 1, &qp) == 0);
    struct sn_qp_attr qa = {.qp_state = SHIFT_QPS_ERR};
    CHECK(sn_modify_qp(qp, &qa, SN_QP_STATE) == 0);
    settle(T, 1, 1);
    uint64_t one = T->design != SHIFT_DESIGN_NO_FAILOVER;
    CHECK(failovers(T, 0, 0) == one && failovers(T, 1, 0) == 0 && failovers(T, 1, 1) == 0);
    rounds(T, 7, 9);
    settle(T, 0, 1);
    if (!nic_fault)
        return;
    rounds(T, 10, 11);
    CHECK(sn_nic_fail(T->f, 0, 1) == 1);
    settle(T, 1, 1);
    CHECK(failovers(T, 1, 0) == one);
    CHECK(sn_nic_recover(T->f, 0, 1) == 1);
    settle(T, 0, 1);
    rounds(T, 12, 13);
    settle(T, 1, 1);
}

static int wc_same(const struct shift_wc *a, const struct shift_wc *b)
{
    return a->wr_id == b->wr_id && a->status == b->status && a->opcode == b->opcode &&
           a->byte_len == b->byte_len && a->imm_data == b->imm_data &&
           a->qp_num == b->qp_num && a->wc_flags == b->wc_flags;
}

/* Each endpoint's view with a shared CQ is its view alone: the same completions in the
 * same order, the same memory at each notification; and every notification arrived. */
static void test_shared_equals_own(int hw, int design, unsigned flags, int nic_fault)
{
    static two_t own, shared;
    two_open(&own, 0, hw, design, flags);
    script(&own, nic_fault);
    two_open(&shared, 1, hw, design, flags);
    script(&shared, nic_fault);
    CHECK(own.kept_max == 0 && shared.kept_max > 0); /* the demultiplexing did happen */
    uint64_t last = nic_fault ? 13 : 9;
    for (int c = 0; c < CONNS; c++)
        for (int h = 0; h < 2; h++) {
            seen_t *o = &own.seen[c][h], *s = &shared.seen[c][h];
            CHECK(o->n == s->n);
            int same = o->n == s->n;
            for (int i = 0; i < o->n && same; i++)
                same = wc_same(&o->wc[i], &s->wc[i]) && o->mem[i] == s->mem[i];
            CHECK(same);
            if (design == SHIFT_DESIGN_NO_FAILOVER)
                continue; /* (plain RC: what the failed QP held came back flushed) */
            /* the receives every round posted all completed, in order, each with its
             * value in memory */
            uint64_t want = c == 1 || h == 1 ? last : 0, got = 0;
            for (int i = 0; i < s->n; i++) {
                if (!(s->wc[i].opcode & SHIFT_WC_RECV))
                    continue;
                got++;
                CHECK(s->wc[i].status == SHIFT_WC_SUCCESS && s->wc[i].wr_id == got &&
                      s->mem[i] == 100000 * (uint64_t)(c + 1) + 1000 * (uint64_t)(2 - h) + got);
            }
            CHECK(got == want);
        }
    two_close(&own);
    two_close(&shared);
}

/* ------------------------------------------------- bad inputs, ownership -------- */

static void test_shared_cq_bad_inputs(void)
{
    sn_fabric f, g;
    shift_cq cq, cqb, cqg;
    shift_conn c;
    struct shift_conn_attr ca = {SHIFT_DESIGN_SHIFT, 8, 8, 2, 0};
    struct shift_cq_attr qa = {.cqe = 68};
    CHECK(sn_fabric_create(NULL, &f) == 0 && sn_fabric_create(NULL, &g) == 0);
    CHECK(shift_cq_create(NULL, NULL, &qa, &cq) == EINVAL && cq == NULL);
    CHECK(shift_cq_create(NULL, NULL, &qa, NULL) == EINVAL);
    CHECK(shift_cq_destroy(NULL) == EINVAL);
    CHECK(shift_sim_cq_create(NULL, 0, 64, &cq) == EBADF);
    CHECK(shift_sim_cq_create(f, 2, 64, &cq) == EINVAL);
    CHECK(shift_sim_cq_create(f, 0, 64, NULL) == EINVAL);
    CHECK(shift_sim_cq_create(f, 0, 0, &cq) == EINVAL && cq == NULL);
    CHECK(shift_sim_cq_create(f, 0, (1u << 20) + 1, &cq) == EINVAL);
    CHECK(shift_sim_cq_destroy(NULL) == EINVAL);
    CHECK(shift_sim_cq_create(f, 0, 68, &cq) == 0);
    CHECK(shift_sim_cq_create(f, 1, 68, &cqb) == 0);
    CHECK(shift_sim_cq_create(g, 0, 64, &cqg) == 0);
    /* a pair of the other host, of another fabric, or not a pair at all */
    CHECK(shift_sim_connect_on_cq(f, &ca, cqb, NULL, &c) == EINVAL && c == NULL);
    CHECK(shift_sim_connect_on_cq(f, &ca, NULL, cq, &c) == EINVAL);
    CHECK(shift_sim_connect_on_cq(f, &ca, cqg, NULL, &c) == EINVAL);
    CHECK(shift_sim_connect_on_cq(f, &ca, (shift_cq)(uintptr_t)0xffff00000001ULL, NULL, &c) ==
          EINVAL);
    CHECK(shift_ep_create_on_cq(NULL, NULL, NULL, cq, NULL) == EINVAL);
    /* a QP's share: max_send_wr + max_recv_wr, 8 + 8 (the backup QP's 9 + 8); four
     * connections' QPs fill 68 entries, a fifth does not fit */
    shift_conn cs[4];
    for (int i = 0; i < 4; i++)
        CHECK(shift_sim_connect_on_cq(f, &ca, cq, cqb, &cs[i]) == 0);
    CHECK(shift_sim_connect_on_cq(f, &ca, cq, NULL, &c) == ENOMEM && c == NULL);
    CHECK(shift_sim_close(cs[1]) == 0);
    CHECK(shift_sim_connect_on_cq(f, &ca, cq, NULL, &cs[1]) == 0); /* its share came back */
    CHECK(shift_sim_cq_destroy(cq) == EBUSY && shift_sim_cq_destroy(cqb) == EBUSY);
    for (int i = 0; i < 4; i++)
        CHECK(shift_sim_close(cs[i]) == 0);
    CHECK(sn_fabric_destroy(f) == EBUSY); /* the pairs hold it */
    CHECK(shift_sim_cq_destroy(cq) == 0 && shift_sim_cq_destroy(cqb) == 0);
    CHECK(shift_sim_cq_destroy(cqg) == 0);
    CHECK(sn_fabric_destroy(f) == 0 && sn_fabric_destroy(g) == 0);
}

/* ------------------------------------------------- a full inbox ----------------- */

/* A fake backend whose path-1 CQ is a script of completions: the first QP it makes on a
 * path is number 1, the second 2. */
typedef struct {
    struct shift_wc cq[64];
    int head, tail;
    int nqp[3];
    int cqs;
} fcq_t;

static int fq_create_qp(void *c, int path, const struct shift_backend_qp_cap *cap, void **qp)
{
    (void)c, (void)path, (void)cap, (void)qp;
    return EIO; /* (every QP of this test is on the pair) */
}
static int fq_create_qp_cq(void *c, int path, const struct shift_backend_qp_cap *cap, void *cq,
                           void **qp)
{
    fcq_t *x = c;
    (void)cap, (void)cq;
    *qp = (void *)(uintptr_t)(16 * path + ++x->nqp[path]);
    return 0;
}
static int fq_qp_num(void *c, void *qp, uint32_t *qpn)
{
    (void)c;
    *qpn = (uint32_t)((uintptr_t)qp % 16);
    return 0;
}
static int fq_create_cq(void *c, int path, uint32_t cqe, void **cq)
{
    (void)cqe;
    ((fcq_t *)c)->cqs++;
    *cq = (void *)(uintptr_t)path;
    return 0;
}
static int fq_destroy_cq(void *c, void *cq)
{
    (void)cq;
    ((fcq_t *)c)->cqs--;
    return 0;
}
static int fq_poll(void *c, void *qp, int n, struct shift_wc *wc)
{
    fcq_t *x = c;
    int k = 0;
    if ((uintptr_t)qp / 16 != 1)
        return 0;
    while (k < n && x->head < x->tail)
        wc[k++] = x->cq[x->head++];
    return k;
}
static int fq_ok(void *c, void *qp) { (void)c, (void)qp; return 0; }
static int fq_modify(void *c, void *qp, int s, uint32_t a, uint32_t b)
{
    (void)c, (void)qp, (void)s, (void)a, (void)b;
    return 0;
}
static int fq_reset(void *c, void *qp, uint32_t inc)
{
    (void)inc;
    return fq_ok(c, qp);
}
static int fq_query(void *c, void *qp, int *s, uint32_t *a, uint32_t *b)
{
    (void)c, (void)qp;
    *s = SHIFT_QPS_RTS, *a = 0, *b = 0;
    return 0;
}
static int fq_post_send(void *c, void *qp, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    (void)c, (void)qp, (void)wr;
    if (bad)
        *bad = NULL;
    return 0;
}
static int fq_post_recv(void *c, void *qp, struct shift_recv_wr *wr)
{
    (void)c, (void)qp, (void)wr;
    return 0;
}
static int fq_reg(void *c, int path, uint64_t addr, size_t len, int access, uint32_t *lkey,
                  uint32_t *rkey, void **mr)
{
    (void)c, (void)addr, (void)len, (void)access;
    *lkey = *rkey = (uint32_t)path;
    *mr = NULL;
    return 0;
}
static int fq_dereg(void *c, void *mr) { (void)c, (void)mr; return 0; }
static int fq_ctl(void *c, void *qp, const void *m, uint32_t len)
{
    (void)c, (void)qp, (void)m, (void)len;
    return 0;
}

static void fq_push(fcq_t *x, uint32_t qpn, uint64_t wr_id)
{
    x->cq[x->tail++] = (struct shift_wc){.wr_id = wr_id, .opcode = SHIFT_WC_RDMA_WRITE,
                                         .qp_num = qpn};
}

/* E and F share the pair; F's application does not poll while 20 completions of its QP
 * arrive, its inbox holds 8 (max_send_wr = max_recv_wr = 1: 2 * 2 + 2, rounded up): E
 * goes on, F gets the 8 it kept (its one WR's completion among them, the others stale
 * to it) and then -EOVERFLOW, for good. */
static void test_shared_cq_inbox_full(void)
{
    static const struct shift_backend_ops ops = {
        .create_qp = fq_create_qp, .destroy_qp = fq_ok, .modify_qp = fq_modify,
        .query_qp = fq_query, .reset_qp = fq_reset, .post_send = fq_post_send,
        .post_recv = fq_post_recv, .ring = fq_ok, .poll_cq = fq_poll, .reg_mr = fq_reg,
        .dereg_mr = fq_dereg, .ctl_send = fq_ctl, .query_qp_num = fq_qp_num,
        .create_cq = fq_create_cq, .destroy_cq = fq_destroy_cq,
        .create_qp_cq = fq_create_qp_cq};
    struct shift_backend_ops partial = ops;
    partial.create_qp_cq = NULL;
    fcq_t x;
    memset(&x, 0, sizeof x);
    shift_cq cq, other;
    shift_ep e, f;
    struct shift_cq_attr qa = {.cqe = 64};
    struct shift_ep_attr ea = {SHIFT_ROLE_REQUESTER, SHIFT_DESIGN_SHIFT, 1, 1, 2, 0};
    CHECK(shift_cq_create(&partial, &x, &qa, &cq) == EINVAL);
    CHECK(shift_cq_create(&ops, &x, &qa, &cq) == 0 && x.cqs == 2);
    CHECK(shift_ep_create(&ops, &x, &ea, &e) == EIO); /* (its own CQs: create_qp) */
    CHECK(shift_ep_create_on_cq(&ops, &x, &ea, cq, &e) == 0);
    CHECK(shift_ep_create_on_cq(&ops, &x, &ea, cq, &f) == 0);
    CHECK(shift_sim_cq_destroy(cq) == EINVAL); /* not the simnic binding's */
    CHECK(shift_sim_cq_create(NULL, 0, 8, &other) == EBADF);
    struct shift_send_wr w = {.wr_id = 77, .opcode = SHIFT_WR_RDMA_WRITE,
                              .send_flags = SHIFT_SEND_SIGNALED};
    CHECK(shift_post_send(e, &w, NULL) == 0);
    w.wr_id = 88;
    CHECK(shift_post_send(f, &w, NULL) == 0);
    fq_push(&x, 2, 0); /* F's WR (the layer's sequence 0) */
    for (int i = 0; i < 19; i++)
        fq_push(&x, 2, 1000 + (uint64_t)i); /* nothing of F's: stale to its layer */
    fq_push(&x, 9, 0); /* a QP the pair does not know: nobody's */
    fq_push(&x, 1, 0); /* E's WR */
    struct shift_wc wc[4];
    struct shift_ep_info info;
    CHECK(shift_poll_cq(e, 4, wc) == 1 && wc[0].wr_id == 77 && wc[0].qp_num == 1);
    CHECK(shift_ep_query(f, &info) == 0 && info.cq_kept == 8);
    CHECK(shift_ep_query(e, &info) == 0 && info.cq_kept == 0);
    CHECK(shift_poll_cq(f, 4, wc) == 1 && wc[0].wr_id == 88 && wc[0].status == 0);
    CHECK(shift_poll_cq(f, 4, wc) == -EOVERFLOW);
    CHECK(shift_poll_cq(f, 4, wc) == -EOVERFLOW);
    fq_push(&x, 1, 5); /* E goes on (a stale one: nothing to take) */
    CHECK(shift_poll_cq(e, 4, wc) == 0 && x.head == x.tail);
    CHECK(shift_cq_destroy(cq) == EBUSY);
    CHECK(shift_ep_destroy(f) == 0 && shift_ep_destroy(e) == 0);
    CHECK(shift_cq_destroy(cq) == 0 && x.cqs == 0);
    CHECK(shift_cq_destroy(cq) == EINVAL);
}

/* A backend poll of the shared CQ that fails is the polling endpoint's error, as on a
 * CQ of its own: nothing read, nothing lost; the other endpoint's completions wait in the
 * CQ, and the next poll takes them in order. */
static void test_shared_cq_poll_error(void)
{
    two_t *T = calloc(1, sizeof *T);
    CHECK(T != NULL);
    if (!T)
        return;
    two_open(T, 1, 0, SHIFT_DESIGN_SHIFT, 0);
    round_(T, 0, 0, 1);
    round_(T, 1, 0, 1);
    CHECK(sn_pump(T->f, 1000) > 0);
    CHECK(shift_sim_fail_op(T->c[1], 0, SHIFT_OP_POLL_CQ, 0, EIO) == 0);
    struct shift_wc wc[4];
    CHECK(shift_poll_cq(T->ep[1][0], 4, wc) == -EIO);
    struct shift_ep_info info;
    CHECK(shift_ep_query(T->ep[0][0], &info) == 0 && info.cq_kept == 0);
    CHECK(shift_poll_cq(T->ep[0][0], 4, wc) == 1 && wc[0].wr_id == 2); /* its own */
    CHECK(shift_ep_query(T->ep[1][0], &info) == 0 && info.cq_kept == 1 &&
          info.backend_errors == 0); /* (the application's own call: its error, uncounted) */
    CHECK(shift_poll_cq(T->ep[1][0], 4, wc) == 1 && wc[0].wr_id == 2);
    CHECK(shift_poll_cq(T->ep[1][0], 4, wc) == 0 && shift_poll_cq(T->ep[0][0], 4, wc) == 0);
    two_close(T);
    free(T);
}

void test_shared_cq(void)
{
    test_shared_cq_poll_error();
    test_shared_cq_bad_inputs();
    test_shared_cq_inbox_full();
    test_shared_equals_own(0, SHIFT_DESIGN_SHIFT, 0, 1);
    test_shared_equals_own(0, SHIFT_DESIGN_SHIFT, SHIFT_EP_WIRE_PROBE, 1);
    test_shared_equals_own(1, SHIFT_DESIGN_SHIFT, SHIFT_EP_WIRE_PROBE, 1);
    test_shared_equals_own(1, SHIFT_DESIGN_SHIFT_COUNTED, 0, 1);
    test_shared_equals_own(0, SHIFT_DESIGN_SHIFT_PREFIX, SHIFT_EP_COPY_POSTS, 0);
    test_shared_equals_own(0, SHIFT_DESIGN_NO_FAILOVER, 0, 1); /* every flush the application's */
}
