"""Matching a dbt project to a datasource's tables, and laying its documentation over them.

Relations match by database/schema/identifier: exactly as the adapter reports the names
first, then ignoring case (warehouses fold unquoted names; dbt keeps them as written). The
database part only counts where the datasource has a database name (DuckDB's file, the URL's
database elsewhere; SQLite has none). What dbt adds:

- a table or column description where ``annotations`` set none (a database comment stays in
  ``comment``; chunk texts prefer the description: annotations, then dbt, then the comment;
  LLM enrichment fills only what is still blank);
- ``relationships`` tests as :class:`ForeignKey` ``source="dbt"`` on the child table (never in
  the structural fingerprint; part of the metadata hash and of the diff);
- ``accepted_values`` tests as the column's known values (``stats.top_values``), never for a
  PII column nor a value that looks like personal data; the declared list's digest is in
  ``stats.note`` so the metadata hash follows it without statistics;
- metrics and semantic-model measures as :class:`MetricDefinition` (a name the datasources file
  already uses wins), and model tags and ``meta.domain(s)`` as datasource domains.

A relation, column or test target that matches nothing is a snapshot warning, never an error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.dbt.artifacts import load_artifacts
from nl2sql_assets.dbt.extract import DbtProject, DbtRelation, read_project, render_measure, render_metric
from nl2sql_assets.schema.fingerprint import declared_values_note
from nl2sql_assets.schema.models import Column, ColumnStats, DatasourceInfo, ForeignKey, MetricDefinition, Table

logger = logging.getLogger(__name__)

_MAX_WARNINGS = 50
#: ``(value, column name) -> kind of personal data or None``: the adapters' own value check
#: (:func:`nl2sql_assets.adapters.pii.recorded_value_kind`), passed in so this package imports no adapter.
ValueCheck = Callable[[str, str], "str | None"]


def database_name(config: DatasourceConfig) -> str | None:
    """The datasource's database as dbt names it: a DuckDB file's stem, the URL's database; None for SQLite.

    >>> database_name(DatasourceConfig(id="a", url="duckdb:////data/Shop.duckdb"))
    'Shop'
    >>> database_name(DatasourceConfig(id="a", url="sqlite:///x.db")) is None
    True
    """
    if config.is_duckdb:
        path = config.url.split("://", 1)[1].split("?", 1)[0]
        return Path(path).stem or None
    if config.scheme.startswith("sqlite"):
        return None
    try:
        return config.sqlalchemy_url().database or None
    except Exception:  # noqa: BLE001 - an unset ${VAR}: the adapter reports it; match without the database
        return None


class _TableIndex:
    def __init__(self, tables: list[Table], default_schema: str | None) -> None:
        self.exact: dict[tuple[str, str], int] = {}
        self.folded: dict[tuple[str, str], list[int]] = {}
        for i, t in enumerate(tables):
            key = (t.schema_name or default_schema or "", t.name)
            self.exact.setdefault(key, i)
            self.folded.setdefault((key[0].lower(), key[1].lower()), []).append(i)

    def find(self, schema: str | None, name: str) -> int | None:
        key = (schema or "", name)
        if key in self.exact:
            return self.exact[key]
        hits = self.folded.get((key[0].lower(), key[1].lower()), [])
        return hits[0] if len(hits) == 1 else None


def _column(table: Table, name: str) -> Column | None:
    found = table.column(name)
    if found is None:
        hits = [c for c in table.columns if c.name.lower() == name.lower()]
        found = hits[0] if len(hits) == 1 else None
    return found


def _match(project: DbtProject, tables: list[Table], info: DatasourceInfo, database: str | None,
           warnings: list[str]) -> dict[str, int]:
    index = _TableIndex(tables, info.default_schema)
    matched: dict[str, int] = {}
    for rel in project.relations:
        other_db = database and rel.database and rel.database.lower() != database.lower()
        hit = None if other_db else index.find(rel.schema_name, rel.identifier)
        if hit is None:
            warnings.append(f"dbt {rel.kind} '{rel.unique_id}' ({rel.label}) matches no table")
        else:
            matched[rel.unique_id] = hit
    return matched


def _documented(table: Table, rel: DbtRelation, warnings: list[str]) -> Table:
    columns = list(table.columns)
    for name, text in sorted(rel.columns.items()):
        col = _column(table, name)
        if col is None:
            warnings.append(f"dbt column '{name}' of {rel.unique_id} matches no column of {table.qualified_name}")
        elif not col.description:
            columns[columns.index(col)] = col.model_copy(update={"description": text})
    update: dict[str, object] = {"columns": columns}
    if not table.description and rel.description:
        update["description"] = rel.description
    return table.model_copy(update=update)


def _with_values(col: Column, values: list[str], value_kind: ValueCheck | None) -> Column:
    note = declared_values_note(values)
    stats = col.stats
    if stats is not None:
        note = f"{note}; {stats.note}" if stats.note else note
    if col.pii:  # never a value of personal data: the digest alone keeps the hash in step
        kept = list(stats.top_values) if stats is not None else []
    else:
        kept = [v for v in dict.fromkeys(values) if value_kind is None or value_kind(v, col.name) is None]
    if stats is None:
        return col.model_copy(update={"stats": ColumnStats(status="skipped", top_values=kept, note=note)})
    return col.model_copy(update={"stats": stats.model_copy(update={"top_values": kept, "note": note})})


def _joins(project: DbtProject, tables: list[Table], matched: dict[str, int], warnings: list[str]) -> None:
    for rel in project.relationships:
        child_i, parent_i = matched.get(rel.child), matched.get(rel.parent)
        if child_i is None or parent_i is None:
            warnings.append(f"dbt relationships test '{rel.test}': "
                            f"{'child' if child_i is None else 'parent'} relation matches no table")
            continue
        child, parent = tables[child_i], tables[parent_i]
        col, ref = _column(child, rel.column), _column(parent, rel.field)
        if col is None or ref is None:
            warnings.append(f"dbt relationships test '{rel.test}': column "
                            f"'{rel.column if col is None else rel.field}' matches no column")
            continue
        fk = ForeignKey(name=rel.test, columns=[col.name], ref_schema=parent.schema_name, ref_table=parent.name,
                        ref_columns=[ref.name], source="dbt")
        key = (fk.columns, fk.ref_schema, fk.ref_table, fk.ref_columns)
        same = [f for f in child.foreign_keys if (f.columns, f.ref_schema, f.ref_table, f.ref_columns) == key]
        if any(f.source != "inferred" for f in same):
            continue  # the database (or an earlier test) declares it already
        # a join inferred from data gives way to the declared one, so the hash does not depend on sampling
        kept = [f for f in child.foreign_keys if f not in same]
        tables[child_i] = child.model_copy(update={"foreign_keys": [*kept, fk]})


def _values(project: DbtProject, tables: list[Table], matched: dict[str, int], warnings: list[str],
            value_kind: ValueCheck | None) -> None:
    for dv in project.values:
        i = matched.get(dv.relation)
        if i is None:
            continue  # its relation was already reported
        table = tables[i]
        col = _column(table, dv.column)
        if col is None:
            warnings.append(f"dbt accepted_values on '{dv.column}' matches no column of {table.qualified_name}")
            continue
        columns = list(table.columns)
        columns[columns.index(col)] = _with_values(col, dv.values, value_kind)
        tables[i] = table.model_copy(update={"columns": columns})


def _metrics(project: DbtProject, tables: list[Table], matched: dict[str, int], info: DatasourceInfo,
             warnings: list[str]) -> list[MetricDefinition]:
    names = {m.name for m in info.metrics}
    idents = {r.unique_id: r.identifier for r in project.relations}

    def table_of(uid: str | None) -> str:
        return tables[matched[uid]].name if uid in matched else idents.get(uid or "", "?")

    measure_sql = {m.name: render_measure(m, table_of(m.relation)) for m in project.measures}
    by_name = {m.name: m for m in project.metrics}
    out: list[MetricDefinition] = []
    for metric in project.metrics:
        definition = render_metric(metric, measure_sql, by_name)
        if metric.name in names:
            warnings.append(f"dbt metric '{metric.name}': the datasources file defines it; that one is used")
        elif definition:
            out.append(MetricDefinition(name=metric.name, definition=definition,
                                        description=metric.description or metric.label or None))
            names.add(metric.name)
    for m in project.measures:
        if m.name not in names:
            out.append(MetricDefinition(name=m.name, definition=measure_sql[m.name], grain=m.model,
                                        description=m.description))
            names.add(m.name)
    return out


def apply_project(project: DbtProject, info: DatasourceInfo, tables: list[Table], database: str | None,
                  value_kind: ValueCheck | None = None) -> tuple[DatasourceInfo, list[Table], list[str]]:
    """``info`` and ``tables`` with the project's documentation laid over them, and the warnings;
    ``value_kind`` withholds declared values that look like personal data."""
    warnings: list[str] = []
    tables = list(tables)
    matched = _match(project, tables, info, database, warnings)
    relations = {r.unique_id: r for r in project.relations}
    for uid, i in matched.items():
        tables[i] = _documented(tables[i], relations[uid], warnings)
    _joins(project, tables, matched, warnings)
    _values(project, tables, matched, warnings, value_kind)
    metrics = _metrics(project, tables, matched, info, warnings)
    domains = list(info.domains) + sorted({d for uid in matched for d in relations[uid].domains} - set(info.domains))
    info = info.model_copy(update={"metrics": [*info.metrics, *metrics], "domains": domains})
    if len(warnings) > _MAX_WARNINGS:
        warnings = warnings[:_MAX_WARNINGS] + [f"... and {len(warnings) - _MAX_WARNINGS} more dbt warnings"]
    logger.info("datasource %s: dbt matched %d of %d relations, %d joins, %d metrics", info.id, len(matched),
                len(project.relations), len(project.relationships), len(metrics))
    return info, tables, warnings


def apply_dbt(config: DatasourceConfig, info: DatasourceInfo, tables: list[Table],
              value_kind: ValueCheck | None = None) -> tuple[DatasourceInfo, list[Table], list[str]]:
    """The datasource's dbt documentation over its tables (unchanged when it names no dbt project).

    Raises:
        DatasourceError: a configured artifact is missing or malformed (naming the file).
    """
    if config.dbt is None:
        return info, tables, []
    project = read_project(load_artifacts(config.dbt, config.id))
    return apply_project(project, info, tables, database_name(config), value_kind)
