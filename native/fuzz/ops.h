/* ops.h - the fuzz target's steps, one call (or one application step) each. */
#ifndef FUZZ_OPS_H
#define FUZZ_OPS_H

#include "world.h"

/* ops_simnic.c: fabrics, raw CQs, QPs and MRs, the wire, faults */
void op_fabric_create(void);
void op_fabric_destroy(void);
void op_fabric_queries(void);
void op_reg_mr(void);
void op_mr_keys(void);
void op_dereg_mr(void);
void op_create_cq(void);
void op_destroy_cq(void);
void op_poll_raw_cq(void);
void op_create_qp(void);
int owned_qp(sn_qp q);
void op_destroy_qp(void);
uint32_t pick_qpn(void);
void op_modify_qp(void);
void op_query_qp(void);
void op_connect_qps(void);
void op_reconnect(void);
void op_post_raw_send(void);
void op_post_raw_recv(void);
void op_ring(void);
uint32_t make_ctl(uint8_t *msg);
void op_ctl_send_raw(void);
void op_set_handler(void);
void op_wire(void);
void op_fault(void);
void link_set(fz_fab *f, int path, int up);
void nic_set(fz_fab *f, int host, int nic, int up);
void read_events(fz_fab *f, int host, int nic, int r, int ev);

/* ops_ud.c: a UD pair's traffic on a two-host fabric, torn down after */
void ud_traffic(sn_fabric h);

/* ops_layer.c: connections and endpoints */
void op_sim_connect(void);
void drop_shared_cqs(fz_fab *f, int busy);
fz_conn *conn_of(shift_conn h);
void op_sim_close(void);
void op_sim_misc(void);
void op_sim_reg_mr(void);
void op_ep_create(void);
void op_ep_destroy(void);
void op_ep_post_send(void);
void op_ep_post_recv(void);
void op_ep_poll(void);
void op_ep_step(void);
void op_ctl_input(void);
void op_ep_keys(void);
void op_ep_query(void);
void ep_async(shift_ep h, int path);

/* ops_app.c: what an application does, in few bytes */
void op_traffic_on(fz_conn *c);
void settle_conn(fz_conn *c, int rounds, int timers);
void op_traffic(void);
void op_raw_traffic(void);
void op_failover_cycle(void);
void op_qp_walk(void);
void op_settle(void);

extern const int fz_errnos[7]; /* the errnos an injected failure takes */

#endif
