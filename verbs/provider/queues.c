/*
 * queues.c - completion queues, memory regions and RC queue pairs: each verb checks
 * what simnic cannot express (an SRQ, an IOVA other than the address), translates
 * to simnic's call under the host's lock (a WR of several SGEs through sge.c), and
 * gives simnic's errno back. A UD QP's verbs that differ from RC's are ud.c's
 * (dispatched by type). simnic's numbers for opcodes, statuses, QP states and access flags are
 * the verbs ones (native/include/shift_verbs.h), but every value is mapped by name.
 */
#include "shiftsim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int nic_of(struct ibv_context *ctx)
{
	return to_ss_context(ctx)->nic;
}

static struct ss_cq *to_ss_cq(struct ibv_cq *cq)
{
	return container_of(cq, struct ss_cq, ibv_cq);
}

static struct ss_qp *to_ss_qp(struct ibv_qp *qp)
{
	return container_of(qp, struct ss_qp, ibv_qp);
}

/* ------------------------------------------------------------ CQ ---------- */

/* The host's CQs with a completion channel. A channel is a pipe (channel.c, which
 * `shift run` preloads, makes it where libibverbs would ask the kernel): an armed CQ
 * that holds a completion writes its address there, as the kernel's uverbs does, once;
 * ibv_req_notify_cq arms it again. */
static struct ss_cq *chan_cqs;

/* the write end of the channel's pipe: the provider's own descriptor of it */
static int channel_writer(const struct ibv_comp_channel *channel)
{
	struct stat st;
	char path[64];
	int fd;

	if (fstat(channel->fd, &st) || !S_ISFIFO(st.st_mode))
		return -EINVAL; /* not a channel of this provider's (channel.c) */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", channel->fd);
	fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

struct ibv_cq *ss_create_cq(struct ibv_context *ctx, int cqe,
			    struct ibv_comp_channel *channel, int comp_vector)
{
	struct ss_cq *cq;
	struct ss_host *h;
	int err;

	/* (simnic's CQs are the host's: a QP of either NIC may use one) */
	if (cqe < 1 || cqe > SS_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= ctx->num_comp_vectors) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	cq->chan_fd = -1;
	if (channel) {
		cq->chan_fd = channel_writer(channel);
		cq->stash_cap = (uint32_t)cqe;
		cq->stash = cq->chan_fd < 0 ? NULL : calloc(cq->stash_cap, sizeof(*cq->stash));
		if (!cq->stash) {
			err = cq->chan_fd < 0 ? -cq->chan_fd : ENOMEM;
			if (cq->chan_fd >= 0)
				close(cq->chan_fd);
			free(cq);
			errno = err;
			return NULL;
		}
	}
	h = ss_host_lock_ctx(ctx);
	err = sn_create_cq(h->fabric, h->host, cqe, &cq->cq);
	if (!err && channel) {
		cq->next_chan = chan_cqs;
		chan_cqs = cq;
	}
	ss_host_unlock();
	if (err) {
		if (cq->chan_fd >= 0)
			close(cq->chan_fd);
		free(cq->stash);
		free(cq);
		errno = err;
		return NULL;
	}
	cq->ibv_cq.cqe = cqe;
	return &cq->ibv_cq;
}

static enum ibv_wc_opcode wc_opcode(int op)
{
	switch (op) {
	case SHIFT_WC_RDMA_WRITE: return IBV_WC_RDMA_WRITE;
	case SHIFT_WC_RDMA_READ: return IBV_WC_RDMA_READ;
	case SHIFT_WC_COMP_SWAP: return IBV_WC_COMP_SWAP;
	case SHIFT_WC_FETCH_ADD: return IBV_WC_FETCH_ADD;
	case SHIFT_WC_RECV: return IBV_WC_RECV;
	case SHIFT_WC_RECV_RDMA_WITH_IMM: return IBV_WC_RECV_RDMA_WITH_IMM;
	default: return IBV_WC_SEND;
	}
}

static void to_ibv_wc(const struct shift_wc *s, struct ibv_wc *w)
{
	*w = (struct ibv_wc){
		.wr_id = s->wr_id,
		.status = (enum ibv_wc_status)s->status, /* the same numbers, 0..21 */
		.opcode = wc_opcode(s->opcode),
		.vendor_err = s->vendor_err,
		.byte_len = s->byte_len,
		.qp_num = s->qp_num,
		.src_qp = s->src_qp, /* a UD receive's sender */
		.wc_flags = (s->wc_flags & SHIFT_WC_WITH_IMM) ? IBV_WC_WITH_IMM : 0,
	};
	w->imm_data = s->imm_data; /* network order in, network order out */
}

/* up to n completions from simnic, as the program sees them: its wr_id, its data
 * scattered (sge.c) */
static int take(struct ss_cq *cq, int n, struct shift_wc *got)
{
	int k = sn_poll_cq(cq->cq, n, got);

	for (int i = 0; i < k; i++)
		ss_sge_complete(&got[i]);
	return k;
}

/* an armed CQ that holds a completion: its event on the channel, once */
static void cq_event(struct ss_cq *cq)
{
	uint32_t room = cq->stash_cap - cq->stash_n;

	if (room) { /* what simnic holds comes into the stash, in order */
		struct shift_wc got[64];
		int k = take(cq, room < 64 ? (int)room : 64, got);

		for (int i = 0; i < k; i++)
			cq->stash[(cq->stash_head + cq->stash_n++) % cq->stash_cap] = got[i];
	}
	if (cq->stash_n) {
		uint64_t handle = (uint64_t)(uintptr_t)&cq->ibv_cq; /* ib_uverbs_comp_event_desc */

		if (write(cq->chan_fd, &handle, sizeof(handle)) == sizeof(handle))
			cq->armed = 0; /* (a full pipe: the event waits for the next progress) */
	}
}

void ss_cq_events(struct ss_host *h)
{
	(void)h;
	for (struct ss_cq *cq = chan_cqs; cq; cq = cq->next_chan)
		if (cq->armed)
			cq_event(cq);
}

int ss_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct ss_cq *cq = to_ss_cq(ibcq);
	struct shift_wc got[64];
	int k = 0;

	if (n < 0 || (n && !wc))
		return -EINVAL;
	if (n > 64)
		n = 64;
	ss_progress(ss_host_lock_ctx(ibcq->context));
	for (; k < n && cq->stash_n; k++, cq->stash_n--) { /* taken for an event, first */
		got[k] = cq->stash[cq->stash_head];
		cq->stash_head = (cq->stash_head + 1) % cq->stash_cap;
	}
	if (k < n) {
		int more = take(cq, n - k, got + k);

		k += more > 0 ? more : 0;
		if (!k && more < 0)
			k = more;
	}
	ss_host_unlock();
	for (int i = 0; i < k; i++)
		to_ibv_wc(&got[i], &wc[i]);
	return k;
}

