"""``nl2sql-assets demo`` on a fresh machine: no API key, no server, embedded defaults only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nl2sql_assets.demo import DEMO_QUESTIONS

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_demo_twice_then_audit_on_a_fresh_home(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NL2SQL_", "DAGSTER_", "CHROMA_", "OPENAI_", "EMBEDDING_", "SCHEMA_STORE", "ENRICHMENT"))}
    cli = str(Path(sys.executable).with_name("nl2sql-assets"))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([cli, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)

    demo = run("demo", "--no-retrieve")
    assert demo.returncode == 0, demo.stdout + demo.stderr
    lines = [line for line in demo.stdout.splitlines() if ": new version " in line]
    assert sorted(line.split(":")[0] for line in lines) == ["commerce", "hr", "support"]
    home = tmp_path / ".nl2sql"  # the contract's default NL2SQL_HOME
    assert (home / "dagster" / "dagster.yaml").is_file() and (home / "dagster" / "history").is_dir()
    assert "dagster - DEBUG" not in demo.stderr  # the run events stay in the instance, not on the console
    metrics = (home / "metrics.prom").read_text(encoding="utf-8")  # the product reports its metrics
    assert 'nl2sql_vector_refresh_chunks_total{datasource="hr",outcome="embedded"}' in metrics, metrics[:2000]

    # with retrieval: the already indexed demo is unchanged, routes its sample questions and names tables
    shown = run("demo")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert shown.stdout.count(": unchanged (") == 3, shown.stdout  # demo indexes as `index` does
    out = shown.stdout.split("sample retrievals:\n", 1)[1].splitlines()
    for item, (question, answer) in zip(DEMO_QUESTIONS, zip(out[0::2], out[1::2])):
        assert question.strip() == item.question
        datasource, tables = answer.strip().removeprefix("-> ").split(": ", 1)
        assert datasource == item.datasource and tables != "-", answer

    audit = run("audit")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert audit.stdout.rstrip().endswith("audit: consistent")
    assert audit.stdout.count("lineage of ") == 3
