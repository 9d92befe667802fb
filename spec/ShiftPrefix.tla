----------------------------- MODULE ShiftPrefix -----------------------------
(***************************************************************************)
(* SHIFT with one change to its replay filter (docs/findings.md, F3):   *)
(* besides the notifications the peer's receive counter shows as        *)
(* received, it skips every outstanding WR posted before the last of    *)
(* them. RC executes in post order, so those WRs have executed; SHIFT as *)
(* published re-posts the one-sided ones, which can write stale data    *)
(* under a notification the receiver has not polled yet, and complete   *)
(* out of post order when the backup path fails. WRITEs after the last  *)
(* received notification are still replayed: exactly-once stays lost.  *)
(***************************************************************************)
EXTENDS Properties

D == [failover |-> TRUE, skip |-> "prefix", refuseAtomics |-> TRUE, failBack |-> TRUE,
      readsResponder |-> FALSE, staged |-> FALSE]

Next == FailoverNext(D)          \* System(D) \/ Environment (Failover.tla)
Fairness == FailoverFairness(D)  \* System(D) weakly fair, its handshake timer strongly
Spec == Init /\ [][Next]_vars /\ Fairness
=============================================================================
