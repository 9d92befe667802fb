/*
 * failover.c - the failover layer of spec/Failover.tla on one host: Trigger, the steps
 * of Progress (woken by the peer's counter, Handshake, Replay, Reconnect, Release) and
 * DeliverControl (the peer's counter, the fail-back notice), for both sides of an
 * endpoint - its send side (sendMode) and its receive side (recvMode) - and the one
 * counter exchange that serves them both (sentCtr, peerCtr, fresh, asked). Each function
 * names the spec action it implements, the handshake timer too (shift_timer: the spec's
 * HandshakeTimeout, which resends a counter the wire lost; a counter's sequence number
 * and ask flag tell a resent counter from a new failover, as the spec's do). What the C
 * core adds, the spec does not have and the differential runner never drives, each
 * saying why: the timer's retry budget and giving up (the spec's wire loses a bounded
 * number of messages, so its timer needs no budget), the wire probe, an endpoint that
 * dies of an application error, and the verbs operations that move receive WRs between
 * QPs.
 */
#include "layer.h"

#include <errno.h>
#include <string.h>

static int clear_rq2(ep_s *e);
static void fail_all(ep_s *e, int status, int path);

static int atomic_op(int op)
{
    return op == SHIFT_WR_ATOMIC_CMP_AND_SWP || op == SHIFT_WR_ATOMIC_FETCH_AND_ADD;
}

/* spec: D.failBack /\ Recover - Shift and ShiftPrefix return to the default path, unless
 * the connection was opened without fail-back */
static int fails_back(const ep_s *e)
{
    return is_shift(e) && !(e->attr.flags & SHIFT_EP_NO_FAIL_BACK);
}

/* The counter taken at the last Handshake, to the peer over the backup path: [count =
 * ctrVal, seq = ctrSeq, ask] (spec: Handshake, HandshakeTimeout, and the answer to a
 * duplicate). A dead NIC or a QP in ERR sends nothing (ctl_send fails): the counter is
 * lost, as the spec's Handshake puts nothing on the wire then; the handshake timer may
 * send it again (and gives up, with the error to the application, after ctl_retries).
 * Any other failure of ctl_send is the same loss: the layer cannot tell them apart. */
static void send_counter(ep_s *e, int want_reply)
{
    ctl_msg m = {CTL_MAGIC, CTL_COUNTER, (uint8_t)want_reply, 0, e->ctr_seq, 0, e->ctr_sent};
    if (!backend_error(e, e->ops->ctl_send(e->ctx, e->qp[2], &m, sizeof m)))
        e->st.ctl_sent++;
}

/* --------------------------------------------------------- Trigger ---------- */

/* spec: GoodPrefix(cq[h][p]) - take the good completions at the head of path's CQ for
 * the application, both sides' in CQ order: a receive completion counts in the receive
 * counter (recvDone) and leaves rpend; a send completion settles every WR up to it (RC
 * order). What follows the first error is discarded: the QP is in ERR, the rest of its
 * WRs were flushed, and the layer owns them now. With errors (spec: PeerAppError's cs)
 * the errors are taken too, each settling its own WR or receive WR; an application's
 * error among them is this endpoint's own. */
static void drain(ep_s *e, int path, int errors)
{
    struct shift_wc wc;
    int good = 1, n;
    /* a poll that fails ends the drain (counted): what the CQ still holds is stale to
     * the layer from now on (its WRs are replayed, or flushed, and completed once) */
    while ((n = poll_one(e, path, &wc)) == 1) {
        int recv = (wc.opcode & SHIFT_WC_RECV) != 0, ok = wc.status == SHIFT_WC_SUCCESS;
        if (!recv && wc.wr_id == PROBE_ID && !e->direct)
            continue;
        if (!ok && !errors)
            good = 0;
        if (!good)
            continue;
        if (!ok && !path_error(wc.status))
            e->app_err = 1;
        if (recv) {
            rpend_t *r = rpend_at(e, wc.wr_id);
            if (!r || (r->flags & PF_DONE))
                continue;
            wc.wr_id = r->app_id;
            r->flags |= PF_DONE;
            e->recv_done += ok;
        } else if (!e->direct) { /* (direct: the application's own wr_id) */
            pend_t *p = pend_at(e, wc.wr_id);
            if (!p || (p->flags & PF_DONE))
                continue;
            wc.wr_id = p->app_id;
            if (ok && path == 1)
                keep_upto(e, p->wr.wr_id); /* (spec: Trigger's Acked(h, D, done)) */
            if (ok)
                complete_upto(e, p->wr.wr_id); /* (what it releases comes before this one) */
            else
                p->flags |= PF_DONE;
        }
        buf_push(e, &wc);
    }
    backend_error(e, n < 0);
    pend_gc(e);
    rpend_gc(e);
}

/* Post WR p on the backup QP (a replay, or a WR held behind an abandoned fence). If the
 * backup QP refuses it, the path is unusable: it goes to ERR and the WR is posted to it
 * again, so that it flushes after the ones before it (post order), as posts in Error do;
 * if not even the dead QP takes it, it is reported flushed now. 1 if it went to the QP. */
static int post_backup(ep_s *e, pend_t *p)
{
    int err = post_pend(e, p, 2, 0);
    if (err && e->send_mode != SHIFT_STATE_ERROR) {
        /* (if even the move to ERR fails, the post below fails too: reported below) */
        if (!backend_error(e, e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_ERR, 0, 0)))
            err = post_pend(e, p, 2, 0);
        e->send_mode = SHIFT_STATE_ERROR;
        e->err_path = 2;
        ep_event(e, SHIFT_EVENT_PATH_DOWN, 2, SHIFT_WC_WR_FLUSH_ERR, 0);
    }
    if (err) {
        buf_send(e, p, SHIFT_WC_WR_FLUSH_ERR);
        p->flags |= PF_DONE;
        return 0;
    }
    p->where = W_BACKUP;
    return 1;
}

