"""The observable projection's fields: what an application or an outside observer sees.

spec/State.tla's variable names, the keys of both projections' `as_dict()` — the model's
(`shift.model.observe.Observation`) and the C core's (`shift.impl.ImplObservation`) — so
the two compare with ==, field by field (`shift.differential.COMPARED`).
"""

from __future__ import annotations

OBSERVATION_FIELDS = ("sndSeen", "rcvSeen", "layer", "recvDone", "peerCtr", "sentCtr",
                      "replayed", "fence")
