"""The disk use a broker reports and cleans up by: Apache's way of counting it (used over
used plus usable, rounded up to a percent), the same as ``df``'s Use%."""

from __future__ import annotations

import os
from pathlib import Path

from engine.store.cleanup import default_disk_usage


def test_disk_usage_counts_as_apache_and_df_do(tmp_path: Path) -> None:
    st = os.statvfs(tmp_path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    usable = st.f_bavail * st.f_frsize
    expected = -(-used * 100 // (used + usable)) / 100
    assert default_disk_usage(str(tmp_path)) == expected
    assert default_disk_usage(str(tmp_path / "absent")) == 0.0
