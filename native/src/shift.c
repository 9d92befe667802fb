/*
 * shift.c - the SHIFT failover core over a table of verbs operations.
 *
 * The machine is the one of spec/Failover.tla; the comments name its actions.
 * Where the specification abstracts, this file says what it does instead.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
    rpend_t *rq;
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

static ep_s *ep_get(shift_ep h) { return h_get(h, H_EP); }
static int is_req(const ep_s *e) { return e->attr.role == SHIFT_ROLE_REQUESTER; }
static int failover(const ep_s *e) { return e->attr.design != SHIFT_DESIGN_NO_FAILOVER; }
static int is_shift(const ep_s *e) { return e->attr.design == SHIFT_DESIGN_SHIFT; }

/* the opcodes that consume a receive WR at the peer (its notifications); the
 * failure-free paths index it with op & 7 and leave an unknown opcode to the backend */
static const uint8_t notifies[8] = {
    [SHIFT_WR_RDMA_WRITE_WITH_IMM] = 1, [SHIFT_WR_SEND] = 1, [SHIFT_WR_SEND_WITH_IMM] = 1};

static int two_sided(int op) { return op >= 0 && op < 8 && notifies[op]; }

static int atomic_op(int op)
{
    return op == SHIFT_WR_ATOMIC_CMP_AND_SWP || op == SHIFT_WR_ATOMIC_FETCH_AND_ADD;
}

static int wc_op(int op)
{
    switch (op) {
    case SHIFT_WR_RDMA_WRITE:
    case SHIFT_WR_RDMA_WRITE_WITH_IMM:
        return SHIFT_WC_RDMA_WRITE;
    case SHIFT_WR_RDMA_READ:
        return SHIFT_WC_RDMA_READ;
    case SHIFT_WR_ATOMIC_CMP_AND_SWP:
        return SHIFT_WC_COMP_SWAP;
    case SHIFT_WR_ATOMIC_FETCH_AND_ADD:
        return SHIFT_WC_FETCH_ADD;
    default:
        return SHIFT_WC_SEND;
    }
}

/* errors a post returns for a bad WR or a full queue: the application's, not a path's */
static int app_error(int err) { return err == EINVAL || err == ENOMEM; }

/* Completion errors that say the path failed (the trigger). The others (protection,
 * access, invalid request, length) are the application's: re-executing the WR on
 * another path would fail the same way, so they reach the application as on plain RC. */
static int path_error(int status)
{
    switch (status) {
    case SHIFT_WC_WR_FLUSH_ERR:
    case SHIFT_WC_RETRY_EXC_ERR:
    case SHIFT_WC_RNR_RETRY_EXC_ERR:
    case SHIFT_WC_FATAL_ERR:
    case SHIFT_WC_RESP_TIMEOUT_ERR:
    case SHIFT_WC_GENERAL_ERR:
    case SHIFT_WC_REM_ABORT_ERR:
        return 1;
    default:
        return 0;
    }
}

/* The backend's poll: up to n completions, or -errno. A count beyond n is not
 * believed (the layer reads no further than it asked). */
static inline int poll_backend(ep_s *e, int path, int n, struct shift_wc *wc)
{
    int r = e->ops->poll_cq(e->ctx, e->qp[path], n, wc);
    return r > n ? n : r;
}

/* ----------------------------------------------------------- buffers ------- */

static void buf_push(ep_s *e, const struct shift_wc *wc)
{
    /* the posts keep outstanding + buffered <= capacity, so this always fits */
    if (e->btail - e->bhead >= e->bcap)
        return;
    e->buf[e->btail & e->bmask] = *wc;
    e->btail++;
}

static void buf_send(ep_s *e, const pend_t *p, int status)
{
    struct shift_wc wc = {0};
    wc.wr_id = p->app_id;
    wc.status = status;
    wc.opcode = wc_op(p->wr.opcode);
    wc.byte_len = p->wr.num_sge ? p->wr.sg.length : 0;
    buf_push(e, &wc);
}

static void buf_recv(ep_s *e, uint64_t app_id, int status)
{
    struct shift_wc wc = {0};
    wc.wr_id = app_id;
    wc.status = status;
    wc.opcode = SHIFT_WC_RECV;
    buf_push(e, &wc);
}

static pend_t *pend_at(ep_s *e, uint64_t seq)
{
    if (seq < e->phead || seq >= e->ptail)
        return NULL;
    return &e->pq[seq & e->pmask];
}

static rpend_t *rpend_at(ep_s *e, uint64_t seq)
{
    if (seq < e->rhead || seq >= e->rtail)
        return NULL;
    return &e->rq[seq & e->rmask];
}

static void pend_gc(ep_s *e)
{
    while (e->phead < e->ptail && (e->pq[e->phead & e->pmask].flags & PF_DONE))
        e->phead++;
}

static void rpend_gc(ep_s *e)
{
    while (e->rhead < e->rtail && (e->rq[e->rhead & e->rmask].flags & PF_DONE))
        e->rhead++;
}

static void pend_done(ep_s *e, pend_t *p)
{
    p->flags |= PF_DONE;
    if (NOTE(p))
        e->st.sends_completed++;
}

/* A replay skipped a notification the peer had: report its success once every kept
 * signaled WR before it has completed, so the application sees post order. */
static void release_skipped(ep_s *e)
{
    if (!e->ndeferred)
        return;
    for (uint64_t s = e->phead; s < e->ptail; s++) {
        pend_t *p = &e->pq[s & e->pmask];
        if (p->flags & PF_DONE)
            continue;
        if (p->flags & PF_SKIPPED) {
            buf_send(e, p, SHIFT_WC_SUCCESS);
            pend_done(e, p);
            e->ndeferred--;
            continue;
        }
        if (p->wr.send_flags & SHIFT_SEND_SIGNALED)
            break;
    }
    pend_gc(e);
}

/* a successful completion of seq: every WR up to it is complete (RC order) */
static void complete_upto(ep_s *e, uint64_t seq)
{
    pend_t *last = pend_at(e, seq);
    if (last && last->cum > e->cum_done)
        e->cum_done = last->cum;
    for (uint64_t s = e->phead; s <= seq && s < e->ptail; s++) {
        pend_t *p = &e->pq[s & e->pmask];
        if (p->flags & PF_DONE)
            continue;
        if (p->flags & PF_SKIPPED) {
            e->ndeferred--;
            if (s != seq)
                buf_send(e, p, SHIFT_WC_SUCCESS);
        }
        pend_done(e, p);
    }
    pend_gc(e);
}

/* A completion of p settles every WR up to it (RC order). The application gets, in
 * post order: the skipped notifications before p, then wc if report, then those p's
 * completion released after it. 1 and *out the first of them, or 0 if none. */
