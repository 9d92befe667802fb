-------------------------------- MODULE State --------------------------------
(***************************************************************************)
(* The state shared by every layer: two hosts A and B joined by two      *)
(* rail-aligned paths (path 1: NIC 1 of A, link 1, NIC 1 of B; path 2    *)
(* the same with NIC 2). Path 1 is the default, path 2 the backup.       *)
(* Application traffic flows from A (requester) to B (responder); the    *)
(* failover layer runs on both hosts and talks in both directions.       *)
(*                                                                         *)
(* The variables come in groups, each a tuple (appVars, requesterVars,  *)
(* ...) with its type invariant beside it: actions say UNCHANGED over    *)
(* groups, and TypeOK is the conjunction of the groups' types. Every    *)
(* group is declared here, not in the module of its concern, because    *)
(* the modules extend one another in a line and the first of them to    *)
(* write a frame (RCTransport) must already name every group.           *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, Workloads

CONSTANTS
    Workloads,    \* the programs A's application may run (ids of Program)
    MaxRetries,   \* the QP's retry budget: retransmissions before RETRY_EXC_ERR
    MaxDrops,     \* how many packets the wire may lose
    MaxFaults,    \* how many LinkDown / NicFail events may happen
    FaultPaths,   \* the paths that may lose packets or fail
    Recover       \* whether failed links and NICs may come back

Hosts == {"A", "B"}
Paths == {1, 2}
Directions == {"AtoB", "BtoA"}
Peer(h) == IF h = "A" THEN "B" ELSE "A"
\* The direction a host sends in.
From(h) == IF h = "A" THEN "AtoB" ELSE "BtoA"

\* The values a variable may hold, besides numbers and the programs' WRs.
Statuses   == {"SUCCESS", "WR_FLUSH_ERR", "RETRY_EXC_ERR"}  \* of a completion
QpStates   == {"RTS", "ERR"}
LayerModes == {"Default", "Fallback", "WaitSignaled", "WaitDrained", "Error"}
PSNs       == Nat \ {0}  \* packet sequence numbers: a WR's index in its send queue

(* ---------------------------- the applications ---------------------------- *)
VARIABLES
    program,     \* the WRs A's application posts, in order
    posted,      \* how many of them it has posted
    recvPosted,  \* how many receive WRs B's application has posted
    sndSeen,     \* the completions A's application polled: [wr, status, val]
    rcvSeen,     \* what B's application polled: [wr, recv, status, mem, data]
    stores,      \* the writes B's application makes to its own regions, in order
    stored       \* how many of them it has made

appVars == << program, posted, recvPosted, sndSeen, rcvSeen, stores, stored >>

\* A's WRs are numbered by their place in the program, B's receive WRs by the
\* place of the notification each is for.
WrIds   == DOMAIN program
RecvIds == 1..NumNotes(program)

AppTypeOK ==
    /\ program \in Seq(WRs)
    /\ posted \in 0..Len(program)
    /\ recvPosted \in 0..NumNotes(program)
    \* val: what a READ or atomic returned (0 for any other WR).
    /\ sndSeen \in Seq([wr : WrIds, status : Statuses, val : Nat])
    \* wr 0: a flushed receive WR, which no WR consumed. mem: the regions as B's
    \* application read them then; data: its receive WR's buffer (a SEND's payload).
    /\ rcvSeen \in Seq([wr : {0} \cup WrIds, recv : RecvIds, status : Statuses,
                        mem : [Regions -> Nat], data : Nat])
    /\ stores \in Seq(Stores)
    /\ stored \in 0..Len(stores)

(* ----------------------- A's requester, per path ------------------------ *)
VARIABLES
    sq,          \* the send queue: WR ids; a WR's PSN is its index
    una,         \* PSN of the oldest unacknowledged WR
    nxt,         \* PSN of the next WR to transmit
    retry        \* retries left

requesterVars == << sq, una, nxt, retry >>

RequesterTypeOK ==
    /\ sq \in [Paths -> Seq(WrIds)]
    /\ una \in [Paths -> PSNs]
    /\ nxt \in [Paths -> PSNs]
    /\ retry \in [Paths -> 0..MaxRetries]

(* ----------------------- B's responder, per path ------------------------ *)
VARIABLES
    epsn,        \* expected PSN
    saved,       \* results of executed atomics: set of <<psn, value>>
    rq           \* the receive queue: receive WR ids

responderVars == << epsn, saved, rq >>

ResponderTypeOK ==
    /\ epsn \in [Paths -> PSNs]
    /\ saved \in [Paths -> SUBSET (PSNs \X Nat)]
    /\ rq \in [Paths -> Seq(RecvIds)]

(* ----------------------- the QPs, per host and path ---------------------- *)
VARIABLES
    qp,          \* QP state: "RTS" or "ERR"
    cq           \* completion queue entries: [wr, recv, status, val]

qpVars == << qp, cq >>

\* A completion queue entry. recv: the receive WR a two-sided WR consumed (0 on
\* the sender's side); val: what a READ or atomic returned. wr 0: a flushed
\* receive WR.
Cqe(w, r, status, val) == [wr |-> w, recv |-> r, status |-> status, val |-> val]
Cqes == [wr : {0} \cup WrIds, recv : {0} \cup RecvIds, status : Statuses, val : Nat]

QpTypeOK ==
    /\ qp \in [Hosts -> [Paths -> QpStates]]
    /\ cq \in [Hosts -> [Paths -> Seq(Cqes)]]

(* ---------- the wire, per path and direction: FIFO channels ------------- *)
VARIABLE
    wire

\* A request for a WR, its (cumulative) ACK with what a READ or atomic
\* returned, or a control message of the failover layer.
Packets ==
    [kind : {"req"}, psn : PSNs, wr : WrIds]
    \cup [kind : {"ack"}, psn : PSNs, val : Nat]
    \cup [kind : {"ctl"}, what : {"counter", "failback"}, count : Nat]

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

(* ------- B's memory, and history variables the properties read ---------- *)
VARIABLES
    mem,         \* region -> value
    bufs,        \* receive WR id -> its buffer: the SEND payload placed there, or 0
    execs,       \* WR id -> times its effect was applied at B
    copies,      \* payload copies made by a CPU (zero-copy designs make none)
    queried      \* did a decision read the responder NIC's transport state?

historyVars == << mem, bufs, execs, copies, queried >>

HistoryTypeOK ==
    /\ mem \in [Regions -> Nat]
    /\ bufs \in [RecvIds -> Nat]
    /\ execs \in [WrIds -> Nat]
    /\ copies \in Nat
    /\ queried \in BOOLEAN

(* --------------------------- the failover layer --------------------------- *)
VARIABLES
    layer,       \* per host: Default, Fallback, WaitSignaled, WaitDrained, Error
    pending,     \* A: WRs posted and not yet known complete, in post order
    buffered,    \* per host: completions held for the application
    rpend,       \* B: receive WRs posted and not yet completed, in post order
    recvDone,    \* B: receive completions its layer has taken (the counter)
    sentCtr,     \* per host: has it sent its counter in this failover?
    peerCtr,     \* per host: the counter the peer sent, -1 before it arrives
    replayed,    \* per host: has it replayed its outstanding sends?
    fence,       \* A: the WR fail-back waits for, 0 when none
    refused      \* A: WRs the layer failed on purpose (atomic in flight)

layerVars == << layer, pending, buffered, rpend, recvDone, sentCtr, peerCtr,
                replayed, fence, refused >>

LayerTypeOK ==
    /\ layer \in [Hosts -> LayerModes]
    /\ pending \in Seq(WrIds)
    /\ buffered \in [Hosts -> Seq(Cqes)]
    /\ rpend \in Seq(RecvIds)
    /\ recvDone \in Nat
    /\ sentCtr \in [Hosts -> BOOLEAN]
    /\ peerCtr \in [Hosts -> {-1} \cup Nat]
    /\ replayed \in [Hosts -> BOOLEAN]
    /\ fence \in {0} \cup WrIds
    /\ refused \in SUBSET WrIds

(* ---------------- how the state was reached (not in View) ---------------- *)
VARIABLE
    event        \* the event that produced this state: <<name, args...>>

\* The event vocabulary of docs/design.md: one name per event, its arguments.
Events ==
    { << "Init" >> }
    \cup ({"PostSend"} \X {"A"} \X WrIds)
    \cup ({"PostRecv"} \X {"B"} \X RecvIds)
    \cup ({"AppWrite"} \X {"B"} \X Regions \X Nat)
    \cup ({"PollCq", "Progress"} \X Hosts)
    \cup ({"Transmit", "Timeout"} \X {"A"} \X Paths)
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

\* Channels w with packet m put on path p in direction d; a dead link loses it.
Push(w, p, d, m) == IF link[p] THEN [w EXCEPT ![p][d] = Append(@, m)] ELSE w
Send(p, d, m) == Push(wire, p, d, m)

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
