"""Frames found by fuzzing: refused at decode with a remark naming the field, nothing stored,
nothing else disturbed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import resource
import signal
import socket
import struct
from pathlib import Path

import pytest

from engine.broker.controller import BrokerController
from engine.namesrv.controller import NamesrvController
from engine.protocol import fastjson
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import encode, request
from engine.protocol.frame import DEFAULT_MAX_HEADER
from engine.protocol.header.broker import SendMessageRequestHeaderV2, send_header_v1
from engine.protocol.message import BatchItem, encode_batch_body
from engine.protocol.wire import from_ext, to_ext
from engine.remoting.client import RemotingClient
from tests.broker.conftest import broker_configs, call, running_broker
from tests.broker.helpers import heartbeat, pull_request, send_request
from tests.broker.test_main import cmd, env, write_conf
from tests.protocol.test_fuzz_frames import mutate

V1_NAMES = {"d": "defaultTopicQueueNums", "e": "queueId", "f": "sysFlag",
            "g": "bornTimestamp", "h": "flag", "j": "reconsumeTimes",
            "l": "maxReconsumeTimes"}
OUT_OF_RANGE = {"d": 1 << 31, "e": 1 << 40, "f": -(1 << 31) - 1, "g": 1 << 63, "h": 1 << 33,
                "j": 1 << 31, "l": -(1 << 40)}


#: The close's grace period in the tests whose peer reads nothing (the product's is 2 s): the
#: abort after it is what they check, not its length.
GRACE_S = 0.2


def _short_grace(broker: BrokerController) -> None:
    for server in (broker.server, broker.fast_server):
        if server is not None:
            server.close_grace = GRACE_S


def _max_offset(broker: BrokerController, topic: str) -> int:
    return sum(broker.state.store.get_max_offset_in_queue(topic, q) for q in range(4))


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2,
                                  RequestCode.SEND_BATCH_MESSAGE])
async def test_out_of_range_send_header_integers_are_refused(
    broker: BrokerController, client: RemotingClient, code: int
) -> None:
    v2 = to_ext(from_ext(SendMessageRequestHeaderV2, send_request("TBad", b"x").ext_fields))
    ok = await call(client, broker.addr, code, _send_ext(code, v2), _send_body(code))
    assert ok.code == ResponseCode.SUCCESS, ok.remark
    before = _max_offset(broker, "TBad")
    for field, value in OUT_OF_RANGE.items():
        ext = _send_ext(code, {**v2, field: str(value)})
        resp = await call(client, broker.addr, code, ext, _send_body(code))
        assert resp.code == ResponseCode.MESSAGE_ILLEGAL, (field, resp.remark)
        assert resp.remark is not None and V1_NAMES[field] in resp.remark, resp.remark
        assert "out of range for a Java" in resp.remark
    assert _max_offset(broker, "TBad") == before


def _send_ext(code: int, v2: dict[str, str]) -> dict[str, str]:
    if code != RequestCode.SEND_MESSAGE:
        return v2
    names = {"producerGroup": "a", "topic": "b", "defaultTopic": "c",
             **{v: k for k, v in V1_NAMES.items()}}
    v1 = to_ext(send_header_v1(from_ext(SendMessageRequestHeaderV2, {**v2, **{
        k: "0" for k in OUT_OF_RANGE if k in v2}})))
    return {**v1, **{name: v2[k] for name, k in names.items() if k in v2}}


def _send_body(code: int) -> bytes:
    if code == RequestCode.SEND_BATCH_MESSAGE:
        return encode_batch_body([BatchItem(0, b"x", "UNIQ_KEY\x01U1")])
    return b"x"


async def test_invalid_utf8_in_batch_properties_is_refused(
    broker: BrokerController, client: RemotingClient
) -> None:
    good = encode_batch_body([BatchItem(0, b"x", "A\x01b")])
    bad = good[:-1] + b"\xff"  # the last property byte is no longer UTF-8
    resp = await client.invoke(broker.addr, send_request("TUtf", bad, batch=True), timeout=10)
    assert resp.code == ResponseCode.MESSAGE_ILLEGAL
    assert resp.remark is not None and "batch item 0: properties are not UTF-8" in resp.remark
    assert _max_offset(broker, "TUtf") == 0


@pytest.mark.parametrize("body", [
    {"clientID": "c1", "producerDataSet": None, "consumerDataSet": []},
    {"clientID": "c1", "producerDataSet": [], "consumerDataSet": [None]},
    {"clientID": "c1", "consumerDataSet": [{"groupName": "g", "subscriptionDataSet": None}]},
])
async def test_null_lists_in_a_heartbeat_are_refused_by_name(
    broker: BrokerController, client: RemotingClient, body: dict[str, object]
) -> None:
    resp = await call(client, broker.addr, RequestCode.HEART_BEAT, None, json.dumps(body).encode())
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark is not None and resp.remark.startswith("HeartbeatData.")
    assert "null" in resp.remark and "Error" not in resp.remark, resp.remark
    ok = await client.invoke(broker.addr, heartbeat("c1", consumer_group="g"), timeout=10)
    assert ok.code == ResponseCode.SUCCESS


async def _raw(broker: BrokerController) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = broker.addr.rsplit(":", 1)
    return await asyncio.open_connection(host, int(port))


def _json_frame(header: dict[str, object], body: bytes = b"") -> bytes:
    head = json.dumps(header).encode()
    return struct.pack(">II", 4 + len(head) + len(body), len(head)) + head + body


async def test_an_opaque_outside_int32_closes_the_connection_and_stores_nothing(
    broker: BrokerController, client: RemotingClient
) -> None:
    """Before: a send was stored and never answered (the answer did not encode), other
    codes closed the connection.  Now every such frame is malformed: closed, not run."""
    for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.GET_BROKER_RUNTIME_INFO):
        ext = send_request("TOpaque", b"x").ext_fields if code == 310 else {}
        for opaque in (10**30, 1 << 31, -(1 << 31) - 1):
            reader, writer = await _raw(broker)
            writer.write(_json_frame({"code": code, "flag": 0, "language": "JAVA",
                                      "opaque": opaque, "version": 409, "extFields": ext},
                                     b"body"))
            assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, no answer
            writer.close()
    assert _max_offset(broker, "TOpaque") == 0
    ok = await call(client, broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert ok.code == ResponseCode.SUCCESS


async def test_an_oversized_header_is_refused_before_it_arrives(
    broker: BrokerController, client: RemotingClient
) -> None:
    """12 MiB of extFields: the connection is closed after the first bytes, without
    waiting for (or parsing) the rest; other connections are answered meanwhile."""
    size = 12 << 20
    reader, writer = await _raw(broker)
    writer.write(struct.pack(">II", 4 + size, size) + b'{"code":10,"extFields":{"k":"')
    assert await asyncio.wait_for(reader.read(), 10) == b""
    writer.close()
    ok = await call(client, broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert ok.code == ResponseCode.SUCCESS
    # a header just under the cap is still read (and this one answered)
    big = {"k": "v" * (DEFAULT_MAX_HEADER - 200)}
    cmd = request(RequestCode.GET_BROKER_RUNTIME_INFO, big)
    assert len(encode(cmd)) < DEFAULT_MAX_HEADER + 8
    resp = await client.invoke(broker.addr, cmd, timeout=10)
    assert resp.code == ResponseCode.SUCCESS


async def test_a_commit_offset_outside_int64_is_refused(
    broker: BrokerController, client: RemotingClient, tmp_path: Path
) -> None:
    bad = {"consumerGroup": "G1", "topic": "T", "queueId": "0",
           "commitOffset": "-9223372036854775809"}
    resp = await call(client, broker.addr, RequestCode.UPDATE_CONSUMER_OFFSET, bad)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert resp.remark == ("UpdateConsumerOffsetRequestHeader.commitOffset: "
                           "-9223372036854775809 is out of range for a Java long")
    good = {**bad, "consumerGroup": "G2", "commitOffset": "42"}
    assert (await call(client, broker.addr, RequestCode.UPDATE_CONSUMER_OFFSET, good)).code == 0
    everything = await call(client, broker.addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
    assert everything.code == ResponseCode.SUCCESS
    assert broker.state.offsets.query("G1", "T", 0) == -1
    broker.state.offsets.flush()
    saved = (Path(broker.state.store_config.store_path_root_dir) / "config"
             / "consumerOffset.json").read_text()
    assert '"T@G2":{0:42' in saved.replace("\t", "").replace("\n", "")


async def test_one_bad_saved_offset_never_stops_the_others(tmp_path: Path) -> None:
    """A consumerOffset.json entry outside Java's long (hand-edited, or from before the
    decode check): dropped with a log line; the others are served, committed, saved on
    SIGTERM (exit 0) and found again after a restart."""
    config = tmp_path / "store" / "config"
    config.mkdir(parents=True)
    (config / "consumerOffset.json").write_text(
        '{"offsetTable":{"T@BAD":{0:-9223372036854775809,1:5},"T@OLD":{0:7}}}')
    conf = write_conf(tmp_path)
    client = RemotingClient()
    try:
        for round_ in range(2):
            proc = await asyncio.create_subprocess_exec(
                *cmd("-c", str(conf)), stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env(tmp_path))
            try:
                assert proc.stdout is not None
                line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
                assert "boot success" in line, line
                addr = line.split("[broker-x, ")[1].split("]")[0]
                if round_ == 0:
                    ext = {"consumerGroup": "G2", "topic": "T", "queueId": "0",
                           "commitOffset": "42"}
                    resp = await call(client, addr, RequestCode.UPDATE_CONSUMER_OFFSET, ext)
                    assert resp.code == ResponseCode.SUCCESS
                every = await call(client, addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
                assert every.code == ResponseCode.SUCCESS, every.remark
                table = fastjson.loads(every.body or b"{}")["offsetTable"]
                assert table == {"T@BAD": {1: 5}, "T@OLD": {0: 7}, "T@G2": {0: 42}}
                proc.send_signal(signal.SIGTERM)
                assert await asyncio.wait_for(proc.wait(), 60) == 0
            finally:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            client.close_connection(addr)
    finally:
        await client.close()


async def test_mutated_golden_frames_never_reach_an_unexpected_exception(
    broker: BrokerController, client: RemotingClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A few hundred mutated client frames against a real broker: each is answered,
    refused or closes its connection; no handler fails with an unexpected exception."""
    rnd = random.Random(18)
    caplog.set_level(logging.ERROR)
    for _ in range(300):
        reader, writer = await _raw(broker)
        writer.write(mutate(rnd))
        writer.write_eof()  # the broker reads the frame, then closes at the end of input
        await asyncio.wait_for(reader.read(), 10)
        writer.close()
    ok = await call(client, broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)
    assert ok.code == ResponseCode.SUCCESS
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []


FD_LIMIT = 64  # the broker's open-file limit: about 20 in use after boot, the rest for clients


async def test_sigterm_exits_0_when_half_sent_frames_hold_every_descriptor(
    tmp_path: Path, namesrv: NamesrvController, client: RemotingClient
) -> None:
    """Heavy malformed traffic leaves connections the broker must keep: each sent a frame
    whose length promises more than arrives.  Enough of them take every file descriptor.
    Before: the stop wrote delayOffset.json while those connections were still open, failed
    with EMFILE and the broker exited 1 with a traceback; now it closes them first."""
    conf = write_conf(tmp_path, namesrvAddr=f"127.0.0.1:{namesrv.port}")
    proc = await asyncio.create_subprocess_exec(
        *cmd("-c", str(conf)), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=env(tmp_path))
    held: list[asyncio.StreamWriter] = []
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert "boot success" in line, line
        addr = line.split("[broker-x, ")[1].split("]")[0]
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))
        # a delivered delayed message: the schedule has an offset to write at stop
        sent = await client.invoke(addr, send_request("TDelay", b"x", extra={"DELAY": "1"}))
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        got = await client.invoke(addr, pull_request("TDelay", 0, 0, suspend_ms=30_000),
                                  timeout=40)
        assert got.code == ResponseCode.SUCCESS, got.remark
        host, port = addr.rsplit(":", 1)
        for n in range(FD_LIMIT):
            reader, writer = await asyncio.open_connection(host, int(port))
            held.append(writer)
            writer.write(_json_frame({"code": 9000 + n, "flag": 0, "opaque": n}))  # unknown
            writer.write(struct.pack(">II", 100 + 1000 * n, 50) + b'{"code":11,"extFi')
            answer = b""
            with contextlib.suppress(TimeoutError, ConnectionError):
                answer = await asyncio.wait_for(reader.read(8), 10)
            if not answer:  # accepted and reset at once: the broker has no descriptor left
                break
        else:
            pytest.fail(f"{FD_LIMIT} connections and the broker still had descriptors")
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 60)
        err = (await proc.stderr.read()).decode()
        assert code == 0 and "Traceback" not in err, err
        saved = fastjson.loads((tmp_path / "store" / "config" / "delayOffset.json").read_text())
        assert saved["offsetTable"][1] == 1
        assert not (tmp_path / "store" / "abort").exists()
    finally:
        for writer in held:
            writer.close()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_stop_aborts_a_connection_whose_peer_reads_no_answers(
    tmp_path: Path, namesrv: NamesrvController, client: RemotingClient
) -> None:
    """A client pipelines pulls of a big message and reads none of the answers: they cannot
    all be sent.  Before: the stop waited for them forever; now it waits a grace period,
    then drops them."""
    config, store = broker_configs(tmp_path, f"127.0.0.1:{namesrv.port}")
    broker = BrokerController(config, store)
    _short_grace(broker)
    await broker.start()
    stopped = False
    sock = socket.socket()
    try:
        sent = await client.invoke(broker.addr, send_request("TBig", b"b" * (512 << 10)))
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        host, port = broker.addr.rsplit(":", 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
        pulls = b"".join(encode(pull_request("TBig", 0, 0)) for _ in range(32))  # 16 MiB out
        await asyncio.get_running_loop().sock_sendall(sock, pulls)
        for _ in range(2):  # two rounds of the broker's loop: the 32 pulls were read meanwhile
            ok = await call(client, broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)
            assert ok.code == ResponseCode.SUCCESS
        await asyncio.wait_for(broker.stop(), 30)
        stopped = True
    finally:
        sock.close()
        if not stopped:
            await broker.stop()


async def test_the_idle_closer_drops_a_connection_whose_peer_reads_no_answers(
    tmp_path: Path, namesrv: NamesrvController
) -> None:
    """A client pipelines pulls of a big message and reads none of the answers, then falls
    idle.  Before: the idle closer's close waited for the answers to drain, for ever, and the
    connection kept its file descriptor while the broker ran; now it is aborted after the
    close's grace period and the broker holds no connection."""
    async with running_broker(tmp_path, namesrv, server_channel_max_idle_time_seconds=1) as broker:
        _short_grace(broker)
        client = RemotingClient()
        sock = socket.socket()
        try:
            sent = await client.invoke(broker.addr, send_request("TBig", b"b" * (512 << 10)))
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            host, port = broker.addr.rsplit(":", 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            loop = asyncio.get_running_loop()
            await loop.sock_connect(sock, (host, int(port)))
            await loop.sock_sendall(sock, b"".join(
                encode(pull_request("TBig", 0, 0)) for _ in range(32)))  # 16 MiB of answers
            for _ in range(2):  # two rounds of the broker's loop: the peer was accepted and read
                ok = await call(client, broker.addr, RequestCode.GET_BROKER_RUNTIME_INFO)
                assert ok.code == ResponseCode.SUCCESS
            assert len(broker.server.connections) == 2  # the client's and the stuck peer's
            conns = list(broker.server.connections)
            await asyncio.wait_for(asyncio.gather(*(c.wait_closed() for c in conns)), 30)
            assert broker.server.connections == set()
        finally:
            sock.close()
            await client.close()
