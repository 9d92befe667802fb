/*
 * args.c - arguments for the fuzz target's calls: handles (valid, stale, forged,
 * mistyped, NULL), addresses, keys, WR chains, and the registry of WR ids.
 */
#include "world.h"

#include <string.h>

/* ----------------------------------------------------------------- handles ---- */

/* a handle of type t that the harness holds (live or stale), or NULL */
void *held_handle(int t, unsigned i)
{
    switch (t) {
    case T_FAB:
        return W->fab[i % NFAB].h;
    case T_CQ:
        return W->raw[i % NRAW].cq;
    case T_QP:
        if (i & 8) {
            fz_conn *c = &W->conn[i % NCONN];
            return c->qp[(i >> 4) & 1][1 + ((i >> 5) & 1)];
        }
        return W->raw[i % NRAW].qp;
    case T_MR:
        return W->raw[i % NRAW].mr;
    case T_EP:
        if (i & 8)
            return W->lone[i % NLONE].ep.h;
        return W->conn[i % NCONN].ep[(i >> 4) & 1].h;
    default:
        return W->conn[i % NCONN].h;
    }
}

/* a handle argument: mostly one of the type, else stale, forged, mistyped or NULL */
void *pick(int t)
{
    uint8_t b = fz_u8(W->in);
    if (b < 200)
        return held_handle(t, fz_u8(W->in));
    switch (b % 5) {
    case 0:
        return NULL;
    case 1:
        return (void *)(uintptr_t)fz_u64(W->in);
    case 2:
        return held_handle((t + 1 + fz_pick(W->in, T_NTYPES - 1)) % T_NTYPES, fz_u8(W->in));
    case 3: { /* the same slot, another generation */
        uint64_t h = (uint64_t)(uintptr_t)held_handle(t, fz_u8(W->in));
        return (void *)(uintptr_t)(h + ((uint64_t)1 << 32));
    }
    default: { /* the next slot */
        uint64_t h = (uint64_t)(uintptr_t)held_handle(t, fz_u8(W->in));
        return (void *)(uintptr_t)(h + 1);
    }
    }
}

/* a host or path: mostly valid, now and then just outside */
int pick_host(void)
{
    return fz_u8(W->in) < 240 ? (int)fz_pick(W->in, 2) : (int)fz_small(W->in, 2);
}

int pick_path(void)
{
    return fz_u8(W->in) < 240 ? 1 + (int)fz_pick(W->in, 2) : (int)fz_small(W->in, 3);
}

fz_fab *fab_of(sn_fabric h)
{
    for (int i = 0; i < NFAB; i++)
        if (W->fab[i].live && W->fab[i].h == h)
            return &W->fab[i];
    return NULL;
}

fz_ep *ep_of(shift_ep h)
{
    for (int i = 0; i < NCONN; i++)
        for (int k = 0; k < 2; k++)
            if (W->conn[i].live && W->conn[i].ep[k].h == h)
                return &W->conn[i].ep[k];
    for (int i = 0; i < NLONE; i++)
        if (W->lone[i].ep.live && W->lone[i].ep.h == h)
            return &W->lone[i].ep;
    return NULL;
}

/* the raw slot of a live raw QP, or -1 */
int raw_qp_of(sn_qp h)
{
    for (int i = 0; i < NRAW; i++)
        if (W->raw[i].qp_live && W->raw[i].qp == h)
            return i;
    return -1;
}

/* ----------------------------------------------------------- memory, keys ----- */

/* an address for a buffer of len bytes: inside a host's memory, or anywhere (only
 * where the API promises to check it before touching it) */
uint64_t pick_addr(uint32_t len, int readable)
{
    fz_fab *f = &W->fab[fz_pick(W->in, NFAB)];
    uint8_t b = fz_u8(W->in);
    if (f->live && b < 200 && f->size > len) {
        size_t off = fz_small(W->in, 4096) % (f->size - len + 1);
        return (uint64_t)(uintptr_t)(f->mem[b & 1] + off);
    }
    if (readable || b < 230)
        return (uint64_t)(uintptr_t)W->scratch;
    return b & 1 ? fz_u64(W->in) : 0;
}

uint32_t pick_key(void)
{
    uint8_t b = fz_u8(W->in);
    if (b < 160) {
        fz_conn *c = &W->conn[b % NCONN];
        if (c->nkeys) {
            const struct shift_mr_keys *k = &c->keys[(b >> 2) & 1];
            const uint32_t all[4] = {k->lkey, k->rkey, k->lkey_backup, k->rkey_backup};
            return all[(b >> 3) & 3];
        }
    }
    if (b < 224) {
        fz_raw *r = &W->raw[b % NRAW];
        return b & 1 ? r->rkey : r->lkey;
    }
    return fz_u32(W->in);
}

/* --------------------------------------------------------------- WR ids ------- */

