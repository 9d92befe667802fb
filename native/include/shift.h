/*
 * shift.h - the SHIFT cross-NIC failover core, after "SHIFT: Exploring the Boundary
 * of RDMA Network Fault Tolerance" (arXiv 2512.11094).
 *
 * A connection carries application traffic between two endpoints (the requester, A,
 * and the responder, B: the role only names the host) over two QP pairs: path 1
 * (default) and path 2 (backup, pre-built on the other NIC of each host). Both
 * endpoints post sends and receives on the same QPs (two-way traffic).
 *
 * The core is written against shift_backend_ops, a table of verbs operations, and
 * knows nothing of simnic; shift_sim.h binds it to simnic. A libibverbs backend is a
 * second table. Nothing runs behind the caller's back: the layer's background work
 * (handshake, replay, probe, fail-back) is one step per shift_progress() call; a real
 * deployment calls it from its progress thread, tests call it as an event.
 *
 * Per endpoint, as per host in spec/Failover.tla (both hosts are peers there):
 *   send side     Default -> Fallback -> WaitSignaled -> WaitDrained -> Default
 *                 (Error: refused, or the backup path failed too: terminal)
 *   receive side  Default -> Moving -> Fallback -> Default
 * and one counter exchange for both sides (sent, peer's, fresh, asked). Every endpoint
 * runs both machines over the WRs its application posts - sends and receives - and
 * both sides of both endpoints take part in every failover.
 *
 * Return values, for every entry point of shift_verbs.h, simnic.h, shift.h and
 * shift_sim.h (the one statement of the convention):
 *  - a call that does one thing and succeeds or fails (create, destroy, (de)register,
 *    post, modify, query, connect, check) returns 0 or a positive errno, as
 *    ibv_post_send and ibv_modify_qp do;
 *  - a call that returns a count or what it did - the polls and the events of the
 *    event vocabulary: shift_poll_cq, shift_poll_step, shift_poll_event,
 *    shift_progress, shift_timer, shift_async_event, shift_ctl_input,
 *    shift_sim_timeout, sn_poll_cq, sn_transmit ... sn_nic_recover, sn_async_event,
 *    sn_pump - returns it (>= 0) or a negative errno,
 *    as ibv_poll_cq does;
 *  - a call that cannot fail answers a bad argument in its own terms: the name
 *    functions NULL ("unknown" for shift_wc_status_str), simnic's wire and health
 *    queries 0.
 * A NULL, freed or forged handle is EINVAL (EBADF for a fabric), with its call's sign.
 * The backend table's operations follow the same rule (poll_cq, sq_pending and
 * async_event return a negative errno, the others a positive one).
 */
#ifndef SHIFT_H
#define SHIFT_H

#include "shift_verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CDEF-BEGIN */
typedef struct shift_ep_opaque *shift_ep;
/* A completion queue per path that several endpoints of one host share
 * (shift_cq_create), as an application shares one CQ per device among its QPs. */
typedef struct shift_cq_opaque *shift_cq;

enum shift_design {
    SHIFT_DESIGN_SHIFT = 0,        /* counter handshake, filtered replay, refusal, fail-back */
    SHIFT_DESIGN_NAIVE_REPLAY = 1, /* replay every outstanding WR; no filter, no refusal */
    SHIFT_DESIGN_NO_FAILOVER = 2,  /* plain RC: errors go to the application */
    SHIFT_DESIGN_SHIFT_PREFIX = 3, /* SHIFT whose replay also skips every WR before the
                                    * last notification the peer received (RC order:
                                    * they executed; docs/findings.md, F3) */
    SHIFT_DESIGN_SHIFT_COUNTED = 4 /* ShiftPrefix that keeps each notification completed
                                    * on the default path until a counter of the peer
                                    * covers it, and replays it first (docs/findings.md,
                                    * F7): every WR is copied (no direct mode), and a
                                    * kept SEND's payload is read again at a failover -
                                    * from the layer's copy if inline, else from the
                                    * application's buffer */
};

/* Which host an endpoint is (A or B); both post sends and receives. The role decides
 * only which side shift_ep_info's state, outstanding and held report. */
enum shift_role { SHIFT_ROLE_REQUESTER = 0, SHIFT_ROLE_RESPONDER = 1 };

