"""Timer messages, store part (RocketMQ 5 "delay at any time"): timer log, wheel, checkpoint.

`TimerMessageStore` (timer_store.py) parks timers in the wheel and delivers the due ones;
the broker part, `engine.broker.timer.TimerService`, is the task that drives it.  Timer
messages are one of delayed delivery's two mechanisms; delay levels (`DELAY`, 4.x) are the
other: `engine.store.delay_levels` and `engine.broker.delay_levels`.

See docs/timers.md for the design: layout, recovery and exactly-once delivery after a crash.
"""
