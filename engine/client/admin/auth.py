"""Broker admin calls for access control: 5.3's users and rules, 4.9's ACL 1.0 accounts.

How this works: 5.3 (AUTH_* 3001-3010) sends UserInfo / AclInfo JSON bodies and answers get
and list with the same shapes (no body: not found / none).  4.9 (50-54) sends one account in
the request header (perms comma-joined) and answers versions in the response header and the
whole configuration as a `GetBrokerClusterAclConfigResponseBody`.  A broker that does not
know a family answers REQUEST_CODE_NOT_SUPPORTED (5.3.3 dropped 50-54; 4.9 has no 3001+).
"""

from __future__ import annotations

from engine.client.core.broker_call import BrokerCalls, decode_body, decode_header
from engine.client.core.errors import BadResponseError
from engine.protocol import fastjson
from engine.protocol.body.auth import (
    AclInfo,
    CreateAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    GetBrokerClusterAclConfigResponseBody,
    PlainAccessConfig,
    UserInfo,
)
from engine.protocol.codes import RequestCode
from engine.protocol.errors import ProtocolError
from engine.protocol.wire import from_json, to_ext, to_json


def _json(value: object) -> bytes:
    return fastjson.dumps(to_json(value)).encode()


def _ext(**values: str | None) -> dict[str, str]:
    return {k: v for k, v in values.items() if v is not None}


class AuthCalls(BrokerCalls):
    """Users, rules and ACL 1.0 accounts of one broker."""

    # ------------------------------------------------------------------ 5.3 users

    async def create_user(self, addr: str, user: UserInfo) -> None:
        """AUTH_CREATE_USER (3001)."""
        await self._call(addr, RequestCode.AUTH_CREATE_USER, _ext(username=user.username),
                         _json(user))

    async def update_user(self, addr: str, user: UserInfo) -> None:
        """AUTH_UPDATE_USER (3002): fields left None keep their value."""
        await self._call(addr, RequestCode.AUTH_UPDATE_USER, _ext(username=user.username),
                         _json(user))

    async def delete_user(self, addr: str, username: str) -> None:
        """AUTH_DELETE_USER (3003): the user and its rules; an absent user is no error."""
        await self._call(addr, RequestCode.AUTH_DELETE_USER, _ext(username=username))

    async def get_user(self, addr: str, username: str) -> UserInfo | None:
        """AUTH_GET_USER (3004); None when there is no such user."""
        resp = await self._call(addr, RequestCode.AUTH_GET_USER, _ext(username=username))
        return decode_body(UserInfo, resp.body, addr) if resp.body else None

    async def list_users(self, addr: str, contains: str | None = None) -> list[UserInfo]:
        """AUTH_LIST_USER (3005): users whose name contains `contains` (all when None)."""
        resp = await self._call(addr, RequestCode.AUTH_LIST_USER, _ext(filter=contains))
        return self._list(UserInfo, resp.body, addr)

    # ------------------------------------------------------------------ 5.3 rules

    async def create_acl(self, addr: str, acl: AclInfo) -> None:
        """AUTH_CREATE_ACL (3006): merged into the subject's rules entry by entry."""
        await self._call(addr, RequestCode.AUTH_CREATE_ACL, _ext(subject=acl.subject), _json(acl))

    async def update_acl(self, addr: str, acl: AclInfo) -> None:
        """AUTH_UPDATE_ACL (3007): same merge as create."""
        await self._call(addr, RequestCode.AUTH_UPDATE_ACL, _ext(subject=acl.subject), _json(acl))

    async def delete_acl(self, addr: str, subject: str, resource: str | None = None,
                         policy_type: str | None = None) -> None:
        """AUTH_DELETE_ACL (3008): one resource's entry, or all the subject's rules."""
        await self._call(addr, RequestCode.AUTH_DELETE_ACL,
                         _ext(subject=subject, resource=resource, policyType=policy_type))

    async def get_acl(self, addr: str, subject: str) -> AclInfo | None:
        """AUTH_GET_ACL (3009); None when the subject has no rules."""
        resp = await self._call(addr, RequestCode.AUTH_GET_ACL, _ext(subject=subject))
        return decode_body(AclInfo, resp.body, addr) if resp.body else None

    async def list_acls(self, addr: str, subject_filter: str | None = None,
                        resource_filter: str | None = None) -> list[AclInfo]:
        """AUTH_LIST_ACL (3010): filters match substrings of subject and resource keys."""
        resp = await self._call(addr, RequestCode.AUTH_LIST_ACL,
                                _ext(subjectFilter=subject_filter,
                                     resourceFilter=resource_filter))
        return self._list(AclInfo, resp.body, addr)

    def _list(self, cls: type, body: bytes | None, addr: str) -> list:  # type: ignore[type-arg]
        if not body:
            return []
        try:
            items = fastjson.loads(body)
            if not isinstance(items, list):
                raise BadResponseError(f"{cls.__name__} list answer is not a list", addr)
            return [from_json(cls, item) for item in items]
        except ProtocolError as exc:
            raise BadResponseError(f"{cls.__name__} list does not decode: {exc}", addr) from None

    # ------------------------------------------------------------------ 4.9 ACL 1.0

    async def update_acl_config(self, addr: str, account: PlainAccessConfig) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG (50): create or replace one plain_acl.yml account."""
        header = CreateAccessConfigRequestHeader(
            access_key=account.access_key, secret_key=account.secret_key,
            white_remote_address=account.white_remote_address, admin=account.admin,
            default_topic_perm=account.default_topic_perm,
            default_group_perm=account.default_group_perm,
            topic_perms=",".join(account.topic_perms) if account.topic_perms else None,
            group_perms=",".join(account.group_perms) if account.group_perms else None)
        await self._call(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, to_ext(header))

    async def delete_acl_config(self, addr: str, access_key: str) -> None:
        """DELETE_ACL_CONFIG (51)."""
        await self._call(addr, RequestCode.DELETE_ACL_CONFIG, {"accessKey": access_key})

    async def acl_config_version(self, addr: str) -> GetBrokerAclConfigResponseHeader:
        """GET_BROKER_CLUSTER_ACL_INFO (52): the data version of each ACL file."""
        resp = await self._call(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        return decode_header(GetBrokerAclConfigResponseHeader, resp, addr)

    async def update_global_white_addrs(self, addr: str, addrs: list[str],
                                        acl_file: str | None = None) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53)."""
        await self._call(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                         _ext(globalWhiteAddrs=",".join(addrs), aclFileFullPath=acl_file))

    async def acl_config(self, addr: str) -> GetBrokerClusterAclConfigResponseBody:
        """GET_BROKER_CLUSTER_ACL_CONFIG (54): accounts and global white addresses."""
        return await self._body(GetBrokerClusterAclConfigResponseBody, addr,
                                RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
