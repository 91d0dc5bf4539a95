"""A consumer process for the SIGKILL test: it claims a key, says so, and hangs in its
listener until it is killed.  ``python -m tests.client.dedupe_victim NAMESRV DB GROUP TOPIC``"""

from __future__ import annotations

import asyncio
import sys

from engine.client.consume.consumer_options import ConsumerOptions
from engine.client.consume.dedupe import Dedupe
from engine.client.consume.dedupe_sqlite import SqliteKeyStore
from engine.client.consume.push_consumer import PushConsumer
from engine.client.core.client_config import ClientConfig
from engine.client.core.message import MessageExt
from engine.client.core.results import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from engine.protocol.body.heartbeat import ConsumeFromWhere

LEASE_MS = 2000


async def main(namesrv: str, db: str, group: str, topic: str) -> None:
    config = ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name="victim")
    options = ConsumerOptions(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                              dedupe=Dedupe(SqliteKeyStore(db), lease_ms=LEASE_MS))
    consumer = PushConsumer(group, config, options=options)
    consumer.subscribe(topic, "*")

    async def hang(msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
                   ) -> ConsumeConcurrentlyStatus:
        print("consuming", *(m.keys[0] for m in msgs), flush=True)
        await asyncio.Event().wait()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_concurrently(hang)
    await consumer.start()
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
