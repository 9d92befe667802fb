/* ibv.c - the SHIFT core's backend table over libibverbs (shift_ibv.h): ibv_* calls
 * only, every result checked. Built apart from libshift (it needs libibverbs):
 * libshift_ibv.so, by verbs/rdma_core.py against the rdma-core build. */
#define _GNU_SOURCE
#include "shift_ibv.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

enum {
    CTL_MAX = 256,           /* a control message's largest body (the layer's limit) */
    CTL_GRH = 40,            /* a UD receive buffer starts with room for the GRH */
    CTL_HEAD = 4,            /* the incarnation stamp before the body */
    CTL_SLOT = 320,          /* GRH + stamp + body, rounded up */
    CTL_SLOTS = 16,          /* receive buffers per control QP (then one to send from) */
    CTL_QKEY = 0x53484946,   /* "SHIF": the control QPs' Q_Key */
    POST_BATCH = 32,         /* WRs translated per ibv_post_send call */
    HELD_MAX = 4096,         /* the layer holds at most a send queue's worth */
    PSN_MASK = 0xffffff
};

struct shift_ibv_ctx {
    struct ibv_context *dev[3]; /* per path (1: default, 2: backup) */
    struct ibv_pd *pd[3];
    uint8_t port;
    struct ibq *qp[3];          /* the layer's QP of each path, once made */
    int objects;                /* QPs, CQs and MRs the layer holds on it */
    uint8_t *ctl_mem;           /* the control buffers of both paths' QPs */
    int own_ctl_mem;
};

/* A WR the layer wrote without ringing (SHIFT_SEND_NO_DOORBELL), its inline bytes kept. */
struct held_wr {
    struct shift_send_wr wr;
    uint8_t inl[SHIFT_MAX_INLINE];
};

/* The layer's QP of a path: the RC QP and, beside it, the control QP. */
struct ibq {
    struct shift_ibv_ctx *x;
    int path;
    struct ibv_qp *rc;
    struct ibv_cq *cq;          /* the RC QP's CQ (send and receive) */
    int own_cq;                 /* made with the QP (else a shared CQ) */
    struct ibv_qp_cap cap;
    struct ibv_cq *ctl_scq, *ctl_rcq;
    struct ibv_qp *ctl;         /* UD */
    struct ibv_mr *ctl_mr;
    uint8_t *ctl_buf;           /* CTL_SLOTS receive slots, then the send slot (the
                                 * context's control memory, this path's part) */
    struct ibv_ah *ah;          /* to the peer's port (RC's address and the control QP's) */
    struct shift_path_info remote;
    int has_remote;
    uint32_t incarnation;
    struct held_wr *held;       /* waiting for the doorbell */
    uint32_t nheld, held_cap;
    /* completions its own CQ gave beyond what a poll asked for, oldest first: the layer
     * takes one at a time, and one ibv_poll_cq per completion would cost a provider's
     * whole poll each */
    struct ibv_wc cache[POST_BATCH];
    int cache_head, cache_n;
};

static int path_ok(int path) { return path == 1 || path == 2; }

uint32_t shift_ibv_epoch_psn(uint32_t inc)
{
    /* each life's PSNs below the last one's (64 Ki WRs apart): an earlier life's packet
     * is ahead of what a reset QP expects, so RC drops it (240 lives, then round again:
     * nothing of a life that old is still on the wire) */
    return 0xf00000u - (inc % 0xf0u) * 0x10000u;
}

/* ------------------------------------------------------------ translation -------- */

static int wr_opcode(int op, enum ibv_wr_opcode *out)
{
    switch (op) {
    case SHIFT_WR_RDMA_WRITE: *out = IBV_WR_RDMA_WRITE; return 0;
    case SHIFT_WR_RDMA_WRITE_WITH_IMM: *out = IBV_WR_RDMA_WRITE_WITH_IMM; return 0;
    case SHIFT_WR_SEND: *out = IBV_WR_SEND; return 0;
    case SHIFT_WR_SEND_WITH_IMM: *out = IBV_WR_SEND_WITH_IMM; return 0;
    case SHIFT_WR_RDMA_READ: *out = IBV_WR_RDMA_READ; return 0;
    case SHIFT_WR_ATOMIC_CMP_AND_SWP: *out = IBV_WR_ATOMIC_CMP_AND_SWP; return 0;
    case SHIFT_WR_ATOMIC_FETCH_AND_ADD: *out = IBV_WR_ATOMIC_FETCH_AND_ADD; return 0;
    default: return EINVAL;
    }
}

static unsigned send_flags(unsigned f)
{
    return ((f & SHIFT_SEND_FENCE) ? IBV_SEND_FENCE : 0) |
           ((f & SHIFT_SEND_SIGNALED) ? IBV_SEND_SIGNALED : 0) |
           ((f & SHIFT_SEND_SOLICITED) ? IBV_SEND_SOLICITED : 0) |
           ((f & SHIFT_SEND_INLINE) ? IBV_SEND_INLINE : 0);
}