/* The next completion (solicited or not: an event for any is one the program polls
 * and finds nothing it did not ask for, which verbs allows) raises the channel's event;
 * one the CQ holds already raises it now, as hardware that compares the armed index
 * with its producer index does. */
int ss_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct ss_cq *cq = to_ss_cq(ibcq);

	(void)solicited_only;
	if (cq->chan_fd < 0)
		return EINVAL; /* no channel to tell */
	ss_host_lock_ctx(ibcq->context);
	cq->armed = 1;
	cq_event(cq);
	ss_host_unlock();
	return 0;
}

int ss_destroy_cq(struct ibv_cq *ibcq)
{
	struct ss_cq *cq = to_ss_cq(ibcq);
	int err;

	ss_host_lock_ctx(ibcq->context);
	err = sn_destroy_cq(cq->cq);
	if (!err)
		for (struct ss_cq **p = &chan_cqs; *p; p = &(*p)->next_chan)
			if (*p == cq) {
				*p = cq->next_chan;
				break;
			}
	ss_host_unlock();
	if (!err) {
		if (cq->chan_fd >= 0)
			close(cq->chan_fd);
		free(cq->stash);
		free(cq);
	}
	return err;
}

/* ------------------------------------------------------------ MR ---------- */

static int mr_access(int access)
{
	int a = 0;

	a |= (access & IBV_ACCESS_LOCAL_WRITE) ? SHIFT_ACCESS_LOCAL_WRITE : 0;
	a |= (access & IBV_ACCESS_REMOTE_WRITE) ? SHIFT_ACCESS_REMOTE_WRITE : 0;
	a |= (access & IBV_ACCESS_REMOTE_READ) ? SHIFT_ACCESS_REMOTE_READ : 0;
	a |= (access & IBV_ACCESS_REMOTE_ATOMIC) ? SHIFT_ACCESS_REMOTE_ATOMIC : 0;
	return a;
}

