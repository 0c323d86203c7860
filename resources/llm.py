"""The ``llm`` resource: the chat model used by enrichment (``ENRICHMENT=openai``), or none.

Enrichment never fails indexing: :meth:`LLMResource.factory` is handed to
``enrich_schema_snapshot``, which builds the client inside its own guard.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from nl2sql_assets.config import Settings
from resources._settings import resolve_settings

if TYPE_CHECKING:
    from nl2sql_assets.indexing.enrichment import ChatClient


class LLMResource(dg.ConfigurableResource):
    """Enrichment switch and OpenAI client settings; ``None`` fields come from the environment."""

    enrichment: str | None = Field(default=None, description="off or openai. Default: ENRICHMENT, else off.")
    openai_api_key: str | None = Field(
        default=None, description="OpenAI API key; set it as an EnvVar (OPENAI_API_KEY), never as a literal.",
    )
    openai_base_url: str | None = Field(default=None, description="Default: OPENAI_BASE_URL.")

    def settings(self) -> Settings:
        return resolve_settings(enrichment=self.enrichment, openai_api_key=self.openai_api_key,
                                openai_base_url=self.openai_base_url)

    @property
    def enabled(self) -> bool:
        return self.settings().enrichment != "off"

    def factory(self) -> Callable[[], ChatClient | None] | None:
        """What ``enrich_schema_snapshot`` expects: None when enrichment is off, else a builder."""
        settings = self.settings()
        if settings.enrichment == "off":
            return None

        def build() -> ChatClient | None:
            from nl2sql_assets.indexing.enrichment import build_llm

            return build_llm(settings)

        return build
