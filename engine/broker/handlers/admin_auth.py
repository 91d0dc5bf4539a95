"""Broker handlers: 5.3's users and ACL rules (AUTH_CREATE_USER 3001 ... AUTH_LIST_ACL 3010).

As 5.3's `AdminBrokerProcessor`: bodies are UserInfo / AclInfo JSON; get answers SUCCESS with
no body when the user or rules do not exist; only a SUPER user may create, change or delete a
SUPER user.  Bad input answers SYSTEM_ERROR with a remark saying what to fix (5.3 answers most
of these NO_PERMISSION); changes are persisted before the answer.
"""

from __future__ import annotations

import logging

from engine.auth.errors import AuthError
from engine.auth.model import (
    PolicyType,
    Resource,
    UserStatus,
    UserType,
    acl_from_info,
    acl_to_info,
    subject_name,
    user_from_info,
    user_to_info,
)
from engine.broker.access import BrokerAccess
from engine.broker.state import BrokerState
from engine.protocol import fastjson
from engine.protocol.body.auth import (
    AclInfo,
    AclRequestHeader,
    DeleteAclRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    UserInfo,
    UserRequestHeader,
)
from engine.protocol.body.decode import request_body
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.signature import ACCESS_KEY
from engine.protocol.wire import from_ext, to_json
from engine.remoting.router import RequestContext, Router

router = Router()
log = logging.getLogger("engine.auth")

Ctx = RequestContext[BrokerState]


def _access(ctx: Ctx) -> BrokerAccess:
    access = ctx.state.access
    assert access is not None, "the controller sets up access control"
    return access


def _json(value: object) -> bytes:
    return fastjson.dumps(to_json(value)).encode()


def _answer(cmd: RemotingCommand, exc: AuthError) -> RemotingCommand:
    return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))


def _refuse_super(ctx: Ctx, cmd: RemotingCommand, what: str) -> RemotingCommand | None:
    if _access(ctx).is_super(cmd.ext(ACCESS_KEY)):
        return None
    return cmd.response(ResponseCode.NO_PERMISSION,
                        f"a SUPER user can only be {what} by a SUPER user")


@router.handles(RequestCode.AUTH_CREATE_USER, RequestCode.AUTH_UPDATE_USER)
def create_or_update_user(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(UserRequestHeader, cmd.ext_fields)
    store = _access(ctx).store
    try:
        info = request_body(cmd, UserInfo)
        if cmd.code == RequestCode.AUTH_CREATE_USER:
            user = user_from_info(info, username=header.username)
            if user.user_type is UserType.SUPER and (r := _refuse_super(ctx, cmd, "created")):
                return r
            store.create_user(user)
        else:
            name = (header.username or info.username or "").strip()
            old = store.user(name)
            utype = UserType.parse(info.user_type, "user type") if info.user_type else None
            status = (UserStatus.parse(info.user_status, "user status") if info.user_status
                      else None)
            if UserType.SUPER in (utype, old.user_type if old else None) and (
                    r := _refuse_super(ctx, cmd, "changed")):
                return r
            store.update_user(name, info.password, utype, status)
    except AuthError as exc:
        return _answer(cmd, exc)
    log.info("%s user %s (by %s from %s)", "created" if cmd.code == RequestCode.AUTH_CREATE_USER
             else "updated", header.username, cmd.ext(ACCESS_KEY), ctx.connection.remote_addr)
    return cmd.response()


@router.handles(RequestCode.AUTH_DELETE_USER)
def delete_user(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    name = (from_ext(UserRequestHeader, cmd.ext_fields).username or "").strip()
    store = _access(ctx).store
    old = store.user(name)
    if old is not None and old.user_type is UserType.SUPER and (
            r := _refuse_super(ctx, cmd, "deleted")):
        return r
    try:
        store.delete_user(name)
    except AuthError as exc:
        return _answer(cmd, exc)
    log.info("deleted user %s (by %s)", name, cmd.ext(ACCESS_KEY))
    return cmd.response()


@router.handles(RequestCode.AUTH_GET_USER)
def get_user(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    name = (from_ext(UserRequestHeader, cmd.ext_fields).username or "").strip()
    if not name:
        return cmd.response(ResponseCode.SYSTEM_ERROR, "The username is blank")
    user = _access(ctx).store.user(name)
    return cmd.response(body=_json(user_to_info(user)) if user else None)


@router.handles(RequestCode.AUTH_LIST_USER)
def list_users(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(ListUsersRequestHeader, cmd.ext_fields)
    users = _access(ctx).store.list_users(header.filter)
    return cmd.response(body=_json([user_to_info(u) for u in users]) if users else None)


@router.handles(RequestCode.AUTH_CREATE_ACL, RequestCode.AUTH_UPDATE_ACL)
def create_or_update_acl(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(AclRequestHeader, cmd.ext_fields)
    try:
        info = request_body(cmd, AclInfo)
        acl = acl_from_info(info, subject=header.subject)
        _access(ctx).store.put_acl(acl)
    except AuthError as exc:
        return _answer(cmd, exc)
    log.info("rules of %s %s (by %s)", acl.subject,
             "created" if cmd.code == RequestCode.AUTH_CREATE_ACL else "updated",
             cmd.ext(ACCESS_KEY))
    return cmd.response()


@router.handles(RequestCode.AUTH_DELETE_ACL)
def delete_acl(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(DeleteAclRequestHeader, cmd.ext_fields)
    try:
        name = subject_name(header.subject)
        ptype = PolicyType.parse(header.policy_type, "policy type") if header.policy_type \
            else None
        resource = Resource.parse(header.resource) if header.resource else None
        _access(ctx).store.delete_acl(name, ptype, resource)
    except AuthError as exc:
        return _answer(cmd, exc)
    log.info("rules of %s deleted (%s) by %s", header.subject, header.resource or "all",
             cmd.ext(ACCESS_KEY))
    return cmd.response()


@router.handles(RequestCode.AUTH_GET_ACL)
def get_acl(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(AclRequestHeader, cmd.ext_fields)
    try:
        name = subject_name(header.subject)
    except AuthError as exc:
        return _answer(cmd, exc)
    store = _access(ctx).store
    if store.user(name) is None:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"the subject {header.subject} does not "
                            "exist")
    acl = store.acl(name)
    return cmd.response(body=_json(acl_to_info(acl)) if acl else None)


@router.handles(RequestCode.AUTH_LIST_ACL)
def list_acls(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(ListAclsRequestHeader, cmd.ext_fields)
    acls = _access(ctx).store.list_acls(header.subject_filter, header.resource_filter)
    return cmd.response(body=_json([acl_to_info(a) for a in acls]) if acls else None)
