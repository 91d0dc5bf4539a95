"""Delivering a stored message again: to one online consumer (consumeMessageDirectly), to a
group's retry topic (resendMessage), or to its own topic (queryMsgById -s); each as a change
for the change runner (plan, confirm, apply, verify, audit).

How this works: the message is found by any id (ids.py).  Consuming directly is
CONSUME_MESSAGE_DIRECTLY to the broker that stored the message, which hands it to the named
client of the group; the client's listener consumes it and the client answers how it went
(CR_SUCCESS, CR_LATER, ...), which is the change's verification: anything but CR_SUCCESS is
`NotConsumed`.  Nothing is committed and no other consumer sees it.  Resending to a group
sends a copy to ``%RETRY%<group>`` with RETRY_TOPIC = the original topic and
ORIGIN_MESSAGE_ID = its id, as the broker stores a message a consumer sent back: only that
group receives it, at once (no delay level), and its listener sees the original topic.  The
copy keeps body, keys, tags, flag and user properties; reconsume times start at 0.  It is
verified by reading the copy back at its offset message id.  Sending again to its own topic
sends such a copy (no retry properties) to the topic the message is in, so every group of
the topic receives it; each copy is read back where it was stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.client.admin import MQAdmin
from engine.client.broker_admin import message_store_addr, split_offset_msg_id
from engine.client.errors import ClientError, ConsumerNotOnlineError, TopicNotExistError
from engine.client.message import Message
from engine.client.results import SendResult
from engine.protocol.body.admin import CMResult, ConsumeMessageDirectlyResult
from engine.protocol.message import PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_RETRY_TOPIC
from mqadmin.config import Endpoint
from mqadmin.exit_codes import CliError, ExitCode, NotVerified, TargetNotFound
from mqadmin.operations.change import Outcome, Planned, Progress
from mqadmin.operations.messages.ids import StoredMessage, find_by_id
from mqadmin.operations.messages.send import SEND_COLUMNS
from mqadmin.operations.sending import SYSTEM_PROPERTIES, producer, send_row, stored_as_sent
from mqadmin.operations.targets import retry_topic

Row = dict[str, Any]

DIRECT_COLUMNS = ("clientId", "consumeResult", "remark", "spentTimeMillis", "order",
                  "autoCommit")
DIRECT_PLAN_COLUMNS = ("msgId", "offsetMsgId", "topic", "group", "clientId", "clientAddr")
RESEND_PLAN_COLUMNS = ("msgId", "offsetMsgId", "topic", "group", "target", "consumersOnline",
                       "note")
RESEND_COLUMNS = (*SEND_COLUMNS, "verified")
AGAIN_PLAN_COLUMNS = ("msgId", "offsetMsgId", "topic", "tags", "keys", "bodyBytes")


class NotConsumed(CliError):
    """The consumer answered, but did not consume the message (CR_LATER, an exception...)."""

    code = ExitCode.REJECTED


# ---------------------------------------------------------------------------- consume directly


@dataclass(frozen=True, slots=True)
class DirectResult:
    """How one client consumed a message handed to it."""

    client_id: str
    message: StoredMessage
    result: ConsumeMessageDirectlyResult

    @property
    def consumed(self) -> bool:
        return self.result.consume_result is CMResult.CR_SUCCESS


def direct_rows(results: list[DirectResult]) -> list[Row]:
    """consumeMessageDirectly's (and queryMsgById -g -d's) rows (DIRECT_COLUMNS)."""
    return [{"clientId": d.client_id,
             "consumeResult": d.result.consume_result.name if d.result.consume_result
             else None,
             "remark": d.result.remark, "spentTimeMillis": d.result.spent_time_mills,
             "order": d.result.order, "autoCommit": d.result.auto_commit} for d in results]


async def consume_directly(admin: MQAdmin, group: str, client_id: str,
                           found: StoredMessage) -> DirectResult:
    """Have one online client of `group` consume the message (CONSUME_MESSAGE_DIRECTLY
    through the broker that stored it)."""
    offset_id = found.record.offset_msg_id
    result = await admin.broker.consume_message_directly(
        message_store_addr(offset_id), group, client_id, offset_id)
    return DirectResult(client_id, found, result)


async def _online(admin: MQAdmin, group: str) -> dict[str, str]:
    """The group's online clients: address by client id (none when no client is online)."""
    try:
        cc = await admin.consumer_connections(group)
    except (ConsumerNotOnlineError, TopicNotExistError):
        return {}
    return {c.client_id: c.client_addr for c in cc.connection_set}