/* A send side's state (the spec's sendMode). */
enum shift_state {
    SHIFT_STATE_DEFAULT = 0,
    SHIFT_STATE_FALLBACK = 1,
    SHIFT_STATE_WAIT_SIGNALED = 2,
    SHIFT_STATE_WAIT_DRAINED = 3,
    SHIFT_STATE_ERROR = 4
};

/* A receive side's state (the spec's recvMode): its receive WRs on the default QP,
 * taken off it and not yet reposted on the backup QP, or there. */
enum shift_recv_state {
    SHIFT_RECV_DEFAULT = 0,
    SHIFT_RECV_MOVING = 1,
    SHIFT_RECV_FALLBACK = 2
};

/* What one shift_progress() call did. */
enum shift_step {
    SHIFT_STEP_NONE = 0,
    SHIFT_STEP_TRIGGER = 1,     /* woken by the peer's counter: failover started */
    SHIFT_STEP_HANDSHAKE = 2,   /* receives reposted on the backup QP, counter sent (first,
                                 * or as the answer to the peer's) */
    SHIFT_STEP_REPLAY = 3,      /* outstanding sends re-posted on the backup QP */
    SHIFT_STEP_RECONNECT = 4,   /* default QP pair re-established (and probe posted) */
    SHIFT_STEP_PROBE_DONE = 5,  /* the probe completed: waiting for the fence */
    SHIFT_STEP_PROBE_FAILED = 6,/* the probe failed: still on the backup path */
    SHIFT_STEP_RELEASE = 7,     /* fence done: notice sent, held WRs released */
    SHIFT_STEP_SETUP = 8        /* two-phase set-up: the backup path's in-band exchange
                                 * (its QP connected, or the set-up messages sent) */
};

enum shift_ep_flags {
    /* Probe the reconnected default path with an empty WRITE over the wire before
     * waiting for the fence. Without it the reconnect counts as the probe (the
     * TLA+ specification's one-step abstraction). */
    SHIFT_EP_WIRE_PROBE = 1,
    /* Keep the layer's own copy of every WR posted, even with a backend whose send
     * queue can give them back (sq_pending): the failure-free path a backend without
     * it gets. Tests run both paths. */
    SHIFT_EP_COPY_POSTS = 2,
    /* Stay on the backup path once the replay is done: no reconnect of the default
     * path, no fail-back (the specification's D.failBack = FALSE, or a bound whose
     * failed path never recovers: Recover = FALSE). */
    SHIFT_EP_NO_FAIL_BACK = 4,
    /* The application connects the paths itself, in two phases (shift_ep_local_info,
     * shift_ep_connect: the default path out of band, the backup path in-band by the
     * layer): the endpoint is failover-ready only once the backup path's set-up is done
     * (shift_ep_info.backup_ready). Without it, an endpoint whose paths the backend
     * connected is taken as ready from the start. */
    SHIFT_EP_TWO_PHASE = 8
};

struct shift_ep_attr {
    int role;               /* enum shift_role */
    int design;             /* enum shift_design */
    uint32_t max_send_wr;   /* outstanding send WRs the layer tracks (>= 1) */
    uint32_t max_recv_wr;   /* outstanding receive WRs */
    uint32_t ctl_retries;   /* handshake retransmissions before giving up */
    unsigned int flags;     /* enum shift_ep_flags */
};

/* What the peer needs to connect its QP of a path to this endpoint's (the first phase
 * of a verbs set-up: what ibv_rc_pingpong sends over its socket). */
struct shift_path_info {
    uint32_t qp_num;        /* the QP's number (24 bits) */
    uint32_t psn;           /* the first PSN it sends with, the peer's rq_psn (24 bits) */
    uint16_t lid;           /* its port's LID (0 on RoCE) */
    uint8_t port;           /* its port number (>= 1) */
    uint8_t reserved;       /* 0 */
    uint8_t gid[16];        /* its port's GID */
    uint32_t ctl_qp_num;    /* the layer's control QP beside it (a libibverbs backend's
                             * datagram QP, 24 bits), or 0: its control messages ride the
                             * QP itself (the simulator's backend) */
};

