"""Bad input and broken surroundings, through the real command line: one line, never a traceback.

Each case runs ``nl2sql-assets`` in a subprocess and expects ONE line on stderr
(``nl2sql-assets <command>: error: ...``) naming the cause and the fix, and a non-zero exit:
2 for bad input or configuration, 1 for the machine's state (a full disk, a damaged
database, an unexpected error). Unwritable folders are made with real mounts (a read-only
bind mount, since root ignores permission bits; a full 2 MiB tmpfs), created and removed by
the tests; without the right to mount, those cases skip with the reason.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import IN_CI

SCRIPT = Path(sys.executable).parent / "nl2sql-assets"


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def error_line(proc: subprocess.CompletedProcess[str], command: str, status: int) -> str:
    """The one stderr line of a failed command (asserted), without its prefix."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == status, (proc.returncode, proc.stdout, proc.stderr)
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    prefix = f"nl2sql-assets {command}: error: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix):]


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


def _umount(path: Path) -> None:
    subprocess.run(["umount", str(path)], check=False, capture_output=True)


@pytest.fixture
def sqlite_datasource(tmp_path: Path) -> str:
    """The text of a datasources file with one small SQLite database (outside any home)."""
    path = tmp_path / "data" / "notes.db"
    path.parent.mkdir()
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (note_id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("CREATE TABLE tags (tag_id INTEGER PRIMARY KEY, note_id INTEGER REFERENCES notes(note_id))")
    return f"datasources:\n  - id: notes\n    url: sqlite:///{path}\n"


@pytest.fixture
def home(nl2sql_home: Path, sqlite_datasource: str) -> Path:
    (nl2sql_home / "datasources.yaml").write_text(sqlite_datasource, encoding="utf-8")
    return nl2sql_home


@pytest.fixture
def read_only_dir(tmp_path: Path, sqlite_datasource: str) -> Iterator[Path]:
    """A folder holding a datasources file, bind-mounted read-only (root ignores permission bits)."""
    path = tmp_path / "read_only"
    path.mkdir()
    (path / "datasources.yaml").write_text(sqlite_datasource, encoding="utf-8")
    try:
        _mount("--bind", str(path), str(path))
    except (subprocess.CalledProcessError, OSError) as exc:
        reason = f"a read-only bind mount needs mount(8) and the right to mount: {exc}"
        if IN_CI:  # CI runs as root on a machine like this one: the fault must really be injected
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        _mount("-o", "remount,bind,ro", str(path))
        yield path
    finally:
        _umount(path)


@pytest.fixture
def full_disk(tmp_path: Path, sqlite_datasource: str) -> Iterator[Path]:
    """A 2 MiB tmpfs holding a datasources file, filled up to the last byte."""
    path = tmp_path / "full"
    path.mkdir()
    try:
        _mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(path))
    except (subprocess.CalledProcessError, OSError) as exc:
        reason = f"a small tmpfs needs mount(8) and the right to mount: {exc}"
        if IN_CI:  # CI runs as root on a machine like this one: the fault must really be injected
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        (path / "datasources.yaml").write_text(sqlite_datasource, encoding="utf-8")
        try:
            with (path / "filler").open("wb", buffering=0) as filler:
                while True:
                    filler.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
        yield path
    finally:
        _umount(path)


def _bad_folder(kind: str, tmp_path: Path, read_only_dir: Path | None) -> Path:
    if kind == "read-only":
        assert read_only_dir is not None
        return read_only_dir
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n", encoding="utf-8")
    return blocker if kind == "a file" else blocker / "home"


FOLDER_CASES = {"a file": "is a file, not a folder", "under a file": "which is a file, not a folder",
                "read-only": "cannot write there: read-only file system"}


@pytest.fixture
def maybe_read_only(request: pytest.FixtureRequest) -> Path | None:
    return request.getfixturevalue("read_only_dir") if request.node.callspec.params["kind"] == "read-only" else None


@pytest.mark.parametrize("command", ["drift", "index"])
@pytest.mark.parametrize("kind", sorted(FOLDER_CASES))
def test_unusable_nl2sql_home(home: Path, tmp_path: Path, maybe_read_only: Path | None, kind: str,
                              command: str) -> None:
    folder = _bad_folder(kind, tmp_path, maybe_read_only)
    datasources = folder / "datasources.yaml" if kind == "read-only" else home / "datasources.yaml"
    proc = cli(command, env={"NL2SQL_HOME": str(folder), "NL2SQL_DATASOURCES": str(datasources)})
    line = error_line(proc, command, 2)
    assert line.startswith(f"NL2SQL_HOME {folder}: ") and FOLDER_CASES[kind] in line, line
    assert "point NL2SQL_HOME at" in line and proc.stdout == ""


