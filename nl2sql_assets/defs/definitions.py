"""The code location: assets (with their checks), job, sensor and resources under their contract names.

``workspace.yaml`` loads :data:`defs` lazily: the environment is read (once, through
:class:`~nl2sql_assets.config.Settings`) when Dagster loads the location, and the resources
are built by :func:`resources.build_resources`, the same function the CLI uses. Secrets
(``OPENAI_API_KEY``, ``SCHEMA_STORE_URL``) are bound as ``dg.EnvVar`` so the UI shows the
variable's name, never the value. The datasources file is read here too: each datasource
becomes an external asset upstream of the index (reload the code location after editing it),
and group, owners, code versions and kinds are applied (:mod:`nl2sql_assets.defs.catalog`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence

import dagster as dg

from nl2sql_assets.config import DatasourceConfig, Settings, load_datasources
from nl2sql_assets.defs.assets import schema_index_assets
from nl2sql_assets.defs.catalog import datasource_spec, decorate
from nl2sql_assets.defs.jobs import index_job
from nl2sql_assets.defs.sensors import schema_drift_sensor
from nl2sql_assets.defs.status import INDEX_STATUS_SPEC
from nl2sql_assets.errors import Nl2SqlError
from nl2sql_assets.pipeline.names import RESOURCE_KEYS
from resources import build_resources

__all__ = ["RESOURCE_KEYS", "build_definitions", "default_resources", "defs"]

log = logging.getLogger(__name__)


def default_resources(env: Mapping[str, str] | None = None) -> dict[str, dg.ConfigurableResource]:
    """The five resources configured from the environment; secrets as ``EnvVar``."""
    env = os.environ if env is None else env
    return build_resources(Settings.from_env(env), env)


def _datasources(settings: Settings) -> list[DatasourceConfig]:
    """The datasources file's entries; an unusable file leaves the graph without source assets
    (the sensor's skip reason names the problem) instead of failing the code location."""
    try:
        return load_datasources(settings.datasources_path)
    except Nl2SqlError as exc:
        log.warning("no datasource assets: %s", exc)
        return []


def build_definitions(resources: Mapping[str, object] | None = None, *, settings: Settings | None = None,
                      datasources: Sequence[DatasourceConfig] | None = None) -> dg.Definitions:
    """The Definitions; ``resources`` replaces the defaults key by key (tests, the CLI).

    ``settings`` (default: the environment) give the group, owners and enrichment kind;
    ``datasources`` (default: the settings' datasources file) the source assets.
    """
    settings = settings or Settings.from_env()
    configs = list(_datasources(settings) if datasources is None else datasources)
    bound: dict[str, object] = dict(default_resources())
    bound.update(resources or {})
    return dg.Definitions(
        assets=[*decorate([*schema_index_assets, INDEX_STATUS_SPEC], settings, configs),
                *(datasource_spec(c, settings) for c in configs)],
        jobs=[index_job],
        sensors=[schema_drift_sensor],
        resources=bound,
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions()
