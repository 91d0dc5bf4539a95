"""The broker: send, pull, offsets, clients, admin; on top of `engine.store`."""