uint64_t new_id(int kind, int owner)
{
    if (W->nid == 0)
        W->nid = 1; /* 0 is never an id */
    if (W->nid >= MAXID)
        return MAXID; /* out of ids: an unknown one (checks skip it) */
    fz_id *r = &W->id[W->nid];
    r->kind = (uint8_t)kind;
    r->state = ID_POSTED;
    r->wild = 0;
    r->owner = owner;
    return W->nid++;
}

/* After a post of chain[0..n): which ids were taken. A failed post names in *bad the
 * first WR not posted; a live target (strict) must name one of the chain. Unknown
 * (a cycle, or no bad asked for): each may have been posted any number of times. */
void settle_ids(void *const *nodes, const uint64_t *ids, int n, int unknown, int err,
                const void *bad, int strict)
{
    int k = n;
    if (err && !unknown) {
        k = -1;
        for (int i = 0; i < n; i++)
            if (nodes[i] == bad)
                k = i;
        if (strict)
            FZ_CHECK(k >= 0, err, n);
        if (k < 0)
            k = 0;
    }
    for (int i = 0; i < n; i++) {
        if (ids[i] >= MAXID)
            continue;
        fz_id *r = &W->id[ids[i]];
        if (unknown)
            r->wild = 1;
        else
            r->state = i < k ? ID_POSTED : ID_REJECTED;
    }
}

/* ------------------------------------------------------------- WR chains ------ */

struct shift_send_wr swr[MAXCHAIN];
struct shift_recv_wr rwr[MAXCHAIN];
uint64_t chain_ids[MAXCHAIN];

/* a chain of n send WRs, cyclic if the input says so; returns n */
int make_send_chain(int owner, int *cyc)
{
    static const unsigned flag_bits[] = {SHIFT_SEND_FENCE, SHIFT_SEND_SIGNALED,
                                         SHIFT_SEND_SOLICITED, SHIFT_SEND_INLINE,
                                         SHIFT_SEND_INELIGIBLE, SHIFT_SEND_NO_DOORBELL, 1u << 12};
    int n = 1 + (int)fz_pick(W->in, MAXCHAIN);
    for (int i = 0; i < n; i++) {
        struct shift_send_wr *w = &swr[i];
        memset(w, 0, sizeof *w);
        chain_ids[i] = new_id(KIND_SEND, owner);
        w->wr_id = chain_ids[i];
        w->opcode = (int)fz_small(W->in, 7);
        uint8_t fl = fz_u8(W->in);
        w->send_flags = SHIFT_SEND_SIGNALED * !(fl & 0x80);
        if (fl & 0x40)
            w->send_flags |= flag_bits[fl % 7];
        w->num_sge = (int)fz_small(W->in, 2);
        w->sg.length = fz_u8(W->in) < 200 ? fz_small(W->in, 72) : fz_small(W->in, SHIFT_MAX_MSG);
        w->sg.addr = pick_addr(w->sg.length, (w->send_flags & SHIFT_SEND_INLINE) != 0);
        w->sg.lkey = pick_key();
        w->imm_data = fz_u32(W->in);
        w->remote_addr = pick_addr(8, 0);
        w->rkey = pick_key();
        w->compare_add = fz_u8(W->in);
        w->swap = fz_u8(W->in);
        w->next = i + 1 < n ? &swr[i + 1] : NULL;
    }
    *cyc = fz_u8(W->in) >= 240;
    if (*cyc)
        swr[n - 1].next = &swr[fz_pick(W->in, (unsigned)n)];
    return n;
}

int make_recv_chain(int owner, int *cyc)
{
    int n = 1 + (int)fz_pick(W->in, MAXCHAIN);
    for (int i = 0; i < n; i++) {
        struct shift_recv_wr *w = &rwr[i];
        memset(w, 0, sizeof *w);
        chain_ids[i] = new_id(KIND_RECV, owner);
        w->wr_id = chain_ids[i];
        w->num_sge = (int)fz_small(W->in, 2);
        w->sg.length = fz_small(W->in, 96);
        w->sg.addr = pick_addr(w->sg.length, 0);
        w->sg.lkey = pick_key();
        w->next = i + 1 < n ? &rwr[i + 1] : NULL;
    }
    *cyc = fz_u8(W->in) >= 240;
    if (*cyc)
        rwr[n - 1].next = &rwr[fz_pick(W->in, (unsigned)n)];
    return n;
}

void *const send_nodes[MAXCHAIN] = {&swr[0], &swr[1], &swr[2], &swr[3], &swr[4],
                                           &swr[5], &swr[6], &swr[7], &swr[8], &swr[9]};
void *const recv_nodes[MAXCHAIN] = {&rwr[0], &rwr[1], &rwr[2], &rwr[3], &rwr[4],
                                           &rwr[5], &rwr[6], &rwr[7], &rwr[8], &rwr[9]};

/* -------------------------------------------------------------- completions --- */

void took(int owner, const struct shift_wc *wc, int n, int check_ids)
{
    for (int i = 0; i < n; i++) {
        fz_note("completion owner %d wr %llu status %d opcode %d", owner,
                (unsigned long long)wc[i].wr_id, wc[i].status, wc[i].opcode);
        check_completion(owner, &wc[i], check_ids);
    }
}
