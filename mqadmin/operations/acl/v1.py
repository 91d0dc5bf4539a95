"""4.9's ACL 1.0 on brokers (plain_acl.yml accounts): version rows and account changes.

Apache 4.9's tools write to every broker of a cluster (masters and slaves); so do these.
State is read back with GET_BROKER_CLUSTER_ACL_CONFIG (54), and shown without secret keys.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any, TypeVar

from engine.client.admin import MQAdmin
from engine.client.errors import ClientError, UnreachableError
from engine.protocol.body.auth import PlainAccessConfig
from mqadmin.operations.mutation import Gathered, Mutation, failures_of, outcome_of
from mqadmin.operations.targets import brokers_of
from mqadmin.operations.times import format_time

Row = dict[str, Any]
T = TypeVar("T")

VERSION_COLUMNS = ("cluster", "brokerName", "brokerAddr", "aclFile", "counter", "updated")


async def version_rows(admin: MQAdmin, *, broker_addr: str | None = None,
                       cluster: str | None = None) -> Gathered:
    """One row per ACL file of each broker with its data version (clusterAclConfigVersion)."""
    async def read(addr: str) -> list[Row]:
        header = await acl_off_said(admin, addr, admin.broker.acl_config_version(addr))
        files = json.loads(header.all_acl_file_version or "{}") or {"": json.loads(
            header.version or "{}")}
        return [{"cluster": header.cluster_name, "brokerName": header.broker_name,
                 "brokerAddr": header.broker_addr or addr, "aclFile": path,
                 "counter": int(v.get("counter", 0)),
                 "updated": format_time(int(v.get("timestamp", 0)))}
                for path, v in sorted(files.items())]
    addrs = await brokers_of(admin, broker_addr, cluster, slaves=True)()
    outcomes = await asyncio.gather(*(outcome_of(a, read(a)) for a in addrs))
    rows = [row for o in outcomes if o.value is not None for row in o.value]
    return Gathered(rows, failures_of(outcomes), len(outcomes), noun="brokers")


class AclOff(ClientError):
    """A broker with access control off, which does not answer ACL 1.0 requests."""


async def acl_off_said(admin: MQAdmin, addr: str, call: Awaitable[T]) -> T:
    """`call`'s answer; when it never comes, `AclOff` if the broker has access control off
    (a 4.9 broker with aclEnable=false fails these requests without answering).

    Raises:
        AclOff: no answer, and the broker's aclEnable is false.
        ClientError: any other failure of `call`.
    """
    try:
        return await call
    except UnreachableError:
        try:
            enabled = (await admin.broker.broker_config(addr)).get("aclEnable")
        except ClientError:
            enabled = None
        if enabled == "false":
            raise AclOff(f"{addr} has access control off (aclEnable=false) and does not "
                         "answer ACL requests; enable it in its broker.conf first") from None
        raise


async def _account(admin: MQAdmin, addr: str, access_key: str) -> PlainAccessConfig | None:
    config = await acl_off_said(admin, addr, admin.broker.acl_config(addr))
    return next((a for a in config.plain_access_configs if a.access_key == access_key), None)


def show_account(account: PlainAccessConfig | None) -> str:
    if account is None:
        return "(absent)"
    parts = [f"admin={str(account.admin).lower()}"]
    for name, value in (("white", account.white_remote_address),
                        ("defaultTopicPerm", account.default_topic_perm),
                        ("defaultGroupPerm", account.default_group_perm),
                        ("topicPerms", ",".join(account.topic_perms or [])),
                        ("groupPerms", ",".join(account.group_perms or []))):
        if value:
            parts.append(f"{name}={value}")
    return " ".join(parts)


def _same(a: PlainAccessConfig | None, b: PlainAccessConfig) -> bool:
    return a is not None and show_account(a) == show_account(b)


def update_acl_config(admin: MQAdmin, account: PlainAccessConfig, *, broker_addr: str | None,
                      cluster: str | None) -> Mutation[PlainAccessConfig | None]:
    """Create or replace a plain_acl.yml account on a broker or every broker of a cluster."""
    key = account.access_key or ""

    async def change(addr: str) -> str:
        await admin.broker.update_acl_config(addr, account)
        return "updated"

    return Mutation("updateAclConfig", key, servers=brokers_of(admin, broker_addr, cluster,
                                                               slaves=True),
                    read=lambda a: _account(admin, a, key), show=show_account,
                    done=lambda _, s: _same(s, account), apply=change,
                    after=show_account(account), role="broker")


def delete_acl_config(admin: MQAdmin, access_key: str, *, broker_addr: str | None,
                      cluster: str | None) -> Mutation[PlainAccessConfig | None]:
    async def change(addr: str) -> str:
        await admin.broker.delete_acl_config(addr, access_key)
        return "deleted"

    return Mutation("deleteAclConfig", access_key,
                    servers=brokers_of(admin, broker_addr, cluster, slaves=True),
                    read=lambda a: _account(admin, a, access_key), show=show_account,
                    done=lambda _, s: s is None, apply=change, after="(absent)",
                    role="broker")


def update_global_white_addrs(admin: MQAdmin, addrs: list[str], acl_file: str | None = None,
                              *, broker_addr: str | None, cluster: str | None
                              ) -> Mutation[list[str]]:
    async def read(addr: str) -> list[str]:
        return list((await admin.broker.acl_config(addr)).global_white_addrs)

    async def change(addr: str) -> str:
        await admin.broker.update_global_white_addrs(addr, addrs, acl_file)
        return "updated"

    return Mutation("updateGlobalWhiteAddr", acl_file or "plain_acl.yml",
                    servers=brokers_of(admin, broker_addr, cluster, slaves=True), read=read,
                    show=lambda s: ",".join(s) or "(none)",
                    done=lambda _, s: set(addrs) <= set(s), apply=change,
                    after=",".join(addrs) or "(none)", role="broker")
