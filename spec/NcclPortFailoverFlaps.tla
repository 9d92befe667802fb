------------------------- MODULE NcclPortFailoverFlaps -------------------------
(***************************************************************************)
(* NcclPortFailover with links that come back: NCCL with port failover   *)
(* and without port recovery, on a fabric whose failed links return (a   *)
(* flap). Nothing in NCCL acts on a link's return without recovery: a    *)
(* device marked failed stays so and its QPs stay in ERR; a QP that never *)
(* failed (on the side that saw no error) carries traffic again.         *)
(***************************************************************************)
EXTENDS NcclPortProperties

N == [recovery |-> FALSE, flaps |-> TRUE]

Next == PortNext(N)
Spec == Init /\ [][Next]_vars /\ PortFairness(N)
\* Without fairness: Terminates under it says the state graph has no cycle.
Unfair == Init /\ [][Next]_vars
\* RequestsComplete and FailBack as invariants (NcclPortProperties, StuckComplete).
RequestsCompleteWhenStuck == StuckComplete(N)
FailBackWhenStuck == StuckFailBack(N)
=============================================================================
