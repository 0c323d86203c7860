"""One writer at a time on an embedded Chroma store, across threads and processes.

A refresh plans from the manifest it reads, so two refreshes of one store that overlap can
plan against the same state. The Dagster job's ``nl2sql_index`` pool was meant to keep them
apart, but Dagster's SQLite instance claims a pool slot with a read and then an update that
SQLite does not lock (``SELECT ... FOR UPDATE`` is ignored there): two in-process runs that
start within a millisecond both took the one slot (seen in CI). Scripts and benchmarks do not
go through Dagster at all. So an embedded store's writes take an exclusive ``flock`` on
``<store folder>/.nl2sql-writer.lock``; the kernel drops it when the holder dies, so a killed
writer never blocks the next one. A Chroma server has no shared folder: there, the pool of a
Postgres-backed instance (``deploy/dagster.postgres.yaml``) serializes runs, and its claims are
atomic.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from time import monotonic, sleep

from nl2sql_assets.errors import VectorStoreError

log = logging.getLogger(__name__)

LOCK_FILE = ".nl2sql-writer.lock"
#: How often a waiting writer tries again, and how often it says it still waits.
POLL_S = 0.05
REPORT_EVERY_S = 30.0


class _Held:
    """This process's hold on one lock file: threads queue on ``mutex``; the first takes the flock."""

    def __init__(self) -> None:
        self.mutex = threading.RLock()
        self.depth = 0
        self.fd: int | None = None


_HELD: dict[Path, _Held] = {}
_HELD_GUARD = threading.Lock()


class WriterLock:
    """The writer lock of the embedded store in ``folder`` (re-entrant within a thread)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder.absolute() / LOCK_FILE
        with _HELD_GUARD:
            self._held = _HELD.setdefault(self.path, _Held())

    @contextmanager
    def hold(self, what: str) -> Iterator[float]:
        """Write while the block runs; yields the seconds spent waiting for another writer (0.0
        when none held the lock: taking it is not counted).

        Raises:
            VectorStoreError: the lock file cannot be created or locked (a read-only folder).
        """
        waited = 0.0
        if not self._held.mutex.acquire(blocking=False):  # another thread of this process writes
            started = monotonic()
            self._held.mutex.acquire()
            waited = monotonic() - started
        try:
            if self._held.depth == 0:
                self._held.fd, waited_here = self._acquire(what)
                waited += waited_here
            self._held.depth += 1
            try:
                yield waited
            finally:
                self._held.depth -= 1
                if self._held.depth == 0 and self._held.fd is not None:
                    os.close(self._held.fd)  # closing the descriptor releases the flock
                    self._held.fd = None
        finally:
            self._held.mutex.release()

    def holder(self) -> str:
        """Who holds the lock, as its holder wrote it ('' when unknown)."""
        try:
            return self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return ""

    def _acquire(self, what: str) -> tuple[int, float]:
        """The locked descriptor, and the seconds waited for another process (0.0 at the first try)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise VectorStoreError(f"cannot create the vector store's writer lock {self.path} ({exc.strerror}): "
                                   "the Chroma folder must be writable to index") from None
        try:
            waited = self._wait(fd, what)
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {os.uname().nodename}: {what}\n".encode(), 0)
        return fd, waited

    def _wait(self, fd: int, what: str) -> float:
        started = reported = monotonic()
        first = True
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if first:
                    return 0.0
                waited = monotonic() - started
                log.info("%s: took the writer lock %s after %.1f s", what, self.path, waited)
                return waited
            except BlockingIOError:
                pass
            except OSError as exc:
                raise VectorStoreError(f"cannot lock {self.path} ({exc.strerror})") from None
            now = monotonic()
            if first or now - reported >= REPORT_EVERY_S:
                log.info("%s: waiting for another writer of %s (%s), %.0f s so far", what, self.path.parent,
                         self.holder() or "holder unknown", now - started)
                reported, first = now, False
            sleep(POLL_S)