@dataclass(frozen=True, slots=True)
class DirectPlan:
    group: str
    client_id: str
    messages: tuple[StoredMessage, ...]


class ConsumeDirectlyChange:
    """Hand messages to one online consumer of a group (consumeMessageDirectly)."""

    def __init__(self, group: str, client_id: str, msg_ids: list[str], topic: str | None,
                 args: dict[str, Any], action: str = "consumeMessageDirectly") -> None:
        self.group = group
        self.client_id = client_id
        self.msg_ids = msg_ids
        self.topic = topic
        self.args = args
        self.action = action

    async def plan(self, admin: MQAdmin, where: Endpoint,
                   progress: Progress) -> Planned[DirectPlan]:
        online = await _online(admin, self.group)
        if self.client_id not in online:
            known = ", ".join(sorted(online)) or "none"
            raise TargetNotFound(
                f"client '{self.client_id}' is not an online consumer of group "
                f"'{self.group}' (online: {known}); see `mqadmin consumerConnection -g "
                f"{self.group}`.")
        found = tuple([(await find_by_id(admin, i, self.topic))[0] for i in self.msg_ids])
        rows = [{"msgId": m.record.msg_id, "offsetMsgId": m.record.offset_msg_id,
                 "topic": m.record.topic, "group": self.group, "clientId": self.client_id,
                 "clientAddr": online[self.client_id]} for m in found]
        return Planned(DirectPlan(self.group, self.client_id, found), self.action,
                       ",".join(self.msg_ids), self.args, rows, DIRECT_PLAN_COLUMNS,
                       noun="consumer", counted="messages handed over")

    async def apply(self, admin: MQAdmin, where: Endpoint, planned: Planned[DirectPlan],
                    progress: Progress) -> Outcome:
        plan = planned.plan
        results: list[DirectResult] = []
        for i, m in enumerate(plan.messages):
            results.append(await consume_directly(admin, plan.group, plan.client_id, m))
            progress.count(i + 1, len(plan.messages))
        rows = direct_rows(results)
        refused = [d for d in results if not d.consumed]
        if not refused:
            return Outcome(rows, DIRECT_COLUMNS)
        first = refused[0]
        error = NotConsumed(
            f"{len(refused)} of {len(results)} not consumed: client {plan.client_id} answered "
            f"{direct_rows([first])[0]['consumeResult']} for {first.message.record.msg_id}"
            f"{': ' + first.result.remark if first.result.remark else ''}. Its listener "
            "decides: see the client's log, or `mqadmin consumerStatus`.")
        return Outcome(rows, DIRECT_COLUMNS, "failed" if len(refused) == len(results)
                       else "partial", error)


# ---------------------------------------------------------------------------- resend


def copy_of(m: StoredMessage, topic: str, *, retry_of: str | None = None) -> Message:
    """A new message with the stored one's body, tags, keys, flag and user properties (to
    `topic`; as a retry of `retry_of` when given)."""
    record = m.record
    props = {k: v for k, v in record.properties().items() if k not in SYSTEM_PROPERTIES}
    system = {PROPERTY_ORIGIN_MESSAGE_ID: record.msg_id}
    if retry_of is not None:
        system[PROPERTY_RETRY_TOPIC] = retry_of
    return Message(topic, record.body, tags=record.tags, keys=record.keys, flag=record.flag,
                   properties=props, system_properties=system if retry_of else None)


