"""One narrator for every trace: each step in RDMA terms, and why a property broke.

It reads states as TLC prints them (the values of `shift.tlaplus.values`, the same the
explorer's `to_tla` gives), so TLC's counterexamples, the explorer's and a trace replayed
through the model are told alike. A step's lines are derived from what changed between
two states — packets that left or reached the wire, executions, memory, CQ entries, what
an application polled, the layer's state — so no line claims what did not happen: a
counter is "sent" only when a control packet entered the wire.

Variables are read per host: a variable that is a function over {"A", "B"} is the host's
entry; in the one-way specification (A sends, B receives) the others belong to the host
named in `ONE_WAY_OWNER`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shift.model.replay import Judged

HOSTS = ("A", "B")
DIRECTIONS = ("AtoB", "BtoA")
State = dict[str, Any]

# One-way specification: whose variable is it?
ONE_WAY_OWNER = {
    "program": "A", "posted": "A", "sndSeen": "A", "pending": "A", "execs": "A", "sq": "A",
    "una": "A", "nxt": "A", "retry": "A", "rnrLeft": "A", "fence": "A", "refused": "A",
    "recvPosted": "B", "rcvSeen": "B", "rpend": "B", "recvDone": "B", "mem": "B",
    "bufs": "B", "rq": "B", "epsn": "B", "saved": "B", "stores": "B", "stored": "B",
}
OP_NAMES = {"WRITE_IMM": "WRITE_WITH_IMM", "FADD": "FETCH_ADD", "CAS": "CMP_SWAP"}


def peer(h: str) -> str:
    return "B" if h == "A" else "A"


def sender_of(direction: str) -> str:
    return "A" if direction == "AtoB" else "B"


def of(state: State, var: str, host: str) -> Any:
    """Host's part of a variable (None when the host has none)."""
    v = state.get(var)
    if isinstance(v, dict) and set(v) == set(HOSTS):
        return v[host]
    return v if ONE_WAY_OWNER.get(var, host) == host else None


def wr_of(state: State, host: str, w: int) -> dict[str, Any] | None:
    prog = of(state, "program", host)
    return prog[w - 1] if prog and 0 < w <= len(prog) else None


def op_name(state: State, host: str, w: int) -> str:
    x = wr_of(state, host, w)
    return OP_NAMES.get(x["op"], x["op"]) if x else "WR"


def describe_wr(x: dict[str, Any]) -> str:
    """A WR as a verbs programmer reads it."""
    op, r, v = x["op"], x["region"], x["value"]
    what = {"WRITE": f"region {r} := {v}", "WRITE_IMM": "immediate data, no payload",
            "SEND": f"payload {v}", "READ": f"region {r}", "FADD": f"region {r} += {v}",
            "CAS": f"region {r}: {x.get('compare', 0)} -> {v}"}.get(op, "")
    if op == "WRITE_IMM" and r:
        what = f"region {r} := {v}, immediate data"
    notes = f", notification {x['note']}" if x.get("note") else ""
    if x.get("key", "OK") != "OK":
        notes += f", bad {'lkey' if x['key'] == 'LKEY' else 'rkey'}"
    return (f"{OP_NAMES.get(op, op)} ({what}{notes}, "
            f"{'signaled' if x['signaled'] else 'unsignaled'})")


def packet(state: State, sender: str, m: dict[str, Any]) -> str:
    if m["kind"] == "req":
        return f"{op_name(state, sender, m['wr'])} #{m['wr']} (PSN {m['psn']})"
    if m["kind"] == "ack":
        return f"ACK PSN {m['psn']}" + (f" returning {m['val']}" if m.get("val") else "")
    if m["kind"] == "nak":
        return f"NAK PSN {m['psn']} (remote access error)"
    if m["kind"] == "rnr":
        return f"RNR NAK PSN {m['psn']} (receiver not ready: no receive WR)"
    if m["what"] == "failback":
        n = m.get("count", 0)
        return f"fail-back notice ({n} notification{'' if n == 1 else 's'} before its fence)"
    if m["what"] == "apperr":
        return "word that its application failed the QP pair"
    if m["what"] == "reconnect":
        return f"request to reconnect: reset the default path into incarnation {m['seq']}"
    if m["what"] == "reconnected":
        return f"reconnected: its end of the default path is in incarnation {m['seq']}"
    seq = f" #{m['seq']}" if m.get("seq") else ""
    return f"counter{seq} = {m['count']}" + (", asking for an answer" if m.get("ask") else "")