static int settle_report(ep_s *e, pend_t *p, const struct shift_wc *wc, int report,
                         struct shift_wc *out)
{
    complete_upto(e, p->wr.wr_id);
    if (report)
        buf_push(e, wc);
    release_skipped(e);
    if (e->bhead == e->btail)
        return 0;
    *out = e->buf[e->bhead & e->bmask];
    e->bhead++;
    return 1;
}

/* ------------------------------------------------------------ keys ---------- */

static uint32_t xlate(const keypair *t, int n, uint32_t key)
{
    for (int i = 0; i < n; i++)
        if (t[i].k[0] == key)
            return t[i].k[1];
    return key;
}

static int keys_add(keypair **t, int *n, int *cap, uint32_t a, uint32_t b)
{
    for (int i = 0; i < *n; i++)
        if ((*t)[i].k[0] == a) {
            (*t)[i].k[1] = b;
            return 0;
        }
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 8;
        keypair *x = realloc(*t, (size_t)c * sizeof *x);
        if (!x)
            return ENOMEM;
        *t = x;
        *cap = c;
    }
    (*t)[*n].k[0] = a;
    (*t)[*n].k[1] = b;
    (*n)++;
    return 0;
}

/* ------------------------------------------------------------ posting ------- */

static int post_pend(ep_s *e, pend_t *p, int path, int nodb)
{
    p->wr.next = NULL;
    if (path == 1 && !nodb)
        return e->ops->post_send(e->ctx, e->qp[1], &p->wr, NULL);
    struct shift_send_wr w = p->wr;
    if (path == 2) {
        if (w.num_sge && !(w.send_flags & SHIFT_SEND_INLINE))
            w.sg.lkey = xlate(e->lk, e->nlk, w.sg.lkey);
        w.rkey = xlate(e->rk, e->nrk, w.rkey);
    }
    if (nodb)
        w.send_flags |= SHIFT_SEND_NO_DOORBELL;
    return e->ops->post_send(e->ctx, e->qp[path], &w, NULL);
}

static int post_rpend(ep_s *e, rpend_t *r, int path)
{
    if (path == 1)
        return e->ops->post_recv(e->ctx, e->qp[1], &r->wr);
    struct shift_recv_wr w = r->wr;
    if (w.num_sge)
        w.sg.lkey = xlate(e->lk, e->nlk, w.sg.lkey);
    return e->ops->post_recv(e->ctx, e->qp[2], &w);
}

static void send_counter(ep_s *e, int want_reply)
{
    ctl_msg m = {CTL_MAGIC, CTL_COUNTER, (uint8_t)want_reply, 0, e->epoch, 0,
                 is_req(e) ? 0 : (int64_t)e->recv_done};
    if (e->ops->ctl_send(e->ctx, e->qp[2], &m, sizeof m) == 0)
        e->st.ctl_sent++;
}

/* --------------------------------------------------------- Trigger ---------- */

/* Take the good completions at the head of path's CQ for the application, discard
 * what follows the first error. */
static void drain(ep_s *e, int path)
{
    struct shift_wc wc;
    int good = 1;
    while (poll_backend(e, path, 1, &wc) == 1) {
        if (wc.wr_id == PROBE_ID && !e->direct)
            continue;
        if (wc.status != SHIFT_WC_SUCCESS)
            good = 0;
        if (!good)
            continue;
        if (e->direct) {
            if (!(wc.opcode & SHIFT_WC_RECV))
                buf_push(e, &wc); /* the application's own wr_id */
        } else if (is_req(e)) {
            pend_t *p = pend_at(e, wc.wr_id);
            if (!p || (p->flags & PF_DONE))
                continue;
            if (wc.opcode & SHIFT_WC_RECV)
                continue;
            wc.wr_id = p->app_id;
            complete_upto(e, p->wr.wr_id); /* (what it releases comes before this one) */
            buf_push(e, &wc);
        } else {
            rpend_t *r = rpend_at(e, wc.wr_id);
            if (!r || (r->flags & PF_DONE))
                continue;
            wc.wr_id = r->app_id;
            buf_push(e, &wc);
            r->flags |= PF_DONE;
            e->recv_done++;
        }
    }
    if (is_req(e))
        pend_gc(e);
    else
        rpend_gc(e);
}

/* Fill a pending entry from a WR as the application posted it. */
static void pend_fill(pend_t *p, const struct shift_send_wr *w, uint64_t seq)
{
    p->wr = *w;
    p->wr.next = NULL;
    p->wr.wr_id = seq;
    p->wr.send_flags &= ~(unsigned)SHIFT_SEND_INELIGIBLE;
    p->app_id = w->wr_id;
    p->where = W_DEFAULT;
    p->flags = (w->send_flags & SHIFT_SEND_INELIGIBLE) ? PF_INELIGIBLE : 0;
    if ((w->send_flags & SHIFT_SEND_INLINE) && w->num_sge && w->sg.length) {
        memcpy(p->inl, (const void *)(uintptr_t)w->sg.addr, w->sg.length);
        p->wr.sg.addr = (uint64_t)(uintptr_t)p->inl;
    }
}

/* The WRs the default QP's send queue still holds for the layer (direct mode): how
 * many are outstanding (no polled completion covers them) and how many of those
 * and of the ones an error covers are notifications. */
static void direct_count(ep_s *e, uint64_t *outstanding, uint64_t *notes)
{
    struct shift_send_wr w;
    int r;
    *outstanding = *notes = 0;
    for (uint32_t i = 0; i < e->pcap && (r = e->ops->sq_pending(e->ctx, e->qp[1], i, &w)) >= 0;
         i++) {
        *outstanding += r == 0;
        *notes += (uint64_t)two_sided(w.opcode);
    }
}

/* Direct mode: the notifications known complete are those posted that the send queue
 * no longer holds (nnotes of them it still does). Never believed beyond what was posted,
 * and never going back: a backend's answer can only add to what was known. */
static void direct_sync(ep_s *e, uint64_t nnotes)
{
    uint64_t done = e->notes_posted > nnotes ? e->notes_posted - nnotes : 0;
    if (done > e->cum_done) {
        e->st.sends_completed += done - e->cum_done;
        e->cum_done = done;
    }
}

/* Leave direct mode at a failure (after the drain): the WRs the default QP's send
 * queue holds become pending entries, as post_fast would have made them. */
