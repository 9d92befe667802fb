------------------------------ MODULE Properties ------------------------------
(***************************************************************************)
(* The properties of docs/design.md, over the state and the history     *)
(* of what each application saw. Safety properties are invariants;      *)
(* Liveness is checked under the designs' fairness.                      *)
(***************************************************************************)
EXTENDS Failover

\* No WR takes effect at the responder twice. SHIFT gives this up on purpose.
ExactlyOnceExecution == \A w \in DOMAIN execs : execs[w] <= 1

\* The notifications B's application took are a prefix of those A posted: none
\* lost in the middle, duplicated or reordered, and the k-th consumed the k-th
\* receive WR (no queue sliding).
NotificationIntegrity ==
    \A i \in DOMAIN NotesTaken :
        /\ i <= NotesBefore(program, posted)
        /\ NotesTaken[i].wr = NoteWr(program, i)
        /\ NotesTaken[i].recv = i

\* When B's application takes a notification, every region holds the value of
\* the last write posted before that notification.
DataAtNotification ==
    \A i \in DOMAIN NotesTaken, r \in Regions :
        NotesTaken[i].mem[r] = ValueAfter(program, r, NotesTaken[i].wr - 1)

\* A's application sees each WR complete at most once and in post order, and a
\* success only for a WR that took effect at the responder.
CompletionIntegrity ==
    /\ \A i, j \in DOMAIN sndSeen : i < j => sndSeen[i].wr < sndSeen[j].wr
    /\ \A i \in DOMAIN sndSeen :
           sndSeen[i].status = "SUCCESS" => execs[sndSeen[i].wr] >= 1

\* No FADD or CAS is applied twice.
AtomicSafety ==
    \A w \in DOMAIN execs : program[w].op \in Atomics => execs[w] <= 1

\* No failover decision read the responder NIC's transport state.
Opacity == ~queried

\* No payload was copied by a CPU: the NIC placed every one in its final buffer.
ZeroCopy == copies = 0

(***************************************************************************)
(* The workload is finished: every WR posted, every signaled WR completed *)
(* at A, and - unless the layer refused on purpose - every completion a  *)
(* success and every notification taken by B.                            *)
(***************************************************************************)
Done ==
    /\ posted = Len(program) /\ recvPosted = NumNotes(program)
    /\ \A w \in DOMAIN program :
           Signaled(w) => \E i \in DOMAIN sndSeen : sndSeen[i].wr = w
    /\ refused = {} =>
           /\ \A i \in DOMAIN sndSeen : sndSeen[i].status = "SUCCESS"
           /\ Len(NotesTaken) = NumNotes(program)

\* While some path stays healthy for good, the workload finishes.
Liveness == <>[](PathHealthy(1) \/ PathHealthy(2)) => <>Done
=============================================================================
