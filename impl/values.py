"""The binding's values: the work requests an application posts, the completions it polls,
and what it can observe of the connection (states, counters, statistics)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import CompletionError
from .verbs import EventType, Op, Status, WcOpcode


@dataclass(frozen=True)
class Wr:
    """A work request in the vocabulary's terms: {id, op, region, value, imm, signaled}.

    ``region`` (1..regions, 0 for none) names an 8-byte slot of the responder's memory:
    WRITE/WRITE_IMM store ``value`` there, FADD adds it, CAS swaps it in when the slot
    holds ``compare``, READ reads it. ``inline`` WRITEs carry the value in the WR (fixed
    at post time); otherwise the NIC reads it from the requester's buffer for that region
    at transmit time (zero-copy: see ``AppWrite``). SEND and SEND_IMM carry ``value`` as
    their payload into the buffer of the receive WR they consume. ``imm`` (WRITE_IMM and
    SEND_IMM only: a plain SEND has none, as in verbs) defaults to the id.
    ``eligible=False`` marks a WR that must not be re-executed on another path (the layer
    refuses a failover while it is outstanding).
    """

    id: int
    op: Op | str
    region: int = 0
    value: int = 0
    signaled: bool = True
    imm: int | None = None
    compare: int = 0
    inline: bool = True
    eligible: bool = True


@dataclass(frozen=True)
class RawSendWr:
    """A verbs-level send WR, passed through unchecked by Python (the core checks it)."""

    wr_id: int
    opcode: int
    send_flags: int = 2
    addr: int = 0
    length: int = 0
    lkey: int = 0
    num_sge: int = 1
    remote_addr: int = 0
    rkey: int = 0
    imm_data: int = 0
    compare_add: int = 0
    swap: int = 0


@dataclass(frozen=True)
class RawRecvWr:
    wr_id: int
    addr: int = 0
    length: int = 0
    lkey: int = 0
    num_sge: int = 0


@dataclass(frozen=True)
class Completion:
    """What the application polled, as verbs' ``ibv_wc``: ``wr_id`` is the WR's id (the
    receive WR's for a receive completion), ``status`` a :class:`Status`, ``opcode`` a
    :class:`WcOpcode`, ``imm`` the immediate data of a notification (None without).

    ``refused`` marks a WR the layer failed on purpose: a failover was refused because an
    atomic or an ineligible WR was outstanding (the first refused WR carries the path's
    error status, the others ``WR_FLUSH_ERR``). ``qp_num`` is the application's QP (the
    default QP's number, `Connection.qp_num`), the same before and after a failover,
    whichever QP the completion came from."""

    host: str
    wr_id: int
    status: Status
    opcode: WcOpcode | int
    byte_len: int = 0
    imm: int | None = None
    refused: bool = False
    qp_num: int = 0
    wc_flags: int = 0

    @property
    def ok(self) -> bool:
        return self.status == Status.SUCCESS

    @property
    def is_recv(self) -> bool:
        """A receive completion (a notification taken, or a flushed receive WR)?"""
        return bool(self.opcode & WcOpcode.RECV)

    def raise_for_status(self) -> Completion:
        if self.status != Status.SUCCESS:
            raise CompletionError(self)
        return self


@dataclass(frozen=True)
class FailoverEvent:
    """What a host's failover layer tells its application (`Connection.events`,
    `shift_poll_event`), in the order it happened: ``type`` (`EventType`), the ``path``
    it concerns (1 default, 2 backup), and as the type says a ``status`` (PATH_DOWN: the
    completion status that showed the failure; FAILOVER_STARTED: that error, SUCCESS when
    the peer's counter started it; FAILOVER_REFUSED: the first refused WR's) and ``wrs``
    (FAILOVER_FINISHED: the WRs replayed; FAILOVER_REFUSED: the WRs failed)."""

    host: str
    type: EventType
    path: int
    status: Status = Status.SUCCESS
    wrs: int = 0


@dataclass(frozen=True)
class SenderSeen:
    """One entry of the sender application's view (the spec's ``sndSeen``): what a
    READ or atomic returned in ``val`` (0 for any other WR or an error)."""

    wr: int
    status: str
    val: int = 0


@dataclass(frozen=True)
class ReceiverSeen:
    """One entry of the receiver application's view (the spec's ``rcvSeen``): the
    notification's sender WR (carried as immediate data; 0 for a flushed receive), the
    receive WR it consumed, the status, the regions as read right after polling, and the
    receive WR's buffer (a SEND's payload; 0 if none landed)."""

    wr: int
    recv: int
    status: str
    mem: tuple[int, ...]
    data: int = 0


@dataclass(frozen=True)
class HostState:
    """One endpoint's failover state (`shift_ep_query`). ``state`` is the side of its
    role, as a one-way connection has it (A's send side; B's receive side as Default or
    Fallback, or Error once the connection is dead); ``send_state`` and ``recv_state``
    are both sides, the spec's ``sendMode`` and ``recvMode``, and ``fresh``, ``asked``,
    ``ctr_seq`` (the number of its own latest counter, spec: ``ctrSeq``) and
    ``peer_seq`` (the number of the last of the peer's counters it took, spec:
    ``peerSeq``) the rest of its counter exchange."""

    state: str
    sent_ctr: bool
    peer_ctr: int
    replayed: bool
    fence: int | None
    epoch: int
    outstanding: int
    held: int
    buffered: int
    sends_posted: int
    sends_completed: int
    recvs_posted: int
    recvs_completed: int
    send_state: str = "Default"
    recv_state: str = "Default"
    fresh: bool = False
    asked: bool = False
    ctr_seq: int = 0
    peer_seq: int = 0


@dataclass(frozen=True)
class Stats:
    """One host's failover statistics (`Connection.stats`): a failover both hosts take
    part in counts once in each host's ``failovers``."""

    failovers: int  # failovers this host's endpoint entered
    replayed: int  # WRs it re-posted on the backup QP
    skipped: int  # notifications its replay skipped (the peer had them)
    refused: int  # WRs it failed on purpose: a failover refused (`Completion.refused`)
    failbacks: int
    ctl_sent: int
    ctl_received: int  # control messages the layer took
    backup_state_bytes: int
    ctl_rejected: int = 0  # control messages refused as not the peer's (shift_ctl_input)
    events_dropped: int = 0  # events the queue lost, oldest first, unpolled (`events`)
    kept_notes: int = 0  # ShiftCounted: notifications completed that no counter covers yet
    notes_forgotten: int = 0  # ShiftCounted: kept ones dropped past the last max_wr
    cq_kept: int = 0  # on a SharedCq: its completions other endpoints' polls kept for it


