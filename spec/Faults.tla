-------------------------------- MODULE Faults --------------------------------
(***************************************************************************)
(* Link and NIC faults on the paths in FaultPaths, at most MaxFaults of  *)
(* them; with Recover, a failed link or NIC may come back (the QPs stay  *)
(* in the error state until the failover layer reconnects them).         *)
(***************************************************************************)
EXTENDS RCTransport

NoWire == [d \in Directions |-> << >>]

\* The packets in flight on a failing path are lost.
LinkDown(p) ==
    /\ p \in FaultPaths /\ faults < MaxFaults /\ link[p]
    /\ link' = [link EXCEPT ![p] = FALSE]
    /\ wire' = [wire EXCEPT ![p] = NoWire]
    /\ faults' = faults + 1
    /\ event' = << "LinkDown", p >>
    /\ UNCHANGED << program, posted, recvPosted, sndSeen, rcvSeen, sq, una, nxt,
                    retry, epsn, saved, rq, qp, cq, nic, drops, mem, execs, copies,
                    queried, layer, pending, buffered, rpend, recvDone, sentCtr,
                    peerCtr, replayed, fence, refused >>

LinkUp(p) ==
    /\ Recover /\ ~link[p]
    /\ link' = [link EXCEPT ![p] = TRUE]
    /\ event' = << "LinkUp", p >>
    /\ UNCHANGED << program, posted, recvPosted, sndSeen, rcvSeen, sq, una, nxt,
                    retry, epsn, saved, rq, qp, cq, wire, nic, faults, drops, mem,
                    execs, copies, queried, layer, pending, buffered, rpend,
                    recvDone, sentCtr, peerCtr, replayed, fence, refused >>

(***************************************************************************)
(* NIC p of host h dies. Its driver moves the NIC's QP to the error state *)
(* and flushes its outstanding WRs: A's send WRs from the oldest          *)
(* unacknowledged one, B's receive WRs. CQEs already in host memory      *)
(* survive. B's responder state (expected PSN, saved atomics) is no      *)
(* longer reachable by anyone but a design that drops opacity.           *)
(***************************************************************************)
NicFail(h, p) ==
    /\ p \in FaultPaths /\ faults < MaxFaults /\ nic[h][p]
    /\ nic' = [nic EXCEPT ![h][p] = FALSE]
    /\ wire' = [wire EXCEPT ![p] = NoWire]
    /\ faults' = faults + 1
    /\ qp' = [qp EXCEPT ![h][p] = "ERR"]
    /\ IF qp[h][p] = "ERR" THEN UNCHANGED << cq, rq >>
       ELSE IF h = "A"
       THEN /\ cq' = [cq EXCEPT !["A"][p] = @ \o Flushed(SubSeq(sq[p], una[p], Len(sq[p])))]
            /\ UNCHANGED rq
       ELSE /\ cq' = [cq EXCEPT !["B"][p] =
                        @ \o [i \in DOMAIN rq[p] |-> Cqe(0, rq[p][i], "WR_FLUSH_ERR", 0)]]
            /\ rq' = [rq EXCEPT ![p] = << >>]
    /\ event' = << "NicFail", h, p >>
    /\ UNCHANGED << program, posted, recvPosted, sndSeen, rcvSeen, sq, una, nxt,
                    retry, epsn, saved, link, drops, mem, execs, copies, queried,
                    layer, pending, buffered, rpend, recvDone, sentCtr, peerCtr,
                    replayed, fence, refused >>

NicRecover(h, p) ==
    /\ Recover /\ ~nic[h][p]
    /\ nic' = [nic EXCEPT ![h][p] = TRUE]
    /\ event' = << "NicRecover", h, p >>
    /\ UNCHANGED << program, posted, recvPosted, sndSeen, rcvSeen, sq, una, nxt,
                    retry, epsn, saved, rq, qp, cq, wire, link, faults, drops, mem,
                    execs, copies, queried, layer, pending, buffered, rpend,
                    recvDone, sentCtr, peerCtr, replayed, fence, refused >>

FaultNext ==
    \/ \E p \in Paths : LinkDown(p) \/ LinkUp(p)
    \/ \E h \in Hosts, p \in Paths : NicFail(h, p) \/ NicRecover(h, p)
=============================================================================
