"""``mqadmin dev up|down|status|restart``: a local cluster with demo data, for trying things out."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mqadmin import config, credentials, render
from mqadmin.commands import guarded
from mqadmin.dev import access
from mqadmin.dev import cluster as dev
from mqadmin.options import DebugOpt, OutputOpt
from mqadmin.render import OutputFormat

app = typer.Typer(help="A local name server, a broker-a master and slave, and demo traffic.",
                  no_args_is_help=True)

PROCESS_COLUMNS = ("process", "pid", "addr", "role", "brokerId", "running")
STOPPED_COLUMNS = ("process", "pid", "result")
CONTEXT = "dev"

DataDirOpt = Annotated[Path, typer.Option(
    "--data-dir", help="Where configs, stores, logs and the state file live.")]


@app.command("up")
def dev_up(
    data_dir: DataDirOpt = Path(dev.DEFAULT_DATA_DIR),
    namesrv_port: Annotated[int, typer.Option("--namesrv-port",
                                              help="Name server port (0: a free one).")] = 0,
    broker_port: Annotated[int, typer.Option("--broker-port",
                                             help="Master's listen port (0: a free one).")] = 0,
    slave_port: Annotated[int, typer.Option("--slave-port",
                                            help="Slave's listen port (0: a free one).")] = 0,
    traffic: Annotated[bool, typer.Option("--traffic/--no-traffic",
                                          help="Run the demo producer and consumers, and a "
                                               "lag collector.")] = True,
    rate: Annotated[float, typer.Option("--rate", min=0.1,
                                        help="Demo orders a second.")] = 5.0,
    open_: Annotated[bool, typer.Option(
        "--open", help="No access control (by default authentication and authorization are "
                       "on, with generated keys).")] = False,
    controller: Annotated[bool, typer.Option(
        "--controller", help="5.x automatic failover: the name server embeds a controller "
                             "and broker-a-n1..n3 run in controller mode.")] = False,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Start the local cluster, or what of it is not running, and print how to reach it.

    Processes: namesrv, broker-a-n1 (first started as the master), broker-a-n2 (its slave),
    traffic and lag (`mqadmin lag collect` every 5 s: see `mqadmin lag status --context
    dev`).  A second `up` restarts only the processes that died, on their ports.

    Demo data: topics DemoOrders and DemoPayments; group demo-consumer fails every order
    whose key ends in 7, so %DLQ%demo-consumer fills within a minute; group demo-laggard
    falls behind; group demo-grpc consumes DemoPayments with the 5.x Python client over
    gRPC.  The cluster is saved as the context "dev".

    Access control (unless --open): a generated SUPER user (dev-admin) is saved with the
    "dev" context, and the demo traffic signs as demo-app, a NORMAL user allowed only Pub/Sub
    on the demo topics and Sub on the demo groups (`mqadmin listAcl --context dev -c
    DevCluster`).  Keys live in DATA_DIR/access.json (mode 0600).

    Metrics: each broker and the lag collector serve /metrics for Prometheus on a port of
    their own; `up` prints the URLs (docs/monitoring.md, deploy/prometheus).

    RocketMQ 5 clients: each broker runs the gRPC proxy (--enable-proxy); `up` prints the
    endpoints to give a 5.x client (docs/proxy.md).

    Controller mode (--controller): the name server embeds a 5.3 controller, and three
    brokers (broker-a-n1..n3, SYNC_MASTER with allAckInSyncStateSet) take the roles it
    gives: kill the master and a slave takes over by itself (docs/ha.md; `mqadmin
    getSyncStateSet -a CONTROLLER -b broker-a`).
    """
    with guarded(debug):
        state, already = dev.up(data_dir, namesrv_port=namesrv_port, broker_port=broker_port,
                                slave_port=slave_port, traffic=traffic, rate=rate,
                                open_=open_, controller=controller, on_step=render.note)
        saved = config.load()
        saved.contexts[CONTEXT] = config.Context(CONTEXT, state.namesrv,
                                                 f"mqadmin dev up --data-dir {state.data_dir}")
        config.save(saved)
        keys = access.existing(Path(state.data_dir))
        credentials.set_context(CONTEXT, keys.admin if keys else None)
        render.render(dev.status(Path(state.data_dir)), output, columns=PROCESS_COLUMNS)
        if already:
            render.note(f"already running (data dir {state.data_dir}).")
        secured = (f"Access control is on: the context {CONTEXT!r} signs as "
                   f"{keys.admin.access_key} (SUPER); the demo traffic as "
                   f"{keys.app.access_key}.\n" if keys else "Access control is off (--open).\n")
        env = (" (and MQADMIN_ACCESS_KEY / MQADMIN_SECRET_KEY from "
               f"{Path(state.data_dir) / access.KEYS_FILE})" if keys else "")
        metrics = "".join(f"Prometheus:     {url}  ({name})\n"
                          for name, url in dev.metrics_urls(state).items())
        grpc = dev.grpc_endpoints(state)
        if grpc:
            metrics += f"gRPC (5.x):     {grpc}  (RocketMQ 5 clients' endpoints)\n"
        if state.controller:
            metrics += (f"Controller:     {state.controller}  (mqadmin getSyncStateSet -a "
                        f"{state.controller} -b {dev.BROKER})\n")
        render.note(f"{secured}Reach it with:  mqadmin clusterList --context {CONTEXT}\n"
                    f"           or:  export NAMESRV_ADDR={state.namesrv}{env}\n"
                    f"{metrics}"
                    f"Stop it with:   mqadmin dev down --data-dir {state.data_dir}")


@app.command("down")
def dev_down(
    data_dir: DataDirOpt = Path(dev.DEFAULT_DATA_DIR),
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0, help="Seconds to wait after SIGTERM before SIGKILL.")
    ] = dev.STOP_TIMEOUT,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Stop the local cluster (SIGTERM, then SIGKILL after --timeout); data is kept."""
    with guarded(debug):
        stopped = dev.down(data_dir, timeout=timeout)
        rows = [{"process": s.process, "pid": s.pid, "result": s.result} for s in stopped]
        render.render(rows, output, columns=STOPPED_COLUMNS)
        if not stopped:
            render.note(f"nothing runs from {data_dir.resolve()}.")


@app.command("status")
def dev_status(
    data_dir: DataDirOpt = Path(dev.DEFAULT_DATA_DIR),
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Show the processes of the local cluster, each broker's current role, and whether
    they run; exits 1 naming the processes that are down."""
    with guarded(debug):
        rows = dev.status(data_dir)
        render.render(rows, output, columns=PROCESS_COLUMNS)
        dev.check_running(data_dir, rows)


@app.command("restart")
def dev_restart(
    name: Annotated[str, typer.Argument(
        help=f"The process: {', '.join(dev.PROCESSES)}.")],
    data_dir: DataDirOpt = Path(dev.DEFAULT_DATA_DIR),
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0, help="Seconds to wait after SIGTERM before SIGKILL.")
    ] = dev.STOP_TIMEOUT,
    output: OutputOpt = OutputFormat.TABLE,
    debug: DebugOpt = False,
) -> None:
    """Stop one process of the local cluster and start it again on the same port.

    A broker comes back in the role it last had: after a failover, `dev restart` of the
    old master brings it back as the slave of the new one.
    """
    with guarded(debug):
        stopped = dev.restart(data_dir, name, stop_timeout=timeout, on_step=render.note)
        render.note(f"{stopped.process} (pid {stopped.pid}): {stopped.result}, started again")
        render.render(dev.status(data_dir), output, columns=PROCESS_COLUMNS)
