"""Command-line behaviour (issue 16), through the real console script in a subprocess: closed
pipes, ``-v`` after the command, help texts, tenant scope errors, one report per failed
datasource, ``unknown field`` in the datasources file, the drift wording, terminal progress."""

from __future__ import annotations

import os
import pty
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nl2sql_assets.config import Settings
from nl2sql_assets.demo import create_demo
from tests.chunk_samples import model_provider  # noqa: F401 - fixture
from tests.integration.test_retriever import demo_settings  # noqa: F401 - fixture
from tests.openai_fake import FakeOpenAI

SCRIPT = Path(sys.executable).parent / "nl2sql-assets"
def cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


@pytest.fixture
def demo_home(nl2sql_home: Path) -> Path:
    create_demo(nl2sql_home)
    return nl2sql_home


@pytest.fixture
def indexed_env(demo_settings: Settings) -> dict[str, str]:  # noqa: F811
    """The environment of the indexed demo (every contract variable but the home cleared)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NL2SQL_", "EMBEDDING_", "CHROMA_", "SCHEMA_STORE", "DAGSTER_", "OPENAI_"))}
    return {**env, "NL2SQL_HOME": str(demo_settings.home), "NL2SQL_DATASOURCES": str(demo_settings.datasources_path)}


@pytest.fixture
def failing_index_home(nl2sql_home: Path) -> Iterator[dict[str, str]]:
    """A home with one small SQLite datasource whose index run fails in its embedding step: the
    OpenAI endpoint (a local fake) refuses the key, which is not retried, so the run fails at once."""
    path = nl2sql_home / "notes.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (note_id INTEGER PRIMARY KEY, body TEXT)")
    (nl2sql_home / "datasources.yaml").write_text(f"datasources:\n  - id: notes\n    url: sqlite:///{path}\n",
                                                  encoding="utf-8")
    with FakeOpenAI("unauthorized") as server:
        yield {"NL2SQL_HOME": str(nl2sql_home), "EMBEDDING_PROVIDER": "openai",
               "OPENAI_API_KEY": "sk-test-not-a-key", "OPENAI_BASE_URL": server.base_url}


def _closed_reader(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run with stdout a pipe whose reader is already gone (``| head -0``): status and stderr."""
    proc = subprocess.Popen([str(SCRIPT), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **env})
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode("utf-8", "replace")
    return proc.wait(timeout=600), err


# ------------------------------------------------------------------ 1. a closed pipe


def test_closed_pipe_ends_quietly_with_the_sigpipe_status(demo_home: Path) -> None:
    status, err = _closed_reader(["drift", "--json"], {"NL2SQL_HOME": str(demo_home)})
    assert status == 141 and err == "", (status, err)


@pytest.mark.slow
def test_closed_pipe_on_retrieve_and_audit(indexed_env: dict[str, str]) -> None:
    for args in (["retrieve", "Total payroll cost per department", "--datasource", "hr", "--json"],
                 ["audit", "--json"]):
        status, err = _closed_reader(args, indexed_env)
        assert status == 141 and "Traceback" not in err and "BrokenPipe" not in err, (args, status, err)


# ------------------------------------------------------------------ 2. -v after the command


def test_verbose_after_the_command(demo_home: Path) -> None:
    env = {"NL2SQL_HOME": str(demo_home)}
    for args in (["drift", "-v"], ["drift", "--json", "-vv"], ["-v", "drift", "-v"]):
        proc = cli(*args, env=env)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "unrecognized arguments" not in proc.stderr


