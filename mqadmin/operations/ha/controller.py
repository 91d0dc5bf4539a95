"""Controller operations (5.3 controller mode): read and change a controller's replica info.

How this works: a controller is reached at its own address (`-a`, `;`-separated for several:
Apache's controllerAddress), not through the name servers; each function opens one
`RemotingClient`, asks, and returns rows with Apache's names.  Reads of replica info go to
the leader: a follower's CONTROLLER_NOT_LEADER sends the request on to the next address.
`getBrokerEpoch` asks the brokers themselves (GET_BROKER_EPOCH_CACHE), found through the
name servers' cluster info.  For the dashboard, `controller_sets` finds each set's controller
in its master's settings (enableControllerMode, controllerAddr).  The three changes
(`ElectMasterChange`, `CleanBrokerMetadataChange`, `UpdateControllerConfigChange`) go
through the change runner, from the CLI and (electMaster) the dashboard.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.client.admin.cluster import MQAdmin
from engine.client.core.errors import ClientError
from engine.common.properties import PropertiesError, loads
from engine.protocol import fastjson
from engine.protocol.body.controller import (
    BrokerReplicasInfo,
    ElectMasterResponseBody,
    EpochEntryCache,
    encode_broker_names,
)
from engine.protocol.codes import RequestCode, ResponseCode
from engine.protocol.command import RemotingCommand, request
from engine.protocol.errors import ProtocolError
from engine.protocol.header.controller import (
    CleanControllerBrokerDataRequestHeader,
    ElectMasterRequestHeader,
    GetMetaDataResponseHeader,
)
from engine.protocol.wire import from_ext, from_json, to_ext
from engine.remoting.client import RemotingClient
from engine.remoting.errors import RemotingError
from mqadmin.config import Endpoint
from mqadmin.exit_codes import (
    CliError,
    ExitCode,
    NotVerified,
    TargetNotFound,
    Unavailable,
    UsageProblem,
)
from mqadmin.operations.change import Outcome, Planned, Progress

Row = dict[str, Any]
TIMEOUT_S = 5.0

META_COLUMNS = ("group", "leaderId", "leaderAddress", "isLeader", "peer")
SYNC_COLUMNS = ("brokerName", "masterBrokerId", "masterAddr", "masterEpoch",
                "syncStateSetEpoch", "syncStateSetNums", "brokerId", "brokerAddr", "inSync",
                "alive")
ELECT_COLUMNS = ("clusterName", "brokerName", "masterBrokerId", "masterAddr", "masterEpoch",
                 "syncStateSetEpoch", "brokerId", "brokerAddr")
EPOCH_COLUMNS = ("clusterName", "brokerName", "brokerAddr", "brokerId", "epoch",
                 "startOffset", "endOffset", "maxOffset")
CONFIG_COLUMNS = ("controller", "key", "value")


class ControllerRefused(CliError):
    """The controller (or broker) answered with an error code."""

    code = ExitCode.REJECTED

    def __init__(self, what: str, answer: RemotingCommand) -> None:
        self.response_code = answer.code
        try:
            name = ResponseCode(answer.code).name
        except ValueError:
            name = str(answer.code)
        super().__init__(f"{what}: {name} ({answer.code}): {answer.remark or 'no remark'}. "
                         "Read the controller's view with `mqadmin getSyncStateSet -a ...`.")


def addresses(text: str) -> list[str]:
    """Raises:
    UsageProblem: no address."""
    out = [a.strip() for a in text.split(";") if a.strip()]
    if not out:
        raise UsageProblem("-a: give the controller address (host:port; several with ';')")
    return out


async def _ask(client: RemotingClient, addr: str, cmd: RemotingCommand) -> RemotingCommand:
    try:
        return await client.invoke(addr, cmd, TIMEOUT_S)
    except (RemotingError, OSError) as exc:
        raise Unavailable(f"controller {addr} did not answer ({exc}); check -a and that the "
                          "controller runs") from None


async def call_leader(addrs: Sequence[str], code: int, header: Any = None,
                      body: bytes | None = None) -> RemotingCommand:
    """The first answer that is not CONTROLLER_NOT_LEADER (the last one if all are).

    Raises:
        Unavailable: no address answered.
    """
    client = RemotingClient()
    try:
        answer: RemotingCommand | None = None
        failure: Unavailable | None = None
        for addr in addrs:
            try:
                answer = await _ask(client, addr, request(
                    code, to_ext(header) if header is not None else None, body))
            except Unavailable as exc:
                failure = exc
                continue
            if answer.code != ResponseCode.CONTROLLER_NOT_LEADER:
                return answer
        if answer is None:
            assert failure is not None
            raise failure
        return answer
    finally:
        await client.close()


def _ok(what: str, answer: RemotingCommand) -> RemotingCommand:
    if answer.code != ResponseCode.SUCCESS:
        raise ControllerRefused(what, answer)
    return answer


async def metadata(addrs: Sequence[str]) -> list[Row]:
    """getControllerMetaData: one row per peer (the first address that answers)."""
    answer = _ok("getControllerMetaData", await call_leader(
        addrs[:1], RequestCode.CONTROLLER_GET_METADATA_INFO))
    meta = from_ext(GetMetaDataResponseHeader, answer.ext_fields)
    peers = [p for p in (meta.peers or "").split(";") if p]
    return [{"group": meta.group, "leaderId": meta.controller_leader_id,
             "leaderAddress": meta.controller_leader_address, "isLeader": meta.is_leader,
             "peer": peer} for peer in peers or [""]]


async def sync_state_sets(addrs: Sequence[str], broker_names: Sequence[str]) -> list[Row]:
    """getSyncStateSet: one row per replica of each broker set (in-sync ones first)."""
    answer = _ok("getSyncStateSet", await call_leader(
        addrs, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
        body=encode_broker_names(list(broker_names))))
    try:
        table = from_json(BrokerReplicasInfo, fastjson.loads(answer.body or b"{}"))
    except ProtocolError as exc:
        raise CliError(f"getSyncStateSet: the controller's answer does not decode: {exc}") \
            from None
    rows: list[Row] = []
    for name, info in sorted(table.replicas_info_table.items()):
        head = {"brokerName": name, "masterBrokerId": info.master_broker_id,
                "masterAddr": info.master_address, "masterEpoch": info.master_epoch,
                "syncStateSetEpoch": info.sync_state_set_epoch,
                "syncStateSetNums": len(info.in_sync_replicas)}
        for in_sync, replicas in ((True, info.in_sync_replicas),
                                  (False, info.not_in_sync_replicas)):
            rows += [{**head, "brokerId": r.broker_id, "brokerAddr": r.broker_address,
                      "inSync": in_sync, "alive": r.alive} for r in replicas]
    return rows


async def elect_master(addrs: Sequence[str], cluster: str, broker_name: str,
                       broker_id: int, now_ms: int) -> list[Row]:
    """electMaster: make `broker_id` the master (designated election).

    Raises:
        ControllerRefused: the controller refused (not alive, not in the SyncStateSet, ...).
    """
    answer = _ok("electMaster", await call_leader(
        addrs, RequestCode.CONTROLLER_ELECT_MASTER,
        ElectMasterRequestHeader(cluster, broker_name, broker_id, True, now_ms)))
    ext = answer.ext_fields or {}
    body = (from_json(ElectMasterResponseBody, fastjson.loads(answer.body))
            if answer.body else ElectMasterResponseBody())
    group = body.broker_member_group
    members = sorted(group.broker_addrs.items()) if group else []
    head = {"clusterName": cluster, "brokerName": broker_name,
            "masterBrokerId": _int(ext.get("masterBrokerId")),
            "masterAddr": ext.get("masterAddress"), "masterEpoch": _int(ext.get("masterEpoch")),
            "syncStateSetEpoch": _int(ext.get("syncStateSetEpoch"))}
    return [{**head, "brokerId": i, "brokerAddr": a} for i, a in members] or [head]


async def clean_broker_metadata(addrs: Sequence[str], cluster: str | None, broker_name: str,
                                ids: str | None, living: bool, now_ms: int) -> None:
    """cleanBrokerMetadata.

    Raises:
        ControllerRefused: the set is alive (without -l) or unknown.
    """
    _ok("cleanBrokerMetadata", await call_leader(
        addrs, RequestCode.CLEAN_BROKER_DATA,
        CleanControllerBrokerDataRequestHeader(broker_name, cluster, ids, living, now_ms)))


async def controller_config(addrs: Sequence[str]) -> list[Row]:
    """getControllerConfig: every controller's settings."""
    rows: list[Row] = []
    client = RemotingClient()
    try:
        for addr in addrs:
            answer = _ok(f"getControllerConfig {addr}", await _ask(
                client, addr, request(RequestCode.GET_CONTROLLER_CONFIG)))
            try:
                props = loads((answer.body or b"").decode("utf-8", errors="replace"))
            except PropertiesError as exc:
                raise CliError(f"getControllerConfig {addr}: not properties text: {exc}") \
                    from None
            rows += [{"controller": addr, "key": k, "value": v} for k, v in sorted(
                props.items())]
    finally:
        await client.close()
    return rows


