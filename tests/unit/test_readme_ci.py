"""The README's quickstart has exactly two commands, and `.ci/run` runs exactly its test command."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(?:bash|sh)?\n(.*?)```", section, flags=re.S)
    return [b.strip() for b in blocks]


def test_quickstart_has_exactly_two_one_line_commands() -> None:
    commands = quickstart_commands()
    assert len(commands) == 2, commands
    main, tests = commands
    assert "\n" not in main and "\n" not in tests
    assert main.startswith("python3 -m venv .venv && ") and main.endswith("nl2sql-assets demo")
    assert "pip install -e ." in main
    assert tests.startswith("python3 -m venv .venv && ") and tests.endswith("pytest")
    assert "'.[test]'" in tests


def test_ci_runs_the_readme_test_command() -> None:
    script = ROOT / ".ci" / "run"
    assert os.access(script, os.X_OK), ".ci/run must be executable"
    text = script.read_text(encoding="utf-8")
    match = re.search(r'^TEST_CMD="(.*)"$', text, flags=re.M)
    assert match, "TEST_CMD not found in .ci/run"
    assert match.group(1) == quickstart_commands()[1]
    assert 'bash -c "${TEST_CMD}"' in text and 'exit "${status}"' in text
    subprocess.run(["bash", "-n", str(script)], check=True)


def test_readme_names_every_command_and_variable() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for command in ("demo", "index", "drift", "retrieve", "audit"):
        assert f"`{command}" in text, command
    for var in ("NL2SQL_HOME", "NL2SQL_DATASOURCES", "DAGSTER_HOME", "EMBEDDING_PROVIDER", "EMBEDDING_MODEL",
                "OPENAI_API_KEY", "OPENAI_BASE_URL", "ENRICHMENT", "CHROMA_HOST", "CHROMA_PORT", "SCHEMA_STORE_URL"):
        assert f"`{var}`" in text, var
    for name in ("schema_snapshot", "enriched_snapshot", "schema_chunks", "chroma_collection",
                 "schema_drift_sensor", "index_job"):
        assert f"`{name}`" in text, name
