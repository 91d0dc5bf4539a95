"""The name server: route tables, KV config, request handlers and the `mqnamesrv` process."""
