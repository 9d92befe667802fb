/*
 * host.c - this process's host of the simulated fabric, and the wire to the other one.
 *
 * The host is one simnic host (sn_host_create): its memory is the process's, its two
 * NICs are sim0 and sim1. Path p's wire is a datagram socket per end, in the abstract
 * unix namespace: "shift-sim/<fabric>/<host><p>", <fabric> from SHIFT_SIM_FABRIC, so
 * that several pairs of programs can run at once. A packet the peer's socket has no room
 * for waits (the link's flow control); one for a peer that is not there (not started
 * yet, gone) is lost, as on a wire, and RC's retransmission timer, driven from here with
 * the monotonic clock (the core has none), brings it back.
 *
 * The NIC works while the application does not, as hardware does: a progress thread
 * waits on the sockets (or the timer) and moves the wire under the lock; the verbs calls
 * (post, poll) move it too, for latency. (The core stays without threads or clocks:
 * they are the provider's.) In lock-step mode (lockstep.c) none of this runs: both hosts
 * are the caller's fabric, and only its steps move the wire.
 */
#define _GNU_SOURCE
#include "shiftsim.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SS_RETRY_NS (50 * 1000 * 1000ULL) /* the transport timer: 50 ms */
#define SS_TICK_MS 5                        /* the progress thread's longest sleep */

/* the lock of every host and every simnic call; the host of socket mode */
static pthread_mutex_t ss_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ss_host the_host;

/* the simnic the provider calls: its own copy's, unless lock-step mode gave another */
const struct sn_ops *ss_sn;

const struct sn_ops *ss_own_ops(void)
{
	static struct sn_ops own;

	if (!own.size)
		sn_get_ops(&own);
	return &own;
}

int ss_lockstep_mode(void)
{
	static int mode = -1;

	if (mode < 0) {
		const char *v = getenv("SHIFT_SIM_LOCKSTEP");

		mode = v && !strcmp(v, "1");
	}
	return mode;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static const char *fabric_name(void)
{
	const char *name = getenv("SHIFT_SIM_FABRIC");

	return name && *name ? name : "shift";
}

/* the abstract socket address "shift-sim/<fabric>/<host><end>" (end: "1", "2", "ctl") */
socklen_t ss_address(struct sockaddr_un *a, int host, const char *end)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "shift-sim/%s/%c%s",
		     fabric_name(), host == SN_HOST_A ? 'A' : 'B', end);
	if (n < 0 || (size_t)n >= sizeof(a->sun_path) - 1)
		return 0;
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int open_wire(struct ss_host *h, int path)
{
	const char *end = path == 1 ? "1" : "2";
	struct sockaddr_un self;
	socklen_t len = ss_address(&self, h->host, end);

	h->peer_len[path] = ss_address(&h->peer[path], !h->host, end);
	if (!len || !h->peer_len[path])
		return ENAMETOOLONG;
	h->sock[path] = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->sock[path] < 0)
		return errno;
	if (bind(h->sock[path], (struct sockaddr *)&self, len)) {
		int err = errno; /* EADDRINUSE: this host of this fabric runs already */

		close(h->sock[path]);
		h->sock[path] = -1;
		return err;
	}
	return 0;
}

static void *progress_thread(void *arg);

/* what the host's wire and NICs did, as "name value" pairs */
void ss_counters_text(struct ss_host *h, char *buf, size_t cap)
{
	struct sn_counters c = {0};

	sn_counters_get(h->fabric, &c);
	snprintf(buf, cap, "sent %llu received %llu dropped %llu lost %llu timeouts %llu "
		 "duplicates %llu malformed %llu ud_discarded %llu", (unsigned long long)h->sent,
		 (unsigned long long)h->received, (unsigned long long)h->dropped,
		 (unsigned long long)h->lost, (unsigned long long)c.timeouts,
		 (unsigned long long)c.duplicates, (unsigned long long)c.malformed,
		 (unsigned long long)c.ud_discarded);
}

/* SHIFT_SIM_STATS: the counters on stderr at the last close */
static void report(struct ss_host *h)
{
	char text[256];

	ss_counters_text(h, text, sizeof(text));
	fprintf(stderr, "shift-sim: host %c: %s\n", h->host == SN_HOST_A ? 'A' : 'B', text);
}

