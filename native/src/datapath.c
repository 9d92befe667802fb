/*
 * datapath.c - the application's data path through the layer: posting sends (direct,
 * copied, or by the send side's state outside Default) and receives (by the receive
 * side's state), and polling completions of both sides (spec: PostSend, PostRecv,
 * PollCq). A failed post or a path error completion on the default QP starts the
 * failover (failover.c's trigger). Every endpoint is requester and responder on the
 * same QPs: its application posts sends and receives, and its polls return both kinds
 * of completions, as the spec's host does.
 */
#include "layer.h"

#include <errno.h>
#include <string.h>

/* errors a post returns for a bad WR or a full queue: the application's, not a path's */
static int app_error(int err) { return err == EINVAL || err == ENOMEM; }

/* ------------------------------------------------------------ posting API --- */

/* The failure-free path (state Default): copy the application's chain into the
 * pending ring, chained, and hand it to the backend in one call; the backend checks
 * the WRs as a NIC driver does, and only what it accepted is committed. */
COLD_PATH static int post_fast(ep_s *e, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    const unsigned rare = SHIFT_SEND_NO_DOORBELL | SHIFT_SEND_INLINE | SHIFT_SEND_INELIGIBLE;
    const size_t body = sizeof *wr - offsetof(struct shift_send_wr, sg);
    uint64_t start = e->ptail, seq = start;
    uint64_t room = e->pcap - ((e->ptail - e->phead) + (e->btail - e->bhead));
    uint64_t notes = e->notes_posted;
    uint64_t idx = start & e->pmask, to_end = e->pmask + 1 - idx;
    pend_t *ring = e->pq, *p = &ring[idx], *first = p;
    /* one bound per contiguous run of the ring: its end, or the room left */
    pend_t *stop = p + (room < to_end ? room : to_end);
    struct shift_send_wr *w = wr;
    int err = 0;
    while (w) {
        if (p == stop) {
            if (seq - start == room) {
                err = ENOMEM;
                break;
            }
            p[-1].wr.next = &ring->wr; /* the chain wraps with the ring */
            p = ring;
            stop = ring + (room - (seq - start));
        }
        struct shift_send_wr *next = w->next;
        uint64_t id = w->wr_id;
        unsigned fl = w->send_flags;
        int op = w->opcode;
        memcpy(&p->wr.sg, &w->sg, body);
        p->wr.wr_id = seq;
        p->wr.next = &p[1].wr; /* the last one is cut below */
        p->app_id = id;
        p->wf = W_DEFAULT; /* where = Default, flags = 0 */
        if (fl & rare) {
            if ((fl & SHIFT_SEND_NO_DOORBELL) ||
                ((fl & SHIFT_SEND_INLINE) && shift_send_wr_check(w, SHIFT_MAX_INLINE))) {
                err = EINVAL;
                break;
            }
            if (fl & SHIFT_SEND_INELIGIBLE) {
                p->wr.send_flags &= ~(unsigned)SHIFT_SEND_INELIGIBLE;
                p->flags = PF_INELIGIBLE;
            }
            if ((fl & SHIFT_SEND_INLINE) && w->num_sge && w->sg.length) {
                memcpy(p->inl, (const void *)(uintptr_t)w->sg.addr, w->sg.length);
                p->wr.sg.addr = (uint64_t)(uintptr_t)p->inl;
            }
        }
        notes += notifies[op & 7]; /* an unknown opcode is the backend's to refuse */
        p->cum = notes;
        p++;
        seq++;
        w = next;
    }
    if (seq != start)
        ring[(seq - 1) & e->pmask].wr.next = NULL;
    uint64_t n = seq - start, ok = n;
    int berr = 0;
    if (n) {
        struct shift_send_wr *bw = NULL;
        if (e->silent[1] && silent_now(e, 1)) {
            /* the default NIC died in fatal error: the layer flushes them (silent.c) */
            for (uint64_t s2 = start; s2 < seq; s2++)
                silent_send(e, 1, &e->pq[s2 & e->pmask], NULL);
        } else {
            berr = e->ops->post_send(e->ctx, e->qp[1], &first->wr, &bw);
        }
        if (berr) {
            /* which pending entry the backend stopped at */
            ok = 0;
            for (uint64_t s2 = start; s2 < seq; s2++, ok++)
                if (&e->pq[s2 & e->pmask].wr == bw)
                    break;
            if (!app_error(berr) && failover(e))
                ok = n; /* the path failed: keep them all, held for the replay */
        }
        /* (the chain's next pointers stay: post_pend resets them before any re-post) */
        uint64_t cum = ok ? e->pq[(start + ok - 1) & e->pmask].cum : e->notes_posted;
        e->st.sends_posted += cum - e->notes_posted;
        e->notes_posted = cum;
        e->ptail = start + ok;
    }
    if (berr && !app_error(berr) && failover(e)) {
        for (uint64_t s2 = start; s2 < start + ok; s2++)
            e->pq[s2 & e->pmask].where = W_HELD;
        trigger(e, SHIFT_WC_WR_FLUSH_ERR);
        berr = 0;
        if (!err && bad)
            *bad = NULL;
    }
    if (berr || err) {
        /* report the application's WR at which the post stopped */
        struct shift_send_wr *a = wr;
        for (uint64_t i = 0; i < ok && a; i++)
            a = a->next;
        if (bad)
            *bad = a;
        return berr ? berr : err;
    }
    if (bad)
        *bad = NULL;
    return 0;
}

