"""``nl2sql-assets index [--datasource ID]...``: drift detection, then materialize through Dagster.

Runs ``index_job`` in process for every new structure (a new partition) or documentation
change (the current partition), recorded on the Dagster instance in ``DAGSTER_HOME``
(default ``$NL2SQL_HOME/dagster``), so the UI shows these runs like the sensor's. Prints one
line per datasource; exits 1 naming the datasources that failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO

from nl2sql_assets.cli.environment import command_settings
from nl2sql_assets.config import Settings
from nl2sql_assets.progress import ProgressEvent, progress_to


def dagster_log_level(verbosity: int) -> str:
    """Dagster's console log level for ``-v`` counts: silent by default (a failed step is
    reported once, by its result line and the final summary), run events and failures with -v.

    >>> [dagster_log_level(n) for n in (0, 1, 2)]
    ['CRITICAL', 'INFO', 'DEBUG']
    """
    return "CRITICAL" if verbosity <= 0 else "INFO" if verbosity == 1 else "DEBUG"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def terminal_progress() -> Callable[[str], None] | None:
    """A progress writer to stderr when stderr is a terminal; None (quiet) when it is piped."""
    stream = sys.stderr
    if not _is_terminal(stream):
        return None

    def write(line: str) -> None:
        print(line, file=stream, flush=True)

    return write


def terminal_counts() -> Callable[[ProgressEvent], None] | None:
    """Counted progress inside a run (``  40/300 tables introspected``), rewritten in place on a terminal."""
    stream = sys.stderr
    if not _is_terminal(stream):
        return None

    def write(event: ProgressEvent) -> None:
        end = "\n" if event.done >= event.total else ""
        stream.write(f"\r  {event.line()}\033[K{end}")
        stream.flush()

    return write


def index_and_report(settings: Settings, datasource_ids: list[str], verbosity: int = 0) -> int:
    """Index, print one line per datasource, and return the exit status (shared with ``demo``).

    Dagster and Chroma are imported here, after the settings and folders were checked: together
    they take about 2 s, which a command refused for bad configuration should not spend.
    """
    from nl2sql_assets.app.instance import prepare_instance
    from nl2sql_assets.app.runner import run_index

    instance = prepare_instance(settings)
    try:
        with progress_to(terminal_counts()):
            results = run_index(settings, datasource_ids, instance=instance,
                                log_level=dagster_log_level(verbosity), progress=terminal_progress())
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