static void close_host(struct ss_host *h)
{
	if (h->running) {
		h->running = 0;
		pthread_mutex_unlock(&ss_lock); /* let the thread see it and finish */
		pthread_join(h->thread, NULL);
		pthread_mutex_lock(&ss_lock);
	}
	for (int p = 1; p <= SS_NICS; p++)
		if (h->sock[p] >= 0)
			close(h->sock[p]);
	if (h->ctl_sock >= 0)
		close(h->ctl_sock);
	if (h->fabric && getenv("SHIFT_SIM_STATS"))
		report(h);
	if (h->fabric)
		sn_fabric_destroy(h->fabric);
	h->fabric = NULL;
}

static int open_host(struct ss_host *h, int host)
{
	struct sn_fabric_attr attr = {.retry_cnt = 7, .rnr_retry = 7, .rnr_nak = 1};
	int err;

	struct sockaddr_un ctl;
	socklen_t ctl_len = ss_address(&ctl, host, "ctl");

	h->host = host;
	h->sock[1] = h->sock[2] = h->ctl_sock = -1;
	memset(h->event_fd, -1, sizeof(h->event_fd));
	memset(h->drop_next, 0, sizeof(h->drop_next));
	memset(h->held_len, 0, sizeof(h->held_len));
	h->sent = h->received = h->lost = h->dropped = h->lost_events = 0;
	err = sn_host_create(&attr, host, &h->fabric);
	for (int p = 1; !err && p <= SS_NICS; p++) {
		err = open_wire(h, p);
		h->last_heard_ns[p] = now_ns();
	}
	if (!err)
		err = ctl_len ? ss_control_open(h, &ctl, ctl_len) : ENAMETOOLONG;
	if (!err) {
		h->running = 1;
		err = pthread_create(&h->thread, NULL, progress_thread, h);
		if (err)
			h->running = 0;
	}
	if (err)
		close_host(h);
	return err;
}

/* socket mode's host, opened by its first context: 0 or an errno */
static int socket_host_get(int host)
{
	ss_sn = ss_own_ops();
	if (the_host.refs && the_host.host != host)
		return EINVAL;
	if (!the_host.refs)
		return open_host(&the_host, host);
	return 0;
}

static void say_why(int host, int err)
{
	char h = host == SN_HOST_A ? 'A' : 'B';

	if (err == EADDRINUSE)
		fprintf(stderr, "shiftsim: host %c of fabric '%s' runs in another process already "
			"(one process per host: give this pair its own SHIFT_SIM_FABRIC)\n", h,
			fabric_name());
	else if (err == ENODEV && ss_lockstep_mode())
		fprintf(stderr, "shiftsim: lock-step mode (SHIFT_SIM_LOCKSTEP=1): no fabric "
			"attached yet (shiftsim_lockstep_attach)\n");
	else
		fprintf(stderr, "shiftsim: cannot open host %c: %s\n", h, strerror(err));
}

struct ss_host *ss_host_get(int host, int *err)
{
	struct ss_host *h = NULL;

	pthread_mutex_lock(&ss_lock);
	if (ss_lockstep_mode()) {
		h = ss_lockstep_host(host, err);
	} else {
		*err = socket_host_get(host);
		if (!*err) {
			the_host.refs++;
			h = &the_host;
		}
	}
	pthread_mutex_unlock(&ss_lock);
	if (!h)
		say_why(host, *err);
	return h;
}

void ss_host_put(struct ss_host *h)
{
	pthread_mutex_lock(&ss_lock);
	if (h->lockstep)
		ss_lockstep_put(h);
	else if (--h->refs == 0)
		close_host(h);
	pthread_mutex_unlock(&ss_lock);
}

struct ss_host *ss_host_lock(void)
{
	pthread_mutex_lock(&ss_lock);
	return ss_lockstep_mode() ? ss_lockstep_first() : &the_host;
}

struct ss_host *ss_host_lock_ctx(struct ibv_context *ctx)
{
	pthread_mutex_lock(&ss_lock);
	return to_ss_context(ctx)->host;
}

void ss_host_unlock(void)
{
	pthread_mutex_unlock(&ss_lock);
}

static int out_dir(const struct ss_host *h)
{
	return h->host == SN_HOST_A ? SN_AtoB : SN_BtoA;
}

/* Is the packet for a QP of this host (a program's loopback: its QPs talk to each
 * other over one NIC)? QP numbers say which host they are on (SN_QPN_HOST_B). */
