"""How pytest-xdist hands the tests to its workers under ``--dist loadgroup``: the tests of
tests/reports run on one worker, one after the other, so they share one Spark session and the
report made with it (tests/reports/conftest.py); every other test goes to whichever worker is
free.

pytest-xdist's own groups (the ``xdist_group`` mark) name the group in the test's node id,
which pytest 9.2 no longer lets a plugin change: the group is therefore read from the path.
"""

from __future__ import annotations

from xdist.scheduler import LoadGroupScheduling

#: Folders whose tests run on one worker; the largest group is handed out first.
ONE_WORKER = ("tests/reports/",)


class FoldersOnOneWorker(LoadGroupScheduling):
    """``--dist loadgroup`` with each folder of `ONE_WORKER` as one group."""

    def _split_scope(self, nodeid: str) -> str:
        for folder in ONE_WORKER:
            if nodeid.startswith(folder):
                return folder
        return super()._split_scope(nodeid)
