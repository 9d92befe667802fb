/*
 * shiftsim.c - a libibverbs provider for the simulated NICs of shift (native/'s simnic).
 *
 * libibverbs finds the devices through the tree that `shift run` writes and points
 * SYSFS_PATH at (class/infiniband_verbs/uverbsN naming simN), matches them to this
 * provider by name, and opens them on a stand-in character device (/dev/full, in the
 * private mount namespace `shift run` makes): no kernel RDMA is involved, and no call
 * here issues a kernel command. Each process is one host (SHIFT_SIM_HOST, A or B) with
 * the devices sim0 and sim1, its NICs 1 and 2; in lock-step mode (SHIFT_SIM_LOCKSTEP=1,
 * lockstep.c) it is both, sim0 and sim1 host A's NICs, sim2 and sim3 host B's.
 *
 * This file is the device and context layer: discovery, the device's and the port's
 * attributes, protection domains, and the asynchronous-event channel a dead NIC will
 * report on. The host and its wire are host.c's; CQs, MRs and QPs queues.c's.
 */
#define _GNU_SOURCE    /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shiftsim.h"

#define SS_ABI_VERSION 1         /* uverbsN/abi_version of the tree shift run writes */
#define SS_VENDOR_ID 0x5348      /* "SH" */
#define SS_PART_ID 0x1f7         /* SHIFT */
#define SS_MAX_QP 64
#define SS_MAX_QP_WR 16384       /* per queue, as simnic's rings */
#define SS_MAX_MR 256
#define SS_MAX_PD 64
#define SS_MAX_MSG SHIFT_MAX_MSG /* one packet of simnic's wire per message (simnic.h) */
#define SS_LIDS_PER_HOST 16

struct ss_pd {
	struct ibv_pd ibv_pd;
};

static struct ss_device *to_ss_device(struct ibv_device *dev)
{
	return container_of(dev, struct ss_device, ibv_dev.device);
}

/* The host this process plays: SHIFT_SIM_HOST=A (the default) or B. */
static int host_from_env(void)
{
	const char *h = getenv("SHIFT_SIM_HOST");

	return h && (h[0] == 'B' || h[0] == 'b') ? 1 : 0;
}

/* "sim3" -> 3; -1 for a name this provider does not own */
static int index_from_name(const char *name)
{
	char *end;
	long i;

	if (strncmp(name, "sim", 3) != 0 || !name[3])
		return -1;
	i = strtol(name + 3, &end, 10);
	return *end || i < 0 || i > 255 ? -1 : (int)i;
}

/* Unique across both hosts: "SHIFT" in the high bytes, then host and device (its NIC
 * less one: sim0 of either host is device 0, in socket and lock-step mode alike). */
static uint64_t node_guid(const struct ss_device *d)
{
	return 0x5348494654000000ULL | (uint64_t)d->host << 8 | (uint64_t)(d->nic - 1);
}

static uint16_t port_lid(const struct ss_device *d)
{
	return (uint16_t)(d->host * SS_LIDS_PER_HOST + d->nic);
}

static int nic_alive(struct ibv_context *ctx)
{
	struct ss_host *h = ss_host_lock_ctx(ctx);
	int alive = sn_nic_alive(h->fabric, h->host, to_ss_context(ctx)->nic);

	ss_host_unlock();
	return alive;
}

/* A device in fatal error answers no command (EIO), as a driver's does once its firmware
 * is gone: how a program tells a dead NIC from a link that is down (its port DOWN). */
