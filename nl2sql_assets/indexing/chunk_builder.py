"""Snapshot -> chunks: a pure, deterministic transform.

:class:`SchemaChunkBuilder` turns one registered :class:`SchemaSnapshot` into a
:class:`ChunkSet`: one datasource chunk, then per table (in the snapshot's canonical order) a
table chunk, its column chunks and its relationship chunks, then one chunk per metric.
Ids are ``<datasource>:<schema_version>:<type>:<identity>`` and come from the inputs alone; a
name that holds a separator is quoted in the identity (:func:`~nl2sql_assets.indexing.models.quote_name`),
so table ``a.b`` with column ``c`` and table ``a`` with column ``b.c`` get two ids. Two chunks
that would still share an id (two tables or metrics of one name) stop the build with an error
naming both.

PII rule: a column flagged ``pii`` never contributes a sample value, a minimum or a maximum
to any chunk (text or metadata).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from nl2sql_assets.indexing.models import (
    ID_SEPARATORS,
    ChunkSet,
    ColumnChunk,
    DatasourceChunk,
    MetricChunk,
    RelationshipChunk,
    SchemaChunk,
    TableChunk,
    qualified_identity,
    quote_name,
    split_identifier,
)
from nl2sql_assets.schema.models import Column, ForeignKey, SchemaSnapshot, Table

TYPE_SHORT: dict[str, str] = {
    "schema.datasource": "ds",
    "schema.table": "table",
    "schema.column": "column",
    "schema.relationship": "rel",
    "schema.metric": "metric",
}
MAX_SAMPLE_VALUES = 5
MAX_SAMPLE_CHARS = 40
MAX_SUMMARY_TABLES = 40
MAX_CONTEXT_CHARS = 120
_RANGE_FAMILIES = {"integer", "float", "decimal", "date", "datetime"}
# a relationship identity also uses "(", "," and "->" around its column lists
_REL_SEPARATORS = ID_SEPARATORS + "(),>"


def chunk_id(datasource_id: str, schema_version: str, chunk_type: str, identity: str) -> str:
    """The deterministic id of a chunk.

    >>> chunk_id("sales", "20261130031522_3fa9c2e1", "schema.column", "main.orders.total")
    'sales:20261130031522_3fa9c2e1:column:main.orders.total'
    """
    return f"{datasource_id}:{schema_version}:{TYPE_SHORT[chunk_type]}:{identity}"


def relationship_identity(table: Table, fk: ForeignKey) -> str:
    """Both tables and the column pairs, so two foreign keys between the same tables differ.

    >>> from nl2sql_assets.schema.models import ForeignKey, Table
    >>> t = Table(name="flights", foreign_keys=[])
    >>> relationship_identity(t, ForeignKey(columns=["origin"], ref_table="airports", ref_columns=["code"]))
    'flights(origin)->airports(code)'
    >>> relationship_identity(t, ForeignKey(columns=["a,b"], ref_table="x.y", ref_columns=["c"]))
    'flights("a,b")->"x.y"(c)'
    """
    def part(schema_name: str | None, name: str) -> str:
        return ".".join(quote_name(p, _REL_SEPARATORS) for p in ([schema_name, name] if schema_name else [name]))

    def cols(names: list[str]) -> str:
        return ",".join(quote_name(c, _REL_SEPARATORS) for c in names)

    return (f"{part(table.schema_name, table.name)}({cols(fk.columns)})"
            f"->{part(fk.ref_schema, fk.ref_table)}({cols(fk.ref_columns)})")


def infer_cardinality(table: Table, fk: ForeignKey) -> str:
    """``one-to-one`` when the FK columns are the child's primary key or one of its unique keys.

    >>> from nl2sql_assets.schema.models import ForeignKey, Table
    >>> fk = ForeignKey(columns=["user_id"], ref_table="users", ref_columns=["id"])
    >>> infer_cardinality(Table(name="profiles", primary_key=["user_id"], foreign_keys=[fk]), fk)
    'one-to-one'
    >>> infer_cardinality(Table(name="orders", primary_key=["id"], foreign_keys=[fk]), fk)
    'many-to-one'
    """
    cols = set(fk.columns)
    if table.primary_key and cols == set(table.primary_key):
        return "one-to-one"
    if any(cols == set(u.columns) for u in table.unique_constraints):
        return "one-to-one"
    return "many-to-one"


def approx_count(n: int) -> int:
    """Two significant digits above 100, so growing tables do not change their chunk texts.

    >>> approx_count(87), approx_count(1188), approx_count(5_012_345)
    (87, 1200, 5000000)
    """
    if n < 100:
        return n
    digits = len(str(n)) - 2
    return int(round(n, -digits))


def _count_text(n: int) -> str:
    """Exact below 100, else ``about`` and 2 significant digits (stable while data grows).

    >>> _count_text(1188), _count_text(1200), _count_text(42)
    ('about 1,200', 'about 1,200', '42')
    """
    return str(n) if n < 100 else f"about {approx_count(n):,}"


def _percent(fraction: float) -> str:
    """Null share in steps that survive small data changes: exact below 10%, by 5% above.

    >>> _percent(0.123), _percent(0.001), _percent(0.07), _percent(1.0)
    ('10%', '<1%', '7%', '100%')
    """
    pct = fraction * 100
    if 0 < pct < 1:
        return "<1%"
    if pct < 10:
        return f"{round(pct)}%"
    return f"{int(5 * round(pct / 5))}%"


def _short_value(value: str, limit: int = MAX_SAMPLE_CHARS) -> str:
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1] + "…"


_ISO_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}")


def _range_value(value: str, family: str) -> str | None:
    """A coarse bound that new rows rarely move: dates to the year, numbers to 2 significant digits.

    >>> _range_value("2025-01-03 04:49:39.169123", "datetime"), _range_value("1188.5", "decimal")
    ('2025', '1,200')
    >>> _range_value("0.0312", "float"), _range_value("-7", "integer")
    ('0.031', '-7')
    """
    value = value.strip()
    if family in ("date", "datetime"):
        return value[:4] if _ISO_DATE_RE.match(value) else None
    if family in ("integer", "float", "decimal"):
        try:
            number = float(value)
        except ValueError:
            return None
        if not math.isfinite(number):
            return None
        if number == 0 or abs(number) >= 100:
            sign = "-" if number < 0 else ""
            return f"{sign}{approx_count(int(round(abs(number)))):,}"
        return f"{number:.2g}" if abs(number) < 1 else f"{float(f'{number:.2g}'):g}"
    return None


def _first_sentence(text: str | None, limit: int = MAX_CONTEXT_CHARS) -> str | None:
    """The first sentence of a description, cut to ``limit`` characters (column context).

    >>> _first_sentence("Orders placed in the shop. One row per checkout.")
    'Orders placed in the shop'
    """
    if not text:
        return None
    first = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0].rstrip(".!? ")
    return _short_value(first, limit) if first else None


def column_stats_text(column: Column, row_count: int | None = None) -> str | None:
    """Short natural-language statistics; never a minimum or maximum of a PII column.

    >>> from nl2sql_assets.schema.models import Column, ColumnStats
    >>> c = Column(name="d", type_family="date", stats=ColumnStats(null_fraction=0.12, distinct_count=40,
    ...            min_value="2020-01-01", max_value="2025-12-31"))
    >>> column_stats_text(c)
    '10% null, 40 distinct values, from 2020 to 2025.'
    >>> column_stats_text(Column(name="id", type_family="integer", stats=ColumnStats(distinct_count=9)), 9)
    'All values distinct.'
    >>> column_stats_text(Column(name="id", stats=ColumnStats(distinct_count=0)), 0) is None
    True
    """
    stats = column.stats
    if stats is None or stats.status == "skipped" or row_count == 0:
        return None  # an empty table's statistics say nothing a question could match
    parts: list[str] = []
    if stats.null_fraction:
        parts.append(f"{_percent(stats.null_fraction)} null")
    if stats.distinct_count:
        if row_count and stats.distinct_count >= row_count > 1 and not stats.null_fraction:
            parts.append("all values distinct")
        else:
            noun = "value" if stats.distinct_count == 1 else "values"
            parts.append(f"{_count_text(stats.distinct_count)} distinct {noun}")
    if (not column.pii and column.type_family in _RANGE_FAMILIES
            and stats.min_value is not None and stats.max_value is not None):
        low = _range_value(stats.min_value, column.type_family)
        high = _range_value(stats.max_value, column.type_family)
        if low is not None and high is not None:
            parts.append(f"from {low} to {high}" if low != high else f"always {low}")
    if not parts:
        return None
    text = ", ".join(parts) + "."
    return text[0].upper() + text[1:]


def sample_values(column: Column) -> list[str]:
    """A few frequent values for the text, alphabetically; none at all for a PII column."""
    if column.pii or column.stats is None:
        return []
    out: list[str] = []
    for value in column.stats.top_values:
        short = _short_value(value)
        if short and short not in out:
            out.append(short)
        if len(out) == MAX_SAMPLE_VALUES:
            break
    return sorted(out, key=str.casefold)  # frequencies shift with data; the set is what matters


def tables_summary(tables: Iterable[Table], limit: int = MAX_SUMMARY_TABLES) -> str | None:
    """``Tables: customers, order items, ...`` in split words, for undocumented datasources.

    >>> from nl2sql_assets.schema.models import Table
    >>> tables_summary([Table(name="OrderItems"), Table(name="customer")])
    'Tables: order items, customer.'
    """
    names = [split_identifier(t.name) or t.name for t in tables]
    if not names:
        return None
    shown = ", ".join(names[:limit])
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f"Tables: {shown}{more}."


def _mentions(definition: str, name: str) -> bool:
    """Whether ``name`` occurs in ``definition`` as a whole identifier (case-insensitive)."""
    pattern = rf"(?<![\w$]){re.escape(name)}(?![\w$])"
    return re.search(pattern, definition, flags=re.IGNORECASE) is not None


def describe_chunk(chunk: SchemaChunk) -> str:
    """What a chunk stands for, in words, so an error can name the two objects behind one id.

    >>> from nl2sql_assets.indexing.models import ColumnChunk
    >>> describe_chunk(ColumnChunk(id="x", datasource_id="s", schema_version="v", schema_name="main",
    ...                            table="a.b", column="c"))
    "column 'c' of table 'a.b' in schema 'main'"
    """
    where = f" in schema '{chunk.schema_name}'" if getattr(chunk, "schema_name", None) else ""
    if isinstance(chunk, TableChunk):
        return f"{chunk.kind} '{chunk.table}'{where}"
    if isinstance(chunk, ColumnChunk):
        return f"column '{chunk.column}' of table '{chunk.table}'{where}"
    if isinstance(chunk, RelationshipChunk):
        return (f"foreign key {chunk.from_table}({', '.join(chunk.from_columns)}) -> "
                f"{chunk.to_table}({', '.join(chunk.to_columns)})")
    if isinstance(chunk, MetricChunk):
        return f"metric '{chunk.name}'"
    return f"datasource '{chunk.datasource_id}'"


class SchemaChunkBuilder:
    """Builds every chunk of a registered snapshot; pure and deterministic."""

    def build(self, snapshot: SchemaSnapshot) -> ChunkSet:
        """All chunks of ``snapshot`` in deterministic order.

        Raises:
            ValueError: the snapshot has no ``schema_version`` (register it first).
        """
        version = snapshot.schema_version
        if not version:
            raise ValueError(
                f"snapshot of datasource '{snapshot.datasource.id}' has no schema_version; "
                "register it in the SchemaStore before building chunks"
            )
        chunks: list[SchemaChunk] = [self._datasource_chunk(snapshot, version)]
        for table in snapshot.tables:
            chunks.append(self._table_chunk(snapshot, version, table))
            chunks.extend(self._column_chunk(snapshot, version, table, col) for col in table.columns)
            # a key declared twice (same columns, same target) is one relationship, one chunk
            unique_fks = {relationship_identity(table, fk): fk for fk in reversed(table.foreign_keys)}
            chunks.extend(self._relationship_chunk(snapshot, version, table, fk)
                          for fk in table.foreign_keys if unique_fks.get(relationship_identity(table, fk)) is fk)
        chunks.extend(self._metric_chunks(snapshot, version))
        seen: dict[str, SchemaChunk] = {}
        for chunk in chunks:
            first = seen.setdefault(chunk.id, chunk)
            if first is not chunk:
                raise ValueError(f"datasource '{snapshot.datasource.id}': {describe_chunk(first)} and "
                                 f"{describe_chunk(chunk)} would share the chunk id '{chunk.id}'")
        return ChunkSet(datasource_id=snapshot.datasource.id, schema_version=version,
                        tenant_id=snapshot.datasource.tenant, chunks=chunks)

    def _common(self, snapshot: SchemaSnapshot, version: str, chunk_type: str, identity: str) -> dict[str, str]:
        ds = snapshot.datasource
        return {
            "id": chunk_id(ds.id, version, chunk_type, identity),
            "datasource_id": ds.id,
            "schema_version": version,
            "tenant_id": ds.tenant,
        }

    def _datasource_chunk(self, snapshot: SchemaSnapshot, version: str) -> DatasourceChunk:
        ds = snapshot.datasource
        return DatasourceChunk(
            **self._common(snapshot, version, "schema.datasource", ds.id),
            dialect=ds.dialect,
            description=ds.description,
            summary=None if ds.description else tables_summary(snapshot.tables),
            domains=list(ds.domains),
            example_questions=list(ds.example_questions),
        )

    def _table_chunk(self, snapshot: SchemaSnapshot, version: str, table: Table) -> TableChunk:
        fks = []
        for fk in table.foreign_keys:
            cols = ", ".join(split_identifier(c) or c for c in fk.columns)
            fks.append(f"{cols} -> {split_identifier(fk.ref_table) or fk.ref_table}")
        return TableChunk(
            **self._common(snapshot, version, "schema.table", qualified_identity(table.schema_name, table.name)),
            schema_name=table.schema_name,
            table=table.name,
            kind=table.kind,
            description=table.text,
            primary_key=list(table.primary_key),
            columns=[(c.name, c.type_family if c.type_family != "other" else c.declared_type.lower())
                     for c in table.columns],
            foreign_keys=fks,
            row_count=approx_count(table.row_count) if table.row_count is not None else None,
        )

    def _column_chunk(self, snapshot: SchemaSnapshot, version: str, table: Table, column: Column) -> ColumnChunk:
        references = None
        for fk in table.foreign_keys:
            if column.name in fk.columns:
                ref_col = fk.ref_columns[fk.columns.index(column.name)]
                references = f"{fk.ref_table}.{ref_col}"
                break
        return ColumnChunk(
            **self._common(snapshot, version, "schema.column",
                           qualified_identity(table.schema_name, table.name, column.name)),
            schema_name=table.schema_name,
            table=table.name,
            table_description=_first_sentence(table.text),
            column=column.name,
            dtype=column.declared_type,
            type_family=column.type_family,
            description=column.text,
            synonyms=list(column.synonyms),
            stats_text=column_stats_text(column, table.row_count),
            sample_values=sample_values(column),
            is_primary_key=column.name in table.primary_key,
            references=references,
            pii=column.pii,
        )

    def _relationship_chunk(self, snapshot: SchemaSnapshot, version: str, table: Table,
                            fk: ForeignKey) -> RelationshipChunk:
        return RelationshipChunk(
            **self._common(snapshot, version, "schema.relationship", relationship_identity(table, fk)),
            from_schema=table.schema_name,
            from_table=table.name,
            from_columns=list(fk.columns),
            to_schema=fk.ref_schema,
            to_table=fk.ref_table,
            to_columns=list(fk.ref_columns),
            cardinality=infer_cardinality(table, fk),  # type: ignore[arg-type]
        )

    def _metric_chunks(self, snapshot: SchemaSnapshot, version: str) -> list[MetricChunk]:
        out = []
        for metric in sorted(snapshot.datasource.metrics, key=lambda m: m.name):
            tables = [t.name for t in snapshot.tables if _mentions(metric.definition, t.name)]
            out.append(MetricChunk(
                **self._common(snapshot, version, "schema.metric", quote_name(metric.name)),
                name=metric.name,
                definition=metric.definition,
                grain=metric.grain,
                description=metric.description,
                tables=sorted(set(tables)),
            ))
        return out


def build_chunks(snapshot: SchemaSnapshot) -> ChunkSet:
    """All chunks of a registered snapshot (see :class:`SchemaChunkBuilder`)."""
    return SchemaChunkBuilder().build(snapshot)
