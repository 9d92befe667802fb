/* simnic_internal.h - private to simnic's files (and the simnic binding, sim.c): the
 * NIC's objects, packets and wire, the helpers its files share, and the unchecked entry
 * points the binding calls. */
#ifndef SHIFT_SIMNIC_INTERNAL_H
#define SHIFT_SIMNIC_INTERNAL_H

#include "internal.h"
#include "simnic.h"

enum { PKT_REQ = 1, PKT_ACK = 2, PKT_CTL = 3, PKT_UD = 4 };
enum { SYN_ACK = 0, SYN_RNR = 1, SYN_INV_REQ = 2, SYN_REM_ACCESS = 3, SYN_REM_OP = 4 };

typedef struct sn_pkt {
    struct sn_pkt *next;
    uint8_t kind;
    uint8_t op;            /* request: wr opcode; ack: syndrome */
    uint32_t dst_qpn;
    uint32_t inc;          /* the incarnation of the QP that sent it (sn_reset_qp) */
    uint32_t psn;
    uint32_t len;
    uint32_t imm;
    uint32_t rkey;         /* a request's R_Key; a datagram's Q_Key (its DETH) */
    uint64_t raddr;        /* a request's remote address; a datagram's source QP */
    uint64_t cmp, swap, val;
    uint8_t *data;
    uint32_t cap;
    uint8_t small[24];
} sn_pkt;

typedef struct {
    sn_pkt *head, *tail;
    uint32_t n;
} sn_chan;

struct sn_fab;

typedef struct sn_mr_s {
    uint64_t h;
    struct sn_fab *f;
    int host, nic, idx;
    uint64_t addr;
    size_t len;
    int access;
    uint32_t lkey, rkey;
    int owned;             /* registered by an endpoint: not the caller's to free */
} sn_mr_s;

typedef struct sn_cq_s {
    uint64_t h;
    struct sn_fab *f;
    int host;
    struct shift_wc *ring;
    /* the send WQE a CQE completes (qpn 0 for a receive CQE), the NIC that made it */
    struct sn_cqe_src { uint32_t qpn; int nic; uint64_t idx; } *src;
    uint32_t cap;
    uint64_t head, tail;
    uint64_t written;      /* entries before it are in host memory (a poll sees them);
                            * [written, tail): made, not yet written (ack_before_cqe) */
    int overrun;
    int refs;
    int owned;             /* a connection's backend holds it: not the caller's to poll,
                            * to put a QP on, or to free */
} sn_cq_s;

typedef struct {
    struct shift_send_wr wr;
    uint32_t inl_len;
    uint8_t inl[SHIFT_MAX_INLINE];
} sn_wqe;

typedef struct {
    uint64_t wr_id;
    struct shift_sge sg;
    int num_sge;
} sn_rwqe;

enum { SN_SAVED = 16 };

typedef struct sn_qp_s {
    uint64_t h;
    struct sn_fab *f;
    int host, nic;
    uint32_t qpn;
    int state;
    sn_cq_s *scq, *rcq;
    uint32_t dest_qpn;
    int has_dest;
    int access;            /* remote operations accepted (SN_QP_ACCESS) */
    uint32_t max_inline;
    /* requester: WQE indices grow forever; slot = index % sq_cap */
    sn_wqe *sq;
    uint32_t sq_cap;
    uint64_t una, nxt, tail, db;
    /* slots are freed when a polled completion covers them, as mlx5 does: before
     * `done` by any completion, before `good` by a successful one (good <= done) */
    uint64_t good, done;
    uint32_t psn_base;     /* psn(index) = psn_base + index */
    uint32_t retries_left, rnr_left;
    /* responder */
    uint32_t epsn;
    sn_rwqe *rq;
    uint32_t rq_cap;
    uint64_t rq_head, rq_tail;
    struct { uint32_t psn; int valid; uint64_t val; } saved[SN_SAVED];
    uint32_t saved_next;
    sn_ctl_handler ctl_fn;
    void *ctl_arg;
    int owned;             /* a connection's backend holds it: not the caller's to free */
    int silent;            /* its NIC died in fatal error (device_fatal): in ERR, it
                            * completes nothing, not even flushes, until a reset */
    uint32_t inc;          /* its incarnation: every reset of one end (sn_reset_qp) starts a
                            * new one, and a packet of another incarnation is discarded (it
                            * was sent to or by the QP's earlier life) */
    int ud;                /* a UD QP (simnic_ud.c): datagrams, never a destination */
    uint32_t qkey;         /* UD: the Q_Key its datagrams must carry */
} sn_qp_s;

