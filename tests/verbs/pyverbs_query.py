"""Run under `shift run`: pyverbs lists the host's devices, opens each, queries the
device and its port, allocates and frees a protection domain (an error raises: the
exit status says); prints what it saw as JSON."""

from __future__ import annotations

import json

from pyverbs import libibverbs_enums as e
from pyverbs.device import Context, get_device_list
from pyverbs.pd import PD


def guid(raw: int) -> str:
    """pyverbs gives the big-endian node_guid read as a host (little-endian) integer;
    sysfs prints its bytes in order, grouped by two."""
    text = raw.to_bytes(8, "little").hex()
    return ":".join(text[i:i + 4] for i in range(0, 16, 4))


def seen(name: str) -> dict[str, object]:
    with Context(name=name) as ctx:
        dev = ctx.query_device()
        port = ctx.query_port(1)
        gid = ctx.query_gid(1, 0)
        pd = PD(ctx)
        pd.close()
        return {"name": name, "node_guid": guid(dev.node_guid),
                "phys_port_cnt": dev.phys_port_cnt,
                "port_active": port.state == e.IBV_PORT_ACTIVE,
                "lid": port.lid, "gid": str(gid)}


print(json.dumps([seen(d.name.decode()) for d in get_device_list()]))
