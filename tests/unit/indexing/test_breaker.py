"""CircuitBreaker: open after N failures, fail fast, half-open trial, recovery, logging."""

from __future__ import annotations

import logging

import pytest

from nl2sql_assets.errors import VectorStoreUnavailableError
from nl2sql_assets.indexing.breaker import CircuitBreaker, CircuitOpenError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Dependency:
    """A dependency that is down until told otherwise; counts the calls that reached it."""

    def __init__(self) -> None:
        self.up = False
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if not self.up:
            raise ConnectionError("refused")
        return "answer"


def trip(breaker: CircuitBreaker, dep: Dependency, times: int) -> None:
    for _ in range(times):
        with pytest.raises(ConnectionError):
            breaker.call(dep)


def test_opens_after_threshold_and_fails_fast() -> None:
    clock, dep = Clock(), Dependency()
    breaker = CircuitBreaker("vector_store", failure_threshold=3, reset_timeout_s=30, clock=clock)
    trip(breaker, dep, 2)
    assert breaker.state == "closed" and breaker.consecutive_failures == 2
    trip(breaker, dep, 1)
    assert breaker.state == "open"
    with pytest.raises(CircuitOpenError, match="vector_store.*open") as info:
        breaker.call(dep)
    assert isinstance(info.value, VectorStoreUnavailableError)
    assert info.value.retry_in_s == pytest.approx(30)
    assert dep.calls == 3  # the refused call never reached the dependency


def test_success_resets_the_failure_count() -> None:
    dep = Dependency()
    breaker = CircuitBreaker("b", failure_threshold=2, clock=Clock())
    trip(breaker, dep, 1)
    dep.up = True
    assert breaker.call(dep) == "answer"
    dep.up = False
    trip(breaker, dep, 1)
    assert breaker.state == "closed"


def test_half_open_trial_closes_on_success() -> None:
    clock, dep = Clock(), Dependency()
    breaker = CircuitBreaker("b", failure_threshold=1, reset_timeout_s=10, clock=clock)
    trip(breaker, dep, 1)
    clock.now += 9.9
    assert breaker.state == "open"
    clock.now += 0.2
    assert breaker.state == "half_open"
    dep.up = True
    assert breaker.call(dep) == "answer"
    assert breaker.state == "closed"


def test_half_open_trial_failure_reopens_for_a_full_timeout() -> None:
    clock, dep = Clock(), Dependency()
    breaker = CircuitBreaker("b", failure_threshold=2, reset_timeout_s=10, clock=clock)
    trip(breaker, dep, 2)
    clock.now += 10
    trip(breaker, dep, 1)  # the one trial
    assert breaker.state == "open"
    clock.now += 5
    with pytest.raises(CircuitOpenError):
        breaker.call(dep)


def test_only_one_trial_while_half_open() -> None:
    clock = Clock()
    breaker = CircuitBreaker("b", failure_threshold=1, reset_timeout_s=1, clock=clock)
    trip(breaker, Dependency(), 1)
    clock.now += 2
    seen: list[str] = []

    def trial() -> str:
        with pytest.raises(CircuitOpenError):  # a second caller during the trial fails fast
            breaker.call(lambda: "second")
        seen.append("trial")
        return "ok"

    assert breaker.call(trial) == "ok" and seen == ["trial"]
    assert breaker.state == "closed"


def test_non_failure_exceptions_do_not_open() -> None:
    breaker = CircuitBreaker("b", failure_threshold=1, clock=Clock(), failure_types=(ConnectionError,))

    def bad_request() -> None:
        raise ValueError("rejected")

    for _ in range(3):
        with pytest.raises(ValueError):
            breaker.call(bad_request)
    assert breaker.state == "closed"


def test_state_changes_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    clock, dep = Clock(), Dependency()
    breaker = CircuitBreaker("vector_store", failure_threshold=1, reset_timeout_s=1, clock=clock)
    with caplog.at_level(logging.INFO, logger="nl2sql_assets.indexing.breaker"):
        trip(breaker, dep, 1)
        clock.now += 1
        dep.up = True
        breaker.call(dep)
    messages = [r.getMessage() for r in caplog.records]
    assert any("vector_store: closed -> open" in m for m in messages)
    assert any("open -> half_open" in m for m in messages)
    assert any("half_open -> closed" in m for m in messages)
    assert breaker.state_changes == 3


@pytest.mark.parametrize("kwargs", [{"failure_threshold": 0}, {"reset_timeout_s": -1}])
def test_bad_settings_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="breaker 'b'"):
        CircuitBreaker("b", **kwargs)  # type: ignore[arg-type]
