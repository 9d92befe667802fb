/* internal.h - private to libshift: the handle table and simnic's internals. */
#ifndef SHIFT_INTERNAL_H
#define SHIFT_INTERNAL_H

#include "shift.h"
#include <stdbool.h>

/* ---------------------------------------------------------------- handles ---- */
/* A handle is (generation << 32 | slot) disguised as a pointer: NULL, freed and
 * forged handles are recognised without dereferencing anything. Single-threaded. */
enum h_type { H_FABRIC = 1, H_CQ, H_QP, H_MR, H_EP, H_CONN };
uint64_t h_new(void *obj, int type);
void *h_get(const void *handle, int type);
void h_free(uint64_t handle);
#define H_PTR(h) ((void *)(uintptr_t)(h))

/* keep a rarely taken path out of its caller, so the common path's frame stays small */
#if defined(__GNUC__)
#define COLD_PATH __attribute__((noinline))
#else
#define COLD_PATH
#endif

/* ---------------------------------------------------------------- simnic ----- */
enum { PKT_REQ = 1, PKT_ACK = 2, PKT_CTL = 3 };
enum { SYN_ACK = 0, SYN_RNR = 1, SYN_INV_REQ = 2, SYN_REM_ACCESS = 3, SYN_REM_OP = 4 };

typedef struct sn_pkt {
    struct sn_pkt *next;
    uint8_t kind;
    uint8_t op;            /* request: wr opcode; ack: syndrome */
    uint32_t dst_qpn;
    uint32_t psn;
    uint32_t len;
    uint32_t imm;
    uint32_t rkey;
    uint64_t raddr, cmp, swap, val;
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
    struct sn_cqe_src { uint32_t qpn; uint64_t idx; } *src; /* the send WQE a CQE completes */
    uint32_t cap;
    uint64_t head, tail;
    int overrun;
    int refs;
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
} sn_qp_s;

typedef struct {
    int alive;
    int idle;              /* no QP has a packet to send: set by a transmit that found
                            * none, cleared by whatever may give a QP one (qp_kick) */
    sn_mr_s **mrs;
    int nmr, capmr;
    sn_qp_s **qps;
    int nqp, capqp;
    int rr;
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
    sn_qp_s **qps;         /* by qpn - SN_QPN_BASE */
    uint32_t nqps, capqps;
    sn_cq_s **cqs;
    uint32_t ncqs, capcqs;
    struct sn_counters ctr;
    int users;             /* shift connections bound to this fabric */
} sn_fab;

enum { SN_QPN_BASE = 0x100 };

/* unchecked entry points for the backend (the caller holds valid objects) */
int sn__post_send(sn_qp_s *qp, struct shift_send_wr *wr, struct shift_send_wr **bad);
int sn__post_recv(sn_qp_s *qp, struct shift_recv_wr *wr, struct shift_recv_wr **bad);
int sn__poll_cq(sn_cq_s *cq, int n, struct shift_wc *wc);
int sn__sq_pending(sn_qp_s *qp, uint32_t i, struct shift_send_wr *out);
int sn__modify(sn_qp_s *qp, const struct sn_qp_attr *attr, int mask);
int sn__reconnect(sn_qp_s *qp);
int sn__ctl_send(sn_qp_s *qp, const void *msg, uint32_t len);
int sn__ring(sn_qp_s *qp);
int sn__timeout(sn_fab *f, int host, int path);
sn_fab *sn__fab(sn_fabric f);
sn_qp_s *sn__qp(sn_qp qp);
sn_mr_s *sn__mr(sn_mr mr);

/* ownership: an object a connection owns is destroyed only by it (EBUSY otherwise) */
void shift__ep_own(shift_ep ep, int owned);

#endif
