----------------------------- MODULE NcclPortData -----------------------------
(***************************************************************************)
(* NCCL's IB data path with resiliency on, as the model of               *)
(* NcclPortState.tla abstracts it: the receiver's CTS (an RDMA WRITE     *)
(* into the sender's FIFO slot), the sender's chunks (one RDMA           *)
(* WRITE_WITH_IMM per lane, signaled), RC delivery and ACKs per data     *)
(* QP, links failing, RC retry exhaustion, and UC loss of recovery       *)
(* messages. What a poll of a data CQ does is NcclPortProbe.tla.         *)
(* Citations: P2P = p2p.cc, COM = common.h, REC =                         *)
(* p2p_resiliency_recovery.cc, at commit 5067397c.                      *)
(***************************************************************************)
EXTENDS NcclPortState

\* The WRs ncclIbMultiSend posts for request r, lanes L, over the QPs of `active`
\* (P2P 83-260): one WRITE_WITH_IMM per lane, lanes in order, into the buffer of
\* the receive whose CTS the FIFO slot holds now (P2P 85, 102).
LaneSeq(L, k, active) ==
    (IF 0 \in L /\ active[0] = k THEN << 0 >> ELSE << >>)
    \o (IF 1 \in L /\ active[1] = k THEN << 1 >> ELSE << >>)
NewWrs(r, L, k, active) ==
    LET ls == LaneSeq(L, k, active)
    IN [i \in 1..Len(ls) |-> [req |-> r, lane |-> ls[i], slot |-> Slot(r),
                              tgt |-> ctsFifo[Slot(r)], dlv |-> FALSE]]
\* Posting to a QP in ERR succeeds and completes each WR with a flush error.
PostedSq(r, L, active) ==
    [k \in Devs |-> IF qp["S"][k] = "RTS" THEN sq[k] \o NewWrs(r, L, k, active) ELSE sq[k]]
PostedScq(base, r, L, active) ==
    [k \in Devs |-> IF qp["S"][k] = "RTS" THEN base[k]
                    ELSE base[k] \o [i \in 1..Len(NewWrs(r, L, k, active)) |->
                                        [slot |-> Slot(r), ok |-> FALSE]]]

\* The CTS of receive r, posted on activeQps[id % ndevs] (p2p.h 22-29, P2P 364-428),
\* signaled with resiliency on (P2P 409-412).
CtsQp(r, active) == active[(r - 1) % 2]
PostCts(r, active, qpv, rsqIn, rcqIn) ==
    LET k == CtsQp(r, active) IN
    IF qpv["R"][k] = "RTS"
    THEN << [rsqIn EXCEPT ![k] = Append(@, [slot |-> Slot(r), req |-> r, dlv |-> FALSE])], rcqIn >>
    ELSE << rsqIn, [rcqIn EXCEPT ![k] = Append(@, [kind |-> "cts", slot |-> Slot(r),
                                                   req |-> r, ok |-> FALSE])] >>

\* Flushing a QP that went to ERR: every outstanding WR completes in error.
FlushSend(d) == [i \in 1..Len(sq[d]) |-> [slot |-> sq[d][i].slot, ok |-> FALSE]]
FlushCts(d) == [i \in 1..Len(rsq[d]) |-> [kind |-> "cts", slot |-> rsq[d][i].slot,
                                          req |-> rsq[d][i].req, ok |-> FALSE]]
\* The flush of the pre-posted receive WRs (wr_id NCCL_IB_RECV_WR_ID_DUMMY)
FlushMark == [kind |-> "flush", slot |-> 0, req |-> 0, ok |-> FALSE]
\* Without bounded packet lifetime, chunks not yet delivered may still be on the wire.
Ghosts(d) == IF BoundedLifetime THEN ghost[d]
             ELSE ghost[d] \o SelectSeq(sq[d], LAMBDA w : ~w.dlv)

FirstUndelivered(s) == CHOOSE i \in 1..Len(s) : ~s[i].dlv /\ \A j \in 1..(i - 1) : s[j].dlv
HasUndelivered(s) == \E i \in 1..Len(s) : ~s[i].dlv

(* ------------------------------ applications ---------------------------- *)

\* The receiver posts receive r: ncclIbIrecv (P2P 430-523): takes slot (r-1) % Slots
\* (recvReqs, P2P 462), sets its events from its activeQps (P2P 465-470), clears the
\* slot's completion record (P2P 498-500) and posts the CTS (P2P 515-518). A slot is
\* reused once its previous receive completed (and, with SlotGuard, its send too).
Irecv(r) ==
    /\ rPosted = r - 1 /\ err["R"] = "none"
    /\ r > Slots => (rDone[r - Slots] /\ (SlotGuard => sDone[r - Slots]))
    /\ LET cts == PostCts(r, activeR, qp, rsq, rcq) IN
       /\ rsq' = cts[1] /\ rcq' = cts[2]
    /\ rPosted' = r
    /\ rSlot' = [rSlot EXCEPT ![Slot(r)] = r]
    /\ rEv' = [rEv EXCEPT ![r] = EventsFor(activeR)]
    /\ compl' = [compl EXCEPT ![Slot(r)] = [d \in Devs |-> FALSE]]
    /\ UNCHANGED << sPosted, sDone, rDone, err, senderVars, activeR, devR, buf >>
    /\ UNCHANGED << qp, sq, scq, ghost, faultVars, recVars, historyVars >>

\* The sender posts send r: ncclIbIsend (P2P 262-358) once the FIFO slot holds r's
\* CTS (P2P 278-285) and the slot's previous send completed (P2P 293): events from
\* its activeQps (P2P 322-329), then ncclIbMultiSend over every lane (P2P 353).
Isend(r) ==
    /\ sPosted = r - 1 /\ err["S"] = "none"
    /\ ctsFifo[Slot(r)] = r /\ sSlot[Slot(r)] = 0
    /\ sPosted' = r
    /\ sSlot' = [sSlot EXCEPT ![Slot(r)] = r]
    /\ sEv' = [sEv EXCEPT ![r] = EventsFor(activeS)]
    /\ sent' = [sent EXCEPT ![r] = [l \in Lanes |-> TRUE]]
    /\ sq' = PostedSq(r, Lanes, activeS)
    /\ scq' = PostedScq(scq, r, Lanes, activeS)
    /\ UNCHANGED << rPosted, sDone, rDone, err, activeS, devS, ctsFifo, failed, probeRes, probe >>
    /\ UNCHANGED << receiverVars, qp, rsq, rcq, ghost, faultVars, recVars, historyVars >>

(* ------------------------------ the data QPs ---------------------------- *)

Lands(w) ==
    /\ buf' = IF w.tgt = 0 THEN buf ELSE [buf EXCEPT ![w.tgt][w.lane] = w.req]
    /\ late' = (late \/ rDone[w.req])

\* The oldest undelivered chunk on data QP d reaches the receiver's QP d: its data
\* lands in the receive buffer the sender addressed, and a RECV_RDMA_WITH_IMM CQE
\* waits in the receiver's CQ of device d (receive WRs are pre-posted, P2P 771-780).
DeliverData(d) ==
    /\ link[d] /\ qp["S"][d] = "RTS" /\ qp["R"][d] = "RTS" /\ HasUndelivered(sq[d])
    /\ LET i == FirstUndelivered(sq[d]) IN
       /\ sq' = [sq EXCEPT ![d][i].dlv = TRUE]
       /\ rcq' = [rcq EXCEPT ![d] = Append(@, [kind |-> "imm", slot |-> sq[d][i].slot,
                                                req |-> sq[d][i].req, ok |-> TRUE])]
       /\ Lands(sq[d][i])
    /\ UNCHANGED << appVars, senderVars, activeR, devR, rEv, compl, rSlot >>
    /\ UNCHANGED << qp, rsq, scq, ghost, faultVars, recVars, aborted >>

