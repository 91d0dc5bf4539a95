"""Message trace: the hooks that record sends and consumption, and the dispatcher of records."""
