----------------------------- MODULE NcclPortProbe -----------------------------
(***************************************************************************)
(* NCCL's failover in the main thread (p2p_resiliency.cc = RES, p2p.cc = *)
(* P2P, commit 5067397c): polling the data CQs (ncclIbTest), handling an *)
(* error completion (the fatal check, marking the device failed,        *)
(* replacing its QPs in activeQps, starting its port recovery), tracking *)
(* a failed send per slot with a generation id, the probe (an RDMA READ  *)
(* of the receiver's completion record over a probing QP), selective     *)
(* retransmission, the count-based completion rule, and the main        *)
(* thread's side of recovery (restoring activeQps: fail-back). The      *)
(* design record N says whether port recovery runs.                      *)
(***************************************************************************)
EXTENDS NcclPortHandshake

\* ncclIbResiliencyCheckErrorNotFatal (RES 24-66): with the device of the error, more
\* than one device not Ok (or none left) is fatal, ncclRemoteError.
Fatal(devs, d) == Cardinality({i \in Devs : i = d \/ devs[i] # "Ok"}) > 1

\* ncclIbResiliencyReplaceQps (RES 69-122): every lane on the failed device moves to
\* the next QP (in qps[] order) on an Ok device; with two devices, the other one.
Replaced(active, d) == [l \in Lanes |-> IF active[l] = d THEN Other(d) ELSE active[l]]

\* ncclIbResiliencyHandleDeviceFailure (RES 372-400) on side h for device d, as new
\* values: an Ok device becomes Error (or RecoveryInProgress, with its recovery context
\* initialised: ncclIbPortRecoveryHandleFailure, REC 1414-1442, ContextInit REC
\* 220-293, which moves the device's data QPs to ERR, flushing them). `cq` is the CQ
\* of device d after the poll that found the error.
FailVals(N, h, d, cq) ==
    LET devs == DevOf(h)
        fail == devs[d] = "Ok"
        rc == N.recovery /\ fail
    IN [dev |-> IF fail THEN [devs EXCEPT ![d] = IF N.recovery THEN "RecoveryInProgress"
                                                                  ELSE "Error"] ELSE devs,
        active |-> IF fail THEN Replaced(IF h = "S" THEN activeS ELSE activeR, d)
                   ELSE IF h = "S" THEN activeS ELSE activeR,
        qp |-> IF rc THEN [qp EXCEPT ![h][d] = "ERR"] ELSE qp,
        sq |-> IF rc /\ h = "S" THEN [sq EXCEPT ![d] = << >>] ELSE sq,
        rsq |-> IF rc /\ h = "R" THEN [rsq EXCEPT ![d] = << >>] ELSE rsq,
        cq |-> IF ~rc THEN cq
               ELSE IF h = "S" THEN [cq EXCEPT ![d] = @ \o FlushSend(d)]
               ELSE [cq EXCEPT ![d] = @ \o FlushCts(d) \o << FlushMark >>],
        ghost |-> IF rc /\ h = "S" THEN [ghost EXCEPT ![d] = Ghosts(d)] ELSE ghost,
        rec |-> IF rc THEN [rec EXCEPT ![h][d] = InitCtx] ELSE rec,
        recvWr |-> IF rc THEN [recvWr EXCEPT ![h][d] = CapWr(@ + InitWrs(h))] ELSE recvWr]

(* ------------------------------ the sender ------------------------------ *)

\* Poll a successful CQE from the sender's data CQ of device d (P2P 845-866,
\* 695-745): the request in sendReqs[slot][0] loses an event on d; none there is
\* ncclInternalError (P2P 700-707).
SPollOk(d) ==
    /\ scq[d] # << >> /\ Head(scq[d]).ok /\ err["S"] = "none"
    /\ LET r == sSlot[Head(scq[d]).slot] IN
       IF r = 0 THEN err' = [err EXCEPT !["S"] = "internal"] /\ UNCHANGED sEv
       ELSE sEv' = [sEv EXCEPT ![r][d] = @ - 1] /\ UNCHANGED err
    /\ scq' = [scq EXCEPT ![d] = Tail(@)]
    /\ UNCHANGED << sPosted, rPosted, sDone, rDone, activeS, devS, sent, ctsFifo, sSlot >>
    /\ UNCHANGED << failed, probeRes, probe, receiverVars, qp, sq, rsq, rcq, ghost >>
    /\ UNCHANGED << faultVars, recVars, historyVars >>

\* ncclIbResiliencySendRequestInit (RES 124-179) for slot s: the request in
\* sendReqs[s][0] (RES 340-369); a generation already tracked or already replayed is
\* ignored (RES 130-149), an older one is ncclInternalError (RES 151-156).
TrackFailure(s) ==
    LET r == sSlot[s] IN
    IF r = 0 \/ failed[s].gen = r THEN << failed, "none" >>
    ELSE IF r < failed[s].gen THEN << failed, "internal" >>
    ELSE << [failed EXCEPT ![s] = [st |-> "Pending", req |-> r, gen |-> r, att |-> 0]], "none" >>

\* Poll an error CQE from the sender's data CQ of device d:
\* ncclIbResiliencyHandleCompletionError (RES 1043-1062): the fatal check, the device
\* marked failed, then the failed send tracked in its slot.
SPollErr(N, d) ==
    /\ scq[d] # << >> /\ ~Head(scq[d]).ok /\ err["S"] = "none"
    /\ LET tail == [scq EXCEPT ![d] = Tail(@)] IN
       IF Fatal(devS, d)
       THEN /\ err' = [err EXCEPT !["S"] = "remote"] /\ scq' = tail
            /\ UNCHANGED << devS, activeS, qp, sq, ghost, rec, recvWr, failed >>
       ELSE LET v == FailVals(N, "S", d, tail)
                t == TrackFailure(Head(scq[d]).slot)
            IN /\ devS' = v.dev /\ activeS' = v.active /\ qp' = v.qp /\ sq' = v.sq
               /\ scq' = v.cq /\ ghost' = v.ghost /\ rec' = v.rec /\ recvWr' = v.recvWr
               /\ failed' = t[1]
               /\ err' = IF t[2] = "none" THEN err ELSE [err EXCEPT !["S"] = t[2]]
    /\ UNCHANGED << sPosted, rPosted, sDone, rDone, sEv, sent, ctsFifo, sSlot, probeRes >>
    /\ UNCHANGED << probe, receiverVars, rsq, rcq, faultVars, uc, rcqRec, historyVars >>

\* The first Ok device, where ncclIbResiliencyProbePost looks (RES 477-491).
OkDevs == {i \in Devs : devS[i] = "Ok"}
FirstOk == IF devS[0] = "Ok" THEN 0 ELSE 1

\* ncclIbResiliencyProbePost (RES 455-532) for the tracked send of slot s, after the
\* probe delay: too many failed attempts is ncclRemoteError (RES 459-463), no Ok device
\* ncclInternalError (RES 487-491); else an RDMA READ of completions[] of the slot's
\* record is posted on the first Ok device's probing QP.
ProbePost(s) ==
    /\ failed[s].req # 0 /\ failed[s].st = "Pending" /\ err["S"] = "none"
    /\ IF failed[s].att > ProbeAttempts
       THEN err' = [err EXCEPT !["S"] = "remote"] /\ UNCHANGED << failed, probe >>
       ELSE IF OkDevs = {}
       THEN err' = [err EXCEPT !["S"] = "internal"] /\ UNCHANGED << failed, probe >>
       ELSE /\ failed' = [failed EXCEPT ![s].st = "ProbePosted"]
            /\ probe' = [probe EXCEPT ![s] = FirstOk] /\ UNCHANGED err
    /\ UNCHANGED << sPosted, rPosted, sDone, rDone, activeS, devS, sEv, sent, ctsFifo >>
    /\ UNCHANGED << sSlot, probeRes, receiverVars, nicVars, faultVars, recVars, historyVars >>

\* The probe's READ executes at the receiver and its CQE is polled (RES 534-547,
\* 561-586): probingResults[s] := the slot's completions[], indexed by the physical QP
\* the receiver polled each chunk on (P2P 775-778). PolledBeforeProbe: only once every
\* chunk of the slot that can still complete (its QP pair in RTS, its link up) was
\* delivered and ACKed, and both sides polled every CQE of the slot -- what the probe
\* delay (RES 465-472) is meant to give.
Settles(s) ==
    /\ \A d \in Devs : \A i \in 1..Len(rcq[d]) : ~(rcq[d][i].kind = "imm" /\ rcq[d][i].slot = s)
    /\ \A d \in Devs : \A i \in 1..Len(scq[d]) : scq[d][i].slot # s
    /\ \A d \in Devs : (link[d] /\ qp["S"][d] = "RTS" /\ qp["R"][d] = "RTS") =>
                          \A i \in 1..Len(sq[d]) : sq[d][i].slot # s
ProbeRead(s) ==
    /\ failed[s].st = "ProbePosted" /\ probe[s] # -1 /\ link[probe[s]]
    /\ PolledBeforeProbe => Settles(s)
    /\ probeRes' = [probeRes EXCEPT ![s] = [l \in Lanes |-> compl[s][l]]]
    /\ failed' = [failed EXCEPT ![s].st = "ProbeCompleted"]
    /\ probe' = [probe EXCEPT ![s] = -1]
    /\ UNCHANGED << appVars, activeS, devS, sEv, sent, ctsFifo, sSlot, receiverVars >>
    /\ UNCHANGED << nicVars, faultVars, recVars, historyVars >>

\* The probe fails (its link is down): ncclIbResiliencyProbeHandleCompletionEvent
\* (RES 549-556): the fatal check, the device marked failed, the probe pending again
\* with one more failed attempt.
ProbeFail(N, s) ==
    /\ failed[s].st = "ProbePosted" /\ probe[s] # -1 /\ ~link[probe[s]] /\ err["S"] = "none"
    /\ probe' = [probe EXCEPT ![s] = -1]
    /\ IF Fatal(devS, probe[s])
       THEN /\ err' = [err EXCEPT !["S"] = "remote"]
            /\ UNCHANGED << devS, activeS, qp, sq, scq, ghost, rec, recvWr, failed >>
       ELSE LET v == FailVals(N, "S", probe[s], scq) IN
            /\ devS' = v.dev /\ activeS' = v.active /\ qp' = v.qp /\ sq' = v.sq
            /\ scq' = v.cq /\ ghost' = v.ghost /\ rec' = v.rec /\ recvWr' = v.recvWr
            /\ failed' = [failed EXCEPT ![s].st = "Pending", ![s].att = @ + 1]
            /\ UNCHANGED err
    /\ UNCHANGED << sPosted, rPosted, sDone, rDone, sEv, sent, ctsFifo, sSlot, probeRes >>
    /\ UNCHANGED << receiverVars, rsq, rcq, faultVars, uc, rcqRec, historyVars >>

\* The probe's result (ncclIbResiliencyProgress, RES 1098-1102): every lane sent shows
\* delivered -> the events are cleared, the send completes (RES 409-445); else
\* ncclIbResiliencyRepostRequest (RES 206-256): events cleared, one event per lane
\* whose flag is unset on the device of activeQps[lane] now, and ncclIbMultiSend
\* resends exactly those lanes (P2P 160-170) into the buffer the FIFO slot names now.
\* Then the slot's tracking is freed, keeping its generation id (RES 181-203).
ProbeDone(s) ==
    LET r == failed[s].req
        missing == \E l \in Lanes : sent[r][l] /\ ~probeRes[s][l]
        L == {l \in Lanes : ~probeRes[s][l]}
    IN
    /\ failed[s].st = "ProbeCompleted" /\ r # 0 /\ err["S"] = "none"
    /\ IF ~missing
       THEN sEv' = [sEv EXCEPT ![r] = [d \in Devs |-> 0]] /\ UNCHANGED << sq, scq >>
       ELSE /\ sEv' = [sEv EXCEPT ![r] = [d \in Devs |-> Cardinality({l \in L : activeS[l] = d})]]
            /\ sq' = PostedSq(r, L, activeS)
            /\ scq' = PostedScq(scq, r, L, activeS)
    /\ failed' = [failed EXCEPT ![s] = [st |-> "Pending", req |-> 0, gen |-> @.gen, att |-> 0]]
    /\ UNCHANGED << appVars, activeS, devS, sent, ctsFifo, sSlot, probeRes, probe >>
    /\ UNCHANGED << receiverVars, qp, rsq, rcq, ghost, faultVars, recVars, historyVars >>

\* ncclIbTest on send r (P2P 817-833): complete by the count rule (P2P 620-627, RES
\* 998-1041); the slot is free again (P2P 657-664).
STest(r) ==
    /\ sPosted >= r /\ ~sDone[r] /\ err["S"] = "none" /\ IsComplete(sEv[r])
    /\ sDone' = [sDone EXCEPT ![r] = TRUE]
    /\ sSlot' = [sSlot EXCEPT ![Slot(r)] = 0]
    /\ UNCHANGED << sPosted, rPosted, rDone, err, activeS, devS, sEv, sent, ctsFifo, failed >>
    /\ UNCHANGED << probeRes, probe, receiverVars, nicVars, faultVars, recVars, historyVars >>

(* ------------------------------ the receiver ---------------------------- *)

\* Poll a successful CQE from the receiver's data CQ of device d (P2P 746-798): a
\* chunk's imm marks completions[qpIndex] (the physical QP it came on) and takes an
\* event of the receive that holds the slot now; a receive already completed
\* (UNUSED) ignores it (P2P 748-755); a CTS completion does nothing.
RPollOk(d) ==
    LET e == Head(rcq[d])
        q == rSlot[e.slot]
        counts == e.kind = "imm" /\ q # 0 /\ ~rDone[q]
    IN
    /\ rcq[d] # << >> /\ e.ok /\ err["R"] = "none"
    /\ rcq' = [rcq EXCEPT ![d] = Tail(@)]
    /\ compl' = IF counts THEN [compl EXCEPT ![e.slot][d] = TRUE] ELSE compl
    /\ rEv' = IF counts THEN [rEv EXCEPT ![q][d] = @ - 1] ELSE rEv
    /\ late' = (late \/ (e.kind = "imm" /\ rDone[e.req]))
    /\ UNCHANGED << appVars, senderVars, activeR, devR, rSlot, buf, qp, sq, rsq, scq, ghost >>
    /\ UNCHANGED << faultVars, recVars, aborted >>

\* Poll an error CQE at the receiver (RES 1043-1062, 268-338): the fatal check, the
\* device marked failed; a failed CTS is re-posted at once for the receive that holds
\* its slot (ncclIbPostFifo over the new activeQps, RES 312-321); a flushed receive
\* WR, or a CTS of a receive already completed, is ignored.
RPollErr(N, d) ==
    LET e == Head(rcq[d])
        tail == [rcq EXCEPT ![d] = Tail(@)]
        v == FailVals(N, "R", d, tail)
        q == rSlot[e.slot]
        cts == PostCts(q, v.active, v.qp, v.rsq, v.cq)
    IN
    /\ rcq[d] # << >> /\ ~e.ok /\ err["R"] = "none"
    /\ IF Fatal(devR, d)
       THEN /\ err' = [err EXCEPT !["R"] = "remote"] /\ rcq' = tail
            /\ UNCHANGED << devR, activeR, qp, rsq, rec, recvWr >>
       ELSE /\ devR' = v.dev /\ activeR' = v.active /\ qp' = v.qp /\ rec' = v.rec
            /\ recvWr' = v.recvWr /\ UNCHANGED err
            /\ IF e.kind = "cts" /\ q # 0 /\ ~rDone[q]
               THEN rsq' = cts[1] /\ rcq' = cts[2]
               ELSE rsq' = v.rsq /\ rcq' = v.cq
    /\ UNCHANGED << sPosted, rPosted, sDone, rDone, senderVars, rEv, compl, rSlot, buf >>
    /\ UNCHANGED << sq, scq, ghost, faultVars, uc, rcqRec, historyVars >>

\* ncclIbTest on receive r (P2P 817-833): complete by the count rule (P2P 620-627, RES
\* 998-1041: |negative| == remaining).
RTest(r) ==
    /\ rPosted >= r /\ ~rDone[r] /\ err["R"] = "none" /\ IsComplete(rEv[r])
    /\ rDone' = [rDone EXCEPT ![r] = TRUE]
    /\ UNCHANGED << sPosted, rPosted, sDone, err, senderVars, receiverVars, nicVars >>
    /\ UNCHANGED << faultVars, recVars, historyVars >>

(* ------------------------ the main thread's recovery --------------------- *)

\* ncclIbResiliencyProgress (RES 1106-1131): a Recovered device gets its lanes back
\* (ncclIbResiliencyActiveQpsRestore, RES 1064-1075: fail-back) and is Ok again; a
\* RecoveryFailed one becomes ErrorPermanent.
MainRecovery(h, d) ==
    LET devs == DevOf(h)
        nd == [devs EXCEPT ![d] = IF devs[d] = "Recovered" THEN "Ok" ELSE "ErrorPermanent"]
        back(a) == [l \in Lanes |-> IF l = d THEN d ELSE a[l]]
    IN
    /\ devs[d] \in {"Recovered", "RecoveryFailed"}
    /\ IF h = "S"
       THEN /\ devS' = nd /\ UNCHANGED devR
            /\ activeS' = IF devs[d] = "Recovered" THEN back(activeS) ELSE activeS
            /\ UNCHANGED activeR
       ELSE /\ devR' = nd /\ UNCHANGED devS
            /\ activeR' = IF devs[d] = "Recovered" THEN back(activeR) ELSE activeR
            /\ UNCHANGED activeS
    /\ UNCHANGED << appVars, sEv, sent, ctsFifo, sSlot, failed, probeRes, probe >>
    /\ UNCHANGED << rEv, compl, rSlot, buf, nicVars, faultVars, recVars, historyVars >>

(* ---------------------------------- all ---------------------------------- *)

Init ==
    /\ sPosted = 0 /\ rPosted = 0
    /\ sDone = [r \in Reqs |-> FALSE] /\ rDone = [r \in Reqs |-> FALSE]
    /\ err = [h \in Sides |-> "none"]
    /\ activeS = [l \in Lanes |-> l] /\ devS = [d \in Devs |-> "Ok"]
    /\ sEv = [r \in Reqs |-> [d \in Devs |-> 0]]
    /\ sent = [r \in Reqs |-> [l \in Lanes |-> FALSE]]
    /\ ctsFifo = [s \in SlotIds |-> 0] /\ sSlot = [s \in SlotIds |-> 0]
    /\ failed = [s \in SlotIds |-> [st |-> "Pending", req |-> 0, gen |-> 0, att |-> 0]]
    /\ probeRes = [s \in SlotIds |-> [l \in Lanes |-> FALSE]]
    /\ probe = [s \in SlotIds |-> -1]
    /\ activeR = [l \in Lanes |-> l] /\ devR = [d \in Devs |-> "Ok"]
    /\ rEv = [r \in Reqs |-> [d \in Devs |-> 0]]
    /\ compl = [s \in SlotIds |-> [d \in Devs |-> FALSE]]
    /\ rSlot = [s \in SlotIds |-> 0]
    /\ buf = [r \in Reqs |-> [l \in Lanes |-> 0]]
    /\ qp = [h \in Sides |-> [d \in Devs |-> "RTS"]]
    /\ sq = [d \in Devs |-> << >>] /\ rsq = [d \in Devs |-> << >>]
    /\ scq = [d \in Devs |-> << >>] /\ rcq = [d \in Devs |-> << >>]
    /\ ghost = [d \in Devs |-> << >>]
    /\ link = [d \in Devs |-> TRUE] /\ faults = 0 /\ losses = 0
    /\ rec = [h \in Sides |-> [d \in Devs |-> NoCtx]]
    /\ uc = [d \in Devs |-> [h \in Sides |-> << >>]]
    /\ rcqRec = [h \in Sides |-> [d \in Devs |-> << >>]]
    /\ recvWr = [h \in Sides |-> [d \in Devs |-> 0]]
    /\ late = FALSE /\ aborted = FALSE

\* Everything but the environment (FaultNext), each action weakly fair.
SystemNext(N) ==
    \/ \E r \in Reqs : Irecv(r) \/ Isend(r) \/ STest(r) \/ RTest(r)
    \/ \E d \in Devs : \/ DeliverData(d) \/ AckData(d) \/ DeliverGhost(d) \/ DeliverCts(d)
                       \/ AckCts(d) \/ QpTimeoutS(d) \/ QpTimeoutR(d)
                       \/ SPollOk(d) \/ SPollErr(N, d) \/ RPollOk(d) \/ RPollErr(N, d)
                       \/ RecoveryThread(d)
                       \/ \E h \in Sides : MainRecovery(h, d)
    \/ \E s \in SlotIds : ProbePost(s) \/ ProbeRead(s) \/ ProbeFail(N, s) \/ ProbeDone(s)

PortNext(N) == SystemNext(N) \/ FaultNext(N)

PortFairness(N) ==
    /\ \A r \in Reqs : WF_vars(Irecv(r)) /\ WF_vars(Isend(r)) /\ WF_vars(STest(r))
                       /\ WF_vars(RTest(r))
    /\ \A d \in Devs :
          /\ WF_vars(DeliverData(d)) /\ WF_vars(AckData(d)) /\ WF_vars(DeliverGhost(d))
          /\ WF_vars(DeliverCts(d)) /\ WF_vars(AckCts(d)) /\ WF_vars(QpTimeoutS(d))
          /\ WF_vars(QpTimeoutR(d)) /\ WF_vars(SPollOk(d)) /\ WF_vars(SPollErr(N, d))
          /\ WF_vars(RPollOk(d)) /\ WF_vars(RPollErr(N, d))
          /\ WF_vars(SPostAlive(d)) /\ WF_vars(SPollAlive(d)) /\ WF_vars(SAckPoll(d))
          /\ WF_vars(SAckTimeout(d)) /\ WF_vars(SRestoreAck(d)) /\ WF_vars(SAckCmp(d))
          /\ WF_vars(RAliveRecv(d)) /\ WF_vars(RAliveTimeout(d)) /\ WF_vars(RAliveAckWait(d))
          /\ WF_vars(RAck(d)) /\ WF_vars(RAckTimeout(d))
          /\ \A h \in Sides : WF_vars(MainRecovery(h, d)) /\ WF_vars(RecStart(h, d))
                                /\ WF_vars(RecEnd(h, d)) /\ WF_vars(DeliverMsg(d, h))
    /\ \A s \in SlotIds : WF_vars(ProbePost(s)) /\ WF_vars(ProbeRead(s))
                          /\ WF_vars(ProbeFail(N, s)) /\ WF_vars(ProbeDone(s))
=============================================================================