static void materialize(ep_s *e)
{
    struct shift_send_wr w;
    uint64_t notes = 0, first = e->ptail;
    for (uint32_t i = 0; i < e->pcap && e->ops->sq_pending(e->ctx, e->qp[1], i, &w) >= 0;
         i++) {
        if (shift_send_wr_check(&w, SHIFT_MAX_INLINE))
            break; /* not a WR the layer could have posted: read no further */
        pend_t *p = &e->pq[e->ptail & e->pmask];
        pend_fill(p, &w, e->ptail);
        notes += (uint64_t)two_sided(w.opcode);
        p->cum = notes;
        e->ptail++;
    }
    direct_sync(e, notes);
    for (uint64_t s2 = first; s2 < e->ptail; s2++)
        e->pq[s2 & e->pmask].cum += e->cum_done;
    if (e->cum_done + notes > e->notes_posted) {
        /* the send queue holds more than the layer counted: it is the truth here */
        e->st.sends_posted += e->cum_done + notes - e->notes_posted;
        e->notes_posted = e->cum_done + notes;
    }
    e->direct = 0;
}

/* Trigger: move the default QP to ERR (stale packets on the dead path can no longer
 * execute), drain its CQ, and either refuse (atomic or ineligible WR outstanding) or
 * enter Fallback with every outstanding WR held for replay. */
static void trigger(ep_s *e, int status)
{
    e->ops->modify_qp(e->ctx, e->qp[1], SHIFT_QPS_ERR, 0, 0);
    drain(e, 1);
    if (e->direct)
        materialize(e);
    e->epoch++;
    e->sent_ctr = 0;
    e->replayed = 0;
    e->probing = 0;
    e->ctl_left = e->attr.ctl_retries;
    if (is_req(e)) {
        int refuse = 0;
        if (is_shift(e))
            for (uint64_t s = e->phead; s < e->ptail; s++) {
                pend_t *p = &e->pq[s & e->pmask];
                if (!(p->flags & PF_DONE) &&
                    (atomic_op(p->wr.opcode) || (p->flags & PF_INELIGIBLE)))
                    refuse = 1;
            }
        if (refuse) {
            int first = 1;
            for (uint64_t s = e->phead; s < e->ptail; s++) {
                pend_t *p = &e->pq[s & e->pmask];
                if (p->flags & PF_DONE)
                    continue;
                buf_send(e, p, first ? status : SHIFT_WC_WR_FLUSH_ERR);
                p->flags |= PF_DONE;
                first = 0;
                e->st.refused_wrs++;
            }
            pend_gc(e);
            e->state = SHIFT_STATE_ERROR;
            e->err_path = 1;
            return;
        }
        for (uint64_t s = e->phead; s < e->ptail; s++)
            e->pq[s & e->pmask].where = W_HELD;
    } else {
        for (uint64_t s = e->rhead; s < e->rtail; s++)
            e->rq[s & e->rmask].where = W_HELD;
    }
    e->st.failovers++;
    e->state = SHIFT_STATE_FALLBACK;
}

/* Both paths are gone (the handshake got no answer): surface the error. */
static void give_up(ep_s *e, int status)
{
    e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_ERR, 0, 0);
    drain(e, 2);
    int first = 1;
    if (is_req(e)) {
        for (uint64_t s = e->phead; s < e->ptail; s++) {
            pend_t *p = &e->pq[s & e->pmask];
            if (p->flags & PF_DONE)
                continue;
            buf_send(e, p, first ? status : SHIFT_WC_WR_FLUSH_ERR);
            p->flags |= PF_DONE;
            first = 0;
        }
        e->ndeferred = 0;
        pend_gc(e);
    } else {
        for (uint64_t s = e->rhead; s < e->rtail; s++) {
            rpend_t *r = &e->rq[s & e->rmask];
            if (r->flags & PF_DONE)
                continue;
            buf_recv(e, r->app_id, SHIFT_WC_WR_FLUSH_ERR);
            r->flags |= PF_DONE;
        }
        rpend_gc(e);
    }
    e->state = SHIFT_STATE_ERROR;
    e->err_path = 2;
}

/* ------------------------------------------------------- the steps --------- */

/* Handshake: repost the outstanding receive WRs on the backup QP, then send the
 * receive counter over the backup path. */
static void handshake(ep_s *e)
{
    if (!is_req(e))
        for (uint64_t s = e->rhead; s < e->rtail; s++) {
            rpend_t *r = &e->rq[s & e->rmask];
            if ((r->flags & PF_DONE) || r->where != W_HELD)
                continue;
            post_rpend(e, r, 2);
            r->where = W_BACKUP;
        }
    send_counter(e, e->peer_ctr < 0);
    e->sent_ctr = 1;
}

/* Replay: re-post the outstanding sends on the backup QP in post order, skipping the
 * notifications the peer's receive counter shows as received (SHIFT only). */
static void replay(ep_s *e)
{
    int blocked = 0;
    for (uint64_t s = e->phead; s < e->ptail; s++) {
        pend_t *p = &e->pq[s & e->pmask];
        if (p->flags & PF_DONE)
            continue;
        if (is_shift(e) && NOTE(p) && (int64_t)NOTE(p) <= e->peer_ctr) {
            /* the peer received it, so every WR before it on the default QP executed */
            if (s > e->known_exec)
                e->known_exec = s;
            e->st.skipped_wrs++;
            if ((p->wr.send_flags & SHIFT_SEND_SIGNALED) && blocked) {
                p->flags |= PF_SKIPPED;
                e->ndeferred++;
            } else {
                if (p->wr.send_flags & SHIFT_SEND_SIGNALED)
                    buf_send(e, p, SHIFT_WC_SUCCESS);
                pend_done(e, p);
            }
            continue;
        }
        int err = post_pend(e, p, 2, 0);
        if (err && e->state != SHIFT_STATE_ERROR) {
            /* the backup QP refused the WR: the path is unusable. It goes to ERR and
             * this WR and the rest are posted to it, so that each flushes after the
             * ones before it (post order), as posts in Error do */
            e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_ERR, 0, 0);
            e->state = SHIFT_STATE_ERROR;
            e->err_path = 2;
            err = post_pend(e, p, 2, 0);
        }
        if (err) { /* not even the dead QP takes it: report it now */
            buf_send(e, p, SHIFT_WC_WR_FLUSH_ERR);
            p->flags |= PF_DONE;
            continue;
        }
        p->where = W_BACKUP;
        e->st.replayed_wrs++;
        if (p->wr.send_flags & SHIFT_SEND_SIGNALED)
            blocked = 1;
    }
    pend_gc(e);
    e->replayed = 1;
}

/* Reconnect: the connection manager re-establishes the default QP pair (fails unless
 * the path is healthy); then the probe, or straight to WaitSignaled. */
