/*
 * world.h - what the fuzz harness has made and what it expects of it: fabrics with
 * their fault state, connections and their endpoints, lone endpoints over the hostile
 * backend, raw simnic objects, and the registry of every WR id posted.
 */
#ifndef FUZZ_WORLD_H
#define FUZZ_WORLD_H

#include "input.h"
#include "script_backend.h"
#include "shift_sim.h"

enum { NFAB = 2, NCONN = 3, NLONE = 2, NRAW = 6, MAXID = 1 << 14, MAXCHAIN = 10 };

/* what the harness expects of an endpoint's answers */
typedef struct {
    shift_ep h;
    int live;
    int owner;                 /* the owner tag of its WR ids */
    uint32_t cap;              /* its queue capacity in its role */
    int check_ids;             /* its completions carry the harness's ids (not forged) */
    int have_last;
    struct shift_ep_info last; /* for "counters never go back" */
    uint32_t events[3];        /* a connection's: its NICs' deaths it has not read (every
                                * endpoint on a NIC reads each; a reconnect reads them
                                * unseen, so it is an upper bound) */
} fz_ep;

typedef struct {
    sn_fabric h;
    int live;
    uint8_t *mem[2];
    size_t size;
    int link[3];               /* the faults the harness injected, path by path */
    int alive[2][3];
    int fatal;                 /* device_fatal: a NIC that dies raises an event */
    uint32_t events[2][3];     /* its NICs' deaths sn_async_event has not read */
    uint32_t actives[2][3];    /* ... and their ports' returns to ACTIVE (read after them) */
    struct sn_counters last;
    shift_cq cq[2];            /* each host's shared CQ pair, made at the first
                                * connection on it (shift_sim_connect_on_cq) */
} fz_fab;

typedef struct {
    shift_conn h;
    int live, fab;
    fz_ep ep[2];
    struct shift_mr_keys keys[2];
    int nkeys;
    sn_qp qp[2][3];            /* its QPs, once shift_sim_qp has handed them out */
    int on_cq;                 /* its endpoints are on their fabric's shared CQ pairs */
} fz_conn;

typedef struct {
    fz_script ctx;
    fz_ep ep;
} fz_lone;

typedef struct {
    sn_qp qp;
    int qp_live, qp_fab;
    sn_cq cq;
    int cq_live, cq_fab;
    sn_mr mr;
    int mr_live, mr_fab;
    uint32_t lkey, rkey;
} fz_raw;

enum { ID_FREE = 0, ID_POSTED = 1, ID_DONE = 2, ID_REJECTED = 3 };
enum { KIND_SEND = 1, KIND_RECV = 2 };

typedef struct {
    uint8_t kind, state, wild; /* wild: posted in a cycle, how often is unknown */
    int owner;
} fz_id;

typedef struct {
    fz_in *in;
    fz_fab fab[NFAB];
    fz_conn conn[NCONN];
    fz_lone lone[NLONE];
    fz_script cq_ctx;          /* the lone endpoints' shared CQ pair (fz_script_ops_cq) */
    shift_cq lone_cq;
    fz_raw raw[NRAW];
    fz_id id[MAXID];
    uint32_t nid;
    int depth;                 /* inside a control handler */
    uint8_t scratch[SHIFT_MAX_MSG];
} fz_world;

extern fz_world *W;

/* the checks; a failed one reports and aborts (libFuzzer keeps the input) */
void fz_fail(const char *what, long a, long b);
#define FZ_CHECK(c, a, b)                                                                 \
    do {                                                                                  \
        if (!(c))                                                                         \
            fz_fail(#c, (long)(a), (long)(b));                                            \
    } while (0)

/* args.c */
enum { T_FAB, T_CQ, T_QP, T_MR, T_EP, T_CONN, T_NTYPES };
enum { OWNER_RAW = 1, OWNER_CONN = 16, OWNER_LONE = 64 };
void *held_handle(int t, unsigned i);
void *pick(int t);
int pick_host(void);
int pick_path(void);
fz_fab *fab_of(sn_fabric h);
fz_ep *ep_of(shift_ep h);
int raw_qp_of(sn_qp h);
uint64_t pick_addr(uint32_t len, int readable);
uint32_t pick_key(void);
uint64_t new_id(int kind, int owner);
void settle_ids(void *const *nodes, const uint64_t *ids, int n, int unknown, int err,
                const void *bad, int strict);
int make_send_chain(int owner, int *cyc);
int make_recv_chain(int owner, int *cyc);
void took(int owner, const struct shift_wc *wc, int n, int check_ids);
extern struct shift_send_wr swr[MAXCHAIN];
extern struct shift_recv_wr rwr[MAXCHAIN];
extern uint64_t chain_ids[MAXCHAIN];
extern void *const send_nodes[MAXCHAIN];
extern void *const recv_nodes[MAXCHAIN];

/* ops.c: one call of the API, chosen and argued by the input */
void run_op(void);
extern int fz_trace; /* FZ_TRACE=1: print each step and what it returned */
void fz_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* checks.c */
void check_world(void);
void check_completion(int owner, const struct shift_wc *wc, int check_ids);
void check_ep(fz_ep *e);

#endif
