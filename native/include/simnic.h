/*
 * simnic.h - a deterministic software RC NIC ("simnic") with a wire between two
 * hosts and fault injection.
 *
 * The fabric: hosts A (0) and B (1), each with NIC 1 and NIC 2; path p joins NIC p
 * of A, link p and NIC p of B (rail-aligned). Each path carries two FIFO channels of
 * packets, AtoB (0) and BtoA (1). Nothing moves by itself: the wire, the NICs' timers
 * and the faults advance only through the step functions below, the events of the
 * project's event vocabulary (docs/design.md), so a run is reproducible from its
 * event trace. No threads, no clocks.
 *
 * Handles (sn_fabric, sn_cq, sn_qp, sn_mr) are checked on every call: NULL, freed or
 * forged handles give EINVAL (EBADF for a fabric), never a crash. Return values follow
 * the convention stated in shift.h (0 or a positive errno for a verbs call, a count or
 * -errno for a poll or an event). A QP or MR that a shift connection owns is not the
 * caller's to destroy or to post on: EBUSY.
 *
 * RC semantics implemented (see docs/performance.md and native/README.md):
 *  - one packet per message (messages up to SHIFT_MAX_MSG bytes, 64 KiB: the wire's
 *    packets are not held to an MTU), one PSN per WR;
 *  - the responder executes the request with the expected PSN and ACKs it; a
 *    duplicate is re-ACKed and not re-executed (a READ re-reads memory, an atomic
 *    returns its saved result); a request ahead of the expected PSN is discarded;
 *  - ACKs are cumulative; a later ACK does not complete an earlier READ/atomic whose
 *    response is missing: the requester goes back to it (implicit NAK);
 *  - sn_timeout: go-back-N while retries remain, else RETRY_EXC_ERR for the oldest
 *    unacknowledged WR, QP to ERR and WR_FLUSH_ERR for the rest and for later posts;
 *  - with ack_before_cqe, a responder's successful receive completion is made (and
 *    the request ACKed) before it is in host memory: sn_write_cqe writes the oldest,
 *    a later completion of the same CQ writes those before it, a QP entering the error
 *    state on a live NIC writes them, and a NIC that dies loses those it made;
 *  - receiver not ready: a SEND/WRITE_WITH_IMM that finds no receive WR is discarded
 *    (the timeout retransmits it), or with rnr_nak answered by an RNR NAK (which also
 *    acknowledges every request before it) and retransmitted rnr_retry times before
 *    RNR_RETRY_EXC_ERR, or for ever at SN_RNR_FOREVER (spec: RnrNak, RnrRetry);
 *  - bad access: a bad lkey or local bounds -> LOC_PROT_ERR; a bad rkey, remote
 *    bounds or missing remote permission -> REM_ACCESS_ERR (both QPs to ERR); a
 *    misaligned or wrong-sized atomic, or a SEND longer than the receive buffer ->
 *    REM_INV_REQ_ERR at the requester (LOC_LEN_ERR on the receive);
 *  - with device_fatal, a NIC that dies completes nothing, as a device in fatal error
 *    does under user-space verbs: its QPs go silent (in ERR, no flush, later posts
 *    taken without a completion, until a reset) and it raises the asynchronous event
 *    IBV_EVENT_DEVICE_FATAL, which sn_async_event reads (spec: DeviceFatal).
 *
 * UD semantics (sn_create_ud_qp, sn_post_send_ud), as UD hardware: a datagram is one
 * packet on its NIC's path, FIFO with the path's other packets, put there at post time
 * (no Transmit step, no ACK, no retransmission; a signaled send completes at once). At
 * delivery it goes to the UD QP its destination QP number names on the receiving NIC
 * (in RTR or RTS, the Q_Key matching), into its oldest receive WR: byte_len is 40 + the
 * payload, which lands after the first 40 bytes of the buffer (the GRH's room, left as
 * it was: no GRH is written). No such QP, a bad Q_Key or no receive WR: the datagram is
 * discarded and counted (ud_discarded). A dead link or NIC loses it as any packet.
 */
#ifndef SIMNIC_H
#define SIMNIC_H

