"""``nl2sql-assets demo [--no-retrieve]``: create the demo datasources, index them, show retrievals.

Works on a fresh machine with no API key and no server: embedded SQLite/DuckDB databases,
the local ONNX embedding model, embedded Chroma and a SQLite Dagster instance, all under
``NL2SQL_HOME`` (default ``./.nl2sql``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from nl2sql_assets.cli.environment import command_settings
from nl2sql_assets.cli.index import index_and_report
from nl2sql_assets.config import Settings
from nl2sql_assets.demo import DEMO_QUESTIONS, create_demo
from nl2sql_assets.errors import Nl2SqlError

if TYPE_CHECKING:
    from nl2sql_assets.retrieval.retriever import SchemaRetriever

SAMPLE_QUESTIONS = 3
#: A question whose join only the commerce datasource's dbt project declares (a ``relationships``
#: test from returns.order_id to orders; the database links returns to order lines only).
DBT_QUESTION = ("Total refund amount per order status", "commerce")


def _print_retrievals(settings: Settings) -> None:
    """The dbt-declared join, then a few demo questions, through the staged retriever."""
    from nl2sql_assets.retrieval.retriever import SchemaRetriever  # after indexing: see index_and_report

    with SchemaRetriever.from_settings(settings) as retriever:
        print("a join only the commerce dbt project declares (nl2sql_assets/demo/data/commerce_dbt/):")
        _print_dbt_join(retriever)
        print("sample retrievals:")
        for item in DEMO_QUESTIONS[:SAMPLE_QUESTIONS]:
            try:
                result = retriever.retrieve(item.question)
            except Nl2SqlError as exc:
                print(f"  {item.question}\n    -> error: {exc}")
                continue
            tables = ", ".join(t.name for t in result.tables[:5]) or "-"
            print(f"  {item.question}\n    -> {result.datasource or '-'}: {tables}")


def _print_dbt_join(retriever: SchemaRetriever) -> None:
    """One retrieval whose join comes from dbt, with each join's source, so the demo shows it."""
    question, datasource = DBT_QUESTION
    try:
        result = retriever.retrieve(question, datasource=datasource)
    except Nl2SqlError as exc:
        print(f"  {question}\n    -> error: {exc}")
        return
    tables = ", ".join(t.name for t in result.tables[:5]) or "-"
    joins = "; ".join(f"{r.from_table}({', '.join(r.from_columns)}) -> {r.to_table}({', '.join(r.to_columns)})"
                      f" from {r.source}" for r in result.relationships) or "-"
    print(f"  {question}\n    -> {datasource}: {tables}\n       joins: {joins}")


def run(args: argparse.Namespace) -> int:
    settings = command_settings()
    path = Path(create_demo(settings.home, datasources_path=settings.datasources_path))
    print(f"demo datasources: {path}")
    status = index_and_report(settings, [], getattr(args, "verbose", 0))
    if status != 0 or args.no_retrieve:
        return status
    _print_retrievals(settings)
    return 0
