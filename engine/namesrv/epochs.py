"""Epoch fencing: which broker may register as the master (id 0) of a broker name.

How this works: a broker of this engine sends its epoch and epoch history with each
registration.  Per broker name the table keeps the highest epoch a master registered with,
that master's address, and the merged history.  A master registration is accepted when its
epoch is higher than the recorded one (a promotion), or equal from the same address (a
re-registration), or equal from another address while the recorded master is gone (a
replaced host).  Anything else is refused (`fenced`): a master returning with a lower epoch
after a failover, or a second master of the same epoch.  The verdict tells a refused master
where its log diverged — the smallest start offset of the epochs after its own — and
which slave id to take.  Registrations without an epoch (Apache brokers) are not fenced.
The table lives in memory: a restarted name server learns epochs again from registrations.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from engine.protocol.body.route import MASTER_ID
from engine.protocol.header.ha import EpochHistory, truncate_offset_after


@dataclass(slots=True)
class _Owner:
    epoch: int
    addr: str
    history: EpochHistory = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the name server answers about epochs; `fenced` refuses a master registration."""

    epoch: int
    history: EpochHistory
    fenced: bool = False
    master_addr: str | None = None  # the accepted master (for a fenced broker)
    truncate_offset: int | None = None
    slave_id: int | None = None


class EpochTable:
    def __init__(self) -> None:
        self.owners: dict[str, _Owner] = {}

    def check(self, name: str, addr: str, broker_id: int, epoch: int,
              history: EpochHistory, used_ids: Iterable[int],
              is_live: Callable[[str], bool]) -> Verdict:
        """Record what a registration says and decide whether it may be the master.

        Args:
            used_ids: broker ids other addresses hold under `name` (for a slave id).
            is_live: whether an address is registered and alive now.
        """
        owner = self.owners.get(name)
        if owner is None:
            owner = self.owners[name] = _Owner(epoch, addr if broker_id == MASTER_ID else "")
        owner.history.update(history)
        if broker_id != MASTER_ID:
            return Verdict(owner.epoch, dict(owner.history))
        accepted = (epoch > owner.epoch
                    or (epoch == owner.epoch and (addr == owner.addr or not owner.addr
                                                  or not is_live(owner.addr))))
        if accepted:
            owner.epoch, owner.addr = epoch, addr
            return Verdict(epoch, dict(owner.history))
        taken = set(used_ids)
        slave_id = next(i for i in range(1, len(taken) + 2) if i not in taken)
        return Verdict(owner.epoch, dict(owner.history), fenced=True, master_addr=owner.addr,
                       truncate_offset=truncate_offset_after(owner.history, epoch),
                       slave_id=slave_id)