@pytest.mark.parametrize("command", ["index", "audit"])
@pytest.mark.parametrize("kind", sorted(FOLDER_CASES))
def test_unusable_dagster_home(home: Path, tmp_path: Path, maybe_read_only: Path | None, kind: str,
                               command: str) -> None:
    folder = _bad_folder(kind, tmp_path, maybe_read_only)
    proc = cli(command, env={"DAGSTER_HOME": str(folder)})
    line = error_line(proc, command, 2)
    assert line.startswith(f"DAGSTER_HOME {folder}: ") and FOLDER_CASES[kind] in line, line
    assert "point DAGSTER_HOME at" in line and proc.stdout == ""
    assert not (home / "schema_store.db").exists()  # stopped before any work


REFUSED = {  # command line: the variables that make it refused before any work
    "index": {"NL2SQL_HOME": "{blocker}"},
    "audit": {"DAGSTER_HOME": "{blocker}"},
    "demo": {"NL2SQL_HOME": "{blocker}"},
    "retrieve --recall-target 2 x": {},
}


@pytest.mark.parametrize("command", list(REFUSED))
def test_a_refused_command_does_not_import_dagster_or_chroma(tmp_path: Path, command: str) -> None:
    """Their imports take about 2 s of a 2-core machine: a command refused for its configuration
    or arguments answers without them (they are imported once the settings are checked)."""
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n", encoding="utf-8")
    env = {k: v.format(blocker=blocker) for k, v in REFUSED[command].items()}
    probe = ("import sys; from nl2sql_assets.cli import main; status = main(sys.argv[1:]); "
             "print(status, sorted(m for m in ('dagster', 'chromadb', 'nl2sql_assets.retrieval.retriever') "
             "if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", probe, *command.split()], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "NL2SQL_HOME": str(tmp_path / "home"), **env})
    assert proc.stderr.startswith(f"nl2sql-assets {command.split()[0]}: error: "), proc.stderr
    assert proc.stdout.strip() == "2 []", proc.stdout


@pytest.mark.parametrize(("command", "variable"), [
    ("drift", "NL2SQL_HOME"), ("index", "NL2SQL_HOME"), ("index", "DAGSTER_HOME"),  # drift uses no instance
])
def test_full_disk_is_refused_before_any_work(home: Path, full_disk: Path, variable: str, command: str) -> None:
    env = {variable: str(full_disk)}
    if variable == "NL2SQL_HOME":
        env["NL2SQL_DATASOURCES"] = str(full_disk / "datasources.yaml")
    line = error_line(cli(command, env=env), command, 1)
    assert line.startswith(f"{variable} {full_disk}: no space left on its disk (") and "KiB free)" in line, line
    assert f"free some space or point {variable} at another disk" in line
    assert sorted(p.name for p in full_disk.iterdir()) == ["datasources.yaml", "filler"]  # nothing half written


