"""Verifications shared by the pipeline's guards, the asset checks and ``nl2sql-assets audit``.

Each function takes plain values (a snapshot, a chunk set, ids, a vector store) and returns
what is wrong, so the pipeline can refuse, a check can report it as metadata and the audit
can print it. No Dagster here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from nl2sql_assets.adapters.pii import kinds_in_text, recorded_value_kind, value_kind
from nl2sql_assets.errors import Nl2SqlError
from nl2sql_assets.indexing.models import (
    ChunkSet,
    ColumnChunk,
    SearchFilter,
    TableChunk,
    chunks_digest,
    qualified_identity,
)
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
    """The chunk builder's spelling of a table or column (a dotted name quoted), so the keys of
    table ``a.b``'s column ``c`` and table ``a``'s column ``b.c`` stay apart."""
    return qualified_identity(schema_name, *names)


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
    """A chunk (or the snapshot) that shows personal data: where, what kind, and why (never the value)."""

    model_config = ConfigDict(frozen=True)

    chunk_id: str
    kind: str
    reason: str
    column: str | None = None  # the qualified column, for a value the snapshot records


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


def recorded_value_findings(snapshot: SchemaSnapshot) -> list[PiiFinding]:
    """Values a snapshot records (min, max, top values) that must not be there (never the value).

    A PII column records none at all; any other column none that
    :func:`~nl2sql_assets.adapters.pii.recorded_value_kind` finds personal data in (inside free
    text, in numbers, a person's name in a column named for one). The adapters withhold exactly
    these, so a finding here means a snapshot from elsewhere or a bug: ``capture_snapshot``
    refuses to register it and the blocking check refuses its chunks.

    >>> from datetime import UTC, datetime
    >>> from nl2sql_assets.schema.models import Column, ColumnStats, DatasourceInfo, Table
    >>> cols = [Column(name="notes", stats=ColumnStats(max_value="call 555-123-4567")),
    ...         Column(name="owner", stats=ColumnStats(top_values=["Ann Lee"])),
    ...         Column(name="city", stats=ColumnStats(top_values=["Ann Arbor"]))]
    >>> snap = SchemaSnapshot.create(DatasourceInfo(id="s", dialect="sqlite"), [Table(name="t", columns=cols)],
    ...                              datetime(2026, 1, 1, tzinfo=UTC))
    >>> [(f.kind, f.reason) for f in recorded_value_findings(snap)]  # doctest: +NORMALIZE_WHITESPACE
    [('phone', 'snapshot records 1 value(s) of column t.notes that look like phone'),
     ('person_name', 'snapshot records 1 value(s) of column t.owner that look like person_name')]
    """
    findings: list[PiiFinding] = []
    for table in snapshot.tables:
        for column in table.columns:
            if column.stats is None:
                continue
            stats = column.stats
            values = [v for v in [stats.min_value, stats.max_value, *stats.top_values] if v]
            where = _qualified(table.schema_name, table.name, column.name)
            if column.pii:
                if values:
                    findings.append(PiiFinding(chunk_id="(snapshot)", kind=column.pii_kind or "pii", column=where,
                                               reason=f"snapshot records {len(values)} value(s) of PII column {where}"))
                continue
            kinds = [k for v in values if (k := recorded_value_kind(v, column.name)) is not None]
            for kind in sorted(set(kinds)):
                findings.append(PiiFinding(chunk_id="(snapshot)", kind=kind, column=where, reason=(
                    f"snapshot records {kinds.count(kind)} value(s) of column {where} that look like {kind}")))
    return findings


#: Metadata the product generates (digests, version stamps), never data: a SHA-256 digest holds
#: digit runs that pass a card number's issuer range and Luhn check often enough to block a large
#: chunk set by chance.
GENERATED_METADATA = frozenset({"content_hash", "schema_version"})


def pii_findings(snapshot: SchemaSnapshot, chunk_set: ChunkSet) -> list[PiiFinding]:
    """Personal data in the snapshot's recorded values or in any chunk text or metadata.

    Three sources: (1) :func:`recorded_value_findings`; (2) a value recorded for a PII column
    appearing in a chunk; (3) any chunk text that shows personal data by the adapters' value
    patterns (e-mail, phone, card number with issuer range and Luhn, IBAN with mod-97, national
    id, IP address), as a whole token or segment or inside free text.
    """
    findings = recorded_value_findings(snapshot)
    pii_values: dict[str, str] = {}
    for table in snapshot.tables:
        for column in table.columns:
            if column.pii and column.stats is not None:
                stats = column.stats
                where = _qualified(table.schema_name, table.name, column.name)
                for value in [stats.min_value, stats.max_value, *stats.top_values]:
                    if value and len(value) >= 3:
                        pii_values[value] = where
    seen: dict[str, str | None] = {}  # the same words and metadata values recur: each is checked once
    seen_texts: dict[str, list[str]] = {}

    def kind_of(candidate: str) -> str | None:
        if candidate not in seen:
            seen[candidate] = value_kind(candidate)
        return seen[candidate]

    def in_text(text: str) -> list[str]:
        if text not in seen_texts:
            seen_texts[text] = list(kinds_in_text(text))
        return seen_texts[text]

    for chunk in chunk_set.chunks:
        texts = [chunk.get_page_content(), *[str(v) for k, v in chunk.get_metadata().items()
                                             if k not in GENERATED_METADATA]]
        blob = "\n".join(texts)
        for value, where in pii_values.items():
            if value in blob:
                findings.append(PiiFinding(chunk_id=chunk.id, kind="pii",
                                           reason=f"contains a recorded value of PII column {where}"))
                break
        kinds = sorted({k for text in texts for c in set(_candidates(text)) if (k := kind_of(c))}
                       | {k for text in texts for k in in_text(text)})
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
