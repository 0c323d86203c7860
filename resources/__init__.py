"""The Dagster resources: thin ``ConfigurableResource`` wrappers that build the core objects.

Contract names (``datasources``, ``schema_store``, ``embeddings``, ``vector_store``, ``llm``)
are assigned in :mod:`nl2sql_assets.defs.definitions`.
"""

from resources.datasources import DatasourcesResource
from resources.embeddings import EmbeddingsResource
from resources.llm import LLMResource
from resources.schema_store import SchemaStoreResource
from resources.vector_store import VectorStoreResource

__all__ = ["DatasourcesResource", "EmbeddingsResource", "LLMResource", "SchemaStoreResource",
           "VectorStoreResource"]
