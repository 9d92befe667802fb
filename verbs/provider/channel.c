/*
 * channel.c - completion channels for the simulated devices, where libibverbs 59 asks
 * the kernel for them (libshiftsim-channel.so, preloaded by `shift run`).
 *
 * ibv_create_comp_channel is not a provider verb: libibverbs writes the command
 * IB_USER_VERBS_CMD_CREATE_COMP_CHANNEL to the device file (execute_cmd_write, in
 * libibverbs/verbs.c) and takes the descriptor the kernel's uverbs answers with, a new
 * file in the caller's table that only a kernel can make. The simulated devices have
 * no kernel behind their file (a stand-in /dev/full: the write fails, ENOSPC). The
 * rest of a channel is the provider's already: ibv_get_cq_event reads one
 * struct ib_uverbs_comp_event_desc (the CQ's address) from channel->fd and calls the
 * provider's cq_event, ibv_destroy_comp_channel closes the descriptor.
 *
 * So this library, which `shift run` preloads, answers ibv_create_comp_channel for a
 * context of the shiftsim provider with a pipe the provider writes events into (it
 * opens its own write end from /proc/self/fd, queues.c), and hands any other context to
 * libibverbs's own function. channel->fd is one descriptor opened for reading and
 * writing, so a read waits for an event rather than seeing the end of a pipe nobody
 * writes, and libibverbs's ibv_destroy_comp_channel (close, free) needs no help.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/driver.h>

static int is_shiftsim(struct ibv_context *ctx)
{
	struct verbs_device *dev = ctx && ctx->device ? verbs_get_device(ctx->device) : NULL;

	return dev && dev->ops && dev->ops->name && !strcmp(dev->ops->name, "shiftsim");
}

/* libibverbs's own, for the other devices (it is loaded: a context exists) */
static struct ibv_comp_channel *libibverbs_create(struct ibv_context *ctx)
{
	struct ibv_comp_channel *(*real)(struct ibv_context *);
	void *lib = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);

	real = lib ? (struct ibv_comp_channel *(*)(struct ibv_context *))
			     dlvsym(lib, "ibv_create_comp_channel", "IBVERBS_1.0")
		   : NULL;
	if (lib)
		dlclose(lib);
	if (!real) {
		errno = ENOSYS;
		return NULL;
	}
	return real(ctx);
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct ibv_comp_channel *channel;
	char path[64];
	int fds[2], fd, err;

	if (!is_shiftsim(ctx))
		return libibverbs_create(ctx);
	channel = malloc(sizeof(*channel));
	if (!channel)
		return NULL;
	if (pipe2(fds, O_CLOEXEC)) {
		err = errno;
		free(channel);
		errno = err;
		return NULL;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
	fd = open(path, O_RDWR | O_CLOEXEC); /* the pipe, read and written by one descriptor */
	err = errno;
	close(fds[0]);
	close(fds[1]);
	if (fd < 0) {
		free(channel);
		errno = err;
		return NULL;
	}
	*channel = (struct ibv_comp_channel){.context = ctx, .fd = fd, .refcnt = 0};
	return channel;
}
