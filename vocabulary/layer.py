"""The failover layer's words: a host's states and the steps of its background work.

Names only; their numbers are C's (`enum shift_state`, `enum shift_recv_state`,
`enum shift_step` in native/include/shift.h), paired with them in `shift.impl.verbs`.
"""

from __future__ import annotations

# A send side's failover state, as the C core has it (`enum shift_state`): Default ->
# Fallback -> WaitSignaled -> WaitDrained -> Default, or to Error (terminal). A one-way
# connection reports each host's state as its role has it (`shift_ep_info.state`): A's
# send side, B's receive side as Default or Fallback.
LAYER_STATES = ("Default", "Fallback", "WaitSignaled", "WaitDrained", "Error")

# spec/Failover.tla: a host's send side (`sendMode[h]`: its outstanding WRs; the C core's
# `enum shift_state`) and its receive side (`recvMode[h]`: its receive WRs on the default
# QP, moving to the backup QP, or there; `enum shift_recv_state`).
SEND_MODES = LAYER_STATES
RECV_MODES = ("Default", "Moving", "Fallback")

# What one Progress(h) did, as `Connection.progress` names it. The specification's
# Progress has five steps (trigger, handshake, replay, reconnect, release; TLC labels them
# all `Progress`); the C core adds probe_done and probe_failed for its optional wire probe,
# setup for the two-phase set-up's in-band exchange (the spec's paths are connected from
# the start), and says none when no step was enabled.
PROGRESS_STEPS = ("none", "trigger", "handshake", "replay", "reconnect", "probe_done",
                  "probe_failed", "release", "setup")