static int access_flags(int a)
{
    return ((a & SHIFT_ACCESS_LOCAL_WRITE) ? IBV_ACCESS_LOCAL_WRITE : 0) |
           ((a & SHIFT_ACCESS_REMOTE_WRITE) ? IBV_ACCESS_REMOTE_WRITE : 0) |
           ((a & SHIFT_ACCESS_REMOTE_READ) ? IBV_ACCESS_REMOTE_READ : 0) |
           ((a & SHIFT_ACCESS_REMOTE_ATOMIC) ? IBV_ACCESS_REMOTE_ATOMIC : 0);
}

/* One of the layer's send WRs as verbs writes it; sge is its storage. */
static int to_ibv_send(const struct shift_send_wr *w, struct ibv_send_wr *out,
                       struct ibv_sge *sge)
{
    const unsigned known = SHIFT_SEND_FENCE | SHIFT_SEND_SIGNALED | SHIFT_SEND_SOLICITED |
                           SHIFT_SEND_INLINE | SHIFT_SEND_NO_DOORBELL;
    enum ibv_wr_opcode op;
    if (wr_opcode(w->opcode, &op) || (w->send_flags & ~known) || w->num_sge < 0 ||
        w->num_sge > 1)
        return EINVAL; /* (SHIFT_SEND_INELIGIBLE too: without sq_pending, the layer's) */
    *sge = (struct ibv_sge){.addr = w->sg.addr, .length = w->sg.length, .lkey = w->sg.lkey};
    *out = (struct ibv_send_wr){.wr_id = w->wr_id, .sg_list = sge, .num_sge = w->num_sge,
                                .opcode = op, .send_flags = send_flags(w->send_flags),
                                .imm_data = htobe32(w->imm_data)};
    if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
        out->wr.atomic.remote_addr = w->remote_addr;
        out->wr.atomic.compare_add = w->compare_add;
        out->wr.atomic.swap = w->swap;
        out->wr.atomic.rkey = w->rkey;
    } else {
        out->wr.rdma.remote_addr = w->remote_addr;
        out->wr.rdma.rkey = w->rkey;
    }
    return 0;
}

static int wc_opcode(enum ibv_wc_opcode op)
{
    switch (op) {
    case IBV_WC_SEND: return SHIFT_WC_SEND;
    case IBV_WC_RDMA_WRITE: return SHIFT_WC_RDMA_WRITE;
    case IBV_WC_RDMA_READ: return SHIFT_WC_RDMA_READ;
    case IBV_WC_COMP_SWAP: return SHIFT_WC_COMP_SWAP;
    case IBV_WC_FETCH_ADD: return SHIFT_WC_FETCH_ADD;
    case IBV_WC_RECV: return SHIFT_WC_RECV;
    case IBV_WC_RECV_RDMA_WITH_IMM: return SHIFT_WC_RECV_RDMA_WITH_IMM;
    default: return -1;
    }
}

/* verbs' statuses are the layer's, value for value (shift_verbs.h) */
static int wc_status(enum ibv_wc_status s)
{
    return (int)s >= SHIFT_WC_SUCCESS && (int)s <= SHIFT_WC_GENERAL_ERR ? (int)s
                                                                        : SHIFT_WC_GENERAL_ERR;
}

static void from_ibv_wc(const struct ibv_wc *w, struct shift_wc *out)
{
    int op = wc_opcode(w->opcode);
    *out = (struct shift_wc){.wr_id = w->wr_id, .status = wc_status(w->status),
                             .opcode = op < 0 ? SHIFT_WC_SEND : op,
                             .vendor_err = w->vendor_err, .byte_len = w->byte_len,
                             .qp_num = w->qp_num,
                             .wc_flags = (w->wc_flags & IBV_WC_WITH_IMM) ? SHIFT_WC_WITH_IMM : 0};
    if (w->wc_flags & IBV_WC_WITH_IMM)
        out->imm_data = be32toh(w->imm_data);
}

/* ------------------------------------------------------------ contexts ----------- */

static struct ibv_context *open_named(struct ibv_device **list, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(ibv_get_device_name(list[i]), name))
            return ibv_open_device(list[i]);
    errno = ENODEV;
    return NULL;
}

/* the device's asynchronous events read without blocking (async_event polls them) */
static int nonblocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? errno : 0;
}

/* the devices closed and x freed */
static void close_devices(struct shift_ibv_ctx *x)
{
    for (int p = 1; p <= 2; p++) {
        if (x->pd[p])
            ibv_dealloc_pd(x->pd[p]);
        if (x->dev[p])
            ibv_close_device(x->dev[p]);
    }
    if (x->own_ctl_mem)
        free(x->ctl_mem);
    free(x);
}

