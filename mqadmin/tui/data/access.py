"""The Access control screen's data: the users and ACL rules of every broker of every
cluster (read with the context's credentials, through the same operations as `listUser`
and `listAcl`)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from engine.client.admin import MQAdmin
from engine.client.errors import RequestCodeNotSupportedError
from mqadmin.operations.acl import v2 as acl
from mqadmin.operations.targets import clusters

Row = dict[str, Any]
#: Why a broker without ACL 2.0's requests has no users and rules to show.
ACL_V1_ONLY = ("no users or ACL 2.0 rules (an Apache 4.x broker: its ACL 1.0 accounts are in "
               "plain_acl.yml, see mqadmin clusterAclConfigVersion / updateAclConfig)")


@dataclass(frozen=True, slots=True)
class AccessView:
    users: list[Row]
    rules: list[Row]
    failures: list[str] = field(default_factory=list)


def _failure(addr: str, err: BaseException) -> str:
    """One line per broker and cause (a 4.x broker refuses both reads the same way)."""
    if isinstance(err, RequestCodeNotSupportedError):
        return f"{addr}: {ACL_V1_ONLY}"
    return f"{addr}: {str(err).splitlines()[0]}"


async def read_access(admin: MQAdmin) -> AccessView:
    """listUser's and listAcl's rows of every cluster, each rule keyed by its position."""
    users: list[Row] = []
    rules: list[Row] = []
    failures: list[str] = []
    for cluster in await clusters(admin):
        found_users, found_rules = await asyncio.gather(
            acl.user_rows(admin, cluster=cluster), acl.acl_rows(admin, cluster=cluster))
        users += found_users.rows
        rules += found_rules.rows
        failures += sorted({_failure(addr, err)
                            for addr, err in found_users.failures + found_rules.failures})
    for i, row in enumerate(rules):
        row["key"] = f"{i}"
    return AccessView(users, rules, failures)
