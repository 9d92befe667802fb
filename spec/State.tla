-------------------------------- MODULE State --------------------------------
(***************************************************************************)
(* The state shared by every layer: two hosts A and B joined by two        *)
(* rail-aligned paths (path 1: NIC 1 of A, link 1, NIC 1 of B; path 2      *)
(* the same with NIC 2). Path 1 is the default, path 2 the backup.         *)
(* Both hosts are peers: each runs a program of WRs to the other (its      *)
(* requester) and answers the other's requests (its responder), and the    *)
(* failover layer runs on both, a send side and a receive side each.       *)
(*                                                                         *)
(* The variables come in groups, each a tuple (appVars, requesterVars,     *)
(* ...) with its type invariant beside it: actions say UNCHANGED over      *)
(* groups, and TypeOK is the conjunction of the groups' types. Every       *)
(* group is declared here, not in the module of its concern, because       *)
(* the modules extend one another in a line and the first of them to       *)
(* write a frame (RCTransport) must already name every group. Every        *)
(* variable but the wire and the faults is a function over Hosts.          *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, Workloads

CONSTANTS
    Workloads,    \* the workloads the applications may run (ids of Program)
    MaxRetries,   \* the QP's retry budget: retransmissions before RETRY_EXC_ERR
    MaxDrops,     \* how many packets the wire may lose
    MaxFaults,    \* how many LinkDown / NicFail events may happen
    FaultPaths,   \* the paths that may lose packets or fail
    Recover,      \* whether failed links and NICs may come back
    CtlLoss,      \* whether the wire may lose the layer's control messages (any path)
    AckBeforeCqe, \* whether a responder ACKs a notification before its receive
                  \* completion is in host memory (hardware does: an ACK promises
                  \* no placement; issue 17)
    RnrNak,       \* whether a responder answers a notification that finds no receive
                  \* WR with an RNR NAK (hardware does) rather than discarding it
    RnrRetry,     \* the requester's RNR retry count, 0..7: RNR NAKs it answers by
                  \* retransmitting before RNR_RETRY_EXC_ERR; 7 is for ever (IBTA's
                  \* encoding; NCCL and perftest set it)
    DeviceFatal,  \* whether a dead NIC completes nothing and reports the asynchronous
                  \* event IBV_EVENT_DEVICE_FATAL instead (user-space verbs on mlx5
                  \* do) rather than flushing its QPs' WRs
    ImplicitNak   \* whether an ACK past a READ or atomic whose response was lost is an
                  \* implicit NAK - the requester goes back to it and spends a retry, as
                  \* soft-RoCE does - rather than completing it with the value 0

Hosts == {"A", "B"}
Paths == {1, 2}
Directions == {"AtoB", "BtoA"}
Peer(h) == IF h = "A" THEN "B" ELSE "A"
\* The direction a host sends in, and the host a direction delivers to.
From(h) == IF h = "A" THEN "AtoB" ELSE "BtoA"
To(d) == IF d = "AtoB" THEN "B" ELSE "A"

\* The values a variable may hold, besides numbers and the programs' WRs.
Statuses   == {"SUCCESS", "WR_FLUSH_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_PROT_ERR",
               "REM_ACCESS_ERR"}
\* The errors an application causes (a bad key, Workloads.tla's BadKey), not a path.
AppErrors  == {"LOC_PROT_ERR", "REM_ACCESS_ERR"}
QpStates   == {"RTS", "ERR"}
\* A host's send side (its outstanding WRs) and receive side (its receive WRs).
SendModes  == {"Default", "Fallback", "WaitSignaled", "WaitDrained", "Error"}
RecvModes  == {"Default", "Moving", "Fallback"}
PSNs       == Nat \ {0}  \* packet sequence numbers: a WR's index in its send queue

(* ---------------------------- the applications ---------------------------- *)
VARIABLES
    program,     \* per host: the WRs its application posts to the peer, in order
    posted,      \* per host: how many of them it has posted
    recvPosted,  \* per host: how many receive WRs it has posted (one per peer notification)
    sndSeen,     \* per host: the send completions its application polled: [wr, status, val]
    rcvSeen,     \* per host: the receive completions it polled: [wr, recv, status, mem, data]
    stores,      \* per host: the writes its application makes to its own regions
    stored       \* per host: how many of them it has made

appVars == << program, posted, recvPosted, sndSeen, rcvSeen, stores, stored >>

\* A host's WRs are numbered by their place in its program, its receive WRs by
\* the place of the peer's notification each is for.
WrIds(h)   == DOMAIN program[h]
RecvIds(h) == 1..NumNotes(program[Peer(h)])
\* Every id some host's WR or receive WR may have (for the types of shared records).
AnyIds     == UNION { WrIds(h) \cup RecvIds(h) : h \in Hosts }

AppTypeOK ==
    /\ program \in [Hosts -> Seq(WRs)]
    /\ stores \in [Hosts -> Seq(Stores)]
    /\ \A h \in Hosts :
        /\ posted[h] \in 0..Len(program[h])
        /\ recvPosted[h] \in 0..NumNotes(program[Peer(h)])
        \* val: what a READ or atomic returned (0 for any other WR).
        /\ sndSeen[h] \in Seq([wr : WrIds(h), status : Statuses, val : Nat])
        \* wr: the peer's WR that consumed the receive WR, 0 for a flushed one. mem: the
        \* host's regions as its application read them then; data: the receive WR's buffer.
        /\ rcvSeen[h] \in Seq([wr : {0} \cup WrIds(Peer(h)), recv : RecvIds(h),
                               status : Statuses, mem : [Regions -> Nat], data : Nat])
        /\ stored[h] \in 0..Len(stores[h])

(* ----------------------- each host's requester, per path ------------------- *)
VARIABLES
    sq,          \* the send queue: WR ids; a WR's PSN is its index
    una,         \* PSN of the oldest unacknowledged WR
    nxt,         \* PSN of the next WR to transmit
    retry,       \* retries left
    rnrLeft      \* RNR retries left (RnrRetry = 7: never counted down)

requesterVars == << sq, una, nxt, retry, rnrLeft >>

RequesterTypeOK ==
    /\ \A h \in Hosts :
        /\ sq[h] \in [Paths -> Seq(WrIds(h))]
        /\ una[h] \in [Paths -> PSNs]
        /\ nxt[h] \in [Paths -> PSNs]
        /\ retry[h] \in [Paths -> 0..MaxRetries]
        /\ rnrLeft[h] \in [Paths -> 0..RnrRetry]

(* ----------------------- each host's responder, per path ------------------- *)
VARIABLES
    epsn,        \* expected PSN
    saved,       \* results of executed atomics: set of <<psn, value>>
    rq           \* the receive queue: receive WR ids

responderVars == << epsn, saved, rq >>

ResponderTypeOK ==
    /\ \A h \in Hosts :
        /\ epsn[h] \in [Paths -> PSNs]
        /\ saved[h] \in [Paths -> SUBSET (PSNs \X Nat)]
        /\ rq[h] \in [Paths -> Seq(RecvIds(h))]

(* ----------------------- the QPs, per host and path ---------------------- *)
VARIABLES
    qp,          \* QP state: "RTS" or "ERR"
    cq,          \* completion queue entries in host memory: [wr, recv, status, val]
    unwritten,   \* receive completions the NIC made and ACKed, not yet in host memory
    fatal,       \* per host and path, with DeviceFatal: Speaking (the QP completes its
                 \* own WRs); silent, its NIC's death unread - the index of the first
                 \* send WR the event's flush covers; or TakenOver (the layer read it and
                 \* completes the QP's WRs itself, until the QP is reset)
    incarnation  \* per host: the incarnation of its default QP, which each reset renews
                 \* (a new QP number, or a new PSN epoch): a packet on path 1 carries
                 \* its sender's, and a QP of another incarnation discards it

qpVars == << qp, cq, unwritten, fatal, incarnation >>

\* The values of fatal[h][p] that are not a silent QP's first unflushed send WR.
Speaking == 0
TakenOver == -1

\* A completion queue entry. A send completion has recv 0 and names the host's WR;
\* a receive completion names the receive WR (recv >= 1) and the peer's WR that
\* consumed it (0 when it was flushed). val: what a READ or atomic returned.
Cqe(w, r, status, val) == [wr |-> w, recv |-> r, status |-> status, val |-> val]
Cqes == [wr : {0} \cup AnyIds, recv : {0} \cup AnyIds, status : Statuses, val : Nat]
IsRecv(c) == c.recv > 0

QpTypeOK ==
    /\ qp \in [Hosts -> [Paths -> QpStates]]
    /\ cq \in [Hosts -> [Paths -> Seq(Cqes)]]
    /\ unwritten \in [Hosts -> [Paths -> Seq(Cqes)]]
    /\ fatal \in [Hosts -> [Paths -> {TakenOver} \cup Nat]]
    /\ incarnation \in [Hosts -> Nat]

(* ---------- the wire, per path and direction: FIFO channels ------------- *)
VARIABLE
    wire

\* A request for a WR of the sending host, its (cumulative) ACK with what a READ
\* or atomic returned, the responder's NAK of a request with a bad rkey (remote
\* access error), its RNR NAK of a notification that found no receive WR (also
\* an ACK of every request before it), or a control message of the failover layer: a receive counter,
\* a fail-back notice, word that the sender's application failed the QP pair, or
\* the request to reconnect the default path in a new incarnation (seq) and its answer.
\* Each carries the incarnation of the QP that sent it (0 on the backup path).
Packets ==
    [kind : {"req"}, psn : PSNs, wr : AnyIds, incarnation : Nat]
    \cup [kind : {"ack"}, psn : PSNs, val : Nat, incarnation : Nat]
    \cup [kind : {"nak", "rnr"}, psn : PSNs, incarnation : Nat]
    \cup [kind : {"ctl"}, what : {"counter", "failback", "apperr", "reconnect", "reconnected"},
          count : Nat, seq : Nat, ask : BOOLEAN, incarnation : Nat]

WireTypeOK == wire \in [Paths -> [Directions -> Seq(Packets)]]

(* -------------------------------- faults -------------------------------- *)
VARIABLES
    link,        \* per path: is the link up?
    nic,         \* per host and path: is the NIC alive?
    faults,      \* LinkDown and NicFail events so far
    drops        \* packets the wire lost so far

faultVars == << link, nic, faults, drops >>

FaultTypeOK ==
    /\ link \in [Paths -> BOOLEAN]
    /\ nic \in [Hosts -> [Paths -> BOOLEAN]]
    /\ faults \in 0..MaxFaults
    /\ drops \in 0..MaxDrops

(* ----- each host's memory, and history variables the properties read ----- *)
VARIABLES
    mem,         \* per host: region -> value
    bufs,        \* per host: receive WR id -> its buffer: the SEND payload placed there, or 0
    execs,       \* per host: its WR id -> times its effect was applied at the peer
    copies,      \* payload copies made by a CPU (zero-copy designs make none)
    queried      \* did a decision read a responder NIC's transport state?

historyVars == << mem, bufs, execs, copies, queried >>

HistoryTypeOK ==
    /\ \A h \in Hosts :
        /\ mem[h] \in [Regions -> Nat]
        /\ bufs[h] \in [RecvIds(h) -> Nat]
        /\ execs[h] \in [WrIds(h) -> Nat]
    /\ copies \in Nat
    /\ queried \in BOOLEAN

(* --------------------------- the failover layer --------------------------- *)
VARIABLES
    sendMode,    \* per host: its send side: Default, Fallback, WaitSignaled, WaitDrained, Error
    recvMode,    \* per host: its receive side: Default, Moving (to the backup QP), Fallback
    pending,     \* per host: WRs posted and not yet known complete, in post order
    buffered,    \* per host: completions held for the application
    rpend,       \* per host: receive WRs posted and not yet completed, in post order
    recvDone,    \* per host: receive completions its layer has taken (its counter)
    failbackAt,  \* per host: the counter its receive side waits to reach before it moves
                 \* back (the peer's fail-back notice came first: F11), 0 when none waits
    sentCtr,     \* per host: has it sent its counter since it last entered Fallback?
    peerCtr,     \* per host: the last counter the peer sent, -1 before the first
    fresh,       \* per host: has that counter arrived since the host last used it?
    asked,       \* per host: did it send its counter first, and awaits the peer's answer?
    replayed,    \* per host: has it replayed its outstanding sends?
    fence,       \* per host: the WR its fail-back waits for, 0 when none
    refused,     \* per host: WRs the layer failed on purpose (atomic in flight)
    ctrSeq,      \* per host: the sequence number of its latest counter, 0 before the first
    ctrVal,      \* per host: the count its latest counter carries (what a resend repeats)
    peerSeq,     \* per host: the sequence number of the last counter of the peer it took
    peerFailed,  \* per host: did the peer's layer tell it that its application failed the QP pair?
    reconnecting, \* per host: the incarnation in which it reset its default QP and asked the peer
                 \* to reset its own, awaiting the answer; 0 when it awaits none
    acked,       \* per host: its notifications completed (ACKed) that no counter of the peer
                 \* covers yet, in post order (kept by a design with D.keepNotes)
    resent       \* per host: the acked notifications a failover replayed: the layer drops
                 \* their completions, whose success its application already had

\* The control plane's memory: the counters' numbering (what a resend repeats, how a
\* duplicate is told apart), the peer's word of an application error, and the
\* reconnect a host awaits the answer to.
seqVars == << ctrSeq, ctrVal, peerSeq, peerFailed, reconnecting >>

\* The notifications a peer's NIC ACKed and its layer may not have counted (F7).
noteVars == << acked, resent >>

layerVars == << sendMode, recvMode, pending, buffered, rpend, recvDone, failbackAt, sentCtr,
                peerCtr, fresh, asked, replayed, fence, refused, seqVars, noteVars >>

LayerTypeOK ==
    /\ sendMode \in [Hosts -> SendModes]
    /\ recvMode \in [Hosts -> RecvModes]
    /\ buffered \in [Hosts -> Seq(Cqes)]
    /\ recvDone \in [Hosts -> Nat]
    /\ failbackAt \in [Hosts -> Nat]
    /\ sentCtr \in [Hosts -> BOOLEAN]
    /\ peerCtr \in [Hosts -> {-1} \cup Nat]
    /\ fresh \in [Hosts -> BOOLEAN]
    /\ asked \in [Hosts -> BOOLEAN]
    /\ replayed \in [Hosts -> BOOLEAN]
    /\ ctrSeq \in [Hosts -> Nat]
    /\ ctrVal \in [Hosts -> Nat]
    /\ peerSeq \in [Hosts -> Nat]
    /\ peerFailed \in [Hosts -> BOOLEAN]
    /\ reconnecting \in [Hosts -> Nat]
    /\ \A h \in Hosts :
        /\ pending[h] \in Seq(WrIds(h))
        /\ rpend[h] \in Seq(RecvIds(h))
        /\ fence[h] \in {0} \cup WrIds(h)
        /\ refused[h] \in SUBSET WrIds(h)
        /\ acked[h] \in Seq(WrIds(h))
        /\ resent[h] \in SUBSET WrIds(h)

(* ---------------- how the state was reached (not in View) ---------------- *)
VARIABLE
    event        \* the event that produced this state: <<name, args...>>

\* The event vocabulary of docs/design.md: one name per event, its arguments.
Events ==
    { << "Init" >> }
    \cup ({"PostSend", "PostRecv"} \X Hosts \X AnyIds)
    \cup ({"AppWrite"} \X Hosts \X Regions \X Nat)
    \cup ({"PollCq", "Progress", "HandshakeTimeout", "CompletionTimeout"} \X Hosts)
    \cup ({"Transmit", "Timeout", "WriteCqe", "FatalEvent"} \X Hosts \X Paths)
    \cup ({"Deliver", "Drop"} \X Paths \X Directions)
    \cup ({"LinkDown", "LinkUp"} \X Paths)
    \cup ({"NicFail", "NicRecover"} \X Hosts \X Paths)

EventTypeOK == event \in Events

(* -------------------------------------------------------------------------- *)

vars == << appVars, requesterVars, responderVars, qpVars, wire, faultVars,
           historyVars, layerVars, event >>

\* Everything but the event: two states that differ only in how they were
\* reached are one state.
View == << appVars, requesterVars, responderVars, qpVars, wire, faultVars,
           historyVars, layerVars >>

\* The shape of every variable. Checked at bound small for every design
\* (tests/spec/test_typeok.py); not a column of the trilemma table.
TypeOK ==
    /\ AppTypeOK
    /\ RequesterTypeOK
    /\ ResponderTypeOK
    /\ QpTypeOK
    /\ WireTypeOK
    /\ FaultTypeOK
    /\ HistoryTypeOK
    /\ LayerTypeOK
    /\ EventTypeOK

(* ------------------------------- helpers --------------------------------- *)

PathHealthy(p) == link[p] /\ nic["A"][p] /\ nic["B"][p]

\* Host h's NIC p died in fatal error and h's layer has not read the event yet.
Silent(h, p) == fatal[h][p] > 0

\* A WR posted to host h's QP of path p completes at once, flushed: the QP is in
\* the error state, and its NIC did not die silently (a silently dead NIC completes
\* nothing; its WRs wait for the layer to read the event: FatalEvent; once it has,
\* the layer flushes them itself).
FlushesAtOnce(h, p) == qp[h][p] = "ERR" /\ ~Silent(h, p)

\* Channels w with packet m put on path p in direction d; a dead link loses it.
Push(w, p, d, m) == IF link[p] THEN [w EXCEPT ![p][d] = Append(@, m)] ELSE w
Send(p, d, m) == Push(wire, p, d, m)

\* The incarnation of host h's QP on path p: the default QP's, which a reset renews; the
\* backup QP is never reset (0).
IncarnationOf(h, p) == IF p = 1 THEN incarnation[h] ELSE 0

\* A control message of host h's layer on path p.
Ctl(h, p, what, count, seq, ask) ==
    [kind |-> "ctl", what |-> what, count |-> count, seq |-> seq, ask |-> ask,
     incarnation |-> IncarnationOf(h, p)]

\* The entries of s before its first error.
RECURSIVE GoodPrefix(_)
GoodPrefix(s) ==
    IF s = << >> \/ Head(s).status # "SUCCESS" THEN << >>
    ELSE << Head(s) >> \o GoodPrefix(Tail(s))

\* The sequence s without the elements in set x.
Without(s, x) == SelectSeq(s, LAMBDA e : e \notin x)

Range(s) == { s[i] : i \in DOMAIN s }

\* The elements of s at the indices in I, in order. (TLC's SelectSeq cannot take
\* a LAMBDA that reads variables while it checks liveness.)
RECURSIVE SubAt(_, _)
SubAt(s, I) ==
    IF I = {} THEN << >>
    ELSE LET i == CHOOSE i \in I : \A j \in I : i <= j
         IN  << s[i] >> \o SubAt(s, I \ {i})
=============================================================================
