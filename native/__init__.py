"""shift.native: the C core's installed artefacts, for C programs that link it.

The package carries the public headers (``include/``: shift_verbs.h, simnic.h, shift.h,
shift_sim.h) and ``lib/libshift.so``, the core (simnic, the failover layer, the simnic
backend) built from the same sources as ``shift.impl._native`` by ``pip install``. This
module only says where they are; ``shift config`` prints it for a compile line.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
HEADERS = ("shift_verbs.h", "simnic.h", "shift.h", "shift_sim.h", "shift_ibv.h")
LIBRARY = "libshift.so"


def include_dir() -> Path:
    """The directory of the public headers."""
    return HERE / "include"


def lib_dir() -> Path:
    """The directory of libshift.so."""
    return HERE / "lib"


def missing() -> list[Path]:
    """The artefacts this installation lacks (none after a successful pip install)."""
    wanted = [include_dir() / h for h in HEADERS] + [lib_dir() / LIBRARY]
    return [p for p in wanted if not p.is_file()]
