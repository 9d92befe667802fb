"""Testing the tests: build the C core with one seeded bug at a time and show that the
differential suite catches every one within its normal budget (issue 6, item 5).

    python tests/differential/seeded_bugs.py [--examples 500] [--save] [--only NAME]

Each mutant is a textual change of native/src/ that must match exactly once (so that a
change of the C sources cannot silently unseed a bug). The mutated sources are compiled
with cffi into a private copy of shift.impl._native; a subprocess loads it in place of the
real one and runs the differential campaign (the suite's generator, designs and bounds,
at most --examples traces per design and bound) until the first divergence, which it
shrinks. A mutant the campaign misses
goes to trace validation (shift.validation: the implementation leads, the model judges),
then to the saved corpus. The script prints the kill table and exits 1 unless every
mutant is killed. With
--save, each mutant's shrunk killing trace goes to tests/corpus/DESIGN/BOUND/, where
test_corpus.py replays it against the real core for ever.

With --side verbs the mutant layer runs over the libibverbs backend on the simulated
provider in lock-step (the bugs live in the layer, so each must still be killed through
libibverbs): the child runs in the lock-step environment, and the campaign, trace
validation and the corpus judge the layer there.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "native"
CORPUS = ROOT / "tests" / "corpus"
# the bounds of the campaign: twoway (workload 7, B posts WRs too) for the two-way data
# path's mutants; the others are killed at default or large (the application-error
# paths' mutants run at apperr alone: Mutant.bounds)
BOUNDS = ("default", "large", "twoway")


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # under native/src
    old: str
    new: str
    what: str
    # the bounds whose traces the campaign and trace validation run for it: a mutant of
    # the application-error paths only at apperr (a bad key), every other at the rest
    bounds: tuple[str, ...] = BOUNDS
    # what kills it, as the kill table (docs/differential.md) says: the generated traces
    # ("campaign") or only a hand-written corpus trace ("corpus")
    caught_by: str = "campaign"


MUTANTS = (
    Mutant("no-counter-filter", "failover.c",
           "    return NOTE(p) && (int64_t)NOTE(p) <= e->peer_ctr;",
           "    return 0 && NOTE(p) && (int64_t)NOTE(p) <= e->peer_ctr;",
           "the replay skips nothing: notifications the peer received are sent again"),
    Mutant("replay-before-receives", "failover.c",
           "e->send_mode == SHIFT_STATE_FALLBACK && e->sent_ctr && e->fresh && !e->replayed",
           "e->send_mode == SHIFT_STATE_FALLBACK && e->sent_ctr && !e->replayed",
           "sends are replayed before the peer reposted its receives (and sent its counter)"),
    Mutant("atomic-not-refused", "failover.c",
           "(atomic_op(p->wr.opcode) || (p->flags & PF_INELIGIBLE))",
           "((p->flags & PF_INELIGIBLE))",
           "an outstanding atomic does not refuse the failover"),
    Mutant("doorbell-before-fence", "datapath.c",
           "            path = 1;\n            nodb = 1;",
           "            path = 1;\n            nodb = 0;",
           "WRs after the fence ring the default doorbell before the fence drains"),
    Mutant("fence-ignored", "failover.c",
           "    return !p || (p->flags & PF_DONE);",
           "    (void)p;\n    return 1;",
           "fail-back releases the held WRs without waiting for the fence"),
    Mutant("responder-no-drain", "failover.c",
           "    drain(e, 1, 0);\n    if (e->direct && backend_error(e, materialize(e)))",
           "    if (is_req(e))\n        drain(e, 1, 0);\n"
           "    if (e->direct && backend_error(e, materialize(e)))",
           "the responder answers with a counter that misses executed, unpolled notifications"),
    Mutant("completion-twice", "failover.c",
           "                if (p->wr.send_flags & SHIFT_SEND_SIGNALED)\n"
           "                    buf_send(e, p, SHIFT_WC_SUCCESS);\n"
           "                pend_done(e, p);\n            }\n            continue;",
           "                if (p->wr.send_flags & SHIFT_SEND_SIGNALED)\n"
           "                    buf_send(e, p, SHIFT_WC_SUCCESS);\n"
           "                buf_send(e, p, SHIFT_WC_SUCCESS);\n"
           "                pend_done(e, p);\n            }\n            continue;",
           "a skipped notification's completion is reported twice"),
    Mutant("first-failed-off-by-one", "simnic_rc.c",
           "qp_fail(qp, qp->una, SHIFT_WC_RETRY_EXC_ERR);",
           "qp_fail(qp, qp->una + 1, SHIFT_WC_RETRY_EXC_ERR);",
           "the retry-exceeded status goes to the WR after the first failed one"),
    Mutant("flush-status-wrong", "simnic_qp.c",
           "send_cqe(qp, &w->wr, k == err_idx ? err_status : SHIFT_WC_WR_FLUSH_ERR, k);",
           "send_cqe(qp, &w->wr, k == err_idx ? err_status : SHIFT_WC_GENERAL_ERR, k);",
           "WRs behind a failed one complete with GENERAL_ERR instead of WR_FLUSH_ERR"),
    Mutant("duplicate-write-reexecuted", "simnic_rc.c",
           "        } else {\n            respond(f, qp, SYN_ACK, p->psn, 0, NULL, 0);\n"
           "        }\n        return;",
           "        } else {\n"
           "            if (p->len && (op == SHIFT_WR_RDMA_WRITE ||\n"
           "                           op == SHIFT_WR_RDMA_WRITE_WITH_IMM))\n"
           "                memcpy((void *)(uintptr_t)p->raddr, p->data, p->len);\n"
           "            respond(f, qp, SYN_ACK, p->psn, 0, NULL, 0);\n"
           "        }\n        return;",
           "the responder re-executes a duplicate WRITE", caught_by="corpus"),
    Mutant("error-poll-retires", "simnic_fabric.c",
           "if (status == SHIFT_WC_SUCCESS && s->idx >= qp->good)",
           "if (s->idx >= qp->good)",
           "a polled error completion frees its WR for the replay too: the failed WR is lost"),
    Mutant("prefix-off-by-one", "failover.c",
           "(skips_prefix(e) && s < executed)",
           "(skips_prefix(e) && s <= executed)",
           "ShiftPrefix also skips the first WR after the last notification the peer counted"),
    Mutant("prefix-not-skipped", "failover.c",
           "(skips_prefix(e) && s < executed)",
           "(0 && skips_prefix(e) && s < executed)",
           "ShiftPrefix replays the WRs before the last counted notification, as Shift does"),
    Mutant("recv-backup-default-key", "pending.c",
           "    if (w.num_sge)\n        w.sg.lkey = lkey_backup(e, w.sg.lkey);\n",
           "    /* seeded: the lkey is not translated */\n",
           "a receive reposted on the backup QP keeps the default NIC's lkey"),
    Mutant("cas-not-refused", "failover.c",
           "return op == SHIFT_WR_ATOMIC_CMP_AND_SWP || op == SHIFT_WR_ATOMIC_FETCH_AND_ADD;",
           "return op == SHIFT_WR_ATOMIC_FETCH_AND_ADD;",
           "a CAS in flight does not refuse the failover: it may swap twice"),
    Mutant("send-payload-not-placed", "simnic_rc.c",
           "memcpy((void *)(uintptr_t)rr.sg.addr, p->data, p->len);",
           "memset((void *)(uintptr_t)rr.sg.addr, 0, p->len);",
           "a SEND completes the receive it consumes without its payload in the buffer"),
    Mutant("atomic-returns-new-value", "simnic_rc.c",
           "        val = old;\n        break;",
           "        val = nv;\n        break;",
           "an atomic's ACK returns the value it wrote, not the one it found"),
    # two-way traffic (bound twoway): B's own sends, on the same QPs as its receives
    Mutant("responder-sends-not-replayed", "failover.c",
           "        if (!post_backup(e, p))\n            continue;",
           "        if (!is_req(e) || !post_backup(e, p))\n            continue;",
           "B's own sends are not replayed after a failover (only A's are)"),
    Mutant("failback-flushes-own-sends", "failover.c",
           "    e->stale_rq2 = sends_on(e, W_BACKUP) || clear_rq2(e);",
           "    e->stale_rq2 = clear_rq2(e);",
           "the receive side's fail-back moves the backup QP to ERR at once, flushing the "
           "host's own sends still there"),
    Mutant("failback-drops-send-completions", "failover.c",
           "            e->q2[(e->q2head + k++) & e->q2mask] = wc;",
           "            (void)k;",
           "the receive side's fail-back loses the host's own send completions on the "
           "backup CQ (they are reported to no one)"),
    # lossy control messages (issue 15, item 3): the handshake timer and duplicates
    Mutant("timer-never-resends", "failover.c",
           "        e->ctl_left--;\n        send_counter(e, 1);",
           "        e->ctl_left--;",
           "the handshake timer fires without resending the counter: a lost counter or "
           "answer is never recovered"),
    Mutant("timer-resend-does-not-ask", "failover.c",
           "        e->ctl_left--;\n        send_counter(e, 1);",
           "        e->ctl_left--;\n        send_counter(e, 0);",
           "the handshake timer resends the counter without asking: the peer, which "
           "answered already, does not answer again"),
    Mutant("duplicate-counter-taken-as-new", "failover.c",
           "    if (m->seq == e->peer_seq) { /* (an older one is stale: ctl_valid) */",
           "    if (0 && m->seq == e->peer_seq) {",
           "a resent counter (the number taken already) is taken as a new one: a new "
           "failover, or the answer awaited"),
    Mutant("duplicate-ask-unanswered", "failover.c",
           "        if (m->want_reply && e->sent_ctr)\n            send_counter(e, e->asked);",
           "        if (0 && m->want_reply && e->sent_ctr)\n            send_counter(e, e->asked);",
           "a resent counter that asks is not answered: the peer waits for ever"),
    # application errors (issue 16, item 1): the QP's first fault, not the CQE polled
    Mutant("flush-is-path-failure", "datapath.c",
           "    if (wc->status != SHIFT_WC_WR_FLUSH_ERR)\n"
           "        return path_error(wc->status) ? 0 : wc->status;",
           "    if (1)\n        return path_error(wc->status) ? 0 : wc->status;",
           "a flush polled off the default CQ is taken for a path failure without reading "
           "past it (SHIFT as published): a bad lkey behind a WR in flight fails over",
           bounds=("apperr",)),
    Mutant("app-error-completions-lost", "datapath.c",
           "            if (q == 1)\n                buf_push(e, &o);\n"
           "            else if (q == 2)",
           "            if (q == 2)",
           "the completions read past a flush to the application's error are not handed "
           "to it: the bad WR's own status never reaches the application",
           bounds=("apperr",)),
    Mutant("app-error-fails-over", "datapath.c",
           "            app_dies(e, 1, fault);\n            apperr = 1;",
           "            apperr = 0;",
           "an application's error polled off the default CQ starts a failover: the bad "
           "WR is replayed on the backup path",
           bounds=("apperr",)),
    # the peer of an application's error (F6b): told, it fails its QP pair too
    Mutant("peer-app-error-ignored", "failover.c",
           "    if (m.kind == CTL_APP_ERROR) {\n        take_app_error(e);",
           "    if (m.kind == CTL_APP_ERROR) {\n        if (0)\n            take_app_error(e);",
           "the peer's word that its application failed the QP pair is taken and ignored: "
           "a layer that failed over on the flushes of its QP stays in Fallback, its "
           "receive WRs owed for good (F6b)",
           bounds=("apperr",)),
    Mutant("app-error-untold", "failover.c",
           "SHIFT_WC_GENERAL_ERR, 0);\n    tell_app_error(e);",
           "SHIFT_WC_GENERAL_ERR, 0);",
           "an endpoint dead of its application's error does not tell the peer, whose "
           "layer takes its failed QP for a path failure (F6b as published)",
           bounds=("apperr",)),
    Mutant("dead-counter-unanswered", "failover.c",
           "        if (m.kind == CTL_COUNTER && e->app_err)",
           "        if (0 && m.kind == CTL_COUNTER && e->app_err)",
           "an endpoint dead of its application's error leaves the peer's counter "
           "unanswered: a peer that failed over first waits for ever",
           bounds=("apperr",)),
    # hardware's order at the responder (issue 17, item 1: AckBeforeCqe)
    Mutant("cqe-written-with-ack", "simnic_fabric.c",
           "            status == SHIFT_WC_SUCCESS && qp->f->attr.ack_before_cqe);",
           "            0);",
           "the NIC writes a receive completion into host memory with its ACK, whatever "
           "ack_before_cqe says: F7's window never opens",
           bounds=("ackfirst",)),
    Mutant("dead-nic-writes-its-cqes", "simnic_wire.c",
           "        cq_lose_unwritten(n->qps[i]->scq, nic);\n"
           "        cq_lose_unwritten(n->qps[i]->rcq, nic);",
           "        cq_write_all(n->qps[i]->scq);\n        cq_write_all(n->qps[i]->rcq);",
           "a dying NIC writes the receive completions it had not yet written instead of "
           "losing them",
           bounds=("ackfirst",)),
    Mutant("flush-before-unwritten", "simnic_qp.c",
           "    cq_write_all(qp->scq);\n    cq_write_all(qp->rcq);\n",
           "    (void)qp; /* seeded: the unwritten completions are not written first */\n",
           "a QP entering the error state on a live NIC flushes ahead of the completions it "
           "had not yet written: the layer's drain misses a received notification",
           bounds=("ackfirst",)),
    # a NIC in fatal error completes nothing (issue 17, item 2: DeviceFatal)
    Mutant("fatal-event-ignored", "silent.c",
           "    e->silent[path] = SILENT_DRAIN;\n    return 1;",
           "    return 1; /* seeded: the layer reads the death and acts on nothing */",
           "the layer reads IBV_EVENT_DEVICE_FATAL and ignores it, as a trigger driven by "
           "polled error completions alone: the dead QP's WRs never complete",
           bounds=("fatal",)),
    Mutant("fatal-flushes-skip-receives", "silent.c",
           "        recv_wc(r->wr.wr_id, SHIFT_WC_WR_FLUSH_ERR, &wc);\n        emit(",
           "        continue; /* seeded */\n        emit(",
           "the layer flushes a silent QP's send WRs but not its receive WRs: a "
           "receiver's owed receive WRs never complete",
           bounds=("fatal",)),
    Mutant("dead-device-flushes", "simnic_wire.c",
           "        if (f->attr.device_fatal && qp->state != SHIFT_QPS_RESET) {",
           "        if (0) { /* seeded: a device in fatal error flushes as a live one */",
           "a NIC that dies in fatal error flushes its QPs as on a live device: the "
           "layer's own flushes come twice",
           bounds=("fatal",)),
    # ShiftCounted keeps what an ACK does not promise (issue 17: F7)
    Mutant("counted-forgets-at-ack", "kept.c",
           "    if (!keeps_notes(e))\n        return;\n    for (uint64_t s = e->phead;",
           "    if (1) /* seeded */\n        return;\n    for (uint64_t s = e->phead;",
           "ShiftCounted forgets a notification at its success, as ShiftPrefix does: the "
           "receive WR whose completion died with the peer's NIC is reposted, and the next "
           "replayed notification lands in it (F7)",
           bounds=("faithful",)),
    Mutant("failback-moves-before-its-notifications", "failover.c",
           "    if (e->recv_done + backup_good_recvs(e) >= notes)\n        move_back(e);",
           "    if (backup_good_recvs(e) || 1) /* seeded */\n        move_back(e);",
           "the receive side moves back at the fail-back notice without waiting for the "
           "notifications it counts: the receive WR whose completion the backup NIC had not "
           "written is reposted, and the next notification lands in it (F11)",
           bounds=("faithful",), caught_by="corpus"),
    # RC's implicit NAK (issue 17, item 4: ImplicitNak)
    Mutant("implicit-nak-free", "simnic_rc.c",
           "        if (qp->retries_left == 0) {\n"
           "            qp_fail(qp, k, SHIFT_WC_RETRY_EXC_ERR);",
           "        if (0) {\n            qp_fail(qp, k, SHIFT_WC_RETRY_EXC_ERR);",
           "the requester goes back to a READ or atomic whose response was lost without "
           "spending a retry: at retry_cnt 0 the atomic completes instead of failing",
           bounds=("implicit",)),
    # RNR retried for ever (issue 17, item 3): F8's fix, the layer's completion timer
    Mutant("completion-timer-ignored", "failover.c",
           "    trigger(e, SHIFT_WC_RETRY_EXC_ERR);\n    return 1;",
           "    return 1; /* seeded: the timer does not fail the default path over */",
           "the completion timer fires and the layer stays on the default path: a lost "
           "fail-back notice leaves the notification RNR-NAKed for ever (F8)",
           bounds=("rnr",), caught_by="corpus"),
    Mutant("ctl-never-dropped", "simnic_wire.c",
           "    if (!c->head) /* (a control message is lost like any packet: the spec's Drop) */",
           "    if (!c->head || c->head->kind == PKT_CTL)",
           "the wire never loses a control message (simnic's sn_drop before issue 15, "
           "item 3)"),
    # issue 15, item 2: the reconnect by message
    Mutant("reconnect-never-resent", "failover.c",
           "    int asking = e->reconnecting && e->reconnect_left > 0;",
           "    int asking = 0;",
           "the handshake timer never resends a reconnect request: a lost one leaves the "
           "default path unused for ever"),
    Mutant("stale-incarnation-accepted", "simnic_rc.c",
           "        p->inc != qp->inc) {",
           "        (0 && p->inc != qp->inc)) {",
           "a QP reset into a new incarnation accepts packets of its earlier life"),
    Mutant("reset-refusal-ignored", "failover.c",
           "    if (inc > e->inc && !holds1(e) && reset_default(e, inc) == 0) {",
           "    if (inc > e->inc && !holds1(e) && (reset_default(e, inc), 1)) {",
           "a reset the NIC refused (dead, or completions still to write) is answered as done"),
    # issue 15, item 8: a WR held behind a failed fence
    Mutant("held-wrs-never-flushed", "datapath.c",
           "                if (path == 2 && e->send_mode == SHIFT_STATE_WAIT_DRAINED)\n"
           "                    flush_held(e);",
           "                if (0 && path == 2 && e->send_mode == SHIFT_STATE_WAIT_DRAINED)\n"
           "                    flush_held(e);",
           "the WRs a fail-back held behind a fence that failed never complete",
           caught_by="corpus"),
)


# Seeded bugs of the libibverbs backend (verbs/backend/ibv.c): its own mechanisms in place
# of simnic's (control messages as UD datagrams, an earlier life told apart by PSNs and by
# the incarnation each datagram carries, the doorbell the layer defers). Only --side verbs.
BACKEND = ROOT / "verbs" / "backend"
BACKEND_MUTANTS = (
    Mutant("ibv-stale-ctl-taken", "ibv.c",
           "int mine = len && be32toh(inc) == q->incarnation && !rc_state(q, &s) &&",
           "int mine = len && !rc_state(q, &s) &&",
           "a control datagram of the RC QP's earlier life is taken after its reset"),
    Mutant("ibv-psn-epoch-kept", "ibv.c",
           "    return 0xf00000u - (inc % 0xf0u) * 0x10000u;",
           "    return 0xf00000u + 0 * inc;",
           "a reset keeps the PSNs of the earlier life: its packets are taken as this one's"),
    Mutant("ibv-doorbell-at-once", "ibv.c",
           "        if (w->send_flags & SHIFT_SEND_NO_DOORBELL) {\n"
           "            err = hold(q, w);",
           "        if (0 && (w->send_flags & SHIFT_SEND_NO_DOORBELL)) {\n"
           "            err = hold(q, w);",
           "the WRs the layer writes without ringing are posted at once (before the fence)"),
    Mutant("ibv-ctl-off-rts", "ibv.c",
           "    if (!q->ah || rc_state(q, &s) || s != IBV_QPS_RTS)",
           "    if (!q->ah || rc_state(q, &s))",
           "a control message leaves while the RC QP it speaks for is not in RTS"),
)


def mutate(src: Path, m: Mutant) -> None:
    """Apply m to the copy of native/ at src (exactly one match, else an error)."""
    path = src / "src" / m.file
    text = path.read_text()
    n = text.count(m.old)
    if n != 1:
        raise SystemExit(f"seeded bug {m.name}: {m.file} has {n} matches of its "
                         f"original text (expected 1): the C sources changed")
    path.write_text(text.replace(m.old, m.new))


def build_backend(m: Mutant, work: Path) -> Path:
    """Compile the libibverbs backend with m into work/; the library's path."""
    from shift.verbs import rdma_core

    src = work / "src"
    src.mkdir(parents=True)
    shutil.copy(BACKEND / m.file, src / m.file)
    mutate(work, m)
    out = work / "libshift_ibv.so"
    rdma_core.compile_backend(rdma_core.ensure_built(), lambda _: None, src / m.file, out)
    return out


