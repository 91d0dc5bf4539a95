"""CONSUME_MESSAGE_DIRECTLY for the push consume services: one listener call, timed, answered.

How this works (Java's `consumeMessageDirectly` in both consume services): the listener is
called on the one message the broker relayed, outside the process queues, so no offset moves
and nothing is sent back.  The service's own verdict table maps the listener's status to a
`CMResult`; None, or a status missing from the table, answers CR_RETURN_NULL, and an
exception answers CR_THROW_EXCEPTION with its repr.  `spent_time_mills` is the call's
duration either way.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from engine.protocol.body.admin import CMResult, ConsumeMessageDirectlyResult

S = TypeVar("S")


async def consume_directly(orderly: bool, results: Mapping[S, CMResult],
                           call: Callable[[], S | Awaitable[S | None] | None]
                           ) -> ConsumeMessageDirectlyResult:
    """Run `call` (the listener on the one message) and answer the broker.

    Args:
        orderly: the answer's `order` (the orderly service's answers say True).
        results: the service's listener status -> CMResult table.
        call: the listener call; it returns the status, or an awaitable of it.
    """
    begin = time.monotonic()
    try:
        outcome = call()
        status = await outcome if inspect.isawaitable(outcome) else outcome
    except Exception as exc:
        return ConsumeMessageDirectlyResult(orderly, True, CMResult.CR_THROW_EXCEPTION,
                                            repr(exc), _ms_since(begin))
    result = results.get(status, CMResult.CR_RETURN_NULL) if status else CMResult.CR_RETURN_NULL
    return ConsumeMessageDirectlyResult(orderly, True, result, None, _ms_since(begin))


def _ms_since(begin: float) -> int:
    return int((time.monotonic() - begin) * 1000)
