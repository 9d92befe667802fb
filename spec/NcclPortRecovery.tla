---------------------------- MODULE NcclPortRecovery ----------------------------
(***************************************************************************)
(* NCCL's IB port failover with port recovery                             *)
(* (NCCL_IB_RESILIENCY_PORT_FAILOVER=1, _PORT_RECOVERY=1), from NVIDIA/  *)
(* nccl at 5067397c: as NcclPortFailover, and each side runs the alive/  *)
(* ACK/final-ACK handshake for a failed device in its recovery thread;   *)
(* on success the main thread gives the device its lanes back.           *)
(***************************************************************************)
EXTENDS NcclPortProperties

N == [recovery |-> TRUE, flaps |-> FALSE]

Next == PortNext(N)
Spec == Init /\ [][Next]_vars /\ PortFairness(N)
\* Without fairness: Terminates under it says the state graph has no cycle.
Unfair == Init /\ [][Next]_vars
\* RequestsComplete and FailBack as invariants (NcclPortProperties, StuckComplete).
RequestsCompleteWhenStuck == StuckComplete(N)
FailBackWhenStuck == StuckFailBack(N)
=============================================================================
