/*
 * ud.c - UD queue pairs and address handles. A UD QP is simnic's (sn_create_ud_qp) in
 * the RC QP's record (struct ss_qp): destroying, querying and posting receives are queues.c's,
 * which dispatches here by QP type for what differs - creating, the attributes of its
 * transitions (P_Key index, port, Q_Key, SQ PSN), and sends that name their
 * destination (wr.ud: address handle, remote QPN, remote Q_Key). A datagram leaves at
 * post time (simnic puts it on the path's channel), so a post moves the wire as RC's do.
 */
#include "shiftsim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SS_UD_MASK (IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | \
		    IBV_QP_QKEY | IBV_QP_SQ_PSN)
#define SS_UD_INIT (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY)
#define SS_QKEY_FROM_QP 0x80000000u /* a remote Q_Key with this bit: the QP's own */
#define SS_LIDS_PER_HOST 16         /* as shiftsim.c's port_lid */

struct ss_ah {
	struct ibv_ah ibv_ah;
	int host;                       /* the host of the port it names */
};

static struct ss_qp *ud_qp(struct ibv_qp *qp)
{
	return container_of(qp, struct ss_qp, ibv_qp);
}

static sn_cq sn_cq_of(struct ibv_cq *cq)
{
	return container_of(cq, struct ss_cq, ibv_cq)->cq;
}

/* ------------------------------------------------------------ the QP ------ */

static int check_ud_init(struct ibv_pd *pd, const struct ibv_qp_init_attr *a)
{
	if (a->srq)
		return EOPNOTSUPP;
	if (!a->send_cq || !a->recv_cq || a->send_cq->context->device != pd->context->device ||
	    a->recv_cq->context->device != pd->context->device)
		return EINVAL;
	if (a->cap.max_send_sge > SS_MAX_SGE || a->cap.max_recv_sge > SS_MAX_SGE ||
	    a->cap.max_inline_data > SHIFT_MAX_INLINE)
		return EINVAL;
	return 0;
}

static void fill_ud_qp(struct ss_qp *qp, struct ibv_pd *pd, struct ibv_qp_init_attr *attr,
		       uint32_t qpn)
{
	attr->cap.max_send_sge = attr->cap.max_send_sge ? attr->cap.max_send_sge : 1;
	attr->cap.max_recv_sge = attr->cap.max_recv_sge ? attr->cap.max_recv_sge : 1;
	attr->cap.max_inline_data = SHIFT_MAX_INLINE;
	qp->cap = attr->cap;
	qp->sq_sig_all = attr->sq_sig_all;
	qp->ibv_qp = (struct ibv_qp){
		.context = pd->context,
		.qp_context = attr->qp_context,
		.pd = pd,
		.send_cq = attr->send_cq,
		.recv_cq = attr->recv_cq,
		.qp_num = qpn,
		.state = IBV_QPS_RESET,
		.qp_type = IBV_QPT_UD,
	};
	qp->path = (struct ibv_qp_attr){.path_mtu = IBV_MTU_4096, .port_num = 1};
}

struct ibv_qp *ss_create_ud_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct sn_qp_init_attr sa = {
		.send_cq = attr->send_cq ? sn_cq_of(attr->send_cq) : NULL,
		.recv_cq = attr->recv_cq ? sn_cq_of(attr->recv_cq) : NULL,
		.max_send_wr = attr->cap.max_send_wr,
		.max_recv_wr = attr->cap.max_recv_wr,
		.max_inline_data = SHIFT_MAX_INLINE,
	};
	int err = check_ud_init(pd, attr);
	struct sn_qp_attr q;
	struct ss_host *h;
	struct ss_qp *qp;

	if (err) {
		errno = err;
		return NULL;
	}
	qp = ss_qp_new(attr);
	if (!qp)
		return NULL;
	h = ss_host_lock_ctx(pd->context);
	err = sn_create_ud_qp(h->fabric, h->host, to_ss_context(pd->context)->nic, &sa, &qp->qp);
	if (!err)
		err = sn_query_qp(qp->qp, &q);
	if (!err) {
		fill_ud_qp(qp, pd, attr, q.qp_num);
		qp->nic = to_ss_context(pd->context)->nic;
		ss_sge_add_qp(qp);
	}
	ss_host_unlock();
	if (err) {
		ss_qp_free(qp);
		errno = err;
		return NULL;
	}
	return &qp->ibv_qp;
}

/* what verbs asks of a UD transition that simnic does not check: the attributes a UD QP
 * has, one P_Key and one port, and RESET -> INIT naming all three of its own */