_Static_assert(SHIFT_IBV_CTL_MEM == 2 * (CTL_SLOTS + 1) * CTL_SLOT, "control memory");

int shift_ibv_open(const char *default_dev, const char *backup_dev, uint8_t port,
                   void *ctl_mem, size_t ctl_len, struct shift_ibv_ctx **out)
{
    if (!default_dev || !backup_dev || !out || port < 1 ||
        (ctl_mem && ctl_len < SHIFT_IBV_CTL_MEM))
        return EINVAL;
    *out = NULL;
    struct shift_ibv_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return ENOMEM;
    x->port = port;
    x->ctl_mem = ctl_mem;
    if (!x->ctl_mem) {
        x->ctl_mem = calloc(1, SHIFT_IBV_CTL_MEM);
        x->own_ctl_mem = 1;
        if (!x->ctl_mem) {
            free(x);
            return ENOMEM;
        }
    }
    int n = 0, err = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list) {
        err = errno ? errno : ENODEV;
        close_devices(x);
        return err;
    }
    const char *names[3] = {NULL, default_dev, backup_dev};
    for (int p = 1; p <= 2 && !err; p++) {
        x->dev[p] = open_named(list, n, names[p]);
        if (!x->dev[p])
            err = errno ? errno : ENODEV;
        else if (!(x->pd[p] = ibv_alloc_pd(x->dev[p])))
            err = errno ? errno : ENOMEM;
        else
            err = nonblocking(x->dev[p]->async_fd);
    }
    ibv_free_device_list(list);
    if (err) {
        close_devices(x);
        return err;
    }
    *out = x;
    return 0;
}

int shift_ibv_close(struct shift_ibv_ctx *x)
{
    if (!x)
        return EINVAL;
    if (x->objects)
        return EBUSY;
    close_devices(x);
    return 0;
}

const struct shift_backend_ops *shift_ibv_ops(void);

/* ------------------------------------------------------------ QP states ---------- */

static int modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
    return ibv_modify_qp(qp, a, mask); /* (0 or an errno, as the layer wants) */
}

static int rc_init(struct ibq *q)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = q->x->port,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
                                               IBV_ACCESS_REMOTE_READ |
                                               IBV_ACCESS_REMOTE_ATOMIC};
    return modify(q->rc, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                 IBV_QP_ACCESS_FLAGS);
}

static struct ibv_ah_attr ah_of(const struct ibq *q)
{
    struct ibv_ah_attr ah = {.dlid = q->remote.lid, .port_num = q->x->port};
    static const uint8_t zero[16];
    if (memcmp(q->remote.gid, zero, 16) != 0 && q->remote.lid == 0) {
        ah.is_global = 1;
        ah.grh.hop_limit = 1;
        memcpy(ah.grh.dgid.raw, q->remote.gid, 16);
    }
    return ah;
}

static int rc_rtr(struct ibq *q, uint32_t rq_psn)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096,
                            .dest_qp_num = q->remote.qp_num, .rq_psn = rq_psn & PSN_MASK,
                            .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
                            .ah_attr = ah_of(q)};
    return modify(q->rc, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                 IBV_QP_MIN_RNR_TIMER);
}

static int rc_rts(struct ibq *q, uint32_t sq_psn)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
                            .rnr_retry = 7, .sq_psn = sq_psn & PSN_MASK, .max_rd_atomic = 1};
    return modify(q->rc, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int rc_state(struct ibq *q, enum ibv_qp_state *state)
{
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr init;
    int err = ibv_query_qp(q->rc, &a, IBV_QP_STATE, &init);
    if (!err)
        *state = a.qp_state;
    return err;
}

/* ------------------------------------------------------------ control QP --------- */

static int ctl_post_slot(struct ibq *q, uint32_t slot)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(q->ctl_buf + slot * CTL_SLOT),
                          .length = CTL_SLOT, .lkey = q->ctl_mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = slot, .sg_list = &sge, .num_sge = 1}, *bad;
    return ibv_post_recv(q->ctl, &wr, &bad);
}

/* RESET (its receives and stale completions gone), INIT, RTR, RTS, every slot posted */
static int ctl_up(struct ibq *q)
{
    struct ibv_wc wc[CTL_SLOTS];
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};
    int err = modify(q->ctl, &a, IBV_QP_STATE);
    while (!err && (ibv_poll_cq(q->ctl_rcq, CTL_SLOTS, wc) > 0 ||
                    ibv_poll_cq(q->ctl_scq, CTL_SLOTS, wc) > 0))
        ;
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_INIT, .port_num = q->x->port,
                             .qkey = CTL_QKEY};
    if (!err)
        err = modify(q->ctl, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTR};
    if (!err)
        err = modify(q->ctl, &a, IBV_QP_STATE);
    a = (struct ibv_qp_attr){.qp_state = IBV_QPS_RTS, .sq_psn = 0};
    if (!err)
        err = modify(q->ctl, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
    for (uint32_t s = 0; s < CTL_SLOTS && !err; s++)
        err = ctl_post_slot(q, s);
    return err;
}

