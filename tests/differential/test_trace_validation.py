"""Trace validation (shift.validation): runs of the C core chosen by a seeded random
scheduler, recorded, and every recorded step checked against the model."""

from __future__ import annotations

import dataclasses
from collections import Counter

import pytest
from diff_helpers import CORPUS, large_with_four
from shift.model.events import load_trace
from shift.model.next import Model
from shift.model.observe import observe
from shift.model.state import APP_ERRORS
from shift.vocabulary import Event

from shift.differential import DESIGNS
from shift.validation import Recording, Step, describe, record, validate

RUNS = 200  # recorded runs per design and bound
RUNS_FAITHFUL = 500  # with all four of hardware's behaviours (issue 17)
BOUNDS = ("default", "large", "twoway")  # default and twoway: B posts WRs too


@pytest.mark.parametrize("bound", BOUNDS)
@pytest.mark.parametrize("design", DESIGNS)
def test_every_recorded_step_is_a_step_of_the_model(design: str, bound: str) -> None:
    recorded_runs_are_steps_of_the_model(Model.load(design, bound), RUNS)


@pytest.mark.parametrize("design", DESIGNS)
def test_every_recorded_step_is_a_step_of_the_model_with_all_of_hardwares_behaviours(
        design: str) -> None:
    """At faithful (default's faults) and at large (two faults on either path) with
    faithful's four settings: completions written after their ACK, RNR NAKs retried for
    ever, NICs that die silently and raise an event the layer reads, implicit NAKs."""
    recorded_runs_are_steps_of_the_model(Model.load(design, "faithful"), RUNS_FAITHFUL)
    model, kept = large_with_four(design)
    recorded_runs_are_steps_of_the_model(model, RUNS_FAITHFUL, kept)


def recorded_runs_are_steps_of_the_model(model: Model, runs: int,
                                         kept: tuple[str, ...] | None = None) -> None:
    """runs recordings of the core, each a run of the model step by step, and together
    reaching what matters: faults with traffic, timeouts, failovers, both hosts' posts
    where the bound has two-way workloads, and the bound's hardware behaviours."""
    design = model.design.name
    seen: Counter[str] = Counter()
    posts: Counter[tuple[str, str]] = Counter()  # (event, host) of the applications' posts
    modes: set[str] = set()
    for seed in range(runs):
        rec = record(model, model.bound.workloads[seed % len(model.bound.workloads)], seed)
        result = validate(model, rec, kept)
        assert result.ok, f"seed {seed}\n{describe(rec)}\n{result.failure}"
        seen.update(s.event.name for s in rec.steps[:result.checked])
        posts.update((s.event.name, s.event.args[0]) for s in rec.steps[:result.checked]
                     if s.event.name.startswith("Post"))
        modes |= {v for s in rec.steps for f in ("sendMode", "recvMode")
                  for v in s.observation[f].values()}
    # The scheduler reaches what matters: faults with traffic, timeouts, failovers.
    assert seen["NicFail"] > 0 and seen["LinkDown"] > 0 and seen["Drop"] > 0, seen
    assert seen["Timeout"] > 0 and seen["Deliver"] > 100, seen
    # faithful: completions written after their ACK, NICs that die silently
    if model.bound.ack_before_cqe:
        assert seen["WriteCqe"] > 0, seen
    if model.bound.device_fatal:
        assert seen["FatalEvent"] > 0, seen
    if design != "NoFailover":
        assert {"Fallback", "Moving"} <= modes, modes
        # a lost counter or answer, resent by the asker's handshake timer
        assert seen["HandshakeTimeout"] > 0, seen
    # Both hosts are peers where the bound has two-way workloads.
    if any(model.bound.bprogram(k) for k in model.bound.workloads):
        assert posts[("PostSend", "B")] > 0 and posts[("PostRecv", "A")] > 0, posts


