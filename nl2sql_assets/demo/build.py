"""Build the demo databases and the datasources file that names them."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import yaml

from nl2sql_assets.demo.dataset import DATA_DIR, DemoDataset, DemoSource, load_sources
from nl2sql_assets.demo.duckdb_writer import write_duckdb
from nl2sql_assets.demo.sqlite_writer import write_sqlite

logger = logging.getLogger(__name__)

_HEADER = """\
# Demo datasources written by `nl2sql-assets demo` (nl2sql_assets/demo/).
# Format: see README.md, "The datasources file". Edit freely; `demo` keeps an existing file.
"""


def _annotations(data: DemoDataset, synonyms: dict[str, list[str]]) -> dict[str, object]:
    """The data dictionary for a database without comments: table, view and column docs."""
    tables = {t.name: t.doc for t in data.tables}
    tables.update({v.name: v.doc for v in data.views})
    columns = {f"{t.name}.{c.name}": c.doc for t in data.tables for c in t.columns if c.doc}
    return {"tables": tables, "columns": columns, "synonyms": synonyms}


def _build(source: DemoSource, target: Path) -> None:
    """Write one demo database to a temporary file, then move it into place atomically."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
        leftover.unlink(missing_ok=True)
    data = source.dataset()
    try:
        if source.engine == "duckdb":
            write_duckdb(tmp, data)
        else:
            write_sqlite(tmp, data)
        os.replace(tmp, target)
    finally:
        for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
            leftover.unlink(missing_ok=True)
    logger.info("demo datasource %s: %d tables, %d rows", source.id, len(data.tables),
                sum(len(r) for r in data.rows.values()))


def _dbt_manifest(source: DemoSource) -> Path | None:
    """The shipped manifest of the source's dbt project (``data/<id>_dbt/``), if it has one."""
    path = DATA_DIR / f"{source.id}_dbt" / "target" / "manifest.json"
    return path if path.is_file() else None


def _copy_manifest(source: DemoSource, demo_dir: Path, overwrite: bool) -> None:
    """A copy of the dbt manifest next to the databases, where a user may edit it to see a refresh."""
    shipped = _dbt_manifest(source)
    if shipped is None:
        return
    target = demo_dir / f"{source.id}_dbt" / "manifest.json"
    if overwrite or not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        shutil.copyfile(shipped, tmp)
        os.replace(tmp, target)


def _document(sources: tuple[DemoSource, ...], demo_dir: Path) -> dict[str, object]:
    entries = []
    for source in sources:
        path = (demo_dir / source.filename).absolute()
        entry: dict[str, object] = {"id": source.id, "url": f"{source.engine}:///{path.as_posix()}"}
        entry.update(source.entry)
        if source.engine == "sqlite":  # no COMMENT in SQLite: the data dictionary lives here
            entry["annotations"] = _annotations(source.docs(), source.synonyms)
        elif source.synonyms:
            entry["annotations"] = {"synonyms": source.synonyms}
        if _dbt_manifest(source) is not None:  # what a dbt project documents (nl2sql_assets/dbt/)
            entry["dbt"] = {"manifest": (demo_dir / f"{source.id}_dbt" / "manifest.json").absolute().as_posix()}
        entries.append(entry)
    return {"datasources": entries}


def demo_datasources_document(demo_dir: Path) -> dict[str, object]:
    """The datasources-file document naming the demo databases in ``demo_dir``."""
    return _document(load_sources(), demo_dir)


def create_demo(home: Path, *, overwrite: bool = False, datasources_path: Path | None = None) -> Path:
    """Create the demo databases under ``home/demo/`` and a datasources file naming them.

    Idempotent: existing databases and an existing datasources file are kept as they are,
    unless ``overwrite`` is set, in which case everything is rebuilt. Each file appears
    atomically, so an interrupted run never leaves a half-written database behind.

    Args:
        home: the NL2SQL_HOME folder (created when missing).
        overwrite: rebuild the databases and rewrite the datasources file.
        datasources_path: where to write the datasources file; ``home/datasources.yaml`` by default.

    Returns:
        The path of the datasources file.
    """
    home = Path(home).absolute()
    demo_dir = home / "demo"
    demo_dir.mkdir(parents=True, exist_ok=True)
    sources = load_sources()
    for source in sources:
        target = demo_dir / source.filename
        if overwrite or not target.exists():
            _build(source, target)
        else:
            logger.info("demo datasource %s exists, kept", source.id)
        _copy_manifest(source, demo_dir, overwrite)
    path = Path(datasources_path).absolute() if datasources_path else home / "datasources.yaml"
    if overwrite or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        text = _HEADER + yaml.safe_dump(_document(sources, demo_dir), sort_keys=False,
                                        allow_unicode=True, width=100)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    else:
        logger.info("datasources file %s exists, kept", path)
    return path
