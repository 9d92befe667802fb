------------------------------ MODULE Workloads ------------------------------
(***************************************************************************)
(* The applications' programs. Host A's application posts a fixed        *)
(* sequence of work requests (WRs) to host B; host B's application posts *)
(* one receive WR per notification. A WR's id is its position in the     *)
(* program, so ids increase in post order.                                *)
(***************************************************************************)
EXTENDS Naturals, Sequences

OneSided == {"WRITE", "READ", "FADD", "CAS"}
\* Notifications: two-sided operations that consume a receive WR at the responder.
TwoSided == {"SEND", "WRITE_IMM"}
\* Not idempotent: applying one twice changes memory twice.
Atomics  == {"FADD", "CAS"}
\* Operations that change the responder's memory.
Writers  == {"WRITE", "WRITE_IMM", "FADD", "CAS"}

Regions == {1}

\* A work request. region 0: none. note: the number (1, 2, ...) of a notification
\* in post order, 0 for a one-sided WR.
WR(op, region, value, signaled, note) ==
    [op |-> op, region |-> region, value |-> value, signaled |-> signaled, note |-> note]

\* Every such record: the type of a program's elements.
WRs == [op : OneSided \cup TwoSided, region : {0} \cup Regions, value : Nat,
        signaled : BOOLEAN, note : Nat]

(***************************************************************************)
(* 1: NCCL's Simple protocol: an unsignaled bulk WRITE, then a signaled  *)
(*    WRITE_WITH_IMM telling the receiver the data is there.             *)
(* 2: two SENDs: the shape that shows queue sliding.                     *)
(* 3: an atomic in flight: FADD, then a notification.                    *)
(* 4: buffer reuse: two Simple-protocol rounds into the same region.     *)
(***************************************************************************)
Program(k) ==
    CASE k = 1 -> << WR("WRITE", 1, 1, FALSE, 0), WR("WRITE_IMM", 0, 0, TRUE, 1) >>
      [] k = 2 -> << WR("SEND", 0, 0, TRUE, 1), WR("SEND", 0, 0, TRUE, 2) >>
      [] k = 3 -> << WR("FADD", 1, 1, TRUE, 0), WR("WRITE_IMM", 0, 0, TRUE, 1) >>
      [] k = 4 -> << WR("WRITE", 1, 1, FALSE, 0), WR("WRITE_IMM", 0, 0, TRUE, 1),
                     WR("WRITE", 1, 2, FALSE, 0), WR("WRITE_IMM", 0, 0, TRUE, 2) >>

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
         IN  IF w.region # r THEN v
             ELSE CASE w.op \in {"WRITE", "WRITE_IMM"} -> w.value
                    [] w.op = "FADD"                   -> v + w.value
                    [] OTHER                           -> v
=============================================================================
