"""The code location: assets (with their checks), job, sensor and resources under their contract names.

``workspace.yaml`` loads :data:`defs` (lazily: nothing reads the environment before Dagster
asks). Values that may be secret (``OPENAI_API_KEY``, ``SCHEMA_STORE_URL``) are bound as
``dg.EnvVar`` so the UI shows the variable's name, never the value; everything else the
resources read from the environment when they are used (contract.md defaults).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import dagster as dg

from nl2sql_assets.defs.assets import schema_index_assets
from nl2sql_assets.defs.jobs import index_job
from nl2sql_assets.defs.sensors import schema_drift_sensor
from resources.datasources import DatasourcesResource
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.schema_store import SchemaStoreResource
from resources.vector_store import VectorStoreResource

RESOURCE_KEYS = ("datasources", "schema_store", "embeddings", "vector_store", "llm")


def default_resources(env: Mapping[str, str] | None = None) -> dict[str, dg.ConfigurableResource]:
    """The five resources configured from the environment; secrets as ``EnvVar``."""
    env = os.environ if env is None else env

    def secret(name: str) -> dg.EnvVar | None:
        return dg.EnvVar(name) if env.get(name) else None

    return {
        "datasources": DatasourcesResource(),
        "schema_store": SchemaStoreResource(url=secret("SCHEMA_STORE_URL")),
        "embeddings": EmbeddingsResource(openai_api_key=secret("OPENAI_API_KEY")),
        "vector_store": VectorStoreResource(),
        "llm": LLMResource(openai_api_key=secret("OPENAI_API_KEY")),
    }


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