static int post_slow(ep_s *e, struct shift_send_wr *wr, struct shift_send_wr **bad);

/* post_direct's failed post: the backend stopped at bw with err (an acyclic chain of
 * at most a queue's worth, so bw tells how many it took). */
COLD_PATH static int post_direct_rest(ep_s *e, struct shift_send_wr *wr, int err,
                                      struct shift_send_wr *bw, struct shift_send_wr **bad)
{
    uint64_t notes = 0;
    for (struct shift_send_wr *w = wr; w && w != bw; w = w->next)
        notes += (uint64_t)two_sided(w->opcode);
    e->notes_posted += notes;
    e->st.sends_posted += notes;
    if (!app_error(err) && failover(e) && e->send_mode == SHIFT_STATE_DEFAULT) {
        /* the path failed under the post: what it took is replayed, the rest was never
         * posted and goes as a post in the new state */
        trigger(e, SHIFT_WC_WR_FLUSH_ERR);
        if (bw)
            return post_slow(e, bw, bad);
        err = 0;
    }
    if (bad)
        *bad = err ? bw : NULL;
    return err;
}

/* post_direct's rare chains: longer than the queue (or cyclic), or carrying the layer's
 * doorbell flag. One WR at a time, each from a copy cut from the chain, at most a
 * queue's worth: the count of what the backend took stays exact and a cycle ends in
 * ENOMEM, as a full send queue does. */
COLD_PATH static int post_direct_each(ep_s *e, struct shift_send_wr *wr,
                                      struct shift_send_wr **bad)
{
    struct shift_send_wr *w = wr;
    int err = 0;
    for (uint32_t n = 0; w; w = w->next, n++) {
        if (n == e->pcap) {
            err = ENOMEM;
            break;
        }
        if (w->send_flags & SHIFT_SEND_NO_DOORBELL) {
            err = EINVAL;
            break;
        }
        struct shift_send_wr one = *w;
        one.next = NULL;
        err = e->ops->post_send(e->ctx, e->qp[1], &one, NULL);
        if (err)
            break;
        if (e->silent[1])
            silent_send(e, 1, NULL, w); /* its NIC died in fatal error (silent.c) */
        e->notes_posted += (uint64_t)two_sided(w->opcode);
        e->st.sends_posted += (uint64_t)two_sided(w->opcode);
    }
    if (err && !app_error(err) && failover(e) && e->send_mode == SHIFT_STATE_DEFAULT) {
        trigger(e, SHIFT_WC_WR_FLUSH_ERR);
        return post_slow(e, w, bad);
    }
    if (bad)
        *bad = err ? w : NULL;
    return err;
}

/* The failure-free path with a backend that keeps its send queue (direct mode): the
 * application's chain goes to the default QP as it is; the layer only counts its
 * notifications. The backend checks the WRs and the capacity (max_send_wr slots). */