static int reconnect(ep_s *e)
{
    if (e->ops->reset_qp(e->ctx, e->qp[1]) != 0)
        return SHIFT_STEP_NONE;
    struct shift_wc wc;
    while (poll_backend(e, 1, 1, &wc) == 1)
        ;
    if (e->attr.flags & SHIFT_EP_WIRE_PROBE) {
        struct shift_send_wr probe = {0};
        probe.wr_id = PROBE_ID;
        probe.opcode = SHIFT_WR_RDMA_WRITE;
        probe.send_flags = SHIFT_SEND_SIGNALED;
        if (e->ops->post_send(e->ctx, e->qp[1], &probe, NULL) != 0)
            return SHIFT_STEP_NONE;
        e->probing = 1;
    } else {
        e->state = SHIFT_STATE_WAIT_SIGNALED;
    }
    return SHIFT_STEP_RECONNECT;
}

static int probe_check(ep_s *e)
{
    struct shift_wc wc;
    while (poll_backend(e, 1, 1, &wc) == 1) {
        if (wc.wr_id != PROBE_ID)
            continue;
        e->probing = 0;
        if (wc.status == SHIFT_WC_SUCCESS) {
            e->state = SHIFT_STATE_WAIT_SIGNALED;
            return SHIFT_STEP_PROBE_DONE;
        }
        return SHIFT_STEP_PROBE_FAILED;
    }
    return SHIFT_STEP_NONE;
}

static int fence_done(ep_s *e)
{
    pend_t *p = pend_at(e, e->fence_seq);
    return !p || (p->flags & PF_DONE);
}

/* Release: the fence completed on the backup path, so every WR before it did:
 * notify the peer on the default path alone, then ring the default doorbell. */
static void release(ep_s *e)
{
    ctl_msg m = {CTL_MAGIC, CTL_FAILBACK, 0, 0, e->epoch, 0, 0};
    if (e->ops->ctl_send(e->ctx, e->qp[1], &m, sizeof m) == 0)
        e->st.ctl_sent++;
    e->ops->ring(e->ctx, e->qp[1]);
    e->state = SHIFT_STATE_DEFAULT;
    e->has_fence = 0;
    e->sent_ctr = 0;
    e->peer_ctr = -1;
    e->replayed = 0;
    e->st.failbacks++;
}

/* The responder, on the fail-back notice: move the outstanding receive WRs back to
 * the default QP. Verbs cannot unpost a receive, so the backup QP goes to ERR (its
 * receives come back flushed), its good completions are kept for the application,
 * the receives are posted on the default QP in order, and the backup QP is brought
 * back to RTS with the PSNs it had, ready for the next failover. */
static void move_receives_back(ep_s *e)
{
    int st = 0;
    uint32_t rq_psn = 0, sq_psn = 0;
    e->ops->query_qp(e->ctx, e->qp[2], &st, &rq_psn, &sq_psn);
    e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_ERR, 0, 0);
    drain(e, 2);
    for (uint64_t s = e->rhead; s < e->rtail; s++) {
        rpend_t *r = &e->rq[s & e->rmask];
        if (r->flags & PF_DONE)
            continue;
        post_rpend(e, r, 1);
        r->where = W_DEFAULT;
    }
    if (st == SHIFT_QPS_RTS) {
        e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_RESET, 0, 0);
        e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_INIT, 0, 0);
        e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_RTR, rq_psn, 0);
        e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_RTS, 0, sq_psn);
    }
    e->state = SHIFT_STATE_DEFAULT;
    e->sent_ctr = 0;
    e->peer_ctr = -1;
}

int shift_progress(shift_ep h)
{
    ep_s *e = ep_get(h);
    if (!e)
        return -EINVAL;
    if (!failover(e) || e->state == SHIFT_STATE_ERROR)
        return SHIFT_STEP_NONE;
    if (e->state == SHIFT_STATE_DEFAULT && e->peer_ctr >= 0) {
        trigger(e, SHIFT_WC_WR_FLUSH_ERR);
        return SHIFT_STEP_TRIGGER;
    }
    if (e->state == SHIFT_STATE_FALLBACK && !e->sent_ctr) {
        handshake(e);
        return SHIFT_STEP_HANDSHAKE;
    }
    if (!is_req(e))
        return SHIFT_STEP_NONE;
    if (e->state == SHIFT_STATE_FALLBACK && e->peer_ctr >= 0 && !e->replayed) {
        replay(e);
        return SHIFT_STEP_REPLAY;
    }
    if (is_shift(e) && e->state == SHIFT_STATE_FALLBACK && e->replayed)
        return e->probing ? probe_check(e) : reconnect(e);
    if (e->state == SHIFT_STATE_WAIT_DRAINED && fence_done(e)) {
        release(e);
        return SHIFT_STEP_RELEASE;
    }
    return SHIFT_STEP_NONE;
}

int shift_timer(shift_ep h, int path)
{
    ep_s *e = ep_get(h);
    if (!e)
        return -EINVAL;
    if (path != 1 && path != 2)
        return -EINVAL;
    if (path != 2 || e->state != SHIFT_STATE_FALLBACK || !e->sent_ctr || e->peer_ctr >= 0)
        return 0;
    if (e->ctl_left > 0) {
        e->ctl_left--;
        send_counter(e, 1);
    } else {
        give_up(e, SHIFT_WC_RETRY_EXC_ERR);
    }
    return 1;
}

int shift_ctl_input(shift_ep h, int path, const void *msg, uint32_t len)
{
    ep_s *e = ep_get(h);
    if (!e)
        return EINVAL;
    if ((path != 1 && path != 2) || !msg || len != sizeof(ctl_msg))
        return EINVAL;
    ctl_msg m;
    memcpy(&m, msg, sizeof m);
    if (m.magic != CTL_MAGIC || (m.kind != CTL_COUNTER && m.kind != CTL_FAILBACK) ||
        m.count < 0)
        return EINVAL; /* (a receive counter is never negative) */
    e->st.ctl_received++;
    if (!failover(e) || e->state == SHIFT_STATE_ERROR)
        return 0;
    if (m.kind == CTL_FAILBACK) {
        if (!is_req(e) && e->state == SHIFT_STATE_FALLBACK)
            move_receives_back(e);
        return 0;
    }
    if (m.epoch > e->peer_epoch) {
        e->peer_epoch = m.epoch;
        if (e->state != SHIFT_STATE_DEFAULT && e->sent_ctr && e->peer_ctr >= 0) {
            /* The peer started another failover while this side still sits on the
             * backup path from the last one (it missed the fail-back notice): count
             * what arrived on the backup QP and answer again. */
            if (!is_req(e))
                drain(e, 2);
            e->epoch++;
            e->peer_ctr = m.count;
            send_counter(e, 0);
            return 0;
        }
        e->peer_ctr = m.count;
    } else if (m.epoch == e->peer_epoch) {
        /* a retransmission: the peer may have lost our counter */
        if (e->state != SHIFT_STATE_DEFAULT && e->peer_ctr < 0)
            e->peer_ctr = m.count;
        if (m.want_reply && e->sent_ctr && e->state != SHIFT_STATE_DEFAULT)
            send_counter(e, e->peer_ctr < 0);
    }
    return 0;
}

