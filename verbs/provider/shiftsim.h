/*
 * shiftsim.h - what the provider's files share: the process's host (one simnic host
 * whose peer is another process, reached over a datagram socket per NIC; or, in
 * lock-step mode, both hosts of a fabric the caller made and steps), and the verbs
 * objects that wrap simnic's.
 */
#ifndef SHIFTSIM_H
#define SHIFTSIM_H

#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <infiniband/driver.h>

#include "simnic.h"
#include "shiftsim_lockstep.h"

/* Every simnic call of the provider goes through the table of the copy of simnic whose
 * fabric it acts on (libshift's handles are valid only in the copy that made them): the
 * provider's own (linked libshift.so) in socket mode, the caller's in lock-step mode.
 * These macros make each sn_X(...) below a call through ss_sn, so the verbs code reads
 * as simnic's API and no call can bypass the table. */
extern const struct sn_ops *ss_sn;
#define sn_host_create(...) (ss_sn->host_create(__VA_ARGS__))
#define sn_fabric_destroy(...) (ss_sn->fabric_destroy(__VA_ARGS__))
#define sn_host_mem(...) (ss_sn->host_mem(__VA_ARGS__))
#define sn_counters_get(...) (ss_sn->counters_get(__VA_ARGS__))
#define sn_reg_mr(...) (ss_sn->reg_mr(__VA_ARGS__))
#define sn_mr_keys(...) (ss_sn->mr_keys(__VA_ARGS__))
#define sn_dereg_mr(...) (ss_sn->dereg_mr(__VA_ARGS__))
#define sn_create_cq(...) (ss_sn->create_cq(__VA_ARGS__))
#define sn_destroy_cq(...) (ss_sn->destroy_cq(__VA_ARGS__))
#define sn_poll_cq(...) (ss_sn->poll_cq(__VA_ARGS__))
#define sn_create_qp(...) (ss_sn->create_qp(__VA_ARGS__))
#define sn_create_ud_qp(...) (ss_sn->create_ud_qp(__VA_ARGS__))
#define sn_destroy_qp(...) (ss_sn->destroy_qp(__VA_ARGS__))
#define sn_modify_qp(...) (ss_sn->modify_qp(__VA_ARGS__))
#define sn_query_qp(...) (ss_sn->query_qp(__VA_ARGS__))
#define sn_post_send(...) (ss_sn->post_send(__VA_ARGS__))
#define sn_post_send_ud(...) (ss_sn->post_send_ud(__VA_ARGS__))
#define sn_post_recv(...) (ss_sn->post_recv(__VA_ARGS__))
#define sn_transmit(...) (ss_sn->transmit(__VA_ARGS__))
#define sn_deliver(...) (ss_sn->deliver(__VA_ARGS__))
#define sn_timeout(...) (ss_sn->timeout(__VA_ARGS__))
#define sn_link_down(...) (ss_sn->link_down(__VA_ARGS__))
#define sn_link_up(...) (ss_sn->link_up(__VA_ARGS__))
#define sn_nic_fail(...) (ss_sn->nic_fail(__VA_ARGS__))
#define sn_nic_recover(...) (ss_sn->nic_recover(__VA_ARGS__))
#define sn_async_event(...) (ss_sn->async_event(__VA_ARGS__))
#define sn_wire_take(...) (ss_sn->wire_take(__VA_ARGS__))
#define sn_wire_put(...) (ss_sn->wire_put(__VA_ARGS__))
#define sn_nic_alive(...) (ss_sn->nic_alive(__VA_ARGS__))
#define sn_link_is_up(...) (ss_sn->link_is_up(__VA_ARGS__))

#define SS_NICS 2
#define SS_MAX_CQE 65536 /* as simnic's CQ rings */
#define SS_WATCHERS 256 /* open contexts per device that hear its events */
#define SS_MAX_SGE 8 /* per WR: simnic's one, or the provider's bounce buffer (sge.c) */

/* This process's host of the simulated fabric (in lock-step mode, one of its two). One
 * lock (host.c's) guards them and every simnic call: the core has no lock of its own,
 * the provider is where threads meet it. */
struct ss_host {
	int refs;                       /* open device contexts */
	int host;                       /* SN_HOST_A or SN_HOST_B */
	int lockstep;                   /* the caller's fabric: no sockets, no thread, no timer */
	sn_fabric fabric;               /* sn_host_create: this host only; lock-step: both */
	int sock[SS_NICS + 1];          /* per NIC: the wire to the peer's NIC */
	struct sockaddr_un peer[SS_NICS + 1];
	socklen_t peer_len[SS_NICS + 1];
	uint64_t last_heard_ns[SS_NICS + 1]; /* the retransmission timer's reference */
	uint64_t sent, received, lost;  /* packets over the sockets */
	/* a packet the peer's socket had no room for: sent before any other (the link's
	 * flow control: a full receiver holds the sender back, it does not drop) */
	uint8_t held[SS_NICS + 1][SN_WIRE_MAX];
	int held_len[SS_NICS + 1];
	pthread_t thread;               /* progress: the NIC works while the program does not */
	int running;
	int ctl_sock;                   /* faults from outside (control.c) */
	int event_fd[SS_NICS + 1][SS_WATCHERS]; /* contexts' event pipes, -1 if free */
	uint32_t drop_next[SS_NICS + 1];  /* packets still to lose on arrival */
	uint64_t dropped, lost_events;
};

struct ss_device {
	struct verbs_device ibv_dev;
	int host;                       /* 0 = A, 1 = B */
	int nic;                        /* 1 or 2 (simN: N + 1; in lock-step, N % 2 + 1) */
};

