"""A registered range of one host's memory, read and written from Python."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._native import ffi, lib
from .errors import ClosedError, check_errno
from .validate import int_arg
from .verbs import HOSTS

if TYPE_CHECKING:
    from .connection import Connection


class MemoryRegion:
    """A registered range of one host's memory (on both its NICs)."""

    def __init__(self, conn: Connection, host: str, offset: int, length: int, keys: Any):
        self._conn = conn
        self.host = host
        self.offset = offset
        self.length = length
        self.addr = conn._fabric._base_addr[HOSTS[host]] + offset
        self.lkey = keys.lkey
        self.rkey = keys.rkey
        self.lkey_backup = keys.lkey_backup
        self.rkey_backup = keys.rkey_backup
        self.registered = True

    def deregister(self) -> None:
        """Deregister the region on both NICs of its host (`shift_sim_dereg_mr`); the
        peer forgets its keys. A WR that uses them afterwards completes in error as on
        verbs: LOC_PROT_ERR (the lkey) or REM_ACCESS_ERR (the rkey), an application error
        that ends the connection, not a failover. Reading or writing the region, or
        deregistering it again, raises ClosedError."""
        self._check("deregister")
        keys = ffi.new("struct shift_mr_keys *", {
            "lkey": self.lkey, "rkey": self.rkey, "lkey_backup": self.lkey_backup,
            "rkey_backup": self.rkey_backup})
        check_errno(lib.shift_sim_dereg_mr(self._conn.handle, HOSTS[self.host], keys),
                    "shift_sim_dereg_mr")
        self.registered = False

    def _check(self, what: str) -> None:
        if not self.registered:
            raise ClosedError(f"{what}: the memory region of host {self.host} at offset "
                              f"{self.offset} (lkey {self.lkey:#x}) is deregistered")

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        self._check("read")
        int_arg("offset", offset, 0, self.length)
        n = self.length - offset if length is None else int_arg("length", length, 0)
        if offset + n > self.length:
            raise ValueError("read past the end of the region")
        return self._conn._fabric._mem(self.host)[self.offset + offset:self.offset + offset + n]

    def write(self, offset: int, data: bytes) -> None:
        self._check("write")
        int_arg("offset", offset, 0, self.length)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        if offset + len(data) > self.length:
            raise ValueError("write past the end of the region")
        start = self.offset + offset
        self._conn._fabric._mem(self.host)[start:start + len(data)] = bytes(data)
