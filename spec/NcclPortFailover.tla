---------------------------- MODULE NcclPortFailover ----------------------------
(***************************************************************************)
(* NCCL's IB port failover without port recovery                         *)
(* (NCCL_IB_RESILIENCY_PORT_FAILOVER=1, _PORT_RECOVERY=0), from NVIDIA/  *)
(* nccl at 5067397c: a failed device's lanes move to the other device,   *)
(* a failed send is probed and its missing chunks resent; the device is  *)
(* never used again.                                                      *)
(***************************************************************************)
EXTENDS NcclPortProperties

N == [recovery |-> FALSE, flaps |-> FALSE]

Next == PortNext(N)
Spec == Init /\ [][Next]_vars /\ PortFairness(N)
\* Without fairness: Terminates under it says the state graph has no cycle.
Unfair == Init /\ [][Next]_vars
\* RequestsComplete and FailBack as invariants (NcclPortProperties, StuckComplete).
RequestsCompleteWhenStuck == StuckComplete(N)
FailBackWhenStuck == StuckFailBack(N)
=============================================================================
