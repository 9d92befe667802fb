"""Why an event cannot happen (`shift.model.explain.why_not`): None exactly when the
model's action has a successor, checked for every event of the vocabulary in every state
of whole graphs at `small` and `twoway` (both hosts send) and in thousands of states of
random runs at `default` and `large`; every reason is a sentence, every guard's reason
is reached; and `shift replay` says it on one line when a trace's event is not enabled."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
from modelkit import model, reach
from shift.model import apps, transport
from shift.model.config import Constants, DesignRecord
from shift.model.explain import WHY_NOT, why_not
from shift.model.explore import explore
from shift.model.next import EVENT_FUNCTIONS, Model, NotEnabled
from shift.model.next import step as model_step
from shift.model.state import REGIONS, State, num_notes, set_at
from shift.vocabulary import DIRECTIONS, HOSTS, PATHS, VOCABULARY, Event, make

# the random runs (cached per process) back two tests (pytest-xdist, --dist loadgroup)
pytestmark = pytest.mark.xdist_group("explain-runs")

# The designs whose whole graph at `small` is checked: SHIFT's layer (fail-back, refusal,
# the counter filter), a layer with no fail-back and no refusal, and no layer at all.
GRAPH_DESIGNS = ("Shift", "NaiveReplay", "NoFailover")
# The runs at `default` (recovery: fail-back, retransmission) and `large` (two faults on
# either path): every design, so that each replay filter and fail-back setting is seen.
RUN_DESIGNS = ("Shift", "ShiftPrefix", "NaiveReplay", "NoFailover", "ReceiverQuery",
               "Staging", "NcclResiliency")
RUN_STATES = 3000  # distinct states sampled per design and bound (fewer if it has fewer)
RUN_LENGTH = 60
RUNS = 20000  # random runs at most per design and bound


@cache
def vocabulary_events(n_wrs: int, n_notes: int) -> tuple[Event, ...]:
    """Every event of the vocabulary with its arguments in range, for a program of n_wrs
    WRs and n_notes notifications: both hosts, both paths, both directions, WR ids
    0..n_wrs + 1, receive WR ids 0..n_notes + 1 (one past the end, and 0), stores into
    every region and none."""
    evs = [make("PostSend", h, w) for h in HOSTS for w in range(n_wrs + 2)]
    evs += [make("PostRecv", h, r) for h in HOSTS for r in range(n_notes + 2)]
    evs += [make(name, h) for name in ("PollCq", "Progress", "HandshakeTimeout",
                                       "CompletionTimeout") for h in HOSTS]
    evs += [make(name, h, p)
            for name in ("Transmit", "Timeout", "WriteCqe", "FatalEvent", "NicFail", "NicRecover")
            for h in HOSTS for p in PATHS]
    evs += [make(name, p, d) for name in ("Deliver", "Drop") for p in PATHS for d in DIRECTIONS]
    evs += [make(name, p) for name in ("LinkDown", "LinkUp") for p in PATHS]
    # stores into each region of the values a workload writes, and one it does not
    evs += [make("AppWrite", h, r, v) for h in HOSTS for r in (0, *REGIONS) for v in (0, 1, 7)]
    assert {e.name for e in evs} == set(VOCABULARY) - {"Init"}
    return tuple(evs)


def events_of(s: State) -> tuple[Event, ...]:
    return vocabulary_events(max(map(len, s.program)), max(map(num_notes, s.program)))


@dataclass
class Checked:
    """What checking why_not against the model's actions over many states found."""

    states: int = 0
    pairs: int = 0  # (state, event) pairs checked
    mismatches: list[str] = field(default_factory=list)
    not_sentences: list[str] = field(default_factory=list)
    reasons: set[str] = field(default_factory=set)

    def check(self, m: Model, s: State, where: Callable[[], str]) -> None:
        """where() names the state in a failure: its design, bound and how it is reached."""
        self.states += 1
        d, b = m.design, m.bound
        for ev in events_of(s):
            self.pairs += 1
            enabled = model_step(s, ev, d, b) is not None
            why = why_not(m, s, ev)
            if (why is None) != enabled:
                self.mismatches.append(f"{where()}: {ev} is {'' if enabled else 'not '}"
                                       f"enabled, why_not says {why!r}")
            elif why is not None:
                self.reasons.add(why)
                if not is_sentence(why):
                    self.not_sentences.append(f"{where()}: {ev}: {why!r}")


