"""Broker handlers: the broker's settings, runtime figures and statistics.

How this works: GET_BROKER_CONFIG prints BrokerConfig then MessageStoreConfig as ``key=value``
lines.  UPDATE_BROKER_CONFIG validates every known key first (a bad value changes nothing),
then replaces the frozen BrokerConfig, updates the store config in place, and rewrites the
changed keys in the broker's config file (its other lines and comments are kept).  The runtime
table has the keys of 4.9.7's `prepareRuntimeInfo` plus the store's `getRuntimeInfo`; figures
this engine does not measure (thread-pool queues, latency buckets) keep Java's idle values.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import os

from engine.broker.config import PROTECTED_KEYS, BrokerConfig
from engine.broker.handlers.admin_consumer import consumed_topics, group_tps, topic_offsets
from engine.broker.handlers.admin_timer import timer_runtime_info
from engine.broker.handlers.admin_topic import body
from engine.broker.state import BrokerState
from engine.broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    STORE_GET_FOUND,
    STORE_GET_MISS,
    TOPIC_PUT_SIZE,
    WINDOWS_S,
)
from engine.common import config as configlib
from engine.common import properties
from engine.protocol import fastjson
from engine.protocol.body.admin import (
    BrokerStatsData,
    BrokerStatsItem,
    ConsumeStats,
    ConsumeStatsList,
)
from engine.protocol.body.consume_stats_json import encode_consume_stats_list
from engine.protocol.body.route import KVTable
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand
from engine.protocol.header.broker import (
    GetConsumeStatsInBrokerHeader,
    ViewBrokerStatsDataRequestHeader,
)
from engine.protocol.version import CURRENT_VERSION, version_desc
from engine.protocol.wire import from_ext, to_json
from engine.remoting.router import RequestContext, Router
from engine.store.errors import StoreConfigError
from engine.store.record_scan import SCHEDULE_TOPIC

router = Router()
log = logging.getLogger("engine.broker")

Ctx = RequestContext[BrokerState]

# 4.9.7 BrokerConfig thread-pool queue capacities (this engine has no such queues).
SEND_QUEUE_CAPACITY = 10_000
PULL_QUEUE_CAPACITY = 100_000
QUERY_QUEUE_CAPACITY = 20_000
END_TRANSACTION_QUEUE_CAPACITY = 100_000
TRANSIENT_POOL_DISABLED = 2**31 - 1  # `availableBufferNums()` without transientStorePool
LATENCY_BUCKETS = ("<=0ms", "0~10ms", "10~50ms", "50~100ms", "100~200ms", "200~500ms",
                   "500ms~1s", "1~2s", "2~3s", "3~4s", "4~5s", "5~10s", "10s~")
STATS_WINDOWS_S = (60, 3600, 86_400)  # statsMinute, statsHour, statsDay


# ---------------------------------------------------------------------------- settings


def config_items(state: BrokerState) -> list[tuple[str, str]]:
    """Every setting as RocketMQ names it; unset optionals are left out, as Java does."""
    items = [(k, v) for k, v in configlib.items(state.config) if v is not None]
    return items + list(state.store_config.to_properties().items())


@router.handles(RequestCode.GET_BROKER_CONFIG)
def get_broker_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    text = properties.dumps(config_items(ctx.state), escape=False)
    version = fastjson.dumps(to_json(ctx.state.config_version))
    return cmd.response(ext_fields={"version": version}, body=text.encode())


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigUpdate:
    broker: BrokerConfig
    store: dict[str, str]  # store keys to apply
    applied: dict[str, str]  # every key applied (broker and store), as sent
    ignored: list[str]  # keys neither config knows


def plan_update(state: BrokerState, props: dict[str, str]) -> ConfigUpdate:
    """Check every value before anything changes.

    Raises:
        ConfigError / StoreConfigError: a known key holds a value of the wrong type.
    """
    broker_keys = set(configlib.keys(BrokerConfig))
    broker_props = {k: v for k, v in props.items() if k in broker_keys}
    broker, _ = configlib.load(BrokerConfig, broker_props, base=state.config)
    rest = {k: v for k, v in props.items() if k not in broker_keys}
    unknown = dataclasses.replace(state.store_config).update(rest)
    store = {k: v for k, v in rest.items() if k not in unknown}
    return ConfigUpdate(broker, store, {**broker_props, **store}, unknown)


def merge_properties(text: str, changes: dict[str, str]) -> str:
    """`text` (a broker.conf) with the lines of the changed keys rewritten or appended."""
    lines = text.splitlines()
    out: list[str] = []
    written: set[str] = set()
    i = 0
    while i < len(lines):
        j = i
        while j + 1 < len(lines) and _continues(lines[j]):
            j += 1
        block = lines[i:j + 1]
        i = j + 1
        key = _key_of("\n".join(block))
        if key not in changes:
            out.extend(block)
        elif key not in written:  # a repeated key is dropped: its last value would win
            out.append(properties.dumps([(key, changes[key])]).rstrip("\n"))
            written.add(key)
    out.extend(properties.dumps([(k, v)]).rstrip("\n") for k, v in changes.items()
               if k not in written)
    return "\n".join(out) + "\n"


def _continues(line: str) -> bool:
    stripped = line.lstrip(" \t\f")
    if not stripped or stripped[0] in "#!":
        return False
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _key_of(block: str) -> str | None:
    try:
        return next(iter(properties.loads(block)), None)
    except properties.PropertiesError:
        return None


def write_config_changes(path: str, changes: dict[str, str]) -> None:
    """Rewrite `path` atomically with `changes` merged in (blocking: run it in a thread)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        text = ""
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(merge_properties(text, changes))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def apply_update(state: BrokerState, update: ConfigUpdate) -> bool:
    """Adopt `update`; True when the broker's permission changed (name servers must learn
    it: the topics' data version moves on, so they take the next registration)."""
    permission_changed = update.broker.broker_permission != state.config.broker_permission
    state.replace_config(update.broker)
    state.store_config.update(update.store)
    state.config_version = state.config_version.next(state.clock())
    if permission_changed:
        state.topics.mark_changed()
    return permission_changed


