"""Personal data in columns with innocent names, end to end on every engine (issue 13, item 2).

A ``tickets`` table of 1,500 rows on real SQLite, DuckDB, PostgreSQL and MariaDB databases holds
personal data where no name rule can see it: person names in ``owner``, phone numbers inside
free text in ``contact``, 2-series Mastercard numbers in ``payment_ref``, e-mails appearing only
after row 500 in ``remarks``, e-mails and phones (each under half, together 60 %) from row 600
on in ``notes``, card numbers stored as BIGINT in ``ref_no``, and one e-mail in ``memo`` that
is its maximum. It is indexed with ``index_datasource`` into a real schema store and a real
Chroma (PersistentClient, hash embedder); no value may reach either. Beside them, product
names, city names and categories keep their statistics.

The last test injects a value the blocking check refuses into an otherwise real snapshot (what a
buggy or third-party adapter could produce): ``capture_snapshot`` must refuse it and store nothing.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import chromadb
import pytest
import sqlalchemy as sa
from chromadb.config import Settings as ChromaSettings

from nl2sql_assets.adapters.pii import luhn_valid
from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.errors import Nl2SqlError
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.vector_store import ChromaVectorStore
from nl2sql_assets.pipeline import steps
from nl2sql_assets.pipeline.index import index_datasource
from nl2sql_assets.pipeline.verify import pii_findings
from nl2sql_assets.schema.models import SchemaSnapshot
from nl2sql_assets.schema.store import SqlSchemaStore
from tests.chunk_samples import CachingService
from tests.conftest import POSTGRES_URL
from tests.fakes import HashEmbedder

pytestmark = pytest.mark.slow

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
ROWS = 1500
FIRST = ["Ann", "Bob", "Carla", "Dmitri", "Emma", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemal",
         "Lena", "Marco", "Nadia", "Oscar", "Priya", "Quentin", "Rosa", "Sven", "Tomasz"]
LAST = ["Lee", "Baker", "Okafor", "Ivanova", "Schmidt", "Haddad", "Hopper", "Tanaka", "Moreau", "Berg",
        "Yilmaz", "Novak", "Rossi", "Kowalski", "Silva", "Patel", "Dubois", "Garcia", "Larsen", "Nowak",
        "O'Neil", "Meyer-Holt", "Fischer"]
CITIES = ["New York", "San Francisco", "Los Angeles", "Buenos Aires", "Hong Kong", "Rio de Janeiro"]
CATEGORIES = ["retail", "wholesale", "online"]
CARD_PREFIXES = ["4", "51", "55", "34", "37", "6011", "65", "3528", "62", "36", "2221", "2720"]
COLUMNS = ["id", "owner", "contact", "payment_ref", "notes", "remarks", "memo", "ref_no", "product",
           "city", "category", "amount"]
EXPECTED_KINDS = {"owner": "person_name", "contact": "phone", "payment_ref": "card_number", "notes": "mixed",
                  "remarks": "email", "ref_no": "card_number"}
CLEAN = ["id", "memo", "product", "city", "category", "amount"]
MEMO_EMAIL = "zed.zimmer@example.org"


def card(prefix: str, serial: int, length: int = 16) -> str:
    """A Luhn-valid card number of ``length`` digits starting with ``prefix``."""
    body = prefix + str(serial).zfill(length - len(prefix) - 1)[-(length - len(prefix) - 1):]
    return next(body + str(d) for d in range(10) if luhn_valid(body + str(d)))


def person(i: int) -> str:
    return f"{FIRST[i % len(FIRST)]} {LAST[i % len(LAST)]}"


def email(i: int) -> str:
    return f"{FIRST[i % len(FIRST)].lower()}.{i}@mail-example.com"


def phone(i: int) -> str:
    return [f"+1 415 555 {i % 10000:04d}", f"(212) 555-{i % 10000:04d}", f"030 {1234000 + i}"][i % 3]


def ticket(i: int) -> tuple[object, ...]:
    mastercard = card(str(2221 + i % 500), i)
    prefix = CARD_PREFIXES[i % len(CARD_PREFIXES)]
    if i < 600:
        notes = f"Widget {i % 12} packed for order {10000 + i} on 2024-05-{1 + i % 28:02d}"
    elif i % 2:
        notes = f"Customer {FIRST[i % len(FIRST)]} wrote from {email(i)} about order {10000 + i}"
    else:
        notes = f"Please call back on {phone(i)} before Friday"
    return (
        i, person(i), f"call {phone(i)} after 6pm" if i % 2 else f"mobile: {phone(i)}",
        mastercard if i % 4 else " ".join(mastercard[k:k + 4] for k in range(0, 16, 4)),
        notes, "ok" if i < 500 else f"forwarded by {email(i)}",
        f"zz: reach me at {MEMO_EMAIL}" if i == 700 else f"memo {i:04d}",
        int(card(prefix, 7919 * i, 15 if prefix in ("34", "37") else 16)),
        f"Widget {i % 12}", CITIES[i % len(CITIES)], CATEGORIES[i % len(CATEGORIES)], Decimal(i) * Decimal("1.25"),
    )


ROWS_DATA = [ticket(i) for i in range(ROWS)]
SECRETS = sorted({str(v) for row in ROWS_DATA for v in (*row[1:6], row[7])} - {"ok"} | {person(i) for i in range(ROWS)}
                 | {email(i) for i in range(ROWS)} | {phone(i) for i in range(ROWS)} | {MEMO_EMAIL})
DDL = ("CREATE TABLE {t} (id INTEGER PRIMARY KEY, owner VARCHAR(80), contact VARCHAR(120), "
       "payment_ref VARCHAR(40), notes VARCHAR(200), remarks VARCHAR(200), memo VARCHAR(200), ref_no BIGINT, "
       "product VARCHAR(40), city VARCHAR(40), category VARCHAR(20), amount DECIMAL(10, 2))")


@dataclass
class Source:
    engine: str
    config: DatasourceConfig


def _load_sqlalchemy(url: str, table: str, prelude: str | None = None) -> None:
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        if prelude:
            conn.exec_driver_sql(prelude)
        conn.exec_driver_sql(DDL.format(t=table))
        marks = ", ".join(f":{c}" for c in COLUMNS)
        conn.execute(sa.text(f"INSERT INTO {table} ({', '.join(COLUMNS)}) VALUES ({marks})"),
                     [dict(zip(COLUMNS, row, strict=True)) for row in ROWS_DATA])
    engine.dispose()


@pytest.fixture(params=["sqlite", "duckdb", pytest.param("postgresql", marks=pytest.mark.server),
                        pytest.param("mariadb", marks=pytest.mark.server)])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Source]:
    engine = request.param
    if engine == "sqlite":
        path = tmp_path / "tickets.sqlite"
        con = sqlite3.connect(path)
        con.execute(DDL.format(t="tickets"))
        con.executemany(f"INSERT INTO tickets VALUES ({', '.join('?' * len(COLUMNS))})",
                        [tuple(str(v) if isinstance(v, Decimal) else v for v in row) for row in ROWS_DATA])
        con.commit()
        con.close()
        yield Source(engine, DatasourceConfig(id="tickets_sqlite", url=f"sqlite:///{path}"))
    elif engine == "duckdb":
        import duckdb

        path = tmp_path / "tickets.duckdb"
        con = duckdb.connect(str(path))
        con.execute(DDL.format(t="tickets"))
        con.executemany(f"INSERT INTO tickets VALUES ({', '.join('?' * len(COLUMNS))})", ROWS_DATA)
        con.close()
        yield Source(engine, DatasourceConfig(id="tickets_duckdb", url=f"duckdb:///{path}"))
    elif engine == "postgresql":
        schema = request.getfixturevalue("pg_schema")
        _load_sqlalchemy(POSTGRES_URL, f'"{schema}".tickets')
        yield Source(engine, DatasourceConfig(id="tickets_pg", url=POSTGRES_URL, schemas=[schema]))
    else:
        url = request.getfixturevalue("mariadb_url")
        _load_sqlalchemy(url, "tickets")
        yield Source(engine, DatasourceConfig(id="tickets_maria", url=url))


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[SqlSchemaStore, ChromaVectorStore, chromadb.api.ClientAPI, Path]]:
    store_path = tmp_path / "store.db"
    store = SqlSchemaStore(f"sqlite:///{store_path}")
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=ChromaSettings(anonymized_telemetry=False))
    yield store, ChromaVectorStore(client, CachingService(HashEmbedder())), client, store_path  # type: ignore[arg-type]
    store.close()


def everything_stored(client: chromadb.api.ClientAPI, store_path: Path) -> str:
    """Every document and metadata in every Chroma collection, and every row of the schema store."""
    parts: list[str] = []
    for collection in client.list_collections():
        got = client.get_collection(collection.name if hasattr(collection, "name") else str(collection)).get(
            include=["documents", "metadatas"])
        parts.append(json.dumps({"documents": got["documents"], "metadatas": got["metadatas"]}, default=str))
    con = sqlite3.connect(store_path)
    try:
        for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall():
            parts.extend(json.dumps(row, default=str) for row in con.execute(f'SELECT * FROM "{name}"'))
    finally:
        con.close()
    return "\n".join(parts)


def test_personal_data_in_innocent_columns_is_flagged_and_stored_nowhere(
        source: Source, stores: tuple[SqlSchemaStore, ChromaVectorStore, chromadb.api.ClientAPI, Path],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    store, vectors, client, store_path = stores
    outcome = index_datasource(source.config, store, vectors, now=T0)
    snapshot = store.get_snapshot(source.config.id, outcome.schema_version)
    table = snapshot.tables[0]
    kinds = {c.name: c.pii_kind for c in table.columns if c.pii}
    assert kinds == EXPECTED_KINDS
    for name in EXPECTED_KINDS:
        stats = table.column(name).stats  # type: ignore[union-attr]
        assert stats is not None and stats.min_value is None and stats.max_value is None and stats.top_values == []
        assert "withheld" in (stats.note or "") and stats.distinct_count  # counts are kept
    # innocent values keep their statistics: products, cities and categories are not personal data
    tops = {n: table.column(n).stats.top_values for n in ("product", "city", "category")}  # type: ignore[union-attr]
    assert tops["city"][:2] and set(tops["city"]) <= set(CITIES) and set(tops["category"]) == set(CATEGORIES)
    assert all(v.startswith("Widget ") for v in tops["product"]) and len(tops["product"]) == 5
    amount = table.column("amount").stats  # type: ignore[union-attr]
    assert amount is not None and amount.min_value is not None and Decimal(amount.max_value or "0") == Decimal("1873.75")
    # one e-mail in a clean column: the column stays clean, that value is withheld on its own
    memo = table.column("memo").stats  # type: ignore[union-attr]
    assert memo is not None and memo.min_value == "memo 0000" and memo.max_value is None
    assert "look like personal data withheld" in (memo.note or "")
    assert pii_findings(snapshot, build_chunks(snapshot)) == []  # the blocking check agrees
    blob = everything_stored(client, store_path)
    assert "Widget 0" in blob and "retail" in blob and "New York" in blob  # innocent values are there
    leaked = [v for v in SECRETS if v in blob or v in caplog.text]
    assert leaked == []


@pytest.mark.parametrize(("column", "field", "value"), [
    ("memo", "max_value", "2221000000000009"),
    ("category", "top_values", ["retail", "call +44 20 7946 0958 today"]),
    ("owner", "top_values", ["Ann Lee"]),
])
def test_a_snapshot_recording_refused_values_is_not_registered(
        tmp_path: Path, stores: tuple[SqlSchemaStore, ChromaVectorStore, chromadb.api.ClientAPI, Path],
        monkeypatch: pytest.MonkeyPatch, column: str, field: str, value: object) -> None:
    path = tmp_path / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute(DDL.format(t="tickets"))
    con.executemany(f"INSERT INTO tickets VALUES ({', '.join('?' * len(COLUMNS))})",
                    [tuple(str(v) if isinstance(v, Decimal) else v for v in row) for row in ROWS_DATA[:20]])
    con.commit()
    con.close()
    config = DatasourceConfig(id="leaky", url=f"sqlite:///{path}")
    store, vectors, client, store_path = stores
    real: Callable[..., SchemaSnapshot] = steps.read_snapshot

    def leaky_read(*args: object, **kwargs: object) -> SchemaSnapshot:
        """A real snapshot into which an adapter that missed something recorded ``value``."""
        snap = real(*args, **kwargs)
        table = snap.tables[0]
        columns = [c.model_copy(update={"stats": c.stats.model_copy(update={field: value})})  # type: ignore[union-attr]
                   if c.name == column else c for c in table.columns]
        return snap.model_copy(update={"tables": [table.model_copy(update={"columns": columns})]})

    monkeypatch.setattr(steps, "read_snapshot", leaky_read)
    with pytest.raises(Nl2SqlError) as info:
        index_datasource(config, store, vectors, now=T0)
    message = str(info.value)
    assert "leaky" in message and f"tickets.{column}" in message and "not registered" in message
    for shown in ([value] if isinstance(value, str) else value):
        if shown != "retail":
            assert shown not in message
    assert store.list_versions("leaky") == [] and store.get_latest("leaky") is None
    assert vectors.list_ids("leaky") == set()
    assert "2221000000000009" not in everything_stored(client, store_path)
