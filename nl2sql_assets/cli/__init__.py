"""The ``nl2sql-assets`` console script: argument parsing and dispatch.

Each command lives in its own module with ``run(args) -> int``; this module only parses,
sets up logging, and turns core errors into a clear message and a non-zero exit.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from nl2sql_assets.errors import Nl2SqlError

COMMANDS = ("demo", "index", "drift", "retrieve", "audit")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nl2sql-assets",
        description="Schema indexing and retrieval for NL2SQL (see README.md).",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("demo", help="create the demo datasources, index them, print sample retrievals")
    demo.add_argument("--no-retrieve", action="store_true", help="index only, print no sample retrievals")

    index = sub.add_parser("index", help="detect drift and materialize new versions through Dagster")
    index.add_argument("--datasource", action="append", default=[], metavar="ID",
                       help="only this datasource (repeatable)")

    drift = sub.add_parser("drift", help="one drift check, no materialization")
    drift.add_argument("--json", action="store_true", help="machine-readable output")

    retrieve = sub.add_parser("retrieve", help="run the staged retriever")
    retrieve.add_argument("question", nargs="?", help="the natural-language question")
    retrieve.add_argument("--datasource", metavar="ID")
    retrieve.add_argument("--tenant", metavar="T")
    retrieve.add_argument("--schema-version", metavar="V")
    retrieve.add_argument("--evidence", metavar="TEXT", help="optional hint text (domain knowledge)")
    retrieve.add_argument("--json", action="store_true", help="print the result object as JSON")
    retrieve.add_argument("--batch", metavar="IN.jsonl", help="answer every line of a JSONL file")
    retrieve.add_argument("--out", metavar="OUT.jsonl", help="where --batch writes its results")

    audit = sub.add_parser("audit", help="lineage and vector-store consistency per datasource")
    audit.add_argument("--datasource", action="append", default=[], metavar="ID")
    audit.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    module = importlib.import_module(f"nl2sql_assets.cli.{args.command}")
    try:
        return int(module.run(args))
    except Nl2SqlError as exc:
        print(f"nl2sql-assets {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
