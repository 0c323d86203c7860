"""The SchemaStore behaviour suite on the local PostgreSQL, in a fresh schema per test.

The store's tables go into a PostgreSQL schema through the URL:
``...?options=-csearch_path%3D<schema>`` (see ``nl2sql_assets.schema.store``).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from nl2sql_assets.errors import SchemaStoreError
from nl2sql_assets.schema.store import SqlSchemaStore
from tests.unit.schema import test_store as suite
from tests.unit.schema.builders import numbered, snapshot

pytestmark = pytest.mark.server


def pg_store_url(server_url: str, schema: str) -> str:
    """The server URL with its search path set to ``schema``."""
    sep = "&" if "?" in server_url else "?"
    return f"{server_url}{sep}options=-csearch_path%3D{schema}"


@pytest.fixture
def store_url(postgres_url: str, pg_schema: str) -> str:
    return pg_store_url(postgres_url, pg_schema)


@pytest.fixture
def store(store_url: str) -> Iterator[SqlSchemaStore]:
    s = SqlSchemaStore(store_url)
    yield s
    s.close()


# Every suite test that goes through the store fixtures runs here again, against PostgreSQL.
for _name, _fn in inspect.getmembers(suite, inspect.isfunction):
    if _name.startswith("test_") and {"store", "store_url"} & set(inspect.signature(_fn).parameters):
        globals()[_name] = _fn


def test_tables_live_in_the_configured_schema(store: SqlSchemaStore, postgres_url: str, pg_schema: str) -> None:
    store.register_snapshot(snapshot())
    engine = sa.create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            names = set(conn.execute(sa.text(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = :s"),
                {"s": pg_schema}).scalars())
            public = set(conn.execute(sa.text(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
                "AND table_name LIKE 'nl2sql_schema_%'")).scalars())
    finally:
        engine.dispose()
    assert names == {"nl2sql_schema_datasources", "nl2sql_schema_versions"}
    assert public == set()


def test_stores_in_two_schemas_are_independent(postgres_url: str, pg_schema: str) -> None:
    other = f"{pg_schema}_b"
    engine = sa.create_engine(postgres_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{other}"')
    a, b = SqlSchemaStore(pg_store_url(postgres_url, pg_schema)), SqlSchemaStore(pg_store_url(postgres_url, other))
    try:
        a.register_snapshot(numbered(1))
        assert b.list_datasources() == []
        b.register_snapshot(numbered(2))
        assert a.get_latest("sales").fingerprint == numbered(1).fingerprint  # type: ignore[union-attr]
    finally:
        a.close()
        b.close()
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{other}" CASCADE')
        engine.dispose()


def test_missing_schema_is_a_clear_error(postgres_url: str) -> None:
    store = SqlSchemaStore(pg_store_url(postgres_url, "no_such_schema_x"))
    with pytest.raises(SchemaStoreError, match="no schema has been selected to create in"):
        store.list_datasources()
