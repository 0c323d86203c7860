"""SqlSchemaStore behaviour on a real SQLite file.

``tests/integration/test_store_postgres.py`` runs this same suite on PostgreSQL by overriding
the ``store_url`` fixture, so every test here goes through the ``store``/``store_url`` fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from nl2sql_assets.config import Settings
from nl2sql_assets.errors import ConfigError, SchemaStoreError, SchemaVersionNotFoundError
from nl2sql_assets.schema.fingerprint import parse_schema_version
from nl2sql_assets.schema.models import SchemaSnapshot, Table
from nl2sql_assets.schema.store import SchemaStore, SqlSchemaStore, build_schema_store
from tests.unit.schema.builders import T0, customers, numbered, orders, rich_tables, snapshot, view


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store' / 'schema_store.db'}"


@pytest.fixture
def store(store_url: str) -> Iterator[SqlSchemaStore]:
    s = SqlSchemaStore(store_url)
    yield s
    s.close()


def _stored_json(store_url: str, datasource_id: str, version: str) -> str:
    engine = sa.create_engine(store_url)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(
                "SELECT snapshot_json FROM nl2sql_schema_versions WHERE datasource_id = :d AND schema_version = :v"),
                {"d": datasource_id, "v": version}).scalar_one()
    finally:
        engine.dispose()


def test_implements_the_protocol(store: SqlSchemaStore) -> None:
    typed: SchemaStore = store
    assert typed is store


def test_first_registration_is_new(store: SqlSchemaStore) -> None:
    snap = snapshot()
    r = store.register_snapshot(snap)
    assert r.status == "new" and r.previous_version is None
    assert r.schema_version == f"20261130031522_{snap.fingerprint[:8]}"
    assert r.snapshot.schema_version == r.schema_version
    assert r.snapshot == snap.with_version(r.schema_version)
    assert store.get_snapshot("sales") == r.snapshot
    assert store.get_snapshot("sales", r.schema_version) == r.snapshot
    assert store.get_latest("sales") == r.snapshot


def test_stored_json_round_trips_losslessly(store: SqlSchemaStore, store_url: str) -> None:
    snap = snapshot()
    r = store.register_snapshot(snap)
    stored = _stored_json(store_url, "sales", r.schema_version)
    again = SchemaSnapshot.model_validate_json(stored)
    assert again == snap.with_version(r.schema_version)
    assert again.tables[0].columns[1].stats == customers().columns[1].stats
    assert again.captured_at == T0  # microseconds survive
    assert "créé_le" in stored  # stored as unicode, not escaped


def test_same_structure_and_docs_is_unchanged(store: SqlSchemaStore) -> None:
    first = store.register_snapshot(snapshot())
    later = snapshot(captured_at=T0 + timedelta(hours=3))
    again = store.register_snapshot(later)
    assert again.status == "unchanged"
    assert again.schema_version == first.schema_version == again.previous_version
    assert again.snapshot == first.snapshot  # the stored snapshot is returned, untouched
    assert len(store.list_versions("sales")) == 1


def test_comment_change_updates_metadata_of_the_same_version(store: SqlSchemaStore) -> None:
    first = store.register_snapshot(snapshot())
    documented = snapshot([orders(), view(), customers(comment="Buyers")], captured_at=T0 + timedelta(minutes=5))
    assert documented.fingerprint == first.snapshot.fingerprint
    r = store.register_snapshot(documented)
    assert r.status == "metadata_updated"
    assert r.schema_version == first.schema_version
    current = store.get_snapshot("sales")
    assert current.table("customers").comment == "Buyers"  # type: ignore[union-attr]
    assert current.schema_version == first.schema_version
    (info,) = store.list_versions("sales")
    assert info.metadata_hash == documented.metadata_hash
    assert info.captured_at == documented.captured_at
    assert info.updated_at >= info.registered_at
    assert store.register_snapshot(documented).status == "unchanged"


def test_new_structure_gets_a_new_later_version(store: SqlSchemaStore) -> None:
    a = store.register_snapshot(numbered(1))
    b = store.register_snapshot(numbered(2, captured_at=T0 + timedelta(minutes=1)))
    assert b.status == "new" and b.previous_version == a.schema_version
    assert b.schema_version > a.schema_version
    assert [v.schema_version for v in store.list_versions("sales")] == [a.schema_version, b.schema_version]
    assert [v.seq for v in store.list_versions("sales")] == [1, 2]
    assert store.get_snapshot("sales", a.schema_version).fingerprint == numbered(1).fingerprint


def test_reverting_to_an_older_structure_makes_a_new_latest_version(store: SqlSchemaStore) -> None:
    a = store.register_snapshot(numbered(1))
    store.register_snapshot(numbered(2))
    c = store.register_snapshot(numbered(1))
    assert c.status == "new"
    assert c.schema_version != a.schema_version
    assert c.schema_version.endswith(a.schema_version[-8:])
    assert store.get_snapshot("sales").schema_version == c.schema_version
    assert len(store.list_versions("sales")) == 3


def test_captures_within_one_second_neither_collide_nor_misorder(store: SqlSchemaStore) -> None:
    versions = [store.register_snapshot(numbered(i, captured_at=T0 + timedelta(microseconds=i))).schema_version
                for i in range(5)]
    assert len(set(versions)) == 5
    assert versions == sorted(versions)
    stamps = [parse_schema_version(v)[0] for v in versions]
    assert stamps == [T0.replace(microsecond=0) + timedelta(seconds=i) for i in range(5)]
    assert [v.schema_version for v in store.list_versions("sales")] == versions


def test_latest_is_the_last_registered_even_when_its_clock_is_behind(store: SqlSchemaStore) -> None:
    future = store.register_snapshot(numbered(1, captured_at=T0 + timedelta(days=365)))
    past = store.register_snapshot(numbered(2, captured_at=T0))
    assert past.schema_version > future.schema_version
    assert store.get_latest("sales").fingerprint == numbered(2).fingerprint  # type: ignore[union-attr]
    assert parse_schema_version(past.schema_version)[0] == parse_schema_version(future.schema_version)[0] + \
        timedelta(seconds=1)


def test_propose_version_is_a_pure_read(store: SqlSchemaStore) -> None:
    fp1, fp2 = numbered(1).fingerprint, numbered(2).fingerprint
    assert store.propose_version("sales", fp1, T0) == f"20261130031522_{fp1[:8]}"
    assert store.list_versions("sales") == []
    first = store.register_snapshot(numbered(1))
    assert store.propose_version("sales", fp1, T0 + timedelta(hours=1)) == first.schema_version
    proposed = store.propose_version("sales", fp2, T0)
    assert proposed == f"20261130031523_{fp2[:8]}"
    assert store.propose_version("sales", fp2, T0 + timedelta(hours=1)) == f"20261130041522_{fp2[:8]}"
    assert len(store.list_versions("sales")) == 1
    r = store.register_snapshot(numbered(2), proposed)
    assert r.status == "new" and r.schema_version == proposed


def test_register_with_a_requested_version(store: SqlSchemaStore) -> None:
    snap1, snap2 = numbered(1), numbered(2)
    v1 = f"20270101000000_{snap1.fingerprint[:8]}"
    assert store.register_snapshot(snap1, v1).schema_version == v1
    with pytest.raises(SchemaStoreError, match="does not match the snapshot's fingerprint"):
        store.register_snapshot(snap2, f"20280101000000_{snap1.fingerprint[:8]}")
    with pytest.raises(SchemaStoreError, match="not later than the latest version"):
        store.register_snapshot(snap2, f"20270101000000_{snap2.fingerprint[:8]}")
    with pytest.raises(SchemaStoreError, match="not a schema version"):
        store.register_snapshot(snap2, "latest")
    assert [v.schema_version for v in store.list_versions("sales")] == [v1]
    v2 = f"20270101000001_{snap2.fingerprint[:8]}"
    assert store.register_snapshot(snap2, v2).status == "new"
    # re-registering an existing (older) version's structure under that version is idempotent
    again = store.register_snapshot(snap1, v1)
    assert (again.status, again.schema_version) == ("unchanged", v1)
    assert store.get_latest("sales").schema_version == v2  # type: ignore[union-attr]


def test_a_stored_snapshot_registered_again_targets_its_own_version(store: SqlSchemaStore) -> None:
    first = store.register_snapshot(numbered(1))
    store.register_snapshot(numbered(2))
    fetched = store.get_snapshot("sales", first.schema_version)
    enriched = SchemaSnapshot.create(fetched.datasource, [
        t.model_copy(update={"description": f"about {t.name}"}) for t in fetched.tables
    ], fetched.captured_at).with_version(first.schema_version)
    r = store.register_snapshot(enriched)
    assert (r.status, r.schema_version) == ("metadata_updated", first.schema_version)
    assert store.get_snapshot("sales", first.schema_version).tables[0].description is not None
    assert len(store.list_versions("sales")) == 2


def test_requested_version_resolves_to_the_latest_with_the_same_structure(store: SqlSchemaStore) -> None:
    first = store.register_snapshot(numbered(1))
    other = f"20300101000000_{numbered(1).fingerprint[:8]}"
    r = store.register_snapshot(numbered(1), other)
    assert (r.status, r.schema_version) == ("unchanged", first.schema_version)
    assert len(store.list_versions("sales")) == 1


def test_requested_version_stored_with_another_structure_is_refused(store: SqlSchemaStore) -> None:
    real = numbered(1)
    v = store.register_snapshot(real).schema_version
    forged = SchemaSnapshot(datasource=real.datasource, tables=[Table(name="other")], captured_at=T0,
                            fingerprint=real.fingerprint[:8] + "f" * 56, metadata_hash=real.metadata_hash)
    with pytest.raises(SchemaStoreError, match="stored with another structure"):
        store.register_snapshot(forged, v)


def test_unknown_datasource_and_version(store: SqlSchemaStore) -> None:
    assert store.get_latest("nope") is None
    assert store.list_versions("nope") == []
    with pytest.raises(SchemaVersionNotFoundError, match="'nope' has no any version|'nope'"):
        store.get_snapshot("nope")
    store.register_snapshot(snapshot())
    with pytest.raises(SchemaVersionNotFoundError) as err:
        store.get_snapshot("sales", "20000101000000_deadbeef")
    assert err.value.datasource_id == "sales" and err.value.schema_version == "20000101000000_deadbeef"


def test_datasources_and_tenants(store: SqlSchemaStore) -> None:
    store.register_snapshot(snapshot(ds_id="sales", tenant="acme"))
    store.register_snapshot(snapshot(ds_id="hr", tenant="globex"))
    store.register_snapshot(snapshot(ds_id="crm", tenant="acme"))
    assert store.list_datasources() == ["crm", "hr", "sales"]
    assert store.list_datasources("acme") == ["crm", "sales"]
    assert store.list_datasources("nobody") == []
    assert store.datasource_tenant("hr") == "globex"
    assert store.datasource_tenant("nope") is None
    # the tenant is documentation: moving a datasource is a metadata update of the latest version
    moved = store.register_snapshot(snapshot(ds_id="hr", tenant="acme"))
    assert moved.status == "metadata_updated"
    assert store.datasource_tenant("hr") == "acme"
    assert store.list_datasources("globex") == []
    assert [v.tenant for v in store.list_versions("hr")] == ["acme"]


def test_retention_evicts_oldest_and_reports_them(store: SqlSchemaStore) -> None:
    versions = [store.register_snapshot(numbered(i)).schema_version for i in range(5)]
    assert store.apply_retention("sales", 10) == []
    assert store.apply_retention("sales", 2) == versions[:3]
    assert [v.schema_version for v in store.list_versions("sales")] == versions[3:]
    with pytest.raises(SchemaVersionNotFoundError):
        store.get_snapshot("sales", versions[0])
    assert store.apply_retention("sales", 2) == []
    nxt = store.register_snapshot(numbered(99))
    assert nxt.schema_version > versions[-1]
    assert [v.seq for v in store.list_versions("sales")] == [4, 5, 6]
    assert store.apply_retention("unknown", 1) == []


@pytest.mark.parametrize("keep", [0, -1, 1.5, True])
def test_retention_needs_at_least_one_version(store: SqlSchemaStore, keep: object) -> None:
    store.register_snapshot(snapshot())
    with pytest.raises(ConfigError, match="keep"):
        store.apply_retention("sales", keep)  # type: ignore[arg-type]
    assert len(store.list_versions("sales")) == 1


def test_retention_is_per_datasource(store: SqlSchemaStore) -> None:
    for i in range(3):
        store.register_snapshot(numbered(i, ds_id="a"))
        store.register_snapshot(numbered(i, ds_id="b"))
    assert len(store.apply_retention("a", 1)) == 2
    assert len(store.list_versions("b")) == 3
    # every datasource's versions in one read: the same as asking for each
    assert store.all_versions() == {"a": store.list_versions("a"), "b": store.list_versions("b")}
    assert [v.seq for v in store.all_versions()["b"]] == [1, 2, 3]


def test_persists_across_store_instances(store_url: str) -> None:
    first = SqlSchemaStore(store_url)
    v = first.register_snapshot(snapshot()).schema_version
    first.close()
    second = SqlSchemaStore(store_url)
    try:
        assert second.get_snapshot("sales").schema_version == v
        assert second.register_snapshot(snapshot()).status == "unchanged"
    finally:
        second.close()


def test_version_info_fields(store: SqlSchemaStore) -> None:
    before = datetime.now(UTC) - timedelta(seconds=1)
    r = store.register_snapshot(snapshot())
    (info,) = store.list_versions("sales")
    assert info.datasource_id == "sales" and info.schema_version == r.schema_version and info.seq == 1
    assert info.fingerprint == r.snapshot.fingerprint and info.metadata_hash == r.snapshot.metadata_hash
    assert info.captured_at == T0 and info.tenant == "default"
    assert before <= info.registered_at <= datetime.now(UTC) + timedelta(seconds=1)
    assert info.registered_at.tzinfo is not None


def test_corrupt_stored_snapshot_is_a_clear_error(store: SqlSchemaStore, store_url: str) -> None:
    v = store.register_snapshot(snapshot()).schema_version
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE nl2sql_schema_versions SET snapshot_json = '{\"broken\": 1}'"))
    engine.dispose()
    with pytest.raises(SchemaStoreError, match=f"'sales' version '{v}' is unreadable"):
        store.get_snapshot("sales")


# -- construction, defaults and errors (SQLite specific) --------------------------------------

def test_default_store_is_a_sqlite_file_in_nl2sql_home(nl2sql_home: Path) -> None:
    store = build_schema_store(Settings.from_env())
    try:
        assert not (nl2sql_home / "schema_store.db").exists()  # nothing happens before first use
        store.register_snapshot(snapshot())
        assert (nl2sql_home / "schema_store.db").exists()
    finally:
        store.close()


def test_schema_store_url_creates_missing_folders(nl2sql_home: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "deep" / "er" / "store.db"
    monkeypatch.setenv("SCHEMA_STORE_URL", f"sqlite:///{target}")
    store = build_schema_store(Settings.from_env())
    try:
        assert store.list_datasources() == []
        assert target.exists()
    finally:
        store.close()


def test_in_memory_store_works_for_fast_tests() -> None:
    store = SqlSchemaStore("sqlite://")
    try:
        r = store.register_snapshot(snapshot())
        assert store.get_snapshot("sales") == r.snapshot
    finally:
        store.close()


def test_unreachable_store_names_it_without_the_password() -> None:
    store = SqlSchemaStore("postgresql+psycopg2://bob:Sup3rS3cret@127.0.0.1:1/nl2sql")
    with pytest.raises(SchemaStoreError) as err:
        store.list_datasources()
    text = str(err.value)
    assert "Sup3rS3cret" not in text and "Sup3rS3cret" not in repr(err.value)
    assert "postgresql+psycopg2://bob:***@127.0.0.1:1/nl2sql" in text
    assert err.value.store == "postgresql+psycopg2://bob:***@127.0.0.1:1/nl2sql"
    assert "Sup3rS3cret" not in repr(store)


@pytest.mark.parametrize("url", ["not a url", "nosuchdialect://u:pw123@h/db"])
def test_bad_store_url_is_a_clear_error(url: str) -> None:
    with pytest.raises(SchemaStoreError, match="schema store") as err:
        SqlSchemaStore(url)
    assert "pw123" not in str(err.value)


def test_unwritable_sqlite_location_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    store = SqlSchemaStore(f"sqlite:///{blocker / 'sub' / 'store.db'}")
    with pytest.raises(SchemaStoreError, match="cannot create the folder"):
        store.register_snapshot(snapshot())


def test_rich_tables_fixture_is_three_tables() -> None:
    assert len(rich_tables()) == 3
