/*
 * cq.c - a CQ pair several endpoints of one host share (shift_cq): one backend CQ per
 * path, each endpoint's QP of that path on it. The layer demultiplexes by QP number: a
 * poll takes the polling endpoint's own completions and keeps every other endpoint's
 * for it, in CQ order, in that endpoint's inbox of the path; an endpoint's poll takes
 * its inbox before the CQ. So each endpoint sees the projection of the shared CQ onto
 * its QP, which is what a CQ of its own would have held, in the same order. No thread,
 * no clock: the demultiplexing happens inside the polls the endpoints make.
 */
#include "layer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* an endpoint's QP on one path's CQ, and its share of the CQ's entries */
typedef struct {
    uint32_t qpn;
    ep_s *ep;
    uint64_t share;
} member_t;

typedef struct cq_s {
    uint64_t h;
    const struct shift_backend_ops *ops;
    void *ctx;
    struct shift_cq_attr attr;
    void *cq[3];               /* the backend's CQ of each path */
    member_t *m[3];            /* each path's QPs, sorted by QP number */
    uint32_t nm[3], capm[3];
    uint64_t reserved[3];      /* max_send_wr + max_recv_wr of the QPs on it */
    int owned;                 /* the simnic binding's: only it destroys it */
} cq_s;

enum { CQE_MAX = 1 << 20 };

static cq_s *cq_get(shift_cq h) { return h_get(h, H_SHARED_CQ); }

