"""The Dagster resources: thin ``ConfigurableResource`` wrappers that build the core objects.

:func:`build_resources` is the one place that turns :class:`~nl2sql_assets.config.Settings`
into the five resources under their contract names, for the code location and the CLI alike.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypeVar

import dagster as dg

from nl2sql_assets.config import Settings
from nl2sql_assets.pipeline.names import RESOURCE_KEYS
from resources.datasources import DatasourcesResource
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.schema_store import SchemaStoreResource
from resources.vector_store import VectorStoreResource

__all__ = ["RESOURCE_KEYS", "DatasourcesResource", "EmbeddingsResource", "LLMResource", "SchemaStoreResource",
           "VectorStoreResource", "build_resources", "close_resources", "resolve_env_vars"]


def build_resources(settings: Settings, env: Mapping[str, str] | None = None) -> dict[str, dg.ConfigurableResource]:
    """The five resources for ``settings``. A secret that came from the environment
    (``OPENAI_API_KEY``, ``SCHEMA_STORE_URL``) is bound as ``dg.EnvVar``, so the UI shows the
    variable's name, never the value; :func:`resolve_env_vars` makes a resource usable
    outside a run."""
    env = os.environ if env is None else env

    def secret(name: str, value: str | None) -> str | None:
        return dg.EnvVar(name) if env.get(name) else value

    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    openai = {"openai_api_key": secret("OPENAI_API_KEY", key), "openai_base_url": settings.openai_base_url}
    return {
        "datasources": DatasourcesResource(path=str(settings.datasources_path)),
        "schema_store": SchemaStoreResource(url=secret("SCHEMA_STORE_URL", settings.schema_store_url)),
        "embeddings": EmbeddingsResource(provider=settings.embedding_provider, model=settings.embedding_model,
                                         home=str(settings.home), **openai),
        "vector_store": VectorStoreResource(home=str(settings.home), chroma_host=settings.chroma_host,
                                            chroma_port=settings.chroma_port, keep_versions=settings.keep_versions),
        "llm": LLMResource(enrichment=settings.enrichment, timeout_s=settings.enrichment_timeout_s, **openai),
    }


def close_resources(resources: Mapping[str, object]) -> None:
    """Close what the resources opened (model, stores); safe to call twice."""
    for resource in resources.values():
        close = getattr(resource, "close", None)
        if callable(close):
            close()


R = TypeVar("R", bound=dg.ConfigurableResource)


def resolve_env_vars(resource: R) -> R:
    """A copy of the resource with every ``EnvVar`` field replaced by the variable's value, for
    use outside a Dagster run (the CLI shares one resolved object across its runs)."""
    updates = {name: value.get_value() for name, value in dict(resource).items() if isinstance(value, dg.EnvVar)}
    return resource.model_copy(update=updates) if updates else resource
