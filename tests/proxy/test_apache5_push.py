"""The official clients' PushConsumers through Apache 5.3.3's proxy and through ours: the same
deliveries (attempt numbers, results, order), the same dead letters, and backoffs within a
tolerance, for a NORMAL topic whose listener fails some times then succeeds, one whose listener
always fails or throws, and a FIFO topic whose first message always fails (the message group
waits behind it until it is in the DLQ).  Opt-in: APACHE_RMQ5_HOME (tests/apache5.py starts
Apache's name server and broker with its proxy); the Java client also needs RMQ_JAVA5_PEER.

None of the three clients has a consumption timeout for a PushConsumer's listener, so there is
no such case (docs/proxy.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.namesrv.controller import NamesrvController
from tests.apache5 import Apache5, apache5, needs_apache5
from tests.proxy.conftest import running_stack
from tests.proxy.differential import topic_creator
from tests.proxy.nodejs import NodeClient
from tests.proxy.push_retry import (
    DEAD,
    FIFO,
    FIFO_RETRY,
    JAVA5_PEER,
    RETRY,
    THROWN,
    Case,
    Driver,
    java_client,
    node_client_driver,
    python_client,
    run_case,
)

pytestmark = [needs_apache5, pytest.mark.timeout(1800)]
__all__ = ["apache5"]

#: How far apart two proxies' backoffs (seconds between a message's deliveries) may be: a
#: message nacked for its backoff comes back at the broker's next revive or at the end of the
#: client's pending long poll, and the machine is busy.
TOLERANCE_S = 3.0


async def _both(apache5: Apache5, tmp_path: Path, namesrv: NamesrvController, driver: Driver,
                cases: tuple[Case, ...]) -> None:
    theirs: dict[str, Any] = {}
    for case in cases:
        theirs[case.name] = await run_case(apache5.grpc, apache5.broker,
                                           topic_creator(apache5.broker), driver, case)
    ours: dict[str, Any] = {}
    async with running_stack(tmp_path, namesrv) as stack:
        for case in cases:
            ours[case.name] = await run_case(stack.endpoint, stack.broker.addr,
                                             topic_creator(stack.broker.addr), driver, case)
    print("ours", ours, "\ntheirs", theirs)
    differs: dict[str, Any] = {}
    for case in cases:
        (mine, my_gaps), (its, its_gaps) = ours[case.name], theirs[case.name]
        _without_hook_properties(mine, its)
        if mine != its:
            differs[case.name] = (mine, its)
        elif len(my_gaps) != len(its_gaps) or any(
                abs(my_gap - its_gap) >= TOLERANCE_S
                for my_gap, its_gap in zip(my_gaps, its_gaps, strict=False)):
            differs[case.name] = (my_gaps, its_gaps)
    assert not differs, differs


def _without_hook_properties(*seen: dict[str, Any]) -> None:
    """5.3.3 stores MSG_REGION and TRACE_ON in every message its send hooks see, dead letters
    too (ours answers them in the send's response only): docs/proxy.md "What differs"."""
    for one in seen:
        for dead in one["dead"]:
            for key in ("MSG_REGION", "TRACE_ON"):
                dead["properties"].pop(key, None)


CASES = (RETRY, DEAD, THROWN, FIFO, FIFO_RETRY)


async def test_python_push_consumer_as_apache_5_3_3(apache5: Apache5, tmp_path: Path,
                                                    namesrv: NamesrvController) -> None:
    await _both(apache5, tmp_path, namesrv, python_client, CASES)


async def test_node_push_consumer_as_apache_5_3_3(apache5: Apache5, tmp_path: Path,
                                                  namesrv: NamesrvController,
                                                  node_client: NodeClient) -> None:
    await _both(apache5, tmp_path, namesrv, node_client_driver(node_client), CASES)


@pytest.mark.skipif(not (JAVA5_PEER and Path(JAVA5_PEER).is_file()),
                    reason="needs RMQ_JAVA5_PEER (the Java 5.x client's peer5.sh)")
async def test_java_push_consumer_as_apache_5_3_3(apache5: Apache5, tmp_path: Path,
                                                  namesrv: NamesrvController) -> None:
    await _both(apache5, tmp_path, namesrv, java_client,
                tuple(case for case in CASES if not case.throws))
