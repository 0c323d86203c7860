"""Checks that the folders and SQLite files a command relies on are usable, before work starts.

Why: a file where a folder should be, a read-only mount, a full disk or a truncated database
otherwise surfaces as a traceback from deep inside SQLite, Chroma or Dagster, after part of
the work was done. These checks create nothing (an empty or missing ``NL2SQL_HOME`` stays
valid: each store creates its part on first use) and read only a few bytes per file.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy.engine.url import make_url
from sqlalchemy.exc import ArgumentError

from nl2sql_assets.errors import StorageError

#: Below this much free space a command refuses to start: SQLite, Chroma and Dagster all fail
#: half way through on a full disk.
MIN_FREE_BYTES = 1 << 20
#: The Dagster instance's shared SQLite databases, relative to ``DAGSTER_HOME``.
INSTANCE_DATABASES = ("history/runs.db", "history/runs/index.db", "schedules/schedules.db")
_SQLITE_MAGIC = b"SQLite format 3\x00"


def check_folder(path: Path, variable: str) -> None:
    """Refuse a folder that cannot hold the product's files; creates nothing.

    A missing folder is fine when its nearest existing parent is a writable folder.

    Raises:
        StorageError: ``path`` (or a parent) is a file, is not writable, or its disk is full.
    """
    try:
        existing = path
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        is_dir = existing.is_dir()
    except OSError as exc:
        raise StorageError(variable, path, f"cannot be checked ({exc.strerror})",
                           f"point {variable} at a folder this user can read") from None
    if not is_dir:
        what = "is a file" if existing == path else f"lies under {existing}, which is a file"
        raise StorageError(variable, path, f"{what}, not a folder", f"point {variable} at a folder")
    where = "" if existing == path else f" (in {existing}, the nearest existing folder)"
    if not os.access(existing, os.W_OK | os.X_OK):
        reason = "read-only file system" if _read_only(existing) else "permission denied"
        raise StorageError(variable, path, f"cannot write there{where}: {reason}",
                           f"make it writable or point {variable} at a writable folder")
    free = free_bytes(existing)
    if free is not None and free < MIN_FREE_BYTES:
        raise StorageError(variable, path, f"no space left on its disk{where} ({free // 1024} KiB free)",
                           f"free some space or point {variable} at another disk", full=True)


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def free_bytes(path: Path) -> int | None:
    """Bytes this user may still write on the disk of ``path``; None when it cannot be told."""
    try:
        stat = os.statvfs(path)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def sqlite_store_folder(url: str) -> Path | None:
    """The folder of a SQLite file URL (the schema store's default); None for other URLs.

    >>> sqlite_store_folder("sqlite:////data/h/schema_store.db"), sqlite_store_folder("postgresql://h/db")
    (PosixPath('/data/h'), None)
    """
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return None
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database).expanduser().absolute().parent


def sqlite_header_problem(path: Path) -> str | None:
    """Why ``path`` is plainly not a whole SQLite database (not one, or truncated); None when its
    header looks sound. Reads 100 bytes: cheap enough to run before every command.

    An empty file is sound (SQLite treats it as a new database). The size check is skipped
    while a write-ahead log exists, since the main file then legitimately lags behind.
    """
    try:
        size = path.stat().st_size
        if size == 0:
            return None
        with path.open("rb") as handle:
            header = handle.read(100)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        return "it is not a SQLite database (wrong header)"
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return "it is corrupt (its header names no valid page size)"
    pages = int.from_bytes(header[28:32], "big")
    pages_valid = header[92:96] == header[24:28]
    wal = path.with_name(path.name + "-wal")
    if pages_valid and pages and size < pages * page_size and not (wal.exists() and wal.stat().st_size > 0):
        return f"it is truncated ({size} of {pages * page_size} bytes)"
    return None


def full_folder(folders: list[Path]) -> tuple[Path, int] | None:
    """The first of ``folders`` (or its nearest existing parent) whose disk is full, with its free
    bytes; for telling "disk full" from other I/O errors after the fact."""
    for folder in folders:
        existing = folder
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        free = free_bytes(existing)
        if free is not None and free < MIN_FREE_BYTES:
            return folder, free
    return None
