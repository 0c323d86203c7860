"""Table and column statistics from a bounded sample, within a per-datasource time budget.

Per table, at most three queries, each over a bounded sample (``LIMIT n`` subquery, or
``TABLESAMPLE`` where the backend offers it and the table is large), so that a table of
100 million rows costs about as much as one of 10,000:

1. a *probe* of the first rows of text-like columns, checked in memory for personal data
   (values never leave this module);
2. one *aggregate* query with every column's non-null count, distinct count and (for columns
   that are not PII) min/max;
3. one grouped *top values* query, only for low-cardinality text columns that are not PII.

(Tables wider than 250 columns split the aggregate into several queries, to stay under
PostgreSQL's limit of 1,664 select-list entries.)

The row count is exact when the sample holds the whole table; otherwise it comes from the
catalog (an estimate) or a count the backend can bound in time. Every table and column
records ``status`` (exact / sampled / estimated / skipped) and a ``note`` saying why. When the
budget runs out, the remaining tables are ``skipped`` with the note ``time budget exhausted``.
Views are not sampled: a view's query can cost anything, whatever the ``LIMIT``.

The SQL itself lives in the backends (:class:`StatsBackend`): the SQLAlchemy adapter writes
it for SQLite, PostgreSQL and MySQL/MariaDB with the dialect's identifier quoting (and falls
back to SQLAlchemy Core elsewhere), the DuckDB adapter writes DuckDB SQL.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from datetime import time as dtime
from typing import Protocol

from nl2sql_assets.adapters.pii import pii_kind_from_values
from nl2sql_assets.schema.models import Column, ColumnStats, StatStatus, Table

logger = logging.getLogger(__name__)

DEFAULT_SAMPLE_ROWS = 10_000
DEFAULT_PROBE_ROWS = 500
LOW_CARDINALITY = 20
AGGREGATE_COLUMNS_PER_QUERY = 250  # up to 4 expressions each: under PostgreSQL's 1,664 target-list limit
TOP_VALUE_COLUMNS_PER_QUERY = 50
TOP_VALUES = 5
MAX_VALUE_CHARS = 100
BUDGET_EXHAUSTED = "time budget exhausted"
VIEW_NOTE = "view: not sampled (its query can be arbitrarily expensive)"
_PROBE_FAMILIES = {"text", "other", "json"}
_TOP_FAMILIES = {"text"}

TableKey = tuple[str | None, str]
RowCount = tuple[int, StatStatus, str]


@dataclass(frozen=True)
class ColumnPlan:
    """What the aggregate query computes for one column (non-null count always)."""

    name: str
    distinct: bool
    minmax: bool


@dataclass(frozen=True)
class Sample:
    """How a table is sampled: at most ``limit`` rows, optionally from a TABLESAMPLE.

    Fewer than ``limit`` rows back (without TABLESAMPLE) means the sample was the whole table.
    """

    limit: int
    tablesample_percent: float | None = None

    def label(self, rows: int) -> str:
        """How ``rows`` sampled rows were chosen, for notes."""
        if self.tablesample_percent is not None:
            return f"{rows} rows from TABLESAMPLE SYSTEM ({self.tablesample_percent:g}%)"
        return f"first {rows} rows"


class StatsBackend(Protocol):
    """The queries statistics need, in a dialect's own SQL; identifiers quoted by the dialect."""

    query_errors: tuple[type[BaseException], ...]

    def estimated_row_counts(self, tables: Sequence[Table]) -> dict[TableKey, tuple[int, str]]:
        """Catalog row estimates (count, source) for the tables where they are cheap; may be empty."""
        ...

    def bounded_row_count(self, table: Table, timeout_s: float) -> RowCount | None:
        """A row count obtained within ``timeout_s``, or None when the backend cannot bound one."""
        ...

    def choose_sample(self, table: Table, estimate: int | None, sample_rows: int) -> Sample:
        ...

    def probe(self, table: Table, columns: Sequence[str], limit: int) -> list[tuple[object, ...]]:
        """The first ``limit`` rows of ``columns``, as tuples."""
        ...

    def aggregate(self, table: Table, plans: Sequence[ColumnPlan], sample: Sample) -> tuple[object, ...]:
        """One row: ``COUNT(*)``, then per plan ``COUNT(c)`` [, ``COUNT(DISTINCT c)``] [, ``MIN(c)``, ``MAX(c)``]."""
        ...

    def top_values(self, table: Table, columns: Sequence[str], sample: Sample) -> list[tuple[int, object, int]]:
        """(column position in ``columns``, value as text, count) for every group of every column."""
        ...

    def supports_distinct(self, column: Column) -> bool:
        ...

    def supports_minmax(self, column: Column) -> bool:
        ...