/* the control QP back in RTS if its NIC's death took it to ERR */
static int ctl_revive(struct ibq *q)
{
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr init;
    int err = ibv_query_qp(q->ctl, &a, IBV_QP_STATE, &init);
    if (err || a.qp_state == IBV_QPS_RTS)
        return err;
    return ctl_up(q);
}

static int ctl_create(struct ibq *q, struct ibv_context *dev, struct ibv_pd *pd)
{
    q->ctl_buf = q->x->ctl_mem + (size_t)(q->path - 1) * (CTL_SLOTS + 1) * CTL_SLOT;
    q->ctl_scq = ibv_create_cq(dev, CTL_SLOTS, NULL, NULL, 0);
    q->ctl_rcq = q->ctl_scq ? ibv_create_cq(dev, CTL_SLOTS, NULL, NULL, 0) : NULL;
    if (!q->ctl_rcq)
        return errno ? errno : ENOMEM;
    q->ctl_mr = ibv_reg_mr(pd, q->ctl_buf, (CTL_SLOTS + 1) * CTL_SLOT, IBV_ACCESS_LOCAL_WRITE);
    if (!q->ctl_mr)
        return errno ? errno : ENOMEM;
    struct ibv_qp_init_attr ia = {.send_cq = q->ctl_scq, .recv_cq = q->ctl_rcq,
                                  .cap = {.max_send_wr = CTL_SLOTS, .max_recv_wr = CTL_SLOTS,
                                          .max_send_sge = 1, .max_recv_sge = 1},
                                  .qp_type = IBV_QPT_UD, .sq_sig_all = 1};
    q->ctl = ibv_create_qp(pd, &ia);
    if (!q->ctl)
        return errno ? errno : ENOMEM;
    return ctl_up(q);
}

static void ctl_destroy(struct ibq *q)
{
    if (q->ah)
        ibv_destroy_ah(q->ah);
    if (q->ctl)
        ibv_destroy_qp(q->ctl);
    if (q->ctl_mr)
        ibv_dereg_mr(q->ctl_mr);
    if (q->ctl_rcq)
        ibv_destroy_cq(q->ctl_rcq);
    if (q->ctl_scq)
        ibv_destroy_cq(q->ctl_scq);
}

/* ------------------------------------------------------------ QPs and CQs -------- */

static void qp_free(struct ibq *q)
{
    if (q->rc)
        ibv_destroy_qp(q->rc);
    if (q->own_cq && q->cq)
        ibv_destroy_cq(q->cq);
    ctl_destroy(q);
    free(q->held);
    free(q);
}

static int qp_make(struct shift_ibv_ctx *x, int path, const struct shift_backend_qp_cap *cap,
                   struct ibv_cq *cq, void **out)
{
    if (!x || !path_ok(path) || !cap || !out || x->qp[path])
        return EINVAL;
    struct ibq *q = calloc(1, sizeof *q);
    if (!q)
        return ENOMEM;
    *q = (struct ibq){.x = x, .path = path, .cq = cq, .own_cq = !cq};
    int err = 0;
    if (!q->cq) {
        q->cq = ibv_create_cq(x->dev[path], (int)(cap->max_send_wr + cap->max_recv_wr + 8),
                              NULL, NULL, 0);
        if (!q->cq)
            err = errno ? errno : ENOMEM;
    }
    struct ibv_qp_init_attr ia = {.send_cq = q->cq, .recv_cq = q->cq,
                                  .cap = {.max_send_wr = cap->max_send_wr,
                                          .max_recv_wr = cap->max_recv_wr, .max_send_sge = 1,
                                          .max_recv_sge = 1,
                                          .max_inline_data = cap->max_inline_data},
                                  .qp_type = IBV_QPT_RC};
    if (!err && !(q->rc = ibv_create_qp(x->pd[path], &ia)))
        err = errno ? errno : ENOMEM;
    if (!err)
        err = ctl_create(q, x->dev[path], x->pd[path]);
    if (err) {
        qp_free(q);
        return err;
    }
    q->cap = ia.cap;
    x->qp[path] = q;
    x->objects++;
    *out = q;
    return 0;
}

static int b_create_qp(void *c, int path, const struct shift_backend_qp_cap *cap, void **qp)
{
    return qp_make(c, path, cap, NULL, qp);
}

