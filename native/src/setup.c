/*
 * setup.c - connection set-up in two phases per path, as a verbs program does it
 * (local information, the peer's, ready to send), and the backup path's set-up in-band.
 *
 * The application connects the default path itself, with what it exchanged out of band
 * (shift_ep_local_info, shift_ep_connect: ibv_rc_pingpong's LID/QPN/PSN/GID over TCP).
 * The layer then tells the peer's layer, over that path, its backup QP (CTL_SETUP) and
 * its regions' backup rkeys (CTL_KEYS), connects its backup QP to the peer's as the
 * peer announces it, and answers. Each CTL_SETUP carries the sender's whole state of
 * the exchange, which only grows, so a lost one is made good by the next (the handshake
 * timer resends while the sender lacks something). Until the endpoint is failover-ready
 * (backup_ready) a failure reaches the application as on plain RC.
 */
#include "layer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { QPN_MAX = 0xffffff, PSN_MAX = 0xffffff };

static int has_setup_ops(const ep_s *e) { return e->ops->local_info && e->ops->rtr_qp; }

/* a path_info the peer's layer (or the application) could give: 24-bit QPNs and PSN,
 * a port, reserved 0 */
static int info_valid(const struct shift_path_info *i)
{
    return i->qp_num != 0 && i->qp_num <= QPN_MAX && i->psn <= PSN_MAX && i->port >= 1 &&
           i->reserved == 0 && i->ctl_qp_num <= QPN_MAX;
}

int backup_ready(const ep_s *e)
{
    const setup_s *s = &e->su;
    if (!s->used)
        return 1; /* the backend connected both paths itself (no SHIFT_EP_TWO_PHASE) */
    return s->connected[2] && s->peer_ready && s->npk >= s->peer_keys;
}

/* Does w name a peer's rkey whose backup key this endpoint has not learnt in-band (a
 * region the peer registered after its last announcement reached here)? Its replay
 * would carry the default NIC's key to the backup NIC. Only with the two-phase set-up:
 * otherwise the keys are the application's to give (shift_add_remote_keys). */
int rkey_unlearnt(const ep_s *e, const struct shift_send_wr *w)
{
    /* (a SEND names no rkey; a zero-length WRITE or READ has its rkey unchecked, as
     * IBTA says, and an atomic is always 8 bytes) */
    int atomic = w->opcode == SHIFT_WR_ATOMIC_CMP_AND_SWP ||
                 w->opcode == SHIFT_WR_ATOMIC_FETCH_AND_ADD;
    if (!e->su.used || w->opcode == SHIFT_WR_SEND || w->opcode == SHIFT_WR_SEND_WITH_IMM ||
        (!atomic && (w->num_sge == 0 || w->sg.length == 0)))
        return 0;
    for (int i = 0; i < e->nrk; i++)
        if (e->rk[i].k[0] == w->rkey)
            return 0;
    return 1;
}

/* does this endpoint lack something the peer gives: its backup QP, its readiness, its
 * keys, or its word that it holds ours? */
static int lacks(const ep_s *e)
{
    const setup_s *s = &e->su;
    return !s->have_peer || !s->peer_ready || s->npk < s->peer_keys || s->acked < s->nann;
}

static int grow(keypair **t, uint32_t n, uint32_t *cap)
{
    if (n < *cap)
        return 0;
    uint32_t c = *cap ? *cap * 2 : 8;
    keypair *x = realloc(*t, (size_t)c * sizeof *x);
    if (!x)
        return ENOMEM;
    *t = x;
    *cap = c;
    return 0;
}

void setup_free(ep_s *e)
{
    free(e->su.ann);
    free(e->su.pk);
}

/* ------------------------------------------------------- the two phases ---- */

int shift_ep_local_info(shift_ep h, int path, struct shift_path_info *out)
{
    ep_s *e = ep_get(h);
    if (!e || !out || (path != 1 && path != 2))
        return EINVAL;
    if (!has_setup_ops(e))
        return EOPNOTSUPP;
    struct shift_path_info i;
    int err = e->ops->local_info(e->ctx, e->qp[path], &i);
    if (err)
        return err;
    if (!info_valid(&i))
        return EIO; /* a backend's answer no peer could connect to */
    *out = i;
    return 0;
}

/* INIT, RTR against remote, RTS with this QP's first PSN: the verbs sequence. A step
 * that fails past INIT takes the QP back to RESET (a failed reset is counted), so that
 * connecting again starts afresh. */
static int connect_qp(ep_s *e, int path, const struct shift_path_info *remote)
{
    struct shift_path_info mine;
    int err = e->ops->local_info(e->ctx, e->qp[path], &mine);
    if (!err && !info_valid(&mine))
        err = EIO;
    if (!err)
        err = e->ops->modify_qp(e->ctx, e->qp[path], SHIFT_QPS_INIT, 0, 0);
    if (err)
        return err;
    err = e->ops->rtr_qp(e->ctx, e->qp[path], remote);
    if (!err)
        err = e->ops->modify_qp(e->ctx, e->qp[path], SHIFT_QPS_RTS, 0, mine.psn);
    if (err) {
        backend_error(e, e->ops->modify_qp(e->ctx, e->qp[path], SHIFT_QPS_RESET, 0, 0));
        return err;
    }
    e->su.connected[path] = 1;
    return 0;
}