static int ss_query_device_ex(struct ibv_context *ctx,
			      const struct ibv_query_device_ex_input *input,
			      struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ss_device *d = to_ss_device(ctx->device);
	struct ibv_device_attr *a;

	if (input && input->comp_mask)
		return EINVAL;
	if (!nic_alive(ctx))
		return EIO;
	if (attr_size < sizeof(attr->orig_attr))
		return EINVAL;
	memset(attr, 0, attr_size);
	a = &attr->orig_attr;
	snprintf(a->fw_ver, sizeof(a->fw_ver), "shift-simnic 1");
	a->node_guid = htobe64(node_guid(d));
	a->sys_image_guid = htobe64(node_guid(d) & ~0xffULL);
	a->max_mr_size = UINT64_MAX;
	a->page_size_cap = 4096;
	a->vendor_id = SS_VENDOR_ID;
	a->vendor_part_id = SS_PART_ID;
	a->max_qp = SS_MAX_QP;
	a->max_qp_wr = SS_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN;
	a->max_sge = SS_MAX_SGE;	/* simnic's one, or gathered and scattered (sge.c) */
	a->max_sge_rd = SS_MAX_SGE;
	a->max_cq = SS_MAX_QP;
	a->max_cqe = SS_MAX_CQE;
	a->max_mr = SS_MAX_MR;
	a->max_pd = SS_MAX_PD;
	a->max_qp_rd_atom = 1;
	a->max_qp_init_rd_atom = 1;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_pkeys = 1;
	a->phys_port_cnt = 1;
	if (attr_size >= offsetof(struct ibv_device_attr_ex, phys_port_cnt_ex) +
			 sizeof(attr->phys_port_cnt_ex))
		attr->phys_port_cnt_ex = 1;
	return 0;
}

/* the port is up while the NIC lives and its link is up */
static int port_up(struct ibv_context *ctx)
{
	int nic = to_ss_context(ctx)->nic;
	struct ss_host *h = ss_host_lock_ctx(ctx);
	int up = sn_nic_alive(h->fabric, h->host, nic) && sn_link_is_up(h->fabric, nic);

	ss_host_unlock();
	return up;
}

static int ss_query_port(struct ibv_context *ctx, uint8_t port,
			 struct ibv_port_attr *attr)
{
	struct ss_device *d = to_ss_device(ctx->device);
	int up = port_up(ctx);

	if (port != 1)
		return EINVAL;
	*attr = (struct ibv_port_attr){
		.state = up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN,
		.max_mtu = IBV_MTU_4096,
		.active_mtu = IBV_MTU_4096,
		.gid_tbl_len = 1,
		.max_msg_sz = SS_MAX_MSG,
		.pkey_tbl_len = 1,
		.lid = port_lid(d),
		.sm_lid = 1,
		.max_vl_num = 1,
		.active_width = 2,	/* 4x */
		.active_speed = 32,	/* EDR */
		.phys_state = up ? 5 : 3,	/* LinkUp, Disabled */
		.link_layer = IBV_LINK_LAYER_INFINIBAND,
	};
	return 0;
}

static struct ibv_pd *ss_alloc_pd(struct ibv_context *ctx)
{
	struct ss_pd *pd = calloc(1, sizeof(*pd));

	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->ibv_pd.context = ctx;
	return &pd->ibv_pd;
}

static int ss_dealloc_pd(struct ibv_pd *ibpd)
{
	free(container_of(ibpd, struct ss_pd, ibv_pd));
	return 0;
}

static void ss_free_context(struct ibv_context *ibctx)
{
	struct ss_context *ctx = to_ss_context(ibctx);

	struct ss_host *h = ctx->host;

	ss_unwatch(ss_host_lock_ctx(ibctx), ctx->nic, ctx->event_write);
	ss_host_unlock();
	close(ctx->event_write);
	close(ibctx->async_fd);
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
	ss_host_put(h);
}