async def update_controller_config(addrs: Sequence[str], key: str, value: str) -> None:
    """updateControllerConfig on every controller of `addrs`.

    Raises:
        ControllerRefused: a controller refused (a key of its black list: NO_PERMISSION).
    """
    client = RemotingClient()
    try:
        for addr in addrs:
            _ok(f"updateControllerConfig {addr}", await _ask(client, addr, request(
                RequestCode.UPDATE_CONTROLLER_CONFIG, body=f"{key}={value}\n".encode())))
    finally:
        await client.close()


async def broker_epochs(brokers: Sequence[tuple[str, str]]) -> list[Row]:
    """getBrokerEpoch: the epoch entries of each (broker name, address)."""
    rows: list[Row] = []
    client = RemotingClient()
    try:
        for name, addr in brokers:
            try:
                answer = await client.invoke(addr, request(RequestCode.GET_BROKER_EPOCH_CACHE),
                                             TIMEOUT_S)
            except (RemotingError, OSError) as exc:
                raise Unavailable(f"broker {addr} of {name} did not answer ({exc})") from None
            cache = from_json(EpochEntryCache, fastjson.loads(
                _ok(f"getBrokerEpoch {addr}", answer).body or b"{}"))
            head = {"clusterName": cache.cluster_name, "brokerName": cache.broker_name or name,
                    "brokerAddr": addr, "brokerId": cache.broker_id,
                    "maxOffset": cache.max_offset}
            rows += [{**head, "epoch": e.epoch, "startOffset": e.start_offset,
                      "endOffset": e.end_offset} for e in cache.epoch_list] or [head]
    finally:
        await client.close()
    return rows


