"""asyncio transport for the remoting protocol: connections, a server, a pooled client."""
