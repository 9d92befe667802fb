/*
 * silent.c - a NIC that died in fatal error (spec: DeviceFatal, FatalEvent). Under
 * user-space verbs such a device writes no completion, not even a flush: the QPs on it
 * fall silent and the application learns of the death only from the asynchronous event
 * IBV_EVENT_DEVICE_FATAL. The layer reads the event (shift_async_event) and completes the
 * QP's WRs itself, as the kernel does for its own consumers (mlx5_ib_poll_sw_comp): the
 * CQ's own entries first, then every WR no completion covers, flushed (sends, then
 * receive WRs), then each later post's flush at once. The polls read these from fq as
 * from the CQ (poll_backend), so the failover starts from them as from any flush.
 */
#include "layer.h"

#include <errno.h>
#include <string.h>

/* Empty fq, and forget the posts it owed flushes to; 2^32 as the base lets
 * silent_take_over put flushes before its head. */
static void fq_clear(ep_s *e, int path)
{
    e->fqhead[path] = e->fqtail[path] = (uint64_t)1 << 32;
    if (path == 1)
        e->late_direct = 0; /* (direct mode is the default QP's alone) */
}

/* Append wc to path's fq (the flush of a post made after the death was read). Its
 * capacity holds every WR and receive WR the endpoint can have outstanding, twice. */
void silent_push(ep_s *e, int path, const struct shift_wc *wc)
{
    if (e->fqtail[path] - e->fqhead[path] > e->fqmask) {
        backend_error(e, 1); /* cannot happen within the layer's capacities */
        return;
    }
    e->fq[path][e->fqtail[path] & e->fqmask] = *wc;
    e->fq[path][e->fqtail[path] & e->fqmask].qp_num = e->qpn;
    e->fqtail[path]++;
}

/* path's QP was reset (a reconnect): it completes its own WRs again. The events its NIC
 * raised before are stale now: they are read and dropped. */
void silent_reset(ep_s *e, int path)
{
    int ev, r = 0;
    e->silent[path] = SILENT_NO;
    fq_clear(e, path);
    while (e->ops->async_event && (r = e->ops->async_event(e->ctx, e->qp[path], &ev)) == 1)
        ;
    backend_error(e, r < 0);
}

/* The flush of a post to a silent path, at once (spec: FlushesAtOnce): a send WR - the
 * layer's record p, or in direct mode the application's WR w - or a receive WR. A record
 * posted while the CQ still drains is marked: the take-over's flushes go before it. */
void silent_send(ep_s *e, int path, pend_t *p, const struct shift_send_wr *w)
{
    struct shift_wc wc;
    int draining = e->silent[path] == SILENT_DRAIN;
    if (p) {
        send_wc(&p->wr, p->wr.wr_id, SHIFT_WC_WR_FLUSH_ERR, &wc);
        p->flags |= draining ? PF_LATE : 0;
    } else {
        send_wc(w, w->wr_id, SHIFT_WC_WR_FLUSH_ERR, &wc);
        e->late_direct += (uint64_t)draining;
    }
    silent_push(e, path, &wc);
}

void silent_recv(ep_s *e, int path, rpend_t *r)
{
    struct shift_wc wc;
    recv_wc(r->wr.wr_id, SHIFT_WC_WR_FLUSH_ERR, &wc);
    r->flags |= e->silent[path] == SILENT_DRAIN ? PF_LATE : 0;
    silent_push(e, path, &wc);
}

/* One flush of the uncovered ones: the n-th, written to fq at base + n if write. */
static void emit(ep_s *e, int path, uint64_t base, int write, uint64_t *n,
                 const struct shift_wc *wc)
{
    if (write) {
        e->fq[path][(base + *n) & e->fqmask] = *wc;
        e->fq[path][(base + *n) & e->fqmask].qp_num = e->qpn;
    }
    (*n)++;
}

/* The flushes of the WRs of path's QP that no completion covers (written to fq from
 * base if write): their count. Called once the CQ's own entries were all polled, so a
 * WR's record says whether a completion covered it: the layer's (not done, not posted
 * after the death was read), or in direct mode the send queue's (not covered by a
 * polled success; the late_direct posts at its end excluded). */
