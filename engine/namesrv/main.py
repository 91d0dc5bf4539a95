"""`mqnamesrv [-c file] [-p]`: the name server process."""

from __future__ import annotations

import argparse
import logging
import sys

from engine.auth.errors import AuthError
from engine.common import process, properties
from engine.common.config import ConfigError
from engine.common.config import items as config_items
from engine.common.config import keys as config_keys
from engine.controller.config import ControllerConfig, load_controller_config
from engine.controller.errors import ControllerError
from engine.controller.main import monotonic_ms
from engine.controller.manager import ControllerManager
from engine.namesrv.config import NamesrvConfig, load_namesrv_config
from engine.namesrv.controller import NamesrvController
from engine.namesrv.kvconfig import KVConfigError
from engine.remoting import loop
from engine.remoting.errors import RemotingError
from engine.remoting.server import PortInUseError

PROG = "mqnamesrv"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="RocketMQ-compatible name server")
    parser.add_argument("-c", "--configFile", dest="config_file", metavar="FILE",
                        help="name server config properties file")
    parser.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true",
                        help="print all config items and exit")
    parser.add_argument("-n", "--namesrvAddr", dest="namesrv_addr", metavar="ADDR",
                        help="accepted for compatibility with mqnamesrv; unused")
    return parser


def _error(message: str) -> int:
    return process.error(PROG, message)


async def serve(config: NamesrvConfig, extra: dict[str, str],
                embedded: ControllerConfig | None = None) -> int:
    """Run the name server (and the controller `embedded`, when given) until SIGTERM or
    SIGINT; returns the exit code."""
    try:
        controller = NamesrvController(config, extra_properties=extra)
    except AuthError as exc:
        return _error(f"access control: {exc}")
    manager: ControllerManager | None = None
    if embedded is not None:
        try:
            manager = ControllerManager(embedded, clock=monotonic_ms)
            await manager.start()
        except (ControllerError, RemotingError, OSError) as exc:
            if manager is not None:
                await manager.stop()
            return _error(f"controller: {exc}")
    try:
        await controller.start()
    except PortInUseError as exc:
        await controller.server.stop()
        if manager is not None:
            await manager.stop()
        return _error(f"{exc}; stop the other process or set another listenPort in the -c file")
    except (RemotingError, KVConfigError, OSError) as exc:
        await controller.server.stop()
        if manager is not None:
            await manager.stop()
        return _error(str(exc))
    stop = process.catch_stop_signals()
    print(f"The Name Server boot success. serializeType=JSON, port={controller.port}",
          flush=True)
    logging.getLogger("engine.namesrv").info("The Name Server boot success, port %d",
                                             controller.port)
    await stop.wait()
    await controller.stop()
    if manager is not None:
        await manager.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config, unknown = load_namesrv_config(args.config_file)
    except ConfigError as exc:
        return _error(str(exc))
    extra: dict[str, str] = {}
    embedded: ControllerConfig | None = None
    if config.enable_controller_in_namesrv:
        try:
            embedded = load_controller_config(args.config_file)[0]
        except ConfigError as exc:
            return _error(str(exc))
        controller_keys = set(config_keys(ControllerConfig))
        unknown = [k for k in unknown if k not in controller_keys]
    if args.config_file is not None:
        if unknown:
            extra = {k: v for k, v in properties.loads(_read(args.config_file)).items()
                     if k in unknown}
        for key in unknown:
            print(f"{PROG}: warning: unknown config key '{key}' in {args.config_file} "
                  "(kept, but nothing uses it)", file=sys.stderr)
        print(f"load config properties file OK, {args.config_file}", file=sys.stderr)
    if args.print_config:
        pairs = [(k, "" if v is None else v) for k, v in config_items(config)]
        sys.stdout.write(properties.dumps(pairs + list(extra.items()), escape=False))
        return 0
    try:
        process.setup_logging(config.logs_dir, "namesrv.log")
    except OSError as exc:
        return _error(f"cannot write logs to {config.logs_dir}: {exc.strerror or exc}")
    try:
        return loop.run(serve(config, extra, embedded))
    except KeyboardInterrupt:
        return 130


def _read(path: str) -> str:
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


if __name__ == "__main__":
    sys.exit(main())
