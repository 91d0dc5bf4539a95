"""Cached route bodies never outlive a change of the route tables."""

from __future__ import annotations

from pathlib import Path

from engine.namesrv.config import NamesrvConfig
from engine.namesrv.handlers.route import get_route_info
from engine.namesrv.state import NamesrvState
from engine.protocol import fastjson
from engine.protocol.body.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from engine.protocol.codes import ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.remoting.router import RequestContext


def _query(state: NamesrvState, topic: str = "T") -> RemotingCommand:
    ctx: RequestContext[NamesrvState] = RequestContext(state, None)  # type: ignore[arg-type]
    return get_route_info(ctx, request(105, {"topic": topic}))


def _perms(resp: RemotingCommand) -> list[int]:
    return [q["perm"] for q in fastjson.loads(resp.body or b"")["queueDatas"]]


def _register(state: NamesrvState, name: str, counter: int, queues: int = 4) -> None:
    wrapper = TopicConfigSerializeWrapper({"T": TopicConfig("T", queues, queues)},
                                          DataVersion(1, counter))
    state.routes.register_broker("C", f"10.0.0.{counter}:10911", name, 0, "h:1", wrapper)


def test_every_mutation_invalidates_cached_routes(tmp_path: Path) -> None:
    state = NamesrvState(NamesrvConfig(kv_config_path=str(tmp_path / "kv.json")))
    assert _query(state).code == ResponseCode.TOPIC_NOT_EXIST
    _register(state, "broker-a", 1)
    assert _perms(_query(state)) == [6]
    assert _query(state).body is _query(state).body  # served from the cache

    state.routes.wipe_write_perm("broker-a")
    assert _perms(_query(state)) == [4]
    state.routes.add_write_perm("broker-a")
    assert _perms(_query(state)) == [6]

    _register(state, "broker-b", 2)
    assert _perms(_query(state)) == [6, 6]
    state.routes.unregister_broker("C", "10.0.0.2:10911", "broker-b", 0)
    assert _perms(_query(state)) == [6]

    state.routes.on_connection_closed("10.0.0.1:10911", None)
    assert _query(state).code == ResponseCode.TOPIC_NOT_EXIST

    _register(state, "broker-a", 3)
    assert _query(state).code == ResponseCode.SUCCESS
    state.routes.delete_topic("T")
    assert _query(state).code == ResponseCode.TOPIC_NOT_EXIST
