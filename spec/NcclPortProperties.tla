-------------------------- MODULE NcclPortProperties --------------------------
(***************************************************************************)
(* What is checked of the NCCL port failover and recovery model. These   *)
(* are the NCCL designs' own properties (designs.toml: each NCCL design  *)
(* lists them), not those of Properties.tla.                             *)
(***************************************************************************)
EXTENDS NcclPortProbe

\* A receive completes only when every chunk of its buffer was written by it.
ReceiveIntegrity == \A r \in Reqs : rDone[r] => \A l \in Lanes : buf[r][l] = r

\* No data or notification (imm) of a request lands after its receive completed.
NoLateLanding == ~late

\* No ncclInternalError and no failed assert while some rail's link is up.
NoErrorWhileHealthy ==
    ((\E h \in Sides : err[h] = "internal") \/ aborted) => \A d \in Devs : ~link[d]

\* Once both sides' recovery of a device ended, and each main thread acted on the
\* outcome, they agree on whether the device is usable.
Settled(d) ==
    /\ rec["S"][d].ended /\ rec["R"][d].ended
    /\ devS[d] \in {"Ok", "ErrorPermanent"} /\ devR[d] \in {"Ok", "ErrorPermanent"}
RecoveryAgreement == \A d \in Devs : Settled(d) => devS[d] = devR[d]

\* Not a promise of NCCL's but a witness of QuietTimeouts (docs/findings.md, N11): the
\* receiver's final-ACK timer does not expire while the final ACK is on its way to it.
\* The final ACK is sent once R's ACK reached S, so R is then waiting for its ACK's
\* local completion (Alive, ackPosted) or for the final ACK (Ack); RAckTimeout leaves
\* both (to Alive without ackPosted, or Failed), and the context's end leaves None.
FinalAckAwaited ==
    \A d \in Devs :
        (\E i \in 1..Len(uc[d]["R"]) : uc[d]["R"][i] = ACK)
            => \/ rec["R"][d].st = "Ack"
               \/ rec["R"][d].st = "Alive" /\ rec["R"][d].ackPosted

\* Every posted request completes, or the communicator reports an error.
Failed == \E h \in Sides : err[h] # "none"
RequestsComplete ==
    \A r \in Reqs : /\ (sPosted >= r) ~> (sDone[r] \/ Failed)
                    /\ (rPosted >= r) ~> (rDone[r] \/ Failed)

\* A recovered path is used again: once both rails stay up for good, both sides
\* end with every device Ok and every lane on its own device (fail-back), and stay
\* so (`<>[]`: a bare `<>` would hold at the initial state, before any failure).
Home == \A d \in Devs : devS[d] = "Ok" /\ devR[d] = "Ok" /\ activeS[d] = d /\ activeR[d] = d
FailBack == <>[](\A d \in Devs : link[d]) => <>[](Failed \/ Home)

\* The two temporal properties at a stuck state, as invariants, so that a one-worker
\* TLC run gives their shortest counterexample (docs/findings.md, "Shortest lassos").
\* Every system action is weakly fair and faults are not, so a fair behaviour that
\* stutters for good does it where no system step is possible (Stuck). When no
\* behaviour takes infinitely many steps (Terminates, checked under Unfair: the state
\* graph has no cycle) every fair behaviour ends so; sPosted and rPosted never
\* decrease; hence RequestsComplete holds iff StuckComplete(N) is an invariant, and
\* FailBack iff StuckFailBack(N) is.
Stuck(N) == ~ENABLED <<SystemNext(N)>>_vars
StuckComplete(N) ==
    Stuck(N) => \A r \in Reqs : /\ (sPosted >= r => sDone[r] \/ Failed)
                               /\ (rPosted >= r => rDone[r] \/ Failed)
StuckFailBack(N) == (Stuck(N) /\ \A d \in Devs : link[d]) => (Failed \/ Home)
Terminates == <>[][UNCHANGED vars]_vars
=============================================================================
