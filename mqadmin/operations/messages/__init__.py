"""Messages: finding them by id or key, reading queues, sending, redelivery, traces."""