/* ---- the backend: verbs operations the core uses; ctx is the backend's ---- */
struct shift_backend_qp_cap {
    uint32_t max_send_wr;
    uint32_t max_recv_wr;
    uint32_t max_inline_data;
};

struct shift_backend_ops {
    /* create the QP (and its CQ, shared by send and receive) on this host's NIC of
     * path (1 or 2); *qp is the backend's handle */
    int (*create_qp)(void *ctx, int path, const struct shift_backend_qp_cap *cap, void **qp);
    int (*destroy_qp)(void *ctx, void *qp);
    /* move the QP to a state (ERR flushes; RESET empties; RTR/RTS take the PSNs) */
    int (*modify_qp)(void *ctx, void *qp, int state, uint32_t rq_psn, uint32_t sq_psn);
    int (*query_qp)(void *ctx, void *qp, int *state, uint32_t *rq_psn, uint32_t *sq_psn);
    /* Reset this host's QP of the default path into incarnation `incarnation` (RESET,
     * INIT, RTR, RTS towards the peer's QP of the same incarnation, with fresh PSNs; its
     * queues emptied without completions): from then on no packet of its earlier life
     * (sent to or by it) is taken - a new QP number, or PSNs of a new epoch. The peer's
     * layer resets its own end, asked by a control message (the layer's reconnect).
     * Fails, changing nothing, if the NIC is dead or still has completions of the QP to
     * write to host memory. */
    int (*reset_qp)(void *ctx, void *qp, uint32_t incarnation);
    /* post a chain of WRs (wr->next); on error *bad is the first not posted */
    int (*post_send)(void *ctx, void *qp, struct shift_send_wr *wr, struct shift_send_wr **bad);
    int (*post_recv)(void *ctx, void *qp, struct shift_recv_wr *wr);
    int (*ring)(void *ctx, void *qp);
    int (*poll_cq)(void *ctx, void *qp, int n, struct shift_wc *wc);
    int (*reg_mr)(void *ctx, int path, uint64_t addr, size_t len, int access,
                  uint32_t *lkey, uint32_t *rkey, void **mr);
    int (*dereg_mr)(void *ctx, void *mr);
    /* a control message of the layer to the peer over path (reliable while it lives) */
    int (*ctl_send)(void *ctx, void *qp, const void *msg, uint32_t len);
    /* Optional. The oldest control message that arrived on qp and is not yet taken:
     * copied into buf (at most cap bytes; a longer one is cut, and the layer rejects
     * it), its length returned and the message taken; 0 if none waits; -errno if the
     * backend failed (the message, if any, waits for the next call). The layer polls it
     * (shift_ctl_poll, and first thing at every shift_progress). NULL: the backend hands
     * each message to shift_ctl_input as it arrives. */
    int (*ctl_recv)(void *ctx, void *qp, void *buf, uint32_t cap);
    /* Optional. The i-th WR (0 = oldest) posted to qp and not yet covered by a polled
     * successful completion, copied to *out as it was posted (inline data readable
     * until the next post): 0, or 1 if a polled error completion covers it; -ENOENT
     * past the last. A send queue keeps these anyway (mlx5 frees a WQE only when its
     * completion is polled). With it, the failure-free post hands the application's
     * chain straight to post_send (which must then accept SHIFT_SEND_INELIGIBLE and
     * give the default QP exactly max_send_wr slots) and the layer reads the WRs to
     * replay from the send queue at the failure; without it (NULL), the layer keeps
     * its own copy of every WR. */
    int (*sq_pending)(void *ctx, void *qp, uint32_t i, struct shift_send_wr *out);
    /* Optional. The QP's number (ibv_qp.qp_num) in *qpn, asked once for the default QP
     * when the endpoint is made. The application's QP is the default one: the layer
     * puts its number in every completion it gives the application, whichever QP the
     * completion came from (the backup QP's after a failover) or if the layer made it.
     * Without it (NULL), a completion carries the number of the QP it came from (0 for
     * one the layer made). */
    int (*query_qp_num)(void *ctx, void *qp, uint32_t *qpn);
    /* Optional. The next asynchronous event of the NIC qp is on (ibv_get_async_event
     * of its device): 1 and *event (enum shift_async_event), 0 if none is waiting, or
     * -errno. Without it (NULL), shift_async_event reads nothing: a NIC that dies in
     * fatal error is seen only through the peer (its counter) or the completion timer. */
    int (*async_event)(void *ctx, void *qp, int *event);
    /* Optional, all three or none: a CQ several QPs share (shift_cq_create; it needs
     * query_qp_num too). create_cq makes one of at least cqe entries on this host's NIC
     * of path (ibv_create_cq), *cq the backend's handle; destroy_cq frees it once no QP
     * is on it. create_qp_cq is create_qp with the QP's send and receive completions
     * going to cq (ibv_create_qp with send_cq = recv_cq = cq); poll_cq on such a QP
     * polls cq: the completions of every QP on it, in the CQ's order, each naming its
     * QP in qp_num (ibv_poll_cq's wc.qp_num); destroy_qp frees that QP alone. */
    int (*create_cq)(void *ctx, int path, uint32_t cqe, void **cq);
    int (*destroy_cq)(void *ctx, void *cq);
    int (*create_qp_cq)(void *ctx, int path, const struct shift_backend_qp_cap *cap, void *cq,
                        void **qp);
    /* Optional, both or neither: the two-phase set-up (shift_ep_local_info,
     * shift_ep_connect, the backup path's in-band set-up). local_info: what the peer
     * needs to connect to qp (its number, the first PSN it will send with, its port's
     * LID and GID; ibv_query_qp, ibv_query_gid). rtr_qp: move qp from INIT to RTR
     * against the remote's QP (ibv_modify_qp with dest_qp_num, rq_psn = remote->psn and
     * an address handle to its LID/GID); EINVAL if the remote cannot be reached from
     * qp's port. Without them (NULL), the backend connects the QPs itself and the two
     * calls give EOPNOTSUPP. */
    int (*local_info)(void *ctx, void *qp, struct shift_path_info *out);
    int (*rtr_qp)(void *ctx, void *qp, const struct shift_path_info *remote);
};

