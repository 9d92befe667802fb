"""shift.impl: the native SHIFT core (native/: simnic + the failover layer) from Python.

    from shift.impl import Fabric, Wr
    with Fabric(retries=1) as fab:
        conn = fab.connect("Shift", regions=2)
        conn.post_recv("B", 1)
        conn.post_send("A", Wr(1, "WRITE", region=1, value=7, signaled=False))
        conn.post_send("A", Wr(2, "WRITE_IMM"))
        conn.apply({"event": "NicFail", "host": "A", "nic": 1})  # or ("NicFail", "A", 1)
        ...
        conn.poll("B", check=True)   # completions; an error raises with all it took
        conn.stats("A")              # A's failovers, replayed, refused WRs
        list(conn.events("A"))       # PATH_DOWN, FAILOVER_STARTED, ... as they happened

The guide, with the event loop and a complete example: docs/library.md.

The modules, one role each: `verbs` (the names of the vocabulary with the numbers of the C
library), `errors`, `validate` (argument checks before any C call), `values` (work
requests, completions, observations), `memory`, `fabric`, `connection`. The compiled
module is ``shift.impl._native`` (cffi, API mode), built by ``pip install``.
"""

from .connection import Connection, PreparedChain
from .errors import ClosedError, CompletionError, CoreError, PostError
from .fabric import Fabric, SharedCq
from .memory import MemoryRegion
from .values import (
    Completion,
    FailoverEvent,
    HostState,
    ImplObservation,
    PathInfo,
    RawRecvWr,
    RawSendWr,
    ReceiverSeen,
    SenderSeen,
    SetupState,
    Stats,
    Wr,
)
from .verbs import ALL_ACCESS, Access, DesignCode, EventType, Op, Status, WcOpcode

__all__ = [
    "ALL_ACCESS", "Access", "ClosedError", "Completion", "CompletionError", "Connection",
    "CoreError", "DesignCode", "EventType", "Fabric", "FailoverEvent", "HostState",
    "ImplObservation", "MemoryRegion", "Op", "PathInfo", "PostError", "PreparedChain",
    "RawRecvWr", "RawSendWr", "ReceiverSeen", "SenderSeen", "SetupState", "SharedCq", "Stats",
    "Status", "WcOpcode", "Wr",
]
