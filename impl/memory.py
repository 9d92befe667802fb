"""A registered range of one host's memory, read and written from Python."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        int_arg("offset", offset, 0, self.length)
        n = self.length - offset if length is None else int_arg("length", length, 0)
        if offset + n > self.length:
            raise ValueError("read past the end of the region")
        return self._conn._fabric._mem(self.host)[self.offset + offset:self.offset + offset + n]

    def write(self, offset: int, data: bytes) -> None:
        int_arg("offset", offset, 0, self.length)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, not {type(data).__name__}")
        if offset + len(data) > self.length:
            raise ValueError("write past the end of the region")
        start = self.offset + offset
        self._conn._fabric._mem(self.host)[start:start + len(data)] = bytes(data)
