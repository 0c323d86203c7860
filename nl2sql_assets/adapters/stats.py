"""Table and column statistics from a bounded sample, within a per-datasource time budget.

Per table, at most three queries, each over the same bounded sample (``LIMIT n`` subquery, or
``TABLESAMPLE ... REPEATABLE`` where the backend offers it and the table is large), so that a
table of 100 million rows costs about as much as one of 10,000:

1. one *aggregate* query with every column's non-null count, distinct count and (for columns
   not flagged by name) min/max, held in memory until the PII decision;
2. a *probe* of the whole sample's text-like columns, and of numeric columns whose min or max
   is long enough to be a card number, checked in memory for personal data anywhere in a value
   (values never leave this module); a column it flags records no value at all;
3. one grouped *top values* query, only for low-cardinality text columns that are not PII.

Every value about to be recorded (min, max, a top value) is then checked on its own with
:func:`~nl2sql_assets.adapters.pii.recorded_value_kind`, the test the blocking check applies,
and withheld when it shows personal data: nothing is recorded that the check would refuse.

(Tables wider than 250 columns split the aggregate into several queries, to stay under
PostgreSQL's limit of 1,664 select-list entries.)

The row count is exact when the sample holds the whole table; otherwise it comes from the
catalog (an estimate) or a count the backend can bound in time. Every table and column
records ``status`` (exact / sampled / estimated / skipped) and a ``note`` saying why. When the
budget runs out, the remaining tables are ``skipped`` with the note ``time budget exhausted``.
A backend that can (:class:`TimeLimits`) bounds every statement by what is left of the budget
and skips a table another session holds locked after a short wait, with a warning saying so.
Views are not sampled: a view's query can cost anything, whatever the ``LIMIT``.

A new version is made only by a structural change, usually of a few tables. The tables it did not
touch keep the previous version's statistics while those are young (:class:`CarriedStats`,
``statistics.reuse_max_age_hours`` of the datasources file), with their value-based PII flags, so
a new version reads what changed instead of the whole schema, and the chunks of the tables it did
not touch stay identical (nothing to embed again).

The SQL itself lives in the backends (:class:`StatsBackend`): the SQLAlchemy adapter writes
it for SQLite, PostgreSQL and MySQL/MariaDB with the dialect's identifier quoting (and falls
back to SQLAlchemy Core elsewhere), the DuckDB adapter writes DuckDB SQL.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from datetime import time as dtime
from decimal import Decimal
from typing import Protocol, runtime_checkable

from nl2sql_assets.adapters.pii import kinds_in_value, person_hint, pii_kind_from_values, recorded_value_kind
from nl2sql_assets.progress import ProgressMeter
from nl2sql_assets.schema.fingerprint import DECLARED_VALUES_NOTE, structure_of
from nl2sql_assets.schema.models import Column, ColumnStats, SchemaSnapshot, StatStatus, Table

logger = logging.getLogger(__name__)

DEFAULT_SAMPLE_ROWS = 10_000
DEFAULT_PROBE_ROWS: int | None = None  # the whole sample
LOW_CARDINALITY = 20
AGGREGATE_COLUMNS_PER_QUERY = 250  # up to 4 expressions each: under PostgreSQL's 1,664 target-list limit
TOP_VALUE_COLUMNS_PER_QUERY = 50
TOP_VALUES = 5
MAX_VALUE_CHARS = 100
BUDGET_EXHAUSTED = "time budget exhausted"
VIEW_NOTE = "view: not sampled (its query can be arbitrarily expensive)"
_PROBE_FAMILIES = {"text", "other", "json"}
_NUMBER_FAMILIES = {"integer", "decimal", "float"}
LONG_NUMBER = 10**12  # card numbers have 13 to 19 digits
VALUE_WITHHELD = "values that look like personal data withheld"
UNCHECKED_WITHHELD = "values withheld: the time budget ran out before the personal-data check"
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

    def probe(self, table: Table, columns: Sequence[str], sample: Sample) -> list[tuple[object, ...]]:
        """The sampled rows of ``columns``, as tuples: the rows ``aggregate`` reads for ``sample``."""
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


@runtime_checkable
class TimeLimits(Protocol):
    """A backend that bounds each statement, and each wait for another session's lock, in time.

    Without it one statement on a locked or huge table could outlast the whole budget, which is
    only checked between tables.
    """

    def limit_time(self, seconds: float | None) -> None:
        """Bound each following statement to ``seconds``; None restores the session's defaults."""
        ...

    def timeout_reason(self, exc: BaseException) -> str | None:
        """Why a statement failed when it met a time or lock limit (a locked table); else None."""
        ...


