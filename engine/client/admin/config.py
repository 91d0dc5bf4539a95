"""Broker admin calls on the broker itself: settings, runtime figures, statistics, store upkeep.

How this works: GET_BROKER_CONFIG answers with Java properties text (one ``key=value`` line
per setting, unescaped, as `MixAll.properties2String` writes it) and UPDATE_BROKER_CONFIG
takes the same form; `properties` reads and writes it.  Runtime info is a `KVTable` of
strings.  The three store calls only start the broker's own cleanup (DELETE_EXPIRED_COMMITLOG
arms the next rounds of the cleanup service and does not wait for them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from engine.client.core.broker_call import BrokerCalls
from engine.client.core.errors import BadResponseError, ServerSystemError
from engine.common import properties
from engine.protocol.body.admin import BrokerStatsData
from engine.protocol.body.route import KVTable
from engine.protocol.codes import RequestCode
from engine.protocol.header.broker import ViewBrokerStatsDataRequestHeader
from engine.protocol.wire import to_ext

#: The remark of an Apache broker's runtime info asked before its first stats sample.
STATS_NOT_SAMPLED = "java.util.NoSuchElementException"
STATS_SAMPLE_S = 1.0  # StoreStatsService samples once a second


def setting_text(value: Any) -> str:
    """A setting as Java prints it: booleans lower-case, everything else its `str`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class BrokerConfigCalls(BrokerCalls):
    """Settings, figures and store maintenance of one broker."""

    # ------------------------------------------------------------------------ settings

    async def broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG (26): every setting, broker's then store's, in the broker's order.

        Raises:
            BadResponseError: the body is not UTF-8 properties text.
        """
        resp = await self._call(addr, RequestCode.GET_BROKER_CONFIG)
        if not resp.body:
            return {}
        try:
            return properties.loads(resp.body.decode("utf-8"))
        except (UnicodeDecodeError, properties.PropertiesError) as exc:
            raise BadResponseError(f"config body is not properties text: {exc}", addr) from None

    async def update_broker_config(self, addr: str, settings: Mapping[str, Any]) -> None:
        """UPDATE_BROKER_CONFIG (25): change settings at run time (values sent as their text).

        This engine checks every value first (a bad one changes nothing) and names unknown
        keys it ignored in the answer's remark; Apache brokers apply what they can.

        Raises:
            NoPermissionError: a key that cannot change at run time (this engine), or one of
                5.x's `configBlackList` (brokerConfigPath, ...).
            ServerSystemError: a value of the wrong type.
        """
        text = properties.dumps((k, setting_text(v)) for k, v in settings.items())
        await self._call(addr, RequestCode.UPDATE_BROKER_CONFIG, body=text.encode("utf-8"))

    # ------------------------------------------------------------------------ figures

    async def runtime_info(self, addr: str) -> KVTable:
        """GET_BROKER_RUNTIME_INFO (28): version, put/get totals and TPS, disk use, offsets
        (request-codes.md §3.10 names the keys); every value is a string.

        An Apache broker in its first second answers SYSTEM_ERROR with a
        `java.util.NoSuchElementException` (its StoreStatsService's per-second samples are
        still empty; seen with 4.9.8): it is asked once more, a second later.
        """
        try:
            return await self._body(KVTable, addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        except ServerSystemError as exc:
            if STATS_NOT_SAMPLED not in exc.remark:
                raise
        await asyncio.sleep(STATS_SAMPLE_S)
        return await self._body(KVTable, addr, RequestCode.GET_BROKER_RUNTIME_INFO)

    async def broker_stats(self, addr: str, stats_name: str, stats_key: str) -> BrokerStatsData:
        """VIEW_BROKER_STATS_DATA (315): one statistic (e.g. ``TOPIC_PUT_NUMS`` of a topic,
        ``GROUP_GET_NUMS`` of ``topic@group``) over the last minute, hour and day.

        Raises:
            ServerSystemError: the broker has no such statistic (yet).
        """
        header = ViewBrokerStatsDataRequestHeader(stats_name, stats_key)
        return await self._body(BrokerStatsData, addr, RequestCode.VIEW_BROKER_STATS_DATA,
                                to_ext(header))

    # ------------------------------------------------------------------------ store upkeep

    async def clean_expired_consume_queue(self, addr: str) -> None:
        """CLEAN_EXPIRED_CONSUMEQUEUE (306): drop consume queues wholly behind the commit log."""
        await self._call(addr, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)

    async def delete_expired_commit_log(self, addr: str) -> None:
        """DELETE_EXPIRED_COMMITLOG (329): have the cleanup service delete expired commit-log
        files in its next rounds, whatever the configured hour.

        Raises:
            RequestCodeNotSupportedError: an older broker without this request.
        """
        await self._call(addr, RequestCode.DELETE_EXPIRED_COMMITLOG)

    async def clean_unused_topic(self, addr: str) -> None:
        """CLEAN_UNUSED_TOPIC (316): drop the queues of topics the broker no longer has."""
        await self._call(addr, RequestCode.CLEAN_UNUSED_TOPIC)