def is_sentence(why: object) -> bool:
    """One line of words: not empty, no stray whitespace, no Python value leaking in."""
    return (isinstance(why, str) and len(why) >= 20 and why == why.strip()
            and "\n" not in why and "None" not in why and "frozenset" not in why
            and why[0].isalpha() and not why.endswith("."))


def check_graph(m: Model) -> Checked:
    """Every state of the model's graph, every event of the vocabulary."""
    g = explore(m, [], keep_edges=False).graph
    out = Checked()
    where = f"{m.design.name} {m.bound.name}, state"
    for v, s in enumerate(g.states):
        out.check(m, s, lambda v=v: f"{where} {v}: {g.events_to(v)}")
    return out


@cache
def checked_graph(design: str, bound: str = "small") -> Checked:
    return check_graph(model(design, bound))


@cache
def checked_runs(design: str, bound: str) -> Checked:
    """RUN_STATES distinct states along seeded random runs of the design at the bound."""
    m = model(design, bound)
    rng = random.Random(f"{design}/{bound}")
    inits = m.initial_states()
    seen: set[State] = set()
    out = Checked()
    for _ in range(RUNS):
        if len(seen) >= RUN_STATES:
            break
        ev0, s = rng.choice(inits)
        trace = [ev0]
        for _ in range(RUN_LENGTH):
            if s not in seen:
                seen.add(s)
                out.check(m, s, lambda t=tuple(trace): f"{design} {bound}, after {list(t)}")
            succ = m.successors(s)
            if not succ:
                break
            t = rng.choice(succ)
            trace.append(t.event)
            s = t.target
    return out


def assert_agrees(c: Checked) -> None:
    assert not c.mismatches, f"{len(c.mismatches)} disagreements, e.g.\n" + \
        "\n".join(c.mismatches[:5])
    assert not c.not_sentences, "\n".join(c.not_sentences[:5])


def test_there_is_a_reason_function_per_event_of_the_vocabulary() -> None:
    assert set(WHY_NOT) == set(EVENT_FUNCTIONS) == set(VOCABULARY) - {"Init"}


@pytest.mark.parametrize("design", GRAPH_DESIGNS)
def test_why_not_is_none_exactly_when_the_event_is_enabled_in_every_state_at_small(
        design: str) -> None:
    assert_agrees(checked_graph(design))


@pytest.mark.parametrize("bound", ["default", "large", "ackfirst", "rnr", "fatal"])
def test_why_not_is_none_exactly_when_the_event_is_enabled_along_random_runs(
        bound: str) -> None:
    for design in RUN_DESIGNS:
        c = checked_runs(design, bound)
        # ackfirst is small with the ACK first: NoFailover's runs end early there (13,023
        # states in all), and 20,000 of them find some 2,800
        assert c.states >= (RUN_STATES if bound != "ackfirst" else 2500), design
        assert_agrees(c)


# At twoway (ping-pong, one workload) the graphs are small (2,330 to 28,129 states) and
# random runs soon repeat known states: every state of every design's graph instead.
@pytest.mark.parametrize("design", RUN_DESIGNS)
def test_why_not_is_none_exactly_when_the_event_is_enabled_in_every_state_at_twoway(
        design: str) -> None:
    c = checked_graph(design, "twoway")
    assert c.states > 2000
    assert_agrees(c)


def loose_timeout(s: State, d: DesignRecord, b: Constants, host: str, p: int) -> State | None:
    """Timeout without its quiet-wire guard: fires with packets in flight."""
    t = transport.timeout(s._replace(wire=set_at(s.wire, p - 1, ((), ()))), d, b, host, p)
    return None if t is None else t._replace(wire=s.wire)


@pytest.mark.parametrize("mutant", ["Timeout without the quiet wire",
                                    "PostSend without CanPost"])
