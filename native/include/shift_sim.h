/*
 * shift_sim.h - the SHIFT core bound to simnic: a connection from host A (the
 * requester) to host B (the responder) over both paths of a simnic fabric, its
 * endpoints made with a backend table over simnic's QPs, and what only the simulator
 * offers: the Timeout event over both kinds of timer, and backend errors on demand.
 * Return values: as shift.h states.
 */
#ifndef SHIFT_SIM_H
#define SHIFT_SIM_H

#include "shift.h"
#include "simnic.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CDEF-BEGIN */
typedef struct shift_conn_opaque *shift_conn;

struct shift_conn_attr {
    int design;
    uint32_t max_send_wr;
    uint32_t max_recv_wr;
    uint32_t ctl_retries;
    unsigned int flags;     /* enum shift_ep_flags, both endpoints */
};
/* A CQ pair of host (one CQ per path, cqe entries each) that several connections'
 * endpoints on that host share (shift_sim_connect_on_cq; shift.h: shift_cq); EINVAL for
 * a one-host fabric. The fabric is busy until shift_sim_cq_destroy, which gives EBUSY
 * while a connection's endpoint is on it (shift_cq_destroy on it: EBUSY, the binding's). */
int shift_sim_cq_create(sn_fabric f, int host, uint32_t cqe, shift_cq *out);
int shift_sim_cq_destroy(shift_cq cq);
/* The connection owns both endpoints and the QPs, CQs and MRs they make: those are
 * released by shift_sim_close alone (shift_ep_destroy, sn_destroy_qp, sn_dereg_mr on
 * them give EBUSY, as do simnic's data-path calls on its QPs). */
int shift_sim_connect(sn_fabric f, const struct shift_conn_attr *attr, shift_conn *out);
/* shift_sim_connect with host A's endpoint on the pair cq_a and B's on cq_b, each made by
 * shift_sim_cq_create for that host of f (NULL: CQs of the endpoint's own; else EINVAL) */
int shift_sim_connect_on_cq(sn_fabric f, const struct shift_conn_attr *attr, shift_cq cq_a,
                            shift_cq cq_b, shift_conn *out);
/* One host's endpoint alone (two-phase set-up, as a verbs program on one host): its QPs
 * stay in RESET; the application exchanges path 1's information with the peer itself
 * (shift_ep_local_info, shift_ep_connect) and the layers set path 2 up in-band over it
 * (shift_progress). Nothing joins the two hosts' endpoints but the wire (a fail-back's
 * reconnect too: each host resets its own end, asked by a control message). The other
 * calls below
 * take the handle with this host alone (the other host is EINVAL); shift_sim_reg_mr
 * registers without telling the peer (its layer learns the keys in-band). */
int shift_sim_open(sn_fabric f, int host, const struct shift_conn_attr *attr, shift_conn *out);
int shift_sim_close(shift_conn c);
/* the endpoint of a host (SN_HOST_A: requester, SN_HOST_B: responder) */
int shift_sim_ep(shift_conn c, int host, shift_ep *out);
/* register [addr, addr+len) of host on both its NICs; the peer learns the keys */
int shift_sim_reg_mr(shift_conn c, int host, uint64_t addr, size_t length, int access,
                     struct shift_mr_keys *keys);
/* deregister a region of host that shift_sim_reg_mr registered; the peer forgets its
 * keys (shift_dereg_mr, shift_del_remote_keys) */
int shift_sim_dereg_mr(shift_conn c, int host, const struct shift_mr_keys *keys);
/* Timeout(host, path): the NIC's timers; if none went off, the layer's handshake timer
 * (shift_timer, the event HandshakeTimeout(host) alone) */
int shift_sim_timeout(shift_conn c, int host, int path);
/* the simnic QP of a host and path, for tests */
int shift_sim_qp(shift_conn c, int host, int path, sn_qp *out);
/* The backend operations a connection's endpoints call, for shift_sim_fail_op. */
enum shift_backend_op {
    SHIFT_OP_MODIFY_QP = 0,
    SHIFT_OP_QUERY_QP = 1,
    SHIFT_OP_RESET_QP = 2,
    SHIFT_OP_POST_SEND = 3,
    SHIFT_OP_POST_RECV = 4,
    SHIFT_OP_RING = 5,
    SHIFT_OP_POLL_CQ = 6,
    SHIFT_OP_REG_MR = 7,
    SHIFT_OP_CTL_SEND = 8,
    SHIFT_OP_SQ_PENDING = 9,
    SHIFT_OP_ASYNC_EVENT = 10,
    SHIFT_OP_LOCAL_INFO = 11,
    SHIFT_OP_RTR_QP = 12,
    SHIFT_OP_CTL_RECV = 13,
    SHIFT_OP_COUNT = 14
};
/* Fault injection at the backend: host's endpoint's call of op after `after` more
 * calls of it fails with err (a positive errno; poll_cq, sq_pending, async_event and
 * ctl_recv return -err)
 * without acting; err 0 cancels. One pending fault per host and op. (Creating and
 * destroying QPs and dereg are not injected: teardown has no error to report.) */
int shift_sim_fail_op(shift_conn c, int host, int op, uint32_t after, int err);
/* CDEF-END */

#ifdef __cplusplus
}
#endif
#endif
