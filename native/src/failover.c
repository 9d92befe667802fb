/*
 * failover.c - the failover state machine of spec/Failover.tla: the trigger, the
 * counter handshake, the filtered replay, the refusal, giving up, the probe, the fence
 * and fail-back, and the control messages that drive them (shift_progress, shift_timer,
 * shift_ctl_input). The comments name the specification's actions; where it abstracts,
 * they say what this file does instead.
 */
#include "layer.h"

#include <errno.h>
#include <string.h>

static int atomic_op(int op)
{
    return op == SHIFT_WR_ATOMIC_CMP_AND_SWP || op == SHIFT_WR_ATOMIC_FETCH_AND_ADD;
}

/* the receive counter (the requester's is 0) to the peer over the backup path */
static void send_counter(ep_s *e, int want_reply)
{
    ctl_msg m = {CTL_MAGIC, CTL_COUNTER, (uint8_t)want_reply, 0, e->epoch, 0,
                 is_req(e) ? 0 : (int64_t)e->recv_done};
    if (e->ops->ctl_send(e->ctx, e->qp[2], &m, sizeof m) == 0)
        e->st.ctl_sent++;
}

/* --------------------------------------------------------- Trigger ---------- */

/* Take the good completions at the head of path's CQ for the application, discard
 * what follows the first error. */
static void drain(ep_s *e, int path)
{
    struct shift_wc wc;
    int good = 1;
    while (poll_backend(e, path, 1, &wc) == 1) {
        if (wc.wr_id == PROBE_ID && !e->direct)
            continue;
        if (wc.status != SHIFT_WC_SUCCESS)
            good = 0;
        if (!good)
            continue;
        if (e->direct) {
            if (!(wc.opcode & SHIFT_WC_RECV))
                buf_push(e, &wc); /* the application's own wr_id */
        } else if (is_req(e)) {
            pend_t *p = pend_at(e, wc.wr_id);
            if (!p || (p->flags & PF_DONE))
                continue;
            if (wc.opcode & SHIFT_WC_RECV)
                continue;
            wc.wr_id = p->app_id;
            complete_upto(e, p->wr.wr_id); /* (what it releases comes before this one) */
            buf_push(e, &wc);
        } else {
            rpend_t *r = rpend_at(e, wc.wr_id);
            if (!r || (r->flags & PF_DONE))
                continue;
            wc.wr_id = r->app_id;
            buf_push(e, &wc);
            r->flags |= PF_DONE;
            e->recv_done++;
        }
    }
    if (is_req(e))
        pend_gc(e);
    else
        rpend_gc(e);
}

/* Trigger: move the default QP to ERR (stale packets on the dead path can no longer
 * execute), drain its CQ, and either refuse (atomic or ineligible WR outstanding) or
 * enter Fallback with every outstanding WR held for replay. */
void trigger(ep_s *e, int status)
{
    e->ops->modify_qp(e->ctx, e->qp[1], SHIFT_QPS_ERR, 0, 0);
    drain(e, 1);
    if (e->direct)
        materialize(e);
    e->epoch++;
    e->sent_ctr = 0;
    e->replayed = 0;
    e->probing = 0;
    e->ctl_left = e->attr.ctl_retries;
    if (is_req(e)) {
        int refuse = 0;
        if (is_shift(e))
            for (uint64_t s = e->phead; s < e->ptail; s++) {
                pend_t *p = &e->pq[s & e->pmask];
                if (!(p->flags & PF_DONE) &&
                    (atomic_op(p->wr.opcode) || (p->flags & PF_INELIGIBLE)))
                    refuse = 1;
            }
        if (refuse) {
            int first = 1;
            for (uint64_t s = e->phead; s < e->ptail; s++) {
                pend_t *p = &e->pq[s & e->pmask];
                if (p->flags & PF_DONE)
                    continue;
                buf_send(e, p, first ? status : SHIFT_WC_WR_FLUSH_ERR);
                p->flags |= PF_DONE;
                first = 0;
                e->st.refused_wrs++;
            }
            pend_gc(e);
            e->state = SHIFT_STATE_ERROR;
            e->err_path = 1;
            return;
        }
        for (uint64_t s = e->phead; s < e->ptail; s++)
            e->pq[s & e->pmask].where = W_HELD;
    } else {
        for (uint64_t s = e->rhead; s < e->rtail; s++)
            e->rpend[s & e->rmask].where = W_HELD;
    }
    e->st.failovers++;
    e->state = SHIFT_STATE_FALLBACK;
}