@dataclass(frozen=True)
class WireChange:
    """What one step did to one channel (path p, direction d)."""

    path: int
    direction: str
    left: list[dict[str, Any]]  # packets taken from its head (delivered, dropped, lost)
    entered: list[dict[str, Any]]  # packets put at its tail


def channels(state: State) -> Iterator[tuple[int, str, list[dict[str, Any]]]]:
    for i, chans in enumerate(state.get("wire") or [], 1):
        for d in DIRECTIONS:
            yield i, d, list(chans.get(d, []))


def wire_changes(before: State, after: State) -> list[WireChange]:
    """Per channel, the packets that left its head and those that entered its tail (a FIFO:
    the longest suffix of before that is a prefix of after stayed)."""
    now = {(p, d): ch for p, d, ch in channels(after)}
    out = []
    for p, d, old in channels(before):
        new = now.get((p, d), [])
        k = next(k for k in range(len(old) + 1) if new[:len(old) - k] == old[k:])
        left, entered = old[:k], new[len(old) - k:]
        if left or entered:
            out.append(WireChange(p, d, left, entered))
    return out


def _grown(before: Any, after: Any) -> list[Any]:
    if isinstance(before, list) and isinstance(after, list) and after[:len(before)] == before:
        return after[len(before):]
    return []


def _modes(state: State, h: str) -> list[tuple[str, Any]]:
    if "layer" in state:
        return [("layer", of(state, "layer", h))]
    return [("send side", of(state, "sendMode", h)), ("receive side", of(state, "recvMode", h))]


def _event(state: State) -> tuple[str, list[Any]]:
    ev = state.get("event")
    if isinstance(ev, list) and ev:
        return str(ev[0]), list(ev[1:])
    return "Init", []


def _arrivals(before: State, after: State) -> list[tuple[WireChange, dict[str, Any]]]:
    return [(c, m) for c in wire_changes(before, after) for m in c.left]


# Events whose headline needs no more than their arguments.
HEADLINES = {
    "PostRecv": "{0}'s application posts receive WR {1}",
    "AppWrite": "{0}'s application writes {2} into its region {1}",
    "PollCq": "{0}'s application polls its CQ",
    "Progress": "{0}'s failover layer takes a step",
    "Timeout": "{0}'s retransmission timer on path {1} fires",
    "HandshakeTimeout": "{0}'s handshake timer fires: an answer it awaits did not come back",
    "CompletionTimeout": "{0}'s completion timer fires: a WR on the default path waits "
                         "for ever (RNR NAKs, retried for ever)",
    "WriteCqe": "{0}'s NIC {1} writes a receive completion it had already ACKed into host memory",
    "FatalEvent": "{0}'s layer reads IBV_EVENT_DEVICE_FATAL of its NIC {1} and completes that "
                  "QP's WRs itself, flushed",
    "LinkDown": "link {0} goes down",
    "LinkUp": "link {0} comes back",
    "NicFail": "{0}'s NIC {1} dies",
    "NicRecover": "{0}'s NIC {1} comes back",
}


def headline(before: State, after: State) -> str:
    """The event, said in RDMA terms."""
    name, args = _event(after)
    if name == "PostSend":
        h, w = args
        x = wr_of(after, h, w)
        return f"{h}'s application posts WR {w}" + (f": {describe_wr(x)}" if x else "")
    if name == "Transmit":
        h, p = args
        sent = [m for c in wire_changes(before, after) for m in c.entered]
        if sent:
            return f"{h}'s NIC {p} transmits {packet(after, h, sent[0])}"
        qp_before, qp_after = before.get("qp") or {}, after.get("qp") or {}
        if qp_before.get(h) != qp_after.get(h):
            return (f"{h}'s NIC {p} finds the next WR's lkey bad: LOC_PROT_ERR, "
                    "the QP to the error state")
        return f"{h}'s NIC {p} transmits into a dead link: the packet is lost"
    if name in ("Deliver", "Drop"):
        p, d = args
        s = sender_of(d)
        heads = [m for c, m in _arrivals(before, after)]
        what = packet(before, s, heads[0]) if heads else "a packet"
        return (f"{what} from {s} reaches {peer(s)} on path {p}" if name == "Deliver" else
                f"the wire of path {p} loses {what} from {s}")
    if name in HEADLINES:
        return HEADLINES[name].format(*args)
    return f"{name}({', '.join(map(str, args))})"


