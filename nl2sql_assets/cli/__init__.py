"""The ``nl2sql-assets`` console script: argument parsing, dispatch, and one-line errors.

Each command lives in its own module with ``run(args) -> int``; this module only parses,
sets up logging, and turns every failure into one line on stderr naming the cause and the
fix: core errors (exit 2 for bad input or configuration, 1 for a full disk or a damaged
database), file-system errors (the path and what to do), a corrupt SQLite database (which
file, and how to repair it). A truly unexpected exception is one line with its type and
message too; its traceback is printed only with ``-vv``, since it helps a developer, not a user.
A closed stdout pipe (``| head``) ends quietly with status 141, as a SIGPIPE'd tool does;
``-v`` is accepted before or after the command (the counts add up).
"""

from __future__ import annotations

import argparse
import errno
import importlib
import logging
import os
import sqlite3
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa

from nl2sql_assets.config import Settings, redact_text
from nl2sql_assets.errors import InstanceStorageError, Nl2SqlError, StorageError
from nl2sql_assets.filesystem import INSTANCE_DATABASES, full_folder, sqlite_header_problem
from nl2sql_assets.sqlite_health import check_file

COMMANDS = ("demo", "index", "drift", "retrieve", "audit")
#: the status of a command whose stdout reader went away: 128 + SIGPIPE, as the shell reports
EXIT_BROKEN_PIPE = 141


_BATCH_EPILOG = """\
batch input: one JSON object per line (UTF-8), e.g.
  {"id": "q1", "question": "Revenue per month?", "datasource": "commerce"}
fields: "question" (required, a non-empty string); "id" (any JSON value, copied to the
output line); "datasource", "tenant", "schema_version", "evidence" (optional strings, as the
options of the same names). Output: one line per input line, in the same order: the result
object with "id", or {"id": ..., "line": N, "error": "..."} for a line that cannot be answered.
"""


def _verbose_parent() -> argparse.ArgumentParser:
    """``-v`` accepted after the subcommand too; counted apart and added to the global count."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("-v", "--verbose", action="count", dest="sub_verbose", default=0,
                        help="more log output (-vv for debug); also accepted before the command")
    return parent


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nl2sql-assets",
        description="Schema indexing and retrieval for NL2SQL (see README.md).",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parents = [_verbose_parent()]

    def add(name: str, summary: str, description: str, **kwargs: object) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=summary, description=description, parents=parents, **kwargs)  # type: ignore[arg-type]

    demo = add("demo", "create the demo datasources, index them, print sample retrievals",
               "Create the bundled demo datasources (commerce, hr, support) under NL2SQL_HOME, index "
               "them through Dagster and print a few sample retrievals.")
    demo.add_argument("--no-retrieve", action="store_true", help="index only, print no sample retrievals")

    index = add("index", "detect drift and materialize new versions through Dagster",
                "Check every (or each named) datasource for drift and materialize new structures or "
                "documentation changes through Dagster; one line per datasource. Exits 1 naming the "
                "datasources that failed. Shows progress on a terminal.")
    index.add_argument("--datasource", action="append", default=[], metavar="ID",
                       help="only this datasource (repeatable)")

    drift = add("drift", "one drift check, no materialization",
                "Compare each datasource's live structure with the latest version in the schema store "
                "(structure only: no statistics, no row scans). Changes nothing; exits 0.")
    drift.add_argument("--json", action="store_true", help="machine-readable output")

    retrieve = add("retrieve", "run the staged retriever",
                   "Find the datasource, tables, columns and joins that answer a natural-language "
                   "question, or answer every line of a JSONL file with --batch.",
                   epilog=_BATCH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    retrieve.add_argument("question", nargs="?", help="the natural-language question")
    retrieve.add_argument("--datasource", metavar="ID",
                          help="answer from this datasource only (default: route among all visible ones)")
    retrieve.add_argument("--tenant", metavar="T",
                          help="only this tenant's datasources are visible (and routed among)")
    retrieve.add_argument("--schema-version", metavar="V",
                          help="this registered version of --datasource (default: the live one)")
    retrieve.add_argument("--evidence", metavar="TEXT",
                          help="optional hint text (domain knowledge) used alongside the question")
    retrieve.add_argument("--recall-target", metavar="P", type=float,
                          help="keep tables (and columns) until the estimated probability that every needed "
                               "one is sent reaches P, 0 < P < 1 (default: RetrieverConfig's)")
    retrieve.add_argument("--json", action="store_true", help="print the result object as JSON")
    retrieve.add_argument("--batch", metavar="IN.jsonl",
                          help="answer every line of a JSONL file (line format below); needs --out")
    retrieve.add_argument("--out", metavar="OUT.jsonl", help="where --batch writes its results")

    audit = add("audit", "lineage and vector-store consistency per datasource",
                "Show each datasource's live version, history, the run of every asset of the live "
                "version and chunk counts, and check that the vector store matches the schema store. "
                "Changes nothing; exits 1 when they do not match.")
    audit.add_argument("--datasource", action="append", default=[], metavar="ID",
                       help="only this datasource (repeatable)")
    audit.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse, adding ``-v`` given after the command to those given before it."""
    args = build_parser().parse_args(argv)
    args.verbose = int(args.verbose or 0) + int(getattr(args, "sub_verbose", 0) or 0)
    return args


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