#include "shift_verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CDEF-BEGIN */
typedef struct sn_fabric_opaque *sn_fabric;
typedef struct sn_cq_opaque *sn_cq;
typedef struct sn_qp_opaque *sn_qp;
typedef struct sn_mr_opaque *sn_mr;

enum sn_host { SN_HOST_A = 0, SN_HOST_B = 1 };
enum sn_dir { SN_AtoB = 0, SN_BtoA = 1 };
enum { SN_RNR_FOREVER = 7 }; /* an rnr_retry that retries for ever (IBTA's encoding) */
enum sn_async {
    SN_ASYNC_DEVICE_FATAL = 1, /* IBV_EVENT_DEVICE_FATAL: the NIC died (device_fatal) */
    SN_ASYNC_PORT_ACTIVE = 2   /* IBV_EVENT_PORT_ACTIVE: it recovered, or its link came up */
};

/* Hardware's RC is sn_fabric_attr_init's (below); the defaults named here are a NULL
 * attr's, the idealised NIC's. */
struct sn_fabric_attr {
    size_t mem_size;        /* bytes of memory per host (default 65536) */
    uint32_t retry_cnt;     /* retransmissions before RETRY_EXC_ERR (default 7, max 7) */
    uint32_t rnr_retry;     /* RNR NAK retries before RNR_RETRY_EXC_ERR (default 7:
                             * SN_RNR_FOREVER, as verbs encodes it) */
    int rnr_nak;            /* 0: a notification without a receive WR is discarded;
                             * 1: answered by an RNR NAK (hardware; spec: RnrNak) */
    int ack_before_cqe;     /* 1: a notification's receive completion reaches host memory
                             * after its ACK left, when sn_write_cqe writes it; a NIC that
                             * dies first loses it (hardware's order; spec: AckBeforeCqe) */
    int device_fatal;       /* 1: a NIC that dies flushes nothing and raises an
                             * asynchronous event instead (spec: DeviceFatal) */
};

struct sn_qp_init_attr {
    sn_cq send_cq;
    sn_cq recv_cq;
    uint32_t max_send_wr;
    uint32_t max_recv_wr;
    uint32_t max_inline_data; /* <= SHIFT_MAX_INLINE */
};

enum sn_qp_attr_mask {
    SN_QP_STATE = 1,
    SN_QP_DEST_QPN = 2,
    SN_QP_RQ_PSN = 4,
    SN_QP_SQ_PSN = 8,
    SN_QP_ACCESS = 16,
    SN_QP_QKEY = 32         /* UD only; required from RESET to INIT */
};

struct sn_qp_attr {
    int qp_state;
    uint32_t dest_qp_num;
    uint32_t rq_psn;        /* the responder's expected PSN */
    uint32_t sq_psn;        /* the PSN of the next new request */
    uint32_t qp_num;        /* query only */
    int nic;                /* query only: 1 or 2 */
    int host;               /* query only */
    int access;             /* the remote operations the QP accepts as a responder
                             * (SHIFT_ACCESS_REMOTE_*; a new QP accepts all): another is
                             * NAKed as an invalid request (rxe_resp.c check_op_valid) */
    uint32_t qkey;          /* UD: the Q_Key a datagram must carry to be received */
    int ud;                 /* query only: 1 for a UD QP */
};

struct sn_counters {
    uint64_t transmitted;   /* request packets put on a wire (retransmissions too) */
    uint64_t delivered;     /* packets taken off a wire by sn_deliver */
    uint64_t dropped;       /* by sn_drop */
    uint64_t lost;          /* to a dead link or NIC */
    uint64_t executed;      /* requests executed by a responder */
    uint64_t duplicates;    /* duplicate requests answered without re-execution */
    uint64_t timeouts;      /* retransmission timer expiries that went back */
    uint64_t malformed;     /* bytes sn_wire_put refused: not a packet */
    uint64_t ud_discarded;  /* datagrams delivered to a live NIC that no UD QP took: no
                             * such QP, a bad Q_Key, no receive WR */
};