def _wire_lines(before: State, after: State) -> list[str]:
    """Packets besides the one the headline names: lost with a path, answered, sent."""
    name, _ = _event(after)
    out = []
    for c in wire_changes(before, after):
        s = sender_of(c.direction)
        if name not in ("Deliver", "Drop"):
            out += [f"{packet(before, s, m)} from {s} on path {c.path} is lost with it"
                    for m in c.left]
        if name != "Transmit":
            out += [f"{s}'s NIC {c.path} sends {packet(after, s, m)}" for m in c.entered]
    return out


def _exec_lines(before: State, after: State) -> list[str]:
    name, args = _event(after)
    nic = f"NIC {args[0]}" if name == "Deliver" else "NIC"
    out = []
    for s in HOSTS:
        old, new = of(before, "execs", s), of(after, "execs", s)
        if not isinstance(old, list) or not isinstance(new, list):
            continue
        for w, (a, b) in enumerate(zip(old, new, strict=False), 1):
            if b > a:
                again = f" (executed {b} times now)" if b > 1 else ""
                out.append(f"{peer(s)}'s {nic} executes {s}'s {op_name(after, s, w)} #{w}{again}")
    for h in HOSTS:
        old, new = of(before, "mem", h), of(after, "mem", h)
        if isinstance(old, list) and isinstance(new, list):
            out += [f"{h}'s region {r}: {a} -> {b}"
                    for r, (a, b) in enumerate(zip(old, new, strict=False), 1) if a != b]
    return out


def _cq_lines(before: State, after: State) -> list[str]:
    out = []
    for h in HOSTS:
        moved = _modes(before, h) != _modes(after, h)
        old, new = of(before, "cq", h) or [], of(after, "cq", h) or []
        for p, (a, b) in enumerate(zip(old, new, strict=False), 1):
            for e in _grown(a, b):
                what = (f"receive WR {e['recv']}" + (f" (consumed by WR {e['wr']})" if e["wr"]
                                                     else "")
                        if e.get("recv") else f"WR {e['wr']}")
                out.append(f"{h}'s CQ {p}: {what} {e['status']}")
            if moved and a and not b:  # a failover takes the entries off the CQ at once
                out.append(f"{h}'s layer takes {len(a)} "
                           f"entr{'y' if len(a) == 1 else 'ies'} off CQ {p}")
        out += _unwritten_lines(before, after, h)
        out += _fatal_lines(before, after, h)
        out += _resent_lines(before, after, h)
        for p, (a, b) in enumerate(zip(of(before, "qp", h) or [],
                                       of(after, "qp", h) or [], strict=False), 1):
            if a != b:
                out.append(f"{h}'s QP {p}: {a} -> {b}")
    return out


def _unwritten_lines(before: State, after: State, h: str) -> list[str]:
    """Receive completions host h's NICs made (the ACK gone) but have not yet written into
    host memory (AckBeforeCqe), and those a dying NIC loses."""
    out = []
    old, new = of(before, "unwritten", h) or [], of(after, "unwritten", h) or []
    dies = _event(after)[0] == "NicFail"
    for p, (a, b) in enumerate(zip(old, new, strict=False), 1):
        out += [f"{h}'s NIC {p} has not yet written the completion of receive WR "
                f"{e['recv']} (consumed by WR {e['wr']}) into host memory"
                for e in _grown(a, b)]
        if dies and a and not b:
            recvs = ", ".join(str(e["recv"]) for e in a)
            out.append(f"the completion of receive WR {recvs}, ACKed but not yet written, "
                       f"dies with {h}'s NIC {p}")
    return out


def _fatal_lines(before: State, after: State, h: str) -> list[str]:
    """A NIC of host h falls silent at its death (DeviceFatal: no completion, not even a
    flush, until the layer reads the event); a failover's drain, or a reconnect's reset,
    takes the event's place."""
    old, new = of(before, "fatal", h), of(after, "fatal", h)
    if not isinstance(old, list) or not isinstance(new, list):
        return []
    out = []
    for p, (was, now) in enumerate(zip(old, new, strict=True), start=1):
        if was <= 0 < now:
            out.append(f"{h}'s NIC {p} completes nothing more, not even a flush: its WRs wait "
                       f"until {h}'s layer reads the asynchronous event")
        elif was > 0 >= now and _event(after)[0] != "FatalEvent":
            out.append(f"{h}'s QP {p} was drained or reset: its dead NIC's event, read later, "
                       f"finds nothing left to flush")
    return out


