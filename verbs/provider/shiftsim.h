/*
 * shiftsim.h - what the provider's files share: the process's host (one simnic host
 * whose peer is another process, reached over a datagram socket per NIC), and the verbs
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

#define SS_NICS 2
#define SS_MAX_CQE 65536 /* as simnic's CQ rings */
#define SS_WATCHERS 256 /* open contexts per device that hear its events */
#define SS_MAX_SGE 8 /* per WR: simnic's one, or the provider's bounce buffer (sge.c) */

/* This process's host of the simulated fabric. One lock guards it and every simnic
 * call: the core has no lock of its own, the provider is where threads meet it. */
struct ss_host {
	pthread_mutex_t lock;
	int refs;                       /* open device contexts */
	int host;                       /* SN_HOST_A or SN_HOST_B */
	sn_fabric fabric;               /* sn_host_create: this host only */
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
	int index;                      /* simN: NIC N + 1 of the host */
};

struct ss_context {
	struct verbs_context ibv_ctx;
	int event_write;                /* write end of the asynchronous-event pipe */
	int nic;                        /* 1 or 2 */
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
int ss_host_get(int host);              /* 0, or an errno */
void ss_host_put(void);
struct ss_host *ss_host_lock(void);     /* the host, locked */
void ss_host_unlock(void);
void ss_progress(struct ss_host *h);    /* move the wire: send, receive, time out */
socklen_t ss_address(struct sockaddr_un *a, int host, const char *end);
void ss_counters_text(struct ss_host *h, char *buf, size_t cap);

/* control.c: faults from outside, events to the contexts */
int ss_control_open(struct ss_host *h, const struct sockaddr_un *self, socklen_t len);
void ss_control_take(struct ss_host *h);
int ss_watch(struct ss_host *h, int nic, int fd);
void ss_unwatch(struct ss_host *h, int nic, int fd);

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

/* sge.c: several SGEs per WR over simnic's one */
int ss_ring_init(struct ss_ring *r, uint32_t cap);
void ss_ring_clear(struct ss_ring *r);
void ss_ring_free(struct ss_ring *r);
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