/* A NIC's asynchronous events, counted by kind (a reader keeps its own counts): its
 * deaths (IBV_EVENT_DEVICE_FATAL) and its port's returns to ACTIVE (IBV_EVENT_PORT_ACTIVE:
 * the NIC recovered or its link came back). */
typedef struct {
    uint32_t fatal, active;
} sn_events;

typedef struct {
    int alive;
    int idle;              /* no QP has a packet to send: set by a transmit that found
                            * none, cleared by whatever may give a QP one (qp_kick) */
    sn_mr_s **mrs;
    int nmr, capmr;
    sn_qp_s **qps;
    int nqp, capqp;
    int rr;
    sn_events raised;      /* the events raised since the fabric was made: each reader
                            * (sn_async_event's, each of sim.c's endpoints) reads every one
                            * once, from its own counts (sn__async_event) */
    sn_events read;        /* ... of them sn_async_event read */
} sn_nic;

typedef struct sn_fab {
    uint64_t h;
    struct sn_fabric_attr attr;
    struct {
        uint8_t *mem;
        size_t size;
        sn_nic nic[3];     /* 1 and 2 */
    } host[2];
    int link[3];
    sn_chan wire[3][2];
    sn_pkt *freel;
    sn_qp_s **qps;         /* by qpn - qpn_base */
    uint32_t qpn_base;     /* SN_QPN_BASE; a one-host fabric's B: + SN_QPN_HOST_B */
    uint32_t nqps, capqps;
    sn_cq_s **cqs;
    uint32_t ncqs, capcqs;
    struct sn_counters ctr;
    int users;             /* shift connections bound to this fabric */
    int local;             /* sn_host_create's host; -1: both hosts are here */
} sn_fab;

/* QP numbers: from 0x100 (a one-host fabric of host B: + SN_QPN_HOST_B, simnic.h) */
enum { SN_QPN_BASE = 0x100 };

/* unchecked entry points for the backend (the caller holds valid objects) */
INTERNAL int sn__post_send(sn_qp_s *qp, struct shift_send_wr *wr, struct shift_send_wr **bad);
INTERNAL int sn__post_recv(sn_qp_s *qp, struct shift_recv_wr *wr, struct shift_recv_wr **bad);
INTERNAL int sn__poll_cq(sn_cq_s *cq, int n, struct shift_wc *wc);
/* The next of NIC n's events for a reader that has read *read of them: 1 and *event, or
 * 0 if it has read them all. Deaths are read before returns to ACTIVE (a reader that acts
 * on both, as the layer, sees the NIC's latest state last only if it is up). */
INTERNAL int sn__async_event(const sn_nic *n, sn_events *read, int *event);
INTERNAL int sn__sq_pending(sn_qp_s *qp, uint32_t i, struct shift_send_wr *out);
INTERNAL int sn__modify(sn_qp_s *qp, const struct sn_qp_attr *attr, int mask);
INTERNAL int sn__reconnect(sn_qp_s *qp);
INTERNAL int sn__reset_qp(sn_qp_s *qp, uint32_t inc);
INTERNAL int sn__ctl_send(sn_qp_s *qp, const void *msg, uint32_t len);
INTERNAL int sn__ring(sn_qp_s *qp);
INTERNAL int sn__timeout(sn_fab *f, int host, int path);

/* ----------------------------------------------------- helpers its files use ---- */
/* the object of a handle, or NULL */
static inline sn_fab *sn__fab(sn_fabric f) { return h_get(f, H_FABRIC); }
static inline sn_qp_s *sn__qp(sn_qp qp) { return h_get(qp, H_QP); }
static inline sn_mr_s *sn__mr(sn_mr mr) { return h_get(mr, H_MR); }
static inline sn_cq_s *sn__cq(sn_cq cq) { return h_get(cq, H_CQ); }

