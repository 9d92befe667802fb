----------------------------- MODULE NcclPortState -----------------------------
(***************************************************************************)
(* The state of the model of NCCL's IB resiliency, failover and port     *)
(* recovery, read from NVIDIA/nccl at commit                             *)
(* 5067397c2676d5aed50042fc39e5c8ee96eb0027, src/transport/net_ib/:      *)
(* p2p_resiliency.cc (RES), p2p_resiliency.h, p2p_resiliency_recovery.cc *)
(* (REC), p2p.cc (P2P), p2p.h, common.h (COM). Line numbers are of that  *)
(* commit.                                                                *)
(*                                                                         *)
(* One send communicator (side "S") and one receive communicator (side   *)
(* "R"), two devices each (rail-aligned: S's device d talks to R's       *)
(* device d), one data QP per device (qps[d].devIndex = d), so nqps = 2  *)
(* and a request is split in two chunks, lane 0 and lane 1, lane l going *)
(* over activeQps[l] (COM 393-397: (id*nQps + i) % nqps = i). Requests   *)
(* 1..NReq (NCCL's id is r-1) use slot (r-1) % Slots. One multi-recv     *)
(* element per request (nreqs = 1); no flush requests; no GDR.           *)
(*                                                                         *)
(* Modelling assumptions, each a constant so that it can be switched:   *)
(*  PolledBeforeProbe  every chunk of the probed slot that can still     *)
(*                     arrive has arrived and the receiver has polled    *)
(*                     its CQE before the sender's probe READ executes   *)
(*                     (what the 10 ms PORT_FAILOVER_PROBE_DELAY is for, *)
(*                     RES 465-472); FALSE: the READ may come first.     *)
(*  BoundedLifetime    a data packet does not outlive the QP it was sent *)
(*                     on; FALSE: a chunk flushed at the sender may      *)
(*                     still land at the receiver later, also after a    *)
(*                     QP reset of recovery (REC 475-598).               *)
(*  SlotGuard          the receiver reuses a slot only once the sender's *)
(*                     request of that slot completed too (NCCL: at most *)
(*                     NCCL_NET_MAX_REQUESTS outstanding, 256 slots).    *)
(*  QuietTimeouts      a recovery timer (4-5 s) fires only when no       *)
(*                     recovery message of its device is in flight.      *)
(*  BoundedAckLifetime an RC ACK does not outlive the responder's QP:    *)
(*                     once that QP went to ERR, an ACK not yet received *)
(*                     never arrives (FALSE: it may, whatever happened   *)
(*                     to the link and the QP meanwhile; docs/findings   *)
(*                     N8).                                              *)
(* Asserts are compiled out (NDEBUG, the release build): an assert that   *)
(* would fail is recorded in `aborted` (an abort of a debug build) and    *)
(* execution goes on as the release build does.                          *)
(* Whether port recovery runs (IB_RESILIENCY_PORT_RECOVERY) is the        *)
(* design's record N ([recovery |-> ...]), not a constant.                *)
(* Numbers of NCCL's parameters: ProbeAttempts                           *)
(* (IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS, 1), AttemptsMax            *)
(* (IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX, 5), SeqSize                *)
(* (..._ALIVE_MSG_SEQUENCE_SIZE, 5), RecvWrs (the receive WRs the        *)
(* receiver pre-posts on its recovery QP, BATCH_SIZE_MAX = 10).          *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets

CONSTANTS
    NReq,              \* requests each side posts
    Slots,             \* request slots (NET_IB_MAX_REQUESTS)
    MaxFaults,         \* link failures
    MaxLoss,           \* recovery messages (UC) lost on a healthy link
    PolledBeforeProbe,
    BoundedLifetime,
    SlotGuard,
    QuietTimeouts,
    BoundedAckLifetime,
    ProbeAttempts,
    AttemptsMax,
    SeqSize,
    RecvWrs

Sides == {"S", "R"}
Devs == {0, 1}
Lanes == {0, 1}
Reqs == 1..NReq
SlotIds == 0..(Slots - 1)
Slot(r) == (r - 1) % Slots
Other(d) == 1 - d
ACK == -1   \* NCCL_IB_RESILIENCY_PORT_RECOVERY_ACK_MSG_ID (REC 600), as an imm value

\* ncclIbResiliencyDevState (p2p_resiliency.h 14-27)
DevStates == {"Ok", "Error", "RecoveryInProgress", "RecoveryFailed", "Recovered",
              "ErrorPermanent"}
\* ncclIbPortRecoveryState (REC 80-114); "None": no recovery context for the device
RecStates == {"None", "Init", "Alive", "Ack", "Success", "Failed"}
\* ncclIbResiliencyRequestSendState (p2p_resiliency.h 83-92)
ProbeStates == {"Pending", "ProbePosted", "ProbeCompleted"}
Errors == {"none", "remote", "internal"}   \* what ncclIbTest returned

\* A data WR: the chunk `lane` of request `req`, into the buffer of receive `tgt`
\* (the CTS the sender read from its FIFO slot), `dlv` once it landed.
DataWrs == [req : Reqs, lane : Lanes, slot : SlotIds, tgt : 0..NReq, dlv : BOOLEAN]
CtsWrs == [slot : SlotIds, req : Reqs, dlv : BOOLEAN]
SendCqes == [slot : SlotIds, ok : BOOLEAN]
RecvCqes == [kind : {"imm", "cts", "flush"}, slot : SlotIds, req : 0..NReq, ok : BOOLEAN]
MsgIds == {ACK} \cup (0..((AttemptsMax + 1) * SeqSize))
RecCqes == [op : {"send", "recv"}, imm : MsgIds]   \* a local send completion, a message

Bounded(s, n) == Len(s) <= n

(* -------------------------- the applications --------------------------- *)
VARIABLES
    sPosted,  \* requests the sender posted (ncclIbIsend, P2P 262-358)
    rPosted,  \* requests the receiver posted (ncclIbIrecv, P2P 430-523)
    sDone,    \* sender's request completed towards the user (ncclIbTest)
    rDone,    \* receiver's request completed towards the user
    err       \* per side: the error ncclIbTest returned, if any
appVars == << sPosted, rPosted, sDone, rDone, err >>
AppTypeOK ==
    /\ sPosted \in 0..NReq /\ rPosted \in 0..NReq
    /\ sDone \in [Reqs -> BOOLEAN] /\ rDone \in [Reqs -> BOOLEAN]
    /\ err \in [Sides -> Errors]

(* ------------------------ the send communicator ------------------------- *)
VARIABLES
    activeS,  \* activeQps: the physical QP (= device) of each lane (COM 347)
    devS,     \* resCtx->devs[d].state
    sEv,      \* request->events[d] (COM 202)
    sent,     \* request->send.sentData[lane] (COM 219)
    ctsFifo,  \* per slot: the receive whose CTS the slot holds (ctsFifo)
    sSlot,    \* per slot: sendReqs[slot][0], 0 if NULL
    failed,   \* per slot: failedRequests[slot] (p2p_resiliency.h 104-115)
    probeRes, \* per slot: probingResults[slot][qpIndex]
    probe     \* per slot: the device whose probing QP carries its probe, -1: none
senderVars == << activeS, devS, sEv, sent, ctsFifo, sSlot, failed, probeRes, probe >>
SenderTypeOK ==
    /\ activeS \in [Lanes -> Devs] /\ devS \in [Devs -> DevStates]
    /\ sEv \in [Reqs -> [Devs -> -2..2]] /\ sent \in [Reqs -> [Lanes -> BOOLEAN]]
    /\ ctsFifo \in [SlotIds -> 0..NReq] /\ sSlot \in [SlotIds -> 0..NReq]
    /\ failed \in [SlotIds -> [st : ProbeStates, req : 0..NReq, gen : 0..NReq, att : 0..2]]
    /\ probeRes \in [SlotIds -> [Lanes -> BOOLEAN]]
    /\ probe \in [SlotIds -> {-1} \cup Devs]

(* ----------------------- the receive communicator ----------------------- *)
VARIABLES
    activeR,  \* the receiver's activeQps
    devR,     \* the receiver's resCtx->devs[d].state
    rEv,      \* the receive request's events[d]
    compl,    \* per slot: cmplsRecords[slot].completions[qpIndex] (COM 176-190)
    rSlot,    \* per slot: recvReqs[slot], the receive that holds the slot
    buf       \* per receive and lane: the request whose chunk last landed there
receiverVars == << activeR, devR, rEv, compl, rSlot, buf >>
ReceiverTypeOK ==
    /\ activeR \in [Lanes -> Devs] /\ devR \in [Devs -> DevStates]
    \* below -2 only with SlotGuard off: chunks of another request land in a reused
    \* slot (docs/findings.md, N7: events {-3, 1})
    /\ rEv \in [Reqs -> [Devs -> Int]] /\ \A r \in Reqs, d \in Devs : rEv[r][d] <= 2
    /\ compl \in [SlotIds -> [Devs -> BOOLEAN]] /\ rSlot \in [SlotIds -> 0..NReq]
    /\ buf \in [Reqs -> [Lanes -> 0..NReq]]

(* --------------------- the RC data QPs and their CQs -------------------- *)
VARIABLES
    qp,     \* per side and device: the data QP's state
    sq,     \* per device: the sender's outstanding data WRs, in order
    rsq,    \* per device: the receiver's outstanding CTS WRs (RDMA WRITEs), in order
    scq,    \* per device: the sender's data CQ
    rcq,    \* per device: the receiver's data CQ
    ghost   \* per device: chunks flushed at the sender still on the wire (~BoundedLifetime)
nicVars == << qp, sq, rsq, scq, rcq, ghost >>
NicTypeOK ==
    /\ qp \in [Sides -> [Devs -> {"RTS", "ERR"}]]
    /\ \A d \in Devs : /\ Bounded(sq[d], 4) /\ \A i \in 1..Len(sq[d]) : sq[d][i] \in DataWrs
                       /\ Bounded(rsq[d], 4) /\ \A i \in 1..Len(rsq[d]) : rsq[d][i] \in CtsWrs
                       /\ \A i \in 1..Len(scq[d]) : scq[d][i] \in SendCqes
                       /\ \A i \in 1..Len(rcq[d]) : rcq[d][i] \in RecvCqes
                       /\ \A i \in 1..Len(ghost[d]) : ghost[d][i] \in DataWrs

(* ------------------------------- faults --------------------------------- *)
VARIABLES
    link,    \* per device (rail): the link is up
    faults,  \* link failures so far (<= MaxFaults)
    losses   \* recovery messages lost on a healthy link so far (<= MaxLoss)
faultVars == << link, faults, losses >>
FaultTypeOK ==
    /\ link \in [Devs -> BOOLEAN] /\ faults \in 0..MaxFaults /\ losses \in 0..MaxLoss

(* ------------------------- port recovery (REC) -------------------------- *)
\* A recovery context (ncclIbPortRecoveryContext, REC 116-151) per side and device;
\* `ended`: a context of this device ended on this side since its last failure.
RecCtx == [st : RecStates, att : 0..AttemptsMax, next : MsgIds \cup {0},
           inord : 0..(SeqSize + 2), aposted : BOOLEAN, acmp : BOOLEAN,
           ackPosted : BOOLEAN, ackRcv : BOOLEAN, ackCmp : BOOLEAN, fresh : BOOLEAN,
           ended : BOOLEAN]
VARIABLES
    rec,     \* per side and device: the recovery context
    uc,      \* per device and receiving side: recovery messages in flight (UC QPs)
    rcqRec,  \* per side and device: the recovery CQ (portRecoveryCq)
    recvWr   \* per side and device: receive WRs posted on the recovery QP
recVars == << rec, uc, rcqRec, recvWr >>
RecTypeOK ==
    /\ rec \in [Sides -> [Devs -> RecCtx]]
    /\ \A d \in Devs, h \in Sides :
          /\ \A i \in 1..Len(uc[d][h]) : uc[d][h][i] \in MsgIds
          /\ \A i \in 1..Len(rcqRec[h][d]) : rcqRec[h][d][i] \in RecCqes
    /\ recvWr \in [Sides -> [Devs -> 0..(RecvWrs + 2)]]

(* -------------------------------- history ------------------------------- *)
VARIABLES
    late,     \* a chunk of a request landed after that request's receive completed
    aborted   \* an assert of NCCL failed (an abort in a debug build)
historyVars == << late, aborted >>
HistoryTypeOK == late \in BOOLEAN /\ aborted \in BOOLEAN

vars == << appVars, senderVars, receiverVars, nicVars, faultVars, recVars, historyVars >>
View == vars

TypeOK ==
    /\ AppTypeOK /\ SenderTypeOK /\ ReceiverTypeOK /\ NicTypeOK /\ FaultTypeOK
    /\ RecTypeOK /\ HistoryTypeOK

(* -------------------------------- helpers ------------------------------- *)
\* events[d] for a request whose lanes are mapped by `active` (ncclIbAddEvent per lane)
EventsFor(active) == [d \in Devs |-> Cardinality({l \in Lanes : active[l] = d})]

\* ncclIbResiliencyRequestIsComplete (RES 998-1041) after the plain check (P2P 620-627)
Pos(ev) == (IF ev[0] > 0 THEN ev[0] ELSE 0) + (IF ev[1] > 0 THEN ev[1] ELSE 0)
Neg(ev) == (IF ev[0] < 0 THEN -ev[0] ELSE 0) + (IF ev[1] < 0 THEN -ev[1] ELSE 0)
IsComplete(ev) == Pos(ev) = 0 \/ Neg(ev) = Pos(ev)

Ctx(h, d) == rec[h][d]
NoCtx == [st |-> "None", att |-> 0, next |-> 0, inord |-> 0, aposted |-> FALSE,
          acmp |-> FALSE, ackPosted |-> FALSE, ackRcv |-> FALSE, ackCmp |-> FALSE,
          fresh |-> FALSE, ended |-> FALSE]
DevOf(h) == IF h = "S" THEN devS ELSE devR
=============================================================================
