"""Verifications shared by the pipeline's guards, the asset checks and ``nl2sql-assets audit``.

Each function takes plain values (a snapshot, a chunk set, ids, a vector store) and returns
what is wrong, so the pipeline can refuse, a check can report it as metadata and the audit
can print it. No Dagster here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from nl2sql_assets.adapters.pii import value_kind
from nl2sql_assets.errors import Nl2SqlError
from nl2sql_assets.indexing.models import ChunkSet, ColumnChunk, SearchFilter, TableChunk, chunks_digest
from nl2sql_assets.indexing.vector_store import VectorStore
from nl2sql_assets.schema.models import SchemaSnapshot

_SEGMENT_SPLIT_RE = re.compile(r"[,;]\s+|:\s+|\s+\|\s+")
_TOKEN_STRIP = ".,;:()[]{}\"'`"


class CoverageReport(BaseModel):
    """Which tables and columns of a snapshot lack exactly one chunk."""

    model_config = ConfigDict(frozen=True)

    tables: int
    columns: int
    table_chunks: int
    column_chunks: int
    missing_tables: list[str]
    missing_columns: list[str]
    duplicate_tables: list[str]
    duplicate_columns: list[str]
    extra_tables: list[str]
    extra_columns: list[str]

    @property
    def ok(self) -> bool:
        return not (self.missing_tables or self.missing_columns or self.duplicate_tables
                    or self.duplicate_columns or self.extra_tables or self.extra_columns)


def _qualified(schema_name: str | None, *names: str) -> str:
    return ".".join([schema_name, *names] if schema_name else list(names))


def chunk_coverage(snapshot: SchemaSnapshot, chunk_set: ChunkSet) -> CoverageReport:
    """One table chunk per table and one column chunk per column of the snapshot.

    >>> from datetime import UTC, datetime
    >>> from nl2sql_assets.schema.models import Column, DatasourceInfo, Table
    >>> snap = SchemaSnapshot.create(DatasourceInfo(id="s", dialect="sqlite"),
    ...     [Table(name="t", columns=[Column(name="a"), Column(name="b")])], datetime(2026, 1, 1, tzinfo=UTC))
    >>> cs = ChunkSet(datasource_id="s", schema_version="v", tenant_id="default", chunks=[
    ...     TableChunk(id="1", datasource_id="s", schema_version="v", table="t"),
    ...     ColumnChunk(id="2", datasource_id="s", schema_version="v", table="t", column="a")])
    >>> chunk_coverage(snap, cs).missing_columns
    ['t.b']
    """
    want_tables = {_qualified(t.schema_name, t.name) for t in snapshot.tables}
    want_columns = {_qualified(t.schema_name, t.name, c.name) for t in snapshot.tables for c in t.columns}
    seen_tables: dict[str, int] = {}
    seen_columns: dict[str, int] = {}
    for chunk in chunk_set.chunks:
        if isinstance(chunk, TableChunk):
            key = _qualified(chunk.schema_name, chunk.table)
            seen_tables[key] = seen_tables.get(key, 0) + 1
        elif isinstance(chunk, ColumnChunk):
            key = _qualified(chunk.schema_name, chunk.table, chunk.column)
            seen_columns[key] = seen_columns.get(key, 0) + 1
    return CoverageReport(
        tables=len(want_tables), columns=len(want_columns),
        table_chunks=sum(seen_tables.values()), column_chunks=sum(seen_columns.values()),
        missing_tables=sorted(want_tables - seen_tables.keys()),
        missing_columns=sorted(want_columns - seen_columns.keys()),
        duplicate_tables=sorted(k for k, n in seen_tables.items() if n > 1),
        duplicate_columns=sorted(k for k, n in seen_columns.items() if n > 1),
        extra_tables=sorted(seen_tables.keys() - want_tables),
        extra_columns=sorted(seen_columns.keys() - want_columns),
    )


class PiiFinding(BaseModel):
    """A chunk that shows personal data: which chunk, what kind, and why (never the value)."""

    model_config = ConfigDict(frozen=True)

    chunk_id: str
    kind: str
    reason: str


def _candidates(text: str) -> Iterable[str]:
    """Whitespace tokens and separator-delimited segments of a chunk text.

    >>> "+49 30 1234567" in set(_candidates("Values: a@b.io, +49 30 1234567."))
    True
    """
    for token in text.split():
        yield token
        yield token.strip(_TOKEN_STRIP)
    for segment in _SEGMENT_SPLIT_RE.split(text):
        yield segment.strip()
        yield segment.strip().strip(_TOKEN_STRIP)


def pii_findings(snapshot: SchemaSnapshot, chunk_set: ChunkSet) -> list[PiiFinding]:
    """Personal data in any chunk text or metadata.

    Two sources: (1) a value recorded for a PII column in the snapshot (sample, min, max:
    the adapters never record them, so any is a finding, and its appearance in a chunk is
    another); (2) any text that looks like personal data by the adapters' value patterns
    (e-mail, phone, card number with Luhn, IBAN with mod-97, national id, IP address).
    """
    findings: list[PiiFinding] = []
    pii_values: dict[str, str] = {}
    for table in snapshot.tables:
        for column in table.columns:
            if not column.pii or column.stats is None:
                continue
            stats = column.stats
            values = [v for v in [stats.min_value, stats.max_value, *stats.top_values] if v]
            where = _qualified(table.schema_name, table.name, column.name)
            if values:
                findings.append(PiiFinding(chunk_id="(snapshot)", kind=column.pii_kind or "pii",
                                           reason=f"snapshot records {len(values)} value(s) of PII column {where}"))
            for value in values:
                if len(value) >= 3:
                    pii_values[value] = where
    for chunk in chunk_set.chunks:
        texts = [chunk.get_page_content(), *[str(v) for v in chunk.get_metadata().values()]]
        blob = "\n".join(texts)
        for value, where in pii_values.items():
            if value in blob:
                findings.append(PiiFinding(chunk_id=chunk.id, kind="pii",
                                           reason=f"contains a recorded value of PII column {where}"))
                break
        kinds = sorted({k for text in texts for c in _candidates(text) if (k := value_kind(c))})
        for kind in kinds:
            findings.append(PiiFinding(chunk_id=chunk.id, kind=kind, reason=f"text looks like {kind}"))
    return findings


def chunk_set_hash(chunk_set: ChunkSet) -> str:
    """The vector store's ``chunks_digest`` of the set: equal digest, identical chunk set.

    Recorded by ``schema_chunks`` (whose blocking checks approved that set), compared by
    ``chroma_collection`` before it writes, and equal to the live ``IndexState.content_digest``.
    """
    return chunks_digest(chunk_set.chunks)


class IdComparison(BaseModel):
    """Chunk ids expected from the schema store against those present in the vector store."""

    model_config = ConfigDict(frozen=True)

    expected: int
    present: int
    missing: list[str]
    unexpected: list[str]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.unexpected


def compare_ids(expected: Iterable[str], present: Iterable[str]) -> IdComparison:
    """
    >>> compare_ids(["a", "b"], ["b", "c"]).model_dump()
    {'expected': 2, 'present': 2, 'missing': ['a'], 'unexpected': ['c']}
    """
    want, have = set(expected), set(present)
    return IdComparison(expected=len(want), present=len(have), missing=sorted(want - have),
                        unexpected=sorted(have - want))


class TablesFound(BaseModel):
    """Which tables a search for their own name does not find among the version's table chunks."""

    model_config = ConfigDict(frozen=True)

    tables: int
    top_k: int
    missed: list[str]
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.missed


def tables_found(vectors: VectorStore, snapshot: SchemaSnapshot, schema_version: str, top_k: int = 3) -> TablesFound:
    """Search each table's own name among the version's table chunks (one batched query)."""
    ds = snapshot.datasource_id
    where = SearchFilter(datasource_ids=[ds], versions={ds: schema_version}, chunk_types=["schema.table"])
    try:
        hits_per_table = vectors.search_many([t.name for t in snapshot.tables], k=top_k,
                                             where=where) if snapshot.tables else []
    except Nl2SqlError as exc:
        return TablesFound(tables=len(snapshot.tables), top_k=top_k, missed=[], error=str(exc))
    missed: list[str] = []
    for table, hits in zip(snapshot.tables, hits_per_table, strict=True):
        found = {((h.metadata.get("schema_name") or None), h.metadata.get("table")) for h in hits}
        if (table.schema_name, table.name) not in found:
            missed.append(table.qualified_name)
    return TablesFound(tables=len(snapshot.tables), top_k=top_k, missed=missed)
