"""Recall handles (5.3.3 `RecallMessageHandle.HandleV1`): what names a timer message to withdraw.

How this works: a handle is the URL-safe Base64 (padded) of five fields joined by
spaces, ``v1 TOPIC BROKER_NAME TIMESTAMP_MS MESSAGE_ID``; TIMESTAMP_MS is the timer's slot
time (its TIMER_OUT_MS) plus one, MESSAGE_ID its unique key (UNIQ_KEY).  The broker that
parked the timer puts one in its send answer (`recallHandle`), the 5.x proxy passes it to
clients, and RECALL_MESSAGE brings it back.  Decoding follows Java's: an empty text, bad
Base64, another version or fewer than five fields are "recall handle is invalid"; fields
beyond five are ignored.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from engine.protocol.errors import ProtocolError

VERSION_1 = "v1"
INVALID = "recall handle is invalid"
_JAVA_LONG = re.compile(r"[+-]?[0-9]+")
_URL_SAFE = re.compile(r"[A-Za-z0-9_-]*={0,2}")


class RecallHandleError(ProtocolError):
    """A recall handle that does not decode (its message is 5.3.3's)."""


@dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    broker_name: str
    timestamp: str  # as written: a number in a handle this engine made, any text otherwise
    message_id: str

    def encode(self) -> str:
        raw = " ".join((VERSION_1, self.topic, self.broker_name, self.timestamp,
                        self.message_id))
        return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")

    @property
    def timestamp_ms(self) -> int:
        """`NumberUtils.toLong(text, -1)`."""
        if not _JAVA_LONG.fullmatch(self.timestamp):
            return -1
        value = int(self.timestamp)
        return value if -2**63 <= value < 2**63 else -1


def decode_handle(handle: str) -> RecallHandle:
    """Raises:
        RecallHandleError: the handle is not a v1 recall handle.
    """
    if not handle or not _URL_SAFE.fullmatch(handle) or len(handle.rstrip("=")) % 4 == 1:
        raise RecallHandleError(INVALID)
    text = handle.rstrip("=")
    try:  # Java's URL decoder takes the padding or not
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise RecallHandleError(INVALID) from None
    items = raw.decode("utf-8", errors="replace").split(" ")
    while len(items) > 1 and not items[-1]:  # Java's split drops trailing empty strings
        items.pop()
    if items[0] != VERSION_1 or len(items) < 5:
        raise RecallHandleError(INVALID)
    return RecallHandle(items[1], items[2], items[3], items[4])
