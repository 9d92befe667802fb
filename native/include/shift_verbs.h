/*
 * shift_verbs.h - the verbs-like vocabulary shared by simnic (the software RC NIC)
 * and the SHIFT failover core: work requests, completions, status codes, access
 * flags and QP states. Numeric values follow libibverbs (ibv_wc_status,
 * ibv_wr_opcode, ibv_wc_opcode, ibv_send_flags, ibv_access_flags, ibv_qp_state)
 * so that a libibverbs backend can pass them through unchanged.
 *
 * The library is single-threaded: callers serialise every call (no locks inside).
 */
#ifndef SHIFT_VERBS_H
#define SHIFT_VERBS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CDEF-BEGIN */
enum shift_wc_status {
    SHIFT_WC_SUCCESS = 0,
    SHIFT_WC_LOC_LEN_ERR = 1,
    SHIFT_WC_LOC_QP_OP_ERR = 2,
    SHIFT_WC_LOC_EEC_OP_ERR = 3,
    SHIFT_WC_LOC_PROT_ERR = 4,
    SHIFT_WC_WR_FLUSH_ERR = 5,
    SHIFT_WC_MW_BIND_ERR = 6,
    SHIFT_WC_BAD_RESP_ERR = 7,
    SHIFT_WC_LOC_ACCESS_ERR = 8,
    SHIFT_WC_REM_INV_REQ_ERR = 9,
    SHIFT_WC_REM_ACCESS_ERR = 10,
    SHIFT_WC_REM_OP_ERR = 11,
    SHIFT_WC_RETRY_EXC_ERR = 12,
    SHIFT_WC_RNR_RETRY_EXC_ERR = 13,
    SHIFT_WC_LOC_RDD_VIOL_ERR = 14,
    SHIFT_WC_REM_INV_RD_REQ_ERR = 15,
    SHIFT_WC_REM_ABORT_ERR = 16,
    SHIFT_WC_INV_EECN_ERR = 17,
    SHIFT_WC_INV_EEC_STATE_ERR = 18,
    SHIFT_WC_FATAL_ERR = 19,
    SHIFT_WC_RESP_TIMEOUT_ERR = 20,
    SHIFT_WC_GENERAL_ERR = 21
};

enum shift_wr_opcode {
    SHIFT_WR_RDMA_WRITE = 0,
    SHIFT_WR_RDMA_WRITE_WITH_IMM = 1,
    SHIFT_WR_SEND = 2,
    SHIFT_WR_SEND_WITH_IMM = 3,
    SHIFT_WR_RDMA_READ = 4,
    SHIFT_WR_ATOMIC_CMP_AND_SWP = 5,
    SHIFT_WR_ATOMIC_FETCH_AND_ADD = 6
};

enum shift_wc_opcode {
    SHIFT_WC_SEND = 0,
    SHIFT_WC_RDMA_WRITE = 1,
    SHIFT_WC_RDMA_READ = 2,
    SHIFT_WC_COMP_SWAP = 3,
    SHIFT_WC_FETCH_ADD = 4,
    SHIFT_WC_RECV = 128,
    SHIFT_WC_RECV_RDMA_WITH_IMM = 129
};

enum shift_wc_flags {
    SHIFT_WC_WITH_IMM = 2
};

enum shift_send_flags {
    SHIFT_SEND_FENCE = 1,
    SHIFT_SEND_SIGNALED = 2,
    SHIFT_SEND_SOLICITED = 4,
    SHIFT_SEND_INLINE = 8,
    /* SHIFT layer: the application marks this WR as not safe to re-execute on
     * another path; a failover with it outstanding is refused (like an atomic). */
    SHIFT_SEND_INELIGIBLE = 256,
    /* backend use: write the WQE but do not ring the doorbell (see *_ring). */
    SHIFT_SEND_NO_DOORBELL = 512
};

enum shift_access_flags {
    SHIFT_ACCESS_LOCAL_WRITE = 1,
    SHIFT_ACCESS_REMOTE_WRITE = 2,
    SHIFT_ACCESS_REMOTE_READ = 4,
    SHIFT_ACCESS_REMOTE_ATOMIC = 8
};

enum shift_qp_state {
    SHIFT_QPS_RESET = 0,
    SHIFT_QPS_INIT = 1,
    SHIFT_QPS_RTR = 2,
    SHIFT_QPS_RTS = 3,
    SHIFT_QPS_SQD = 4,
    SHIFT_QPS_SQE = 5,
    SHIFT_QPS_ERR = 6
};

/* Largest inline payload, largest message. simnic carries a message as one packet of its
 * wire (whose datagrams are not held to the 4096-byte MTU the verbs port reports): the
 * verbs provider must report a max_msg_sz above 4 KiB (rdma-core's test_query_port). */
enum shift_limits {
    SHIFT_MAX_INLINE = 64,
    SHIFT_MAX_MSG = 65536
};

/* One scatter/gather element. addr is a pointer into the host's memory, as in verbs. */
struct shift_sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
};

/* A send work request (ibv_send_wr with one SGE). next chains a list for one post. */
struct shift_send_wr {
    uint64_t wr_id;
    struct shift_send_wr *next;
    struct shift_sge sg;
    int num_sge;            /* 0 or 1 */
    int opcode;             /* enum shift_wr_opcode */
    unsigned int send_flags;/* enum shift_send_flags */
    uint32_t imm_data;      /* WRITE_WITH_IMM, SEND_WITH_IMM */
    uint64_t remote_addr;   /* RDMA and atomics */
    uint32_t rkey;
    uint64_t compare_add;   /* FADD: the addend; CAS: the compare value */
    uint64_t swap;          /* CAS: the swap value */
};

/* A receive work request (ibv_recv_wr with one SGE). */
struct shift_recv_wr {
    uint64_t wr_id;
    struct shift_recv_wr *next;
    struct shift_sge sg;
    int num_sge;            /* 0 or 1 */
};

/* A work completion (ibv_wc). */
struct shift_wc {
    uint64_t wr_id;
    int status;             /* enum shift_wc_status */
    int opcode;             /* enum shift_wc_opcode */
    uint32_t vendor_err;
    uint32_t byte_len;
    uint32_t imm_data;
    uint32_t qp_num;
    unsigned int wc_flags;  /* enum shift_wc_flags */
    uint32_t src_qp;        /* a UD receive: the sending QP's number (0 otherwise) */
};

/* The name of a completion status, as ibv_wc_status_str; "UNKNOWN" out of range. */
const char *shift_wc_status_str(int status);
/* The verbs name ("RETRY_EXC_ERR") of a status; NULL out of range. */
const char *shift_wc_status_name(int status);
/* The name of a QP state ("RTS"); NULL out of range. */
const char *shift_qp_state_name(int state);
/* Check a send WR as a NIC driver's post would: 0 or EINVAL. */
int shift_send_wr_check(const struct shift_send_wr *wr, uint32_t max_inline);
/* CDEF-END */

#ifdef __cplusplus
}
#endif
#endif
