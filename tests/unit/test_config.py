"""Settings, the datasources file (read strictly), ${VAR} resolution into URL parts and credential redaction."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

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
                      "#1 (crm)", "descripton", ["unknown field (allowed: id, url, description,"]),
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
    "negative statistics age": ("datasources:\n  - id: crm\n    url: sqlite:///a.db\n    statistics:\n"
                                "      reuse_max_age_hours: -1\n", "#1 (crm)", "statistics.reuse_max_age_hours",
                                ["greater than or equal to 0"]),
    "unknown statistics key": ("datasources:\n  - id: crm\n    url: sqlite:///a.db\n    statistics:\n"
                               "      max_age: 3\n", "#1 (crm)", "statistics.max_age", ["unknown field"]),
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


def test_the_enrichment_timeout_reaches_the_llm_resource(tmp_path: Path) -> None:
    from resources import build_resources

    settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path), "ENRICHMENT_TIMEOUT_S": "2.5"})
    assert settings.enrichment_timeout_s == 2.5 and Settings.of(enrichment_timeout_s=2.5).enrichment_timeout_s == 2.5
    assert build_resources(settings)["llm"].timeout_s == 2.5
    assert Settings.from_env({"NL2SQL_HOME": str(tmp_path)}).enrichment_timeout_s == 30.0


@pytest.mark.parametrize(("var", "value"), [
    ("EMBEDDING_PROVIDER", "cohere"), ("ENRICHMENT", "yes"), ("CHROMA_PORT", "http"), ("CHROMA_PORT", "70000"),
    ("ENRICHMENT_TIMEOUT_S", "0"), ("ENRICHMENT_TIMEOUT_S", "-1"), ("ENRICHMENT_TIMEOUT_S", "abc"),
    ("ENRICHMENT_TIMEOUT_S", "inf"), ("ENRICHMENT_TIMEOUT_S", "nan"),
])
def test_settings_bad_values_name_the_variable(tmp_path: Path, var: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        Settings.from_env({"NL2SQL_HOME": str(tmp_path), var: value})
    assert info.value.field == var and var in str(info.value)


# -- ${VAR} values go into their parsed URL component (issue 13, item 4) ----------------------

DELIMITER_PASSWORDS = ["p@ss", "a:b", "s/l/a/s/h", "h#sh", "50%off", "what?", "Zq7@Wx:9/Kp#3%40Vt?Lm", "sp ace+plus"]


def test_variable_passwords_with_url_delimiters_stay_one_password() -> None:
    config = DatasourceConfig(id="crm", url="postgresql+psycopg2://bob:${PW}@db.internal:5433/crm?sslmode=require")
    for password in DELIMITER_PASSWORDS:  # "%40" stays literal: a value is never percent-decoded
        url = make_url(config.resolved_url({"PW": password}))
        assert (url.username, url.password, url.host, url.port, url.database) == (
            "bob", password, "db.internal", 5433, "crm"), password
        assert dict(url.query) == {"sslmode": "require"}
        assert password in config.secrets({"PW": password})


def test_variables_fill_host_port_user_and_query_values() -> None:
    config = DatasourceConfig(id="crm", url="mysql+pymysql://${U}:${PW}@${HOST}:${PORT}/shop?ssl_ca=${CA}")
    env = {"U": "app@eu", "PW": "x", "HOST": "10.0.0.7", "PORT": "3307", "CA": "/etc/ssl/ca b.pem"}
    url = make_url(config.resolved_url(env))
    assert (url.username, url.host, url.port, url.query["ssl_ca"]) == ("app@eu", "10.0.0.7", 3307, "/etc/ssl/ca b.pem")
    with pytest.raises(ConfigError, match=r"entry crm, field 'url': the port from the environment must be a whole "
                                          r"number, got 'http'"):
        config.resolved_url({**env, "PORT": "http"})


@pytest.mark.parametrize(("text", "expected"), [
    ("postgresql://u:Zq7@Wx:9@db/x failed", "postgresql://u:***@db/x failed"),
    ("postgresql://u@db/x?sslmode=require&password=s3cret", "postgresql://u@db/x?sslmode=require&password=***"),
    ("mysql+pymysql://u@db/x?passwd=s3cret&charset=utf8mb4", "mysql+pymysql://u@db/x?passwd=***&charset=utf8mb4"),
    ("x://h/db?pwd=a&client_secret=b&access_token=c&api_key=d", "x://h/db?pwd=***&client_secret=***&access_token=***"
                                                                 "&api_key=***"),
    ("invalid dsn: host=db password=s3cret user=u", "invalid dsn: host=db password=*** user=u"),
])
def test_redact_url_masks_every_credential_part(text: str, expected: str) -> None:
    assert redact_url(text) == expected


def test_redact_text_masks_whole_tokens_and_never_garbles_words() -> None:
    message = "Can't connect to MySQL server on '127.0.0.1' (user 'M' password M)"
    assert redact_text(message, ["M"]) == "Can't connect to MySQL server on '127.0.0.1' (user '***' password ***)"
    assert redact_text("port 1 of 127.0.0.1", ["1"]) == "port *** of 127.0.0.1"
    assert redact_text("bad hunter2x and xhunter2", ["hunter2"]) == "bad ***x and x***"


# -- the datasources file, read strictly (issue 13, item 9) -----------------------------------

def test_duplicate_key_names_the_key_and_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path, "datasources:\n  - id: a\n    url: sqlite:///a.db\n    tenant: x\n    url: sqlite:///b.db\n")
    with pytest.raises(ConfigError, match=r"line 5, column 5: duplicate key 'url' \(first at line 3\)"):
        load_datasources(path)
    merged = write(tmp_path, "base: &b {tenant: acme, url: sqlite:///a.db}\n"
                             "datasources:\n  - <<: *b\n    id: a\n    url: sqlite:///c.db\n")
    [config] = load_datasources(merged)  # a key merged in with << may be overridden: not a duplicate
    assert (config.url, config.tenant) == ("sqlite:///c.db", "acme")


@pytest.mark.parametrize("text", [
    "datasources: " + "[" * 5000 + "]" * 5000,
    "datasources:\n  - id: a\n    url: sqlite:///a.db\n    annotations: " + "{a: " * 5000 + "1" + "}" * 5000,
    "datasources:\n" + "".join("  " * (i + 1) + "-\n" for i in range(5000)),
])
def test_absurd_nesting_is_a_config_error_not_a_recursion_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(ConfigError, match=r"nested more than 64 levels deep at line \d+"):
        load_datasources(write(tmp_path, text))


def test_unreadable_files_say_what_to_do(tmp_path: Path) -> None:
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("datasources:\n  - id: a\n    description: café\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"not UTF-8 text: byte 0xe9 at line 3 \(save the file as UTF-8\)"):
        load_datasources(latin)
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" * 64)
    with pytest.raises(ConfigError, match="is a binary file, not YAML text"):
        load_datasources(binary)
    with pytest.raises(ConfigError, match="is a folder, not a file"):
        load_datasources(tmp_path)
    with pytest.raises(ConfigError, match="a parent of this path is a file"):
        load_datasources(latin / "datasources.yaml")


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:", "sqlite:///file::memory:?cache=shared",
                                 "sqlite+pysqlite:///x.db?mode=memory", "duckdb://", "duckdb:///:memory:"])
def test_in_memory_databases_are_refused(url: str) -> None:
    with pytest.raises(ConfigError, match="field 'url': an in-memory database is empty and private to one "
                                          "connection, so there is nothing to index"):
        parse_datasources({"datasources": [{"id": "m", "url": url}]})


EVALUATION_GOOD = """\
datasources:
  - id: shop
    url: sqlite:///shop.db
    evaluation:
      severity: error
      min_table_recall: 0.75
      questions:
        - question: "Which customers ordered the most last month?"
          tables: [customers, orders]
          columns: [orders.customer_id, orders.total]
        - {question: Open carts, tables: [main.carts]}