def _resent_lines(before: State, after: State, h: str) -> list[str]:
    """Acked notifications a failover replays again (D.keepNotes: F7), and the
    completions of those the layer drops because the application had their success."""
    old, new = of(before, "resent", h), of(after, "resent", h)
    if not hasattr(old, "members") or not hasattr(new, "members"):
        return []
    was, now = set(old.members), set(new.members)
    return ([f"{h}'s layer replays acked WR {w} (no counter of the peer covers it)"
             for w in sorted(now - was)]
            + [f"{h}'s layer drops the completion of replayed WR {w}: its application had "
               f"its success" for w in sorted(was - now)])


def _seen_lines(before: State, after: State) -> list[str]:
    out = []
    for h in HOSTS:
        for e in _grown(of(before, "sndSeen", h), of(after, "sndSeen", h)):
            val = f", returned {e['val']}" if e.get("val") else ""
            out.append(f"{h}'s application sees WR {e['wr']} complete: {e['status']}{val}")
        for e in _grown(of(before, "rcvSeen", h), of(after, "rcvSeen", h)):
            mem = ", ".join(f"region {r} = {v}" for r, v in enumerate(e["mem"], 1)) \
                if isinstance(e["mem"], list) else str(e["mem"])
            who = f"WR {e['wr']}'s notification" if e["wr"] else "a flushed receive"
            data = f", payload {e['data']}" if e.get("data") else ""
            out.append(f"{h}'s application takes {who} in receive WR {e['recv']}: "
                       f"{e['status']}; reads {mem}{data}")
    return out


def _layer_lines(before: State, after: State) -> list[str]:
    out = []
    for h in HOSTS:
        for (side, a), (_, b) in zip(_modes(before, h), _modes(after, h), strict=True):
            if a != b:
                out.append(f"{h}'s {side}: {a} -> {b}")
        q_old, q_new = of(before, "sq", h) or [], of(after, "sq", h) or []
        if len(q_old) > 1 and len(q_new) > 1 and _event(after)[0] == "Progress":
            re = _grown(q_old[1], q_new[1])
            if re:
                out.append(f"{h} re-posts WR {', '.join(map(str, re))} on QP 2")
        skipped = [e["wr"] for e in _grown(of(before, "buffered", h), of(after, "buffered", h))
                   if not e.get("recv") and e["status"] == "SUCCESS"
                   and _event(after)[0] == "Progress"]
        if skipped:
            out.append(f"{h} skips WR {', '.join(map(str, skipped))}, reported successful")
        sent_old, sent_new = of(before, "sentCtr", h), of(after, "sentCtr", h)
        ctl_out = any(m["kind"] == "ctl" for c in wire_changes(before, after)
                      if sender_of(c.direction) == h for m in c.entered)
        if sent_new and not sent_old and not ctl_out:
            out.append(f"{h} counts its counter as sent, but nothing leaves: its QP 2 or NIC 2 "
                       "is down")
        p_old, p_new = of(before, "peerCtr", h), of(after, "peerCtr", h)
        if p_old != p_new:
            out.append(f"{h} holds the peer's counter: {p_new}")
        out += _duplicate_lines(before, after, h)
        if of(after, "peerFailed", h) and not of(before, "peerFailed", h):
            out.append(f"{h} takes its peer's word: the QP pair is failed, both QPs to the "
                       "error state, every outstanding WR and receive WR back flushed")
        w_old, w_new = of(before, "failbackAt", h), of(after, "failbackAt", h)
        if w_new and w_new != w_old:
            out.append(f"{h}'s receive side waits on the backup path until it has taken "
                       f"{w_new} notification{'' if w_new == 1 else 's'}: the completions of "
                       "some are not yet in host memory (F11)")
        elif w_old and not w_new and of(after, "recvMode", h) == of(before, "recvMode", h):
            out.append(f"{h}'s receive side stops waiting to move back")
        f_old, f_new = of(before, "fence", h), of(after, "fence", h)
        if f_old != f_new:
            out.append(f"{h}'s fail-back fence: WR {f_new}" if f_new else
                       f"{h}'s fail-back fence released")
    if after.get("copies", 0) != before.get("copies", 0):
        out.append("a CPU copies the payload out of the staging buffer")
    if after.get("queried") and not before.get("queried"):
        out.append("the replay decision read the responder NIC's expected PSN")
    return out


