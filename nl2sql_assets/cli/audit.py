"""``nl2sql-assets audit [--datasource ID]... [--json]``: lineage and vector-store consistency.

Reads the Dagster instance (``DAGSTER_HOME``) and both stores; changes nothing. Exits 1 when
the vector store and the schema store disagree for any audited datasource.
"""

from __future__ import annotations

import argparse
import json

from nl2sql_assets.cli.environment import command_settings


def run(args: argparse.Namespace) -> int:
    settings = command_settings()
    # imported once the settings are checked: a refused command should not spend Dagster's import
    from nl2sql_assets.app.audit import build_audit, format_audit
    from nl2sql_assets.app.instance import prepare_instance

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
