"""mqadmin's operations: reads and mutations as async functions returning rows, no UI."""