def value_text(value: object) -> str | None:
    """A statistic's value as short text; None for binary values.

    >>> value_text(3), value_text(date(2024, 1, 2)), value_text(b"x"), value_text("a" * 120)[-3:]
    ('3', '2024-01-02', None, '...')
    """
    if value is None or isinstance(value, bytes | bytearray | memoryview):
        return None
    text = value.isoformat() if isinstance(value, datetime | date | dtime) else str(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 3] + "..."


def _skipped_table(table: Table, note: str) -> Table:
    stats = ColumnStats(status="skipped", note=note)
    return table.model_copy(update={
        "row_count": None, "row_count_status": "skipped", "stats_note": note,
        "columns": [c.model_copy(update={"stats": stats}) for c in table.columns],
    })


def compute_statistics(
    tables: Sequence[Table],
    backend: StatsBackend,
    *,
    budget_s: float,
    sample_rows: int = DEFAULT_SAMPLE_ROWS,
    probe_rows: int = DEFAULT_PROBE_ROWS,
    describe_error: Callable[[BaseException], str] = lambda exc: type(exc).__name__,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[list[Table], list[str]]:
    """Statistics and value-based PII flags for ``tables``.

    Args:
        tables: structure as read by the adapter (name-based PII flags already set).
        backend: the dialect's queries.
        budget_s: seconds for the whole datasource; tables reached after it are skipped.
        sample_rows: rows per table sample.
        probe_rows: rows examined for value-based PII detection.
        describe_error: turns a query failure into a redacted one-line reason.
        clock: a monotonic clock (tests pass their own).

    Returns:
        The tables with ``row_count``/``stats`` filled, and warnings (failed queries).
    """
    deadline = clock() + max(budget_s, 0.0)
    warnings: list[str] = []
    sample_rows = max(int(sample_rows), 1)
    estimates: dict[TableKey, tuple[int, str]] = {}
    real_tables = [t for t in tables if t.kind == "table"]
    if real_tables and clock() < deadline:
        try:
            estimates = backend.estimated_row_counts(real_tables)
        except backend.query_errors as exc:
            warnings.append(f"row estimates unavailable: {describe_error(exc)}")
    out: list[Table] = []
    done = skipped = 0
    for table in tables:
        if table.kind == "view":
            out.append(_skipped_table(table, VIEW_NOTE))
            continue
        if clock() >= deadline:
            out.append(_skipped_table(table, BUDGET_EXHAUSTED))
            skipped += 1
            continue
        try:
            out.append(_table_statistics(table, backend, estimates.get((table.schema_name, table.name)),
                                         sample_rows, probe_rows, deadline, clock))
            done += 1
        except backend.query_errors as exc:
            reason = describe_error(exc)
            note = f"statistics query failed: {reason}"
            warnings.append(f"table {table.qualified_name}: {note}")
            out.append(_skipped_table(table, note))
    logger.info("statistics: %d tables sampled, %d skipped by the time budget, %d failed",
                done, skipped, len(warnings))
    return out, warnings


def _table_statistics(table: Table, backend: StatsBackend, estimate: tuple[int, str] | None,
                      sample_rows: int, probe_rows: int, deadline: float,
                      clock: Callable[[], float]) -> Table:
    sample = backend.choose_sample(table, estimate[0] if estimate else None, sample_rows)
    columns = list(table.columns)

    probe_names = [c.name for c in columns if not c.pii and c.type_family in _PROBE_FAMILIES]
    if probe_names:
        rows = backend.probe(table, probe_names, min(probe_rows, sample.limit))
        kinds: dict[str, str] = {}
        for position, name in enumerate(probe_names):
            kind = pii_kind_from_values(row[position] for row in rows)
            if kind is not None:
                kinds[name] = kind
        del rows
        if kinds:
            columns = [c.model_copy(update={"pii": True, "pii_kind": kinds[c.name]}) if c.name in kinds else c
                       for c in columns]

    plans = [ColumnPlan(c.name, backend.supports_distinct(c), not c.pii and backend.supports_minmax(c))
             for c in columns]
    row: tuple[object, ...] = ()
    for start in range(0, max(len(plans), 1), AGGREGATE_COLUMNS_PER_QUERY):  # very wide tables: a few queries
        part = backend.aggregate(table, plans[start:start + AGGREGATE_COLUMNS_PER_QUERY], sample)
        row = part if not row else row + tuple(part[1:])
    sampled_n = int(row[0] or 0)  # type: ignore[call-overload]
    whole = sample.tablesample_percent is None and sampled_n < sample.limit

    if whole:
        row_count: int | None = sampled_n
        count_status: StatStatus = "exact"
        table_note: str | None = None
    else:
        found = None
        if estimate is not None:
            found = (max(estimate[0], sampled_n), "estimated", f"row count from {estimate[1]}")
        else:
            found = backend.bounded_row_count(table, max(0.0, min(2.0, deadline - clock())))
        if found is not None:
            row_count, count_status, count_note = found[0], found[1], found[2]  # type: ignore[assignment]
        else:
            row_count, count_status = None, "skipped"
            count_note = "row count: table is larger than the sample and no cheap count exists"
        table_note = f"statistics from a sample ({sample.label(sampled_n)}); {count_note}"
        if count_status == "exact" and row_count == sampled_n and sample.tablesample_percent is None:
            whole, table_note = True, None  # exactly as many rows as the sample: it was the table

    col_status: StatStatus = "exact" if whole else "sampled"
    base_note = None if whole else f"{sample.label(sampled_n)}; distinct count within the sample"
    stats: dict[str, ColumnStats] = {}
    cursor = 1
    for column, plan in zip(columns, plans, strict=True):
        non_null = int(row[cursor] or 0)  # type: ignore[call-overload]
        cursor += 1
        distinct = None
        if plan.distinct:
            distinct = int(row[cursor] or 0)  # type: ignore[call-overload]
            cursor += 1
        low = high = None
        if plan.minmax:
            low, high = value_text(row[cursor]), value_text(row[cursor + 1])
            cursor += 2
        note = base_note
        if column.pii:
            withheld = f"PII ({column.pii_kind}): values, min and max withheld"
            note = f"{withheld}; {note}" if note else withheld
        stats[column.name] = ColumnStats(
            null_fraction=round(1 - non_null / sampled_n, 6) if sampled_n else None,
            distinct_count=distinct, min_value=low, max_value=high, status=col_status,
            sample_size=sampled_n, note=note,
        )

    low_card = [c.name for c in columns
                if c.type_family in _TOP_FAMILIES and not c.pii
                and (s := stats[c.name]).distinct_count is not None
                and 0 < s.distinct_count <= LOW_CARDINALITY
                and s.distinct_count * 2 <= sampled_n * (1 - (s.null_fraction or 0.0)) + 1e-9]
    if low_card and clock() < deadline:
        groups: dict[int, list[tuple[int, str]]] = {}
        for start in range(0, len(low_card), TOP_VALUE_COLUMNS_PER_QUERY):
            chunk = low_card[start:start + TOP_VALUE_COLUMNS_PER_QUERY]
            for position, value, count in backend.top_values(table, chunk, sample):
                text = value_text(value)
                if text is not None:
                    groups.setdefault(start + int(position), []).append((int(count), text))  # type: ignore[call-overload]
        for position, name in enumerate(low_card):
            ranked = sorted(groups.get(position, []), key=lambda item: (-item[0], item[1]))
            stats[name] = stats[name].model_copy(update={"top_values": [v for _, v in ranked[:TOP_VALUES]]})

    return table.model_copy(update={
        "row_count": row_count, "row_count_status": count_status, "stats_note": table_note,
        "columns": [c.model_copy(update={"stats": stats[c.name]}) for c in columns],
    })
