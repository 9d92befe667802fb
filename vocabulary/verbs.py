"""The verbs' words the specification and the implementation share: the operations of a
work request and the statuses of a work completion.

Names only. Their numbers are the C headers' (`enum shift_wr_opcode`, `enum
shift_wc_status` in native/include/shift_verbs.h); `shift.impl.verbs` pairs each name with
its number from the compiled library.
"""

from __future__ import annotations

# The operations of Workloads.tla's WRs. A notification (WRITE_IMM, SEND) carries its WR
# id as immediate data, so the differential bridge posts the spec's SEND as SEND_IMM.
OPS = ("WRITE", "WRITE_IMM", "SEND", "READ", "FADD", "CAS")

# The operations the library posts, as verbs has them: the spec's, where SEND is verbs'
# plain SEND (no immediate data), and SEND_IMM, verbs' SEND_WITH_IMM. Both are
# notifications to the layer (they consume a receive WR: exactly once, in order).
LIBRARY_OPS = (*OPS, "SEND_IMM")

# Work completion statuses: `ibv_wc_status`'s names, in its order. The specification
# produces five (SUCCESS, RETRY_EXC_ERR, WR_FLUSH_ERR, and the application errors LOC_PROT_ERR and
# REM_ACCESS_ERR of a WR with a bad key); an application of the C core may
# poll any of them, and the observation carries the name.
STATUSES = (
    "SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR",
    "WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR",
    "REM_ACCESS_ERR", "REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR",
    "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR", "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR",
    "RESP_TIMEOUT_ERR", "GENERAL_ERR",
)
