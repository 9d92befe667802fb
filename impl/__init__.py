"""shift.impl: the native SHIFT core (native/: simnic + the failover layer) from Python.

    from shift.impl import Fabric, Wr
    with Fabric(retries=1) as fab:
        conn = fab.connect("Shift", regions=2)
        conn.post_recv("B", 1)
        conn.post_send("A", Wr(1, "WRITE", region=1, value=7, signaled=False))
        conn.post_send("A", Wr(2, "WRITE_IMM"))
        conn.apply(("NicFail", "A", 1))
        ...
        conn.observe()   # what each application saw, failover states, counters
        conn.stats()     # failovers, replayed, refused WRs

The compiled module is ``shift.impl._native`` (cffi, API mode), built by ``pip install``.
"""

from .api import (
    ALL_ACCESS,
    Access,
    ClosedError,
    Completion,
    CompletionError,
    Connection,
    Design,
    Fabric,
    HostState,
    MemoryRegion,
    Observation,
    Op,
    PostError,
    PreparedChain,
    RawRecvWr,
    RawSendWr,
    ReceiverSeen,
    SenderSeen,
    ShiftError,
    Stats,
    Status,
    Wr,
)

__all__ = [
    "ALL_ACCESS", "Access", "ClosedError", "Completion", "CompletionError", "Connection",
    "Design", "Fabric", "HostState", "MemoryRegion", "Observation", "Op", "PostError",
    "PreparedChain", "PreparedChain",
    "RawRecvWr", "RawSendWr", "ReceiverSeen", "SenderSeen", "ShiftError", "Stats", "Status",
    "Wr",
]
