"""`mqproxy -pc rmq-proxy.json [-n namesrvAddr]`: the gRPC proxy on its own (cluster mode).

The proxy reaches every broker of the name servers' routes over remoting, served by
`proxyWorkers` processes (`--workers N`; one per core by default, 0: in this process;
workers.py).  With
authenticationEnabled / authorizationEnabled in the rmq-proxy.json it checks calls against
the users and rules kept under authConfigPath (the broker's layout: users.json, acls.json),
reloaded when they change, and signs its own requests with
innerClientAuthenticationCredentials.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys

from engine.auth.errors import AuthError
from engine.auth.settings import parse_credentials
from engine.auth.store import AuthStore
from engine.broker.services import PeriodicService
from engine.common import config as configlib
from engine.common import process
from engine.protocol.signature import Credentials
from engine.proxy.auth import GrpcAuth
from engine.proxy.config import ProxyConfig, read_proxy_config
from engine.proxy.server import ProxyServer
from engine.proxy.worker import AuthSpec, WorkerSpec
from engine.proxy.workers import ProxyWorkers, worker_count
from engine.remoting import loop

PROG = "mqproxy"
AUTH_RELOAD_INTERVAL_S = 5.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="gRPC proxy of RocketMQ 5 clients")
    parser.add_argument("-pc", "--proxyConfigPath", dest="proxy_config", metavar="FILE",
                        help="rmq-proxy.json (Apache 5.3's keys)")
    parser.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", metavar="ADDR",
                        help="name server address list, e.g. 127.0.0.1:9876;127.0.0.2:9876")
    parser.add_argument("--workers", dest="workers", type=int, default=None, metavar="N",
                        help="worker processes serving the gRPC port (proxyWorkers; default "
                             "one per core; 0: in this process)")
    parser.add_argument("--logs-dir", dest="logs_dir", metavar="DIR",
                        default=os.path.join(os.path.expanduser("~"), "logs", "rocketmqlogs"),
                        help="where proxy.log is written")
    return parser


def cluster_auth(config: ProxyConfig) -> tuple[GrpcAuth | None, AuthStore | None]:
    """The users and rules under authConfigPath, when access control is on.

    Raises:
        AuthError: authConfigPath is not set, or its files cannot be read.
    """
    if not (config.authentication_enabled or config.authorization_enabled):
        return None, None
    if not config.auth_config_path:
        raise AuthError("authenticationEnabled/authorizationEnabled need authConfigPath: the "
                        "directory holding the users and ACLs (the brokers' config directory)")
    store = AuthStore(config.auth_config_path)
    store.load()
    auth = GrpcAuth(store.tables, authentication=lambda: config.authentication_enabled,
                    authorization=lambda: config.authorization_enabled, refresh=store.reload)
    return auth, store


def cluster_workers(config: ProxyConfig, namesrv_addr: str, credentials: Credentials | None,
                    logs_dir: str | None) -> ProxyWorkers | None:
    """The proxy as `proxyWorkers` processes (None: 0, in this process)."""
    count = worker_count(config)
    if count <= 0:
        return None
    auth = None
    if config.authentication_enabled or config.authorization_enabled:
        assert config.auth_config_path  # cluster_auth checked it
        auth = AuthSpec(config.auth_config_path, None, config.authentication_enabled,
                        config.authorization_enabled)
    spec = WorkerSpec(config=config, namesrv_addr=namesrv_addr, host="0.0.0.0",
                      advertise_host=None, auth=auth, credentials=credentials, tls=None,
                      grace=config.grpc_shutdown_time_seconds, logs_dir=logs_dir, index=0)
    return ProxyWorkers(spec, count)


async def serve(config: ProxyConfig, namesrv_addr: str, logs_dir: str | None = None) -> int:
    try:
        auth, store = cluster_auth(config)
        credentials = parse_credentials(config.inner_client_authentication_credentials)
    except AuthError as exc:
        return process.error(PROG, f"access control: {exc}")
    workers = cluster_workers(config, namesrv_addr, credentials, logs_dir)
    if workers is not None:
        store = None  # each worker loads and reloads the users and rules itself
    proxy: ProxyServer | ProxyWorkers = workers or ProxyServer(
        config, namesrv_addr, auth=auth, credentials=credentials)
    try:
        await proxy.start()
    except OSError as exc:
        await proxy.stop(grace=0)
        return process.error(PROG, f"{exc}; stop the other process or set another "
                                   "grpcServerPort")
    except ValueError as exc:  # TLS: no usable key pair (the message names the file)
        await proxy.stop(grace=0)
        return process.error(PROG, str(exc))
    reloader = None
    if store is not None:
        auth_store = store

        def reload() -> None:
            auth_store.reload()

        reloader = PeriodicService("auth-reload", AUTH_RELOAD_INTERVAL_S, reload)
        reloader.start()
    stop = process.catch_stop_signals()
    print(f"The proxy boot success, gRPC endpoint {proxy.endpoint}, "
          f"name server is {namesrv_addr}", flush=True)
    await stop.wait()
    if reloader is not None:
        await reloader.stop()
    await proxy.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config, unused, unknown = read_proxy_config(args.proxy_config)
    except configlib.ConfigError as exc:
        return process.error(PROG, str(exc))
    for key in unknown:
        print(f"{PROG}: warning: unknown config key '{key}' in {args.proxy_config} is ignored",
              file=sys.stderr)
    for key in unused:
        print(f"{PROG}: warning: config key '{key}' is not used by this proxy", file=sys.stderr)
    namesrv = args.namesrv_addr or config.namesrv_addr or os.environ.get("NAMESRV_ADDR")
    if not namesrv:
        return process.error(PROG, "no name server address: give -n, namesrvAddr in the "
                                   "rmq-proxy.json, or NAMESRV_ADDR")
    config = dataclasses.replace(config, namesrv_addr=namesrv, proxy_mode="cluster")
    if args.workers is not None:
        config = dataclasses.replace(config, proxy_workers=args.workers)
    try:
        process.setup_logging(args.logs_dir, "proxy.log")
    except OSError as exc:
        return process.error(PROG, f"cannot write logs to {args.logs_dir}: "
                                   f"{exc.strerror or exc}")
    logging.getLogger("engine.proxy").info("starting the proxy, name server %s", namesrv)
    try:
        return loop.run(serve(config, namesrv, args.logs_dir))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