static const struct verbs_context_ops ss_ctx_ops = {
	.query_device_ex = ss_query_device_ex,
	.query_port = ss_query_port,
	.alloc_pd = ss_alloc_pd,
	.dealloc_pd = ss_dealloc_pd,
	.free_context = ss_free_context,
	.create_cq = ss_create_cq,
	.poll_cq = ss_poll_cq,
	.req_notify_cq = ss_req_notify_cq,
	.destroy_cq = ss_destroy_cq,
	.reg_mr = ss_reg_mr,
	.dereg_mr = ss_dereg_mr,
	.create_qp = ss_create_qp,
	.create_qp_ex = ss_create_qp_ex,
	.query_qp = ss_query_qp,
	.modify_qp = ss_modify_qp,
	.destroy_qp = ss_destroy_qp,
	.post_send = ss_post_send,
	.post_recv = ss_post_recv,
	.create_ah = ss_create_ah,
	.destroy_ah = ss_destroy_ah,
};

/* The asynchronous events (a dead NIC, a port down) arrive on a pipe of our own:
 * libibverbs reads ibv_get_async_event's descriptors from context.async_fd. */
static int open_event_channel(struct ss_context *ctx)
{
	int fds[2];

	if (pipe2(fds, O_CLOEXEC))
		return errno;
	ctx->ibv_ctx.context.async_fd = fds[0];
	ctx->event_write = fds[1];
	return 0;
}

static struct verbs_context *ss_alloc_context(struct ibv_device *ibdev, int cmd_fd,
					      void *private_data)
{
	struct ss_device *d = to_ss_device(ibdev);
	struct ss_host *host;
	struct ss_context *ctx;
	int err;

	(void)private_data;
	host = ss_host_get(d->host, &err);
	if (!host) { /* the host's wire is taken, or lock-step mode has no fabric yet */
		close(cmd_fd);
		errno = err;
		return NULL;
	}
	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx) {
		ss_host_put(host);
		return NULL;
	}
	ctx->nic = d->nic;
	ctx->host = host;
	err = ctx->nic <= SS_NICS ? open_event_channel(ctx) : ENODEV;
	if (!err) {
		err = ss_watch(ss_host_lock_ctx(&ctx->ibv_ctx.context), ctx->nic, ctx->event_write);
		ss_host_unlock();
		if (err) {
			close(ctx->event_write);
			close(ctx->ibv_ctx.context.async_fd);
		}
	}
	if (err) {
		verbs_uninit_context(&ctx->ibv_ctx);
		free(ctx);
		ss_host_put(host);
		errno = err;
		return NULL;
	}
	verbs_set_ops(&ctx->ibv_ctx, &ss_ctx_ops);
	ctx->ibv_ctx.context.num_comp_vectors = 1;
	return &ctx->ibv_ctx;
}

static bool ss_match_device(struct verbs_sysfs_dev *sysfs_dev)
{
	return index_from_name(sysfs_dev->ibdev_name) >= 0;
}

/* The host and NIC of simN: in socket mode the process's host, NIC N + 1; in lock-step
 * mode NIC N % 2 + 1 of host N / 2. A NIC past SS_NICS is refused at open (ENODEV). */
static void place_device(struct ss_device *d, int index)
{
	if (!ss_lockstep_mode()) {
		d->host = host_from_env();
		d->nic = index + 1;
	} else {
		d->host = index / SS_NICS ? SN_HOST_B : SN_HOST_A;
		d->nic = index < 2 * SS_NICS ? index % SS_NICS + 1 : SS_NICS + 1;
	}
}

static struct verbs_device *ss_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	struct ss_device *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	place_device(d, index_from_name(sysfs_dev->ibdev_name));
	return &d->ibv_dev;
}

static void ss_uninit_device(struct verbs_device *vdev)
{
	free(to_ss_device(&vdev->device));
}

static const struct verbs_device_ops ss_dev_ops = {
	.name = "shiftsim",
	.match_min_abi_version = SS_ABI_VERSION,
	.match_max_abi_version = SS_ABI_VERSION,
	.match_device = ss_match_device,
	.alloc_device = ss_alloc_device,
	.uninit_device = ss_uninit_device,
	.alloc_context = ss_alloc_context,
};
PROVIDER_DRIVER(shiftsim, ss_dev_ops);
