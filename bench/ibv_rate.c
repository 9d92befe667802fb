/*
 * ibv_rate.c - message rate of raw verbs on the simulated provider against the SHIFT layer
 * over the libibverbs backend.
 *
 *     ibv_rate PROVIDER_SO raw|layer WRS CHAIN      one process, both hosts (lock-step)
 *     ibv_rate --host A|B raw|layer WRS CHAIN       one host of two processes (sockets)
 *
 * Host A WRITEs 64 bytes to host B, CHAIN WRs per post (each signaled), and polls its
 * CHAIN completions; WRS in all. In lock-step the wire is pumped after each post, so both
 * sides do the same work on it and the difference is the layer's. Between two processes
 * the provider's wire and threads carry it, as for perftest; each host prints what the
 * peer needs (one line per path: QP, PSN, LID, control QP, then the region's address
 * and keys) and reads the peer's lines from its standard input (bench/layer_overhead.py
 * relays them); B then waits for a line on its input before it leaves. One JSON line on
 * A's stdout. Run in the devices' environment (`shift run`).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#include "shift_ibv.h"
#include "simnic.h"

enum { MSG = 64, MAX_CHAIN = 256, QP_WR = 512, MEM = 4096 };

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

/* Where the hosts are: both in this process on an attached fabric (lock-step), or this
 * one (`me`) alone, the peer another process. */
struct world {
    int lockstep, me;
    sn_fabric f;
    uint8_t *mem[2];                  /* each host's data (and control) memory */
    const char *dev[2][2];            /* each host's devices: default path, backup path */
};

/* a two-host fabric (the idealised NIC: no completion to write after the ACK) that the
 * provider acts on */
static void world_lockstep(struct world *w, const char *provider)
{
    static struct sn_ops ops;
    size_t size;
    *w = (struct world){.lockstep = 1, .dev = {{"sim0", "sim1"}, {"sim2", "sim3"}}};
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

static void world_host(struct world *w, const char *host)
{
    *w = (struct world){.me = host[0] == 'B', .dev = {{"sim0", "sim1"}, {"sim0", "sim1"}}};
    w->mem[w->me] = calloc(1, MEM + SHIFT_IBV_CTL_MEM);
    if (!w->mem[w->me])
        die("memory", ENOMEM);
}

/* the hosts this process plays */
static int plays(const struct world *w, int h) { return w->lockstep || h == w->me; }

/* what each host's peer needs of it, one line per path (QP, PSN, LID, control QP), then
 * its region (address, keys) - printed by a host, read by its peer */
struct host_info {
    struct shift_path_info path[3];
    uint64_t addr;
    uint32_t rkey, rkey_backup;
};

static void info_print(const struct host_info *i, int paths)
{
    for (int p = 1; p <= paths; p++)
        printf("%" PRIu32 " %" PRIu32 " %u %" PRIu32 "\n", i->path[p].qp_num, i->path[p].psn,
               i->path[p].lid, i->path[p].ctl_qp_num);
    printf("%" PRIu64 " %" PRIu32 " %" PRIu32 "\n", i->addr, i->rkey, i->rkey_backup);
    fflush(stdout);
}

static void info_read(struct host_info *i, int paths)
{
    for (int p = 1; p <= paths; p++) {
        unsigned lid;
        if (scanf("%" SCNu32 " %" SCNu32 " %u %" SCNu32, &i->path[p].qp_num, &i->path[p].psn,
                  &lid, &i->path[p].ctl_qp_num) != 4)
            die("the peer's path", EPROTO);
        i->path[p].lid = (uint16_t)lid;
        i->path[p].port = 1;
    }
    if (scanf("%" SCNu64 " %" SCNu32 " %" SCNu32, &i->addr, &i->rkey, &i->rkey_backup) != 3)
        die("the peer's region", EPROTO);
}

/* Each host's info known to each: in lock-step from the other's objects; between two
 * processes printed and read. */
static void exchange(const struct world *w, struct host_info info[2], int paths)
{
    if (w->lockstep)
        return;
    info_print(&info[w->me], paths);
    info_read(&info[1 - w->me], paths);
}

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

static void raw_connect(struct raw *r, int h, const struct shift_path_info *peer)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
    check(ibv_modify_qp(r->qp[h], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                          IBV_QP_ACCESS_FLAGS), "INIT");
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096,
                             .dest_qp_num = peer->qp_num, .rq_psn = peer->psn,
                             .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
                             .ah_attr = {.dlid = peer->lid, .port_num = 1}};
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

