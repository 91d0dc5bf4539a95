"""The RocketMQ-compatible engine.  Importing it keeps the code `dataclasses` compiles for
its classes (engine.common.dataclass_code): each process starts without compiling it again."""

from engine.common import dataclass_code

dataclass_code.install()
