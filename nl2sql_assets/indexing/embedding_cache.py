"""The content-addressed embedding cache: (model identity, sha256 of the text) -> vector.

Persisted in one SQLite file under ``NL2SQL_HOME/cache`` so an unchanged chunk is never
embedded twice, across schema versions, runs and processes. Two processes may use the same
file at once (WAL journal, busy timeout; writes are idempotent upserts). Vectors are stored
as raw little-endian float32 BLOBs with their dimension.

The cache is disposable, so a damaged file never blocks indexing: when opening it (which runs
``PRAGMA quick_check``) or using it finds damage, the file is moved aside as
``embeddings.sqlite3.corrupt-<timestamp>`` with a warning and an empty cache takes its place.
"""

from __future__ import annotations

import hashlib
import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from nl2sql_assets.errors import EmbeddingError
from nl2sql_assets.indexing.models import ModelIdentity
from nl2sql_assets.sqlite_health import corruption_in, file_id, quarantine, quick_check

logger = logging.getLogger(__name__)

CACHE_FILE_NAME = "embeddings.sqlite3"
_LOOKUP_CHUNK = 500
_OPEN_TIMEOUT_S = 30.0
_DISPOSABLE = " (it is only a cache: deleting the file is safe, vectors are computed again)"
T = TypeVar("T")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model_key TEXT NOT NULL,
    text_sha256 TEXT NOT NULL,
    dimension INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model_key, text_sha256)
) WITHOUT ROWID
"""


def text_key(text: str) -> str:
    """The content address of a text: hex sha256 of its UTF-8 bytes.

    >>> text_key("orders")[:16]
    '1c168adb00d208e4'
    """
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """Vectors by (model identity, text hash) in a SQLite file.

    Args:
        path: the SQLite file; its folder is created on first use.

    The connection opens on first use and stays on this object; :meth:`close` releases it.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._conn: sqlite3.Connection | None = None
        self._opened: tuple[int, int] | None = None
        self._lock = threading.Lock()

    @classmethod
    def in_folder(cls, folder: Path | str) -> EmbeddingCache:
        """The cache file inside a folder (``Settings.cache_path``)."""
        return cls(Path(folder) / CACHE_FILE_NAME)

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            deadline = time.monotonic() + _OPEN_TIMEOUT_S
            set_aside = False
            while True:
                try:
                    self._conn = self._open()
                    break
                except (sqlite3.Error, OSError, _Damaged) as exc:
                    problem = exc.problem if isinstance(exc, _Damaged) else corruption_in(exc)
                    if problem and not set_aside:
                        self._set_aside(problem)
                        set_aside = True
                        continue
                    # two processes creating the file at once: switching it to WAL and creating
                    # the table need a write lock, and SQLite answers "locked" at once instead of
                    # waiting when waiting could deadlock; the other side finishes in milliseconds
                    locked = isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
                    if not locked or time.monotonic() > deadline:
                        raise EmbeddingError(f"embedding cache {self.path} cannot be opened: {exc}{_DISPOSABLE}"
                                             ) from None
                    time.sleep(0.02 + random.random() * 0.05)
        return self._conn

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._opened = file_id(self.path)  # the file judged below, should it have to be moved aside
        conn = sqlite3.connect(self.path, timeout=_OPEN_TIMEOUT_S, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_SCHEMA)
            problem = quick_check(conn)
            if problem:
                raise _Damaged(problem)
        except BaseException:
            conn.close()
            raise
        return conn

    def _set_aside(self, problem: str) -> None:
        """Move the damaged file aside (unless another process already replaced it) and log it."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._opened is not None and file_id(self.path) != self._opened:
            return  # someone else moved it aside and started afresh meanwhile
        try:
            moved = quarantine(self.path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise EmbeddingError(f"embedding cache {self.path} is corrupt ({problem}) and cannot be moved "
                                 f"aside: {exc}{_DISPOSABLE}") from None
        logger.warning("embedding cache %s is corrupt (%s): moved it aside to %s and started an empty "
                       "cache (vectors are computed again as needed)", self.path, problem, moved.name)

    def _run(self, doing: str, op: Callable[[sqlite3.Connection], T]) -> T:
        """``op`` on the open connection; when it meets damage, once more on a fresh cache."""
        with self._lock:
            for attempt in range(2):
                conn = self._connection()
                try:
                    return op(conn)
                except sqlite3.Error as exc:
                    problem = corruption_in(exc)
                    if problem is None or attempt:
                        raise EmbeddingError(f"embedding cache {self.path} cannot be {doing}: {exc}{_DISPOSABLE}"
                                             ) from None
                    self._set_aside(problem)
        raise AssertionError("unreachable")

    def get_many(self, identity: ModelIdentity, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The cached vector of each text (``None`` where there is none), in input order."""
        keys = [text_key(t) for t in texts]
        unique = list(dict.fromkeys(keys))

        def read(conn: sqlite3.Connection) -> dict[str, np.ndarray]:
            found: dict[str, np.ndarray] = {}
            for start in range(0, len(unique), _LOOKUP_CHUNK):
                part = unique[start:start + _LOOKUP_CHUNK]
                rows = conn.execute(
                    "SELECT text_sha256, dimension, vector FROM embeddings WHERE model_key = ? "
                    f"AND text_sha256 IN ({','.join('?' * len(part))})",
                    [identity.key, *part],
                ).fetchall()
                for key, dimension, blob in rows:
                    vector = np.frombuffer(blob, dtype="<f4")
                    if dimension == identity.dimension and vector.shape == (dimension,):
                        found[key] = vector
            return found

        found = self._run("read", read)
        return [found.get(k) for k in keys]

    def put_many(self, identity: ModelIdentity, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Store one vector per text (an existing entry is replaced by the same value).

        Raises:
            EmbeddingError: the vectors do not have the identity's dimension, or the file fails.
        """
        if vectors.ndim != 2 or vectors.shape != (len(texts), identity.dimension):
            raise EmbeddingError(
                f"cannot cache vectors of shape {vectors.shape} for {len(texts)} texts "
                f"of {identity.key}")
        rows = [(identity.key, text_key(t), identity.dimension,
                 np.ascontiguousarray(v, dtype="<f4").tobytes()) for t, v in zip(texts, vectors)]

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?)", rows)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

        self._run("written", write)

    def count(self, identity: ModelIdentity | None = None) -> int:
        """How many vectors are cached (for one model identity, or all)."""
        def count(conn: sqlite3.Connection) -> int:
            if identity is None:
                return int(conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
            return int(conn.execute("SELECT COUNT(*) FROM embeddings WHERE model_key = ?",
                                    (identity.key,)).fetchone()[0])

        return self._run("read", count)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _Damaged(Exception):
    """The cache file failed its integrity check on opening."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
