/*
 * simnic_ops.c - simnic's entry points as a table (struct sn_ops, simnic.h): the way
 * code that holds another copy's handles calls that copy (a verbs provider linked to
 * libshift.so acting on a fabric the Python extension made).
 */
#include "simnic_internal.h"

void sn_get_ops(struct sn_ops *out)
{
    if (!out)
        return;
    *out = (struct sn_ops){
        .size = sizeof(struct sn_ops),
        .fabric_create = sn_fabric_create,
        .host_create = sn_host_create,
        .fabric_destroy = sn_fabric_destroy,
        .host_mem = sn_host_mem,
        .counters_get = sn_counters_get,
        .reg_mr = sn_reg_mr,
        .mr_keys = sn_mr_keys,
        .dereg_mr = sn_dereg_mr,
        .create_cq = sn_create_cq,
        .destroy_cq = sn_destroy_cq,
        .poll_cq = sn_poll_cq,
        .create_qp = sn_create_qp,
        .create_ud_qp = sn_create_ud_qp,
        .destroy_qp = sn_destroy_qp,
        .modify_qp = sn_modify_qp,
        .query_qp = sn_query_qp,
        .post_send = sn_post_send,
        .post_send_ud = sn_post_send_ud,
        .post_recv = sn_post_recv,
        .transmit = sn_transmit,
        .deliver = sn_deliver,
        .timeout = sn_timeout,
        .link_down = sn_link_down,
        .link_up = sn_link_up,
        .nic_fail = sn_nic_fail,
        .nic_recover = sn_nic_recover,
        .async_event = sn_async_event,
        .wire_take = sn_wire_take,
        .wire_put = sn_wire_put,
        .nic_alive = sn_nic_alive,
        .link_is_up = sn_link_is_up,
    };
}