@router.handles(RequestCode.UPDATE_BROKER_CONFIG)
async def update_broker_config(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    log.info("updateBrokerConfig called by %s", ctx.connection.remote_addr)
    if not cmd.body:
        return cmd.response()
    try:
        props = properties.loads(cmd.body.decode("utf-8", errors="replace"))
    except properties.PropertiesError as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}")
    protected = sorted(PROTECTED_KEYS & props.keys())
    if protected:
        return cmd.response(ResponseCode.NO_PERMISSION, (
            f"Can not update {', '.join(protected)} at run time; change it in the broker's "
            "config file and restart the broker"))
    st = ctx.state
    try:
        update = plan_update(st, props)
    except (configlib.ConfigError, StoreConfigError) as exc:
        return cmd.response(ResponseCode.SYSTEM_ERROR, f"{exc}; nothing was changed")
    permission_changed = apply_update(st, update)
    log.info("updateBrokerConfig applied %s (ignored unknown keys: %s)", update.applied,
             update.ignored)
    if permission_changed and st.register_now is not None:
        await st.register_now()  # answered once the name servers have it, as in Apache
    remarks = []
    if update.ignored:
        remarks.append(f"unknown keys ignored: {', '.join(update.ignored)}")
    if st.config_file and update.applied:
        try:
            await asyncio.to_thread(write_config_changes, st.config_file, update.applied)
        except OSError as exc:
            log.error("persisting the broker config to %s failed: %s", st.config_file, exc)
            remarks.append(f"applied, but writing {st.config_file} failed: {exc}")
    return cmd.response(remark="; ".join(remarks) or None)


# ---------------------------------------------------------------------------- runtime info


def human_bytes(n: int) -> str:
    """`MixAll.humanReadableByteCount(n, false)`: 1023 B, 1.0 KiB, 2.5 GiB."""
    if n < 1024:
        return f"{n} B"
    exp = int(math.log(n) / math.log(1024))
    return f"{n / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def java_double(value: float) -> str:
    """`String.valueOf(double)` for the values printed here (shortest repr, e.g. 0.0)."""
    return repr(float(value))


