--------------------------- MODULE NcclPortHandshake ---------------------------
(***************************************************************************)
(* NCCL's port recovery (p2p_resiliency_recovery.cc = REC, commit        *)
(* 5067397c): one recovery context per failed device and side, run by   *)
(* the recovery thread (REC 1253-1321). The sender ("requestor") sends  *)
(* batches of SeqSize "alive" SEND_WITH_IMMs (ids 0, 1, ...) over the   *)
(* device's UC recovery QP and waits for an ACK; the receiver waits for *)
(* more than SeqSize in-order alive messages, restores its data QPs and *)
(* sends the ACK; the sender then restores its QPs and sends a final    *)
(* ACK, on which the receiver concludes. Timers are events guarded by   *)
(* `Quiet` (QuietTimeouts), each expiry a failed attempt counted against *)
(* AttemptsMax. A local send completion of a UC SEND is put in the      *)
(* side's recovery CQ when it is posted (the link cannot hold it back). *)
(* A message is polled from the recovery CQ one CQE per step, in the    *)
(* context's state at that time, as ncclIbPortRecoveryPollCq does.      *)
(***************************************************************************)
EXTENDS NcclPortData

\* QuietTimeouts: a 4-5 s timer does not expire while the handshake is still moving on
\* its own within milliseconds: a message in flight, a CQE not yet polled, or a peer
\* whose next step sends (a batch due after the 500 ms interval, the final ACK due
\* after the QP restore) or starts (the 200 ms start delay).
PeerBusy(d) ==
    \/ rcqRec["S"][d] # << >> \/ rcqRec["R"][d] # << >>
    \/ rec["S"][d].st = "Init" \/ rec["R"][d].st = "Init"
    \/ rec["S"][d].st = "Alive" /\ ~rec["S"][d].aposted
    \/ rec["S"][d].st = "Ack" /\ rec["S"][d].ackRcv /\ ~rec["S"][d].ackPosted
Quiet(d) == QuietTimeouts => (uc[d]["S"] = << >> /\ uc[d]["R"] = << >> /\ ~PeerBusy(d))
MaxId == (AttemptsMax + 1) * SeqSize
CapWr(n) == IF n > RecvWrs + 2 THEN RecvWrs + 2 ELSE n

\* ncclIbPortRecoveryContextInit (REC 220-293): state Init, timeLastMsg = 0 (memset:
\* `fresh`), the failed device's data QPs to ERR (REC 252-259, 157-171); receive WRs on
\* the recovery QP: 1 at the sender (REC 261-273), RecvWrs at the receiver (REC 274-289).
InitCtx == [NoCtx EXCEPT !.st = "Init", !.fresh = TRUE]
InitWrs(h) == IF h = "S" THEN 1 ELSE RecvWrs

\* Send recovery messages ms from side h on device d: lost if the link is down.
SendMsgs(d, h, ms) ==
    uc' = IF link[d] THEN [uc EXCEPT ![d][IF h = "S" THEN "R" ELSE "S"] = @ \o ms] ELSE uc

\* ncclIbPortRecoveryQpsRestore (REC 475-598): side h's data QP of device d back to
\* RTS (RESET, INIT, RTR, RTS); a reset forgets what was on the wire only with
\* BoundedLifetime. The receiver re-posts its data receive WRs (REC 532-546), which
\* the model does not count.
Restore(h, d) ==
    /\ qp' = [qp EXCEPT ![h][d] = "RTS"]
    /\ ghost' = IF BoundedLifetime THEN [ghost EXCEPT ![d] = << >>] ELSE ghost

Set(h, d, c) == rec' = [rec EXCEPT ![h][d] = c]
Sent == [op |-> "send", imm |-> 0]      \* a send's local completion
Got(m) == [op |-> "recv", imm |-> m]   \* a received message
Pop(h, d) == rcqRec' = [rcqRec EXCEPT ![h][d] = Tail(@)]
CqHead(h, d) == Head(rcqRec[h][d])
Unchanged == UNCHANGED << appVars, senderVars, receiverVars, faultVars >>

\* The start delay elapsed (REC 1168-1181): Init -> AliveMessages.
RecStart(h, d) ==
    /\ rec[h][d].st = "Init"
    /\ Set(h, d, [rec[h][d] EXCEPT !.st = "Alive"])
    /\ Unchanged /\ UNCHANGED << nicVars, uc, rcqRec, recvWr, historyVars >>

(* -------------------------- the sender (requestor) ----------------------- *)

\* Post a batch of SeqSize alive messages once the batch interval elapsed
\* (ncclIbPortRecoveryProgressAliveMessagesSender, REC 836-854; PostAliveMessages,
\* REC 761-802: only the last is signaled, so one local completion).
SPostAlive(d) ==
    LET c == rec["S"][d] IN
    /\ c.st = "Alive" /\ ~c.aposted /\ c.next + SeqSize <= MaxId
    /\ SendMsgs(d, "S", [i \in 1..SeqSize |-> c.next + i - 1])
    /\ rcqRec' = [rcqRec EXCEPT !["S"][d] = Append(@, Sent)]
    /\ Set("S", d, [c EXCEPT !.aposted = TRUE, !.next = c.next + SeqSize])
    /\ Unchanged /\ UNCHANGED << nicVars, recvWr, historyVars >>

\* Poll the batch's local completion (REC 856-871, 680-692): a SEND completion moves
\* to the Ack state (REC 1002-1007); any other CQE fails the recovery (REC 686-691).
SPollAlive(d) ==
    LET c == rec["S"][d] IN
    /\ c.st = "Alive" /\ c.aposted /\ rcqRec["S"][d] # << >>
    /\ Pop("S", d)
    /\ Set("S", d, IF CqHead("S", d).op = "send" THEN [c EXCEPT !.acmp = TRUE, !.st = "Ack"]
                   ELSE [c EXCEPT !.st = "Failed"])
    /\ Unchanged /\ UNCHANGED << nicVars, uc, recvWr, historyVars >>

\* Wait for the receiver's ACK (REC 1023-1031, 693-702): any CQE counts as the ACK
\* (the asserts on opcode and imm are compiled out; one that fails is `aborted`).
SAckPoll(d) ==
    LET c == rec["S"][d] IN
    /\ c.st = "Ack" /\ ~c.ackRcv /\ rcqRec["S"][d] # << >>
    /\ Pop("S", d)
    /\ Set("S", d, [c EXCEPT !.ackRcv = TRUE])
    /\ aborted' = (aborted \/ CqHead("S", d) # Got(ACK))
    /\ Unchanged /\ UNCHANGED << nicVars, uc, recvWr, late >>

\* The ACK timer expired (REC 1031-1052): a failed attempt; at AttemptsMax the
\* recovery fails, else back to AliveMessages (REC 1140-1145) for another batch.
SAckTimeout(d) ==
    LET c == rec["S"][d] IN
    /\ c.st = "Ack" /\ ~c.ackRcv /\ rcqRec["S"][d] = << >> /\ Quiet(d)
    /\ Set("S", d, IF c.att + 1 >= AttemptsMax THEN [c EXCEPT !.att = c.att + 1, !.st = "Failed"]
                   ELSE [c EXCEPT !.att = c.att + 1, !.st = "Alive", !.aposted = FALSE,
                                  !.acmp = FALSE])
    /\ Unchanged /\ UNCHANGED << nicVars, uc, rcqRec, recvWr, historyVars >>

\* ACK received: restore the data QPs and post the final ACK (REC 1055-1071).
SRestoreAck(d) ==
    LET c == rec["S"][d] IN
    /\ c.st = "Ack" /\ c.ackRcv /\ ~c.ackPosted
    /\ Restore("S", d)
    /\ SendMsgs(d, "S", << ACK >>)
    /\ rcqRec' = [rcqRec EXCEPT !["S"][d] = Append(@, Sent)]
    /\ Set("S", d, [c EXCEPT !.ackPosted = TRUE])
    /\ Unchanged /\ UNCHANGED << sq, rsq, scq, rcq, recvWr, historyVars >>

\* The final ACK's local completion ends the sender's recovery in Success
\* (REC 1073-1086, 703-711, 1146-1150); the assert on its opcode is compiled out.
SAckCmp(d) ==
    LET c == rec["S"][d] IN
    /\ c.st = "Ack" /\ c.ackPosted /\ ~c.ackCmp /\ rcqRec["S"][d] # << >>
    /\ Pop("S", d)
    /\ Set("S", d, [c EXCEPT !.ackCmp = TRUE, !.st = "Success"])
    /\ aborted' = (aborted \/ CqHead("S", d).op # "send")
    /\ Unchanged /\ UNCHANGED << nicVars, uc, recvWr, late >>

(* ------------------------- the receiver (responder) ---------------------- *)

\* Poll an alive message (REC 880-887, 634-662): in order (imm = aliveMsgNextId)
\* counts, out of order restarts the count at 0 from imm + 1; timeLastMsg = now; a
\* receive WR is re-posted. With more than SeqSize in order (REC 888-918): drain the
\* CQ re-posting a WR per CQE (REC 185-218), restore the data QPs, post the ACK.
RAliveRecv(d) ==
    LET c == rec["R"][d]
        m == CqHead("R", d).imm
        inorder == m = c.next
        c1 == [c EXCEPT !.next = IF inorder THEN c.next + 1 ELSE m + 1,
                        !.inord = IF inorder THEN c.inord + 1 ELSE 0, !.fresh = FALSE]
        done == c1.inord > SeqSize
    IN
    /\ c.st = "Alive" /\ ~c.ackPosted /\ rcqRec["R"][d] # << >>
    /\ aborted' = (aborted \/ CqHead("R", d).op = "send")
    /\ IF CqHead("R", d).op = "send" THEN /\ Pop("R", d) /\ Set("R", d, c) /\ UNCHANGED << qp, ghost, uc, recvWr >>
       ELSE IF done
       THEN /\ rcqRec' = [rcqRec EXCEPT !["R"][d] = << Sent >>]
            /\ recvWr' = [recvWr EXCEPT !["R"][d] = CapWr(@ + Len(rcqRec["R"][d]))]
            /\ Restore("R", d)
            /\ SendMsgs(d, "R", << ACK >>)
            /\ Set("R", d, [c1 EXCEPT !.ackPosted = TRUE])
       ELSE /\ Pop("R", d) /\ Set("R", d, c1)
            /\ recvWr' = [recvWr EXCEPT !["R"][d] = CapWr(@ + 1)]
            /\ UNCHANGED << qp, ghost, uc >>
    /\ Unchanged /\ UNCHANGED << sq, rsq, scq, rcq, late >>

\* The alive timer (REC 919-937): nothing polled and timeLastMsg older than the
\* timeout -- at once when timeLastMsg is still 0 (`fresh`, REC 240, 1177-1179 resets
\* it for the sender only). A failed attempt; at AttemptsMax the recovery fails.
RAliveTimeout(d) ==
    LET c == rec["R"][d] IN
    /\ c.st = "Alive" /\ ~c.ackPosted /\ rcqRec["R"][d] = << >> /\ (c.fresh \/ Quiet(d))
    /\ Set("R", d, IF c.att + 1 >= AttemptsMax THEN [c EXCEPT !.att = c.att + 1, !.st = "Failed"]
                   ELSE [c EXCEPT !.att = c.att + 1, !.fresh = FALSE])
    /\ Unchanged /\ UNCHANGED << nicVars, uc, rcqRec, recvWr, historyVars >>

\* ACK posted: wait for its local completion (REC 609-633), re-posting a receive WR
\* for each alive message still arriving; the completion moves to Ack (REC 1002-1007).
RAliveAckWait(d) ==
    LET c == rec["R"][d] IN
    /\ c.st = "Alive" /\ c.ackPosted /\ rcqRec["R"][d] # << >>
    /\ Pop("R", d)
    /\ IF CqHead("R", d).op = "send"
       THEN Set("R", d, [c EXCEPT !.ackCmp = TRUE, !.st = "Ack"]) /\ UNCHANGED recvWr
       ELSE Set("R", d, c) /\ recvWr' = [recvWr EXCEPT !["R"][d] = CapWr(@ + 1)]
    /\ Unchanged /\ UNCHANGED << nicVars, uc, historyVars >>

\* Wait for the final ACK (REC 1090-1099, 664-670): any received CQE counts (the
\* asserts on opcode and imm are compiled out); then Success (REC 1126-1128).
RAck(d) ==
    LET c == rec["R"][d] IN
    /\ c.st = "Ack" /\ ~c.ackRcv /\ rcqRec["R"][d] # << >>
    /\ Pop("R", d)
    /\ Set("R", d, [c EXCEPT !.ackRcv = TRUE, !.st = "Success"])
    /\ aborted' = (aborted \/ CqHead("R", d) # Got(ACK))
    /\ Unchanged /\ UNCHANGED << nicVars, uc, recvWr, late >>

\* The final-ACK timer (REC 1100-1125): a failed attempt; at AttemptsMax the
\* recovery fails, else back to AliveMessages with the count reset (REC 1140-1145).
RAckTimeout(d) ==
    LET c == rec["R"][d] IN
    /\ c.st = "Ack" /\ ~c.ackRcv /\ rcqRec["R"][d] = << >> /\ Quiet(d)
    /\ Set("R", d, IF c.att + 1 >= AttemptsMax THEN [c EXCEPT !.att = c.att + 1, !.st = "Failed"]
                   ELSE [c EXCEPT !.att = c.att + 1, !.st = "Alive", !.ackPosted = FALSE,
                                  !.ackCmp = FALSE, !.inord = 0])
    /\ Unchanged /\ UNCHANGED << nicVars, uc, rcqRec, recvWr, historyVars >>

(* --------------------------------- both --------------------------------- *)

\* The context ended (REC 1191-1216, 1298-1304): the device becomes Recovered or
\* RecoveryFailed for the main thread to act on; the context is destroyed.
RecEnd(h, d) ==
    /\ rec[h][d].st \in {"Success", "Failed"}
    /\ IF h = "S"
       THEN /\ devS' = [devS EXCEPT ![d] = IF rec["S"][d].st = "Success" THEN "Recovered"
                                                                           ELSE "RecoveryFailed"]
            /\ UNCHANGED devR
       ELSE /\ devR' = [devR EXCEPT ![d] = IF rec["R"][d].st = "Success" THEN "Recovered"
                                                                           ELSE "RecoveryFailed"]
            /\ UNCHANGED devS
    /\ Set(h, d, [NoCtx EXCEPT !.ended = TRUE])
    /\ UNCHANGED << appVars, activeS, sEv, sent, ctsFifo, sSlot, failed, probeRes, probe >>
    /\ UNCHANGED << activeR, rEv, compl, rSlot, buf, nicVars, faultVars, uc, rcqRec, recvWr >>
    /\ UNCHANGED historyVars

\* A recovery message reaches side h's recovery QP of device d: a CQE if a receive WR
\* is posted there, else dropped (UC). The WRs and the CQ outlive a context.
DeliverMsg(d, h) ==
    /\ uc[d][h] # << >> /\ link[d]
    /\ uc' = [uc EXCEPT ![d][h] = Tail(@)]
    /\ IF recvWr[h][d] > 0
       THEN /\ rcqRec' = [rcqRec EXCEPT ![h][d] = Append(@, Got(Head(uc[d][h])))]
            /\ recvWr' = [recvWr EXCEPT ![h][d] = @ - 1]
       ELSE UNCHANGED << rcqRec, recvWr >>
    /\ Unchanged /\ UNCHANGED << nicVars, rec, historyVars >>

RecoveryThread(d) ==
    \/ \E h \in Sides : RecStart(h, d) \/ RecEnd(h, d) \/ DeliverMsg(d, h)
    \/ SPostAlive(d) \/ SPollAlive(d) \/ SAckPoll(d) \/ SAckTimeout(d) \/ SRestoreAck(d)
    \/ SAckCmp(d)
    \/ RAliveRecv(d) \/ RAliveTimeout(d) \/ RAliveAckWait(d) \/ RAck(d) \/ RAckTimeout(d)
=============================================================================
