"""The ``openai`` SDK, set up once for both OpenAI users: embeddings and LLM enrichment.

The SDK does the wire protocol: authentication, base URL (any OpenAI-compatible server; pass
an ``openai.AzureOpenAI`` client for Azure), timeouts, response parsing and typed errors. Its
own retries are switched off (``max_retries=0``) in favour of :func:`call_with_retries`, the
one retry loop here, for two reasons: a caller can inject how to wait (tests record the waits
instead of sleeping), and enrichment must never retry a timeout, because a hanging endpoint
may cost a command one timeout, not one per attempt; the SDK's loop retries every failure
alike. What is retried follows the SDK's rules: connection errors, timeouts (when allowed),
408, 409, 429 and 5xx, waiting for ``Retry-After`` when the server sends one.

``openai`` is imported on first use, not with this module: it takes about a second, which a
command using the local embedding model and no enrichment should not pay.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar

from nl2sql_assets.config import redact_text

if TYPE_CHECKING:
    import openai

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RETRY_STATUS = frozenset({408, 409, 429})
T = TypeVar("T")


def sdk() -> ModuleType:
    """The ``openai`` package (imported here, on first use: see the module docstring)."""
    import openai as module

    return module


def build_client(api_key: str, base_url: str | None, timeout: float) -> openai.OpenAI:
    """An SDK client for ``base_url`` (default OpenAI's) that retries nothing by itself.

    The base URL is passed explicitly, never left to the SDK's own reading of
    ``OPENAI_BASE_URL``: ``Settings`` is the one place that reads the environment.
    """
    return sdk().OpenAI(api_key=api_key, base_url=(base_url or DEFAULT_BASE_URL).rstrip("/"),
                        timeout=timeout, max_retries=0)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a failed request.

    Attributes:
        max_retries: retries after the first attempt (0: none).
        backoff: seconds before the first retry; doubled each time, plus up to 25 % jitter.
        backoff_max: cap on any wait, ``Retry-After`` included.
        retry_timeouts: whether a request that timed out is tried again.
        sleep: how to wait (tests pass a recorder).
    """

    max_retries: int = 2
    backoff: float = 0.5
    backoff_max: float = 20.0
    retry_timeouts: bool = True
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0-based).

        >>> RetryPolicy(backoff=1.0, backoff_max=5.0).delay(0, retry_after=30.0)
        5.0
        """
        if retry_after is not None:
            return min(self.backoff_max, retry_after)
        return min(self.backoff_max, self.backoff * (2 ** attempt) * (1 + 0.25 * random.random()))


class RetriesExhaustedError(Exception):
    """Every attempt failed with a retryable error; ``last`` is the final one."""

    def __init__(self, attempts: int, last: Exception) -> None:
        super().__init__(f"failed after {attempts} attempts")
        self.attempts = attempts
        self.last = last


def is_retryable(exc: BaseException, *, retry_timeouts: bool = True) -> bool:
    """Whether the SDK error ``exc`` may go away on its own (the SDK's own retry rules)."""
    openai = sdk()
    if isinstance(exc, openai.APITimeoutError):
        return retry_timeouts
    if isinstance(exc, openai.APIConnectionError):
        return True
    return isinstance(exc, openai.APIStatusError) and (exc.status_code in _RETRY_STATUS or exc.status_code >= 500)


def is_auth_error(exc: BaseException) -> bool:
    """401 or 403: the key is wrong or lacks access; trying again will not help."""
    openai = sdk()
    return isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError))


def is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, sdk().APITimeoutError)


def status_code(exc: BaseException) -> int | None:
    """The HTTP status of an SDK status error, else None."""
    return exc.status_code if isinstance(exc, sdk().APIStatusError) else None


def retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds from the error response's ``retry-after-ms`` or ``retry-after`` (seconds) header."""
    if not isinstance(exc, sdk().APIStatusError):
        return None
    headers = exc.response.headers
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / divisor)
        except ValueError:
            continue  # an HTTP date: fall back to the backoff
    return None


def describe(exc: BaseException, secrets: Iterable[str] = ()) -> str:
    """One line saying what went wrong, with every secret masked.

    ``HTTP 500: <the server's message>`` for a status error; otherwise the error's type and
    message, followed by the transport error underneath (``ConnectError: ...``) when there is one.
    """
    openai = sdk()
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        message = body.get("message") if isinstance(body, dict) else None
        text = f"HTTP {exc.status_code}: {str(message or exc.message)[:200]}"
    else:
        text = f"{type(exc).__name__}: {exc}"
        cause = exc.__cause__
        if cause is not None:
            text += f" ({type(cause).__name__}: {cause})"
    return redact_text(text, secrets)


def call_with_retries(call: Callable[[], T], policy: RetryPolicy, what: str,
                      secrets: Iterable[str] = ()) -> T:
    """``call()``, tried again after each retryable SDK error until ``policy`` says stop.

    Raises:
        RetriesExhaustedError: the last attempt failed with a retryable error.
        Exception: any other error of ``call``, at once.
    """
    secrets = list(secrets)
    attempt = 0
    while True:
        try:
            return call()
        except Exception as exc:
            if not is_retryable(exc, retry_timeouts=policy.retry_timeouts):
                raise
            if attempt >= policy.max_retries:
                raise RetriesExhaustedError(attempt + 1, exc) from exc
            delay = policy.delay(attempt, retry_after_seconds(exc))
            logger.info("%s: attempt %d failed (%s); retrying in %.2fs", what, attempt + 1,
                        describe(exc, secrets), delay)
            policy.sleep(delay)
            attempt += 1
