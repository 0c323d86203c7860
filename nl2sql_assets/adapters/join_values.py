"""Value evidence for inferred joins: are a sample of the child's key values in the parent's key?

Names alone cannot tell ``FACT_X.BATCH_KEY`` holding ``DIM_BATCH`` keys from a column that only
looks like one. At snapshot time, with the statistics connection at hand, each name-based
candidate (:mod:`nl2sql_assets.schema.join_inference`) is checked on a bounded sample through the
statistics backend's ``probe`` (``SELECT col FROM t LIMIT n``, the query statistics already run,
in the dialect's own SQL): the child's distinct sampled values should be contained in the parent
column's values, and a parent key guessed from its name should hold no duplicates. When the
parent's sample is its whole table the answer is exact; otherwise only agreement counts.
Checks stop when the time budget is spent (the rest keep their name score). No value leaves this
module: only a factor per candidate does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import date, datetime
from decimal import Decimal

from nl2sql_assets.adapters.stats import Sample, StatsBackend, TimeLimits
from nl2sql_assets.schema.join_inference import JoinCandidate, candidate_joins, infer_joins, with_inferred_keys
from nl2sql_assets.schema.models import Table

logger = logging.getLogger(__name__)

CHILD_SAMPLE_ROWS = 2_000
PARENT_SAMPLE_ROWS = 20_000
CONFIRMED, REJECTED, UNKNOWN = 1.25, 0.0, 1.0
MIN_CONTAINED = 0.8  # orphans happen (late-arriving dimensions); most values must be there
CONFIRM_CONTAINED = 0.95


def _canonical(value: object) -> str | None:
    """One text per key value across drivers (``1``, ``1.0`` and ``Decimal('1')`` are the same key)."""
    if value is None or isinstance(value, bytes | bytearray | memoryview):
        return None
    if isinstance(value, float | Decimal) and value == int(value):
        return str(int(value))
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value).strip()


def containment_factor(child: Sequence[str], parent: Sequence[str], *, parent_complete: bool,
                       parent_declared: bool) -> float:
    """The evidence factor for one candidate from its sampled values.

    >>> containment_factor(["1", "2"], ["1", "2", "3"], parent_complete=True, parent_declared=False)
    1.25
    >>> containment_factor(["7", "8"], ["1", "2", "3"], parent_complete=True, parent_declared=False)
    0.0
    >>> containment_factor(["1"], ["1", "1", "2"], parent_complete=True, parent_declared=False)
    0.0
    """
    distinct_child = set(child)
    parent_set = set(parent)
    if parent_complete and not parent_declared and len(parent_set) < len(parent):
        return REJECTED  # duplicates: the guessed parent key is no key
    if not distinct_child or not parent_set:
        return UNKNOWN
    contained = len(distinct_child & parent_set) / len(distinct_child)
    if contained >= CONFIRM_CONTAINED:
        return CONFIRMED
    if parent_complete:
        return UNKNOWN if contained >= MIN_CONTAINED else REJECTED
    return UNKNOWN


class _Sampler:
    """Sampled values per (table, column), each read once."""

    def __init__(self, backend: StatsBackend) -> None:
        self.backend = backend
        self.cache: dict[tuple[str, str, int], tuple[list[str], bool]] = {}

    def values(self, table: Table, column: str, limit: int) -> tuple[list[str], bool]:
        """The column's non-null sampled values and whether the sample was the whole table."""
        key = (table.qualified_name, column, limit)
        if key not in self.cache:
            rows = self.backend.probe(table, [column], Sample(limit=limit))
            values = [v for v in (_canonical(r[0]) for r in rows) if v is not None]
            self.cache[key] = (values, len(rows) < limit)
        return self.cache[key]


def value_evidence(tables: Sequence[Table], candidates: Sequence[JoinCandidate], backend: StatsBackend, *,
                   budget_s: float = 10.0) -> tuple[dict[tuple[str, str, str, str], float], list[str]]:
    """A factor per checked candidate (see :func:`containment_factor`) and warnings.

    Views are not sampled (their query can cost anything); a failing query skips its candidate.
    """
    by_name = {t.qualified_name: t for t in tables}
    sampler = _Sampler(backend)
    limits = backend if isinstance(backend, TimeLimits) else None
    deadline = time.monotonic() + budget_s
    evidence: dict[tuple[str, str, str, str], float] = {}
    warnings: list[str] = []
    for c in candidates:
        child, parent = by_name[c.child], by_name[c.parent]
        if child.kind == "view" or parent.kind == "view":
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            warnings.append(f"join inference: time budget exhausted, {len(candidates) - len(evidence)} "
                            "candidate joins kept on names alone")
            break
        try:
            if limits is not None:
                limits.limit_time(left)
            child_values, _ = sampler.values(child, c.child_column, CHILD_SAMPLE_ROWS)
            parent_values, complete = sampler.values(parent, c.parent_column, PARENT_SAMPLE_ROWS)
        except backend.query_errors as exc:  # a locked or odd table: keep the name evidence
            logger.debug("join value check %s.%s -> %s.%s failed: %s", c.child, c.child_column, c.parent,
                         c.parent_column, type(exc).__name__)
            continue
        finally:
            if limits is not None:
                limits.limit_time(None)
        declared = [c.parent_column] == list(parent.primary_key) or any(
            [c.parent_column] == list(u.columns) for u in parent.unique_constraints)
        evidence[c.key] = containment_factor(child_values, parent_values, parent_complete=complete,
                                             parent_declared=declared)
    return evidence, warnings


def add_inferred_joins(tables: list[Table], backend: StatsBackend | None, *,
                       budget_s: float = 10.0) -> tuple[list[Table], list[str]]:
    """``tables`` with inferred joins added as ``ForeignKey(source="inferred")``, checked on values
    when ``backend`` is given (a full snapshot with statistics), and warnings."""
    started = time.perf_counter()
    candidates = candidate_joins(tables)
    evidence, warnings = (value_evidence(tables, candidates, backend, budget_s=budget_s)
                          if backend is not None and candidates else ({}, []))
    joins = infer_joins(tables, evidence)
    logger.debug("join inference: %d candidates, %d checked on values, %d joins in %.3fs", len(candidates),
                 len(evidence), len(joins), time.perf_counter() - started)
    return with_inferred_keys(tables, joins), warnings
