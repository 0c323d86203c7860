"""The demo datasources as data: table specs from ``data/<id>.yaml``, rows from ``data/<id>/*.csv``.

Keeping schema and rows in files (rather than in code that generates them) makes the demo
reviewable as data and guarantees that every machine loads exactly the same values. The
rows were produced once by a seeded ``random.Random`` with every date before 2025-12-31.

CSV cells are text; each is converted by its column's declared type (see :data:`_PARSERS`),
and an empty cell is NULL (the demo holds no empty strings).
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

#: The bundled datasources, in the order they are built and listed.
DEMO_DATASOURCE_IDS = ("commerce", "hr", "support")
#: Where the ``<id>.yaml`` specs and ``<id>/<table>.csv`` rows live (shipped as package data).
DATA_DIR = Path(__file__).with_name("data")
ENGINES = ("duckdb", "sqlite")

Row = tuple[object, ...]


def _parse_bool(text: str) -> bool:
    """Only the two spellings the files use, so a typo fails loudly instead of becoming False."""
    if text not in ("true", "false"):
        raise ValueError(f"not a boolean: {text!r}")
    return text == "true"


#: Base SQL type (before any ``(precision)``) -> parser of a non-empty CSV cell.
_PARSERS: dict[str, Callable[[str], object]] = {
    "INTEGER": int,
    "SMALLINT": int,
    "DECIMAL": float,
    "BOOLEAN": _parse_bool,
    "DATE": date.fromisoformat,
    "TIMESTAMP": datetime.fromisoformat,
    "VARCHAR": str,
    "TEXT": str,
}


@dataclass(frozen=True)
class DemoColumn:
    """One column: ``constraints`` is the DDL after the type (``NOT NULL REFERENCES t(c)``)."""

    name: str
    type: str
    constraints: str = ""
    doc: str = ""

    @property
    def base_type(self) -> str:
        return self.type.split("(", 1)[0].strip().upper()


@dataclass(frozen=True)
class DemoTable:
    """A table spec, rendered as the same DDL for DuckDB and SQLite."""

    name: str
    doc: str
    columns: tuple[DemoColumn, ...]
    constraints: tuple[str, ...] = ()

    def ddl(self) -> str:
        parts = [f"{c.name} {c.type} {c.constraints}".rstrip() for c in self.columns]
        parts.extend(self.constraints)
        return f"CREATE TABLE {self.name} (\n    " + ",\n    ".join(parts) + "\n)"

    def insert_sql(self) -> str:
        marks = ", ".join("?" for _ in self.columns)
        names = ", ".join(c.name for c in self.columns)
        return f"INSERT INTO {self.name} ({names}) VALUES ({marks})"


@dataclass(frozen=True)
class DemoView:
    name: str
    doc: str
    select: str

    @property
    def sql(self) -> str:
        return f"CREATE VIEW {self.name} AS {self.select}"


@dataclass(frozen=True)
class DemoDataset:
    """Schema plus rows (``rows`` is empty when only the data dictionary is needed)."""

    tables: tuple[DemoTable, ...]
    views: tuple[DemoView, ...]
    rows: dict[str, list[Row]] = field(default_factory=dict)


@dataclass(frozen=True)
class DemoSource:
    """One demo datasource: its database file, schema and datasources-file entry."""

    id: str
    engine: str  # one of ENGINES
    filename: str
    tables: tuple[DemoTable, ...]
    views: tuple[DemoView, ...]
    #: Fields copied into the datasources-file entry (description, domains, tenant, metrics, ...).
    entry: dict[str, Any]
    synonyms: dict[str, list[str]]

    def docs(self) -> DemoDataset:
        """The schema without rows: enough for the data dictionary."""
        return DemoDataset(self.tables, self.views)

    def dataset(self) -> DemoDataset:
        """The schema with every table's rows read from its CSV file."""
        folder = DATA_DIR / self.id
        return DemoDataset(self.tables, self.views, {t.name: _read_rows(folder / f"{t.name}.csv", t)
                                                     for t in self.tables})


def _read_rows(path: Path, table: DemoTable) -> list[Row]:
    """Rows of one table; the header must name the spec's columns in order, so files and spec agree."""
    try:
        parsers = [_PARSERS[c.base_type] for c in table.columns]
    except KeyError as exc:
        raise ValueError(f"{table.name}: no CSV parser for type {exc.args[0]}") from exc
    names = [c.name for c in table.columns]
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header != names:
            raise ValueError(f"{path}: header {header} does not match the columns {names}")
        rows: list[Row] = []
        for line, cells in enumerate(reader, start=2):
            if len(cells) != len(parsers):
                raise ValueError(f"{path}:{line}: {len(cells)} cells, expected {len(parsers)}")
            try:
                rows.append(tuple(None if cell == "" else parse(cell) for parse, cell in zip(parsers, cells)))
            except ValueError as exc:
                raise ValueError(f"{path}:{line}: {exc}") from exc
    return rows


def _column(spec: dict[str, Any]) -> DemoColumn:
    return DemoColumn(spec["name"], spec["type"], spec.get("constraints", ""), spec.get("doc", ""))


def _table(spec: dict[str, Any]) -> DemoTable:
    return DemoTable(spec["name"], spec["doc"], tuple(_column(c) for c in spec["columns"]),
                     tuple(spec.get("constraints", ())))


def load_source(source_id: str) -> DemoSource:
    """Read ``data/<source_id>.yaml`` (rows are read later, by :meth:`DemoSource.dataset`)."""
    path = DATA_DIR / f"{source_id}.yaml"
    spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    if spec.get("id") != source_id or spec.get("engine") not in ENGINES:
        raise ValueError(f"{path}: expected id {source_id!r} and an engine in {ENGINES}")
    return DemoSource(
        id=source_id,
        engine=spec["engine"],
        filename=spec["file"],
        tables=tuple(_table(t) for t in spec["tables"]),
        views=tuple(DemoView(v["name"], v["doc"], v["select"]) for v in spec.get("views") or ()),
        entry=dict(spec.get("datasource") or {}),
        synonyms=dict(spec.get("synonyms") or {}),
    )


def load_sources() -> tuple[DemoSource, ...]:
    """Every bundled demo datasource, in :data:`DEMO_DATASOURCE_IDS` order."""
    return tuple(load_source(source_id) for source_id in DEMO_DATASOURCE_IDS)