\* The ACK of the oldest delivered chunk completes its WR at the sender (signaled).
\* BoundedAckLifetime: the ACK comes from the receiver's QP d while it is in RTS; once
\* that QP went to ERR, an ACK not yet received was lost with the link or is never sent,
\* and the sender's QP retransmits into a dead QP (RETRY_EXC_ERR, QpTimeoutS).
AckData(d) ==
    /\ link[d] /\ qp["S"][d] = "RTS" /\ sq[d] # << >> /\ Head(sq[d]).dlv
    /\ BoundedAckLifetime => qp["R"][d] = "RTS"
    /\ sq' = [sq EXCEPT ![d] = Tail(@)]
    /\ scq' = [scq EXCEPT ![d] = Append(@, [slot |-> Head(sq[d]).slot, ok |-> TRUE])]
    /\ UNCHANGED << appVars, senderVars, receiverVars, qp, rsq, rcq, ghost >>
    /\ UNCHANGED << faultVars, recVars, historyVars >>

\* A chunk that outlived its QP (~BoundedLifetime) lands at whatever QP d is now.
DeliverGhost(d) ==
    /\ ghost[d] # << >> /\ link[d] /\ qp["R"][d] = "RTS"
    /\ ghost' = [ghost EXCEPT ![d] = Tail(@)]
    /\ rcq' = [rcq EXCEPT ![d] = Append(@, [kind |-> "imm", slot |-> Head(ghost[d]).slot,
                                             req |-> Head(ghost[d]).req, ok |-> TRUE])]
    /\ Lands(Head(ghost[d]))
    /\ UNCHANGED << appVars, senderVars, activeR, devR, rEv, compl, rSlot >>
    /\ UNCHANGED << qp, sq, rsq, scq, faultVars, recVars, aborted >>

