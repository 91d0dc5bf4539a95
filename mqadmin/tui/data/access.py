"""The Access control screen's data: the users and ACL rules of every broker of every
cluster (read with the context's credentials, through the same operations as `listUser`
and `listAcl`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from engine.client.admin import MQAdmin
from mqadmin.operations import acl

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class AccessView:
    users: list[Row]
    rules: list[Row]
    failures: list[str] = field(default_factory=list)


async def read_access(admin: MQAdmin) -> AccessView:
    """listUser's and listAcl's rows of every cluster, each rule keyed by its position."""
    clusters = sorted((await admin.namesrv.cluster_info()).cluster_addr_table)
    users: list[Row] = []
    rules: list[Row] = []
    failures: list[str] = []
    for cluster in clusters:
        found_users, found_rules = await asyncio.gather(
            acl.user_rows(admin, cluster=cluster), acl.acl_rows(admin, cluster=cluster))
        users += found_users.rows
        rules += found_rules.rows
        failures += sorted({f"{addr}: {str(err).splitlines()[0]}"
                            for addr, err in found_users.failures + found_rules.failures})
    for i, row in enumerate(rules):
        row["key"] = f"{i}"
    return AccessView(users, rules, failures)
