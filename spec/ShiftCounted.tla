---------------------------- MODULE ShiftCounted ----------------------------
(***************************************************************************)
(* ShiftPrefix whose sender keeps each notification the peer ACKed on    *)
(* the default path until a counter of the peer covers it (docs/         *)
(* findings.md, F7; not one ACKed on the backup path: F9). An ACK says   *)
(* that the peer's NIC executed the notification, not that the peer's    *)
(* layer counted it: with AckBeforeCqe the receive completion may die    *)
(* with the NIC. A failover replays, first, the kept notifications its  *)
(* counter does not cover; their completions the layer drops, since the *)
(* application already had their success. WRITEs after the last received *)
(* notification are still replayed: exactly-once stays lost.            *)
(***************************************************************************)
EXTENDS Properties

D == [failover |-> TRUE, skip |-> "prefix", refuseAtomics |-> TRUE, failBack |-> TRUE,
      readsResponder |-> FALSE, staged |-> FALSE, keepNotes |-> TRUE]

Next == FailoverNext(D)          \* System(D) \/ Environment (Failover.tla)
Fairness == FailoverFairness(D)  \* System(D) weakly fair, its handshake timer strongly
Spec == Init /\ [][Next]_vars /\ Fairness
=============================================================================
