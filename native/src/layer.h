/* layer.h - private to the SHIFT layer's files (failover.c, datapath.c, pending.c,
 * endpoint.c): an endpoint's state, the records of its outstanding WRs, the control
 * message, and the functions the files share. The layer includes no simnic header: it
 * reaches a NIC only through the backend table (shift_backend_ops). */
#ifndef SHIFT_LAYER_H
#define SHIFT_LAYER_H

#include "internal.h"

enum { W_HELD = 0, W_DEFAULT = 1, W_BACKUP = 2 };
enum { PF_DONE = 1, PF_SKIPPED = 2, PF_INELIGIBLE = 4 };
enum { CTL_MAGIC = 0x53484654u, CTL_COUNTER = 1, CTL_FAILBACK = 2 };
#define PROBE_ID UINT64_MAX
#define MAX_WR 16384u

typedef struct {
    struct shift_send_wr wr;   /* as posted to the default QP: wr_id = layer sequence */
    uint64_t app_id;
    uint64_t cum;              /* two-sided sends posted up to and including this one:
                                * a two-sided WR's number (1-based) among them */
    union {
        struct {
            uint8_t where, flags;
        };
        uint16_t wf;
    };
    uint8_t inl[SHIFT_MAX_INLINE];
} pend_t;

#define NOTE(p) (two_sided((p)->wr.opcode) ? (p)->cum : 0)

typedef struct {
    struct shift_recv_wr wr;   /* wr_id = layer sequence */
    uint64_t app_id;
    uint8_t where, flags;
} rpend_t;

typedef struct {
    uint32_t magic;
    uint8_t kind;
    uint8_t want_reply;
    uint16_t pad;
    uint32_t epoch;
    uint32_t pad2;
    int64_t count;
} ctl_msg;

typedef struct {
    uint32_t k[2];
} keypair;

typedef struct ep_s {
    uint64_t h;
    const struct shift_backend_ops *ops;
    void *ctx;
    struct shift_ep_attr attr;
    void *qp[3];
    int state;
    int err_path;              /* in Error: the QP whose CQ the application drains */
    int direct;                /* the default QP's send queue holds the outstanding WRs
                                * (as posted by the application); the ring is empty */
    int can_direct;            /* the backend has sq_pending and copies are not asked */
    /* requester */
    pend_t *pq;
    uint32_t pcap;             /* WRs the layer accepts outstanding */
    uint64_t pmask;            /* ring size - 1 (a power of two >= pcap) */
    uint64_t phead, ptail;
    uint64_t cum_done;
    uint64_t notes_posted, sends_completed;
    uint64_t fence_seq;
    int has_fence;
    /* responder */
    rpend_t *rpend;            /* the outstanding receive WRs (the spec's rpend) */
    uint32_t rcap;
    uint64_t rmask;
    uint64_t rhead, rtail;
    uint64_t recvs_posted, recv_done;
    /* completions held for the application */
    struct shift_wc *buf;
    uint32_t bcap;
    uint64_t bmask;
    uint64_t bhead, btail;
    uint64_t ndeferred;        /* skipped notifications whose success waits (replay) */
    uint64_t known_exec;       /* WRs before this sequence were executed (replay) */
    /* failover */
    int sent_ctr, replayed, probing;
    int64_t peer_ctr;
    uint32_t epoch, peer_epoch, ctl_left;
    int owned;                 /* a connection holds it: shift_ep_destroy says EBUSY */
    keypair *lk, *rk;
    int nlk, caplk, nrk, caprk;
    void **mrs;
    int nmr, capmr;
    struct shift_ep_info st; /* statistics part */
} ep_s;

static inline ep_s *ep_get(shift_ep h) { return h_get(h, H_EP); }
static inline int is_req(const ep_s *e) { return e->attr.role == SHIFT_ROLE_REQUESTER; }
static inline int failover(const ep_s *e) { return e->attr.design != SHIFT_DESIGN_NO_FAILOVER; }
/* SHIFT's machinery (counter filter, refusal, fail-back): Shift and ShiftPrefix */
static inline int is_shift(const ep_s *e)
{
    return e->attr.design == SHIFT_DESIGN_SHIFT || e->attr.design == SHIFT_DESIGN_SHIFT_PREFIX;
}
/* the replay also skips the WRs before the last notification the peer counted */
static inline int skips_prefix(const ep_s *e)
{
    return e->attr.design == SHIFT_DESIGN_SHIFT_PREFIX;
}

/* the opcodes that consume a receive WR at the peer (its notifications); the
 * failure-free paths index it with op & 7 and leave an unknown opcode to the backend */
static const uint8_t notifies[8] = {
    [SHIFT_WR_RDMA_WRITE_WITH_IMM] = 1, [SHIFT_WR_SEND] = 1, [SHIFT_WR_SEND_WITH_IMM] = 1};

static inline int two_sided(int op) { return op >= 0 && op < 8 && notifies[op]; }

/* The backend's poll: up to n completions, or -errno. A count beyond n is not
 * believed (the layer reads no further than it asked). */
static inline int poll_backend(ep_s *e, int path, int n, struct shift_wc *wc)
{
    int r = e->ops->poll_cq(e->ctx, e->qp[path], n, wc);
    return r > n ? n : r;
}

static inline pend_t *pend_at(ep_s *e, uint64_t seq)
{
    if (seq < e->phead || seq >= e->ptail)
        return NULL;
    return &e->pq[seq & e->pmask];
}

static inline rpend_t *rpend_at(ep_s *e, uint64_t seq)
{
    if (seq < e->rhead || seq >= e->rtail)
        return NULL;
    return &e->rpend[seq & e->rmask];
}

static inline void pend_gc(ep_s *e)
{
    while (e->phead < e->ptail && (e->pq[e->phead & e->pmask].flags & PF_DONE))
        e->phead++;
}

static inline void rpend_gc(ep_s *e)
{
    while (e->rhead < e->rtail && (e->rpend[e->rhead & e->rmask].flags & PF_DONE))
        e->rhead++;
}

/* ------------------------------------------------- functions its files share ---- */
/* pending.c: the records of outstanding WRs and the completions held back */
INTERNAL void buf_push(ep_s *e, const struct shift_wc *wc);
INTERNAL void buf_send(ep_s *e, const pend_t *p, int status);
INTERNAL void buf_recv(ep_s *e, uint64_t app_id, int status);
INTERNAL void pend_done(ep_s *e, pend_t *p);
INTERNAL void release_skipped(ep_s *e);
INTERNAL void complete_upto(ep_s *e, uint64_t seq);
INTERNAL int settle_report(ep_s *e, pend_t *p, const struct shift_wc *wc, int report,
                           struct shift_wc *out);
INTERNAL int post_pend(ep_s *e, pend_t *p, int path, int nodb);
INTERNAL int post_rpend(ep_s *e, rpend_t *r, int path);
INTERNAL void pend_fill(pend_t *p, const struct shift_send_wr *w, uint64_t seq);
INTERNAL void direct_count(ep_s *e, uint64_t *outstanding, uint64_t *notes);
INTERNAL void direct_sync(ep_s *e, uint64_t nnotes);
INTERNAL void materialize(ep_s *e);
/* failover.c: the failover starts (from a failed post or an error completion) */
INTERNAL void trigger(ep_s *e, int status);
/* endpoint.c: the backup NIC's key of a default NIC's key */
INTERNAL uint32_t xlate(const keypair *t, int n, uint32_t key);

#endif