static uint64_t uncovered(ep_s *e, int path, uint64_t base, int write)
{
    uint64_t n = 0;
    int where = path == 1 ? W_DEFAULT : W_BACKUP;
    struct shift_wc wc;
    if (path == 1 && e->direct) {
        struct shift_send_wr w;
        uint32_t total = 0;
        while (total < e->pcap && e->ops->sq_pending(e->ctx, e->qp[1], total, &w) >= 0)
            total++;
        for (uint32_t i = 0; i + e->late_direct < total; i++) {
            if (e->ops->sq_pending(e->ctx, e->qp[1], i, &w) != 0)
                continue; /* (1: a polled error completion covers it) */
            send_wc(&w, w.wr_id, SHIFT_WC_WR_FLUSH_ERR, &wc);
            emit(e, path, base, write, &n, &wc);
        }
    } else {
        /* ShiftCounted's kept copies in flight (posted first; their flushes are dropped) */
        for (uint64_t s = e->khead; path == 2 && s < e->ktail; s++) {
            const kept_t *k = &e->kq[s & e->pmask];
            send_wc(&k->rec.wr, k->rec.wr.wr_id, SHIFT_WC_WR_FLUSH_ERR, &wc);
            for (uint32_t c = 0; c < k->inflight; c++)
                emit(e, path, base, write, &n, &wc);
        }
        for (uint64_t s = e->phead; s < e->ptail; s++) {
            pend_t *p = &e->pq[s & e->pmask];
            if (p->where != where || (p->flags & (PF_DONE | PF_LATE)))
                continue;
            send_wc(&p->wr, p->wr.wr_id, SHIFT_WC_WR_FLUSH_ERR, &wc);
            emit(e, path, base, write, &n, &wc);
        }
    }
    for (uint64_t s = e->rhead; s < e->rtail; s++) {
        rpend_t *r = &e->rpend[s & e->rmask];
        if (r->where != where || (r->flags & (PF_DONE | PF_LATE)))
            continue;
        recv_wc(r->wr.wr_id, SHIFT_WC_WR_FLUSH_ERR, &wc);
        emit(e, path, base, write, &n, &wc);
    }
    return n;
}

/* path's records posted while its CQ drained are like any now: their flushes are in fq.
 * (The other path's, if it drains too, keep their mark.) */
static void clear_late(ep_s *e, int path)
{
    int where = path == 1 ? W_DEFAULT : W_BACKUP;
    for (uint64_t s = e->phead; s < e->ptail; s++)
        if (e->pq[s & e->pmask].where == where)
            e->pq[s & e->pmask].flags &= (uint8_t)~PF_LATE;
    for (uint64_t s = e->rhead; s < e->rtail; s++)
        if (e->rpend[s & e->rmask].where == where)
            e->rpend[s & e->rmask].flags &= (uint8_t)~PF_LATE;
    if (path == 1)
        e->late_direct = 0;
}

/* The CQ's own entries are all polled: the flushes of the WRs no completion covers go
 * to fq's head, before those of the posts made since the death was read. */
static void silent_take_over(ep_s *e, int path)
{
    uint64_t n = uncovered(e, path, 0, 0);
    if (n + (e->fqtail[path] - e->fqhead[path]) > e->fqmask + 1) {
        backend_error(e, 1); /* cannot happen within the layer's capacities */
        return;
    }
    e->fqhead[path] -= n;
    uncovered(e, path, e->fqhead[path], 1);
    clear_late(e, path);
    e->silent[path] = SILENT_ACTIVE;
}

/* Is path silent still? Its QP speaks again once reset - by this endpoint's reconnect,
 * or by the connection manager for the peer's (its QP ready to send again). */
int silent_now(ep_s *e, int path)
{
    int state = SHIFT_QPS_ERR;
    uint32_t rq, sq;
    if (e->silent[path] &&
        !backend_error(e, e->ops->query_qp(e->ctx, e->qp[path], &state, &rq, &sq)) &&
        state != SHIFT_QPS_ERR)
        silent_reset(e, path);
    return e->silent[path];
}

/* The send completions path's fq still owes the application. Once the layer has taken
 * a silent QP over, these are its outstanding sends: its send queue keeps the WRs (no
 * completion of the device's will cover them), but each one's flush was owed once. */
uint64_t silent_sends_owed(const ep_s *e, int path)
{
    uint64_t n = 0;
    for (uint64_t s = e->fqhead[path]; s < e->fqtail[path]; s++)
        n += !(e->fq[path][s & e->fqmask].opcode & SHIFT_WC_RECV);
    return n;
}

/* poll_backend on a silent path whose CQ has nothing more: up to n of fq's entries
 * (or, if its QP was reset meanwhile, the CQ's). */
int silent_poll(ep_s *e, int path, int n, struct shift_wc *wc)
{
    if (!silent_now(e, path)) {
        int r = backend_poll(e, path, n, wc);
        return r > n ? n : r;
    }
    if (e->silent[path] == SILENT_DRAIN)
        silent_take_over(e, path);
    int k = 0;
    while (k < n && e->fqhead[path] < e->fqtail[path])
        wc[k++] = e->fq[path][e->fqhead[path]++ & e->fqmask];
    return k;
}

/* spec: FatalEvent(h, p). Read the events of path's NIC; at its death, take its QP's
 * completions over (SILENT_DRAIN: the CQ's own entries first). */
int shift_async_event(shift_ep h, int path)
{
    ep_s *e = ep_get(h);
    if (!e || (path != 1 && path != 2))
        return -EINVAL;
    if (!e->ops->async_event)
        return 0;
    int ev = 0, fatal = 0, r;
    while ((r = e->ops->async_event(e->ctx, e->qp[path], &ev)) == 1) {
        fatal |= ev == SHIFT_ASYNC_DEVICE_FATAL;
        if (ev == SHIFT_ASYNC_PORT_ACTIVE && path == 1)
            e->probe_failed = 0; /* the path may carry the probe now (failover.c) */
    }
    if (backend_error(e, r < 0))
        return r;
    if (!fatal || e->silent[path])
        return 0; /* (a death read before: the layer completes the QP's WRs already) */
    fq_clear(e, path);
    e->silent[path] = SILENT_DRAIN;
    return 1;
}
