"""The ``embeddings`` resource: the EmbeddingService, loaded once per process that uses it.

``index_job`` runs in process, so a run loads the model once; ``nl2sql-assets index`` shares
one resource object across all its runs, so the model loads once per command.
"""

from __future__ import annotations

from typing import Literal

import dagster as dg
from pydantic import Field, PrivateAttr

from nl2sql_assets.config import Settings
from nl2sql_assets.indexing.embeddings import EmbeddingService, build_embedding_service


class EmbeddingsResource(dg.ConfigurableResource):
    """Which embedding provider and model, and where the embedding cache lives."""

    provider: Literal["local", "openai"] = Field(
        default="local", description="local (ONNX all-MiniLM-L6-v2, offline) or openai (EMBEDDING_PROVIDER).")
    model: str | None = Field(default=None, description="Model name (EMBEDDING_MODEL); default: the provider's.")
    openai_api_key: str | None = Field(
        default=None, description="OpenAI API key; bound as EnvVar('OPENAI_API_KEY'), never as a literal.")
    openai_base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint (OPENAI_BASE_URL).")
    home: str = Field(default=".nl2sql", description="NL2SQL_HOME: the embedding cache is its cache/ folder.")
    _service: EmbeddingService | None = PrivateAttr(default=None)

    def settings(self) -> Settings:
        return Settings.of(home=self.home, embedding_provider=self.provider, embedding_model=self.model,
                           openai_api_key=self.openai_api_key, openai_base_url=self.openai_base_url)

    def get_service(self) -> EmbeddingService:
        """The service (model loaded on first use), kept for the life of this resource."""
        if self._service is None:
            self._service = build_embedding_service(self.settings())
        return self._service

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()

    def close(self) -> None:
        service, self._service = self._service, None
        close = getattr(service, "close", None)
        if callable(close):
            close()
