/*
 * pending.c - the layer's records: the WRs it has posted and not seen complete (the
 * specification's pending and rpend), and the completions it holds for the application
 * (buffered). Settling them in post order, posting one on a path (the backup path with
 * the backup NIC's keys), and in direct mode reading them back from the send queue.
 */
#include "layer.h"

#include <errno.h>
#include <string.h>

static int wc_op(int op)
{
    switch (op) {
    case SHIFT_WR_RDMA_WRITE:
    case SHIFT_WR_RDMA_WRITE_WITH_IMM:
        return SHIFT_WC_RDMA_WRITE;
    case SHIFT_WR_RDMA_READ:
        return SHIFT_WC_RDMA_READ;
    case SHIFT_WR_ATOMIC_CMP_AND_SWP:
        return SHIFT_WC_COMP_SWAP;
    case SHIFT_WR_ATOMIC_FETCH_AND_ADD:
        return SHIFT_WC_FETCH_ADD;
    default:
        return SHIFT_WC_SEND;
    }
}

/* ----------------------------------------------------------- buffers ------- */

void buf_push(ep_s *e, const struct shift_wc *wc)
{
    /* the posts keep outstanding + buffered <= capacity, so this always fits */
    if (e->btail - e->bhead >= e->bcap)
        return;
    e->buf[e->btail & e->bmask] = *wc;
    e->btail++;
}

/* The completion of send WR w with status, naming it wr_id (the application's id, or
 * the layer's sequence for a completion that take_send is to settle). */
void send_wc(const struct shift_send_wr *w, uint64_t wr_id, int status, struct shift_wc *wc)
{
    memset(wc, 0, sizeof *wc);
    wc->wr_id = wr_id;
    wc->status = status;
    wc->opcode = wc_op(w->opcode);
    wc->byte_len = w->num_sge ? w->sg.length : 0;
}

/* The completion of a receive WR with status, naming it wr_id. */
void recv_wc(uint64_t wr_id, int status, struct shift_wc *wc)
{
    memset(wc, 0, sizeof *wc);
    wc->wr_id = wr_id;
    wc->status = status;
    wc->opcode = SHIFT_WC_RECV;
}

void buf_send(ep_s *e, const pend_t *p, int status)
{
    struct shift_wc wc;
    send_wc(&p->wr, p->app_id, status, &wc);
    buf_push(e, &wc);
}

/* Append a completion to the layer's head of the backup CQ (q2). Its capacity is what
 * the backup CQ and the posts in Error can hold, so this always fits. */
void q2_push(ep_s *e, const struct shift_wc *wc)
{
    if (e->q2tail - e->q2head > e->q2mask)
        return;
    e->q2[e->q2tail & e->q2mask] = *wc;
    e->q2tail++;
}

/* Move what the backend's backup CQ holds now behind q2, in order, so that a completion
 * the layer appends next comes after it (spec: Append to cq[h][2]). */
void q2_absorb(ep_s *e)
{
    struct shift_wc wc;
    int r = 0;
    while (e->q2tail - e->q2head <= e->q2mask && (r = poll_backend(e, 2, 1, &wc)) == 1)
        q2_push(e, &wc);
    backend_error(e, r < 0); /* (what is left follows q2 in the application's poll) */
}

/* Send WR p completes WR_FLUSH_ERR on the backup CQ, behind what the backend's holds now
 * (spec: a flush appended to cq[h][2]: a post in Error, a WR held behind a failed fence). */
void q2_flush(ep_s *e, const pend_t *p)
{
    struct shift_wc wc;
    send_wc(&p->wr, p->wr.wr_id, SHIFT_WC_WR_FLUSH_ERR, &wc);
    q2_absorb(e);
    q2_push(e, &wc);
}

void buf_recv(ep_s *e, uint64_t app_id, int status)
{
    struct shift_wc wc;
    recv_wc(app_id, status, &wc);
    buf_push(e, &wc);
}

void pend_done(ep_s *e, pend_t *p)
{
    p->flags |= PF_DONE;
    if (NOTE(p))
        e->st.sends_completed++;
}

/* A replay skipped a notification the peer had: report its success once every kept
 * signaled WR before it has completed, so the application sees post order. */
void release_skipped(ep_s *e)
{
    if (!e->ndeferred)
        return;
    for (uint64_t s = e->phead; s < e->ptail; s++) {
        pend_t *p = &e->pq[s & e->pmask];
        if (p->flags & PF_DONE)
            continue;
        if (p->flags & PF_SKIPPED) {
            buf_send(e, p, SHIFT_WC_SUCCESS);
            pend_done(e, p);
            e->ndeferred--;
            continue;
        }
        if (p->wr.send_flags & SHIFT_SEND_SIGNALED)
            break;
    }
    pend_gc(e);
}

/* a successful completion of seq: every WR up to it is complete (RC order) */
void complete_upto(ep_s *e, uint64_t seq)
{
    pend_t *last = pend_at(e, seq);
    if (last && last->cum > e->cum_done)
        e->cum_done = last->cum;
    for (uint64_t s = e->phead; s <= seq && s < e->ptail; s++) {
        pend_t *p = &e->pq[s & e->pmask];
        if (p->flags & PF_DONE)
            continue;
        if (p->flags & PF_SKIPPED) {
            e->ndeferred--;
            if (s != seq)
                buf_send(e, p, SHIFT_WC_SUCCESS);
        }
        pend_done(e, p);
    }
    pend_gc(e);
}

/* A completion of p settles every WR up to it (RC order). The application gets, in
 * post order: the skipped notifications before p, then wc if report, then those p's
 * completion released after it. 1 and *out the first of them, or 0 if none. */
