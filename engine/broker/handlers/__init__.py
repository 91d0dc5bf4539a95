"""Request handlers of the broker, one module per request family (see `engine.broker.router`)."""
