"""`shift check --report DIR`: one HTML page of a run — the verdict table, then each
counterexample with its message sequence chart and its narration. Static: no script, so a
CI artefact viewer shows it as written."""

from __future__ import annotations

from html import escape
from pathlib import Path

from shift.chart import build, render_svg
from shift.report import RunInfo, cell, counterexample, design_seconds
from shift.spec.catalog import Catalog
from shift.tlc.check import CellVerdict

STYLE = """
body{font-family:sans-serif;margin:2em;max-width:1400px}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}
td.holds{background:#eef7ee}td.expected{background:#fff4e0}td.bad{background:#f8d0d0}
td.unchecked{background:#eeeeee}
pre{background:#f6f6f6;padding:1em;font-size:12px;overflow-x:auto}
"""


def _class(v: CellVerdict) -> str:
    if not v.checked:
        return "unchecked"
    if not v.matches or v.verdict == "error":
        return "bad"
    return "holds" if v.verdict == "holds" else "expected"


def _table(catalog: Catalog, verdicts: list[CellVerdict]) -> list[str]:
    designs = list(dict.fromkeys(v.design for v in verdicts))
    props = list(dict.fromkeys(v.property for v in verdicts))
    by = {(v.design, v.property): v for v in verdicts}
    heads = "".join(f"<th>{escape(p)}</th>" for p in props)
    out = [f'<table id="verdicts"><tr><th>design</th>{heads}<th>states</th>'
           "<th>seconds</th></tr>"]
    for d in designs:
        mine = [by[(d, p)] for p in props if (d, p) in by]
        cells = "".join(
            f'<td class="{_class(by[(d, p)])}" data-property="{escape(p)}">'
            f'<a href="#{escape(d)}-{escape(p)}">{escape(cell(by[(d, p)]))}</a></td>'
            if by.get((d, p)) and by[(d, p)].verdict == "violated" else
            f'<td class="{_class(by[(d, p)])}" data-property="{escape(p)}">'
            f"{escape(cell(by[(d, p)]))}</td>" if (d, p) in by else "<td></td>"
            for p in props)
        out.append(f'<tr data-design="{escape(d)}"><td>{escape(d)}</td>{cells}'
                   f"<td>{max(v.states for v in mine):,}</td>"
                   f"<td>{design_seconds(mine):.1f}</td></tr>")
    out.append("</table>")
    return out


def write_report(directory: Path, catalog: Catalog, verdicts: list[CellVerdict],
                 run: RunInfo) -> Path:
    """Write DIR/index.html; return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    matched = sum(v.matches for v in verdicts)
    body = [f"<h1>shift check, bound {escape(run.bound.name)}</h1>",
            f'<p id="summary">{matched} of {len(verdicts)} verdicts as declared; spec '
            f"{escape(str(run.catalog.spec_dir))} (SHA-256 {run.catalog.spec_hash()[:12]}); "
            f"{run.wall_seconds:.1f} s wall.</p>", *_table(catalog, verdicts)]
    for v in verdicts:
        if v.verdict != "violated" or v.trace is None:
            continue
        lines = counterexample(catalog, v, detail=False, bound=run.bound.name)
        body.append(f'<section class="counterexample" id="{escape(v.design)}-'
                    f'{escape(v.property)}"><h2>{escape(lines[0])}</h2>')
        if not catalog.design(v.design).own_properties:
            states = [s.state for s in v.trace.steps]
            chart = build(states, {len(states) - 1: [v.property]}
                          if v.trace.loop is None and not v.trace.stutters else {})
            body.append(render_svg(chart, f"{v.design}: {v.property}"))
        body.append("<pre>" + escape("\n".join(lines[1:])) + "</pre></section>")
    page = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>shift check "
            f"{escape(run.bound.name)}</title><style>{STYLE}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")
    path = directory / "index.html"
    path.write_text(page)
    return path
