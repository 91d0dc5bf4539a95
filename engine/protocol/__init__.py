"""RocketMQ's remoting protocol, sans-IO: bytes in, values out; values in, bytes out."""
