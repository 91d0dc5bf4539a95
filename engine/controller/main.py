"""`mqcontroller -c controller.conf [-p]`: the standalone controller process."""

from __future__ import annotations

import argparse
import sys
import time

from engine.common import process, properties
from engine.common.config import ConfigError
from engine.common.config import items as config_items
from engine.controller.config import ControllerConfig, load_controller_config
from engine.controller.errors import ControllerError
from engine.controller.manager import ControllerManager
from engine.remoting import loop
from engine.remoting.server import PortInUseError

PROG = "mqcontroller"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="RocketMQ 5.3-compatible "
                                     "controller (automatic master election)")
    parser.add_argument("-c", "--configFile", dest="config_file", metavar="FILE",
                        help="controller config properties file")
    parser.add_argument("-p", "--printConfigItem", dest="print_config", action="store_true",
                        help="print all config items and exit")
    return parser


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


async def serve(config: ControllerConfig) -> int:
    """Run one controller until SIGTERM or SIGINT; returns the exit code."""
    try:
        manager = ControllerManager(config, clock=monotonic_ms)
    except ControllerError as exc:
        return process.error(PROG, str(exc))
    try:
        await manager.start()
    except PortInUseError as exc:
        await manager.stop()
        return process.error(PROG, f"{exc}; stop the other process or fix "
                             "controllerDLegerPeers")
    except (ControllerError, OSError) as exc:
        await manager.stop()
        return process.error(PROG, str(exc))
    stop = process.catch_stop_signals()
    print(f"The ControllerManager boot success. serializeType=JSON, address={manager.address}",
          flush=True)
    await stop.wait()
    await manager.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config, unknown = load_controller_config(args.config_file)
    except ConfigError as exc:
        return process.error(PROG, str(exc))
    for key in unknown:
        print(f"{PROG}: warning: unknown config key '{key}' in {args.config_file} "
              "(ignored)", file=sys.stderr)
    if args.print_config:
        pairs = [(k, "" if v is None else v) for k, v in config_items(config)]
        sys.stdout.write(properties.dumps(pairs, escape=False))
        return 0
    try:
        process.setup_logging(config.logs_dir, "controller.log")
    except OSError as exc:
        return process.error(PROG, f"cannot write logs to {config.logs_dir}: "
                             f"{exc.strerror or exc}")
    try:
        return loop.run(serve(config))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