@dataclass(frozen=True)
class CarriedStats:
    """The previous version's tables whose statistics a new read may take over: same structure,
    statistics read at or after ``not_before``, none skipped, failed or overlaid by dbt's declared
    values (those are re-read, so the overlay applies to fresh statistics)."""

    tables: dict[TableKey, Table]
    not_before: datetime
    captured_at: datetime  # the previous version's capture: when its statistics were read, if it did not record it

    @classmethod
    def from_previous(cls, previous: SchemaSnapshot | None, max_age_hours: float,
                      now: datetime) -> CarriedStats | None:
        """What ``previous`` offers to a read at ``now``; None when nothing can be reused."""
        if previous is None or max_age_hours <= 0:
            return None
        return cls(tables={(t.schema_name, t.name): t for t in previous.tables if t.kind == "table"},
                   not_before=now - timedelta(hours=max_age_hours), captured_at=previous.captured_at)

    def reusable(self, table: Table) -> Table | None:
        """``table`` with the previous version's statistics, or None when they must be re-read."""
        before = self.tables.get((table.schema_name, table.name))
        if before is None or before.row_count_status == "skipped":
            return None
        read_at = before.stats_read_at or self.captured_at
        if read_at < self.not_before or structure_of([before]) != structure_of([table]):
            return None
        old = {c.name: c for c in before.columns}
        if any(old[c.name].stats is None or old[c.name].stats.status == "skipped"  # type: ignore[union-attr]
               or (old[c.name].stats.note or "").startswith(DECLARED_VALUES_NOTE)  # type: ignore[union-attr]
               for c in table.columns):
            return None
        columns = [c.model_copy(update={"stats": old[c.name].stats, "pii": c.pii or old[c.name].pii,
                                        "pii_kind": c.pii_kind or old[c.name].pii_kind}) for c in table.columns]
        return table.model_copy(update={
            "row_count": before.row_count, "row_count_status": before.row_count_status,
            "stats_note": before.stats_note, "stats_read_at": read_at, "columns": columns,
        })


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
    probe_rows: int | None = DEFAULT_PROBE_ROWS,
    describe_error: Callable[[BaseException], str] = lambda exc: type(exc).__name__,
    clock: Callable[[], float] = time.monotonic,
    read_at: datetime | None = None,
    carried: CarriedStats | None = None,
) -> tuple[list[Table], list[str]]:
    """Statistics and value-based PII flags for ``tables``.

    Args:
        tables: structure as read by the adapter (name-based PII flags already set).
        backend: the dialect's queries.
        budget_s: seconds for the whole datasource; tables reached after it are skipped.
        sample_rows: rows per table sample.
        probe_rows: rows examined for value-based PII detection; None (default): the whole sample,
            the rows min, max and top values come from.
        describe_error: turns a query failure into a redacted one-line reason.
        clock: a monotonic clock (tests pass their own).
        read_at: recorded as each read table's ``stats_read_at``.
        carried: the previous version's statistics to keep for tables whose structure did not change.

    Returns:
        The tables with ``row_count``/``stats`` filled, and warnings (failed queries).
    """
    deadline = clock() + max(budget_s, 0.0)
    warnings: list[str] = []
    sample_rows = max(int(sample_rows), 1)
    limits = backend if isinstance(backend, TimeLimits) else None
    estimates: dict[TableKey, tuple[int, str]] = {}
    reused: dict[TableKey, Table] = {}
    if carried is not None:
        for table in tables:
            if table.kind == "table" and (kept := carried.reusable(table)):
                reused[(table.schema_name, table.name)] = kept
    real_tables = [t for t in tables if t.kind == "table" and (t.schema_name, t.name) not in reused]
    out: list[Table] = []
    done = skipped = 0
    meter = ProgressMeter("tables introspected", len(tables))
    try:
        if real_tables and clock() < deadline:
            try:
                if limits is not None:
                    limits.limit_time(deadline - clock())
                estimates = backend.estimated_row_counts(real_tables)
            except backend.query_errors as exc:
                warnings.append(f"row estimates unavailable: {describe_error(exc)}")
        for table in tables:
            meter.advance()
            if table.kind == "view":
                out.append(_skipped_table(table, VIEW_NOTE))
                continue
            if (kept := reused.get((table.schema_name, table.name))) is not None:
                out.append(kept)
                continue
            if clock() >= deadline:
                out.append(_skipped_table(table, BUDGET_EXHAUSTED))
                skipped += 1
                continue
            try:
                if limits is not None:  # no statement of this table outlasts the budget
                    limits.limit_time(deadline - clock())
                read = _table_statistics(table, backend, estimates.get((table.schema_name, table.name)),
                                         sample_rows, probe_rows, deadline, clock)
                out.append(read.model_copy(update={"stats_read_at": read_at}) if read_at else read)
                done += 1
            except backend.query_errors as exc:
                timeout = limits.timeout_reason(exc) if limits is not None else None
                note = f"statistics skipped: {timeout}" if timeout else f"statistics query failed: {describe_error(exc)}"
                warnings.append(f"table {table.qualified_name}: {note}")
                out.append(_skipped_table(table, note))
    finally:
        if limits is not None:
            try:
                limits.limit_time(None)
            except backend.query_errors as exc:
                logger.warning("statistics: the session's time limits could not be restored: %s",
                               describe_error(exc))
    logger.info("statistics: %d tables sampled, %d kept from the previous version, %d skipped by the time "
                "budget, %d failed", done, len(reused), skipped, len(warnings))
    return out, warnings


