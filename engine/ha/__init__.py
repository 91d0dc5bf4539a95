"""HA: master/slave replication and role switching."""
