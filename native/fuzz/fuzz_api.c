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
#include "world.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern long fz_alloc_countdown;

static fz_world world;
fz_world *W = &world;


/* ------------------------------------------------------------------ driver ---- */

static void teardown(void)
{
    fz_alloc_countdown = -1;
    for (int i = 0; i < NLONE; i++)
        if (W->lone[i].ep.live)
            FZ_CHECK(shift_ep_destroy(W->lone[i].ep.h) == 0, i, 0);
    for (int i = 0; i < NCONN; i++)
        if (W->conn[i].live)
            FZ_CHECK(shift_sim_close(W->conn[i].h) == 0, i, 0);
    for (int i = 0; i < NFAB; i++)
        if (W->fab[i].live)
            FZ_CHECK(sn_fabric_destroy(W->fab[i].h) == 0, i, 0);
    memset(W, 0, sizeof *W);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
extern int fz_trace;

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
