"""The narrator (`shift.narrate`): steps in RDMA terms that claim nothing that did not
happen, and on the violating step why the property broke (issue 22)."""

from __future__ import annotations

import pytest
from shift.model.explore import explore
from shift.model.next import Model
from shift.model.tla import to_tla
from shift.vocabulary import make

from shift.narrate import narrate_step, tell, why, wire_changes

# design -> the invariants it violates at small (designs.toml)
VIOLATED = {
    "Shift": ["ExactlyOnceExecution", "DataAtNotification", "CompletionIntegrity"],
    "NaiveReplay": ["NotificationIntegrity", "AtomicSafety"],
    "ReceiverQuery": ["Opacity"],
    "Staging": ["ZeroCopy"],
}


def test_a_counter_that_never_left_is_not_called_sent() -> None:
    """F2's hang: A's backup NIC died while idle; at the next failover A's layer marks its
    counter sent, but nothing enters the wire. The narration says so."""
    model = Model.load("Shift", "large")
    events = [make("Init", 1), make("PostSend", "A", 1), make("NicFail", "A", 2),
              make("NicFail", "A", 1), make("PollCq", "A"), make("Progress", "A")]
    states = [to_tla(s, e) for s, e in zip(model.run(events), events, strict=True)]
    lines = tell(states, {})
    assert "A's send side: Default -> Fallback" in "\n".join(lines)
    assert lines[-1].strip() == ("A counts its counter as sent, but nothing leaves: its QP 2 "
                                 "or NIC 2 is down")
    assert not any("sends counter" in line for line in lines)


@pytest.mark.parametrize("design", list(VIOLATED))
def test_why_names_the_broken_property_on_its_step_only(design: str) -> None:
    model = Model.load(design, "small")
    ex = explore(model, VIOLATED[design], stop_when_all_violated=True)
    for prop in VIOLATED[design]:
        cx = ex.violations[prop]
        states = [to_tla(s, e) for s, e in zip(cx.states, cx.events, strict=True)]
        assert why(prop, states[-2]) is None, prop  # it held one step before
        reason = why(prop, states[-1])
        assert reason, prop
        if prop == "DataAtNotification":
            assert "held" in reason and "leave" in reason
        if prop == "ExactlyOnceExecution":
            assert "2 times" in reason


@pytest.mark.parametrize("design", ["Shift", "NaiveReplay"])
def test_every_packet_sent_is_narrated_once(design: str) -> None:
    """Over the counterexamples' steps: the lines saying a NIC transmits or sends match the
    packets that entered the wire, one for one."""
    model = Model.load(design, "small")
    ex = explore(model, VIOLATED[design], stop_when_all_violated=True)
    for cx in ex.violations.values():
        states = [to_tla(s, e) for s, e in zip(cx.states, cx.events, strict=True)]
        for before, after in zip(states, states[1:], strict=False):
            entered = sum(len(c.entered) for c in wire_changes(before, after))
            said = sum((" transmits " in ln and "dead link" not in ln) or "'s NIC" in ln
                       and " sends " in ln for ln in narrate_step(before, after))
            assert said == entered, narrate_step(before, after)


def test_a_request_to_reconnect_is_told_as_one() -> None:
    """The lasso of docs/findings.md's starved counter: B reconnects and asks A, whose NIC 1
    is dead; the request, A dropping it and B's timer asking again are told as such, never
    as a counter."""
    model = Model.load("Shift", "default")
    events = [make("Init", 1), make("PostSend", "A", 1), make("PostRecv", "B", 1),
              make("NicFail", "A", 1), make("PollCq", "A"), make("PostSend", "A", 2),
              make("Progress", "A"), make("Deliver", 2, "AtoB"), make("Progress", "B"),
              make("Progress", "B"), make("Drop", 2, "BtoA"), make("Progress", "B"),
              make("Progress", "B"), make("Deliver", 2, "BtoA"),
              make("HandshakeTimeout", "B")]
    states = [to_tla(s, e) for s, e in zip(model.run(events), events, strict=True)]
    lines = [ln.strip() for ln in tell(states, {})]
    asks = "B's NIC 2 sends request to reconnect: reset the default path into incarnation 1"
    assert lines.count(asks) == 2
    assert any(ln.startswith("A cannot reset its end of the default path now") for ln in lines)
    assert not any("counter" in ln and "reconnect" in ln for ln in lines)
    assert any(ln.startswith("15. HandshakeTimeout(B)") and "answer it awaits" in ln
               for ln in lines)