def _measured(plans: Sequence[ColumnPlan], row: tuple[object, ...]) -> dict[str, tuple[int, int | None, object, object]]:
    """The aggregate row per column: non-null count, distinct count, raw min and max (in memory only)."""
    out: dict[str, tuple[int, int | None, object, object]] = {}
    cursor = 1
    for plan in plans:
        non_null = int(row[cursor] or 0)  # type: ignore[call-overload]
        cursor += 1
        distinct = None
        if plan.distinct:
            distinct = int(row[cursor] or 0)  # type: ignore[call-overload]
            cursor += 1
        low = high = None
        if plan.minmax:
            low, high = row[cursor], row[cursor + 1]
            cursor += 2
        out[plan.name] = (non_null, distinct, low, high)
    return out


def _may_be_card(value: object) -> bool:
    """Whether a numeric column's min or max allows card numbers in it (or is not a number at all,
    as SQLite lets any column hold text)."""
    if value is None or isinstance(value, bool):
        return False
    if isinstance(value, int | float | Decimal):
        return abs(value) >= LONG_NUMBER
    return True


def _flag_by_values(table: Table, columns: list[Column], measured: dict[str, tuple[int, int | None, object, object]],
                    backend: StatsBackend, sample: Sample, deadline: float,
                    clock: Callable[[], float]) -> tuple[list[Column], set[str]]:
    """The columns with value-based PII flags, from one probe of the sample (values stay in memory),
    and the columns the time budget left unchecked (they record no value either)."""
    names = [c.name for c in columns if not c.pii and measured[c.name][0] > 0 and (
        c.type_family in _PROBE_FAMILIES
        or (c.type_family in _NUMBER_FAMILIES and any(_may_be_card(v) for v in measured[c.name][2:])))]
    if not names:
        return columns, set()
    rows = backend.probe(table, names, sample)
    kinds: dict[str, str] = {}
    unchecked: set[str] = set()
    for position, name in enumerate(names):
        if clock() >= deadline:
            unchecked.update(names[position:])
            break
        kind = pii_kind_from_values((row[position] for row in rows), person=person_hint(name))
        if kind is not None:
            kinds[name] = kind
    del rows
    if kinds or unchecked:
        logger.debug("table %s: %d column(s) flagged as PII by their values, %d left unchecked by the time budget",
                     table.qualified_name, len(kinds), len(unchecked))
    return [c.model_copy(update={"pii": True, "pii_kind": kinds[c.name]}) if c.name in kinds else c
            for c in columns], unchecked


