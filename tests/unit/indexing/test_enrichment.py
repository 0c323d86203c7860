"""LLM enrichment against a local server speaking the OpenAI chat-completions protocol."""

from __future__ import annotations

import json
import logging
import socket
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import SecretStr

from nl2sql_assets.config import Settings
from nl2sql_assets.indexing.enrichment import (
    LLMSettings,
    OpenAIChatClient,
    build_llm,
    enrich_schema_snapshot,
)
from nl2sql_assets.indexing.llm_client import ENRICHMENT_SCHEMA, BreakerChatClient
from nl2sql_assets.schema.models import Column, ColumnStats, DatasourceInfo, SchemaSnapshot, Table
from resources.llm import LLMResource
from tests.openai_fake import CHAT, FakeOpenAI, chat_answer

API_KEY = "sk-test-Very5ecretKey"


def _snapshot() -> SchemaSnapshot:
    customers = Table(name="customers", primary_key=["id"], columns=[
        Column(name="id", ordinal=0, declared_type="INTEGER", type_family="integer", is_primary_key=True),
        Column(name="email", ordinal=1, declared_type="TEXT", type_family="text", pii=True, pii_kind="email"),
        Column(name="seg", ordinal=2, declared_type="TEXT", type_family="text",
               stats=ColumnStats(top_values=["retail", "wholesale"])),
    ])
    orders = Table(name="orders", comment="One row per order", primary_key=["id"], columns=[
        Column(name="id", ordinal=0, declared_type="INTEGER", type_family="integer", is_primary_key=True),
        Column(name="amt", ordinal=1, declared_type="REAL", type_family="float", comment="Order total in EUR"),
    ])
    info = DatasourceInfo(id="shop", dialect="sqlite")
    return SchemaSnapshot.create(info, [customers, orders], datetime(2026, 11, 30, tzinfo=UTC)).with_version(
        "20261130000000_" + "0" * 8)


def _client(server: FakeOpenAI, **kw: Any) -> OpenAIChatClient:
    return OpenAIChatClient(LLMSettings(api_key=SecretStr(API_KEY), base_url=server.base_url, **kw),
                            sleep=lambda s: None)


ANSWER = {
    "datasource": {"description": "A web shop", "example_questions": ["How many orders last week?"]},
    "tables": [
        {"name": "customers", "description": "People who buy", "columns": [
            {"name": "seg", "description": "Customer segment", "synonyms": ["segment", "tier"]},
            {"name": "email", "description": "E-mail address", "synonyms": ["mail"]},
            {"name": "ghost", "description": "not a real column", "synonyms": ["x"]},
        ]},
        {"name": "orders", "description": "LLM text that must not override the comment", "columns": [
            {"name": "amt", "description": "must not override", "synonyms": ["amount", "total"]},
        ]},
        {"name": "invented_table", "description": "hallucinated", "columns": []},
    ],
}


