"""The lag monitor: sampling, the recent window, verdicts, history, alerts and metrics."""
