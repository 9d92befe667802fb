/* layer.h - private to the SHIFT layer's files (failover.c, datapath.c, pending.c,
 * endpoint.c): an endpoint's state, the records of its outstanding WRs, the control
 * message, and the functions the files share. The layer includes no simnic header: it
 * reaches a NIC only through the backend table (shift_backend_ops). */
#ifndef SHIFT_LAYER_H
#define SHIFT_LAYER_H

#include "internal.h"

/* where a WR is: held by the layer, posted on the default or the backup QP, or flushed
 * by the layer (a post in Error: its completion is due) */
enum { W_HELD = 0, W_DEFAULT = 1, W_BACKUP = 2, W_FLUSHED = 3 };
enum { PF_DONE = 1, PF_SKIPPED = 2, PF_INELIGIBLE = 4,
       PF_LATE = 8 /* posted to a silent QP after its NIC's death was read: flushed then */ };
/* a path whose NIC died in fatal error, as the layer knows it (silent[path]): not at
 * all; its death read, the CQ's own entries still to come first; the layer completes
 * every WR there (fq) */
enum { SILENT_NO = 0, SILENT_DRAIN = 1, SILENT_ACTIVE = 2 };
enum {
    CTL_MAGIC = 0x53484654u, CTL_COUNTER = 1, CTL_FAILBACK = 2, CTL_APP_ERROR = 3,
    CTL_SETUP = 4, CTL_KEYS = 5, /* the two-phase set-up's (setup.c) */
    CTL_RECONNECT = 6,   /* reset your end of the default path into incarnation seq */
    CTL_RECONNECTED = 7  /* done: my end is in incarnation seq */
};
/* what shift_ctl_poll reads a message into: past every kind's length (a longer one is
 * cut to this, which no kind has, and rejected) */
#define CTL_RECV_MAX 128u
#define PROBE_ID UINT64_MAX
#define KEPT_ID (UINT64_MAX - 1) /* a kept copy's completion, once polled (kept_polled) */
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

/* a notification ShiftCounted keeps after its success on the default path (kept.c):
 * its record, and how many copies of it a replay put in flight on the backup QP */
typedef struct {
    pend_t rec;
    uint32_t inflight;
} kept_t;

typedef struct {
    struct shift_recv_wr wr;   /* wr_id = layer sequence */
    uint64_t app_id;
    uint8_t where, flags;
} rpend_t;

/* A control message of the layer. seq numbers the sender's counters (one per Handshake;
 * a retransmission by the control timer repeats it), so that a duplicate is not taken
 * for a new failover of the peer: the spec's control messages are never duplicated. */
typedef struct {
    uint32_t magic;
    uint8_t kind;
    uint8_t want_reply;        /* a retransmission: the sender still awaits the answer */
    uint16_t pad;
    uint32_t seq;
    uint32_t pad2;
    int64_t count;
} ctl_msg;

typedef struct {
    uint32_t k[2];
} keypair;

/* The two-phase set-up's messages, on the default path (setup.c). CTL_SETUP: the
 * sender's backup QP and how far the exchange got, its whole state each time (a
 * retransmission is the latest state); every field only grows, so the FIFO channel
 * never shows an older one. CTL_KEYS: some of the sender's key pairs (default rkey,
 * backup rkey), numbered from 1 in the order its regions were announced. */
enum { SETUP_READY = 1, /* its backup QP is connected to the receiver's */
       SETUP_ASK = 2 /* it lacks something of the receiver's: answer */ };
enum { CTL_KEYS_MAX = 8, MAX_ANNOUNCED = 1u << 20 };
typedef struct {
    uint32_t magic;
    uint8_t kind;
    uint8_t flags;
    uint16_t pad;
    struct shift_path_info info; /* the sender's backup QP */
    uint32_t keys;             /* key pairs it announced (numbered 1..keys) */
    uint32_t keys_seen;        /* the receiver's pairs it holds (1..keys_seen) */
} ctl_setup;

typedef struct {
    uint32_t magic;
    uint8_t kind;
    uint8_t n;                 /* pairs: 1..CTL_KEYS_MAX */
    uint16_t pad;
    uint32_t first;            /* the first pair's number (>= 1) */
    uint32_t pad2;
    keypair k[CTL_KEYS_MAX];   /* past n: 0 */
} ctl_keys;

/* An endpoint's two-phase set-up (setup.c): the paths the application connected, and
 * the backup path's in-band exchange. */
