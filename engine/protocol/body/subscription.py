"""Subscription group bodies: `SubscriptionGroupConfig` and the table `SubscriptionGroupWrapper`."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.protocol.body.heartbeat import GroupName
from engine.protocol.body.route import MASTER_ID, BrokerId
from engine.protocol.body.topic import DataVersion


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body; defaults are Java's (request-codes.md §5.9)."""

    group_name: GroupName
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: BrokerId = MASTER_ID
    which_broker_when_consume_slowly: BrokerId = 1
    notify_consumer_ids_changed_enable: bool = True
    #: 5.x: the group's messages of a FIFO topic go out in order (POP's `order=true`);
    #: `updateSubGroup -o true`.  None (absent from the JSON, as 4.9 writes it) is false.
    consume_message_orderly: bool | None = None
    #: 5.x group attributes: stored without sign; an update carries signed changes
    #: (`+key=value`), see `engine.protocol.attributes`.  5.3 defines none; None is none.
    attributes: dict[str, str] | None = None

    def __post_init__(self) -> None:
        # Absent, false and {} are the same as Apache's defaults: kept as None (not written).
        if self.consume_message_orderly is False:
            object.__setattr__(self, "consume_message_orderly", None)
        if self.attributes is not None and not self.attributes:
            object.__setattr__(self, "attributes", None)

    @property
    def orderly(self) -> bool:
        """consumeMessageOrderly, false when absent."""
        return bool(self.consume_message_orderly)


@dataclass(frozen=True, slots=True)
class SubscriptionGroupWrapper:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG answer (and the broker's subscriptionGroup.json)."""

    subscription_group_table: dict[GroupName, SubscriptionGroupConfig] = field(
        default_factory=dict
    )
    data_version: DataVersion = field(default_factory=DataVersion)
