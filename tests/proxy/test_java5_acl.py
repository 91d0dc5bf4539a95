"""The official RocketMQ 5 Java client (rocketmq-client-java 5.0.3, through the Peer5 command-line
peer) with the proxy in the broker and 4.9's plain_acl.yml: an account with PUB|SUB sends and
receives on a NORMAL and a FIFO topic, over TLS (the Java client's default); a wrong secret is
refused.  Opt-in: RMQ_JAVA5_PEER names the peer's `peer5.sh` (docs/proxy.md)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from engine.namesrv.controller import NamesrvController
from tests.proxy.conftest import Stack
from tests.proxy.test_acl_with_proxy import APP, GROUP, _create_topics, acl_1_0

PEER = os.environ.get("RMQ_JAVA5_PEER", "")
pytestmark = [pytest.mark.skipif(not (PEER and Path(PEER).is_file()),
                                 reason="needs RMQ_JAVA5_PEER (the Java 5.x client's peer5.sh)"),
              pytest.mark.timeout(300)]


async def peer(stack: Stack, *args: str, secret: str = APP[1]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        PEER, stack.endpoint, *args, "--ak", APP[0], "--sk", secret,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_the_java_client_with_pub_and_sub(tmp_path: Path,
                                                namesrv: NamesrvController) -> None:
    async with acl_1_0(tmp_path, namesrv) as stack:
        await _create_topics(stack)
        for topic, kind in (("AclNormal", "normal"), ("AclFifo", "fifo")):
            code, out, err = await peer(stack, "send", topic, "2", "--type", kind, "--tag", "T")
            assert code == 0, err
            ids = out.split()
            code, out, err = await peer(stack, "simple", topic, GROUP, "2", "--tag", "T",
                                        "--timeout-s", "60")
            assert code == 0, err
            assert sorted(line.split(" id=")[1].split()[0] for line in out.splitlines()) == \
                sorted(ids)
        code, out, err = await peer(stack, "send", "AclNormal", "1", secret="wrong")
        assert code == 1 and "response-code=40100" in err, (out, err)
