/*
 * shift_ibv.h - the SHIFT core's second backend table: libibverbs. It uses only ibv_*
 * calls, so it runs over any provider (the simulated NIC here, mlx5 on a real host).
 *
 * A context is one endpoint's view of its host: a device per path (the default NIC and
 * the backup NIC), a protection domain on each. The layer's QP of a path is an RC QP
 * with, beside it, a UD QP of the layer's own that carries its control messages (the
 * per-host control plane, in-band): each message is one datagram, stamped with the
 * incarnation of the RC QP it speaks for, sent and taken only while that RC QP is in
 * RTS - what a control message riding the RC QP's path would do (spec: DeliverControl).
 * What the peer needs to reach both QPs travels in struct shift_path_info (qp_num and
 * ctl_qp_num).
 *
 * Two ways to connect: the layer's two-phase set-up (SHIFT_EP_TWO_PHASE: the application
 * exchanges path 1's shift_ep_local_info, the layers set path 2 up in-band), or a
 * deployment that connects both paths before the layer starts (shift_ibv_path_info and
 * shift_ibv_connect on each path of each host, then an endpoint without TWO_PHASE).
 *
 * A fail-back's reconnect resets the default RC QP in place (RESET, INIT, RTR, RTS): the
 * incarnation k's first PSN is below incarnation k-1's (shift_ibv_epoch_psn), so that a
 * packet of an earlier life is ahead of every PSN the reset QP expects: its responder
 * discards it and its requester ignores its ACK, as RC does - a new QP number without
 * a new exchange. The layer's doorbell flag (SHIFT_SEND_NO_DOORBELL) is kept by the
 * backend: such WRs wait in the backend until the next ring or ordinary post.
 * sq_pending is not offered (the layer keeps its own copy of each WR: the copying path).
 *
 * Return values: as shift.h states (0 or a positive errno; counts or -errno for polls).
 * Single-threaded, as the core: the caller serialises every call on a context.
 */
#ifndef SHIFT_IBV_H
#define SHIFT_IBV_H

#include "shift.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CDEF-BEGIN */
struct shift_ibv_ctx;

/* The backend table (the same for every context). */
const struct shift_backend_ops *shift_ibv_ops(void);
/* The memory a context's control QPs need for their buffers: SHIFT_IBV_CTL_MEM bytes. */
enum { SHIFT_IBV_CTL_MEM = 2 * 17 * 320 };
/* Open the devices named (ibv_get_device_name) for the default path and the backup
 * path, port `port` of each: ENODEV if one is not listed, else ibv_open_device's and
 * ibv_alloc_pd's error. The control QPs' buffers are ctl_mem (ctl_len >= SHIFT_IBV_CTL_MEM
 * bytes the caller keeps, for a provider whose registrations must lie in memory of its
 * own - the simulated hosts'), or, with NULL, the backend's own allocation. */
int shift_ibv_open(const char *default_dev, const char *backup_dev, uint8_t port,
                   void *ctl_mem, size_t ctl_len, struct shift_ibv_ctx **out);
/* EBUSY while a QP, CQ or MR of the layer is on it. */
int shift_ibv_close(struct shift_ibv_ctx *ctx);
/* What the peer needs to connect to this context's QP of path (made by the layer's
 * create_qp): the QP, its control QP, the first PSN, the port's LID and GID. */
int shift_ibv_path_info(struct shift_ibv_ctx *ctx, int path, struct shift_path_info *out);
/* Connect this context's QP of path (in RESET) to the remote's: INIT, RTR, RTS, and its
 * control QP to the remote's control QP. For a deployment that connects both paths
 * itself (no SHIFT_EP_TWO_PHASE). */
int shift_ibv_connect(struct shift_ibv_ctx *ctx, int path, const struct shift_path_info *remote);
/* The state (enum shift_qp_state) of this context's RC QP of path, as the NIC has it. */
int shift_ibv_qp_state(struct shift_ibv_ctx *ctx, int path, int *state);
/* The first PSN of incarnation inc of a QP (0: its first life). */
uint32_t shift_ibv_epoch_psn(uint32_t inc);
/* CDEF-END */

#ifdef __cplusplus
}
#endif
#endif