def tps_windows(state: BrokerState, *names: str) -> str:
    """TPS over 10 s, 60 s and 600 s (summed over `names`), space separated."""
    return " ".join(f"{sum(state.stats.tps(n, '', w) for n in names):.2f}" for w in WINDOWS_S)


def run_time(ms: int) -> str:
    """`StoreStatsService.getFormatRuntime`."""
    days, rest = divmod(ms, 86_400_000)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"[ {days:,} days, {hours:,} hours, {minutes:,} minutes, {rest // 1000:,} seconds ]"


def disk_ratio(state: BrokerState, path: str) -> float:
    """Used fraction of the partition holding `path`; -1 when the path does not exist."""
    if not os.path.exists(path):
        return -1.0
    return state.store.cleanup.disk_usage(path)


def store_runtime_info(state: BrokerState, delay: dict[int, int]) -> dict[str, str]:
    """`DefaultMessageStore.getRuntimeInfo`."""
    stats, store, cfg = state.stats, state.store, state.store_config
    put_times = stats.total(BROKER_PUT_NUMS) or 1  # Java shows 1 before the first put
    put_size = stats.sum_totals(TOPIC_PUT_SIZE)
    cl_dir = cfg.commit_log_dir
    cl_ratio = disk_ratio(state, cl_dir)
    info = {
        "bootTimestamp": str(state.boot_timestamp),
        "runtime": run_time(state.clock() - state.boot_timestamp),
        "putMessageEntireTimeMax": "0",
        "putMessageTimesTotal": str(put_times),
        "putMessageSizeTotal": str(put_size),
        "putMessageDistributeTime": "".join(f"[{b}]:0 " for b in LATENCY_BUCKETS),
        "putMessageAverageSize": java_double(put_size / put_times),
        "dispatchMaxBuffer": "0",
        "getMessageEntireTimeMax": "0",
        "putTps": tps_windows(state, BROKER_PUT_NUMS),
        "getFoundTps": tps_windows(state, STORE_GET_FOUND),
        "getMissTps": tps_windows(state, STORE_GET_MISS),
        "getTotalTps": tps_windows(state, STORE_GET_FOUND, STORE_GET_MISS),
        "getTransferedTps": tps_windows(state, BROKER_GET_NUMS),
        "putLatency99": "0.00",
        "putLatency999": "0.00",
        "putMessageFailedTimes": "0",
        f"commitLogDiskRatio_{cl_dir}": java_double(cl_ratio),
        "commitLogDiskRatio": java_double(cl_ratio),
        "consumeQueueDiskRatio": java_double(disk_ratio(state, cfg.consume_queue_dir)),
        "commitLogMinOffset": str(store.get_min_phy_offset()),
        "commitLogMaxOffset": str(store.get_max_phy_offset()),
    }
    for level, offset in sorted(delay.items()):
        high = store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
        info[f"scheduleMessageOffset_{level}"] = f"{offset},{high}"
    return info


def disk_capacity(path: str) -> str | None:
    """"Total : X, Free : Y." of the partition holding the store (Java's File totals)."""
    try:
        vfs = os.statvfs(path)
    except OSError:
        return None
    total, free = vfs.f_blocks * vfs.f_frsize, vfs.f_bfree * vfs.f_frsize
    return f"Total : {human_bytes(total)}, Free : {human_bytes(free)}."


