"""The chat model behind enrichment: OpenAI chat completions through the ``openai`` SDK.

:class:`OpenAIChatClient` asks for structured output (``response_format`` with enrichment's
JSON schema) and maps every failure to one of two errors: :class:`LLMUnavailableError` when
the endpoint cannot be used (no key, refused key, timeout, unreachable, 5xx or 429 after the
retries) and :class:`EnrichmentError` when it answered something unusable. A timeout is never
retried: it has already cost the whole timeout.

:class:`BreakerChatClient` puts a circuit breaker in front of a client: after the endpoint
was found unusable once, later calls fail at once, naming the first failure. Whoever keeps
the client for a command keeps the breaker (the ``llm`` resource), so a hanging endpoint
costs a command one timeout, not one per datasource or per batch of tables.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, SecretStr

from nl2sql_assets.config import DEFAULT_ENRICHMENT_TIMEOUT_S, Settings, redact_url
from nl2sql_assets.errors import Nl2SqlError
from nl2sql_assets.indexing.breaker import CircuitBreaker, CircuitOpenError
from nl2sql_assets.indexing.openai_client import (
    DEFAULT_BASE_URL,
    RetriesExhaustedError,
    RetryPolicy,
    build_client,
    call_with_retries,
    describe,
    is_auth_error,
    is_timeout,
    status_code,
)

if TYPE_CHECKING:
    import openai

log = logging.getLogger(__name__)

DEFAULT_CHAT_MODEL = "gpt-4o-mini"
#: Seconds one chat completion may take before the endpoint counts as hanging.
DEFAULT_LLM_TIMEOUT_S = DEFAULT_ENRICHMENT_TIMEOUT_S
#: Retries after a 429, a 5xx or a connection error (never after a timeout).
DEFAULT_LLM_MAX_RETRIES = 2

_COLUMN = {"type": "object", "additionalProperties": False, "required": ["name", "description", "synonyms"],
           "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                          "synonyms": {"type": "array", "items": {"type": "string"}}}}
_TABLE = {"type": "object", "additionalProperties": False, "required": ["name", "description", "columns"],
          "properties": {"name": {"type": "string"}, "description": {"type": "string"},
                         "columns": {"type": "array", "items": _COLUMN}}}
#: What enrichment asks the model for (structured output, strict mode).
ENRICHMENT_SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["datasource", "tables"],
    "properties": {
        "datasource": {"type": "object", "additionalProperties": False,
                       "required": ["description", "example_questions"],
                       "properties": {"description": {"type": "string"},
                                      "example_questions": {"type": "array", "items": {"type": "string"}}}},
        "tables": {"type": "array", "items": _TABLE},
    },
}


class EnrichmentError(Nl2SqlError):
    """The LLM call failed or answered something unusable."""


class LLMUnavailableError(EnrichmentError):
    """No usable LLM: no API key, refused key, or an endpoint that timed out, is unreachable or keeps failing."""


class ChatClient(Protocol):
    @property
    def model(self) -> str: ...

    def complete_json(self, system: str, user: str) -> dict[str, object]:
        """One chat completion answering with a JSON object, parsed.

        Raises:
            LLMUnavailableError: the endpoint cannot be used.
            EnrichmentError: the answer is unusable.
        """
        ...


class LLMSettings(BaseModel):
    """Where the chat model is and how long to wait for it."""

    model_config = ConfigDict(frozen=True)

    api_key: SecretStr | None = None
    base_url: str = DEFAULT_BASE_URL
    model: str = DEFAULT_CHAT_MODEL
    timeout_s: float = DEFAULT_LLM_TIMEOUT_S
    max_retries: int = DEFAULT_LLM_MAX_RETRIES
    backoff_s: float = 1.0


class OpenAIChatClient:
    """OpenAI chat completions through the SDK (any OpenAI-compatible endpoint), bounded retries.

    Args:
        settings: key, endpoint, model, timeout and retries.
        sleep: how to wait between retries (tests pass a recorder).
        client: an SDK client to use instead of building one (e.g. ``openai.AzureOpenAI``).

    Raises:
        LLMUnavailableError: no API key (and no client).
    """

    def __init__(self, settings: LLMSettings, *, sleep: Callable[[float], None] = time.sleep,
                 client: openai.OpenAI | None = None) -> None:
        key = settings.api_key.get_secret_value() if settings.api_key else ""
        if not key and client is None:
            raise LLMUnavailableError("OPENAI_API_KEY is not set")
        self._settings = settings
        self._key = key
        self._retry = RetryPolicy(max_retries=settings.max_retries, backoff=settings.backoff_s,
                                  retry_timeouts=False, sleep=sleep)
        self._client = client or build_client(key, settings.base_url, settings.timeout_s)
        self.endpoint = redact_url(settings.base_url.rstrip("/"))  # for messages: a proxy URL may hold a password

    @property
    def model(self) -> str:
        return self._settings.model

    def complete_json(self, system: str, user: str) -> dict[str, object]:
        """One structured-output completion, parsed; see :class:`ChatClient`."""

        def request() -> openai.types.chat.ChatCompletion:
            return self._client.chat.completions.create(
                model=self._settings.model, temperature=0,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                response_format={"type": "json_schema", "json_schema": {
                    "name": "schema_documentation", "strict": True, "schema": ENRICHMENT_SCHEMA}},
            )

        try:
            completion = call_with_retries(request, self._retry, "chat completion", [self._key])
        except RetriesExhaustedError as exc:
            raise LLMUnavailableError(f"chat endpoint {self.endpoint} failed after {exc.attempts} attempts "
                                      f"(last: {describe(exc.last, [self._key])})") from None
        except Exception as exc:
            raise self._error(exc) from None
        return _parse(completion)

    def _error(self, exc: Exception) -> EnrichmentError:
        if is_timeout(exc):
            return LLMUnavailableError(f"chat endpoint {self.endpoint} did not answer within "
                                       f"{self._settings.timeout_s:g} s")
        if is_auth_error(exc):
            return LLMUnavailableError(f"authentication refused ({status_code(exc)})")
        return EnrichmentError(f"chat completion failed: {describe(exc, [self._key])}")

    def close(self) -> None:
        self._client.close()


def _parse(completion: object) -> dict[str, object]:
    """The JSON object in the first choice's message; EnrichmentError when there is none."""
    try:
        message = completion.choices[0].message  # type: ignore[attr-defined]
    except (AttributeError, IndexError, TypeError):
        raise EnrichmentError("unusable chat completion: no message") from None
    if getattr(message, "refusal", None):
        raise EnrichmentError(f"the model refused: {str(message.refusal)[:200]}")
    try:
        parsed = json.loads(message.content)
    except (TypeError, ValueError) as exc:
        raise EnrichmentError(f"unusable chat completion: {type(exc).__name__}") from None
    if not isinstance(parsed, dict):
        raise EnrichmentError("chat completion is not a JSON object")
    return parsed