/* ------------------------------------------------------------ posting API --- */

/* The failure-free path (state Default): copy the application's chain into the
 * pending ring, chained, and hand it to the backend in one call; the backend checks
 * the WRs as a NIC driver does, and only what it accepted is committed. */
COLD_PATH static int post_fast(ep_s *e, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    const unsigned rare = SHIFT_SEND_NO_DOORBELL | SHIFT_SEND_INLINE | SHIFT_SEND_INELIGIBLE;
    const size_t body = sizeof *wr - offsetof(struct shift_send_wr, sg);
    uint64_t start = e->ptail, seq = start;
    uint64_t room = e->pcap - ((e->ptail - e->phead) + (e->btail - e->bhead));
    uint64_t notes = e->notes_posted;
    uint64_t idx = start & e->pmask, to_end = e->pmask + 1 - idx;
    pend_t *ring = e->pq, *p = &ring[idx], *first = p;
    /* one bound per contiguous run of the ring: its end, or the room left */
    pend_t *stop = p + (room < to_end ? room : to_end);
    struct shift_send_wr *w = wr;
    int err = 0;
    while (w) {
        if (p == stop) {
            if (seq - start == room) {
                err = ENOMEM;
                break;
            }
            p[-1].wr.next = &ring->wr; /* the chain wraps with the ring */
            p = ring;
            stop = ring + (room - (seq - start));
        }
        struct shift_send_wr *next = w->next;
        uint64_t id = w->wr_id;
        unsigned fl = w->send_flags;
        int op = w->opcode;
        memcpy(&p->wr.sg, &w->sg, body);
        p->wr.wr_id = seq;
        p->wr.next = &p[1].wr; /* the last one is cut below */
        p->app_id = id;
        p->wf = W_DEFAULT; /* where = Default, flags = 0 */
        if (fl & rare) {
            if ((fl & SHIFT_SEND_NO_DOORBELL) ||
                ((fl & SHIFT_SEND_INLINE) && shift_send_wr_check(w, SHIFT_MAX_INLINE))) {
                err = EINVAL;
                break;
            }
            if (fl & SHIFT_SEND_INELIGIBLE) {
                p->wr.send_flags &= ~(unsigned)SHIFT_SEND_INELIGIBLE;
                p->flags = PF_INELIGIBLE;
            }
            if ((fl & SHIFT_SEND_INLINE) && w->num_sge && w->sg.length) {
                memcpy(p->inl, (const void *)(uintptr_t)w->sg.addr, w->sg.length);
                p->wr.sg.addr = (uint64_t)(uintptr_t)p->inl;
            }
        }
        notes += notifies[op & 7]; /* an unknown opcode is the backend's to refuse */
        p->cum = notes;
        p++;
        seq++;
        w = next;
    }
    if (seq != start)
        ring[(seq - 1) & e->pmask].wr.next = NULL;
    uint64_t n = seq - start, ok = n;
    int berr = 0;
    if (n) {
        struct shift_send_wr *bw = NULL;
        berr = e->ops->post_send(e->ctx, e->qp[1], &first->wr, &bw);
        if (berr) {
            /* which pending entry the backend stopped at */
            ok = 0;
            for (uint64_t s2 = start; s2 < seq; s2++, ok++)
                if (&e->pq[s2 & e->pmask].wr == bw)
                    break;
            if (!app_error(berr) && failover(e))
                ok = n; /* the path failed: keep them all, held for the replay */
        }
        /* (the chain's next pointers stay: post_pend resets them before any re-post) */
        uint64_t cum = ok ? e->pq[(start + ok - 1) & e->pmask].cum : e->notes_posted;
        e->st.sends_posted += cum - e->notes_posted;
        e->notes_posted = cum;
        e->ptail = start + ok;
    }
    if (berr && !app_error(berr) && failover(e)) {
        for (uint64_t s2 = start; s2 < start + ok; s2++)
            e->pq[s2 & e->pmask].where = W_HELD;
        trigger(e, SHIFT_WC_WR_FLUSH_ERR);
        berr = 0;
        if (!err && bad)
            *bad = NULL;
    }
    if (berr || err) {
        /* report the application's WR at which the post stopped */
        struct shift_send_wr *a = wr;
        for (uint64_t i = 0; i < ok && a; i++)
            a = a->next;
        if (bad)
            *bad = a;
        return berr ? berr : err;
    }
    if (bad)
        *bad = NULL;
    return 0;
}

static int post_slow(ep_s *e, struct shift_send_wr *wr, struct shift_send_wr **bad);

/* post_direct's failed post: the backend stopped at bw with err (an acyclic chain of
 * at most a queue's worth, so bw tells how many it took). */
COLD_PATH static int post_direct_rest(ep_s *e, struct shift_send_wr *wr, int err,
                                      struct shift_send_wr *bw, struct shift_send_wr **bad)
{
    uint64_t notes = 0;
    for (struct shift_send_wr *w = wr; w && w != bw; w = w->next)
        notes += (uint64_t)two_sided(w->opcode);
    e->notes_posted += notes;
    e->st.sends_posted += notes;
    if (!app_error(err) && failover(e) && e->state == SHIFT_STATE_DEFAULT) {
        /* the path failed under the post: what it took is replayed, the rest was never
         * posted and goes as a post in the new state */
        trigger(e, SHIFT_WC_WR_FLUSH_ERR);
        if (bw)
            return post_slow(e, bw, bad);
        err = 0;
    }
    if (bad)
        *bad = err ? bw : NULL;
    return err;
}

/* post_direct's rare chains: longer than the queue (or cyclic), or carrying the layer's
 * doorbell flag. One WR at a time, each from a copy cut from the chain, at most a
 * queue's worth: the count of what the backend took stays exact and a cycle ends in
 * ENOMEM, as a full send queue does. */
COLD_PATH static int post_direct_each(ep_s *e, struct shift_send_wr *wr,
                                      struct shift_send_wr **bad)
{
    struct shift_send_wr *w = wr;
    int err = 0;
    for (uint32_t n = 0; w; w = w->next, n++) {
        if (n == e->pcap) {
            err = ENOMEM;
            break;
        }
        if (w->send_flags & SHIFT_SEND_NO_DOORBELL) {
            err = EINVAL;
            break;
        }
        struct shift_send_wr one = *w;
        one.next = NULL;
        err = e->ops->post_send(e->ctx, e->qp[1], &one, NULL);
        if (err)
            break;
        e->notes_posted += (uint64_t)two_sided(w->opcode);
        e->st.sends_posted += (uint64_t)two_sided(w->opcode);
    }
    if (err && !app_error(err) && failover(e) && e->state == SHIFT_STATE_DEFAULT) {
        trigger(e, SHIFT_WC_WR_FLUSH_ERR);
        return post_slow(e, w, bad);
    }
    if (bad)
        *bad = err ? w : NULL;
    return err;
}

