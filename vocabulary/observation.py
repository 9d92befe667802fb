"""The observable projection's fields: what an application or an outside observer sees.

spec/State.tla's variable names, the keys of both projections' `as_dict()` — the model's
(`shift.model.observe.Observation`) and the C core's (`shift.impl.ImplObservation`) — each
a record over the hosts, so the two compare with ==, field by field and host by host
(`shift.differential.COMPARED`: every field, for both hosts).
"""

from __future__ import annotations

OBSERVATION_FIELDS = ("sndSeen", "rcvSeen", "sendMode", "recvMode", "recvDone", "peerCtr",
                      "sentCtr", "fresh", "asked", "replayed", "fence", "ctrSeq", "peerSeq")
