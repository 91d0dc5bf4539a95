"""Access-control bodies and headers: 5.3's UserInfo/AclInfo (AUTH_*) and 4.9's ACL 1.0 shapes.

5.3 (`remoting/protocol/body/UserInfo`, `AclInfo`, `header/*User*`, `*Acl*`): users travel as
``{"username","password","userType":"Super|Normal","userStatus":"enable|disable"}``, rules as
``{"subject":"User:alice","policies":[{"policyType":"Custom|Default","entries":[{"resource":
"Topic:t*","actions":["Pub"],"sourceIps":["10.0.0.0/8"],"decision":"Allow"}]}]}``.
4.9.7 (`CreateAccessConfigRequestHeader`, `GetBrokerAclConfigResponseHeader`,
`GetBrokerClusterAclConfigResponseBody`, `PlainAccessConfig`): accounts travel in headers,
topic/group perms comma-joined.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class UserInfo:
    username: str | None = None
    password: str | None = None
    user_type: str | None = None
    user_status: str | None = None


@dataclass(frozen=True, slots=True)
class PolicyEntryInfo:
    resource: str | None = None
    actions: list[str] | None = None
    source_ips: list[str] | None = None
    decision: str | None = None


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    policy_type: str | None = None
    entries: list[PolicyEntryInfo] | None = None


@dataclass(frozen=True, slots=True)
class AclInfo:
    subject: str | None = None
    policies: list[PolicyInfo] | None = None


# ---------------------------------------------------------------------------- 5.3 headers


@dataclass(frozen=True, slots=True)
class UserRequestHeader:
    """AUTH_CREATE/UPDATE/DELETE/GET_USER."""

    username: str | None = None


@dataclass(frozen=True, slots=True)
class ListUsersRequestHeader:
    filter: str | None = None


@dataclass(frozen=True, slots=True)
class AclRequestHeader:
    """AUTH_CREATE/UPDATE/GET_ACL."""

    subject: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteAclRequestHeader:
    subject: str | None = None
    policy_type: str | None = None
    resource: str | None = None


@dataclass(frozen=True, slots=True)
class ListAclsRequestHeader:
    subject_filter: str | None = None
    resource_filter: str | None = None


# ---------------------------------------------------------------------------- 4.9 ACL 1.0


@dataclass(frozen=True, slots=True)
class CreateAccessConfigRequestHeader:
    """UPDATE_AND_CREATE_ACL_CONFIG (50): one account, perms comma-joined."""

    access_key: str | None = None
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: str | None = None
    group_perms: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteAccessConfigRequestHeader:
    access_key: str | None = None


@dataclass(frozen=True, slots=True)
class UpdateGlobalWhiteAddrsConfigRequestHeader:
    global_white_addrs: str | None = None
    acl_file_full_path: str | None = None


@dataclass(frozen=True, slots=True)
class GetBrokerAclConfigResponseHeader:
    """GET_BROKER_CLUSTER_ACL_INFO (52) answer: data versions as JSON text."""

    version: str | None = None
    all_acl_file_version: str | None = None
    broker_name: str | None = None
    broker_addr: str | None = None
    cluster_name: str | None = None


@dataclass(frozen=True, slots=True)
class PlainAccessConfig:
    access_key: str | None = None
    secret_key: str | None = None
    white_remote_address: str | None = None
    admin: bool = False
    default_topic_perm: str | None = None
    default_group_perm: str | None = None
    topic_perms: list[str] | None = None
    group_perms: list[str] | None = None


@dataclass(frozen=True, slots=True)
class GetBrokerClusterAclConfigResponseBody:
    """GET_BROKER_CLUSTER_ACL_CONFIG (54) answer."""

    global_white_addrs: list[str] = field(default_factory=list)
    plain_access_configs: list[PlainAccessConfig] = field(default_factory=list)
