"""The differential suite: Hypothesis generates event traces from the model's enabled
events (faults biased to land while WRs are in flight), each runs through the model and
the C implementation side by side, and after every step the observable projections must
be equal and the design's kept invariants hold on the implementation's observation,
with the layer reading the WRs to replay back from the send queue (direct) and with it
keeping its own copy of each (copy).
A divergence shrinks to a minimal trace, saved under tests/corpus/ (then replayed by
test_corpus.py for ever)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

import pytest
from diff_helpers import explain, keep, large_with_four
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shift.model.next import Model
from shift.model.state import APP_ERRORS, HOSTS, State, silent
from shift.vocabulary import Event

from shift.differential import DESIGNS, Run, gap, run_trace, trace_from_choices

MAX_EVENTS = 60
EXAMPLES = 500  # per design and bound
EXAMPLES_APPERR = 150  # per design at apperr, where half the workloads end in an app error
EXAMPLES_ACKFIRST = 400  # per design at ackfirst
EXAMPLES_RNR = 200  # per design at rnr
EXAMPLES_FATAL = 200  # per design and posting mode at fatal
EXAMPLES_IMPLICIT = 200  # per design at implicit

# One number per event (plus one for the workload); see trace_from_choices.
choices = st.lists(st.integers(0, (1 << 16) - 1), min_size=12, max_size=MAX_EVENTS + 1)


@pytest.mark.parametrize("posts", ["direct", "copy"])
@pytest.mark.parametrize("bound", ["default", "large", "twoway"])
@pytest.mark.parametrize("design", DESIGNS)
def test_model_and_implementation_agree(design: str, bound: str, posts: str) -> None:
    model = Model.load(design, bound)

    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(choices)
    def agree(picks: list[int]) -> None:
        events = trace_from_choices(model, picks)
        assert len(events) <= MAX_EVENTS + 1
        run = run_trace(model, events, copy_posts=posts == "copy")
        if run.divergence is not None:
            raise AssertionError(explain(model, run, keep(model, run.events)))

    agree()


@pytest.mark.parametrize("design", DESIGNS)
def test_model_and_implementation_agree_after_application_errors(design: str) -> None:
    """At bound apperr a WR carries a bad lkey or rkey: after the error each side must
    act as the other (no failover of its own, none joined for the peer: AppOwned), and
    the peer, told, fails its QP pair too (PeerAppError, F6b)."""
    model = Model.load(design, "apperr")
    app_errors = told = 0

    @settings(max_examples=EXAMPLES_APPERR, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(choices)
    def agree(picks: list[int]) -> None:
        nonlocal app_errors, told
        events = trace_from_choices(model, picks)
        run = run_trace(model, events)
        if run.divergence is not None:
            raise AssertionError(explain(model, run, keep(model, run.events)))
        last = run.states[-1]
        app_errors += any(c.status in APP_ERRORS for seen in last.sndSeen for c in seen)
        told += any(last.peerFailed)

    agree()
    assert app_errors > EXAMPLES_APPERR // 10, app_errors  # the errors were reached
    if model.design.failover:  # and the peer took the word (NoFailover has no layer)
        assert told > EXAMPLES_APPERR // 10, told



@pytest.mark.parametrize("design", DESIGNS)
def test_model_and_implementation_agree_when_the_ack_comes_first(design: str) -> None:
    """At bound ackfirst a receive completion reaches host memory after its ACK left
    (AckBeforeCqe: WriteCqe), and a NIC that dies first loses it: simnic with
    ack_before_cqe must make, write and lose the same completions as the model. The
    kept invariants are checked on the implementation too; NotificationIntegrity is not
    kept by a failover design here (F7), so a run that shows F7 agrees rather than fails."""
    model = Model.load(design, "ackfirst")
    waited = 0

    @settings(max_examples=EXAMPLES_ACKFIRST, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(choices)
    def agree(picks: list[int]) -> None:
        nonlocal waited
        events = trace_from_choices(model, picks)
        run = run_trace(model, events)
        if run.divergence is not None:
            raise AssertionError(explain(model, run, keep(model, run.events)))
        waited += any(any(q) for s in run.states for h in s.unwritten for q in h)

    agree()
    assert waited > EXAMPLES_ACKFIRST // 4, waited  # completions waited to be written


def agree_on_generated_traces(model: Model, examples: int, copy_posts: bool = False,
                              also: Callable[[Run], None] | None = None,
                              kept: tuple[str, ...] | None = None) -> None:
    """Hypothesis traces of the model run on both sides; a divergence fails, shrunk and
    explained; `also` checks each agreeing run further; `kept`: the observable invariants
    demanded of the implementation (default: those the design declares at the bound)."""

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(choices)
    def agree(picks: list[int]) -> None:
        run = run_trace(model, trace_from_choices(model, picks), kept, copy_posts=copy_posts)
        if run.divergence is not None:
            raise AssertionError(explain(model, run, keep(model, run.events)))
        if also is not None:
            also(run)

    agree()


@pytest.mark.parametrize("design", DESIGNS)
def test_model_and_implementation_agree_when_the_receiver_is_not_ready(design: str) -> None:
    """At bound rnr a notification that finds no receive WR is RNR-NAKed and retransmitted
    for ever (RnrNak, RnrRetry = 7): simnic with rnr_nak and rnr_retry = 7 must answer,
    go back and retry as the model does, and the layer's completion timer act the same
    (F8)."""
    agree_on_generated_traces(Model.load(design, "rnr"), EXAMPLES_RNR)


@pytest.mark.parametrize("posts", ["direct", "copy"])
@pytest.mark.parametrize("design", DESIGNS)
def test_model_and_implementation_agree_when_a_dead_nic_is_silent(design: str,
                                                                  posts: str) -> None:
    """At bound fatal a NIC that dies completes nothing (DeviceFatal) until its host's
    layer reads the event (FatalEvent): simnic's silent QPs, and the layer's flushes of
    every WR no completion covers - read back from the send queue in direct mode, from
    its own records with copies - must equal the model's."""
    agree_on_generated_traces(Model.load(design, "fatal"), EXAMPLES_FATAL, posts == "copy")