def build(m: Mutant, work: Path) -> Path:
    """Compile the core with m into work/; the path of the extension module."""
    from cffi import FFI

    sys.path.insert(0, str(ROOT / "impl"))
    try:
        from _build import PREAMBLE, SOURCES, cdef_text  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    src = work / "native"
    shutil.copytree(NATIVE / "src", src / "src")
    shutil.copytree(NATIVE / "include", src / "include")
    mutate(src, m)
    ffi = FFI()
    ffi.cdef(cdef_text())
    ffi.set_source("_native", PREAMBLE,
                   sources=[str(src / "src" / s) for s in SOURCES],
                   include_dirs=[str(src / "include"), str(src / "src")],
                   extra_compile_args=["-std=c11", "-O1", "-w"])
    return Path(ffi.compile(tmpdir=str(work / "build")))


# -- in the subprocess: run the campaign on the mutant core ----------------------------

def load_native(so: Path) -> None:
    """Make `shift.impl._native` the module at so (before shift.impl is imported)."""
    spec = importlib.util.spec_from_file_location("_native", so)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    sys.modules["shift.impl._native"] = mod


def campaign(examples: int, seed: int, bounds: list[str],
             side: str = "core") -> dict[str, object] | None:
    """The first divergence of the suite's campaign, shrunk; None if it survives."""
    import random

    from shift.model.events import dumps_trace
    from shift.model.next import Model

    from shift.differential import DESIGNS, run_trace, shrink, trace_from_choices

    models = [Model.load(d, b) for b in bounds for d in DESIGNS]
    rngs = [random.Random(seed * 1000 + k) for k in range(len(models))]
    # round-robin, so that the cheapest kill is found first whatever the design
    for n in range(examples):
        for model, rng in zip(models, rngs, strict=True):
            events = trace_from_choices(model, [rng.randrange(1 << 16) for _ in range(61)])
            run = run_trace(model, events, side=side)
            if run.divergence is not None:
                small = shrink(model, run.events, side=side)
                div = run_trace(model, small, side=side).divergence
                return {"design": model.design.name, "bound": model.bound.name,
                        "traces": n + 1, "trace": dumps_trace(small), "events": len(small),
                        "where": str(div)}
    return None


