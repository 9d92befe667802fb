"""`shift prove` tells a refutation of SHIFT's relation through the model (issue 22): the
explorer's shortest trace of the theorem's design, workload and property, narrated as
`shift replay` narrates it, with Z3's abstract witness under --verbose; a refutation the
model does not reproduce is said plainly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from shift.model.events import save_trace
from shift.proofs import registry
from shift.proofs.core import ProofVerdict, Reproduction, Theorem
from shift.spec.catalog import load_catalog
from shift.vocabulary import from_json

from shift.cli import main
from shift.reproduce import reproduce

REPRODUCED = [t for t in registry.THEOREMS if t.reproduce is not None]


def test_the_trace_theorems_name_their_reproduction() -> None:
    catalog = load_catalog()
    assert {t.name for t in REPRODUCED} == {
        "shift.stale_data_with_reuse", "shift.completion_order_signaled_write",
        "shift.exactly_once", "ablation.no_counter_filter"}
    for t in REPRODUCED:
        r = t.reproduce
        assert r is not None and t.expected == "refuted"
        # the design is expected to break the property (designs.toml says why)
        assert r.property in catalog.design(r.design).violates, t.name


@pytest.mark.parametrize("theorem", REPRODUCED, ids=lambda t: t.name)
def test_the_model_reproduces_each_refutation(theorem: Theorem) -> None:
    assert theorem.reproduce is not None
    m = reproduce(theorem.reproduce)
    assert m.reproduced, m.summary()
    assert m.events[0].name == "Init" and m.events[0].args == (theorem.reproduce.workload,)
    prop = theorem.reproduce.property
    assert f"{prop} (step {len(m.events)})" in m.violates
    assert any(line.strip().startswith(f"!! {prop} violated: ") for line in m.lines)


def _between(lines: list[str], start: int, stop: str) -> list[str]:
    return lines[start:next(k for k in range(start, len(lines)) if lines[k] == stop)]


def test_prove_narrates_as_replay_does(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out_json = tmp_path / "prove.json"
    assert main(["prove", "--theorem", "shift.exactly_once", "--verbose", "--quiet",
                 "--json", str(out_json)]) == 0
    prove = capsys.readouterr().out.splitlines()
    head = next(k for k, line in enumerate(prove)
                if line.startswith("  the model's reproduction of Z3's witness (Shift, "
                                   "workload 1, bound small): ExactlyOnceExecution"))
    told = _between(prove, head + 1, "  violates: ExactlyOnceExecution (step 14)")
    # Z3's steps follow, labelled as the abstract witness
    rest = prove[head + len(told) + 2:]
    assert rest[0].startswith("  abstract witness") and rest[1].startswith("    program ")

    model = json.loads(out_json.read_text())["results"][0]["model"]
    assert model["reproduced"] and model["design"] == "Shift" and model["workload"] == 1
    assert model["narration"] == told
    events = [from_json(e) for e in model["events"]]  # the trace files' syntax
    trace = save_trace(tmp_path / "eo.trace.jsonl", events)
    assert main(["replay", str(trace), "--design", "Shift"]) == 0
    replay = capsys.readouterr().out.splitlines()
    assert replay[0].endswith("events on Shift at bound small")
    replayed = _between(replay, 1, "")
    assert told == replayed  # line by line
    assert told[0] == "   1. Init(1)"
    assert told[-1].strip().startswith("!! ExactlyOnceExecution violated: A's WR 1 (WRITE) "
                                       "took effect at B 2 times")
    assert f"  {len(events):>2}. Deliver(2, AtoB): " in "\n".join(told)


def test_a_refutation_the_model_does_not_break_is_said_plainly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # ShiftPrefix keeps NotificationIntegrity (designs.toml): no trace of the model breaks it
    fake = Theorem("fake.trace", "g", "A refutation the model has no trace of, made up.",
                   "exists trace: not NotificationIntegrity",
                   lambda: ProofVerdict("refuted", "violated in 3 steps", ["1. Z3's step"]),
                   expected="refuted",
                   reproduce=Reproduction("ShiftPrefix", 1, "NotificationIntegrity"))
    monkeypatch.setattr("shift.commands.prove.THEOREMS", [fake])
    out_json = tmp_path / "out.json"
    assert main(["prove", "--quiet", "--json", str(out_json)]) == 0  # a finding, not an error
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "fake.trace:" in x)
    assert re.fullmatch(
        r"fake\.trace: not reproduced by the model: no trace of ShiftPrefix, workload 1, "
        r"bound small violates NotificationIntegrity \(\d+ states explored\); Z3's witness "
        r"is a trace of the abstraction only", line.strip()), line
    model = json.loads(out_json.read_text())["results"][0]["model"]
    assert model["reproduced"] is False and model["events"] == [] and model["narration"] == []
    assert main(["prove", "--quiet", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "  not reproduced by the model: " in out and "    1. Z3's step" in out


def test_theorems_that_are_not_traces_keep_their_output(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prove", "--theorem", "trilemma.t1_t2", "--quiet", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "reproduc" not in out and "abstract witness" not in out
