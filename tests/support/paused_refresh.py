"""`goldenset refresh` with a pause injected between writing a release and committing it, so a test
can kill the process there: run as `python -m tests.support.paused_refresh SECONDS REFRESH-ARGS...`.

The pause is a SQLAlchemy `after_flush` listener that fires once the release's frozen items are
flushed (written to the database, not committed); it prints `PAUSE_MARKER` to stderr and sleeps.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session

from schemas.release import ReleaseItem
from service.cli import app

PAUSE_MARKER = "refresh paused before commit"


def main(seconds: float, arguments: list[str]) -> None:
    @event.listens_for(Session, "after_flush")
    def pause(session: Session, _context: Any) -> None:
        if any(isinstance(entry, ReleaseItem) for entry in session.new):
            print(PAUSE_MARKER, file=sys.stderr, flush=True)
            time.sleep(seconds)

    app(["refresh", *arguments])


if __name__ == "__main__":
    main(float(sys.argv[1]), sys.argv[2:])
