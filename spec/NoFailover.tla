------------------------------ MODULE NoFailover ------------------------------
(***************************************************************************)
(* Plain RC: the error completion goes to the application. Nothing runs *)
(* twice, and nothing finishes once the default path is gone.           *)
(***************************************************************************)
EXTENDS Properties

D == [failover |-> FALSE, skip |-> "none", refuseAtomics |-> FALSE, failBack |-> FALSE,
      readsResponder |-> FALSE, staged |-> FALSE]

Next == FailoverNext(D)          \* System(D) \/ Environment (Failover.tla)
Fairness == FailoverFairness(D)  \* System(D) weakly fair, its handshake timer strongly
Spec == Init /\ [][Next]_vars /\ Fairness
=============================================================================
