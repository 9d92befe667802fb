"""Differential testing: one event trace drives the model and the C implementation.

The model (`shift.model`) is the oracle: it equals the TLA+ specification. Each event of a
trace (Init first) is applied to the model and, translated by `Bridge`, to a
`shift.impl.Connection`; after every step the observable projections are compared field
by field (`COMPARED`), and the properties the design declares it keeps are checked on the
implementation's observation (`shift.model.observable`). This package is the only place
where the model and the implementation meet (docs/design.md, the layers);
docs/differential.md explains what is compared, what cannot be, and why.

One job per module:
- `bridge`: the mapping of a model event onto the implementation's call (`Bridge`);
- `gaps`: where the two sides differ on purpose or by an abstraction (`normalise`, `gap`,
  `IMPL_FIXES`) and which observable invariants a design keeps (`kept_invariants`);
- `runner`: a trace through both, compared after every step (`run_trace`, `report`);
- `generator`: the trace a sequence of numbers picks (`trace_from_choices`);
- `shrink`: a smaller divergent trace, for the campaigns outside the test suite.
"""

from .bridge import DESIGNS, Bridge, wr_of
from .gaps import IMPL_FIXES, OBSERVABLE_INVARIANTS, gap, kept_invariants, normalise
from .generator import (
    FAULT_NAMES,
    FAULT_SHARE_BUSY,
    FAULT_SHARE_REST,
    in_flight,
    options,
    pick,
    swarm,
    trace_from_choices,
)
from .runner import CHANNELS, COMPARED, Divergence, Run, compare, judge, report, run_trace
from .shrink import diverges, shrink

__all__ = [
    "CHANNELS", "COMPARED", "DESIGNS", "FAULT_NAMES", "FAULT_SHARE_BUSY", "FAULT_SHARE_REST",
    "IMPL_FIXES", "OBSERVABLE_INVARIANTS", "Bridge", "Divergence", "Run", "compare",
    "diverges", "gap", "in_flight", "judge", "kept_invariants", "normalise", "options",
    "pick", "report", "run_trace", "shrink", "swarm", "trace_from_choices", "wr_of",
]