/* RC as hardware runs it, the spec's defaults (spec/designs.toml's defaults.constants):
 * mem_size 65536, retry_cnt 7, rnr_retry SN_RNR_FOREVER, and rnr_nak, ack_before_cqe and
 * device_fatal on (simnic's implicit NAK is always on). Set what differs after it:
 *     struct sn_fabric_attr a;
 *     sn_fabric_attr_init(&a);
 *     a.retry_cnt = 1;
 * A zero-initialised attr keeps the idealised NIC (all three off; mem_size 0 is 65536),
 * as a NULL attr to sn_fabric_create does (with retry_cnt and rnr_retry 7). NULL: nothing. */
void sn_fabric_attr_init(struct sn_fabric_attr *attr);
/* A fabric of both hosts; attr NULL: the idealised NIC with retry_cnt and rnr_retry 7. */
int sn_fabric_create(const struct sn_fabric_attr *attr, sn_fabric *out);
/* One host of a fabric whose other host is elsewhere (another process, or another
 * fabric of this one): CQs, QPs and memory regions exist only on `host`; a memory
 * region may lie anywhere in the process's memory (the caller keeps it mapped, as
 * registration pins pages; attr->mem_size is unused and sn_host_mem gives ENOTSUP); a
 * QP's destination may be any QP number (no NIC knows the remote QPs); there is no
 * sn_connect or sn_reconnect (each end is brought up by its own host); and the wire past
 * the host's NICs is the caller's: sn_wire_take what the host sent, sn_wire_put what
 * reaches it, sn_deliver it. */
int sn_host_create(const struct sn_fabric_attr *attr, int host, sn_fabric *out);
/* A one-host fabric of host B numbers its QPs from SN_QPN_HOST_B up, host A's below it:
 * a packet's destination QP number says which host it is for (a program's loopback). */
enum { SN_QPN_HOST_B = 0x200000 };
int sn_fabric_destroy(sn_fabric f);
/* The memory of a host: [*base, *base + *size). Regions must be registered in it. */
int sn_host_mem(sn_fabric f, int host, uint8_t **base, size_t *size);
int sn_counters_get(sn_fabric f, struct sn_counters *out);

int sn_reg_mr(sn_fabric f, int host, int nic, uint64_t addr, size_t length, int access,
              sn_mr *out);
int sn_mr_keys(sn_mr mr, uint32_t *lkey, uint32_t *rkey);
int sn_dereg_mr(sn_mr mr);

int sn_create_cq(sn_fabric f, int host, int cqe, sn_cq *out);
/* EBUSY while a QP uses it, or a connection owns it */
int sn_destroy_cq(sn_cq cq);
/* Up to n completions into wc; returns how many (>= 0) or -errno (-EBUSY: a CQ a
 * connection owns, whose completions are its layer's). */
int sn_poll_cq(sn_cq cq, int n, struct shift_wc *wc);

int sn_create_qp(sn_fabric f, int host, int nic, const struct sn_qp_init_attr *attr,
                 sn_qp *out);
int sn_destroy_qp(sn_qp qp);
/* RESET: EBUSY, changing nothing, while the NIC owes host memory completions on the QP's
 * CQs (ack_before_cqe), as sn_reset_qp. */
int sn_modify_qp(sn_qp qp, const struct sn_qp_attr *attr, int mask);
int sn_query_qp(sn_qp qp, struct sn_qp_attr *attr);
/* A UD QP: the same life as an RC one (modify, query, destroy, sn_post_recv), but
 * RESET -> INIT sets its Q_Key (SN_QP_QKEY), RTR takes no destination or PSN, and it
 * sends with sn_post_send_ud. Its number comes from the RC QPs' space: no QP of either
 * host shares it (a one-host fabric of host B: from SN_QPN_HOST_B up). */
int sn_create_ud_qp(sn_fabric f, int host, int nic, const struct sn_qp_init_attr *attr,
                    sn_qp *out);
/* One SEND or SEND_WITH_IMM from a UD QP in RTS to QP dest_qpn (24 bits) of the peer's
 * NIC on the same path, carrying qkey: on the wire at once (num_sge 0 or 1, up to
 * SHIFT_MAX_MSG bytes; wr->next is ignored). 0, EINVAL (malformed, not UD, not RTS),
 * ENOMEM (send queue full). In ERR the WR is flushed; on a dead device it is taken and
 * nothing completes. */
