"""Admin calls: the cluster-wide `MQAdmin` and `BrokerAdmin`'s per-broker call families."""
