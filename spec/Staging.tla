------------------------------- MODULE Staging -------------------------------
(***************************************************************************)
(* Drop zero-copy: payloads land in a staging buffer and the receiver's *)
(* CPU copies each into place once, by sequence number, so replaying    *)
(* every outstanding WR is harmless. Exactly-once and opacity hold.     *)
(***************************************************************************)
EXTENDS Properties

D == [failover |-> TRUE, skip |-> "none", refuseAtomics |-> FALSE, failBack |-> FALSE,
      readsResponder |-> FALSE, staged |-> TRUE]

Next == FailoverNext(D)          \* System(D) \/ Environment (Failover.tla)
Fairness == FailoverFairness(D)  \* System(D) weakly fair, its handshake timer strongly
Spec == Init /\ [][Next]_vars /\ Fairness
=============================================================================
