"""The controller's errors.

    ControllerError
    ├── ControllerConfigError   a bad `-c` file or peer list
    └── ControllerStoreError    controllerStorePath unreadable or unwritable

A request the state refuses is not an exception: it is an `Outcome` with a response code.
"""

from __future__ import annotations


class ControllerError(Exception):
    """Base of the controller's errors."""


class ControllerConfigError(ControllerError):
    """The controller's settings cannot be used."""


class ControllerStoreError(ControllerError):
    """The replicated state cannot be read from or written to controllerStorePath."""
