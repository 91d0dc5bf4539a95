"""Client core: the client instance, routes, broker and name-server requests, errors, messages."""
