"""The designer's workflow around `shift check` and `shift replay` (issue 22): which engine
decides, `--property`, what CI reads (JSON, JUnit), `replay --expect`, comments in traces,
ITF traces wherever event traces go, and a property the Python model does not know."""

from __future__ import annotations

import json
import tomllib
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

from shift.spec.catalog import load_catalog, packaged_spec_dir
from test_cli_errors import one_line_error, shift
from test_declarations import spec_copy

TRACES = Path(__file__).parent / "traces"
F5 = TRACES / "f5_signaled_write_completes_late.jsonl"


def add_property(spec: Path) -> None:
    """A property the Python model has no predicate for, in Properties.tla and
    designs.toml: the case that used to crash `shift replay`."""
    props = spec / "Properties.tla"
    props.write_text(props.read_text().replace(
        "\\* No FADD or CAS is applied twice.",
        "AtMostTwice == \\A h \\in Hosts : \\A w \\in DOMAIN execs[h] : execs[h][w] <= 2\n\n"
        "\\* No FADD or CAS is applied twice."))
    toml = spec / "designs.toml"
    toml.write_text(toml.read_text().replace('  "ZeroCopy",\n',
                                             '  "ZeroCopy",\n  "AtMostTwice",\n'))


# -- which engine decides ------------------------------------------------------------

