"""KV config of the name server (`KVConfigManager`): namespace -> key -> value, in kvConfig.json.

The file is `{"configTable":{namespace:{key:value}}}`, written whole after every change through
a temp file, fsync and rename, so a crash leaves the old or the new table, never half of one.
Writes may run in a worker thread: `snapshot()` copies the table on the caller's thread and
`write()` drops a snapshot older than one already on disk.
"""

from __future__ import annotations

import logging
import os
import threading

from engine.protocol import fastjson
from engine.protocol.body.route import KVTable
from engine.protocol.errors import BodyError

log = logging.getLogger("engine.namesrv.kv")

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigError(Exception):
    """kvConfig.json exists but cannot be read as a KV table."""


class KVConfigManager:
    def __init__(self, path: str) -> None:
        self.path = path
        self.table: dict[str, dict[str, str]] = {}
        self._seq = 0
        self._written = 0
        self._lock = threading.Lock()

    def load(self) -> None:
        """Read the file if it exists (a missing file is an empty table).

        Raises:
            KVConfigError: the file is unreadable or not a KV table.
        """
        try:
            with open(self.path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return
        except OSError as exc:
            raise KVConfigError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        if not data.strip():
            return
        try:
            doc = fastjson.loads(data)
        except BodyError as exc:
            raise KVConfigError(f"{self.path} is not valid JSON: {exc}") from None
        table = doc.get("configTable") if isinstance(doc, dict) else None
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise KVConfigError(f"{self.path} has no configTable object")
        self.table = {str(ns): {str(k): str(v) for k, v in kv.items()}
                      for ns, kv in table.items()}
        log.info("loaded KV config from %s: %d namespaces", self.path, len(self.table))

    # ------------------------------------------------------------------ table

    def put(self, namespace: str, key: str, value: str) -> None:
        table = self.table.setdefault(namespace, {})
        old = table.get(key)
        table[key] = value
        if old is None:
            log.info("putKVConfig create new config item, Namespace: %s Key: %s Value: %s",
                     namespace, key, value)
        else:
            log.info("putKVConfig update config item, Namespace: %s Key: %s Value: %s",
                     namespace, key, value)

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        """Remove one key; like 4.9.7 an emptied namespace stays (listed as empty)."""
        table = self.table.get(namespace)
        if table is not None and table.pop(key, None) is not None:
            log.info("deleteKVConfig delete a config item, Namespace: %s Key: %s", namespace, key)

    def namespace(self, namespace: str) -> KVTable | None:
        """A namespace's table, None when the namespace does not exist."""
        table = self.table.get(namespace)
        return KVTable(dict(table)) if table is not None else None

    # ------------------------------------------------------------------ persistence

    def snapshot(self) -> tuple[int, bytes]:
        self._seq += 1
        return self._seq, fastjson.dumpb({"configTable": self.table})

    def write(self, seq: int, data: bytes) -> None:
        """Write a snapshot atomically unless a newer one is already on disk.

        Raises:
            OSError: the file cannot be written.
        """
        with self._lock:
            if seq <= self._written:
                return
            directory = os.path.dirname(os.path.abspath(self.path))
            os.makedirs(directory, exist_ok=True)
            tmp = f"{self.path}.tmp"
            with open(tmp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
            dir_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
            self._written = seq

    def persist(self) -> None:
        self.write(*self.snapshot())
