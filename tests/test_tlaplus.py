"""The specification read through the TLA+ grammar: its definitions, each design's record D,
and the events its `event` variable takes, which must be the event vocabulary."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from shift.model.config import design
from shift.spec.catalog import load_catalog, packaged_spec_dir
from shift.vocabulary import VOCABULARY

from shift.errors import SpecError
from shift.tlaplus.syntax import assignments, definitions, first_error, parse, text
from shift.tlaplus.values import value


def spec_copy(dst: Path) -> Path:
    """The packaged modules and designs.toml, copied to dst (to be edited there)."""
    for entry in packaged_spec_dir().iterdir():
        if entry.name.endswith((".tla", ".toml")):
            shutil.copyfile(entry, dst / entry.name)
    return dst


def spec_events(spec_dir: Path) -> dict[str, set[int]]:
    """Every event the spec's `event` variable takes (`event' = <<"Name", args...>>` or, in
    Init, `event = <<"Init">>`), with the numbers of arguments it is given."""
    events: dict[str, set[int]] = {}
    for tla in sorted(spec_dir.glob("*.tla")):
        root = parse(tla.read_bytes())
        assert first_error(root) is None, f"{tla.name}: the grammar does not accept it"
        for rhs in assignments(root, "event"):
            assert rhs.type == "tuple_literal", f"{tla.name}: event = {text(rhs)}"
            items = [c for c in rhs.named_children if not c.type.endswith("_bracket")]
            assert items and items[0].type == "string", f"{tla.name}: event = {text(rhs)}"
            events.setdefault(value(items[0]), set()).add(len(items) - 1)
    return events


def test_the_spec_takes_exactly_the_events_of_the_vocabulary() -> None:
    events = spec_events(packaged_spec_dir())
    assert set(events) == set(VOCABULARY), (
        f"only in the spec: {sorted(set(events) - set(VOCABULARY))}; "
        f"only in the vocabulary: {sorted(set(VOCABULARY) - set(events))}")
    # The same arguments, but Init's workload: the spec's <<"Init">> leaves it implicit.
    arity = {name: {len(sig)} for name, sig in VOCABULARY.items()} | {"Init": {0}}
    assert events == arity


def test_a_renamed_action_is_not_in_the_vocabulary(tmp_path: Path) -> None:
    """The check above reads the spec: an action renamed there shows up, as it should."""
    faults = spec_copy(tmp_path) / "Faults.tla"
    faults.write_text(faults.read_text().replace('<< "LinkDown", p >>', '<< "LinkCut", p >>'))
    events = spec_events(tmp_path)
    assert "LinkCut" in events and "LinkDown" not in events


def test_every_property_and_design_module_is_read_by_the_grammar() -> None:
    catalog = load_catalog()
    spec = packaged_spec_dir()
    props = definitions(parse((spec / "Properties.tla").read_bytes()))
    assert set(catalog.properties) <= set(props)
    for d in catalog.designs.values():
        defined = definitions(parse((spec / f"{d.module}.tla").read_bytes()))
        assert {"D", "Next", "Spec"} <= set(defined), d.module


def test_each_design_record_is_read_from_its_module() -> None:
    shift = design("Shift")
    assert (shift.failover, shift.skip, shift.refuseAtomics, shift.failBack,
            shift.readsResponder, shift.staged) == (True, "counter", True, True, False, False)
    assert design("ReceiverQuery").readsResponder and design("Staging").staged
    # keepNotes is optional: FALSE where a module's D does not name it
    assert design("ShiftCounted").keepNotes and not shift.keepNotes
    assert {design(n).skip for n in load_catalog().designs} == {
        "none", "counter", "prefix", "psn", "flag"}


def spec_with_shift(tmp_path: Path, record: str) -> int:
    """A copy of the spec with Shift's `D == [...]` replaced; the line D starts on."""
    module = spec_copy(tmp_path) / "Shift.tla"
    source = module.read_text()
    start = source.index("D == [")
    module.write_text(source[:start] + record + source[source.index("]", start) + 1:])
    return source[:start].count("\n") + 1


@pytest.mark.parametrize(("record", "message"), [
    ('D == [failover |-> TRUE, skip |-> ]', r"Shift.tla:{line}:\d+: D: not well-formed TLA\+"),
    ("D == [failover |-> 1 + 1]", r"Shift.tla:{line}: D: '1 \+ 1' \(bound infix op\) is not"),
    ('D == [failover |-> TRUE, skip |-> "counter"]', r"Shift.tla:{line}: D must be a record"),
    ('D == [failover |-> TRUE, skip |-> "all", refuseAtomics |-> TRUE, failBack |-> TRUE,\n'
     '      readsResponder |-> FALSE, staged |-> FALSE]', r"Shift.tla:{line}: D.skip = 'all'"),
    # without its `]` the record swallows what follows and the grammar no longer sees a D:
    # the error still says where the text stopped being TLA+ (not the module's first line)
    ('D == [failover |-> TRUE, skip |-> "counter"',
     r"Shift.tla:(?!1:)\d+:\d+: not well-formed TLA\+; no `D == \[\.\.\.\]` record"),
])
def test_a_malformed_record_is_an_error_with_its_line(tmp_path: Path, record: str,
                                                      message: str) -> None:
    line = spec_with_shift(tmp_path, record)
    with pytest.raises(SpecError, match=message.format(line=line)):
        design("Shift", load_catalog(tmp_path))