static int b_create_qp_cq(void *c, int path, const struct shift_backend_qp_cap *cap, void *cq,
                          void **qp)
{
    return cq ? qp_make(c, path, cap, cq, qp) : EINVAL;
}

static int b_destroy_qp(void *c, void *qp)
{
    struct shift_ibv_ctx *x = c;
    struct ibq *q = qp;
    if (!x || !q || q->x != x || x->qp[q->path] != q)
        return EINVAL;
    x->qp[q->path] = NULL;
    x->objects--;
    qp_free(q);
    return 0;
}

static int b_create_cq(void *c, int path, uint32_t cqe, void **cq)
{
    struct shift_ibv_ctx *x = c;
    if (!x || !path_ok(path) || !cq || cqe < 1 || cqe > INT32_MAX)
        return EINVAL;
    struct ibv_cq *h = ibv_create_cq(x->dev[path], (int)cqe, NULL, NULL, 0);
    if (!h)
        return errno ? errno : ENOMEM;
    x->objects++;
    *cq = h;
    return 0;
}

static int b_destroy_cq(void *c, void *cq)
{
    struct shift_ibv_ctx *x = c;
    if (!x || !cq)
        return EINVAL;
    int err = ibv_destroy_cq(cq);
    if (!err)
        x->objects--;
    return err;
}

/* ------------------------------------------------------------ the state machine -- */

static int ring_held(struct ibq *q);

/* The layer's transitions (shift.h: modify_qp): INIT with the RC attributes, RTR towards
 * the remote it was connected to, RTS with the send PSN from RTR; ERR, RESET as asked. */
static int b_modify_qp(void *c, void *qp, int state, uint32_t rq_psn, uint32_t sq_psn)
{
    (void)c;
    struct ibq *q = qp;
    enum ibv_qp_state now;
    int err;
    switch (state) {
    case SHIFT_QPS_RESET:
    case SHIFT_QPS_ERR: {
        struct ibv_qp_attr a = {.qp_state = state == SHIFT_QPS_RESET ? IBV_QPS_RESET
                                                                     : IBV_QPS_ERR};
        err = modify(q->rc, &a, IBV_QP_STATE);
        if (!err && state == SHIFT_QPS_RESET)
            q->nheld = 0; /* (RESET empties the send queue, what waited too) */
        else if (!err)
            ring_held(q); /* (ERR flushes what waited for the doorbell too) */
        return err;
    }
    case SHIFT_QPS_INIT:
        return rc_init(q);
    case SHIFT_QPS_RTR:
        return q->has_remote ? rc_rtr(q, rq_psn) : EINVAL;
    case SHIFT_QPS_RTS:
        err = rc_state(q, &now);
        if (!err && now == IBV_QPS_RTR)
            err = rc_rts(q, sq_psn);
        else if (!err) {
            struct ibv_qp_attr a = {.qp_state = IBV_QPS_RTS};
            err = modify(q->rc, &a, IBV_QP_STATE);
        }
        return err ? err : ctl_revive(q);
    default:
        return EINVAL;
    }
}

static int b_query_qp(void *c, void *qp, int *state, uint32_t *rq_psn, uint32_t *sq_psn)
{
    (void)c;
    struct ibq *q = qp;
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr init;
    int err = ibv_query_qp(q->rc, &a, IBV_QP_STATE | IBV_QP_RQ_PSN | IBV_QP_SQ_PSN, &init);
    if (err)
        return err;
    *state = (int)a.qp_state;
    *rq_psn = a.rq_psn;
    *sq_psn = a.sq_psn;
    return 0;
}

/* A NIC in fatal error refuses commands; one that lives answers (whatever its link). */
static int nic_alive(struct ibq *q)
{
    struct ibv_device_attr a;
    return ibv_query_device(q->x->dev[q->path], &a) == 0;
}

/* The default QP into a new life in place: RESET (which the provider refuses, changing
 * nothing, while the NIC still owes host memory completions of it), INIT, RTR, RTS with
 * the epoch's PSNs, and its control QP back up. */
static int b_reset_qp(void *c, void *qp, uint32_t incarnation)
{
    (void)c;
    struct ibq *q = qp;
    if (!q->has_remote)
        return EINVAL;
    if (!nic_alive(q))
        return ENETDOWN;
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_RESET};
    int err = modify(q->rc, &a, IBV_QP_STATE);
    if (err)
        return err;
    q->nheld = 0; /* (RESET empties the send queue: what waited for the doorbell too) */
    uint32_t psn = shift_ibv_epoch_psn(incarnation);
    err = rc_init(q);
    if (!err)
        err = rc_rtr(q, psn);
    if (!err)
        err = rc_rts(q, psn);
    if (!err)
        err = ctl_revive(q);
    if (!err)
        q->incarnation = incarnation;
    return err;
}

