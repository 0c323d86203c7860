"""Canonical forms, fingerprints and schema versions.

The structural fingerprint is sha256 over canonical JSON of what a query planner depends
on: tables, kinds, columns, declared types, nullability, primary/unique/foreign keys.
Statistics never count. Descriptions, comments, synonyms and the datasource's
documentation go into a separate metadata hash, so documentation changes refresh the
current version instead of minting a new one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: models imports this module (SchemaSnapshot.create hashes)
    from nl2sql_assets.schema.models import DatasourceInfo, Table

VERSION_TIME_FORMAT = "%Y%m%d%H%M%S"
#: How ``ColumnStats.note`` starts for a column whose values a documentation source declares
#: (dbt ``accepted_values``); the digest after it is part of the metadata hash, statistics are not.
DECLARED_VALUES_NOTE = "declared values (dbt accepted_values"
_VERSION_RE = re.compile(r"[0-9]{14}_[0-9a-f]{8}")


def canonical_json(value: object) -> str:
    """Compact JSON with sorted keys: the one text form every hash is taken over.

    >>> canonical_json({"b": 1, "a": [2, 1]})
    '{"a":[2,1],"b":1}'
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_tables(tables: Iterable[Table]) -> list[Table]:
    """Tables sorted by (schema, name), columns by ordinal then name, keys and constraints sorted."""
    out = []
    for t in sorted(tables, key=lambda t: (t.schema_name or "", t.name)):
        out.append(t.model_copy(update={
            "columns": sorted(t.columns, key=lambda c: (c.ordinal, c.name)),
            "foreign_keys": sorted(t.foreign_keys, key=lambda fk: (fk.ref_schema or "", fk.ref_table,
                                                                   fk.columns, fk.ref_columns)),
            "unique_constraints": sorted(t.unique_constraints, key=lambda u: u.columns),
        }))
    return out


def structure_of(tables: Iterable[Table]) -> list[dict[str, object]]:
    """The fingerprinted part of each table, as plain data."""
    return [
        {
            "schema": t.schema_name or "",
            "name": t.name,
            "kind": t.kind,
            "columns": [[c.name, c.declared_type.upper(), c.nullable] for c in t.columns],
            "pk": list(t.primary_key),
            "unique": sorted(sorted(u.columns) for u in t.unique_constraints),
            "fks": sorted(
                [fk.columns, fk.ref_schema or "", fk.ref_table, fk.ref_columns] for fk in t.foreign_keys
                if fk.source == "foreign_key"
            ),
        }
        for t in canonical_tables(tables)
    ]


def compute_fingerprint(tables: Iterable[Table]) -> str:
    """sha256 of the canonical structure; identical structures give identical fingerprints."""
    return sha256_hex(canonical_json(structure_of(tables)))


def declared_values_note(values: Iterable[str]) -> str:
    """The ``stats.note`` marker of declared values: their digest, so the hash sees a change.

    >>> declared_values_note(["paid", "open"])
    'declared values (dbt accepted_values 1fa5a549)'
    """
    return f"{DECLARED_VALUES_NOTE} {sha256_hex(canonical_json(list(values)))[:8]})"


def declared_values_of(note: str | None) -> str | None:
    """The declared-values marker a ``stats.note`` starts with, if any."""
    if not note or not note.startswith(DECLARED_VALUES_NOTE):
        return None
    return note.split(";", 1)[0]


def _documentary_table(t: Table) -> dict[str, object]:
    """A table's documentary part. Keys for dbt joins and declared values appear only when there
    are some, so the hash of a datasource without dbt is what it always was."""
    columns: list[list[object]] = []
    for c in t.columns:
        row: list[object] = [c.name, c.comment, c.description, sorted(c.synonyms)]
        if (declared := declared_values_of(c.stats.note if c.stats else None)) is not None:
            row.append(declared)
        columns.append(row)
    doc: dict[str, object] = {"t": t.qualified_name, "comment": t.comment, "description": t.description,
                              "columns": columns}
    dbt_fks = sorted([fk.columns, fk.ref_schema or "", fk.ref_table, fk.ref_columns]
                     for fk in t.foreign_keys if fk.source == "dbt")
    if dbt_fks:
        doc["dbt_fks"] = dbt_fks
    return doc


def compute_metadata_hash(datasource: DatasourceInfo, tables: Iterable[Table]) -> str:
    """sha256 of everything documentary: descriptions, comments, synonyms, the datasource's docs and
    metrics, and what a dbt project declares (joins from ``relationships`` tests, accepted values).

    PII flags are left out: value-based flags depend on sampled data, and a drift check reads
    structure only, so including them would make a cheap check disagree with a full snapshot.
    Joins inferred from data are left out for the same reason.
    """
    doc = {
        "datasource": datasource.model_dump(mode="json", exclude={"id", "dialect", "default_schema"}),
        "tables": [_documentary_table(t) for t in canonical_tables(tables)],
    }
    return sha256_hex(canonical_json(doc))


def make_schema_version(captured_at: datetime, fingerprint: str) -> str:
    """``YYYYMMDDhhmmss_<fp8>`` in UTC.

    >>> make_schema_version(datetime(2026, 11, 30, 3, 15, 22, tzinfo=UTC), "3fa9c2e1" + "0" * 56)
    '20261130031522_3fa9c2e1'
    """
    if captured_at.tzinfo is None:
        captured_at = captured_at.replace(tzinfo=UTC)
    return f"{captured_at.astimezone(UTC).strftime(VERSION_TIME_FORMAT)}_{fingerprint[:8]}"


def parse_schema_version(version: str) -> tuple[datetime, str]:
    """Split a version into its UTC time and fingerprint prefix; ValueError when malformed.

    Only the exact form ``make_schema_version`` produces is accepted (14 ASCII digits that
    form a real date and time, ``_``, 8 lowercase hex digits).

    >>> parse_schema_version("20261130031522_3fa9c2e1")[1]
    '3fa9c2e1'
    >>> parse_schema_version("20261130031522_0x3fa9c2")
    Traceback (most recent call last):
    ...
    ValueError: not a schema version: '20261130031522_0x3fa9c2'
    """
    if not isinstance(version, str) or not _VERSION_RE.fullmatch(version):
        raise ValueError(f"not a schema version: {version!r}")
    stamp, _, fp8 = version.partition("_")
    try:
        when = datetime.strptime(stamp, VERSION_TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise ValueError(f"not a schema version: {version!r} (invalid date/time)") from None
    return when, fp8