def test_generated_traces_read_a_silent_nics_death() -> None:
    """The layer reads a silent NIC's death (FatalEvent) with WRs to flush in generated
    traces, and both sides agree through it."""
    read = 0
    for run in seeded_runs(Model.load("Shift", "fatal"), EXAMPLES_FATAL):
        read += any(e.name == "FatalEvent" and len(t.cq[HOSTS.index(e.args[0])][e.args[1] - 1])
                    > len(s.cq[HOSTS.index(e.args[0])][e.args[1] - 1])
                    for e, s, t in zip(run.events[1:], run.states, run.states[1:],
                                       strict=False))
    assert read >= 5, read


def test_generated_traces_kill_the_nic_under_a_qp_already_in_error() -> None:
    """A QP already in ERR (flushed when it got there) whose NIC then dies in fatal error
    falls silent, as simnic's (and mlx5's under user-space verbs) does: the event's flush
    covers only the posts made since. Generated traces at `large` with the four reach
    that death, and both sides agree through it (the spec once kept such a QP flushing
    at once: docs/differential.md)."""
    def kills_a_qp_in_error(e: Event, s: State, t: State) -> bool:
        if e.name != "NicFail":
            return False
        h, i = HOSTS.index(e.args[0]), e.args[1] - 1
        return s.qp[h][i] == "ERR" and silent(t, h, i)

    model, _ = large_with_four("NaiveReplay")
    hits = 0
    for run in seeded_runs(model, EXAMPLES):
        hits += any(kills_a_qp_in_error(e, s, t) for e, s, t in
                    zip(run.events[1:], run.states, run.states[1:], strict=False))
    assert hits >= 3, hits


