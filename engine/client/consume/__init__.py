"""Consumers: push, lite pull and POP consumers, rebalance, offset stores, idempotent consuming."""
