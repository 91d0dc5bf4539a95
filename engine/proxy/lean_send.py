"""The lean SendMessage path: one message, from the request to SEND_MESSAGE_V2 and back.

How this works: most SendMessage calls carry one message that is not transactional, to a
topic whose route and type are cached.  For those the servicer takes this path: the same
checks and conversion as the full path (`validate.validate_topic`, `messages.to_remoting`,
`check_message_type`, the same queue choice), but the cached route and type are read
without a coroutine each (`BrokerGateway.cached_write_queues` / `cached_message_type`),
the SEND_MESSAGE_V2 header goes in RocketMQ's binary header encoding
(SerializeType.ROCKETMQ: no JSON written by the proxy nor parsed by the broker, and the
answer comes back in it), and the answer is the full path's entry for the message.  Anything else
(several messages, a transaction's half message, a topic not cached yet) takes the full
path (`producer.send_message`), which stays the reference: tests send the same messages
through both and compare what the broker stored and what the client was answered
(tests/proxy/test_lean_send.py).
"""

from __future__ import annotations

import time

from engine.protocol.message import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from engine.proxy import producer
from engine.proxy.caller import CallContext
from engine.proxy.core import ProxyCore
from engine.proxy.messages import check_message_type, message_type, to_remoting
from engine.proxy.route import queue_for_group
from engine.proxy.status import OK_STATUS, ProxyError, status
from engine.proxy.v2 import definition_pb2 as pb
from engine.proxy.v2 import service_pb2 as spb
from engine.proxy.validate import validate_topic


async def send_message(core: ProxyCore, ctx: CallContext,
                       request: spb.SendMessageRequest) -> spb.SendMessageResponse:
    """SendMessage, the lean way when it can be (else the full path).

    Raises:
        ProxyError: a check failed, or the broker refused or could not be reached.
    """
    messages = request.messages
    if len(messages) != 1:
        return await producer.send_message(core, ctx, request)
    msg = messages[0]
    if msg.system_properties.message_type == pb.TRANSACTION:
        return await producer.send_message(core, ctx, request)
    topic = validate_topic(msg.topic)
    gateway = core.gateway
    queues = gateway.cached_write_queues(topic)
    check = core.config.enable_topic_message_type_check and not (
        topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX))
    kind = gateway.cached_message_type(topic) if check else None
    if queues is None or (check and kind is None):  # not cached yet: the full path fetches
        return await producer.send_message(core, ctx, request)
    out = to_remoting(msg, born_host=ctx.remote_addr, config=core.config,
                      now_ms=int(time.time() * 1000))
    if kind is not None:
        check_message_type(kind, message_type(out.properties))
    if not queues:
        raise ProxyError(pb.FORBIDDEN, "no writable queue")
    group = out.message_group
    queue = (queue_for_group(queues, group) if group
             else queues[core.next_turn(topic) % len(queues)])
    (sent,) = await gateway.send(queue, [out], binary=True)
    entry = producer._entry(sent, out.message_id)  # the full path's answer to one message
    code = entry.status.code
    return spb.SendMessageResponse(status=OK_STATUS if code == pb.OK else status(code),
                                   entries=[entry])