static int for_this_host(const struct ss_host *h, const uint8_t *pkt)
{
	uint32_t qpn = (uint32_t)pkt[4] | (uint32_t)pkt[5] << 8 | (uint32_t)pkt[6] << 16 |
		       (uint32_t)pkt[7] << 24;

	return (qpn >= SN_QPN_HOST_B) == (h->host == SN_HOST_B);
}

/* one packet to the peer: 1 sent (or lost: the peer is gone), 0 if its socket is full */
static int send_one(struct ss_host *h, int path, const uint8_t *pkt, int n)
{
	if (sendto(h->sock[path], pkt, (size_t)n, 0, (struct sockaddr *)&h->peer[path],
		   h->peer_len[path]) == n) {
		h->sent++;
		return 1;
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)
		return 0;
	h->lost++; /* no peer (not started, or gone): as on a wire to nothing */
	return 1;
}

/* what the host's NIC sent on path leaves by the socket, or comes back to it */
static int send_out(struct ss_host *h, int path)
{
	uint8_t *pkt = h->held[path];
	int moved = 0, n;

	if (h->held_len[path]) {
		if (!send_one(h, path, pkt, h->held_len[path]))
			return 0;
		h->held_len[path] = 0;
		moved++;
	}
	while (sn_transmit(h->fabric, h->host, path) > 0)
		moved++;
	while ((n = sn_wire_take(h->fabric, path, out_dir(h), pkt, SN_WIRE_MAX)) > 0) {
		moved++;
		if (for_this_host(h, pkt)) {
			if (sn_wire_put(h->fabric, path, !out_dir(h), pkt, (uint32_t)n) == 0)
				sn_deliver(h->fabric, path, !out_dir(h));
		} else if (!send_one(h, path, pkt, n)) {
			h->held_len[path] = n; /* held back until the peer has room */
			break;
		}
	}
	return moved;
}

/* what reached the host's end of path is delivered to its NIC */
static int take_in(struct ss_host *h, int path)
{
	uint8_t pkt[SN_WIRE_MAX];
	int in_dir = !out_dir(h), moved = 0;
	ssize_t n;

	while ((n = recv(h->sock[path], pkt, sizeof(pkt), MSG_DONTWAIT)) > 0) {
		h->received++;
		h->last_heard_ns[path] = now_ns();
		if (h->drop_next[path]) { /* `shift drop`: lost on arrival */
			h->drop_next[path]--;
			h->dropped++;
		} else if (sn_wire_put(h->fabric, path, in_dir, pkt, (uint32_t)n) == 0)
			sn_deliver(h->fabric, path, in_dir);
		moved++;
	}
	return moved;
}

/* RC's retransmission timer: nothing heard on a path for SS_RETRY_NS while a QP waits
 * for an ACK there, its NIC goes back (sn_timeout acts only on QPs that wait) */
static void expire(struct ss_host *h, int path)
{
	uint64_t now = now_ns();

	if (now - h->last_heard_ns[path] < SS_RETRY_NS)
		return;
	h->last_heard_ns[path] = now;
	sn_timeout(h->fabric, h->host, path);
}

void ss_progress(struct ss_host *h)
{
	int moved;

	if (!h->fabric || h->lockstep) /* (lock-step: the caller moves the wire) */
		return;
	do {
		moved = 0;
		for (int p = 1; p <= SS_NICS; p++)
			moved += send_out(h, p) + take_in(h, p);
	} while (moved);
	for (int p = 1; p <= SS_NICS; p++)
		expire(h, p);
	ss_cq_events(h); /* a completion of an armed CQ: its channel's event */
}

/* the NIC's own work: wake on a packet, on room for a held one, or on the tick; move
 * the wire; ask to be woken for what it holds */
static void *progress_thread(void *arg)
{
	struct ss_host *h = arg;
	struct pollfd fds[SS_NICS + 1];

	for (;;) {
		pthread_mutex_lock(&ss_lock);
		if (!h->running) {
			pthread_mutex_unlock(&ss_lock);
			return NULL;
		}
		ss_control_take(h);
		ss_progress(h);
		for (int p = 1; p <= SS_NICS; p++)
			fds[p - 1] = (struct pollfd){.fd = h->sock[p], .events = POLLIN |
						     (h->held_len[p] ? POLLOUT : 0)};
		fds[SS_NICS] = (struct pollfd){.fd = h->ctl_sock, .events = POLLIN};
		pthread_mutex_unlock(&ss_lock);
		poll(fds, SS_NICS + 1, SS_TICK_MS);
	}
}