/* The asynchronous events the layer acts on (ibv_event_type's). */
enum shift_async_event { SHIFT_ASYNC_DEVICE_FATAL = 1, SHIFT_ASYNC_PORT_ACTIVE = 2 };

struct shift_mr_keys {
    uint32_t lkey;          /* the application's keys: those of the default NIC */
    uint32_t rkey;
    uint32_t lkey_backup;   /* the backup NIC's keys (give rkey_backup to the peer) */
    uint32_t rkey_backup;
};

struct shift_ep_info {
    int role;
    int design;
    int state;              /* enum shift_state, its role's side: a requester's send side
                             * (send_state); a responder's receive side as Default or
                             * Fallback (Moving is Fallback), Error once the connection
                             * is dead (an application error, or both paths gone) */
    int sent_ctr;           /* has it sent its counter since it last took a side off the
                             * default path? (spec: sentCtr) */
    int64_t peer_ctr;       /* the peer's receive counter, -1 before one arrives */
    int replayed;           /* has its send side replayed its outstanding WRs? */
    int probing;
    uint64_t fence;         /* the fence WR's wr_id (valid when has_fence) */
    int has_fence;          /* a fail-back waits for (or waited for) the fence; kept in
                             * Error as the spec keeps it */
    uint32_t epoch;         /* failovers this endpoint entered */
    uint64_t outstanding;   /* the role's side: a requester's send WRs posted and not
                             * known complete, a responder's receive WRs */
    uint64_t held;          /* requester: send WRs waiting for replay */
    uint64_t buffered;      /* completions held for the application */
    uint64_t sends_posted;  /* two-sided sends posted */
    uint64_t sends_completed; /* two-sided sends known complete */
    uint64_t recvs_posted;
    uint64_t recvs_completed; /* the receive counter */
    /* statistics */
    uint64_t failovers;
    uint64_t replayed_wrs;  /* WRs re-posted on the backup QP */
    uint64_t skipped_wrs;   /* notifications not replayed (the peer had them) */
    uint64_t refused_wrs;   /* WRs failed on purpose (atomic/ineligible in flight) */
    uint64_t failbacks;
    uint64_t ctl_sent;
    uint64_t ctl_received;  /* control messages taken (shift_ctl_input returned 0) */
    uint64_t ctl_rejected;  /* control messages refused as not the peer's (-EINVAL) */
    uint64_t backup_state_bytes; /* memory the layer keeps to be able to fail over */
    uint64_t backend_errors; /* backend calls that failed where the layer went on */
    /* both sides, as the spec has them per host */
    int send_state;         /* enum shift_state (spec: sendMode) */
    int recv_state;         /* enum shift_recv_state (spec: recvMode) */
    int fresh;              /* has the peer's counter arrived since it was last used? */
    int asked;              /* did it send its counter first, awaiting the peer's answer? */
    uint32_t peer_seq;      /* the sequence number of the last of the peer's counters it
                             * took (0 before one) (spec: peerSeq) */
    uint32_t ctr_seq;       /* the sequence number of its own latest counter, one per
                             * Handshake (0 before one) (spec: ctrSeq) */
    uint32_t qp_num;        /* the application's QP number (the default QP's), in every
                             * completion it polls; 0 if the backend cannot tell */
    uint64_t events_dropped; /* events the queue lost, oldest first (shift_poll_event) */
    uint64_t kept_notes;    /* ShiftCounted: notifications completed that no counter of
                             * the peer covers yet, kept for a replay (at most max_send_wr) */
    uint64_t notes_forgotten; /* ShiftCounted: kept notifications dropped, the oldest, to
                             * keep the last max_send_wr: a failover cannot replay them */
    uint64_t cq_kept;       /* on a shared CQ: completions of its QPs that other endpoints'
                             * polls read off the CQ and keep for it, not yet taken */
    /* the two-phase set-up (shift_ep_connect) */
    int setup_inband;       /* the default path was connected by shift_ep_connect: the
                             * backup path's set-up travels in-band over it */
    int backup_ready;       /* failover-ready: 1 for an endpoint its backend connected
                             * (no two-phase set-up); in-band, once its backup QP is
                             * connected to the peer's, the peer said its own is, and it
                             * holds every backup rkey the peer announced. A failure
                             * before that reaches the application as on plain RC */
    uint32_t keys_announced; /* its regions' key pairs announced to the peer in-band */
    uint32_t keys_acked;    /* of them, how many the peer said it holds */
    uint32_t peer_keys;     /* the peer's key pairs it announced (its last message) */
    uint32_t peer_keys_held; /* of them, how many this endpoint holds (1..n in order) */
    uint32_t incarnation;   /* the default QP's incarnation: one per reset (spec: epoch) */
    uint32_t reconnecting;  /* the incarnation it reset its default QP into and asked the
                             * peer to reset its end into, awaiting the answer; 0: none
                             * (spec: reconnecting) */
};

