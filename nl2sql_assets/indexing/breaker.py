"""A circuit breaker: stop hammering a dependency that keeps failing, and probe it later.

States: ``closed`` (calls pass; consecutive failures are counted), ``open`` (calls fail fast
with :class:`CircuitOpenError` until ``reset_timeout_s`` has passed), ``half_open`` (exactly one
trial call passes; its success closes the circuit, its failure opens it again). Every state
change is logged. There are no global instances: whoever owns the dependency owns its
breaker (the vector store creates one named ``vector_store``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeVar

from nl2sql_assets.errors import VectorStoreUnavailableError

if TYPE_CHECKING:
    from nl2sql_assets.metrics import MetricsRegistry

log = logging.getLogger(__name__)

T = TypeVar("T")
BreakerState = Literal["closed", "open", "half_open"]
_STATE_VALUE: dict[str, int] = {"closed": 0, "half_open": 1, "open": 2}


class CircuitOpenError(VectorStoreUnavailableError):
    """A call was refused because the breaker is open (or its half-open trial is running)."""

    def __init__(self, breaker: str, retry_in_s: float) -> None:
        super().__init__(
            f"circuit breaker '{breaker}' is open after repeated failures; "
            f"failing fast, next trial in {max(retry_in_s, 0.0):.1f}s"
        )
        self.breaker = breaker
        self.retry_in_s = retry_in_s


class CircuitBreaker:
    """Opens after ``failure_threshold`` consecutive failures; half-opens after ``reset_timeout_s``.

    Only exceptions that are instances of ``failure_types`` count as failures; any other
    exception propagates and counts as a success (the dependency did answer). With ``metrics``
    the gauge ``circuit_breaker_state`` and the counter ``circuit_breaker_transitions_total``
    follow the state.

    >>> now = [0.0]
    >>> b = CircuitBreaker("demo", failure_threshold=2, reset_timeout_s=10, clock=lambda: now[0])
    >>> def boom() -> None:
    ...     raise OSError("down")
    >>> for _ in range(2):
    ...     try:
    ...         b.call(boom)
    ...     except OSError:
    ...         pass
    >>> b.state
    'open'
    >>> now[0] = 11.0
    >>> b.state, b.call(lambda: "ok"), b.state
    ('half_open', 'ok', 'closed')
    """

    def __init__(self, name: str, failure_threshold: int = 5, reset_timeout_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic,
                 failure_types: tuple[type[BaseException], ...] = (Exception,),
                 metrics: MetricsRegistry | None = None) -> None:
        if failure_threshold < 1:
            raise ValueError(f"breaker '{name}': failure_threshold must be >= 1, got {failure_threshold}")
        if reset_timeout_s < 0:
            raise ValueError(f"breaker '{name}': reset_timeout_s must be >= 0, got {reset_timeout_s}")
        self.name = name
        self.failure_threshold = failure_threshold
        self.reset_timeout_s = reset_timeout_s
        self.failure_types = failure_types
        self._clock = clock
        self._lock = threading.Lock()
        self._state: BreakerState = "closed"
        self._failures = 0
        self._opened_at = 0.0
        self._trial_running = False
        self.state_changes = 0
        self.metrics = metrics
        if metrics is not None:
            metrics.describe("circuit_breaker_state", "0 closed, 1 half-open, 2 open")
            metrics.set("circuit_breaker_state", 0, {"breaker": name})

    @property
    def state(self) -> BreakerState:
        with self._lock:
            self._maybe_half_open()
            return self._state

    @property
    def consecutive_failures(self) -> int:
        return self._failures

    def _set(self, state: BreakerState) -> None:
        if state == self._state:
            return
        level = logging.WARNING if state == "open" else logging.INFO
        log.log(level, "circuit breaker %s: %s -> %s (consecutive failures: %d)",
                self.name, self._state, state, self._failures)
        self._state = state
        self.state_changes += 1
        if self.metrics is not None:
            labels = {"breaker": self.name}
            self.metrics.set("circuit_breaker_state", _STATE_VALUE[state], labels)
            self.metrics.inc("circuit_breaker_transitions_total", 1, {**labels, "to": state})

    def _maybe_half_open(self) -> None:
        if self._state == "open" and self._clock() - self._opened_at >= self.reset_timeout_s:
            self._set("half_open")
            self._trial_running = False

    def _before(self) -> bool:
        """Admit a call or raise CircuitOpenError; True when the call is the half-open trial."""
        with self._lock:
            self._maybe_half_open()
            if self._state == "open":
                raise CircuitOpenError(self.name, self.reset_timeout_s - (self._clock() - self._opened_at))
            if self._state == "half_open":
                if self._trial_running:
                    raise CircuitOpenError(self.name, 0.0)
                self._trial_running = True
                return True
            return False

    def _success(self) -> None:
        with self._lock:
            self._failures = 0
            self._trial_running = False
            self._set("closed")

    def _failure(self) -> None:
        with self._lock:
            self._failures += 1
            self._trial_running = False
            if self._state == "half_open" or self._failures >= self.failure_threshold:
                self._opened_at = self._clock()
                self._set("open")

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` through the breaker.

        Raises:
            CircuitOpenError: the breaker is open; ``fn`` was not called.
            Exception: whatever ``fn`` raised (counted as a failure when it is a ``failure_types``).
        """
        self._before()
        try:
            result = fn()
        except self.failure_types:
            self._failure()
            raise
        except Exception:
            self._success()  # the dependency answered; the error is about the request
            raise
        except BaseException:  # KeyboardInterrupt and friends say nothing about the dependency
            with self._lock:
                self._trial_running = False
            raise
        self._success()
        return result

    def reset(self) -> None:
        """Close the circuit by hand (tests, operators)."""
        with self._lock:
            self._failures = 0
            self._trial_running = False
            self._set("closed")
