---------------------------- MODULE ReceiverQuery ----------------------------
(***************************************************************************)
(* Drop receiver-NIC opacity: the layer reads the responder NIC's       *)
(* expected PSN on the default QP (a NIC that exposes its transport     *)
(* state, even once dead) and re-posts exactly the WRs it did not       *)
(* execute. Exactly-once and zero-copy both hold.                       *)
(***************************************************************************)
EXTENDS Properties

D == [failover |-> TRUE, skip |-> "psn", refuseAtomics |-> FALSE, failBack |-> FALSE,
      readsResponder |-> TRUE, staged |-> FALSE]

Next == FailoverNext(D)          \* System(D) \/ Environment (Failover.tla)
Fairness == FailoverFairness(D)  \* System(D) weakly fair, its handshake timer strongly
Spec == Init /\ [][Next]_vars /\ Fairness
=============================================================================
