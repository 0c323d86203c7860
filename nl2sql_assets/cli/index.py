"""``nl2sql-assets index [--datasource ID]...``: drift detection, then materialize through Dagster.

Runs ``index_job`` in process for every new structure (a new partition) or documentation
change (the current partition), recorded on the Dagster instance in ``DAGSTER_HOME``
(default ``$NL2SQL_HOME/dagster``), so the UI shows these runs like the sensor's. Prints one
line per datasource; exits 1 naming the datasources that failed.
"""

from __future__ import annotations

import argparse
import sys

from nl2sql_assets.app.instance import prepare_instance
from nl2sql_assets.app.runner import run_index
from nl2sql_assets.cli.environment import command_settings
from nl2sql_assets.config import Settings


def dagster_log_level(verbosity: int) -> str:
    """Dagster's console log level for ``-v`` counts: warnings by default, run events with -v.

    >>> [dagster_log_level(n) for n in (0, 1, 2)]
    ['WARNING', 'INFO', 'DEBUG']
    """
    return "WARNING" if verbosity <= 0 else "INFO" if verbosity == 1 else "DEBUG"


def index_and_report(settings: Settings, datasource_ids: list[str], verbosity: int = 0) -> int:
    """Index, print one line per datasource, and return the exit status (shared with ``demo``)."""
    instance = prepare_instance(settings)
    try:
        results = run_index(settings, datasource_ids, instance=instance, log_level=dagster_log_level(verbosity))
    finally:
        instance.dispose()
    if not results:
        print(f"no datasources in {settings.datasources_path}")
    for result in results:
        print(result.line())
    failed = [r.datasource_id for r in results if r.status == "failed"]
    if failed:
        print(f"nl2sql-assets index: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def run(args: argparse.Namespace) -> int:
    return index_and_report(command_settings(), list(args.datasource or []), getattr(args, "verbose", 0))