typedef struct {
    int used;                  /* shift_ep_connect was called: backup_ready means in-band */
    int inband;                /* path 1 connected by it: the exchange runs over it */
    int connected[3];          /* path p's QP connected by the layer (RTS) */
    int have_peer;             /* peer: the peer's backup QP (announced, or given) */
    struct shift_path_info peer;
    int peer_ready;            /* the peer's backup QP is connected to this one's */
    int owed;                  /* the peer asked: a set-up message is due */
    int sent;                  /* set-up messages sent; the last one's READY flag, keys */
    int sent_ready;
    uint32_t sent_keys;
    uint32_t left;             /* retransmissions left to the handshake timer */
    keypair *ann;              /* its own pairs announced, numbered from 1 */
    uint32_t nann, capann;
    uint32_t acked;            /* of them, how many the peer holds */
    keypair *pk;               /* the peer's pairs it holds (1..npk), as numbered */
    uint32_t npk, cappk;
    uint32_t peer_keys;        /* the peer's pairs announced, as its last message said */
} setup_s;

/* a region the application registered (shift_reg_mr): its keys on both NICs and the
 * backend's registrations of it */
typedef struct {
    struct shift_mr_keys keys;
    void *mr[2];               /* the default NIC's, the backup NIC's */
} region_t;

/* the completions of one of an endpoint's QPs that other endpoints' polls read off a
 * shared CQ, kept for it in CQ order (cq.c); overrun: one was lost, the path's polls
 * end in -EOVERFLOW once the ring is empty */
typedef struct {
    struct shift_wc *ring;
    uint64_t mask, head, tail;
    int overrun;
} inbox_t;

struct cq_s;

