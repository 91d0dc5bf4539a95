"""`RemotingCommand` and its two header serializations (JSON and ROCKETMQ binary).

How this works: a frame is ``int32 length | int32 (serializeType << 24 | headerLen) | header |
body``.  This module turns a header plus body into those bytes and back; `frame.py` cuts the
byte stream into frames.  JSON headers are written like fastjson writes them in Java (keys in
alphabetical order, nulls omitted, enums by name) and read leniently (numbers, booleans or
strings in extFields, languages by name or number, unknown keys ignored), because real
clients send all of those.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import orjson

from engine.protocol.codes import LanguageCode, ResponseCode, SerializeType
from engine.protocol.errors import FrameError
from engine.protocol.version import CURRENT_VERSION

FLAG_RESPONSE = 0x1  # bit 0: 1 = response, 0 = request
FLAG_ONEWAY = 0x2  # bit 1: the requester expects no response

# Frame prefix:
#   +--------+----------------------------------+
#   | int32  | length of everything that follows |
#   | int32  | serializeType << 24 | headerLen   |
#   +--------+----------------------------------+
FRAME_PREFIX = struct.Struct(">II")
assert FRAME_PREFIX.size == 8
HEADER_LEN_MASK = 0x00FFFFFF

# ROCKETMQ binary header, fixed part:
#   int16 code | int8 language | int16 version | int32 opaque | int32 flag | int32 remarkLen
BINARY_FIXED = struct.Struct(">hbhiii")
assert BINARY_FIXED.size == 17
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")

_LANGUAGE_BY_NAME = {lang.name: lang for lang in LanguageCode}
_LANGUAGE_NAMES = tuple(lang.name for lang in LanguageCode)
_SERIALIZE_NAMES = ("JSON", "ROCKETMQ")

ExtFields = dict[str, str]


@dataclass(frozen=True, slots=True)
class RemotingCommand:
    """One request or response: the header fields plus an opaque body."""

    code: int
    opaque: int = 0
    flag: int = 0
    language: int = LanguageCode.PYTHON
    version: int = CURRENT_VERSION
    remark: str | None = None
    ext_fields: ExtFields | None = None
    body: bytes | None = None
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def ext(self, key: str, default: str | None = None) -> str | None:
        """Return one extFields value, or `default` when absent."""
        if self.ext_fields is None:
            return default
        return self.ext_fields.get(key, default)

    def with_opaque(self, opaque: int) -> RemotingCommand:
        """This command with another opaque (a client numbers each request it sends)."""
        return make_command(self.code, opaque, self.flag, self.language, self.version,
                            self.remark, self.ext_fields, self.body, self.serialize_type)

    def response(
        self,
        code: int = ResponseCode.SUCCESS,
        remark: str | None = None,
        ext_fields: ExtFields | None = None,
        body: bytes | None = None,
    ) -> RemotingCommand:
        """Build the response to this request: same opaque and serialize type, response flag."""
        return make_command(int(code), self.opaque, FLAG_RESPONSE, LanguageCode.PYTHON,
                            CURRENT_VERSION, remark, ext_fields, body, self.serialize_type)


_new_object = object.__new__
(_set_code, _set_opaque, _set_flag, _set_language, _set_version, _set_remark, _set_ext_fields,
 _set_body, _set_serialize_type) = (vars(RemotingCommand)[name].__set__ for name in (
    "code", "opaque", "flag", "language", "version", "remark", "ext_fields", "body",
    "serialize_type"))


def make_command(code: int, opaque: int, flag: int, language: int, version: int,
                 remark: str | None, ext_fields: ExtFields | None, body: bytes | None,
                 serialize_type: SerializeType) -> RemotingCommand:
    """`RemotingCommand(...)` with every field given, in order, for the hot paths (one per
    frame decoded): the slots are set through their descriptors, without the frozen
    dataclass `__init__`'s `object.__setattr__` call per field (half the cost)."""
    cmd: RemotingCommand = _new_object(RemotingCommand)
    _set_code(cmd, code)
    _set_opaque(cmd, opaque)
    _set_flag(cmd, flag)
    _set_language(cmd, language)
    _set_version(cmd, version)
    _set_remark(cmd, remark)
    _set_ext_fields(cmd, ext_fields)
    _set_body(cmd, body)
    _set_serialize_type(cmd, serialize_type)
    return cmd