/* ------------------------------------------------------------ the data path ------ */

static int hold(struct ibq *q, const struct shift_send_wr *w)
{
    if (q->nheld == q->held_cap) {
        uint32_t cap = q->held_cap ? 2 * q->held_cap : 8;
        if (cap > HELD_MAX)
            return ENOMEM;
        struct held_wr *h = realloc(q->held, cap * sizeof *h);
        if (!h)
            return ENOMEM;
        q->held = h;
        q->held_cap = cap;
    }
    struct held_wr *h = &q->held[q->nheld];
    h->wr = *w;
    h->wr.next = NULL;
    h->wr.send_flags &= ~(unsigned)SHIFT_SEND_NO_DOORBELL;
    if ((w->send_flags & SHIFT_SEND_INLINE) && w->num_sge) {
        if (w->sg.length > sizeof h->inl)
            return EINVAL;
        memcpy(h->inl, (const void *)(uintptr_t)w->sg.addr, w->sg.length);
        h->wr.sg.addr = (uintptr_t)h->inl; /* (inline: read at post, as verbs does) */
    }
    q->nheld++;
    return 0;
}

/* Post n WRs from ws (n <= POST_BATCH); on error, *done is how many were taken. */
static int post_batch(struct ibq *q, struct shift_send_wr *const *ws, int n, int *done)
{
    struct ibv_send_wr wr[POST_BATCH], *bad = NULL;
    struct ibv_sge sge[POST_BATCH];
    *done = 0;
    for (int i = 0; i < n; i++) {
        int err = to_ibv_send(ws[i], &wr[i], &sge[i]);
        if (err) {
            n = i;
            if (!n)
                return err;
            break;
        }
        wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
    }
    wr[n - 1].next = NULL;
    int err = ibv_post_send(q->rc, wr, &bad);
    *done = err && bad ? (int)(bad - wr) : err ? 0 : n;
    return err;
}

/* the held WRs go out (the doorbell) */
static int ring_held(struct ibq *q)
{
    uint32_t i = 0;
    while (i < q->nheld) {
        struct shift_send_wr *ws[POST_BATCH];
        int n = 0, done;
        for (; n < POST_BATCH && i + (uint32_t)n < q->nheld; n++)
            ws[n] = &q->held[i + (uint32_t)n].wr;
        int err = post_batch(q, ws, n, &done);
        i += (uint32_t)done;
        if (err) {
            memmove(q->held, q->held + i, (q->nheld - i) * sizeof *q->held);
            q->nheld -= i;
            return err;
        }
    }
    q->nheld = 0;
    return 0;
}

static int b_post_send(void *c, void *qp, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    (void)c;
    struct ibq *q = qp;
    int err = 0;
    struct shift_send_wr *w = wr;
    while (w && !err) {
        if (w->send_flags & SHIFT_SEND_NO_DOORBELL) {
            err = hold(q, w);
            if (!err)
                w = w->next;
            continue;
        }
        if (q->nheld && (err = ring_held(q)))
            break; /* a WR that rings posts what was written before it */
        struct shift_send_wr *ws[POST_BATCH];
        int n = 0, done;
        for (struct shift_send_wr *v = w;
             v && n < POST_BATCH && !(v->send_flags & SHIFT_SEND_NO_DOORBELL); v = v->next)
            ws[n++] = v;
        err = post_batch(q, ws, n, &done);
        for (int i = 0; i < done; i++)
            w = w->next;
    }
    if (bad)
        *bad = err ? w : NULL;
    return err;
}

static int b_ring(void *c, void *qp)
{
    (void)c;
    return ring_held(qp);
}

static int b_post_recv(void *c, void *qp, struct shift_recv_wr *wr)
{
    (void)c;
    struct ibq *q = qp;
    for (; wr; wr = wr->next) {
        if (wr->num_sge < 0 || wr->num_sge > 1)
            return EINVAL;
        struct ibv_sge sge = {.addr = wr->sg.addr, .length = wr->sg.length,
                              .lkey = wr->sg.lkey};
        struct ibv_recv_wr r = {.wr_id = wr->wr_id, .sg_list = &sge, .num_sge = wr->num_sge},
                           *bad;
        int err = ibv_post_recv(q->rc, &r, &bad);
        if (err)
            return err;
    }
    return 0;
}