static void raw_host(struct raw *r, struct world *w, int h, struct host_info *info)
{
    struct ibv_port_attr pa;
    r->ctx[h] = open_dev(w->dev[h][0]);
    r->pd[h] = ibv_alloc_pd(r->ctx[h]);
    r->cq[h] = r->pd[h] ? ibv_create_cq(r->ctx[h], 2 * QP_WR, NULL, NULL, 0) : NULL;
    struct ibv_qp_init_attr ia = {.send_cq = r->cq[h], .recv_cq = r->cq[h],
                                  .cap = {.max_send_wr = QP_WR, .max_recv_wr = 1,
                                          .max_send_sge = 1, .max_recv_sge = 1},
                                  .qp_type = IBV_QPT_RC};
    r->qp[h] = r->cq[h] ? ibv_create_qp(r->pd[h], &ia) : NULL;
    r->mr[h] = r->qp[h] ? ibv_reg_mr(r->pd[h], w->mem[h], MEM,
                                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
                        : NULL;
    if (!r->mr[h])
        die("raw verbs set-up", errno);
    check(ibv_query_port(r->ctx[h], 1, &pa), "ibv_query_port");
    *info = (struct host_info){.path[1] = {.qp_num = r->qp[h]->qp_num, .lid = pa.lid,
                                           .port = 1},
                               .addr = (uintptr_t)w->mem[h], .rkey = r->mr[h]->rkey};
}

static void raw_open(struct raw *r, struct world *w, struct host_info info[2])
{
    for (int h = 0; h < 2; h++)
        if (plays(w, h))
            raw_host(r, w, h, &info[h]);
    exchange(w, info, 1);
    for (int h = 0; h < 2; h++)
        if (plays(w, h))
            raw_connect(r, h, &info[1 - h].path[1]);
}

static void raw_round(struct raw *r, struct world *w, const struct host_info *b, int chain)
{
    struct ibv_send_wr wr[MAX_CHAIN], *bad;
    struct ibv_sge sge = {.addr = (uintptr_t)w->mem[0], .length = MSG, .lkey = r->mr[0]->lkey};
    struct ibv_wc wc[MAX_CHAIN];
    for (int i = 0; i < chain; i++)
        wr[i] = (struct ibv_send_wr){.wr_id = (uint64_t)i, .next = i + 1 < chain ? &wr[i + 1]
                                                                             : NULL,
                                     .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
                                     .send_flags = IBV_SEND_SIGNALED,
                                     .wr.rdma = {.remote_addr = b->addr, .rkey = b->rkey}};
    check(ibv_post_send(r->qp[0], wr, &bad), "ibv_post_send");
    if (w->lockstep)
        sn_pump(w->f, 1L << 30);
    for (int got = 0; got < chain;) {
        int k = ibv_poll_cq(r->cq[0], chain - got, wc);
        if (k < 0 || (k && wc[0].status != IBV_WC_SUCCESS))
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

static void layer_host(struct layer *l, struct world *w, int h, struct host_info *info)
{
    /* (the control QPs' buffers in the host's memory, past the data: the simulated host's
     * registrations must lie in it) */
    check(shift_ibv_open(w->dev[h][0], w->dev[h][1], 1, w->mem[h] + MEM, SHIFT_IBV_CTL_MEM,
                         &l->ctx[h]), "shift_ibv_open");
    struct shift_ep_attr a = {.role = h ? SHIFT_ROLE_RESPONDER : SHIFT_ROLE_REQUESTER,
                              .design = SHIFT_DESIGN_SHIFT, .max_send_wr = QP_WR,
                              .max_recv_wr = 1, .ctl_retries = 3};
    check(shift_ep_create(shift_ibv_ops(), l->ctx[h], &a, &l->ep[h]), "shift_ep_create");
    for (int p = 1; p <= 2; p++)
        check(shift_ibv_path_info(l->ctx[h], p, &info->path[p]), "shift_ibv_path_info");
    check(shift_reg_mr(l->ep[h], (uintptr_t)w->mem[h], MEM,
                       SHIFT_ACCESS_LOCAL_WRITE | SHIFT_ACCESS_REMOTE_WRITE, &l->keys[h]),
          "shift_reg_mr");
    info->addr = (uintptr_t)w->mem[h];
    info->rkey = l->keys[h].rkey;
    info->rkey_backup = l->keys[h].rkey_backup;
}

static void layer_open(struct layer *l, struct world *w, struct host_info info[2])
{
    for (int h = 0; h < 2; h++)
        if (plays(w, h))
            layer_host(l, w, h, &info[h]);
    exchange(w, info, 2);
    for (int h = 0; h < 2; h++) {
        if (!plays(w, h))
            continue;
        for (int p = 1; p <= 2; p++) {
            /* (the peer's GID: as a program exchanges it; over LIDs here) */
            info[1 - h].path[p].port = 1;
            check(shift_ibv_connect(l->ctx[h], p, &info[1 - h].path[p]), "shift_ibv_connect");
        }
        check(shift_add_remote_keys(l->ep[h], info[1 - h].rkey, info[1 - h].rkey_backup),
              "shift_add_remote_keys");
    }
}

static void layer_round(struct layer *l, struct world *w, const struct host_info *b,
                        int chain)
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
                                       .remote_addr = b->addr, .rkey = b->rkey};
    check(shift_post_send(l->ep[0], wr, &bad), "shift_post_send");
    if (w->lockstep)
        sn_pump(w->f, 1L << 30);
    for (int got = 0; got < chain;) {
        int k = shift_poll_cq(l->ep[0], chain - got, wc);
        if (k < 0 || (k && wc[0].status != SHIFT_WC_SUCCESS))
            die("shift_poll_cq", k < 0 ? -k : EIO);
        got += k;
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: ibv_rate PROVIDER_SO|--host A|B raw|layer WRS CHAIN "
                    "(1 <= CHAIN <= %d)\n", MAX_CHAIN);
    return 2;
}

int main(int argc, char **argv)
{
    int two = argc == 6 && !strcmp(argv[1], "--host");
    const char *mode = argv[two ? 3 : 2];
    if ((argc != 5 && !two) || (strcmp(mode, "raw") && strcmp(mode, "layer")) ||
        (two && strcmp(argv[2], "A") && strcmp(argv[2], "B")))
        return usage();
    long wrs = atol(argv[two ? 4 : 3]);
    int chain = atoi(argv[two ? 5 : 4]), layer_mode = !strcmp(mode, "layer");
    if (wrs < 1 || chain < 1 || chain > MAX_CHAIN)
        return usage();
    struct world w;
    struct raw r = {0};
    struct layer l = {0};
    struct host_info info[2] = {0};
    if (two)
        world_host(&w, argv[2]);
    else
        world_lockstep(&w, argv[1]);
    if (layer_mode)
        layer_open(&l, &w, info);
    else
        raw_open(&r, &w, info);
    if (!plays(&w, 0)) { /* B: its NIC answers by itself; it leaves when A has done */
        char word[8];
        return scanf(" %7s", word) == 1 ? 0 : 1;
    }
    long rounds = (wrs + chain - 1) / chain;
    double t0 = now_s();
    for (long i = 0; i < rounds; i++) {
        if (layer_mode)
            layer_round(&l, &w, &info[1], chain);
        else
            raw_round(&r, &w, &info[1], chain);
    }
    double dt = now_s() - t0;
    printf("{\"mode\": \"%s\", \"chain\": %d, \"wrs\": %ld, \"seconds\": %.6f, "
           "\"wr_per_s\": %.1f}\n", mode, chain, rounds * chain, dt,
           (double)(rounds * chain) / dt);
    return 0;
}