/* What the layer tells the application about its paths (shift_poll_event), in the
 * order it happened. `path` is the path an event concerns; `status` and `wrs` as said. */
enum shift_event_type {
    /* The layer took `path` for failed: an error completion polled from its QP, or a
     * failed post to it (status: the completion's, WR_FLUSH_ERR for a post); for the
     * backup path also a handshake that got no answer (RETRY_EXC_ERR). Not when the
     * peer's counter starts the failover: this host saw no failure. */
    SHIFT_EVENT_PATH_DOWN = 1,
    /* The endpoint leaves the default path (spec: Trigger); path 2. status: the error
     * that started it, or SUCCESS when the peer's counter did. */
    SHIFT_EVENT_FAILOVER_STARTED = 2,
    /* The send side replayed its outstanding WRs on the backup path (path 2) and works
     * there; wrs: the WRs replayed (the notifications the peer had are not). */
    SHIFT_EVENT_FAILOVER_FINISHED = 3,
    /* An atomic or ineligible WR was outstanding: the send side refused to fail over
     * (path 1); its outstanding WRs failed (wrs of them, status: the first one's) and
     * it is in Error. */
    SHIFT_EVENT_FAILOVER_REFUSED = 4,
    /* The send side is back on the default path (path 1): the fence completed, the
     * notice went to the peer, the held WRs were released. */
    SHIFT_EVENT_FAIL_BACK = 5,
    /* The receive side is back on the default path (path 1): the peer's fail-back
     * notice arrived and the receive WRs moved back. */
    SHIFT_EVENT_RECV_FAIL_BACK = 6,
    /* The application's own error (a bad key, a too short buffer: not a path's) failed
     * the QP pair; path: the QP it came off, status: the error. The endpoint is dead, as
     * a plain RC QP pair in ERR is, and the peer is told. No failover. */
    SHIFT_EVENT_APP_ERROR = 7,
    /* The peer's application failed the QP pair: its word arrived (path 2). This
     * endpoint's is failed too: every outstanding WR and receive WR came back flushed,
     * a failover it had started on its QP's flushes ended; the endpoint is dead. */
    SHIFT_EVENT_PEER_APP_ERROR = 8
};