class BreakerChatClient:
    """A :class:`ChatClient` behind a circuit breaker: once the endpoint was unusable, stop calling it.

    Only :class:`LLMUnavailableError` trips the breaker (timeouts, unreachable, 5xx or 429 after
    the retries, a refused key); an unusable answer does not, since the endpoint did answer.
    By default the breaker stays open for the life of this object, which the ``llm`` resource
    keeps for one command: a hanging endpoint costs the command one timeout.

    Args:
        client: the client to guard.
        reset_timeout_s: seconds after which one trial call is let through again.
    """

    def __init__(self, client: ChatClient, *, reset_timeout_s: float = math.inf) -> None:
        self._client = client
        self.breaker = CircuitBreaker("llm", failure_threshold=1, reset_timeout_s=reset_timeout_s,
                                      failure_types=(LLMUnavailableError,))
        self.first_failure: str | None = None

    @property
    def model(self) -> str:
        return self._client.model

    def complete_json(self, system: str, user: str) -> dict[str, object]:
        try:
            return self.breaker.call(lambda: self._client.complete_json(system, user))
        except CircuitOpenError:
            raise LLMUnavailableError(
                f"not called: the chat endpoint failed earlier in this command ({self.first_failure})") from None
        except LLMUnavailableError as exc:
            if self.first_failure is None:
                self.first_failure = str(exc)
                log.warning("enrichment: %s; the chat endpoint is not called again in this command", exc)
            raise

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if callable(close):
            close()


def build_llm(settings: Settings, *, timeout_s: float | None = None,
              max_retries: int = DEFAULT_LLM_MAX_RETRIES) -> OpenAIChatClient | None:
    """The configured LLM, or None when ENRICHMENT is off. Raises LLMUnavailableError (no key).

    ``timeout_s`` None: the settings' ``ENRICHMENT_TIMEOUT_S``."""
    if settings.enrichment != "openai":
        return None
    return OpenAIChatClient(LLMSettings(
        api_key=settings.openai_api_key, base_url=settings.openai_base_url or DEFAULT_BASE_URL,
        timeout_s=settings.enrichment_timeout_s if timeout_s is None else timeout_s, max_retries=max_retries,
    ))