def _recordable(value: object, column_name: str) -> tuple[str | None, bool]:
    """``value`` as text for the statistics (None for None and binary values), and whether it was
    withheld because it shows personal data, checked whole and as the shortened text recorded."""
    text = value_text(value)
    if text is not None and (kinds_in_value(value) or recorded_value_kind(text, column_name) is not None):
        return None, True
    return text, False


def _table_statistics(table: Table, backend: StatsBackend, estimate: tuple[int, str] | None,
                      sample_rows: int, probe_rows: int | None, deadline: float,
                      clock: Callable[[], float]) -> Table:
    sample = backend.choose_sample(table, estimate[0] if estimate else None, sample_rows)
    columns = list(table.columns)
    plans = [ColumnPlan(c.name, backend.supports_distinct(c), not c.pii and backend.supports_minmax(c))
             for c in columns]
    row: tuple[object, ...] = ()
    for start in range(0, max(len(plans), 1), AGGREGATE_COLUMNS_PER_QUERY):  # very wide tables: a few queries
        part = backend.aggregate(table, plans[start:start + AGGREGATE_COLUMNS_PER_QUERY], sample)
        row = part if not row else row + tuple(part[1:])
    measured = _measured(plans, row)
    probe_sample = sample if probe_rows is None else Sample(min(probe_rows, sample.limit), sample.tablesample_percent)
    columns, unchecked = _flag_by_values(table, columns, measured, backend, probe_sample, deadline, clock)
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
    screened: set[str] = set()
    for column in columns:
        non_null, distinct, low_raw, high_raw = measured[column.name]
        low = high = None
        if column.name in unchecked:
            screened.add(column.name)
        elif not column.pii:
            (low, low_withheld), (high, high_withheld) = (_recordable(low_raw, column.name),
                                                          _recordable(high_raw, column.name))
            if low_withheld or high_withheld:
                screened.add(column.name)
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
                if c.type_family in _TOP_FAMILIES and not c.pii and c.name not in unchecked
                and (s := stats[c.name]).distinct_count is not None
                and 0 < s.distinct_count <= LOW_CARDINALITY
                and s.distinct_count * 2 <= sampled_n * (1 - (s.null_fraction or 0.0)) + 1e-9]
    if low_card and clock() < deadline:
        groups: dict[int, list[tuple[int, str]]] = {}
        for start in range(0, len(low_card), TOP_VALUE_COLUMNS_PER_QUERY):
            chunk = low_card[start:start + TOP_VALUE_COLUMNS_PER_QUERY]
            for position, value, count in backend.top_values(table, chunk, sample):
                name = chunk[int(position)]  # type: ignore[call-overload]
                text, withheld = _recordable(value, name)
                if withheld:
                    screened.add(name)
                elif text is not None:
                    groups.setdefault(start + int(position), []).append((int(count), text))  # type: ignore[call-overload]
        for position, name in enumerate(low_card):
            ranked = sorted(groups.get(position, []), key=lambda item: (-item[0], item[1]))
            stats[name] = stats[name].model_copy(update={"top_values": [v for _, v in ranked[:TOP_VALUES]]})
    for name in screened:
        note, why = stats[name].note, UNCHECKED_WITHHELD if name in unchecked else VALUE_WITHHELD
        stats[name] = stats[name].model_copy(update={"note": f"{why}; {note}" if note else why})

    return table.model_copy(update={
        "row_count": row_count, "row_count_status": count_status, "stats_note": table_note,
        "columns": [c.model_copy(update={"stats": stats[c.name]}) for c in columns],
    })