def _int(text: str | None) -> int | None:
    return int(text) if text not in (None, "") else None


# ---------------------------------------------------------------------------- the dashboard

SET_COLUMNS = ("brokerName", "controller", "leader", "masterBrokerId", "masterEpoch",
               "syncStateSetEpoch", "inSync", "behind", "minInSyncReplicas", "belowMin")


async def controller_sets(admin: MQAdmin, masters: dict[str, str]) -> list[Row]:
    """One row per broker set in controller mode (`masters`: broker name -> its master's
    address): its controller's leader, the master, epochs, who is in sync and who is behind,
    and whether the set is below the master's minInSyncReplicas.  Sets whose master does not
    run in controller mode (or does not answer) have no row."""
    by_controller: dict[str, list[tuple[str, int]]] = {}
    for name, addr in sorted(masters.items()):
        try:
            config = await admin.broker.broker_config(addr)
        except ClientError:
            continue
        if config.get("enableControllerMode") != "true" or not config.get("controllerAddr"):
            continue
        need = int(config.get("minInSyncReplicas") or 1)
        by_controller.setdefault(config["controllerAddr"], []).append((name, need))
    rows: list[Row] = []
    for controller, sets in by_controller.items():
        addrs = addresses(controller)
        try:
            meta = await metadata(addrs)
            replicas = await sync_state_sets(addrs, [name for name, _ in sets])
        except CliError as exc:
            rows += [{"brokerName": name, "controller": controller,
                      "leader": f"unreachable: {exc}"} for name, _ in sets]
            continue
        leader = meta[0]["leaderAddress"] if meta else None
        for name, need in sets:
            mine = [r for r in replicas if r["brokerName"] == name]
            if not mine:
                continue
            in_sync = [r for r in mine if r["inSync"]]
            behind = [r for r in mine if not r["inSync"]]
            rows.append({
                "brokerName": name, "controller": controller, "leader": leader,
                "masterBrokerId": mine[0]["masterBrokerId"],
                "masterEpoch": mine[0]["masterEpoch"],
                "syncStateSetEpoch": mine[0]["syncStateSetEpoch"],
                "inSync": ",".join(str(r["brokerId"]) for r in in_sync),
                "behind": ",".join(f"{r['brokerId']}{'' if r['alive'] else ' (down)'}"
                                   for r in behind),
                "minInSyncReplicas": need, "belowMin": len(in_sync) < need})
    return rows


