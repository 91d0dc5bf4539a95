"""Status codes of the 5.x protocol: the proxy's error, and remoting answers mapped to `Code`.

How this works (5.3 `ResponseBuilder`, `GrpcProxyException`): every RPC answers with a
`Status` inside its response (the gRPC status itself stays OK), so a failure is raised as
`ProxyError(code, message)` and turned into the response's status by the service.  Remoting
response codes map through one table, as 5.3's `RESPONSE_CODE_MAPPING`; codes it does not
name become INTERNAL_SERVER_ERROR with the broker's remark, except those listed under
"beyond 5.3", which say more than 5.3 does (a missing topic is TOPIC_NOT_FOUND there too, by
its own path).  No status message is longer than `MAX_MESSAGE_LENGTH` characters, so no
client input, however long, is echoed whole.

    ProxyError                 code + message, answered in the response's Status
"""

from __future__ import annotations

from engine.protocol.codes import ResponseCode
from engine.proxy.v2 import definition_pb2 as pb

Code = pb.Code

_FROM_REMOTING: dict[int, int] = {
    ResponseCode.SUCCESS: pb.OK,
    ResponseCode.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: pb.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.CONSUMER_GROUP_NOT_FOUND,
    # beyond 5.3's table:
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: pb.FORBIDDEN,
    ResponseCode.FLOW_CONTROL: pb.TOO_MANY_REQUESTS,
}


class ProxyError(Exception):
    """A refusal or failure answered to the client as `Status(code, message)`."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def code_of_remoting(response_code: int) -> int:
    """The `Code` a remoting response code is answered with (5.3 `buildCode`)."""
    return _FROM_REMOTING.get(response_code, pb.INTERNAL_SERVER_ERROR)


#: The longest status message: one that would be longer (an echo of a client's input, a
#: broker's remark) is cut to this many characters and ends with "...".
MAX_MESSAGE_LENGTH = 1024


def status(code: int, message: str | None = None) -> pb.Status:
    if not message:
        message = Code.Name(code)
    elif len(message) > MAX_MESSAGE_LENGTH:
        message = message[:MAX_MESSAGE_LENGTH - 3] + "..."
    return pb.Status(code=code, message=message)  # type: ignore[arg-type]


OK_STATUS = status(pb.OK)