@pytest.mark.slow
def test_retrieve_accepts_verbose_after_the_question(indexed_env: dict[str, str]) -> None:
    proc = cli("retrieve", "Total payroll cost per department", "--datasource", "hr", "-v", env=indexed_env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("datasource: hr")


# ------------------------------------------------------------------ 3. help texts


def test_every_command_has_a_description_and_retrieve_documents_its_options() -> None:
    descriptions = {"demo": "bundled demo", "index": "materialize", "drift": "no row scans",
                    "retrieve": "natural-language", "audit": "vector store matches"}
    for command, words in descriptions.items():
        proc = cli(command, "--help")
        assert proc.returncode == 0 and words in " ".join(proc.stdout.split()), (command, proc.stdout)
    text = " ".join(cli("retrieve", "--help").stdout.split())
    for words in ("answer from this datasource only", "only this tenant's datasources are visible",
                  "this registered version of --datasource", "domain knowledge",
                  '"question" (required', '"schema_version", "evidence"', '{"id": ..., "line": N, "error"'):
        assert words in text, words


# ------------------------------------------------------------------ 4. tenant scope


@pytest.mark.slow
def test_datasource_of_another_tenant_is_not_visible(indexed_env: dict[str, str]) -> None:
    proc = cli("retrieve", "x", "--datasource", "commerce", "--tenant", "globex", env=indexed_env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == ("nl2sql-assets retrieve: error: datasource 'commerce' is not visible "
                                   "to tenant 'globex'")
    proc = cli("retrieve", "x", "--datasource", "nope", "--tenant", "globex", env=indexed_env)
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("unknown datasource 'nope' (known: support)")  # that tenant's only


# ------------------------------------------------------------------ 5 and 8. index: one report, progress


@pytest.mark.slow
def test_failed_datasource_is_reported_once_and_piped_output_shows_no_progress(
        failing_index_home: dict[str, str]) -> None:
    proc = cli("index", env=failing_index_home)
    assert proc.returncode == 1
    assert proc.stdout.startswith("notes: failed (notes@") and proc.stdout.count("\n") == 1, proc.stdout
    assert proc.stderr == "nl2sql-assets index: failed: notes\n", proc.stderr  # no Dagster ERROR line, no progress

    verbose = cli("index", "-v", env=failing_index_home)
    assert verbose.returncode == 1 and "STEP_FAILURE" in verbose.stderr  # -v shows Dagster's log


def _terminal_stderr(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Run with stderr a terminal (a pty): status, stdout, and what the terminal showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(SCRIPT), *args], stdout=subprocess.PIPE, stderr=slave,
                            env={**os.environ, **env})
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    return proc.wait(timeout=600), out, b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
def test_index_shows_progress_on_a_terminal(failing_index_home: dict[str, str]) -> None:
    status, out, err = _terminal_stderr(["index"], failing_index_home)
    assert status == 1
    assert "checking 1 datasource(s) for drift" in err, err
    assert "[1/1] notes: indexing " in err and "[1/1] notes: failed in " in err, err
    assert "1/1 tables introspected" in err, err
    assert "[1/1]" not in out


@pytest.mark.slow
def test_index_counts_tables_and_chunks_on_a_terminal_only(nl2sql_home: Path) -> None:
    path = nl2sql_home / "shop.db"
    with sqlite3.connect(path) as conn:
        for name in ("customers", "orders", "products"):
            conn.execute(f"CREATE TABLE {name} ({name[:-1]}_id INTEGER PRIMARY KEY, label TEXT)")
    (nl2sql_home / "datasources.yaml").write_text(f"datasources:\n  - id: shop\n    url: sqlite:///{path}\n",
                                                  encoding="utf-8")
    env = {"NL2SQL_HOME": str(nl2sql_home)}
    status, out, err = _terminal_stderr(["index"], env)
    assert status == 0, err
    assert "3/3 tables introspected" in err, err
    embedded = re.findall(r"(\d+)/(\d+) chunks embedded", err)
    assert embedded and embedded[-1][0] == embedded[-1][1] and int(embedded[-1][1]) >= 9, err
    assert "tables introspected" not in out and "chunks embedded" not in out

    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE payments (payment_id INTEGER PRIMARY KEY, amount REAL)")
    piped = cli("index", env=env)
    assert piped.returncode == 0 and "shop: " in piped.stdout, piped.stderr
    assert "introspected" not in piped.stderr and "embedded" not in piped.stderr, piped.stderr


# ------------------------------------------------------------------ 6. unknown fields


def test_unknown_field_lists_the_allowed_ones(nl2sql_home: Path) -> None:
    path = nl2sql_home / "datasources.yaml"
    env = {"NL2SQL_HOME": str(nl2sql_home)}
    path.write_text("datasources:\n  - id: a\n    url: sqlite:///a.db\n    colour: red\n", encoding="utf-8")
    proc = cli("drift", env=env)
    assert proc.returncode == 2
    assert "field 'colour': unknown field (allowed: id, url, description," in proc.stderr, proc.stderr
    assert "Extra inputs" not in proc.stderr
    path.write_text("datasources:\n  - id: a\n    url: sqlite:///a.db\n    metrics:\n"
                    "      - {name: m, definition: d, unit: eur}\n", encoding="utf-8")
    proc = cli("drift", env=env)
    assert "field 'metrics.0.unit': unknown field (allowed: name, definition, grain, description)" in proc.stderr


# ------------------------------------------------------------------ 7. drift's proposed version


def test_drift_says_the_timestamp_is_set_at_registration(demo_home: Path) -> None:
    proc = cli("drift", env={"NL2SQL_HOME": str(demo_home)})
    assert proc.returncode == 0, proc.stderr
    for line in proc.stdout.splitlines():
        assert " new (would be 2" in line and line.endswith("; the timestamp is set when the version is registered)")
