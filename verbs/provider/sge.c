/*
 * sge.c - several scatter/gather elements per work request, on a NIC whose WR has one.
 *
 * simnic's WR carries one SGE (native/include/shift_verbs.h). The provider offers
 * SS_MAX_SGE: a WR with more is carried through a bounce buffer of the provider's own,
 * which simnic reaches through a local-only key the provider registers per QP (the
 * "reserved L_Key" of a kernel consumer, here covering the process): a SEND or a WRITE
 * is gathered into it when it is posted (the data is the data of the post, as inline
 * data is); a READ's response and a received message land in it and are scattered into
 * the WR's elements when its completion is polled, before the program can see either.
 * A WR of one element (or none) goes to simnic as it is: no copy, the common case.
 *
 * Every WR posted to simnic carries, instead of the program's wr_id, its position in
 * the provider's copy of the queue (struct ss_ring): a completion names the WR it
 * completes and every unsignaled one before it (RC completes a queue in order), whose
 * READs are scattered then and whose buffers are freed. The program's wr_id comes back
 * in the completion.
 *
 * An element the WR may not use (a key the process did not register, or registered with
 * the other NIC, bounds outside its region, a region without local write for data that
 * lands) is not gathered: the WR
 * goes to simnic with that element alone, and fails as simnic fails it (LOC_PROT_ERR),
 * as a WR of one bad element does.
 *
 * Everything here runs under the host's lock.
 */
#include "shiftsim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* the buffer of a WR of several elements, and where its data goes back to */
struct ss_bounce {
	int scatter;            /* a READ or a receive: copy back at its completion */
	int num_sge;
	struct ibv_sge sg[SS_MAX_SGE];
	uint32_t len;
	uint8_t data[];
};

struct ss_slot {
	uint64_t wr_id;         /* the program's */
	struct ss_bounce *b;    /* NULL: the WR went to simnic as it was */
};

/* the host's live QPs (a completion names its QP by number) and memory regions (a
 * gathered element is checked against its region) */
static struct ss_qp *live_qps;
static struct ss_mr *live_mrs;

/* ------------------------------------------------------------ rings ------- */

int ss_ring_init(struct ss_ring *r, uint32_t cap)
{
	r->cap = cap ? cap : 1;
	r->head = r->tail = 0;
	r->slot = calloc(r->cap, sizeof(*r->slot));
	return r->slot ? 0 : ENOMEM;
}

/* the WRs of [head, tail) are gone without completions (a reset) */
void ss_ring_clear(struct ss_ring *r)
{
	for (; r->head < r->tail; r->head++) {
		struct ss_slot *s = &r->slot[r->head % r->cap];

		free(s->b);
		s->b = NULL;
	}
}

void ss_ring_free(struct ss_ring *r)
{
	if (!r->slot)
		return;
	ss_ring_clear(r);
	free(r->slot);
	r->slot = NULL;
}

/* A QP's record with the provider's copy of each queue (the program's wr_id, several
 * SGEs), zeroed; NULL (errno ENOMEM) if memory runs out. */
struct ss_qp *ss_qp_new(const struct ibv_qp_init_attr *attr)
{
	struct ss_qp *qp = calloc(1, sizeof(*qp));

	if (qp && (ss_ring_init(&qp->sq, attr->cap.max_send_wr) ||
		   ss_ring_init(&qp->rq, attr->cap.max_recv_wr))) {
		ss_qp_free(qp);
		qp = NULL;
	}
	if (!qp)
		errno = ENOMEM;
	return qp;
}

void ss_qp_free(struct ss_qp *qp)
{
	ss_ring_free(&qp->sq);
	ss_ring_free(&qp->rq);
	free(qp);
}

/* ------------------------------------------------------ registries ------- */

void ss_sge_add_qp(struct ss_qp *qp)
{
	qp->next_live = live_qps;
	live_qps = qp;
}

void ss_sge_remove_qp(struct ss_qp *qp)
{
	for (struct ss_qp **p = &live_qps; *p; p = &(*p)->next_live)
		if (*p == qp) {
			*p = qp->next_live;
			break;
		}
	if (qp->rsvd) {
		sn_dereg_mr(qp->rsvd);
		qp->rsvd = NULL;
	}
}

void ss_sge_add_mr(struct ss_mr *mr)
{
	mr->next_live = live_mrs;
	live_mrs = mr;
}

