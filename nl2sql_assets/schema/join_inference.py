"""Join keys where the database declares none, from naming conventions, types and key-ness.

Warehouses and SQLite files often declare no foreign key, and warehouses often no primary key
either: ``FACT_ENERGY.BUILDING_KEY`` joins ``DIM_BUILDING.BUILDING_KEY`` by convention only.
Without these joins the retriever cannot bridge a fact to its dimensions. This module is pure
(tables in, candidate joins out) so it can run at snapshot time, where the adapter adds
value evidence (:mod:`nl2sql_assets.adapters.join_values`), and in tests.

A join goes from a *child* column to a *parent key*. A parent key is a table's declared
single-column primary key or unique key or, where a table (not a view) declares no primary key,
a column named for the table (``DIM_BUILDING.BUILDING_KEY``, ``customers.customer_id``,
``DIM_DEPARTMENT.DEPT_KEY``) or a bare ``id``/``key``. A child column matches a parent key by:

* the same name (``FACT_X.BUILDING_KEY`` -> ``DIM_BUILDING.BUILDING_KEY``);
* ``<table>_id`` to a bare ``id`` (``orders.customer_id`` -> ``customers.id``, plural or singular);
* a role prefix (``ORDER_DATE_KEY`` -> ``DIM_DATE.DATE_KEY``), scored lower.

Only key-like columns (ending in ``id``/``key``) or a non-generic declared key's exact name are
candidates, so ``name``, ``description`` or ``created_at`` never join. Type families must be
compatible. Each child column keeps its single best parent; a tie between parents is ambiguous
and dropped, and the parent is always the table whose key the column is, so a key shared by 30
fact tables links each of them to its one dimension, never facts to each other. Scores multiply
how sure the parent key is with how well the name matches; value evidence multiplies in
(:func:`infer_joins`); a join is kept at :data:`MIN_SCORE`, and a weaker candidate (an
abbreviated key playing a role, ``MANAGER_EMP_KEY``) only when its values confirm it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from nl2sql_assets.schema.models import Column, ForeignKey, Table
from nl2sql_assets.stemming import stem as singular

KEY_SUFFIXES = ("key", "id")
#: affixes that mark a table's role in a warehouse, not its entity (``DIM_BUILDING`` is "building")
TABLE_AFFIXES = frozenset({"dim", "d", "fact", "fct", "f", "tbl", "t", "vw", "v", "stg", "ref", "lkp", "lu",
                           "lookup", "dimension", "table"})
#: names that mean the same thing in every table without being the same thing
GENERIC_NAMES = frozenset({"name", "description", "title", "type", "status", "comment", "comments", "notes",
                           "created_at", "updated_at", "created", "updated", "modified", "date", "value",
                           "label", "code", "version", "load_ts", "is_active", "active", "deleted"})
_COMPATIBLE = (frozenset({"integer", "decimal", "float"}), frozenset({"text", "uuid"}),
               frozenset({"date", "datetime"}))
MIN_SCORE = 0.5
#: a candidate this weak on names alone is kept only when its values confirm it
CANDIDATE_SCORE = 0.4
_TOKEN_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


class JoinCandidate(BaseModel):
    """One inferred join: ``child.child_column`` references ``parent.parent_column``.

    ``child``/``parent`` are qualified table names; ``score`` in (0, 1]; ``reason`` says why.
    """

    model_config = ConfigDict(frozen=True)

    child: str
    child_column: str
    parent: str
    parent_column: str
    score: float
    reason: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.child, self.child_column.lower(), self.parent, self.parent_column.lower())


def tokens(identifier: str) -> list[str]:
    """Lower-case words of an identifier (snake_case, camelCase or UPPER_CASE); a glued key
    suffix is split off (``BUILDINGKEY`` -> building, key).

    >>> tokens("CustomerID"), tokens("BUILDING_KEY"), tokens("DEPTKEY"), tokens("order_date_key")
    (['customer', 'id'], ['building', 'key'], ['dept', 'key'], ['order', 'date', 'key'])
    """
    words = [w.lower() for w in _TOKEN_RE.findall(identifier)]
    if words:
        last = words[-1]
        for suffix in KEY_SUFFIXES:
            if last.endswith(suffix) and len(last) > len(suffix) + 2:
                words[-1:] = [last[: -len(suffix)], suffix]
                break
    return words


def table_stem(name: str) -> tuple[str, ...]:
    """The entity a table holds: its words without role affixes, the last one singular.

    >>> table_stem("DIM_BUILDING"), table_stem("customers"), table_stem("FACT_ENERGY_USAGE")
    (('building',), ('customer',), ('energy', 'usage'))
    """
    words = tokens(name)
    while len(words) > 1 and words[0] in TABLE_AFFIXES:
        words = words[1:]
    while len(words) > 1 and words[-1] in TABLE_AFFIXES:
        words = words[:-1]
    if words:
        words[-1] = singular(words[-1])
    return tuple(words)


def key_parts(column: str) -> tuple[tuple[str, ...], str] | None:
    """(stem, suffix) of a key-like column name, or None: ``BUILDING_KEY`` -> (('building',), 'key').

    >>> key_parts("customer_id"), key_parts("id"), key_parts("name")
    ((('customer',), 'id'), ((), 'id'), None)
    """
    words = tokens(column)
    if not words or words[-1] not in KEY_SUFFIXES:
        return None
    stem = list(words[:-1])
    if stem:
        stem[-1] = singular(stem[-1])
    return tuple(stem), words[-1]


def compatible(a: Column, b: Column) -> bool:
    """Whether two columns' type families can hold the same key values (``other`` matches any)."""
    if a.type_family == b.type_family or "other" in (a.type_family, b.type_family):
        return True
    return any(a.type_family in group and b.type_family in group for group in _COMPATIBLE)


