"""Timer messages (RocketMQ 5 "delay at any time"): timer log, wheel, checkpoint, service.

See docs/timers.md for the design: layout, recovery and exactly-once delivery after a crash.
"""
