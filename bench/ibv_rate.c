/*
 * ibv_rate.c - message rate of raw verbs on the simulated provider against the SHIFT layer
 * over the libibverbs backend, in one process that is both hosts (the provider in
 * lock-step: nothing moves but the steps this program takes, so both sides do the same
 * work on the wire and the difference is the layer's).
 *
 *     ibv_rate PROVIDER_SO raw|layer WRS CHAIN
 *
 * host A WRITEs 64 bytes to host B, CHAIN WRs per post (each signaled), then the wire
 * is pumped and A polls its CHAIN completions; WRS in all. One JSON line on stdout.
 * Run in the lock-step environment (bench/verbs_bench.py does).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "shift_ibv.h"
#include "simnic.h"

enum { MSG = 64, MAX_CHAIN = 256, QP_WR = 512 };

static void die(const char *what, int err)
{
    fprintf(stderr, "ibv_rate: %s: %s\n", what, strerror(err));
    exit(1);
}

static void check(int err, const char *what)
{
    if (err)
        die(what, err);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

struct world {
    sn_fabric f;
    uint8_t *mem[2];
};

/* a two-host fabric (the idealised NIC: no completion to write after the ACK) that the
 * provider acts on */
static void world_open(struct world *w, const char *provider)
{
    struct sn_ops ops;
    size_t size;
    check(sn_fabric_create(NULL, &w->f), "sn_fabric_create");
    for (int h = 0; h < 2; h++)
        check(sn_host_mem(w->f, h, &w->mem[h], &size), "sn_host_mem");
    sn_get_ops(&ops);
    void *so = dlopen(provider, RTLD_NOW);
    if (!so) {
        fprintf(stderr, "ibv_rate: %s\n", dlerror());
        exit(1);
    }
    int (*attach)(const struct sn_ops *, sn_fabric);
    void *sym = dlsym(so, "shiftsim_lockstep_attach");
    memcpy(&attach, &sym, sizeof attach); /* (POSIX's way from dlsym to a function) */
    if (!sym)
        die("shiftsim_lockstep_attach", ENOSYS);
    check(attach(&ops, w->f), "shiftsim_lockstep_attach");
}

static void pump(struct world *w) { sn_pump(w->f, 1L << 30); }

/* ---- raw verbs: one RC QP per host on its default device ---- */

struct raw {
    struct ibv_context *ctx[2];
    struct ibv_pd *pd[2];
    struct ibv_cq *cq[2];
    struct ibv_qp *qp[2];
    struct ibv_mr *mr[2];
};

static struct ibv_context *open_dev(const char *name)
{
    int n;
    struct ibv_device **list = ibv_get_device_list(&n);
    struct ibv_context *ctx = NULL;
    for (int i = 0; list && i < n && !ctx; i++)
        if (!strcmp(ibv_get_device_name(list[i]), name))
            ctx = ibv_open_device(list[i]);
    if (list)
        ibv_free_device_list(list);
    if (!ctx)
        die(name, errno ? errno : ENODEV);
    return ctx;
}

static void raw_connect(struct raw *r, int h)
{
    struct ibv_port_attr pa;
    check(ibv_query_port(r->ctx[1 - h], 1, &pa), "ibv_query_port");
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
    check(ibv_modify_qp(r->qp[h], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                          IBV_QP_ACCESS_FLAGS), "INIT");
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096,
                             .dest_qp_num = r->qp[1 - h]->qp_num, .max_dest_rd_atomic = 1,
                             .min_rnr_timer = 12, .ah_attr = {.dlid = pa.lid, .port_num = 1}};
    check(ibv_modify_qp(r->qp[h], &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                          IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
          "RTR");
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
                             .rnr_retry = 7, .max_rd_atomic = 1};
    check(ibv_modify_qp(r->qp[h], &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                          IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                          IBV_QP_MAX_QP_RD_ATOMIC), "RTS");
}

