/*
 * lockstep.c - the provider's lock-step mode (shiftsim_lockstep.h): one process is both
 * hosts of a simnic fabric the caller made through its own copy of simnic and steps by
 * hand. The provider then only translates verbs into simnic calls on that fabric, through
 * the caller's table: no socket, no progress thread, no timer, and no verbs call moves
 * the wire, so a run is reproducible from the caller's steps.
 */
#include "shiftsim.h"

#include <errno.h>
#include <string.h>

static struct {
	struct sn_ops ops;              /* the caller's copy of simnic, its table copied */
	sn_fabric fabric;               /* the caller's; NULL until attached */
	struct ss_host host[2];         /* its hosts A and B, as the contexts see them */
	int link_up[SS_NICS + 1];       /* as the last events call saw each link */
} ls;

static void host_init(struct ss_host *h, int host, sn_fabric fabric)
{
	*h = (struct ss_host){.host = host, .lockstep = 1, .fabric = fabric, .ctl_sock = -1};
	for (int p = 0; p <= SS_NICS; p++)
		h->sock[p] = -1;
	memset(h->event_fd, -1, sizeof(h->event_fd));
}

/* (under the host lock, as every function below but the exported ones) */
struct ss_host *ss_lockstep_host(int host, int *err)
{
	if (!ls.fabric) {
		*err = ENODEV;
		return NULL;
	}
	*err = 0;
	ls.host[host].refs++;
	return &ls.host[host];
}

void ss_lockstep_put(struct ss_host *h)
{
	h->refs--;
}

struct ss_host *ss_lockstep_first(void)
{
	return &ls.host[SN_HOST_A];
}

int ss_lockstep_open(void)
{
	return ls.host[SN_HOST_A].refs + ls.host[SN_HOST_B].refs;
}

/* a fabric of both hosts of the copy whose table ops is: sn_host_mem answers for it
 * (EBADF from another copy's or a freed handle, ENOTSUP from a one-host fabric) */
static int two_host_fabric(const struct sn_ops *ops, sn_fabric fabric)
{
	uint8_t *base;
	size_t size;

	return ops->host_mem(fabric, SN_HOST_A, &base, &size) == 0;
}

int shiftsim_lockstep_attach(const struct sn_ops *ops, sn_fabric fabric)
{
	int err = 0;

	if (!ss_lockstep_mode() || !ops || ops->size != sizeof(*ops))
		return EINVAL;
	ss_host_lock();
	if (ss_lockstep_open()) {
		err = EBUSY;
	} else if (!two_host_fabric(ops, fabric)) {
		err = EINVAL;
	} else {
		ls.ops = *ops; /* (a copy: the caller's table may live on its stack) */
		ss_sn = &ls.ops;
		ls.fabric = fabric;
		for (int h = SN_HOST_A; h <= SN_HOST_B; h++)
			host_init(&ls.host[h], h, fabric);
		for (int p = 1; p <= SS_NICS; p++)
			ls.link_up[p] = ops->link_is_up(fabric, p);
	}
	ss_host_unlock();
	return err;
}

int shiftsim_lockstep_detach(void)
{
	int err = 0;

	if (!ss_lockstep_mode())
		return EINVAL;
	ss_host_lock();
	if (ss_lockstep_open()) {
		err = EBUSY;
	} else {
		ls.fabric = NULL;
		ss_sn = ss_own_ops();
	}
	ss_host_unlock();
	return err;
}

static enum ibv_event_type verbs_event(int sn_event)
{
	return sn_event == SN_ASYNC_DEVICE_FATAL ? IBV_EVENT_DEVICE_FATAL : IBV_EVENT_PORT_ACTIVE;
}

/* the links that went down since the last look: PORT_ERR at both ends (simnic raises no
 * event for a link: control.c's `shift link down` announces it the same way) */
static int links_gone_down(void)
{
	int n = 0;

	for (int p = 1; p <= SS_NICS; p++) {
		int up = sn_link_is_up(ls.fabric, p);

		if (ls.link_up[p] && !up)
			for (int h = SN_HOST_A; h <= SN_HOST_B; h++, n++)
				ss_announce(&ls.host[h], p, IBV_EVENT_PORT_ERR);
		ls.link_up[p] = up;
	}
	return n;
}

int shiftsim_lockstep_events(void)
{
	int n, event;

	ss_host_lock();
	if (!ls.fabric) {
		ss_host_unlock();
		return -EINVAL;
	}
	n = links_gone_down();
	for (int h = SN_HOST_A; h <= SN_HOST_B; h++)
		for (int nic = 1; nic <= SS_NICS; nic++)
			while (sn_async_event(ls.fabric, h, nic, &event) == 1) {
				ss_announce(&ls.host[h], nic, verbs_event(event));
				n++;
			}
	ss_host_unlock();
	return n;
}

void shiftsim_lockstep_lock(void)
{
	ss_host_lock();
}

void shiftsim_lockstep_unlock(void)
{
	ss_host_unlock();
}
