"""Errors of the client package, one class per response code, through one registry.

    ClientError
     ├── InvalidAddressError              an address that is not host:port (caller's mistake)
     ├── UnreachableError                 no server answered: connect refused, timed out, closed;
     │                                    `failures` names every address tried and why,
     │                                    `role` what the servers are ("name server", "broker")
     ├── BadResponseError                 an answer whose header or body does not decode
     ├── ClientStateError                 a producer/consumer used before start, after shutdown,
     │                                    or a group registered twice in one client instance
     ├── MessageValidationError           a message the client refuses to send (topic name,
     │                                    empty or oversized body, reserved property name)
     ├── NoRouteError                     no name server knows a route for the topic
     ├── GroupNotFoundError               no broker knows the consumer group (no config,
     │                                    offsets, client or retry topic of it)
     ├── BrokerNotFoundError              a broker name with no known address
     ├── SendFailedError                  every send attempt failed; `errors` lists them
     └── ServerError(code, remark, addr)  the server answered with a code other than SUCCESS
          ├── ServerSystemError           1   SYSTEM_ERROR
          ├── SystemBusyError             2   SYSTEM_BUSY
          ├── RequestCodeNotSupportedError 3  REQUEST_CODE_NOT_SUPPORTED (older/other server)
          ├── MessageIllegalError         13  MESSAGE_ILLEGAL
          ├── ServiceNotAvailableError    14  SERVICE_NOT_AVAILABLE
          ├── NoPermissionError           16  NO_PERMISSION
          ├── TopicExistAlreadyError      18  TOPIC_EXIST_ALREADY
          ├── SubscriptionParseFailedError 23 SUBSCRIPTION_PARSE_FAILED
          ├── ConsumeMsgTimeoutError      207 CONSUME_MSG_TIMEOUT (a consumer the broker asked
          │                                   did not answer in time)
          └── NotFoundError               (no code of its own: "the thing asked for is absent")
               ├── TopicNotExistError     17  TOPIC_NOT_EXIST
               ├── QueryNotFoundError     22  QUERY_NOT_FOUND
               ├── SubscriptionNotExistError 24 SUBSCRIPTION_NOT_EXIST
               ├── SubscriptionGroupNotExistError 26 SUBSCRIPTION_GROUP_NOT_EXIST
               └── ConsumerNotOnlineError 206 CONSUMER_NOT_ONLINE

`raise_for(cmd, addr)` turns a response into its exception through `RESPONSE_ERRORS`; codes
not in the registry raise a plain `ServerError`.  Codes 209-211 mean different things in 4.9
and 5.x, so they are deliberately left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from engine.protocol.codes import ResponseCode
from engine.protocol.command import RemotingCommand
from engine.remoting.errors import RemotingError, RemotingTimeoutError


class ClientError(Exception):
    """Base of every error the client package raises."""


class InvalidAddressError(ClientError, ValueError):
    """An address list entry is not ``host:port``."""


class UnreachableError(ClientError):
    """No server answered; `failures` pairs every address tried with its transport error."""

    def __init__(self, failures: Sequence[tuple[str, RemotingError]], *,
                 role: str = "name server") -> None:
        self.failures = list(failures)
        self.role = role
        parts = [f"{addr} ({exc})" for addr, exc in self.failures]
        if len(parts) == 1:
            message = f"{role} {self.failures[0][0]} unreachable: {self.failures[0][1]}"
        else:
            message = f"no {role} answered: " + "; ".join(parts)
        super().__init__(message)

    @property
    def addrs(self) -> list[str]:
        return [addr for addr, _ in self.failures]

    @property
    def timed_out(self) -> bool:
        """True when at least one server accepted the connection but did not answer in time."""
        return any(isinstance(exc, RemotingTimeoutError) for _, exc in self.failures)


class BadResponseError(ClientError):
    """The server answered, but its header or body is not what the request calls for."""

    def __init__(self, message: str, addr: str | None = None) -> None:
        super().__init__(message if addr is None else f"{addr}: {message}")
        self.addr = addr


class ServerError(ClientError):
    """The server answered with an error code; `remark` is its explanation."""

    def __init__(self, code: int, remark: str | None, addr: str | None = None) -> None:
        self.code = code
        self.remark = remark or ""
        self.addr = addr
        self.role: str | None = None  # "broker" when a broker answered (set by its calls)
        where = f"{addr} " if addr else ""
        super().__init__(f"{where}answered {code_name(code)} ({code}): {self.summary}")

    @property
    def summary(self) -> str:
        """The remark's first line (Apache appends a FAQ link on the next one)."""
        return self.remark.strip().splitlines()[0] if self.remark.strip() else "(no remark)"


class NotFoundError(ServerError):
    """The topic, group, key or client asked for does not exist on the server."""


#: Response code -> exception class; `raise_for` consults nothing else.
RESPONSE_ERRORS: dict[int, type[ServerError]] = {}


E = TypeVar("E", bound=type[ServerError])