def test_auto_uses_the_explorer_where_the_bound_declares_it(tmp_path: Path) -> None:
    proc = shift("check", "--design", "NoFailover", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "engine explorer for NoFailover (bound small declares it" in proc.stderr
    assert "TLC run" not in proc.stderr


def test_auto_uses_tlc_on_changed_modules(tmp_path: Path) -> None:
    """The explorer follows the packaged TLA+ modules: a spec folder whose modules differ
    is TLC's to check, and the progress lines say which TLC run they belong to."""
    spec = spec_copy(tmp_path)
    add_property(spec)
    assert not load_catalog(spec).is_packaged() and load_catalog().is_packaged()
    proc = shift("check", "--spec-dir", str(spec), "--design", "NoFailover", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "differ from the packaged ones" in proc.stderr
    declared = tomllib.loads((spec / "designs.toml").read_text())
    invariants, cells = len(declared["invariants"]), len(declared["invariants"]) + 1
    assert declared["temporal"] == ["Liveness"] and "AtMostTwice" in declared["invariants"]
    # every invariant holds for NoFailover: one TLC run; Liveness (violated) the second
    assert f"NoFailover, TLC run 1: {invariants} properties hold" in proc.stderr
    assert "NoFailover, TLC run 2: Liveness violated" in proc.stderr
    assert "AtMostTwice" in proc.stdout
    assert f"{cells} of {cells} verdicts as declared" in proc.stdout


def test_the_explorer_names_a_property_it_lacks(tmp_path: Path) -> None:
    spec = spec_copy(tmp_path)
    add_property(spec)
    line = one_line_error(shift("check", "--spec-dir", str(spec), "--design", "Shift",
                                "--engine", "explorer", cwd=tmp_path))
    assert "--engine explorer: Shift" in line and "AtMostTwice" in line
    assert "model/properties.py" in line and "--engine tlc" in line


def test_only_the_properties_asked_for(tmp_path: Path) -> None:
    proc = shift("check", "--design", "Staging", "--property", "ZeroCopy", "--property",
                 "Opacity", "--json", "out.json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    header = next(ln for ln in proc.stdout.splitlines() if ln.startswith("design"))
    assert header.split()[1:3] == ["Opacity", "ZeroCopy"]  # the table's column order
    cells = json.loads((tmp_path / "out.json").read_text())["results"]
    assert {(c["property"], c["verdict"]) for c in cells} == {("Opacity", "holds"),
                                                             ("ZeroCopy", "violated")}
    line = one_line_error(shift("check", "--property", "ZeroCopyy", cwd=tmp_path))
    assert "--property ZeroCopyy: unknown property" in line and "ZeroCopy" in line


# -- what CI reads -------------------------------------------------------------------

def test_json_says_which_spec_bound_and_tools(tmp_path: Path) -> None:
    proc = shift("check", "--design", "Shift", "--json", "out.json", "--out", "cex",
                 cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["bound"] == "small" and doc["constants"]["Recover"] == "FALSE"
    assert doc["spec_sha256"] == load_catalog().spec_hash()
    assert Path(doc["spec_dir"]) == packaged_spec_dir()
    assert datetime.fromisoformat(doc["started"]).tzinfo is not None
    assert doc["wall_seconds"] > 0
    versions = doc["versions"]
    assert versions["shift"] and versions["python"] and versions["z3"]
    assert versions["tlc"] and versions["java"]  # found here: CI installs both
    by = {c["property"]: c for c in doc["results"]}
    assert "F3" in by["DataAtNotification"]["reason"]
    assert "reason" not in by["Opacity"]  # declared to hold: no reason to give
    assert Path(tmp_path / by["DataAtNotification"]["counterexample"]).is_file()


def test_the_hash_moves_with_the_spec(tmp_path: Path) -> None:
    spec = spec_copy(tmp_path)
    before = load_catalog(spec).spec_hash()
    assert before == load_catalog().spec_hash()
    (spec / "designs.toml").write_text((spec / "designs.toml").read_text() + "\n# a note\n")
    assert load_catalog(spec).spec_hash() != before


def test_junit_names_the_bound_and_expected_violations(tmp_path: Path) -> None:
    proc = shift("check", "--design", "NoFailover", "--design", "Staging", "--junit",
                 "j.xml", "--json", "j.json", "--out", "cex", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    root = ET.parse(tmp_path / "j.xml").getroot()
    assert root.get("name") == "shift check --bound small"
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"NoFailover [small]", "Staging [small]"}
    cases = {c.get("name"): c for c in suites["Staging [small]"].iter("testcase")}
    assert set(cases) == {f"{p} [small]" for p in load_catalog().properties}
    said = cases["ZeroCopy [small]"].findtext("system-out") or ""
    assert said.startswith("violated, as declared: ")
    assert (tmp_path / said.split("counterexample: ")[1]).is_file()
    assert cases["Opacity [small]"].find("system-out") is None
    # Cells one run decided share its time: the testcases add up to the runs' times.
    runs = {(c["design"], c["run"]): c["run_seconds"]
            for c in json.loads((tmp_path / "j.json").read_text())["results"]}
    total = sum(float(c.get("time", "0")) for c in root.iter("testcase"))
    assert abs(total - sum(runs.values())) < 0.01 * len(runs) + 0.01


# -- replay -------------------------------------------------------------------------

def test_replay_expect_sets_the_exit_status(tmp_path: Path) -> None:
    args = ("replay", "--design", "Shift", str(F5))
    both = shift(*args, "--expect", "ExactlyOnceExecution,CompletionIntegrity", cwd=tmp_path)
    assert both.returncode == 0, both.stdout + both.stderr
    one = shift(*args, "--expect", "CompletionIntegrity", cwd=tmp_path)
    assert one.returncode == 1
    assert "ExactlyOnceExecution violated too" in one.stdout
    none = shift(*args, "--expect", "nothing", cwd=tmp_path)
    assert none.returncode == 1 and "expected to violate nothing" in none.stdout
    plain = shift(*args, cwd=tmp_path)  # without --expect: a report, exit 0
    assert plain.returncode == 0
    line = one_line_error(shift(*args, "--expect", "Atomicity", cwd=tmp_path))
    assert "--expect Atomicity: not a property" in line


def test_replay_says_what_it_cannot_judge(tmp_path: Path) -> None:
    spec = spec_copy(tmp_path)
    add_property(spec)
    proc = shift("replay", "--spec-dir", str(spec), "--design", "Shift", str(F5), cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "violates: ExactlyOnceExecution (step 19), CompletionIntegrity" in proc.stdout
    assert "not judged: AtMostTwice (the Python model has no predicate" in proc.stdout


def test_comments_in_event_traces(tmp_path: Path) -> None:
    lines = F5.read_text().splitlines()
    commented = tmp_path / "commented.jsonl"
    commented.write_text("# F5, with comments\n" + lines[0] + "\n  # A posts WR 1\n"
                         + "\n".join(lines[1:]) + "\n")
    plain = shift("replay", "--design", "Shift", str(F5), cwd=tmp_path)
    mine = shift("replay", "--design", "Shift", str(commented), cwd=tmp_path)
    assert mine.returncode == 0, mine.stderr
    assert mine.stdout.split("\n", 1)[1] == plain.stdout.split("\n", 1)[1]


def test_an_itf_counterexample_goes_where_event_traces_go(tmp_path: Path) -> None:
    """A counterexample of `shift check` (ITF JSON) runs through model and core with
    `fuzz --replay` and `replay --impl`, as its event trace does."""
    proc = shift("check", "--design", "NaiveReplay", "--property", "NotificationIntegrity",
                 "--out", "cex", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    itf = tmp_path / "cex" / "NaiveReplay-NotificationIntegrity.explorer.itf.json"
    for args in (("fuzz", "--replay", str(itf), "--design", "NaiveReplay"),
                 ("replay", "--impl", "--design", "NaiveReplay", str(itf))):
        run = shift(*args, cwd=tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "model and implementation agree" in run.stdout
