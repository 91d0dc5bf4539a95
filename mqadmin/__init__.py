"""The operator console, over the engine (whose import keeps the code `dataclasses` compiles
for the console's classes too: engine.common.dataclass_code)."""

import engine  # noqa: F401