class SendAgainChange:
    """queryMsgById -s true: each message sent again, as a copy, to its own topic."""

    def __init__(self, msg_ids: list[str], topic: str | None, args: dict[str, Any]) -> None:
        self.msg_ids = msg_ids
        self.topic = topic
        self.args = args

    async def plan(self, admin: MQAdmin, where: Endpoint,
                   progress: Progress) -> Planned[tuple[StoredMessage, ...]]:
        """Raises: TargetNotFound (an id that finds no message), as `find_by_id`."""
        found = tuple([(await find_by_id(admin, i, self.topic))[0] for i in self.msg_ids])
        rows = [{"msgId": m.record.msg_id, "offsetMsgId": m.record.offset_msg_id,
                 "topic": m.record.topic, "tags": m.record.tags,
                 "keys": " ".join(m.record.keys) or None, "bodyBytes": len(m.record.body)}
                for m in found]
        return Planned(found, "queryMsgById", ",".join(self.msg_ids), self.args, rows,
                       AGAIN_PLAN_COLUMNS, noun="topics", counted="messages sent")

    async def apply(self, admin: MQAdmin, where: Endpoint,
                    planned: Planned[tuple[StoredMessage, ...]],
                    progress: Progress) -> Outcome:
        rows: list[Row] = []
        async with producer(admin) as p:
            for i, m in enumerate(planned.plan):
                sent = await p.send(copy_of(m, m.record.topic))
                verified = await stored_as_sent(admin, sent, m.record.topic)
                rows.append({**send_row(sent), "verified": verified})
                progress.count(i + 1, len(planned.plan))
        unseen = [r for r in rows if not r["verified"]]
        if not unseen:
            return Outcome(rows, RESEND_COLUMNS)
        first = unseen[0]
        return Outcome(rows, RESEND_COLUMNS, "unverified", NotVerified(
            f"{len(unseen)} of {len(rows)} copies were acknowledged but are not readable where "
            f"they were stored; look for {first['msgId']} with `mqadmin queryMsgById -i "
            f"{first['msgId']}`."))


@dataclass(frozen=True, slots=True)
class ResendPlan:
    group: str
    message: StoredMessage


async def _verify_copy(admin: MQAdmin, sent: SendResult, target: str, origin: str) -> bool:
    """Whether the copy is stored where the answer says, in `target`, as a retry of
    `origin`."""
    try:
        addr, offset = split_offset_msg_id(sent.offset_msg_id)
        record = await admin.broker.view_message_at(addr, offset)
    except (ValueError, ClientError):
        return False
    return record.topic == target and record.properties().get(PROPERTY_RETRY_TOPIC) == origin


class ResendToGroupChange:
    """Resend a message to a group's retry topic (resendMessage): only that group gets it."""

    def __init__(self, group: str, msg_id: str, topic: str | None,
                 args: dict[str, Any]) -> None:
        self.group = group
        self.msg_id = msg_id
        self.topic = topic
        self.args = args

    async def plan(self, admin: MQAdmin, where: Endpoint,
                   progress: Progress) -> Planned[ResendPlan]:
        target = retry_topic(self.group)
        try:
            await admin.namesrv.topic_route(target)
        except TopicNotExistError:
            raise TargetNotFound(
                f"group '{self.group}' has no retry topic {target}: no consumer of it was "
                f"ever online. Check the group with `mqadmin consumerConnection -g "
                f"{self.group}`.") from None
        found = (await find_by_id(admin, self.msg_id, self.topic))[0]
        online = await _online(admin, self.group)
        row = {"msgId": found.record.msg_id, "offsetMsgId": found.record.offset_msg_id,
               "topic": found.record.topic, "group": self.group, "target": target,
               "consumersOnline": len(online),
               "note": None if online else f"no consumer of {self.group} is online: the copy "
                                           "waits in its retry topic"}
        return Planned(ResendPlan(self.group, found), "resendMessage", self.msg_id,
                       self.args, [row], RESEND_PLAN_COLUMNS, noun="cluster")

    async def apply(self, admin: MQAdmin, where: Endpoint, planned: Planned[ResendPlan],
                    progress: Progress) -> Outcome:
        plan = planned.plan
        target = retry_topic(plan.group)
        origin = plan.message.record.topic
        async with producer(admin) as p:
            sent = await p.send(copy_of(plan.message, target, retry_of=origin))
        progress.step(f"sent to {target} as {sent.msg_id}")
        verified = await _verify_copy(admin, sent, target, origin)
        rows = [{**send_row(sent), "verified": verified}]
        if verified:
            return Outcome(rows, RESEND_COLUMNS)
        return Outcome(rows, RESEND_COLUMNS, "unverified", NotVerified(
            f"the copy {sent.msg_id} was acknowledged ({sent.status.name}) but is not readable "
            f"in {target} at {sent.offset_msg_id}; look for it with `mqadmin queryMsgById -i "
            f"{sent.msg_id} -t {target}`."))