int sn_post_send_ud(sn_qp qp, const struct shift_send_wr *wr, uint32_t dest_qpn,
                    uint32_t qkey);
/* Both QPs (one per host, same NIC index) RESET/INIT -> RTS, connected, PSNs 0. */
int sn_connect(sn_qp a, sn_qp b);
/* The connection manager re-establishes the pair qp belongs to: both ends are reset
 * (their queues emptied without completions) and brought to RTS with fresh PSNs, and
 * the pair's packets leave the wire. ENETUNREACH unless link and both NICs are up. */
int sn_reconnect(sn_qp qp);
/* One end, on its own host: qp is reset (its queues emptied without completions; what its
 * CQ holds stays, for the caller to drain) and brought to RTS towards the same destination with fresh PSNs,
 * in incarnation `inc`: from then on it takes only packets of that incarnation, and its own
 * carry it (a reconnect's new QP number, or PSNs of a new epoch). The peer's end does the
 * same on its host. ENETDOWN if qp's NIC is dead; EBUSY while its NIC has completions of it
 * not yet written to host memory (ack_before_cqe: a drain waits for them); EINVAL if it was
 * never connected. */
int sn_reset_qp(sn_qp qp, uint32_t inc);

/* Post a list of WRs; on error *bad (if not NULL) is the first one not posted.
 * ENOMEM when the queue is full, EINVAL for a malformed WR or a QP not yet ready.
 * A QP in ERR accepts the WR and completes it with WR_FLUSH_ERR, as verbs does. */
int sn_post_send(sn_qp qp, struct shift_send_wr *wr, struct shift_send_wr **bad);
int sn_post_recv(sn_qp qp, struct shift_recv_wr *wr, struct shift_recv_wr **bad);
/* Make every WQE written with SHIFT_SEND_NO_DOORBELL eligible for transmission. */
int sn_ring(sn_qp qp);

/* Layer control messages ride the path alongside qp's packets: delivered in FIFO order
 * with them while the path lives, lost when it dies, and lost singly by sn_drop like any
 * packet. EIO if qp's NIC is dead or qp is not in RTS. */
typedef void (*sn_ctl_handler)(void *arg, sn_qp qp, const void *msg, uint32_t len);
int sn_ctl_send(sn_qp qp, const void *msg, uint32_t len);
int sn_set_ctl_handler(sn_qp qp, sn_ctl_handler fn, void *arg);

/* --- the events: each returns 1 if it did something, 0 if not enabled, or -errno --- */
int sn_transmit(sn_fabric f, int host, int path);   /* next request of a QP of NIC path */
int sn_deliver(sn_fabric f, int path, int dir);      /* the head packet arrives */
int sn_drop(sn_fabric f, int path, int dir);         /* the head packet is lost */
int sn_timeout(sn_fabric f, int host, int path);     /* the NIC's retransmission timers */
int sn_link_down(sn_fabric f, int path);
int sn_link_up(sn_fabric f, int path);
int sn_nic_fail(sn_fabric f, int host, int nic);
int sn_nic_recover(sn_fabric f, int host, int nic);
/* NIC nic of host writes the oldest receive completion it made and has not yet written
 * into host memory, where a poll finds it (ack_before_cqe) */
int sn_write_cqe(sn_fabric f, int host, int nic);
/* Read one asynchronous event of NIC nic of host (its death, with device_fatal; its
 * port ACTIVE again): 1 and *event (enum sn_async), 0 if none is waiting. */
int sn_async_event(sn_fabric f, int host, int nic, int *event);
/* Deterministic scheduler: transmit and deliver until nothing moves or budget steps
 * ran; returns the number of steps (no drops, no timeouts, no faults). */
long sn_pump(sn_fabric f, long budget);
/* Packets on a channel; 0 for bad arguments. Head kind: 0 none, 1 request, 2 ack,
 * 3 control, 4 datagram (UD). */