static int post_direct(ep_s *e, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    uint64_t notes = 0;
    unsigned flags = 0;
    uint32_t n = 0;
    const struct shift_send_wr *w = wr;
    for (; w && n <= e->pcap; w = w->next, n++) {
        flags |= w->send_flags;
        notes += notifies[w->opcode & 7]; /* an unknown opcode is the backend's to refuse */
    }
    if (w || (flags & SHIFT_SEND_NO_DOORBELL))
        return post_direct_each(e, wr, bad);
    struct shift_send_wr *bw = NULL;
    int err = e->ops->post_send(e->ctx, e->qp[1], wr, &bw);
    if (err)
        return post_direct_rest(e, wr, err, bw, bad);
    e->notes_posted += notes;
    e->st.sends_posted += notes;
    if (bad)
        *bad = NULL;
    return 0;
}

/* spec: PostSend(h), on either endpoint. Direct mode stays correct with receives on
 * the same QP: the default QP's send queue holds only sends, the receive WRs are the
 * layer's (rpend) either way, and a failure drains both kinds before it reads the send
 * queue back (trigger). */
int shift_post_send(shift_ep h, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    ep_s *e = ep_get(h);
    if (e && wr && e->direct)
        return e->silent[1] && silent_now(e, 1) ? post_direct_each(e, wr, bad)
                                                : post_direct(e, wr, bad);
    if (bad)
        *bad = wr;
    if (!e || !wr)
        return EINVAL;
    e->probe_failed = 0; /* traffic again: a failed probe's fail-back may try again */
    if (e->send_mode == SHIFT_STATE_DEFAULT) {
        if (e->can_direct && e->phead == e->ptail && e->bhead == e->btail && !e->silent[1]) {
            e->direct = 1;
            return post_direct(e, wr, bad);
        }
        return post_fast(e, wr, bad);
    }
    return post_slow(e, wr, bad);
}

/* Posting outside the failure-free path: one WR at a time, routed by the send side:
 * the default QP; held until the replay, then the backup QP; the backup QP, the first
 * signaled WR being the fence; held on the default QP without its doorbell; or, in
 * Error, flushed at once. */
COLD_PATH static int post_slow(ep_s *e, struct shift_send_wr *wr, struct shift_send_wr **bad)
{
    for (; wr; wr = wr->next) {
        if (bad)
            *bad = wr;
        int err = shift_send_wr_check(wr, SHIFT_MAX_INLINE);
        if (err)
            return err;
        if (wr->send_flags & SHIFT_SEND_NO_DOORBELL)
            return EINVAL;
        if ((e->ptail - e->phead) + (e->btail - e->bhead) >= e->pcap)
            return ENOMEM;
        uint64_t seq = e->ptail;
        pend_t *p = &e->pq[seq & e->pmask];
        pend_fill(p, wr, seq);
        int path = 0, nodb = 0, fence = 0;
        switch (e->send_mode) {
        case SHIFT_STATE_DEFAULT:
            path = 1;
            break;
        case SHIFT_STATE_WAIT_DRAINED:
            path = 1;
            nodb = 1;
            break;
        case SHIFT_STATE_FALLBACK:
            path = e->replayed ? 2 : 0;
            break;
        case SHIFT_STATE_WAIT_SIGNALED:
            path = 2;
            fence = (wr->send_flags & SHIFT_SEND_SIGNALED) != 0;
            break;
        default:
            /* Error: flushed at once (spec: PostSend in Error), by the layer itself: the
             * dead default QP of a refusal may be live again by now, re-established by
             * the peer's fail-back. The spec appends the flush to the backup CQ, behind
             * what it holds and ahead of what comes later (the receive side's
             * completions included): so does q2. A dead endpoint (not in the spec)
             * flushes it behind every completion still to be polled (take_flushed). */
            p->where = W_FLUSHED;
            if (!e->dead)
                q2_flush(e, p);
            break;
        }
        if (e->send_mode != SHIFT_STATE_ERROR)
            p->where = (uint8_t)(path == 1 ? W_DEFAULT : path == 2 ? W_BACKUP : W_HELD);
        if (path) {
            err = post_pend(e, p, path, nodb);
            if (err && (app_error(err) || !failover(e) || path != 1 ||
                        e->send_mode != SHIFT_STATE_DEFAULT))
                return err;
        }
        /* accepted */
        e->ptail++;
        if (two_sided(wr->opcode)) {
            e->notes_posted++;
            e->st.sends_posted++;
        }
        p->cum = e->notes_posted;
        if (fence) {
            e->fence_seq = seq;
            e->fence_id = wr->wr_id;
            e->fence_notes = e->notes_posted;
            e->has_fence = 1;
            e->send_mode = SHIFT_STATE_WAIT_DRAINED;
        }
        if (err && e->send_mode == SHIFT_STATE_DEFAULT) {
            /* a failed post on the default QP: the path is gone */
            p->where = W_HELD;
            trigger(e, SHIFT_WC_WR_FLUSH_ERR);
        }
    }
    if (bad)
        *bad = NULL;
    return 0;
}

