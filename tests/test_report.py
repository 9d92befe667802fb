"""`shift check --report DIR` rendered in a real browser, and the message sequence charts
of counterexamples and replayed traces (issue 22).

Headless Chromium (Debian's `chromium`) loads the report: the DOM it rendered must hold the
verdict table and a chart per counterexample, and its screenshot must show them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PIL import Image
from shift.spec.catalog import load_catalog
from test_cli_errors import shift

F5 = Path(__file__).parent / "traces" / "f5_signaled_write_completes_late.jsonl"
SVG = "{http://www.w3.org/2000/svg}"


def chromium() -> str:
    """Chromium: found, or installed from Debian's packages (as root)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, timeout=600, env=env)
        subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], capture_output=True,
                       timeout=1200, env=env)
        found = shutil.which("chromium")
    if found is None:
        pytest.fail("the report test needs headless Chromium: apt-get install chromium")
    return found


def browse(page: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", *args, page.as_uri()],
                          capture_output=True, text=True, timeout=120)


# One worker builds the module's fixture once (pytest-xdist, --dist loadgroup).
pytestmark = pytest.mark.xdist_group("report")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("report")
    proc = shift("check", "--design", "Shift", "--design", "NoFailover", "--report", "rep",
                 "--out", "cex", "--quiet", cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return work


def test_the_browser_shows_the_table(report: Path) -> None:
    dom = browse(report / "rep" / "index.html", "--dump-dom").stdout
    n = 2 * len(load_catalog().properties)  # two designs, a cell per property
    assert "of 56" not in dom and f"{n} of {n} verdicts as declared" in dom
    rows = re.findall(r'<tr data-design="(\w+)">(.*?)</tr>', dom, re.S)
    assert [d for d, _ in rows] == ["Shift", "NoFailover"]
    cells = dict(rows)
    for prop in load_catalog().properties:
        assert f'data-property="{prop}"' in cells["Shift"]
    assert re.search(r'data-property="ExactlyOnceExecution">'
                     r'<a href="#Shift-ExactlyOnceExecution">violated \(expected\)', dom)
    assert re.search(r'class="holds" data-property="Liveness">holds', cells["Shift"])


def test_the_browser_shows_a_chart_per_counterexample(report: Path) -> None:
    dom = browse(report / "rep" / "index.html", "--dump-dom").stdout
    sections = re.findall(r'<section class="counterexample" id="([\w-]+)">(.*?)</section>',
                          dom, re.S)
    # Shift's three expected violations and NoFailover's Liveness.
    assert {s for s, _ in sections} == {"Shift-ExactlyOnceExecution",
                                        "Shift-DataAtNotification",
                                        "Shift-CompletionIntegrity", "NoFailover-Liveness"}
    for name, body in sections:
        assert '<svg xmlns="http://www.w3.org/2000/svg" class="msc"' in body, name
        if name.startswith("Shift"):  # NoFailover's NIC dies before any packet leaves
            assert 'class="packet delivered"' in body, name
        assert "host A" in body and "B NIC 2" in body
    exactly = dict(sections)["Shift-ExactlyOnceExecution"]
    assert "ExactlyOnceExecution violated" in exactly
    assert "took effect at B 2 times" in exactly  # the narration says why


def test_the_screenshot_shows_the_page(report: Path) -> None:
    shot = report / "shot.png"
    browse(report / "rep" / "index.html", f"--screenshot={shot}", "--window-size=1200,900")
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 900)
    # Not a blank page: the table's shaded cells and the text make many colours.
    colours = image.getcolors(maxcolors=1 << 16) or []
    assert len(colours) > 50
    greens = sum(n for n, (r, g, b) in colours if g > r + 5 and g > b)  # cells that hold
    assert greens > 1000


def test_each_counterexample_has_its_chart_beside_it(report: Path) -> None:
    itf = sorted((report / "cex").glob("*.itf.json"))
    assert itf
    for trace in itf:
        svg = trace.with_name(trace.name.removesuffix(".itf.json") + ".svg")
        root = ET.parse(svg).getroot()
        lanes = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "lane"]
        assert lanes == ["host A", "A NIC 1", "A NIC 2", "B NIC 2", "B NIC 1", "host B"]
        if trace.name.startswith("Shift"):
            assert any(line.get("class", "").startswith("packet")
                       for line in root.iter(f"{SVG}line"))


def test_replay_draws_the_chart(tmp_path: Path) -> None:
    proc = shift("replay", "--design", "Shift", str(F5), "--svg", "f5.svg", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    chart = proc.stdout.split("Message sequence chart:\n", 1)[1].splitlines()
    assert chart[0].split() == ["A", "A1", "A2", "B2", "B1", "B"]
    # Step 9: A's NIC 1 dies, and the two ACKs B sent on path 1 are lost with it.
    nine = next(line for line in chart if line.strip().startswith("9."))
    assert "✕" in nine and "A's NIC 1 dies" in nine
    assert sum("on path 1: lost at step 9" in line for line in chart) == 2
    last = next(line for line in chart if line.strip().startswith("21."))
    assert "!! CompletionIntegrity" in last
    root = ET.parse(tmp_path / "f5.svg").getroot()
    lost = [ln for ln in root.iter(f"{SVG}line") if ln.get("class") == "packet lost"]
    assert len(lost) == 2
