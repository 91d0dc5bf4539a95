"""Our own HTTP/2 gRPC front of the proxy: the sans-IO connection and the gRPC calls on it."""