def request(
    code: int,
    ext_fields: ExtFields | None = None,
    body: bytes | None = None,
    *,
    oneway: bool = False,
    serialize_type: SerializeType = SerializeType.JSON,
    version: int = CURRENT_VERSION,
) -> RemotingCommand:
    """Build a request (opaque 0; the connection assigns the real one when sending)."""
    return RemotingCommand(
        code=int(code),
        flag=FLAG_ONEWAY if oneway else 0,
        ext_fields=ext_fields,
        body=body,
        serialize_type=serialize_type,
        version=version,
    )


# ---------------------------------------------------------------------------- encoding


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """Serialize the header as fastjson would: keys sorted, nulls omitted, enums by name."""
    doc: dict[str, Any] = {"code": cmd.code}
    if cmd.ext_fields is not None:
        doc["extFields"] = cmd.ext_fields
    doc["flag"] = cmd.flag
    lang = cmd.language
    doc["language"] = _LANGUAGE_NAMES[lang] if 0 <= lang < len(_LANGUAGE_NAMES) else "OTHER"
    doc["opaque"] = cmd.opaque
    if cmd.remark is not None:
        doc["remark"] = cmd.remark
    doc["serializeTypeCurrentRPC"] = "JSON"
    doc["version"] = cmd.version
    return orjson.dumps(doc)


_pack_int16 = _INT16.pack
_pack_int32 = _INT32.pack


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """Serialize the header in ROCKETMQ binary form (remoting.md §2.2)."""
    remark = cmd.remark.encode() if cmd.remark else b""
    out = bytearray(BINARY_FIXED.pack(
        _to_int16(cmd.code), cmd.language, _to_int16(cmd.version), cmd.opaque, cmd.flag,
        len(remark),
    ))
    out += remark
    ext_at = len(out)
    out += b"\0\0\0\0"
    if cmd.ext_fields:
        for key, value in cmd.ext_fields.items():
            if key is None or value is None:
                continue
            kb = key.encode()
            vb = value.encode()
            out += _pack_int16(len(kb))
            out += kb
            out += _pack_int32(len(vb))
            out += vb
    _INT32.pack_into(out, ext_at, len(out) - ext_at - 4)
    return bytes(out)


def _to_int16(value: int) -> int:
    """Java's `(short)` cast: keep the low 16 bits, signed."""
    value &= 0xFFFF
    return value - 0x10000 if value >= 0x8000 else value


def encode(cmd: RemotingCommand) -> bytes:
    """Encode a whole frame, length prefix included."""
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        header = encode_binary_header(cmd)
    else:
        header = encode_json_header(cmd)
    body = cmd.body or b""
    header_len = len(header)
    return b"".join(
        (
            FRAME_PREFIX.pack(4 + header_len + len(body), (cmd.serialize_type << 24) | header_len),
            header,
            body,
        )
    )


# ---------------------------------------------------------------------------- decoding


