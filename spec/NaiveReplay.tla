----------------------------- MODULE NaiveReplay -----------------------------
(***************************************************************************)
(* Replay every outstanding WR on the backup path: no counters, no      *)
(* refusal. A notification that was received but not acknowledged is   *)
(* delivered again and consumes the next receive WR (queue sliding).    *)
(***************************************************************************)
EXTENDS Properties

D == [failover |-> TRUE, skip |-> "none", refuseAtomics |-> FALSE, failBack |-> FALSE,
      readsResponder |-> FALSE, staged |-> FALSE]

Next == FailoverNext(D)          \* System(D) \/ Environment (Failover.tla)
Fairness == FailoverFairness(D)  \* System(D) weakly fair, its handshake timer strongly
Spec == Init /\ [][Next]_vars /\ Fairness
=============================================================================