_PATH_FIXES = {
    errno.ENOSPC: "the disk is full: free some space, or point NL2SQL_HOME / DAGSTER_HOME at another disk",
    errno.EDQUOT: "the disk quota is used up: free some space, or point NL2SQL_HOME / DAGSTER_HOME elsewhere",
    errno.EROFS: "the file system is read-only: point NL2SQL_HOME / DAGSTER_HOME at a writable folder",
    errno.EACCES: "permission denied: make it writable, or point NL2SQL_HOME / DAGSTER_HOME elsewhere",
    errno.EPERM: "operation not permitted: make it writable, or point NL2SQL_HOME / DAGSTER_HOME elsewhere",
    errno.ENOTDIR: "a file stands where a folder is expected: remove it, or point NL2SQL_HOME / DAGSTER_HOME "
                   "elsewhere",
    errno.EEXIST: "a file stands where a folder is expected: remove it, or point NL2SQL_HOME / DAGSTER_HOME "
                  "elsewhere",
    errno.EISDIR: "a folder stands where a file is expected: move it away, or fix the path",
    errno.ENOENT: "it does not exist: create it, or fix the path",
    errno.EIO: "the disk reported an input/output error: check the disk",
}
#: (words of a SQLite message, what it means and what to do)
_SQLITE_FAULTS = (
    (("disk is full", "disk full"), "the disk is full: free some space, or point NL2SQL_HOME / DAGSTER_HOME at "
                                    "another disk"),
    (("readonly database", "read-only", "unable to open database file"),
     "a database file cannot be opened for writing: make NL2SQL_HOME / DAGSTER_HOME writable"),
    (("database is locked", "database is busy"), "another process holds the database: wait for it, or stop it"),
    (("disk i/o error",), "the disk reported an input/output error: check the disk"),
)


def _settings() -> Settings | None:
    try:
        return Settings.from_env()
    except Nl2SqlError:
        return None


def _full_disk() -> str | None:
    """"the disk of X is full" when NL2SQL_HOME's or DAGSTER_HOME's disk is: SQLite and Chroma
    often report a full disk as a mere I/O error."""
    settings = _settings()
    found = full_folder([settings.home, settings.dagster_home]) if settings is not None else None
    if found is None:
        return None
    folder, free = found
    return (f"the disk of {folder} is full ({free // 1024} KiB free): free some space, or point "
            "NL2SQL_HOME / DAGSTER_HOME at another disk, and run the command again")


def _os_error(exc: OSError) -> tuple[str, int]:
    """One line for a file-system error: the path, the reason and the fix; full disks exit 1."""
    paths = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
    fix = _PATH_FIXES.get(exc.errno or 0, f"{exc.strerror or exc}: check the path and its disk")
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
        fix = _full_disk() or fix
        status = 1
    else:
        status = 2
    return (f"{paths}: {fix}" if paths else fix), status


def _damage(path: Path) -> str | None:
    """What is wrong with a SQLite file (its header first: it names a truncation), or None."""
    return (sqlite_header_problem(path) or check_file(path)) if path.is_file() else None


