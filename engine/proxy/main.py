"""`mqproxy -pc rmq-proxy.json [-n namesrvAddr]`: the gRPC proxy on its own (cluster mode).

The proxy reaches every broker of the name servers' routes over remoting.  With
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
from engine.proxy.auth import GrpcAuth
from engine.proxy.config import ProxyConfig, read_proxy_config
from engine.proxy.server import ProxyServer
from engine.remoting import loop

PROG = "mqproxy"
AUTH_RELOAD_INTERVAL_S = 5.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="gRPC proxy of RocketMQ 5 clients")
    parser.add_argument("-pc", "--proxyConfigPath", dest="proxy_config", metavar="FILE",
                        help="rmq-proxy.json (Apache 5.3's keys)")
    parser.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", metavar="ADDR",
                        help="name server address list, e.g. 127.0.0.1:9876;127.0.0.2:9876")
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
                    authorization=lambda: config.authorization_enabled)
    return auth, store


async def serve(config: ProxyConfig, namesrv_addr: str) -> int:
    try:
        auth, store = cluster_auth(config)
        credentials = parse_credentials(config.inner_client_authentication_credentials)
    except AuthError as exc:
        return process.error(PROG, f"access control: {exc}")
    proxy = ProxyServer(config, namesrv_addr, auth=auth, credentials=credentials)
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
    try:
        process.setup_logging(args.logs_dir, "proxy.log")
    except OSError as exc:
        return process.error(PROG, f"cannot write logs to {args.logs_dir}: "
                                   f"{exc.strerror or exc}")
    logging.getLogger("engine.proxy").info("starting the proxy, name server %s", namesrv)
    try:
        return loop.run(serve(config, namesrv))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
