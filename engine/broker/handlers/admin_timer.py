"""Timer messages for operators and slaves: the runtime-info keys and GET_TIMER_CHECK_POINT (60).

The keys are 5.3's `AdminBrokerProcessor.prepareRuntimeInfo` ones, so `mqadmin brokerStatus`
(ours and Apache's) shows them: timerReadBehind (s the wheel's read time is behind now),
timerOffsetBehind (timer-queue entries not yet in the wheel), timerCongestNum (timers waiting),
timerEnqueueTps and timerDequeueTps.
"""

from __future__ import annotations

from engine.broker.state import BrokerState
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand
from engine.remoting.router import RequestContext, Router

router = Router()

Ctx = RequestContext[BrokerState]


def _java_float(value: float) -> str:
    """`String.valueOf(float)` for the rates printed here (e.g. 0.0, 1234.5)."""
    return repr(round(float(value), 1))


def timer_runtime_info(st: BrokerState) -> dict[str, str]:
    timers = st.store.timer
    if not timers.enabled:
        return {"timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0",
                "timerEnqueueTps": "0.0", "timerDequeueTps": "0.0"}
    enqueue_tps, dequeue_tps = st.timer.tps()
    return {
        "timerReadBehind": str(timers.dequeue_behind_ms(st.clock()) // 1000),
        "timerOffsetBehind": str(timers.enqueue_behind_messages()),
        "timerCongestNum": str(timers.congest_num_total()),
        "timerEnqueueTps": _java_float(enqueue_tps),
        "timerDequeueTps": _java_float(dequeue_tps),
    }


@router.handles(RequestCode.GET_TIMER_CHECK_POINT)
def get_timer_check_point(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    """The checkpoint as 5.3 encodes it (its 56 bytes, then our deliveredFromPhy)."""
    return cmd.response(body=ctx.state.store.timer.snapshot().encode())
