"""`shift check` against edited copies of the specification (`--spec-dir`).

A designer's own copy is checked the same way as the packaged one: a wrong declaration
makes the exit status non-zero, and an extra property of theirs is checked like ours.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path
from typing import Any


def spec_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "spec"
    src = resources.files("shift.spec")
    dst.mkdir()
    for entry in src.iterdir():
        if entry.name.endswith((".tla", ".toml", ".cfg")):
            shutil.copyfile(str(entry), dst / entry.name)
    return dst


def check(spec: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shift", "check", "--spec-dir", str(spec), "--quiet", *args],
        cwd=spec.parent, capture_output=True, text=True, timeout=600,
    )


def test_a_wrong_declaration_fails_the_check(tmp_path: Path) -> None:
    spec = spec_copy(tmp_path)
    toml = spec / "designs.toml"
    text = toml.read_text()
    # Claim SHIFT keeps exactly-once: TLC must disagree.
    text = text.replace(
        'ExactlyOnceExecution = "by design: a WRITE executed before its ACK was lost is '
        'executed again on the backup path"\n',
        "",
    )
    assert "by design" not in text
    # ... and drop what then has nothing to qualify: that it holds at bound twoway
    held = ('[designs.Shift.holds_at.twoway]\nExactlyOnceExecution = "workload 7 (ping-pong) '
            'has SENDs only: the peer\'s counter covers every SEND that executed, so none is '
            'replayed"\n')
    assert held in text
    text = text.replace(held, "[designs.Shift.holds_at.twoway]\n")
    toml.write_text(text)
    # one property: the others (Liveness above all) would only add minutes of TLC
    proc = check(spec, "--design", "Shift", "--property", "ExactlyOnceExecution",
                 "--json", "out.json", "--junit", "junit.xml")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failures = ET.parse(tmp_path / "junit.xml").getroot().findall(".//failure")
    assert [f.get("message") for f in failures] == ["violated, expected holds"]
    assert "VIOLATED" in proc.stdout
    results = json.loads((tmp_path / "out.json").read_text())["results"]
    eo = next(r for r in results if r["property"] == "ExactlyOnceExecution")
    assert (eo["verdict"], eo["expected"]) == ("violated", "holds")


def test_a_property_wrongly_declared_violated_fails_the_check(tmp_path: Path) -> None:
    spec = spec_copy(tmp_path)
    toml = spec / "designs.toml"
    toml.write_text(
        toml.read_text().replace(
            "[designs.Staging.violates]\n",
            '[designs.Staging.violates]\nNotificationIntegrity = "claimed, wrongly"\n',
        )
    )
    proc = check(spec, "--design", "Staging", "--property", "NotificationIntegrity")
    assert proc.returncode == 1, proc.stdout + proc.stderr


def test_shift_refuses_rather_than_apply_an_atomic_twice(tmp_path: Path) -> None:
    """A witness: TLC finds a run where SHIFT fails the atomic and applies it at most once."""
    spec = spec_copy(tmp_path)
    props = spec / "Properties.tla"
    props.write_text(
        props.read_text().replace(
            "\\* No FADD or CAS is applied twice.",
            "\\* A witness: the layer never refuses.\n"
            "NeverRefuses == refused = [h \\in Hosts |-> {}]\n\n"
            "\\* No FADD or CAS is applied twice.",
        )
    )
    toml = spec / "designs.toml"
    config: dict[str, Any] = tomllib.loads(toml.read_text())
    toml.write_text(
        toml.read_text().replace(
            "invariants = [\n", 'invariants = [\n  "NeverRefuses",\n'
        ).replace(
            "[designs.Shift.violates]\n",
            '[designs.Shift.violates]\nNeverRefuses = "refuses with an atomic in flight"\n',
        )
    )
    assert "NeverRefuses" not in config["invariants"]
    proc = check(spec, "--design", "Shift", "--property", "NeverRefuses",
                 "--property", "AtomicSafety", "--json", "out.json", "--out", "cex")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "out.json").read_text())["results"]
    witness = next(r for r in results if r["property"] == "NeverRefuses")
    assert witness["verdict"] == "violated"
    atomic = next(r for r in results if r["property"] == "AtomicSafety")
    assert atomic["verdict"] == "holds"
    path = Path(witness["counterexample"])
    trace = json.loads((path if path.is_absolute() else tmp_path / path).read_text())
    last = trace["states"][-1]
    # the workload's atomic (workload 3's FADD or workload 6's CAS) was refused
    atomic_wr = next(i for i, w in enumerate(last["program"]["A"], start=1)
                     if w["op"] in ("FADD", "CAS"))
    refused = last["refused"]["A"]["#set"]
    assert atomic_wr in refused
    execs = last["execs"]["A"]
    assert execs[atomic_wr - 1] in (0, 1)
    # The layer holds an error completion for the atomic, for the application to poll.
    held = last["buffered"]["A"]
    assert any(c["wr"] == atomic_wr and c["status"] != "SUCCESS" for c in held)


def test_a_declaration_per_bound_applies_at_that_bound_only(tmp_path: Path) -> None:
    spec = spec_copy(tmp_path)
    toml = spec / "designs.toml"
    toml.write_text(toml.read_text() + '\n[designs.NoFailover.violates_at.small]\n'
                    'ExactlyOnceExecution = "claimed, wrongly, at the small bound"\n')
    proc = check(spec, "--design", "NoFailover", "--engine", "explorer", "--json", "s.json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    small = json.loads((tmp_path / "s.json").read_text())["results"]
    eo = next(r for r in small if r["property"] == "ExactlyOnceExecution")
    assert (eo["verdict"], eo["expected"]) == ("holds", "violated")
    proc = check(spec, "--design", "NoFailover", "--engine", "explorer", "--bound", "default",
                 "--json", "d.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    default = json.loads((tmp_path / "d.json").read_text())["results"]
    assert {r["expected"] for r in default if r["property"] == "ExactlyOnceExecution"} == {
        "holds"}


def test_a_declaration_for_an_unknown_bound_is_an_error(tmp_path: Path) -> None:
    spec = spec_copy(tmp_path)
    toml = spec / "designs.toml"
    toml.write_text(toml.read_text() + '\n[designs.Shift.violates_at.huge]\n'
                    'Liveness = "no such bound"\n')
    proc = check(spec, "--design", "Shift")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert ("designs.Shift.violates_at.huge: unknown bound (bounds: small, default, large, "
            "twoway, apperr, ackfirst, rnr, fatal, implicit, faithful-small, faithful)"
            ) in proc.stderr, proc.stderr


def test_the_packaged_large_declarations_name_their_findings() -> None:
    spec = Path(str(resources.files("shift.spec")))
    raw = tomllib.loads((spec / "designs.toml").read_text())
    shift = raw["designs"]["Shift"]
    large = shift["violates_at"]["large"]
    assert set(large) == {"Liveness"} and "F2" in large["Liveness"]
    # F5 breaks completion order at every bound (workload 5), F4 adds the backup's failure
    order = shift["violates"]["CompletionIntegrity"]
    assert "F5" in order and "F4" in order


def test_a_bound_has_hardware_rc_unless_it_says_otherwise(tmp_path: Path) -> None:
    """`defaults.constants` (issue 17: the default is the faithful behaviour): a bound that
    names only its sizes gets RC as hardware runs it; one that names a behaviour keeps it."""
    from shift.model.next import Model
    from shift.spec.catalog import load_catalog

    spec = spec_copy(tmp_path)
    toml = spec / "designs.toml"
    toml.write_text(toml.read_text() + '\n[bounds.mine]\nconstants = { Workloads = "{2}", '
                    'MaxRetries = 0, MaxDrops = 0, MaxFaults = 1, FaultPaths = "{1}", '
                    'Recover = "FALSE", RnrNak = "FALSE" }\n')
    mine = load_catalog(spec).bound("mine").constants
    assert (mine["AckBeforeCqe"], mine["DeviceFatal"], mine["ImplicitNak"]) == ("TRUE",) * 3
    assert (mine["RnrNak"], mine["RnrRetry"]) == ("FALSE", "7")
    packaged = load_catalog(None)
    assert packaged.bound("small").constants["AckBeforeCqe"] == "FALSE"
    assert packaged.bound("faithful").constants["DeviceFatal"] == "TRUE"
    # The model reads the same constants (Model.load goes through the packaged catalog).
    assert Model.load("Shift", "faithful").bound.ack_before_cqe


def test_a_bad_default_constant_names_its_key(tmp_path: Path) -> None:
    spec = spec_copy(tmp_path)
    toml = spec / "designs.toml"
    toml.write_text(toml.read_text().replace('[defaults]\nconstants = {',
                                             '[defaults]\nconstants = { Oops = [1],', 1))
    proc = check(spec, "--design", "Shift")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "defaults.constants.Oops" in proc.stderr, proc.stderr


def verdict_tables(doc: str) -> list[dict[str, set[str]]]:
    """The verdict tables of docs/design.md: design -> the columns marked violated."""
    tables: list[dict[str, set[str]]] = []
    header: list[str] = []
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| design | ExactlyOnce |"):
            header, table = cells, {}
            tables.append(table)
        elif header and line.startswith("| `"):
            tables[-1][cells[0].strip("`")] = {
                col for col, cell in zip(header[1:], cells[1:], strict=True)
                if cell.startswith(("✗", "■"))}
        elif not line.startswith("|"):
            header = []
    return tables


def test_the_verdict_tables_of_the_design_document_are_the_declarations() -> None:
    """docs/design.md's trilemma table (small and default) and its table with RC as
    hardware runs it (faithful-small and faithful) say what designs.toml declares, cell by
    cell."""
    from shift.spec.catalog import load_catalog

    catalog = load_catalog(None)
    doc = (Path(__file__).parents[1] / "docs" / "design.md").read_text()
    tables = verdict_tables(doc)
    assert len(tables) == 2
    short = {"ExactlyOnceExecution": "ExactlyOnce"}
    hardware = ("faithful-small", "faithful")
    for table, bounds in zip(tables, (("small", "default"), hardware), strict=True):
        assert set(table) == set(catalog.designs)
        for bound in bounds:
            for name, design in catalog.designs.items():
                declared = {short.get(p, p) for p in design.at(bound).violates
                            if p != "AppErrorContained"}
                assert table[name] == declared, (bound, name)
