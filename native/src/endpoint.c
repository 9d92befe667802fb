/*
 * endpoint.c - an endpoint's life: creating it over a backend table with its two QPs,
 * destroying it, registering and deregistering memory on both NICs and translating keys
 * to the backup NIC's, querying both sides' states and its statistics, its queue of
 * events for the application, and the names of states, designs and events.
 */
#include "layer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ keys ---------- */

uint32_t xlate(const keypair *t, int n, uint32_t key)
{
    for (int i = 0; i < n; i++)
        if (t[i].k[0] == key)
            return t[i].k[1];
    return key;
}

uint32_t lkey_backup(const ep_s *e, uint32_t lkey)
{
    for (int i = 0; i < e->nreg; i++)
        if (e->regs[i].keys.lkey == lkey)
            return e->regs[i].keys.lkey_backup;
    return lkey;
}

int keys_add(keypair **t, int *n, int *cap, uint32_t a, uint32_t b)
{
    for (int i = 0; i < *n; i++)
        if ((*t)[i].k[0] == a) {
            (*t)[i].k[1] = b;
            return 0;
        }
    if (*n == *cap) {
        int c = *cap ? *cap * 2 : 8;
        keypair *x = realloc(*t, (size_t)c * sizeof *x);
        if (!x)
            return ENOMEM;
        *t = x;
        *cap = c;
    }
    (*t)[*n].k[0] = a;
    (*t)[*n].k[1] = b;
    (*n)++;
    return 0;
}

/* ------------------------------------------------------------ lifecycle ----- */

