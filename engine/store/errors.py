"""The one error tree of `engine.store`.

    StoreError                   base of every error raised by the store
     ├── StoreConfigError        a configuration value that cannot be used
     ├── StoreLoadError          files on disk that cannot be loaded (segment size, names)
     ├── StoreClosedError        the store is shut down (or not started)
     ├── MappedFileError         a segment could not be created, mapped or extended
     ├── MessageIllegalError     a message the store refuses (too large, bad topic/props)
     │    └── PropertiesSizeExceeded   properties longer than 32767 bytes
     └── ConfigFileError         a JSON config file neither readable nor recoverable from .bak

Puts do not raise for refusals a broker must answer (too large, disk full, flush
timeout): they return a `PutMessageResult` whose status says why.  These exceptions are
for programming errors and for files that cannot be used.
"""

from __future__ import annotations


class StoreError(Exception):
    """Base of every error raised by `engine.store`."""


class StoreConfigError(StoreError):
    """A configuration value that cannot be used (wrong type, out of range)."""


class StoreLoadError(StoreError):
    """Files on disk that cannot be loaded: wrong segment size, unparsable names."""


class StoreClosedError(StoreError):
    """The store is shut down or was never loaded."""


class MappedFileError(StoreError):
    """A segment file could not be created, sized or memory-mapped."""


class MessageIllegalError(StoreError):
    """A message the store refuses to write (too large, topic too long)."""


class PropertiesSizeExceeded(MessageIllegalError):
    """The properties string is longer than 32767 bytes."""


class ConfigFileError(StoreError):
    """A config file (and its .bak) could not be read or decoded."""
