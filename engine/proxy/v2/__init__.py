"""Code generated from the vendored apache/rocketmq/v2 protos (see engine/proxy/proto)."""
