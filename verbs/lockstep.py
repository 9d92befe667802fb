"""The provider's lock-step mode from Python: one process is both hosts of a fabric it
steps itself (verbs/provider/shiftsim_lockstep.h).

`run_inside` runs a command in the lock-step environment (the simulated devices of both
hosts: `shift.verbs.devices`, host ``LOCKSTEP``); inside it, `attach` hands the provider
a `shift.impl.Fabric` (with the simnic table of the extension's copy, whose handles the
fabric's are), `events` passes the NICs' asynchronous events on to the device contexts,
`detach` lets the fabric go.
"""

from __future__ import annotations

import os
import subprocess
from functools import cache
from typing import Any

from cffi import FFI
from shift.impl import Fabric
from shift.impl._native import ffi as native_ffi
from shift.impl._native import lib as native_lib
from shift.impl.errors import check_errno

from shift.errors import ShiftError

from . import devices
from .rdma_core import ensure_built

# shiftsim_lockstep.h, with the simnic types as plain pointers (the extension's)
CDEF = """
int shiftsim_lockstep_attach(const void *ops, void *fabric);
int shiftsim_lockstep_detach(void);
int shiftsim_lockstep_events(void);
"""


def active() -> bool:
    """Does this process run in the lock-step environment?"""
    return os.environ.get("SHIFT_SIM_LOCKSTEP") == "1" and "SYSFS_PATH" in os.environ


def run_inside(argv: list[str]) -> int:
    """Run argv in the lock-step environment (its output passed through); its exit
    status."""
    build = ensure_built()
    return devices.run(build, devices.LOCKSTEP, argv, stdin=subprocess.DEVNULL).returncode


class Provider:
    """The provider's lock-step calls (the instance libibverbs loads: the same path)."""

    def __init__(self) -> None:
        if not active():
            raise ShiftError("the lock-step provider needs its environment: run the "
                             "program under `shift run --lockstep`")
        self.ffi = FFI()
        self.ffi.cdef(CDEF)
        self.lib: Any = self.ffi.dlopen(str(ensure_built().provider))
        self.ops = native_ffi.new("struct sn_ops *")
        native_lib.sn_get_ops(self.ops)

    def _ptr(self, p: Any) -> Any:
        return self.ffi.cast("void *", int(native_ffi.cast("uintptr_t", p)))

    def attach(self, fabric: Fabric) -> None:
        check_errno(self.lib.shiftsim_lockstep_attach(self._ptr(self.ops),
                                                      self._ptr(fabric.handle)),
                    "shiftsim_lockstep_attach")

    def detach(self) -> None:
        check_errno(self.lib.shiftsim_lockstep_detach(), "shiftsim_lockstep_detach")

    def events(self) -> int:
        n = int(self.lib.shiftsim_lockstep_events())
        if n < 0:
            check_errno(-n, "shiftsim_lockstep_events")
        return n


@cache
def provider() -> Provider:
    return Provider()


def attach(fabric: Fabric) -> None:
    """The provider acts on fabric from now on (no device context may be open)."""
    provider().attach(fabric)


def detach() -> None:
    provider().detach()


def events() -> int:
    """The NICs' asynchronous events, to the contexts open on their devices."""
    return provider().events()
