"""One vocabulary, every layer: each event is an action of the spec, a function of the
model, a method of the binding and an entry point of the C library; each name the binding
gives a C enum is that enum's, value for value, with none missing on either side."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest
import shift.spec
from shift.impl import Access, Connection, DesignCode, Fabric, ImplObservation, Status, verbs
from shift.impl import connection as binding
from shift.impl._native import ffi, lib

from shift import vocabulary as vocab

# The C entry point(s) each event reaches (docs/design.md, the table of the vocabulary),
# and where the binding calls it: the event's Connection method unless named here.
C_ENTRY = {
    "Init": ("sn_fabric_create", "shift_sim_connect"),
    "PostSend": ("shift_post_send",),
    "PostRecv": ("shift_post_recv",),
    "PollCq": ("shift_poll_step",),
    "Transmit": ("sn_transmit",),
    "Deliver": ("sn_deliver",),
    "Drop": ("sn_drop",),
    "Timeout": ("shift_sim_timeout",),
    "WriteCqe": ("sn_write_cqe",),
    "LinkDown": ("sn_link_down",),
    "LinkUp": ("sn_link_up",),
    "NicFail": ("sn_nic_fail",),
    "NicRecover": ("sn_nic_recover",),
    "Progress": ("shift_progress",),
    "HandshakeTimeout": ("shift_timer",),
    "CompletionTimeout": ("shift_timer",),
    "FatalEvent": ("shift_async_event",),
    # the application's store into its buffer: the host memory simnic hands out
    "AppWrite": ("sn_host_mem",),
}
CALLED_FROM = {
    "Init": (Fabric.__init__, Connection.__init__),
    "AppWrite": (Fabric.__init__,),
}


def c_enum(ctype: str, prefix: str) -> dict[str, int]:
    """A C enum as {enumerator without prefix: value}, read here without the binding."""
    return {k.removeprefix(prefix): v for k, v in ffi.typeof(ctype).relements.items()}


def upper_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).upper()


def lib_calls(fn: object) -> set[str]:
    """The C functions a binding function calls, following a Connection method into the
    Fabric method it delegates to (`self._fabric.name(...)`) and into another method of
    its own class (`self.name(...)`: poll_cq's poll_step)."""
    src = inspect.getsource(fn)  # type: ignore[arg-type]
    calls = set(re.findall(r"\blib\.(\w+)\(", src))
    for name in re.findall(r"self\._fabric\.(\w+)\(", src):
        calls |= lib_calls(getattr(Fabric, name))
    owner = Connection if fn.__qualname__.startswith("Connection.") else Fabric  # type: ignore[union-attr]
    for name in re.findall(r"self\.(\w+)\(", src):
        if callable(getattr(owner, name, None)) and name != fn.__name__:  # type: ignore[union-attr]
            calls |= lib_calls(getattr(owner, name))
    return calls


def test_every_event_of_the_spec_is_in_the_vocabulary_with_its_arity() -> None:
    spec_dir = Path(shift.spec.__file__).parent
    text = "\n".join(p.read_text() for p in spec_dir.glob("*.tla"))
    arity = {}
    for name, rest in re.findall(r"event' = << \"(\w+)\"((?:, [^,>]+)*) >>", text):
        arity.setdefault(name, set()).add(rest.count(","))
    assert set(arity) == set(vocab.VOCABULARY) - {"Init"}
    for name, counts in arity.items():
        assert counts == {len(vocab.VOCABULARY[name])}, name


def test_the_model_has_a_function_per_event() -> None:
    from shift.model.next import EVENT_FUNCTIONS

    assert set(EVENT_FUNCTIONS) == set(vocab.VOCABULARY) - {"Init"}


@pytest.mark.parametrize("event", sorted(vocab.VOCABULARY))
def test_every_event_has_a_binding_method_and_a_c_entry_point(event: str) -> None:
    entries = C_ENTRY[event]
    for name in entries:
        assert callable(getattr(lib, name, None)), f"{event}: the C library has no {name}"
    if event == "Init":
        callers = CALLED_FROM[event]
    else:
        method = getattr(Connection, binding.EVENT_METHODS[event])
        params = [p for p in inspect.signature(method).parameters.values()
                  if p.name != "self" and p.kind is p.POSITIONAL_OR_KEYWORD]
        if params:  # post_send and post_recv take *args: (host, wr) or (wr)
            assert [p.name for p in params] == [n for n, _ in vocab.VOCABULARY[event]], event
        callers = CALLED_FROM.get(event, (method,))
    called = set().union(*(lib_calls(f) for f in callers))
    assert set(entries) <= called, f"{event}: the binding does not call {set(entries) - called}"


def test_the_binding_dispatches_exactly_the_events() -> None:
    assert set(binding.EVENT_METHODS) == set(vocab.VOCABULARY) - {"Init"}
    assert set(C_ENTRY) == set(vocab.VOCABULARY)


@pytest.mark.parametrize(("names", "ctype", "prefix"), [
    (vocab.STATUSES, "enum shift_wc_status", "SHIFT_WC_"),
    (vocab.LAYER_STATES, "enum shift_state", "SHIFT_STATE_"),
    (vocab.RECV_MODES, "enum shift_recv_state", "SHIFT_RECV_"),
    (vocab.PROGRESS_STEPS, "enum shift_step", "SHIFT_STEP_"),
    (vocab.HOSTS, "enum sn_host", "SN_HOST_"),
])
def test_each_vocabulary_name_is_a_c_enumerator_and_each_enumerator_a_name(
        names: tuple[str, ...], ctype: str, prefix: str) -> None:
    assert {upper_snake(n) for n in names} == set(c_enum(ctype, prefix))


def test_the_python_enums_have_the_c_values() -> None:
    assert {s.name: s.value for s in Status} == c_enum("enum shift_wc_status", "SHIFT_WC_")
    assert [s.name for s in sorted(Status)] == list(vocab.STATUSES)
    assert {a.name: a.value for a in Access} == c_enum("enum shift_access_flags",
                                                       "SHIFT_ACCESS_")
    assert sum(c_enum("enum shift_access_flags", "SHIFT_ACCESS_").values()) == verbs.ALL_ACCESS
    designs = c_enum("enum shift_design", "SHIFT_DESIGN_")
    assert {upper_snake(d): verbs.DESIGN_CODES[d] for d in DesignCode} == designs
    states = c_enum("enum shift_state", "SHIFT_STATE_")
    assert {upper_snake(n): i for i, n in enumerate(verbs.STATE_NAMES)} == states
    recv_states = c_enum("enum shift_recv_state", "SHIFT_RECV_")
    assert {upper_snake(n): i for i, n in enumerate(verbs.RECV_STATE_NAMES)} == recv_states
    steps = c_enum("enum shift_step", "SHIFT_STEP_")
    assert {upper_snake(n): i for i, n in enumerate(verbs.STEP_NAMES)} == steps
    assert {h: c_enum("enum sn_host", "SN_HOST_")[h] for h in vocab.HOSTS} == verbs.HOSTS
    assert {d: c_enum("enum sn_dir", "SN_")[d] for d in vocab.DIRECTIONS} == verbs.DIRECTIONS
    opcodes = c_enum("enum shift_wr_opcode", "SHIFT_WR_")
    assert [o.value for o in verbs.Op] == list(vocab.LIBRARY_OPS)
    assert vocab.LIBRARY_OPS[:len(vocab.OPS)] == vocab.OPS
    assert set(verbs.OP_CODES) == set(verbs.Op)
    assert len(set(verbs.OP_CODES.values())) == len(verbs.OP_CODES)
    assert set(verbs.OP_CODES.values()) <= set(opcodes.values())


def test_the_designs_of_the_c_core_are_designs_of_the_catalogue() -> None:
    """The runner compares the C core's designs with the model's under the catalogue's
    names: each must be a design of spec/designs.toml."""
    from shift.spec.catalog import load_catalog

    from shift.differential import DESIGNS

    assert set(DESIGNS) <= set(load_catalog(None).designs)


def test_the_copies_other_layers_keep_agree_with_the_vocabulary() -> None:
    """Names the model spells out as the spec's subsets (three statuses, the operation
    classes) must be the vocabulary's; the fields both sides observe are the same."""
    from shift.model import state
    from shift.model.next import Model
    from shift.model.observe import observe

    from shift.differential import COMPARED

    assert {state.SUCCESS, state.FLUSH, state.RETRY_EXC} <= set(vocab.STATUSES)
    assert set(vocab.OPS) == state.ONE_SIDED | state.TWO_SIDED
    assert COMPARED == vocab.OBSERVATION_FIELDS
    impl = ImplObservation((), (), {"A": "Default", "B": "Default"})
    model = observe(state.initial(Model.load("Shift").bound.programs_of(1), 0))
    assert tuple(impl.as_dict()) == tuple(model.as_dict()) == vocab.OBSERVATION_FIELDS


def test_the_vocabulary_needs_nothing_but_the_standard_library() -> None:
    code = ("import sys, shift.vocabulary; "
            "print(sorted(m for m in sys.modules if m.startswith(('shift.', 'cffi', 'z3'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == str(sorted(
        ["shift.vocabulary", "shift.vocabulary.events", "shift.vocabulary.layer",
         "shift.vocabulary.observation", "shift.vocabulary.verbs"]))


def test_an_event_reads_the_same_in_each_of_its_written_forms() -> None:
    ev = vocab.make("Deliver", 1, "AtoB")
    forms = (ev, {"event": "Deliver", "path": 1, "direction": "AtoB"}, ("Deliver", 1, "AtoB"),
             ["Deliver", 1, "AtoB"])
    assert {vocab.parse(f) for f in forms} == {("Deliver", (1, "AtoB"))}
    assert {vocab.from_json(f) for f in forms} == {ev}
    assert vocab.from_json(ev.to_json()) == ev
