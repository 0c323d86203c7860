"""``nl2sql-assets retrieve`` on the indexed demo: human-readable, --json, --batch, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nl2sql_assets.cli import main
from nl2sql_assets.config import Settings
from tests.integration.test_retriever import demo_settings  # noqa: F401 - fixture
from tests.chunk_samples import model_provider  # noqa: F401 - fixture

pytestmark = pytest.mark.slow


@pytest.fixture
def demo_env(demo_settings: Settings, monkeypatch: pytest.MonkeyPatch) -> Settings:  # noqa: F811
    for var in ("CHROMA_HOST", "CHROMA_PORT", "SCHEMA_STORE_URL", "EMBEDDING_PROVIDER", "EMBEDDING_MODEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NL2SQL_HOME", str(demo_settings.home))
    monkeypatch.setenv("NL2SQL_DATASOURCES", str(demo_settings.datasources_path))
    return demo_settings


def test_human_readable_output(demo_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["retrieve", "Which tickets breached their first-response SLA?"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("datasource: support (version ")
    assert "\n  main.tickets (" in out and "\njoins:\n" in out and "timings:" in out
    joins = out.split("\njoins:\n")[1].split("\nconfidence:")[0].splitlines()
    assert "  tickets.policy_id = sla_policies.policy_id (many-to-one)" in joins


def test_json_output_is_the_contract_object(demo_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["retrieve", "Total payroll cost per department", "--datasource", "hr", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["datasource"] == "hr" and data["datasources"] == [{"id": "hr", "score": 1.0}]
    assert data["fallback"] is None and data["warnings"] == []
    assert {"name", "schema", "score", "columns"} == set(data["tables"][0])
    assert {t["schema"] for t in data["tables"]} == {"main"}  # SQLite's own name for its schema (contract example)
    assert set(data["timings_ms"]) == {"embed", "vector", "total"}
    # the contract's five keys, plus "inferred" and "source" (contract: joins found without a declared key)
    assert all({"from_table", "from_columns", "to_table", "to_columns", "cardinality"} <= set(r)
               <= {"from_table", "from_columns", "to_table", "to_columns", "cardinality", "inferred", "source"}
               for r in data["relationships"])


def test_tenant_and_evidence_options(demo_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["retrieve", "Which tickets breached the SLA?", "--tenant", "acme", "--json",
                 "--evidence", "tickets are orders here"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["datasource"] in {"commerce", "hr"}


def test_batch_writes_one_line_per_input_line(demo_env: Settings, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    lines = [
        {"id": "a", "question": "Revenue per month in 2025?"},
        {"id": "b", "question": "Who reports to the head of engineering?", "datasource": "hr"},
        "not json",
        {"id": "d", "question": ""},
        {"id": "e", "question": "tickets", "datasource": "nope"},
        {"id": "f", "question": "tickets", "tenant": "globex"},
    ]
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["retrieve", "--batch", str(source), "--out", str(out)]) == 0
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.get("id") for r in results] == ["a", "b", None, "d", "e", "f"]
    assert results[0]["datasource"] == "commerce" and results[1]["datasource"] == "hr"
    assert "not valid JSON" in results[2]["error"] and results[2]["line"] == 3
    assert "question" in results[3]["error"]
    assert "unknown datasource 'nope'" in results[4]["error"]
    assert results[5]["datasource"] == "support"
    assert "3 answered, 3 error lines" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["retrieve", ""], "the question is empty"),
    (["retrieve", "x", "--datasource", "nope"], "unknown datasource 'nope'"),
    (["retrieve", "x", "--tenant", "initech"], "unknown tenant 'initech'"),
    (["retrieve", "x", "--datasource", "hr", "--schema-version", "19990101000000_deadbeef"],
     "no version '19990101000000_deadbeef'"),
    (["retrieve", "--batch", "/nonexistent/in.jsonl", "--out", "/tmp/x.jsonl"], "not found"),
    (["retrieve", "--batch", "in.jsonl"], "--batch needs --out"),
    (["retrieve", "Headcount \udcff"], "the question is not valid text: lone surrogate U+DCFF at character 10"),
    (["retrieve", "x", "--datasource", "hr\udcfe"], "the datasource is not valid text"),
    (["retrieve", "--batch", __file__, "--out", str(Path(__file__).parent)], "is a directory"),
])
def test_bad_input_exits_non_zero_with_a_clear_message(demo_env: Settings, capsys: pytest.CaptureFixture[str],
                                                       argv: list[str], message: str) -> None:
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


@pytest.mark.parametrize("bad", ["0", "1", "1.5", "-0.1", "nan"])
def test_recall_target_outside_zero_one_is_a_clear_usage_error(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["retrieve", "Revenue per month?", "--recall-target", bad]) == 2
    err = capsys.readouterr().err
    assert "--recall-target must be a probability strictly between 0 and 1" in err and bad.lstrip("-") in err


def test_recall_target_not_a_number_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["retrieve", "Revenue per month?", "--recall-target", "high"])
    assert exc.value.code == 2 and "--recall-target: invalid float value: 'high'" in capsys.readouterr().err


def test_a_higher_recall_target_sends_more(demo_env: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    def ask(target: str) -> dict[str, object]:
        assert main(["retrieve", "Which customers ordered products from which suppliers, with order totals?",
                     "--datasource", "commerce", "--json", "--recall-target", target]) == 0
        return json.loads(capsys.readouterr().out)

    low, high = ask("0.2"), ask("0.999")
    n_cols = lambda d: sum(len(t["columns"]) for t in d["tables"])  # noqa: E731
    assert len(high["tables"]) >= len(low["tables"]) and n_cols(high) > n_cols(low)
    assert {t["name"] for t in low["tables"]} <= {t["name"] for t in high["tables"]}
