"""The controller's events: the only changes to its state, replicated and replayed in order.

Each event is a frozen dataclass; `encode`/`decode` give the JSON line (`{"type": ...,
...fields}`) that the local log and the Raft log carry, so a restart replays the same
events the leader applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from engine.controller.errors import ControllerStoreError
from engine.protocol.errors import BodyError
from engine.protocol.wire import from_json, to_json


@dataclass(frozen=True, slots=True)
class ApplyBrokerId:
    """A broker took an id in its set (the first one creates the set)."""

    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int
    register_check_code: str


@dataclass(frozen=True, slots=True)
class UpdateBrokerAddress:
    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class ElectMaster:
    """`new_master_id` None: the master is gone and no one could replace it."""

    broker_name: str
    new_master_id: int | None = None


@dataclass(frozen=True, slots=True)
class AlterSyncStateSet:
    broker_name: str
    sync_state_set: frozenset[int]


@dataclass(frozen=True, slots=True)
class CleanBrokerData:
    """`broker_ids` None or empty: forget the whole set."""

    broker_name: str
    broker_ids: frozenset[int] | None = None


Event = ApplyBrokerId | UpdateBrokerAddress | ElectMaster | AlterSyncStateSet | CleanBrokerData

_TYPES: dict[str, type[Any]] = {cls.__name__: cls for cls in (
    ApplyBrokerId, UpdateBrokerAddress, ElectMaster, AlterSyncStateSet, CleanBrokerData)}


def encode(event: Event) -> bytes:
    return orjson.dumps({"type": type(event).__name__, **to_json(event)})


def decode(data: bytes | str) -> Event:
    """Raises:
    ControllerStoreError: not an event this controller writes."""
    try:
        value = orjson.loads(data)
        cls = _TYPES[value.pop("type")]
        event: Event = from_json(cls, value)
    except (orjson.JSONDecodeError, KeyError, AttributeError, TypeError, BodyError) as exc:
        raise ControllerStoreError(f"not a controller event: {data[:80]!r} ({exc})") from None
    return event
