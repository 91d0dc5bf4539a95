"""Rebuilds the exact frames of the golden captures (one JSON object per captured frame)."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.protocol.codes import LanguageCode, SerializeType
from engine.protocol.command import RemotingCommand, encode_binary_header


@dataclass(frozen=True)
class GoldenFrame:
    source: str
    line: int
    listen: int
    serialize: SerializeType
    header_len: int
    header: dict[str, Any]
    body: bytes

    @property
    def frame(self) -> bytes:
        """The frame as it crossed the wire (length prefix included)."""
        if self.serialize == SerializeType.JSON:
            head = json.dumps(self.header, separators=(",", ":")).encode()
            if self.header.get("language") == "CPP":
                head += b"\n"  # the C++ client's jsoncpp FastWriter ends with a newline
        else:
            h = self.header
            head = encode_binary_header(RemotingCommand(
                code=h["code"], opaque=h["opaque"], flag=h["flag"],
                language=LanguageCode[h["language"]], version=h["version"],
                remark=h["remark"], ext_fields=h["extFields"],
            ))
        word = (self.serialize << 24) | len(head)
        return struct.pack(">II", 4 + len(head) + len(self.body), word) + head + self.body


def golden_frames(directory: Path) -> Iterator[GoldenFrame]:
    for path in sorted(directory.glob("*.jsonl")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            rec = json.loads(line)
            if "bodyHex" in rec:
                body = bytes.fromhex(rec["bodyHex"])
            else:
                body = rec.get("body", "").encode()
            yield GoldenFrame(
                source=path.name,
                line=number,
                listen=int(rec.get("listen", 0)),
                serialize=SerializeType[rec["serialize"]],
                header_len=int(rec["headerLenWord"], 16) & 0xFFFFFF,
                header=rec["header"],
                body=body,
            )