def _delivered(before: State, after: State,
               kind: Callable[[dict[str, Any]], bool]) -> tuple[list[Any], list[dict[str, Any]]]:
    """A Deliver step's arguments and the arrived packets `kind` accepts (none when the
    step is no Deliver)."""
    name, args = _event(after)
    if name != "Deliver":
        return args, []
    return args, [m for _, m in _arrivals(before, after) if kind(m)]


def _sends_ctl(before: State, after: State, h: str) -> bool:
    """Did h send a control message in this step (an answer to what reached it)?"""
    return any(m["kind"] == "ctl" for c in wire_changes(before, after)
               if sender_of(c.direction) == h for m in c.entered)


def _duplicate_lines(before: State, after: State, h: str) -> list[str]:
    """A counter that reached h and was not taken: a resend of one h took already (or an
    older one), answered again or ignored."""
    if of(before, "peerSeq", h) != of(after, "peerSeq", h):
        return []
    args, heads = _delivered(before, after, lambda m: m["kind"] == "ctl"
                             and m["what"] == "counter" and bool(m.get("seq")))
    if not heads or peer(sender_of(args[1])) != h:
        return []
    seq, last = heads[0]["seq"], of(before, "peerSeq", h)
    if seq > last:
        return [f"{h}'s NIC 2 is dead or its QP 2 in the error state: the counter is lost"]
    if seq < last:
        return [f"{h} took a later counter already: it ignores this one"]
    answered = _sends_ctl(before, after, h)
    return [f"{h} took counter #{heads[0]['seq']} already: a resend, "
            + ("and it asks, so " + h + " sends its own counter again" if answered
               else "ignored")]


def _reconnect_lines(before: State, after: State) -> list[str]:
    """A request to reconnect that reached its host and was neither taken nor answered."""
    args, heads = _delivered(before, after, lambda m: m["kind"] == "ctl"
                             and m["what"] == "reconnect")
    if not heads:
        return []
    h = peer(sender_of(args[1]))
    answered = _sends_ctl(before, after, h)
    if answered or of(before, "incarnation", h) != of(after, "incarnation", h):
        return []
    if heads[0]["seq"] < of(before, "incarnation", h):
        return [f"{h}'s end is in a later incarnation already: it ignores this older request"]
    return [f"{h} cannot reset its end of the default path now (its NIC 1 or 2 is down, its "
            f"default QP still holds WRs or owes completions, or its application failed the "
            f"QP pair): it drops the request, which {peer(h)}'s handshake timer sends again"]


def _response_lines(before: State, after: State) -> list[str]:
    """A request that reached its responder and did not execute: a duplicate (re-ACKed)
    or one the responder discarded."""
    args, heads = _delivered(before, after, lambda m: m["kind"] == "req")
    if not heads:
        return []
    s = sender_of(args[1])
    execs_moved = of(before, "execs", s) != of(after, "execs", s)
    acked = _entered(before, after, "ack")
    if execs_moved:
        return []
    if acked:
        return [f"{peer(s)}'s NIC saw PSN {heads[0]['psn']} before: a duplicate, re-ACKed "
                "and not executed again"]
    if _entered(before, after, "rnr"):
        return [f"{peer(s)}'s NIC has no receive WR for it: receiver not ready, it answers "
                "with an RNR NAK"]
    return [f"{peer(s)}'s NIC discards it (not the expected PSN, no receive WR posted, or "
            "its NIC or QP is down)"]


def _entered(before: State, after: State, kind: str) -> bool:
    """Did a packet of this kind enter the wire in this step?"""
    return any(m["kind"] == kind for c in wire_changes(before, after) for m in c.entered)


