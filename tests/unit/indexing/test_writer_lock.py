"""The writer lock of an embedded store: re-entrant in a thread, exclusive across threads, clear errors."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from nl2sql_assets.errors import VectorStoreError
from nl2sql_assets.indexing.writer_lock import LOCK_FILE, WriterLock


def test_the_lock_is_reentrant_and_names_its_holder(tmp_path: Path) -> None:
    lock = WriterLock(tmp_path / "chroma")
    with lock.hold("refresh shop@v1") as waited, lock.hold("delete versions of shop") as again:
        assert waited == 0.0 and again == 0.0  # taking a free lock is not waiting
        assert lock.holder() == f"pid {os.getpid()} on {os.uname().nodename}: refresh shop@v1"
    assert (tmp_path / "chroma" / LOCK_FILE).is_file()


def test_two_threads_write_one_after_the_other(tmp_path: Path) -> None:
    first, second = WriterLock(tmp_path), WriterLock(tmp_path)  # two stores on one folder
    events: list[str] = []
    inside = threading.Event()

    def hold_a_while() -> None:
        with first.hold("a"):
            events.append("a in")
            inside.set()
            time.sleep(0.5)
            events.append("a out")

    thread = threading.Thread(target=hold_a_while)
    thread.start()
    assert inside.wait(10)
    with second.hold("b") as waited:
        events.append("b in")
    thread.join()
    assert events == ["a in", "a out", "b in"] and waited >= 0.3


def test_a_folder_that_cannot_hold_the_lock_is_named(tmp_path: Path) -> None:
    blocker = tmp_path / "chroma"
    blocker.write_text("not a folder")
    with pytest.raises(VectorStoreError, match=f"cannot create the vector store's writer lock {blocker}/"):
        with WriterLock(blocker).hold("refresh shop@v1"):
            pass