static uint64_t pow2(uint64_t n)
{
    uint64_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

uint64_t shift_backup_state_bytes(uint32_t max_send_wr, uint32_t max_recv_wr)
{
    uint64_t bcap = (uint64_t)max_send_wr + max_recv_wr + 1;
    uint64_t q2cap = 2 * (uint64_t)max_send_wr + max_recv_wr + 2;
    return sizeof(ep_s) + pow2(max_send_wr) * sizeof(pend_t) +
           pow2(max_recv_wr) * sizeof(rpend_t) +
           (2 * pow2(bcap) + pow2(q2cap)) * sizeof(struct shift_wc);
}

/* What ShiftCounted keeps on top (kept.c): a ring of the last max_send_wr notifications,
 * and the backup QP's head (q2) and silent ring (fq) grown by their copies. */
static uint64_t kept_bytes(const ep_s *e)
{
    if (!keeps_notes(e))
        return 0;
    return (e->pmask + 1) * sizeof(kept_t) + 3 * pow2(e->pcap) * sizeof(struct shift_wc);
}

int shift_ep_create(const struct shift_backend_ops *ops, void *ctx,
                    const struct shift_ep_attr *attr, shift_ep *out)
{
    return shift_ep_create_on_cq(ops, ctx, attr, NULL, out);
}

int shift_ep_create_on_cq(const struct shift_backend_ops *ops, void *ctx,
                          const struct shift_ep_attr *attr, shift_cq cq, shift_ep *out)
{
    if (!out)
        return EINVAL;
    *out = NULL;
    if (!ops || !attr || !ops->create_qp || !ops->destroy_qp || !ops->modify_qp ||
        !ops->query_qp || !ops->reset_qp || !ops->post_send || !ops->post_recv ||
        !ops->ring || !ops->poll_cq || !ops->reg_mr || !ops->dereg_mr || !ops->ctl_send ||
        !ops->local_info != !ops->rtr_qp) /* (the two-phase set-up's: both or neither) */
        return EINVAL;
    if ((attr->role != SHIFT_ROLE_REQUESTER && attr->role != SHIFT_ROLE_RESPONDER) ||
        attr->design < SHIFT_DESIGN_SHIFT || attr->design > SHIFT_DESIGN_SHIFT_COUNTED ||
        attr->max_send_wr < 1 || attr->max_send_wr > MAX_WR || attr->max_recv_wr < 1 ||
        attr->max_recv_wr > MAX_WR || attr->ctl_retries > 255 ||
        (attr->flags & ~(unsigned)(SHIFT_EP_WIRE_PROBE | SHIFT_EP_COPY_POSTS |
                                    SHIFT_EP_NO_FAIL_BACK | SHIFT_EP_TWO_PHASE)))
        return EINVAL;
    struct cq_s *shared = cq ? cq_for(cq, ops) : NULL;
    if (cq && !shared)
        return EINVAL; /* not a shared CQ pair, or another backend's */
    ep_s *e = calloc(1, sizeof *e);
    if (!e)
        return ENOMEM;
    e->ops = ops;
    e->ctx = ctx;
    e->attr = *attr;
    e->cq = shared;
    /* ShiftCounted copies every WR: a kept notification outlives its send queue entry;
     * so does an endpoint on a shared CQ (any endpoint's poll frees its queue's slots) */
    e->can_direct = ops->sq_pending && !(attr->flags & SHIFT_EP_COPY_POSTS) &&
                    !keeps_notes(e) && !shared;
    e->pcap = attr->max_send_wr;
    /* ShiftCounted's kept copies go to the backup QP before the outstanding WRs */
    uint64_t kcap = keeps_notes(e) ? e->pcap : 0;
    e->rcap = attr->max_recv_wr;
    /* held completions: both sides' (a drain buffers good sends and receives) */
    e->bcap = e->pcap + e->rcap + 1;
    e->pmask = pow2(e->pcap) - 1;
    e->rmask = pow2(e->rcap) - 1;
    e->bmask = pow2(e->bcap) - 1;
    /* the backup CQ's head: what the backup CQ can hold (its send queue's and receive
     * queue's completions) and the flushes of posts in Error */
    e->q2mask = pow2(2 * (uint64_t)e->pcap + e->rcap + 2 + kcap) - 1;
    e->pq = calloc(e->pmask + 1, sizeof *e->pq);
    e->rpend = calloc(e->rmask + 1, sizeof *e->rpend);
    e->buf = calloc(e->bmask + 1, sizeof *e->buf);
    e->q2 = calloc(e->q2mask + 1, sizeof *e->q2);
    e->q1 = calloc(e->bmask + 1, sizeof *e->q1);
    /* a silent QP's completions (silent.c): its WRs and receive WRs, and later posts */
    e->fqmask = pow2(2 * ((uint64_t)e->pcap + e->rcap + kcap) + 2) - 1;
    e->fq[1] = calloc(e->fqmask + 1, sizeof *e->fq[1]);
    e->fq[2] = calloc(e->fqmask + 1, sizeof *e->fq[2]);
    e->kq = kcap ? calloc(e->pmask + 1, sizeof *e->kq) : NULL;
    for (int p = 1; p <= 2; p++)
        e->fqhead[p] = e->fqtail[p] = (uint64_t)1 << 32;
    e->send_mode = SHIFT_STATE_DEFAULT;
    e->recv_mode = SHIFT_RECV_DEFAULT;
    e->peer_ctr = -1;
    e->probe_status = -1;
    e->su.used = (attr->flags & SHIFT_EP_TWO_PHASE) != 0;
    int err = ENOMEM;
    if (!e->pq || !e->rpend || !e->buf || !e->q2 || !e->q1 || !e->fq[1] || !e->fq[2] ||
        (kcap && !e->kq))
        goto fail;
    /* the default QP has the layer's capacity (in direct mode its send queue is the
     * layer's); the backup QP keeps a spare slot */
    struct shift_backend_qp_cap cap = {e->pcap, e->rcap, SHIFT_MAX_INLINE};
    struct shift_backend_qp_cap cap2 = {e->pcap + 1 + (uint32_t)kcap, e->rcap, SHIFT_MAX_INLINE};
    err = cq_create_qp(e, 1, &cap);
    if (err)
        goto fail;
    err = cq_create_qp(e, 2, &cap2);
    if (err) {
        ops->destroy_qp(ctx, e->qp[1]);
        goto fail;
    }
    /* the application's QP number, which its completions keep across a failover; on a
     * shared CQ, both QPs' numbers, which tell its completions from the others' */
    if ((ops->query_qp_num && (err = ops->query_qp_num(ctx, e->qp[1], &e->qpn)) != 0) ||
        (shared && (err = cq_join(e, &cap, &cap2)) != 0)) {
        ops->destroy_qp(ctx, e->qp[1]);
        ops->destroy_qp(ctx, e->qp[2]);
        goto fail;
    }
    e->h = h_new(e, H_EP);
    if (!e->h) {
        ops->destroy_qp(ctx, e->qp[1]);
        ops->destroy_qp(ctx, e->qp[2]);
        cq_leave(e);
        err = ENOMEM;
        goto fail;
    }
    *out = H_PTR(e->h);
    return 0;
fail:
    free(e->pq);
    free(e->rpend);
    free(e->buf);
    free(e->q2);
    free(e->q1);
    free(e->fq[1]);
    free(e->fq[2]);
    free(e->kq);
    free(e);
    return err;
}

void shift__ep_own(shift_ep h, int owned)
{
    ep_s *e = ep_get(h);
    if (e)
        e->owned = owned;
}

int shift_ep_destroy(shift_ep h)
{
    ep_s *e = ep_get(h);
    if (!e)
        return EINVAL;
    if (e->owned)
        return EBUSY;
    e->ops->destroy_qp(e->ctx, e->qp[1]);
    e->ops->destroy_qp(e->ctx, e->qp[2]);
    cq_leave(e);
    for (int i = 0; i < e->nreg; i++) {
        e->ops->dereg_mr(e->ctx, e->regs[i].mr[0]);
        e->ops->dereg_mr(e->ctx, e->regs[i].mr[1]);
    }
    h_free(e->h);
    free(e->regs);
    free(e->rk);
    setup_free(e);
    free(e->pq);
    free(e->rpend);
    free(e->buf);
    free(e->q2);
    free(e->q1);
    free(e->fq[1]);
    free(e->fq[2]);
    free(e->kq);
    free(e);
    return 0;
}

int shift_reg_mr(shift_ep h, uint64_t addr, size_t length, int access,
                 struct shift_mr_keys *keys)
{
    ep_s *e = ep_get(h);
    if (!e || !keys)
        return EINVAL;
    uint32_t lk[3] = {0}, rk[3] = {0};
    void *mr[3] = {0};
    int err = e->ops->reg_mr(e->ctx, 1, addr, length, access, &lk[1], &rk[1], &mr[1]);
    if (err)
        return err;
    err = e->ops->reg_mr(e->ctx, 2, addr, length, access, &lk[2], &rk[2], &mr[2]);
    if (err) {
        e->ops->dereg_mr(e->ctx, mr[1]);
        return err;
    }
    if (e->nreg == e->capreg) {
        int c = e->capreg ? e->capreg * 2 : 8;
        region_t *m = realloc(e->regs, (size_t)c * sizeof *m);
        if (!m) {
            e->ops->dereg_mr(e->ctx, mr[1]);
            e->ops->dereg_mr(e->ctx, mr[2]);
            return ENOMEM;
        }
        e->regs = m;
        e->capreg = c;
    }
    region_t *g = &e->regs[e->nreg++];
    g->keys = (struct shift_mr_keys){lk[1], rk[1], lk[2], rk[2]};
    g->mr[0] = mr[1];
    g->mr[1] = mr[2];
    /* the peer's layer learns its backup rkey in-band (two-phase set-up: setup.c) */
    err = setup_announce(e, rk[1], rk[2]);
    if (err) {
        e->ops->dereg_mr(e->ctx, mr[1]);
        e->ops->dereg_mr(e->ctx, mr[2]);
        e->nreg--;
        return err;
    }
    *keys = g->keys;
    return 0;
}

int shift_dereg_mr(shift_ep h, const struct shift_mr_keys *keys)
{
    ep_s *e = ep_get(h);
    if (!e || !keys)
        return EINVAL;
    for (int i = 0; i < e->nreg; i++) {
        region_t *g = &e->regs[i];
        if (memcmp(&g->keys, keys, sizeof *keys) != 0)
            continue;
        /* a backend that cannot release a registration still loses it from the layer:
         * the keys are dead to the application either way (counted) */
        backend_error(e, e->ops->dereg_mr(e->ctx, g->mr[0]));
        backend_error(e, e->ops->dereg_mr(e->ctx, g->mr[1]));
        *g = e->regs[--e->nreg];
        return 0;
    }
    return EINVAL;
}

int shift_add_remote_keys(shift_ep h, uint32_t rkey, uint32_t rkey_backup)
{
    ep_s *e = ep_get(h);
    if (!e)
        return EINVAL;
    return keys_add(&e->rk, &e->nrk, &e->caprk, rkey, rkey_backup);
}

int shift_del_remote_keys(shift_ep h, uint32_t rkey)
{
    ep_s *e = ep_get(h);
    if (!e)
        return EINVAL;
    for (int i = 0; i < e->nrk; i++)
        if (e->rk[i].k[0] == rkey) {
            e->rk[i] = e->rk[--e->nrk];
            return 0;
        }
    return EINVAL;
}

/* ------------------------------------------------------------ events -------- */

void ep_event(ep_s *e, int type, int path, int status, uint64_t wrs)
{
    if (e->evtail - e->evhead == SHIFT_EVENT_QUEUE) {
        e->evhead++; /* the newest tells the application more than the oldest */
        e->st.events_dropped++;
    }
    e->evq[e->evtail++ % SHIFT_EVENT_QUEUE] = (struct shift_event){type, path, status, wrs};
}

int shift_poll_event(shift_ep h, struct shift_event *ev)
{
    ep_s *e = ep_get(h);
    if (!e || !ev)
        return -EINVAL;
    if (e->evhead == e->evtail)
        return 0;
    *ev = e->evq[e->evhead++ % SHIFT_EVENT_QUEUE];
    return 1;
}

const char *shift_event_name(int type)
{
    static const char *const n[] = {NULL, "PATH_DOWN", "FAILOVER_STARTED", "FAILOVER_FINISHED",
                                    "FAILOVER_REFUSED", "FAIL_BACK", "RECV_FAIL_BACK",
                                    "APP_ERROR", "PEER_APP_ERROR"};
    if (type < SHIFT_EVENT_PATH_DOWN || type > SHIFT_EVENT_PEER_APP_ERROR)
        return NULL;
    return n[type];
}

int shift_ep_query(shift_ep h, struct shift_ep_info *info)
{
    ep_s *e = ep_get(h);
    if (!e || !info)
        return EINVAL;
    *info = e->st;
    info->role = e->attr.role;
    info->design = e->attr.design;
    /* `state` keeps its one-way meaning: the side of the endpoint's role */
    if (is_req(e))
        info->state = e->send_mode;
    else if (e->dead)
        info->state = SHIFT_STATE_ERROR;
    else
        info->state = e->recv_mode == SHIFT_RECV_DEFAULT ? SHIFT_STATE_DEFAULT
                                                         : SHIFT_STATE_FALLBACK;
    info->send_state = e->send_mode;
    info->recv_state = e->recv_mode;
    info->sent_ctr = e->sent_ctr;
    info->peer_ctr = e->peer_ctr;
    info->fresh = e->fresh;
    info->asked = e->asked;
    info->peer_seq = e->peer_seq;
    info->ctr_seq = e->ctr_seq;
    info->replayed = e->replayed;
    info->probing = e->probing;
    info->has_fence = e->has_fence;
    info->fence = e->has_fence ? e->fence_id : 0;
    info->epoch = e->epoch;
    info->incarnation = e->inc;
    info->reconnecting = e->reconnecting;
    /* `outstanding` and `held` are the role's side too: a requester's sends, a
     * responder's receives (both post either: two-way traffic) */
    uint64_t out = 0, held = 0;
    if (e->direct) {
        uint64_t notes, sq_out;
        /* a send queue the backend cannot read: the query fails, as ibv_query_qp
         * would (nothing changed; *info is not to be used) */
        int err = direct_count(e, &sq_out, &notes);
        if (backend_error(e, err))
            return err;
        direct_sync(e, notes); /* the query brings the count up to date */
        info->sends_completed = e->st.sends_completed;
        if (is_req(e)) /* (a silent QP the layer took over: its flushes still owed) */
            out = e->silent[1] == SILENT_ACTIVE ? silent_sends_owed(e, 1) : sq_out;
    }
    if (is_req(e) && !e->direct)
        for (uint64_t s = e->phead; s < e->ptail; s++) {
            pend_t *p = &e->pq[s & e->pmask];
            if (p->flags & PF_DONE)
                continue;
            out++;
            held += p->where == W_HELD;
        }
    else if (!is_req(e))
        for (uint64_t s = e->rhead; s < e->rtail; s++)
            out += !(e->rpend[s & e->rmask].flags & PF_DONE);
    info->outstanding = out;
    info->held = held;
    info->buffered = e->btail - e->bhead;
    info->recvs_completed = e->recv_done;
    info->backup_state_bytes = shift_backup_state_bytes(e->pcap, e->rcap) +
                               (uint64_t)e->caprk * sizeof(keypair) +
                               (uint64_t)e->capreg * sizeof(region_t) + kept_bytes(e);
    info->kept_notes = e->ktail - e->khead;
    info->qp_num = e->qpn;
    info->cq_kept = cq_kept(e);
    info->setup_inband = e->su.inband;
    info->backup_ready = backup_ready(e);
    info->keys_announced = e->su.nann;
    info->keys_acked = e->su.acked;
    info->peer_keys = e->su.peer_keys;
    info->peer_keys_held = e->su.npk;
    return 0;
}

const char *shift_state_name(int s)
{
    static const char *const n[] = {"Default", "Fallback", "WaitSignaled", "WaitDrained",
                                    "Error"};
    if (s < 0 || s > SHIFT_STATE_ERROR)
        return NULL;
    return n[s];
}

const char *shift_recv_state_name(int s)
{
    static const char *const n[] = {"Default", "Moving", "Fallback"};
    if (s < 0 || s > SHIFT_RECV_FALLBACK)
        return NULL;
    return n[s];
}

const char *shift_design_name(int d)
{
    static const char *const n[] = {"Shift", "NaiveReplay", "NoFailover", "ShiftPrefix",
                                    "ShiftCounted"};
    if (d < 0 || d > SHIFT_DESIGN_SHIFT_COUNTED)
        return NULL;
    return n[d];
}
