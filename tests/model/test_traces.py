"""Event traces as files: JSON Lines that load back to the same events, and a clear
one-line error naming the line for every kind of damage (`shift replay` exits 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from modelkit import DESIGNS, model
from shift.model.events import TraceError, dumps_trace, load_trace, loads_trace, save_trace
from shift.model.explore import explore

GOOD = ['{"event": "Init", "workload": 1}', '{"event": "PostSend", "host": "A", "wr": 1}']


def test_explored_paths_round_trip_through_json_lines(tmp_path: Path) -> None:
    ex = explore(model("Shift"), [], max_states=3000)
    for v in range(0, len(ex.graph.states), 97):
        events = ex.graph.events_to(v)
        path = save_trace(tmp_path / "t.jsonl", events)
        assert load_trace(path) == events
        assert model("Shift").run(events)[-1] == ex.graph.states[v]


@settings(max_examples=60, deadline=None)
@given(design=st.sampled_from(DESIGNS), seed=st.randoms(use_true_random=False))
def test_a_random_run_is_deterministic_and_round_trips(design: str, seed: object) -> None:
    m = model(design)
    events = [m.initial_states()[0][0]]
    s = m.init(events[0])
    for _ in range(40):
        enabled = m.enabled(s)
        if not enabled:
            break
        ev = seed.choice(enabled)  # type: ignore[attr-defined]
        events.append(ev)
        s = m.step(s, ev)
    text = dumps_trace(events)
    assert loads_trace(text) == events
    assert m.run(loads_trace(text))[-1] == s  # same events, same state: deterministic


@pytest.mark.parametrize(("lines", "message"), [
    (GOOD + ['{"event": "Bogus"}'], "t.jsonl:3: unknown event 'Bogus'"),
    (GOOD[:1] + ['{"event": "PostSend", "host": "A", "wr": 1'], "t.jsonl:2: not JSON"),
    (GOOD[:1] + ['{"event": "PostSend", "host": "C", "wr": 1}'],
     't.jsonl:2: host = "C": expected "A" or "B"'),
    (GOOD[:1] + ['{"event": "PostSend", "host": "A"}'], "t.jsonl:2: PostSend"),
    (GOOD[:1] + ['{"event": "PollCq", "args": ["B"]}'], "t.jsonl:2: PollCq: unexpected field"),
    (['{"event": "PostSend", "host": "A", "wr": 1}'], "t.jsonl:1:"),
])
def test_a_damaged_trace_names_its_line(tmp_path: Path, lines: list[str], message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError) as err:
        model("Shift").run(load_trace(path))
    assert message in str(err.value), str(err.value)


def shift_replay(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "shift", "replay", str(path), *args],
                          capture_output=True, text=True, timeout=300, cwd=path.parent)


@pytest.mark.parametrize(("lines", "args", "message"), [
    (GOOD + ['{"event": "Bogus"}'], ["--design", "Shift"], "t.jsonl:3: unknown event"),
    (GOOD[:1] + ['{"event": "PostSend", "host": "A", "wr": 2}'], ["--design", "Shift"],
     "t.jsonl: event 2, PostSend(A, 2), is not enabled (enabled: PostSend(A, 1)"),
    (GOOD, ["--design", "Shfit"], "unknown design 'Shfit'"),
    (GOOD, ["--design", "Shift", "--bound", "huge"], "unknown bound 'huge'"),
])
def test_shift_replay_rejects_bad_input_in_one_line(
        tmp_path: Path, lines: list[str], args: list[str], message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    proc = shift_replay(path, *args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr, proc.stderr


def test_shift_replay_of_a_missing_file(tmp_path: Path) -> None:
    proc = shift_replay(tmp_path / "nope.jsonl", "--design", "Shift")
    assert proc.returncode == 2 and "nope.jsonl" in proc.stderr and "Traceback" not in proc.stderr


def test_shift_replay_prints_numbered_steps_and_the_violation(tmp_path: Path) -> None:
    ex = explore(model("NaiveReplay"), ["NotificationIntegrity"], stop_when_all_violated=True)
    cx = ex.violations["NotificationIntegrity"]
    path = save_trace(tmp_path / "t.jsonl", cx.events)
    proc = shift_replay(path, "--design", "NaiveReplay")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    assert out[1].strip().startswith("1. Init(")
    assert any(line.strip().startswith("!! NotificationIntegrity violated: B's notification")
               for line in out)
    assert out[-1].startswith("violates: ") and "NotificationIntegrity (step" in out[-1]
    # SHIFT's layer does not replay the notification: the trace parts from it, and
    # replay says at which event.
    other = shift_replay(path, "--design", "Shift")
    assert other.returncode == 2 and "is not enabled (enabled: " in other.stderr