def _abbreviates(short: tuple[str, ...], full: tuple[str, ...]) -> bool:
    """``dept`` for ``department``, ``emp`` for ``employee``: 3+ letters of the last word, in order,
    starting with its first.

    >>> [_abbreviates((short,), ("department",)) for short in ("dept", "dpt", "ped", "de")]
    [True, True, False, False]
    """
    if len(short) != 1 or not full or len(short[0]) < 3 or short[0] == full[-1] or short[0][0] != full[-1][0]:
        return False
    rest = iter(full[-1])
    return all(letter in rest for letter in short[0])


def parent_keys(table: Table) -> list[tuple[Column, float, str]]:
    """The columns other tables may reference in ``table``, with how sure and why."""
    out: list[tuple[Column, float, str]] = []
    declared = {c.lower() for c in table.primary_key}
    if len(table.primary_key) == 1:
        col = table.column(table.primary_key[0])
        if col is not None:
            out.append((col, 1.0, "primary key"))
    for unique in table.unique_constraints:
        col = table.column(unique.columns[0]) if len(unique.columns) == 1 else None
        if col is not None and col.name.lower() not in declared:
            out.append((col, 0.9, "unique key"))
    if table.primary_key or table.kind == "view":
        return out  # a declared key says which column is the key; a view is no entity's home
    stem = table_stem(table.name)
    for col in table.columns:
        parts = key_parts(col.name)
        if parts is None or any(c is col for c, _, _ in out):
            continue
        col_stem, _ = parts
        if col_stem == stem:
            out.append((col, 0.95, "named for its table"))
        elif not col_stem:
            out.append((col, 0.85, "bare key column"))
        elif len(col_stem) < len(stem) and stem[-len(col_stem):] == col_stem:
            out.append((col, 0.8, "named for its table"))  # DIM_SALES_REGION.REGION_KEY
        elif _abbreviates(col_stem, stem) and col.ordinal <= 2:
            out.append((col, 0.75, "abbreviated table name"))  # DIM_DEPARTMENT.DEPT_KEY
    return out


def _norm(name: str) -> tuple[str, ...]:
    """A column name compared across conventions: ``CustomerID`` and ``customer_id`` are one."""
    parts = key_parts(name)
    return ("key",) + parts[0] + (parts[1],) if parts is not None else ("name", name.lower())


def _child_match(col: Column, key: Column, parent: Table, why: str) -> tuple[float, str] | None:
    """How well ``col`` names ``key`` of ``parent``, or None."""
    child_parts, key_part = key_parts(col.name), key_parts(key.name)
    if _norm(col.name) == _norm(key.name):
        if key_part is not None and not key_part[0]:
            return None  # a bare "id" is every table's own key, not a reference
        if child_parts is None and (col.name.lower() in GENERIC_NAMES or why not in ("primary key", "unique key")):
            return None
        return 1.0, f"same name as {parent.name}.{key.name}"
    if child_parts is None or key_part is None:
        return None
    stem, suffix = child_parts
    key_stem, key_suffix = key_part
    if not key_stem:  # customers.id <- orders.customer_id
        if suffix == key_suffix and stem and stem == table_stem(parent.name):
            return 0.9, f"{col.name} names table {parent.name}"
        return None
    if suffix == key_suffix and len(stem) > len(key_stem) and stem[-len(key_stem):] == key_stem:
        return 0.6, f"role-playing {parent.name}.{key.name}"  # ORDER_DATE_KEY -> DATE_KEY
    return None


