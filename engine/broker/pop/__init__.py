"""5.x POP consumption served by the broker: checkpoints, acks, revive, FIFO order info."""