static inline int valid_host(int h) { return h == SN_HOST_A || h == SN_HOST_B; }
static inline int valid_path(int p) { return p == 1 || p == 2; }
static inline int valid_dir(int d) { return d == SN_AtoB || d == SN_BtoA; }
static inline int dir_from(int host) { return host == SN_HOST_A ? SN_AtoB : SN_BtoA; }
/* a host whose objects and events this fabric holds (both, or sn_host_create's) */
static inline int here(const struct sn_fab *f, int h)
{
    return valid_host(h) && (f->local < 0 || f->local == h);
}

/* the QP may have a packet to send: its NIC's transmit must look again */
static inline void qp_kick(sn_qp_s *qp) { qp->f->host[qp->host].nic[qp->nic].idle = 0; }

static inline sn_qp_s *qp_by_qpn(sn_fab *f, uint32_t qpn)
{
    if (qpn < f->qpn_base || qpn - f->qpn_base >= f->nqps)
        return NULL;
    return f->qps[qpn - f->qpn_base];
}

static inline uint32_t qp_psn(const sn_qp_s *qp, uint64_t idx)
{
    return qp->psn_base + (uint32_t)idx;
}

/* a packet back to the fabric's free list; the head packet off a channel */
static inline void pkt_free(sn_fab *f, sn_pkt *p)
{
    p->next = f->freel;
    f->freel = p;
}

static inline sn_pkt *chan_pop(sn_chan *c)
{
    sn_pkt *p = c->head;
    if (!p)
        return NULL;
    c->head = p->next;
    if (!c->head)
        c->tail = NULL;
    c->n--;
    return p;
}

/* --------------------------------------------- functions its files share ---- */
/* simnic_wire.c: packets and the wire's channels */
INTERNAL sn_pkt *pkt_new(sn_fab *f, uint32_t len);
INTERNAL void chan_push(sn_fab *f, int path, int dir, sn_pkt *p);
INTERNAL void chan_clear(sn_fab *f, int path);
INTERNAL void chan_purge(sn_fab *f, int path, uint32_t qa, uint32_t qb);
/* simnic_fabric.c: completions */
INTERNAL void send_cqe(sn_qp_s *qp, const struct shift_send_wr *wr, int status, uint64_t idx);
/* write a CQ's unwritten completions into host memory; lose those NIC nic made */
INTERNAL void cq_write_all(sn_cq_s *cq);
INTERNAL void cq_lose_unwritten(sn_cq_s *cq, int nic);
INTERNAL void recv_cqe(sn_qp_s *qp, const sn_rwqe *r, int status, int opcode, uint32_t len,
                       int has_imm, uint32_t imm);
/* a UD receive completion: the datagram's source QP, its length with the GRH's room */
INTERNAL void ud_recv_cqe(sn_qp_s *qp, const sn_rwqe *r, int status, uint32_t len,
                          int has_imm, uint32_t imm, uint32_t src_qp);
/* simnic_ud.c: UD QPs' transitions, and a datagram delivered to a live NIC */
INTERNAL int ud_modify(sn_qp_s *qp, const struct sn_qp_attr *attr, int mask);
INTERNAL void ud_deliver(sn_fab *f, int host, int path, sn_pkt *p);
/* simnic_rc.c: memory regions as the NIC finds them */
INTERNAL sn_mr_s *mr_lookup(sn_fab *f, int host, int nic, uint32_t key, int remote);
INTERNAL int mr_covers(const sn_mr_s *mr, uint64_t addr, uint64_t len);
/* simnic_qp.c: QPs */
INTERNAL int qp_create(sn_fabric fh, int host, int nic, const struct sn_qp_init_attr *attr,
                       int ud, sn_qp *out);
INTERNAL int caller_qp(sn_qp q, sn_qp_s **out);
INTERNAL void qp_to_err(sn_qp_s *qp);
INTERNAL void qp_fail(sn_qp_s *qp, uint64_t err_idx, int status);
INTERNAL void qp_release(sn_qp_s *qp);
/* its queues emptied without completions (a reset) */
INTERNAL void qp_empty(sn_qp_s *qp);

#endif