class ElectMasterChange:
    """electMaster as the change runner's `Change` (`mqadmin electMaster`, the dashboard's
    Cluster screen): the plan reads the set from its controller, applying elects and re-reads
    it.  A broker that is the master already is nothing to do."""

    def __init__(self, controller: str, cluster: str, broker_name: str, broker_id: int,
                 clock: Callable[[], int], args: dict[str, Any] | None = None) -> None:
        """`args`: what the audit log records (default: Apache's names of the arguments)."""
        self.addrs = addresses(controller)
        self.cluster, self.broker_name, self.broker_id = cluster, broker_name, broker_id
        self.clock = clock
        self.args = args if args is not None else {
            "controllerAddress": ";".join(self.addrs), "brokerId": broker_id,
            "brokerName": broker_name, "clusterName": cluster}

    async def plan(self, admin: MQAdmin, where: Endpoint, progress: Progress
                   ) -> Planned[None]:
        before = await sync_state_sets(self.addrs, [self.broker_name])
        if not before:
            raise TargetNotFound(f"the controller knows no broker set named "
                                 f"{self.broker_name}")
        rows = [{"brokerName": self.broker_name, "masterBrokerId": before[0]["masterBrokerId"],
                 "newMasterBrokerId": self.broker_id}]
        nothing = (f"broker {self.broker_id} is the master already"
                   if before[0]["masterBrokerId"] == self.broker_id else "")
        return Planned(None, "electMaster", self.broker_name, self.args, rows, tuple(rows[0]),
                       noun="controller", nothing=nothing, counted="")

    async def apply(self, admin: MQAdmin, where: Endpoint, planned: Planned[None],
                    progress: Progress) -> Outcome:
        try:
            rows = await elect_master(self.addrs, self.cluster, self.broker_name,
                                      self.broker_id, self.clock())
            after = await sync_state_sets(self.addrs, [self.broker_name])
        except CliError as exc:
            return Outcome.failed(exc)
        if not after or after[0]["masterBrokerId"] != self.broker_id:
            return Outcome(rows, ELECT_COLUMNS, "unverified", NotVerified(
                f"electMaster: {self.broker_name}'s master is not {self.broker_id} after the "
                "election; read it with getSyncStateSet"))
        return Outcome(rows, ELECT_COLUMNS)


