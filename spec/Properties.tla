------------------------------ MODULE Properties ------------------------------
(***************************************************************************)
(* The properties of docs/design.md, per direction (host h's WRs to its  *)
(* peer), over the state and the history of what each application saw.  *)
(* Safety properties are invariants; Liveness is checked under the       *)
(* designs' fairness.                                                     *)
(***************************************************************************)
EXTENDS Failover

\* No WR takes effect at the responder twice. SHIFT gives this up on purpose.
ExactlyOnceExecution == \A h \in Hosts : \A w \in DOMAIN execs[h] : execs[h][w] <= 1

\* The notifications each application took are a prefix of those its peer
\* posted: none lost in the middle, duplicated or reordered, and the k-th
\* consumed the k-th receive WR (no queue sliding).
NotificationIntegrity ==
    \A h \in Hosts :
        \A i \in DOMAIN NotesTaken(h) :
            /\ i <= NotesBefore(program[Peer(h)], posted[Peer(h)])
            /\ NotesTaken(h)[i].wr = NoteWr(program[Peer(h)], i)
            /\ NotesTaken(h)[i].recv = i

\* When an application takes a notification, every region of its host holds
\* the value of the peer's last write posted before that notification.
DataAtNotification ==
    \A h \in Hosts :
        \A i \in DOMAIN NotesTaken(h), r \in Regions :
            NotesTaken(h)[i].mem[r] = ValueAfter(program[Peer(h)], r, NotesTaken(h)[i].wr - 1)

\* Each application sees each of its WRs complete at most once and in post
\* order, and a success only for a WR that took effect at the peer.
CompletionIntegrity ==
    \A h \in Hosts :
        /\ \A i, j \in DOMAIN sndSeen[h] : i < j => sndSeen[h][i].wr < sndSeen[h][j].wr
        /\ \A i \in DOMAIN sndSeen[h] :
               sndSeen[h][i].status = "SUCCESS" => execs[h][sndSeen[h][i].wr] >= 1

\* No FADD or CAS is applied twice.
AtomicSafety ==
    \A h \in Hosts : \A w \in DOMAIN execs[h] : program[h][w].op \in Atomics => execs[h][w] <= 1

(***************************************************************************)
(* An application error is the application's, not the path's (issue 16). *)
(* In a run where the environment did nothing (no fault, no lost packet), *)
(* whatever WRs with bad keys the applications posted: a host whose layer *)
(* knows of an application error (its own, or the peer's word: AppOwned)  *)
(* is out of any failover (its send side fails WRs at once, as the QP in  *)
(* the error state does, and no receive WR is held by the layer), an      *)
(* application-error status reached an application only on a WR with     *)
(* that bad key, and the first WR with a bad key a host posted completed, *)
(* if it did, with its own status (LOC_PROT_ERR, REM_ACCESS_ERR), not a   *)
(* flush. A layer may start a failover before it knows (a responder's QP *)
(* fails with a bad rkey and its layer polls only flushes: F6b); that it *)
(* ends, and that the peer's application gets every receive WR back, is  *)
(* Done's, under Liveness.                                               *)
(***************************************************************************)
FirstBadKey(h) ==
    LET bad == { w \in DOMAIN program[h] : program[h][w].key # "OK" }
    IN  IF bad = {} THEN 0 ELSE CHOOSE w \in bad : \A v \in bad : w <= v

AppErrorContained ==
    faults = 0 /\ drops = 0 =>
        \A h \in Hosts :
            /\ AppOwned(h) => sendMode[h] \in {"Default", "Error"} /\ recvMode[h] # "Moving"
            /\ \A i \in DOMAIN sndSeen[h] :
                   LET w == sndSeen[h][i].wr
                   IN  /\ sndSeen[h][i].status \in AppErrors =>
                              sndSeen[h][i].status = KeyStatus(program[h][w])
                       /\ w = FirstBadKey(h) => sndSeen[h][i].status = KeyStatus(program[h][w])

\* No failover decision read a responder NIC's transport state.
Opacity == ~queried

\* No payload was copied by a CPU: the NIC placed every one in its final buffer.
ZeroCopy == copies = 0

(***************************************************************************)
(* The workload is finished: every WR posted, every signaled WR completed *)
(* at its sender, and - unless its layer refused on purpose or an        *)
(* application of either host saw an error of its own (a bad key: it     *)
(* fails the QP pair, as plain RC does) - every completion a success and *)
(* every notification taken by the peer. After such an error, every      *)
(* receive WR of both hosts came back to its application, taken or       *)
(* flushed: neither is left waiting on a QP pair that is gone (F6b).     *)
(***************************************************************************)
AppFailed(h) == \E i \in DOMAIN sndSeen[h] : sndSeen[h][i].status \in AppErrors

Done ==
    \A h \in Hosts :
        /\ posted[h] = Len(program[h]) /\ recvPosted[h] = NumNotes(program[Peer(h)])
        /\ \A w \in DOMAIN program[h] :
               Signaled(h, w) => \E i \in DOMAIN sndSeen[h] : sndSeen[h][i].wr = w
        /\ refused[h] = {} /\ ~AppFailed(h) /\ ~AppFailed(Peer(h)) =>
               /\ \A i \in DOMAIN sndSeen[h] : sndSeen[h][i].status = "SUCCESS"
               /\ Len(NotesTaken(Peer(h))) = NumNotes(program[h])
        /\ AppFailed(h) \/ AppFailed(Peer(h)) =>
               \A r \in 1..recvPosted[h] : \E i \in DOMAIN rcvSeen[h] : rcvSeen[h][i].recv = r

\* While some path stays healthy for good, the workload finishes.
Liveness == <>[](PathHealthy(1) \/ PathHealthy(2)) => <>Done
=============================================================================
