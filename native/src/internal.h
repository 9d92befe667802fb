/* internal.h - private to libshift, shared by all its files: the handle table, the
 * marks for internal functions and cold paths, and the ownership hook the simnic
 * binding sets on an endpoint. The layer's own state is in layer.h, simnic's in
 * simnic_internal.h: the layer's files include no simnic header. */
#ifndef SHIFT_INTERNAL_H
#define SHIFT_INTERNAL_H

#include "shift.h"

/* a function one file of libshift gives the others, not the library's users */
#if defined(__GNUC__)
#define INTERNAL __attribute__((visibility("hidden")))
#else
#define INTERNAL
#endif

/* ---------------------------------------------------------------- handles ---- */
/* A handle is (generation << 32 | slot) disguised as a pointer: NULL, freed and
 * forged handles are recognised without dereferencing anything. Single-threaded. */
enum h_type { H_FABRIC = 1, H_CQ, H_QP, H_MR, H_EP, H_CONN, H_SHARED_CQ };
INTERNAL uint64_t h_new(void *obj, int type);
INTERNAL void *h_get(const void *handle, int type);
INTERNAL void h_free(uint64_t handle);
#define H_PTR(h) ((void *)(uintptr_t)(h))

/* keep a rarely taken path out of its caller, so the common path's frame stays small */
#if defined(__GNUC__)
#define COLD_PATH __attribute__((noinline))
#else
#define COLD_PATH
#endif

/* ownership: an object a connection owns is destroyed only by it (EBUSY otherwise) */
INTERNAL void shift__ep_own(shift_ep ep, int owned);
/* a shared CQ pair the simnic binding made (shift_sim_cq_create) is its to destroy
 * (shift_cq_destroy says EBUSY); its backend and context, NULL for a bad handle */
INTERNAL void shift__cq_own(shift_cq cq, int owned);
INTERNAL void *shift__cq_ctx(shift_cq cq, const struct shift_backend_ops **ops);
/* the connection manager's question to the peer's layer before it resets the default
 * QP pair: does a side of the endpoint hold WRs on the default QP (spec: Holds1)? */
/* tests: how many times host's endpoint of a simnic connection called backend op (the
 * calls shift_sim_fail_op can fail), to inject a failure at each of them in turn */
struct shift_conn_opaque;
INTERNAL uint64_t shift__sim_calls(struct shift_conn_opaque *conn, int host, int op);

#endif
