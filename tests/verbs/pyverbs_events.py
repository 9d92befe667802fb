"""Run under `shift run`: open a device, say "listening", wait for one asynchronous
event; print its name and whether the port is down afterwards."""

from __future__ import annotations

import sys

from pyverbs import libibverbs_enums as e
from pyverbs.device import Context

NAMES = {e.IBV_EVENT_DEVICE_FATAL: "IBV_EVENT_DEVICE_FATAL",
         e.IBV_EVENT_PORT_ERR: "IBV_EVENT_PORT_ERR",
         e.IBV_EVENT_PORT_ACTIVE: "IBV_EVENT_PORT_ACTIVE"}

with Context(name=sys.argv[1]) as ctx:
    print("listening", flush=True)
    event = ctx.get_async_event()
    print(NAMES.get(event.event_type, str(event.event_type)))
    event.ack()
    down = ctx.query_port(1).state == e.IBV_PORT_DOWN
    print("port_down" if down else "port_up")
