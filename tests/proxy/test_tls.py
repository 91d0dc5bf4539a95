"""TLS of the gRPC port: 5.3's three tlsServerMode values, the key pair served, and the join.

In the permissive mode (the default, as 5.3) TLS and plaintext clients share grpcServerPort
through the join process; the tests check both kinds of client on the one port, that each
mode refuses what 5.3 refuses, that clients are seen with their own address through the join,
that a silent connection is dropped, and that stop leaves no process, thread or connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from engine.client.admin.broker import BrokerAdmin
from engine.common.config import ConfigError
from engine.namesrv.controller import NamesrvController
from engine.proxy.config import ProxyConfig, TlsMode, load_proxy_config
from engine.proxy.local import local_proxy
from engine.proxy.server import ProxyServer
from engine.proxy.tls import ProxyTlsError, self_signed
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.v2 import service_pb2_grpc
from engine.remoting.client import RemotingClient
from tests.broker.conftest import running_broker
from tests.broker.test_main import env, write_conf
from tests.proxy.conftest import FRONT, TEST_PROXY, Stack, in_thread, running_stack, with_front
from tests.proxy.official import ClientConfiguration, Credentials, Message, Producer
from tests.proxy.test_main import STARTUP_S, proxy_json, serve_until_line
from tests.proxy.test_service import HEADERS, TIMEOUT, normal_message

#: An HTTP/2 client's first bytes (its connection preface).
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

#: grpcio's front serves the permissive mode through a join process; ours needs none.
JOINED = FRONT == "grpcio"
#: The tests of the join process itself run on grpcio's front whatever the tests' front.
GRPCIO = dataclasses.replace(TEST_PROXY, grpc_front="grpcio")


def config(mode: str, **changes: object) -> ProxyConfig:
    return dataclasses.replace(TEST_PROXY, tls_server_mode=mode, **changes)


def address(stack: Stack) -> str:
    return f"127.0.0.1:{stack.proxy.port}"


@contextlib.asynccontextmanager
async def tls_channel(stack: Stack) -> AsyncIterator[grpc.aio.Channel]:
    """A channel trusting only the proxy's own certificate (its SANs name 127.0.0.1)."""
    assert stack.proxy.tls is not None
    credentials = grpc.ssl_channel_credentials(root_certificates=stack.proxy.tls.certificate)
    async with grpc.aio.secure_channel(address(stack), credentials) as channel:
        yield channel


async def route_and_send(channel: grpc.aio.Channel, topic: str) -> None:
    stub = service_pb2_grpc.MessagingServiceStub(channel)
    route = await stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=topic)),
                                  metadata=HEADERS, timeout=TIMEOUT)
    assert route.status.code == pb.OK
    assert route.message_queues
    sent = await stub.SendMessage(spb.SendMessageRequest(messages=[normal_message(topic)]),
                                  metadata=HEADERS, timeout=TIMEOUT)
    assert sent.status.code == pb.OK, sent.status


async def refused(channel: grpc.aio.Channel) -> grpc.StatusCode:
    stub = service_pb2_grpc.MessagingServiceStub(channel)
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="T")),
                              metadata=HEADERS, timeout=TIMEOUT)
    return info.value.code()