static uint64_t pow2(uint64_t n)
{
    uint64_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

/* ------------------------------------------------------------ the pair ------ */

int shift_cq_create(const struct shift_backend_ops *ops, void *ctx,
                    const struct shift_cq_attr *attr, shift_cq *out)
{
    if (!out)
        return EINVAL;
    *out = NULL;
    if (!ops || !attr || !ops->create_cq || !ops->destroy_cq || !ops->create_qp_cq ||
        !ops->query_qp_num || attr->cqe < 1 || attr->cqe > CQE_MAX)
        return EINVAL;
    cq_s *c = calloc(1, sizeof *c);
    if (!c)
        return ENOMEM;
    *c = (cq_s){.ops = ops, .ctx = ctx, .attr = *attr};
    int err = ops->create_cq(ctx, 1, attr->cqe, &c->cq[1]);
    if (!err) {
        err = ops->create_cq(ctx, 2, attr->cqe, &c->cq[2]);
        if (err)
            ops->destroy_cq(ctx, c->cq[1]);
    }
    if (!err && !(c->h = h_new(c, H_SHARED_CQ))) {
        ops->destroy_cq(ctx, c->cq[1]);
        ops->destroy_cq(ctx, c->cq[2]);
        err = ENOMEM;
    }
    if (err) {
        free(c);
        return err;
    }
    *out = H_PTR(c->h);
    return 0;
}

int shift_cq_destroy(shift_cq h)
{
    cq_s *c = cq_get(h);
    if (!c)
        return EINVAL;
    if (c->owned || c->nm[1] || c->nm[2])
        return EBUSY;
    /* (teardown: whatever the backend says, the pair is gone) */
    c->ops->destroy_cq(c->ctx, c->cq[1]);
    c->ops->destroy_cq(c->ctx, c->cq[2]);
    h_free(c->h);
    free(c->m[1]);
    free(c->m[2]);
    free(c);
    return 0;
}

void shift__cq_own(shift_cq h, int owned)
{
    cq_s *c = cq_get(h);
    if (c)
        c->owned = owned;
}

void *shift__cq_ctx(shift_cq h, const struct shift_backend_ops **ops)
{
    cq_s *c = cq_get(h);
    if (ops)
        *ops = c ? c->ops : NULL;
    return c ? c->ctx : NULL;
}

/* the pair an endpoint of this backend may join, or NULL */
struct cq_s *cq_for(shift_cq h, const struct shift_backend_ops *ops)
{
    cq_s *c = cq_get(h);
    return c && c->ops == ops ? c : NULL;
}

/* ------------------------------------------------------------ members ------- */

/* where qpn is, or would go, in path's sorted members */
static uint32_t m_find(const cq_s *c, int path, uint32_t qpn)
{
    uint32_t lo = 0, hi = c->nm[path];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (c->m[path][mid].qpn < qpn)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static ep_s *m_lookup(const cq_s *c, int path, uint32_t qpn)
{
    uint32_t i = m_find(c, path, qpn);
    return i < c->nm[path] && c->m[path][i].qpn == qpn ? c->m[path][i].ep : NULL;
}

static int m_add(cq_s *c, int path, uint32_t qpn, ep_s *e, uint64_t share)
{
    uint32_t i = m_find(c, path, qpn);
    if (i < c->nm[path] && c->m[path][i].qpn == qpn)
        return EINVAL; /* two QPs of one number: their completions could not be told apart */
    if (c->nm[path] == c->capm[path]) {
        uint32_t cap = c->capm[path] ? 2 * c->capm[path] : 8;
        member_t *m = realloc(c->m[path], cap * sizeof *m);
        if (!m)
            return ENOMEM;
        c->m[path] = m;
        c->capm[path] = cap;
    }
    member_t *m = c->m[path];
    memmove(&m[i + 1], &m[i], (c->nm[path] - i) * sizeof *m);
    m[i] = (member_t){.qpn = qpn, .ep = e, .share = share};
    c->nm[path]++;
    c->reserved[path] += share;
    return 0;
}

/* the endpoint's QP of path leaves the CQ, if it is there */
static void m_del(cq_s *c, int path, uint32_t qpn, const ep_s *e)
{
    uint32_t i = m_find(c, path, qpn);
    if (i >= c->nm[path] || c->m[path][i].qpn != qpn || c->m[path][i].ep != e)
        return;
    member_t *m = c->m[path];
    c->reserved[path] -= m[i].share;
    memmove(&m[i], &m[i + 1], (c->nm[path] - i - 1) * sizeof *m);
    c->nm[path]--;
}

/* ------------------------------------------------------------ an endpoint --- */

int cq_create_qp(ep_s *e, int path, const struct shift_backend_qp_cap *cap)
{
    if (!e->cq)
        return e->ops->create_qp(e->ctx, path, cap, &e->qp[path]);
    cq_s *c = e->cq;
    if (c->reserved[path] + cap->max_send_wr + cap->max_recv_wr > c->attr.cqe)
        return ENOMEM; /* its completions might not fit beside the others' */
    return e->ops->create_qp_cq(e->ctx, path, cap, c->cq[path], &e->qp[path]);
}

/* The inbox of each path: twice the WRs and receive WRs the layer keeps outstanding
 * (each completes once per post), so that the stale flushes of those it moved fit
 * beside them; past it, an overrun (route). */
static uint64_t inbox_size(const ep_s *e)
{
    uint64_t kcap = keeps_notes(e) ? e->pcap : 0;
    return pow2(2 * ((uint64_t)e->pcap + e->rcap + kcap) + 2);
}

/* After shift_ep_create made both QPs on the pair: learn their numbers, make the
 * inboxes, and take the QPs' share of the CQs. Undone by cq_leave. */
int cq_join(ep_s *e, const struct shift_backend_qp_cap *cap1,
            const struct shift_backend_qp_cap *cap2)
{
    cq_s *c = e->cq;
    const struct shift_backend_qp_cap *cap[3] = {NULL, cap1, cap2};
    int err = 0;
    for (int p = 1; p <= 2 && !err; p++) {
        err = e->ops->query_qp_num(e->ctx, e->qp[p], &e->cq_qpn[p]);
        e->in[p].mask = inbox_size(e) - 1;
        if (!err && !(e->in[p].ring = calloc(e->in[p].mask + 1, sizeof *e->in[p].ring)))
            err = ENOMEM;
        if (!err)
            err = m_add(c, p, e->cq_qpn[p], e,
                        (uint64_t)cap[p]->max_send_wr + cap[p]->max_recv_wr);
    }
    if (err)
        cq_leave(e);
    return err;
}

/* The endpoint leaves the pair: its QPs are gone, what was kept for it goes too (a
 * completion of its QPs still in a CQ is nobody's: the next poll drops it). */
void cq_leave(ep_s *e)
{
    cq_s *c = e->cq;
    if (!c)
        return;
    for (int p = 1; p <= 2; p++) {
        m_del(c, p, e->cq_qpn[p], e);
        free(e->in[p].ring);
        e->in[p] = (inbox_t){0};
    }
    e->cq = NULL;
}

uint64_t cq_kept(const ep_s *e)
{
    return e->cq ? (e->in[1].tail - e->in[1].head) + (e->in[2].tail - e->in[2].head) : 0;
}

/* A completion of another QP on path's CQ: kept for its endpoint, in order; a full
 * inbox marks it overrun (that endpoint's polls of the path end in -EOVERFLOW), and
 * nothing after the loss is kept, so what it does get is a gapless prefix. */
static void route(cq_s *c, int path, const struct shift_wc *wc)
{
    ep_s *f = m_lookup(c, path, wc->qp_num);
    if (!f)
        return; /* a destroyed QP's, or none the pair knows: nobody's */
    inbox_t *in = &f->in[path];
    if (in->overrun)
        return;
    if (in->tail - in->head > in->mask) {
        in->overrun = 1;
        return;
    }
    in->ring[in->tail++ & in->mask] = *wc;
}

/* Up to n of this endpoint's completions of path: what others kept for it first, then
 * the shared CQ's, keeping the others' for them; or -errno. It polls into wc's free
 * tail and keeps its own in place; it reads the CQ no further than one CQ's worth past
 * what it asked (a backend that never runs dry cannot hold it here). */
int cq_poll(ep_s *e, int path, int n, struct shift_wc *wc)
{
    inbox_t *in = &e->in[path];
    int k = 0;
    while (k < n && in->head < in->tail)
        wc[k++] = in->ring[in->head++ & in->mask];
    if (in->overrun)
        return k ? k : -EOVERFLOW; /* (sticky: what came after the loss is gone) */
    cq_s *c = e->cq;
    uint64_t budget = (uint64_t)c->attr.cqe + (uint64_t)n;
    while (k < n && budget) {
        int want = (uint64_t)(n - k) < budget ? n - k : (int)budget;
        int r = e->ops->poll_cq(e->ctx, e->qp[path], want, wc + k);
        if (r < 0)
            return k ? k : r;
        if (r > want)
            r = want; /* (not believed beyond what it asked) */
        budget -= (uint64_t)r;
        int end = k + r;
        for (int i = k; i < end; i++) {
            if (wc[i].qp_num == e->cq_qpn[path])
                wc[k++] = wc[i];
            else
                route(c, path, &wc[i]);
        }
        if (r < want)
            break;
    }
    return k;
}