def validation_kill(examples: int, seed: int, bounds: list[str],
                    side: str = "core") -> dict[str, object] | None:
    """The first recorded run of this core the model rejects (tests/differential/
    test_trace_validation.py's check: the implementation leads, the model judges)."""
    from shift.model.next import Model

    from shift.differential import DESIGNS
    from shift.validation import describe, record, validate

    models = [Model.load(d, b) for b in bounds for d in DESIGNS]
    for n in range(examples):
        for model in models:
            rec = record(model, model.bound.workloads[n % len(model.bound.workloads)],
                         seed * 1000 + n, side=side)
            result = validate(model, rec)
            if not result.ok:
                return {"design": model.design.name, "bound": model.bound.name,
                        "traces": f"validation:{n + 1}", "trace": describe(rec),
                        "events": len(rec.events), "where": result.failure}
    return None


def corpus_kill(side: str = "core") -> dict[str, object] | None:
    """The first trace of tests/corpus/ that diverges on this core (the suite replays them
    all), for a mutant the generated traces missed."""
    from shift.model.events import dumps_trace, load_trace
    from shift.model.next import Model

    from shift.differential import run_trace

    for path in sorted(CORPUS.glob("*/*/*.jsonl")):
        if path.stem.startswith("mutant-"):
            continue  # saved by this script: not evidence of the suite's own power
        model = Model.load(path.parent.parent.name, path.parent.name)
        events = load_trace(path)
        run = run_trace(model, events, side=side)
        if run.divergence is not None:
            return {"design": model.design.name, "bound": model.bound.name,
                    "traces": f"corpus:{path.name}", "trace": dumps_trace(events),
                    "events": len(events), "where": str(run.divergence)}
    return None