/* Both paths are gone (the handshake got no answer): surface the error. */
static void give_up(ep_s *e, int status)
{
    e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_ERR, 0, 0);
    drain(e, 2);
    int first = 1;
    if (is_req(e)) {
        for (uint64_t s = e->phead; s < e->ptail; s++) {
            pend_t *p = &e->pq[s & e->pmask];
            if (p->flags & PF_DONE)
                continue;
            buf_send(e, p, first ? status : SHIFT_WC_WR_FLUSH_ERR);
            p->flags |= PF_DONE;
            first = 0;
        }
        e->ndeferred = 0;
        pend_gc(e);
    } else {
        for (uint64_t s = e->rhead; s < e->rtail; s++) {
            rpend_t *r = &e->rpend[s & e->rmask];
            if (r->flags & PF_DONE)
                continue;
            buf_recv(e, r->app_id, SHIFT_WC_WR_FLUSH_ERR);
            r->flags |= PF_DONE;
        }
        rpend_gc(e);
    }
    e->state = SHIFT_STATE_ERROR;
    e->err_path = 2;
}

/* ------------------------------------------------------- the steps --------- */

/* Handshake: repost the outstanding receive WRs on the backup QP, then send the
 * receive counter over the backup path. */
static void handshake(ep_s *e)
{
    if (!is_req(e))
        for (uint64_t s = e->rhead; s < e->rtail; s++) {
            rpend_t *r = &e->rpend[s & e->rmask];
            if ((r->flags & PF_DONE) || r->where != W_HELD)
                continue;
            post_rpend(e, r, 2);
            r->where = W_BACKUP;
        }
    send_counter(e, e->peer_ctr < 0);
    e->sent_ctr = 1;
}

/* The peer's receive counter shows notification p as received. */
static int counted(const ep_s *e, const pend_t *p)
{
    return NOTE(p) && (int64_t)NOTE(p) <= e->peer_ctr;
}

/* Replay: re-post the outstanding sends on the backup QP in post order, skipping the
 * notifications the peer's receive counter shows as received (SHIFT) and, for
 * ShiftPrefix, every WR before the last of them too. */
static void replay(ep_s *e)
{
    /* RC executes in post order: every WR up to the last notification the peer counted
     * executed on the default QP (those before `executed`; none if it counted none) */
    uint64_t executed = 0;
    if (is_shift(e))
        for (uint64_t s = e->phead; s < e->ptail; s++) {
            pend_t *p = &e->pq[s & e->pmask];
            if (!(p->flags & PF_DONE) && counted(e, p))
                executed = s + 1;
        }
    if (executed > e->known_exec)
        e->known_exec = executed;
    int blocked = 0;
    for (uint64_t s = e->phead; s < e->ptail; s++) {
        pend_t *p = &e->pq[s & e->pmask];
        if (p->flags & PF_DONE)
            continue;
        /* ShiftPrefix skips the executed WRs too: a WRITE replayed there would put stale
         * data under a notification the peer holds (docs/findings.md, F3). They are a
         * prefix of the outstanding WRs, so none of their successes waits below. */
        if ((skips_prefix(e) && s < executed) || (is_shift(e) && counted(e, p))) {
            e->st.skipped_wrs++;
            if ((p->wr.send_flags & SHIFT_SEND_SIGNALED) && blocked) {
                p->flags |= PF_SKIPPED;
                e->ndeferred++;
            } else {
                if (p->wr.send_flags & SHIFT_SEND_SIGNALED)
                    buf_send(e, p, SHIFT_WC_SUCCESS);
                pend_done(e, p);
            }
            continue;
        }
        int err = post_pend(e, p, 2, 0);
        if (err && e->state != SHIFT_STATE_ERROR) {
            /* the backup QP refused the WR: the path is unusable. It goes to ERR and
             * this WR and the rest are posted to it, so that each flushes after the
             * ones before it (post order), as posts in Error do */
            e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_ERR, 0, 0);
            e->state = SHIFT_STATE_ERROR;
            e->err_path = 2;
            err = post_pend(e, p, 2, 0);
        }
        if (err) { /* not even the dead QP takes it: report it now */
            buf_send(e, p, SHIFT_WC_WR_FLUSH_ERR);
            p->flags |= PF_DONE;
            continue;
        }
        p->where = W_BACKUP;
        e->st.replayed_wrs++;
        if (p->wr.send_flags & SHIFT_SEND_SIGNALED)
            blocked = 1;
    }
    pend_gc(e);
    e->replayed = 1;
}

/* Reconnect: the connection manager re-establishes the default QP pair (fails unless
 * the path is healthy); then the probe, or straight to WaitSignaled. */
static int reconnect(ep_s *e)
{
    if (e->ops->reset_qp(e->ctx, e->qp[1]) != 0)
        return SHIFT_STEP_NONE;
    struct shift_wc wc;
    while (poll_backend(e, 1, 1, &wc) == 1)
        ;
    if (e->attr.flags & SHIFT_EP_WIRE_PROBE) {
        struct shift_send_wr probe = {0};
        probe.wr_id = PROBE_ID;
        probe.opcode = SHIFT_WR_RDMA_WRITE;
        probe.send_flags = SHIFT_SEND_SIGNALED;
        if (e->ops->post_send(e->ctx, e->qp[1], &probe, NULL) != 0)
            return SHIFT_STEP_NONE;
        e->probing = 1;
    } else {
        e->state = SHIFT_STATE_WAIT_SIGNALED;
    }
    return SHIFT_STEP_RECONNECT;
}

static int probe_check(ep_s *e)
{
    struct shift_wc wc;
    while (poll_backend(e, 1, 1, &wc) == 1) {
        if (wc.wr_id != PROBE_ID)
            continue;
        e->probing = 0;
        if (wc.status == SHIFT_WC_SUCCESS) {
            e->state = SHIFT_STATE_WAIT_SIGNALED;
            return SHIFT_STEP_PROBE_DONE;
        }
        return SHIFT_STEP_PROBE_FAILED;
    }
    return SHIFT_STEP_NONE;
}

static int fence_done(ep_s *e)
{
    pend_t *p = pend_at(e, e->fence_seq);
    return !p || (p->flags & PF_DONE);
}

/* Release: the fence completed on the backup path, so every WR before it did:
 * notify the peer on the default path alone, then ring the default doorbell. */
static void release(ep_s *e)
{
    ctl_msg m = {CTL_MAGIC, CTL_FAILBACK, 0, 0, e->epoch, 0, 0};
    if (e->ops->ctl_send(e->ctx, e->qp[1], &m, sizeof m) == 0)
        e->st.ctl_sent++;
    e->ops->ring(e->ctx, e->qp[1]);
    e->state = SHIFT_STATE_DEFAULT;
    e->has_fence = 0;
    e->sent_ctr = 0;
    e->peer_ctr = -1;
    e->replayed = 0;
    e->st.failbacks++;
}

/* The responder, on the fail-back notice: move the outstanding receive WRs back to
 * the default QP. Verbs cannot unpost a receive, so the backup QP goes to ERR (its
 * receives come back flushed), its good completions are kept for the application,
 * the receives are posted on the default QP in order, and the backup QP is brought
 * back to RTS with the PSNs it had, ready for the next failover. */
static void move_receives_back(ep_s *e)
{
    int st = 0;
    uint32_t rq_psn = 0, sq_psn = 0;
    e->ops->query_qp(e->ctx, e->qp[2], &st, &rq_psn, &sq_psn);
    e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_ERR, 0, 0);
    drain(e, 2);
    for (uint64_t s = e->rhead; s < e->rtail; s++) {
        rpend_t *r = &e->rpend[s & e->rmask];
        if (r->flags & PF_DONE)
            continue;
        post_rpend(e, r, 1);
        r->where = W_DEFAULT;
    }
    if (st == SHIFT_QPS_RTS) {
        e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_RESET, 0, 0);
        e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_INIT, 0, 0);
        e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_RTR, rq_psn, 0);
        e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_RTS, 0, sq_psn);
    }
    e->state = SHIFT_STATE_DEFAULT;
    e->sent_ctr = 0;
    e->peer_ctr = -1;
}

