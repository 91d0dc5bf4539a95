"""The broker's Prometheus metrics (5.x `metricsExporterType=PROM`): collector and /metrics server.

Imported only when metrics are on, so a broker with DISABLE never loads prometheus_client.
"""