@pytest.mark.parametrize("design", DESIGNS)
def test_model_and_implementation_agree_with_implicit_naks(design: str) -> None:
    """At bound implicit an ACK past a READ or atomic whose response was lost sends the
    requester back to it at the cost of a retry (ImplicitNak), as simnic does: the runs
    are compared through such an ACK, where the other bounds stop (`gap`)."""
    def through(run: Run) -> None:
        assert run.gap is None or "implicit NAK" not in run.gap, run.gap

    agree_on_generated_traces(Model.load(design, "implicit"), EXAMPLES_IMPLICIT, also=through)


@pytest.mark.parametrize("design", DESIGNS)
def test_model_and_implementation_agree_with_all_of_hardwares_behaviours(design: str) -> None:
    """At bound faithful (AckBeforeCqe, RnrNak for ever, DeviceFatal, ImplicitNak at once,
    with recovery): the invariants a design keeps there are checked on the implementation
    too (Shift and ShiftPrefix keep no NotificationIntegrity there: F7)."""
    agree_on_generated_traces(Model.load(design, "faithful"), EXAMPLES)


@pytest.mark.parametrize("design", DESIGNS)
def test_model_and_implementation_agree_at_large_with_all_of_hardwares_behaviours(
        design: str) -> None:
    """`large` (two faults on either path) with faithful's four settings: no bound of
    designs.toml declares it (TLC and the explorer would need hours: docs/performance.md),
    so the implementation keeps what the design declares at both large and faithful."""
    model, kept = large_with_four(design)
    assert model.bound.ack_before_cqe and model.bound.device_fatal
    agree_on_generated_traces(model, EXAMPLES, kept=kept)


def seeded_runs(model: Model, n: int) -> Iterator[Run]:
    """n generated traces run on both sides, each agreeing. Seeded numbers, as `shift fuzz`
    draws them, so that what a test counts over them is reproducible."""
    rng = random.Random(0)
    for _ in range(n):
        picks = [rng.randrange(1 << 16) for _ in range(MAX_EVENTS + 1)]
        run = run_trace(model, trace_from_choices(model, picks))
        assert run.divergence is None, explain(model, run, keep(model, run.events))
        yield run


def test_generated_traces_meet_rnr_naks() -> None:
    """NaiveReplay's replayed duplicates find no receive WR at rnr: RNR NAKs are among the
    generated traces, and both sides agree through them."""
    naks = sum(any(m.kind == "rnr" for s in run.states for path in s.wire for ch in path
                   for m in ch)
               for run in seeded_runs(Model.load("NaiveReplay", "rnr"), EXAMPLES_RNR))
    assert naks >= 5, naks


def test_generated_traces_reach_a_nic_that_dies_with_completions_unwritten() -> None:
    """The moment F7 needs — a NIC dying between a notification's ACK and the write of
    its receive completion — is among the generated traces (faults are biased to land
    while completions wait: `generator.in_flight`), and both sides agree through it."""
    lost = 0
    for run in seeded_runs(Model.load("Shift", "ackfirst"), EXAMPLES_ACKFIRST):
        lost += any(any(q) and not t.nic[h][p]
                    for s, t in zip(run.states, run.states[1:], strict=False)
                    for h in (0, 1) for p, q in enumerate(s.unwritten[h]))
    assert lost >= 5, lost


def implicit_nak(s: State, ev: Event) -> bool:
    """Is ev, from s, the delivery of an ACK past a READ or atomic whose response was lost
    (the implicit NAK)? Where the bound lacks ImplicitNak, that is the event `gap` stops
    at; asked as if it did."""
    why = gap(s, ev, implicit_nak=False)
    return why is not None and "implicit NAK" in why


def test_generated_traces_reach_implicit_naks() -> None:
    """At implicit the generator picks first the loss an implicit NAK answers (a READ's or
    atomic's response dropped after a later request left: `generator.loses_a_response`);
    as one fault among all it was reached in 2 of 1,000 traces. Both sides agree through
    it."""
    naks = sum(any(implicit_nak(s, ev) for s, ev in zip(run.states, run.events[1:],
                                                        strict=False))
               for run in seeded_runs(Model.load("NoFailover", "implicit"), EXAMPLES_IMPLICIT))
    assert naks >= 2, naks
