"""``nl2sql-assets drift``: human and JSON output, exit codes, malformed datasources files."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
import yaml

from nl2sql_assets.adapters import open_adapter
from nl2sql_assets.cli import main
from nl2sql_assets.config import load_datasources
from nl2sql_assets.demo import create_demo
from nl2sql_assets.schema.store import SqlSchemaStore

SCRIPT = Path(sys.executable).parent / "nl2sql-assets"


def register_all(home: Path) -> dict[str, str]:
    """Register every datasource's current structure, as `index` would."""
    store = SqlSchemaStore(f"sqlite:///{home / 'schema_store.db'}")
    out = {}
    try:
        for config in load_datasources(home / "datasources.yaml"):
            adapter = open_adapter(config)
            try:
                snapshot = adapter.read_snapshot(datetime.now(UTC), with_stats=False)
            finally:
                adapter.close()
            out[config.id] = store.register_snapshot(snapshot).schema_version
    finally:
        store.close()
    return out


@pytest.fixture
def demo_home(nl2sql_home: Path) -> Path:
    create_demo(nl2sql_home)
    return nl2sql_home


def test_drift_lines_new_unchanged_changed(demo_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drift"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["commerce", "hr", "support"]
    assert all(" new (would be 2" in line for line in lines), lines

    versions = register_all(demo_home)
    assert main(["drift"]) == 0
    out = capsys.readouterr().out
    for ds, version in versions.items():
        assert f"{ds}: unchanged ({version})" in out

    conn = duckdb.connect(str(demo_home / "demo" / "commerce.duckdb"))
    conn.execute("ALTER TABLE orders ADD COLUMN gift_message VARCHAR")
    conn.execute("CREATE TABLE wishlists (wishlist_id INTEGER PRIMARY KEY, customer_id INTEGER)")
    conn.close()
    assert main(["drift"]) == 0
    out = capsys.readouterr().out
    assert "commerce: changed: +1 table, 1 column added (" in out
    assert "    - added table main.wishlists" in out
    assert "    - main.orders: added column gift_message" in out
    assert f"hr: unchanged ({versions['hr']})" in out


def test_drift_json(demo_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    register_all(demo_home)
    conn = duckdb.connect(str(demo_home / "demo" / "commerce.duckdb"))
    conn.execute("COMMENT ON TABLE orders IS 'Checkouts'")
    conn.close()
    assert main(["drift", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [d["datasource_id"] for d in data] == ["commerce", "hr", "support"]
    statuses = {d["datasource_id"]: d["status"] for d in data}
    assert statuses == {"commerce": "metadata_changed", "hr": "unchanged", "support": "unchanged"}
    commerce = data[0]
    assert commerce["tenant"] == "acme" and len(commerce["fingerprint"]) == 64
    assert commerce["current_version"] and commerce["proposed_version"] is None
    assert any("orders" in item for item in commerce["diff_items"])


def test_failed_datasource_still_exits_zero(demo_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = demo_home / "datasources.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["datasources"].append({"id": "crm", "url": "postgresql+psycopg2://crm:t0psecret@127.0.0.1:1/crm"})
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    assert main(["drift"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[-1].startswith("crm: failed: ")
    assert lines[0].startswith("commerce: new")
    assert "t0psecret" not in captured.out + captured.err
    assert main(["drift", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data[-1]["status"] == "failed" and data[-1]["error"]


def test_no_datasources(nl2sql_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (nl2sql_home / "datasources.yaml").write_text("datasources: []\n", encoding="utf-8")
    assert main(["drift"]) == 0
    assert "no datasources in" in capsys.readouterr().out
    assert main(["drift", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_missing_datasources_file(nl2sql_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["drift"]) == 2
    err = capsys.readouterr().err
    assert "file not found" in err and "nl2sql-assets demo" in err


@pytest.mark.parametrize(("text", "entry", "field"), [
    ("datasources:\n  - id: a\n    url: sqlite:///a.db\n  - id: a\n    url: sqlite:///b.db\n", "#2 (a)", "id"),
    ("datasources:\n  - url: sqlite:///a.db\n", "#1", "id"),
    ("datasources:\n  - id: crm\n", "#1 (crm)", "url"),
    ("datasources:\n  - id: Crm-EU\n    url: sqlite:///a.db\n", "#1 (Crm-EU)", "id"),
    ("datasources:\n  - id: crm\n    url: mongodb://h/db\n", "#1 (crm)", "url"),
])
def test_malformed_file_exits_non_zero_naming_entry_and_field(
        nl2sql_home: Path, capsys: pytest.CaptureFixture[str], text: str, entry: str, field: str) -> None:
    path = nl2sql_home / "datasources.yaml"
    path.write_text(text, encoding="utf-8")
    assert main(["drift"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert err.startswith("nl2sql-assets drift: error: ")
    assert str(path) in err and f"entry {entry}" in err and f"field '{field}'" in err
    assert len(err.splitlines()) == 1


def test_bad_yaml_exits_non_zero(nl2sql_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (nl2sql_home / "datasources.yaml").write_text("datasources:\n  - id: [a\n", encoding="utf-8")
    assert main(["drift"]) == 2
    assert "not valid YAML at line" in capsys.readouterr().err


def test_console_script_subprocess(nl2sql_home: Path) -> None:
    assert SCRIPT.exists(), f"console script not installed next to {sys.executable}"
    path = nl2sql_home / "datasources.yaml"
    path.write_text("datasources:\n  - id: ok\n    url: sqlite:///ok.db\n  - id: bad id\n    url: sqlite:///x.db\n",
                    encoding="utf-8")
    env = {**os.environ, "NL2SQL_HOME": str(nl2sql_home)}
    proc = subprocess.run([str(SCRIPT), "drift"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc
    assert "entry #2 (bad id)" in proc.stderr and "field 'id'" in proc.stderr
    assert proc.stdout == ""

    with sqlite3.connect(nl2sql_home / "ok.db") as conn:
        conn.execute("CREATE TABLE notes (note_id INTEGER PRIMARY KEY, body TEXT)")
    path.write_text("datasources:\n  - id: ok\n    url: sqlite:///" + str(nl2sql_home / "ok.db") + "\n",
                    encoding="utf-8")
    proc = subprocess.run([str(SCRIPT), "drift", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert result["datasource_id"] == "ok" and result["status"] == "new" and result["table_count"] == 1
