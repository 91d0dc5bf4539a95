"""Describes the machine a benchmark ran on, and summarises repeated measurements."""

from __future__ import annotations

import os
import platform
import statistics
import sys


def machine() -> str:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import uvloop

        loop = f"uvloop {uvloop.__version__}"
    except ImportError:
        loop = "asyncio"
    return (f"{platform.platform()} | {os.cpu_count()} cpus ({cpu}) | "
            f"Python {sys.version.split()[0]} | {loop}")


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary(label: str, rates: list[float], unit: str, target: float | None = None) -> str:
    med = statistics.median(rates)
    line = (f"{label}: median {med:,.0f} {unit} (min {min(rates):,.0f}, max {max(rates):,.0f}, "
            f"{len(rates)} runs)")
    if target is not None:
        line += f"  target >= {target:,.0f}: {'met' if med >= target else 'MISSED'}"
    return line