/* Trigger's send side in Default: refuse (an atomic or an ineligible WR is outstanding:
 * re-executing it is not safe; the WRs fail, the first with the trigger's status) or
 * enter Fallback with every outstanding WR held for the replay. */
static void trigger_default(ep_s *e, int status)
{
    int refuse = 0;
    for (uint64_t s = e->phead; s < e->ptail; s++) {
        pend_t *p = &e->pq[s & e->pmask];
        if (p->flags & PF_DONE)
            continue;
        if (is_shift(e) && (atomic_op(p->wr.opcode) || (p->flags & PF_INELIGIBLE)))
            refuse = 1;
        /* (two-phase set-up: a peer's rkey whose backup key has not arrived in-band
         * cannot be replayed - on the backup NIC it names no region, or another's) */
        if (rkey_unlearnt(e, &p->wr))
            refuse = 1;
    }
    if (refuse) {
        uint64_t n = 0;
        for (uint64_t s = e->phead; s < e->ptail; s++) {
            pend_t *p = &e->pq[s & e->pmask];
            if (p->flags & PF_DONE)
                continue;
            buf_send(e, p, n ? SHIFT_WC_WR_FLUSH_ERR : status);
            p->flags |= PF_DONE;
            n++;
        }
        e->st.refused_wrs += n;
        pend_gc(e);
        e->send_mode = SHIFT_STATE_ERROR;
        e->err_path = 1;
        ep_event(e, SHIFT_EVENT_FAILOVER_REFUSED, 1, status, n);
        return;
    }
    for (uint64_t s = e->phead; s < e->ptail; s++)
        e->pq[s & e->pmask].where = W_HELD;
    e->send_mode = SHIFT_STATE_FALLBACK;
    e->replayed = 0;
}

/* Trigger's send side in fail-back: abandon it. The WRs held behind the fence on the
 * default QP were never transmitted (its doorbell was not rung); the QP's move to ERR
 * flushed them and the drain discarded the flushes: they go to the backup QP, after the
 * fence (spec: sq[h][2] \o held, flushed if the backup QP is in ERR). The replay is
 * done, so later posts go to the backup QP until the next reconnect. */
static void abandon(ep_s *e)
{
    e->send_mode = SHIFT_STATE_FALLBACK;
    e->has_fence = 0;
    for (uint64_t s = e->phead; s < e->ptail; s++) {
        pend_t *p = &e->pq[s & e->pmask];
        if (!(p->flags & PF_DONE) && p->where == W_DEFAULT)
            post_backup(e, p);
    }
    pend_gc(e);
}

/* spec: Trigger(h, D, status). Take every side of this endpoint off the default path:
 * move the default QP to ERR (stale packets on the dead path can no longer execute),
 * drain its CQ; the send side enters Fallback (or refuses, or abandons a fail-back), the
 * receive side, if its receive WRs were on the default QP, starts moving them
 * (Moving: the Handshake reposts them); the counter is to be sent (again). `seen` is
 * the status this endpoint saw (the event's), SUCCESS if the peer's counter woke it. */
static void start_failover(ep_s *e, int status, int seen)
{
    stale_rq2_check(e);
    /* spec: Trigger (fatal \ {1}): a death of the default NIC not yet read is stale now,
     * the failover takes its QP's WRs (a take-over already read keeps its flushes) */
    if (!e->silent[1])
        silent_reset(e, 1);
    /* A failed move to ERR leaves a QP the backend already lost (the failure is why we
     * are here): the failover goes on, as it must; the drain takes what the CQ holds. */
    backend_error(e, e->ops->modify_qp(e->ctx, e->qp[1], SHIFT_QPS_ERR, 0, 0));
    drain(e, 1, 0);
    if (e->direct && backend_error(e, materialize(e))) {
        /* the send queue cannot be read back: the WRs to replay are not all known, and
         * no failover can be safe. The endpoint dies as after a device's fatal error:
         * what the layer knows completes in error, the rest has no completion. */
        fail_all(e, status, 1);
        return;
    }
    if (!backup_ready(e)) {
        /* the backup path's set-up is not done (setup.c): no failover is possible, the
         * error reaches the application as on plain RC - the good completions, the
         * first outstanding WR with the error, the rest flushed - and the endpoint dies */
        fail_all(e, status, 1);
        return;
    }
    e->epoch++;
    e->st.failovers++;
    ep_event(e, SHIFT_EVENT_FAILOVER_STARTED, 2, seen, 0);
    e->probing = 0;
    if (e->send_mode == SHIFT_STATE_DEFAULT)
        trigger_default(e, status);
    else if (e->send_mode == SHIFT_STATE_WAIT_SIGNALED || e->send_mode == SHIFT_STATE_WAIT_DRAINED)
        abandon(e);
    if (e->recv_mode == SHIFT_RECV_DEFAULT) {
        for (uint64_t s = e->rhead; s < e->rtail; s++)
            e->rpend[s & e->rmask].where = W_HELD;
        e->recv_mode = SHIFT_RECV_MOVING;
    }
    e->sent_ctr = 0;
}

/* The failover starts from this endpoint's own sight of a failed default path: an
 * error completion polled from the default QP, or a failed post to it. */
void trigger(ep_s *e, int status)
{
    ep_event(e, SHIFT_EVENT_PATH_DOWN, 1, status, 0);
    start_failover(e, status, status);
}

/* spec: AppOwned(h) - the connection dies of an application error (protection, access,
 * length...), as a plain RC QP does: re-executing the WR elsewhere would fail the same
 * way. Both sides stop: posts complete flushed, no failover, no control message taken.
 * (give_up and fail_all end here too, outside the spec: both paths gone.) */
void go_dead(ep_s *e, int path)
{
    e->send_mode = SHIFT_STATE_ERROR;
    e->err_path = path;
    e->dead = 1;
    e->asked = 0;
}

/* spec: TellAppError(w, h) - word to the peer, over the backup path, that this
 * endpoint's application failed the QP pair: the peer's QP failed too, and its layer
 * cannot read why (F6b). A dead NIC or a QP in ERR sends nothing (ctl_send fails): the
 * word is lost, as any send there; the peer's counter asks again if it fails over. */
