"""Counterexamples as ITF JSON (the Informal Trace Format of Apalache and Quint)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from shift.tlaplus.values import ModelValue, TlaFunction, TlaSet
from shift.tlc.output import Trace

_SAFE_INT = 2**53


def to_itf_value(value: Any) -> Any:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if abs(value) < _SAFE_INT else {"#bigint": str(value)}
    if isinstance(value, list):
        return [to_itf_value(v) for v in value]
    if isinstance(value, dict):
        return {k: to_itf_value(v) for k, v in value.items()}
    if isinstance(value, TlaSet):
        return {"#set": [to_itf_value(v) for v in value.members]}
    if isinstance(value, TlaFunction):
        return {"#map": [[to_itf_value(k), to_itf_value(v)] for k, v in value.pairs]}
    if isinstance(value, ModelValue):
        return {"#unserializable": value.name}
    raise TypeError(f"no ITF form for {value!r}")


def trace_to_itf(trace: Trace, source: str, description: str) -> dict[str, Any]:
    variables = sorted(trace.steps[0].state) if trace.steps else []
    doc: dict[str, Any] = {
        "#meta": {"format": "ITF", "source": source, "description": description,
                  "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html"},
        "vars": variables,
        "states": [{"#meta": {"index": s.index, "action": s.action},
                    **{k: to_itf_value(v) for k, v in s.state.items()}}
                   for s in trace.steps],
    }
    if trace.loop is not None:
        doc["loop"] = trace.loop
    elif trace.stutters and trace.steps:
        doc["loop"] = len(trace.steps) - 1
    return doc


def write_itf(path: Path, trace: Trace, source: str, description: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(trace_to_itf(trace, source, description), indent=1) + "\n")
    return path