\* The oldest CTS on QP d lands in the sender's FIFO slot (an RDMA WRITE, P2P 364-428).
DeliverCts(d) ==
    /\ link[d] /\ qp["R"][d] = "RTS" /\ qp["S"][d] = "RTS" /\ HasUndelivered(rsq[d])
    /\ LET i == FirstUndelivered(rsq[d]) IN
       /\ rsq' = [rsq EXCEPT ![d][i].dlv = TRUE]
       /\ ctsFifo' = [ctsFifo EXCEPT ![rsq[d][i].slot] = rsq[d][i].req]
    /\ UNCHANGED << appVars, activeS, devS, sEv, sent, sSlot, failed, probeRes, probe >>
    /\ UNCHANGED << receiverVars, qp, sq, scq, rcq, ghost, faultVars, recVars, historyVars >>

\* The CTS's ACK: a successful CQE at the receiver (P2P 787-798 ignores it); with
\* BoundedAckLifetime only while the sender's QP d, which sends it, is in RTS.
AckCts(d) ==
    /\ link[d] /\ qp["R"][d] = "RTS" /\ rsq[d] # << >> /\ Head(rsq[d]).dlv
    /\ BoundedAckLifetime => qp["S"][d] = "RTS"
    /\ rsq' = [rsq EXCEPT ![d] = Tail(@)]
    /\ rcq' = [rcq EXCEPT ![d] = Append(@, [kind |-> "cts", slot |-> Head(rsq[d]).slot,
                                             req |-> Head(rsq[d]).req, ok |-> TRUE])]
    /\ UNCHANGED << appVars, senderVars, receiverVars, qp, sq, scq, ghost >>
    /\ UNCHANGED << faultVars, recVars, historyVars >>

\* RC retry exhaustion at the sender: its QP d has WRs outstanding and the path is
\* dead (the link, or the peer's QP not in RTS): RETRY_EXC_ERR on the oldest, the
\* QP to ERR, WR_FLUSH_ERR on the rest.
QpTimeoutS(d) ==
    /\ qp["S"][d] = "RTS" /\ sq[d] # << >> /\ (~link[d] \/ qp["R"][d] # "RTS")
    /\ qp' = [qp EXCEPT !["S"][d] = "ERR"]
    /\ scq' = [scq EXCEPT ![d] = @ \o FlushSend(d)]
    /\ ghost' = [ghost EXCEPT ![d] = Ghosts(d)]
    /\ sq' = [sq EXCEPT ![d] = << >>]
    /\ UNCHANGED << appVars, senderVars, receiverVars, rsq, rcq, faultVars, recVars, historyVars >>

\* The same at the receiver, whose only send WRs are CTS; its QP in ERR also flushes
\* the pre-posted receive WRs.
QpTimeoutR(d) ==
    /\ qp["R"][d] = "RTS" /\ rsq[d] # << >> /\ (~link[d] \/ qp["S"][d] # "RTS")
    /\ qp' = [qp EXCEPT !["R"][d] = "ERR"]
    /\ rcq' = [rcq EXCEPT ![d] = @ \o FlushCts(d) \o << FlushMark >>]
    /\ rsq' = [rsq EXCEPT ![d] = << >>]
    /\ UNCHANGED << appVars, senderVars, receiverVars, sq, scq, ghost, faultVars, recVars >>
    /\ UNCHANGED historyVars

(* -------------------------------- faults -------------------------------- *)

\* Rail d goes down: packets on it are lost, recovery messages in flight too (REC: UC QPs).
LinkFail(d) ==
    /\ link[d] /\ faults < MaxFaults
    /\ link' = [link EXCEPT ![d] = FALSE] /\ faults' = faults + 1
    /\ uc' = [uc EXCEPT ![d] = [h \in Sides |-> << >>]]
    /\ UNCHANGED << appVars, senderVars, receiverVars, nicVars, losses, rec, rcqRec, recvWr >>
    /\ UNCHANGED historyVars

\* Rail d comes back: where port recovery could use it again, or where the design
\* lets links flap (N.flaps) though nothing uses a failed device again.
LinkUp(N, d) ==
    /\ (N.recovery \/ N.flaps) /\ ~link[d]
    /\ link' = [link EXCEPT ![d] = TRUE]
    /\ UNCHANGED << appVars, senderVars, receiverVars, nicVars, faults, losses, recVars >>
    /\ UNCHANGED historyVars

\* A recovery message (UC: no ACK, no retransmission) is lost on a healthy link.
LoseMsg(d, h) ==
    /\ uc[d][h] # << >> /\ losses < MaxLoss
    /\ uc' = [uc EXCEPT ![d][h] = Tail(@)] /\ losses' = losses + 1
    /\ UNCHANGED << appVars, senderVars, receiverVars, nicVars, link, faults, rec, rcqRec >>
    /\ UNCHANGED << recvWr, historyVars >>

FaultNext(N) ==
    \/ \E d \in Devs : LinkFail(d) \/ LinkUp(N, d)
    \/ \E d \in Devs, h \in Sides : LoseMsg(d, h)
=============================================================================
