"""The benchmarks' one way of writing their table into docs/performance.md."""

from __future__ import annotations

from pathlib import Path


def write_section(path: Path, begin: str, end: str, section: str) -> None:
    """Replace the text from `begin` to `end` (markers included; `section` carries them)
    with `section`, or append it if the markers are not there yet."""
    doc = path.read_text()
    if begin in doc and end in doc:
        doc = doc.split(begin, 1)[0] + section + doc.split(end, 1)[1]
    else:
        doc = doc.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(doc)