def _registers(code: ResponseCode) -> Callable[[E], E]:
    def register(cls: E) -> E:
        if int(code) in RESPONSE_ERRORS:
            raise ValueError(f"response code {int(code)} already has a class")
        RESPONSE_ERRORS[int(code)] = cls
        return cls
    return register


@_registers(ResponseCode.SYSTEM_ERROR)
class ServerSystemError(ServerError):
    """SYSTEM_ERROR: the server failed the request (Java's catch-all)."""


@_registers(ResponseCode.SYSTEM_BUSY)
class SystemBusyError(ServerError):
    """SYSTEM_BUSY: the server sheds load; retry later."""


@_registers(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
class RequestCodeNotSupportedError(ServerError):
    """The server does not handle this request code (another version or server kind)."""


@_registers(ResponseCode.MESSAGE_ILLEGAL)
class MessageIllegalError(ServerError):
    """MESSAGE_ILLEGAL: a message or topic name the server refuses."""


@_registers(ResponseCode.SERVICE_NOT_AVAILABLE)
class ServiceNotAvailableError(ServerError):
    """SERVICE_NOT_AVAILABLE: the server is shutting down, a slave, or out of disk."""


@_registers(ResponseCode.NO_PERMISSION)
class NoPermissionError(ServerError):
    """NO_PERMISSION: the server refuses the operation (protected key, read-only broker)."""


@_registers(ResponseCode.TOPIC_EXIST_ALREADY)
class TopicExistAlreadyError(ServerError):
    """TOPIC_EXIST_ALREADY."""


@_registers(ResponseCode.SUBSCRIPTION_PARSE_FAILED)
class SubscriptionParseFailedError(ServerError):
    """SUBSCRIPTION_PARSE_FAILED: a subscription expression that does not parse."""


@_registers(ResponseCode.CONSUME_MSG_TIMEOUT)
class ConsumeMsgTimeoutError(ServerError):
    """CONSUME_MSG_TIMEOUT: the consumer the broker relayed the call to did not answer in time."""


@_registers(ResponseCode.TOPIC_NOT_EXIST)
class TopicNotExistError(NotFoundError):
    """TOPIC_NOT_EXIST: no route (name server) or no config (broker) for the topic."""


@_registers(ResponseCode.QUERY_NOT_FOUND)
class QueryNotFoundError(NotFoundError):
    """QUERY_NOT_FOUND: no such KV item, offset or message."""


@_registers(ResponseCode.SUBSCRIPTION_NOT_EXIST)
class SubscriptionNotExistError(NotFoundError):
    """SUBSCRIPTION_NOT_EXIST."""


@_registers(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST)
class SubscriptionGroupNotExistError(NotFoundError):
    """SUBSCRIPTION_GROUP_NOT_EXIST."""


@_registers(ResponseCode.CONSUMER_NOT_ONLINE)
class ConsumerNotOnlineError(NotFoundError):
    """CONSUMER_NOT_ONLINE: no client of the group is connected."""


def code_name(code: int) -> str:
    """The `ResponseCode` name of `code`, or ``CODE_<n>`` for codes this engine does not name."""
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"CODE_{code}"


def raise_for(cmd: RemotingCommand, addr: str | None = None) -> RemotingCommand:
    """Return `cmd` when it is a SUCCESS response, else raise its registered error.

    Raises:
        ServerError: the subclass registered for the code, or `ServerError` itself.
    """
    if cmd.code == ResponseCode.SUCCESS:
        return cmd
    raise RESPONSE_ERRORS.get(cmd.code, ServerError)(cmd.code, cmd.remark, addr)


# ---------------------------------------------------------------------------- producer/consumer


class ClientStateError(ClientError):
    """The producer or consumer is not in a state that allows the call."""


class MessageValidationError(ClientError, ValueError):
    """The message breaks a client-side rule (Java's `Validators.checkMessage`)."""


class NoRouteError(ClientError):
    """No route for the topic: it does not exist and cannot be auto-created."""

    def __init__(self, topic: str) -> None:
        super().__init__(f"No route info of this topic: {topic}; create it first "
                         "(mqadmin updateTopic) or enable autoCreateTopicEnable on a broker")
        self.topic = topic


class GroupNotFoundError(ClientError):
    """No broker knows the consumer group: no config, committed offset, online client or
    retry topic of it anywhere."""

    def __init__(self, group: str) -> None:
        self.group = group
        super().__init__(f"no broker knows consumer group '{group}'")


class BrokerNotFoundError(ClientError):
    """The route names a broker for which no address is known (yet)."""

    def __init__(self, broker_name: str) -> None:
        super().__init__(f"The broker[{broker_name}] not exist; its route may be stale")
        self.broker_name = broker_name


class SendFailedError(ClientError):
    """A send failed after every allowed attempt; `errors` holds (broker, error) per attempt."""

    def __init__(self, message: str, errors: Sequence[tuple[str, Exception]]) -> None:
        super().__init__(message)
        self.errors = list(errors)

    @property
    def last(self) -> Exception | None:
        return self.errors[-1][1] if self.errors else None