/* spec: PostRecv(h), on either endpoint, routed by the receive side: the default QP,
 * the backup QP, or held while the layer moves the receive WRs (the Handshake reposts
 * it with them); on a dead endpoint, its dead QP, which flushes it. */
int shift_post_recv(shift_ep h, struct shift_recv_wr *wr, struct shift_recv_wr **bad)
{
    ep_s *e = ep_get(h);
    if (bad)
        *bad = wr;
    if (!e || !wr)
        return EINVAL;
    for (; wr; wr = wr->next) {
        if (bad)
            *bad = wr;
        if (wr->num_sge < 0 || wr->num_sge > 1)
            return EINVAL;
        if ((e->rtail - e->rhead) + (e->btail - e->bhead) >= e->rcap)
            return ENOMEM;
        uint64_t seq = e->rtail;
        rpend_t *r = &e->rpend[seq & e->rmask];
        r->wr = *wr;
        r->wr.next = NULL;
        r->wr.wr_id = seq;
        r->app_id = wr->wr_id;
        r->flags = 0;
        int path = e->dead ? e->err_path
                   : e->recv_mode == SHIFT_RECV_DEFAULT ? 1
                   : e->recv_mode == SHIFT_RECV_FALLBACK ? 2 : 0;
        r->where = (uint8_t)(path == 1 ? W_DEFAULT : path == 2 ? W_BACKUP : W_HELD);
        if (path) {
            int err = post_rpend(e, r, path);
            if (err && e->dead && !app_error(err)) {
                buf_recv(e, r->app_id, SHIFT_WC_WR_FLUSH_ERR);
                r->flags |= PF_DONE;
            } else if (err) {
                return err;
            }
        }
        e->rtail++;
        e->st.recvs_posted++;
    }
    if (bad)
        *bad = NULL;
    return 0;
}

/* ------------------------------------------------------------ polling ------- */

/* Direct mode: a completion of the default QP that is not a success. A path error
 * triggers the failover (1: the completion is the layer's); any other error is the
 * application's and the connection dies, as on plain RC (0: it goes to the application). */
COLD_PATH static int direct_error(ep_s *e, const struct shift_wc *wc)
{
    if (!failover(e) || e->dead || e->send_mode != SHIFT_STATE_DEFAULT)
        return 0;
    if (path_error(wc->status)) {
        trigger(e, wc->status);
        return 1;
    }
    app_dies(e, 1, wc->status);
    return 0;
}

/* spec: HeldBehind. The fence failed on the backup path: the WRs the fail-back held on
 * the default QP behind it (its doorbell never rung) complete flushed behind its error,
 * in post order, unless the default QP failed meanwhile (then its own flushes report
 * them, or the layer's for a silent QP). */
static void flush_held(ep_s *e)
{
    int state;
    uint32_t rq_psn, sq_psn;
    if (e->silent[1] ||
        backend_error(e, e->ops->query_qp(e->ctx, e->qp[1], &state, &rq_psn, &sq_psn)) ||
        state != SHIFT_QPS_RTS)
        return;
    for (uint64_t s = e->phead; s < e->ptail; s++) {
        pend_t *p = &e->pq[s & e->pmask];
        if ((p->flags & PF_DONE) || p->where != W_DEFAULT)
            continue;
        q2_flush(e, p);
        p->where = W_FLUSHED;
    }
}

/* A send completion polled from path's CQ (spec: PollCq, a send CQE): 1 and *out for
 * the application, 2 if it started a failover instead, 0 if it is stale (from before a
 * reset or a drain, or the layer's own probe). */
static int take_send(ep_s *e, int path, struct shift_wc *wc, struct shift_wc *out)
{
    if (wc->wr_id == PROBE_ID) {
        if (path == 1 && e->probing && e->probe_status < 0)
            e->probe_status = wc->status; /* for probe_check (failover.c) */
        return 0;
    }
    pend_t *p = pend_at(e, wc->wr_id);
    if (!p || (p->flags & PF_DONE))
        return 0;
    int failed = wc->status != SHIFT_WC_SUCCESS;
    /* an error on the default QP starts a failover (spec: Trigger), except the flushes
     * of the WRs a send side in Error posts to its dead QP, which are the application's */
    if (failed && path == 1 && failover(e) && !e->dead && e->send_mode != SHIFT_STATE_ERROR &&
        path_error(wc->status)) {
        trigger(e, wc->status);
        return 2;
    }
    if (failed && p->wr.wr_id < e->known_exec && p->where == W_BACKUP &&
        path_error(wc->status)) {
        /* A replayed WR that precedes a notification the peer received had executed
         * before the failure: its replay failing changes nothing. It completes as the
         * success it was (silently if unsignaled), so the application never sees an
         * error after a later WR's success. */
        wc->status = SHIFT_WC_SUCCESS;
        wc->wr_id = p->app_id;
        return settle_report(e, p, wc, (p->wr.send_flags & SHIFT_SEND_SIGNALED) != 0, out);
    }
    wc->wr_id = p->app_id;
    if (!failed && path == 1 && keeps_notes(e))
        keep_upto(e, p->wr.wr_id); /* (not on the backup path: F9) */
    if (!failed && e->send_mode == SHIFT_STATE_DEFAULT && !e->ndeferred) {
        /* failure-free: every WR up to this one completed, in order */
        e->st.sends_completed += p->cum - e->cum_done;
        e->cum_done = p->cum;
        e->phead = p->wr.wr_id + 1;
        pend_gc(e);
    } else if (!failed) {
        return settle_report(e, p, wc, 1, out);
    } else {
        p->flags |= PF_DONE;
        pend_gc(e);
        /* spec: an error that reaches the application puts the send side in Error (the
         * backup path failed: there is no third path); an application's error kills the
         * connection (not in the spec) */
        if (failover(e) && !e->dead) {
            if (path_error(wc->status)) {
                if (path == 2 && e->send_mode == SHIFT_STATE_WAIT_DRAINED)
                    flush_held(e);
                if (e->send_mode != SHIFT_STATE_ERROR)
                    ep_event(e, SHIFT_EVENT_PATH_DOWN, path, wc->status, 0);
                e->send_mode = SHIFT_STATE_ERROR;
                e->err_path = path;
            } else {
                app_dies(e, path, wc->status);
            }
        }
        /* the notifications it held back executed at the peer: they follow */
        release_skipped(e);
    }
    *out = *wc;
    return 1;
}

/* A receive completion polled from path's CQ (spec: PollCq, a receive CQE): as
 * take_send. A success counts in the receive counter (recvDone). */
static int take_recv(ep_s *e, int path, struct shift_wc *wc, struct shift_wc *out)
{
    rpend_t *r = rpend_at(e, wc->wr_id);
    if (!r || (r->flags & PF_DONE) || r->where != (path == 1 ? W_DEFAULT : W_BACKUP))
        return 0;
    int failed = wc->status != SHIFT_WC_SUCCESS;
    if (failed && path == 1 && failover(e) && !e->dead && path_error(wc->status)) {
        trigger(e, wc->status);
        return 2;
    }
    wc->wr_id = r->app_id;
    r->flags |= PF_DONE;
    rpend_gc(e);
    if (!failed)
        e->recv_done++;
    else if (failover(e) && !e->dead && !path_error(wc->status))
        app_dies(e, path, wc->status); /* an application's error (a too short buffer, a bad key) */
    *out = *wc;
    if (e->failback_at && e->recv_done >= e->failback_at)
        move_back(e); /* the last notification a waiting fail-back was owed (F11) */
    return 1;
}

/* The oldest WR a dead endpoint's send side flushed at its post, as its completion: 1
 * and *out, or 0 if there is none. (A live one's flushes are in q2.) */
static int take_flushed(ep_s *e, struct shift_wc *out)
{
    if (!e->dead)
        return 0;
    for (uint64_t s = e->phead; s < e->ptail; s++) {
        pend_t *p = &e->pq[s & e->pmask];
        if ((p->flags & PF_DONE) || p->where != W_FLUSHED)
            continue;
        buf_send(e, p, SHIFT_WC_WR_FLUSH_ERR);
        p->flags |= PF_DONE;
        pend_gc(e);
        *out = e->buf[e->bhead & e->bmask];
        e->bhead++;
        return 1;
    }
    return 0;
}

/* spec: FirstFault(h) \in AppErrors, for an error wc just polled off the default CQ:
 * did the application fail the QP (a bad lkey or rkey, a too short buffer: an error
 * that is not a path's), not the path? Its status if so, else 0. The QP's first fault
 * is the first error of its CQ that is not a flush: wc's, or one behind it - a send queue completes in post
 * order, so the flushes of the WRs in flight before the failed one come first. The
 * flushes read past wc to find it are kept in q1 (*n of them, then the fault's own
 * completion), to be taken after wc in order; what is left in the CQ stays there. */
COLD_PATH static int app_fault(ep_s *e, const struct shift_wc *wc, int *n)
{
    *n = 0;
    if (wc->status != SHIFT_WC_WR_FLUSH_ERR)
        return path_error(wc->status) ? 0 : wc->status;
    /* every entry of the QP is a WR or a receive WR of the endpoint: bmask + 1 bound it */
    while ((uint64_t)*n <= e->bmask) {
        struct shift_wc *c = &e->q1[*n];
        int r = poll_backend(e, 1, 1, c);
        if (r != 1) {
            backend_error(e, r < 0);
            return 0; /* only flushes: the path's (or an unreadable CQ: treated so) */
        }
        (*n)++;
        if (c->status != SHIFT_WC_SUCCESS && c->status != SHIFT_WC_WR_FLUSH_ERR)
            return path_error(c->status) ? 0 : c->status;
    }
    return 0;
}

/* One completion polled from path's CQ, as take_send and take_recv say: 1 and *out for
 * the application, 2 if it started a failover, 0 if it is the layer's. */
COLD_PATH static int take_one(ep_s *e, int path, struct shift_wc *wc, struct shift_wc *out)
{
    int r;
    if (wc->opcode & SHIFT_WC_RECV) {
        r = take_recv(e, path, wc, out);
    } else if (e->direct && path == 1) {
        /* direct mode: the application's own wr_id, settled by the send queue */
        *out = *wc;
        r = wc->status != SHIFT_WC_SUCCESS && direct_error(e, wc) ? 2 : 1;
    } else {
        r = take_send(e, path, wc, out);
        if (path == 2)
            stale_rq2_check(e); /* the last of its sends there may have completed */
    }
    return r;
}

/* app_fault for a batch w[0..m) polled off the default CQ, w[0] an error: the first
 * fault among them, else behind them in the CQ (its status if the application's, else
 * 0). When it is the application's, the completions read past the batch follow it,
 * held for the application in order. */
COLD_PATH static int batch_app_fault(ep_s *e, const struct shift_wc *w, int m)
{
    for (int i = 0; i < m; i++)
        if (w[i].status != SHIFT_WC_SUCCESS && w[i].status != SHIFT_WC_WR_FLUSH_ERR)
            return path_error(w[i].status) ? 0 : w[i].status;
    int nq = 0, fault = app_fault(e, &w[m - 1], &nq);
    if (!fault)
        return 0; /* a path's: the failover's drain would discard what was read */
    app_dies(e, 1, fault);
    for (int i = 0; i < nq; i++) {
        struct shift_wc o;
        if (take_one(e, 1, &e->q1[i], &o) == 1)
            buf_push(e, &o);
    }
    return 1;
}

/* spec: PollCq(h). The completions the layer holds first; then the backup QP's CQ (the
 * layer's head of it, q2, first) while a side is off the default path, then the default
 * QP's while a side completes there (Polls2, Polls1: backup first); then the WRs a dead
 * endpoint's send side flushed. */
COLD_PATH static int poll_step(ep_s *e, struct shift_wc *out)
{
    if (e->bhead < e->btail) {
        *out = e->buf[e->bhead & e->bmask];
        e->bhead++;
        return 1;
    }
    for (;;) {
        struct shift_wc wc;
        int path = 0, n;
        if (polls2(e)) {
            n = poll_one(e, 2, &wc);
            if (n < 0)
                return n;
            path = n == 1 ? 2 : 0;
        }
        if (!path && polls1(e)) {
            n = poll_backend(e, 1, 1, &wc);
            if (n < 0)
                return n;
            path = n == 1 ? 1 : 0;
        }
        if (!path)
            return e->send_mode == SHIFT_STATE_ERROR ? take_flushed(e, out) : 0;
        int nq = 0, apperr = 0, fault = 0;
        if (path == 1 && wc.status != SHIFT_WC_SUCCESS && failover(e) && !e->dead &&
            (fault = app_fault(e, &wc, &nq))) {
            /* spec: AppError(h): no failover; the layer takes the default CQ's
             * completions and holds them for the application in order (the flushes
             * before the error, its own status, the flushes after): this poll is the
             * layer's step, as a trigger's is; the peer is told (TellAppError) */
            app_dies(e, 1, fault);
            apperr = 1;
        }
        int r = take_one(e, path, &wc, out);
        if (r == 0 && wc.wr_id == KEPT_ID)
            return 2; /* spec: PollCq drops a resent WR's CQE, and that is its step */
        if (apperr && r == 1) {
            buf_push(e, out);
            r = 2;
        }
        /* the flushes read past wc, and the fault's completion, follow it in order (a
         * failover's drain would have discarded them: all of them are after its error) */
        for (int i = 0; i < nq && (r != 2 || apperr); i++) {
            struct shift_wc o;
            int q = take_one(e, 1, &e->q1[i], &o);
            if (q == 1)
                buf_push(e, &o);
            else if (q == 2)
                break;
        }
        if (r)
            return r;
        if (e->bhead < e->btail) {
            *out = e->buf[e->bhead & e->bmask];
            e->bhead++;
            return 1;
        }
    }
}

/* A completion for the application names its QP, the default one, whichever QP it
 * came from or if the layer made it (0: the backend cannot tell; then the QP's own). */
static int app_poll_step(ep_s *e, struct shift_wc *out)
{
    int r = poll_step(e, out);
    if (r == 1 && e->qpn)
        out->qp_num = e->qpn;
    return r;
}

int shift_poll_step(shift_ep h, struct shift_wc *out)
{
    ep_s *e = ep_get(h);
    if (!e || !out)
        return -EINVAL;
    return app_poll_step(e, out);
}

/* poll wc[k..n) one completion at a time */
COLD_PATH static int poll_steps(ep_s *e, int k, int n, struct shift_wc *wc)
{
    while (k < n) {
        int r = app_poll_step(e, &wc[k]);
        if (r < 0)
            return k ? k : r;
        if (r == 0)
            break;
        if (r == 1)
            k++;
    }
    return k;
}

int shift_poll_cq(shift_ep h, int n, struct shift_wc *wc)
{
    ep_s *e = ep_get(h);
    if (!e || n < 0 || (n > 0 && !wc))
        return -EINVAL;
    if (!e->direct || e->bhead != e->btail || n == 0 || polls2(e) || e->rhead != e->rtail)
        return poll_steps(e, 0, n, wc);
    /* failure-free, no receive WR outstanding: the default QP's completions are the
     * sends', and go to the application as they are, its QP's number included (a
     * receive completion's wr_id is the layer's: take_recv translates it) */
    int r = poll_backend(e, 1, n, wc);
    for (int k = 0; k < r; k++) {
        if (wc[k].status == SHIFT_WC_SUCCESS)
            continue;
        int fault = failover(e) && !e->dead ? batch_app_fault(e, wc + k, r - k) : 0;
        if (fault)
            app_dies(e, 1, fault); /* spec: AppError(h): wc[k..r) are the application's */
        if (direct_error(e, &wc[k]))
            /* the failover started at wc[k]; what followed were the dead QP's flushes */
            return poll_steps(e, k, n, wc);
    }
    return r;
}
