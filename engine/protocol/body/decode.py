"""Decoding a JSON body into its dataclass: the one place that refuses a bad body.

How this works: in 4.9.7 `RemotingSerializable.decode` throws a NullPointerException for a
request without a body and returns null for the JSON `null`, which the processor then
dereferences; either way the remoting layer answers SYSTEM_ERROR with the exception as its
remark.  Here a handler asks `request_body(cmd, Cls)` and gets a `Cls`, or a `BodyError`
whose text names the request and what is wrong with the body:

    missing          HEART_BEAT: the request has no body; it needs a HeartbeatData JSON body
    null / [] / 5    HEART_BEAT: the request body is null; it needs a HeartbeatData JSON body
    not JSON         HEART_BEAT: the request body is not JSON (<where>); it needs ...
    a field          HeartbeatData.clientID: {} is not a valid str (HEART_BEAT request body)

The dispatcher answers every `ProtocolError` with SYSTEM_ERROR and the error's text, and logs
one warning line (`engine.remoting.dispatch`), so no handler checks its body itself.
`decode_body` does the same for bodies read elsewhere (a registration, the answers a slave
reads from its master).
"""

from __future__ import annotations

from typing import Any, TypeVar

from engine.protocol import fastjson
from engine.protocol.codes import RequestCode
from engine.protocol.command import RemotingCommand
from engine.protocol.errors import BodyError
from engine.protocol.wire import from_json

T = TypeVar("T")


def request_name(code: int) -> str:
    """`HEART_BEAT` for 34; `request code 9000` for a code without a name."""
    try:
        return RequestCode(code).name
    except ValueError:
        return f"request code {code}"


def request_body(cmd: RemotingCommand, cls: type[T]) -> T:
    """The body of request `cmd`, a JSON object, as a `cls`.

    Raises:
        BodyError: the body is missing, `null`, not JSON, not a JSON object, or a field has
            the wrong type; the text names the request.
    """
    return decode_body(cls, cmd.body, request_name(cmd.code))


def decode_body(cls: type[T], data: bytes | None, name: str, role: str = "request") -> T:
    """`data`, the JSON object body of the `role` (request, answer) `name`, as a `cls`.

    Raises:
        BodyError: as `request_body`.
    """
    need = f"it needs {_a(cls.__name__)} JSON body"
    if not data:
        raise BodyError(f"{name}: the {role} has no body; {need}")
    try:
        value = fastjson.loads(data)
    except BodyError as exc:
        raise BodyError(f"{name}: the {role} body is not JSON ({exc}); {need}") from None
    if not isinstance(value, dict):
        raise BodyError(f"{name}: the {role} body is {_kind(value)}; {need}")
    try:
        return from_json(cls, value)
    except BodyError as exc:
        raise BodyError(f"{exc} ({name} {role} body)") from None


def _a(name: str) -> str:
    """`name` with its article: an AclInfo, an UnlockBatchRequestBody, a UserInfo."""
    vowel = name[:1].lower() in "aeio" or name[:2].lower() in ("un", "up")
    return f"{'an' if vowel else 'a'} {name}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "a JSON array, not an object"
    if isinstance(value, str):
        return "a JSON string, not an object"
    if isinstance(value, bool):
        return "a JSON boolean, not an object"
    return "a JSON number, not an object"
