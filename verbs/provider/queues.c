/*
 * queues.c - completion queues, memory regions and RC queue pairs: each verb checks
 * what simnic cannot express (more than one SGE, an SRQ, an IOVA other than the
 * address), translates to simnic's call under the host's lock, and gives simnic's
 * errno back. A UD QP's verbs that differ from RC's are ud.c's (dispatched by type). simnic's numbers for opcodes, statuses, QP states and access flags are
 * the verbs ones (native/include/shift_verbs.h), but every value is mapped by name.
 */
#include "shiftsim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
	if (channel) { /* completion events: not yet (no event pipe per channel) */
		errno = EOPNOTSUPP;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	h = ss_host_lock_ctx(ctx);
	err = sn_create_cq(h->fabric, h->host, cqe, &cq->cq);
	ss_host_unlock();
	if (err) {
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

int ss_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct shift_wc got[64];
	struct ss_host *h;
	int k;

	if (n < 0 || (n && !wc))
		return -EINVAL;
	if (n > 64)
		n = 64;
	h = ss_host_lock();
	ss_progress(h);
	k = sn_poll_cq(to_ss_cq(ibcq)->cq, n, got);
	ss_host_unlock();
	for (int i = 0; i < k; i++)
		to_ibv_wc(&got[i], &wc[i]);
	return k;
}

int ss_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	(void)ibcq;
	(void)solicited_only;
	return EOPNOTSUPP; /* no completion channel (ss_create_cq refuses one) */
}

int ss_destroy_cq(struct ibv_cq *ibcq)
{
	struct ss_cq *cq = to_ss_cq(ibcq);
	int err;

	ss_host_lock();
	err = sn_destroy_cq(cq->cq);
	ss_host_unlock();
	if (!err)
		free(cq);
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
	ss_host_unlock();
	if (err) {
		free(mr);
		errno = err;
		return NULL;
	}
	mr->vmr.ibv_mr.lkey = lkey;
	mr->vmr.ibv_mr.rkey = rkey;
	mr->vmr.mr_type = IBV_MR_TYPE_MR;
	mr->vmr.access = access;
	return &mr->vmr.ibv_mr;
}

int ss_dereg_mr(struct verbs_mr *vmr)
{
	struct ss_mr *mr = container_of(vmr, struct ss_mr, vmr);
	int err;

	ss_host_lock();
	err = sn_dereg_mr(mr->mr);
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
	if (a->cap.max_send_sge > 1 || a->cap.max_recv_sge > 1 ||
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
	qp = err ? NULL : calloc(1, sizeof(*qp));
	if (!qp) {
		errno = err ? err : ENOMEM;
		return NULL;
	}
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
	ss_host_unlock();
	if (err) {
		free(qp);
		errno = err;
		return NULL;
	}
	attr->cap.max_send_sge = attr->cap.max_recv_sge = 1;
	attr->cap.max_inline_data = SHIFT_MAX_INLINE;
	qp->cap = attr->cap;
	qp->sq_sig_all = attr->sq_sig_all;
	qp->ibv_qp.qp_num = q.qp_num;
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

int ss_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		struct ibv_qp_init_attr *init)
{
	struct ss_qp *qp = to_ss_qp(ibqp);
	struct sn_qp_attr q;
	int err;

	if (ibqp->qp_type == IBV_QPT_UD)
		return ss_query_ud_qp(ibqp, attr, mask, init);
	ss_host_lock();
	err = sn_query_qp(qp->qp, &q);
	ss_host_unlock();
	if (err)
		return err;
	*attr = qp->path;
	attr->qp_state = attr->cur_qp_state = (enum ibv_qp_state)q.qp_state;
	attr->rq_psn = q.rq_psn;
	attr->sq_psn = q.sq_psn;
	attr->dest_qp_num = q.dest_qp_num;
	attr->cap = qp->cap;
	*init = (struct ibv_qp_init_attr){
		.qp_context = ibqp->qp_context,
		.send_cq = ibqp->send_cq,
		.recv_cq = ibqp->recv_cq,
		.cap = qp->cap,
		.qp_type = IBV_QPT_RC,
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
	ss_host_lock();
	err = sn_modify_qp(qp->qp, &q, m);
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

	ss_host_lock();
	err = sn_destroy_qp(qp->qp);
	ss_host_unlock();
	if (!err)
		free(qp);
	return err;
}

/* ------------------------------------------------------- post ----------- */

static int send_wr(const struct ss_qp *qp, const struct ibv_send_wr *w,
		   struct shift_send_wr *s)
{
	int atomic = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		     w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;

	if (w->num_sge < 0 || w->num_sge > 1 || (w->num_sge && !w->sg_list))
		return EINVAL;
	if (w->opcode > IBV_WR_ATOMIC_FETCH_AND_ADD)
		return EINVAL; /* LOCAL_INV, BIND_MW, SEND_WITH_INV, TSO, ...: not simnic's */
	*s = (struct shift_send_wr){
		.wr_id = w->wr_id,
		.num_sge = w->num_sge,
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
	if (w->num_sge)
		s->sg = (struct shift_sge){w->sg_list[0].addr, w->sg_list[0].length,
					   w->sg_list[0].lkey};
	return 0;
}

int ss_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct ss_qp *qp = to_ss_qp(ibqp);
	struct ss_host *h;
	int err = 0;

	if (ibqp->qp_type == IBV_QPT_UD)
		return ss_post_send_ud(ibqp, wr, bad);
	h = ss_host_lock();
	for (; wr; wr = wr->next) {
		struct shift_send_wr s;

		err = send_wr(qp, wr, &s);
		if (!err)
			err = sn_post_send(qp->qp, &s, NULL);
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

	h = ss_host_lock();
	for (; wr; wr = wr->next) {
		struct shift_recv_wr r = {.wr_id = wr->wr_id, .num_sge = wr->num_sge};

		if (wr->num_sge < 0 || wr->num_sge > 1 || (wr->num_sge && !wr->sg_list)) {
			err = EINVAL;
			break;
		}
		if (wr->num_sge)
			r.sg = (struct shift_sge){wr->sg_list[0].addr, wr->sg_list[0].length,
						  wr->sg_list[0].lkey};
		err = sn_post_recv(qp->qp, &r, NULL);
		if (err)
			break;
	}
	ss_progress(h);
	ss_host_unlock();
	if (err && bad)
		*bad = wr;
	return err;
}