void ss_sge_remove_mr(struct ss_mr *mr)
{
	for (struct ss_mr **p = &live_mrs; *p; p = &(*p)->next_live)
		if (*p == mr) {
			*p = mr->next_live;
			break;
		}
}

static struct ss_qp *qp_by_num(uint32_t qp_num)
{
	for (struct ss_qp *qp = live_qps; qp; qp = qp->next_live)
		if (qp->ibv_qp.qp_num == qp_num)
			return qp;
	return NULL;
}

/* may a WR of the QP's NIC use the element: a region of that NIC's, the element inside
 * it, and local write where data lands in it */
static int sge_ok(const struct ibv_sge *sg, int lands, int nic)
{
	if (!sg->length)
		return 1;
	for (const struct ss_mr *mr = live_mrs; mr; mr = mr->next_live) {
		const struct ibv_mr *m = &mr->vmr.ibv_mr;
		uint64_t base = (uint64_t)(uintptr_t)m->addr;

		if (m->lkey != sg->lkey)
			continue;
		return mr->nic == nic && sg->addr >= base && sg->length <= m->length &&
		       sg->addr - base <= m->length - sg->length &&
		       (!lands || (mr->vmr.access & IBV_ACCESS_LOCAL_WRITE));
	}
	return 0;
}

/* the key simnic reaches the QP's bounce buffers with: local only, the whole process */
static int reserved_lkey(struct ss_host *h, struct ss_qp *qp, uint32_t *lkey)
{
	int err = 0;

	if (!qp->rsvd)
		err = sn_reg_mr(h->fabric, h->host, qp->nic, 1, SIZE_MAX - 1,
				SHIFT_ACCESS_LOCAL_WRITE, &qp->rsvd);
	if (err) {
		qp->rsvd = NULL;
		return err;
	}
	return sn_mr_keys(qp->rsvd, lkey, NULL);
}

/* ---------------------------------------------------------- posts ------- */

/* The element simnic gets for a WR of n elements (n > 1): the bounce buffer (gathered
 * unless the data lands in it), an offending element alone, or inline data gathered
 * into inl. *out is NULL unless a bounce buffer was made. */
static int one_sge(struct ss_host *h, struct ss_qp *qp, const struct ibv_sge *sg, int n,
		   int lands, int inl, uint8_t *inl_buf, struct shift_sge *s,
		   struct ss_bounce **out)
{
	uint64_t total = 0;
	struct ss_bounce *b;
	uint32_t lkey;
	int err;

	*out = NULL;
	for (int i = 0; i < n; i++)
		total += sg[i].length;
	if (total > SHIFT_MAX_MSG || (inl && total > SHIFT_MAX_INLINE))
		return EINVAL;
	if (inl) { /* copied at the post, keys unused, as inline data is */
		uint32_t off = 0;

		for (int i = 0; i < n; i++) {
			memcpy(inl_buf + off, (const void *)(uintptr_t)sg[i].addr, sg[i].length);
			off += sg[i].length;
		}
		*s = (struct shift_sge){(uint64_t)(uintptr_t)inl_buf, off, 0};
		return 0;
	}
	for (int i = 0; i < n; i++)
		if (!sge_ok(&sg[i], lands, qp->nic)) {
			*s = (struct shift_sge){sg[i].addr, sg[i].length, sg[i].lkey};
			return 0;
		}
	err = reserved_lkey(h, qp, &lkey);
	if (err)
		return err;
	b = malloc(sizeof(*b) + (size_t)total);
	if (!b)
		return ENOMEM;
	b->scatter = lands;
	b->num_sge = n;
	memcpy(b->sg, sg, (size_t)n * sizeof(*sg));
	b->len = (uint32_t)total;
	if (!lands) {
		uint32_t off = 0;

		for (int i = 0; i < n; i++) {
			memcpy(b->data + off, (const void *)(uintptr_t)sg[i].addr, sg[i].length);
			off += sg[i].length;
		}
	}
	*s = (struct shift_sge){(uint64_t)(uintptr_t)b->data, b->len, lkey};
	*out = b;
	return 0;
}

int ss_sge_send(struct ss_host *h, struct ss_qp *qp, const struct ibv_send_wr *w,
		struct shift_send_wr *s, uint8_t *inl_buf)
{
	struct ss_ring *r = &qp->sq;
	struct ss_bounce *b = NULL;
	int err = 0;