struct ibv_mr *ss_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
			 int access)
{
	struct ss_host *h;
	struct ss_mr *mr;
	uint32_t lkey, rkey;
	int err;

	if (hca_va != (uint64_t)(uintptr_t)addr) { /* remote addresses are the VAs */
		errno = EOPNOTSUPP;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	h = ss_host_lock_ctx(pd->context);
	err = sn_reg_mr(h->fabric, h->host, nic_of(pd->context), (uint64_t)(uintptr_t)addr,
			length, mr_access(access), &mr->mr);
	if (!err)
		err = sn_mr_keys(mr->mr, &lkey, &rkey);
	if (err) {
		ss_host_unlock();
		free(mr);
		errno = err;
		return NULL;
	}
	mr->vmr.ibv_mr.addr = addr;
	mr->vmr.ibv_mr.length = length;
	mr->vmr.ibv_mr.lkey = lkey;
	mr->vmr.ibv_mr.rkey = rkey;
	mr->vmr.mr_type = IBV_MR_TYPE_MR;
	mr->vmr.access = access;
	mr->nic = nic_of(pd->context);
	ss_sge_add_mr(mr);
	ss_host_unlock();
	return &mr->vmr.ibv_mr;
}

int ss_dereg_mr(struct verbs_mr *vmr)
{
	struct ss_mr *mr = container_of(vmr, struct ss_mr, vmr);
	int err;

	ss_host_lock_ctx(vmr->ibv_mr.context);
	err = sn_dereg_mr(mr->mr);
	if (!err)
		ss_sge_remove_mr(mr);
	ss_host_unlock();
	if (!err)
		free(mr);
	return err;
}

/* ------------------------------------------------------------ QP ---------- */

static int check_qp_init(struct ibv_pd *pd, const struct ibv_qp_init_attr *a)
{
	if (a->qp_type != IBV_QPT_RC || a->srq)
		return EOPNOTSUPP;
	if (!a->send_cq || !a->recv_cq || a->send_cq->context->device != pd->context->device ||
	    a->recv_cq->context->device != pd->context->device)
		return EINVAL;
	if (a->cap.max_send_sge > SS_MAX_SGE || a->cap.max_recv_sge > SS_MAX_SGE ||
	    a->cap.max_inline_data > SHIFT_MAX_INLINE)
		return EINVAL;
	return 0;
}

struct ibv_qp *ss_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct sn_qp_init_attr sa;
	struct sn_qp_attr q;
	struct ss_host *h;
	struct ss_qp *qp;
	int err;

	if (attr->qp_type == IBV_QPT_UD)
		return ss_create_ud_qp(pd, attr);
	err = check_qp_init(pd, attr);
	if (err) {
		errno = err;
		return NULL;
	}
	qp = ss_qp_new(attr);
	if (!qp)
		return NULL;
	sa = (struct sn_qp_init_attr){
		.send_cq = to_ss_cq(attr->send_cq)->cq,
		.recv_cq = to_ss_cq(attr->recv_cq)->cq,
		.max_send_wr = attr->cap.max_send_wr,
		.max_recv_wr = attr->cap.max_recv_wr,
		.max_inline_data = SHIFT_MAX_INLINE,
	};
	h = ss_host_lock_ctx(pd->context);
	err = sn_create_qp(h->fabric, h->host, nic_of(pd->context), &sa, &qp->qp);
	if (!err)
		err = sn_query_qp(qp->qp, &q);
	if (!err) {
		qp->ibv_qp.qp_num = q.qp_num;
		qp->nic = nic_of(pd->context);
		ss_sge_add_qp(qp);
	}
	ss_host_unlock();
	if (err) {
		ss_qp_free(qp);
		errno = err;
		return NULL;
	}
	/* what was asked, at least one: each WR is checked against it */
	attr->cap.max_send_sge = attr->cap.max_send_sge ? attr->cap.max_send_sge : 1;
	attr->cap.max_recv_sge = attr->cap.max_recv_sge ? attr->cap.max_recv_sge : 1;
	attr->cap.max_inline_data = SHIFT_MAX_INLINE;
	qp->cap = attr->cap;
	qp->sq_sig_all = attr->sq_sig_all;
	qp->ibv_qp.state = IBV_QPS_RESET;
	qp->ibv_qp.qp_type = IBV_QPT_RC;
	qp->ibv_qp.context = pd->context;
	qp->ibv_qp.pd = pd;
	qp->ibv_qp.send_cq = attr->send_cq;
	qp->ibv_qp.recv_cq = attr->recv_cq;
	qp->ibv_qp.qp_context = attr->qp_context;
	qp->path = (struct ibv_qp_attr){.path_mtu = IBV_MTU_4096, .port_num = 1};
	return &qp->ibv_qp;
}

