"""Benchmarks: run one with `python -m benchmarks.<name>`; each prints medians and percentiles."""
