"""Event traces as files (docs/design.md, the event vocabulary).

The events themselves — their names, typed arguments, `Event`, `make` and `from_json` —
are the vocabulary's (`shift.vocabulary`); this module reads and writes sequences of them.
Event traces are JSON Lines, one object per event with named arguments, Init first:
    {"event": "Init", "workload": 2}
    {"event": "PostRecv", "host": "B", "recv": 1}
    {"event": "Deliver", "path": 1, "direction": "AtoB"}
A line whose first non-blank character is `#` is a comment, as is a blank line: hand
traces say in them what they show. `load_trace` checks every line and raises `TraceError`
naming the line that is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from shift.vocabulary import Event, from_json

from shift.errors import ShiftError


class TraceError(ShiftError):
    """A malformed event or trace file; the message names the file and line."""


def dumps_trace(events: Iterable[Event]) -> str:
    return "".join(json.dumps(e.to_json()) + "\n" for e in events)


def save_trace(path: Path, events: Iterable[Event]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps_trace(events))
    return path


def loads_trace(text: str, source: str = "<trace>") -> list[Event]:
    """Events from JSON Lines text; blank lines and `#` comments are skipped, the first
    event is Init."""
    events: list[Event] = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise TraceError(f"{source}:{no}: not JSON: {e.msg} (column {e.colno})") from None
        try:
            ev = from_json(obj)
        except ValueError as e:
            raise TraceError(f"{source}:{no}: {e}") from None
        if (ev.name == "Init") != (not events):
            where = "only as the first event" if events else "first"
            raise TraceError(f"{source}:{no}: a trace has Init {where} "
                             f"(got {ev.name})")
        events.append(ev)
    if not events:
        raise TraceError(f"{source}: empty trace (it starts with an Init event)")
    return events


def load_trace(path: Path) -> list[Event]:
    try:
        text = path.read_text()
    except OSError as e:
        raise TraceError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise TraceError(f"{path}: not a text file") from None
    return loads_trace(text, str(path))
