"""The binding's constants: each name from the vocabulary, each number from the C library.

Nothing here is typed in twice. The names an application uses (operations, statuses,
designs, failover states and steps) are `shift.vocabulary`'s; the numbers are the C
headers' enums, read from the compiled module (`ffi.typeof("enum ...")`), so a change of a C
enum shows up here — and in tests/impl/test_vocabulary.py, which ties every name to its
C value and every vocabulary event to a binding method and a C entry point.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import IntEnum, StrEnum
from functools import reduce
from operator import or_

from shift import vocabulary as vocab

from ._native import ffi, lib

__all__ = [
    "ALL_ACCESS", "DESIGN_CODES", "DIRECTIONS", "HOSTS", "HOST_NAMES", "OP_CODES", "PATHS",
    "RECV_STATE_NAMES", "STATE_NAMES", "STEP_NAMES", "TWO_SIDED", "WITH_IMM", "Access",
    "DesignCode", "EventType", "Op", "Status", "WcOpcode", "c_enum", "c_name",
]


def c_enum(ctype: str, prefix: str) -> dict[str, int]:
    """A C enum of the library as {name without prefix: value}, in the order of values."""
    items = sorted(ffi.typeof(ctype).relements.items(), key=lambda kv: kv[1])
    return {k.removeprefix(prefix): v for k, v in items}


def c_name(name: str) -> str:
    """A vocabulary name as its C enumerator's suffix: WaitSignaled -> WAIT_SIGNALED."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).upper()


def _by_name(ctype: str, prefix: str, names: tuple[str, ...],
             spell: Callable[[str], str] = c_name) -> dict[str, int]:
    """Each vocabulary name's value in a C enum, whose enumerators spell it `spell(name)`."""
    values = c_enum(ctype, prefix)
    missing = [f"{prefix}{spell(n)}" for n in names if spell(n) not in values]
    if missing:
        raise ImportError(f"the C library's {ctype} lacks {', '.join(missing)}")
    return {n: values[spell(n)] for n in names}


def _names_by_value(ctype: str, prefix: str, names: tuple[str, ...]) -> tuple[str, ...]:
    """The vocabulary's names indexed by their C values, which must count 0..n-1."""
    values = _by_name(ctype, prefix, names)
    if sorted(values.values()) != list(range(len(names))):
        raise ImportError(f"the C library's {ctype} does not count 0..{len(names) - 1}")
    return tuple(sorted(names, key=values.__getitem__))


# The fabric: hosts and directions as simnic numbers them; paths are 1 and 2 in C too.
HOST_NAMES = _names_by_value("enum sn_host", "SN_HOST_", vocab.HOSTS)  # by number
HOSTS = {h: i for i, h in enumerate(HOST_NAMES)}
DIRECTIONS = _by_name("enum sn_dir", "SN_", vocab.DIRECTIONS, spell=str)
PATHS = vocab.PATHS

Status = IntEnum("Status", _by_name("enum shift_wc_status", "SHIFT_WC_", vocab.STATUSES),
                 module=__name__)
Status.__doc__ = "Work completion status: ``ibv_wc_status`` values under their verbs names."

Op = StrEnum("Op", {o: o for o in vocab.LIBRARY_OPS}, module=__name__)
Op.__doc__ = ("Operations of a work request: the event vocabulary's (docs/design.md), where "
              "SEND is verbs' plain SEND, and SEND_IMM (verbs' SEND_WITH_IMM).")

WcOpcode = IntEnum("WcOpcode", c_enum("enum shift_wc_opcode", "SHIFT_WC_"), module=__name__)
WcOpcode.__doc__ = "Completion opcodes: ``ibv_wc_opcode`` values under their verbs names."

EventType = IntEnum("EventType", c_enum("enum shift_event_type", "SHIFT_EVENT_"),
                    module=__name__)
EventType.__doc__ = ("What the failover layer tells the application about its paths "
                     "(`enum shift_event_type`): PATH_DOWN, FAILOVER_STARTED, ...")

# The verbs opcode each operation is posted as.
OP_CODES = {
    Op.WRITE: lib.SHIFT_WR_RDMA_WRITE,
    Op.WRITE_IMM: lib.SHIFT_WR_RDMA_WRITE_WITH_IMM,
    Op.SEND: lib.SHIFT_WR_SEND,
    Op.READ: lib.SHIFT_WR_RDMA_READ,
    Op.FADD: lib.SHIFT_WR_ATOMIC_FETCH_AND_ADD,
    Op.CAS: lib.SHIFT_WR_ATOMIC_CMP_AND_SWP,
    Op.SEND_IMM: lib.SHIFT_WR_SEND_WITH_IMM,
}
TWO_SIDED = (Op.WRITE_IMM, Op.SEND, Op.SEND_IMM)  # notifications: they consume a receive WR
WITH_IMM = (Op.WRITE_IMM, Op.SEND_IMM)  # they carry immediate data
# The completion opcodes of the WRs that return a value into their local buffer.
RETURNING = (lib.SHIFT_WC_RDMA_READ, lib.SHIFT_WC_COMP_SWAP, lib.SHIFT_WC_FETCH_ADD)


class DesignCode(StrEnum):
    """The failover designs the C core implements (`enum shift_design`), under their
    names in spec/designs.toml (`Shift` is SHIFT_DESIGN_SHIFT, and so on)."""

    SHIFT = "Shift"
    NAIVE_REPLAY = "NaiveReplay"
    NO_FAILOVER = "NoFailover"
    SHIFT_PREFIX = "ShiftPrefix"
    SHIFT_COUNTED = "ShiftCounted"


DESIGN_CODES = {DesignCode(d): v for d, v in
                _by_name("enum shift_design", "SHIFT_DESIGN_", tuple(DesignCode)).items()}

# `struct shift_ep_info`'s states (a send side's, a receive side's) and `shift_progress`'s
# result, as names.
STATE_NAMES = _names_by_value("enum shift_state", "SHIFT_STATE_", vocab.LAYER_STATES)
RECV_STATE_NAMES = _names_by_value("enum shift_recv_state", "SHIFT_RECV_", vocab.RECV_MODES)
STEP_NAMES = _names_by_value("enum shift_step", "SHIFT_STEP_", vocab.PROGRESS_STEPS)

Access = IntEnum("Access", c_enum("enum shift_access_flags", "SHIFT_ACCESS_"),
                 module=__name__)
Access.__doc__ = "Memory registration access flags (``ibv_access_flags``)."
ALL_ACCESS = reduce(or_, (int(a) for a in Access))