int shift_ep_connect(shift_ep h, int path, const struct shift_path_info *remote)
{
    ep_s *e = ep_get(h);
    if (!e || !remote || (path != 1 && path != 2) || !info_valid(remote))
        return EINVAL;
    if (!has_setup_ops(e))
        return EOPNOTSUPP;
    setup_s *s = &e->su;
    if (s->connected[path])
        return EISCONN;
    /* the backup QP the peer's layer announced is the one to connect to */
    if (path == 2 && s->have_peer && memcmp(&s->peer, remote, sizeof *remote) != 0)
        return EINVAL;
    int err = connect_qp(e, path, remote);
    if (err)
        return err;
    s->used = 1;
    if (path == 1) {
        s->inband = 1;
        s->left = e->attr.ctl_retries;
    } else {
        s->peer = *remote;
        s->have_peer = 1;
    }
    return 0;
}

/* ------------------------------------------------------- sending ----------- */

/* this endpoint's pairs from `from` (1-based) on, CTL_KEYS_MAX a message, before the
 * CTL_SETUP that counts them; a message the backend refuses is lost (the timer
 * resends) */
static void send_keys(ep_s *e, uint32_t from)
{
    setup_s *s = &e->su;
    for (uint32_t i = from; i <= s->nann; i += CTL_KEYS_MAX) {
        ctl_keys m = {.magic = CTL_MAGIC, .kind = CTL_KEYS, .first = i};
        for (uint32_t j = 0; j < CTL_KEYS_MAX && i + j <= s->nann; j++) {
            m.k[j] = s->ann[i + j - 1];
            m.n++;
        }
        if (!backend_error(e, e->ops->ctl_send(e->ctx, e->qp[1], &m, sizeof m)))
            e->st.ctl_sent++;
    }
}

/* Tell the peer where this endpoint's set-up is: the pairs the peer has not said it
 * holds, then its state (CTL_SETUP). A backup QP the backend cannot tell sends nothing
 * (counted): the next step tries again. */
static int send_setup(ep_s *e)
{
    setup_s *s = &e->su;
    ctl_setup m = {.magic = CTL_MAGIC, .kind = CTL_SETUP, .keys = s->nann,
                   .keys_seen = s->npk};
    if (backend_error(e, e->ops->local_info(e->ctx, e->qp[2], &m.info)) || !info_valid(&m.info))
        return 0;
    m.flags = (uint8_t)((s->connected[2] ? SETUP_READY : 0) | (lacks(e) ? SETUP_ASK : 0));
    send_keys(e, s->acked + 1);
    if (!backend_error(e, e->ops->ctl_send(e->ctx, e->qp[1], &m, sizeof m)))
        e->st.ctl_sent++;
    s->sent++;
    s->sent_ready = s->connected[2];
    s->sent_keys = s->nann;
    s->owed = 0;
    return 1;
}

static int active(const ep_s *e) { return e->su.inband && failover(e) && !e->dead; }

/* spec: none (the spec's paths are connected from the start). One step of the backup
 * path's set-up: connect the backup QP to the peer's once announced (a backend error
 * leaves it for the next step, counted), then tell the peer what changed or what it
 * asked for. */
int setup_step(ep_s *e)
{
    setup_s *s = &e->su;
    if (!active(e))
        return 0;
    int did = 0;
    if (s->have_peer && !s->connected[2])
        did = !backend_error(e, connect_qp(e, 2, &s->peer));
    if (!s->sent || s->owed || s->sent_ready != s->connected[2] || s->sent_keys != s->nann)
        did |= send_setup(e);
    return did ? SHIFT_STEP_SETUP : 0;
}

/* the handshake timer: a set-up that still lacks the peer's part resends (the pairs
 * not acknowledged, its state), ctl_retries times since the peer's last message */
int setup_timer(ep_s *e)
{
    setup_s *s = &e->su;
    if (!active(e) || !s->sent || !lacks(e) || s->left == 0)
        return 0;
    s->left--;
    return send_setup(e);
}

/* A region registered: its pair is numbered and announced at the next step (or with
 * the first message, if the default path is not connected yet). */
int setup_announce(ep_s *e, uint32_t rkey, uint32_t rkey_backup)
{
    setup_s *s = &e->su;
    if (!has_setup_ops(e))
        return 0;
    if (s->nann >= MAX_ANNOUNCED || grow(&s->ann, s->nann, &s->capann))
        return ENOMEM;
    s->ann[s->nann++] = (keypair){{rkey, rkey_backup}};
    return 0;
}

/* ------------------------------------------------------- receiving --------- */

