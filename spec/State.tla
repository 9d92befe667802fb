-------------------------------- MODULE State --------------------------------
(***************************************************************************)
(* The state shared by every layer: two hosts A and B joined by two      *)
(* rail-aligned paths (path 1: NIC 1 of A, link 1, NIC 1 of B; path 2    *)
(* the same with NIC 2). Path 1 is the default, path 2 the backup.       *)
(* Application traffic flows from A (requester) to B (responder); the    *)
(* failover layer runs on both hosts and talks in both directions.       *)
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

VARIABLES
    \* -- the applications --
    program,     \* the WRs A's application posts, in order
    posted,      \* how many of them it has posted
    recvPosted,  \* how many receive WRs B's application has posted
    sndSeen,     \* the completions A's application polled: [wr, status]
    rcvSeen,     \* what B's application polled: [wr, recv, status, mem]
    \* -- A's requester, per path --
    sq,          \* the send queue: WR ids; a WR's PSN is its index
    una,         \* PSN of the oldest unacknowledged WR
    nxt,         \* PSN of the next WR to transmit
    retry,       \* retries left
    \* -- B's responder, per path --
    epsn,        \* expected PSN
    saved,       \* results of executed atomics: set of <<psn, value>>
    rq,          \* the receive queue: receive WR ids
    \* -- both hosts, per path --
    qp,          \* QP state: "RTS" or "ERR"
    cq,          \* completion queue entries: [wr, recv, status, val]
    \* -- the wire, per path and direction: FIFO channels of packets --
    wire,
    \* -- faults --
    link, nic, faults, drops,
    \* -- B's memory, and history variables the properties read --
    mem,         \* region -> value
    execs,       \* WR id -> times its effect was applied at B
    copies,      \* payload copies made by a CPU (zero-copy designs make none)
    queried,     \* did a decision read the responder NIC's transport state?
    \* -- the failover layer --
    layer,       \* per host: Default, Fallback, WaitSignaled, WaitDrained, Error
    pending,     \* A: WRs posted and not yet known complete, in post order
    buffered,    \* per host: completions held for the application
    rpend,       \* B: receive WRs posted and not yet completed, in post order
    recvDone,    \* B: receive completions its layer has taken (the counter)
    sentCtr,     \* per host: has it sent its counter in this failover?
    peerCtr,     \* per host: the counter the peer sent, -1 before it arrives
    replayed,    \* per host: has it replayed its outstanding sends?
    fence,       \* A: the WR fail-back waits for, 0 when none
    refused,     \* A: WRs the layer failed on purpose (atomic in flight)
    \* -- the event that produced this state: <<name, args...>> --
    event

vars == << program, posted, recvPosted, sndSeen, rcvSeen, sq, una, nxt, retry,
           epsn, saved, rq, qp, cq, wire, link, nic, faults, drops, mem, execs,
           copies, queried, layer, pending, buffered, rpend, recvDone, sentCtr,
           peerCtr, replayed, fence, refused, event >>

\* Everything but the event: two states that differ only in how they were
\* reached are one state.
View == << program, posted, recvPosted, sndSeen, rcvSeen, sq, una, nxt, retry,
           epsn, saved, rq, qp, cq, wire, link, nic, faults, drops, mem, execs,
           copies, queried, layer, pending, buffered, rpend, recvDone, sentCtr,
           peerCtr, replayed, fence, refused >>

\* A completion queue entry. recv: the receive WR a two-sided WR consumed (0 on
\* the sender's side); val: what a READ or atomic returned.
Cqe(w, r, status, val) == [wr |-> w, recv |-> r, status |-> status, val |-> val]

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
