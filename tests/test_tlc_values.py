"""TLC's printed values and states, parsed, and written back as ITF JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from shift.spec.catalog import load_catalog

from shift.report import diff, render_trace, show
from shift.tlaplus.values import (
    ModelValue,
    TlaFunction,
    TlaSet,
    TlaValueError,
    parse_state,
    parse_value,
)
from shift.tlc.itf import to_itf_value, trace_to_itf
from shift.tlc.output import Trace, TraceStep, parse_trace, spec_error, split_messages
from shift.tlc.runner import write_cfg


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42),
        ("-1", -1),
        ('"a \\"q\\""', 'a "q"'),
        ("TRUE", True),
        ("<<>>", []),
        ("<<1, <<2>>, {}>>", [1, [2], TlaSet(())]),
        ("[a |-> 1, b |-> <<\"x\">>]", {"a": 1, "b": ["x"]}),
        ("(1 :> \"x\" @@ 2 :> \"y\")", TlaFunction(((1, "x"), (2, "y")))),
        ("{<<1, 0>>, <<2, 5>>}", TlaSet(([1, 0], [2, 5]))),
        ("mv", ModelValue("mv")),
        ("[A |-> <<<<>>, <<>>>>,\n   B |-> <<<<>>, <<>>>>]", {"A": [[], []], "B": [[], []]}),
    ],
)
def test_parse_value(text: str, value: object) -> None:
    assert parse_value(text) == value


@pytest.mark.parametrize("text", ["<<1, 2", "[a |-> ]", "1 2", "<<1>> >>", "#"])
def test_parse_value_rejects_garbage(text: str) -> None:
    with pytest.raises(TlaValueError):
        parse_value(text)


def test_parse_state_multiline_values() -> None:
    state = parse_state('/\\ x = << [a |-> 1,\n     b |-> 2] >>\n/\\ y = "s"\n')
    assert state == {"x": [{"a": 1, "b": 2}], "y": "s"}


def test_itf_encodings() -> None:
    assert to_itf_value(TlaSet((1, 2))) == {"#set": [1, 2]}
    assert to_itf_value(TlaFunction(((1, "a"),))) == {"#map": [[1, "a"]]}
    assert to_itf_value(2**60) == {"#bigint": str(2**60)}
    assert to_itf_value([True, {"k": -3}]) == [True, {"k": -3}]


LASSO = """@!@!@STARTMSG 2116:1 @!@!@
Temporal properties were violated.
@!@!@ENDMSG 2116 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
1: <Initial predicate>
/\\ event = <<"Init">>
/\\ x = 0
@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
2: <Next line 6, col 9 to line 6, col 52 of module T>
/\\ event = <<"Inc", 1>>
/\\ x = 1
@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2122:4 @!@!@
3: Back to state 1
@!@!@ENDMSG 2122 @!@!@
"""


def test_lasso_trace_to_itf() -> None:
    messages, loose = split_messages(LASSO.splitlines())
    assert not loose
    trace = parse_trace(messages)
    assert [s.action for s in trace.steps] == ["Initial", "Next"]
    assert trace.loop == 0
    doc = trace_to_itf(trace, "T", "lasso")
    assert doc["vars"] == ["event", "x"] and doc["loop"] == 0
    assert [s["x"] for s in doc["states"]] == [0, 1]
    json.dumps(doc)


def test_sany_semantic_error_is_located() -> None:
    loose = ["Semantic errors:", "", "*** Errors: 1", "",
             "line 5, col 18 to line 5, col 18 of module E", "",
             "The operator + requires 2 arguments."]
    assert spec_error(loose) == ("E", 5, 18, "The operator + requires 2 arguments.")


def test_cfg_lists_constants_and_properties(tmp_path: Path) -> None:
    write_cfg(tmp_path / "MC.cfg", {"N": "3", "S": "{1, 2}"}, ["Inv"], ["Live"])
    text = (tmp_path / "MC.cfg").read_text()
    for line in ["    N = 3", "    S = {1, 2}", "SPECIFICATION Spec", "VIEW View",
                 "INVARIANT Inv", "PROPERTY Live"]:
        assert line in text.splitlines()


def test_rendered_steps_show_events_and_what_apps_saw() -> None:
    catalog = load_catalog()
    steps = [
        TraceStep(0, "Initial", {"event": ["Init"], "rcvSeen": [], "layer": {"A": "Default"}}),
        TraceStep(1, "PollCq", {"event": ["PollCq", "B"],
                                "rcvSeen": [{"wr": 2, "status": "SUCCESS"}],
                                "layer": {"A": "Fallback"}}),
    ]
    lines = render_trace(catalog, Trace(steps, loop=None, stutters=True), narrated=False)
    assert lines[0].strip() == "1. Init"
    assert lines[1].strip() == '2. PollCq("B")'
    assert 'receiver app (host B) polled: [wr |-> 2, status |-> "SUCCESS"]' in lines[2]
    assert 'layer.A: "Default" -> "Fallback"' in lines[3]
    assert "forever" in lines[-1]


def test_diff_names_the_changed_leaf() -> None:
    assert diff("q", {"A": [1, 2]}, {"A": [1, 3]}) == ["q.A[2]: 2 -> 3"]
    assert show(TlaSet((1,))) == "{1}"
