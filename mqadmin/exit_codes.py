"""mqadmin's exit codes, its own errors, and the one mapping from any exception to both."""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum

from engine.client.core.errors import (
    BadResponseError,
    BrokerNotFoundError,
    ClientError,
    ConsumerNotOnlineError,
    GroupNotFoundError,
    InvalidAddressError,
    NoPermissionError,
    NoRouteError,
    NotFoundError,
    QueryNotFoundError,
    RequestCodeNotSupportedError,
    SendFailedError,
    ServerError,
    SubscriptionGroupNotExistError,
    TopicNotExistError,
    UnreachableError,
)

INTERRUPTED_MESSAGE = ("interrupted; a change may be half applied: re-run the same command "
                       "(repeating it is safe) and check with the matching get/list command")


class ExitCode(IntEnum):
    """What a script can rely on (like httpie's `ExitStatus`)."""

    OK = 0
    ERROR = 1  # anything else, including a change the server accepted but did not make
    USAGE = 2  # bad or missing options, or a mutation without --yes and without a terminal
    NOT_FOUND = 3  # the topic, key or broker named does not exist
    REJECTED = 4  # the server answered with an error code
    UNREACHABLE = 5  # no server answered (refused, timed out)
    PARTIAL = 6  # some servers did it, others failed
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)


class CliError(Exception):
    """An error mqadmin raises itself; the message already names the next thing to try."""

    code: ExitCode = ExitCode.ERROR


class UsageProblem(CliError):
    """Options that cannot work (no name server address, a malformed one, ...)."""

    code = ExitCode.USAGE


class ConfirmationRequired(UsageProblem):
    """A mutation ran without a terminal to ask on and without --yes."""


class Declined(CliError):
    """The operator answered no: nothing was changed."""


class TargetNotFound(CliError):
    """The thing to change is unknown to every name server (a broker name, say)."""

    code = ExitCode.NOT_FOUND


class Unavailable(CliError):
    """What the command needs is down (no master online for a broker name, say): an outage,
    not a missing thing."""

    code = ExitCode.UNREACHABLE


class Forbidden(CliError):
    """The cluster's own settings refuse the operation (a topic whose permission forbids
    writing, say)."""

    code = ExitCode.REJECTED


class NotVerified(CliError):
    """The server accepted a change, but re-reading it shows it did not take effect."""


class ServersFailed(CliError):
    """A call made on every server (name servers, brokers) failed on some (PARTIAL) or all
    of them."""

    def __init__(self, what: str, failures: Sequence[tuple[str, ClientError]],
                 total: int, *, noun: str = "name servers") -> None:
        self.failures = list(failures)
        self.total = total
        self.partial = len(self.failures) < total
        detail = "; ".join(f"{addr}: {_without_prefix(_first_line(exc), addr)}"
                           for addr, exc in self.failures)
        if self.partial:
            hint = (f"the other {noun} succeeded; fix the failing ones and re-run the "
                    "same command (repeating it is safe)")
        else:
            hint = _hint(self.failures[0][1]) if self.failures else ""
        super().__init__(f"{what} failed on {len(self.failures)} of {total} {noun}: "
                         f"{detail.rstrip('.')}. {hint}".rstrip())
        if self.partial:
            self.code = ExitCode.PARTIAL
        else:  # all failed: the most telling reason (a refusal says more than a timeout)
            codes = [exit_code_for(exc) for _, exc in self.failures]
            specific = [c for c in codes if c != ExitCode.UNREACHABLE]
            self.code = specific[0] if specific else ExitCode.UNREACHABLE


def _without_prefix(text: str, addr: str) -> str:
    """Messages of client errors often start with the address already given."""
    if text.startswith(addr):
        return text[len(addr):].lstrip(" :") or text
    return text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


#: Client errors by exit code; the first matching class wins, so subclasses come first.
_CODES: tuple[tuple[type[BaseException], ExitCode], ...] = (
    (InvalidAddressError, ExitCode.USAGE),
    (UnreachableError, ExitCode.UNREACHABLE),
    (BrokerNotFoundError, ExitCode.UNREACHABLE),
    (TimeoutError, ExitCode.UNREACHABLE),
    (NoRouteError, ExitCode.NOT_FOUND),
    (GroupNotFoundError, ExitCode.NOT_FOUND),
    (NotFoundError, ExitCode.NOT_FOUND),
    (ServerError, ExitCode.REJECTED),
    (KeyboardInterrupt, ExitCode.INTERRUPTED),
)


def _send_failure_code(exc: SendFailedError) -> ExitCode:
    """Every attempt unreachable (or its broker without an address): an outage; any
    refusal by a broker: rejected."""
    attempts = [e for _, e in exc.errors]
    if attempts and all(isinstance(e, UnreachableError | BrokerNotFoundError | TimeoutError)
                        for e in attempts):
        return ExitCode.UNREACHABLE
    if any(isinstance(e, ServerError) for e in attempts):
        return ExitCode.REJECTED
    return ExitCode.ERROR


def exit_code_for(exc: BaseException) -> ExitCode:
    """The one place that decides how an exception ends the process."""
    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, SendFailedError):
        return _send_failure_code(exc)
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    return ExitCode.ERROR


#: Words of access-control refusals (this engine's remarks, 5.3's and 4.9's messages).
_ACCESS_WORDS = ("not signed", "AccessKey", "signature", "no rule", "denied by the rule",
                 "no permission to access", "SUPER user", "accessKey", "is disabled",
                 # Apache 5.3.3's authentication and authorization remarks
                 "username cannot be null", "Authentication failed", "Authorization failed",
                 "is not found", "authentication header is incorrect")


#: Words of Apache 5.3's topic-attribute refusals (`AttributeUtil`, `EnumAttribute`, ...).
_ATTRIBUTE_WORDS = ("unsupported key:", "unchangeable attribute", "value is not in set",
                    "nonexistent key:", "kv string format", "message type is not supported",
                    "is not supported by this broker: its topics")


def _hint(exc: BaseException) -> str:
    """The next thing to try after `exc`."""
    if isinstance(exc, InvalidAddressError):
        return "Pass -n host:port (several separated by ';') or set NAMESRV_ADDR."
    if isinstance(exc, UnreachableError):
        if exc.role == "broker":
            return ("Check that the broker is running and reachable from here (its address "
                    "is what it registered: see `mqadmin clusterList`).")
        return ("Check that the name server is running and that -n / NAMESRV_ADDR names it "
                "(host:port, default port 9876).")
    if isinstance(exc, TopicNotExistError):
        return "List the topics the name server knows with `mqadmin topicList`."
    if isinstance(exc, ConsumerNotOnlineError):
        return ("No consumer of the group is connected: start one, or check the group name "
                "with `mqadmin consumerProgress`.")
    if isinstance(exc, SubscriptionGroupNotExistError):
        return "Create the group with `mqadmin updateSubGroup`, or check its name."
    if isinstance(exc, QueryNotFoundError):
        return "Check the spelling of the namespace and key."
    if isinstance(exc, NotFoundError):
        return "Check the name; list what exists with the matching list command."
    if isinstance(exc, NoPermissionError):
        if any(word in str(exc) for word in _ACCESS_WORDS):
            return ("Access control refused it: use a context with keys (`mqadmin context add "
                    "NAME -n ADDRS --access-key K --secret-key-file F`) or set "
                    "MQADMIN_ACCESS_KEY and MQADMIN_SECRET_KEY, for a user whose rules allow "
                    "it (`mqadmin getAcl`).")
        return ("The server does not allow this change; protected settings can only be "
                "changed in the server's own config file.")
    if isinstance(exc, RequestCodeNotSupportedError):
        if exc.role == "broker":
            return ("The broker does not handle this request (an older or another server "
                    "version); nothing was changed.")
        return ("The server does not know this request: check that -n names a RocketMQ "
                "4.9/5.x name server.")
    if isinstance(exc, ServerError) and any(w in str(exc) for w in _ATTRIBUTE_WORDS):
        return ("Attributes (RocketMQ 5): a topic's message.type (NORMAL, FIFO, DELAY, "
                "TRANSACTION) can change, its queue.type (SimpleCQ) and cleanup.policy "
                "(DELETE) only be given when it is created, -key deletes; groups have none. "
                "See `mqadmin topicConfig -t TOPIC` for what a topic has.")
    if isinstance(exc, ServerError):
        return "See the server's log for why it refused."
    if isinstance(exc, BadResponseError):
        return ("Check that -n names a RocketMQ name server; re-run with --debug for "
                "details.")
    if isinstance(exc, TimeoutError):
        return "The server is slow or overloaded; try again, or try another name server."
    if isinstance(exc, GroupNotFoundError):
        return ("List the groups with `mqadmin consumerProgress`; create one with `mqadmin "
                "updateSubGroup`.")
    if isinstance(exc, NoRouteError):
        return f"Check the topic with `mqadmin topicRoute -t {exc.topic}`."
    if isinstance(exc, BrokerNotFoundError | SendFailedError):
        return ("Check the brokers of the topic's route: `mqadmin clusterList`, and "
                "`mqadmin haStatus` for a broker name without a master online.")
    return ""


def message_for(exc: BaseException) -> str:
    """One message for stderr: what went wrong, then the next thing to try."""
    if isinstance(exc, CliError):
        return str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return INTERRUPTED_MESSAGE
    if isinstance(exc, ClientError | TimeoutError):
        return f"{_first_line(exc).rstrip('.')}. {_hint(exc)}".rstrip()
    return (f"internal error: {type(exc).__name__}: {exc}. Re-run with --debug and report "
            "the traceback.")
