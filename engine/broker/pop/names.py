"""Names the POP machinery uses (5.3 `PopAckConstants`): the revive topic, its group, its tags."""

from __future__ import annotations

from typing import Final

#: One revive topic per cluster, `reviveQueueNum` queues; checkpoints and acks live there.
REVIVE_TOPIC_PREFIX: Final = "rmq_sys_REVIVE_LOG_"
#: The revive service's progress is this group's consumer offset on the revive topic.
REVIVE_GROUP: Final = "CID_RMQ_SYS_REVIVE_GROUP"
CK_TAG: Final = "ck"
ACK_TAG: Final = "ack"
BATCH_ACK_TAG: Final = "bAck"
SPLIT: Final = "@"
#: Queues of a pop retry topic, as 5.3 creates it (`PopAckConstants.retryQueueNum`).
RETRY_QUEUE_NUM: Final = 1
#: The most messages one POP_MESSAGE may ask for.
MAX_POP_NUMS: Final = 32


def revive_topic(cluster: str) -> str:
    """`rmq_sys_REVIVE_LOG_<cluster>` (`PopAckConstants.buildClusterReviveTopic`)."""
    return REVIVE_TOPIC_PREFIX + cluster


def polling_key(topic: str, group: str, queue_id: int) -> str:
    """`topic@group@queueId` (`KeyBuilder.buildPollingKey`)."""
    return f"{topic}{SPLIT}{group}{SPLIT}{queue_id}"
