"""The ``llm`` resource: the chat model used by enrichment (``ENRICHMENT=openai``), or none.

Enrichment never fails indexing: :meth:`LLMResource.factory` is handed to
``enrich_schema_snapshot``, which builds the client inside its own guard.

The client is built on first use and kept, behind a circuit breaker, for the life of this
object. ``nl2sql-assets index`` shares one resource object across all its runs, so an
endpoint that timed out, is unreachable or keeps failing is called once per command, not
once per datasource: the later runs record enrichment as skipped, naming the first failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import dagster as dg
from pydantic import Field, PrivateAttr

from nl2sql_assets.config import Settings
from nl2sql_assets.indexing.llm_client import (
    DEFAULT_LLM_MAX_RETRIES,
    DEFAULT_LLM_TIMEOUT_S,
    BreakerChatClient,
    ChatClient,
    build_llm,
)


class LLMResource(dg.ConfigurableResource):
    """Enrichment switch and OpenAI client settings."""

    enrichment: Literal["off", "openai"] = Field(default="off", description="off or openai (ENRICHMENT).")
    openai_api_key: str | None = Field(
        default=None, description="OpenAI API key; bound as EnvVar('OPENAI_API_KEY'), never as a literal.")
    openai_base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint (OPENAI_BASE_URL).")
    timeout_s: float = Field(
        default=DEFAULT_LLM_TIMEOUT_S, gt=0,
        description="Seconds one chat completion may take (ENRICHMENT_TIMEOUT_S); a timeout is not retried "
                    "and stops enrichment for the rest of the command.")
    max_retries: int = Field(
        default=DEFAULT_LLM_MAX_RETRIES, ge=0,
        description="Retries of a chat completion after a 429, a 5xx or a connection error.")
    _client: BreakerChatClient | None = PrivateAttr(default=None)

    @property
    def enabled(self) -> bool:
        return self.enrichment != "off"

    def factory(self) -> Callable[[], ChatClient | None] | None:
        """What ``enrich_schema_snapshot`` expects: None when enrichment is off, else a builder."""
        if not self.enabled:
            return None
        return self.chat_client

    def chat_client(self) -> ChatClient | None:
        """The breaker-guarded client, built on first use and kept for the life of this resource.

        Raises:
            LLMUnavailableError: no API key (raised again on every call; nothing is kept).
        """
        if self._client is None:
            settings = Settings.of(enrichment=self.enrichment, openai_api_key=self.openai_api_key,
                                   openai_base_url=self.openai_base_url)
            client = build_llm(settings, timeout_s=self.timeout_s, max_retries=self.max_retries)
            if client is None:
                return None
            self._client = BreakerChatClient(client)
        return self._client

    def close(self) -> None:
        """Close the HTTP client; safe to call twice (the CLI closes its resources at the end)."""
        client, self._client = self._client, None
        if client is not None:
            client.close()