typedef struct ep_s {
    uint64_t h;
    const struct shift_backend_ops *ops;
    void *ctx;
    struct shift_ep_attr attr;
    void *qp[3];
    /* The two sides of spec/Failover.tla's host: the send side (its outstanding WRs,
     * pq) and the receive side (its receive WRs, rpend). Both on the same QPs: every
     * endpoint's application posts sends and receives, and its polls return both. */
    int send_mode;             /* enum shift_state (spec: sendMode) */
    int recv_mode;             /* enum shift_recv_state (spec: recvMode) */
    int dead;                  /* the connection is unusable, as a plain RC QP in ERR (an
                                * application error, or both paths gone): terminal for
                                * both sides; the spec has no such state */
    int app_err;               /* dead of its own application's error (spec: OwnAppError):
                                * it answers the peer's counter with that word */
    int err_path;              /* in Error: the path whose failure ended the send side (a
                                * dead endpoint's application drains that QP's CQ) */
    int direct;                /* the default QP's send queue holds the outstanding WRs
                                * (as posted by the application); the ring is empty */
    int can_direct;            /* the backend has sq_pending and copies are not asked */
    /* send side */
    pend_t *pq;
    uint32_t pcap;             /* WRs the layer accepts outstanding */
    uint64_t pmask;            /* ring size - 1 (a power of two >= pcap) */
    uint64_t phead, ptail;
    uint64_t cum_done;
    uint64_t notes_posted, sends_completed;
    uint64_t fence_seq, fence_id; /* the fence WR's sequence and the application's id */
    uint64_t fence_notes;      /* notifications posted up to the fence: its fail-back
                                * notice says so (spec: NotesBefore(program, fence)) */
    int has_fence;             /* spec: fence # 0 */
    /* receive side */
    rpend_t *rpend;            /* the outstanding receive WRs (the spec's rpend) */
    uint32_t rcap;
    uint64_t rmask;
    uint64_t rhead, rtail;
    uint64_t recvs_posted, recv_done;
    /* spec: failbackAt. The peer's fail-back notice came before the completions of some
     * of the notifications it counts were in host memory (F11): the receive side stays
     * on the backup path until recv_done reaches it (take_recv); 0 when none waits */
    uint64_t failback_at;
    /* the head of the backup QP's CQ as the spec has it (cq[h][2]), kept by the layer:
     * the send completions a fail-back notice took off the backup CQ with the receive
     * completions, and the flushes of posts in Error, each behind what the backup CQ
     * held before it. The application's poll reads it before the backend's CQ. */
    struct shift_wc *q2;
    uint64_t q2mask, q2head, q2tail;
    /* spec: FirstFault(h). The default CQ's flushes read past to find what failed the
     * QP (at most every WR and receive WR of the endpoint: bmask + 1 entries) */
    struct shift_wc *q1;
    /* the backup QP's receive queue still holds the receive WRs a fail-back notice
     * moved to the default QP (its own sends were in flight there): they are flushed
     * once those sends completed, at the latest before the next Handshake */
    int stale_rq2;
    /* spec: FatalEvent. A NIC whose death in fatal error the layer read completes
     * nothing: the layer does, in fq[path], which the polls read in place of its CQ -
     * the CQ's own entries first (SILENT_DRAIN), then every WR no completion covers,
     * flushed (put at the head, before the flushes of posts made meanwhile), then each
     * later post's flush - until the QP is reset. late_direct: direct-mode posts made
     * while draining (the send queue lists them; their flushes are in fq already). */
    int silent[3];
    struct shift_wc *fq[3];
    uint64_t fqmask, fqhead[3], fqtail[3];
    uint64_t late_direct;
    /* ShiftCounted (spec: acked): the notifications completed on the default path that no
     * counter of the peer covers, in post order (a ring of pcap: kept.c); the copies a
     * replay put in flight on the backup QP (spec: resent) have no completion yet */
    kept_t *kq;
    uint64_t khead, ktail;
    uint64_t resent_inflight;
    /* completions held for the application */
    struct shift_wc *buf;
    uint32_t bcap;
    uint64_t bmask;
    uint64_t bhead, btail;
    uint64_t ndeferred;        /* skipped notifications whose success waits (replay) */
    uint64_t known_exec;       /* WRs before this sequence were executed (replay) */
    /* the counter exchange, one per endpoint for both sides (spec: sentCtr, peerCtr,
     * fresh, asked), and the send side's replayed */
    int sent_ctr, fresh, asked, replayed, probing;
    int probe_status;          /* the wire probe's completion status, -1 before it */
    int64_t peer_ctr;
    int64_t ctr_sent;          /* the counter it sent last (a retransmission repeats it) */
    uint32_t epoch;            /* failovers entered (Triggers) */
    uint32_t ctr_seq, peer_seq;/* its counters sent; the last of the peer's it took */
    uint32_t ctl_left;         /* retransmissions left to the control timer */
    /* the default QP's incarnation (spec: epoch), and the one this endpoint asked the peer
     * to reset its end into, awaiting the answer (spec: reconnecting; 0: none) */
    uint32_t inc, reconnecting;
    uint32_t reconnect_left;   /* its request's retransmissions left to the control timer */
    int probe_failed;          /* its wire probe failed: no reconnect before the next post
                                * or the default port's return to ACTIVE (silent.c) */
    int owned;                 /* a connection holds it: shift_ep_destroy says EBUSY */
    region_t *regs;            /* its registered regions (the backup lkey of each) */
    int nreg, capreg;
    keypair *rk;               /* the peer's rkeys: the default NIC's, the backup NIC's */
    int nrk, caprk;
    uint32_t qpn;              /* the application's QP number: the default QP's (0: unknown) */
    /* on a shared CQ pair (cq.c; NULL: CQs of its own): its QPs' numbers, which name
     * their completions there, and what other endpoints' polls kept for it per path */
    struct cq_s *cq;
    uint32_t cq_qpn[3];
    inbox_t in[3];
    setup_s su;                /* the two-phase set-up (setup.c) */
    /* the events the application has not polled (shift_poll_event), oldest first */
    struct shift_event evq[SHIFT_EVENT_QUEUE];
    uint32_t evhead, evtail;
    struct shift_ep_info st; /* statistics part */
} ep_s;

static inline ep_s *ep_get(shift_ep h) { return h_get(h, H_EP); }
/* the role names the host (requester: A, responder: B); both post sends and receives.
 * It decides only what shift_ep_query reports as `state` and `outstanding`. */
static inline int is_req(const ep_s *e) { return e->attr.role == SHIFT_ROLE_REQUESTER; }
static inline int failover(const ep_s *e) { return e->attr.design != SHIFT_DESIGN_NO_FAILOVER; }
/* SHIFT's machinery (counter filter, refusal, fail-back): Shift, ShiftPrefix and
 * ShiftCounted */
static inline int is_shift(const ep_s *e)
{
    return e->attr.design == SHIFT_DESIGN_SHIFT || e->attr.design == SHIFT_DESIGN_SHIFT_PREFIX ||
           e->attr.design == SHIFT_DESIGN_SHIFT_COUNTED;
}
/* the replay also skips the WRs before the last notification the peer counted */
static inline int skips_prefix(const ep_s *e)
{
    return e->attr.design == SHIFT_DESIGN_SHIFT_PREFIX ||
           e->attr.design == SHIFT_DESIGN_SHIFT_COUNTED;
}
/* notifications completed on the default path are kept until counted (spec:
 * D.keepNotes, ShiftCounted) */
static inline int keeps_notes(const ep_s *e)
{
    return e->attr.design == SHIFT_DESIGN_SHIFT_COUNTED;
}

