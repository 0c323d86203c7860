"""``nl2sql-assets audit [--datasource ID]... [--json]``: lineage and vector-store consistency.

Reads the Dagster instance (``DAGSTER_HOME``) and both stores; changes nothing. Exits 1 when
the vector store and the schema store disagree for any audited datasource.
"""

from __future__ import annotations

import argparse
import json

from nl2sql_assets.config import Settings


def run(args: argparse.Namespace) -> int:
    from nl2sql_assets.defs.audit import build_audit, format_audit
    from nl2sql_assets.defs.runner import prepare_instance

    settings = Settings.from_env()
    instance = prepare_instance(settings)
    try:
        report = build_audit(settings, instance, list(args.datasource or []))
    finally:
        instance.dispose()
    if args.json:
        print(json.dumps(report.to_json_dict(), indent=2, ensure_ascii=False))
    else:
        print(format_audit(report))
    return 0 if report.consistent else 1
