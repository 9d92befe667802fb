------------------------------- MODULE Failover -------------------------------
(***************************************************************************)
(* The applications and the failover layer beneath them, on both hosts.    *)
(* The layer intercepts posts and polls, as SHIFT does below NCCL. A       *)
(* design is this layer with a record D of choices:                        *)
(*   D.skip           which outstanding WRs a failover does not re-post    *)
(*   D.failover       FALSE: errors go to the application (plain RC)       *)
(*   D.refuseAtomics  fail the WRs instead when an atomic is outstanding   *)
(*   D.failBack       return to the default path once it is healthy        *)
(*   D.readsResponder the filter reads the responder NIC's state           *)
(*   D.staged         the responder deduplicates through staging buffers   *)
(*   D.keepNotes      keep each ACKed notification until a counter of the  *)
(*                    peer covers it, and replay those it does not (F7);   *)
(*                    optional, FALSE when D has no such field             *)
(*                                                                         *)
(* Each host has a send side (its outstanding WRs: Default, Fallback,      *)
(* WaitSignaled, WaitDrained, or Error after a refusal) and a receive      *)
(* side (its receive WRs: Default, Moving to the backup QP, Fallback).     *)
(* Failover (SHIFT's protocol; the other designs change D):                *)
(*  1. An error CQE polled on the default QP, or a counter of the peer     *)
(*     arriving, makes a host take every side it has on the default        *)
(*     path off it (Trigger): it moves its default QP to the error         *)
(*     state, drains the default CQ (holding its good completions for      *)
(*     the application), and its send side enters Fallback - or fails      *)
(*     the WRs when an atomic is outstanding and the design refuses.       *)
(*  2. It reposts its outstanding receive WRs on the backup QP and sends   *)
(*     its receive counter over the backup path (Handshake): first, or     *)
(*     as the answer to the peer's.                                        *)
(*  3. With its counter sent and the peer's in hand, it re-posts its       *)
(*     outstanding WRs on the backup QP in post order, except those        *)
(*     D.skip names, whose completion it reports as successful (Replay).   *)
(*  4. Fail-back, per direction: once the default path is healthy, the     *)
(*     send side reconnects it (unless the peer did) and probes it, lets   *)
(*     the application's next signaled WR (the fence) go on the backup     *)
(*     path, holds later WRs on the default QP, and when the fence         *)
(*     completes notifies the peer on the default path - on which the      *)
(*     peer's receive side moves its receive WRs back - and releases       *)
(*     them. A failure of the default path before that abandons the        *)
(*     fail-back: the held WRs go to the backup QP.                        *)
(***************************************************************************)
EXTENDS Faults

(* ---------------------------- the applications ---------------------------- *)

\* The notifications host h's application has taken, in order.
NotesTaken(h) == SelectSeq(rcvSeen[h], LAMBDA e : e.status = "SUCCESS")

(***************************************************************************)
(* Application flow control, as NCCL's: host h posts a notification only   *)
(* once the peer posted its receive WR, reuses a buffer (posts a WR        *)
(* writing a region) only once the peer took every notification posted     *)
(* before it, and posts a reply only once it took the notifications the    *)
(* reply waits for (`after`).                                              *)
(* Model: apps.can_post. C: none; the application's own flow control.      *)
(***************************************************************************)
CanPost(h, w) ==
    LET x == program[h][w]
    IN  /\ x.note > 0 => recvPosted[Peer(h)] >= x.note
        /\ x.op \in Writers /\ x.region # 0
               => Len(NotesTaken(Peer(h))) >= NotesBefore(program[h], w - 1)
        /\ Len(NotesTaken(h)) >= x.after

\* Post WR w on host h's QP of path p; a QP in the error state flushes it at once
\* (unless its NIC died silently: FlushesAtOnce).
\* Model: apps._post_on. C: post_pend, then the NIC's sn__post_send.
PostOn(h, p, w) ==
    /\ sq' = [sq EXCEPT ![h][p] = Append(@, w)]
    /\ cq' = IF FlushesAtOnce(h, p)
             THEN [cq EXCEPT ![h][p] = Append(@, Cqe(w, 0, "WR_FLUSH_ERR", 0))]
             ELSE cq

(***************************************************************************)
(* Host h's application posts its next WR; the layer routes it by its      *)
(* send side: the default QP; held by the layer until replay; the backup   *)
(* QP; the fence; held on the default QP; or failed at once after a        *)
(* refusal.                                                                *)
(* Model: apps.post_send. C: shift_post_send (A's side only: the C core    *)
(* is one-way, B posts no WR).                                             *)
(***************************************************************************)
PostSend(h) ==
    /\ posted[h] < Len(program[h])
    /\ CanPost(h, posted[h] + 1)
    /\ LET w == posted[h] + 1
           mode == sendMode[h]
       IN  /\ posted' = [posted EXCEPT ![h] = w]
           /\ IF mode = "Error"
              \* Failed at once, behind every completion still to be polled.
              THEN /\ cq' = [cq EXCEPT ![h][2] = Append(@, Cqe(w, 0, "WR_FLUSH_ERR", 0))]
                   /\ UNCHANGED << sq, pending, sendMode, fence >>
              ELSE /\ pending' = [pending EXCEPT ![h] = Append(@, w)]
                   /\ CASE mode \in {"Default", "WaitDrained"} ->
                               PostOn(h, 1, w) /\ UNCHANGED << sendMode, fence >>
                        [] mode = "Fallback" /\ replayed[h] ->
                               PostOn(h, 2, w) /\ UNCHANGED << sendMode, fence >>
                        [] mode = "Fallback" ->
                               UNCHANGED << sq, cq, sendMode, fence >>
                        [] mode = "WaitSignaled" ->
                               /\ PostOn(h, 2, w)
                               /\ IF Signaled(h, w)
                                  THEN /\ sendMode' = [sendMode EXCEPT ![h] = "WaitDrained"]
                                       /\ fence' = [fence EXCEPT ![h] = w]
                                  ELSE UNCHANGED << sendMode, fence >>
    /\ event' = << "PostSend", h, posted[h] + 1 >>
    /\ UNCHANGED << program, recvPosted, sndSeen, rcvSeen, stores, stored, una, nxt, retry, rnrLeft,
                    responderVars, qp, unwritten, fatal, incarnation, wire, faultVars, historyVars, recvMode,
                    buffered, rpend, recvDone, failbackAt, sentCtr, peerCtr, fresh, asked, replayed,
                    refused, seqVars, noteVars >>

\* Post receive WR r on host h's QP of path p; a QP in the error state flushes it
\* (unless its NIC died silently: FlushesAtOnce).
\* Model: apps._post_recv_on. C: post_rpend, then the NIC's sn__post_recv.
PostRecvOn(h, p, r) ==
    IF FlushesAtOnce(h, p)
    THEN /\ cq' = [cq EXCEPT ![h][p] = Append(@, Cqe(0, r, "WR_FLUSH_ERR", 0))]
         /\ UNCHANGED rq
    ELSE /\ rq' = [rq EXCEPT ![h][p] = Append(@, r)]
         /\ UNCHANGED cq

\* Host h's application posts its next receive WR: on the default QP, on the
\* backup QP once the layer reposted there, or held while it moves them.
\* Model: apps.post_recv. C: shift_post_recv (B's side only).
PostRecv(h) ==
    /\ recvPosted[h] < NumNotes(program[Peer(h)])
    /\ LET r == recvPosted[h] + 1
       IN  /\ recvPosted' = [recvPosted EXCEPT ![h] = r]
           /\ rpend' = [rpend EXCEPT ![h] = Append(@, r)]
           /\ CASE recvMode[h] = "Default"  -> PostRecvOn(h, 1, r)
                [] recvMode[h] = "Fallback" -> PostRecvOn(h, 2, r)
                [] OTHER                    -> UNCHANGED << rq, cq >>
    /\ event' = << "PostRecv", h, recvPosted[h] + 1 >>
    /\ UNCHANGED << program, posted, sndSeen, rcvSeen, stores, stored, requesterVars, epsn,
                    saved, qp, unwritten, fatal, incarnation, wire, faultVars, historyVars, sendMode, recvMode, pending,
                    buffered, recvDone, failbackAt, sentCtr, peerCtr, fresh, asked, replayed, fence,
                    refused, seqVars, noteVars >>

\* Host h's application makes its next store into its own memory, once it took
\* the notifications the store waits for. The layer does not see it.
\* Model: apps.app_write. C: the application's memory (Connection.app_write).
AppWrite(h) ==
    /\ stored[h] < Len(stores[h])
    /\ Len(NotesTaken(h)) >= stores[h][stored[h] + 1].after
    /\ LET x == stores[h][stored[h] + 1]
       IN  /\ mem' = [mem EXCEPT ![h][x.region] = x.value]
           /\ event' = << "AppWrite", h, x.region, x.value >>
    /\ stored' = [stored EXCEPT ![h] = @ + 1]
    /\ UNCHANGED << program, posted, recvPosted, sndSeen, rcvSeen, stores, requesterVars,
                    responderVars, qpVars, wire, faultVars, bufs, execs, copies, queried,
                    layerVars >>

(* ------------------------------ the layer --------------------------------- *)

\* A side of host h is on the default path: its send side sends there or holds
\* WRs there behind a fence (or is about to), or its receive WRs are there.
\* OnPath1 and Polls1 guard actions, so each is one value, not a disjunction:
\* TLC takes every true disjunct of a guard as a step of its own, and would
\* count the step twice in its state graph when both sides are on path 1.
OnPath1(h) == ~(sendMode[h] \in {"Fallback", "Error"} /\ recvMode[h] # "Default")
\* ... and uses the default path's QP so that a reset of it would lose WRs.
Holds1(h) == sendMode[h] \in {"Default", "WaitDrained"} \/ recvMode[h] = "Default"

\* The CQ the layer polls for the application: the backup QP's while a side is
\* off the default path and it has entries, else the default QP's while a side
\* completes there. Model: apps.polls1, apps.poll_path (OnPath1, Holds1:
\* layer.on_path1, layer.holds1). C: shift_poll_step, backup CQ first as
\* here (on_path1, holds1, polls1 in layer.h).
Polls1(h) == "Default" \in {sendMode[h], recvMode[h]}
Polls2(h) == sendMode[h] # "Default" \/ recvMode[h] # "Default"
PollPath(h) == IF Polls2(h) /\ cq[h][2] # << >> THEN 2 ELSE 1

\* Host h's application takes completion c: a send completion with what a READ
\* or atomic returned, or a receive completion with the host's memory and the
\* receive WR's buffer as it reads them then. Model: apps.see.
See(h, c) ==
    IF IsRecv(c)
    THEN /\ rcvSeen' = [rcvSeen EXCEPT ![h] =
                          Append(@, [wr |-> c.wr, recv |-> c.recv, status |-> c.status,
                                     mem |-> mem[h], data |-> bufs[h][c.recv]])]
         /\ UNCHANGED sndSeen
    ELSE /\ sndSeen' = [sndSeen EXCEPT ![h] =
                          Append(@, [wr |-> c.wr, status |-> c.status, val |-> c.val])]
         /\ UNCHANGED rcvSeen

\* The receive WRs of a sequence of CQEs.
Recvs(cs) == { cs[i].recv : i \in DOMAIN cs }

\* Host h's acked notifications once its WRs ws completed successfully: with
\* D.keepNotes, the notifications among ws join them (a success says the peer's
\* NIC executed one, not that the peer's layer counted it: F7).
KeepsNotes(D) == "keepNotes" \in DOMAIN D /\ D.keepNotes

Acked(h, D, ws) == IF KeepsNotes(D)
                   THEN acked[h] \o SubAt(ws, { i \in DOMAIN ws : program[h][ws[i]].note > 0 })
                   ELSE acked[h]

\* Host h's acked notifications that no counter of the peer up to n covers.
Uncounted(h, n) == SubAt(acked[h], { i \in DOMAIN acked[h] : program[h][acked[h][i]].note > n })

(***************************************************************************)
(* Host h takes its sides off the default path (step 1 above). status:     *)
(* the error that triggered it, returned for the first WR if the layer     *)
(* refuses. A send side in fail-back abandons it: the WRs it held on the   *)
(* default QP (never transmitted) go to the backup QP. The layer drains    *)
(* the default QP as ib_drain_qp does (it waits for the flushes, behind    *)
(* which a live NIC has written every completion it made: unwritten).      *)
(* Model: layer.trigger. C: trigger.                                       *)
(***************************************************************************)
Trigger(h, D, status) ==
    LET good    == GoodPrefix(cq[h][1] \o unwritten[h][1])
        sends   == SelectSeq(good, LAMBDA c : ~IsRecv(c))
        recvs   == SelectSeq(good, IsRecv)
        mode    == sendMode[h]
        rest    == IF sends = << >> THEN pending[h]
                   ELSE SelectSeq(pending[h], LAMBDA x : x > sends[Len(sends)].wr)
        refuse  == /\ mode = "Default" /\ D.refuseAtomics
                   /\ \E i \in DOMAIN rest : program[h][rest[i]].op \in Atomics
        failed  == [i \in DOMAIN rest |->
                      Cqe(rest[i], 0, IF i = 1 THEN status ELSE "WR_FLUSH_ERR", 0)]
        done    == SubSeq(pending[h], 1, Len(pending[h]) - Len(rest))
        held    == sq[h][1]
        abandon == mode \in {"WaitSignaled", "WaitDrained"}
    IN  /\ qp' = [qp EXCEPT ![h][1] = "ERR"]
        /\ cq' = [cq EXCEPT ![h][1] = << >>,
                            ![h][2] = IF abandon /\ FlushesAtOnce(h, 2) THEN @ \o Flushed(held)
                                      ELSE @]
        /\ unwritten' = [unwritten EXCEPT ![h][1] = << >>]
        \* a death of the default NIC not yet read is stale now: the failover takes its
        \* QP's WRs (C: silent_reset); a take-over already read keeps flushing
        /\ fatal' = [fatal EXCEPT ![h][1] = IF Silent(h, 1) THEN Speaking ELSE @]
        /\ buffered' = [buffered EXCEPT ![h] = @ \o good \o (IF refuse THEN failed ELSE << >>)]
        /\ CASE mode = "Default" ->
                  /\ pending' = [pending EXCEPT ![h] = IF refuse THEN << >> ELSE rest]
                  /\ acked' = [acked EXCEPT ![h] = Acked(h, D, done)]
                  /\ refused' = IF refuse THEN [refused EXCEPT ![h] = @ \cup Range(rest)]
                                ELSE refused
                  /\ sendMode' = [sendMode EXCEPT ![h] = IF refuse THEN "Error" ELSE "Fallback"]
                  /\ replayed' = [replayed EXCEPT ![h] = FALSE]
                  /\ UNCHANGED << sq, fence >>
             [] abandon ->
                  /\ sq' = [sq EXCEPT ![h][1] = << >>, ![h][2] = @ \o held]
                  /\ sendMode' = [sendMode EXCEPT ![h] = "Fallback"]
                  /\ fence' = [fence EXCEPT ![h] = 0]
                  /\ UNCHANGED << pending, refused, replayed, acked >>
             [] OTHER -> UNCHANGED << sq, pending, refused, sendMode, replayed, fence, acked >>
        /\ IF recvMode[h] = "Default"
           THEN /\ rq' = [rq EXCEPT ![h][1] = << >>]
                /\ recvDone' = [recvDone EXCEPT ![h] = @ + Len(recvs)]
                /\ rpend' = [rpend EXCEPT ![h] = Without(@, Recvs(recvs))]
                /\ recvMode' = [recvMode EXCEPT ![h] = "Moving"]
           ELSE UNCHANGED << rq, recvDone, rpend, recvMode >>
        /\ sentCtr' = [sentCtr EXCEPT ![h] = FALSE]
        /\ UNCHANGED << resent, failbackAt, incarnation >>

(***************************************************************************)
(* What failed host h's default QP: the status of the first CQE of its     *)
(* CQ that is an error other than a flush ("SUCCESS" when there is none).  *)
(* A flush says only that the QP is in the error state; the CQE of the     *)
(* WR that put it there is in the same CQ, before or after it (before      *)
(* when WRs were still in flight ahead of it: FailedAt), so the layer      *)
(* reads the CQ, not the CQE it happens to poll.                           *)
(* Model: layer.first_fault. C: first_fault.                               *)
(***************************************************************************)
FirstFault(h) ==
    LET errs == SelectSeq(cq[h][1], LAMBDA e : e.status \notin {"SUCCESS", "WR_FLUSH_ERR"})
    IN  IF errs = << >> THEN "SUCCESS" ELSE Head(errs).status

\* Channels w with host h's word to its peer that its application failed the QP
\* pair, sent on the backup path if h can send there.
TellAppError(w, h) ==
    IF nic[h][2] /\ qp[h][2] = "RTS"
    THEN Push(w, 2, From(h), Ctl(h, 2, "apperr", 0, 0, FALSE))
    ELSE w

(***************************************************************************)
(* Host h's default QP failed because of its application (a bad key: the   *)
(* first fault is LOC_PROT_ERR or REM_ACCESS_ERR), not because of the      *)
(* path: no failover. The layer hands the application every completion     *)
(* of the default CQ in order - the error on its WR with its own status,   *)
(* the flushes of the WRs around it, the completions before it - and       *)
(* its send side fails every later WR at once (Error), as the QP in the    *)
(* error state does under plain RC. Its send side was on the default QP    *)
(* (only Default sends there), so no WR is left outstanding. The peer is   *)
(* told on the backup path (TellAppError): its QP failed too, and its      *)
(* layer, which cannot read why (F6b), would take it for a path failure.   *)
(* Model: layer.app_error. C: app_dies, once app_fault read the CQ.        *)
(***************************************************************************)
AppError(h) ==
    LET cs   == cq[h][1]
        good == SelectSeq(cs, LAMBDA c : IsRecv(c) /\ c.status = "SUCCESS")
    IN  /\ cq' = [cq EXCEPT ![h][1] = << >>]
        /\ buffered' = [buffered EXCEPT ![h] = @ \o cs]
        /\ pending' = [pending EXCEPT ![h] = << >>]
        /\ rpend' = [rpend EXCEPT ![h] = Without(@, Recvs(cs))]
        /\ recvDone' = [recvDone EXCEPT ![h] = @ + Len(good)]
        /\ sendMode' = [sendMode EXCEPT ![h] = "Error"]
        /\ wire' = TellAppError(wire, h)
        /\ UNCHANGED << sq, qp, unwritten, fatal, incarnation, rq, sndSeen, rcvSeen, refused, recvMode, sentCtr,
                        replayed, fence, noteVars, failbackAt >>

(***************************************************************************)
(* Host h's QP pair is its application's: the layer handed it an error     *)
(* of its own (a bad key: AppError, or an error polled off the backup      *)
(* QP), seen or still held (OwnAppError), or the peer's layer said that    *)
(* its application failed the pair (PeerAppError). The QP pair failed      *)
(* because of an application and is its to rebuild, as under plain RC:     *)
(* h's layer takes no further part in a failover (no step, no control      *)
(* message taken, no timer), and a later error off the default QP (the     *)
(* flush of a receive WR posted since) goes to the application too (F6,    *)
(* docs/findings.md).                                                      *)
(* Model: layer.app_owned. C: the endpoint's dead flag (go_dead).          *)
(***************************************************************************)
OwnAppError(h) == \E c \in Range(sndSeen[h]) \cup Range(buffered[h]) : c.status \in AppErrors
AppOwned(h) == OwnAppError(h) \/ peerFailed[h]

(***************************************************************************)
(* Host h's receive side moves back to the default path (the peer failed   *)
(* back), given its CQs hc, its receive counter done and the receive WRs   *)
(* it is owed as they are: it holds the backup CQ's good receive           *)
(* completions, drops its other receive CQEs, and reposts on the default   *)
(* QP every receive WR its application is still owed. It moves at the      *)
(* peer's notice, or at the poll that takes the last notification the      *)
(* notice said came before the peer's fence (failbackAt: F11). One that    *)
(* waited moves only onto a default QP still ready to send; else it        *)
(* stays on the backup path.                                               *)
(* Model: layer.move_back. C: take_failback.                               *)
(***************************************************************************)
MoveBack(h, hc, done, owed) ==
    LET good == GoodPrefix(SelectSeq(hc[2], IsRecv))
    IN  /\ failbackAt' = [failbackAt EXCEPT ![h] = 0]
        /\ IF failbackAt[h] # 0 /\ ~(nic[h][1] /\ qp[h][1] = "RTS")
           THEN /\ cq' = [cq EXCEPT ![h] = hc]
                /\ recvDone' = [recvDone EXCEPT ![h] = done]
                /\ rpend' = [rpend EXCEPT ![h] = owed]
                /\ UNCHANGED << rq, buffered, recvMode >>
           ELSE /\ rq' = [rq EXCEPT ![h][1] = @ \o Without(owed, Recvs(good) \cup Range(@)),
                                    ![h][2] = << >>]
                /\ cq' = [cq EXCEPT ![h] = [hc EXCEPT ![2] = SelectSeq(@, LAMBDA e : ~IsRecv(e))]]
                /\ buffered' = [buffered EXCEPT ![h] = @ \o good]
                /\ recvDone' = [recvDone EXCEPT ![h] = done + Len(good)]
                /\ rpend' = [rpend EXCEPT ![h] = Without(owed, Recvs(good))]
                /\ recvMode' = [recvMode EXCEPT ![h] = "Default"]

(***************************************************************************)
(* The application polls; the layer answers from the completions it        *)
(* holds, else from a CQ it polls. An error CQE from the default QP        *)
(* starts a failover instead of reaching the application - unless the      *)
(* QP's first fault is the application's (AppError) or was (AppOwned:      *)
(* then it reaches the application). An error from the                     *)
(* backup QP reaches it (and puts a send side in Error): SHIFT as          *)
(* published has no third path; the WRs a fail-back held on the default    *)
(* QP behind the failed fence never left, and complete flushed after it    *)
(* (HeldBehind). The completion of an acked notification                   *)
(* a failover replayed (resent) the layer drops: the application had       *)
(* its success.                                                            *)
(* Model: apps.poll_cq. C: shift_poll_step.                                *)
(***************************************************************************)
\* The WRs h's fail-back holds on the default QP behind its fence (WaitDrained:
\* never transmitted, no completion anywhere) when c, the fence's failure on the
\* backup path, puts the send side in Error: they complete flushed behind it.
\* None if the default QP failed meanwhile (its flushes are on its CQ already).
HeldBehind(h, p, c) ==
    IF c.status # "SUCCESS" /\ p = 2 /\ sendMode[h] = "WaitDrained" /\ qp[h][1] = "RTS"
       /\ fatal[h][1] = Speaking
    THEN SubSeq(sq[h][1], nxt[h][1], Len(sq[h][1]))
    ELSE << >>

PollCq(h, D) ==
    /\ event' = << "PollCq", h >>
    /\ IF buffered[h] # << >>
       THEN /\ See(h, Head(buffered[h]))
            /\ buffered' = [buffered EXCEPT ![h] = Tail(@)]
            /\ UNCHANGED << sq, qpVars, rq, wire, sendMode, recvMode, pending, refused, rpend,
                            recvDone, failbackAt, sentCtr, replayed, fence, noteVars >>
       ELSE LET p == PollPath(h)
                c == Head(cq[h][p])
            IN  /\ p = 1 => Polls1(h)
                /\ cq[h][p] # << >>
                /\ IF ~IsRecv(c) /\ c.wr \in resent[h]
                   THEN /\ cq' = [cq EXCEPT ![h][p] = Tail(@)]
                        /\ resent' = [resent EXCEPT ![h] = @ \ {c.wr}]
                        /\ UNCHANGED << sq, qp, unwritten, fatal, incarnation, rq, wire, buffered, refused, recvMode,
                                        sentCtr, replayed, fence, sndSeen, rcvSeen, rpend,
                                        recvDone, failbackAt, pending, sendMode, acked >>
                   ELSE IF c.status # "SUCCESS" /\ D.failover /\ p = 1 /\ ~AppOwned(h)
                   THEN IF FirstFault(h) \in AppErrors
                        THEN AppError(h)
                        ELSE Trigger(h, D, c.status) /\ UNCHANGED << sndSeen, rcvSeen, wire >>
                   ELSE /\ See(h, c)
                        /\ UNCHANGED << qp, unwritten, fatal, incarnation, wire, refused, sentCtr, replayed,
                                        fence, resent >>
                        /\ IF IsRecv(c)
                           THEN LET hc   == [cq[h] EXCEPT ![p] = Tail(@)]
                                    done == IF c.status = "SUCCESS" THEN recvDone[h] + 1
                                            ELSE recvDone[h]
                                    owed == Without(rpend[h], {c.recv})
                                IN  /\ UNCHANGED << sq, pending, sendMode, acked >>
                                    \* the last notification a waiting fail-back was owed
                                    /\ IF failbackAt[h] # 0 /\ done >= failbackAt[h]
                                       THEN MoveBack(h, hc, done, owed)
                                       ELSE /\ cq' = [cq EXCEPT ![h] = hc]
                                            /\ rpend' = [rpend EXCEPT ![h] = owed]
                                            /\ recvDone' = [recvDone EXCEPT ![h] = done]
                                            /\ UNCHANGED << rq, buffered, recvMode, failbackAt >>
                           ELSE LET held == HeldBehind(h, p, c)
                                IN
                                /\ cq' = [cq EXCEPT ![h][p] = Tail(@) \o Flushed(held)]
                                /\ sq' = IF held = << >> THEN sq
                                         ELSE [sq EXCEPT ![h][1] = SubSeq(@, 1, nxt[h][1] - 1)]
                                /\ UNCHANGED << rq, buffered, recvMode, failbackAt >>
                                /\ pending' = [pending EXCEPT ![h] =
                                                 IF c.status = "SUCCESS"
                                                 THEN SelectSeq(@, LAMBDA x : x > c.wr)
                                                 ELSE Without(@, {c.wr})]
                                \* only from the default path: a success the backup
                                \* path gave did not die with the default NIC (F7),
                                \* and the peer may not have counted it yet (F9)
                                /\ acked' = IF c.status = "SUCCESS" /\ p = 1
                                             THEN [acked EXCEPT ![h] =
                                                     Acked(h, D, SelectSeq(pending[h],
                                                                           LAMBDA x : x <= c.wr))]
                                             ELSE acked
                                /\ sendMode' = IF c.status # "SUCCESS" /\ D.failover
                                               THEN [sendMode EXCEPT ![h] = "Error"]
                                               ELSE sendMode
                                /\ UNCHANGED << rpend, recvDone >>
    /\ UNCHANGED << program, posted, recvPosted, stores, stored, una, nxt, retry, rnrLeft, epsn, saved,
                    faultVars, historyVars, peerCtr, fresh, asked, seqVars >>

\* What Progress never changes: the applications, the faults, the memories
\* and the history but queried (which Replay sets).
ProgressFrame == << appVars, faultVars, mem, bufs, execs, copies >>

\* The QP pairs' transport state, which only a reconnect resets.
PsnState == << una, nxt, retry, rnrLeft, epsn, saved >>

\* Host h's latest counter as a control message; ask: h awaits the answer.
Counter(h, ask) == Ctl(h, 2, "counter", ctrVal[h], ctrSeq[h], ask)

\* Channels w with host h's latest counter resent on the backup path, if h can
\* send there (a dead NIC or a QP in the error state sends nothing).
Resend(w, h, ask) ==
    IF nic[h][2] /\ qp[h][2] = "RTS" THEN Push(w, 2, From(h), Counter(h, ask)) ELSE w

\* Step 2: repost the outstanding receive WRs on the backup QP (if the receive
\* side is moving), then send the receive counter over the backup path, numbered
\* (ctrSeq) so that a resend is told from a new counter: first (then the host
\* awaits the peer's: ask), or answering the peer's. A counter no replay needs is
\* used up.
\* Model: layer.handshake. C: handshake (and its send_counter).
Handshake(h) ==
    /\ ~sentCtr[h] /\ ~OnPath1(h)
    /\ IF recvMode[h] = "Moving" /\ ~FlushesAtOnce(h, 2)  \* ready, or silent
       THEN rq' = [rq EXCEPT ![h][2] = @ \o rpend[h]] /\ UNCHANGED cq
       ELSE IF recvMode[h] = "Moving"
       THEN /\ cq' = [cq EXCEPT ![h][2] = @ \o FlushedRecvs(rpend[h])]
            /\ UNCHANGED rq
       ELSE UNCHANGED << rq, cq >>
    /\ recvMode' = IF recvMode[h] = "Moving" THEN [recvMode EXCEPT ![h] = "Fallback"]
                   ELSE recvMode
    /\ ctrSeq' = [ctrSeq EXCEPT ![h] = @ + 1]
    /\ ctrVal' = [ctrVal EXCEPT ![h] = recvDone[h]]
    /\ wire' = IF nic[h][2] /\ qp[h][2] = "RTS"
               THEN Send(2, From(h), Ctl(h, 2, "counter", recvDone[h], ctrSeq[h] + 1, ~fresh[h]))
               ELSE wire
    /\ sentCtr' = [sentCtr EXCEPT ![h] = TRUE]
    /\ asked' = [asked EXCEPT ![h] = ~fresh[h]]
    /\ fresh' = [fresh EXCEPT ![h] = @ /\ sendMode[h] = "Fallback" /\ ~replayed[h]]
    /\ UNCHANGED PsnState
    /\ UNCHANGED << sq, qp, unwritten, fatal, incarnation, queried, sendMode, pending, buffered, rpend,
                    recvDone, failbackAt, peerCtr, replayed, fence, refused, peerSeq, peerFailed, reconnecting,
                    noteVars >>

(***************************************************************************)
(* The replay filters, one per design (D.skip): is host h's outstanding    *)
(* WR w known to have executed, so that re-posting it must be avoided?     *)
(*  "none"    - nothing is skipped (NaiveReplay, Staging).                 *)
(*  "counter" - SHIFT: a notification numbered within the peer's count     *)
(*              of completed receives was received.                        *)
(*  "prefix"  - SHIFT with the prefix skipped (docs/findings.md, F3).      *)
(*  "psn"     - ReceiverQuery: w's PSN on the default QP is below the      *)
(*              peer NIC's expected PSN (hidden transport state).          *)
(*  "flag"    - NCCL: the peer set the completion flag of w's message      *)
(*              when its application polled the notification.              *)
(* Model: layer.skip (MessageOf: layer.message_of). C: the filter in       *)
(* replay, which has "none" and "counter" only.                            *)
(***************************************************************************)

\* The notification that ends the message host h's WR w belongs to (0: none).
MessageOf(h, w) ==
    LET later == { i \in w..Len(program[h]) : program[h][i].note > 0 }
    IN  IF later = {} THEN 0
        ELSE program[h][CHOOSE i \in later : \A j \in later : i <= j].note

Skip(h, D, w) ==
    CASE D.skip = "none"    -> FALSE
      [] D.skip = "counter" -> program[h][w].note > 0 /\ program[h][w].note <= peerCtr[h]
      [] D.skip = "prefix"  -> \E i \in DOMAIN pending[h] :
                                  /\ pending[h][i] >= w
                                  /\ program[h][pending[h][i]].note > 0
                                  /\ program[h][pending[h][i]].note <= peerCtr[h]
      [] D.skip = "psn"     -> \E i \in DOMAIN sq[h][1] : sq[h][1][i] = w /\ i < epsn[Peer(h)][1]
      [] D.skip = "flag"    -> /\ MessageOf(h, w) > 0
                               /\ \E i \in DOMAIN NotesTaken(Peer(h)) :
                                      NotesTaken(Peer(h))[i].wr = NoteWr(program[h], MessageOf(h, w))

\* Step 3: re-post host h's outstanding WRs on the backup QP, except those
\* D.skip names; a skipped signaled WR is reported successful. First (they
\* were posted first) the acked notifications the peer's counter does not
\* cover (D.keepNotes: F7), whose completions the layer will drop (resent).
\* Model: layer.replay. C: replay.
Replay(h, D) ==
    /\ sendMode[h] = "Fallback" /\ sentCtr[h] /\ fresh[h] /\ ~replayed[h]
    /\ LET ps      == pending[h]
           again   == Uncounted(h, peerCtr[h])
           keep    == SubAt(ps, { i \in DOMAIN ps : ~Skip(h, D, ps[i]) })
           skipped == SubAt(ps, { i \in DOMAIN ps : Skip(h, D, ps[i]) /\ Signaled(h, ps[i]) })
       IN  /\ sq' = [sq EXCEPT ![h][2] = @ \o again \o keep]
           /\ cq' = IF FlushesAtOnce(h, 2)
                    THEN [cq EXCEPT ![h][2] = @ \o Flushed(again \o keep)]
                    ELSE cq
           /\ acked' = [acked EXCEPT ![h] = again]
           /\ resent' = [resent EXCEPT ![h] = @ \cup Range(again)]
           /\ buffered' = [buffered EXCEPT ![h] =
                             @ \o [i \in DOMAIN skipped |-> Cqe(skipped[i], 0, "SUCCESS", 0)]]
           /\ pending' = [pending EXCEPT ![h] = keep]
    /\ replayed' = [replayed EXCEPT ![h] = TRUE]
    /\ fresh' = [fresh EXCEPT ![h] = FALSE]
    /\ queried' = (queried \/ D.readsResponder)
    /\ UNCHANGED PsnState
    /\ UNCHANGED << rq, qp, unwritten, fatal, incarnation, wire, sendMode, recvMode, rpend, recvDone,
                    failbackAt, sentCtr, peerCtr, asked, fence, refused, seqVars >>

\* Host x's default QP starts afresh in incarnation e: reset, then ready to send to the
\* peer's QP of that incarnation, with fresh PSNs (RESET, INIT, RTR, RTS). Nothing of x's
\* layer is on it (a reset waits for that); what its CQ held is from its previous
\* life, and a packet of that life still on the wire finds no QP of its incarnation.
ResetPath1(x, e) ==
    /\ qp' = [qp EXCEPT ![x][1] = "RTS"]
    /\ sq' = [sq EXCEPT ![x][1] = << >>]
    /\ rq' = [rq EXCEPT ![x][1] = << >>]
    /\ cq' = [cq EXCEPT ![x][1] = << >>]
    \* a reset QP speaks again: a NIC's unread death is stale, nothing of the
    \* layer's is on it (C: silent_reset reads and drops the event); a take-over ends
    /\ fatal' = [fatal EXCEPT ![x][1] = Speaking]
    /\ incarnation' = [incarnation EXCEPT ![x] = e]
    /\ una' = [una EXCEPT ![x][1] = 1]
    /\ nxt' = [nxt EXCEPT ![x][1] = 1]
    /\ retry' = [retry EXCEPT ![x][1] = MaxRetries]
    /\ rnrLeft' = [rnrLeft EXCEPT ![x][1] = RnrRetry]
    /\ epsn' = [epsn EXCEPT ![x][1] = 1]
    /\ saved' = [saved EXCEPT ![x][1] = {}]
    /\ UNCHANGED unwritten

\* Step 4a: host h's default NIC is up again; bring the default path back. If
\* its default QP is ready to send, the peer reset the pair since h left it (h
\* answered its request): h waits for the fence. Else h resets its own QP into
\* the next incarnation and asks the peer, on the backup path, to reset its end into
\* it (TakeReconnect); it waits for the answer (reconnecting), which its
\* handshake timer asks again for. A reset waits until h holds no WR on the QP
\* and its NIC wrote every completion it made there. Whether the peer's NIC and
\* the link are up, h cannot see: a fail-back onto a dead path fails as any
\* traffic there does, and the failover that follows starts over.
\* Model: layer.reconnect. C: reconnect (its probe: probe_check).
Reconnect(h, D) ==
    /\ D.failBack /\ Recover
    /\ sendMode[h] = "Fallback" /\ replayed[h] /\ sentCtr[h] /\ ~fresh[h]
    /\ reconnecting[h] = 0 /\ nic[h][1]
    /\ IF qp[h][1] = "RTS"
       THEN /\ sendMode' = [sendMode EXCEPT ![h] = "WaitSignaled"]
            /\ UNCHANGED << sq, rq, qpVars, wire, PsnState, reconnecting >>
       ELSE /\ recvMode[h] # "Default" /\ unwritten[h][1] = << >>
            /\ ResetPath1(h, incarnation[h] + 1)
            /\ reconnecting' = [reconnecting EXCEPT ![h] = incarnation[h] + 1]
            /\ wire' = IF nic[h][2] /\ qp[h][2] = "RTS"
                       THEN Send(2, From(h), Ctl(h, 2, "reconnect", 0, incarnation[h] + 1, FALSE))
                       ELSE wire
            /\ UNCHANGED sendMode
    /\ UNCHANGED << queried, recvMode, pending, buffered, rpend, recvDone, failbackAt, sentCtr,
                    peerCtr, fresh, asked, replayed, fence, refused, ctrSeq, ctrVal, peerSeq,
                    peerFailed, noteVars >>

\* Step 4b: the fence completed on the backup path, so every WR before it did:
\* notify the peer on the default path alone, with how many notifications came
\* before the fence (all executed), and release the held WRs.
\* Model: layer.release. C: release (once fence_done).
Release(h) ==
    /\ sendMode[h] = "WaitDrained" /\ fence[h] \notin Range(pending[h]) /\ ~fresh[h]
    \* A dead NIC sends nothing: the notice is lost with it.
    /\ wire' = IF nic[h][1] /\ qp[h][1] = "RTS"
               THEN Send(1, From(h), Ctl(h, 1, "failback", NotesBefore(program[h], fence[h]), 0,
                                         FALSE))
               ELSE wire
    /\ sendMode' = [sendMode EXCEPT ![h] = "Default"]
    /\ fence' = [fence EXCEPT ![h] = 0]
    /\ replayed' = [replayed EXCEPT ![h] = FALSE]
    /\ UNCHANGED PsnState
    /\ UNCHANGED << sq, rq, qpVars, queried, recvMode, pending, buffered, rpend, recvDone,
                    failbackAt, sentCtr, peerCtr, fresh, asked, refused, seqVars, noteVars >>

(***************************************************************************)
(* One step of the layer's background work on host h: woken by a counter   *)
(* of the peer it must answer while a side is on the default path, the     *)
(* handshake, the replay, or a fail-back step. At most one is enabled at   *)
(* a time, so Progress(h) is deterministic. None once h's QP pair is the   *)
(* application's (AppOwned).                                               *)
(* Model: layer.progress (layer.progress_all lists every enabled step;     *)
(* its first step, on the peer's counter: layer.woken).                    *)
(* C: shift_progress.                                                      *)
(***************************************************************************)
Progress(h, D) ==
    /\ D.failover /\ ~AppOwned(h)
    /\ \/ /\ OnPath1(h) /\ fresh[h] /\ ~sentCtr[h]
          /\ Trigger(h, D, "WR_FLUSH_ERR")
          /\ UNCHANGED << wire, peerCtr, fresh, asked, queried, seqVars >>
          /\ UNCHANGED PsnState
       \/ Handshake(h)
       \/ Replay(h, D)
       \/ Reconnect(h, D)
       \/ Release(h)
    /\ event' = << "Progress", h >>
    /\ UNCHANGED ProgressFrame

(***************************************************************************)
(* The peer's application failed the QP pair (its layer said so), so       *)
(* host h's is failed too, as plain RC's would be (F6b): whatever h's      *)
(* layer was doing, failover included, ends. Both QPs go to the error      *)
(* state, and the application gets, in order, everything the CQs hold      *)
(* (default first; on each, what its NIC had not yet written last), then   *)
(* every WR and receive WR still outstanding, flushed. Later posts fail    *)
(* at once: the send side is in Error, the receive side back on the        *)
(* default QP, in the error state. h's QP pair is its application's        *)
(* (AppOwned).                                                             *)
(* Model: layer.peer_app_error. C: take_app_error.                         *)
(***************************************************************************)
PeerAppError(h) ==
    LET cs    == cq[h][1] \o unwritten[h][1] \o cq[h][2] \o unwritten[h][2]
        sends == SelectSeq(cs, LAMBDA c : ~IsRecv(c))
        inCq  == { sends[i].wr : i \in DOMAIN sends }
        oks   == { sends[i].wr : i \in { j \in DOMAIN sends : sends[j].status = "SUCCESS" } }
        left  == SelectSeq(pending[h], LAMBDA w : w \notin inCq /\ \A v \in oks : w > v)
        taken == SelectSeq(cs, LAMBDA c : IsRecv(c) /\ c.status = "SUCCESS")
    IN  /\ qp' = [qp EXCEPT ![h] = [p \in Paths |-> "ERR"]]
        /\ cq' = [cq EXCEPT ![h] = [p \in Paths |-> << >>]]
        /\ unwritten' = [unwritten EXCEPT ![h] = [p \in Paths |-> << >>]]
        \* every WR so far is completed here: an unread death's event flushes only later posts
        /\ fatal' = [fatal EXCEPT ![h] =
                       [p \in Paths |-> IF Silent(h, p) THEN Len(sq[h][p]) + 1 ELSE @[p]]]
        /\ rq' = [rq EXCEPT ![h] = [p \in Paths |-> << >>]]
        /\ buffered' = [buffered EXCEPT ![h] =
                           @ \o cs \o Flushed(left) \o FlushedRecvs(Without(rpend[h], Recvs(cs)))]
        /\ pending' = [pending EXCEPT ![h] = << >>]
        /\ rpend' = [rpend EXCEPT ![h] = << >>]
        /\ recvDone' = [recvDone EXCEPT ![h] = @ + Len(taken)]
        /\ sendMode' = [sendMode EXCEPT ![h] = "Error"]
        /\ recvMode' = [recvMode EXCEPT ![h] = "Default"]
        /\ failbackAt' = [failbackAt EXCEPT ![h] = 0]
        /\ fence' = [fence EXCEPT ![h] = 0]
        /\ asked' = [asked EXCEPT ![h] = FALSE]
        /\ peerFailed' = [peerFailed EXCEPT ![h] = TRUE]

(***************************************************************************)
(* A control message of the layer arrives at host h. A counter numbered    *)
(* after the last one h took: the answer h awaits, or the peer starting    *)
(* a failover, which h answers. The last one again (the peer's timer       *)
(* resent it): if it asks and h has sent its counter, h resends its own    *)
(* (its answer may have been lost); else nothing. An older one: nothing.   *)
(* The fail-back notice, which counts the notifications its sender         *)
(* posted before its fence: if h's counter and the backup CQ's good        *)
(* receive completions make them up, h's receive side moves back at once   *)
(* (MoveBack); else the completions of some are not yet in host memory     *)
(* (AckBeforeCqe) and it waits for them (failbackAt; F11). The             *)
(* peer's word that its application failed the QP pair: PeerAppError. A    *)
(* host whose QP pair is its application's (AppOwned) takes nothing; if    *)
(* its own application's error is why, it answers a counter with that      *)
(* word (the peer started a failover not knowing, or its word was lost).   *)
(* Model: layer.take_control. C: shift_ctl_input (take_counter,            *)
(* take_failback).                                                         *)
(***************************************************************************)
TakeControl(p, d) ==
    /\ LET m      == Head(wire[p][d])
           h      == To(d)
           alive  == nic[h][p] /\ qp[h][p] = "RTS" /\ m.incarnation = IncarnationOf(h, p)
           takes  == alive /\ ~AppOwned(h)
           \* what the backup CQ holds of the notifications the notice counts
           good   == GoodPrefix(SelectSeq(cq[h][2], IsRecv))
           rest   == [wire EXCEPT ![p][d] = Tail(@)]
       IN  IF takes /\ m.what = "apperr"
           THEN /\ PeerAppError(h)
                /\ wire' = rest
                /\ UNCHANGED << sentCtr, peerCtr, fresh, peerSeq, noteVars >>
           ELSE /\ IF takes /\ m.what = "counter" /\ m.seq > peerSeq[h]
                   THEN /\ peerCtr' = [peerCtr EXCEPT ![h] = m.count]
                        /\ peerSeq' = [peerSeq EXCEPT ![h] = m.seq]
                        \* the answer h awaited, which no replay needs, is used up at once
                        /\ fresh' = [fresh EXCEPT ![h] =
                                        ~asked[h] \/ (sendMode[h] = "Fallback" /\ ~replayed[h])]
                        /\ asked' = [asked EXCEPT ![h] = FALSE]
                        /\ sentCtr' = IF asked[h] THEN sentCtr ELSE [sentCtr EXCEPT ![h] = FALSE]
                        /\ wire' = rest
                        \* notifications the counter covers need no replay (D.keepNotes)
                        /\ acked' = [acked EXCEPT ![h] = Uncounted(h, m.count)]
                        \* the peer fails over again: the fail-back it announced is over
                        /\ failbackAt' = [failbackAt EXCEPT ![h] = 0]
                        /\ UNCHANGED << rq, cq, unwritten, recvMode, buffered, rpend, recvDone,
                                        resent >>
                   ELSE IF takes /\ m.what = "counter" /\ m.seq = peerSeq[h] /\ m.ask /\ sentCtr[h]
                   THEN /\ wire' = Resend(rest, h, asked[h])
                        /\ UNCHANGED << rq, cq, unwritten, recvMode, buffered, rpend, recvDone,
                                        failbackAt, sentCtr,
                                        peerCtr, fresh, asked, peerSeq, noteVars >>
                   ELSE IF takes /\ m.what = "failback" /\ recvMode[h] = "Fallback"
                   THEN /\ IF recvDone[h] + Len(good) >= m.count
                           THEN MoveBack(h, cq[h], recvDone[h], rpend[h])
                           ELSE /\ failbackAt' = [failbackAt EXCEPT ![h] = m.count]
                                /\ UNCHANGED << rq, cq, buffered, recvDone, rpend, recvMode >>
                        /\ wire' = rest
                        /\ UNCHANGED << unwritten, sentCtr, peerCtr, fresh, asked, peerSeq,
                                        noteVars >>
                   ELSE /\ wire' = IF alive /\ OwnAppError(h) /\ m.what = "counter"
                                    THEN TellAppError(rest, h) ELSE rest
                        /\ UNCHANGED << rq, cq, unwritten, recvMode, buffered, rpend, recvDone,
                                        failbackAt, sentCtr,
                                        peerCtr, fresh, asked, peerSeq, noteVars >>
                /\ UNCHANGED << qp, fatal, sendMode, pending, fence, peerFailed >>
    /\ UNCHANGED << appVars, requesterVars, epsn, saved, incarnation, faultVars, historyVars, replayed,
                    refused, ctrSeq, ctrVal, reconnecting >>

(***************************************************************************)
(* A request to reconnect the default path, or its answer, arrives at      *)
(* host h (on the backup path). A request for an incarnation after h's: if h    *)
(* does not use its default QP (~Holds1: a reset would lose WRs) and its   *)
(* NIC there is up and wrote every completion it made, h resets the QP     *)
(* into that incarnation - a reconnect h awaited itself is superseded - and    *)
(* answers; else it drops the request, which the peer's timer resends.     *)
(* A request for h's own incarnation (a resend whose answer was lost, or both  *)
(* asked at once): h answers again, and if h awaits the answer for that    *)
(* incarnation itself, the request is as good: the peer's end is in it. The    *)
(* answer to the reconnect h awaits ends the wait likewise: its send       *)
(* side waits for the fence. Anything else                                 *)
(* (older, or to a host whose QP pair is its application's): nothing.      *)
(* Model: layer.take_reconnect. C: take_reconnect, take_reconnected.       *)
(***************************************************************************)
\* The peer's end of the default path is in incarnation e: if that is the reconnect host h
\* awaits, the wait ends and its send side waits for the fence.
ReconnectDone(h, e) ==
    IF reconnecting[h] = e
    THEN /\ reconnecting' = [reconnecting EXCEPT ![h] = 0]
         /\ sendMode' = IF sendMode[h] = "Fallback"
                        THEN [sendMode EXCEPT ![h] = "WaitSignaled"] ELSE sendMode
    ELSE UNCHANGED << reconnecting, sendMode >>

TakeReconnect(p, d) ==
    LET m      == Head(wire[p][d])
        h      == To(d)
        takes  == nic[h][p] /\ qp[h][p] = "RTS" /\ m.incarnation = IncarnationOf(h, p) /\ ~AppOwned(h)
        rest   == [wire EXCEPT ![p][d] = Tail(@)]
        answer == Push(rest, p, From(h), Ctl(h, p, "reconnected", 0, m.seq, FALSE))
    IN  IF /\ takes /\ m.what = "reconnect" /\ m.seq > incarnation[h]
           /\ ~Holds1(h) /\ nic[h][1] /\ unwritten[h][1] = << >>
        THEN /\ ResetPath1(h, m.seq)
             /\ reconnecting' = [reconnecting EXCEPT ![h] = 0]
             /\ wire' = answer
             /\ UNCHANGED sendMode
        ELSE IF takes /\ m.what = "reconnect" /\ m.seq = incarnation[h]
        THEN /\ wire' = answer
             /\ ReconnectDone(h, m.seq)
             /\ UNCHANGED << sq, rq, qpVars, PsnState >>
        ELSE IF takes /\ m.what = "reconnected"
        THEN /\ wire' = rest
             /\ ReconnectDone(h, m.seq)
             /\ UNCHANGED << sq, rq, qpVars, PsnState >>
        ELSE /\ wire' = rest
             /\ UNCHANGED << sq, rq, qpVars, PsnState, reconnecting, sendMode >>

\* A control message of the layer arrives: TakeControl or TakeReconnect, by its kind.
\* Model: layer.deliver_control (the event Deliver, next.deliver). C: sn_deliver hands
\* it to shift_ctl_input.
DeliverControl(p, d) ==
    /\ wire[p][d] # << >>
    /\ Head(wire[p][d]).kind = "ctl"
    /\ IF Head(wire[p][d]).what \in {"reconnect", "reconnected"}
       THEN /\ TakeReconnect(p, d)
            /\ UNCHANGED << appVars, historyVars, faultVars, recvMode, pending, buffered, rpend,
                            recvDone, failbackAt, sentCtr, peerCtr, fresh, asked, replayed,
                            fence, refused, ctrSeq, ctrVal, peerSeq, peerFailed, noteVars >>
       ELSE TakeControl(p, d)
    /\ event' = << "Deliver", p, d >>

\* Host h sent its counter first and awaits the peer's answer, which the peer is
\* not about to send (it did not take h's counter, or it answered).
CounterUnanswered(h) ==
    /\ asked[h] /\ sentCtr[h]
    /\ ~(peerSeq[Peer(h)] = ctrSeq[h] /\ ~sentCtr[Peer(h)])

(***************************************************************************)
(* Host h's handshake timer fires: h awaits the answer to its counter      *)
(* (CounterUnanswered) or to its request to reconnect (reconnecting),      *)
(* and nothing is in flight on the backup path: the message or its         *)
(* answer was lost, or the peer could not reset its end yet. h resends     *)
(* what it awaits the answer to. Like Timeout's quiet wire, this is the    *)
(* the timer outlasts a round trip: it fires after a loss, not while       *)
(* the peer is slow (docs/model.md). It has no budget here (the wire       *)
(* loses at most MaxDrops messages) and fires only where the resend can    *)
(* leave; never once h's QP pair is its application's (AppOwned).          *)
(* Model: layer.handshake_timeout. C: shift_timer(ep, 2) (whose            *)
(* ctl_retries budget, then giving up, is outside the spec).               *)
(***************************************************************************)
HandshakeTimeout(h) ==
    \* (a negation, not a disjunction: TLC would count a step per true disjunct)
    /\ ~(~CounterUnanswered(h) /\ reconnecting[h] = 0) /\ ~AppOwned(h)
    /\ nic[h][2] /\ qp[h][2] = "RTS" /\ link[2]
    /\ wire[2]["AtoB"] = << >> /\ wire[2]["BtoA"] = << >>
    /\ wire' = LET w == IF CounterUnanswered(h) THEN Resend(wire, h, TRUE) ELSE wire
               IN  IF reconnecting[h] = 0 THEN w
                   ELSE Push(w, 2, From(h), Ctl(h, 2, "reconnect", 0, reconnecting[h], FALSE))
    /\ event' = << "HandshakeTimeout", h >>
    /\ UNCHANGED << appVars, requesterVars, responderVars, qpVars, faultVars, historyVars,
                    layerVars >>

\* Host h's default path waits for ever: the oldest WR its NIC has not had
\* acknowledged there is a notification, the peer has no receive WR on its
\* default QP and posts none there (its receive side is off the default path and
\* no fail-back notice of h's is on its way to move it back: F8), and RC answers
\* with RNR NAKs retried for ever.
WaitsForEver(h) ==
    /\ RnrNak /\ RnrRetry = 7
    /\ qp[h][1] = "RTS" /\ una[h][1] <= Len(sq[h][1])
    /\ program[h][sq[h][1][una[h][1]]].op \in TwoSided
    /\ rq[Peer(h)][1] = << >> /\ recvMode[Peer(h)] # "Default"
    /\ nic[Peer(h)][1] /\ qp[Peer(h)][1] = "RTS" /\ failbackAt[Peer(h)] = 0
    /\ \A i \in DOMAIN wire[1][From(h)] : wire[1][From(h)][i].kind # "ctl"

(***************************************************************************)
(* Host h's completion timer fires: a WR on the default path waits for     *)
(* ever for its completion (WaitsForEver: RNR NAKs retried for ever, no    *)
(* error will come). The layer takes it as a failure of the default path   *)
(* and fails over, which re-aligns both hosts' receive WRs (the fix of     *)
(* F8). Like the other timers, it fires once the wait is for ever, not     *)
(* while the peer is slow; not once h's QP pair is its application's.      *)
(* Model: layer.completion_timeout. C: shift_timer(ep, 1).                 *)
(***************************************************************************)
CompletionTimeout(h, D) ==
    /\ D.failover /\ ~AppOwned(h) /\ sendMode[h] = "Default"
    /\ WaitsForEver(h)
    /\ Trigger(h, D, "RETRY_EXC_ERR")
    /\ UNCHANGED << wire, peerCtr, fresh, asked, queried, seqVars >>
    /\ UNCHANGED PsnState
    /\ event' = << "CompletionTimeout", h >>
    /\ UNCHANGED ProgressFrame

(***************************************************************************)
(* Host h's layer reads the asynchronous event of its NIC p's death        *)
(* (IBV_EVENT_DEVICE_FATAL; DeviceFatal): the NIC completes nothing, so    *)
(* the layer completes for it what the kernel completes for its own        *)
(* consumers (mlx5_ib_poll_sw_comp): every WR of the QP that no            *)
(* completion covers - the send WRs from the one NicFail recorded (after   *)
(* the last signaled one the peer acknowledged: Covered; for a QP that     *)
(* was in the error state already, those posted since), then the receive   *)
(* WRs, those whose completion died with the NIC first - flushed, behind   *)
(* the completions already in host memory. From then on the layer flushes  *)
(* each post itself (TakenOver), until the QP is reset; a recovered NIC's  *)
(* second death changes nothing. A failover starts from these flushes as   *)
(* from any error polled off the default QP (PollCq). A layer that never   *)
(* reads the event would wait for ever: the silent QP's WRs never          *)
(* complete. Every design reads it (NoFailover's application too).         *)
(* Model: layer.fatal_event. C: shift_async_event.                         *)
(***************************************************************************)
FatalEvent(h, p) ==
    /\ Silent(h, p)
    /\ fatal' = [fatal EXCEPT ![h][p] = TakenOver]
    /\ cq' = [cq EXCEPT ![h][p] =
                @ \o Flushed(SubSeq(sq[h][p], fatal[h][p], Len(sq[h][p])))
                  \o FlushedRecvs(rq[h][p])]
    /\ rq' = [rq EXCEPT ![h][p] = << >>]
    /\ event' = << "FatalEvent", h, p >>
    /\ UNCHANGED << appVars, requesterVars, epsn, saved, qp, unwritten, incarnation, wire, faultVars,
                    historyVars, layerVars >>

(* ------------------------- Init, Next, fairness -------------------------- *)

\* The applications pick one of the Workloads (each host's program and stores);
\* every queue is empty, every QP ready to send, every link and NIC up, both
\* layers in Default.
\* Model: state.initial. C: sn_fabric_create, then shift_sim_connect.
Init ==
    /\ \E k \in Workloads : /\ program = [h \in Hosts |-> ProgramOf(k, h)]
                            /\ stores = [h \in Hosts |-> StoresAt(k, h)]
    /\ posted = [h \in Hosts |-> 0] /\ recvPosted = [h \in Hosts |-> 0]
    /\ stored = [h \in Hosts |-> 0]
    /\ sndSeen = [h \in Hosts |-> << >>] /\ rcvSeen = [h \in Hosts |-> << >>]
    /\ sq = [h \in Hosts |-> [p \in Paths |-> << >>]]
    /\ una = [h \in Hosts |-> [p \in Paths |-> 1]]
    /\ nxt = [h \in Hosts |-> [p \in Paths |-> 1]]
    /\ retry = [h \in Hosts |-> [p \in Paths |-> MaxRetries]]
    /\ rnrLeft = [h \in Hosts |-> [p \in Paths |-> RnrRetry]]
    /\ epsn = [h \in Hosts |-> [p \in Paths |-> 1]]
    /\ saved = [h \in Hosts |-> [p \in Paths |-> {}]]
    /\ rq = [h \in Hosts |-> [p \in Paths |-> << >>]]
    /\ qp = [h \in Hosts |-> [p \in Paths |-> "RTS"]]
    /\ cq = [h \in Hosts |-> [p \in Paths |-> << >>]]
    /\ unwritten = [h \in Hosts |-> [p \in Paths |-> << >>]]
    /\ fatal = [h \in Hosts |-> [p \in Paths |-> Speaking]]
    /\ incarnation = [h \in Hosts |-> 0]
    /\ wire = [p \in Paths |-> [d \in Directions |-> << >>]]
    /\ link = [p \in Paths |-> TRUE] /\ nic = [h \in Hosts |-> [p \in Paths |-> TRUE]]
    /\ faults = 0 /\ drops = 0
    /\ mem = [h \in Hosts |-> [r \in Regions |-> 0]]
    /\ bufs = [h \in Hosts |-> [r \in 1..NumNotes(program[Peer(h)]) |-> 0]]
    /\ execs = [h \in Hosts |-> [w \in DOMAIN program[h] |-> 0]]
    /\ copies = 0 /\ queried = FALSE
    /\ sendMode = [h \in Hosts |-> "Default"] /\ recvMode = [h \in Hosts |-> "Default"]
    /\ pending = [h \in Hosts |-> << >>] /\ buffered = [h \in Hosts |-> << >>]
    /\ rpend = [h \in Hosts |-> << >>] /\ recvDone = [h \in Hosts |-> 0]
    /\ failbackAt = [h \in Hosts |-> 0]
    /\ sentCtr = [h \in Hosts |-> FALSE] /\ peerCtr = [h \in Hosts |-> -1]
    /\ fresh = [h \in Hosts |-> FALSE] /\ asked = [h \in Hosts |-> FALSE]
    /\ replayed = [h \in Hosts |-> FALSE]
    /\ fence = [h \in Hosts |-> 0] /\ refused = [h \in Hosts |-> {}]
    /\ ctrSeq = [h \in Hosts |-> 0] /\ ctrVal = [h \in Hosts |-> 0]
    /\ peerSeq = [h \in Hosts |-> 0] /\ peerFailed = [h \in Hosts |-> FALSE]
    /\ reconnecting = [h \in Hosts |-> 0]
    /\ acked = [h \in Hosts |-> << >>] /\ resent = [h \in Hosts |-> {}]
    /\ event = << "Init" >>

\* The system: the applications, the NICs, the wire and the layer on both
\* hosts. Every one of its actions is fair (FailoverFairness).
\* Model: next.successors, the events whose action is in next.FAIR_ACTIONS.
\* C: the NICs' sn_* steps and the layer's shift_* calls.
System(D) ==
    \/ \E h \in Hosts : PostSend(h) \/ PostRecv(h) \/ AppWrite(h)
    \/ \E h \in Hosts, p \in Paths : Transmit(h, p) \/ Timeout(h, p) \/ WriteCqe(h, p)
                                     \/ FatalEvent(h, p)
    \/ \E p \in Paths, d \in Directions :
           DeliverPacket(p, d, D.staged) \/ DeliverControl(p, d)
    \/ \E h \in Hosts : PollCq(h, D) \/ Progress(h, D) \/ HandshakeTimeout(h)
                       \/ CompletionTimeout(h, D)

\* The environment: the wire loses a packet, links and NICs fail and come back.
\* None of it is fair.
\* Model: next.successors, the events of the vocabulary's FAULT_EVENTS.
\* C: sn_drop, sn_link_down, sn_link_up, sn_nic_fail, sn_nic_recover.
Environment ==
    \/ \E p \in Paths, d \in Directions : Drop(p, d)
    \/ FaultNext

FailoverNext(D) == System(D) \/ Environment

\* Weak fairness on every action of System(D) but HandshakeTimeout, which is strongly
\* fair: a host's timer runs on its own clock, and the peer's traffic on the backup path
\* (which disables the timer here, the quiet-wire abstraction) cannot hold it off for
\* ever. Under weak fairness a peer resending a request the host cannot answer (its NIC
\* dead for good) would starve the host's own resend (docs/findings.md).
\* Model: next.fairness_class, next.STRONG_ACTIONS.
FailoverFairness(D) ==
    /\ \A h \in Hosts : WF_vars(PostSend(h)) /\ WF_vars(PostRecv(h)) /\ WF_vars(AppWrite(h))
    /\ \A h \in Hosts, p \in Paths : WF_vars(Transmit(h, p)) /\ WF_vars(Timeout(h, p))
                                   /\ WF_vars(WriteCqe(h, p)) /\ WF_vars(FatalEvent(h, p))
    /\ \A p \in Paths, d \in Directions :
           WF_vars(DeliverPacket(p, d, D.staged)) /\ WF_vars(DeliverControl(p, d))
    /\ \A h \in Hosts : WF_vars(PollCq(h, D)) /\ WF_vars(Progress(h, D))
                      /\ SF_vars(HandshakeTimeout(h)) /\ WF_vars(CompletionTimeout(h, D))

=============================================================================
