"""The error a person's decision raises when it cannot be taken (a review, a ruling on dedup): a
machine-readable reason and the HTTP status that fits, so the service answers a problem and the
command line an exit status without knowing each domain's rules."""

from __future__ import annotations


class Refused(ValueError):
    """The decision cannot be taken: `reason` is a machine-readable code, `detail` says what to do,
    `status` is the HTTP status that fits (404, 409, 422)."""

    def __init__(self, reason: str, detail: str, status: int) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.status = status
