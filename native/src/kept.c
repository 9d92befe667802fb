/*
 * kept.c - ShiftCounted's kept notifications (spec: acked, resent; docs/findings.md,
 * F7). An ACK says that the peer's NIC executed a notification, not that the peer's
 * layer counted it: the receive completion may die with the NIC. So each notification
 * a success on the default path completes stays here, a copy of its record, until a
 * counter of the peer covers it, and a failover replays those first. A kept record's
 * completions come back under its layer sequence, older than every outstanding WR's:
 * the polls drop them as stale, as the spec drops a resent WR's (the application had
 * its success). It is posted signaled, so that each copy in flight on the backup QP
 * has a completion that says it left.
 */
#include "layer.h"

#include <string.h>

/* A success on the default path completed every WR up to seq (RC order): the
 * notifications among those outstanding join the kept ones (spec: Acked). Those a
 * replay skipped are not outstanding in the spec: the peer's counter covered them. A
 * full ring forgets its oldest (counted): the kept ones are the last max_send_wr. */
void keep_upto(ep_s *e, uint64_t seq)
{
    if (!keeps_notes(e))
        return;
    for (uint64_t s = e->phead; s <= seq && s < e->ptail; s++) {
        const pend_t *p = &e->pq[s & e->pmask];
        if ((p->flags & (PF_DONE | PF_SKIPPED)) || !NOTE(p))
            continue;
        if (e->ktail - e->khead >= e->pcap) {
            e->resent_inflight -= e->kq[e->khead & e->pmask].inflight;
            e->khead++;
            e->st.notes_forgotten++;
        }
        kept_t *k = &e->kq[e->ktail & e->pmask];
        k->rec = *p;
        k->rec.flags = 0;
        k->rec.wr.send_flags |= SHIFT_SEND_SIGNALED;
        if (p->wr.sg.addr == (uint64_t)(uintptr_t)p->inl) /* an inline payload: its copy */
            k->rec.wr.sg.addr = (uint64_t)(uintptr_t)k->rec.inl;
        k->inflight = 0;
        e->ktail++;
    }
}

/* A counter of the peer: the kept notifications it covers are counted, and forgotten
 * (spec: Uncounted). They are in post order, so those are a prefix. */
void kept_trim(ep_s *e, int64_t count)
{
    while (e->khead < e->ktail) {
        const kept_t *k = &e->kq[e->khead & e->pmask];
        if ((int64_t)NOTE(&k->rec) > count)
            break;
        e->resent_inflight -= k->inflight;
        e->khead++;
    }
}

/* spec: Replay's again - the kept notifications the peer's counter does not cover go
 * to the backup QP first. A post the QP refuses outright changes nothing the
 * application sees (the completion would be dropped): it is counted. Their number. */
uint64_t kept_replay(ep_s *e)
{
    kept_trim(e, e->peer_ctr);
    uint64_t n = 0;
    for (uint64_t s = e->khead; s < e->ktail; s++) {
        kept_t *k = &e->kq[s & e->pmask];
        k->rec.flags = 0;
        if (backend_error(e, post_pend(e, &k->rec, 2, 0)))
            continue;
        k->inflight++;
        e->resent_inflight++;
        n++;
    }
    return n;
}

/* Send completions polled off the backup QP's CQ (wc[0..n)): a kept record's says that
 * copy left the QP, and is marked KEPT_ID: the poll that takes it drops it, and that is
 * the poll's whole step, as the spec's PollCq drops a resent WR's CQE. */
void kept_polled(ep_s *e, struct shift_wc *wc, int n)
{
    for (int i = 0; i < n; i++) {
        if (wc[i].opcode & SHIFT_WC_RECV)
            continue;
        for (uint64_t s = e->khead; s < e->ktail; s++) {
            kept_t *k = &e->kq[s & e->pmask];
            if (k->rec.wr.wr_id == wc[i].wr_id && k->inflight) {
                k->inflight--;
                e->resent_inflight--;
                wc[i].wr_id = KEPT_ID;
                break;
            }
        }
    }
}
