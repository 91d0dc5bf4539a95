"""What an EndTransaction needs to reach the broker: the half message's place, by transaction id.

How this works (5.3 `TransactionDataManager`): a half message sent through the proxy is
recorded under (producer group, transaction id) with its broker, queue offset and commit-log
offset, and so is every orphaned-transaction check a broker asks (then with the connection it
came on, since the answer is an END_TRANSACTION on that connection, fromTransactionCheck).
EndTransaction takes the entry out; entries expire after transactionDataExpireMillis or the
message's own recovery time, whichever is longer (the broker's checks take over after that).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from engine.remoting.connection import Connection

OFFSET_HEX_DIGITS = 16  # an offset message id ends with the commit-log offset, 8 bytes


def commit_log_offset(offset_msg_id: str) -> int:
    """The commit-log offset inside an offset message id (hex of IP, port, offset).

    Raises:
        ValueError: not such an id.
    """
    if len(offset_msg_id) < 32:
        raise ValueError(f"not an offset message id: {offset_msg_id!r}")
    return int(offset_msg_id[-OFFSET_HEX_DIGITS:], 16)


@dataclass(frozen=True, slots=True)
class HalfMessage:
    producer_group: str
    transaction_id: str
    msg_id: str
    broker_name: str
    broker_addr: str
    tran_state_table_offset: int
    commit_log_offset: int
    expires_at: float
    #: Set for a broker's check: the answer goes back on this connection.
    check_conn: Connection | None = None


class TransactionTable:
    def __init__(self, expire_ms: int) -> None:
        self.expire_s = expire_ms / 1000
        self._entries: dict[tuple[str, str], HalfMessage] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def deadline(self, recovery_s: int = 0) -> float:
        return time.monotonic() + max(self.expire_s, float(recovery_s))

    def add(self, half: HalfMessage) -> None:
        self._entries[(half.producer_group, half.transaction_id)] = half

    def pop(self, producer_group: str, transaction_id: str) -> HalfMessage | None:
        return self._entries.pop((producer_group, transaction_id), None)

    def expire(self) -> int:
        now = time.monotonic()
        gone = [k for k, v in self._entries.items() if v.expires_at < now]
        for key in gone:
            del self._entries[key]
        return len(gone)
