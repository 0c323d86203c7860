"""From what a catalog query returns to :class:`Table` models, the same way for every adapter.

Each adapter reads its catalog into :class:`RawTable` records (plain, mutable, cheap);
:func:`build_tables` turns them into frozen models in one pass, applying what every adapter
must apply identically: 1-based ordinals, type families, PK/FK flags, the configured
annotations (descriptions and synonyms) and name-based PII flags. Doing it once, at
construction, keeps the drift check (``read_structure``) and the full snapshot in agreement
and avoids copying 20,000 column models.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from nl2sql_assets.adapters.base import datasource_info
from nl2sql_assets.adapters.pii import pii_kind_from_name, recorded_value_kind
from nl2sql_assets.adapters.types import type_family
from nl2sql_assets.config import Annotations, DatasourceConfig
from nl2sql_assets.dbt.apply import apply_dbt
from nl2sql_assets.schema.models import SchemaSnapshot, Table, TypeFamily


@dataclass
class RawColumn:
    name: str
    declared_type: str
    nullable: bool = True
    default: str | None = None
    comment: str | None = None


@dataclass
class RawForeignKey:
    name: str | None
    columns: list[str]
    ref_schema: str | None
    ref_table: str
    ref_columns: list[str]


@dataclass
class RawTable:
    schema_name: str | None
    name: str
    kind: str = "table"
    comment: str | None = None
    columns: list[RawColumn] = field(default_factory=list)
    primary_key: list[str] = field(default_factory=list)
    uniques: list[tuple[str | None, list[str]]] = field(default_factory=list)
    foreign_keys: list[RawForeignKey] = field(default_factory=list)


def clean_comment(text: object) -> str | None:
    """A database comment, or None when it is missing or blank.

    >>> clean_comment("  Orders placed  "), clean_comment(""), clean_comment(None)
    ('Orders placed', None, None)
    """
    if text is None:
        return None
    value = str(text).strip()
    return value or None


class _AnnotationIndex:
    """Lookups into the configured annotations: exact key first, then case-insensitive."""

    def __init__(self, annotations: Annotations) -> None:
        self.tables = annotations.tables
        self.columns = annotations.columns
        self.synonyms = annotations.synonyms
        self.tables_ci = {k.lower(): v for k, v in annotations.tables.items()}
        self.columns_ci = {k.lower(): v for k, v in annotations.columns.items()}
        self.synonyms_ci = {k.lower(): v for k, v in annotations.synonyms.items()}

    @staticmethod
    def _find(exact: dict[str, object], ci: dict[str, object], keys: list[str]) -> object | None:
        for key in keys:
            if key in exact:
                return exact[key]
        for key in keys:
            hit = ci.get(key.lower())
            if hit is not None:
                return hit
        return None

    def table(self, schema: str | None, name: str) -> str | None:
        keys = [f"{schema}.{name}", name] if schema else [name]
        hit = self._find(self.tables, self.tables_ci, keys)  # type: ignore[arg-type]
        return clean_comment(hit)

    def column(self, schema: str | None, table: str, column: str) -> tuple[str | None, list[str]]:
        keys = [f"{schema}.{table}.{column}", f"{table}.{column}"] if schema else [f"{table}.{column}"]
        description = clean_comment(self._find(self.columns, self.columns_ci, keys))  # type: ignore[arg-type]
        synonyms = self._find(self.synonyms, self.synonyms_ci, keys)  # type: ignore[arg-type]
        return description, sorted({str(s) for s in synonyms}) if synonyms else []


def build_tables(raw_tables: Iterable[RawTable], annotations: Annotations | None = None) -> list[Table]:
    """Frozen :class:`Table` models from raw catalog records.

    Args:
        raw_tables: what an adapter read, in any order.
        annotations: the datasource's configured descriptions and synonyms (overlay; database
            comments stay in ``comment``).

    Returns:
        Tables with 1-based column ordinals, type families, key flags, descriptions, synonyms
        and name-based PII flags. Primary-key columns are never nullable (SQLite allows NULL
        in a non-integer primary key by an old bug; no query should rely on it). Statistics
        are left empty.
    """
    index = _AnnotationIndex(annotations or Annotations())
    has_annotations = bool(index.tables or index.columns or index.synonyms)
    families: dict[str, TypeFamily] = {}  # wide schemas repeat types and names: classify each once
    kinds: dict[tuple[str, str], str | None] = {}
    out: list[Table] = []
    for raw in raw_tables:
        fk_columns = {c for fk in raw.foreign_keys for c in fk.columns}
        pk = set(raw.primary_key)
        columns: list[dict[str, object]] = []
        for ordinal, col in enumerate(raw.columns, start=1):
            declared = col.declared_type or ""
            family = families.get(declared)
            if family is None:
                family = families[declared] = type_family(declared)
            if (col.name, family) in kinds:
                kind = kinds[(col.name, family)]
            else:
                kind = kinds[(col.name, family)] = pii_kind_from_name(col.name, family)
            description, synonyms = (index.column(raw.schema_name, raw.name, col.name)
                                     if has_annotations else (None, []))
            columns.append({
                "name": col.name, "ordinal": ordinal, "declared_type": declared,
                "type_family": family, "nullable": bool(col.nullable) and col.name not in pk,
                "default": None if col.default is None else str(col.default),
                "comment": clean_comment(col.comment), "description": description,
                "is_primary_key": col.name in pk, "is_foreign_key": col.name in fk_columns,
                "synonyms": synonyms, "pii": kind is not None, "pii_kind": kind,
            })
        # one validation call per table (nested columns validated in pydantic-core): about
        # twice as fast as constructing 20 Column models one by one
        out.append(Table.model_validate({
            "schema_name": raw.schema_name, "name": raw.name,
            "kind": "view" if raw.kind == "view" else "table",
            "comment": clean_comment(raw.comment),
            "description": index.table(raw.schema_name, raw.name) if has_annotations else None,
            "primary_key": list(raw.primary_key),
            "unique_constraints": [{"name": n, "columns": list(cols)} for n, cols in raw.uniques],
            "foreign_keys": [{"name": fk.name, "columns": list(fk.columns), "ref_schema": fk.ref_schema,
                              "ref_table": fk.ref_table, "ref_columns": list(fk.ref_columns)}
                             for fk in raw.foreign_keys],
            "columns": columns,
        }))
    return out


def unmatched_annotations(annotations: Annotations, tables: list[Table]) -> list[str]:
    """Annotation keys that name no table or column (typos): reported as snapshot warnings."""
    table_keys: set[str] = set()
    column_keys: set[str] = set()
    for t in tables:
        table_keys.update({t.name.lower(), t.qualified_name.lower()})
        for c in t.columns:
            column_keys.update({f"{t.name}.{c.name}".lower(), f"{t.qualified_name}.{c.name}".lower()})
    out = [f"annotation for table '{k}' matches no table" for k in sorted(annotations.tables)
           if k.lower() not in table_keys]
    for section, mapping in (("columns", annotations.columns), ("synonyms", annotations.synonyms)):
        out.extend(f"annotation ({section}) for '{k}' matches no column" for k in sorted(mapping)
                   if k.lower() not in column_keys)
    return out


def assemble_snapshot(config: DatasourceConfig, dialect: str, tables: list[Table], captured_at: datetime,
                      warnings: list[str]) -> SchemaSnapshot:
    """The snapshot every adapter returns (and the drift check builds from a structure read):
    datasource info from the config entry, the dbt project's documentation laid over the tables
    (after statistics, whose top values the dbt ``accepted_values`` replace), sorted tables,
    fingerprint and metadata hash, and warnings (annotation keys and dbt names that match nothing).

    Raises:
        DatasourceError: the datasource's dbt manifest or catalog is missing or malformed.
    """
    notes = list(warnings) + unmatched_annotations(config.annotations, tables)
    info, tables, dbt_notes = apply_dbt(config, datasource_info(config, dialect), tables, recorded_value_kind)
    return SchemaSnapshot.create(info, tables, captured_at, notes + dbt_notes)
