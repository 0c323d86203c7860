"""Damaged SQLite files, told apart from busy or missing ones.

Three stores keep SQLite files: the schema store (every snapshot: never rebuilt), embedded
Chroma (derived: re-indexed from the schema store) and the embedding cache (disposable). A
damaged file must not pass for "nothing stored" nor for a passing outage, and each store
says what its file holds and how to recover. This module only diagnoses and moves files
aside; the stores decide what to do.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.request import pathname2url

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine, ExceptionContext

log = logging.getLogger(__name__)

#: SQLite's primary result codes for a damaged file: SQLITE_CORRUPT and SQLITE_NOTADB.
CORRUPTION_CODES = frozenset({11, 26})
CORRUPTION_TEXTS = ("file is not a database", "database disk image is malformed")
_CHECK_ROWS = 3


def corruption_in(exc: BaseException | None) -> str | None:
    """What damage an exception (or one in its chain) reports; None for any other failure.

    Busy, locked, missing and permission errors are not damage.

    >>> corruption_in(sqlite3.DatabaseError("file is not a database"))
    'file is not a database'
    >>> corruption_in(RuntimeError("error returned from database: (code: 11) database disk image is malformed"))
    'database disk image is malformed'
    >>> corruption_in(sqlite3.OperationalError("database is locked")) is None
    True
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        code = getattr(exc, "sqlite_errorcode", None)
        text = str(exc).lower()
        for marker in CORRUPTION_TEXTS:
            if marker in text:
                return marker
        if isinstance(code, int) and code & 0xFF in CORRUPTION_CODES:
            return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        exc = exc.__cause__ or exc.__context__
    return None


def quick_check(conn: sqlite3.Connection) -> str | None:
    """``PRAGMA quick_check`` on an open connection: None when it passes, else what it found."""
    try:
        rows = conn.execute(f"PRAGMA quick_check({_CHECK_ROWS})").fetchall()
    except sqlite3.DatabaseError as exc:
        return corruption_in(exc)  # busy or locked is no verdict
    found = [str(r[0]) for r in rows]
    if found == ["ok"]:
        return None
    return "integrity check failed: " + "; ".join(" ".join(f.split()) for f in found)[:300]


def check_file(path: Path) -> str | None:
    """Whether an SQLite file is damaged, read-only and without waiting long; None when it is
    healthy, missing or empty (SQLite treats an empty file as a new database), or busy."""
    try:
        if not path.is_file() or path.stat().st_size == 0:
            return None
        conn = sqlite3.connect(f"file:{pathname2url(str(path.absolute()))}?mode=ro", uri=True, timeout=2.0)
    except (OSError, sqlite3.Error):
        return None
    try:
        return quick_check(conn)
    finally:
        conn.close()


def file_id(path: Path) -> tuple[int, int] | None:
    """The file's (device, inode), to notice that another process replaced it meanwhile."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino


def quarantine(path: Path, now: datetime | None = None) -> Path:
    """Move a damaged file aside as ``<name>.corrupt-<UTC timestamp>``, with its ``-wal``,
    ``-shm`` and ``-journal`` files (a fresh file must not replay the old one's journal).

    Raises:
        OSError: the file could not be renamed.
    """
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    os.replace(path, target)
    for suffix in ("-wal", "-shm", "-journal"):
        side = path.with_name(path.name + suffix)
        try:
            os.replace(side, target.with_name(target.name + suffix))
        except FileNotFoundError:
            pass
    return target


def guard_sqlite_engine(engine: Engine, error: Callable[[str], Exception]) -> None:
    """Make damage met through ``engine`` raise ``error(problem)`` instead of a driver error.

    The first connection runs ``PRAGMA quick_check`` (damage that reads happen to miss must
    not pass for missing rows); every later statement error is looked at for damage.
    """
    from sqlalchemy import event  # only the schema store needs it: the vector store's imports stay light

    checked = threading.Event()

    @event.listens_for(engine, "connect")
    def _check_once(dbapi_conn: sqlite3.Connection, _record: object) -> None:
        if checked.is_set():
            return
        problem = quick_check(dbapi_conn)
        if problem:
            raise error(problem)
        checked.set()

    @event.listens_for(engine, "handle_error")
    def _translate(context: ExceptionContext) -> None:
        problem = corruption_in(context.original_exception)
        if problem:
            raise error(problem) from context.original_exception
