"""cffi build script for shift.impl._native (API mode, out of line).

setup.py names it in ``cffi_modules``, so ``pip install .`` (or ``-e .``) compiles the C
core (native/src/*.c) into the extension module; nothing is built by hand. The C
declarations are read from the public headers, between their CDEF-BEGIN/CDEF-END markers.
"""

from __future__ import annotations

import os
import re

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NATIVE = os.path.join(ROOT, "native")
HEADERS = ("shift_verbs.h", "simnic.h", "shift.h", "shift_sim.h")
SOURCES = ("common.c", "simnic_fabric.c", "simnic_qp.c", "simnic_rc.c", "simnic_wire.c",
           "simnic_ud.c", "simnic_ops.c",
           "endpoint.c", "pending.c", "datapath.c", "failover.c", "silent.c", "kept.c", "cq.c",
           "setup.c",
           "sim.c")
PREAMBLE = '#include "shift_sim.h"\n'  # the header that declares all of HEADERS' cdefs


def cdef_text() -> str:
    parts = []
    for name in HEADERS:
        with open(os.path.join(NATIVE, "include", name), encoding="utf-8") as f:
            text = f.read()
        m = re.search(r"/\* CDEF-BEGIN \*/(.*?)/\* CDEF-END \*/", text, re.S)
        if not m:
            raise RuntimeError(f"{name}: no CDEF-BEGIN/CDEF-END section")
        parts.append(m.group(1))
    return "\n".join(parts)


def _path(*parts: str) -> str:
    full = os.path.join(*parts)
    # setuptools wants paths relative to setup.py; a direct build (below) wants them whole
    return full if os.environ.get("SHIFT_CFFI_ABSPATH") else os.path.relpath(full, ROOT)


ffibuilder = FFI()
ffibuilder.cdef(cdef_text())
ffibuilder.set_source(
    "shift.impl._native",
    PREAMBLE,
    sources=[_path(NATIVE, "src", s) for s in SOURCES],
    include_dirs=[_path(NATIVE, d) for d in ("include", "src")],
    extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
