"""Real processes registering into one SchemaStore at once, on SQLite and on PostgreSQL.

Four spawned processes × 20 registrations per scenario (one snapshot for all, a distinct
structure each time, a random mix of structures and descriptions), all captured within the
same second, start together behind a barrier on a store whose tables do not exist yet. Afterwards the history
must be a clean sequence: no duplicate versions, no two consecutive versions with the same
structure, versions in registration order, every returned version stored with its structure.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import random
from pathlib import Path

import pytest
import sqlalchemy as sa

from nl2sql_assets.schema.fingerprint import parse_schema_version
from nl2sql_assets.schema.models import SchemaSnapshot
from nl2sql_assets.schema.store import SqlSchemaStore
from tests.integration.test_store_postgres import pg_store_url
from tests.unit.schema.builders import T0, numbered

pytestmark = pytest.mark.slow

WORKERS = 4
REGISTRATIONS = 20
MODES = ("same", "distinct", "mixed")  # each mode uses its own datasource id, one after the other

Result = tuple[str, str, str, str]  # version, status, fingerprint, metadata hash


def _snapshot_for(mode: str, worker: int, k: int, rng: random.Random) -> SchemaSnapshot:
    if mode == "same":
        return numbered(0, ds_id=mode)
    if mode == "distinct":
        return numbered(worker * 1000 + k, ds_id=mode)
    # mixed: a small pool of structures and of descriptions, so every path (new, metadata
    # update, unchanged, revert to an older structure) is taken concurrently
    base = numbered(rng.randrange(3), ds_id=mode)
    described = base.datasource.model_copy(update={"description": f"doc {rng.randrange(2)}"})
    return SchemaSnapshot.create(described, base.tables, T0)


def _worker(url: str, worker: int, barrier: object, out: object) -> None:
    """Runs in a spawned process: per mode, wait for the others, then register REGISTRATIONS snapshots."""
    rng = random.Random(worker)
    store = SqlSchemaStore(url)
    results: dict[str, list[Result]] = {mode: [] for mode in MODES}
    try:
        for mode in MODES:
            barrier.wait(timeout=60)  # type: ignore[attr-defined]
            for k in range(REGISTRATIONS):
                snap = _snapshot_for(mode, worker, k, rng)
                r = store.register_snapshot(snap)
                results[mode].append((r.schema_version, r.status, snap.fingerprint, snap.metadata_hash))
        out.put((worker, results, None))  # type: ignore[attr-defined]
    except BaseException as exc:  # noqa: BLE001 - report to the parent, which fails the test
        out.put((worker, results, f"{type(exc).__name__}: {exc}"))  # type: ignore[attr-defined]
    finally:
        store.close()


def _run_workers(url: str) -> dict[str, list[Result]]:
    """Every worker's results per mode, worker 0's first."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, w, barrier, out)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    reports = []
    try:
        for _ in procs:
            reports.append(out.get(timeout=180))
    except queue.Empty:
        pytest.fail(f"only {len(reports)} of {WORKERS} workers reported within 180 s")
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    errors = [f"worker {w}: {err}" for w, _, err in reports if err]
    assert not errors, errors
    assert all(p.exitcode == 0 for p in procs)
    reports.sort(key=lambda rep: rep[0])
    return {mode: [r for _, results, _ in reports for r in results[mode]] for mode in MODES}


def _check_history(store: SqlSchemaStore, datasource_id: str, results: list[Result]) -> list[str]:
    """Assert the invariants of a clean history; return the versions, oldest first."""
    infos = store.list_versions(datasource_id)
    versions = [i.schema_version for i in infos]
    assert len(versions) == len(set(versions)), "duplicate versions"
    assert [i.seq for i in infos] == list(range(1, len(infos) + 1)), "gaps or duplicates in seq"
    assert versions == sorted(versions), "string order differs from registration order"
    stamps = [parse_schema_version(v)[0] for v in versions]
    assert all(a < b for a, b in zip(stamps, stamps[1:], strict=False)), "two versions share a second"
    fps = [i.fingerprint for i in infos]
    assert all(a != b for a, b in zip(fps, fps[1:], strict=False)), "consecutive versions with one structure"
    by_version = {i.schema_version: i for i in infos}
    for version, _, fp, _ in results:
        assert by_version[version].fingerprint == fp, f"{version} stored with another structure"
        assert version.endswith(fp[:8])
    assert sum(status == "new" for _, status, _, _ in results) == len(versions)
    for info in infos:
        snap = store.get_snapshot(datasource_id, info.schema_version)
        assert snap.schema_version == info.schema_version and snap.fingerprint == info.fingerprint
        assert snap.metadata_hash == info.metadata_hash
    assert store.get_latest(datasource_id).schema_version == versions[-1]  # type: ignore[union-attr]
    return versions


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.server)])
def fresh_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL whose tables do not exist yet (the workers race to create them)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'schema_store.db'}"
    return pg_store_url(request.getfixturevalue("postgres_url"), request.getfixturevalue("pg_schema"))


def test_four_processes_registering_at_once(fresh_store_url: str) -> None:
    by_mode = _run_workers(fresh_store_url)
    assert all(len(rs) == WORKERS * REGISTRATIONS for rs in by_mode.values())
    store = SqlSchemaStore(fresh_store_url)
    try:
        # the same snapshot everywhere: exactly one version, registered once as new
        same = by_mode["same"]
        versions = _check_history(store, "same", same)
        assert len(versions) == 1 and {r[0] for r in same} == {versions[0]}
        assert [r[1] for r in same].count("new") == 1 and {r[1] for r in same} == {"new", "unchanged"}

        # a distinct structure per registration: every one gets its own version
        distinct = by_mode["distinct"]
        versions = _check_history(store, "distinct", distinct)
        assert len(versions) == WORKERS * REGISTRATIONS
        assert all(r[1] == "new" for r in distinct) and sorted(r[0] for r in distinct) == versions
        for w in range(WORKERS):  # each worker's registrations keep its own order in the history
            own = [r[0] for r in distinct[w * REGISTRATIONS:(w + 1) * REGISTRATIONS]]
            assert own == sorted(own)

        # a few structures and descriptions, in random order: still a clean history
        mixed = by_mode["mixed"]
        versions = _check_history(store, "mixed", mixed)
        assert 1 <= len(versions) <= WORKERS * REGISTRATIONS
        assert "new" in {r[1] for r in mixed}
        assert {r[1] for r in mixed} <= {"new", "unchanged", "metadata_updated"}

        assert store.list_datasources() == sorted(MODES)
    finally:
        store.close()
    engine = sa.create_engine(fresh_store_url)
    try:
        names = set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert names == {"nl2sql_schema_datasources", "nl2sql_schema_versions"}
