"""shift.vocabulary: the names every layer shares, and nothing else.

The events and their typed arguments (`events`), the verbs' operations and completion
statuses (`verbs`), the failover layer's states and steps (`layer`), the fields of the
observable projection (`observation`). Standard library only: the model, the binding of
the C core and the command line import it, and it imports none of them. Numbers are not
vocabulary: the C headers define them, and `shift.impl` pairs each name here with its
number from the compiled library (tests/impl/test_vocabulary.py ties the two).
"""

from .events import (
    DIR_T,
    DIRECTIONS,
    FAULT_EVENTS,
    HOST_T,
    HOSTS,
    INT_T,
    PATH_T,
    PATHS,
    VOCABULARY,
    Event,
    Signature,
    from_json,
    make,
    parse,
)
from .layer import LAYER_STATES, PROGRESS_STEPS, RECV_MODES, SEND_MODES
from .observation import OBSERVATION_FIELDS
from .verbs import LIBRARY_OPS, OPS, STATUSES

__all__ = [
    "DIRECTIONS", "DIR_T", "FAULT_EVENTS", "HOSTS", "HOST_T", "INT_T",
    "LAYER_STATES", "LIBRARY_OPS", "OBSERVATION_FIELDS", "OPS", "PATHS", "PATH_T",
    "PROGRESS_STEPS", "RECV_MODES", "SEND_MODES", "STATUSES", "VOCABULARY", "Event",
    "Signature", "from_json", "make", "parse",
]