struct shift_event {
    int type;               /* enum shift_event_type */
    int path;               /* 1 (default) or 2 (backup) */
    int status;             /* enum shift_wc_status, as the type says; else SUCCESS */
    uint64_t wrs;           /* WRs replayed or refused, as the type says; else 0 */
};

/* Events an endpoint keeps until the application polls them; past it the oldest
 * is dropped (counted in shift_ep_info.events_dropped). */
enum { SHIFT_EVENT_QUEUE = 32 };

/* ---- a CQ pair several endpoints share ----
 * One backend CQ per path (path 1's on the default NIC, path 2's on the backup NIC);
 * an endpoint created on the pair (shift_ep_create_on_cq) puts its QP of each path on
 * it (create_qp_cq). Each endpoint still polls only its own completions, exactly those and
 * in the order it would have seen on CQs of its own: the layer demultiplexes by QP
 * number. A completion of another endpoint's QP that a poll reads off the shared CQ is
 * kept for that endpoint, in CQ order, in a ring of its own per path of
 * 2 * (max_send_wr + max_recv_wr) + 2 entries (ShiftCounted: + 2 * max_send_wr), rounded
 * up to a power of two - twice the WRs and receive WRs the layer keeps outstanding, so
 * that stale flushes fit beside them; its next
 * poll of that path takes them before the CQ. A ring that is full loses nothing
 * silently: the endpoint's polls of that path give what the ring holds, then -EOVERFLOW
 * for good (a CQ overrun, as verbs reports one: the endpoint is to be destroyed), and the
 * other endpoints go on. A completion of no endpoint's QP (one destroyed) is dropped. An
 * endpoint on a shared CQ copies its WRs (no direct mode): a send queue frees a slot
 * when any endpoint polls its completion, so it no longer bounds what the application
 * has not polled. */
struct shift_cq_attr {
    uint32_t cqe;           /* entries of each path's CQ (1 .. 1 << 20); an endpoint
                             * joins only while the sum of max_send_wr + max_recv_wr of
                             * the QPs on a path stays within it (else ENOMEM) */
};
/* ops must have create_cq, destroy_cq, create_qp_cq and query_qp_num (else EINVAL); the
 * endpoints on it use the same ops (their ctx may differ). */
int shift_cq_create(const struct shift_backend_ops *ops, void *ctx,
                    const struct shift_cq_attr *attr, shift_cq *out);
/* EBUSY while an endpoint is on it; EINVAL for a bad handle. */
int shift_cq_destroy(shift_cq cq);

/* ---- the core API (verbs-like) ---- */
int shift_ep_create(const struct shift_backend_ops *ops, void *ctx,
                    const struct shift_ep_attr *attr, shift_ep *out);
/* shift_ep_create with both QPs on a shared CQ pair (cq NULL: shift_ep_create). EINVAL
 * for a bad cq or one of another ops table; ENOMEM if the QPs' share would pass its
 * cqe; a backend error of creating the QPs or reading their numbers as it is. */
int shift_ep_create_on_cq(const struct shift_backend_ops *ops, void *ctx,
                          const struct shift_ep_attr *attr, shift_cq cq, shift_ep *out);
int shift_ep_destroy(shift_ep ep);
int shift_reg_mr(shift_ep ep, uint64_t addr, size_t length, int access,
                 struct shift_mr_keys *keys);
/* Deregister a region shift_reg_mr registered, on both NICs. keys: as shift_reg_mr
 * gave them; all four must name one region of this endpoint that is still registered,
 * else EINVAL (a second dereg too). A WR that uses its keys afterwards fails as on
 * verbs: its completion is LOC_PROT_ERR (the lkey), REM_ACCESS_ERR at the peer's WR
 * (the rkey) - the application's error, which no failover hides. */
