/*
 * shiftsim_lockstep.h - the provider's lock-step mode: one process is both hosts of a
 * simnic fabric that the caller made and steps itself, for reproducible runs of verbs
 * programs (issue 18). The provider (libshiftsim-rdmav59.so) exports these with default
 * visibility; a program reaches them by dlopen of the provider's path (the instance
 * libibverbs loaded), e.g. with cffi in ABI mode.
 *
 * With SHIFT_SIM_LOCKSTEP=1 in the environment the provider offers four devices: sim0 and
 * sim1 (host A's NIC 1 and 2), sim2 and sim3 (host B's). Once a fabric is attached every
 * context acts on it: no sockets, no progress thread, no timer, and no verbs call moves
 * the wire - the caller steps it with its own sn_transmit, sn_deliver, sn_drop,
 * sn_timeout, sn_nic_fail, ... Memory regions lie in the hosts' memory of the fabric
 * (sn_host_mem): ibv_reg_mr(pd, base + off, len, access) on a device of that host.
 */
#ifndef SHIFTSIM_LOCKSTEP_H
#define SHIFTSIM_LOCKSTEP_H

#include "simnic.h"

#ifdef __cplusplus
extern "C" {
#endif

/* (A cffi program in ABI mode declares simnic.h's CDEF section, then this one.) */
/* CDEF-BEGIN */
/* From now on every context of the process uses `fabric`, a two-host fabric
 * (sn_fabric_create) of the copy of simnic whose table `ops` is (sn_get_ops): host A's
 * devices act on SN_HOST_A, B's on SN_HOST_B (the table is copied). 0; EINVAL without SHIFT_SIM_LOCKSTEP=1, for
 * a table of another size, or a fabric that is not a two-host one of that copy; EBUSY
 * while a context is open. The provider becomes the reader of the fabric's asynchronous
 * events (sn_async_event): the caller leaves them to shiftsim_lockstep_events. */
int shiftsim_lockstep_attach(const struct sn_ops *ops, sn_fabric fabric);
/* The provider forgets the fabric (the caller still owns it). 0; EBUSY while a context
 * is open; EINVAL without SHIFT_SIM_LOCKSTEP=1. */
int shiftsim_lockstep_detach(void);
/* Hands every asynchronous event waiting on the fabric's NICs (a NIC's death, its port
 * ACTIVE again) and every link gone down since the last call (PORT_ERR, at both ends)
 * to the contexts open on that device, where ibv_get_async_event reads them. The number
 * of events handed (to each device once), or -EINVAL if no fabric is attached. */
int shiftsim_lockstep_events(void);
/* The provider's lock, for a caller whose steps may race verbs calls of other threads:
 * every verbs call holds it while it acts on the fabric. */
void shiftsim_lockstep_lock(void);
void shiftsim_lockstep_unlock(void);
/* CDEF-END */

#ifdef __cplusplus
}
#endif
#endif