def test_an_action_changed_without_its_reason_is_caught(
        mutant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if mutant.startswith("Timeout"):
        monkeypatch.setitem(EVENT_FUNCTIONS, "Timeout", loose_timeout)
    else:
        monkeypatch.setattr(apps, "can_post", lambda s, h, w: True)
    c = check_graph(model("NoFailover", "small"))
    name = mutant.split()[0]
    # both hosts post sends at small (the ping-pong), so either host's event may show it
    assert c.mismatches and all((f"{name}(A, " in m or f"{name}(B, " in m)
                                and "is enabled, why_not says" in m
                                for m in c.mismatches), c.mismatches[:3]
    assert c.mismatches[0].startswith("NoFailover small, state ")


# The reason of every guard that can fail, each reached by some state above: a guard
# whose reason is never given is a branch no test reaches (or one the actions lost).
EVERY_GUARD = [
    # PostSend: program order, CanPost's three conjuncts
    "B's program is empty in this workload: B posts no WR", "A's WRs are numbered from 1",
    "A's program has only 2 WRs", "A's program has only 4 WRs", "A already posted WR",
    "is not the next WR of A's program",
    "is notification 1, which A posts only once B has posted receive WR 1",
    "A waits for B's application to take notification 1 before reusing its buffer",
    "WR 1 is a reply: B posts it once it took 1 notification of A's (it took 0)",
    # PostRecv
    "B's program has no notification (SEND, WRITE_WITH_IMM), so A posts no receive WR",
    "B's receive WRs are numbered from 1",
    "A's program has only 1 notification, so B posts only 1 receive WR (",
    "A's program has only 2 notifications", "B already posted receive WR",
    "is not B's next",
    # PollCq
    "A's completion queue is empty", "B's completion queue is empty",
    "the CQ of the default QP (path 1), which A's layer polls (send side Default, receive "
    "side Default)",
    "the CQ of the default QP (path 1), which A's layer polls (send side Fallback",
    "the CQ of the default QP (path 1), which B's layer polls (send side Default, receive "
    "side Fallback)",
    "both of its sides are off the default path",
    # Transmit
    "A's QP on path 1 is in the error state (ERR): it sends",
    "A's QP on path 2 is in the error state (ERR): it sends", "A's send queue on path 1 is empty",
    "A's send queue on path 2 is empty", "B's send queue on path 1 is empty",
    "nothing to send on path 1", "nothing to send on path 2",
    # ("the fence holds the WR": test_a_wr_held_behind_the_fence_is_named, a directed run)
    # Deliver, Drop
    "nothing in flight to deliver", "the bound excludes path 2 from faults and drops",
    "MaxDrops reached", "nothing to drop",
    # HandshakeTimeout
    "awaits no answer to a counter it sent first", "took A's counter and is about to answer",
    "took B's counter and is about to answer", "resend could not leave",
    "fires only on a quiet backup path",
    # Timeout
    "A's QP on path 1 is in the error state (ERR): its retransmission timer is off",
    "nothing unacknowledged on path 1", "nothing unacknowledged on path 2",
    "fires only on a quiet wire",
    # faults
    "the bound excludes path 2 from faults (FaultPaths = {1})",
    "the bound excludes path 2 from faults (FaultPaths = {1}), and NIC 2 of A is on it",
    "the bound allows MaxFaults = 1 and one fault happened",
    "the bound allows MaxFaults = 2 and 2 faults happened", "the link of path 1 is already down",
    "the link of path 2 is already down", "NIC 1 of A has already failed",
    "NIC 1 of B has already failed", "NIC 2 of B has already failed",
    "the bound has no recovery (Recover = FALSE)", "the link of path 1 is up",
    "NIC 2 of A is up: it has not failed",
    # Progress
    "NoFailover has no failover layer",
    "no step of A's layer is enabled while a side of it is on the default path",
    "no step of B's layer is enabled while a side of it is on the default path",
    "the replay waits for B's counter", "the replay waits for A's counter",
    "NaiveReplay has no fail-back (failBack = FALSE)",
    "failing back needs path 1 healthy again, and the bound has no recovery",
    "and waits for its NIC on path 1 to come back to fail back",
    "waits for B's answer to its request to reconnect",
    "A is in WaitSignaled", "A is in WaitDrained: the fence",
    "A's send side is in Error, a terminal state",
]


def test_every_guard_s_reason_is_given_in_some_state() -> None:
    seen: set[str] = set()
    for design in GRAPH_DESIGNS:
        seen |= checked_graph(design).reasons
    for design in RUN_DESIGNS:
        seen |= checked_graph(design, "twoway").reasons
        for bound in ("default", "large"):
            seen |= checked_runs(design, bound).reasons
    missing = [g for g in EVERY_GUARD if not any(g in why for why in seen)]
    assert not missing, missing


# ------------------------------------------------- the first failing guard ----

SHIFT = model("Shift")


def test_the_first_failing_guard_is_named() -> None:
    s = reach(SHIFT, 1, ("LinkDown", 1))
    # B posting a WR that does not exist: B has no WR at all in workload 1.
    assert why_not(SHIFT, s, make("PostSend", "B", 7)).startswith("B's program is empty")
    # Path 2 at small: the path may not fail at all, before "one fault happened".
    assert "FaultPaths = {1}" in why_not(SHIFT, s, make("LinkDown", 2))
    assert "MaxFaults = 1" in why_not(SHIFT, s, make("NicFail", "B", 1))
    assert why_not(SHIFT, s, make("LinkUp", 1)) == "the bound has no recovery (Recover = FALSE)"
    assert why_not(SHIFT, s, make("PostSend", "A", 1)) is None


def test_a_note_waits_for_its_receive_wr_and_a_reused_buffer_for_the_note_before() -> None:
    s = reach(SHIFT, 4, ("PostSend", "A", 1))
    assert "B has posted receive WR 1 (B posted 0)" in why_not(SHIFT, s, make("PostSend", "A", 2))
    s = reach(SHIFT, 4, ("PostSend", "A", 1), ("PostRecv", "B", 1), ("PostSend", "A", 2))
    why = why_not(SHIFT, s, make("PostSend", "A", 3))
    assert why.startswith("NCCL's flow control (CanPost): A waits for B's application to "
                          "take notification 1 before reusing its buffer"), why


def test_a_wr_held_behind_the_fence_is_named() -> None:
    # The sampled runs above reach it only by chance: a failover, a fail-back, the fence
    # posted on the backup QP and the next WR held on the default QP behind it.
    m = model("Shift", "default")
    s = reach(m, 4, ("PostSend", "A", 1), ("PostRecv", "B", 1), ("NicFail", "A", 1),
              ("PollCq", "A"), ("Progress", "A"), ("Deliver", 2, "AtoB"), ("Progress", "B"),
              ("Progress", "B"), ("Deliver", 2, "BtoA"), ("Progress", "A"),
              ("NicRecover", "A", 1), ("Progress", "A"), ("Deliver", 2, "AtoB"),
              ("Deliver", 2, "BtoA"), ("PostSend", "A", 2),
              ("Transmit", "A", 2), ("Transmit", "A", 2), ("Deliver", 2, "AtoB"),
              ("Deliver", 2, "AtoB"), ("PollCq", "B"), ("PostSend", "A", 3))
    assert s.sendMode[0] == "WaitDrained" and s.sq[0] == ((3,), (1, 2))
    assert why_not(m, s, make("Transmit", "A", 1)).startswith(
        "the fence holds the WR: A is in WaitDrained and WR 3 is after the fence (WR 2, "
        "on path 2)")


def test_progress_of_a_host_with_nothing_to_do_says_why() -> None:
    s = reach(SHIFT, 1)
    assert "while a side of it is on the default path" in why_not(SHIFT, s,
                                                                   make("Progress", "A"))
    assert "has no failover layer" in why_not(model("NoFailover"), s, make("Progress", "A"))


def test_not_enabled_keeps_what_is_enabled_and_adds_why() -> None:
    with pytest.raises(NotEnabled) as err:
        SHIFT.run([make("Init", 1), make("PollCq", "A")])
    assert str(err.value).startswith("event 2, PollCq(A), is not enabled (enabled: "
                                      "PostSend(A, 1), PostRecv(B, 1), ")
    assert str(err.value).endswith("): A's completion queue is empty: nothing on the CQ of "
                                   "the default QP (path 1), which A's layer polls (send side "
                                   "Default, receive side Default), and no completion held "
                                   "back by the layer")


def test_a_replayed_host_cannot_see_the_link_and_waits_for_the_peer_s_answer() -> None:
    """A host sees its own NIC, not the link: with link 1 down it reconnects all the same
    and then waits for B's answer, which its handshake timer asks for again."""
    m = model("Shift", "default")
    s = reach(m, 1, ("PostSend", "A", 1), ("PostRecv", "B", 1), ("PostSend", "A", 2),
              ("Transmit", "A", 1), ("LinkDown", 1), ("Timeout", "A", 1),
              ("Transmit", "A", 1), ("Timeout", "A", 1), ("PollCq", "A"), ("Progress", "A"),
              ("Deliver", 2, "AtoB"), ("Progress", "B"), ("Progress", "B"),
              ("Deliver", 2, "BtoA"), ("Progress", "A"))
    assert s.sendMode == ("Fallback", "Fallback") and s.replayed[0] and not s.link[0]
    assert why_not(m, s, make("Progress", "A")) is None  # Reconnect
    s = m.step(s, make("Progress", "A"))
    assert s.reconnecting[0] == 1 and s.incarnation[0] == 1
    assert why_not(m, s, make("Progress", "A")) == (
        "A replayed its outstanding WRs on the backup path; it reset its default QP into "
        "incarnation 1 and waits for B's answer to its request to reconnect (its handshake "
        "timer asks again)")


def test_a_replayed_host_waits_for_its_own_nic_to_fail_back() -> None:
    m = model("Shift", "default")
    s = reach(m, 1, ("PostSend", "A", 1), ("PostRecv", "B", 1), ("NicFail", "A", 1),
              ("PollCq", "A"), ("Progress", "A"), ("Deliver", 2, "AtoB"), ("Progress", "B"),
              ("Progress", "B"), ("Deliver", 2, "BtoA"), ("Progress", "A"))
    assert s.sendMode[0] == "Fallback" and s.replayed[0] and not s.nic[0][0]
    assert why_not(m, s, make("Progress", "A")) == (
        "A replayed its outstanding WRs on the backup path and waits for its NIC on path 1 "
        "to come back to fail back")
    assert why_not(m, s, make("NicRecover", "A", 1)) is None


# ----------------------------------------------------------- shift replay ----

INIT = '{"event": "Init", "workload": 1}'
POST = '{"event": "PostSend", "host": "A", "wr": 1}'

# (trace after Init, bound, what stderr's one line says: the event, what is enabled, why)
NOT_ENABLED = {
    "B posts a send": (
        ['{"event": "PostSend", "host": "B", "wr": 1}'], "small",
        "event 2, PostSend(B, 1), is not enabled (enabled: PostSend(A, 1), PostRecv(B, 1), "
        "LinkDown(1), NicFail(A, 1), NicFail(B, 1)): B's program is empty in this workload: "
        "B posts no WR"),
    "a fault on path 2 at small": (
        ['{"event": "LinkDown", "path": 2}'], "small",
        "event 2, LinkDown(2), is not enabled (enabled: PostSend(A, 1), PostRecv(B, 1), "
        "LinkDown(1), NicFail(A, 1), NicFail(B, 1)): the bound excludes path 2 from faults "
        "(FaultPaths = {1})"),
    "a second fault beyond MaxFaults": (
        ['{"event": "LinkDown", "path": 1}', '{"event": "NicFail", "host": "B", "nic": 1}'],
        "small",
        "event 3, NicFail(B, 1), is not enabled (enabled: PostSend(A, 1), PostRecv(B, 1)): "
        "the bound allows MaxFaults = 1 and one fault happened already"),
    "a poll of an empty completion queue": (
        [POST, '{"event": "PollCq", "host": "A"}'], "default",
        "event 3, PollCq(A), is not enabled (enabled: PostRecv(B, 1), Transmit(A, 1), "
        "LinkDown(1), NicFail(A, 1), NicFail(B, 1)): A's completion queue is empty: nothing "
        "on the CQ of the default QP (path 1), which A's layer polls (send side Default, "
        "receive side Default), and no completion held back by the layer"),
}


@pytest.mark.parametrize("case", list(NOT_ENABLED))
def test_shift_replay_says_why_an_event_is_not_enabled(tmp_path: Path, case: str) -> None:
    lines, bound, says = NOT_ENABLED[case]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([INIT, *lines]) + "\n")
    proc = subprocess.run([sys.executable, "-m", "shift", "replay", str(path), "--design",
                           "Shift", "--bound", bound], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    err = proc.stderr.strip().splitlines()
    assert err == [f"shift replay: {path}: {says}"], proc.stderr
