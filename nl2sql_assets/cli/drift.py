"""``nl2sql-assets drift [--json]``: one drift check of every datasource, no materialization.

Prints one line per datasource (new / unchanged / changed with the short structural diff /
metadata changed / failed: why), or with ``--json`` a JSON list of the results. Exit status
is 0 even when a datasource failed (README, "Command line"): drift reports, ``index`` acts.
"""

from __future__ import annotations

import argparse
import json

from nl2sql_assets.cli.environment import store_settings
from nl2sql_assets.config import load_datasources
from nl2sql_assets.drift import DriftResult, check_drift
from nl2sql_assets.schema.store import build_schema_store

MAX_ITEMS = 10


def format_result(result: DriftResult, max_items: int = MAX_ITEMS) -> list[str]:
    """The human lines for one result: the status line, then the diff items indented."""
    lines = [result.describe()]
    if result.status in ("changed", "metadata_changed"):
        items = result.diff_items
        lines += [f"    - {item.replace('`', '')}" for item in items[:max_items]]
        if len(items) > max_items:
            lines.append(f"    - ... and {len(items) - max_items} more")
    return lines


def run(args: argparse.Namespace) -> int:
    settings = store_settings()
    configs = load_datasources(settings.datasources_path)
    store = build_schema_store(settings)
    try:
        results = check_drift(configs, store)
    finally:
        store.close()
    if getattr(args, "json", False):
        print(json.dumps([r.model_dump(mode="json") for r in results], indent=2, ensure_ascii=False))
        return 0
    if not results:
        print(f"no datasources in {settings.datasources_path}")
    for result in results:
        print("\n".join(format_result(result)))
    return 0
