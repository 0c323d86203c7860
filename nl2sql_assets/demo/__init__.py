"""The bundled demo: realistic datasources to index and query without any setup.

:func:`create_demo` writes three small databases under ``<home>/demo/`` and a datasources
file naming them (the format README.md describes under "The datasources file"):

- ``commerce`` (DuckDB, tenant ``acme``): a web shop with customers, orders, payments,
  shipments, returns, inventory, ... documented with ``COMMENT ON`` in the database.
- ``hr`` (SQLite, tenant ``acme``): people operations: employees (with a manager hierarchy),
  departments, salaries, payroll, time off, reviews, projects, training. SQLite has no
  comments, so its data dictionary travels as ``annotations`` in the datasources file.
- ``support`` (SQLite, tenant ``globex``): a help desk in another tenant, so that tenant
  isolation can be shown.

Schemas and rows are package data (``data/<id>.yaml`` and ``data/<id>/<table>.csv``), so
every machine builds the same data. The schema exercises what matters for retrieval:
composite keys and a composite foreign key, a table with two foreign keys to the same table,
self-references, views, and PII columns (e-mail, phone, IBAN, national id, IP address)
holding realistic values.

Modules: :mod:`~nl2sql_assets.demo.dataset` loads the data files,
:mod:`~nl2sql_assets.demo.sqlite_writer` and :mod:`~nl2sql_assets.demo.duckdb_writer`
write the databases, :mod:`~nl2sql_assets.demo.build` assembles them and the datasources
file, :mod:`~nl2sql_assets.demo.questions` holds the sample questions.
"""

from __future__ import annotations

from nl2sql_assets.demo.build import create_demo, demo_datasources_document
from nl2sql_assets.demo.dataset import DEMO_DATASOURCE_IDS
from nl2sql_assets.demo.questions import DEMO_QUESTIONS, DemoQuestion

__all__ = [
    "DEMO_DATASOURCE_IDS",
    "DEMO_QUESTIONS",
    "DemoQuestion",
    "create_demo",
    "demo_datasources_document",
]