def child(so: str, examples: int, seed: int, validation_only: bool, bounds: list[str],
          corpus_only: bool = False, side: str = "core") -> int:
    if so != "-":  # (a backend mutant: the installed core, SHIFT_IBV_BACKEND its backend)
        load_native(Path(so))
    if corpus_only:
        print(json.dumps(corpus_kill(side)))
    elif validation_only:
        print(json.dumps(validation_kill(examples, seed, bounds, side)))
    else:
        print(json.dumps(campaign(examples, seed, bounds, side)
                         or validation_kill(examples, seed, bounds, side) or corpus_kill(side)))
    return 0


# -- the parent ----------------------------------------------------------------------

def run_child(argv: list[str], side: str,
              backend: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The child, in the lock-step environment for the libibverbs side."""
    if side == "verbs":
        from shift.verbs import devices, rdma_core

        env = {"PYTHONPATH": str(ROOT)}
        if backend is not None:
            env["SHIFT_IBV_BACKEND"] = str(backend)
        return devices.run(rdma_core.ensure_built(), devices.LOCKSTEP, argv, env=env,
                           capture_output=True, cwd=ROOT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)


def run_mutant(m: Mutant, examples: int, seed: int, validation_only: bool = False,
               corpus_only: bool = False,
               side: str = "core") -> tuple[dict[str, object] | None, float]:
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"shift-mutant-{m.name}-") as tmp:
        backend = build_backend(m, Path(tmp)) if m in BACKEND_MUTANTS else None
        so = "-" if backend else str(build(m, Path(tmp)))
        proc = run_child([sys.executable, __file__, "--child", so,
                          "--examples", str(examples), "--seed", str(seed), "--side", side]
                         + ["--bounds", ",".join(m.bounds)]
                         + (["--validation-only"] if validation_only else [])
                         + (["--corpus-only"] if corpus_only else []), side, backend)
    if proc.returncode != 0:
        raise SystemExit(f"seeded bug {m.name}: the campaign failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--examples", type=int, default=500,
                   help="traces per design and bound before a mutant survives (default 500)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--only", action="append", metavar="NAME", help="run only these mutants")
    p.add_argument("--save", action="store_true",
                   help="save each killing trace in tests/corpus/ (mutant-NAME.jsonl)")
    p.add_argument("--validation-only", action="store_true",
                   help="judge each mutant by trace validation alone (no campaign, no corpus)")
    p.add_argument("--known-misses-to-corpus", action="store_true",
                   help="a mutant the table says only the corpus kills goes straight to the "
                        "corpus (the campaign would only confirm that it misses it)")
    p.add_argument("--side", choices=("core", "verbs"), default="core",
                   help="the mutant layer's backend: the simulator's table (default) or "
                        "libibverbs over the simulated provider, in lock-step")
    p.add_argument("--child", metavar="SO", help=argparse.SUPPRESS)
    p.add_argument("--corpus-only", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--bounds", default=",".join(BOUNDS), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args.child, args.examples, args.seed, args.validation_only,
                     args.bounds.split(","), args.corpus_only, args.side)
    every = MUTANTS + (BACKEND_MUTANTS if args.side == "verbs" else ())
    names = {m.name for m in every}
    for n in args.only or ():
        if n not in names:
            p.error(f"unknown mutant {n!r}; mutants: {', '.join(sorted(names))}"
                    + ("" if args.side == "verbs" else " (the backend's: --side verbs)"))
    mutants = [m for m in every if not args.only or m.name in args.only]
    rows = []
    for m in mutants:
        to_corpus = args.known_misses_to_corpus and m.caught_by == "corpus"
        kill, secs = run_mutant(m, args.examples, args.seed, args.validation_only, to_corpus,
                                args.side)
        rows.append((m, kill, secs))
        verdict = (f"killed  {kill['design']}/{kill['bound']} after {kill['traces']} "
                   f"trace(s), shrunk to {kill['events']} events" if kill else "SURVIVED")
        print(f"{m.name:<28} {verdict}  ({secs:.0f} s)", flush=True)
        if kill and args.save and str(kill["traces"]).isdigit():
            path = CORPUS / str(kill["design"]) / str(kill["bound"]) / f"mutant-{m.name}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(kill["trace"]))
    killed = sum(1 for _, k, _ in rows if k)
    print()
    print(f"{'seeded bug':<28} {'caught by':<22} {'traces':>6}  what it breaks")
    for m, k, _ in rows:
        where = f"{k['design']}/{k['bound']}" if k else "-"
        print(f"{m.name:<28} {where:<22} {k['traces'] if k else '-':>6}  {m.what}")
    print("(traces: generated traces until the first divergence; validation:N when only "
          "trace validation caught it, after N recorded runs per design and bound; "
          "corpus:NAME when only a saved corpus trace did)")
    print(f"\nkilled {killed}/{len(rows)} ({100 * killed // max(len(rows), 1)}%)")
    return 0 if killed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
