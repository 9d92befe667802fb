----------------------------- MODULE RCTransport -----------------------------
(***************************************************************************)
(* The RC transport on one path: A's requester transmits its send queue  *)
(* with PSNs; B's responder executes the request with the expected PSN,  *)
(* re-ACKs duplicates without re-executing them, and discards requests   *)
(* ahead of it; ACKs are cumulative; on a timeout the requester goes     *)
(* back to the oldest unacknowledged PSN (go-back-N) while retries       *)
(* remain, and otherwise completes that WR with RETRY_EXC_ERR, moves the *)
(* QP to the error state and flushes every later WR (WR_FLUSH_ERR).      *)
(*                                                                         *)
(* Simplifications, each safe for the properties checked: a request     *)
(* ahead of the expected PSN is discarded without a NAK (the timeout     *)
(* then does what the NAK would hasten); a timer fires only once nothing *)
(* is in flight on its path; a notification that finds no receive WR     *)
(* (receiver-not-ready) is discarded unexecuted and unacknowledged.      *)
(***************************************************************************)
EXTENDS State

Signaled(w) == program[w].signaled

\* Flush CQEs for a sequence of WRs of A's send queue.
Flushed(ws) == [i \in DOMAIN ws |-> Cqe(ws[i], 0, "WR_FLUSH_ERR", 0)]

(***************************************************************************)
(* A's NIC sends the next request of path p's send queue. The failover   *)
(* layer holds path 1's doorbell while it waits for the fence to drain. *)
(* Model: transport.transmit. C: sn_transmit.                             *)
(***************************************************************************)
Transmit(p) ==
    /\ qp["A"][p] = "RTS"
    /\ nxt[p] <= Len(sq[p])
    /\ ~(p = 1 /\ layer["A"] = "WaitDrained")
    /\ wire' = Send(p, "AtoB", [kind |-> "req", psn |-> nxt[p], wr |-> sq[p][nxt[p]]])
    /\ nxt' = [nxt EXCEPT ![p] = @ + 1]
    /\ event' = << "Transmit", "A", p >>
    /\ UNCHANGED << appVars, sq, una, retry, responderVars, qpVars, faultVars,
                    historyVars, layerVars >>

(***************************************************************************)
(* B's responder executes the request for WR w with the expected PSN on  *)
(* path p: it changes memory, consumes a receive WR for a notification   *)
(* (a SEND's payload lands in that WR's buffer), saves an atomic's      *)
(* result, and returns a READ's or an atomic's value in the ACK. With   *)
(* staged = TRUE (the Staging design)                                    *)
(* the payload lands in a staging buffer and B's CPU copies it into      *)
(* place only the first time WR w arrives: deduplication by sequence     *)
(* number, paid for with a copy.                                          *)
(* Model: transport._execute. C: responder, its expected-PSN branch (the *)
(* C core has no staging).                                               *)
(***************************************************************************)
Execute(p, w, psn, staged, rest) ==
    LET x     == program[w]
        dup   == staged /\ execs[w] > 0
        old   == IF x.region = 0 THEN 0 ELSE mem[x.region]
        new   == Applied(x, old)
        apply == ~dup /\ x.op \in Writers /\ x.region # 0
        recv  == x.op \in TwoSided /\ ~dup
    IN  /\ mem' = IF apply THEN [mem EXCEPT ![x.region] = new] ELSE mem
        /\ execs' = IF dup THEN execs ELSE [execs EXCEPT ![w] = @ + 1]
        /\ copies' = IF staged /\ ~dup THEN copies + 1 ELSE copies
        /\ bufs' = IF recv /\ x.op = "SEND" THEN [bufs EXCEPT ![Head(rq[p])] = x.value]
                   ELSE bufs
        /\ rq' = IF recv THEN [rq EXCEPT ![p] = Tail(@)] ELSE rq
        /\ cq' = IF recv
                 THEN [cq EXCEPT !["B"][p] = Append(@, Cqe(w, Head(rq[p]), "SUCCESS", 0))]
                 ELSE cq
        /\ saved' = IF x.op \in Atomics THEN [saved EXCEPT ![p] = @ \cup {<< psn, old >>}]
                    ELSE saved
        /\ epsn' = [epsn EXCEPT ![p] = @ + 1]
        /\ wire' = Push(rest, p, "BtoA", [kind |-> "ack", psn |-> psn,
                                          val |-> IF x.op \in Returns THEN old ELSE 0])

\* What a duplicate request is answered with: a READ re-reads memory, an
\* atomic returns its saved result.
\* Model: transport.duplicate_val. C: responder, its duplicate branch.
DuplicateVal(p, w, psn) ==
    LET x == program[w]
    IN  CASE x.op = "READ"      -> mem[x.region]
          [] x.op \in Atomics   -> CHOOSE v \in { s[2] : s \in { t \in saved[p] : t[1] = psn } } : TRUE
          [] OTHER              -> 0

\* B's responder handles the request m that arrived on path p; rest is the
\* wire without m. It executes the expected PSN, re-ACKs a duplicate without
\* executing it, and discards a request ahead of it, one that finds no receive
\* WR, or any that reaches a dead NIC or a QP in ERR.
\* Model: transport._respond. C: responder.
Respond(p, m, staged, rest) ==
    LET x == program[m.wr]
        rnr == x.op \in TwoSided /\ rq[p] = << >> /\ ~(staged /\ execs[m.wr] > 0)
    IN  IF ~(nic["B"][p] /\ qp["B"][p] = "RTS") \/ m.psn > epsn[p]
           \/ (m.psn = epsn[p] /\ rnr)
        THEN /\ wire' = rest
             /\ UNCHANGED << responderVars, cq, mem, bufs, execs, copies >>
        ELSE IF m.psn = epsn[p]
        THEN Execute(p, m.wr, m.psn, staged, rest)
        ELSE /\ wire' = Push(rest, p, "BtoA", [kind |-> "ack", psn |-> m.psn,
                                               val |-> DuplicateVal(p, m.wr, m.psn)])
             /\ UNCHANGED << responderVars, cq, mem, bufs, execs, copies >>

\* A's requester handles the cumulative ACK m on path p: every WR up to its
\* PSN is complete; the signaled ones get a successful CQE. A QP in the error
\* state ignores it.
\* Model: transport._acknowledge. C: requester_ack.
Acknowledge(p, m) ==
    IF qp["A"][p] = "RTS" /\ m.psn >= una[p]
    THEN LET done == SelectSeq(SubSeq(sq[p], una[p], m.psn), Signaled)
             val(w) == IF w = sq[p][m.psn] THEN m.val ELSE 0
         IN  /\ cq' = [cq EXCEPT !["A"][p] =
                         @ \o [i \in DOMAIN done |-> Cqe(done[i], 0, "SUCCESS", val(done[i]))]]
             /\ una' = [una EXCEPT ![p] = m.psn + 1]
             /\ retry' = [retry EXCEPT ![p] = MaxRetries]
    ELSE UNCHANGED << cq, una, retry >>

(***************************************************************************)
(* The request or ACK at the head of path p's channel in direction d     *)
(* arrives: B's responder answers a request, A's requester takes an ACK. *)
(* Control messages of the failover layer are delivered by Failover.    *)
(* Model: transport.deliver_packet (the event Deliver, next.deliver).    *)
(* C: sn_deliver, then responder or requester_ack.                       *)
(***************************************************************************)
DeliverPacket(p, d, staged) ==
    /\ wire[p][d] # << >>
    /\ Head(wire[p][d]).kind \in {"req", "ack"}
    /\ LET m == Head(wire[p][d])
           rest == [wire EXCEPT ![p][d] = Tail(@)]
       IN  IF d = "AtoB"
           THEN /\ Respond(p, m, staged, rest)
                /\ UNCHANGED << una, retry >>
           ELSE /\ Acknowledge(p, m)
                /\ wire' = rest
                /\ UNCHANGED << responderVars, mem, bufs, execs, copies >>
    /\ event' = << "Deliver", p, d >>
    /\ UNCHANGED << appVars, sq, nxt, qp, faultVars, queried, layerVars >>

(***************************************************************************)
(* The wire loses the packet at the head of a channel of a path that may *)
(* fail. Control messages are carried reliably while their path lives    *)
(* (they ride an RC QP whose retransmissions are not modelled). Part of  *)
(* the environment: no fairness.                                          *)
(* Model: transport.drop. C: sn_drop.                                      *)
(***************************************************************************)
Drop(p, d) ==
    /\ p \in FaultPaths
    /\ drops < MaxDrops
    /\ wire[p][d] # << >>
    /\ Head(wire[p][d]).kind \in {"req", "ack"}
    /\ wire' = [wire EXCEPT ![p][d] = Tail(@)]
    /\ drops' = drops + 1
    /\ event' = << "Drop", p, d >>
    /\ UNCHANGED << appVars, requesterVars, responderVars, qpVars, link, nic, faults,
                    historyVars, layerVars >>

(***************************************************************************)
(* A's retransmission timer on path p fires: some transmitted WR is      *)
(* unacknowledged and nothing is left in flight to acknowledge it. It is *)
(* the requester NIC's own timer, weakly fair like the rest of System.   *)
(* Model: transport.timeout. C: sn__timeout (through sn_timeout and      *)
(* shift_sim_timeout).                                                    *)
(***************************************************************************)
Timeout(p) ==
    /\ qp["A"][p] = "RTS"
    /\ una[p] < nxt[p]
    /\ wire[p]["AtoB"] = << >> /\ wire[p]["BtoA"] = << >>
    /\ IF retry[p] > 0
       THEN /\ nxt' = [nxt EXCEPT ![p] = una[p]]
            /\ retry' = [retry EXCEPT ![p] = @ - 1]
            /\ UNCHANGED qpVars
       ELSE /\ qp' = [qp EXCEPT !["A"][p] = "ERR"]
            /\ cq' = [cq EXCEPT !["A"][p] =
                        @ \o << Cqe(sq[p][una[p]], 0, "RETRY_EXC_ERR", 0) >>
                          \o Flushed(SubSeq(sq[p], una[p] + 1, Len(sq[p])))]
            /\ UNCHANGED << nxt, retry >>
    /\ event' = << "Timeout", "A", p >>
    /\ UNCHANGED << appVars, sq, una, responderVars, wire, faultVars, historyVars,
                    layerVars >>
=============================================================================
