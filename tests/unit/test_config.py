"""Settings, the datasources file, ${VAR} expansion and credential redaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from nl2sql_assets.config import (
    DatasourceConfig,
    Settings,
    expand_env,
    load_datasources,
    parse_datasources,
    redact_text,
    redact_url,
    url_password,
)
from nl2sql_assets.errors import ConfigError, Nl2SqlError

GOOD = """\
datasources:
  - id: sales
    url: sqlite:///data/sales.db
    description: Orders, customers and payments of the web shop
    domains: [commerce, finance]
    example_questions: ["Revenue by month in 2025?"]
    tenant: acme
    schemas: [public]
    metrics:
      - name: revenue
        definition: sum(orders.total) where orders.status = 'paid'
        grain: order
  - id: warehouse
    url: duckdb:///data/wh.duckdb
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "datasources.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_contract_example_loads(tmp_path: Path) -> None:
    sales, warehouse = load_datasources(write(tmp_path, GOOD))
    assert sales.id == "sales" and sales.tenant == "acme" and sales.schemas == ["public"]
    assert sales.domains == ["commerce", "finance"]
    assert sales.metrics[0].name == "revenue" and sales.metrics[0].grain == "order"
    assert warehouse.is_duckdb and not sales.is_duckdb
    assert warehouse.tenant == "default" and warehouse.metrics == []


def test_empty_list_is_allowed(tmp_path: Path) -> None:
    assert load_datasources(write(tmp_path, "datasources:\n")) == []