static void tell_app_error(ep_s *e)
{
    ctl_msg m = {CTL_MAGIC, CTL_APP_ERROR, 0, 0, 0, 0, 0};
    if (!backend_error(e, e->ops->ctl_send(e->ctx, e->qp[2], &m, sizeof m)))
        e->st.ctl_sent++;
}

/* spec: AppError(h), or an application's error polled off the backup QP (OwnAppError):
 * the endpoint dies of its application's error (status, off path's QP), as a plain RC
 * QP pair does, and tells the peer. */
void app_dies(ep_s *e, int path, int status)
{
    if (e->dead)
        return;
    go_dead(e, path);
    e->app_err = 1;
    /* (a status no verbs device reports, from a faulty backend, is a general error) */
    ep_event(e, SHIFT_EVENT_APP_ERROR, path,
             shift_wc_status_name(status) ? status : SHIFT_WC_GENERAL_ERR, 0);
    tell_app_error(e);
}

/* spec: PeerAppError(h) - the peer's application failed the QP pair, so this endpoint's
 * is failed too, as plain RC's would be: whatever the layer was doing, failover
 * included, ends. The application gets what the CQs hold (default first), then, with
 * both QPs in ERR, their flushes and every WR and receive WR still outstanding,
 * flushed; the endpoint is dead (posts complete flushed, receive side on the default
 * QP). A failed move to ERR is counted; the layer's records flush what it would have. */
static void take_app_error(ep_s *e)
{
    drain(e, 1, 1);
    drain(e, 2, 1);
    for (int path = 1; path <= 2; path++)
        backend_error(e, e->ops->modify_qp(e->ctx, e->qp[path], SHIFT_QPS_ERR, 0, 0));
    drain(e, 1, 1);
    drain(e, 2, 1);
    e->recv_mode = SHIFT_RECV_DEFAULT;
    e->failback_at = 0;
    e->has_fence = 0;
    fail_all(e, SHIFT_WC_WR_FLUSH_ERR, 1);
    ep_event(e, SHIFT_EVENT_PEER_APP_ERROR, 2, SHIFT_WC_SUCCESS, 0);
}

/* Not in the spec: both paths are gone (the handshake got no answer within the control
 * timer's retries): surface the error. The send side's outstanding WRs fail (the first
 * with status), the receive side's receive WRs come back flushed; the endpoint is dead. */
static void give_up(ep_s *e, int status)
{
    if (e->send_mode != SHIFT_STATE_ERROR || e->err_path != 2) /* (else said already) */
        ep_event(e, SHIFT_EVENT_PATH_DOWN, 2, status, 0);
    /* (a failed move to ERR: the drain below takes what the CQ holds all the same) */
    backend_error(e, e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_ERR, 0, 0));
    drain(e, 2, 0);
    fail_all(e, status, 2);
}

/* The endpoint dies with path's QP its last (give_up, or a send queue that cannot be
 * read back): the send side's outstanding WRs fail (the first with status), the
 * receive WRs come back flushed, from the layer's records. */
static void fail_all(ep_s *e, int status, int path)
{
    int first = 1;
    for (uint64_t s = e->phead; s < e->ptail; s++) {
        pend_t *p = &e->pq[s & e->pmask];
        if (p->flags & PF_DONE)
            continue;
        first = first && p->where != W_FLUSHED; /* (those are flushes already) */
        buf_send(e, p, first ? status : SHIFT_WC_WR_FLUSH_ERR);
        p->flags |= PF_DONE;
        first = 0;
    }
    e->ndeferred = 0;
    pend_gc(e);
    for (uint64_t s = e->rhead; s < e->rtail; s++) {
        rpend_t *r = &e->rpend[s & e->rmask];
        if (r->flags & PF_DONE)
            continue;
        buf_recv(e, r->app_id, SHIFT_WC_WR_FLUSH_ERR);
        r->flags |= PF_DONE;
    }
    rpend_gc(e);
    go_dead(e, path);
}

/* ------------------------------------------------------- the steps --------- */

/* spec: Handshake(h). A moving receive side reposts its outstanding receive WRs on the
 * backup QP (a QP in ERR flushes them) and is on the backup path; then the receive
 * counter goes to the peer over the backup path: first (the endpoint then awaits the
 * peer's: asked), or as the answer to the peer's. A counter no replay needs is used up
 * (fresh stays only for a send side that is to replay). */
static void handshake(ep_s *e)
{
    /* the last fail-back's stale receives must leave the backup QP before these go
     * there: the peer's next SEND is to take one of these (flushing this endpoint's
     * sends still there, if any: not in the spec, whose rq[h][2] is empty already) */
    if (e->recv_mode == SHIFT_RECV_MOVING && e->stale_rq2)
        clear_rq2(e);
    if (e->recv_mode == SHIFT_RECV_MOVING) {
        for (uint64_t s = e->rhead; s < e->rtail; s++) {
            rpend_t *r = &e->rpend[s & e->rmask];
            if ((r->flags & PF_DONE) || r->where != W_HELD)
                continue;
            if (post_rpend(e, r, 2) != 0) {
                /* the backup QP refused it (not even flushed): it completes flushed */
                buf_recv(e, r->app_id, SHIFT_WC_WR_FLUSH_ERR);
                r->flags |= PF_DONE;
                continue;
            }
            r->where = W_BACKUP;
        }
        rpend_gc(e);
        e->recv_mode = SHIFT_RECV_FALLBACK;
    }
    e->ctr_seq++;
    e->ctr_sent = (int64_t)e->recv_done;
    e->ctl_left = e->attr.ctl_retries;
    e->sent_ctr = 1;
    e->asked = !e->fresh;
    e->fresh = e->fresh && e->send_mode == SHIFT_STATE_FALLBACK && !e->replayed;
    send_counter(e, e->asked);
}

/* The peer's receive counter shows notification p as received (spec: Skip, "counter"). */
static int counted(const ep_s *e, const pend_t *p)
{
    return NOTE(p) && (int64_t)NOTE(p) <= e->peer_ctr;
}

/* spec: Replay(h, D). Re-post the outstanding sends on the backup QP in post order,
 * skipping the notifications the peer's receive counter shows as received (SHIFT) and,
 * for ShiftPrefix, every WR before the last of them too; the counter is used up. */
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
    uint64_t replayed = keeps_notes(e) ? kept_replay(e) : 0;
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
        if (!post_backup(e, p))
            continue;
        replayed++;
        if (p->wr.send_flags & SHIFT_SEND_SIGNALED)
            blocked = 1;
    }
    pend_gc(e);
    e->st.replayed_wrs += replayed;
    e->replayed = 1;
    e->fresh = 0;
    if (e->send_mode != SHIFT_STATE_ERROR) /* (else the backup path failed: PATH_DOWN) */
        ep_event(e, SHIFT_EVENT_FAILOVER_FINISHED, 2, SHIFT_WC_SUCCESS, replayed);
}

/* Empty the default QP's CQ after this endpoint re-established the pair: what it holds
 * is from the QP's previous life (nothing of this endpoint's was on it: its send side
 * is in Fallback and its receive WRs are elsewhere, which a reset requires). */
static void discard_cq1(ep_s *e)
{
    struct shift_wc wc;
    int r;
    while ((r = poll_backend(e, 1, 1, &wc)) == 1)
        ;
    /* (a failed poll leaves some: stale to take_send and take_recv, which drop them) */
    backend_error(e, r < 0);
}

/* A request that the peer reset its end of the default path into incarnation inc, or the
 * answer that this end is in it (spec: Reconnect's and TakeReconnect's messages), on the
 * backup path. A dead NIC or a QP in ERR sends nothing (ctl_send fails): lost, as the
 * spec's; the handshake timer asks again. */
static void send_reconnect(ep_s *e, int kind, uint32_t inc)
{
    ctl_msg m = {CTL_MAGIC, (uint8_t)kind, 0, 0, inc, 0, 0};
    if (!backend_error(e, e->ops->ctl_send(e->ctx, e->qp[2], &m, sizeof m)))
        e->st.ctl_sent++;
}

/* spec: ResetPath1(h, inc). This endpoint's default QP starts afresh in incarnation inc
 * (the backend's reset: no packet of its earlier life reaches it), and what its CQ held
 * from that life is dropped. -1 if the backend refused (its NIC is dead, or has
 * completions still to write): nothing changed. */
static int reset_default(ep_s *e, uint32_t inc)
{
    if (backend_error(e, e->ops->reset_qp(e->ctx, e->qp[1], inc)))
        return -1;
    silent_reset(e, 1);
    discard_cq1(e);
    e->inc = inc;
    return 0;
}

/* The wire probe (SHIFT_EP_WIRE_PROBE, not in the spec: its reconnect is the probe): an
 * empty signaled WRITE on the reconnected default QP, whose completion probe_check reads.
 * A post the backend refuses leaves the send side in Fallback: the next progress finds
 * the QP ready to send and waits for the fence without a probe. */
static void start_probe(ep_s *e)
{
    struct shift_send_wr probe = {.wr_id = PROBE_ID, .opcode = SHIFT_WR_RDMA_WRITE,
                                  .send_flags = SHIFT_SEND_SIGNALED};
    if (backend_error(e, e->ops->post_send(e->ctx, e->qp[1], &probe, NULL)))
        return;
    e->probing = 1;
    e->probe_status = -1;
}

/* spec: Reconnect(h, D). This endpoint's default NIC is up again (a reset on a dead one
 * fails). Not in the spec: after a failed wire probe it tries again only once the
 * application posts again or its default NIC's port is ACTIVE again (shift_async_event):
 * a path that stays down costs a probe per burst of traffic or port event, not a loop
 * (the spec's fail-back, without the probe, needs a new fence each time). If its
 * default QP is ready to send, the peer reset the pair since this endpoint
 * left it (it answered the peer's request): wait for the fence. Else it resets its own QP
 * into the next incarnation and asks the peer, on the backup path, to reset its end into
 * it; the answer (take_reconnected) ends the wait, the handshake timer asks again. A reset
 * waits until the receive WRs are off the default QP (the send side's are: Fallback).
 * A backend call that fails here (counted) leaves the send side in Fallback on the backup
 * path, which serves the application: the next progress tries again. */
static int reconnect(ep_s *e)
{
    int state;
    uint32_t rq_psn, sq_psn;
    if (e->reconnecting ||
        backend_error(e, e->ops->query_qp(e->ctx, e->qp[1], &state, &rq_psn, &sq_psn)))
        return SHIFT_STEP_NONE;
    if (state == SHIFT_QPS_RTS) {
        /* with the wire probe, a pair the peer reset is probed too: the peer's own probe
         * may have failed since, leaving its end in ERR where this one cannot see it */
        if (e->attr.flags & SHIFT_EP_WIRE_PROBE)
            start_probe(e);
        else
            e->send_mode = SHIFT_STATE_WAIT_SIGNALED;
        return SHIFT_STEP_RECONNECT;
    }
    if (e->recv_mode == SHIFT_RECV_DEFAULT || e->probe_failed || reset_default(e, e->inc + 1))
        return SHIFT_STEP_NONE;
    e->reconnecting = e->inc;
    e->reconnect_left = e->attr.ctl_retries;
    send_reconnect(e, CTL_RECONNECT, e->inc);
    return SHIFT_STEP_RECONNECT;
}

/* spec: ReconnectDone(h, inc). The peer's end of the default path is in incarnation inc:
 * if that is the reconnect this endpoint awaits, the send side waits for the fence (after
 * the wire probe, with it). */
static void reconnect_done(ep_s *e, uint32_t inc)
{
    if (!e->reconnecting || inc != e->reconnecting)
        return;
    e->reconnecting = 0;
    if (e->send_mode != SHIFT_STATE_FALLBACK)
        return;
    if (e->attr.flags & SHIFT_EP_WIRE_PROBE)
        start_probe(e);
    else
        e->send_mode = SHIFT_STATE_WAIT_SIGNALED;
}

/* spec: TakeReconnect, a request. For a later incarnation: reset the default QP into it and
 * answer, unless this endpoint uses the QP (holds1: a reset would lose WRs) or the backend
 * refuses (then the request is dropped: the peer asks again); a reconnect this endpoint
 * awaited itself is superseded. For its own incarnation (a resend whose answer was lost,
 * or both asked at once): answer again, and take it as the answer if this endpoint awaits
 * one for that incarnation itself. */
static void take_reconnect(ep_s *e, uint32_t inc)
{
    if (inc > e->inc && !holds1(e) && reset_default(e, inc) == 0) {
        e->reconnecting = 0;
        send_reconnect(e, CTL_RECONNECTED, inc);
    } else if (inc == e->inc) {
        send_reconnect(e, CTL_RECONNECTED, inc);
        reconnect_done(e, inc);
    }
}

/* The wire probe's answer. While this endpoint's receive WRs are off the default QP,
 * nothing but the probe completes there and this step reads the CQ itself; otherwise
 * the application's poll reads it and notes the probe's status (poll_step). */
static int probe_check(ep_s *e)
{
    struct shift_wc wc;
    int r = 0;
    while (e->probe_status < 0 && e->recv_mode != SHIFT_RECV_DEFAULT &&
           (r = poll_backend(e, 1, 1, &wc)) == 1)
        if (wc.wr_id == PROBE_ID && !(wc.opcode & SHIFT_WC_RECV))
            e->probe_status = wc.status;
    backend_error(e, r < 0); /* (the next progress reads on) */
    if (e->probe_status < 0)
        return SHIFT_STEP_NONE;
    e->probing = 0;
    if (e->probe_status == SHIFT_WC_SUCCESS) {
        e->send_mode = SHIFT_STATE_WAIT_SIGNALED;
        return SHIFT_STEP_PROBE_DONE;
    }
    e->probe_failed = 1; /* (the next post tries again: reconnect) */
    return SHIFT_STEP_PROBE_FAILED;
}

static int fence_done(ep_s *e)
{
    pend_t *p = pend_at(e, e->fence_seq);
    return !p || (p->flags & PF_DONE);
}

/* spec: Release(h). The fence completed on the backup path, so every WR before it did:
 * notify the peer on the default path alone, with how many notifications came up to the
 * fence (a dead path loses the notice, as the spec's), then ring the default doorbell
 * for the WRs held behind the fence. The counter exchange is kept: only a fresh counter
 * of the peer starts the next failover. */
static void release(ep_s *e)
{
    ctl_msg m = {CTL_MAGIC, CTL_FAILBACK, 0, 0, 0, 0, (int64_t)e->fence_notes};
    /* a notice the backend refuses is lost as on a dead path (counted): the peer's
     * receive WRs stay on the backup QP, this side's next notification on the default
     * path finds none there and fails (RNR), or at rnr_retry = 7 waits until the
     * completion timer fires (F8); the failover that follows re-aligns both */
    if (!backend_error(e, e->ops->ctl_send(e->ctx, e->qp[1], &m, sizeof m)))
        e->st.ctl_sent++;
    e->send_mode = SHIFT_STATE_DEFAULT;
    e->has_fence = 0;
    e->replayed = 0;
    e->st.failbacks++;
    ep_event(e, SHIFT_EVENT_FAIL_BACK, 1, SHIFT_WC_SUCCESS, 0);
    /* a doorbell the backend refuses is a failed post on the default QP (datapath.c):
     * the held WRs never left, and a failover takes them off it */
    if (backend_error(e, e->ops->ring(e->ctx, e->qp[1])))
        trigger(e, SHIFT_WC_WR_FLUSH_ERR);
}

/* Bring the backup QP back from ERR to RTS with the PSNs it had (RESET, INIT, RTR, RTS),
 * ready for the next failover. A step the backend refuses leaves it in ERR: the next
 * failover finds the backup path dead, as if it had failed. */
static void backup_qp_back(ep_s *e, uint32_t rq_psn, uint32_t sq_psn)
{
    static const int steps[] = {SHIFT_QPS_RESET, SHIFT_QPS_INIT, SHIFT_QPS_RTR, SHIFT_QPS_RTS};
    for (int i = 0; i < 4; i++) {
        uint32_t rq = steps[i] == SHIFT_QPS_RTR ? rq_psn : 0;
        uint32_t sq = steps[i] == SHIFT_QPS_RTS ? sq_psn : 0;
        if (backend_error(e, e->ops->modify_qp(e->ctx, e->qp[2], steps[i], rq, sq)))
            return;
    }
    silent_reset(e, 2);
}

/* Does the send side have WRs on the QP `where` names (W_DEFAULT, W_BACKUP) that no
 * polled completion covers? A move of the backup QP to ERR would flush those there; one
 * on the default QP is what the completion timer waits for. */
static int sends_on(const ep_s *e, int where)
{
    if (where == W_BACKUP && e->resent_inflight)
        return 1; /* (ShiftCounted's kept copies: kept.c) */
    for (uint64_t s = e->phead; s < e->ptail; s++) {
        const pend_t *p = &e->pq[s & e->pmask];
        if (!(p->flags & PF_DONE) && p->where == where)
            return 1;
    }
    return 0;
}

/* Does a send WR of this endpoint wait on the default QP? In direct mode the QP's send
 * queue holds them (an unreadable one: none known). */
static int waits_on_default(ep_s *e)
{
    uint64_t out = 0, notes;
    if (!e->direct)
        return sends_on(e, W_DEFAULT);
    return !backend_error(e, direct_count(e, &out, &notes)) && out > 0;
}

/* The receive WR a completion polled off the backup CQ is for, if it is a receive
 * completion of one still outstanding on the backup QP; NULL for a send's completion or a
 * stale receive's (its WR moved back, or done). */