def test_enrichment_fills_gaps_keeps_structure_and_owner_text() -> None:
    snap = _snapshot()
    with FakeOpenAI() as server:
        server.handlers[CHAT] = lambda request: (200, chat_answer(ANSWER))
        outcome = enrich_schema_snapshot(snap, lambda: _client(server))
        request = server.calls(CHAT)[0]
    assert outcome.status == "enriched"
    out = outcome.snapshot
    assert out.fingerprint == snap.fingerprint
    assert out.metadata_hash != snap.metadata_hash
    assert out.source_metadata_hash == snap.metadata_hash
    assert out.schema_version == snap.schema_version
    assert out.datasource.description == "A web shop"
    customers, orders = out.table("customers"), out.table("orders")
    assert customers is not None and orders is not None
    assert customers.description == "People who buy"
    assert customers.column("seg").description == "Customer segment"  # type: ignore[union-attr]
    assert customers.column("seg").synonyms == ["segment", "tier"]  # type: ignore[union-attr]
    assert [c.name for c in customers.columns] == ["id", "email", "seg"]
    assert orders.description is None and orders.text == "One row per order"
    assert orders.column("amt").text == "Order total in EUR"  # type: ignore[union-attr]
    assert orders.column("amt").synonyms == ["amount", "total"]  # type: ignore[union-attr]
    assert out.table("invented_table") is None
    assert out.enrichment is not None and out.enrichment.columns_described == 2
    # What was sent: names and non-PII examples, structured output (enrichment's JSON schema, in
    # place of the former plain JSON mode), the configured model.
    assert request["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "schema_documentation", "strict": True, "schema": ENRICHMENT_SCHEMA}}
    assert request["model"] == "gpt-4o-mini"
    sent = request["messages"][1]["content"]
    assert "retail" in sent and "email" in sent
    payload = json.loads(sent)
    email = next(c for t in payload["tables"] for c in t["columns"] if c["name"] == "email")
    assert "examples" not in email


def test_pii_values_are_never_sent() -> None:
    snap = _snapshot()
    table = snap.tables[0]
    leaky = table.model_copy(update={"columns": [
        c.model_copy(update={"stats": ColumnStats(top_values=["alice@example.com"])}) if c.name == "email" else c
        for c in table.columns]})
    snap = SchemaSnapshot.create(snap.datasource, [leaky, snap.tables[1]], snap.captured_at)
    with FakeOpenAI() as server:
        server.handlers[CHAT] = lambda request: (200, chat_answer(ANSWER))
        enrich_schema_snapshot(snap, lambda: _client(server))
        assert "alice@example.com" not in json.dumps(server.calls(CHAT))


def test_batches_tables_per_call() -> None:
    with FakeOpenAI() as server:
        server.handlers[CHAT] = lambda request: (200, chat_answer({"tables": []}))
        outcome = enrich_schema_snapshot(_snapshot(), lambda: _client(server), tables_per_call=1)
        assert len(server.calls(CHAT)) == 2
    assert outcome.status == "enriched"


def test_retries_server_errors_then_succeeds() -> None:
    with FakeOpenAI() as server:
        server.script(CHAT, (500, {"error": {}}), (429, {"error": {}}))
        server.handlers[CHAT] = lambda request: (200, chat_answer(ANSWER))
        outcome = enrich_schema_snapshot(_snapshot(), lambda: _client(server, max_retries=2))
        assert len(server.calls(CHAT)) == 3
    assert outcome.status == "enriched"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("case", ["no_key", "unreachable", "auth_refused", "garbage", "factory_raises"])
def test_never_fails_indexing(case: str, caplog: pytest.LogCaptureFixture) -> None:
    snap = _snapshot()
    caplog.set_level(logging.INFO, logger="nl2sql_assets.indexing.enrichment")
    with FakeOpenAI() as server:
        server.handlers[CHAT] = {
            "auth_refused": lambda request: (401, {"error": {"message": "bad key"}}),
            "garbage": lambda request: (200, chat_answer("this is not json")),
        }.get(case, lambda request: (200, chat_answer(ANSWER)))

        def factory() -> OpenAIChatClient:
            if case == "no_key":
                return OpenAIChatClient(LLMSettings(api_key=None, base_url=server.base_url))
            if case == "unreachable":
                return OpenAIChatClient(LLMSettings(api_key=SecretStr(API_KEY), max_retries=1,
                                                    base_url=f"http://127.0.0.1:{_closed_port()}/v1"),
                                        sleep=lambda s: None)
            if case == "factory_raises":
                raise RuntimeError("boom")
            return _client(server)

        outcome = enrich_schema_snapshot(snap, factory)
    assert outcome.snapshot.fingerprint == snap.fingerprint
    assert outcome.snapshot.metadata_hash == snap.metadata_hash
    assert outcome.snapshot.tables == snap.tables
    expected = "unavailable" if case in ("no_key", "unreachable", "auth_refused") else "failed"
    assert outcome.status == expected
    assert outcome.snapshot.enrichment is not None and outcome.snapshot.enrichment.status == expected
    levels = {r.levelno for r in caplog.records}
    assert (logging.WARNING in levels) == (expected == "failed")
    assert API_KEY not in caplog.text and API_KEY not in (outcome.reason or "")


def test_off_when_not_configured(nl2sql_home: object) -> None:
    settings = Settings.from_env()
    assert build_llm(settings) is None
    outcome = enrich_schema_snapshot(_snapshot(), lambda: build_llm(settings))
    assert outcome.status == "off"
    assert enrich_schema_snapshot(_snapshot(), None).status == "off"


def test_build_llm_honours_openai_env(nl2sql_home: object, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAI() as server:
        server.handlers[CHAT] = lambda request: (200, chat_answer(ANSWER))
        monkeypatch.setenv("ENRICHMENT", "openai")
        monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        settings = Settings.from_env()
        outcome = enrich_schema_snapshot(_snapshot(), lambda: build_llm(settings))
        headers = server.requests[0].headers
    assert outcome.status == "enriched"
    assert headers.get("Authorization") == f"Bearer {API_KEY}"


# Timeouts, failures and the circuit breaker, against the fake's modes.


def _timed_client(server: FakeOpenAI, timeout_s: float = 0.5, **kw: Any) -> OpenAIChatClient:
    sleeps: list[float] = kw.pop("sleeps", [])
    return OpenAIChatClient(LLMSettings(api_key=SecretStr(API_KEY), base_url=server.base_url, timeout_s=timeout_s,
                                        **kw), sleep=sleeps.append)


def test_a_timeout_is_not_retried() -> None:
    with FakeOpenAI("hang") as server:
        started = time.perf_counter()
        outcome = enrich_schema_snapshot(_snapshot(), lambda: _timed_client(server, max_retries=2))
        elapsed = time.perf_counter() - started
        assert server.settled_count(CHAT) == 1  # a retry would make 3 (max_retries=2)
    assert outcome.status == "unavailable"
    assert outcome.reason == f"chat endpoint {server.base_url} did not answer within 0.5 s"
    assert 0.5 <= elapsed < 5.0  # the 0.5 s timeout ended the wait, not the default (DEFAULT_LLM_TIMEOUT_S)


def test_server_errors_are_retried_then_unavailable() -> None:
    sleeps: list[float] = []
    with FakeOpenAI("server_error") as server:
        outcome = enrich_schema_snapshot(_snapshot(), lambda: _timed_client(server, max_retries=2, sleeps=sleeps))
        assert server.count(CHAT) == 3
    assert outcome.status == "unavailable"
    assert outcome.reason is not None and outcome.reason.startswith(
        f"chat endpoint {server.base_url} failed after 3 attempts (last: HTTP 500: The server had an error")
    assert len(sleeps) == 2


def test_retry_after_is_honoured() -> None:
    sleeps: list[float] = []
    with FakeOpenAI() as server:
        server.rate_limit(CHAT, times=1, retry_after="7")
        outcome = enrich_schema_snapshot(_snapshot(), lambda: _timed_client(server, sleeps=sleeps))
        assert server.count(CHAT) == 2
    assert outcome.status == "enriched" and sleeps == [7.0]


def test_refused_key_is_unavailable_without_the_key() -> None:
    with FakeOpenAI() as server:
        server.script(CHAT, (401, {"error": {"message": f"Incorrect API key provided: {API_KEY}"}}))
        outcome = enrich_schema_snapshot(_snapshot(), lambda: _timed_client(server))
        assert server.count(CHAT) == 1
    assert (outcome.status, outcome.reason) == ("unavailable", "authentication refused (401)")


def test_default_answer_of_the_fake_enriches_every_blank() -> None:
    with FakeOpenAI() as server:
        outcome = enrich_schema_snapshot(_snapshot(), lambda: _timed_client(server))
    customers = outcome.snapshot.table("customers")
    assert outcome.status == "enriched" and customers is not None
    assert customers.description == "Fake description of table customers"
    assert outcome.snapshot.table("orders").text == "One row per order"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ["hang", "server_error", "unauthorized"])
def test_the_breaker_stops_calling_a_failed_endpoint(mode: str) -> None:
    """One client for several snapshots (what the ``llm`` resource keeps for a command)."""
    with FakeOpenAI(mode) as server:  # type: ignore[arg-type]
        client = BreakerChatClient(_timed_client(server, max_retries=1))
        started = time.perf_counter()
        outcomes = [enrich_schema_snapshot(_snapshot(), lambda: client, tables_per_call=1) for _ in range(3)]
        elapsed = time.perf_counter() - started
        calls = server.settled_count(CHAT)
    assert calls == (1 if mode in ("hang", "unauthorized") else 2)  # 500: one call and its one retry
    assert [o.status for o in outcomes] == ["unavailable"] * 3
    first = outcomes[0].reason
    assert first is not None and API_KEY not in first
    assert [o.reason for o in outcomes[1:]] == [
        f"not called: the chat endpoint failed earlier in this command ({first})"] * 2
    assert client.breaker.state == "open"
    assert elapsed < 5.0  # the calls count above shows the breaker; this, that no default timeout was waited out


def test_the_breaker_lets_an_unusable_answer_through() -> None:
    """An answer that is not JSON says nothing against the endpoint: the next snapshot asks again."""
    with FakeOpenAI() as server:
        server.script(CHAT, (200, chat_answer("not json")))
        client = BreakerChatClient(_timed_client(server))
        first = enrich_schema_snapshot(_snapshot(), lambda: client)
        second = enrich_schema_snapshot(_snapshot(), lambda: client)
        assert server.count(CHAT) == 2
    assert (first.status, second.status) == ("failed", "enriched")
    assert client.breaker.state == "closed"


def test_the_resource_keeps_one_guarded_client() -> None:
    with FakeOpenAI("hang") as server:
        llm = LLMResource(enrichment="openai", openai_api_key=API_KEY, openai_base_url=server.base_url,
                          timeout_s=0.5)
        outcomes = [enrich_schema_snapshot(_snapshot(), llm.factory()) for _ in range(3)]
        assert server.settled_count(CHAT) == 1
        llm.close()
    assert [o.status for o in outcomes] == ["unavailable"] * 3
    assert LLMResource().factory() is None
    no_key = enrich_schema_snapshot(_snapshot(), LLMResource(enrichment="openai").factory())
    assert (no_key.status, no_key.reason) == ("unavailable", "OPENAI_API_KEY is not set")