class CleanBrokerMetadataChange:
    """cleanBrokerMetadata for the change runner: the plan is the replicas the controller
    will forget (`ids`, Apache's '1;2', or the whole set), applying cleans and re-reads the
    set to see them gone."""

    def __init__(self, controller: str, cluster: str | None, broker_name: str,
                 ids: str | None, living: bool, clock: Callable[[], int],
                 args: dict[str, Any]) -> None:
        self.addrs = addresses(controller)
        self.cluster, self.broker_name, self.ids, self.living = cluster, broker_name, ids, living
        self.wanted = {int(i) for i in (ids or "").split(";") if i.strip().isdigit()}
        self.clock = clock
        self.args = args

    def _mine(self, rows: list[Row]) -> list[Row]:
        return [r for r in rows if not self.wanted or r["brokerId"] in self.wanted]

    async def plan(self, admin: MQAdmin, where: Endpoint, progress: Progress
                   ) -> Planned[list[Row]]:
        rows = self._mine(await sync_state_sets(self.addrs, [self.broker_name]))
        if not rows:
            raise TargetNotFound(f"the controller knows no broker {self.ids or ''} of "
                                 f"{self.broker_name}; read them with getSyncStateSet")
        return Planned(rows, "cleanBrokerMetadata", self.broker_name, self.args, rows,
                       tuple(rows[0]), noun="controller", counted="")

    async def apply(self, admin: MQAdmin, where: Endpoint, planned: Planned[list[Row]],
                    progress: Progress) -> Outcome:
        columns = (*SYNC_COLUMNS, "cleaned")
        try:
            await clean_broker_metadata(self.addrs, self.cluster, self.broker_name, self.ids,
                                        self.living, self.clock())
            left = self._mine(await sync_state_sets(self.addrs, [self.broker_name]))
        except CliError as exc:
            return Outcome.failed(exc)
        gone = {r["brokerId"] for r in planned.plan} - {r["brokerId"] for r in left}
        rows = [{**r, "cleaned": r["brokerId"] in gone} for r in planned.plan]
        if left:
            return Outcome(rows, columns, "unverified", NotVerified(
                f"cleanBrokerMetadata: the controller still lists "
                f"{sorted(r['brokerId'] for r in left)} of {self.broker_name}"))
        return Outcome(rows, columns)


class UpdateControllerConfigChange:
    """updateControllerConfig for the change runner: one setting on every controller of
    `controller`, planned from what each has now (nothing to do where all have the value),
    applied to each and read back from each."""

    def __init__(self, controller: str, key: str, value: str, args: dict[str, Any]) -> None:
        self.addrs = addresses(controller)
        self.key, self.value = key, value
        self.args = args

    async def _values(self) -> dict[str, str]:
        return {r["controller"]: r["value"] for r in await controller_config(self.addrs)
                if r["key"] == self.key}

    async def plan(self, admin: MQAdmin, where: Endpoint, progress: Progress
                   ) -> Planned[None]:
        now = await self._values()
        rows = [{"controller": a, "key": self.key, "value": now.get(a), "newValue": self.value}
                for a in self.addrs]
        nothing = (f"{self.key} is {self.value} on every controller already"
                   if all(now.get(a) == self.value for a in self.addrs) else "")
        return Planned(None, "updateControllerConfig", self.key, self.args, rows,
                       tuple(rows[0]), noun="controller", nothing=nothing, counted="")

    async def apply(self, admin: MQAdmin, where: Endpoint, planned: Planned[None],
                    progress: Progress) -> Outcome:
        try:
            await update_controller_config(self.addrs, self.key, self.value)
            rows = [r for r in await controller_config(self.addrs) if r["key"] == self.key]
        except CliError as exc:
            return Outcome.failed(exc)
        wrong = [a for a in self.addrs
                 if not any(r["controller"] == a and r["value"] == self.value for r in rows)]
        if wrong:
            return Outcome(rows, CONFIG_COLUMNS, "unverified", NotVerified(
                f"updateControllerConfig: {self.key} is not {self.value} on "
                f"{', '.join(wrong)} after the update (an unknown key is ignored); check the "
                "key's name"))
        return Outcome(rows, CONFIG_COLUMNS)