/* the opcodes that consume a receive WR at the peer (its notifications); the
 * failure-free paths index it with op & 7 and leave an unknown opcode to the backend */
static const uint8_t notifies[8] = {
    [SHIFT_WR_RDMA_WRITE_WITH_IMM] = 1, [SHIFT_WR_SEND] = 1, [SHIFT_WR_SEND_WITH_IMM] = 1};

static inline int two_sided(int op) { return op >= 0 && op < 8 && notifies[op]; }

/* spec: OnPath1(h) - a side is on the default path: the send side sends there or holds
 * WRs there behind a fence (or is about to), or the receive WRs are there */
static inline int on_path1(const ep_s *e)
{
    return e->send_mode == SHIFT_STATE_DEFAULT || e->send_mode == SHIFT_STATE_WAIT_SIGNALED ||
           e->send_mode == SHIFT_STATE_WAIT_DRAINED || e->recv_mode == SHIFT_RECV_DEFAULT;
}

/* spec: Holds1(h) - ... and uses the default QP so that a reset of it would lose WRs */
static inline int holds1(const ep_s *e)
{
    return e->send_mode == SHIFT_STATE_DEFAULT || e->send_mode == SHIFT_STATE_WAIT_DRAINED ||
           e->recv_mode == SHIFT_RECV_DEFAULT;
}

/* spec: Polls1(h), Polls2(h) - which CQs the application's poll reads: the backup QP's
 * first while a side is off the default path, the default QP's while a side completes
 * there. (Not in the spec: a connection dead of an application error on the default
 * QP still gives the application that QP's flushes.) */
static inline int polls1(const ep_s *e)
{
    return e->send_mode == SHIFT_STATE_DEFAULT || e->recv_mode == SHIFT_RECV_DEFAULT ||
           (e->dead && e->err_path == 1);
}
static inline int polls2(const ep_s *e)
{
    return e->send_mode != SHIFT_STATE_DEFAULT || e->recv_mode != SHIFT_RECV_DEFAULT;
}

/* cq.c: a QP on the shared CQ pair or on a CQ of its own; joining and leaving the pair;
 * the poll of path's CQ that takes this endpoint's completions only */
INTERNAL struct cq_s *cq_for(shift_cq cq, const struct shift_backend_ops *ops);
INTERNAL int cq_create_qp(ep_s *e, int path, const struct shift_backend_qp_cap *cap);
INTERNAL int cq_join(ep_s *e, const struct shift_backend_qp_cap *cap1,
                     const struct shift_backend_qp_cap *cap2);
INTERNAL void cq_leave(ep_s *e);
INTERNAL int cq_poll(ep_s *e, int path, int n, struct shift_wc *wc);
INTERNAL uint64_t cq_kept(const ep_s *e);
static inline int backend_poll(ep_s *e, int path, int n, struct shift_wc *wc)
{
    if (e->cq)
        return cq_poll(e, path, n, wc);
    return e->ops->poll_cq(e->ctx, e->qp[path], n, wc);
}

/* The backend's poll: up to n completions, or -errno. A count beyond n is not
 * believed (the layer reads no further than it asked). */
INTERNAL int silent_poll(ep_s *e, int path, int n, struct shift_wc *wc);
INTERNAL void kept_polled(ep_s *e, struct shift_wc *wc, int n);
static inline int poll_path(ep_s *e, int path, int n, struct shift_wc *wc)
{
    if (e->silent[path] == SILENT_ACTIVE)
        return silent_poll(e, path, n, wc);
    int r = backend_poll(e, path, n, wc);
    if (r == 0 && e->silent[path])
        return silent_poll(e, path, n, wc);
    return r > n ? n : r;
}
static inline int poll_backend(ep_s *e, int path, int n, struct shift_wc *wc)
{
    int r = poll_path(e, path, n, wc);
    if (path == 2 && e->resent_inflight && r > 0)
        kept_polled(e, wc, r); /* (a kept copy's completion: it left the backup QP) */
    return r;
}

/* One completion of path's CQ as the spec has it: for the backup path, what the layer
 * keeps at its head (q2) first. 1 and *wc, 0 if none, or -errno. */
static inline int poll_one(ep_s *e, int path, struct shift_wc *wc)
{
    if (path == 2 && e->q2head < e->q2tail) {
        *wc = e->q2[e->q2head & e->q2mask];
        e->q2head++;
        return 1;
    }
    return poll_backend(e, path, 1, wc);
}

/* Completion errors that say the path failed (the trigger). The others (protection,
 * access, invalid request, length) are the application's: re-executing the WR on
 * another path would fail the same way, so they reach the application as on plain RC. */