"""


def test_evaluation_questions_load_with_their_thresholds(tmp_path: Path) -> None:
    (shop,) = load_datasources(write(tmp_path, EVALUATION_GOOD))
    evaluation = shop.evaluation
    assert evaluation.severity == "error" and evaluation.min_table_recall == 0.75
    assert evaluation.min_column_recall is None
    assert [q.tables for q in evaluation.questions] == [["customers", "orders"], ["main.carts"]]
    assert evaluation.questions[0].columns == ["orders.customer_id", "orders.total"]
    (plain,) = load_datasources(write(tmp_path, "datasources:\n  - id: a\n    url: sqlite:///a.db\n"))
    assert plain.evaluation.questions == [] and plain.evaluation.severity == "warn"


_EVAL_ENTRY = "datasources:\n  - id: shop\n    url: sqlite:///shop.db\n    evaluation:\n"
# Each malformed evaluation: (the lines under `evaluation:`, expected field, words in the message)
MALFORMED_EVALUATION = {
    "unknown field": ("      colour: red\n", "evaluation.colour",
                      ["unknown field (allowed: severity, min_table_recall, min_column_recall, questions)"]),
    "unknown question field": ("      questions:\n        - {question: q, tables: [t], gold: [t]}\n",
                               "evaluation.questions.0.gold",
                               ["unknown field (allowed: question, tables, columns)"]),
    "bad severity": ("      severity: fatal\n", "evaluation.severity", ["'warn', 'error' or 'block'"]),
    "threshold above 1": ("      min_table_recall: 80\n", "evaluation.min_table_recall", ["less than or equal to 1"]),
    "empty question": ("      questions:\n        - {question: '', tables: [t]}\n",
                       "evaluation.questions.0.question", ["at least 1 character"]),
    "blank question": ("      questions:\n        - {question: '   ', tables: [t]}\n",
                       "evaluation.questions.0.question", ["must not be blank"]),
    "question without tables": ("      questions:\n        - {question: q, tables: []}\n",
                                "evaluation.questions.0.tables", ["at least 1 item"]),
    "question missing": ("      questions:\n        - {tables: [t]}\n", "evaluation.questions.0.question",
                         ["Field required"]),
    "column without table": ("      questions:\n        - {question: q, tables: [t], columns: [total]}\n",
                             "evaluation.questions.0.columns", ["'total' is not table.column"]),
    "column of another table": ("      questions:\n        - {question: q, tables: [t], columns: [u.x]}\n",
                                "evaluation.questions.0.columns", ["not one of the question's tables"]),
    "second question bad": ("      questions:\n        - {question: q, tables: [t]}\n        - {question: r}\n",
                            "evaluation.questions.1.tables", ["Field required"]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_EVALUATION))
def test_malformed_evaluation_names_the_entry_and_field(tmp_path: Path, case: str) -> None:
    lines, field, words = MALFORMED_EVALUATION[case]
    with pytest.raises(ConfigError) as info:
        load_datasources(write(tmp_path, _EVAL_ENTRY + lines))
    err = info.value
    assert (err.entry, err.field) == ("#1 (shop)", field)
    assert f"entry #1 (shop), field '{field}'" in str(err)
    for word in words:
        assert word in str(err), str(err)