/* The failure-free path with a backend that keeps its send queue (direct mode): the
 * application's chain goes to the default QP as it is; the layer only counts its
 * notifications. The backend checks the WRs and the capacity (max_send_wr slots). */
static int post_direct(ep_s *e, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    uint64_t notes = 0;
    unsigned flags = 0;
    uint32_t n = 0;
    const struct shift_send_wr *w = wr;
    for (; w && n <= e->pcap; w = w->next, n++) {
        flags |= w->send_flags;
        notes += notifies[w->opcode & 7]; /* an unknown opcode is the backend's to refuse */
    }
    if (w || (flags & SHIFT_SEND_NO_DOORBELL))
        return post_direct_each(e, wr, bad);
    struct shift_send_wr *bw = NULL;
    int err = e->ops->post_send(e->ctx, e->qp[1], wr, &bw);
    if (err)
        return post_direct_rest(e, wr, err, bw, bad);
    e->notes_posted += notes;
    e->st.sends_posted += notes;
    if (bad)
        *bad = NULL;
    return 0;
}

int shift_post_send(shift_ep h, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    ep_s *e = ep_get(h);
    if (e && wr && e->direct)
        return post_direct(e, wr, bad); /* (only a requester enters direct mode) */
    if (bad)
        *bad = wr;
    if (!e || !wr || !is_req(e))
        return EINVAL;
    if (e->state == SHIFT_STATE_DEFAULT) {
        if (e->can_direct && e->phead == e->ptail && e->bhead == e->btail) {
            e->direct = 1;
            return post_direct(e, wr, bad);
        }
        return post_fast(e, wr, bad);
    }
    return post_slow(e, wr, bad);
}

/* Posting outside the failure-free path: one WR at a time, by state. */
COLD_PATH static int post_slow(ep_s *e, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    for (; wr; wr = wr->next) {
        if (bad)
            *bad = wr;
        int err = shift_send_wr_check(wr, SHIFT_MAX_INLINE);
        if (err)
            return err;
        if (wr->send_flags & SHIFT_SEND_NO_DOORBELL)
            return EINVAL;
        if ((e->ptail - e->phead) + (e->btail - e->bhead) >= e->pcap)
            return ENOMEM;
        uint64_t seq = e->ptail;
        pend_t *p = &e->pq[seq & e->pmask];
        pend_fill(p, wr, seq);
        int path = 0, nodb = 0, fence = 0;
        switch (e->state) {
        case SHIFT_STATE_DEFAULT:
            path = 1;
            break;
        case SHIFT_STATE_WAIT_DRAINED:
            path = 1;
            nodb = 1;
            break;
        case SHIFT_STATE_FALLBACK:
            path = e->replayed ? 2 : 0;
            break;
        case SHIFT_STATE_WAIT_SIGNALED:
            path = 2;
            fence = (wr->send_flags & SHIFT_SEND_SIGNALED) != 0;
            break;
        default:
            /* Error: the WR goes to the dead QP, which flushes it after the older ones,
             * as verbs does for a QP in ERR */
            path = e->err_path;
            break;
        }
        p->where = (uint8_t)(path == 1 ? W_DEFAULT : path == 2 ? W_BACKUP : W_HELD);
        if (path) {
            err = post_pend(e, p, path, nodb);
            if (err && e->state == SHIFT_STATE_ERROR && !app_error(err)) {
                buf_send(e, p, SHIFT_WC_WR_FLUSH_ERR);
                p->flags |= PF_DONE;
                err = 0;
            } else if (err && (app_error(err) || !failover(e) || path != 1 ||
                               e->state != SHIFT_STATE_DEFAULT)) {
                return err;
            }
        }
        /* accepted */
        e->ptail++;
        if (two_sided(wr->opcode)) {
            e->notes_posted++;
            e->st.sends_posted++;
        }
        p->cum = e->notes_posted;
        if (fence) {
            e->fence_seq = seq;
            e->has_fence = 1;
            e->state = SHIFT_STATE_WAIT_DRAINED;
        }
        if (err && e->state == SHIFT_STATE_DEFAULT) {
            /* a failed post on the default QP: the path is gone */
            p->where = W_HELD;
            trigger(e, SHIFT_WC_WR_FLUSH_ERR);
        }
    }
    if (bad)
        *bad = NULL;
    return 0;
}

int shift_post_recv(shift_ep h, struct shift_recv_wr *wr, struct shift_recv_wr **bad)
{
    ep_s *e = ep_get(h);
    if (bad)
        *bad = wr;
    if (!e || !wr)
        return EINVAL;
    if (is_req(e))
        return EINVAL;
    for (; wr; wr = wr->next) {
        if (bad)
            *bad = wr;
        if (wr->num_sge < 0 || wr->num_sge > 1)
            return EINVAL;
        if ((e->rtail - e->rhead) + (e->btail - e->bhead) >= e->rcap)
            return ENOMEM;
        uint64_t seq = e->rtail;
        rpend_t *r = &e->rq[seq & e->rmask];
        r->wr = *wr;
        r->wr.next = NULL;
        r->wr.wr_id = seq;
        r->app_id = wr->wr_id;
        r->flags = 0;
        int path = e->state == SHIFT_STATE_DEFAULT ? 1
                   : e->state == SHIFT_STATE_ERROR ? e->err_path
                   : e->sent_ctr ? 2 : 0;
        r->where = (uint8_t)(path == 1 ? W_DEFAULT : path == 2 ? W_BACKUP : W_HELD);
        if (path) {
            int err = post_rpend(e, r, path);
            if (err && e->state == SHIFT_STATE_ERROR && !app_error(err)) {
                buf_recv(e, r->app_id, SHIFT_WC_WR_FLUSH_ERR);
                r->flags |= PF_DONE;
            } else if (err) {
                return err;
            }
        }
        e->rtail++;
        e->st.recvs_posted++;
    }
    if (bad)
        *bad = NULL;
    return 0;
}

/* ------------------------------------------------------------ polling ------- */

/* Direct mode: a completion of the default QP that is not a success. A path error
 * triggers the failover (1: the completion is the layer's); any other error is the
 * application's and ends in Error, as on plain RC (0: it goes to the application). */
COLD_PATH static int direct_error(ep_s *e, const struct shift_wc *wc)
{
    if (!failover(e) || e->state != SHIFT_STATE_DEFAULT)
        return 0;
    if (path_error(wc->status)) {
        trigger(e, wc->status);
        return 1;
    }
    e->err_path = 1;
    e->state = SHIFT_STATE_ERROR;
    return 0;
}