@pytest.mark.slow
def test_truncated_dagster_database_names_the_file_and_the_repair(home: Path) -> None:
    first = cli("index")
    assert first.returncode == 0 and "notes: new version " in first.stdout, first.stdout + first.stderr
    runs = home / "dagster" / "history" / "runs.db"
    size = runs.stat().st_size
    os.truncate(runs, size // 2)
    for command in ("index", "audit"):
        line = error_line(cli(command), command, 1)
        assert line.startswith(f"Dagster instance database {runs}: it is truncated ({size // 2} of {size} bytes)")
        assert "Move the instance folder aside (DAGSTER_HOME)" in line and "the indexes are not" in line
    assert cli("drift").stdout.startswith("notes: unchanged (")  # drift needs no instance
    # the repair the message gives: the indexes survive it
    (home / "dagster").rename(home / "dagster.broken")
    again = cli("index")
    assert again.returncode == 0 and again.stdout.startswith("notes: unchanged ("), again.stdout + again.stderr


DEEP_LISTS = "datasources: " + "[" * 5000 + "]" * 5000 + "\n"
DEEP_MAPS = "datasources:\n  - id: a\n    url: sqlite:///a.db\n    annotations: " + "{a: " * 5000 + "1" + "}" * 5000
DATASOURCES_CASES = {
    # name: (file content (bytes), words of the message)
    "latin-1": ("datasources:\n  - id: caf\xe9\n    url: sqlite:///a.db\n".encode("latin-1"),
                ["not UTF-8 text: byte 0xe9 at line 2", "save the file as UTF-8"]),
    "binary": (bytes(range(256)) * 8, ["is a binary file, not YAML text"]),
    "5000 nested lists": (DEEP_LISTS.encode(), ["nested more than 64 levels deep at line 1"]),
    "5000 nested maps": (DEEP_MAPS.encode(), ["nested more than 64 levels deep at line 4"]),
    "duplicate key": (b"datasources:\n  - id: a\n    url: sqlite:///a.db\n    url: sqlite:///b.db\n",
                      ["line 4", "duplicate key 'url' (first at line 3)"]),
    "sqlite://": (b"datasources:\n  - id: a\n    url: sqlite://\n",
                  ["entry #1 (a), field 'url': an in-memory database", "sqlite:///path/to/file.db"]),
    "sqlite:///:memory:": (b"datasources:\n  - id: a\n    url: 'sqlite:///:memory:'\n",
                           ["entry #1 (a), field 'url': an in-memory database", "sqlite:///path/to/file.db"]),
}


@pytest.mark.parametrize("case", list(DATASOURCES_CASES))
def test_bad_datasources_file(nl2sql_home: Path, case: str) -> None:
    content, words = DATASOURCES_CASES[case]
    path = nl2sql_home / "datasources.yaml"
    path.write_bytes(content)
    commands = ["drift", "index"] if case in ("duplicate key", "5000 nested maps", "sqlite://") else ["drift"]
    for command in commands:
        line = error_line(cli(command), command, 2)
        assert line.startswith(f"{path}") and all(word in line for word in words), line


def test_datasources_file_that_is_a_folder(nl2sql_home: Path) -> None:
    (nl2sql_home / "datasources.yaml").mkdir()
    line = error_line(cli("drift"), "drift", 2)
    assert line == f"{nl2sql_home / 'datasources.yaml'}: is a folder, not a file (set NL2SQL_DATASOURCES to the YAML file)"


@pytest.mark.parametrize("value", ["-1", "0", "abc"])
def test_bad_keep_versions_registers_nothing(home: Path, value: str) -> None:
    """Checked in Settings.from_env before anything (already so before this change: a guard)."""
    line = error_line(cli("index", env={"NL2SQL_KEEP_VERSIONS": value}), "index", 2)
    assert line == f"environment, field 'NL2SQL_KEEP_VERSIONS': must be a whole number >= 1, got '{value}'"
    assert sorted(p.name for p in home.iterdir()) == ["datasources.yaml"]  # no store, no instance, no Chroma


def test_file_system_error_inside_a_command_is_one_line(nl2sql_home: Path) -> None:
    """``demo`` meets a file where it makes its folder: an OSError reaching the entry point."""
    (nl2sql_home / "demo").write_text("in the way\n", encoding="utf-8")
    line = error_line(cli("demo", "--no-retrieve"), "demo", 2)
    assert line.startswith(f"{nl2sql_home / 'demo'}: a file stands where a folder is expected: remove it"), line


_RAISE = """
import sys
import nl2sql_assets.cli.drift as drift
from nl2sql_assets.cli import main
def boom(args):
    exec(sys.argv[1])
drift.run = boom
sys.exit(main(sys.argv[2:]))
"""


def _raising(statement: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real entry point in a real process, with ``drift`` replaced by ``statement``."""
    return subprocess.run([sys.executable, "-c", _RAISE, statement, *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))


def test_unexpected_exception_is_one_line_and_a_traceback_only_with_vv(nl2sql_home: Path) -> None:
    statement = "raise RuntimeError('boom at postgresql://u:hunter2@db/x')"
    line = error_line(_raising(statement, "drift"), "drift", 1)
    assert line == ("unexpected RuntimeError: boom at postgresql://u:***@db/x "
                    "(rerun with -vv for the traceback)")
    loud = _raising(statement, "-vv", "drift")
    assert loud.returncode == 1 and "Traceback (most recent call last)" in loud.stderr
    assert loud.stderr.strip().splitlines()[-1] == "nl2sql-assets drift: error: unexpected RuntimeError: boom at " \
                                                   "postgresql://u:***@db/x"
    assert "hunter2" not in loud.stderr


def test_corrupt_sqlite_file_is_named_with_its_repair(nl2sql_home: Path) -> None:
    """A corruption error nobody translated: the entry point finds the damaged file and says how to repair it."""
    cache = nl2sql_home / "cache" / "embeddings.sqlite3"
    cache.parent.mkdir()
    cache.write_bytes(b"SQLite format 3\x00" + b"\xa5" * 8192)
    proc = _raising("import sqlite3; raise sqlite3.DatabaseError('database disk image is malformed')", "drift")
    line = error_line(proc, "drift", 1)
    assert line.startswith(f"SQLite database {cache}: ") and "delete it and run the command again" in line, line
