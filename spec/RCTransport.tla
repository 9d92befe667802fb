----------------------------- MODULE RCTransport -----------------------------
(***************************************************************************)
(* The RC transport on one path, in both directions: a host's requester    *)
(* transmits its send queue with PSNs; the peer's responder executes the   *)
(* request with the expected PSN, re-ACKs duplicates without re-executing  *)
(* them, and discards requests ahead of it; ACKs are cumulative; on a      *)
(* timeout the requester goes back to the oldest unacknowledged PSN        *)
(* (go-back-N) while retries remain, and otherwise completes that WR       *)
(* with RETRY_EXC_ERR, moves the QP to the error state and flushes every   *)
(* later WR and every receive WR of the QP (WR_FLUSH_ERR).                 *)
(*                                                                         *)
(* Simplifications, each safe for the properties checked: a request        *)
(* ahead of the expected PSN is discarded without a NAK (the timeout       *)
(* then does what the NAK would hasten); a timer fires only once nothing   *)
(* is in flight on its path, in either direction.                          *)
(*                                                                         *)
(* A notification that finds no receive WR (receiver not ready) is         *)
(* answered with an RNR NAK (RnrNak): the requester goes back to it and    *)
(* retransmits, RnrRetry times or for ever (7), before it fails it with    *)
(* RNR_RETRY_EXC_ERR; the wait of min_rnr_timer between is abstracted,     *)
(* as every time is. Without RnrNak the notification is discarded          *)
(* unexecuted and unacknowledged (the timeout ends it).                    *)
(*                                                                         *)
(* With AckBeforeCqe, a responder's receive completion is not in host      *)
(* memory when its ACK leaves: the NIC writes it later (WriteCqe), and a   *)
(* NIC that dies first loses it. The NIC writes a QP's completions in      *)
(* order, so a completion it makes later is written behind (and with)      *)
(* those it has not yet written.                                           *)
(***************************************************************************)
EXTENDS State

Signaled(h, w) == program[h][w].signaled

\* The send WRs of host h's QP of path p that a completion covers: those up to the
\* last signaled one the peer acknowledged (an unsignaled WR acknowledged after it
\* is not: only a completion frees a send queue's slot). Its index, or 0.
Covered(h, p) ==
    LET done == { i \in 1..(una[h][p] - 1) : Signaled(h, sq[h][p][i]) }
    IN  IF done = {} THEN 0 ELSE CHOOSE i \in done : \A j \in done : j <= i

\* The NIC of host h makes the completions es on path p's CQ: in host memory,
\* behind the receive completions it has not yet written, which it writes first.
Complete(h, p, es) ==
    /\ cq' = [cq EXCEPT ![h][p] = @ \o unwritten[h][p] \o es]
    /\ unwritten' = [unwritten EXCEPT ![h][p] = << >>]

\* Flush CQEs for a sequence of send WRs, and for a sequence of receive WRs.
Flushed(ws) == [i \in DOMAIN ws |-> Cqe(ws[i], 0, "WR_FLUSH_ERR", 0)]
FlushedRecvs(rs) == [i \in DOMAIN rs |-> Cqe(0, rs[i], "WR_FLUSH_ERR", 0)]

\* The CQEs of host h's QP on path p entering the error state because its WR at
\* PSN k failed with status: in post order, as a send queue returns them - the
\* WRs still unacknowledged before it flushed, it with status, every later WR
\* flushed - then every receive WR of the QP flushed. The error CQE may so come
\* after flushes: a flush says only that the QP is in the error state.
FailedAt(h, p, k, status) ==
    Flushed(SubSeq(sq[h][p], una[h][p], k - 1))
    \o << Cqe(sq[h][p][k], 0, status, 0) >>
    \o Flushed(SubSeq(sq[h][p], k + 1, Len(sq[h][p])))
    \o FlushedRecvs(rq[h][p])

(***************************************************************************)
(* Host h's NIC processes the next request of path p's send queue: it      *)
(* sends it; or, when the WR's lkey is bad (an application error), it      *)
(* fails it with LOC_PROT_ERR and moves the QP to the error state, which   *)
(* flushes the WRs in flight before it and every later one. The failover   *)
(* layer holds path 1's doorbell while it waits for the fence to drain.    *)
(* Model: transport.transmit. C: sn_transmit.                              *)
(***************************************************************************)
Transmit(h, p) ==
    /\ qp[h][p] = "RTS"
    /\ nxt[h][p] <= Len(sq[h][p])
    /\ ~(p = 1 /\ sendMode[h] = "WaitDrained")
    /\ IF program[h][sq[h][p][nxt[h][p]]].key = "LKEY"
       THEN /\ qp' = [qp EXCEPT ![h][p] = "ERR"]
            /\ Complete(h, p, FailedAt(h, p, nxt[h][p], "LOC_PROT_ERR"))
            /\ rq' = [rq EXCEPT ![h][p] = << >>]
            /\ UNCHANGED << wire, nxt >>
       ELSE /\ wire' = Send(p, From(h), [kind |-> "req", psn |-> nxt[h][p],
                                         wr |-> sq[h][p][nxt[h][p]], incarnation |-> IncarnationOf(h, p)])
            /\ nxt' = [nxt EXCEPT ![h][p] = @ + 1]
            /\ UNCHANGED << qpVars, rq >>
    /\ event' = << "Transmit", h, p >>
    /\ UNCHANGED << appVars, sq, una, retry, rnrLeft, epsn, saved, fatal, incarnation, faultVars, historyVars,
                    layerVars >>

(***************************************************************************)
(* Host g's responder executes the request for its peer's WR w with the    *)
(* expected PSN on path p: it changes g's memory, consumes a receive WR    *)
(* for a notification (a SEND's payload lands in that WR's buffer),        *)
(* saves an atomic's result, and returns a READ's or an atomic's value     *)
(* in the ACK. With staged = TRUE (the Staging design) the payload lands   *)
(* in a staging buffer and g's CPU copies it into place only the first     *)
(* time WR w arrives: deduplication by sequence number, paid for with a    *)
(* copy.                                                                   *)
(* Model: transport._execute. C: responder, its expected-PSN branch.       *)
(***************************************************************************)
Execute(g, p, w, psn, staged, rest) ==
    LET s     == Peer(g)
        x     == program[s][w]
        dup   == staged /\ execs[s][w] > 0
        old   == IF x.region = 0 THEN 0 ELSE mem[g][x.region]
        new   == Applied(x, old)
        apply == ~dup /\ x.op \in Writers /\ x.region # 0
        recv  == x.op \in TwoSided /\ ~dup
    IN  /\ mem' = IF apply THEN [mem EXCEPT ![g][x.region] = new] ELSE mem
        /\ execs' = IF dup THEN execs ELSE [execs EXCEPT ![s][w] = @ + 1]
        /\ copies' = IF staged /\ ~dup THEN copies + 1 ELSE copies
        /\ bufs' = IF recv /\ x.op = "SEND" THEN [bufs EXCEPT ![g][Head(rq[g][p])] = x.value]
                   ELSE bufs
        /\ rq' = IF recv THEN [rq EXCEPT ![g][p] = Tail(@)] ELSE rq
        /\ IF recv /\ AckBeforeCqe
           THEN /\ unwritten' = [unwritten EXCEPT ![g][p] =
                                    Append(@, Cqe(w, Head(rq[g][p]), "SUCCESS", 0))]
                /\ UNCHANGED cq
           ELSE IF recv
           THEN Complete(g, p, << Cqe(w, Head(rq[g][p]), "SUCCESS", 0) >>)
           ELSE UNCHANGED << cq, unwritten >>
        /\ saved' = IF x.op \in Atomics THEN [saved EXCEPT ![g][p] = @ \cup {<< psn, old >>}]
                    ELSE saved
        /\ epsn' = [epsn EXCEPT ![g][p] = @ + 1]
        /\ wire' = Push(rest, p, From(g), [kind |-> "ack", psn |-> psn,
                                           val |-> IF x.op \in Returns THEN old ELSE 0,
                                           incarnation |-> IncarnationOf(g, p)])

\* What a duplicate request is answered with: a READ re-reads memory, an
\* atomic returns its saved result.
\* Model: transport.duplicate_val. C: responder, its duplicate branch.
DuplicateVal(g, p, w, psn) ==
    LET x == program[Peer(g)][w]
    IN  CASE x.op = "READ"      -> mem[g][x.region]
          [] x.op \in Atomics   -> CHOOSE v \in { t[2] : t \in { u \in saved[g][p] : u[1] = psn } } : TRUE
          [] OTHER              -> 0

(***************************************************************************)
(* Host g's responder finds the rkey of the expected request m bad (an     *)
(* application error of its peer): it executes nothing, NAKs m (remote     *)
(* access error) and moves its QP to the error state, as an RC responder   *)
(* does on this class of error: its own WRs in flight on the QP and its    *)
(* receive WRs are flushed - g's layer sees only flushes.                  *)
(* Model: transport._remote_access. C: responder_fatal (SYN_REM_ACCESS).   *)
(***************************************************************************)
RemoteAccess(g, p, m, rest) ==
    /\ wire' = Push(rest, p, From(g), [kind |-> "nak", psn |-> m.psn, incarnation |-> IncarnationOf(g, p)])
    /\ qp' = [qp EXCEPT ![g][p] = "ERR"]
    /\ Complete(g, p, Flushed(SubSeq(sq[g][p], una[g][p], Len(sq[g][p])))
                     \o FlushedRecvs(rq[g][p]))
    /\ rq' = [rq EXCEPT ![g][p] = << >>]
    /\ UNCHANGED << epsn, saved, mem, bufs, execs, copies >>

\* Host g's responder handles the request m that arrived on path p; rest is
\* the wire without m. It executes the expected PSN (or NAKs it if its rkey is
\* bad), re-ACKs a duplicate without executing it, answers a notification that
\* finds no receive WR with an RNR NAK (RnrNak; else discards it), and discards
\* a request ahead of it or any that reaches a dead NIC or a QP in ERR.
\* Model: transport._respond. C: responder.
Respond(g, p, m, staged, rest) ==
    LET x == program[Peer(g)][m.wr]
        rnr == x.op \in TwoSided /\ rq[g][p] = << >> /\ ~(staged /\ execs[Peer(g)][m.wr] > 0)
    IN  IF ~(nic[g][p] /\ qp[g][p] = "RTS") \/ m.psn > epsn[g][p]
           \/ (m.psn = epsn[g][p] /\ rnr /\ ~RnrNak)
        THEN /\ wire' = rest
             /\ UNCHANGED << responderVars, qpVars, mem, bufs, execs, copies >>
        ELSE IF m.psn = epsn[g][p] /\ rnr
        THEN /\ wire' = Push(rest, p, From(g), [kind |-> "rnr", psn |-> m.psn,
                                                 incarnation |-> IncarnationOf(g, p)])
             /\ UNCHANGED << responderVars, qpVars, mem, bufs, execs, copies >>
        ELSE IF m.psn = epsn[g][p] /\ x.key = "RKEY"
        THEN RemoteAccess(g, p, m, rest)
        ELSE IF m.psn = epsn[g][p]
        THEN Execute(g, p, m.wr, m.psn, staged, rest) /\ UNCHANGED qp
        ELSE /\ wire' = Push(rest, p, From(g), [kind |-> "ack", psn |-> m.psn,
                                                val |-> DuplicateVal(g, p, m.wr, m.psn),
                                                incarnation |-> IncarnationOf(g, p)])
             /\ UNCHANGED << responderVars, qpVars, mem, bufs, execs, copies >>

\* Host h's requester handles the cumulative ACK m on path p: every WR up to
\* its PSN is complete; the signaled ones get a successful CQE. A NAK or an RNR
\* NAK is an ACK of every WR before its PSN. At a NAK the WR fails with
\* REM_ACCESS_ERR and the QP enters the error state (every later WR flushed).
\* At an RNR NAK the requester goes back to the WR (RNR retries left, or for
\* ever) or fails it with RNR_RETRY_EXC_ERR, the QP to the error state. With
\* ImplicitNak, an ACK past a READ or atomic is an implicit NAK of the first
\* one (its response was lost): the WRs before it complete, and the requester
\* goes back to it spending a retry, or fails it with RETRY_EXC_ERR when none
\* is left (soft-RoCE's rxe_comp.c: check_psn, COMPST_ERROR_RETRY). Progress
\* (a WR acknowledged) renews both retry counts. A QP in the error state ignores
\* all three.
\* Model: transport._acknowledge. C: requester_ack.
ImplicitNakAt(h, p, m) ==
    LET rs == { i \in una[h][p]..(m.psn - 1) : program[h][sq[h][p][i]].op \in Returns }
    IN  IF ImplicitNak /\ m.kind = "ack" /\ rs # {}
        THEN CHOOSE i \in rs : \A j \in rs : i <= j
        ELSE 0

Acknowledge(h, p, m) ==
    IF qp[h][p] = "RTS" /\ m.psn >= una[h][p] /\ ImplicitNakAt(h, p, m) > 0
    THEN LET r == ImplicitNakAt(h, p, m)
             done == SelectSeq(SubSeq(sq[h][p], una[h][p], r - 1), LAMBDA w : Signaled(h, w))
             good == [i \in DOMAIN done |-> Cqe(done[i], 0, "SUCCESS", 0)]
             left == IF r > una[h][p] THEN MaxRetries ELSE retry[h][p]
         IN  /\ IF r > una[h][p] THEN rnrLeft' = [rnrLeft EXCEPT ![h][p] = RnrRetry]
                ELSE UNCHANGED rnrLeft
             /\ IF left > 0
                THEN /\ IF good = << >> THEN UNCHANGED << cq, unwritten >>
                        ELSE Complete(h, p, good)
                     /\ una' = [una EXCEPT ![h][p] = r]
                     /\ nxt' = [nxt EXCEPT ![h][p] = r]
                     /\ retry' = [retry EXCEPT ![h][p] = left - 1]
                     /\ UNCHANGED << qp, rq >>
                ELSE /\ Complete(h, p, good \o << Cqe(sq[h][p][r], 0, "RETRY_EXC_ERR", 0) >>
                                         \o Flushed(SubSeq(sq[h][p], r + 1, Len(sq[h][p])))
                                         \o FlushedRecvs(rq[h][p]))
                     /\ qp' = [qp EXCEPT ![h][p] = "ERR"]
                     /\ rq' = [rq EXCEPT ![h][p] = << >>]
                     /\ UNCHANGED << una, nxt, retry >>
    ELSE IF qp[h][p] = "RTS" /\ m.psn >= una[h][p]
    THEN LET last == IF m.kind = "ack" THEN m.psn ELSE m.psn - 1
             done == SelectSeq(SubSeq(sq[h][p], una[h][p], last), LAMBDA w : Signaled(h, w))
             val(w) == IF m.kind = "ack" /\ w = sq[h][p][m.psn] THEN m.val ELSE 0
             good == [i \in DOMAIN done |-> Cqe(done[i], 0, "SUCCESS", val(done[i]))]
             rnrs == IF last >= una[h][p] THEN RnrRetry ELSE rnrLeft[h][p]
             failed(status) == << Cqe(sq[h][p][m.psn], 0, status, 0) >>
                               \o Flushed(SubSeq(sq[h][p], m.psn + 1, Len(sq[h][p])))
                               \o FlushedRecvs(rq[h][p])
         IN  CASE m.kind = "ack" ->
                     /\ IF good = << >> THEN UNCHANGED << cq, unwritten >>
                        ELSE Complete(h, p, good)
                     /\ una' = [una EXCEPT ![h][p] = m.psn + 1]
                     /\ retry' = [retry EXCEPT ![h][p] = MaxRetries]
                     /\ rnrLeft' = [rnrLeft EXCEPT ![h][p] = RnrRetry]
                     /\ UNCHANGED << qp, rq, nxt >>
               [] m.kind = "rnr" /\ (RnrRetry = 7 \/ rnrs > 0) ->
                     /\ IF good = << >> THEN UNCHANGED << cq, unwritten >>
                        ELSE Complete(h, p, good)
                     /\ una' = [una EXCEPT ![h][p] = m.psn]
                     /\ nxt' = [nxt EXCEPT ![h][p] = m.psn]
                     /\ retry' = IF last >= una[h][p] THEN [retry EXCEPT ![h][p] = MaxRetries]
                                  ELSE retry
                     /\ rnrLeft' = [rnrLeft EXCEPT ![h][p] =
                                        IF RnrRetry = 7 THEN 7 ELSE rnrs - 1]
                     /\ UNCHANGED << qp, rq >>
               [] OTHER ->
                     /\ Complete(h, p, good \o failed(IF m.kind = "nak" THEN "REM_ACCESS_ERR"
                                                      ELSE "RNR_RETRY_EXC_ERR"))
                     /\ qp' = [qp EXCEPT ![h][p] = "ERR"]
                     /\ rq' = [rq EXCEPT ![h][p] = << >>]
                     /\ UNCHANGED << una, nxt, retry, rnrLeft >>
    ELSE UNCHANGED << qpVars, una, nxt, retry, rnrLeft, rq >>

(***************************************************************************)
(* The request, ACK or NAK at the head of path p's channel in direction    *)
(* d arrives at host To(d): its responder answers a request, its           *)
(* requester takes an ACK or a NAK. A packet of another incarnation than the  *)
(* receiving QP's (sent to or by an incarnation a reset ended) is          *)
(* discarded. Control messages of the failover layer are delivered by      *)
(* Failover.                                                               *)
(* Model: transport.deliver_packet (the event Deliver, next.deliver).      *)
(* C: sn_deliver, then responder or requester_ack.                         *)
(***************************************************************************)
DeliverPacket(p, d, staged) ==
    /\ wire[p][d] # << >>
    /\ Head(wire[p][d]).kind \in {"req", "ack", "nak", "rnr"}
    /\ LET m == Head(wire[p][d])
           rest == [wire EXCEPT ![p][d] = Tail(@)]
       IN  IF m.incarnation # IncarnationOf(To(d), p)
           THEN /\ wire' = rest
                /\ UNCHANGED << requesterVars, responderVars, qpVars, mem, bufs, execs, copies >>
           ELSE IF m.kind = "req"
           THEN /\ Respond(To(d), p, m, staged, rest)
                /\ UNCHANGED << una, nxt, retry, rnrLeft >>
           ELSE /\ Acknowledge(To(d), p, m)
                /\ wire' = rest
                /\ UNCHANGED << epsn, saved, mem, bufs, execs, copies >>
    /\ event' = << "Deliver", p, d >>
    /\ UNCHANGED << appVars, sq, fatal, incarnation, faultVars, queried, layerVars >>

(***************************************************************************)
(* The wire loses the packet at the head of a channel: a request or an     *)
(* ACK on a path that may fail, or (with CtlLoss) a control message of     *)
(* the failover layer on any path - the layer's control plane must not     *)
(* rely on a reliable channel (issue 15): its handshake timer resends.     *)
(* Part of the environment: no fairness.                                   *)
(* Model: transport.drop. C: sn_drop.                                      *)
(***************************************************************************)
Drop(p, d) ==
    /\ drops < MaxDrops
    /\ wire[p][d] # << >>
    /\ IF Head(wire[p][d]).kind = "ctl" THEN CtlLoss ELSE p \in FaultPaths
    /\ wire' = [wire EXCEPT ![p][d] = Tail(@)]
    /\ drops' = drops + 1
    /\ event' = << "Drop", p, d >>
    /\ UNCHANGED << appVars, requesterVars, responderVars, qpVars, link, nic, faults,
                    historyVars, layerVars >>

(***************************************************************************)
(* Host h's retransmission timer on path p fires: some transmitted WR is   *)
(* unacknowledged and nothing is left in flight on the path. Out of        *)
(* retries, the QP goes to the error state: the WR fails, every later WR   *)
(* and every receive WR of the QP is flushed.                              *)
(* Model: transport.timeout. C: sn__timeout.                               *)
(***************************************************************************)
Timeout(h, p) ==
    /\ qp[h][p] = "RTS"
    /\ una[h][p] < nxt[h][p]
    /\ wire[p]["AtoB"] = << >> /\ wire[p]["BtoA"] = << >>
    /\ IF retry[h][p] > 0
       THEN /\ nxt' = [nxt EXCEPT ![h][p] = una[h][p]]
            /\ retry' = [retry EXCEPT ![h][p] = @ - 1]
            /\ UNCHANGED << qpVars, rq >>
       ELSE /\ qp' = [qp EXCEPT ![h][p] = "ERR"]
            /\ Complete(h, p, << Cqe(sq[h][p][una[h][p]], 0, "RETRY_EXC_ERR", 0) >>
                             \o Flushed(SubSeq(sq[h][p], una[h][p] + 1, Len(sq[h][p])))
                             \o FlushedRecvs(rq[h][p]))
            /\ rq' = [rq EXCEPT ![h][p] = << >>]
            /\ UNCHANGED << nxt, retry >>
    /\ event' = << "Timeout", h, p >>
    /\ UNCHANGED << appVars, sq, una, rnrLeft, epsn, saved, wire, fatal, incarnation, faultVars, historyVars,
                    layerVars >>

(***************************************************************************)
(* Host h's NIC p writes the oldest receive completion it made and ACKed   *)
(* into host memory, where the layer's poll can see it (AckBeforeCqe).     *)
(* Model: transport.write_cqe. C: sn_write_cqe.                            *)
(***************************************************************************)
WriteCqe(h, p) ==
    /\ nic[h][p] /\ unwritten[h][p] # << >>
    /\ cq' = [cq EXCEPT ![h][p] = Append(@, Head(unwritten[h][p]))]
    /\ unwritten' = [unwritten EXCEPT ![h][p] = Tail(@)]
    /\ event' = << "WriteCqe", h, p >>
    /\ UNCHANGED << appVars, requesterVars, responderVars, qp, wire, fatal, incarnation, faultVars, historyVars,
                    layerVars >>
=============================================================================