def candidate_joins(tables: Sequence[Table]) -> list[JoinCandidate]:
    """Every plausible join by names, types and keys, before values; not yet one per column."""
    keys = [(t, parent_keys(t)) for t in tables]
    by_name: dict[tuple[str, ...], list[tuple[Table, Column, float, str]]] = {}
    bare: dict[tuple[str, ...], list[tuple[Table, Column, float, str]]] = {}  # by table stem
    for t, found in keys:
        for col, strength, why in found:
            parts = key_parts(col.name)
            if parts is not None and not parts[0]:
                bare.setdefault(table_stem(t.name), []).append((t, col, strength, why))
            else:
                by_name.setdefault(_norm(col.name), []).append((t, col, strength, why))
    out: list[JoinCandidate] = []
    for child, found in keys:
        declared = {c.lower() for fk in child.foreign_keys for c in fk.columns}
        # the table's own key is no reference; a weak name guess (a suffix, an abbreviation) may still be
        own = {c.name.lower() for c, strength, why in found if why == "primary key" or strength >= 0.85}
        for col in child.columns:
            name = col.name.lower()
            if name in declared or name in own:
                continue
            norm = _norm(col.name)
            options = list(by_name.get(norm, []))
            parts = key_parts(col.name)
            if parts is not None:
                options += bare.get(parts[0], [])
                for i in range(1, len(parts[0])):  # role prefixes: the key names that end this one
                    options += by_name.get(("key",) + parts[0][i:] + (parts[1],), [])
            for parent, key, strength, why in options:
                if parent is child and name == key.name.lower():
                    continue
                match = _child_match(col, key, parent, why)
                if match is None or not compatible(col, key):
                    continue
                score = strength * match[0]
                if score >= CANDIDATE_SCORE:
                    out.append(JoinCandidate(child=child.qualified_name, child_column=col.name,
                                             parent=parent.qualified_name, parent_column=key.name,
                                             score=round(score, 4), reason=f"{match[1]} ({why})"))
    return list({c.key: c for c in out}.values())


def choose(candidates: Sequence[JoinCandidate]) -> list[JoinCandidate]:
    """One parent per child column: the best-scored; a tie between parents is ambiguous and dropped."""
    best: dict[tuple[str, str], list[JoinCandidate]] = {}
    for c in (c for c in candidates if c.score >= MIN_SCORE):
        best.setdefault((c.child, c.child_column.lower()), []).append(c)
    out = []
    for group in best.values():
        group.sort(key=lambda c: -c.score)
        if len(group) == 1 or group[0].score > group[1].score + 1e-9:
            out.append(group[0])
    return sorted(out, key=lambda c: c.key)


def infer_joins(tables: Sequence[Table],
                evidence: Mapping[tuple[str, str, str, str], float] | None = None) -> list[JoinCandidate]:
    """The joins to add: candidates re-scored by value evidence, then one parent per column.

    Args:
        tables: the snapshot's tables (declared foreign keys are left alone).
        evidence: per candidate ``key``, a factor from the value check (0 rejects it, 1 keeps
            its score, above 1 confirms it); candidates without evidence keep their name score.
    """
    scored = []
    for c in candidate_joins(tables):
        factor = (evidence or {}).get(c.key, 1.0)
        score = min(1.0, c.score * factor)
        if score >= MIN_SCORE:
            reason = c.reason if factor == 1.0 else f"{c.reason}; values {'agree' if factor > 1 else 'partly agree'}"
            scored.append(c.model_copy(update={"score": round(score, 4), "reason": reason}))
    return choose(scored)


def with_inferred_keys(tables: Sequence[Table], joins: Sequence[JoinCandidate]) -> list[Table]:
    """``tables`` with each join added as ``ForeignKey(source="inferred")`` on its child table
    (structure and fingerprint unchanged: only declared keys are fingerprinted)."""
    by_name = {t.qualified_name: t for t in tables}
    added: dict[str, list[ForeignKey]] = {}
    for j in joins:
        parent = by_name[j.parent]
        added.setdefault(j.child, []).append(ForeignKey(
            name=f"inferred {j.score:.2f}: {j.reason}"[:200], columns=[j.child_column], ref_schema=parent.schema_name,
            ref_table=parent.name, ref_columns=[j.parent_column], source="inferred"))
    return [t.model_copy(update={"foreign_keys": list(t.foreign_keys) + added[t.qualified_name]})
            if t.qualified_name in added else t for t in tables]
