"""Which request and trailer header lists are malformed (RFC 9113 section 8.2, 8.3)."""

from __future__ import annotations

import pytest

from engine.proxy.h2.fields import request_is_malformed, trailers_are_malformed

BASE = [(":method", "POST"), (":scheme", "http"), (":path", "/x"), (":authority", "h:1")]

MALFORMED = {
    "no :path": BASE[:2],
    "no :method": BASE[1:],
    "no :scheme": [BASE[0], BASE[2]],
    "an empty :path": [*BASE[:2], (":path", "")],
    "a second :method": [*BASE, (":method", "GET")],
    "an unknown pseudo-header": [*BASE, (":status", "200")],
    "a pseudo-header after a field": [*BASE[:2], ("a", "b"), BASE[2]],
    "an uppercase name": [*BASE, ("X-Id", "1")],
    "a space in a name": [*BASE, ("x id", "1")],
    "a colon inside a name": [*BASE, ("x:id", "1")],
    "an empty name": [*BASE, ("", "1")],
    "a non-ASCII name": [*BASE, ("x-\u00e9", "1")],
    "connection": [*BASE, ("connection", "close")],
    "transfer-encoding": [*BASE, ("transfer-encoding", "chunked")],
    "te: gzip": [*BASE, ("te", "gzip")],
    "a NUL in a value": [*BASE, ("a", "b\x00c")],
    "a CR in a value": [*BASE, ("a", "b\rc")],
    "an LF in a value": [*BASE, ("a", "b\nc")],
    "an LF in a pseudo-header's value": [(":method", "PO\nST"), *BASE[1:]],
    "a leading space": [*BASE, ("a", " b")],
    "a trailing tab": [*BASE, ("a", "b\t")],
    "a CONNECT with :path": [(":method", "CONNECT"), (":authority", "h:1"), (":path", "/")],
    "a CONNECT without :authority": [(":method", "CONNECT")],
}

WELL_FORMED = {
    "the base": BASE,
    "fields": [*BASE, ("content-type", "application/grpc"), ("te", "trailers"),
               ("grpc-timeout", "1S"), ("x-mq-request-id", "a b"), ("empty", "")],
    "a CONNECT": [(":method", "CONNECT"), (":authority", "h:1")],
    "a value that is not UTF-8": [*BASE, ("a", b"\xff".decode("utf-8", "surrogateescape"))],
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed(case: str) -> None:
    assert request_is_malformed(MALFORMED[case])


@pytest.mark.parametrize("case", sorted(WELL_FORMED))
def test_well_formed(case: str) -> None:
    assert not request_is_malformed(WELL_FORMED[case])


def test_trailers() -> None:
    assert not trailers_are_malformed([])
    assert not trailers_are_malformed([("grpc-status", "0"), ("x", "")])
    assert trailers_are_malformed([(":status", "200")])
    assert trailers_are_malformed([("a", "b\n")])
    assert trailers_are_malformed([("connection", "x")])