COLD_PATH static int poll_step(ep_s *e, struct shift_wc *out)
{
    if (e->bhead < e->btail) {
        *out = e->buf[e->bhead & e->bmask];
        e->bhead++;
        return 1;
    }
    if (e->direct) {
        int n = poll_backend(e, 1, 1, out);
        if (n == 1 && out->status != SHIFT_WC_SUCCESS && direct_error(e, out))
            return 2;
        return n;
    }
    int path = e->state == SHIFT_STATE_DEFAULT ? 1
               : e->state == SHIFT_STATE_ERROR && e->err_path ? e->err_path : 2;
    struct shift_wc wc;
    for (;;) {
        int n = poll_backend(e, path, 1, &wc);
        if (n <= 0)
            return n;
        if (wc.wr_id == PROBE_ID)
            continue;
        if (is_req(e)) {
            pend_t *p = pend_at(e, wc.wr_id);
            if (!p || (p->flags & PF_DONE) || (wc.opcode & SHIFT_WC_RECV))
                continue; /* stale: from before a reset */
            if (wc.status != SHIFT_WC_SUCCESS && failover(e) &&
                e->state == SHIFT_STATE_DEFAULT && path_error(wc.status)) {
                trigger(e, wc.status);
                return 2;
            }
            if (wc.status != SHIFT_WC_SUCCESS && p->wr.wr_id < e->known_exec &&
                p->where == W_BACKUP && path_error(wc.status)) {
                /* A replayed WR that precedes a notification the peer received had
                 * executed before the failure: its replay failing changes nothing. It
                 * completes as the success it was (silently if unsignaled), so the
                 * application never sees an error after a later WR's success. */
                wc.status = SHIFT_WC_SUCCESS;
                wc.wr_id = p->app_id;
                if (settle_report(e, p, &wc, (p->wr.send_flags & SHIFT_SEND_SIGNALED) != 0, out))
                    return 1;
                continue;
            }
            wc.wr_id = p->app_id;
            if (wc.status == SHIFT_WC_SUCCESS && e->state == SHIFT_STATE_DEFAULT &&
                !e->ndeferred) {
                /* failure-free: every WR up to this one completed, in order */
                e->st.sends_completed += p->cum - e->cum_done;
                e->cum_done = p->cum;
                e->phead = p->wr.wr_id + 1;
                pend_gc(e);
            } else if (wc.status == SHIFT_WC_SUCCESS) {
                return settle_report(e, p, &wc, 1, out);
            } else {
                p->flags |= PF_DONE;
                pend_gc(e);
                if (failover(e) && e->state != SHIFT_STATE_ERROR) {
                    e->err_path = path;
                    e->state = SHIFT_STATE_ERROR;
                }
                /* the notifications it held back executed at the peer: they follow */
                release_skipped(e);
            }
        } else {
            rpend_t *r = rpend_at(e, wc.wr_id);
            if (!r || (r->flags & PF_DONE))
                continue;
            if (wc.status != SHIFT_WC_SUCCESS && failover(e) &&
                e->state == SHIFT_STATE_DEFAULT && path_error(wc.status)) {
                trigger(e, wc.status);
                return 2;
            }
            wc.wr_id = r->app_id;
            r->flags |= PF_DONE;
            rpend_gc(e);
            if (wc.status == SHIFT_WC_SUCCESS)
                e->recv_done++;
            else if (failover(e) && e->state == SHIFT_STATE_DEFAULT) {
                e->err_path = path;
                e->state = SHIFT_STATE_ERROR;
            }
        }
        *out = wc;
        return 1;
    }
}

int shift_poll_step(shift_ep h, struct shift_wc *out)
{
    ep_s *e = ep_get(h);
    if (!e || !out)
        return -EINVAL;
    return poll_step(e, out);
}

/* poll wc[k..n) one completion at a time */
COLD_PATH static int poll_steps(ep_s *e, int k, int n, struct shift_wc *wc)
{
    while (k < n) {
        int r = poll_step(e, &wc[k]);
        if (r < 0)
            return k ? k : r;
        if (r == 0)
            break;
        if (r == 1)
            k++;
    }
    return k;
}

int shift_poll_cq(shift_ep h, int n, struct shift_wc *wc)
{
    ep_s *e = ep_get(h);
    if (!e || n < 0 || (n > 0 && !wc))
        return -EINVAL;
    if (!e->direct || e->bhead != e->btail || n == 0)
        return poll_steps(e, 0, n, wc);
    /* failure-free: the default QP's completions go to the application as they are */
    int r = poll_backend(e, 1, n, wc);
    for (int k = 0; k < r; k++)
        if (wc[k].status != SHIFT_WC_SUCCESS && direct_error(e, &wc[k]))
            /* the failover started at wc[k]; what followed were the dead QP's flushes */
            return poll_steps(e, k, n, wc);
    return r;
}

/* ------------------------------------------------------------ lifecycle ----- */