/* ibv_create_qp_ex for what ibv_create_qp gives: a PD and no creation flags (libibverbs
 * itself sends a PD alone to ibv_create_qp). The extended QP's features (send_ops_flags
 * and the ibv_wr_* API, TSO, XRC, RSS, ...) are not offered: EOPNOTSUPP. */
struct ibv_qp *ss_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *ex)
{
	struct ibv_qp_init_attr attr;
	struct ibv_qp *qp;

	if ((ex->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS)) ||
	    ((ex->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && ex->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(ex->comp_mask & IBV_QP_INIT_ATTR_PD) || !ex->pd || ex->pd->context != ctx) {
		errno = EINVAL;
		return NULL;
	}
	attr = (struct ibv_qp_init_attr){
		.qp_context = ex->qp_context,
		.send_cq = ex->send_cq,
		.recv_cq = ex->recv_cq,
		.srq = ex->srq,
		.cap = ex->cap,
		.qp_type = ex->qp_type,
		.sq_sig_all = ex->sq_sig_all,
	};
	qp = ss_create_qp(ex->pd, &attr);
	if (qp)
		ex->cap = attr.cap;
	return qp;
}

int ss_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		struct ibv_qp_init_attr *init)
{
	struct ss_qp *qp = to_ss_qp(ibqp);
	struct sn_qp_attr q;
	int err;

	(void)mask;
	ss_host_lock_ctx(ibqp->context);
	err = sn_query_qp(qp->qp, &q);
	ss_host_unlock();
	if (err)
		return err;
	*attr = qp->path;
	attr->qp_state = attr->cur_qp_state = (enum ibv_qp_state)q.qp_state;
	attr->sq_psn = q.sq_psn;
	if (ibqp->qp_type == IBV_QPT_UD) {
		attr->qkey = q.qkey;
	} else {
		attr->rq_psn = q.rq_psn;
		attr->dest_qp_num = q.dest_qp_num;
	}
	attr->cap = qp->cap;
	*init = (struct ibv_qp_init_attr){
		.qp_context = ibqp->qp_context,
		.send_cq = ibqp->send_cq,
		.recv_cq = ibqp->recv_cq,
		.cap = qp->cap,
		.qp_type = ibqp->qp_type,
		.sq_sig_all = qp->sq_sig_all,
	};
	return 0;
}

/* the attributes of mask that simnic does not keep, for ss_query_qp */
static void keep_path(struct ibv_qp_attr *p, const struct ibv_qp_attr *a, int mask)
{
	if (mask & IBV_QP_ACCESS_FLAGS)
		p->qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		p->pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		p->port_num = a->port_num;
	if (mask & IBV_QP_AV)
		p->ah_attr = a->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		p->path_mtu = a->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		p->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		p->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		p->rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		p->min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		p->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		p->max_dest_rd_atomic = a->max_dest_rd_atomic;
}

/* The attributes simnic keeps (state, destination QP, PSNs); the path's (address
 * vector, MTU, timeouts, retry counts) are accepted: simnic's wire has one path and
 * its own timer. */
int ss_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct ss_qp *qp = to_ss_qp(ibqp);
	struct sn_qp_attr q = {
		.qp_state = (mask & IBV_QP_STATE) ? (int)attr->qp_state : (int)ibqp->state,
		.dest_qp_num = attr->dest_qp_num,
		.rq_psn = attr->rq_psn,
		.sq_psn = attr->sq_psn,
	};
	int m = SN_QP_STATE;
	int err;

	if (ibqp->qp_type == IBV_QPT_UD)
		return ss_modify_ud_qp(ibqp, attr, mask);
	m |= (mask & IBV_QP_DEST_QPN) ? SN_QP_DEST_QPN : 0;
	m |= (mask & IBV_QP_RQ_PSN) ? SN_QP_RQ_PSN : 0;
	m |= (mask & IBV_QP_SQ_PSN) ? SN_QP_SQ_PSN : 0;
	if (mask & IBV_QP_ACCESS_FLAGS) {
		m |= SN_QP_ACCESS;
		q.access = mr_access(attr->qp_access_flags) & ~SHIFT_ACCESS_LOCAL_WRITE;
	}
	ss_host_lock_ctx(ibqp->context);
	err = sn_modify_qp(qp->qp, &q, m);
	if (!err && q.qp_state == IBV_QPS_RESET) { /* simnic emptied its queues */
		ss_ring_clear(&qp->sq);
		ss_ring_clear(&qp->rq);
	}
	ss_host_unlock();
	if (!err) {
		ibqp->state = (enum ibv_qp_state)q.qp_state;
		keep_path(&qp->path, attr, mask);
	}
	return err;
}

