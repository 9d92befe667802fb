-------------------------------- MODULE Faults --------------------------------
(***************************************************************************)
(* Link and NIC faults on the paths in FaultPaths, at most MaxFaults of  *)
(* them; with Recover, a failed link or NIC may come back (the QPs stay  *)
(* in the error state until the failover layer reconnects them). With    *)
(* Drop, these are the environment: none of them is fair.                 *)
(***************************************************************************)
EXTENDS RCTransport

NoWire == [d \in Directions |-> << >>]

\* A link fails; the packets in flight on its path are lost.
\* Model: faults.link_down. C: sn_link_down.
LinkDown(p) ==
    /\ p \in FaultPaths /\ faults < MaxFaults /\ link[p]
    /\ link' = [link EXCEPT ![p] = FALSE]
    /\ wire' = [wire EXCEPT ![p] = NoWire]
    /\ faults' = faults + 1
    /\ event' = << "LinkDown", p >>
    /\ UNCHANGED << appVars, requesterVars, responderVars, qpVars, nic, drops,
                    historyVars, layerVars >>

\* A failed link comes back (with Recover); the QPs stay as they are.
\* Model: faults.link_up. C: sn_link_up.
LinkUp(p) ==
    /\ Recover /\ ~link[p]
    /\ link' = [link EXCEPT ![p] = TRUE]
    /\ event' = << "LinkUp", p >>
    /\ UNCHANGED << appVars, requesterVars, responderVars, qpVars, wire, nic, faults,
                    drops, historyVars, layerVars >>

(***************************************************************************)
(* NIC p of host h dies. Its QP is in the error state. CQEs already in   *)
(* host memory survive; those it had not yet written (AckBeforeCqe) die  *)
(* with it - a notification ACKed to the peer whose receive completion  *)
(* never comes. Without DeviceFatal its driver flushes the QP's          *)
(* outstanding WRs: the send WRs from the oldest unacknowledged one, then *)
(* the receive WRs. With it (user-space verbs on mlx5: the device in     *)
(* fatal error writes nothing), the QP goes silent: its WRs wait, those  *)
(* whose completion died with it among them, until the layer reads the  *)
(* asynchronous event (FatalEvent), whose flush starts after the WRs a  *)
(* completion covers. A QP already in the error state flushed its WRs   *)
(* when it got there: without DeviceFatal nothing changes; with it, the *)
(* device falls silent all the same and raises its event, whose flush    *)
(* covers only the WRs posted since - unless the layer already completes *)
(* the QP's WRs itself (an earlier death's event read: TakenOver) or     *)
(* awaits that event still. The QP's responder state (expected           *)
(* PSN, saved atomics) is no longer reachable by anyone but a design     *)
(* that drops opacity.                                                    *)
(* Model: faults.nic_fail. C: sn_nic_fail.                                 *)
(***************************************************************************)
NicFail(h, p) ==
    LET lost == unwritten[h][p]
    IN  /\ p \in FaultPaths /\ faults < MaxFaults /\ nic[h][p]
        /\ nic' = [nic EXCEPT ![h][p] = FALSE]
        /\ wire' = [wire EXCEPT ![p] = NoWire]
        /\ faults' = faults + 1
        /\ qp' = [qp EXCEPT ![h][p] = "ERR"]
        /\ unwritten' = [unwritten EXCEPT ![h][p] = << >>]
        /\ CASE qp[h][p] = "ERR" /\ (~DeviceFatal \/ fatal[h][p] # Speaking) ->
                   UNCHANGED << cq, rq, fatal >>
              [] DeviceFatal ->
                   /\ rq' = [rq EXCEPT ![h][p] = [i \in DOMAIN lost |-> lost[i].recv] \o @]
                   /\ fatal' = [fatal EXCEPT ![h][p] = IF qp[h][p] = "ERR"
                                                      THEN Len(sq[h][p]) + 1
                                                      ELSE Covered(h, p) + 1]
                   /\ UNCHANGED cq
              [] OTHER ->
                   /\ cq' = [cq EXCEPT ![h][p] =
                               @ \o Flushed(SubSeq(sq[h][p], una[h][p], Len(sq[h][p])))
                                 \o FlushedRecvs(rq[h][p])]
                   /\ rq' = [rq EXCEPT ![h][p] = << >>]
                   /\ UNCHANGED fatal
        /\ event' = << "NicFail", h, p >>
        /\ UNCHANGED << appVars, requesterVars, epsn, saved, incarnation, link, drops, historyVars,
                        layerVars >>

\* A failed NIC comes back (with Recover); its QPs stay in the error state.
\* Model: faults.nic_recover. C: sn_nic_recover.
NicRecover(h, p) ==
    /\ Recover /\ ~nic[h][p]
    /\ nic' = [nic EXCEPT ![h][p] = TRUE]
    /\ event' = << "NicRecover", h, p >>
    /\ UNCHANGED << appVars, requesterVars, responderVars, qpVars, wire, link, faults,
                    drops, historyVars, layerVars >>

\* Every fault and recovery: Failover's Environment, with Drop.
FaultNext ==
    \/ \E p \in Paths : LinkDown(p) \/ LinkUp(p)
    \/ \E h \in Hosts, p \in Paths : NicFail(h, p) \/ NicRecover(h, p)
=============================================================================