static uint64_t pow2(uint64_t n)
{
    uint64_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

uint64_t shift_backup_state_bytes(uint32_t max_send_wr, uint32_t max_recv_wr)
{
    uint32_t bcap = (max_send_wr > max_recv_wr ? max_send_wr : max_recv_wr) + 1;
    return sizeof(ep_s) + pow2(max_send_wr) * sizeof(pend_t) +
           pow2(max_recv_wr) * sizeof(rpend_t) + pow2(bcap) * sizeof(struct shift_wc);
}

int shift_ep_create(const struct shift_backend_ops *ops, void *ctx,
                    const struct shift_ep_attr *attr, shift_ep *out)
{
    if (!out)
        return EINVAL;
    *out = NULL;
    if (!ops || !attr || !ops->create_qp || !ops->destroy_qp || !ops->modify_qp ||
        !ops->query_qp || !ops->reset_qp || !ops->post_send || !ops->post_recv ||
        !ops->ring || !ops->poll_cq || !ops->reg_mr || !ops->dereg_mr || !ops->ctl_send)
        return EINVAL;
    if ((attr->role != SHIFT_ROLE_REQUESTER && attr->role != SHIFT_ROLE_RESPONDER) ||
        attr->design < SHIFT_DESIGN_SHIFT || attr->design > SHIFT_DESIGN_NO_FAILOVER ||
        attr->max_send_wr < 1 || attr->max_send_wr > MAX_WR || attr->max_recv_wr < 1 ||
        attr->max_recv_wr > MAX_WR || attr->ctl_retries > 255 ||
        (attr->flags & ~(unsigned)(SHIFT_EP_WIRE_PROBE | SHIFT_EP_COPY_POSTS)))
        return EINVAL;
    ep_s *e = calloc(1, sizeof *e);
    if (!e)
        return ENOMEM;
    e->ops = ops;
    e->ctx = ctx;
    e->attr = *attr;
    e->can_direct = ops->sq_pending && !(attr->flags & SHIFT_EP_COPY_POSTS);
    e->pcap = attr->max_send_wr;
    e->rcap = attr->max_recv_wr;
    e->bcap = (e->pcap > e->rcap ? e->pcap : e->rcap) + 1;
    e->pmask = pow2(e->pcap) - 1;
    e->rmask = pow2(e->rcap) - 1;
    e->bmask = pow2(e->bcap) - 1;
    e->pq = calloc(e->pmask + 1, sizeof *e->pq);
    e->rq = calloc(e->rmask + 1, sizeof *e->rq);
    e->buf = calloc(e->bmask + 1, sizeof *e->buf);
    e->peer_ctr = -1;
    int err = ENOMEM;
    if (!e->pq || !e->rq || !e->buf)
        goto fail;
    /* the default QP has the layer's capacity (in direct mode its send queue is the
     * layer's); the backup QP keeps a spare slot */
    struct shift_backend_qp_cap cap = {e->pcap, e->rcap, SHIFT_MAX_INLINE};
    err = ops->create_qp(ctx, 1, &cap, &e->qp[1]);
    if (err)
        goto fail;
    cap.max_send_wr++;
    err = ops->create_qp(ctx, 2, &cap, &e->qp[2]);
    if (err) {
        ops->destroy_qp(ctx, e->qp[1]);
        goto fail;
    }
    e->h = h_new(e, H_EP);
    if (!e->h) {
        ops->destroy_qp(ctx, e->qp[1]);
        ops->destroy_qp(ctx, e->qp[2]);
        err = ENOMEM;
        goto fail;
    }
    *out = H_PTR(e->h);
    return 0;
fail:
    free(e->pq);
    free(e->rq);
    free(e->buf);
    free(e);
    return err;
}

void shift__ep_own(shift_ep h, int owned)
{
    ep_s *e = ep_get(h);
    if (e)
        e->owned = owned;
}

int shift_ep_destroy(shift_ep h)
{
    ep_s *e = ep_get(h);
    if (!e)
        return EINVAL;
    if (e->owned)
        return EBUSY;
    e->ops->destroy_qp(e->ctx, e->qp[1]);
    e->ops->destroy_qp(e->ctx, e->qp[2]);
    for (int i = 0; i < e->nmr; i++)
        e->ops->dereg_mr(e->ctx, e->mrs[i]);
    h_free(e->h);
    free(e->mrs);
    free(e->lk);
    free(e->rk);
    free(e->pq);
    free(e->rq);
    free(e->buf);
    free(e);
    return 0;
}

int shift_reg_mr(shift_ep h, uint64_t addr, size_t length, int access,
                 struct shift_mr_keys *keys)
{
    ep_s *e = ep_get(h);
    if (!e || !keys)
        return EINVAL;
    uint32_t lk[3] = {0}, rk[3] = {0};
    void *mr[3] = {0};
    int err = e->ops->reg_mr(e->ctx, 1, addr, length, access, &lk[1], &rk[1], &mr[1]);
    if (err)
        return err;
    err = e->ops->reg_mr(e->ctx, 2, addr, length, access, &lk[2], &rk[2], &mr[2]);
    if (err) {
        e->ops->dereg_mr(e->ctx, mr[1]);
        return err;
    }
    if (e->nmr + 2 > e->capmr) {
        int c = e->capmr ? e->capmr * 2 : 8;
        void **m = realloc(e->mrs, (size_t)c * sizeof *m);
        if (!m)
            goto nomem;
        e->mrs = m;
        e->capmr = c;
    }
    if (keys_add(&e->lk, &e->nlk, &e->caplk, lk[1], lk[2]))
        goto nomem;
    e->mrs[e->nmr++] = mr[1];
    e->mrs[e->nmr++] = mr[2];
    keys->lkey = lk[1];
    keys->rkey = rk[1];
    keys->lkey_backup = lk[2];
    keys->rkey_backup = rk[2];
    return 0;
nomem:
    e->ops->dereg_mr(e->ctx, mr[1]);
    e->ops->dereg_mr(e->ctx, mr[2]);
    return ENOMEM;
}

int shift_add_remote_keys(shift_ep h, uint32_t rkey, uint32_t rkey_backup)
{
    ep_s *e = ep_get(h);
    if (!e)
        return EINVAL;
    return keys_add(&e->rk, &e->nrk, &e->caprk, rkey, rkey_backup);
}

int shift_ep_query(shift_ep h, struct shift_ep_info *info)
{
    ep_s *e = ep_get(h);
    if (!e || !info)
        return EINVAL;
    *info = e->st;
    info->role = e->attr.role;
    info->design = e->attr.design;
    info->state = e->state;
    info->sent_ctr = e->sent_ctr;
    info->peer_ctr = e->peer_ctr;
    info->replayed = e->replayed;
    info->probing = e->probing;
    info->has_fence = e->has_fence && e->state == SHIFT_STATE_WAIT_DRAINED;
    info->fence = info->has_fence ? e->pq[e->fence_seq & e->pmask].app_id : 0;
    info->epoch = e->epoch;
    uint64_t out = 0, held = 0;
    if (e->direct) {
        uint64_t notes;
        direct_count(e, &out, &notes);
        direct_sync(e, notes); /* the query brings the count up to date */
        info->sends_completed = e->st.sends_completed;
    } else if (is_req(e))
        for (uint64_t s = e->phead; s < e->ptail; s++) {
            pend_t *p = &e->pq[s & e->pmask];
            if (p->flags & PF_DONE)
                continue;
            out++;
            held += p->where == W_HELD;
        }
    else
        for (uint64_t s = e->rhead; s < e->rtail; s++)
            out += !(e->rq[s & e->rmask].flags & PF_DONE);
    info->outstanding = out;
    info->held = held;
    info->buffered = e->btail - e->bhead;
    info->recvs_completed = e->recv_done;
    info->backup_state_bytes = shift_backup_state_bytes(e->pcap, e->rcap) +
                               (uint64_t)(e->caplk + e->caprk) * sizeof(keypair) +
                               (uint64_t)e->capmr * sizeof(void *);
    return 0;
}

const char *shift_state_name(int s)
{
    static const char *const n[] = {"Default", "Fallback", "WaitSignaled", "WaitDrained",
                                    "Error"};
    if (s < 0 || s > SHIFT_STATE_ERROR)
        return NULL;
    return n[s];
}

const char *shift_design_name(int d)
{
    static const char *const n[] = {"Shift", "NaiveReplay", "NoFailover"};
    if (d < 0 || d > SHIFT_DESIGN_NO_FAILOVER)
        return NULL;
    return n[d];
}
