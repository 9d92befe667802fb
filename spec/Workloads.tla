------------------------------ MODULE Workloads ------------------------------
(***************************************************************************)
(* The applications' programs. Host A's application posts a fixed        *)
(* sequence of work requests (WRs) to host B; host B's application posts *)
(* one receive WR per notification, each with a buffer of its own. A WR's  *)
(* id is its position in the program, so ids increase in post order.       *)
(***************************************************************************)
EXTENDS Naturals, Sequences

OneSided == {"WRITE", "READ", "FADD", "CAS"}
\* Notifications: two-sided operations that consume a receive WR at the responder.
TwoSided == {"SEND", "WRITE_IMM"}
\* Not idempotent: applying one twice changes memory twice.
Atomics  == {"FADD", "CAS"}
\* Operations whose completion returns a value: the region's, before the WR executed.
Returns  == {"READ", "FADD", "CAS"}
\* Operations that change the responder's memory.
Writers  == {"WRITE", "WRITE_IMM", "FADD", "CAS"}

\* B's memory regions that WRs address (receive buffers are apart: State.tla's bufs).
Regions == {1, 2}

(***************************************************************************)
(* A work request. region: the responder's region it writes, reads or      *)
(* updates, 0 for none. value: what a WRITE or WRITE_WITH_IMM stores, a    *)
(* SEND's payload (placed in the buffer of the receive WR it consumes),    *)
(* FADD's addend, CAS's swap value. compare: CAS's compare value (0 for    *)
(* every other op). note: the number (1, 2, ...) of a notification in      *)
(* post order, 0 for a one-sided WR. key: whether the application gave the *)
(* WR good memory keys ("OK" for every WR this makes; see BadKey).         *)
(***************************************************************************)
WR(op, region, value, signaled, note) ==
    [op |-> op, region |-> region, value |-> value, signaled |-> signaled, note |-> note,
     compare |-> 0, after |-> 0, key |-> "OK"]

(***************************************************************************)
(* An application error: WR w posted with a bad memory key. "LKEY": the  *)
(* lkey of its local buffer is wrong; the requester NIC finds it when it *)
(* processes the WR (LOC_PROT_ERR). "RKEY": the rkey of the peer's       *)
(* region is wrong; the responder NAKs it (REM_ACCESS_ERR).              *)
(***************************************************************************)
Keys == {"OK", "LKEY", "RKEY"}
BadKey(w, key) == [w EXCEPT !.key = key]

\* The status the verbs give a WR's completion when its key is bad ("SUCCESS": none).
KeyStatus(w) == CASE w.key = "LKEY" -> "LOC_PROT_ERR"
                  [] w.key = "RKEY" -> "REM_ACCESS_ERR"
                  [] OTHER          -> "SUCCESS"

\* A compare-and-swap of region: swap in `swap` if it holds `compare`.
CAS(region, compare, swap, signaled) ==
    [WR("CAS", region, swap, signaled, 0) EXCEPT !.compare = compare]

\* Every such record: the type of a program's elements.
WRs == [op : OneSided \cup TwoSided, region : {0} \cup Regions, value : Nat,
        signaled : BOOLEAN, note : Nat, compare : Nat, after : Nat, key : Keys]

\* WR w as a reply: posted once its application took `after` notifications.
Reply(w, after) == [w EXCEPT !.after = after]

\* The value WR w leaves in its region when it executes on `old` (its result is old).
Applied(w, old) ==
    CASE w.op \in {"WRITE", "WRITE_IMM"}       -> w.value
      [] w.op = "FADD"                         -> old + w.value
      [] w.op = "CAS" /\ old = w.compare       -> w.value
      [] OTHER                                 -> old

(***************************************************************************)
(* 1: NCCL's Simple protocol: an unsignaled bulk WRITE, then a signaled  *)
(*    WRITE_WITH_IMM telling the receiver the data is there.             *)
(* 2: two SENDs: the shape that shows queue sliding.                     *)
(* 3: an atomic in flight: FADD, then a notification.                    *)
(* 4: buffer reuse: two Simple-protocol rounds into the same region.     *)
(* 5: a signaled WRITE before the notification: an application that wants  *)
(*    a completion per WRITE (docs/findings.md, F5).                       *)
(* 6: a CAS in flight on a second region, then a notification: run twice,  *)
(*    it fails the second time and returns the value it swapped in.        *)
(* 11: an application error behind a WR in flight (issue 16): a signaled  *)
(*     WRITE, a WRITE whose lkey is bad, then the notification (bound     *)
(*     apperr only; 9 and 10 are the numbers docs/extending.md adds).    *)
(* 12: the same with a bad rkey: the responder NAKs the second WRITE.    *)
(* 13: A's notification while B's own WRs go the other way (BProgram).  *)
(***************************************************************************)
Program(k) ==
    CASE k = 1 -> << WR("WRITE", 1, 1, FALSE, 0), WR("WRITE_IMM", 0, 0, TRUE, 1) >>
      [] k = 2 -> << WR("SEND", 0, 1, TRUE, 1), WR("SEND", 0, 2, TRUE, 2) >>
      [] k = 3 -> << WR("FADD", 1, 1, TRUE, 0), WR("WRITE_IMM", 0, 0, TRUE, 1) >>
      [] k = 4 -> << WR("WRITE", 1, 1, FALSE, 0), WR("WRITE_IMM", 0, 0, TRUE, 1),
                     WR("WRITE", 1, 2, FALSE, 0), WR("WRITE_IMM", 0, 0, TRUE, 2) >>
      [] k = 5 -> << WR("WRITE", 1, 1, TRUE, 0), WR("WRITE_IMM", 0, 0, TRUE, 1) >>
      [] k = 6 -> << CAS(2, 0, 1, TRUE), WR("WRITE_IMM", 0, 0, TRUE, 1) >>
      [] k = 11 -> << WR("WRITE", 1, 1, TRUE, 0), BadKey(WR("WRITE", 1, 2, FALSE, 0), "LKEY"),
                      WR("WRITE_IMM", 0, 0, TRUE, 1) >>
      [] k = 12 -> << WR("WRITE", 1, 1, TRUE, 0), BadKey(WR("WRITE", 1, 2, FALSE, 0), "RKEY"),
                      WR("WRITE_IMM", 0, 0, TRUE, 1) >>
      [] k = 13 -> << WR("WRITE_IMM", 0, 0, TRUE, 1) >>
      [] k = 7 -> << WR("SEND", 0, 1, TRUE, 1) >>
      [] k = 8 -> << WR("WRITE", 1, 1, FALSE, 0), WR("WRITE_IMM", 0, 0, TRUE, 1) >>

(***************************************************************************)
(* B's program: what B's application posts to A. Two-way workloads:      *)
(* 7: ping-pong (ibv_rc_pingpong): A's SEND, B's SEND in reply.          *)
(* 8: NCCL's pattern: A's Simple-protocol round (WRITE, WRITE_WITH_IMM)   *)
(*    while B's clear-to-send for the next round goes the other way: one  *)
(*    RDMA WRITE of the entry into A's region 1, as net_ib's PostFifo     *)
(*    posts it (no notification: A's proxy polls the region), signaled    *)
(*    (PostFifo signals one post in a window so that its queue drains).   *)
(* 13: an application error on B (issue 16): a signaled WRITE into A's   *)
(*     region 1, then a WRITE whose lkey is bad, on the QPs that carry   *)
(*     A's notification to B.                                             *)
(***************************************************************************)
BProgram(k) ==
    CASE k = 7 -> << Reply(WR("SEND", 0, 2, TRUE, 1), 1) >>
      [] k = 13 -> << WR("WRITE", 1, 1, TRUE, 0), BadKey(WR("WRITE", 1, 2, FALSE, 0), "LKEY") >>
      [] k = 8 -> << WR("WRITE", 1, 1, TRUE, 0) >>
      [] OTHER -> << >>

ProgramOf(k, h) == IF h = "A" THEN Program(k) ELSE BProgram(k)

(***************************************************************************)
(* B's application's own writes to its regions: a receiver reusing its    *)
(* buffer, and the writer besides A that makes CAS's ABA case a trace.   *)
(* Store(region, value, after): B writes value into region once it took   *)
(* `after` notifications; a workload's stores come in order, after all of *)
(* its notifications (what DataAtNotification expects is A's writes).     *)
(***************************************************************************)
Store(region, value, after) == [region |-> region, value |-> value, after |-> after]

\* Every such record: the type of a workload's stores.
Stores == [region : Regions, value : Nat, after : Nat]

(* 6: after taking the notification, B puts region 2 back to 0: a CAS     *)
(*    replayed then finds its compare value again (ABA) and swaps twice.  *)
StoresOf(k) ==
    CASE k = 6 -> << Store(2, 0, 1) >>
      [] OTHER -> << >>

StoresAt(k, h) == IF h = "B" THEN StoresOf(k) ELSE << >>

\* How many notifications (and so receive WRs) a program has.
NumNotes(prog) == Len(SelectSeq(prog, LAMBDA w : w.note > 0))

\* The id of the program's k-th notification.
NoteWr(prog, k) == CHOOSE i \in DOMAIN prog : prog[i].note = k

\* The number of notifications among the first k WRs.
NotesBefore(prog, k) == NumNotes(SubSeq(prog, 1, k))

(***************************************************************************)
(* The value region r holds once WRs 1..k of prog have each executed     *)
(* once, in post order: what DataAtNotification expects.                 *)
(***************************************************************************)
RECURSIVE ValueAfter(_, _, _)
ValueAfter(prog, r, k) ==
    IF k = 0 THEN 0
    ELSE LET w == prog[k]
             v == ValueAfter(prog, r, k - 1)
         IN  IF w.region # r THEN v ELSE Applied(w, v)
=============================================================================
