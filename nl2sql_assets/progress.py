"""Progress of long work inside one step (tables introspected, chunks embedded), as log records.

The work runs inside Dagster steps, far from the command line that shows it. Reporting through
a dedicated logger keeps the domain free of callbacks threaded through the assets: whoever
wants progress (the CLI on a terminal) attaches a handler to :data:`PROGRESS_LOGGER`; nobody
else sees it, because the logger does not propagate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pydantic import BaseModel, ConfigDict

PROGRESS_LOGGER = "nl2sql_assets.progress"
_logger = logging.getLogger(PROGRESS_LOGGER)
_logger.propagate = False
_logger.setLevel(logging.INFO)


class ProgressEvent(BaseModel):
    """One step of counted work: ``done`` of ``total`` ``unit`` (e.g. 40 of 300 tables introspected)."""

    model_config = ConfigDict(frozen=True)

    unit: str
    done: int
    total: int

    def line(self) -> str:
        """``40/300 tables introspected``."""
        return f"{self.done}/{self.total} {self.unit}"


class ProgressMeter:
    """Reports ``done`` of ``total``, at most every ``interval_s`` seconds, and always the last step.

    >>> meter = ProgressMeter("tables introspected", 2)
    >>> meter.advance(); meter.advance(); meter.done
    2
    """

    def __init__(self, unit: str, total: int, *, interval_s: float = 0.5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.unit, self.total = unit, max(int(total), 0)
        self.done = 0
        self._interval, self._clock = interval_s, clock
        self._last = clock()

    def advance(self, step: int = 1) -> None:
        if self.total <= 0 or not _logger.hasHandlers():
            self.done += step
            return
        self.done = min(self.done + step, self.total)
        now = self._clock()
        if self.done >= self.total or now - self._last >= self._interval:
            self._last = now
            event = ProgressEvent(unit=self.unit, done=self.done, total=self.total)
            _logger.info(event.line(), extra={"progress": event})


class _Handler(logging.Handler):
    def __init__(self, write: Callable[[ProgressEvent], None]) -> None:
        super().__init__(logging.INFO)
        self._write = write

    def emit(self, record: logging.LogRecord) -> None:
        event = getattr(record, "progress", None)
        if isinstance(event, ProgressEvent):
            try:
                self._write(event)
            except Exception:  # a display failure never fails the work
                self.handleError(record)


@contextmanager
def progress_to(write: Callable[[ProgressEvent], None] | None) -> Iterator[None]:
    """Send progress events to ``write`` while the block runs (nothing when ``write`` is None)."""
    if write is None:
        yield
        return
    handler = _Handler(write)
    _logger.addHandler(handler)
    try:
        yield
    finally:
        _logger.removeHandler(handler)
