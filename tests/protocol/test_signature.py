"""Request signatures: the C++ captures' Signatures (empty key), Java's rules, verification."""

from __future__ import annotations

from pathlib import Path

from engine.protocol.command import decode_frame, request
from engine.protocol.signature import (
    ACCESS_KEY,
    SIGNATURE,
    UNIQUE_KEY_QUERY,
    Credentials,
    Verifier,
    content_prefix,
    sign,
    signature_of,
)

from .golden import golden_frames


def test_every_cpp_capture_signature_is_reproduced(golden_dir: Path) -> None:
    signed = 0
    for frame in golden_frames(golden_dir):
        if not frame.source.startswith("cpp1-") or frame.header.get("flag", 0) & 1:
            continue
        cmd = decode_frame(frame.frame[4:])
        assert cmd.ext_fields is not None and SIGNATURE in cmd.ext_fields, frame.line
        expected = cmd.ext_fields[SIGNATURE]
        assert signature_of(content_prefix(cmd.ext_fields), cmd.body, "") == expected, (
            frame.source, frame.line)
        assert Verifier("").verify(cmd)
        assert not Verifier("x").verify(cmd)
        signed += 1
    assert signed >= 150  # producer, push, pull and orderly consumer captures


def test_sign_then_verify_and_any_change_breaks_it() -> None:
    creds = Credentials("alice-key", "alice-secret")
    cmd = sign(request(310, {"b": "TopicA", "a": "pg", "k": "v"}, b"body"), creds)
    assert cmd.ext_fields is not None
    assert cmd.ext_fields[ACCESS_KEY] == "alice-key"
    verifier = Verifier("alice-secret")
    assert verifier.verify(cmd)
    assert not Verifier("other").verify(cmd)
    tampered = request(310, {**cmd.ext_fields, "b": "TopicB"}, b"body")
    assert not verifier.verify(tampered)
    assert not verifier.verify(request(310, cmd.ext_fields, b"bodx"))
    assert "alice-secret" not in repr(creds)


def test_unique_key_flag_left_out_only_for_clients_up_to_4_9_3() -> None:
    creds = Credentials("k", "s")
    ext = {"topic": "T", "key": "K", UNIQUE_KEY_QUERY: "true"}
    new_client = sign(request(12, ext, version=409), creds)
    assert Verifier("s").verify(new_client)
    # a 4.9.3 client signed before adding the flag
    old = sign(request(12, {"topic": "T", "key": "K"}, version=399), creds)
    assert old.ext_fields is not None
    old_sent = request(12, {**old.ext_fields, UNIQUE_KEY_QUERY: "true"}, version=399)
    assert Verifier("s").verify(old_sent)


def test_keys_sort_like_java_treemap() -> None:
    # Java compares UTF-16 code units: U+FFFD sorts after a surrogate pair (U+1F600)
    ext = {"\ufffd": "b", "\U0001f600": "a", "A": "0"}
    assert content_prefix(ext) == b"0ab"
