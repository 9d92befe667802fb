/*
 * fuzz_api.c - a coverage-guided fuzz target over the whole public C API
 * (shift_verbs.h, simnic.h, shift.h, shift_sim.h). An input is a program: each step
 * picks an entry point and its arguments, handles included (valid, stale, forged, of
 * the wrong type, NULL); WR chains are long, malformed or cyclic; control messages are
 * random or well-formed with hostile fields; faults strike at any step; control
 * handlers re-enter the API; lone endpoints run over a backend whose every answer the
 * input chooses; any allocation may fail. After every step the checks of checks.c run.
 *
 *   make -C native fuzz && native/build/fuzz/fuzz_api native/fuzz/corpus
 */
#include "ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern long fz_alloc_countdown;

static fz_world world;
fz_world *W = &world;


/* ------------------------------------------------------------------ driver ---- */

/* An endpoint's events, as the input left them (the queue may have overflowed): each
 * one valid, and polling them takes them. Reads no input: the corpus's meaning stays. */
static void drain_events(shift_ep h)
{
    struct shift_event ev;
    int r, n = 0;
    while ((r = shift_poll_event(h, &ev)) == 1) {
        FZ_CHECK(shift_event_name(ev.type) != NULL, ev.type, n);
        FZ_CHECK(ev.path == 1 || ev.path == 2, ev.path, ev.type);
        FZ_CHECK(shift_wc_status_name(ev.status) != NULL, ev.status, ev.type);
        FZ_CHECK(++n <= SHIFT_EVENT_QUEUE, n, 0);
    }
    FZ_CHECK(r == 0 && shift_poll_event(h, NULL) == -EINVAL, r, n);
}

/* A connection's regions whose keys the harness kept: each deregisters at its host
 * alone, once; the peer has forgotten its rkey then. */
static void dereg_kept(fz_conn *c)
{
    for (int i = 0; i < c->nkeys; i++) {
        const struct shift_mr_keys *k = &c->keys[i];
        int r0 = shift_sim_dereg_mr(c->h, 0, k), r1 = shift_sim_dereg_mr(c->h, 1, k);
        FZ_CHECK((r0 == 0) + (r1 == 0) == 1 && (r0 | r1) == EINVAL, r0, r1);
        FZ_CHECK(shift_sim_dereg_mr(c->h, r0 ? 1 : 0, k) == EINVAL, i, 0);
        FZ_CHECK(shift_del_remote_keys(c->ep[r0 ? 0 : 1].h, k->rkey) == EINVAL, i, 0);
    }
    FZ_CHECK(shift_dereg_mr(c->ep[0].h, NULL) == EINVAL, 0, 0);
}

static void teardown(void)
{
    fz_alloc_countdown = -1;
    FZ_CHECK(shift_poll_event(NULL, NULL) == -EINVAL, 0, 0);
    FZ_CHECK(shift_event_name(0) == NULL &&
             shift_event_name(SHIFT_EVENT_PEER_APP_ERROR + 1) == NULL, 0, 0);
    for (int i = 0; i < NLONE; i++)
        if (W->lone[i].ep.live)
            drain_events(W->lone[i].ep.h);
    for (int i = 0; i < NCONN; i++)
        if (W->conn[i].live) {
            drain_events(W->conn[i].ep[0].h);
            drain_events(W->conn[i].ep[1].h);
            dereg_kept(&W->conn[i]);
        }
    for (int i = 0; i < NLONE; i++)
        if (W->lone[i].ep.live)
            FZ_CHECK(shift_ep_destroy(W->lone[i].ep.h) == 0, i, 0);
    if (W->lone_cq) {
        FZ_CHECK(shift_cq_destroy(W->lone_cq) == 0, 0, 0);
        FZ_CHECK(shift_cq_destroy(W->lone_cq) == EINVAL, 0, 0);
    }
    for (int i = 0; i < NCONN; i++)
        if (W->conn[i].live)
            FZ_CHECK(shift_sim_close(W->conn[i].h) == 0, i, 0);
    for (int i = 0; i < NFAB; i++)
        if (W->fab[i].live) {
            drop_shared_cqs(&W->fab[i], 0);
            FZ_CHECK(sn_fabric_destroy(W->fab[i].h) == 0, i, 0);
        }
    memset(W, 0, sizeof *W);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fz_trace = getenv("FZ_TRACE") != NULL;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in = {data, size};
    memset(W, 0, sizeof *W);
    W->in = &in;
    for (int steps = 0; fz_more(&in) && steps < 400; steps++) {
        run_op();
        check_world();
    }
    teardown();
    return 0;
}
