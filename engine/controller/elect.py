"""The election policy (5.3 `DefaultElectPolicy`): who becomes master of a broker set.

Candidates are the live brokers of the SyncStateSet, then (only when unclean election is
on) the live brokers of the whole set.  Among live candidates: the old master if it is one
and no other broker is preferred; the preferred broker if it is a candidate (nobody
otherwise); else the best by (highest epoch, highest max offset, lowest
`brokerElectionPriority`, lowest id).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LiveInfo:
    """What a broker's last heartbeat said about its log."""

    epoch: int = 0
    max_offset: int = 0
    election_priority: int = 0


#: broker id -> its live info, or None when the broker is not alive.
LiveLookup = Callable[[int], LiveInfo | None]


def elect(sync_state_set: Iterable[int], all_brokers: Iterable[int] | None,
          old_master: int | None, preferred: int | None, live: LiveLookup) -> int | None:
    """The new master's id, or None when no candidate is alive (or the preferred one is not).

    Args:
        all_brokers: every broker of the set, or None unless unclean election is on.
    """
    chosen = _try(sync_state_set, old_master, preferred, live)
    if chosen is None and all_brokers is not None:
        chosen = _try(all_brokers, old_master, preferred, live)
    return chosen


def _try(ids: Iterable[int], old_master: int | None, preferred: int | None,
         live: LiveLookup) -> int | None:
    alive = {i: info for i in set(ids) if (info := live(i)) is not None}
    if not alive:
        return None
    if old_master in alive and (preferred is None or preferred == old_master):
        return old_master
    if preferred is not None:
        return preferred if preferred in alive else None
    return min(alive, key=lambda i: (-alive[i].epoch, -alive[i].max_offset,
                                     alive[i].election_priority, i))
