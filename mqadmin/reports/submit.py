"""Entry file for ``spark-submit`` (absolute imports, so it runs as a plain script next to
the bundle zip): ``spark-submit --py-files mqadmin-reports.zip submit.py --input ...``."""

from __future__ import annotations

import sys

from mqadmin.reports.job import main

if __name__ == "__main__":
    sys.exit(main())
