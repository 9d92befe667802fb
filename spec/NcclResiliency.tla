---------------------------- MODULE NcclResiliency ----------------------------
(***************************************************************************)
(* NCCL 2.29's IB resiliency (src/transport/net_ib/p2p_resiliency*.cc): *)
(* move the failed device's QPs to a healthy one, wait, RDMA-READ the   *)
(* per-message completion flag the receiver sets when it polls the      *)
(* WRITE_WITH_IMM, and resend the messages whose flag is unset. The     *)
(* wait is a time bound; the model has no time, so the READ may come    *)
(* before the receiver polls. The move of the receive WRs is modelled   *)
(* by the same repost-and-exchange step as SHIFT's (its count unused).  *)
(***************************************************************************)
EXTENDS Properties

D == [failover |-> TRUE, skip |-> "flag", refuseAtomics |-> FALSE, failBack |-> FALSE,
      readsResponder |-> FALSE, staged |-> FALSE]

Next == FailoverNext(D)          \* System(D) \/ Environment (Failover.tla)
Fairness == FailoverFairness(D)  \* System(D) weakly fair, its handshake timer strongly
Spec == Init /\ [][Next]_vars /\ Fairness
=============================================================================
