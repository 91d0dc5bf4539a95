"""Consumer-lag reports computed with PySpark over the lag monitor's Parquet history.

Everything in this package imports only the standard library, pyspark, pyarrow and
matplotlib (never ``engine`` nor the rest of ``mqadmin``), so ``spark-submit`` can ship it
to a cluster alone: see ``bundle.py`` and docs/reports.md.
"""
