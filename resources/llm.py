"""The ``llm`` resource: the chat model used by enrichment (``ENRICHMENT=openai``), or none.

Enrichment never fails indexing: :meth:`LLMResource.factory` is handed to
``enrich_schema_snapshot``, which builds the client inside its own guard.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import dagster as dg
from pydantic import Field

from nl2sql_assets.config import Settings
from nl2sql_assets.indexing.enrichment import ChatClient, build_llm


class LLMResource(dg.ConfigurableResource):
    """Enrichment switch and OpenAI client settings."""

    enrichment: Literal["off", "openai"] = Field(default="off", description="off or openai (ENRICHMENT).")
    openai_api_key: str | None = Field(
        default=None, description="OpenAI API key; bound as EnvVar('OPENAI_API_KEY'), never as a literal.")
    openai_base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint (OPENAI_BASE_URL).")

    @property
    def enabled(self) -> bool:
        return self.enrichment != "off"

    def factory(self) -> Callable[[], ChatClient | None] | None:
        """What ``enrich_schema_snapshot`` expects: None when enrichment is off, else a builder."""
        if not self.enabled:
            return None
        settings = Settings.of(enrichment=self.enrichment, openai_api_key=self.openai_api_key,
                               openai_base_url=self.openai_base_url)

        def build() -> ChatClient | None:
            return build_llm(settings)

        return build
