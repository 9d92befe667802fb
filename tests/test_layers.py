"""The layers' imports: the model, the oracle, stands without the TLC harness.

`shift.model` may read the catalogue (`shift.spec.catalog`), the workloads
(`shift.spec.workloads`) and TLA+ (`shift.tlaplus`), but nothing of `shift.tlc`: what runs
TLC or compares with it lives beside the harness. The reader, the catalogue and the
workloads, in turn, import neither the model nor the harness. The proofs read the workloads
from the spec like the model, and load nothing else of the other layers.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

HARNESS = "shift.tlc"


def imports(path: Path, package: str) -> Iterator[tuple[int, str]]:
    """(line, module) for every module the file imports, `from a import b` giving both a
    and a.b (b may be a module), relative imports resolved against the package."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(p for p in (base, node.module) if p)
            yield node.lineno, module
            yield from ((node.lineno, f"{module}.{a.name}") for a in node.names)


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_no_module_of_the_model_imports_the_tlc_harness() -> None:
    folder = Path(str(resources.files("shift.model")))
    found = [f"{path.name}:{line}: {module}"
             for path in sorted(folder.glob("*.py"))
             for line, module in imports(path, "shift.model") if within(module, HARNESS)]
    assert len(list(folder.glob("*.py"))) > 10
    assert not found, "the model imports the TLC harness:\n" + "\n".join(found)


def loaded_by(*modules: str) -> list[str]:
    """The shift modules a fresh interpreter holds after importing the given ones."""
    code = ("import importlib, sys\n"
            f"for m in {list(modules)!r}: importlib.import_module(m)\n"
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('shift'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    return out.split()


def test_the_model_does_not_load_the_harness_through_another_module() -> None:
    import pkgutil

    import shift.model
    model = [f"shift.model.{m.name}" for m in pkgutil.iter_modules(shift.model.__path__)]
    loaded = loaded_by(*model)
    assert "shift.model.next" in loaded
    assert [m for m in loaded if within(m, HARNESS)] == []


def test_the_tla_reader_and_the_catalogue_stand_alone() -> None:
    loaded = loaded_by("shift.tlaplus.values", "shift.tlaplus.syntax", "shift.spec.catalog",
                       "shift.spec.workloads")
    assert [m for m in loaded if within(m, HARNESS) or within(m, "shift.model")] == []


def test_the_proofs_load_the_spec_reader_and_nothing_else_of_the_other_layers() -> None:
    import pkgutil

    import shift.proofs
    proofs = [f"shift.proofs.{m.name}" for m in pkgutil.iter_modules(shift.proofs.__path__)]
    loaded = loaded_by(*proofs)
    assert "shift.proofs.programs" in loaded and "shift.spec.workloads" in loaded
    allowed = ("shift.proofs", "shift.spec", "shift.tlaplus")
    assert [m for m in loaded if m not in ("shift", "shift.errors")
            and not any(within(m, a) for a in allowed)] == []
