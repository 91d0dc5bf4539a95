"""`SlaveSyncService`: a slave copies its master's metadata every slaveSyncInterval (10 s).

How this works (4.9.7 `SlaveSynchronize.syncAll`): the first round runs 3 s after start (or
after becoming a slave), then every interval, when the master's address is known and is
not this broker's.  Each step stands alone (a failure is logged, the others still run):

  GET_ALL_TOPIC_CONFIG (21), to the master's fast port (listenPort - 2; the normal port
      when the fast port does not answer): a different DataVersion replaces the table, and
      the consume queues of topics the table no longer has are destroyed (cleanUnusedTopic),
      so a topic deleted on the master cannot come back when this slave is promoted.
  GET_ALL_CONSUMER_OFFSET (43): the master's entries overwrite the local ones (`putAll`).
  GET_ALL_DELAY_OFFSET (45): replaces the delay offsets (delayOffset.json).
  GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): a different DataVersion replaces the groups.
  GET_BROKER_HA_STATUS (907): the master's max offset, for the failover loss estimate.
  GET_TIMER_CHECK_POINT (60): the master's timer progress (read time, queue offset, where
      its undelivered-for-sure region starts), adopted by the slave's timer store.

Consumer offsets committed to this slave while consumers read from it (the master away)
are kept in `BrokerState.slave_commits`; before the master's table is adopted, each one
that is ahead of the master's is sent to the master with UPDATE_CONSUMER_OFFSET, so the
progress made on the slave reaches the master when it returns (the master ends up with
the larger of the two offsets; a later reset on the master still wins).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TypeVar

from engine.broker.state import BrokerState
from engine.broker.topics import KEEP_QUEUES_OF
from engine.common.service import Service
from engine.ha.status import HARuntimeInfo
from engine.protocol.body.decode import decode_body, request_name
from engine.protocol.body.offsets import ConsumerOffsetSerializeWrapper, DelayOffsetSerializeWrapper
from engine.protocol.body.subscription import SubscriptionGroupWrapper
from engine.protocol.body.topic import TopicConfigSerializeWrapper
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.errors import ProtocolError
from engine.protocol.header.broker import UpdateConsumerOffsetRequestHeader
from engine.protocol.wire import to_ext
from engine.remoting.address import format_addr, parse_addr
from engine.remoting.errors import RemotingConnectError, RemotingError
from engine.store.timer.checkpoint import TimerCheckpoint

log = logging.getLogger(__name__)

T = TypeVar("T")
CALL_TIMEOUT_S = 3.0  # BrokerOuterAPI's 3000 ms
FIRST_ROUND_S = 3.0


class SyncError(Exception):
    """A sync call that the master answered with an error."""

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(f"code {code}: {remark}")
        self.code = code


def vip_addr(addr: str) -> str:
    """`MixAll.brokerVIPChannel(true, addr)`: the same host, port - 2."""
    host, port = parse_addr(addr)
    return format_addr(host, port - 2)


class SlaveSyncService(Service):
    name = "slave-sync"

    def __init__(self, state: BrokerState, interval_s: float,
                 first_round_s: float = FIRST_ROUND_S) -> None:
        super().__init__(min(first_round_s, interval_s))
        self.state = state
        self.period = interval_s
        self.rounds = 0
        self.no_ha_status_from: str | None = None  # an Apache 4.9 master does not answer 907

    async def stop(self) -> None:
        """Stop at once: a round waiting on a master that does not answer (frozen, or
        partitioned) is cancelled, not awaited, so a promotion does not wait through the
        round's timeouts (six calls of CALL_TIMEOUT_S)."""
        self._stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.on_stop()

    async def run_once(self) -> None:
        self.interval = self.period
        st = self.state
        master = st.master_addr
        if not st.is_slave or not master or master == st.config.broker_addr:
            return
        await self.sync_all(master)

    async def sync_all(self, master: str, *, once: bool = False) -> None:
        """One round; with `once` (a last sync before a promotion) a master that refuses
        the connection ends the round at its first step."""
        for step in (self._topics, self._offsets, self._delay_offsets, self._groups,
                     self._master_offset, self._timer_checkpoint):
            try:
                await step(master)
            except RemotingConnectError as exc:
                log.warning("slave sync from %s: %s failed: %s", master, step.__name__, exc)
                if once:
                    return
            except (RemotingError, SyncError, ProtocolError, ValueError) as exc:
                log.warning("slave sync from %s: %s failed: %s", master, step.__name__, exc)
        self.rounds += 1

    async def _call(self, addr: str, code: int, ext: dict[str, str] | None = None
                    ) -> RemotingCommand:
        resp = await self.state.client.invoke(addr, request(code, ext), CALL_TIMEOUT_S)
        if resp.code != ResponseCode.SUCCESS:
            raise SyncError(resp.code, resp.remark)
        return resp

    async def _body(self, cls: type[T], addr: str, code: int) -> T:
        resp = await self._call(addr, code)
        return decode_body(cls, resp.body, request_name(code), "answer")

    async def _topics(self, master: str) -> None:
        # Messages of a topic created on the master after it answered lie beyond this slave's
        # log end now: their queues are kept even though the table read lacks the topic.
        written_before = self.state.store.get_max_phy_offset()
        try:
            wrapper = await self._body(TopicConfigSerializeWrapper, vip_addr(master),
                                       RequestCode.GET_ALL_TOPIC_CONFIG)
        except RemotingConnectError:  # no fast port (a master listening on port 0)
            wrapper = await self._body(TopicConfigSerializeWrapper, master,
                                       RequestCode.GET_ALL_TOPIC_CONFIG)
        topics = self.state.topics
        if wrapper.data_version != topics.data_version:
            topics.table = dict(wrapper.topic_config_table)
            topics.data_version = wrapper.data_version
            topics.persist()
            log.info("slave sync: %d topics from master %s", len(topics.table), master)
            removed = self.state.store.clean_unused_topics(
                set(topics.table) | KEEP_QUEUES_OF, written_before)
            if removed:
                log.info("slave sync: consume queues of topics the master no longer has "
                         "removed: %s", ", ".join(removed))

    async def _offsets(self, master: str) -> None:
        wrapper = await self._body(ConsumerOffsetSerializeWrapper, master,
                                   RequestCode.GET_ALL_CONSUMER_OFFSET)
        st = self.state
        table = {key: dict(queues) for key, queues in wrapper.offset_table.items()}
        for (group, topic, queue_id), offset in list(st.slave_commits.items()):
            key = f"{topic}@{group}"
            if offset > table.get(key, {}).get(queue_id, -1):
                header = UpdateConsumerOffsetRequestHeader(group, topic, queue_id, offset)
                await self._call(master, RequestCode.UPDATE_CONSUMER_OFFSET, to_ext(header))
                table.setdefault(key, {})[queue_id] = offset
            del st.slave_commits[(group, topic, queue_id)]
        st.offsets.merge(table)
        st.offsets.persist()

    async def _delay_offsets(self, master: str) -> None:
        wrapper = await self._body(DelayOffsetSerializeWrapper, master,
                                   RequestCode.GET_ALL_DELAY_OFFSET)
        schedule = self.state.schedule
        schedule.offsets = {level: offset for level, offset in wrapper.offset_table.items()
                            if level in schedule.delays}
        schedule.persist()

    async def _timer_checkpoint(self, master: str) -> None:
        """GET_TIMER_CHECK_POINT (60, 5.x): the master's timer progress, so that this slave,
        once promoted, delivers from there (docs/timers.md, "Slaves")."""
        try:
            resp = await self._call(master, RequestCode.GET_TIMER_CHECK_POINT)
        except SyncError as exc:
            if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                return  # a 4.x master has no timers
            raise
        self.state.store.timer.follow(TimerCheckpoint.decode(resp.body or b""))

    async def _groups(self, master: str) -> None:
        wrapper = await self._body(SubscriptionGroupWrapper, master,
                                   RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        groups = self.state.groups
        if wrapper.data_version != groups.data_version:
            groups.replace_all(wrapper)

    async def _master_offset(self, master: str) -> None:
        ha_client = self.state.ha_client
        if ha_client is None or master == self.no_ha_status_from:
            return
        try:
            resp = await self._call(master, RequestCode.GET_BROKER_HA_STATUS)
        except SyncError as exc:
            if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                self.no_ha_status_from = master  # ask it no more: estimates use transfers
                return
            raise
        info = decode_body(HARuntimeInfo, resp.body, "GET_BROKER_HA_STATUS", "answer")
        ha_client.master_broker_addr = master
        ha_client.saw_master_offset(info.master_commit_log_max_offset)
