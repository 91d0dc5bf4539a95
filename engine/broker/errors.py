"""The broker's one request-level error: a check refused the request.

    Refused        a handler's check failed; answered with `code` and `remark`, the
                   connection stays up (send, pull, subscription filters)
"""

from __future__ import annotations


class Refused(Exception):
    """A request refused by a check; carries the response code and remark to answer with."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark
