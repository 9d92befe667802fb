------------------------------- MODULE Failover -------------------------------
(***************************************************************************)
(* The applications and the failover layer beneath them. The layer      *)
(* intercepts posts and polls, as SHIFT does below NCCL. A design is    *)
(* this layer with a record D of choices:                                *)
(*   D.skip           which outstanding WRs a failover does not re-post  *)
(*   D.failover       FALSE: errors go to the application (plain RC)     *)
(*   D.refuseAtomics  fail the WRs instead when an atomic is outstanding *)
(*   D.failBack       return to the default path once it is healthy     *)
(*   D.readsResponder the filter reads the responder NIC's state       *)
(*   D.staged         the responder deduplicates through staging buffers *)
(*                                                                         *)
(* Failover (SHIFT's protocol; the other designs change D):            *)
(*  1. An error CQE polled on the default QP (or the peer's counter      *)
(*     arriving) puts a host in Fallback: it moves its default QP to the *)
(*     error state, so stale packets can no longer execute, and drains    *)
(*     the default CQ, holding its good completions for the application. *)
(*  2. With an atomic outstanding, a design that refuses fails the WRs.  *)
(*  3. The host reposts its outstanding receive WRs on the backup QP,    *)
(*     then sends its receive counter over the backup path.             *)
(*  4. Once it has sent its counter and has the peer's, it re-posts its  *)
(*     outstanding WRs on the backup QP in post order, except those     *)
(*     D.skip names, whose completion it reports as successful.         *)
(*  5. Fail-back: once the default path is healthy again, reconnect and  *)
(*     probe it, let the application's next signaled WR (the fence) go  *)
(*     on the backup path, hold later WRs on the default QP, and when    *)
(*     the fence completes send a notification on the default path -    *)
(*     on which B moves its receive WRs back - and release the WRs.      *)
(***************************************************************************)
EXTENDS Faults

(* ---------------------------- the applications ---------------------------- *)

\* The notifications B's application has taken, in order.
NotesTaken == SelectSeq(rcvSeen, LAMBDA e : e.status = "SUCCESS")

(***************************************************************************)
(* Application flow control, as NCCL's: A posts a notification only once *)
(* B has posted its receive WR, and reuses a buffer (posts a WR writing  *)
(* a region) only once B took every notification posted before it.      *)
(* Model: apps.can_post. C: none; the application's own flow control.    *)
(***************************************************************************)
CanPost(w) ==
    /\ program[w].note > 0 => recvPosted >= program[w].note
    /\ program[w].op \in Writers /\ program[w].region # 0
           => Len(NotesTaken) >= NotesBefore(program, w - 1)

\* Post WR w on A's QP of path p; a QP in the error state flushes it at once.
\* Model: apps._post_on. C: post_pend, then the NIC's sn__post_send.
PostOn(p, w) ==
    /\ sq' = [sq EXCEPT ![p] = Append(@, w)]
    /\ cq' = IF qp["A"][p] = "ERR"
             THEN [cq EXCEPT !["A"][p] = Append(@, Cqe(w, 0, "WR_FLUSH_ERR", 0))]
             ELSE cq

(***************************************************************************)
(* A's application posts its next WR; the layer routes it by its state:  *)
(* the default QP; held by the layer until replay; the backup QP; the   *)
(* fence; held on the default QP; or failed at once after a refusal.    *)
(* Model: apps.post_send. C: shift_post_send.                             *)
(***************************************************************************)
PostSend ==
    /\ posted < Len(program)
    /\ CanPost(posted + 1)
    /\ LET w == posted + 1
           mode == layer["A"]
       IN  /\ posted' = w
           /\ IF mode = "Error"
              \* Failed at once, behind every completion still to be polled.
              THEN /\ cq' = [cq EXCEPT !["A"][2] = Append(@, Cqe(w, 0, "WR_FLUSH_ERR", 0))]
                   /\ UNCHANGED << sq, buffered, pending, layer, fence >>
              ELSE /\ pending' = Append(pending, w)
                   /\ UNCHANGED buffered
                   /\ CASE mode \in {"Default", "WaitDrained"} ->
                               PostOn(1, w) /\ UNCHANGED << layer, fence >>
                        [] mode = "Fallback" /\ replayed["A"] ->
                               PostOn(2, w) /\ UNCHANGED << layer, fence >>
                        [] mode = "Fallback" ->
                               UNCHANGED << sq, cq, layer, fence >>
                        [] mode = "WaitSignaled" ->
                               /\ PostOn(2, w)
                               /\ IF Signaled(w)
                                  THEN /\ layer' = [layer EXCEPT !["A"] = "WaitDrained"]
                                       /\ fence' = w
                                  ELSE UNCHANGED << layer, fence >>
    /\ event' = << "PostSend", "A", posted + 1 >>
    /\ UNCHANGED << program, recvPosted, sndSeen, rcvSeen, stores, stored, una, nxt, retry,
                    responderVars, qp, wire, faultVars, historyVars,
                    rpend, recvDone, sentCtr, peerCtr, replayed, refused >>

\* Post receive WR r on B's QP of path p; a QP in the error state flushes it.
\* Model: apps.post_recv (its last lines). C: post_rpend, then the NIC's
\* sn__post_recv.
PostRecvOn(p, r) ==
    IF qp["B"][p] = "ERR"
    THEN /\ cq' = [cq EXCEPT !["B"][p] = Append(@, Cqe(0, r, "WR_FLUSH_ERR", 0))]
         /\ UNCHANGED rq
    ELSE /\ rq' = [rq EXCEPT ![p] = Append(@, r)]
         /\ UNCHANGED cq

\* B's application posts its next receive WR: on the default QP, on the
\* backup QP once the layer reposted there, or held until it does.
\* Model: apps.post_recv. C: shift_post_recv.
PostRecv ==
    /\ recvPosted < NumNotes(program)
    /\ LET r == recvPosted + 1
       IN  /\ recvPosted' = r
           /\ rpend' = Append(rpend, r)
           /\ CASE layer["B"] = "Default" -> PostRecvOn(1, r)
                [] sentCtr["B"]           -> PostRecvOn(2, r)
                [] OTHER                  -> UNCHANGED << rq, cq >>
    /\ event' = << "PostRecv", "B", recvPosted + 1 >>
    /\ UNCHANGED << program, posted, sndSeen, rcvSeen, stores, stored, requesterVars, epsn,
                    saved, qp,
                    wire, faultVars, historyVars, layer, pending, buffered, recvDone,
                    sentCtr, peerCtr, replayed, fence, refused >>

(***************************************************************************)
(* B's application makes its next store: it writes a value into one of    *)
(* its regions itself, once it took the notifications the store waits     *)
(* for. The layer does not see it.                                        *)
(* Model: apps.app_write. C: the application's memory (Connection.       *)
(* app_write).                                                            *)
(***************************************************************************)
AppWrite ==
    /\ stored < Len(stores)
    /\ Len(NotesTaken) >= stores[stored + 1].after
    /\ LET x == stores[stored + 1]
       IN  /\ mem' = [mem EXCEPT ![x.region] = x.value]
           /\ event' = << "AppWrite", "B", x.region, x.value >>
    /\ stored' = stored + 1
    /\ UNCHANGED << program, posted, recvPosted, sndSeen, rcvSeen, stores, requesterVars,
                    responderVars, qpVars, wire, faultVars, bufs, execs, copies, queried,
                    layerVars >>

(* ------------------------------ the layer --------------------------------- *)

\* The QP whose CQ the layer polls for the application.
ActivePath(h) == IF layer[h] = "Default" THEN 1 ELSE 2

\* The application takes completion c: A sees [wr, status] and what a READ or
\* atomic returned; B sees the notification, the receive WR it consumed, and
\* reads memory and that WR's buffer. Model: apps._see.
SeeA(c) == sndSeen' = Append(sndSeen, [wr |-> c.wr, status |-> c.status, val |-> c.val])
SeeB(c) == rcvSeen' = Append(rcvSeen, [wr |-> c.wr, recv |-> c.recv, status |-> c.status,
                                        mem |-> mem, data |-> bufs[c.recv]])

\* The receive WRs of a sequence of B's CQEs.
Recvs(cs) == { cs[i].recv : i \in DOMAIN cs }

(***************************************************************************)
(* Host h enters Fallback (steps 1 and 2 above). status: the error that  *)
(* triggered it, returned for the first WR if the layer refuses.        *)
(* Model: layer.trigger. C: trigger.                                      *)
(***************************************************************************)
Trigger(h, D, status) ==
    LET good == GoodPrefix(cq[h][1])
    IN  /\ qp' = [qp EXCEPT ![h][1] = "ERR"]
        /\ IF h = "A"
           THEN LET rest == IF good = << >> THEN pending
                            ELSE SelectSeq(pending, LAMBDA x : x > good[Len(good)].wr)
                    refuse == D.refuseAtomics /\ \E i \in DOMAIN rest : program[rest[i]].op \in Atomics
                    failed == [i \in DOMAIN rest |->
                                 Cqe(rest[i], 0, IF i = 1 THEN status ELSE "WR_FLUSH_ERR", 0)]
                IN  /\ cq' = [cq EXCEPT !["A"][1] = << >>]
                    /\ buffered' = [buffered EXCEPT !["A"] = @ \o good \o (IF refuse THEN failed ELSE << >>)]
                    /\ pending' = IF refuse THEN << >> ELSE rest
                    /\ refused' = IF refuse THEN refused \cup Range(rest) ELSE refused
                    /\ layer' = [layer EXCEPT !["A"] = IF refuse THEN "Error" ELSE "Fallback"]
                    /\ UNCHANGED << rq, rpend, recvDone >>
           ELSE /\ cq' = [cq EXCEPT !["B"][1] = << >>]
                /\ rq' = [rq EXCEPT ![1] = << >>]
                /\ buffered' = [buffered EXCEPT !["B"] = @ \o good]
                /\ recvDone' = recvDone + Len(good)
                /\ rpend' = Without(rpend, Recvs(good))
                /\ layer' = [layer EXCEPT !["B"] = "Fallback"]
                /\ UNCHANGED << pending, refused >>

(***************************************************************************)
(* The application polls; the layer answers from the completions it      *)
(* holds, else from the active QP's CQ. An error CQE from the default    *)
(* QP starts a failover instead of reaching the application. An error   *)
(* from the backup QP reaches it: SHIFT as published has no third path. *)
(* Model: apps.poll_cq. C: shift_poll_step.                               *)
(***************************************************************************)
PollCq(h, D) ==
    /\ event' = << "PollCq", h >>
    /\ IF buffered[h] # << >>
       THEN /\ IF h = "A" THEN SeeA(Head(buffered[h])) /\ UNCHANGED rcvSeen
                          ELSE SeeB(Head(buffered[h])) /\ UNCHANGED sndSeen
            /\ buffered' = [buffered EXCEPT ![h] = Tail(@)]
            /\ UNCHANGED << qpVars, rq, layer, pending, refused, rpend, recvDone >>
       ELSE LET p == ActivePath(h)
                c == Head(cq[h][p])
            IN  /\ cq[h][p] # << >>
                /\ IF c.status # "SUCCESS" /\ D.failover /\ layer[h] = "Default"
                   THEN Trigger(h, D, c.status) /\ UNCHANGED << sndSeen, rcvSeen >>
                   ELSE /\ cq' = [cq EXCEPT ![h][p] = Tail(@)]
                        /\ UNCHANGED << qp, rq, buffered, refused >>
                        /\ layer' = IF c.status # "SUCCESS" /\ D.failover /\ h = "A"
                                    THEN [layer EXCEPT !["A"] = "Error"] ELSE layer
                        /\ IF h = "A"
                           THEN /\ SeeA(c)
                                /\ pending' = IF c.status = "SUCCESS"
                                              THEN SelectSeq(pending, LAMBDA x : x > c.wr)
                                              ELSE Without(pending, {c.wr})
                                /\ UNCHANGED << rcvSeen, rpend, recvDone >>
                           ELSE /\ SeeB(c)
                                /\ rpend' = Without(rpend, {c.recv})
                                /\ recvDone' = IF c.status = "SUCCESS" THEN recvDone + 1
                                               ELSE recvDone
                                /\ UNCHANGED << sndSeen, pending >>
    /\ UNCHANGED << program, posted, recvPosted, stores, stored, requesterVars, epsn, saved,
                    wire,
                    faultVars, historyVars, sentCtr, peerCtr, replayed, fence >>

\* What Progress never changes: the applications, the faults, B's memory and its
\* history but queried (which Replay sets).
ProgressFrame == << appVars, faultVars, mem, bufs, execs, copies >>

\* The QP pairs' transport state, which only a reconnect resets.
PsnState == << una, nxt, retry, epsn, saved >>

\* Step 3: repost the outstanding receive WRs on the backup QP, then send the
\* counter of completed receives over the backup path.
\* Model: layer.handshake. C: handshake (and its send_counter).
Handshake(h) ==
    /\ layer[h] = "Fallback" /\ ~sentCtr[h]
    /\ IF h = "B" /\ qp["B"][2] = "RTS"
       THEN rq' = [rq EXCEPT ![2] = @ \o rpend] /\ UNCHANGED cq
       ELSE IF h = "B"
       THEN /\ cq' = [cq EXCEPT !["B"][2] = @ \o [i \in DOMAIN rpend |-> Cqe(0, rpend[i], "WR_FLUSH_ERR", 0)]]
            /\ UNCHANGED rq
       ELSE UNCHANGED << rq, cq >>
    /\ wire' = IF nic[h][2] /\ qp[h][2] = "RTS"
               THEN Send(2, From(h), [kind |-> "ctl", what |-> "counter",
                                      count |-> IF h = "B" THEN recvDone ELSE 0])
               ELSE wire
    /\ sentCtr' = [sentCtr EXCEPT ![h] = TRUE]
    /\ UNCHANGED PsnState
    /\ UNCHANGED << sq, qp, queried, layer, pending, buffered, rpend, recvDone,
                    peerCtr, replayed, fence, refused >>

(***************************************************************************)
(* The replay filters, one per design (D.skip): is outstanding WR w     *)
(* known to have executed, so that re-posting it must be avoided?       *)
(*  "none"    - nothing is skipped (NaiveReplay, Staging).             *)
(*  "counter" - SHIFT: a notification numbered within the peer's count *)
(*              of completed receives was received; re-posting it would *)
(*              consume the next receive WR.                            *)
(*  "prefix"  - SHIFT with the prefix skipped (docs/findings.md, F3): RC   *)
(*              executes in order, so every WR up to the last notification *)
(*              the peer counted has executed; replaying an earlier WRITE *)
(*              would put stale data under a received notification.      *)
(*  "psn"     - ReceiverQuery: w's PSN on the default QP is below the   *)
(*              responder NIC's expected PSN (hidden transport state). *)
(*  "flag"    - NCCL: the receiver set the completion flag of w's       *)
(*              message when its application polled the notification.   *)
(* Model: layer.skip (MessageOf: layer.message_of). C: the filter in      *)
(* replay, which has "none" and "counter" only.                           *)
(***************************************************************************)

\* The notification that ends the message WR w belongs to (0: none).
MessageOf(w) ==
    LET later == { i \in w..Len(program) : program[i].note > 0 }
    IN  IF later = {} THEN 0 ELSE program[CHOOSE i \in later : \A j \in later : i <= j].note

Skip(D, w) ==
    CASE D.skip = "none"    -> FALSE
      [] D.skip = "counter" -> program[w].note > 0 /\ program[w].note <= peerCtr["A"]
      [] D.skip = "prefix"  -> \E i \in DOMAIN pending :
                                  /\ pending[i] >= w
                                  /\ program[pending[i]].note > 0
                                  /\ program[pending[i]].note <= peerCtr["A"]
      [] D.skip = "psn"     -> \E i \in DOMAIN sq[1] : sq[1][i] = w /\ i < epsn[1]
      [] D.skip = "flag"    -> /\ MessageOf(w) > 0
                               /\ \E i \in DOMAIN NotesTaken :
                                      NotesTaken[i].wr = NoteWr(program, MessageOf(w))

\* Step 4: re-post A's outstanding WRs on the backup QP, except those D.skip
\* names; a skipped signaled WR is reported successful.
\* Model: layer.replay. C: replay.
Replay(D) ==
    /\ layer["A"] = "Fallback" /\ sentCtr["A"] /\ peerCtr["A"] >= 0 /\ ~replayed["A"]
    /\ LET keep    == SubAt(pending, { i \in DOMAIN pending : ~Skip(D, pending[i]) })
           skipped == SubAt(pending, { i \in DOMAIN pending :
                                         Skip(D, pending[i]) /\ Signaled(pending[i]) })
       IN  /\ sq' = [sq EXCEPT ![2] = @ \o keep]
           /\ cq' = IF qp["A"][2] = "ERR"
                    THEN [cq EXCEPT !["A"][2] = @ \o Flushed(keep)]
                    ELSE cq
           /\ buffered' = [buffered EXCEPT !["A"] =
                             @ \o [i \in DOMAIN skipped |-> Cqe(skipped[i], 0, "SUCCESS", 0)]]
           /\ pending' = keep
    /\ replayed' = [replayed EXCEPT !["A"] = TRUE]
    /\ queried' = (queried \/ D.readsResponder)
    /\ UNCHANGED PsnState
    /\ UNCHANGED << rq, qp, wire, layer, rpend, recvDone, sentCtr, peerCtr, fence,
                    refused >>

\* Step 5a: the default path is healthy again; reconnect its QP pair (both
\* ends start afresh) and probe it; then wait for the fence.
\* Model: layer.reconnect. C: reconnect (its probe: probe_check).
Reconnect(D) ==
    /\ D.failBack /\ Recover
    /\ layer["A"] = "Fallback" /\ replayed["A"] /\ PathHealthy(1)
    /\ qp' = [h \in Hosts |-> [qp[h] EXCEPT ![1] = "RTS"]]
    /\ sq' = [sq EXCEPT ![1] = << >>]
    /\ rq' = [rq EXCEPT ![1] = << >>]
    /\ cq' = [h \in Hosts |-> [cq[h] EXCEPT ![1] = << >>]]
    /\ wire' = [wire EXCEPT ![1] = NoWire]
    /\ una' = [una EXCEPT ![1] = 1] /\ nxt' = [nxt EXCEPT ![1] = 1]
    /\ retry' = [retry EXCEPT ![1] = MaxRetries]
    /\ epsn' = [epsn EXCEPT ![1] = 1] /\ saved' = [saved EXCEPT ![1] = {}]
    /\ layer' = [layer EXCEPT !["A"] = "WaitSignaled"]
    /\ UNCHANGED << queried, pending, buffered, rpend, recvDone, sentCtr, peerCtr,
                    replayed, fence, refused >>

\* Step 5b: the fence completed on the backup path, so every WR before it did:
\* notify B on the default path alone and release the held WRs.
\* Model: layer.release. C: release (once fence_done).
Release ==
    /\ layer["A"] = "WaitDrained" /\ fence \notin Range(pending)
    \* A dead NIC sends nothing: the notice is lost with it.
    /\ wire' = IF nic["A"][1] /\ qp["A"][1] = "RTS"
               THEN Send(1, "AtoB", [kind |-> "ctl", what |-> "failback", count |-> 0])
               ELSE wire
    /\ layer' = [layer EXCEPT !["A"] = "Default"]
    /\ fence' = 0
    /\ sentCtr' = [sentCtr EXCEPT !["A"] = FALSE]
    /\ peerCtr' = [peerCtr EXCEPT !["A"] = -1]
    /\ replayed' = [replayed EXCEPT !["A"] = FALSE]
    /\ UNCHANGED PsnState
    /\ UNCHANGED << sq, rq, qpVars, queried, pending, buffered, rpend, recvDone,
                    refused >>

(***************************************************************************)
(* One step of the layer's background work on host h: woken by the      *)
(* peer's counter, the handshake, the replay, or a fail-back step. At   *)
(* most one is enabled at a time, so Progress(h) is deterministic.      *)
(* Model: layer.progress (layer.progress_all lists every enabled step).  *)
(* C: shift_progress.                                                     *)
(***************************************************************************)
Progress(h, D) ==
    /\ D.failover
    /\ \/ /\ layer[h] = "Default" /\ peerCtr[h] >= 0
          /\ Trigger(h, D, "WR_FLUSH_ERR")
          /\ UNCHANGED << sq, wire, sentCtr, peerCtr, replayed, fence, queried >>
          /\ UNCHANGED PsnState
       \/ Handshake(h)
       \/ h = "A" /\ Replay(D)
       \/ h = "A" /\ Reconnect(D)
       \/ h = "A" /\ Release
    /\ event' = << "Progress", h >>
    /\ UNCHANGED ProgressFrame

(***************************************************************************)
(* A control message of the layer arrives: the peer's counter, or the   *)
(* fail-back notification, on which B holds the backup CQ's good        *)
(* completions, drops the rest of that CQ, and reposts on the default QP *)
(* every receive WR its application is still owed: those still on the  *)
(* backup QP, and those the backup NIC flushed if it failed meanwhile   *)
(* (docs/findings.md: without this a flushed receive WR was lost).      *)
(* Model: layer.deliver_control (the event Deliver, next.deliver).       *)
(* C: sn_deliver hands it to shift_ctl_input; the fail-back notice is    *)
(* move_receives_back.                                                    *)
(***************************************************************************)
DeliverControl(p, d) ==
    /\ wire[p][d] # << >>
    /\ Head(wire[p][d]).kind = "ctl"
    /\ LET m == Head(wire[p][d])
           h == IF d = "AtoB" THEN "B" ELSE "A"
           good == GoodPrefix(cq["B"][2])
           alive == nic[h][p] /\ qp[h][p] = "RTS"
       IN  /\ wire' = [wire EXCEPT ![p][d] = Tail(@)]
           /\ IF alive /\ m.what = "counter"
              THEN /\ peerCtr' = [peerCtr EXCEPT ![h] = m.count]
                   /\ UNCHANGED << rq, cq, layer, buffered, rpend, recvDone, sentCtr >>
              ELSE IF alive /\ m.what = "failback" /\ layer["B"] = "Fallback"
              THEN /\ rq' = [rq EXCEPT ![1] = @ \o Without(rpend, Recvs(good) \cup Range(@)),
                                        ![2] = << >>]
                   /\ cq' = [cq EXCEPT !["B"][2] = << >>]
                   /\ buffered' = [buffered EXCEPT !["B"] = @ \o good]
                   /\ recvDone' = recvDone + Len(good)
                   /\ rpend' = Without(rpend, Recvs(good))
                   /\ layer' = [layer EXCEPT !["B"] = "Default"]
                   /\ sentCtr' = [sentCtr EXCEPT !["B"] = FALSE]
                   /\ peerCtr' = [peerCtr EXCEPT !["B"] = -1]
              ELSE UNCHANGED << rq, cq, layer, buffered, rpend, recvDone, sentCtr, peerCtr >>
    /\ event' = << "Deliver", p, d >>
    /\ UNCHANGED << appVars, requesterVars, epsn, saved, qp, faultVars, historyVars,
                    pending, replayed, fence, refused >>

(* ------------------------- Init, Next, fairness -------------------------- *)

(***************************************************************************)
(* The applications pick one of the Workloads (A's program, B's stores);   *)
(* every QP ready to send, every link and NIC up, both layers in Default. *)
(* Model: state.initial. C: sn_fabric_create, then shift_sim_connect.    *)
(***************************************************************************)
Init ==
    /\ \E k \in Workloads : program = Program(k) /\ stores = StoresOf(k)
    /\ posted = 0 /\ recvPosted = 0 /\ stored = 0
    /\ sndSeen = << >> /\ rcvSeen = << >>
    /\ sq = [p \in Paths |-> << >>]
    /\ una = [p \in Paths |-> 1] /\ nxt = [p \in Paths |-> 1]
    /\ retry = [p \in Paths |-> MaxRetries]
    /\ epsn = [p \in Paths |-> 1] /\ saved = [p \in Paths |-> {}]
    /\ rq = [p \in Paths |-> << >>]
    /\ qp = [h \in Hosts |-> [p \in Paths |-> "RTS"]]
    /\ cq = [h \in Hosts |-> [p \in Paths |-> << >>]]
    /\ wire = [p \in Paths |-> [d \in Directions |-> << >>]]
    /\ link = [p \in Paths |-> TRUE] /\ nic = [h \in Hosts |-> [p \in Paths |-> TRUE]]
    /\ faults = 0 /\ drops = 0
    /\ mem = [r \in Regions |-> 0]
    /\ bufs = [r \in 1..NumNotes(program) |-> 0]
    /\ execs = [w \in DOMAIN program |-> 0]
    /\ copies = 0 /\ queried = FALSE
    /\ layer = [h \in Hosts |-> "Default"]
    /\ pending = << >> /\ buffered = [h \in Hosts |-> << >>]
    /\ rpend = << >> /\ recvDone = 0
    /\ sentCtr = [h \in Hosts |-> FALSE] /\ peerCtr = [h \in Hosts |-> -1]
    /\ replayed = [h \in Hosts |-> FALSE]
    /\ fence = 0 /\ refused = {}
    /\ event = << "Init" >>

(***************************************************************************)
(* The system: the protocol as the applications, the NICs and the layer  *)
(* run it - posts and polls, the requester's transmissions and its       *)
(* retransmission timer, the wire carrying packets to the other end, and *)
(* the layer's background steps. Every one of its actions is weakly fair *)
(* (FailoverFairness).                                                    *)
(* Model: next.successors, the events whose action is in               *)
(* next.FAIR_ACTIONS. C: the NICs' sn_* steps and the layer's shift_*   *)
(* calls, which the tests' drivers schedule.                              *)
(***************************************************************************)
System(D) ==
    \/ PostSend \/ PostRecv \/ AppWrite
    \/ \E p \in Paths : Transmit(p) \/ Timeout(p)
    \/ \E p \in Paths, d \in Directions :
           DeliverPacket(p, d, D.staged) \/ DeliverControl(p, d)
    \/ \E h \in Hosts : PollCq(h, D) \/ Progress(h, D)

(***************************************************************************)
(* The environment: what happens to the system, and need not happen - the *)
(* wire loses a packet (Drop), links and NICs fail and come back          *)
(* (FaultNext). None of it is fair.                                       *)
(* Model: next.successors, the events of the vocabulary's FAULT_EVENTS. *)
(* C: sn_drop, sn_link_down, sn_link_up, sn_nic_fail, sn_nic_recover.    *)
(***************************************************************************)
Environment ==
    \/ \E p \in Paths, d \in Directions : Drop(p, d)
    \/ FaultNext

\* A design's Next: D.staged picks the responder, D the layer's choices.
FailoverNext(D) == System(D) \/ Environment

\* Weak fairness on every action of System(D), one conjunct per disjunct and
\* argument: each happens if it stays possible. Model: next.fairness_class.
FailoverFairness(D) ==
    /\ WF_vars(PostSend) /\ WF_vars(PostRecv) /\ WF_vars(AppWrite)
    /\ \A p \in Paths : WF_vars(Transmit(p)) /\ WF_vars(Timeout(p))
    /\ \A p \in Paths, d \in Directions :
           WF_vars(DeliverPacket(p, d, D.staged)) /\ WF_vars(DeliverControl(p, d))
    /\ \A h \in Hosts : WF_vars(PollCq(h, D)) /\ WF_vars(Progress(h, D))

=============================================================================
