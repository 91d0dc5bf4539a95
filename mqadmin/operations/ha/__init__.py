"""Replication: HA status (5.x and derived for 4.x), switchover and failover."""