def _rnr_lines(before: State, after: State) -> list[str]:
    """An RNR NAK that reached its requester: it goes back to the WR and will retransmit
    it (RnrRetry), or its RNR retries ran out."""
    args, heads = _delivered(before, after, lambda m: m["kind"] == "rnr")
    if not heads:
        return []
    h, p = peer(sender_of(args[1])), args[0]
    psn = heads[0]["psn"]
    if of(after, "nxt", h) == of(before, "nxt", h) and of(after, "qp", h) == of(before, "qp", h):
        return []  # a stale RNR NAK: ignored
    if (of(after, "qp", h) or {}) != (of(before, "qp", h) or {}):
        return [f"{h}'s NIC {p} is out of RNR retries for PSN {psn}"]
    left = (of(after, "rnrLeft", h) or [None, None])[p - 1]
    again = "for ever (rnr_retry = 7)" if left == 7 else f"{left} more time(s)"
    return [f"{h}'s NIC {p} goes back to PSN {psn} to retransmit it: it will retry {again}"]


def _implicit_nak_lines(before: State, after: State) -> list[str]:
    """An ACK past a READ or atomic whose response was lost (ImplicitNak): the requester
    goes back to it at the cost of a retry, or has none left and fails it."""
    args, heads = _delivered(before, after, lambda m: m["kind"] == "ack")
    if not heads:
        return []
    h, p = peer(sender_of(args[1])), args[0]
    una_b, una_a = (of(before, "una", h) or [0, 0])[p - 1], (of(after, "una", h) or [0, 0])[p - 1]
    nxt_b, nxt_a = (of(before, "nxt", h) or [0, 0])[p - 1], (of(after, "nxt", h) or [0, 0])[p - 1]
    psn = heads[0]["psn"]
    if nxt_a < nxt_b and una_a <= psn:
        left = (of(after, "retry", h) or [None, None])[p - 1]
        return [f"{h}'s NIC {p} takes ACK PSN {psn} as an implicit NAK of PSN {una_a}, whose "
                f"response was lost: it goes back to it, {left} retr"
                f"{'y' if left == 1 else 'ies'} left"]
    if of(after, "qp", h) != of(before, "qp", h) and una_a == una_b and psn > una_b:
        return [f"{h}'s NIC {p} takes ACK PSN {psn} as an implicit NAK of a READ or atomic "
                f"whose response was lost, with no retry left"]
    return []


def narrate_step(before: State, after: State) -> list[str]:
    """The lines of one step: the headline, then what changed, in RDMA terms."""
    body = (_response_lines(before, after) + _reconnect_lines(before, after)
            + _rnr_lines(before, after)
            + _implicit_nak_lines(before, after)
            + _exec_lines(before, after)
            + _wire_lines(before, after)
            + _cq_lines(before, after) + _seen_lines(before, after)
            + _layer_lines(before, after))
    return [headline(before, after), *body]


def initial_lines(state: State) -> list[str]:
    out = []
    for h in HOSTS:
        prog = of(state, "program", h) or []
        for w, x in enumerate(prog, 1):
            out.append(f"{h}'s WR {w}: {describe_wr(x)}")
    return out


# -- why a property broke ------------------------------------------------------------

def _value_after(prog: list[dict[str, Any]], r: int, k: int) -> int:
    """Workloads.tla's ValueAfter: region r after the first k WRs, each executed once."""
    v = 0
    for x in prog[:k]:
        if x["region"] != r:
            continue
        if x["op"] in ("WRITE", "WRITE_IMM"):
            v = x["value"]
        elif x["op"] == "FADD":
            v += x["value"]
        elif x["op"] == "CAS" and v == x.get("compare", 0):
            v = x["value"]
    return v


def _taken(state: State, h: str) -> list[dict[str, Any]]:
    return [e for e in of(state, "rcvSeen", h) or [] if e["status"] == "SUCCESS"]


