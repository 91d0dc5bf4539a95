"""The persisted replication role: `<storePathRootDir>/config/haRole.json`.

How this works: written (atomically: temp file, fsync, rename) whenever a broker's role
changes — promotion, demotion, fencing — or it learns a newer epoch; read at start, where it
overrides brokerRole and brokerId of broker.conf, so a broker restarts in the role it last
had.  A broker that never changed role has no file and runs as configured (epoch 0).

    {"brokerRole": "SLAVE", "brokerId": 1, "epoch": 2, "epochStartOffset": 1048576,
     "epochs": {"1": 0, "2": 1048576}}

`epochs` is the epoch history (epoch -> commit-log offset where that epoch's master started
writing); `epochStartOffset` is the current epoch's entry.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from engine.ha.errors import RoleFileError

FILE_NAME = "haRole.json"


@dataclass(frozen=True, slots=True)
class RoleRecord:
    broker_role: str
    broker_id: int
    epoch: int = 0
    epoch_start_offset: int = 0
    epochs: dict[int, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"brokerRole": self.broker_role, "brokerId": self.broker_id,
                "epoch": self.epoch, "epochStartOffset": self.epoch_start_offset,
                "epochs": {str(e): o for e, o in sorted(self.epochs.items())}}


def role_path(config_dir: str) -> str:
    return os.path.join(config_dir, FILE_NAME)


def load_role(path: str) -> RoleRecord | None:
    """The record, or None when the broker never changed role.

    Raises:
        RoleFileError: the file exists but is not a role record.
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RoleFileError(f"cannot read the HA role file {path}: {exc}; fix or delete it "
                            "(the broker then starts in the role of its config file)") from None
    try:
        return RoleRecord(
            broker_role=str(data["brokerRole"]), broker_id=int(data["brokerId"]),
            epoch=int(data.get("epoch", 0)),
            epoch_start_offset=int(data.get("epochStartOffset", 0)),
            epochs={int(e): int(o) for e, o in (data.get("epochs") or {}).items()})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise RoleFileError(f"{path} is not an HA role record ({exc!r}); fix or delete "
                            "it") from None


def save_role(path: str, record: RoleRecord) -> None:
    """Raises:
    RoleFileError: the file cannot be written."""
    tmp = f"{path}.tmp"
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(record.to_json(), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise RoleFileError(f"cannot write the HA role file {path}: {exc}") from None
