"""The drift check: has a datasource's schema changed since its latest registered version?

Reads structure only (``adapter.read_structure()``: no statistics, no row scans), computes
the structural fingerprint and the metadata hash exactly as a full snapshot would
(:func:`~nl2sql_assets.adapters.structure.assemble_snapshot`: the datasource info, its dbt
project's documentation, :meth:`SchemaSnapshot.create`), and compares them with the
latest version in the SchemaStore. Nothing is registered or written. The ``drift`` command,
the ``index`` command and the Dagster ``schema_drift_sensor`` all call :func:`check_drift`.

Each datasource is checked on its own: one that cannot be read is reported as ``failed``
(with a message that never contains its password) and the others proceed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.adapters import open_adapter
from nl2sql_assets.adapters.failures import secrets_of
from nl2sql_assets.adapters.structure import assemble_snapshot
from nl2sql_assets.config import DatasourceConfig, redact_text
from nl2sql_assets.errors import DatasourceError, Nl2SqlError
from nl2sql_assets.schema.diff import SchemaDiff, diff_snapshots
from nl2sql_assets.schema.models import SchemaSnapshot
from nl2sql_assets.schema.protocol import SchemaStore

logger = logging.getLogger(__name__)

DriftStatus = Literal["new", "unchanged", "changed", "metadata_changed", "failed"]

#: Statuses whose datasource needs (re)indexing.
ACTIONABLE: frozenset[str] = frozenset({"new", "changed", "metadata_changed"})
#: A proposed version's timestamp is the check's clock; registration sets the real one.
_TIMESTAMP_NOTE = "; the timestamp is set when the version is registered"


class DriftResult(BaseModel):
    """The outcome of one datasource's drift check.

    Attributes:
        status: ``new`` (never registered), ``unchanged``, ``changed`` (the structure moved:
            a new version is due), ``metadata_changed`` (same structure, different comments,
            descriptions, synonyms or datasource docs: the current version is refreshed) or
            ``failed`` (``error`` says why).
        current_version: the latest registered version, None when there is none.
        proposed_version: the version a registration would mint now (``new`` and ``changed``).
        fingerprint, metadata_hash: of the live structure (None when ``failed``).
        summary, diff_markdown, diff_items: the structural diff against the current version
            (``changed``), or the documentary changes (``metadata_changed``).
    """

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    tenant: str
    status: DriftStatus
    current_version: str | None = None
    proposed_version: str | None = None
    fingerprint: str | None = None
    metadata_hash: str | None = None
    table_count: int | None = None
    summary: str | None = None
    diff_markdown: str | None = None
    diff_items: list[str] = Field(default_factory=list)
    error: str | None = None
    checked_at: datetime
    duration_ms: float = 0.0

    @property
    def needs_indexing(self) -> bool:
        return self.status in ACTIONABLE

    @property
    def target_version(self) -> str | None:
        """The version to materialize: the proposed one for new structures, else the current one."""
        if self.status in ("new", "changed"):
            return self.proposed_version
        if self.status == "metadata_changed":
            return self.current_version
        return None

    def describe(self) -> str:
        """One human line, e.g. ``crm: new (would be 2026..._3fa9c2e1; the timestamp is set when the
        version is registered)``: only the hash part of a proposed version is final."""
        if self.status == "new":
            return f"{self.datasource_id}: new (would be {self.proposed_version}{_TIMESTAMP_NOTE})"
        if self.status == "unchanged":
            return f"{self.datasource_id}: unchanged ({self.current_version})"
        if self.status == "changed":
            return (f"{self.datasource_id}: changed: {self.summary} "
                    f"({self.current_version} -> would be {self.proposed_version}{_TIMESTAMP_NOTE})")
        if self.status == "metadata_changed":
            return f"{self.datasource_id}: metadata changed: {self.summary} ({self.current_version}, refreshed in place)"
        return f"{self.datasource_id}: failed: {self.error}"


@dataclass(frozen=True)
class _LiveRead:
    """What reading one datasource produced: a structure-only snapshot, or an error text."""

    snapshot: SchemaSnapshot | None = None
    error: str | None = None
    seconds: float = 0.0


def read_live_structure(config: DatasourceConfig, captured_at: datetime) -> SchemaSnapshot:
    """A structure-only snapshot of the live database (no statistics, no row scans).

    Its ``fingerprint`` and ``metadata_hash`` equal those of a full snapshot of the same
    database (both are :func:`assemble_snapshot` over the same tables: a dbt manifest counts too).

    Raises:
        DatasourceError: the database (or its dbt manifest) cannot be read (message without the password).
        ConfigError: a ``${VAR}`` in the URL is not set.
    """
    adapter = open_adapter(config)
    try:
        tables = adapter.read_structure()
        return assemble_snapshot(config, adapter.dialect, tables, captured_at, [])
    finally:
        adapter.close()


def _secrets(config: DatasourceConfig) -> list[str]:
    found = secrets_of(config.url)
    try:
        found += secrets_of(config.resolved_url())
    except Nl2SqlError:
        pass
    return [s for s in found if s]


def _read(config: DatasourceConfig, captured_at: datetime) -> _LiveRead:
    started = time.perf_counter()
    try:
        snapshot = read_live_structure(config, captured_at)
    except DatasourceError as exc:
        return _LiveRead(error=redact_text(exc.reason, _secrets(config)), seconds=time.perf_counter() - started)
    except Nl2SqlError as exc:
        return _LiveRead(error=redact_text(str(exc), _secrets(config)), seconds=time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 - one datasource must never stop the others
        text = " ".join(str(exc).split()) or type(exc).__name__
        return _LiveRead(error=redact_text(f"{type(exc).__name__}: {text}"[:400], _secrets(config)),
                         seconds=time.perf_counter() - started)
    return _LiveRead(snapshot=snapshot, seconds=time.perf_counter() - started)


def _without_metadata(diff: SchemaDiff) -> SchemaDiff:
    return diff.model_copy(update={"metadata_changed": False, "metadata_changes": []})


def compare(config: DatasourceConfig, live: SchemaSnapshot, latest: SchemaSnapshot | None,
            store: SchemaStore, *, now: datetime, duration_ms: float = 0.0) -> DriftResult:
    """Classify a live structure against the latest registered snapshot (no I/O on the database)."""
    base = {
        "datasource_id": config.id, "tenant": config.tenant, "fingerprint": live.fingerprint,
        "metadata_hash": live.metadata_hash, "table_count": len(live.tables), "checked_at": now,
        "duration_ms": round(duration_ms, 3),
    }
    if latest is None:
        return DriftResult(status="new", proposed_version=store.propose_version(config.id, live.fingerprint, now),
                           summary=f"{len(live.tables)} tables", **base)
    current = latest.schema_version
    if latest.fingerprint != live.fingerprint:
        diff = diff_snapshots(latest, live)
        if latest.enrichment is not None and latest.enrichment.status == "enriched":
            diff = _without_metadata(diff)  # LLM-written text is not a documentation change
        return DriftResult(status="changed", current_version=current,
                           proposed_version=store.propose_version(config.id, live.fingerprint, now),
                           summary=diff.summary(), diff_markdown=diff.to_markdown(),
                           diff_items=diff.structural_items(), **base)
    if latest.source_metadata_hash != live.metadata_hash:
        diff = diff_snapshots(latest, live)
        items = [f"{m.target} {m.field}" for m in diff.metadata_changes]
        if latest.enrichment is not None and latest.enrichment.status == "enriched":
            # the stored text includes LLM descriptions; only the hash comparison is meaningful
            items = []
        summary = f"{len(items)} documentation item{'s' if len(items) != 1 else ''} changed" if items \
            else "documentation changed"
        return DriftResult(status="metadata_changed", current_version=current, summary=summary,
                           diff_markdown=diff.to_markdown() if items else summary, diff_items=items, **base)
    return DriftResult(status="unchanged", current_version=current, **base)


def check_drift(configs: Sequence[DatasourceConfig], store: SchemaStore, *, now: datetime | None = None,
                max_workers: int = 4) -> list[DriftResult]:
    """Check every datasource for drift against its latest registered version.

    Databases are read in parallel (up to ``max_workers``: an unreachable server's connect
    timeout does not serialize the rest); the store is consulted afterwards. Nothing is
    written anywhere.

    Args:
        configs: the datasources to check (e.g. :func:`nl2sql_assets.config.load_datasources`).
        store: the SchemaStore holding registered versions.
        now: the check time (UTC); proposed versions are based on it. Default: the clock.
        max_workers: how many databases to read at once.

    Returns:
        One :class:`DriftResult` per config, in the given order. A datasource that cannot be
        read, or whose stored snapshot cannot be loaded, is ``failed``; the others proceed.
    """
    now = now or datetime.now(UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    configs = list(configs)
    if not configs:
        return []
    workers = max(1, min(max_workers, len(configs)))
    if workers == 1:
        reads = [_read(c, now) for c in configs]
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="drift") as pool:
            reads = list(pool.map(lambda c: _read(c, now), configs))

    results: list[DriftResult] = []
    for config, read in zip(configs, reads, strict=True):
        ms = read.seconds * 1000
        if read.snapshot is None:
            result = DriftResult(datasource_id=config.id, tenant=config.tenant, status="failed",
                                 error=read.error, checked_at=now, duration_ms=round(ms, 3))
        else:
            try:
                latest = store.get_latest(config.id)
                result = compare(config, read.snapshot, latest, store, now=now, duration_ms=ms)
            except Nl2SqlError as exc:
                result = DriftResult(datasource_id=config.id, tenant=config.tenant, status="failed",
                                     error=redact_text(str(exc), _secrets(config)), checked_at=now,
                                     fingerprint=read.snapshot.fingerprint, duration_ms=round(ms, 3))
        if result.status == "failed":
            logger.warning("drift: %s failed: %s", config.id, result.error)
        else:
            logger.info("drift: %s %s (%d tables, %.0f ms)", config.id, result.status, result.table_count or 0, ms)
        results.append(result)
    return results
