/*
 * control.c - faults from outside the program: `shift nic|link down|up DEV` and
 * `shift drop DEV` send one datagram to the host's control socket
 * ("shift-sim/<fabric>/<host>ctl"), the progress thread applies it to simnic under the
 * lock and answers "ok 1" (it changed something), "ok 0" (already so) or "error ...".
 * A command is input from another process: anything but the five forms below is
 * refused. The device's contexts learn of it as hardware tells them: an asynchronous
 * event (IBV_EVENT_DEVICE_FATAL for a dead NIC, PORT_ERR / PORT_ACTIVE for its link).
 *
 *     nic-down N | nic-up N | link-down N | link-up N | drop N COUNT    (N: 1 or 2)
 *     stats      (answered "ok sent S received R ...": the host's counters)
 */
#define _GNU_SOURCE
#include "shiftsim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rdma/ib_user_verbs.h>

#define SS_MAX_DROP 1000000

int ss_control_open(struct ss_host *h, const struct sockaddr_un *self, socklen_t len)
{
	h->ctl_sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->ctl_sock < 0)
		return errno;
	if (bind(h->ctl_sock, (const struct sockaddr *)self, len)) {
		int err = errno;

		close(h->ctl_sock);
		h->ctl_sock = -1;
		return err;
	}
	return 0;
}

int ss_watch(struct ss_host *h, int nic, int fd)
{
	for (int i = 0; i < SS_WATCHERS; i++)
		if (h->event_fd[nic][i] < 0) {
			h->event_fd[nic][i] = fd;
			return 0;
		}
	return EMFILE;
}

void ss_unwatch(struct ss_host *h, int nic, int fd)
{
	for (int i = 0; i < SS_WATCHERS; i++)
		if (h->event_fd[nic][i] == fd)
			h->event_fd[nic][i] = -1;
}

/* tell every context of the NIC, as the kernel's event file would */
void ss_announce(struct ss_host *h, int nic, enum ibv_event_type type)
{
	struct ib_uverbs_async_event_desc ev = {
		.element = type == IBV_EVENT_DEVICE_FATAL ? 0 : 1, /* port 1 */
		.event_type = type,
	};

	for (int i = 0; i < SS_WATCHERS; i++)
		if (h->event_fd[nic][i] >= 0 &&
		    write(h->event_fd[nic][i], &ev, sizeof(ev)) != (ssize_t)sizeof(ev))
			h->lost_events++; /* the program does not read its events: full pipe */
}

/* one command: the change it made (1 or 0), or -errno for a malformed one */
static int apply(struct ss_host *h, const char *verb, int nic, long count)
{
	int r;

	if (!strcmp(verb, "nic-down")) {
		r = sn_nic_fail(h->fabric, h->host, nic);
		if (r > 0)
			ss_announce(h, nic, IBV_EVENT_DEVICE_FATAL);
	} else if (!strcmp(verb, "nic-up")) {
		r = sn_nic_recover(h->fabric, h->host, nic);
		if (r > 0)
			ss_announce(h, nic, IBV_EVENT_PORT_ACTIVE);
	} else if (!strcmp(verb, "link-down")) {
		r = sn_link_down(h->fabric, nic);
		if (r > 0)
			ss_announce(h, nic, IBV_EVENT_PORT_ERR);
	} else if (!strcmp(verb, "link-up")) {
		r = sn_link_up(h->fabric, nic);
		if (r > 0)
			ss_announce(h, nic, IBV_EVENT_PORT_ACTIVE);
	} else if (!strcmp(verb, "drop") && count >= 1 && count <= SS_MAX_DROP) {
		h->drop_next[nic] += (uint32_t)count;
		r = 1;
	} else {
		r = -EINVAL;
	}
	return r;
}

/* parse "VERB N [COUNT]" strictly; the result of apply, or -EINVAL */
static int handle(struct ss_host *h, char *text)
{
	char verb[16], extra;
	int nic;
	long count = 0;
	int n = sscanf(text, "%15s %d %ld %c", verb, &nic, &count, &extra);

	if (n < 2 || n > 3 || nic < 1 || nic > SS_NICS)
		return -EINVAL;
	if ((n == 3) != !strcmp(verb, "drop"))
		return -EINVAL;
	return apply(h, verb, nic, count);
}

/* the answer to one command */
static void answer(struct ss_host *h, char *text, size_t len, char *reply, size_t cap)
{
	int r;

	if (!strcmp(text, "stats")) {
		snprintf(reply, cap, "ok ");
		ss_counters_text(h, reply + 3, cap - 3);
		return;
	}
	r = strlen(text) != len ? -EINVAL : handle(h, text); /* (a NUL inside: refused) */
	if (r >= 0)
		snprintf(reply, cap, "ok %d", r > 0);
	else
		snprintf(reply, cap, "error %s", strerror(-r));
}

void ss_control_take(struct ss_host *h)
{
	char text[64], reply[256];
	struct sockaddr_un from;
	socklen_t from_len = sizeof(from);
	ssize_t n;

	while ((n = recvfrom(h->ctl_sock, text, sizeof(text) - 1, MSG_DONTWAIT,
			     (struct sockaddr *)&from, &from_len)) >= 0) {
		text[n] = 0;
		answer(h, text, (size_t)n, reply, sizeof(reply));
		if (from_len > offsetof(struct sockaddr_un, sun_path))
			sendto(h->ctl_sock, reply, strlen(reply), MSG_DONTWAIT,
			       (struct sockaddr *)&from, from_len);
		from_len = sizeof(from);
	}
}
