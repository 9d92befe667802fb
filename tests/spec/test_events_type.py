"""The spec's event type is the vocabulary: State.tla's `Events` (which TypeOK checks
`event` against) names exactly the events of `shift.vocabulary` (that the actions set
exactly those is tests/test_tlaplus.py's). A new event added to the vocabulary and the
actions but not to `Events` breaks TypeOK only where a conformance dump reaches it
(CompletionTimeout did, at rnr); this finds it in the text."""

from __future__ import annotations

import re

from shift.spec.catalog import load_catalog
from shift.vocabulary import VOCABULARY

SPEC = load_catalog().spec_dir


def events_type() -> set[str]:
    """The event names of State.tla's `Events` definition."""
    text = (SPEC / "State.tla").read_text()
    body = text[text.index("Events ==\n"):]
    body = body[:body.index("\n\n")]
    return set(re.findall(r'"([A-Za-z]+)"', body))


def test_the_event_type_names_every_event_of_the_vocabulary() -> None:
    assert events_type() == set(VOCABULARY)