def broker_runtime_info(state: BrokerState) -> dict[str, str]:
    """`AdminBrokerProcessor.prepareRuntimeInfo` without the store part."""
    stats, store = state.stats, state.store
    max_phy = store.get_max_phy_offset()
    info = {
        "brokerVersionDesc": version_desc(CURRENT_VERSION),
        "brokerVersion": str(CURRENT_VERSION),
        "msgPutTotalYesterdayMorning": str(stats.yesterday_morning[BROKER_PUT_NUMS]),
        "msgPutTotalTodayMorning": str(stats.today_morning[BROKER_PUT_NUMS]),
        "msgPutTotalTodayNow": str(stats.total(BROKER_PUT_NUMS)),
        "msgGetTotalYesterdayMorning": str(stats.yesterday_morning[BROKER_GET_NUMS]),
        "msgGetTotalTodayMorning": str(stats.today_morning[BROKER_GET_NUMS]),
        "msgGetTotalTodayNow": str(stats.total(BROKER_GET_NUMS)),
        "sendThreadPoolQueueSize": "0",
        "sendThreadPoolQueueCapacity": str(SEND_QUEUE_CAPACITY),
        "pullThreadPoolQueueSize": "0",
        "pullThreadPoolQueueCapacity": str(PULL_QUEUE_CAPACITY),
        "queryThreadPoolQueueSize": "0",
        "queryThreadPoolQueueCapacity": str(QUERY_QUEUE_CAPACITY),
        "EndTransactionQueueSize": "0",
        "EndTransactionThreadPoolQueueCapacity": str(END_TRANSACTION_QUEUE_CAPACITY),
        "dispatchBehindBytes": str(max(max_phy - store.dispatcher.reput_from_offset, 0)),
        "pageCacheLockTimeMills": "0",
        "sendThreadPoolQueueHeadWaitTimeMills": "0",
        "pullThreadPoolQueueHeadWaitTimeMills": "0",
        "queryThreadPoolQueueHeadWaitTimeMills": "0",
        "earliestMessageTimeStamp": str(store.get_earliest_message_time()),
        "startAcceptSendRequestTimeStamp": str(state.config.start_accept_send_request_time_stamp),
        "remainTransientStoreBufferNumbs": str(TRANSIENT_POOL_DISABLED),
        "remainHowManyDataToFlush": human_bytes(max(max_phy - store.get_flushed_offset(), 0)),
    }
    capacity = disk_capacity(state.store_config.store_path_root_dir)
    if capacity is not None:
        info["commitLogDirCapacity"] = capacity
    return info


@router.handles(RequestCode.GET_BROKER_RUNTIME_INFO)
def get_broker_runtime_info(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    st = ctx.state
    table = store_runtime_info(st, st.schedule.offsets) | broker_runtime_info(st)
    table |= timer_runtime_info(st)
    return cmd.response(body=body(KVTable(table)))


# ---------------------------------------------------------------------------- statistics


@router.handles(RequestCode.VIEW_BROKER_STATS_DATA)
def view_broker_stats_data(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    header = from_ext(ViewBrokerStatsDataRequestHeader, cmd.ext_fields)
    st = ctx.state
    key = header.stats_key
    if header.stats_name in (BROKER_PUT_NUMS, BROKER_GET_NUMS) and (
            key == st.config.broker_cluster_name):
        key = ""  # Java keys the broker-wide items by cluster name
    windows = [st.stats.window(header.stats_name, key, w) for w in STATS_WINDOWS_S]
    items = [BrokerStatsItem(*w) for w in windows if w is not None]
    if len(items) != len(STATS_WINDOWS_S):
        return cmd.response(ResponseCode.SYSTEM_ERROR,
                            f"The stats <{header.stats_name}> <{header.stats_key}> not exist")
    return cmd.response(body=body(BrokerStatsData(*items)))


@router.handles(RequestCode.GET_BROKER_CONSUME_STATS)
def get_broker_consume_stats(ctx: Ctx, cmd: RemotingCommand) -> RemotingCommand:
    order_only = from_ext(GetConsumeStatsInBrokerHeader, cmd.ext_fields).is_order
    st = ctx.state
    groups: list[dict[str, list[ConsumeStats]]] = []
    total_diff = 0
    for group in list(st.groups.table):
        per_topic = []
        for topic, config in consumed_topics(st, group, st.offsets.topics_of_group(group)):
            if order_only and not config.order:
                continue
            stats = ConsumeStats(topic_offsets(st, group, topic, config.write_queue_nums),
                                 group_tps(st, group, topic))
            total_diff += stats.compute_total_diff()
            per_topic.append(stats)
        groups.append({group: per_topic})
    return cmd.response(body=encode_consume_stats_list(
        ConsumeStatsList(groups, st.config.broker_addr, total_diff)))
