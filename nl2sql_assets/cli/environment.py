"""The one place the product writes the environment: ``DAGSTER_HOME`` for the CLI's commands.

Dagster's instance configuration (the packaged ``dagster.yaml``) reads ``DAGSTER_HOME``;
when it is unset, the CLI points it at ``$NL2SQL_HOME/dagster`` (docs/configuration.md).
"""

from __future__ import annotations

import os

from nl2sql_assets.config import Settings


def command_settings() -> Settings:
    """The settings of this command, with ``DAGSTER_HOME`` exported for Dagster."""
    settings = Settings.from_env()
    os.environ["DAGSTER_HOME"] = str(settings.dagster_home)
    return settings