int shift_dereg_mr(shift_ep ep, const struct shift_mr_keys *keys);
/* The two-phase set-up of one path, as a verbs program does it (an endpoint whose
 * backend has local_info and rtr_qp; its QPs start in RESET). shift_ep_local_info: what
 * the peer needs to connect to this endpoint's QP of path (1: the default, 2: the
 * backup), to be sent to it out of band. shift_ep_connect: connect that QP to the
 * peer's, as remote gives it: INIT, RTR (dest QPN, rq_psn = remote->psn), RTS (sq_psn =
 * its own first PSN). EINVAL for a bad argument (path, a NULL pointer, a QPN or PSN
 * beyond 24 bits, a port 0, reserved not 0), EISCONN if that QP is connected already,
 * EOPNOTSUPP without the backend's ops, else the backend's error (the QP may be left in
 * INIT; connecting again retries). Connecting path 1 starts the in-band set-up of path
 * 2: the layer sends its backup QP's information and its regions' backup rkeys over
 * the default path (shift_progress; resent by shift_timer(ep, 2) while unanswered),
 * connects its backup QP to the peer's as the peer's layer announces it, and is
 * failover-ready (shift_ep_info.backup_ready) once both are and it holds the peer's
 * keys. The application may also connect path 2 itself (out of band); the in-band
 * exchange then checks the peer's announcement against it. */
int shift_ep_local_info(shift_ep ep, int path, struct shift_path_info *out);
int shift_ep_connect(shift_ep ep, int path, const struct shift_path_info *remote);
/* tell the endpoint the peer's keys of one region on both paths (out of band; an
 * endpoint set up in two phases learns them in-band) */
int shift_add_remote_keys(shift_ep ep, uint32_t rkey, uint32_t rkey_backup);
/* forget the peer's keys of a region it deregistered: EINVAL if rkey is not known */
int shift_del_remote_keys(shift_ep ep, uint32_t rkey);
int shift_post_send(shift_ep ep, struct shift_send_wr *wr, struct shift_send_wr **bad);
int shift_post_recv(shift_ep ep, struct shift_recv_wr *wr, struct shift_recv_wr **bad);
/* Up to n completions for the application (>= 0) or -errno. */
int shift_poll_cq(shift_ep ep, int n, struct shift_wc *wc);
/* One PollCq event: 1 and *wc if the application took a completion; 0 if none was
 * there; 2 if the layer took the completion instead: an error on the default QP that
 * started a failover (or an application's error, held with the completions behind
 * it), or the completion of a kept notification's replayed copy (ShiftCounted: the
 * application had its success), dropped. */
int shift_poll_step(shift_ep ep, struct shift_wc *wc);
/* One step of background work: enum shift_step (0: nothing to do), or -errno. */
int shift_progress(shift_ep ep);
/* A layer's timer for path fired. Path 2, the handshake timer (spec: HandshakeTimeout):
 * an endpoint that awaits the peer's answer (asked, its counter sent) resends its latest
 * counter, ctl_retries times, then gives up (not in the spec). Path 1, the completion
 * timer (spec: CompletionTimeout): a WR on the default path waited too long for its
 * completion (RNR NAKs retried for ever, F8): from Default with a WR outstanding there,
 * the endpoint takes it as a failure of the default path and fails over. 1 if it acted,
 * 0 if not. */
int shift_timer(shift_ep ep, int path);
/* The layer reads the asynchronous events of path's NIC (spec: FatalEvent). A NIC that
 * died in fatal error (IBV_EVENT_DEVICE_FATAL) completes nothing, not even flushes: the
 * layer completes its QP's WRs for it, as the kernel does for its own consumers - what
 * the CQ still holds, then every WR no completion covers (sends, then receive WRs),
 * flushed, then each later post at once - until the QP is reset. A flush on the default
 * QP starts a failover as any. The default NIC's port ACTIVE again (IBV_EVENT_PORT_ACTIVE:
 * the NIC recovered, or its link came up) lets a fail-back whose wire probe failed try
 * again (SHIFT_EP_WIRE_PROBE; it also tries at the application's next post). 1 if it
 * read a NIC's death, 0 if no event (or none that changes the endpoint's state) waited,
 * -errno for a bad argument or a backend that failed. */
