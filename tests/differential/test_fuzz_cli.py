"""`shift fuzz`: a campaign's summary and exit status; a divergence is shrunk, saved and
exits 1; bad arguments are one line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from shift.model.events import load_trace
from shift.model.next import Model

from shift import differential as D
from shift.cli import main


def test_a_clean_campaign_exits_0_with_a_summary(tmp_path: Path, capsys) -> None:
    rc = main(["fuzz", "--examples", "40", "--design", "Shift", "--bound", "default",
               "--seed", "3", "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    assert "Shift" in out and "40 traces" in out and "no divergence" in out
    assert "steps/s" in err and "states" in err
    assert not list(tmp_path.rglob("*.jsonl"))


@pytest.mark.parametrize("bound", ["small", "default", "large"])
def test_shift_prefix_campaigns_agree_at_every_bound(bound: str, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["fuzz", "--examples", "100", "--design", "ShiftPrefix", "--bound", bound,
               "--out", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0, out + err
    line = next(ln for ln in out.splitlines() if "ShiftPrefix" in ln)
    assert "100 traces" in line and " 0 divergent" in line and "Fallback" in line
    assert "no divergence" in out and not list(tmp_path.rglob("*.jsonl"))


def test_seconds_and_workers(tmp_path: Path, capsys) -> None:
    rc = main(["fuzz", "--seconds", "2", "--workers", "2", "--design", "NoFailover",
               "--out", str(tmp_path)])
    out, _ = capsys.readouterr()
    assert rc == 0, out
    line = next(ln for ln in out.splitlines() if "NoFailover" in ln)
    assert int(line.split()[1]) >= 20  # traces run


def test_a_divergence_exits_1_with_a_shrunk_saved_trace(tmp_path: Path, capsys,
                                                        monkeypatch) -> None:
    init = D.Bridge.__init__

    def wrong(self, design, retries, program, *rest, **kw):  # type: ignore[no-untyped-def]
        init(self, "NaiveReplay", retries, program, *rest, **kw)

    monkeypatch.setattr(D.Bridge, "__init__", wrong)
    rc = main(["fuzz", "--examples", "40", "--design", "Shift", "--bound", "default",
               "--out", str(tmp_path)])
    out, _ = capsys.readouterr()
    assert rc == 1
    saved = list(tmp_path.rglob("*.jsonl"))
    assert len(saved) == 1 and f"saved: {saved[0]}" in out
    assert saved[0].parent == tmp_path / "Shift" / "default"
    events = load_trace(saved[0])
    model = Model.load("Shift", "default")
    run = D.run_trace(model, events)
    assert run.divergence is not None and len(run.events) == len(events)
    # shrunk: no single event can go
    for k in range(1, len(events)):
        assert not D.diverges(model, events[:k] + events[k + 1:])


@pytest.mark.parametrize(("args", "says"), [
    (["--design", "Staging"], "unknown design 'Staging'"),
    (["--bound", "huge"], "unknown bound 'huge'"),
    (["--examples", "0"], "--examples"),
    (["--workers", "0"], "--workers"),
])
def test_bad_arguments_are_one_line(args: list[str], says: str, capsys) -> None:
    assert main(["fuzz", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]


def test_replay_shows_both_sides_agree_on_a_corpus_trace(capsys) -> None:
    trace = Path(__file__).parent.parent / "corpus/Shift/large/f4-completion-order.jsonl"
    assert main(["fuzz", "--replay", str(trace), "--design", "Shift", "--bound", "large"]) == 0
    out = capsys.readouterr().out
    assert "19. PollCq(A)" in out and "CompletionIntegrity" in out and "agree" in out


def test_replay_of_a_divergent_trace_exits_1(tmp_path: Path, capsys, monkeypatch) -> None:
    init = D.Bridge.__init__

    def wrong(self, design, retries, program, *rest, **kw):  # type: ignore[no-untyped-def]
        init(self, "NaiveReplay", retries, program, *rest, **kw)

    monkeypatch.setattr(D.Bridge, "__init__", wrong)
    trace = Path(__file__).parent.parent / "corpus/Shift/default/mutant-no-counter-filter.jsonl"
    assert main(["fuzz", "--replay", str(trace), "--design", "Shift", "--bound",
                 "default"]) == 1
    out = capsys.readouterr().out
    assert "model" in out and "impl" in out and "step" in out


@pytest.mark.parametrize(("text", "says"), [
    ('{"event": "Init", "workload": 1}\n{"event": "Bogus"}\n', ":2: unknown event 'Bogus'"),
    ('{"event": "Init", "workload": 1}\n{"event": "PollCq", "host": "A"\n', ":2: not JSON"),
    ('{"event": "Init", "workload": 1}\n{"event": "PollCq", "host": "A"}\n',
     "event 2, PollCq(A), is not enabled"),
])
def test_replay_of_a_bad_trace_is_one_line(tmp_path: Path, text: str, says: str,
                                           capsys) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    assert main(["fuzz", "--replay", str(path), "--design", "Shift"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0] and str(path) in err[0]


def test_replay_needs_one_design(capsys) -> None:
    assert main(["fuzz", "--replay", "x.jsonl"]) == 2
    assert "--design" in capsys.readouterr().err


CORPUS = Path(__file__).resolve().parents[1]


def test_shift_replay_impl_shows_where_the_sides_part(capsys, monkeypatch) -> None:
    trace = CORPUS / "corpus" / "Shift" / "large" / "flushed-receive-after-failback.jsonl"
    args = ["replay", str(trace), "--design", "Shift", "--bound", "large", "--impl"]
    assert main(args) == 0
    assert "model and implementation agree" in capsys.readouterr().out
    # An implementation that misreports B's receive counter once it is 1.
    real = D.Bridge.observation

    def wrong(self: D.Bridge) -> dict:
        obs = real(self)
        done = obs["recvDone"]
        return {**obs, "recvDone": {**done, "B": 7}} if done["B"] == 1 else obs
    monkeypatch.setattr(D.Bridge, "observation", wrong)
    assert main(args) == 1
    out = capsys.readouterr().out
    # the sides part where B's application first takes a notification
    states = Model.load("Shift", "large").run(load_trace(trace))
    first = next(i for i, s in enumerate(states) if s.recvDone[1] == 1)  # (0: Init)
    assert f"step {first + 1}: PollCq(B)" in out
    assert "recvDone.B: model 1" in out and "impl  7" in out


def test_shift_replay_impl_refuses_what_it_cannot_run(tmp_path: Path, capsys) -> None:
    # An ITF trace is taken (tests/test_workflow.py runs one); a missing one is named.
    assert main(["replay", str(tmp_path / "t.itf.json"), "--design", "Shift", "--impl"]) == 2
    assert "t.itf.json" in capsys.readouterr().err
    assert main(["replay", str(tmp_path / "t.jsonl"), "--design", "Staging", "--impl"]) == 2
    assert "the C core implements" in capsys.readouterr().err