@dataclass(frozen=True)
class PathInfo:
    """What the peer needs to connect to one QP (`struct shift_path_info`): what a verbs
    program such as ibv_rc_pingpong sends over its socket."""

    qp_num: int
    psn: int  # the first PSN it sends with: the peer's rq_psn
    lid: int
    port: int
    gid: bytes  # 16 bytes
    ctl_qp_num: int = 0  # the layer's control QP beside it (a libibverbs backend's), or 0


@dataclass(frozen=True)
class SetupState:
    """How far a host's two-phase set-up got (`Connection.setup_state`)."""

    inband: bool  # its default path was connected by the application: path 2 in-band
    backup_ready: bool  # failover-ready: before it, a failure reaches the application
    keys_announced: int  # its regions' key pairs sent to the peer in-band
    keys_acked: int  # of them, how many the peer said it holds
    peer_keys: int  # the peer's pairs announced, as its last message said
    peer_keys_held: int  # of them, how many it holds


@dataclass(frozen=True)
class ImplObservation:
    """The C core's observable projection: what each application saw, failover states,
    counters. The model's (`shift.model.observe.Observation`) is the same projection of
    the spec's state, with per-host pairs as tuples; both `as_dict()` give
    `shift.vocabulary.OBSERVATION_FIELDS` as keys, and are compared that way.

    Both hosts send and receive. ``snd_seen`` and ``rcv_seen`` are the direction from A
    to B (A's send completions, B's receive completions), ``snd_seen_b`` and
    ``rcv_seen_a`` the direction from B to A (empty in one-way traffic); `direction`
    gives either. ``layer`` is each host's state as its role has it (`HostState.state`),
    ``recv_done`` B's receive counter, ``replayed`` and ``fence`` A's; ``hosts`` has both
    sides of each host (`HostState`), from which `as_dict` reads the spec's per-host
    variables."""

    snd_seen: tuple[SenderSeen, ...]
    rcv_seen: tuple[ReceiverSeen, ...]
    layer: dict[str, str] = field(hash=False)
    recv_done: int = 0
    peer_ctr: dict[str, int] = field(default_factory=dict, hash=False)
    sent_ctr: dict[str, bool] = field(default_factory=dict, hash=False)
    replayed: bool = False
    fence: int | None = None
    hosts: dict[str, HostState] = field(default_factory=dict, hash=False)
    snd_seen_b: tuple[SenderSeen, ...] = ()
    rcv_seen_a: tuple[ReceiverSeen, ...] = ()

    def direction(self, h: int) -> ImplObservation:
        """Host h's WRs to its peer as an observation whose ``snd_seen`` is h's send
        completions and ``rcv_seen`` the peer's receive completions (what
        `shift.model.observable` reads)."""
        if h == 0:
            return self
        return ImplObservation(self.snd_seen_b, self.rcv_seen_a, self.layer)

    def _per_host(self, name: str, one_way: dict[str, Any]) -> dict[str, Any]:
        """A HostState field per host; without `hosts` (an observation made by hand), the
        one-way values given (None where a one-way connection has none)."""
        if self.hosts:
            return {h: getattr(s, name) for h, s in self.hosts.items()}
        return one_way

    def as_dict(self) -> dict[str, Any]:
        """The projection with the specification's variable names (spec/State.tla), each a
        record over the hosts."""
        layer = self.layer

        def snd(seen: tuple[SenderSeen, ...]) -> list[dict[str, Any]]:
            return [{"wr": s.wr, "status": s.status, "val": s.val} for s in seen]

        def rcv(seen: tuple[ReceiverSeen, ...]) -> list[dict[str, Any]]:
            return [{"wr": r.wr, "recv": r.recv, "status": r.status,
                     "mem": {i + 1: v for i, v in enumerate(r.mem)}, "data": r.data}
                    for r in seen]
        return {
            "sndSeen": {"A": snd(self.snd_seen), "B": snd(self.snd_seen_b)},
            "rcvSeen": {"A": rcv(self.rcv_seen_a), "B": rcv(self.rcv_seen)},
            "sendMode": self._per_host("send_state", {"A": layer["A"], "B": None}),
            "recvMode": self._per_host("recv_state", {"A": None, "B": layer["B"]}),
            "recvDone": self._per_host("recvs_completed", {"A": None, "B": self.recv_done}),
            "peerCtr": dict(self.peer_ctr),
            "sentCtr": dict(self.sent_ctr),
            "fresh": self._per_host("fresh", {"A": None, "B": None}),
            "asked": self._per_host("asked", {"A": None, "B": None}),
            "replayed": self._per_host("replayed", {"A": self.replayed, "B": None}),
            "fence": {h: f or 0 for h, f in
                      self._per_host("fence", {"A": self.fence, "B": None}).items()},
            "ctrSeq": self._per_host("ctr_seq", {"A": None, "B": None}),
            "peerSeq": self._per_host("peer_seq", {"A": None, "B": None}),
        }