int shift_async_event(shift_ep ep, int path);
/* A control message from the peer arrived on path (called by the backend): 0 if it
 * was taken (ctl_received; the word that the peer's application failed the QP pair
 * fails this endpoint's too, as plain RC's: every outstanding WR and receive WR comes
 * back flushed, and a dead endpoint answers a counter with it), or -EINVAL if it is not
 * a message the peer's layer could have sent on that path to this endpoint as it is;
 * such a message is counted
 * (ctl_rejected) and changes nothing else. Rejected: a NULL msg or a len other than
 * the message's (truncated or extended); a bad magic; an unknown kind; a field the
 * sender sets to 0 that is not (padding; the number of a fail-back notice; the number
 * and count of the word of an application's error), or a want_reply other than 0 or 1;
 * a fail-back notice that counts more notifications than this endpoint posted receive
 * WRs (recvs_posted: each took one) or a negative number of them; a kind on
 * the wrong path (counters and the word of an application's error on the backup path,
 * fail-back notices on the default one); a counter numbered 0, or older than the last
 * counter taken (stale); a counter that repeats the last number with another value,
 * or a later one with a smaller value (a receive counter only grows); a negative
 * counter; and, for Shift and ShiftPrefix, a counter above the notifications (two-sided
 * sends) this endpoint posted, sends_posted; a request to reconnect or its answer
 * (CTL_RECONNECT, CTL_RECONNECTED: backup path only, count and want_reply 0) numbered 0,
 * a request for an incarnation before this endpoint's or past the next (the peer asks
 * for one past its own, never ahead of this endpoint's), an answer for an incarnation
 * this endpoint never reset into (after shift_ep_info.incarnation). A fail-back notice
 * counts the notifications
 * its sender posted up to its fence; the receive side moves back once its counter
 * reaches that number (at once, or at the poll that takes the last of them: their
 * completions may not be in host memory yet, F11). A bad handle is -EINVAL, counted
 * nowhere. The two-phase set-up's messages (CTL_SETUP, CTL_KEYS: src/setup.c) are
 * taken only on the default path of an endpoint whose default path shift_ep_connect
 * connected, at exactly their kind's length, and rejected likewise when: a reserved
 * field or an unused key slot is not 0; a flag is unknown; the backup QP announced has
 * a QPN or PSN beyond 24 bits, port 0, or is not the one announced (or given to
 * shift_ep_connect) before; the peer, once ready, says it is not; its count of key
 * pairs announced shrinks or passes 2^20; its count of this endpoint's pairs it holds
 * shrinks or passes what this endpoint announced; a key message has no pair or more
 * than 8, numbers one 0 or past 2^20, or repeats a pair this endpoint holds with
 * another value (a pair's number is its for good). */
int shift_ctl_input(shift_ep ep, int path, const void *msg, uint32_t len);
/* Take the control messages waiting at the backend (ctl_recv), the default path's then
 * the backup path's, each as shift_ctl_input does. shift_progress calls it first; a
 * backend calls it when it learns that messages arrived (the simulator: at delivery).
 * The number of messages read (taken or rejected), 0 without ctl_recv, -errno for a bad
 * handle or a backend that failed (counted in backend_errors; what was read is taken). */
int shift_ctl_poll(shift_ep ep);
int shift_ep_query(shift_ep ep, struct shift_ep_info *info);
/* The oldest event the application has not taken: 1 and *ev, 0 if there is none, or
 * -EINVAL (a bad handle, a NULL ev). Events only report: polling them, or not, changes
 * nothing in the layer. */
int shift_poll_event(shift_ep ep, struct shift_event *ev);
/* The name of an event type ("PATH_DOWN"); NULL out of range. */
const char *shift_event_name(int type);
const char *shift_state_name(int state);
const char *shift_recv_state_name(int state);
const char *shift_design_name(int design);
/* Bytes of layer state per endpoint needed to fail over, for given queue sizes. */
uint64_t shift_backup_state_bytes(uint32_t max_send_wr, uint32_t max_recv_wr);

/* CDEF-END */

#ifdef __cplusplus
}
#endif
#endif
