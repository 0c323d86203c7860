"""Credentials never reach anything Dagster stores or shows: event logs, metadata, tags, run
config, compute logs, the instance's files, the CLI's output.

A datasource URL carries its password through ``${VAR}``; the tests search every byte the
Dagster instance and both stores persisted for it.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
import yaml

from nl2sql_assets.cli import main
from nl2sql_assets.pipeline.names import PARTITIONS_NAME
from tests.dagster.conftest import write_datasources
from tests.dagster.helpers import execute, failure_text, tick

PASSWORD = "Cr3d-6b1f-must-never-show"


def _files_containing(root: Path, needle: str) -> list[str]:
    hits = []
    raw = needle.encode()
    for path in root.rglob("*"):
        if path.is_file() and raw in path.read_bytes():
            hits.append(str(path.relative_to(root)))
    return hits


def _instance_text(instance: dg.DagsterInstance) -> str:
    """Everything the UI can show about every run: tags, config, events, metadata."""
    parts = []
    for run in instance.get_runs():
        parts.append(json.dumps(dict(run.tags)))
        parts.append(json.dumps(run.run_config, default=str))
        for entry in instance.all_logs(run.run_id):
            parts.append(entry.message or "")
            parts.append(repr(entry.dagster_event))
    return "\n".join(parts)


def _add_entry(home: Path, entry: dict[str, object]) -> None:
    entries = yaml.safe_load((home / "datasources.yaml").read_text(encoding="utf-8"))["datasources"]
    write_datasources(home / "datasources.yaml", [*entries, entry])


def test_unreachable_datasource_with_password_leaves_no_trace(
        instance: dg.DagsterInstance, shop_home: Path, dagster_home: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("WAREHOUSE_PW", PASSWORD)
    _add_entry(shop_home, {"id": "warehouse", "url": "postgresql+psycopg2://loader:${WAREHOUSE_PW}@127.0.0.1:1/dw"})
    result = tick(instance)  # the sensor logs the failure
    assert "warehouse" not in {r.tags["datasource"] for r in result.run_requests}
    # a run of the datasource fails in schema_snapshot; its failure is recorded, without the password
    key = "warehouse@20991231000000_deadbeef"
    instance.add_dynamic_partitions(PARTITIONS_NAME, [key])
    run = execute(instance, key)
    assert not run.success and "warehouse" in failure_text(run)
    code = main(["index"])
    out, err = capsys.readouterr()
    assert code == 1 and "warehouse: failed" in out
    assert PASSWORD not in out + err + caplog.text + failure_text(run)
    assert PASSWORD not in _instance_text(instance)
    assert _files_containing(shop_home, PASSWORD) == []
    assert _files_containing(dagster_home, PASSWORD) == []
    assert (dagster_home / "history").is_dir()  # the instance really wrote there


@pytest.mark.server
@pytest.mark.slow
def test_indexed_postgres_datasource_with_password_leaves_no_trace(
        shop_home: Path, pg_schema: str, postgres_url: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    import sqlalchemy as sa

    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE TABLE "{pg_schema}".accounts (account_id INT PRIMARY KEY, owner TEXT)')
        conn.exec_driver_sql(f'CREATE TABLE "{pg_schema}".ledger (entry_id INT PRIMARY KEY, '
                             f'account_id INT REFERENCES "{pg_schema}".accounts(account_id), amount NUMERIC)')
    engine.dispose()
    # trust authentication on the test server accepts any password; it still travels in the URL
    url = sa.make_url(postgres_url)
    monkeypatch.setenv("LEDGER_PW", PASSWORD)
    _add_entry(shop_home, {"id": "ledger", "schemas": [pg_schema],
                           "url": f"postgresql+psycopg2://{url.username}:${{LEDGER_PW}}@{url.host}:{url.port}/{url.database}"})
    monkeypatch.setenv("DAGSTER_HOME", str(shop_home / "dagster"))
    code = main(["-v", "index"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "ledger: new version" in out and PASSWORD not in out + err
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"datasource": "ledger"}))
        assert runs and runs[0].status == dg.DagsterRunStatus.SUCCESS
        text = _instance_text(instance)
        assert "accounts" in text  # the metadata is there ...
        assert PASSWORD not in text  # ... the password is not
    assert _files_containing(shop_home, PASSWORD) == []