def _ext_value(value: Any) -> str:
    """extFields values arrive as strings, numbers or booleans; Java sees strings."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return orjson.dumps(value).decode()
    return str(value)


def _language(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        lang = _LANGUAGE_BY_NAME.get(value)
        if lang is not None:
            return lang
        if value.isdigit():
            return int(value)
    return LanguageCode.OTHER


def _int_field(doc: dict[str, Any], key: str) -> int:
    value = doc.get(key, 0)
    if type(value) is int:
        return value
    if isinstance(value, bool) or value is None:
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        raise FrameError(f"header field {key!r} is not an integer: {value!r}") from None


_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1


def _out_of_range(code: int, opaque: int, flag: int, version: int) -> str:
    """Which Java `int` header field holds a value outside its range (the first one)."""
    for key, value in (("code", code), ("opaque", opaque), ("flag", flag), ("version", version)):
        if not _I32_MIN <= value <= _I32_MAX:
            return f"header field {key!r} is out of range for a Java int: {str(value)[:40]}"
    return "header field out of range"


def decode_json_header(data: bytes, body: bytes | None) -> RemotingCommand:
    """Parse a JSON header leniently, as fastjson does."""
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise FrameError(f"header is not valid JSON: {exc}") from None
    if type(doc) is not dict:
        raise FrameError("header JSON is not an object")
    ext = doc.get("extFields")
    if ext is not None:
        if type(ext) is not dict:
            raise FrameError("header field 'extFields' is not an object")
        try:
            "".join(ext.values())  # raises unless every value is a string: one C call
        except TypeError:
            ext = {k: v if type(v) is str else _ext_value(v) for k, v in ext.items()}
    code = doc.get("code", 0)
    opaque = doc.get("opaque", 0)
    flag = doc.get("flag", 0)
    version = doc.get("version", 0)
    if not (type(code) is int and type(opaque) is int and type(flag) is int
            and type(version) is int):
        code = _int_field(doc, "code")
        opaque = _int_field(doc, "opaque")
        flag = _int_field(doc, "flag")
        version = _int_field(doc, "version")
    if not (_I32_MIN <= opaque <= _I32_MAX and _I32_MIN <= code <= _I32_MAX
            and _I32_MIN <= flag <= _I32_MAX and _I32_MIN <= version <= _I32_MAX):
        raise FrameError(_out_of_range(code, opaque, flag, version))
    remark = doc.get("remark")
    language = doc.get("language", "JAVA")
    lang = _LANGUAGE_BY_NAME.get(language) if type(language) is str else None
    return make_command(
        code, opaque, flag, _language(language) if lang is None else lang, version,
        None if remark is None else str(remark), ext, body, SerializeType.JSON,
    )


def decode_binary_header(data: bytes, body: bytes | None) -> RemotingCommand:
    """Parse a ROCKETMQ binary header (remoting.md §2.2); zero-length strings read as null."""
    size = len(data)
    if size < BINARY_FIXED.size + 4:
        raise FrameError(f"binary header of {size} bytes is shorter than its fixed part")
    code, language, version, opaque, flag, remark_len = BINARY_FIXED.unpack_from(data, 0)
    pos = BINARY_FIXED.size
    if remark_len < 0 or pos + remark_len + 4 > size:
        raise FrameError(f"binary header remark length {remark_len} runs past the header")
    remark = _utf8(data[pos : pos + remark_len]) if remark_len else None
    pos += remark_len
    (ext_len,) = _INT32.unpack_from(data, pos)
    pos += 4
    if ext_len < 0 or pos + ext_len > size:
        raise FrameError(f"binary header extFields length {ext_len} runs past the header")
    ext_fields: ExtFields | None = None
    if ext_len:
        ext_fields = {}
        end = pos + ext_len
        unpack_int32 = _INT32.unpack_from
        try:
            while pos < end:
                key_len = (data[pos] << 8) | data[pos + 1]
                key_end = pos + 2 + key_len
                val_len = unpack_int32(data, key_end)[0]
                if val_len < 0 or key_len & 0x8000:
                    raise FrameError("binary header extFields entry has a negative length")
                val_at = key_end + 4
                pos = val_at + val_len
                if key_len and val_len:
                    ext_fields[data[key_end - key_len : key_end].decode()] = (
                        data[val_at:pos].decode()
                    )
            if pos != end:
                raise FrameError("binary header extFields entry runs past the map")
        except (IndexError, struct.error):
            raise FrameError("binary header extFields entry is truncated") from None
        except UnicodeDecodeError:
            raise FrameError("binary header holds a string that is not UTF-8") from None
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        language=language & 0xFF,
        version=version,
        remark=remark,
        ext_fields=ext_fields,
        body=body,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        raise FrameError("binary header holds a string that is not UTF-8") from None


def decode_frame(data: bytes, start: int = 0, end: int | None = None) -> RemotingCommand:
    """Decode the frame in ``data[start:end]``, given without its 4-byte length prefix.

    Raises:
        FrameError: the frame is malformed.
    """
    if end is None:
        end = len(data)
    total = end - start
    if total < 4:
        raise FrameError(f"frame of {total} bytes has no header-length word")
    word = int.from_bytes(data[start : start + 4], "big")
    header_len = word & HEADER_LEN_MASK
    if header_len > total - 4:
        raise FrameError(f"header length {header_len} exceeds the frame's {total - 4} bytes")
    body_at = start + 4 + header_len
    header = data[start + 4 : body_at]
    body = data[body_at:end] if end > body_at else None
    serialize = word >> 24
    if serialize == SerializeType.JSON:
        return decode_json_header(header, body)
    if serialize == SerializeType.ROCKETMQ:
        return decode_binary_header(header, body)
    raise FrameError(f"unknown serialize type {serialize}")
