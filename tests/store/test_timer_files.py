"""The timer files on tiny segments: timer-log units across segment ends, the wheel's slots,
cutting the wheel back to a checkpointed log end, the put-time transform's rounding and
refusals, and recognising deliveries already in a commit log."""

from __future__ import annotations

from pathlib import Path

from engine.protocol.message import BrokerMessage, decode_record, string_to_properties
from engine.store.config import MessageStoreConfig
from engine.store.message_store import MessageStore
from engine.store.record_scan import TIMER_TOPIC
from engine.store.results import PutMessageStatus
from engine.store.timer.checkpoint import TimerCheckpoint, read_checkpoint, write_checkpoint
from engine.store.timer.recovery import cut_wheel, delivered_since
from engine.store.timer.timer_log import UNIT_SIZE, TimerLog
from engine.store.timer.transform import (
    delivery,
    effective_precision,
    timer_identity,
    to_timer,
)
from engine.store.timer.wheel import Slot, TimerWheel

NOW = 1_700_000_000_000
SEGMENT = 4 * UNIT_SIZE + 20  # four units, then a blank


def append(log: TimerLog, wheel: TimerWheel, deliver_ms: int, offset_py: int) -> int:
    slot = wheel.get(deliver_ms)
    pos = log.append(slot.last, NOW, deliver_ms, offset_py, 100)
    wheel.put(deliver_ms, Slot(pos if slot.first < 0 else slot.first, pos, slot.num + 1))
    return pos


def test_units_roll_over_segments_and_chain_per_slot(tmp_path: Path) -> None:
    log = TimerLog(str(tmp_path / "timerlog"), SEGMENT)
    wheel = TimerWheel(str(tmp_path / "timerwheel"), 1000)
    positions = [append(log, wheel, NOW + 5_000 + (i % 2) * 1000, i) for i in range(10)]
    assert positions[4] == SEGMENT  # the fifth unit starts the second segment
    assert len(log.mfq.files) == 3
    slot = wheel.get(NOW + 5_000)
    assert slot.num == 5
    chain, pos = [], slot.last
    while pos >= 0:
        unit = log.read(pos)
        assert unit is not None
        chain.append(unit.offset_py)
        pos = unit.prev
    assert chain == [8, 6, 4, 2, 0]
    assert wheel.get(NOW + 5_000 + 2 * wheel.span_ms) == Slot(-1, -1, 0)  # another lap
    assert log.count_from(NOW + 6_000, 1000) == 5
    assert log.count_from(NOW, 1000) == 10
    wheel.close()
    log.close()


def test_cut_wheel_back_to_a_checkpointed_end(tmp_path: Path) -> None:
    log = TimerLog(str(tmp_path / "timerlog"), SEGMENT)
    wheel = TimerWheel(str(tmp_path / "timerwheel"), 1000)
    for i in range(3):
        append(log, wheel, NOW + 1_000, i)
    end = log.end()
    for i in range(3, 6):
        append(log, wheel, NOW + 1_000 if i == 3 else NOW + 9_000, i)
    assert cut_wheel(wheel, log, end) == 3
    log.recover(end)
    assert log.end() == end
    assert wheel.get(NOW + 1_000).num == 3
    assert wheel.get(NOW + 9_000) == Slot(-1, -1, 0)
    assert log.units_from(0)[-1].offset_py == 2
    wheel.close()
    log.close()


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    path = str(tmp_path / "config" / "timercheck")
    assert read_checkpoint(path) is None
    cp = TimerCheckpoint(NOW, 520, 10, 10, 0, NOW, 0, 4096)
    write_checkpoint(path, cp)
    assert read_checkpoint(path) == cp
    assert Path(path).stat().st_size == 4096
    assert len(cp.encode()) == 64 and cp.encode()[:8] == NOW.to_bytes(8, "big")


def message(**props: str) -> BrokerMessage:
    text = "\x02".join(f"{k}\x01{v}" for k, v in props.items())
    return BrokerMessage("Orders", b"body", queue_id=2, properties=text)


def test_transform_rounds_and_refuses_as_apache() -> None:
    assert [effective_precision(p) for p in (50, 100, 499, 500, 999, 1000, 5000)] == [
        100, 100, 200, 500, 500, 1000, 1000]
    parked = to_timer(message(TIMER_DELIVER_MS=str(NOW + 5_300)), NOW, 1000, 259_200, True)
    assert isinstance(parked, BrokerMessage) and parked.topic == TIMER_TOPIC
    props = string_to_properties(parked.properties)
    assert (props["TIMER_OUT_MS"], props["REAL_TOPIC"], props["REAL_QID"]) == (
        str(NOW + 5_000), "Orders", "2")
    exact = to_timer(message(TIMER_DELAY_SEC="5"), NOW, 1000, 259_200, True)
    assert isinstance(exact, BrokerMessage)
    assert string_to_properties(exact.properties)["TIMER_OUT_MS"] == str(NOW + 4_000)
    ms = to_timer(message(TIMER_DELAY_MS="250"), NOW, 100, 259_200, True)
    assert isinstance(ms, BrokerMessage)
    assert string_to_properties(ms.properties)["TIMER_OUT_MS"] == str(NOW + 200)
    past = message(TIMER_DELIVER_MS=str(NOW))
    assert to_timer(past, NOW, 1000, 259_200, True) is past
    assert to_timer(message(TIMER_DELAY_SEC="x"), NOW, 1000, 10, True) is (
        PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL)
    assert to_timer(message(TIMER_DELAY_SEC="11"), NOW, 1000, 10, True) is (
        PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL)
    assert to_timer(message(TIMER_DELAY_SEC="1"), NOW, 1000, 10, False) is (
        PutMessageStatus.WHEEL_TIMER_NOT_ENABLE)
    assert to_timer(message(TIMER_DEL_UNIQKEY="k", TIMER_DELIVER_MS="1"), NOW, 1000, 10,
                    True) is PutMessageStatus.WHEEL_TIMER_MSG_ILLEGAL
    delivered_once = message(TIMER_OUT_MS="1", TIMER_DELAY_SEC="5")
    assert to_timer(delivered_once, NOW, 1000, 10, True) is delivered_once
    leveled = to_timer(message(DELAY="2", TIMER_DELAY_SEC="5"), NOW, 1000, 10, True)
    assert isinstance(leveled, BrokerMessage) and "TIMER_" not in leveled.properties


def test_deliveries_in_the_commit_log_are_recognised(tmp_path: Path) -> None:
    cfg = MessageStoreConfig(store_path_root_dir=str(tmp_path / "store"),
                             mapped_file_size_commit_log=64 * 1024,
                             mapped_file_size_consume_queue=20 * 100)
    store = MessageStore(cfg, clock=lambda: NOW)
    store.load()
    try:
        parked = store.append_message(message(TIMER_DELAY_SEC="5", UNIQ_KEY="U1"))
        assert parked.status is PutMessageStatus.PUT_OK
        start = store.get_max_phy_offset()
        data = store.look_message_by_offset(parked.wrote_offset, parked.wrote_bytes)
        assert data is not None
        record = decode_record(data)
        out = delivery(record, NOW, NOW + 5_000)
        assert out is not None and out.topic == "Orders" and out.queue_id == 2
        for _ in range(2):
            assert store.append_message(out).status is PutMessageStatus.PUT_OK
        store.append_message(message(plain="1"))
        found = delivered_since(store.read_commit_log, start, store.get_max_phy_offset())
        ident = timer_identity(record)
        assert ident is not None and found == {ident: 2}
        assert delivered_since(store.read_commit_log, 0, start) == {}
    finally:
        store.close()
