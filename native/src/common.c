/* common.c - the handle table and the verbs vocabulary's helpers. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>

typedef struct {
    void *obj;
    uint32_t gen;
    int type;
} hslot;

static hslot *g_slot;
static uint32_t g_n, g_cap, g_free = UINT32_MAX;

uint64_t h_new(void *obj, int type)
{
    uint32_t i;
    if (g_free != UINT32_MAX) {
        i = g_free;
        g_free = (uint32_t)(uintptr_t)g_slot[i].obj;
    } else {
        if (g_n == g_cap) {
            uint32_t cap = g_cap ? g_cap * 2 : 64;
            hslot *s = realloc(g_slot, cap * sizeof *s);
            if (!s)
                return 0;
            g_slot = s;
            g_cap = cap;
        }
        i = g_n++;
        g_slot[i].gen = 0;
    }
    g_slot[i].gen++;
    if (g_slot[i].gen == 0)
        g_slot[i].gen = 1;
    g_slot[i].obj = obj;
    g_slot[i].type = type;
    return ((uint64_t)g_slot[i].gen << 32) | i;
}

void *h_get(const void *handle, int type)
{
    uint64_t h = (uint64_t)(uintptr_t)handle;
    uint32_t i = (uint32_t)h, gen = (uint32_t)(h >> 32);
    if (gen == 0 || i >= g_n || g_slot[i].gen != gen || g_slot[i].type != type)
        return NULL;
    return g_slot[i].obj;
}

void h_free(uint64_t h)
{
    uint32_t i = (uint32_t)h, gen = (uint32_t)(h >> 32);
    if (gen == 0 || i >= g_n || g_slot[i].gen != gen || g_slot[i].type == 0)
        return;
    g_slot[i].type = 0;
    g_slot[i].obj = (void *)(uintptr_t)g_free;
    g_free = i;
}

static const char *const status_names[] = {
    "SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR",
    "WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR",
    "REM_ACCESS_ERR", "REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR",
    "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR", "INV_EECN_ERR",
    "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR",
};

static const char *const status_strs[] = {
    "success", "local length error", "local QP operation error",
    "local EE context operation error", "local protection error", "Work Request Flushed Error",
    "memory management operation error", "bad response error", "local access error",
    "remote invalid request error", "remote access error", "remote operation error",
    "transport retry counter exceeded", "RNR retry counter exceeded",
    "local RDD violation error", "remote invalid RD request", "operation aborted",
    "invalid EE context number", "invalid EE context state", "fatal error",
    "response timeout error", "general error",
};

const char *shift_wc_status_name(int s)
{
    if (s < 0 || s > SHIFT_WC_GENERAL_ERR)
        return NULL;
    return status_names[s];
}

const char *shift_wc_status_str(int s)
{
    if (s < 0 || s > SHIFT_WC_GENERAL_ERR)
        return "unknown";
    return status_strs[s];
}

const char *shift_qp_state_name(int s)
{
    static const char *const n[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    if (s < 0 || s > SHIFT_QPS_ERR)
        return NULL;
    return n[s];
}

int shift_send_wr_check(const struct shift_send_wr *wr, uint32_t max_inline)
{
    const unsigned known = SHIFT_SEND_FENCE | SHIFT_SEND_SIGNALED | SHIFT_SEND_SOLICITED |
                           SHIFT_SEND_INLINE | SHIFT_SEND_INELIGIBLE | SHIFT_SEND_NO_DOORBELL;
    if (!wr)
        return EINVAL;
    if (wr->opcode < SHIFT_WR_RDMA_WRITE || wr->opcode > SHIFT_WR_ATOMIC_FETCH_AND_ADD)
        return EINVAL;
    if (wr->send_flags & ~known)
        return EINVAL;
    if (wr->num_sge < 0 || wr->num_sge > 1)
        return EINVAL;
    uint32_t len = wr->num_sge ? wr->sg.length : 0;
    if (len > SHIFT_MAX_MSG)
        return EINVAL;
    if (wr->send_flags & SHIFT_SEND_INLINE) {
        if (wr->opcode != SHIFT_WR_RDMA_WRITE && wr->opcode != SHIFT_WR_RDMA_WRITE_WITH_IMM &&
            wr->opcode != SHIFT_WR_SEND && wr->opcode != SHIFT_WR_SEND_WITH_IMM)
            return EINVAL;
        if (len > max_inline || len > SHIFT_MAX_INLINE)
            return EINVAL;
        if (len && !wr->sg.addr)
            return EINVAL;
    }
    return 0;
}