static inline int path_error(int status)
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

/* A backend call failed where the layer can only go on (the error is counted, and the
 * caller says what it does instead): the error, as a truth value. */
static inline int backend_error(ep_s *e, int err)
{
    if (err)
        e->st.backend_errors++;
    return err != 0;
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
INTERNAL void q2_push(ep_s *e, const struct shift_wc *wc);
INTERNAL void q2_absorb(ep_s *e);
INTERNAL void q2_flush(ep_s *e, const pend_t *p);
INTERNAL void send_wc(const struct shift_send_wr *w, uint64_t wr_id, int status,
                      struct shift_wc *wc);
INTERNAL void recv_wc(uint64_t wr_id, int status, struct shift_wc *wc);
INTERNAL void pend_done(ep_s *e, pend_t *p);
INTERNAL void release_skipped(ep_s *e);
INTERNAL void complete_upto(ep_s *e, uint64_t seq);
INTERNAL int settle_report(ep_s *e, pend_t *p, const struct shift_wc *wc, int report,
                           struct shift_wc *out);
INTERNAL int post_pend(ep_s *e, pend_t *p, int path, int nodb);
INTERNAL int post_rpend(ep_s *e, rpend_t *r, int path);
INTERNAL void pend_fill(pend_t *p, const struct shift_send_wr *w, uint64_t seq);
INTERNAL int direct_count(ep_s *e, uint64_t *outstanding, uint64_t *notes);
INTERNAL void direct_sync(ep_s *e, uint64_t nnotes);
INTERNAL int materialize(ep_s *e);
/* kept.c: ShiftCounted's notifications kept after their success (spec: acked) */
INTERNAL void keep_upto(ep_s *e, uint64_t seq);
INTERNAL void kept_trim(ep_s *e, int64_t count);
INTERNAL uint64_t kept_replay(ep_s *e);
/* failover.c: the failover starts (from a failed post or an error completion) */
INTERNAL void trigger(ep_s *e, int status);
/* the connection dies (application error): both sides stop, as a plain RC QP in ERR */
INTERNAL void go_dead(ep_s *e, int path);
INTERNAL void app_dies(ep_s *e, int path, int status);
/* a NIC's death in fatal error (silent.c): the flush of a post to a silent QP, the
 * layer's own; a reset QP speaks again */
INTERNAL void silent_push(ep_s *e, int path, const struct shift_wc *wc);
INTERNAL void silent_send(ep_s *e, int path, pend_t *p, const struct shift_send_wr *w);
INTERNAL void silent_recv(ep_s *e, int path, rpend_t *r);
INTERNAL int silent_now(ep_s *e, int path);
INTERNAL void silent_reset(ep_s *e, int path);
INTERNAL uint64_t silent_sends_owed(const ep_s *e, int path);
/* a fail-back's stale receives leave the backup QP once no send of this side is there */
INTERNAL void stale_rq2_check(ep_s *e);
INTERNAL void move_back(ep_s *e);
/* endpoint.c: the backup NIC's key of a default NIC's key: the peer's rkey, its own
 * lkey (a key it does not know is left as it is) */
INTERNAL uint32_t xlate(const keypair *t, int n, uint32_t key);
INTERNAL uint32_t lkey_backup(const ep_s *e, uint32_t lkey);
/* an event for the application (shift_poll_event); a full queue drops its oldest */
INTERNAL void ep_event(ep_s *e, int type, int path, int status, uint64_t wrs);
INTERNAL int keys_add(keypair **t, int *n, int *cap, uint32_t a, uint32_t b);
/* setup.c: the two-phase set-up and the backup path's in-band exchange. setup_input
 * takes (or rejects) a CTL_SETUP or CTL_KEYS message: 0 or -EINVAL, as shift_ctl_input;
 * setup_step is shift_progress's set-up step (SHIFT_STEP_SETUP or 0); setup_timer the
 * handshake timer's resend (1 if it resent); setup_announce a region's keys, registered */
INTERNAL int is_setup_msg(const void *msg, uint32_t len);
INTERNAL int setup_input(ep_s *e, int path, const void *msg, uint32_t len);
INTERNAL int setup_step(ep_s *e);
INTERNAL int setup_timer(ep_s *e);
INTERNAL int setup_announce(ep_s *e, uint32_t rkey, uint32_t rkey_backup);
INTERNAL int backup_ready(const ep_s *e);
INTERNAL int rkey_unlearnt(const ep_s *e, const struct shift_send_wr *w);
INTERNAL void setup_free(ep_s *e);

#endif