int shift_progress(shift_ep h)
{
    ep_s *e = ep_get(h);
    if (!e)
        return -EINVAL;
    if (!failover(e) || e->state == SHIFT_STATE_ERROR)
        return SHIFT_STEP_NONE;
    if (e->state == SHIFT_STATE_DEFAULT && e->peer_ctr >= 0) {
        trigger(e, SHIFT_WC_WR_FLUSH_ERR);
        return SHIFT_STEP_TRIGGER;
    }
    if (e->state == SHIFT_STATE_FALLBACK && !e->sent_ctr) {
        handshake(e);
        return SHIFT_STEP_HANDSHAKE;
    }
    if (!is_req(e))
        return SHIFT_STEP_NONE;
    if (e->state == SHIFT_STATE_FALLBACK && e->peer_ctr >= 0 && !e->replayed) {
        replay(e);
        return SHIFT_STEP_REPLAY;
    }
    if (is_shift(e) && e->state == SHIFT_STATE_FALLBACK && e->replayed &&
        !(e->attr.flags & SHIFT_EP_NO_FAIL_BACK))
        return e->probing ? probe_check(e) : reconnect(e);
    if (e->state == SHIFT_STATE_WAIT_DRAINED && fence_done(e)) {
        release(e);
        return SHIFT_STEP_RELEASE;
    }
    return SHIFT_STEP_NONE;
}

int shift_timer(shift_ep h, int path)
{
    ep_s *e = ep_get(h);
    if (!e)
        return -EINVAL;
    if (path != 1 && path != 2)
        return -EINVAL;
    if (path != 2 || e->state != SHIFT_STATE_FALLBACK || !e->sent_ctr || e->peer_ctr >= 0)
        return 0;
    if (e->ctl_left > 0) {
        e->ctl_left--;
        send_counter(e, 1);
    } else {
        give_up(e, SHIFT_WC_RETRY_EXC_ERR);
    }
    return 1;
}

int shift_ctl_input(shift_ep h, int path, const void *msg, uint32_t len)
{
    ep_s *e = ep_get(h);
    if (!e)
        return -EINVAL;
    if ((path != 1 && path != 2) || !msg || len != sizeof(ctl_msg))
        return -EINVAL;
    ctl_msg m;
    memcpy(&m, msg, sizeof m);
    if (m.magic != CTL_MAGIC || (m.kind != CTL_COUNTER && m.kind != CTL_FAILBACK) ||
        m.count < 0)
        return -EINVAL; /* (a receive counter is never negative) */
    e->st.ctl_received++;
    if (!failover(e) || e->state == SHIFT_STATE_ERROR)
        return 0;
    if (m.kind == CTL_FAILBACK) {
        if (!is_req(e) && e->state == SHIFT_STATE_FALLBACK)
            move_receives_back(e);
        return 0;
    }
    if (m.epoch > e->peer_epoch) {
        e->peer_epoch = m.epoch;
        if (e->state != SHIFT_STATE_DEFAULT && e->sent_ctr && e->peer_ctr >= 0) {
            /* The peer started another failover while this side still sits on the
             * backup path from the last one (it missed the fail-back notice): count
             * what arrived on the backup QP and answer again. */
            if (!is_req(e))
                drain(e, 2);
            e->epoch++;
            e->peer_ctr = m.count;
            send_counter(e, 0);
            return 0;
        }
        e->peer_ctr = m.count;
    } else if (m.epoch == e->peer_epoch) {
        /* a retransmission: the peer may have lost our counter */
        if (e->state != SHIFT_STATE_DEFAULT && e->peer_ctr < 0)
            e->peer_ctr = m.count;
        if (m.want_reply && e->sent_ctr && e->state != SHIFT_STATE_DEFAULT)
            send_counter(e, e->peer_ctr < 0);
    }
    return 0;
}