int ss_destroy_qp(struct ibv_qp *ibqp)
{
	struct ss_qp *qp = to_ss_qp(ibqp);
	int err;

	ss_host_lock_ctx(ibqp->context);
	err = sn_destroy_qp(qp->qp);
	if (!err)
		ss_sge_remove_qp(qp);
	ss_host_unlock();
	if (!err)
		ss_qp_free(qp);
	return err;
}

/* ------------------------------------------------------- post ----------- */

static int send_wr(const struct ss_qp *qp, const struct ibv_send_wr *w,
		   struct shift_send_wr *s)
{
	int atomic = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		     w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;

	if (atomic && w->num_sge > 1)
		return EINVAL; /* one 8-byte element */
	if (w->opcode > IBV_WR_ATOMIC_FETCH_AND_ADD)
		return EINVAL; /* LOCAL_INV, BIND_MW, SEND_WITH_INV, TSO, ...: not simnic's */
	*s = (struct shift_send_wr){
		.opcode = (int)w->opcode, /* the same numbers, 0..6 */
		.send_flags = ((w->send_flags & IBV_SEND_FENCE) ? SHIFT_SEND_FENCE : 0) |
			      ((w->send_flags & IBV_SEND_SIGNALED) || qp->sq_sig_all
				       ? SHIFT_SEND_SIGNALED : 0) |
			      ((w->send_flags & IBV_SEND_SOLICITED) ? SHIFT_SEND_SOLICITED : 0) |
			      ((w->send_flags & IBV_SEND_INLINE) ? SHIFT_SEND_INLINE : 0),
		.imm_data = w->imm_data,
		.remote_addr = atomic ? w->wr.atomic.remote_addr : w->wr.rdma.remote_addr,
		.rkey = atomic ? w->wr.atomic.rkey : w->wr.rdma.rkey,
		.compare_add = atomic ? w->wr.atomic.compare_add : 0,
		.swap = atomic ? w->wr.atomic.swap : 0,
	};
	return 0;
}

int ss_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct ss_qp *qp = to_ss_qp(ibqp);
	struct ss_host *h;
	int err = 0;

	if (ibqp->qp_type == IBV_QPT_UD)
		return ss_post_send_ud(ibqp, wr, bad);
	h = ss_host_lock_ctx(ibqp->context);
	for (; wr; wr = wr->next) {
		uint8_t inl[SHIFT_MAX_INLINE]; /* inline data of several SGEs, gathered */
		struct shift_send_wr s;

		err = send_wr(qp, wr, &s);
		if (!err)
			err = ss_sge_send(h, qp, wr, &s, inl);
		if (!err) {
			err = sn_post_send(qp->qp, &s, NULL);
			if (err)
				ss_sge_unposted(&qp->sq);
			else
				ss_sge_posted(&qp->sq);
		}
		if (err)
			break;
	}
	ss_progress(h);
	ss_host_unlock();
	if (err && bad)
		*bad = wr;
	return err;
}

int ss_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct ss_qp *qp = to_ss_qp(ibqp);
	struct ss_host *h;
	int err = 0;

	h = ss_host_lock_ctx(ibqp->context);
	for (; wr; wr = wr->next) {
		struct shift_recv_wr r;

		err = ss_sge_recv(h, qp, wr, &r);
		if (!err) {
			err = sn_post_recv(qp->qp, &r, NULL);
			if (err)
				ss_sge_unposted(&qp->rq);
			else
				ss_sge_posted(&qp->rq);
		}
		if (err)
			break;
	}
	ss_progress(h);
	ss_host_unlock();
	if (err && bad)
		*bad = wr;
	return err;
}