	if (w->num_sge < 0 || (uint32_t)w->num_sge > qp->cap.max_send_sge ||
	    (w->num_sge && !w->sg_list))
		return EINVAL;
	if (r->tail - r->head >= r->cap)
		return ENOMEM;
	if (w->num_sge > 1)
		err = one_sge(h, qp, w->sg_list, w->num_sge, w->opcode == IBV_WR_RDMA_READ,
			      !!(w->send_flags & IBV_SEND_INLINE), inl_buf, &s->sg, &b);
	else if (w->num_sge == 1)
		s->sg = (struct shift_sge){w->sg_list[0].addr, w->sg_list[0].length,
					   w->sg_list[0].lkey};
	if (err)
		return err;
	s->num_sge = w->num_sge ? 1 : 0;
	s->wr_id = r->tail;
	r->slot[r->tail % r->cap] = (struct ss_slot){w->wr_id, b};
	return 0;
}

int ss_sge_recv(struct ss_host *h, struct ss_qp *qp, const struct ibv_recv_wr *w,
		struct shift_recv_wr *s)
{
	struct ss_ring *r = &qp->rq;
	struct ss_bounce *b = NULL;
	int err = 0;

	if (w->num_sge < 0 || (uint32_t)w->num_sge > qp->cap.max_recv_sge ||
	    (w->num_sge && !w->sg_list))
		return EINVAL;
	if (r->tail - r->head >= r->cap)
		return ENOMEM;
	*s = (struct shift_recv_wr){.wr_id = r->tail, .num_sge = w->num_sge ? 1 : 0};
	if (w->num_sge > 1)
		err = one_sge(h, qp, w->sg_list, w->num_sge, 1, 0, NULL, &s->sg, &b);
	else if (w->num_sge == 1)
		s->sg = (struct shift_sge){w->sg_list[0].addr, w->sg_list[0].length,
					   w->sg_list[0].lkey};
	if (err)
		return err;
	r->slot[r->tail % r->cap] = (struct ss_slot){w->wr_id, b};
	return 0;
}

/* simnic took the WR ss_sge_send or ss_sge_recv prepared */
void ss_sge_posted(struct ss_ring *r)
{
	r->tail++;
}

/* simnic refused it */
void ss_sge_unposted(struct ss_ring *r)
{
	struct ss_slot *s = &r->slot[r->tail % r->cap];

	free(s->b);
	s->b = NULL;
}

/* ------------------------------------------------------ completions ------ */

static void scatter(const struct ss_bounce *b, uint32_t len)
{
	uint32_t off = 0;

	for (int i = 0; i < b->num_sge && off < len; i++) {
		uint32_t n = b->sg[i].length < len - off ? b->sg[i].length : len - off;

		memcpy((void *)(uintptr_t)b->sg[i].addr, b->data + off, n);
		off += n;
	}
}

/* A completion from simnic: the WR it completes (and the unsignaled ones before it)
 * leave the provider's queue, their data where it belongs; the program's wr_id. */
void ss_sge_complete(struct shift_wc *wc)
{
	int recv = wc->opcode == SHIFT_WC_RECV || wc->opcode == SHIFT_WC_RECV_RDMA_WITH_IMM;
	struct ss_qp *qp = qp_by_num(wc->qp_num);
	struct ss_ring *r;
	uint64_t seq = wc->wr_id;

	if (!qp)
		return;
	r = recv ? &qp->rq : &qp->sq;
	if (seq < r->head || seq >= r->tail)
		return;
	for (; r->head <= seq; r->head++) {
		struct ss_slot *s = &r->slot[r->head % r->cap];
		int last = r->head == seq;

		if (s->b && s->b->scatter) {
			if (last && wc->status == SHIFT_WC_SUCCESS &&
			    wc->opcode != SHIFT_WC_RECV_RDMA_WITH_IMM) /* its data went elsewhere */
				scatter(s->b, recv ? wc->byte_len : s->b->len);
			else if (!last && wc->status != SHIFT_WC_WR_FLUSH_ERR)
				scatter(s->b, s->b->len); /* an unsignaled READ, done */
		}
		if (last)
			wc->wr_id = s->wr_id;
		free(s->b);
		s->b = NULL;
	}
}
