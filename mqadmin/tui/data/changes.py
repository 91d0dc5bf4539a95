"""Changes the dashboard makes, each a `Change` for the change runner (operations/change.py),
which plans, applies, verifies and audits them exactly as it does for the CLI (the dashboard
has no other way to change a cluster).

How this works: every change is the operations' own, the one the CLI runs: `MutationChange`
(topics, offsets, cleanup), `SwitchChange` (switchover and failover, whose timeline steps
are reported as they happen), `ResendChange` and `DiscardChange` (dead letters, through the
ledger), `ConsumeDirectlyChange` and `ResendToGroupChange` (one message, from its detail).
The change dialog is the runner's front-end.
"""

from __future__ import annotations

from mqadmin.operations.change import MutationChange
from mqadmin.operations.dlq.discard import DiscardChange
from mqadmin.operations.dlq.resend import ResendChange
from mqadmin.operations.ha.replication import SwitchChange
from mqadmin.operations.messages.redeliver import ConsumeDirectlyChange, ResendToGroupChange

__all__ = ["ConsumeDirectlyChange", "DiscardChange", "MutationChange", "ResendChange",
           "ResendToGroupChange", "SwitchChange"]
