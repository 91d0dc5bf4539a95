"""`RegisterBrokerBody`: a broker's topic table sent with REGISTER_BROKER, plain or compressed."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

import orjson

from engine.protocol import fastjson
from engine.protocol.body.decode import decode_body
from engine.protocol.body.topic import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from engine.protocol.errors import BodyError
from engine.protocol.wire import from_json, to_json

# Compressed form (`RegisterBrokerBody.encode(true)`), a zlib stream of:
#   int32 len | DataVersion JSON
#   int32 topicCount
#   topicCount x (int32 len | "<name> <read> <write> <perm> <filterType>")
#   int32 len | filterServerList JSON
_LEN = struct.Struct(">i")
assert _LEN.size == 4

REQUEST = "REGISTER_BROKER"


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: list[str] = field(default_factory=list)

    def encode(self, compressed: bool = False) -> bytes:
        if not compressed:
            return fastjson.dumpb(to_json(self))
        wrapper = self.topic_config_serialize_wrapper
        parts = [_chunk(fastjson.dumpb(to_json(wrapper.data_version)))]
        parts.append(_LEN.pack(len(wrapper.topic_config_table)))
        for config in wrapper.topic_config_table.values():
            parts.append(_chunk(config.encode_compact().encode()))
        parts.append(_chunk(orjson.dumps(self.filter_server_list)))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, data: bytes | None, compressed: bool = False) -> RegisterBrokerBody:
        """Read either form; an empty body is an empty table at DataVersion(0, 0).

        Raises:
            BodyError: the body is not a valid registration; the text names REGISTER_BROKER.
        """
        if not data:
            return cls()
        if not compressed:
            return decode_body(cls, data, REQUEST)
        try:
            return cls._inflate(data)
        except BodyError as exc:
            raise BodyError(f"{REQUEST}: the compressed RegisterBrokerBody does not decode: {exc}"
                            ) from None

    @classmethod
    def _inflate(cls, data: bytes) -> RegisterBrokerBody:
        try:
            raw = zlib.decompress(data)
        except zlib.error as exc:
            raise BodyError(f"it does not inflate: {exc}") from None
        reader = _Reader(raw)
        doc = fastjson.loads(reader.chunk())
        if not isinstance(doc, dict):
            raise BodyError("its DataVersion is not a JSON object")
        version = from_json(DataVersion, doc)
        count = reader.int32()
        if count < 0:
            raise BodyError(f"it announces {count} topics")
        table: dict[str, TopicConfig] = {}
        for _ in range(count):
            config = TopicConfig.decode_compact(reader.text())
            table[config.topic_name] = config
        servers = fastjson.loads(reader.chunk()) if reader.remaining() else []
        if not isinstance(servers, list):
            raise BodyError("its filter server list is not a JSON array")
        return cls(TopicConfigSerializeWrapper(table, version), [str(s) for s in servers])


def _chunk(data: bytes) -> bytes:
    return _LEN.pack(len(data)) + data


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def int32(self) -> int:
        if self.remaining() < 4:
            raise BodyError("it is truncated")
        (value,) = _LEN.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def chunk(self) -> bytes:
        size = self.int32()
        if size < 0 or size > self.remaining():
            raise BodyError(f"a chunk of {size} bytes runs past the end")
        out = self.data[self.pos : self.pos + size]
        self.pos += size
        return out

    def text(self) -> str:
        try:
            return self.chunk().decode()
        except UnicodeDecodeError:
            raise BodyError("a topic config is not UTF-8 text") from None