static rpend_t *backup_recv(ep_s *e, const struct shift_wc *wc)
{
    rpend_t *r = (wc->opcode & SHIFT_WC_RECV) ? rpend_at(e, wc->wr_id) : NULL;
    return r && !(r->flags & PF_DONE) && r->where == W_BACKUP ? r : NULL;
}

/* Take the receive WRs a fail-back notice moved to the default QP off the backup QP's
 * receive queue (spec: rq[h][2] = << >>). Verbs cannot unpost a receive: the backup QP
 * goes to ERR, the stale receives' flushes are dropped (their WRs are on the default QP
 * now, or done), and the QP is brought back to RTS with the PSNs it had. Anything else
 * the backup CQ holds stays, in order, at its head (q2) for the application. A send of
 * this endpoint still on the backup QP is flushed with them: the callers wait until
 * there is none, but the next Handshake cannot (its receives must go there). 0, or 1
 * if the backend refused the move to ERR (the receives stay: stale_rq2 is kept). */
static int clear_rq2(ep_s *e)
{
    int st = -1;
    uint32_t rq_psn = 0, sq_psn = 0;
    if (backend_error(e, e->ops->query_qp(e->ctx, e->qp[2], &st, &rq_psn, &sq_psn)))
        st = -1; /* unknown: not brought back below */
    q2_absorb(e);
    if (backend_error(e, e->ops->modify_qp(e->ctx, e->qp[2], SHIFT_QPS_ERR, 0, 0)))
        return 1;
    struct shift_wc wc;
    int n;
    while ((n = poll_backend(e, 2, 1, &wc)) == 1) {
        if ((wc.opcode & SHIFT_WC_RECV) && !backup_recv(e, &wc))
            continue; /* a stale receive's flush */
        q2_push(e, &wc);
    }
    /* (a failed poll leaves some in the backend's CQ: the application's poll takes the
     * sends' in order after q2, and drops the stale receives' flushes) */
    backend_error(e, n < 0);
    e->stale_rq2 = 0;
    if (st == SHIFT_QPS_RTS)
        backup_qp_back(e, rq_psn, sq_psn);
    return 0;
}

/* The fail-back's stale receives go once the send side has nothing left on the backup
 * QP (after a poll of its completions there, or at a Trigger). */
void stale_rq2_check(ep_s *e)
{
    if (e->stale_rq2 && !sends_on(e, W_BACKUP))
        clear_rq2(e);
}

/* spec: MoveBack, part 1: the backup CQ's receive
 * completions leave it - its good prefix of them (in receive order) for the
 * application, counted in recvDone, the rest dropped - while its send completions stay
 * there, in order (q2: the layer cannot take one kind of completion off a CQ alone). */
static void split_backup_cq(ep_s *e)
{
    q2_absorb(e);
    uint64_t n = e->q2tail - e->q2head, k = 0;
    int good = 1;
    for (uint64_t i = 0; i < n; i++) {
        struct shift_wc wc = e->q2[(e->q2head + i) & e->q2mask];
        if (!(wc.opcode & SHIFT_WC_RECV)) {
            e->q2[(e->q2head + k++) & e->q2mask] = wc;
            continue;
        }
        rpend_t *r = backup_recv(e, &wc);
        if (!r)
            continue; /* stale: from before a move */
        good = good && wc.status == SHIFT_WC_SUCCESS;
        if (!good)
            continue; /* dropped: the WR is reposted below */
        wc.wr_id = r->app_id;
        buf_push(e, &wc);
        r->flags |= PF_DONE;
        e->recv_done++;
    }
    e->q2tail = e->q2head + k;
    rpend_gc(e);
}

/* How many good receive completions of the notifications on the backup path its CQ
 * holds, in receive order (spec: Len(GoodPrefix(SelectSeq(cq[h][2], IsRecv)))). */
static uint64_t backup_good_recvs(ep_s *e)
{
    q2_absorb(e);
    uint64_t k = 0;
    for (uint64_t i = e->q2head; i != e->q2tail; i++) {
        const struct shift_wc *wc = &e->q2[i & e->q2mask];
        if (!backup_recv(e, wc))
            continue; /* a send's, or a stale receive's */
        if (wc->status != SHIFT_WC_SUCCESS)
            break;
        k++;
    }
    return k;
}

/* spec: MoveBack(h) - the receive side moves its receive WRs back to the default QP.
 * The backup CQ's good receive completions go to the application (split_backup_cq), the
 * receive WRs it is still owed are posted on the default QP in order, and the backup
 * QP's receive queue is emptied (clear_rq2). The spec leaves the host's own sends on
 * the backup QP alone (two-way traffic: they may be in flight there), so the move to
 * ERR that empties the receive queue waits until none is left (stale_rq2): until then
 * the stale receives stay posted, harmlessly - the peer sends on the backup path again
 * only after a new failover's Handshake of this host, which takes them off first. A
 * receive side that waited (failback_at) moves only onto a default QP still ready to
 * send; else it stays on the backup path. */
void move_back(ep_s *e)
{
    int waited = e->failback_at != 0, st = -1;
    uint32_t rq_psn, sq_psn;
    e->failback_at = 0;
    if (waited && backend_error(e, e->ops->query_qp(e->ctx, e->qp[1], &st, &rq_psn, &sq_psn)))
        return;
    if (waited && st != SHIFT_QPS_RTS)
        return;
    split_backup_cq(e);
    for (uint64_t s = e->rhead; s < e->rtail; s++) {
        rpend_t *r = &e->rpend[s & e->rmask];
        if (r->flags & PF_DONE)
            continue;
        if (post_rpend(e, r, 1) != 0) {
            buf_recv(e, r->app_id, SHIFT_WC_WR_FLUSH_ERR);
            r->flags |= PF_DONE;
            continue;
        }
        r->where = W_DEFAULT;
    }
    rpend_gc(e);
    /* (a move to ERR the backend refuses leaves the stale receives: stale_rq2) */
    e->stale_rq2 = sends_on(e, W_BACKUP) || clear_rq2(e);
    e->recv_mode = SHIFT_RECV_DEFAULT;
    ep_event(e, SHIFT_EVENT_RECV_FAIL_BACK, 1, SHIFT_WC_SUCCESS, 0);
}

