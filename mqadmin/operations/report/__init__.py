"""Lag reports: running the Spark job for the CLI and the monitor, and their schedules."""
