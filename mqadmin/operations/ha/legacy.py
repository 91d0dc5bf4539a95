"""HA status of brokers without GET_BROKER_HA_STATUS (Apache 4.x): derived from offsets.

How this works: a 4.x broker answers 907 REQUEST_CODE_NOT_SUPPORTED, and its runtime info
has no HA connection figures.  What an operator needs (role, how far each slave is behind)
still follows from GET_BROKER_CONFIG (brokerRole) and GET_BROKER_RUNTIME_INFO
(commitLogMaxOffset, putMessageAverageSize) of every member of the broker name: a slave is
behind its master by the difference of their commit-log max offsets, as Apache's 4.x
console shows it.  Whether a slave is connected cannot be told, so no connection age is
given.
"""

from __future__ import annotations

import asyncio

from engine.client.admin import MQAdmin
from engine.client.errors import ClientError
from engine.ha.status import HAClientRuntimeInfo, HAConnectionInfo, HARuntimeInfo, messages_in
from engine.protocol.body.route import MASTER_ID

#: The note on every row derived here.
DERIVED_NOTE = ("Apache 4.x (no HA status request): behind = difference of commit-log max "
                "offsets; connection unknown")


def _int(table: dict[str, str], key: str) -> int:
    try:
        return int(float(table.get(key, "0")))
    except ValueError:
        return 0


async def derived_status(admin: MQAdmin, broker_name: str, addrs: dict[int, str]
                         ) -> dict[str, HARuntimeInfo | ClientError]:
    """Per address of `broker_name`'s members (`addrs` by broker id): its status as derived
    from its settings and runtime figures, or the error that kept it from being read."""

    async def read(addr: str) -> tuple[dict[str, str], dict[str, str]] | ClientError:
        try:
            config, runtime = await asyncio.gather(admin.broker.broker_config(addr),
                                                   admin.broker.runtime_info(addr))
        except ClientError as exc:
            return exc
        return config, dict(runtime.table)

    ordered = sorted(addrs.items())
    found = dict(zip((a for _, a in ordered),
                     await asyncio.gather(*(read(a) for _, a in ordered)), strict=True))
    master_addr = addrs.get(MASTER_ID)
    master = found.get(master_addr) if master_addr else None
    master_max = _int(master[1], "commitLogMaxOffset") if isinstance(master, tuple) else None
    avg = _int(master[1], "putMessageAverageSize") if isinstance(master, tuple) else 0
    out: dict[str, HARuntimeInfo | ClientError] = {}
    slaves: list[HAConnectionInfo] = []
    for broker_id, addr in ordered:
        got = found[addr]
        if isinstance(got, ClientError):
            out[addr] = got
            continue
        if broker_id == MASTER_ID:
            continue
        config, runtime = got
        own_max = _int(runtime, "commitLogMaxOffset")
        behind = max(0, master_max - own_max) if master_max is not None else 0
        slaves.append(HAConnectionInfo(addr=addr, slave_ack_offset=own_max, diff=behind,
                                       estimated_messages_behind=messages_in(behind, avg)))
        link = HAClientRuntimeInfo(
            master_addr=master_addr, max_offset=own_max, master_broker_addr=master_addr,
            master_max_offset_seen=master_max if master_max is not None else 0,
            estimated_loss_bytes=behind, estimated_loss_messages=messages_in(behind, avg))
        out[addr] = HARuntimeInfo(
            master=False, ha_client_runtime_info=link, broker_name=broker_name,
            broker_addr=addr, broker_id=broker_id, broker_role=config.get("brokerRole", ""),
            commit_log_min_offset=_int(runtime, "commitLogMinOffset"),
            commit_log_max_offset=own_max, average_record_size=avg)
    if master_addr and isinstance(master, tuple):
        config, runtime = master
        out[master_addr] = HARuntimeInfo(
            master=True, master_commit_log_max_offset=master_max or 0,
            ha_connection_info=slaves, broker_name=broker_name, broker_addr=master_addr,
            broker_id=MASTER_ID, broker_role=config.get("brokerRole", ""),
            commit_log_min_offset=_int(runtime, "commitLogMinOffset"),
            commit_log_max_offset=master_max or 0, average_record_size=avg)
    return out