/* spec: DeliverControl, the fail-back notice: the peer posted `notes` notifications up
 * to its fence, all executed here. If the receive counter and the backup CQ's good
 * receive completions make them up, the receive side moves back at once; else the
 * completions of some are not yet in host memory (an ACK promises no placement: F11)
 * and it waits for them, taking them as they come (take_recv). A drain would not do: it
 * moves the backup QP to ERR, which this host's own sends there do not survive. */
static void take_failback(ep_s *e, uint64_t notes)
{
    if (e->recv_done + backup_good_recvs(e) >= notes)
        move_back(e);
    else
        e->failback_at = notes;
}

/* spec: DeliverControl, a counter. A new one (seq > peerSeq): the answer this endpoint
 * awaited (asked; used up at once unless its send side is to replay), or the peer
 * starting a failover, which it must answer (fresh, and its counter is to be sent again:
 * the Handshake, after the Trigger if a side is still on the default path). A duplicate
 * (seq = peerSeq: the peer's HandshakeTimeout resent it): if it asks and this endpoint
 * has sent its counter, it resends its latest one [ctrVal, ctrSeq, asked]; nothing else
 * changes. An older one is stale (ctl_valid rejects it; the spec ignores it). */
static void take_counter(ep_s *e, const ctl_msg *m)
{
    if (m->seq == e->peer_seq) { /* (an older one is stale: ctl_valid) */
        if (m->want_reply && e->sent_ctr)
            send_counter(e, e->asked);
        return;
    }
    e->peer_seq = m->seq;
    e->peer_ctr = m->count;
    e->failback_at = 0; /* the peer fails over again: the fail-back it announced is over */
    kept_trim(e, m->count); /* (ShiftCounted: the notifications it covers are counted) */
    e->fresh = !e->asked || (e->send_mode == SHIFT_STATE_FALLBACK && !e->replayed);
    if (!e->asked)
        e->sent_ctr = 0;
    e->asked = 0;
}

/* spec: Progress(h, D) - one step of the layer's background work; at most one of the
 * spec's steps is enabled at a time, so the order of the tests is immaterial there. */
int shift_progress(shift_ep h)
{
    ep_s *e = ep_get(h);
    if (!e)
        return -EINVAL;
    shift_ctl_poll(h); /* (a backend failure is counted; the messages wait) */
    int st = setup_step(e); /* (the two-phase set-up's: nothing once it is done) */
    if (st)
        return st;
    if (!failover(e) || e->dead)
        return SHIFT_STEP_NONE;
    if (on_path1(e) && e->fresh && !e->sent_ctr) {
        /* woken by the peer's counter (a refusal fails the first WR as flushed) */
        start_failover(e, SHIFT_WC_WR_FLUSH_ERR, SHIFT_WC_SUCCESS);
        return SHIFT_STEP_TRIGGER;
    }
    if (!e->sent_ctr && !on_path1(e)) {
        handshake(e);
        return SHIFT_STEP_HANDSHAKE;
    }
    if (e->send_mode == SHIFT_STATE_FALLBACK && e->sent_ctr && e->fresh && !e->replayed) {
        replay(e);
        return SHIFT_STEP_REPLAY;
    }
    if (fails_back(e) && e->send_mode == SHIFT_STATE_FALLBACK && e->replayed && e->sent_ctr &&
        !e->fresh)
        return e->probing ? probe_check(e) : reconnect(e);
    if (e->send_mode == SHIFT_STATE_WAIT_DRAINED && fence_done(e) && !e->fresh) {
        release(e);
        return SHIFT_STEP_RELEASE;
    }
    return SHIFT_STEP_NONE;
}

/* spec: CompletionTimeout(h) - the layer's completion timer (path 1) fired: a WR on the
 * default path waited for ever for its completion (RNR NAKs retried for ever: after a
 * lost fail-back notice the peer's receive WRs are on the backup QP, F8). Whether the
 * wait is for ever is the caller's judgement, as a timer's length is; the endpoint takes
 * it as a failure of the default path, from Default with a WR outstanding there. */
static int completion_timeout(ep_s *e)
{
    if (!failover(e) || e->dead || e->send_mode != SHIFT_STATE_DEFAULT ||
        !waits_on_default(e))
        return 0;
    trigger(e, SHIFT_WC_RETRY_EXC_ERR);
    return 1;
}

/* spec: HandshakeTimeout(h) - the layer's handshake timer (path 2) fired: an endpoint
 * that awaits the peer's answer to its counter (asked, its counter sent) resends its
 * latest counter, asking; one that awaits the answer to its request to reconnect resends
 * the request. Not in the spec: a counter is resent ctl_retries times, then the layer
 * gives up (give_up: without the peer's counter no replay can be right); a request to
 * reconnect too, then the endpoint stops asking but stays on the backup path, which
 * serves (the peer's default NIC may be dead for good): the peer's own request once its
 * NIC is back ends the wait (take_reconnect). And the timer may fire whenever it awaits an
 * answer (the spec's only on a quiet, live backup path: a resend at a dead NIC or QP is
 * lost, as any send there). */
int shift_timer(shift_ep h, int path)
{
    ep_s *e = ep_get(h);
    if (!e)
        return -EINVAL;
    if (path != 1 && path != 2)
        return -EINVAL;
    if (path == 1)
        return completion_timeout(e);
    int counter = e->asked && e->sent_ctr;
    int asking = e->reconnecting && e->reconnect_left > 0;
    if (!failover(e) || e->dead || (!counter && !asking))
        return setup_timer(e); /* (the two-phase set-up's resend, if it waits) */
    if (asking) {
        e->reconnect_left--;
        send_reconnect(e, CTL_RECONNECT, e->reconnecting);
    }
    if (!counter)
        return 1;
    if (e->ctl_left > 0) {
        e->ctl_left--;
        send_counter(e, 1);
    } else {
        give_up(e, SHIFT_WC_RETRY_EXC_ERR);
    }
    return 1;
}