static int check_ud_modify(const struct ibv_qp *ibqp, const struct ibv_qp_attr *a, int mask)
{
	if (mask & ~SS_UD_MASK)
		return EINVAL;
	if (((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0) ||
	    ((mask & IBV_QP_PORT) && a->port_num != 1))
		return EINVAL;
	if ((mask & IBV_QP_STATE) && a->qp_state == IBV_QPS_INIT &&
	    ibqp->state == IBV_QPS_RESET && (mask & SS_UD_INIT) != SS_UD_INIT)
		return EINVAL;
	return 0;
}

int ss_modify_ud_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct ss_qp *qp = ud_qp(ibqp);
	struct sn_qp_attr q = {
		.qp_state = (mask & IBV_QP_STATE) ? (int)attr->qp_state : (int)ibqp->state,
		.sq_psn = attr->sq_psn,
		.qkey = attr->qkey,
	};
	int m = SN_QP_STATE | ((mask & IBV_QP_SQ_PSN) ? SN_QP_SQ_PSN : 0) |
		((mask & IBV_QP_QKEY) ? SN_QP_QKEY : 0);
	int err = check_ud_modify(ibqp, attr, mask);

	if (err)
		return err;
	ss_host_lock_ctx(ibqp->context);
	err = sn_modify_qp(qp->qp, &q, m);
	if (!err && q.qp_state == IBV_QPS_RESET) { /* simnic emptied its queues */
		ss_ring_clear(&qp->sq);
		ss_ring_clear(&qp->rq);
	}
	ss_host_unlock();
	if (err)
		return err;
	ibqp->state = (enum ibv_qp_state)q.qp_state;
	if (mask & IBV_QP_PKEY_INDEX)
		qp->path.pkey_index = attr->pkey_index;
	return 0;
}

/* ------------------------------------------------------------ the send ---- */

/* one WR as simnic's, its destination checked: 0 or EINVAL */
static int ud_send_wr(const struct ss_qp *qp, const struct ibv_send_wr *w,
		      struct shift_send_wr *s)
{
	if (w->opcode != IBV_WR_SEND && w->opcode != IBV_WR_SEND_WITH_IMM)
		return EINVAL;
	if (w->num_sge < 0 || (w->num_sge && !w->sg_list))
		return EINVAL; /* (the SGEs' count against the QP's: sge.c) */
	if (!w->wr.ud.ah || w->wr.ud.ah->context->device != qp->ibv_qp.context->device)
		return EINVAL; /* an address handle of this device */
	*s = (struct shift_send_wr){
		.wr_id = w->wr_id,
		.num_sge = w->num_sge,
		.opcode = w->opcode == IBV_WR_SEND ? SHIFT_WR_SEND : SHIFT_WR_SEND_WITH_IMM,
		.send_flags = ((w->send_flags & IBV_SEND_SIGNALED) || qp->sq_sig_all
				       ? SHIFT_SEND_SIGNALED : 0) |
			      ((w->send_flags & IBV_SEND_SOLICITED) ? SHIFT_SEND_SOLICITED : 0) |
			      ((w->send_flags & IBV_SEND_INLINE) ? SHIFT_SEND_INLINE : 0),
		.imm_data = w->imm_data,
	};
	if (w->num_sge)
		s->sg = (struct shift_sge){w->sg_list[0].addr, w->sg_list[0].length,
					   w->sg_list[0].lkey};
	return 0;
}

/* the Q_Key a datagram carries: the WR's, or the QP's own when its high bit says so */
static int ud_qkey(const struct ss_qp *qp, uint32_t remote, uint32_t *qkey)
{
	struct sn_qp_attr q;
	int err;

	if (!(remote & SS_QKEY_FROM_QP)) {
		*qkey = remote;
		return 0;
	}
	err = sn_query_qp(qp->qp, &q);
	*qkey = q.qkey;
	return err;
}

int ss_post_send_ud(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct ss_qp *qp = ud_qp(ibqp);
	struct ss_host *h;
	int err = 0;

	h = ss_host_lock_ctx(ibqp->context);
	for (; wr; wr = wr->next) {
		uint8_t inl[SHIFT_MAX_INLINE]; /* inline data of several SGEs, gathered */
		struct shift_send_wr s;
		uint32_t qkey = 0;

		err = ud_send_wr(qp, wr, &s);
		if (!err)
			err = ud_qkey(qp, wr->wr.ud.remote_qkey, &qkey);
		if (!err)
			err = ss_sge_send(h, qp, wr, &s, inl);
		if (!err) {
			err = sn_post_send_ud(qp->qp, &s, wr->wr.ud.remote_qpn, qkey);
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

/* ------------------------------------------------------------ address handles */

/* the host whose port of this device's path (NIC) the LID names, or -1 */
static int host_of_lid(uint16_t lid, int nic)
{
	for (int h = SN_HOST_A; h <= SN_HOST_B; h++)
		if (lid == h * SS_LIDS_PER_HOST + nic)
			return h;
	return -1;
}

/* the host whose port of this path the GID names (fe80:: + the device's GUID), or -1 */
static int host_of_gid(const union ibv_gid *gid, int nic)
{
	static const uint8_t prefix[8] = {0xfe, 0x80};
	static const uint8_t shift[6] = {0x53, 0x48, 0x49, 0x46, 0x54, 0x00}; /* "SHIFT" */
	const uint8_t *g = gid->raw;

	if (memcmp(g, prefix, 8) || memcmp(g + 8, shift, 6) || g[14] > SN_HOST_B ||
	    g[15] != nic - 1)
		return -1;
	return g[14];
}

struct ibv_ah *ss_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	int nic = to_ss_context(pd->context)->nic;
	int host = attr->port_num != 1 ? -1
		   : attr->is_global ? host_of_gid(&attr->grh.dgid, nic)
		   : host_of_lid(attr->dlid, nic);
	struct ss_ah *ah;

	if (host < 0) { /* not a port this NIC's path reaches (rail-aligned: its own) */
		errno = EINVAL;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->host = host;
	return &ah->ibv_ah;
}

int ss_destroy_ah(struct ibv_ah *ah)
{
	free(container_of(ah, struct ss_ah, ibv_ah));
	return 0;
}
