-------------------------------- MODULE Shift --------------------------------
(***************************************************************************)
(* SHIFT (arXiv 2512.11094). It refuses to fail over with an atomic      *)
(* outstanding, replays from the first failed WR in post order, skips   *)
(* the notifications the peer's receive counter shows as received, and  *)
(* fails back behind a fence. WRITEs may execute twice: the trilemma.   *)
(***************************************************************************)
EXTENDS Properties

D == [failover |-> TRUE, skip |-> "counter", refuseAtomics |-> TRUE, failBack |-> TRUE,
      readsResponder |-> FALSE, staged |-> FALSE]

Next == FailoverNext(D)          \* System(D) \/ Environment (Failover.tla)
Fairness == FailoverFairness(D)  \* System(D) weakly fair, its handshake timer strongly
Spec == Init /\ [][Next]_vars /\ Fairness
=============================================================================
