"""Names with dots index and retrieve like any other (issue 13, item 8).

Table ``a.b`` with column ``c`` beside table ``a`` with column ``b.c`` once gave two chunks one id
(``...:column:a.b.c``), so the datasource could not be indexed at all; so did table ``a.b`` beside
table ``b`` of schema ``a`` (where the schema level is another schema's name plus a dot). Each
database here holds exactly such names and goes through the real pipeline (``index_datasource``:
real adapters, schema store, Chroma PersistentClient, local model), then the retriever.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import chromadb
import duckdb
import pytest
import sqlalchemy as sa
from chromadb.config import Settings as ChromaSettings

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.models import ColumnChunk, TableChunk
from nl2sql_assets.indexing.vector_store import ChromaVectorStore
from nl2sql_assets.pipeline.index import index_datasource
from nl2sql_assets.pipeline.verify import chunk_coverage
from nl2sql_assets.retrieval.retriever import SchemaRetriever
from nl2sql_assets.retrieval.schema_cache import build_cached
from nl2sql_assets.schema.models import Column, DatasourceInfo, SchemaSnapshot, Table
from nl2sql_assets.schema.store import SqlSchemaStore
from tests.chunk_samples import embedding_service_for, model_provider  # noqa: F401 - fixture

pytestmark = pytest.mark.slow

# (schema or None for the default one, table) -> its columns
Layout = dict[tuple[str | None, str], list[str]]


def _index_and_retrieve(tmp_path: Path, provider: object, config: DatasourceConfig, layout: Layout,
                        default_schema: str) -> SchemaRetriever:
    """Index ``config`` and check the chunks and the vector store against ``layout``."""
    store = SqlSchemaStore(f"sqlite:///{tmp_path / 'store.db'}")
    service = embedding_service_for(provider, tmp_path / "cache")
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"),
                                       settings=ChromaSettings(anonymized_telemetry=False))
    vectors = ChromaVectorStore(client, service)  # type: ignore[arg-type]
    outcome = index_datasource(config, store, vectors)
    assert outcome.status == "new"
    counts = outcome.chunk_counts
    assert (counts["schema.table"], counts["schema.column"]) == (len(layout), sum(map(len, layout.values())))
    snapshot = store.get_snapshot(config.id, outcome.schema_version)
    assert {(t.schema_name or default_schema, t.name) for t in snapshot.tables} == {
        (s or default_schema, t) for s, t in layout}
    chunks = build_chunks(snapshot)
    assert chunk_coverage(snapshot, chunks).ok
    assert vectors.list_ids(config.id) == {c.id for c in chunks.chunks}
    return SchemaRetriever(store, vectors, service)  # type: ignore[arg-type]


def _check_answer(retriever: SchemaRetriever, datasource: str, question: str, layout: Layout,
                  default_schema: str, want: tuple[str | None, str, str]) -> None:
    """The question finds its table and column; every table comes with its own columns only."""
    result = retriever.retrieve(question, datasource=datasource)
    assert result.fallback is None and result.warnings == [], result
    own = {(s or default_schema, t): set(cols) for (s, t), cols in layout.items()}
    got = {(t.schema_, t.name): t.columns for t in result.tables}
    for key, columns in got.items():
        assert set(columns) <= own[key], (key, columns)
    schema, table, column = want
    assert column in got.get((schema or default_schema, table), []), (question, got)


SQLITE_LAYOUT: Layout = {(None, "a.b"): ["c"], (None, "a"): ["b.c"]}


def test_sqlite_table_a_dot_b_beside_table_a_with_column_b_dot_c(tmp_path: Path, model_provider: object) -> None:  # noqa: F811
    path = tmp_path / "dots.sqlite"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.exec_driver_sql('CREATE TABLE "a.b" (c INTEGER)')
        conn.exec_driver_sql('CREATE TABLE a ("b.c" TEXT)')
        conn.exec_driver_sql('INSERT INTO "a.b" VALUES (1), (2)')
        conn.exec_driver_sql("INSERT INTO a VALUES ('x'), ('y')")
    engine.dispose()
    config = DatasourceConfig(id="dots", url=f"sqlite:///{path}")
    retriever = _index_and_retrieve(tmp_path, model_provider, config, SQLITE_LAYOUT, "main")
    _check_answer(retriever, "dots", "c of a.b", SQLITE_LAYOUT, "main", (None, "a.b", "c"))
    _check_answer(retriever, "dots", "b.c of a", SQLITE_LAYOUT, "main", (None, "a", "b.c"))


DUCKDB_LAYOUT: Layout = {("main", "a.b"): ["c"], ("main", "a"): ["b.c"], ("a", "b"): ["c"],
                         ("main.a", "b"): ["c"]}


def test_duckdb_dotted_tables_columns_and_schemas(tmp_path: Path, model_provider: object) -> None:  # noqa: F811
    path = tmp_path / "dots.duckdb"
    con = duckdb.connect(str(path))
    con.execute('CREATE TABLE main."a.b" (c INTEGER)')
    con.execute('CREATE TABLE main.a ("b.c" VARCHAR)')
    con.execute("CREATE SCHEMA a")
    con.execute("CREATE TABLE a.b (c INTEGER)")
    con.execute('CREATE SCHEMA "main.a"')  # its table b would be main.a.b, like main."a.b", unquoted
    con.execute('CREATE TABLE "main.a".b (c INTEGER)')
    con.close()
    config = DatasourceConfig(id="dots", url=f"duckdb:///{path}")
    retriever = _index_and_retrieve(tmp_path, model_provider, config, DUCKDB_LAYOUT, "main")
    _check_answer(retriever, "dots", "c of a.b", DUCKDB_LAYOUT, "main", ("main", "a.b", "c"))
    _check_answer(retriever, "dots", "b.c of a", DUCKDB_LAYOUT, "main", ("main", "a", "b.c"))


@pytest.fixture
def pg_dotted_schema(pg_schema: str, postgres_url: str) -> Iterator[str]:
    """A second schema named ``<pg_schema>.a`` beside ``pg_schema`` (dropped afterwards)."""
    dotted = f"{pg_schema}.a"
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{dotted}"')
    try:
        yield dotted
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{dotted}" CASCADE')
        engine.dispose()


def test_postgresql_dotted_tables_columns_and_schemas(tmp_path: Path, model_provider: object,  # noqa: F811
                                                      postgres_url: str, pg_schema: str,
                                                      pg_dotted_schema: str) -> None:
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE TABLE "{pg_schema}"."a.b" (c INTEGER)')
        conn.exec_driver_sql(f'CREATE TABLE "{pg_schema}".a ("b.c" TEXT)')
        conn.exec_driver_sql(f'CREATE TABLE "{pg_dotted_schema}".b (c INTEGER)')  # "<s>.a".b vs <s>."a.b"
    engine.dispose()
    layout: Layout = {(pg_schema, "a.b"): ["c"], (pg_schema, "a"): ["b.c"], (pg_dotted_schema, "b"): ["c"]}
    config = DatasourceConfig(id="dots", url=postgres_url, schemas=[pg_schema, pg_dotted_schema])
    retriever = _index_and_retrieve(tmp_path, model_provider, config, layout, pg_schema)
    _check_answer(retriever, "dots", "c of a.b", layout, pg_schema, (pg_schema, "a.b", "c"))
    _check_answer(retriever, "dots", "b.c of a", layout, pg_schema, (pg_schema, "a", "b.c"))


def test_the_schema_cache_places_every_chunk_of_dotted_names() -> None:
    """The retriever places a hit by its chunk id alone; a refused snapshot used to place none."""
    tables = [Table(name="a.b", schema_name="main", columns=[Column(name="c")]),
              Table(name="a", schema_name="main", columns=[Column(name="b.c")]),
              Table(name="b", schema_name="a", columns=[Column(name="c")])]
    snap = SchemaSnapshot.create(DatasourceInfo(id="dots", dialect="duckdb"), tables,
                                 datetime(2026, 1, 1, tzinfo=UTC)).with_version("20260101000000_0badc0de")
    cached = build_cached(snap, infer_joins=True)
    columns = [(t.schema_name, t.name, c.name) for t in snap.tables for c in t.columns]
    placed = {}
    for chunk in build_chunks(snap).chunks:
        if isinstance(chunk, ColumnChunk):
            _, (ci,) = cached.chunk_pos[chunk.id]
            placed[(chunk.schema_name, chunk.table, chunk.column)] = columns[ci]
        elif isinstance(chunk, TableChunk):
            _, (ti,) = cached.chunk_pos[chunk.id]
            placed[(chunk.schema_name, chunk.table)] = (snap.tables[ti].schema_name, snap.tables[ti].name)
    assert placed and all(key == value for key, value in placed.items())
    assert len(placed) == 6
