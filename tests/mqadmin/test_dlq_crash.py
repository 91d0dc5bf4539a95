"""A 2,000-message resend killed with SIGKILL at random points, resumed until done: every dead
letter reaches the target exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter

from engine.client.admin.cluster import MQAdmin
from engine.protocol.body.message_queue import MessageQueue
from mqadmin.operations.dlq.ledger import SENT, Ledger
from mqadmin.operations.dlq.model import LINK_PROPERTY
from tests.mqadmin.conftest import BackgroundCluster
from tests.mqadmin.dlq_helpers import setup_group, stuff

N = 2000


#: `mqadmin` with Ctrl-C as a terminal delivers it: a suite started in the background (`&` in
#: a script) passes its processes SIGINT ignored, and Python keeps an ignored SIGINT ignored.
AS_FROM_A_TERMINAL = ("import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler)"
                      "; from mqadmin.app import main; sys.exit(main())")


def _mqadmin(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", AS_FROM_A_TERMINAL, *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=os.environ.copy())


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.stderr is not None
    proc.stderr.close()


def _copies(cluster: BackgroundCluster, topic: str) -> Counter[str]:
    async def read(admin: MQAdmin) -> Counter[str]:
        route = await admin.namesrv.topic_route(topic)
        links: Counter[str] = Counter()
        for q in route.queue_datas:
            for i in range(q.read_queue_nums):
                mq = MessageQueue(topic, q.broker_name, i)
                offset = 0
                while True:
                    pulled = await admin.broker.pull_records(cluster.broker_addr, mq, offset)
                    if not pulled.records:
                        break
                    links.update(r.properties().get(LINK_PROPERTY, "") for r in pulled.records)
                    offset = pulled.next_begin_offset
        return links
    result: Counter[str] = cluster.admin_call(read)
    return result


def test_sigkill_at_random_points_then_resume(cluster: BackgroundCluster) -> None:
    rng = random.Random(1209)
    setup_group(cluster, "g1", "Orders", dlq_perm=6)
    stuff(cluster, "g1", "Orders", N)
    common = ("-n", cluster.ns, "--rate", "1000")
    first = _mqadmin("dlq", "resend", "-g", "g1", "--yes", *common)
    assert first.stderr is not None
    batch = None
    for line in first.stderr:
        if line.startswith("batch "):
            batch = line.split()[1].rstrip(":")
            break
    assert batch is not None, "the resend never opened its batch"
    time.sleep(rng.uniform(0.0, 0.8))  # a random point of the sends
    _kill(first)
    for _ in range(3):
        resumed = _mqadmin("dlq", "resend", "--resume", batch, *common)
        assert resumed.stderr is not None
        for line in resumed.stderr:
            if line.startswith("resuming batch"):
                break
        time.sleep(rng.uniform(0.0, 0.6))  # a random point of the sends
        _kill(resumed)
    final = subprocess.run([sys.executable, "-m", "mqadmin.app", "dlq", "resend", "--resume",
                            batch, *common], capture_output=True, text=True, timeout=120)
    assert final.returncode == 0, final.stderr
    with Ledger(";".join([cluster.ns])) as ledger:
        assert ledger.counts(batch) == {SENT: N}
        offset_ids = {r["dl_offset_msg_id"] for r in ledger.rows(batch)}
    copies = _copies(cluster, "%RETRY%g1")
    assert len(offset_ids) == N
    assert {k: n for k, n in copies.items() if n != 1} == {}
    assert set(copies) == offset_ids


def test_ctrl_c_names_the_batch_to_resume(cluster: BackgroundCluster) -> None:
    setup_group(cluster, "g1", "Orders", dlq_perm=6)
    stuff(cluster, "g1", "Orders", 300)
    # 300 at 20 a second: 15 s in which the Ctrl-C lands, however busy the machine
    proc = _mqadmin("dlq", "resend", "-g", "g1", "--yes", "-n", cluster.ns, "--rate", "20")
    assert proc.stderr is not None
    batch = next(line.split()[1].rstrip(":") for line in proc.stderr
                 if line.startswith("batch "))
    proc.send_signal(signal.SIGINT)
    rest = proc.stderr.read()
    assert proc.wait(30) == 130
    assert f"--resume {batch}" in rest
    final = subprocess.run([sys.executable, "-m", "mqadmin.app", "dlq", "resend", "--resume",
                            batch, "-n", cluster.ns], capture_output=True, text=True,
                           timeout=120)
    assert final.returncode == 0, final.stderr
    copies = _copies(cluster, "%RETRY%g1")
    assert len(copies) == 300 and set(copies.values()) == {1}
