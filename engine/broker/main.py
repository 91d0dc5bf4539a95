"""`mqbroker -c broker.conf [-n addr] [-p] [--enable-proxy [-pc rmq-proxy.json]]`: the broker.

With --enable-proxy the broker serves the gRPC proxy of 5.x clients (local mode,
`engine.proxy.local`), configured by the rmq-proxy.json given with -pc: in `proxyWorkers`
processes of its own that it supervises (`engine.proxy.workers`; one per core by default), or
with proxyWorkers=0 in the broker's process.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from typing import TYPE_CHECKING

from engine.broker.config import BrokerConfig, read_properties_file
from engine.broker.controller import BrokerController
from engine.common import config as configlib
from engine.common import process, properties
from engine.proxy.config import ProxyConfig, read_proxy_config
from engine.remoting import loop
from engine.remoting.errors import RemotingError
from engine.remoting.server import PortInUseError
from engine.store.config import MessageStoreConfig
from engine.store.errors import StoreError

if TYPE_CHECKING:
    from engine.proxy.server import ProxyServer
    from engine.proxy.workers import ProxyWorkers

PROG = "mqbroker"
#: Seconds calls in flight get when a broker with --enable-proxy stops.
LOCAL_PROXY_GRACE_S = 3.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="RocketMQ-compatible broker")
    parser.add_argument("-c", "--configFile", dest="config_file", metavar="FILE",
                        help="broker config properties file (broker.conf)")
    parser.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", metavar="ADDR",
                        help="name server address list, e.g. 127.0.0.1:9876;127.0.0.2:9876")
    parser.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true",
                        help="print all config items and exit")
    parser.add_argument("--enable-proxy", dest="enable_proxy", action="store_true",
                        help="also serve the gRPC proxy of RocketMQ 5 clients (local mode)")
    parser.add_argument("-pc", "--proxyConfigPath", dest="proxy_config", metavar="FILE",
                        help="the proxy's rmq-proxy.json (with --enable-proxy)")
    return parser


def load_configs(config_file: str | None, namesrv_addr: str | None
                 ) -> tuple[BrokerConfig, MessageStoreConfig, list[str]]:
    """Broker and store settings from a broker.conf; returns the keys neither knows.

    Raises:
        ConfigError: an unreadable file or a bad value.
    """
    props = read_properties_file(config_file) if config_file else {}
    broker, rest = configlib.load(BrokerConfig, props)
    store_props = {k: props[k] for k in rest}
    try:
        store, unknown = MessageStoreConfig.from_properties(store_props)
    except StoreError as exc:
        raise configlib.ConfigError(str(exc)) from None
    if namesrv_addr:
        broker = dataclasses.replace(broker, namesrv_addr=namesrv_addr)
    return broker, store, unknown


async def serve(broker: BrokerConfig, store: MessageStoreConfig,
                config_file: str | None, proxy_config: ProxyConfig | None = None) -> int:
    controller = BrokerController(broker, store)
    controller.state.config_file = config_file  # UPDATE_BROKER_CONFIG writes changes back
    try:
        await controller.start()
    except PortInUseError as exc:
        await controller.stop()
        key = "metricsPromExporterPort" if "metrics port" in str(exc) else "listenPort"
        return process.error(PROG, f"{exc}; stop the other process or set another {key}")
    except (RemotingError, StoreError, OSError) as exc:
        await controller.stop()
        return process.error(PROG, str(exc))
    proxy: ProxyServer | ProxyWorkers | None = None
    if proxy_config is not None:
        # grpc is imported only with a proxy
        from engine.proxy.local import local_proxy, local_workers
        try:
            proxy = local_workers(controller, proxy_config) or \
                local_proxy(controller, proxy_config)
            await proxy.start()
        except ValueError as exc:
            await controller.stop()
            return process.error(PROG, f"proxy: {exc}")
        except OSError as exc:
            await controller.stop()
            return process.error(PROG, f"proxy: {exc}; stop the other process or set another "
                                       "grpcServerPort in the rmq-proxy.json given with -pc")
    stop = process.catch_stop_signals()
    print(f"The broker[{broker.broker_name}, {controller.addr}] boot success. "
          f"serializeType=JSON and name server is {broker.namesrv_addr}", flush=True)
    if proxy is not None:
        print(f"The gRPC proxy boot success, endpoint {proxy.endpoint}", flush=True)
    await stop.wait()
    if proxy is not None:  # long polls are cut short: the broker's own shutdown comes first
        await proxy.stop(grace=min(LOCAL_PROXY_GRACE_S, proxy.config.grpc_shutdown_time_seconds))
    await controller.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        broker, store, unknown = load_configs(args.config_file, args.namesrv_addr)
    except configlib.ConfigError as exc:
        return process.error(PROG, str(exc))
    for key in unknown:
        print(f"{PROG}: warning: unknown config key '{key}' in {args.config_file} is ignored",
              file=sys.stderr)
    if args.print_config:
        pairs = [(k, "" if v is None else v) for k, v in configlib.items(broker)]
        pairs += list(store.to_properties().items())
        sys.stdout.write(properties.dumps(pairs, escape=False))
        return 0
    proxy_config: ProxyConfig | None = None
    if args.enable_proxy:
        try:
            proxy_config, unused, unknown_proxy = read_proxy_config(args.proxy_config)
        except configlib.ConfigError as exc:
            return process.error(PROG, f"proxy config: {exc}")
        for key in unknown_proxy:
            print(f"{PROG}: warning: unknown proxy config key '{key}' in {args.proxy_config} "
                  "is ignored", file=sys.stderr)
        for key in unused:
            print(f"{PROG}: warning: proxy config key '{key}' is not used by this proxy",
                  file=sys.stderr)
    elif args.proxy_config:
        return process.error(PROG, "-pc needs --enable-proxy")
    if not broker.namesrv_addrs:
        print(f"{PROG}: warning: no name server address (-n, namesrvAddr or NAMESRV_ADDR): "
              "clients will not find this broker", file=sys.stderr)
    try:
        process.setup_logging(broker.logs_dir, "broker.log")
    except OSError as exc:
        return process.error(PROG, f"cannot write logs to {broker.logs_dir}: "
                                   f"{exc.strerror or exc}")
    logging.getLogger("engine.broker").info("starting %s", broker.broker_name)
    try:
        return loop.run(serve(broker, store, args.config_file, proxy_config))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