struct ss_context {
	struct verbs_context ibv_ctx;
	int event_write;                /* write end of the asynchronous-event pipe */
	int nic;                        /* 1 or 2 */
	struct ss_host *host;           /* the host whose NIC it is */
};

struct ss_cq {
	struct ibv_cq ibv_cq;
	sn_cq cq;
	/* with a completion channel: the write end of its pipe (else -1), whether the
	 * program asked for the next completion's event, and the completions taken from
	 * simnic to see that one came, which a poll returns first */
	int chan_fd;
	int armed;
	struct shift_wc *stash;
	uint32_t stash_cap, stash_head, stash_n;
	struct ss_cq *next_chan;        /* the host's CQs with a channel */
};

struct ss_mr {
	struct verbs_mr vmr;
	sn_mr mr;
	int nic;                        /* the NIC it is registered with */
	struct ss_mr *next_live;        /* the host's regions (sge.c) */
};

/* a queue's WRs as posted to simnic, oldest first: [head, tail) not yet completed */
struct ss_ring {
	struct ss_slot *slot;
	uint32_t cap;
	uint64_t head, tail;
};

struct ss_qp {
	struct ibv_qp ibv_qp;
	sn_qp qp;
	struct ibv_qp_cap cap;
	int sq_sig_all;
	struct ibv_qp_attr path;        /* what simnic does not keep, as last set */
	int nic;
	struct ss_ring sq, rq;          /* the program's WRs behind simnic's (sge.c) */
	sn_mr rsvd;                     /* the local key of the bounce buffers, or NULL */
	struct ss_qp *next_live;        /* the host's QPs (sge.c) */
};

static inline struct ss_context *to_ss_context(struct ibv_context *ctx)
{
	return container_of(ctx, struct ss_context, ibv_ctx.context);
}

/* host.c */
struct ss_host *ss_host_get(int host, int *err); /* a context's host, or NULL and *err */
void ss_host_put(struct ss_host *h);
struct ss_host *ss_host_lock(void);     /* the lock; the process's (first) host */
struct ss_host *ss_host_lock_ctx(struct ibv_context *ctx); /* the lock; ctx's host */
void ss_host_unlock(void);
int ss_lockstep_mode(void);             /* SHIFT_SIM_LOCKSTEP=1 in the environment */
const struct sn_ops *ss_own_ops(void);  /* the linked libshift's table */
void ss_progress(struct ss_host *h);    /* move the wire: send, receive, time out */
socklen_t ss_address(struct sockaddr_un *a, int host, const char *end);
void ss_counters_text(struct ss_host *h, char *buf, size_t cap);

/* control.c: faults from outside, events to the contexts */
int ss_control_open(struct ss_host *h, const struct sockaddr_un *self, socklen_t len);
void ss_control_take(struct ss_host *h);
int ss_watch(struct ss_host *h, int nic, int fd);
void ss_unwatch(struct ss_host *h, int nic, int fd);
void ss_announce(struct ss_host *h, int nic, enum ibv_event_type type);

/* lockstep.c: the caller's fabric, both hosts of it */
struct ss_host *ss_lockstep_host(int host, int *err);
void ss_lockstep_put(struct ss_host *h);
struct ss_host *ss_lockstep_first(void);
int ss_lockstep_open(void);             /* contexts open in lock-step mode */

/* queues.c: the verbs of CQs, MRs and QPs */
void ss_cq_events(struct ss_host *h);   /* after progress: an armed CQ's event */
struct ibv_cq *ss_create_cq(struct ibv_context *ctx, int cqe,
			    struct ibv_comp_channel *channel, int comp_vector);
int ss_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc);
int ss_req_notify_cq(struct ibv_cq *ibcq, int solicited_only);
int ss_destroy_cq(struct ibv_cq *ibcq);
struct ibv_mr *ss_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
			 int access);
int ss_dereg_mr(struct verbs_mr *vmr);
struct ibv_qp *ss_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
struct ibv_qp *ss_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *ex);
int ss_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		struct ibv_qp_init_attr *init);
int ss_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask);
int ss_destroy_qp(struct ibv_qp *ibqp);
int ss_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int ss_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
/* ud.c: UD QPs (the same record as RC's) and address handles */
struct ibv_qp *ss_create_ud_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
int ss_modify_ud_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask);
int ss_post_send_ud(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
struct ibv_ah *ss_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int ss_destroy_ah(struct ibv_ah *ah);

/* sge.c: several SGEs per WR over simnic's one */
int ss_ring_init(struct ss_ring *r, uint32_t cap);
void ss_ring_clear(struct ss_ring *r);
void ss_ring_free(struct ss_ring *r);
struct ss_qp *ss_qp_new(const struct ibv_qp_init_attr *attr);
void ss_qp_free(struct ss_qp *qp);
void ss_sge_add_qp(struct ss_qp *qp);
void ss_sge_remove_qp(struct ss_qp *qp);
void ss_sge_add_mr(struct ss_mr *mr);
void ss_sge_remove_mr(struct ss_mr *mr);
int ss_sge_send(struct ss_host *h, struct ss_qp *qp, const struct ibv_send_wr *w,
		struct shift_send_wr *s, uint8_t *inl_buf);
int ss_sge_recv(struct ss_host *h, struct ss_qp *qp, const struct ibv_recv_wr *w,
		struct shift_recv_wr *s);
void ss_sge_posted(struct ss_ring *r);
void ss_sge_unposted(struct ss_ring *r);
void ss_sge_complete(struct shift_wc *wc);

#endif
