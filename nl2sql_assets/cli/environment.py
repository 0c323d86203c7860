"""The settings of a command, with the folders it writes checked before it starts; and the one
place the product writes the environment: ``DAGSTER_HOME`` for the CLI's commands.

Dagster's instance configuration (the packaged ``dagster.yaml``) reads ``DAGSTER_HOME``;
when it is unset, the CLI points it at ``$NL2SQL_HOME/dagster`` (docs/configuration.md).
Checking first means a file where a folder belongs, a read-only mount or a full disk stops
the command with one line naming the variable, instead of a traceback after half the work.
"""

from __future__ import annotations

import os

from nl2sql_assets.config import Settings
from nl2sql_assets.filesystem import check_folder, sqlite_store_folder


def store_settings() -> Settings:
    """The settings of a command that only writes the schema store (``drift``): its folder,
    when it is a SQLite file, is checked."""
    settings = Settings.from_env()
    folder = sqlite_store_folder(settings.schema_store_url)
    if folder is not None:
        inside_home = folder == settings.home or settings.home in folder.parents
        check_folder(settings.home if inside_home else folder, "NL2SQL_HOME" if inside_home else "SCHEMA_STORE_URL")
    return settings


def command_settings() -> Settings:
    """The settings of a command that indexes or reads the instance (``index``, ``demo``,
    ``audit``), with ``NL2SQL_HOME``, ``DAGSTER_HOME`` and the schema store's folder checked and
    ``DAGSTER_HOME`` exported for Dagster.

    Raises:
        ConfigError: a variable is invalid.
        StorageError: a folder is a file, read-only, or on a full disk.
    """
    settings = store_settings()
    check_folder(settings.home, "NL2SQL_HOME")
    check_folder(settings.dagster_home, "DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(settings.dagster_home)
    return settings