static int b_poll_cq(void *c, void *qp, int n, struct shift_wc *out)
{
    (void)c;
    struct ibq *q = qp;
    struct ibv_wc wc[POST_BATCH];
    if (n < 0 || (n && !out))
        return -EINVAL;
    if (q->nheld) { /* a QP in ERR flushes what waited for the doorbell, as a NIC would */
        enum ibv_qp_state s;
        if (!rc_state(q, &s) && s == IBV_QPS_ERR)
            ring_held(q);
    }
    int got = 0;
    for (; got < n && q->cache_n; got++, q->cache_n--) {
        from_ibv_wc(&q->cache[q->cache_head], &out[got]);
        q->cache_head = (q->cache_head + 1) % POST_BATCH;
    }
    if (got < n && q->own_cq && n - got < POST_BATCH) { /* a batch, the rest kept */
        int k = ibv_poll_cq(q->cq, POST_BATCH, q->cache);
        if (k < 0)
            return got ? got : -EIO;
        q->cache_head = 0;
        q->cache_n = k;
        return k ? got + b_poll_cq(c, qp, n - got, out + got) : got;
    }
    while (got < n) {
        int want = n - got < POST_BATCH ? n - got : POST_BATCH;
        int k = ibv_poll_cq(q->cq, want, wc);
        if (k < 0)
            return got ? got : -EIO;
        for (int i = 0; i < k; i++)
            from_ibv_wc(&wc[i], &out[got + i]);
        got += k;
        if (k < want)
            break;
    }
    return got;
}

static int b_reg_mr(void *c, int path, uint64_t addr, size_t len, int access, uint32_t *lkey,
                    uint32_t *rkey, void **mr)
{
    struct shift_ibv_ctx *x = c;
    if (!x || !path_ok(path) || !lkey || !rkey || !mr)
        return EINVAL;
    struct ibv_mr *m = ibv_reg_mr(x->pd[path], (void *)(uintptr_t)addr, len,
                                  access_flags(access));
    if (!m)
        return errno ? errno : ENOMEM;
    *lkey = m->lkey;
    *rkey = m->rkey;
    *mr = m;
    x->objects++;
    return 0;
}

static int b_dereg_mr(void *c, void *mr)
{
    struct shift_ibv_ctx *x = c;
    if (!x || !mr)
        return EINVAL;
    int err = ibv_dereg_mr(mr);
    if (!err)
        x->objects--;
    return err;
}

static int b_query_qp_num(void *c, void *qp, uint32_t *qpn)
{
    (void)c;
    *qpn = ((struct ibq *)qp)->rc->qp_num;
    return 0;
}

/* ------------------------------------------------------------ control messages --- */

/* A control message leaves while the RC QP it speaks for is in RTS: one datagram to the
 * peer's control QP, stamped with this QP's incarnation. */
static int b_ctl_send(void *c, void *qp, const void *msg, uint32_t len)
{
    (void)c;
    struct ibq *q = qp;
    enum ibv_qp_state s;
    struct ibv_wc wc[CTL_SLOTS];
    if (!msg || !len || len > CTL_MAX)
        return EINVAL;
    if (!q->ah || rc_state(q, &s) || s != IBV_QPS_RTS)
        return EIO;
    while (ibv_poll_cq(q->ctl_scq, CTL_SLOTS, wc) > 0)
        ; /* (the sends before it: done at once, their slot reused) */
    uint8_t *slot = q->ctl_buf + CTL_SLOTS * CTL_SLOT;
    uint32_t inc = htobe32(q->incarnation);
    memcpy(slot, &inc, CTL_HEAD);
    memcpy(slot + CTL_HEAD, msg, len);
    struct ibv_sge sge = {.addr = (uintptr_t)slot, .length = CTL_HEAD + len,
                          .lkey = q->ctl_mr->lkey};
    struct ibv_send_wr wr = {.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED,
                             .wr.ud = {.ah = q->ah, .remote_qpn = q->remote.ctl_qp_num,
                                       .remote_qkey = CTL_QKEY}},
                       *bad;
    int err = ibv_post_send(q->ctl, &wr, &bad);
    return err ? EIO : 0;
}

/* The oldest datagram that is a message for this QP now: its incarnation, and the RC QP
 * in RTS (else it is lost, as a control message reaching a QP not in RTS is). */
static int b_ctl_recv(void *c, void *qp, void *buf, uint32_t cap)
{
    (void)c;
    struct ibq *q = qp;
    struct ibv_wc wc;
    int k;
    while ((k = ibv_poll_cq(q->ctl_rcq, 1, &wc)) > 0) {
        uint32_t slot = (uint32_t)wc.wr_id;
        if (wc.status != IBV_WC_SUCCESS || slot >= CTL_SLOTS)
            continue; /* (flushed: ctl_up reposts every slot) */
        const uint8_t *m = q->ctl_buf + slot * CTL_SLOT + CTL_GRH;
        uint32_t len = wc.byte_len > CTL_GRH + CTL_HEAD ? wc.byte_len - CTL_GRH - CTL_HEAD : 0;
        uint32_t inc;
        memcpy(&inc, m, CTL_HEAD);
        enum ibv_qp_state s;
        int mine = len && be32toh(inc) == q->incarnation && !rc_state(q, &s) &&
                   s == IBV_QPS_RTS;
        uint32_t n = len < cap ? len : cap;
        if (mine)
            memcpy(buf, m + CTL_HEAD, n);
        int err = ctl_post_slot(q, slot);
        if (err)
            return -err;
        if (mine)
            return (int)n;
    }
    return k < 0 ? -EIO : 0;
}