def _corrupt_file_line(problem_text: str) -> str:
    """Which SQLite file is corrupt, and how to repair it (each file has its own remedy)."""
    settings = _settings()
    if settings is not None:
        home = settings.dagster_home
        for relative in INSTANCE_DATABASES:
            path = home / relative
            problem = _damage(path)
            if problem:
                return str(InstanceStorageError(path, problem))
        others = {
            settings.cache_path / "embeddings.sqlite3":
                "delete it and run the command again (it is a cache: it only costs re-embedding)",
            settings.chroma_path / "chroma.sqlite3":
                f"move {settings.chroma_path} aside and run `nl2sql-assets index` (the vectors are rebuilt "
                "from the schema store)",
        }
        for path, fix in others.items():
            problem = _damage(path)
            if problem:
                return f"SQLite database {path}: {problem}; {fix}"
    return (f"a SQLite database is corrupt ({problem_text}); if it is under DAGSTER_HOME, move that folder aside "
            "and run the command again (run history is lost, the indexes are not); rerun with -vv to see where")


def _database_error(exc: BaseException) -> tuple[str, int] | None:
    """One line for a SQLite failure that escaped every layer; None when it is not one we know."""
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    message = text[0] if text else type(exc).__name__
    lowered = message.lower()
    if any(word in lowered for word in ("malformed", "not a database", "file is encrypted", "corrupt")):
        return _corrupt_file_line(message), 1
    if any(word in lowered for word in ("disk is full", "disk full", "disk i/o error")):
        full = _full_disk()
        if full is not None:
            return f"{message}: {full}", 1
    for words, fix in _SQLITE_FAULTS:
        if any(word in lowered for word in words):
            return f"{message}: {fix}", 1
    return None


def _schema_error(exc: BaseException) -> str | None:
    """One line for an instance database whose schema Dagster cannot use (alembic, migrations)."""
    kind = type(exc)
    if not (kind.__module__.startswith("alembic") or "instance migrate" in str(exc)):
        return None
    settings = _settings()
    home = settings.dagster_home if settings is not None else Path("$DAGSTER_HOME")
    return (f"the Dagster instance database in {home} has a schema this Dagster cannot use "
            f"({kind.__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}); run "
            f"`DAGSTER_HOME={home} dagster instance migrate`, or move {home} aside and run the command "
            "again (run history is lost, the indexes are not)")


def _unexpected(exc: BaseException, verbosity: int) -> str:
    """One line for an exception nobody expected; its traceback only with -vv (both redacted)."""
    if verbosity >= 2:
        text = "".join(traceback.format_exception(exc))
        print(redact_text(text), file=sys.stderr, end="")
    message = " ".join(str(exc).split())[:300] or "(no message)"
    hint = "" if verbosity >= 2 else " (rerun with -vv for the traceback)"
    return f"unexpected {type(exc).__name__}: {message}{hint}"


def _exit_status(exc: Nl2SqlError) -> int:
    """2 for bad input or configuration; 1 for the machine's state (a full disk, a damaged database)."""
    if (isinstance(exc, StorageError) and exc.full) or isinstance(exc, InstanceStorageError):
        return 1
    return 2


def _closed_pipe() -> int:
    """The reader of stdout went away (``| head``): end quietly, as a SIGPIPE'd tool would.

    stdout is pointed at devnull so the interpreter's final flush cannot fail again (the
    Python docs' recipe); the status is 141 (128 + SIGPIPE), what a shell reports for such a tool.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return EXIT_BROKEN_PIPE


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _configure_logging(args.verbose)
    status, line = 0, ""
    try:
        module = importlib.import_module(f"nl2sql_assets.cli.{args.command}")
        status = int(module.run(args))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    except Nl2SqlError as exc:
        status, line = _exit_status(exc), str(exc)
    except OSError as exc:
        line, status = _os_error(exc)
    except (sqlite3.DatabaseError, sa.exc.DatabaseError) as exc:
        known = _database_error(exc)
        line, status = known if known is not None else (_unexpected(exc, args.verbose), 1)
    except Exception as exc:  # noqa: BLE001 - the last resort: one line, traceback only with -vv
        schema = _schema_error(exc)
        line, status = (schema, 1) if schema is not None else (_unexpected(exc, args.verbose), 1)
    print(f"nl2sql-assets {args.command}: error: {redact_text(line)}", file=sys.stderr)
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
