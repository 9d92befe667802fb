"""Message sequence charts of a trace: host A | its NICs | B's NICs | host B, one row per
step, an arrow per packet from the step that sent it to the step it arrived, was dropped
or was lost with its path. As text for the terminal and as SVG for files and reports.

Built from the same states the narrator reads (`shift.narrate`): a packet is matched to
its arrival by the channel's FIFO order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape

from shift.narrate import (
    HOSTS,
    State,
    _event,
    narrate_step,
    packet,
    sender_of,
    wire_changes,
)

# Lanes, left to right; path 2's NICs inside path 1's so that arrows do not cross.
LANES = ("A", "A.1", "A.2", "B.2", "B.1", "B")
LANE_TITLES = ("host A", "A NIC 1", "A NIC 2", "B NIC 2", "B NIC 1", "host B")
DELIVERED, DROPPED, LOST, IN_FLIGHT = "delivered", "dropped", "lost", "in flight"


@dataclass
class Arrow:
    sent: int  # the step (row) that put the packet on the wire
    path: int
    direction: str
    label: str
    ended: int | None = None  # the step it left the wire, None while in flight
    fate: str = IN_FLIGHT

    @property
    def lanes(self) -> tuple[str, str]:
        s = sender_of(self.direction)
        r = "B" if s == "A" else "A"
        return f"{s}.{self.path}", f"{r}.{self.path}"


@dataclass
class Row:
    step: int  # 1-based, as the narration numbers steps
    text: str
    marks: dict[str, str] = field(default_factory=dict)  # lane -> glyph


@dataclass
class Chart:
    rows: list[Row]
    arrows: list[Arrow]
    broken: dict[int, str]  # step -> the property it breaks


def _local_lane(state: State) -> tuple[str, str] | None:
    """The lane an event happens on and its glyph."""
    name, args = _event(state)
    if name in ("PostSend", "PostRecv", "AppWrite", "PollCq", "Progress"):
        return args[0], "●"
    if name == "Timeout":
        return f"{args[0]}.{args[1]}", "⏱"
    if name == "CompletionTimeout":  # the layer's timer, on the host's lane
        return args[0], "⏱"
    if name == "FatalEvent":  # the layer reads a NIC's death, on the NIC's lane
        return f"{args[0]}.{args[1]}", "⚠"
    if name == "WriteCqe":  # the NIC writes a completion into host memory
        return f"{args[0]}.{args[1]}", "▾"
    if name == "NicFail":
        return f"{args[0]}.{args[1]}", "✕"
    if name == "NicRecover":
        return f"{args[0]}.{args[1]}", "↺"
    return None


def build(states: list[State], breaks: dict[int, list[str]] | None = None) -> Chart:
    """The chart of a trace (state k is step k + 1)."""
    rows = [Row(1, "Init")]
    arrows: list[Arrow] = []
    queues: dict[tuple[int, str], list[Arrow]] = {}
    for k in range(1, len(states)):
        before, after = states[k - 1], states[k]
        step = k + 1
        lines = narrate_step(before, after)
        name, args = _event(after)
        # A poll or a layer step says little by itself: its first effect says what it did.
        more = name in ("PollCq", "Progress") and len(lines) > 1
        row = Row(step, lines[0] + (f": {lines[1]}" if more else ""))
        local = _local_lane(after)
        if local is not None:
            row.marks[local[0]] = local[1]
        if name in ("LinkDown", "LinkUp"):
            for h in HOSTS:
                row.marks[f"{h}.{args[0]}"] = "╳" if name == "LinkDown" else "↺"
        for c in wire_changes(before, after):
            q = queues.setdefault((c.path, c.direction), [])
            for _ in c.left:
                if q:
                    a = q.pop(0)
                    a.ended = step
                    a.fate = {"Deliver": DELIVERED, "Drop": DROPPED}.get(name, LOST)
            for m in c.entered:
                a = Arrow(step, c.path, c.direction, packet(after, sender_of(c.direction), m))
                arrows.append(a)
                q.append(a)
        rows.append(row)
    broken = {k + 1: ", ".join(ps) for k, ps in (breaks or {}).items()}
    return Chart(rows, arrows, broken)


# -- text ---------------------------------------------------------------------------

def _fate_text(a: Arrow) -> str:
    if a.ended is None:
        return "still in flight"
    return {DELIVERED: f"arrives at step {a.ended}", DROPPED: f"dropped at step {a.ended}",
            LOST: f"lost at step {a.ended}"}[a.fate]


def render_text(chart: Chart) -> list[str]:
    """One line per step: a column per lane (● a local event, ○ a packet sent, ▶ or ◀ one
    arriving, ✕ lost or a dead NIC), then what happened; packets sent are listed under
    their step with their fate."""
    head = "        " + " ".join(f"{t:^3}" for t in ("A", "A1", "A2", "B2", "B1", "B"))
    out = [head]
    sent: dict[int, list[Arrow]] = {}
    arrived: dict[int, list[Arrow]] = {}
    for a in chart.arrows:
        sent.setdefault(a.sent, []).append(a)
        if a.ended is not None:
            arrived.setdefault(a.ended, []).append(a)
    for row in chart.rows:
        marks = dict(row.marks)
        for a in sent.get(row.step, []):
            marks[a.lanes[0]] = "○"
        for a in arrived.get(row.step, []):
            if a.fate == DELIVERED:
                marks[a.lanes[1]] = "▶" if a.direction == "AtoB" else "◀"
            else:
                marks.setdefault(a.lanes[0], "✕")
        cells = " ".join(f"{marks.get(lane, '│'):^3}" for lane in LANES)
        flag = f"   !! {chart.broken[row.step]}" if row.step in chart.broken else ""
        out.append(f"  {row.step:>3}. {cells}  {row.text}{flag}")
        for a in sent.get(row.step, []):
            arrow = "──▶" if a.direction == "AtoB" else "◀──"
            out.append(f"{'':>30}{arrow} {a.label} on path {a.path}: {_fate_text(a)}")
    return out


# -- SVG ----------------------------------------------------------------------------

ROW, TOP, LEFT, TEXT_X = 24, 56, 40, 560
LANE_X = {lane: LEFT + i * 90 for i, lane in enumerate(LANES)}
PATH_COLOUR = {1: "#1f5fa8", 2: "#c2590a"}


def _y(step: int) -> int:
    return TOP + (step - 1) * ROW


def _arrow_svg(a: Arrow, last: int) -> list[str]:
    x1, x2 = LANE_X[a.lanes[0]], LANE_X[a.lanes[1]]
    y1 = _y(a.sent)
    y2 = _y(a.ended if a.ended is not None else last + 1)
    colour = PATH_COLOUR.get(a.path, "#444")
    label = escape(a.label)
    if a.fate in (DROPPED, LOST) or a.ended is None:
        xm = (x1 + x2) / 2
        dash = ' stroke-dasharray="4 3"' if a.ended is None else ""
        end = ([f'<text x="{xm}" y="{y2 + 5}" class="lost" text-anchor="middle">✕</text>']
               if a.ended is not None else [])
        return [f'<line class="packet {a.fate.replace(" ", "-")}" x1="{x1}" y1="{y1}" '
                f'x2="{xm}" y2="{y2}" stroke="{colour}"{dash}><title>{label}: '
                f'{_fate_text(a)}</title></line>', *end]
    return [f'<line class="packet delivered" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" '
            f'stroke="{colour}" marker-end="url(#head{a.path})"><title>{label}: '
            f'{_fate_text(a)}</title></line>',
            f'<text x="{(x1 + x2) / 2}" y="{(y1 + y2) / 2 - 3}" class="label" '
            f'text-anchor="middle" fill="{colour}">{label}</text>']


def render_svg(chart: Chart, title: str = "") -> str:
    """The chart as a standalone SVG document."""
    last = chart.rows[-1].step if chart.rows else 1
    height = _y(last + 1) + ROW
    width = TEXT_X + 620
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="msc" width="{width}" '
           f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" '
           'font-size="12">',
           "<style>.label{font-size:10px}.lost{fill:#b00;font-weight:bold}"
           ".step{fill:#555}.broken{fill:#b00;font-weight:bold}</style>",
           "<defs>" + "".join(
               f'<marker id="head{p}" markerWidth="8" markerHeight="8" refX="7" refY="4" '
               f'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="{c}"/></marker>'
               for p, c in PATH_COLOUR.items()) + "</defs>"]
    if title:
        out.append(f'<text x="{LEFT}" y="16" font-weight="bold">{escape(title)}</text>')
    for lane, name in zip(LANES, LANE_TITLES, strict=True):
        x = LANE_X[lane]
        out.append(f'<text x="{x}" y="{TOP - 18}" text-anchor="middle" class="lane">'
                   f"{name}</text>")
        out.append(f'<line x1="{x}" y1="{TOP - 10}" x2="{x}" y2="{height - ROW}" '
                   'stroke="#999"/>')
    for row in chart.rows:
        y = _y(row.step)
        broken = row.step in chart.broken
        text = escape(row.text + (f"  !! {chart.broken[row.step]} violated" if broken else ""))
        out.append(f'<text x="{TEXT_X}" y="{y + 4}" class="{"broken" if broken else "step"}">'
                   f"{row.step}. {text}</text>")
        for lane, glyph in row.marks.items():
            if lane in LANE_X:
                out.append(f'<text x="{LANE_X[lane]}" y="{y + 4}" text-anchor="middle" '
                           f'class="mark">{glyph}</text>')
    for a in chart.arrows:
        out += _arrow_svg(a, last)
    out.append("</svg>")
    return "\n".join(out) + "\n"