/* A request to reconnect or its answer, as the peer's layer could send it to this
 * endpoint: incarnations start at 1. The peer asks for one past its own, which is never
 * ahead of this endpoint's (each incarnation the peer reached, this endpoint reset into,
 * or asked for itself): a request for an incarnation before this endpoint's is stale,
 * one beyond the next is out of range. An answer names an incarnation this endpoint
 * reset into (the one it awaits, or a stale one). */
static int reconnect_valid(const ep_s *e, const ctl_msg *m)
{
    if (m->seq == 0)
        return 0;
    if (m->kind == CTL_RECONNECT)
        return m->seq >= e->inc && m->seq <= e->inc + 1;
    return m->seq <= e->inc;
}

/* Is m a control message the peer's layer could have sent on path, to this endpoint as
 * it is? The rule of shift.h: a counter travels on the backup path (send_counter), a
 * fail-back notice on the default path (release), each with the fields the sender sets
 * and nothing else; a counter is numbered from 1, never older than the last one taken
 * (FIFO channel: a retransmission repeats the last number, and the value with it), and
 * the peer's receive counter only grows. For Shift and ShiftPrefix, whose replay skips
 * what it counts, it cannot exceed the notifications this endpoint posted: the peer
 * received no more than were posted (NaiveReplay's replay may deliver one twice). */
static int ctl_valid(const ep_s *e, int path, const ctl_msg *m)
{
    if (m->magic != CTL_MAGIC ||
        (m->kind != CTL_COUNTER && m->kind != CTL_FAILBACK && m->kind != CTL_APP_ERROR &&
         m->kind != CTL_RECONNECT && m->kind != CTL_RECONNECTED))
        return 0;
    if (m->want_reply > 1 || m->pad != 0 || m->pad2 != 0)
        return 0;
    if (m->kind == CTL_RECONNECT || m->kind == CTL_RECONNECTED)
        return path == 2 && m->want_reply == 0 && m->count == 0 && reconnect_valid(e, m);
    if (m->kind != CTL_COUNTER) /* a fail-back notice on the default path (a count), the
                                 * word of an application's error on the backup path */
        return path == (m->kind == CTL_FAILBACK ? 1 : 2) && m->want_reply == 0 &&
               m->seq == 0 && (m->kind == CTL_FAILBACK
                               /* the notifications up to the peer's fence: each took a
                                * receive WR of this endpoint's */
                               ? m->count >= 0 && (uint64_t)m->count <= e->st.recvs_posted
                               : m->count == 0);
    if (path != 2 || m->seq == 0 || m->seq < e->peer_seq)
        return 0; /* stale: the peer numbered a later counter already */
    if (m->seq == e->peer_seq)
        return m->count == e->peer_ctr; /* a retransmission (peer_ctr >= 0: seq > 0) */
    /* a new receive counter: never negative, never smaller than the last, and (Shift,
     * ShiftPrefix) never above the notifications posted */
    return m->count >= 0 && m->count >= e->peer_ctr &&
           (!is_shift(e) || (uint64_t)m->count <= e->notes_posted);
}

/* spec: DeliverControl(p, d), for each message the backend holds: control messages
 * arrive as packets the layer polls (ctl_recv), as completions are */
int shift_ctl_poll(shift_ep h)
{
    ep_s *e = ep_get(h);
    if (!e)
        return -EINVAL;
    if (!e->ops->ctl_recv)
        return 0;
    int n = 0;
    for (int p = 1; p <= 2; p++) {
        uint8_t buf[CTL_RECV_MAX];
        int r;
        while ((r = e->ops->ctl_recv(e->ctx, e->qp[p], buf, sizeof buf)) > 0) {
            shift_ctl_input(h, p, buf, (uint32_t)r); /* (counted there: taken or not) */
            n++;
        }
        if (backend_error(e, r < 0))
            return r;
    }
    return n;
}

/* spec: DeliverControl(p, d) - the backend hands over a control message that arrived
 * on path (simnic: only at a live NIC whose QP is ready, the spec's `alive`). What is
 * not a message of the peer's layer (ctl_valid) is counted (ctl_rejected) and changes
 * nothing else. */
int shift_ctl_input(shift_ep h, int path, const void *msg, uint32_t len)
{
    ep_s *e = ep_get(h);
    if (!e)
        return -EINVAL;
    ctl_msg m;
    if ((path == 1 || path == 2) && is_setup_msg(msg, len))
        return setup_input(e, path, msg, len); /* (the two-phase set-up's: setup.c) */
    if ((path != 1 && path != 2) || !msg || len != sizeof m) {
        e->st.ctl_rejected++;
        return -EINVAL;
    }
    memcpy(&m, msg, sizeof m);
    if (!ctl_valid(e, path, &m)) {
        e->st.ctl_rejected++;
        return -EINVAL;
    }
    e->st.ctl_received++;
    if (!failover(e))
        return 0;
    if (e->dead) { /* spec: AppOwned(h) takes nothing; OwnAppError(h) answers a counter */
        if (m.kind == CTL_COUNTER && e->app_err)
            tell_app_error(e);
        return 0;
    }
    if (m.kind == CTL_APP_ERROR) {
        take_app_error(e);
        return 0;
    }
    if (m.kind == CTL_RECONNECT || m.kind == CTL_RECONNECTED) {
        if (m.kind == CTL_RECONNECT)
            take_reconnect(e, m.seq);
        else
            reconnect_done(e, m.seq);
        return 0;
    }
    if (m.kind == CTL_FAILBACK) {
        if (e->recv_mode == SHIFT_RECV_FALLBACK)
            take_failback(e, (uint64_t)m.count);
        return 0;
    }
    take_counter(e, &m);
    return 0;
}
