"""A producer and a consumer that behave as Java clients do around a role switch.

Both find brokers through the name server: the producer sends to the master of the topic's
route while its queue data allows writing, and looks the route up again after any failure;
the consumer pulls from the master, or from a slave when no master is listed (the Java
client's `findBrokerAddressInSubscribe` fallback), keeping its offsets in memory.  They use
raw requests so that the HA tests do not depend on the client library's state.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from engine.protocol import fastjson
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.message import decode_records
from engine.protocol.perm import PERM_WRITE
from engine.remoting.client import RemotingClient
from engine.remoting.errors import RemotingError
from tests.broker.conftest import call
from tests.broker.helpers import pull_request, send_request

ROOT = Path(__file__).resolve().parent.parent.parent


async def route_of(client: RemotingClient, ns: str, topic: str) -> dict[str, object] | None:
    try:
        resp = await call(client, ns, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    except RemotingError:
        return None
    if resp.code != ResponseCode.SUCCESS:
        return None
    route: dict[str, object] = fastjson.loads(resp.body or b"{}")
    return route


def brokers_in(route: dict[str, object]) -> dict[int, str]:
    datas = route.get("brokerDatas") or []
    assert isinstance(datas, list)
    addrs = datas[0]["brokerAddrs"] if datas else {}
    return {int(k): v for k, v in addrs.items()}


def writable(route: dict[str, object]) -> bool:
    queues = route.get("queueDatas") or []
    assert isinstance(queues, list)
    return bool(queues) and bool(queues[0]["perm"] & PERM_WRITE)


async def create_topic(client: RemotingClient, ns: str, master: str, topic: str,
                       queues: int) -> None:
    resp = await call(client, master, RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
        "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG"})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    async with asyncio.timeout(60):
        while await route_of(client, ns, topic) is None:
            await asyncio.sleep(0.02)


async def wait_topic_on(client: RemotingClient, addr: str, topic: str) -> None:
    """Until the broker at `addr` (a slave: after its next metadata sync) knows `topic`."""
    async with asyncio.timeout(60):
        while (await client.invoke(addr, pull_request(topic, 0, 0))).code == \
                ResponseCode.TOPIC_NOT_EXIST:
            await asyncio.sleep(0.02)


class Producer:
    def __init__(self, client: RemotingClient, ns: str, topic: str, queues: int) -> None:
        self.client, self.ns, self.topic, self.queues = client, ns, topic, queues
        self.acked: list[bytes] = []
        self.refused = 0
        self.sent_to: set[str] = set()

    async def _master(self) -> str | None:
        route = await route_of(self.client, self.ns, self.topic)
        if route is None or not writable(route):
            return None
        return brokers_in(route).get(0)

    async def run(self, stop: asyncio.Event, pause: float = 0.002) -> None:
        i = 0
        addr: str | None = None
        while not stop.is_set():
            if addr is None:
                addr = await self._master()
                if addr is None:
                    await asyncio.sleep(0.02)
                    continue
            body = f"msg-{i:06d}".encode()
            try:
                resp = await self.client.invoke(
                    addr, send_request(self.topic, body, queue_id=i % self.queues), timeout=3)
            except RemotingError:
                addr = None
                continue
            if resp.code == ResponseCode.SUCCESS:
                self.acked.append(body)
                self.sent_to.add(addr)
                i += 1
                await asyncio.sleep(pause)
            else:
                self.refused += 1
                addr = None
                await asyncio.sleep(0.02)


class Consumer:
    def __init__(self, client: RemotingClient, ns: str, topic: str, queues: int,
                 addr: str | None = None) -> None:
        self.client, self.ns, self.topic, self.queues = client, ns, topic, queues
        self.addr = addr  # read from this broker only, instead of following the route
        self.offsets = dict.fromkeys(range(queues), 0)
        self.got: set[bytes] = set()
        self.read_from: set[str] = set()

    async def _source(self) -> str | None:
        if self.addr is not None:
            return self.addr
        route = await route_of(self.client, self.ns, self.topic)
        if route is None:
            return None
        addrs = brokers_in(route)
        return addrs.get(0) or (addrs[min(addrs)] if addrs else None)

    async def poll_once(self) -> int:
        """One pull per queue; returns how many messages came."""
        addr = await self._source()
        if addr is None:
            return 0
        found = 0
        for qid in range(self.queues):
            try:
                resp = await self.client.invoke(
                    addr, pull_request(self.topic, qid, self.offsets[qid], group="HaGroup"),
                    timeout=3)
            except RemotingError:
                return found
            if resp.code == ResponseCode.SUCCESS:
                records = decode_records(resp.body or b"")
                self.got.update(r.body for r in records)
                found += len(records)
                self.read_from.add(addr)
                self.offsets[qid] = int((resp.ext_fields or {})["nextBeginOffset"])
        return found

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if not await self.poll_once():
                await asyncio.sleep(0.01)

    async def drain(self, expected: set[bytes], timeout: float = 15) -> None:
        async with asyncio.timeout(timeout):
            while not expected <= self.got:
                if not await self.poll_once():
                    await asyncio.sleep(0.02)


async def mqadmin(tmp: Path, *args: str) -> tuple[int, str, str]:
    """Run the real `mqadmin` CLI as a process; returns (exit code, stdout, stderr)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mqadmin.app", *args, cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "MQADMIN_HOME": str(tmp / "mqadmin"),
             "HOME": str(tmp), "COLUMNS": "200"})
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