# Each malformed file: (yaml text, expected entry label or None, expected field or None, words in message)
MALFORMED = {
    "bad yaml": ("datasources:\n  - id: a\n    url: [unclosed\n", None, None, ["not valid YAML", "line"]),
    "not a mapping": ("- id: a\n  url: sqlite://\n", None, None, ["'datasources' list"]),
    "datasources not a list": ("datasources: {id: a}\n", None, "datasources", ["must be a list"]),
    "entry not a mapping": ("datasources:\n  - just-a-string\n", "#1", None, ["must be a mapping"]),
    "missing id": ("datasources:\n  - url: sqlite:///x.db\n", "#1", "id", ["is missing"]),
    "empty id": ("datasources:\n  - id: ''\n    url: sqlite:///x.db\n", "#1", "id", ["is missing"]),
    "missing url": ("datasources:\n  - id: ok\n  - id: sales\n    description: x\n",
                    "#1 (ok)", "url", ["is missing"]),
    "duplicate id": ("datasources:\n  - id: sales\n    url: sqlite:///a.db\n"
                     "  - id: sales\n    url: sqlite:///b.db\n", "#2 (sales)", "id", ["duplicate id 'sales'"]),
    "upper-case id": ("datasources:\n  - id: Sales\n    url: sqlite:///a.db\n", "#1 (Sales)", "id",
                      ["^[a-z0-9_]+$"]),
    "dash in id": ("datasources:\n  - id: sales-eu\n    url: sqlite:///a.db\n", "#1 (sales-eu)", "id",
                   ["^[a-z0-9_]+$"]),
    "pipe in id": ("datasources:\n  - id: 'a|b'\n    url: sqlite:///a.db\n", "#1 (a|b)", "id", ["^[a-z0-9_]+$"]),
    "numeric id": ("datasources:\n  - id: 12\n    url: sqlite:///a.db\n", "#1", "id", ["string"]),
    "unknown scheme": ("datasources:\n  - id: crm\n    url: foo://host/db\n", "#1 (crm)", "url",
                       ["unknown URL scheme 'foo'"]),
    "not a url": ("datasources:\n  - id: crm\n    url: /var/data/crm.db\n", "#1 (crm)", "url", ["not a URL"]),
    "bad port": ("datasources:\n  - id: crm\n    url: postgresql://u:hunter2@db:notaport/x\n", "#1 (crm)", "url",
                 ["malformed URL"]),
    "unknown field": ("datasources:\n  - id: crm\n    url: sqlite:///a.db\n    descripton: typo\n",
                      "#1 (crm)", "descripton", ["not permitted"]),
    "bad tenant": ("datasources:\n  - id: crm\n    url: sqlite:///a.db\n    tenant: 'a b'\n", "#1 (crm)", "tenant",
                   ["must match"]),
    "domains not a list": ("datasources:\n  - id: crm\n    url: sqlite:///a.db\n    domains: 5\n",
                           "#1 (crm)", "domains", ["list"]),
    "metric without definition": ("datasources:\n  - id: crm\n    url: sqlite:///a.db\n"
                                  "    metrics:\n      - name: revenue\n", "#1 (crm)", "metrics.0.definition",
                                  ["required"]),
    "duplicate metric": ("datasources:\n  - id: crm\n    url: sqlite:///a.db\n    metrics:\n"
                         "      - {name: m, definition: x}\n      - {name: m, definition: y}\n",
                         "#1 (crm)", "metrics", ["unique"]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_file_names_entry_and_field(tmp_path: Path, case: str) -> None:
    text, entry, field, words = MALFORMED[case]
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_datasources(path)
    err = info.value
    message = str(err)
    assert err.source == str(path) and str(path) in message
    assert err.entry == entry
    assert err.field == field
    if entry:
        assert f"entry {entry}" in message
    if field:
        assert f"field '{field}'" in message
    for word in words:
        assert word in message
    assert "hunter2" not in message
    assert isinstance(err, Nl2SqlError)


def test_missing_file_says_how_to_fix(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file not found.*NL2SQL_DATASOURCES"):
        load_datasources(tmp_path / "nope.yaml")


def test_bad_yaml_reports_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "datasources:\n  - id: a\n    url: sqlite:///a.db\n  - id: b\n   url: x\n")
    with pytest.raises(ConfigError, match=r"line 5"):
        load_datasources(path)


def test_var_references_pass_validation_anywhere_in_the_url() -> None:
    configs = parse_datasources({"datasources": [
        {"id": "a", "url": "postgresql://bob:${PG_PASSWORD}@db:5432/x"},
        {"id": "b", "url": "postgresql://bob@${PG_HOST}:${PG_PORT}/x"},
        {"id": "c", "url": "sqlite:///${DATA_DIR}/c.db"},
    ]})
    assert [c.id for c in configs] == ["a", "b", "c"]


def test_resolved_url_expands_variables() -> None:
    config = DatasourceConfig(id="a", url="postgresql://bob:${PW}@${HOST}:5432/x")
    assert config.resolved_url({"PW": "s3cret", "HOST": "db.internal"}) == "postgresql://bob:s3cret@db.internal:5432/x"
    assert "s3cret" not in config.safe_url


def test_missing_variable_names_it_entry_and_field() -> None:
    config = DatasourceConfig(id="crm", url="postgresql://bob:${CRM_PASSWORD}@db/x")
    with pytest.raises(ConfigError) as info:
        config.resolved_url({})
    assert info.value.entry == "crm" and info.value.field == "url"
    assert "CRM_PASSWORD is not set" in str(info.value)


def test_expand_env_leaves_text_without_references() -> None:
    assert expand_env("sqlite:///a.db", {}) == "sqlite:///a.db"
    assert expand_env("$HOME and ${X}", {"X": "1"}) == "$HOME and 1"


@pytest.mark.parametrize(("url", "expected"), [
    ("postgresql://bob:hunter2@db:5432/x", "postgresql://bob:***@db:5432/x"),
    ("mysql+pymysql://root:p%40ss@127.0.0.1/test", "mysql+pymysql://root:***@127.0.0.1/test"),
    ("postgresql://bob@db/x", "postgresql://bob@db/x"),
    ("sqlite:///data/a.db", "sqlite:///data/a.db"),
    ("postgresql://:onlypw@db/x", "postgresql://:***@db/x"),
])
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_redact_text_removes_urls_and_given_secrets() -> None:
    text = "could not connect to postgresql://bob:hunter2@db/x (password hunter2 rejected)"
    out = redact_text(text, [url_password("postgresql://bob:hunter2@db/x") or ""])
    assert "hunter2" not in out and "bob:***@db" in out


def test_settings_defaults(tmp_path: Path) -> None:
    settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path)})
    assert settings.home == tmp_path
    assert settings.datasources_path == tmp_path / "datasources.yaml"
    assert settings.dagster_home == tmp_path / "dagster"
    assert settings.embedding_provider == "local" and settings.enrichment == "off"
    assert settings.schema_store_url == f"sqlite:///{tmp_path / 'schema_store.db'}"
    assert settings.chroma_host is None


def test_settings_overrides(tmp_path: Path) -> None:
    settings = Settings.from_env({
        "NL2SQL_HOME": str(tmp_path), "NL2SQL_DATASOURCES": str(tmp_path / "ds.yaml"),
        "EMBEDDING_PROVIDER": "OpenAI", "OPENAI_API_KEY": "sk-test", "CHROMA_HOST": "127.0.0.1",
        "CHROMA_PORT": "8123", "SCHEMA_STORE_URL": "postgresql://u@h/db",
    })
    assert settings.datasources_path == tmp_path / "ds.yaml"
    assert settings.embedding_provider == "openai"
    assert settings.openai_api_key is not None and "sk-test" not in repr(settings)
    assert settings.chroma_port == 8123 and settings.schema_store_url == "postgresql://u@h/db"


@pytest.mark.parametrize(("var", "value"), [
    ("EMBEDDING_PROVIDER", "cohere"), ("ENRICHMENT", "yes"), ("CHROMA_PORT", "http"), ("CHROMA_PORT", "70000"),
])
def test_settings_bad_values_name_the_variable(tmp_path: Path, var: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"NL2SQL_HOME": str(tmp_path), var: value})
    assert info.value.field == var and var in str(info.value)
