"""The code location: assets (with their checks), job, sensor and resources under their contract names.

``workspace.yaml`` loads :data:`defs` lazily: the environment is read (once, through
:class:`~nl2sql_assets.config.Settings`) when Dagster loads the location, and the resources
are built by :func:`resources.build_resources`, the same function the CLI uses. Secrets
(``OPENAI_API_KEY``, ``SCHEMA_STORE_URL``) are bound as ``dg.EnvVar`` so the UI shows the
variable's name, never the value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import dagster as dg

from nl2sql_assets.config import Settings
from nl2sql_assets.defs.assets import schema_index_assets
from nl2sql_assets.defs.jobs import index_job
from nl2sql_assets.defs.sensors import schema_drift_sensor
from nl2sql_assets.pipeline.names import RESOURCE_KEYS
from resources import build_resources

__all__ = ["RESOURCE_KEYS", "build_definitions", "default_resources", "defs"]


def default_resources(env: Mapping[str, str] | None = None) -> dict[str, dg.ConfigurableResource]:
    """The five resources configured from the environment; secrets as ``EnvVar``."""
    env = os.environ if env is None else env
    return build_resources(Settings.from_env(env), env)


def build_definitions(resources: Mapping[str, object] | None = None) -> dg.Definitions:
    """The Definitions; ``resources`` replaces the defaults key by key (tests, the CLI)."""
    bound: dict[str, object] = dict(default_resources())
    bound.update(resources or {})
    return dg.Definitions(
        assets=schema_index_assets,
        jobs=[index_job],
        sensors=[schema_drift_sensor],
        resources=bound,
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions()