int settle_report(ep_s *e, pend_t *p, const struct shift_wc *wc, int report,
                  struct shift_wc *out)
{
    complete_upto(e, p->wr.wr_id);
    if (report)
        buf_push(e, wc);
    release_skipped(e);
    if (e->bhead == e->btail)
        return 0;
    *out = e->buf[e->bhead & e->bmask];
    e->bhead++;
    return 1;
}

/* ------------------------------------------------------------ posting ------- */

int post_pend(ep_s *e, pend_t *p, int path, int nodb)
{
    p->wr.next = NULL;
    if (e->silent[path] && silent_now(e, path)) {
        silent_send(e, path, p, NULL);
        return 0;
    }
    if (path == 1 && !nodb)
        return e->ops->post_send(e->ctx, e->qp[1], &p->wr, NULL);
    struct shift_send_wr w = p->wr;
    if (path == 2) {
        if (w.num_sge && !(w.send_flags & SHIFT_SEND_INLINE))
            w.sg.lkey = lkey_backup(e, w.sg.lkey);
        w.rkey = xlate(e->rk, e->nrk, w.rkey);
    }
    if (nodb)
        w.send_flags |= SHIFT_SEND_NO_DOORBELL;
    return e->ops->post_send(e->ctx, e->qp[path], &w, NULL);
}

int post_rpend(ep_s *e, rpend_t *r, int path)
{
    if (e->silent[path] && silent_now(e, path)) {
        silent_recv(e, path, r);
        return 0;
    }
    if (path == 1)
        return e->ops->post_recv(e->ctx, e->qp[1], &r->wr);
    struct shift_recv_wr w = r->wr;
    if (w.num_sge)
        w.sg.lkey = lkey_backup(e, w.sg.lkey);
    return e->ops->post_recv(e->ctx, e->qp[2], &w);
}

/* Fill a pending entry from a WR as the application posted it. */
void pend_fill(pend_t *p, const struct shift_send_wr *w, uint64_t seq)
{
    p->wr = *w;
    p->wr.next = NULL;
    p->wr.wr_id = seq;
    p->wr.send_flags &= ~(unsigned)SHIFT_SEND_INELIGIBLE;
    p->app_id = w->wr_id;
    p->where = W_DEFAULT;
    p->flags = (w->send_flags & SHIFT_SEND_INELIGIBLE) ? PF_INELIGIBLE : 0;
    if ((w->send_flags & SHIFT_SEND_INLINE) && w->num_sge && w->sg.length) {
        memcpy(p->inl, (const void *)(uintptr_t)w->sg.addr, w->sg.length);
        p->wr.sg.addr = (uint64_t)(uintptr_t)p->inl;
    }
}

/* ------------------------------------------- direct mode's send queue ------- */

/* The WRs the default QP's send queue still holds for the layer (direct mode): how
 * many are outstanding (no polled completion covers them) and how many of those
 * and of the ones an error covers are notifications. 0, or the backend's error (a
 * positive errno) if it could not read the send queue to its end. */
int direct_count(ep_s *e, uint64_t *outstanding, uint64_t *notes)
{
    struct shift_send_wr w;
    int r = 0;
    *outstanding = *notes = 0;
    for (uint32_t i = 0; i < e->pcap && (r = e->ops->sq_pending(e->ctx, e->qp[1], i, &w)) >= 0;
         i++) {
        *outstanding += r == 0;
        *notes += (uint64_t)two_sided(w.opcode);
    }
    return r < 0 && r != -ENOENT ? -r : 0;
}

/* Direct mode: the notifications known complete are those posted that the send queue
 * no longer holds (nnotes of them it still does). Never believed beyond what was posted,
 * and never going back: a backend's answer can only add to what was known. */
void direct_sync(ep_s *e, uint64_t nnotes)
{
    uint64_t done = e->notes_posted > nnotes ? e->notes_posted - nnotes : 0;
    if (done > e->cum_done) {
        e->st.sends_completed += done - e->cum_done;
        e->cum_done = done;
    }
}

/* Leave direct mode at a failure (after the drain): the WRs the default QP's send
 * queue holds become pending entries, as post_fast would have made them. 0, or the
 * backend's error (a positive errno) if it could not read the send queue to its end:
 * the WRs past the one it failed at are unknown to the layer (the caller kills the
 * endpoint). */
int materialize(ep_s *e)
{
    struct shift_send_wr w;
    uint64_t notes = 0, first = e->ptail;
    int r = 0;
    for (uint32_t i = 0; i < e->pcap && (r = e->ops->sq_pending(e->ctx, e->qp[1], i, &w)) >= 0;
         i++) {
        if (shift_send_wr_check(&w, SHIFT_MAX_INLINE))
            break; /* not a WR the layer could have posted: read no further */
        pend_t *p = &e->pq[e->ptail & e->pmask];
        pend_fill(p, &w, e->ptail);
        notes += (uint64_t)two_sided(w.opcode);
        p->cum = notes;
        e->ptail++;
    }
    direct_sync(e, notes);
    for (uint64_t s2 = first; s2 < e->ptail; s2++)
        e->pq[s2 & e->pmask].cum += e->cum_done;
    if (e->cum_done + notes > e->notes_posted) {
        /* the send queue holds more than the layer counted: it is the truth here */
        e->st.sends_posted += e->cum_done + notes - e->notes_posted;
        e->notes_posted = e->cum_done + notes;
    }
    e->direct = 0;
    return r < 0 && r != -ENOENT ? -r : 0;
}