/* ------------------------------------------------------------ events ------------- */

static int b_async_event(void *c, void *qp, int *event)
{
    (void)c;
    struct ibq *q = qp;
    struct ibv_async_event ev;
    if (!event)
        return -EINVAL;
    for (;;) {
        if (ibv_get_async_event(q->x->dev[q->path], &ev))
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -(errno ? errno : EIO);
        enum ibv_event_type t = ev.event_type;
        ibv_ack_async_event(&ev);
        if (t == IBV_EVENT_DEVICE_FATAL) {
            *event = SHIFT_ASYNC_DEVICE_FATAL;
            return 1;
        }
        if (t == IBV_EVENT_PORT_ACTIVE) {
            *event = SHIFT_ASYNC_PORT_ACTIVE;
            return 1;
        }
    }
}

/* ------------------------------------------------------------ set-up ------------- */

static int info_of(struct ibq *q, struct shift_path_info *out)
{
    struct ibv_port_attr pa;
    union ibv_gid gid;
    int err = ibv_query_port(q->x->dev[q->path], q->x->port, &pa);
    if (!err)
        err = ibv_query_gid(q->x->dev[q->path], q->x->port, 0, &gid);
    if (err)
        return err;
    *out = (struct shift_path_info){.qp_num = q->rc->qp_num, .psn = shift_ibv_epoch_psn(0),
                                    .lid = pa.lid, .port = q->x->port,
                                    .ctl_qp_num = q->ctl->qp_num};
    memcpy(out->gid, gid.raw, 16);
    return 0;
}

static int b_local_info(void *c, void *qp, struct shift_path_info *out)
{
    (void)c;
    return out ? info_of(qp, out) : EINVAL;
}

/* RTR towards the remote, and the control QP's address to the remote's */
static int b_rtr_qp(void *c, void *qp, const struct shift_path_info *remote)
{
    (void)c;
    struct ibq *q = qp;
    if (!remote || !remote->ctl_qp_num)
        return EINVAL; /* (no control QP: not a peer of this backend) */
    q->remote = *remote;
    q->has_remote = 1;
    struct ibv_ah_attr aa = ah_of(q);
    struct ibv_ah *ah = ibv_create_ah(q->x->pd[q->path], &aa);
    if (!ah)
        return errno ? errno : EINVAL;
    if (q->ah)
        ibv_destroy_ah(q->ah);
    q->ah = ah;
    return rc_rtr(q, remote->psn);
}

int shift_ibv_path_info(struct shift_ibv_ctx *x, int path, struct shift_path_info *out)
{
    if (!x || !path_ok(path) || !out || !x->qp[path])
        return EINVAL;
    return info_of(x->qp[path], out);
}

int shift_ibv_connect(struct shift_ibv_ctx *x, int path, const struct shift_path_info *remote)
{
    if (!x || !path_ok(path) || !remote || !x->qp[path])
        return EINVAL;
    struct ibq *q = x->qp[path];
    int err = rc_init(q);
    if (!err)
        err = b_rtr_qp(x, q, remote);
    if (!err)
        err = rc_rts(q, shift_ibv_epoch_psn(0));
    return err;
}

int shift_ibv_qp_state(struct shift_ibv_ctx *x, int path, int *state)
{
    enum ibv_qp_state s;
    if (!x || !path_ok(path) || !state || !x->qp[path])
        return EINVAL;
    int err = rc_state(x->qp[path], &s);
    if (!err)
        *state = (int)s;
    return err;
}

static const struct shift_backend_ops ibv_ops = {
    .create_qp = b_create_qp,
    .destroy_qp = b_destroy_qp,
    .modify_qp = b_modify_qp,
    .query_qp = b_query_qp,
    .reset_qp = b_reset_qp,
    .post_send = b_post_send,
    .post_recv = b_post_recv,
    .ring = b_ring,
    .poll_cq = b_poll_cq,
    .reg_mr = b_reg_mr,
    .dereg_mr = b_dereg_mr,
    .ctl_send = b_ctl_send,
    .ctl_recv = b_ctl_recv,
    .query_qp_num = b_query_qp_num,
    .async_event = b_async_event,
    .create_cq = b_create_cq,
    .destroy_cq = b_destroy_cq,
    .create_qp_cq = b_create_qp_cq,
    .local_info = b_local_info,
    .rtr_qp = b_rtr_qp,
};

const struct shift_backend_ops *shift_ibv_ops(void) { return &ibv_ops; }