int sn_wire_len(sn_fabric f, int path, int dir);
/* The wire as bytes (a packet's encoding: a header of SN_WIRE_HEADER bytes, then its
 * payload). sn_wire_take takes the head packet off a channel into buf: its length, 0 if
 * the channel is empty, -ENOSPC if cap is too small (the packet stays; SN_WIRE_MAX is
 * always enough). sn_wire_put appends a packet to a channel: 0 (a packet onto a dead
 * link is lost, as any), EINVAL for bytes that are not a well-formed packet (counted as
 * malformed, not acted on). Input from the network: every field is checked. */
enum { SN_WIRE_HEADER = 60, SN_WIRE_MAX = 65596 /* header + SHIFT_MAX_MSG */ };
int sn_wire_take(sn_fabric f, int path, int dir, void *buf, uint32_t cap);
int sn_wire_put(sn_fabric f, int path, int dir, const void *buf, uint32_t len);
int sn_wire_head_kind(sn_fabric f, int path, int dir);
int sn_path_healthy(sn_fabric f, int path);
int sn_nic_alive(sn_fabric f, int host, int nic);
int sn_link_is_up(sn_fabric f, int path);

/* simnic's entry points as a table. libshift's handles are valid only in the copy of the
 * code that made them (each copy has its own handle table): a program with two copies in
 * one process (the Python extension, and a verbs provider linked to libshift.so) gives
 * the code that must act on another copy's fabric that copy's table. size is
 * sizeof(struct sn_ops) of the copy that filled it (a check that both agree). */
struct sn_ops {
    size_t size;
    int (*fabric_create)(const struct sn_fabric_attr *attr, sn_fabric *out);
    int (*host_create)(const struct sn_fabric_attr *attr, int host, sn_fabric *out);
    int (*fabric_destroy)(sn_fabric f);
    int (*host_mem)(sn_fabric f, int host, uint8_t **base, size_t *size);
    int (*counters_get)(sn_fabric f, struct sn_counters *out);
    int (*reg_mr)(sn_fabric f, int host, int nic, uint64_t addr, size_t length, int access,
                  sn_mr *out);
    int (*mr_keys)(sn_mr mr, uint32_t *lkey, uint32_t *rkey);
    int (*dereg_mr)(sn_mr mr);
    int (*create_cq)(sn_fabric f, int host, int cqe, sn_cq *out);
    int (*destroy_cq)(sn_cq cq);
    int (*poll_cq)(sn_cq cq, int n, struct shift_wc *wc);
    int (*create_qp)(sn_fabric f, int host, int nic, const struct sn_qp_init_attr *attr,
                     sn_qp *out);
    int (*create_ud_qp)(sn_fabric f, int host, int nic, const struct sn_qp_init_attr *attr,
                        sn_qp *out);
    int (*destroy_qp)(sn_qp qp);
    int (*modify_qp)(sn_qp qp, const struct sn_qp_attr *attr, int mask);
    int (*query_qp)(sn_qp qp, struct sn_qp_attr *attr);
    int (*post_send)(sn_qp qp, struct shift_send_wr *wr, struct shift_send_wr **bad);
    int (*post_send_ud)(sn_qp qp, const struct shift_send_wr *wr, uint32_t dest_qpn,
                        uint32_t qkey);
    int (*post_recv)(sn_qp qp, struct shift_recv_wr *wr, struct shift_recv_wr **bad);
    int (*transmit)(sn_fabric f, int host, int path);
    int (*deliver)(sn_fabric f, int path, int dir);
    int (*timeout)(sn_fabric f, int host, int path);
    int (*link_down)(sn_fabric f, int path);
    int (*link_up)(sn_fabric f, int path);
    int (*nic_fail)(sn_fabric f, int host, int nic);
    int (*nic_recover)(sn_fabric f, int host, int nic);
    int (*async_event)(sn_fabric f, int host, int nic, int *event);
    int (*wire_take)(sn_fabric f, int path, int dir, void *buf, uint32_t cap);
    int (*wire_put)(sn_fabric f, int path, int dir, const void *buf, uint32_t len);
    int (*nic_alive)(sn_fabric f, int host, int nic);
    int (*link_is_up)(sn_fabric f, int path);
};
/* out: this copy's functions (NULL: nothing) */
void sn_get_ops(struct sn_ops *out);
/* CDEF-END */

#ifdef __cplusplus
}
#endif
#endif
