"""The schema snapshot: what a datasource's structure and statistics looked like at one moment.

Structure (tables, columns, types, nullability, keys) is what the fingerprint covers;
descriptions, comments, synonyms and PII flags are metadata (hashed separately); statistics
are neither. Every list is kept in a canonical order so that JSON round-trips are lossless
and hashes are stable.

The hashing lives in :mod:`nl2sql_assets.schema.fingerprint`, which this module imports;
it names these models in annotations only, so the import runs one way.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from nl2sql_assets.schema.fingerprint import canonical_tables, compute_fingerprint, compute_metadata_hash

TypeFamily = Literal[
    "integer", "float", "decimal", "text", "boolean", "date", "datetime", "time",
    "interval", "binary", "json", "uuid", "array", "other",
]
StatStatus = Literal["exact", "sampled", "estimated", "skipped"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ColumnStats(_Frozen):
    """Statistics of one column. ``status`` says how they were obtained and ``note`` why."""

    null_fraction: float | None = None
    distinct_count: int | None = None
    min_value: str | None = None
    max_value: str | None = None
    top_values: list[str] = Field(default_factory=list)
    status: StatStatus = "exact"
    sample_size: int | None = None
    note: str | None = None


class Column(_Frozen):
    name: str
    ordinal: int = 0
    declared_type: str = ""
    type_family: TypeFamily = "other"
    nullable: bool = True
    default: str | None = None
    comment: str | None = None
    description: str | None = None
    is_primary_key: bool = False
    is_foreign_key: bool = False
    stats: ColumnStats | None = None
    synonyms: list[str] = Field(default_factory=list)
    pii: bool = False
    pii_kind: str | None = None

    @property
    def text(self) -> str | None:
        """The best human description: an explicit description, else the database comment."""
        return self.description or self.comment


class ForeignKey(_Frozen):
    """A foreign key as ordered column pairs into ``ref_table``."""

    name: str | None = None
    columns: list[str]
    ref_schema: str | None = None
    ref_table: str
    ref_columns: list[str]
    # where the join comes from: a constraint the database declares, a dbt ``relationships``
    # test, or inference from names/types/values; only declared keys are part of the fingerprint
    source: Literal["foreign_key", "dbt", "inferred"] = "foreign_key"

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return list(zip(self.columns, self.ref_columns, strict=False))


class UniqueConstraint(_Frozen):
    name: str | None = None
    columns: list[str]


class Table(_Frozen):
    schema_name: str | None = None
    name: str
    kind: Literal["table", "view"] = "table"
    comment: str | None = None
    description: str | None = None
    primary_key: list[str] = Field(default_factory=list)
    unique_constraints: list[UniqueConstraint] = Field(default_factory=list)
    foreign_keys: list[ForeignKey] = Field(default_factory=list)
    row_count: int | None = None
    row_count_status: StatStatus = "skipped"
    stats_note: str | None = None
    # when the statistics were read: a later version may carry them over while they are young
    stats_read_at: datetime | None = None
    columns: list[Column] = Field(default_factory=list)

    @property
    def qualified_name(self) -> str:
        """``schema.table``, or ``table`` where the database has no schema level."""
        return f"{self.schema_name}.{self.name}" if self.schema_name else self.name

    @property
    def text(self) -> str | None:
        return self.description or self.comment

    def column(self, name: str) -> Column | None:
        for col in self.columns:
            if col.name == name:
                return col
        return None


class MetricDefinition(_Frozen):
    name: str
    definition: str
    grain: str | None = None
    description: str | None = None


class DatasourceInfo(_Frozen):
    id: str
    dialect: str
    description: str | None = None
    domains: list[str] = Field(default_factory=list)
    example_questions: list[str] = Field(default_factory=list)
    tenant: str = "default"
    metrics: list[MetricDefinition] = Field(default_factory=list)
    # The schema that tables with ``schema_name=None`` live in (SQLite ``main``, a MySQL database).
    default_schema: str | None = None


class EnrichmentRecord(_Frozen):
    """How a snapshot was enriched. ``source_metadata_hash`` is the hash before enrichment:
    drift checks compare against it, so LLM text never looks like a documentation change."""

    status: Literal["off", "enriched", "unavailable", "failed"]
    model: str | None = None
    source_metadata_hash: str
    tables_described: int = 0
    columns_described: int = 0
    synonyms_added: int = 0
    reason: str | None = None


class SchemaSnapshot(_Frozen):
    """A datasource's schema at ``captured_at``.

    Build one with :meth:`create`, which sorts into canonical order and computes the
    structural ``fingerprint`` and the ``metadata_hash``. ``schema_version`` is set by the
    SchemaStore when the snapshot is registered.
    """

    datasource: DatasourceInfo
    tables: list[Table]
    captured_at: datetime
    fingerprint: str
    metadata_hash: str
    schema_version: str | None = None
    warnings: list[str] = Field(default_factory=list)
    enrichment: EnrichmentRecord | None = None

    @field_validator("captured_at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    @classmethod
    def create(cls, datasource: DatasourceInfo, tables: list[Table], captured_at: datetime,
               warnings: list[str] | None = None) -> SchemaSnapshot:
        """The snapshot in canonical order, with its fingerprint and metadata hash computed."""
        ordered = canonical_tables(tables)
        return cls(
            datasource=datasource,
            tables=ordered,
            captured_at=captured_at,
            fingerprint=compute_fingerprint(ordered),
            metadata_hash=compute_metadata_hash(datasource, ordered),
            warnings=list(warnings or []),
        )

    def with_version(self, schema_version: str) -> SchemaSnapshot:
        return self.model_copy(update={"schema_version": schema_version})

    def table(self, name: str, schema_name: str | None = None) -> Table | None:
        """Find a table by name (and schema); an exact match wins over a case-insensitive one."""
        candidates = [t for t in self.tables if schema_name is None or t.schema_name == schema_name]
        for t in candidates:
            if t.name == name or t.qualified_name == name:
                return t
        lowered = name.lower()
        for t in candidates:
            if t.name.lower() == lowered or t.qualified_name.lower() == lowered:
                return t
        return None

    @property
    def source_metadata_hash(self) -> str:
        """The metadata hash of the database's own documentation, before any LLM enrichment."""
        return self.enrichment.source_metadata_hash if self.enrichment else self.metadata_hash

    @property
    def datasource_id(self) -> str:
        return self.datasource.id

    @property
    def column_count(self) -> int:
        return sum(len(t.columns) for t in self.tables)

    @property
    def foreign_key_count(self) -> int:
        return sum(len(t.foreign_keys) for t in self.tables)
