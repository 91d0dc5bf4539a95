"""`BrokerAdmin`: typed async calls for every admin request a broker answers.

How this works: `BrokerAdmin` shares a `RemotingClient` (and so its connections) with its
caller and sends each request to the broker address given as the first argument; there is
no fail-over, since each broker holds its own topics, groups, offsets and messages.  The
calls come in families, one module each, all built on `BrokerCalls` (core/broker_call.py):

    TopicGroupCalls     topics, subscription groups, offset tables     admin/topics
    ConsumerCalls       consume stats, connections, resets, relayed    admin/consumers
    OffsetCalls         one queue's committed/min/max/searched offset  core/offset_calls
    MessageCalls        messages by key, unique key, id, queue entry   admin/messages
    PullCalls           a queue read as tools read it (no commit)      admin/pull
    BrokerConfigCalls   settings, runtime info, statistics, store      admin/config
    AuthCalls           users, ACL rules, ACL 1.0 accounts             admin/auth

(`OffsetCalls` sits in the core because the consumers' `ClientAPI` makes the same calls.)

Errors: `UnreachableError` (role "broker") when the broker cannot be reached or does not
answer within `timeout`, the `ServerError` registered for the answer's code (errors.py),
`BadResponseError` when the answer does not decode, `InvalidAddressError` for an address
that is not ``host:port``.  The same calls work against this engine's broker and Apache
RocketMQ 4.9/5.x brokers: requests carry the 4.9.7 header fields (plus 5.x names where they
differ), answers are read leniently (fastjson forms, unknown fields ignored).
"""

from __future__ import annotations

from engine.client.admin.auth import AuthCalls
from engine.client.admin.config import BrokerConfigCalls
from engine.client.admin.consumers import RESET_TO_MAX, ConsumerCalls
from engine.client.admin.messages import (
    MessageCalls,
    QueryMessageResult,
    message_store_addr,
    split_offset_msg_id,
)
from engine.client.admin.pull import PullCalls, RecordPull
from engine.client.admin.topics import DEFAULT_TOPIC, DelayOffsets, TopicGroupCalls
from engine.client.core.broker_call import DEFAULT_TIMEOUT
from engine.client.core.offset_calls import OffsetCalls

__all__ = [
    "DEFAULT_TIMEOUT",
    "DEFAULT_TOPIC",
    "RESET_TO_MAX",
    "BrokerAdmin",
    "DelayOffsets",
    "QueryMessageResult",
    "RecordPull",
    "message_store_addr",
    "split_offset_msg_id",
]


class BrokerAdmin(TopicGroupCalls, ConsumerCalls, OffsetCalls, MessageCalls, PullCalls,
                  BrokerConfigCalls, AuthCalls):
    """Admin calls to brokers by address: ``await BrokerAdmin(client).topic_stats(addr, t)``.

    Args:
        client: the `RemotingClient` to send through; the caller owns and closes it.
        timeout: seconds to wait for each answer; calls the broker relays to a consumer
            wait three times as long unless given their own `timeout`.
    """
