"""A 4.x remoting send to a V2 POP retry topic ``%RETRY%G+T`` (enableRetryTopicV2): refused
as Apache 5.3.3 refuses it, INVALID_PARAMETER for the "+" in the name, whether or not the
broker made the topic; the group's own retry topic takes sends as before."""

from __future__ import annotations

from pathlib import Path

from engine.namesrv.controller import NamesrvController
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.receipt import pop_retry_topic
from engine.remoting.client import RemotingClient

from .conftest import call, running_broker
from .helpers import send_request

GROUP_G = b'{"groupName":"G","consumeEnable":true,"retryMaxTimes":2}'
RULE = "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"


async def test_send_to_a_v2_pop_retry_topic_is_refused_as_5_3_3(
        tmp_path: Path, namesrv: NamesrvController, client: RemotingClient) -> None:
    async with running_broker(tmp_path, namesrv, enable_retry_topic_v2=True) as broker:
        await call(client, broker.addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                   body=GROUP_G)
        made = pop_retry_topic("T", "G", v2=True)  # as the broker's POP retry makes it
        broker.state.topics.create_if_absent(made, 1)
        for topic, times in ((made, None), (made, 5), ("%RETRY%H+T", None)):
            resp = await client.invoke(
                broker.addr, send_request(topic, b"x", reconsume_times=times), timeout=10)
            assert (resp.code, resp.remark) == (ResponseCode.INVALID_PARAMETER, RULE), topic
        # the group's own retry topic still takes sends
        resp = await client.invoke(broker.addr, send_request("%RETRY%G", b"x"), timeout=10)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