def why(prop: str, state: State) -> str | None:
    """Why the state breaks the property, in one line (None when the narrator has no
    account of that property)."""
    for s in HOSTS:  # s sends, its peer g receives
        g, prog = peer(s), of(state, "program", s) or []
        execs = of(state, "execs", s) or []
        twice = [w for w, n in enumerate(execs, 1) if n > 1]
        if prop == "ExactlyOnceExecution" and twice:
            return (f"{s}'s WR {twice[0]} ({op_name(state, s, twice[0])}) took effect at {g} "
                    f"{execs[twice[0] - 1]} times")
        if prop == "AtomicSafety":
            bad = [w for w in twice if prog[w - 1]["op"] in ("FADD", "CAS")]
            if bad:
                return f"{s}'s atomic WR {bad[0]} was applied {execs[bad[0] - 1]} times"
        notes = [w for w, x in enumerate(prog, 1) if x.get("note")]
        for i, e in enumerate(_taken(state, g), 1):
            if prop == "NotificationIntegrity":
                if i > len(notes) or e["wr"] != notes[i - 1]:
                    want = f"WR {notes[i - 1]}" if i <= len(notes) else "none"
                    return (f"{g}'s notification {i} is WR {e['wr']}; {s} posted {want} "
                            "as that notification")
                if e["recv"] != i:
                    return (f"{g}'s notification {i} (WR {e['wr']}) consumed receive WR "
                            f"{e['recv']}, not {i}")
            if prop == "DataAtNotification" and isinstance(e["mem"], list):
                for r, v in enumerate(e["mem"], 1):
                    want = _value_after(prog, r, e["wr"] - 1)
                    if v != want:
                        return (f"when {g} took WR {e['wr']}'s notification, its region {r} "
                                f"held {v}; {s}'s writes before it leave {want}")
        if prop == "CompletionIntegrity":
            seen = of(state, "sndSeen", s) or []
            for a, b in zip(seen, seen[1:], strict=False):
                if b["wr"] <= a["wr"]:
                    return (f"{s}'s application saw WR {b['wr']} complete after WR {a['wr']}: "
                            "out of post order")
            for e in seen:
                if e["status"] == "SUCCESS" and execs and execs[e["wr"] - 1] == 0:
                    return (f"{s}'s application saw WR {e['wr']} succeed, but it never took "
                            f"effect at {g}")
    if prop == "Opacity" and state.get("queried"):
        return "a failover decision read the responder NIC's transport state (its PSN)"
    if prop == "ZeroCopy" and state.get("copies"):
        return f"a CPU copied {state['copies']} payload(s): the NIC did not place them"
    return None


def event_text(state: State) -> str:
    """The step's event in the one syntax every command reads and writes: PostSend(A, 1)."""
    name, args = _event(state)
    return f"{name}({', '.join(map(str, args))})" if args else name


def tell(states: list[State], breaks: dict[int, list[str]],
         raw: Callable[[State, State], list[str]] | None = None,
         init: str | None = None) -> list[str]:
    """A whole trace, numbered steps (state k is step k + 1): the workload, then each
    step's lines; under the step that breaks a property, `!! P violated: why`. raw (for
    --verbose) adds the step's variable-level changes; init names the first event when the
    caller knows more of it than the state does (the workload of an event trace)."""
    out = []
    for k, st in enumerate(states):
        if k == 0:
            name, args = _event(st)
            out.append(f"  {1:>2}. " + (init or name + (f"({', '.join(map(str, args))})"
                                                          if args else "")))
            out += [f"      {line}" for line in initial_lines(st)]
        else:
            first, *rest = narrate_step(states[k - 1], st)
            out.append(f"  {k + 1:>2}. {event_text(st)}: {first}")
            out += [f"      {line}" for line in rest]
            if raw is not None:
                out += [f"      . {line}" for line in raw(states[k - 1], st)]
        for prop in breaks.get(k, []):
            reason = why(prop, st)
            out.append(f"      !! {prop} violated" + (f": {reason}" if reason else ""))
    return out


def breaks_of(result: Judged) -> dict[int, list[str]]:
    """State index -> the invariants a judged trace first breaks there."""
    breaks: dict[int, list[str]] = {}
    for prop, k in result.first_violation.items():
        breaks.setdefault(k, []).append(prop)
    return breaks


def tell_judged(result: Judged,
                raw: Callable[[State, State], list[str]] | None = None) -> list[str]:
    """A trace the model ran and judged (`shift.model.replay.judge`), told as `shift
    replay` tells it: `tell`'s steps, then how a lasso or a stuttering end goes on. Every
    command that shows the model's trace (`replay`, `prove`) prints these lines."""
    from shift.model.tla import to_tla  # the model's states as TLC prints them

    states = [to_tla(s, ev) for s, ev in zip(result.states, result.events, strict=True)]
    out = tell(states, breaks_of(result), raw, init=str(result.events[0]))
    if result.loop is not None:
        out.append(f"      ... and back to step {result.loop + 1}, forever")
    elif result.stutters:
        out.append("      ... and nothing more happens, forever")
    return out
