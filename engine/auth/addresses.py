"""ACL 1.0 white-address patterns (4.9.7 `RemoteAddressStrategyFactory`) as predicates on IPs.

Forms: blank (matches nothing); ``*``, ``*.*.*.*`` (everything); ``192.168.1.{1,2,3}`` or
``a,b,c`` (a set of addresses); ``192.168.1.*``, ``192.168.*.*``, ``10.1.1-100.*`` or
``192.168.1.1-100`` (the first octet after the fixed head that is ``*`` or ``a-b`` is a range,
later octets are free, as in 4.9.7); otherwise one address.  IPv6 addresses are accepted as
single addresses and sets; IPv6 ranges are refused with a clear error.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

from engine.auth.errors import AuthInputError

AddressMatcher = Callable[[str], bool]


def _never(ip: str) -> bool:
    return False


def _always(ip: str) -> bool:
    return True


def _normal(addr: str, pattern: str) -> str:
    try:
        return str(ipaddress.ip_address(addr.strip()))
    except ValueError:
        raise AuthInputError(f"white address {pattern!r}: {addr.strip()!r} is not an IP") from None


def _one_of(addrs: set[str]) -> AddressMatcher:
    def match(ip: str) -> bool:
        try:
            return str(ipaddress.ip_address(ip)) in addrs
        except ValueError:
            return False
    return match


def _octet(text: str, pattern: str) -> int:
    if not text.strip().isdigit() or not 0 <= int(text) <= 255:
        raise AuthInputError(f"white address {pattern!r}: {text!r} is not an octet 0-255")
    return int(text)


def _range(pattern: str) -> AddressMatcher:
    if ":" in pattern:
        raise AuthInputError(f"white address {pattern!r}: IPv6 ranges are not supported; "
                             "list the addresses as a,b,c")
    parts = pattern.split(".")
    if len(parts) != 4:
        raise AuthInputError(f"white address {pattern!r} does not have four octets")
    for index in (1, 2, 3):
        part = parts[index].strip()
        if part == "*":
            low, high = 0, 255
        elif "-" in part:
            first, _, last = part.partition("-")
            low, high = _octet(first, pattern), _octet(last, pattern)
            if low > high:
                raise AuthInputError(f"white address {pattern!r}: range {part} is empty")
        else:
            continue
        head = [_octet(p, pattern) for p in parts[:index]]

        def match(ip: str, head: list[int] = head, index: int = index,
                  low: int = low, high: int = high) -> bool:
            octets = ip.split(".")
            if len(octets) != 4 or not all(o.isdigit() for o in octets):
                return False
            values = [int(o) for o in octets]
            return values[:index] == head and low <= values[index] <= high
        return match
    raise AuthInputError(f"white address {pattern!r} has no * or a-b octet")


def compile_white(pattern: str | None) -> AddressMatcher:
    """The predicate for one 4.9 white-address pattern.

    Raises:
        AuthInputError: the pattern is not one of 4.9's forms.
    """
    text = (pattern or "").strip()
    if not text:
        return _never
    if text in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return _always
    if text.endswith("}"):
        sep = ":" if ":" in text else "."
        head, _, tail = text.rpartition(sep)
        if not tail.startswith("{"):
            raise AuthInputError(f"white address {text!r}: the {{...}} set must end it")
        return _one_of({_normal(head + sep + t, text) for t in tail[1:-1].split(",")})
    if "," in text:
        return _one_of({_normal(a, text) for a in text.split(",")})
    if "*" in text or "-" in text:
        return _range(text)
    return _one_of({_normal(text, text)})


def source_ip(remote_addr: str) -> str:
    """``host:port`` -> ``host`` (5.3 `substringBeforeLast(remoteAddr, ":")`)."""
    host, sep, _ = remote_addr.rpartition(":")
    return host.strip("[]") if sep else remote_addr
