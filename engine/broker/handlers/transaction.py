"""END_TRANSACTION (37): a producer commits or rolls back a half message (see `transaction.py`).

Java producers send it oneway, so the answer is only read by clients that call it
synchronously; an "unknown" answer gets none, as in 4.9.7.
"""

from __future__ import annotations

from engine.broker.state import BrokerState
from engine.broker.transaction import end_transaction
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.broker import EndTransactionRequestHeader
from engine.protocol.wire import from_ext
from engine.remoting.router import RequestContext, Router

router = Router()

Ctx = RequestContext[BrokerState]


@router.handles(RequestCode.END_TRANSACTION)
def end_transaction_request(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand | None:
    st = ctx.state
    if st.is_slave:
        return cmd.response(ResponseCode.SLAVE_NOT_AVAILABLE,
                            "Slave broker cannot handle END_TRANSACTION; send it to the master")
    header = from_ext(EndTransactionRequestHeader, cmd.ext_fields)
    outcome = end_transaction(st, header)
    if outcome is None:
        return None
    return cmd.response(outcome.code, outcome.remark)