int is_setup_msg(const void *msg, uint32_t len)
{
    uint32_t magic;
    uint8_t kind;
    if (!msg || len < sizeof magic + sizeof kind)
        return 0;
    memcpy(&magic, msg, sizeof magic);
    memcpy(&kind, (const uint8_t *)msg + sizeof magic, sizeof kind);
    return magic == CTL_MAGIC && (kind == CTL_SETUP || kind == CTL_KEYS);
}

/* Could the peer's layer have sent this CTL_SETUP to this endpoint as it is? Its
 * backup QP a peer could connect to, the one announced (or given) before; flags known;
 * reserved fields 0; its state no older than the last (readiness kept, its pairs not
 * fewer, ours it holds not fewer, nor more than were announced). */
static int setup_valid(const ep_s *e, const ctl_setup *m)
{
    const setup_s *s = &e->su;
    if (m->pad != 0 || (m->flags & ~(SETUP_READY | SETUP_ASK)) || !info_valid(&m->info))
        return 0;
    if (s->have_peer && memcmp(&s->peer, &m->info, sizeof m->info) != 0)
        return 0;
    if (s->peer_ready && !(m->flags & SETUP_READY))
        return 0;
    return m->keys <= MAX_ANNOUNCED && m->keys >= s->peer_keys && m->keys_seen >= s->acked &&
           m->keys_seen <= s->nann;
}

/* ... this CTL_KEYS? 1..CTL_KEYS_MAX pairs numbered within MAX_ANNOUNCED, the unused
 * slots and reserved fields 0, and a pair it holds already repeated as it was (a pair's
 * number is its for good). */
static int keys_valid(const ep_s *e, const ctl_keys *m)
{
    const setup_s *s = &e->su;
    if (m->pad != 0 || m->pad2 != 0 || m->n < 1 || m->n > CTL_KEYS_MAX || m->first < 1 ||
        m->first > MAX_ANNOUNCED - (m->n - 1u))
        return 0;
    for (uint32_t j = m->n; j < CTL_KEYS_MAX; j++)
        if (m->k[j].k[0] || m->k[j].k[1])
            return 0;
    for (uint32_t j = 0; j < m->n; j++) {
        uint32_t num = m->first + j;
        if (num <= s->npk && memcmp(&s->pk[num - 1], &m->k[j], sizeof m->k[j]) != 0)
            return 0;
    }
    return 1;
}

static void take_setup(ep_s *e, const ctl_setup *m)
{
    setup_s *s = &e->su;
    if (!s->have_peer) {
        s->peer = m->info;
        s->have_peer = 1;
    }
    s->peer_ready |= (m->flags & SETUP_READY) != 0;
    s->peer_keys = m->keys;
    s->acked = m->keys_seen;
    s->owed |= (m->flags & SETUP_ASK) != 0;
    s->left = e->attr.ctl_retries; /* the peer is there: the timer starts over */
}

/* the pairs that follow those it holds (a message past a lost one adds nothing: the
 * peer resends from what its last word said this endpoint holds) */
static void take_keys(ep_s *e, const ctl_keys *m)
{
    setup_s *s = &e->su;
    for (uint32_t j = 0; j < m->n; j++) {
        if (m->first + j != s->npk + 1)
            continue;
        if (grow(&s->pk, s->npk, &s->cappk) ||
            keys_add(&e->rk, &e->nrk, &e->caprk, m->k[j].k[0], m->k[j].k[1]))
            return; /* out of memory: taken later, from a resend */
        s->pk[s->npk++] = m->k[j];
    }
}

/* spec: none. A set-up message arrived: taken only on the default path of an endpoint
 * whose default path shift_ep_connect connected (the peer sends none otherwise), with
 * exactly its kind's length and fields as setup_valid and keys_valid say; anything else
 * is counted (ctl_rejected) and changes nothing. A failed or dead endpoint takes it and
 * does nothing (NoFailover never fails over: it needs no backup path). */
int setup_input(ep_s *e, int path, const void *msg, uint32_t len)
{
    uint8_t kind = ((const uint8_t *)msg)[sizeof(uint32_t)];
    int ok = path == 1 && e->su.inband;
    ctl_setup ms;
    ctl_keys mk;
    if (ok && kind == CTL_SETUP) {
        ok = len == sizeof ms;
        if (ok) {
            memcpy(&ms, msg, sizeof ms);
            ok = setup_valid(e, &ms);
        }
    } else if (ok) {
        ok = len == sizeof mk;
        if (ok) {
            memcpy(&mk, msg, sizeof mk);
            ok = keys_valid(e, &mk);
        }
    }
    if (!ok) {
        e->st.ctl_rejected++;
        return -EINVAL;
    }
    e->st.ctl_received++;
    if (!failover(e) || e->dead)
        return 0;
    if (kind == CTL_SETUP)
        take_setup(e, &ms);
    else
        take_keys(e, &mk);
    return 0;
}