async def test_permissive_serves_tls_and_plaintext_clients_on_one_port(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    assert ProxyConfig().tls_mode is TlsMode.PERMISSIVE  # 5.3's default
    async with running_stack(tmp_path, namesrv) as stack:
        assert (stack.proxy.join is not None) is JOINED  # ours tells TLS apart itself
        assert stack.proxy.tls is not None and "self-signed" in stack.proxy.tls.source
        await stack.create_topic("Both")
        async with tls_channel(stack) as channel:
            await route_and_send(channel, "Both")
        async with grpc.aio.insecure_channel(address(stack)) as channel:
            await route_and_send(channel, "Both")


async def test_enforcing_refuses_plaintext(tmp_path: Path, namesrv: NamesrvController) -> None:
    async with running_stack(tmp_path, namesrv, config("enforcing")) as stack:
        assert stack.proxy.join is None  # grpc's TLS port is grpcServerPort itself
        await stack.create_topic("Tls")
        async with tls_channel(stack) as channel:
            await route_and_send(channel, "Tls")
        async with grpc.aio.insecure_channel(address(stack)) as channel:
            assert await refused(channel) is grpc.StatusCode.UNAVAILABLE


async def test_disabled_refuses_tls(tmp_path: Path, namesrv: NamesrvController) -> None:
    async with running_stack(tmp_path, namesrv, config("disabled")) as stack:
        assert stack.proxy.join is None and stack.proxy.tls is None
        await stack.create_topic("Plain")
        async with grpc.aio.insecure_channel(address(stack)) as channel:
            await route_and_send(channel, "Plain")
        credentials = grpc.ssl_channel_credentials(root_certificates=self_signed().certificate)
        async with grpc.aio.secure_channel(address(stack), credentials) as channel:
            assert await refused(channel) is grpc.StatusCode.UNAVAILABLE


def tcp_links() -> set[tuple[int, int]]:
    """(local port, remote port) of every TCP socket of this host (Linux /proc/net)."""
    links: set[tuple[int, int]] = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(name) as f:
            for line in f.readlines()[1:]:
                local, remote = line.split()[1:3]
                links.add((int(local.rsplit(":", 1)[1], 16), int(remote.rsplit(":", 1)[1], 16)))
    return links


async def test_official_client_through_the_join_is_listed_with_its_own_address(
        stack: Stack) -> None:
    assert (stack.proxy.join is not None) is JOINED
    await stack.create_topic("Joined")
    producer = Producer(ClientConfiguration(stack.endpoint, Credentials()), ("Joined",))
    await in_thread(producer.startup)
    client = RemotingClient()
    try:
        msg = Message()
        msg.topic, msg.body = "Joined", b"through the join"
        assert (await in_thread(producer.send, msg)).message_id
        conns = await BrokerAdmin(client).producer_connections(stack.broker.addr, "Joined")
        (conn,) = conns.connection_set
        host, _, port = conn.client_addr.rpartition(":")
        assert host == "127.0.0.1"
        links = tcp_links()
        # The client's own socket, connected to grpcServerPort, not the join's to grpc.
        assert (int(port), stack.proxy.port) in links
        join = stack.proxy.join
        if join is not None:
            assert not {(int(port), join.plaintext_port), (int(port), join.tls_port)} & links
    finally:
        await client.close()
        await in_thread(producer.shutdown)


async def test_a_silent_connection_is_closed_after_the_first_byte_timeout(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    async with running_broker(tmp_path, namesrv) as broker:
        proxy = local_proxy(broker, with_front(TEST_PROXY))
        proxy.first_byte_timeout = 0.2
        await proxy.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, nothing sent
            writer.close()
        finally:
            await proxy.stop(grace=0)


async def test_stop_closes_joined_connections_and_leaves_no_process_or_thread(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    threads = set(threading.enumerate())
    async with running_broker(tmp_path, namesrv) as broker:
        proxy = local_proxy(broker, GRPCIO)
        await proxy.start()
        assert proxy.join is not None and proxy.join.process is not None
        process = proxy.join.process
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(H2_PREFACE)  # joined to grpc's plaintext port
        await writer.drain()
        assert (await reader.read(9))  # grpc's SETTINGS frame came back through the join
        await proxy.stop(grace=0)
        await asyncio.wait_for(reader.read(), 10)  # grpc's GOAWAY, then the end
        assert reader.at_eof()
        writer.close()
        assert process.returncode is not None
        assert not os.path.exists(f"/proc/{process.pid}")
        assert proxy.join is None
    assert not {t for t in threading.enumerate() if t not in threads and
                t.name.startswith("proxy-join")}


async def test_a_join_process_that_dies_is_started_again_on_the_same_port(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    async with running_stack(tmp_path, namesrv, GRPCIO) as stack:
        join = stack.proxy.join
        assert join is not None and join.process is not None
        await stack.create_topic("Again")
        async with grpc.aio.insecure_channel(address(stack)) as channel:
            await route_and_send(channel, "Again")
        first = join.process
        first.kill()
        await asyncio.to_thread(first.wait)
        # The port never closed: a new connection waits in its queue for the new process.
        async with grpc.aio.insecure_channel(address(stack)) as channel:
            await route_and_send(channel, "Again")
        assert join.restarts == 1
        assert join.process is not None and join.process.pid != first.pid


async def test_configured_key_and_certificate_are_served(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    material = self_signed(["proxy.example"])
    key, cert = tmp_path / "rocketmq.key", tmp_path / "rocketmq.crt"
    key.write_bytes(material.key)
    cert.write_bytes(material.certificate)
    files = config("enforcing", tls_key_path=str(key), tls_cert_path=str(cert),
                   tls_test_mode_enable=False)
    async with running_stack(tmp_path, namesrv, files) as stack:
        assert stack.proxy.tls is not None
        assert stack.proxy.tls.certificate == material.certificate
        assert stack.proxy.tls.source == str(cert)
        await stack.create_topic("Files")
        async with tls_channel(stack) as channel:
            await route_and_send(channel, "Files")


async def start_refused(tmp_path: Path, namesrv: NamesrvController,
                        proxy_config: ProxyConfig) -> str:
    async with running_broker(tmp_path, namesrv) as broker:
        proxy: ProxyServer = local_proxy(broker, proxy_config)
        with pytest.raises(ProxyTlsError) as info:
            await proxy.start()
        await proxy.stop(grace=0)
    return str(info.value)


async def test_a_missing_or_mismatched_key_file_stops_the_start_naming_it(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    cert = tmp_path / "rocketmq.crt"
    cert.write_bytes(self_signed().certificate)
    key = tmp_path / "other.key"
    key.write_bytes(self_signed().key)
    missing = str(tmp_path / "nope.key")
    message = await start_refused(tmp_path, namesrv, config(
        "permissive", tls_key_path=missing, tls_cert_path=str(cert)))
    assert f"tlsKeyPath {missing}" in message
    message = await start_refused(tmp_path, namesrv, config(
        "enforcing", tls_key_path=str(key), tls_cert_path=str(cert)))
    assert str(cert) in message and str(key) in message
    message = await start_refused(tmp_path, namesrv, config(
        "enforcing", tls_test_mode_enable=False))
    assert "tlsKeyPath and tlsCertPath" in message


def test_rmq_proxy_json_tls_keys() -> None:
    raw = json.loads('{"tlsServerMode": "enforcing", "tlsTestModeEnable": false, '
                     '"tlsKeyPath": "/k", "tlsCertPath": "/c"}')
    loaded, unused, unknown = load_proxy_config(raw)
    assert loaded.tls_mode is TlsMode.ENFORCING and not loaded.tls_test_mode_enable
    assert (loaded.tls_key_path, loaded.tls_cert_path) == ("/k", "/c")
    assert unused == unknown == []
    with pytest.raises(ConfigError) as info:
        load_proxy_config({"tlsServerMode": "strict"})
    assert info.value.key == "tlsServerMode"


def test_mqproxy_and_mqbroker_name_a_missing_certificate_file(tmp_path: Path) -> None:
    missing = str(tmp_path / "rocketmq.crt")
    key = tmp_path / "rocketmq.key"
    key.write_bytes(self_signed().key)
    pc = proxy_json(tmp_path, tlsKeyPath=str(key), tlsCertPath=missing)
    conf = write_conf(tmp_path, namesrvAddr="127.0.0.1:9")
    for command in (["engine.proxy.main", "-n", "127.0.0.1:9", "--logs-dir",
                     str(tmp_path / "logs")],
                    ["engine.broker.main", "-c", str(conf), "--enable-proxy"]):
        done = subprocess.run([sys.executable, "-m", *command, "-pc", str(pc)],
                              capture_output=True, text=True, env=env(tmp_path), timeout=60)
        assert done.returncode == 1, done.stderr
        assert f"cannot read tlsCertPath {missing}" in done.stderr


def join_process_of(pid: int) -> int:
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            for child in f.read().split():
                with open(f"/proc/{child}/cmdline", "rb") as cmdline:
                    if b"engine.proxy.join_process" in cmdline.read():
                        return int(child)
    raise AssertionError(f"process {pid} has no join process")


async def test_the_join_process_ends_when_the_broker_is_killed(
        tmp_path: Path, namesrv: NamesrvController) -> None:
    conf = write_conf(tmp_path, namesrvAddr=f"127.0.0.1:{namesrv.port}")
    proc, _ = await serve_until_line(  # the join in the broker's process (no workers)
        [sys.executable, "-m", "engine.broker.main", "-c", str(conf), "--enable-proxy",
         "-pc", str(proxy_json(tmp_path, proxyWorkers=0, grpcFront="grpcio"))], tmp_path,
        "gRPC proxy boot success")
    try:
        ended = asyncio.Event()
        pidfd = os.pidfd_open(join_process_of(proc.pid))
        loop = asyncio.get_running_loop()
        loop.add_reader(pidfd, ended.set)  # readable once the process has ended
        try:
            proc.kill()  # no stop: the join process sees its stdin end
            await asyncio.wait_for(ended.wait(), STARTUP_S)
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