@pytest.mark.parametrize("design", DESIGNS)
def test_every_recorded_step_is_a_step_of_the_model_with_application_errors(design: str,
                                                                            ) -> None:
    """At bound apperr (a WR with a bad lkey or rkey, on A or on B): the core's own runs
    after an application error are steps of the model too (F6d closed the difference)."""
    model = Model.load(design, "apperr")
    own: Counter[str] = Counter()  # the application errors the applications saw
    for seed in range(RUNS):
        rec = record(model, model.bound.workloads[seed % len(model.bound.workloads)], seed)
        result = validate(model, rec)
        assert result.ok, f"seed {seed}\n{describe(rec)}\n{result.failure}"
        last = rec.steps[result.checked - 1].observation["sndSeen"]
        own.update(c["status"] for seen in last.values() for c in seen
                   if c["status"] in APP_ERRORS)
    assert own, own  # an application error reached an application
    if design != "NoFailover":  # (its runs have few deliveries: a fault ends most early)
        assert set(own) == APP_ERRORS, own  # both kinds of bad key did


# One worker builds the module's fixture once (pytest-xdist, --dist loadgroup).
pytestmark = pytest.mark.xdist_group("trace-validation-shift-run")


@pytest.fixture(scope="module")
def shift_run() -> tuple[Model, Recording]:
    model = Model.load("Shift", "default")
    for seed in range(RUNS):
        rec = record(model, 1, seed)
        if any(s.observation["sendMode"]["A"] == "Fallback" for s in rec.steps):
            return model, rec
    raise AssertionError("no recorded run of SHIFT failed over")


def test_a_wrong_observation_is_named_with_its_step(shift_run: tuple[Model, Recording]) -> None:
    model, rec = shift_run
    k = next(i for i, s in enumerate(rec.steps) if s.observation["sendMode"]["A"] == "Fallback")
    steps = list(rec.steps)
    obs = {**steps[k].observation, "sendMode": {"A": "Default", "B": "Default"}}
    steps[k] = Step(steps[k].event, obs, steps[k].memory)
    result = validate(model, dataclasses.replace(rec, steps=steps))
    assert not result.ok and result.checked == k + 1
    assert result.failure.startswith(f"step {k + 1}, {steps[k].event}: the observations differ")
    assert "sendMode.A: model 'Fallback', impl 'Default'" in result.failure


def test_a_step_the_model_does_not_allow_is_named(shift_run: tuple[Model, Recording]) -> None:
    model, rec = shift_run
    # A delivery on the backup path before anything was sent there.
    steps = [Step(Event("Deliver", (2, "AtoB")), {}, ()), *rec.steps]
    result = validate(model, dataclasses.replace(rec, steps=steps))
    assert result.failure == "step 1, Deliver(2, AtoB): not a step the model allows here"
    # The recording's own steps, one dropped: the model parts from the implementation.
    k = next(i for i, s in enumerate(rec.steps) if s.event.name == "PostSend")
    result = validate(model, dataclasses.replace(rec, steps=rec.steps[:k] + rec.steps[k + 1:]))
    assert not result.ok and result.failure.startswith("step ")


def test_a_recording_is_reproducible_from_its_seed() -> None:
    model = Model.load("Shift", "large")
    a, b = record(model, 3, 7), record(model, 3, 7)
    assert [s.event for s in a.steps] == [s.event for s in b.steps]
    assert [s.observation for s in a.steps] == [s.observation for s in b.steps]
    assert record(model, 3, 8).events != a.events


def test_where_the_core_fixes_a_finding_the_recording_must_keep_it() -> None:
    """F4 (IMPL_FIXES): where the model breaks CompletionIntegrity, a recording that
    breaks it too is rejected; one that keeps it ends the check there, as a gap."""
    model = Model.load("Shift", "large")
    events = load_trace(CORPUS / "Shift/large/f4-completion-order.jsonl")
    states = model.run(events)
    steps = [Step(ev, observe(s).as_dict(), s.mem)
             for ev, s in zip(events[1:], states[1:], strict=True)]
    rec = Recording("Shift", "large", events[0].args[0], steps)
    result = validate(model, rec)
    assert result.checked == len(steps) and result.failure == (
        f"step {len(steps)}, {events[-1]}: the implementation's observation breaks "
        "CompletionIntegrity")
    last = steps[-1].observation
    kept = {**last, "sndSeen": {**last["sndSeen"],
                                "A": sorted(last["sndSeen"]["A"], key=lambda e: e["wr"])}}
    result = validate(model, dataclasses.replace(
        rec, steps=[*steps[:-1], Step(events[-1], kept, steps[-1].memory)]))
    assert result.ok and "keeps on purpose" in result.gap
