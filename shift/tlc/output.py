"""Reading TLC's `-tool` output: tagged messages, states, counts and errors."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from shift.tlaplus.values import TlaValueError, parse_state

_START = re.compile(r"^@!@!@STARTMSG (\d+):(\d+) @!@!@$")
_END = re.compile(r"^@!@!@ENDMSG (\d+) @!@!@$")

# Message codes of TLC 2.15 (tlc2.output.EC / MP) that the harness reads.
INVARIANT_VIOLATED = {2107, 2110}  # by the initial state / by a behaviour
TEMPORAL_VIOLATED = {2116}
STATE, STUTTER, BACK_TO = 2217, 2218, 2122
PROGRESS, FINAL_COUNTS = 2200, 2199
ERROR_CLASS = 1


@dataclass
class Message:
    code: int
    level: int
    text: str


@dataclass
class TraceStep:
    index: int
    action: str  # "Initial predicate" or the action's name
    state: dict[str, Any]


@dataclass
class Trace:
    steps: list[TraceStep] = field(default_factory=list)
    loop: int | None = None  # lasso: the 0-based step the behaviour returns to
    stutters: bool = False  # lasso: the last state repeats forever


def split_messages(lines: list[str]) -> tuple[list[Message], list[str]]:
    """TLC's tagged messages, and the untagged lines (SANY's reports) between them."""
    messages: list[Message] = []
    loose: list[str] = []
    current: tuple[int, int] | None = None
    body: list[str] = []
    for line in lines:
        if (m := _START.match(line)) is not None:
            current, body = (int(m.group(1)), int(m.group(2))), []
        elif _END.match(line) is not None and current is not None:
            messages.append(Message(current[0], current[1], "\n".join(body).strip()))
            current = None
        elif current is not None:
            body.append(line)
        else:
            loose.append(line)
    return messages, loose


_HEADER = re.compile(r"^(\d+): (?:<(\w+)[^>]*>|<(Initial predicate)>|(\w+))")


def parse_trace(messages: list[Message]) -> Trace:
    trace = Trace()
    for msg in messages:
        if msg.code == STATE:
            head, _, rest = msg.text.partition("\n")
            m = _HEADER.match(head)
            action = (m.group(2) or m.group(3) or m.group(4)) if m else head
            try:
                state = parse_state(rest)
            except TlaValueError as e:
                state = {"_unparsed": f"{e}: {rest[:200]}"}
            trace.steps.append(TraceStep(len(trace.steps), action, state))
        elif msg.code == STUTTER:
            trace.stutters = True
        elif msg.code == BACK_TO:
            m = re.search(r"Back to state (\d+)", msg.text)
            trace.loop = int(m.group(1)) - 1 if m else None
    return trace


def counts(messages: list[Message]) -> tuple[int, int]:
    """States generated and distinct states, from the last count TLC printed."""
    generated = distinct = 0
    for msg in messages:
        if msg.code in (PROGRESS, FINAL_COUNTS):
            g = re.search(r"([\d,]+) states generated", msg.text)
            d = re.search(r"([\d,]+) distinct states found", msg.text)
            if g and d:
                generated = int(g.group(1).replace(",", ""))
                distinct = int(d.group(1).replace(",", ""))
    return generated, distinct


_LOCATED = re.compile(
    r"line (\d+), col(?:umn)? (\d+)(?: to line \d+, col \d+)? of module (\w+)"
)
_PARSE_AT = re.compile(r"at line (\d+), column (\d+)")
_PARSING = re.compile(r"^Parsing file (.*)$")


def spec_error(loose: list[str]) -> tuple[str | None, int, int, str] | None:
    """The first error SANY reported: (module, line, column, message), or None."""
    text = "\n".join(loose)
    if "***Parse Error***" in text:
        module = None
        for line in loose:
            if (p := _PARSING.match(line)) is not None:
                module = p.group(1).rsplit("/", 1)[-1].removesuffix(".tla")
            if "***Parse Error***" in line:
                break
        at = _PARSE_AT.search(text)
        reason = next((ln.strip() for ln in loose if ln.strip().startswith("Encountered")),
                      "parse error")
        return module, int(at.group(1)) if at else 0, int(at.group(2)) if at else 0, reason
    for marker in ("Semantic errors:", "*** Errors:"):
        if marker in text:
            after = text.split(marker, 1)[1]
            m = _LOCATED.search(after)
            if m:
                tail = after[m.end():].strip().splitlines()
                reason = next((ln.strip() for ln in tail if ln.strip()), "semantic error")
                return m.group(3), int(m.group(1)), int(m.group(2)), reason
    if "Lexical error" in text or "lexical error" in text:
        at = _PARSE_AT.search(text)
        return None, int(at.group(1)) if at else 0, int(at.group(2)) if at else 0, "lexical error"
    return None