static void raw_open(struct raw *r, struct world *w)
{
    static const char *dev[2] = {"sim0", "sim2"};
    for (int h = 0; h < 2; h++) {
        r->ctx[h] = open_dev(dev[h]);
        r->pd[h] = ibv_alloc_pd(r->ctx[h]);
        r->cq[h] = r->pd[h] ? ibv_create_cq(r->ctx[h], 2 * QP_WR, NULL, NULL, 0) : NULL;
        struct ibv_qp_init_attr ia = {.send_cq = r->cq[h], .recv_cq = r->cq[h],
                                      .cap = {.max_send_wr = QP_WR, .max_recv_wr = 1,
                                              .max_send_sge = 1, .max_recv_sge = 1},
                                      .qp_type = IBV_QPT_RC};
        r->qp[h] = r->cq[h] ? ibv_create_qp(r->pd[h], &ia) : NULL;
        r->mr[h] = r->qp[h] ? ibv_reg_mr(r->pd[h], w->mem[h], 4096,
                                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
                            : NULL;
        if (!r->mr[h])
            die("raw verbs set-up", errno);
    }
    for (int h = 0; h < 2; h++)
        raw_connect(r, h);
}

static void raw_round(struct raw *r, struct world *w, int chain)
{
    struct ibv_send_wr wr[MAX_CHAIN], *bad;
    struct ibv_sge sge = {.addr = (uintptr_t)w->mem[0], .length = MSG, .lkey = r->mr[0]->lkey};
    struct ibv_wc wc[MAX_CHAIN];
    for (int i = 0; i < chain; i++)
        wr[i] = (struct ibv_send_wr){.wr_id = (uint64_t)i, .next = i + 1 < chain ? &wr[i + 1]
                                                                             : NULL,
                                     .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                                     .send_flags = IBV_SEND_SIGNALED,
                                     .wr.rdma = {.remote_addr = (uintptr_t)w->mem[1],
                                                 .rkey = r->mr[1]->rkey}};
    check(ibv_post_send(r->qp[0], wr, &bad), "ibv_post_send");
    pump(w);
    for (int got = 0; got < chain;) {
        int k = ibv_poll_cq(r->cq[0], chain - got, wc);
        if (k <= 0 || wc[0].status != IBV_WC_SUCCESS)
            die("ibv_poll_cq", k < 0 ? -k : EIO);
        got += k;
    }
}

/* ---- the layer: an endpoint per host over the libibverbs backend, both paths ---- */

struct layer {
    struct shift_ibv_ctx *ctx[2];
    shift_ep ep[2];
    struct shift_mr_keys keys[2];
};

static void layer_open(struct layer *l, struct world *w)
{
    static const char *dev[2][2] = {{"sim0", "sim1"}, {"sim2", "sim3"}};
    for (int h = 0; h < 2; h++) {
        /* (the control QPs' buffers in the simulated host's memory, past the data) */
        check(shift_ibv_open(dev[h][0], dev[h][1], 1, w->mem[h] + 4096, SHIFT_IBV_CTL_MEM,
                             &l->ctx[h]), "shift_ibv_open");
        struct shift_ep_attr a = {.role = h ? SHIFT_ROLE_RESPONDER : SHIFT_ROLE_REQUESTER,
                                  .design = SHIFT_DESIGN_SHIFT, .max_send_wr = QP_WR,
                                  .max_recv_wr = 1, .ctl_retries = 3};
        check(shift_ep_create(shift_ibv_ops(), l->ctx[h], &a, &l->ep[h]), "shift_ep_create");
    }
    for (int p = 1; p <= 2; p++) {
        struct shift_path_info in[2];
        for (int h = 0; h < 2; h++)
            check(shift_ibv_path_info(l->ctx[h], p, &in[h]), "shift_ibv_path_info");
        for (int h = 0; h < 2; h++)
            check(shift_ibv_connect(l->ctx[h], p, &in[1 - h]), "shift_ibv_connect");
    }
    for (int h = 0; h < 2; h++)
        check(shift_reg_mr(l->ep[h], (uintptr_t)w->mem[h], 4096,
                           SHIFT_ACCESS_LOCAL_WRITE | SHIFT_ACCESS_REMOTE_WRITE, &l->keys[h]),
              "shift_reg_mr");
    for (int h = 0; h < 2; h++)
        check(shift_add_remote_keys(l->ep[h], l->keys[1 - h].rkey, l->keys[1 - h].rkey_backup),
              "shift_add_remote_keys");
}

static void layer_round(struct layer *l, struct world *w, int chain)
{
    struct shift_send_wr wr[MAX_CHAIN], *bad;
    struct shift_wc wc[MAX_CHAIN];
    for (int i = 0; i < chain; i++)
        wr[i] = (struct shift_send_wr){.wr_id = (uint64_t)i,
                                       .next = i + 1 < chain ? &wr[i + 1] : NULL,
                                       .sg = {.addr = (uintptr_t)w->mem[0], .length = MSG,
                                              .lkey = l->keys[0].lkey},
                                       .num_sge = 1, .opcode = SHIFT_WR_RDMA_WRITE,
                                       .send_flags = SHIFT_SEND_SIGNALED,
                                       .remote_addr = (uintptr_t)w->mem[1],
                                       .rkey = l->keys[1].rkey};
    check(shift_post_send(l->ep[0], wr, &bad), "shift_post_send");
    pump(w);
    for (int got = 0; got < chain;) {
        int k = shift_poll_cq(l->ep[0], chain - got, wc);
        if (k <= 0 || wc[0].status != SHIFT_WC_SUCCESS)
            die("shift_poll_cq", k < 0 ? -k : EIO);
        got += k;
    }
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[2], "raw") && strcmp(argv[2], "layer"))) {
        fprintf(stderr, "usage: ibv_rate PROVIDER_SO raw|layer WRS CHAIN\n");
        return 2;
    }
    long wrs = atol(argv[3]);
    int chain = atoi(argv[4]), layer_mode = !strcmp(argv[2], "layer");
    if (wrs < 1 || chain < 1 || chain > MAX_CHAIN) {
        fprintf(stderr, "ibv_rate: WRS >= 1, 1 <= CHAIN <= %d\n", MAX_CHAIN);
        return 2;
    }
    struct world w;
    struct raw r;
    struct layer l;
    world_open(&w, argv[1]);
    if (layer_mode)
        layer_open(&l, &w);
    else
        raw_open(&r, &w);
    long rounds = (wrs + chain - 1) / chain;
    double t0 = now_s();
    for (long i = 0; i < rounds; i++) {
        if (layer_mode)
            layer_round(&l, &w, chain);
        else
            raw_round(&r, &w, chain);
    }
    double dt = now_s() - t0;
    printf("{\"mode\": \"%s\", \"chain\": %d, \"wrs\": %ld, \"seconds\": %.6f, "
           "\"wr_per_s\": %.1f}\n", argv[2], chain, rounds * chain, dt,
           (double)(rounds * chain) / dt);
    return 0;
}
