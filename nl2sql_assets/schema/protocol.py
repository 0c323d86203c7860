"""The SchemaStore seam: the versioned, authoritative record of every datasource's schema.

Retrieval resolves tables and columns from here (the vector store is never authoritative),
the drift check compares against the latest version, and retention tells the vector store
which versions' chunks to delete. :class:`nl2sql_assets.schema.store.SqlSchemaStore` is the
implementation; code against :class:`SchemaStore`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from nl2sql_assets.schema.models import SchemaSnapshot

RegisterStatus = Literal["new", "metadata_updated", "unchanged"]


class RegisterResult(BaseModel):
    """What :meth:`SchemaStore.register_snapshot` did.

    Attributes:
        schema_version: the version the snapshot's structure is registered under.
        status: ``new`` (a new version), ``metadata_updated`` (same structure, the stored
            documentation was replaced) or ``unchanged``.
        previous_version: the datasource's latest version before this call (None for the
            first registration). Equal to ``schema_version`` when the latest was refreshed.
        snapshot: the snapshot as stored now, with ``schema_version`` set.
    """

    model_config = ConfigDict(frozen=True)

    schema_version: str
    status: RegisterStatus
    previous_version: str | None
    snapshot: SchemaSnapshot


class VersionInfo(BaseModel):
    """One stored version, without the snapshot body.

    ``captured_at`` is the stored snapshot's capture time (it moves forward when a metadata
    update replaces the snapshot), ``registered_at`` when the version was first stored,
    ``updated_at`` its last metadata update; ``seq`` is the registration sequence (the
    highest ``seq`` is the latest version).
    """

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    schema_version: str
    fingerprint: str
    metadata_hash: str
    captured_at: datetime
    registered_at: datetime
    updated_at: datetime
    tenant: str
    seq: int


class SchemaStore(Protocol):
    """Versioned snapshots per datasource. "Latest" is the highest registration sequence."""

    def propose_version(self, datasource_id: str, fingerprint: str, captured_at: datetime) -> str:
        """The version a snapshot with ``fingerprint`` would get now (pure read)."""
        ...

    def register_snapshot(self, snapshot: SchemaSnapshot, schema_version: str | None = None) -> RegisterResult:
        """Store a snapshot idempotently; see :class:`RegisterResult`."""
        ...

    def get_snapshot(self, datasource_id: str, schema_version: str | None = None) -> SchemaSnapshot:
        """A stored snapshot (None: the latest). Raises SchemaVersionNotFoundError."""
        ...

    def get_latest(self, datasource_id: str) -> SchemaSnapshot | None:
        ...

    def list_versions(self, datasource_id: str) -> list[VersionInfo]:
        """Oldest to newest."""
        ...

    def all_versions(self) -> dict[str, list[VersionInfo]]:
        """Every datasource's versions, oldest to newest, in one read (status pages list them all)."""
        ...

    def list_datasources(self, tenant: str | None = None) -> list[str]:
        ...

    def datasource_tenant(self, datasource_id: str) -> str | None:
        ...

    def apply_retention(self, datasource_id: str, keep: int) -> list[str]:
        """Delete all but the newest ``keep`` versions; return the evicted ones, oldest first."""
        ...

    def close(self) -> None:
        ...
