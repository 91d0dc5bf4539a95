"""Batches: Java's `MessageBatch.generateFromList` rules, and splitting at the size limit.

How this works: a batch is messages of one topic with the same `wait_store_msg_ok`, none
delayed and none for a ``%RETRY%`` topic.  Each message gets its own `UNIQ_KEY`, then the
list is cut into consecutive chunks whose batch body (message-format.md §4: 20 + body + 2 +
properties bytes per message) stays within `max_size` - what Apache's examples do with their
`ListSplitter` - and each chunk is sent as one SEND_BATCH_MESSAGE.  A message too large to
travel alone is refused.  Batches are never compressed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.client.core.errors import MessageValidationError
from engine.client.core.message import Message
from engine.client.core.send_codec import RETRY_PREFIX, prepare_message
from engine.client.core.validate import check_message
from engine.protocol.message import BatchItem, encode_batch_body, properties_to_string

ITEM_OVERHEAD = 20 + 2  # four int32 + body length, then the int16 properties length


@dataclass(frozen=True, slots=True)
class Chunk:
    """One SEND_BATCH_MESSAGE worth: its body and the `UNIQ_KEY` of each message."""

    body: bytes
    uniq_keys: tuple[str, ...]

    @property
    def msg_id(self) -> str:
        return ",".join(self.uniq_keys)


def check_batch(msgs: Sequence[Message], max_size: int) -> None:
    if not msgs:
        raise MessageValidationError("a batch needs at least one message")
    first = msgs[0]
    for msg in msgs:
        check_message(msg, max_size)
        if msg.delay_time_level > 0:
            raise MessageValidationError("TimeDelayLevel is not supported for batching")
        if msg.topic.startswith(RETRY_PREFIX):
            raise MessageValidationError("Retry Group is not supported for batching")
        if msg.topic != first.topic:
            raise MessageValidationError(
                "The topic of the messages in one batch should be the same")
        if msg.wait_store_msg_ok != first.wait_store_msg_ok:
            raise MessageValidationError(
                "The waitStoreMsgOK of the messages in one batch should the same")


def chunks(msgs: Sequence[Message], max_size: int) -> list[Chunk]:
    """Validate `msgs` and cut them into batch bodies of at most `max_size` bytes each."""
    check_batch(msgs, max_size)
    out: list[Chunk] = []
    items: list[BatchItem] = []
    keys: list[str] = []
    size = 0
    for msg in msgs:
        props, uniq = prepare_message(msg)
        text = properties_to_string(props)
        item_size = ITEM_OVERHEAD + len(msg.body) + len(text.encode())
        if item_size > max_size:
            raise MessageValidationError(
                f"a message of {item_size} bytes in the batch exceeds the {max_size}-byte "
                "limit on its own; send it alone (it will be compressed)")
        if items and size + item_size > max_size:
            out.append(Chunk(encode_batch_body(items), tuple(keys)))
            items, keys, size = [], [], 0
        items.append(BatchItem(msg.flag, msg.body, text))
        keys.append(uniq)
        size += item_size
    out.append(Chunk(encode_batch_body(items), tuple(keys)))
    return out
