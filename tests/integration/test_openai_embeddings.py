"""The OpenAI provider against a local HTTP server on 127.0.0.1 speaking the embeddings endpoint.

The server is the only test double the project allows: a real HTTP server (stdlib), the real
``openai`` SDK, real JSON. Each test scripts the server's answers and inspects the requests it got.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from nl2sql_assets.config import Settings
from nl2sql_assets.errors import EmbeddingError
from nl2sql_assets.indexing.embeddings import build_embedding_service
from nl2sql_assets.indexing.openai_embeddings import OpenAIEmbedder
from tests.openai_fake import EMBEDDINGS, Answer, FakeOpenAI, FakeRequest, embeddings_answer, fake_vector

API_KEY = "sk-test-a1b2c3d4e5"


@dataclass
class Script:
    """What the fake endpoint answers: queued failures first, then vectors of ``dimension``."""

    dimension: int = 1536
    failures: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    auth_headers: list[str | None] = field(default_factory=list)
    shuffle: bool = True
    hang_seconds: float = 0.0


def _answer(script: Script, request: FakeRequest) -> Answer:
    """The embeddings endpoint as the script says: queued failures first, then vectors."""
    # ``encoding_format`` is the SDK's transport choice (base64 unless told); the fake answers in it.
    body = {k: v for k, v in request.body.items() if k != "encoding_format"}
    script.requests.append({"path": request.path, **body})
    script.auth_headers.append(request.headers.get("Authorization"))
    if script.hang_seconds:
        threading.Event().wait(script.hang_seconds)
    if script.failures:
        status, headers = script.failures.pop(0)
        message = "Incorrect API key provided: sk-test-***" if status == 401 else f"status {status}"
        return status, {"error": {"message": message}}, headers
    return embeddings_answer(request, script.dimension, shuffle=script.shuffle)


@dataclass
class Endpoint:
    base_url: str
    script: Script


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    script = Script()
    with FakeOpenAI() as server:
        server.handlers[EMBEDDINGS] = lambda request: _answer(script, request)
        yield Endpoint(server.base_url, script)


def make(endpoint: Endpoint, **kwargs: object) -> tuple[OpenAIEmbedder, list[float]]:
    sleeps: list[float] = []
    embedder = OpenAIEmbedder(API_KEY, base_url=endpoint.base_url, sleep=sleeps.append, **kwargs)  # type: ignore[arg-type]
    return embedder, sleeps


def test_vectors_come_back_in_input_order_normalized(endpoint: Endpoint) -> None:
    embedder, _ = make(endpoint)
    texts = ["orders", "customers", "revenue by month"]
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, 1536) and vectors.dtype == np.float32
    for text, vector in zip(texts, vectors):
        expected = np.asarray(fake_vector(text, 1536), dtype=np.float32)
        assert np.allclose(vector, expected / np.linalg.norm(expected), atol=1e-6)
    request = endpoint.script.requests[0]
    assert request == {"path": "/v1/embeddings", "model": "text-embedding-3-small", "input": texts}
    assert endpoint.script.auth_headers == [f"Bearer {API_KEY}"]
    assert embedder.identity.key == "openai/text-embedding-3-small/1536"


def test_inputs_are_sent_in_batches(endpoint: Endpoint) -> None:
    embedder, _ = make(endpoint, batch_size=4)
    texts = [f"chunk {i}" for i in range(10)]
    vectors = embedder.embed(texts)
    assert [len(r["input"]) for r in endpoint.script.requests] == [4, 4, 2]
    assert vectors.shape == (10, 1536)
    reversed_vectors = embedder.embed(texts[::-1])
    assert np.allclose(reversed_vectors, vectors[::-1])


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retryable_failures_are_retried_with_growing_backoff(endpoint: Endpoint, status: int) -> None:
    endpoint.script.failures = [(status, {}), (status, {})]
    embedder, sleeps = make(endpoint, backoff=0.5)
    assert embedder.embed(["orders"]).shape == (1, 1536)
    assert len(endpoint.script.requests) == 3
    assert len(sleeps) == 2 and 0.5 <= sleeps[0] < sleeps[1] <= 1.25


def test_retry_after_header_is_honoured(endpoint: Endpoint) -> None:
    endpoint.script.failures = [(429, {"Retry-After": "3"})]
    embedder, sleeps = make(endpoint)
    embedder.embed(["orders"])
    assert sleeps == [3.0]


def test_retries_are_bounded(endpoint: Endpoint) -> None:
    endpoint.script.failures = [(500, {})] * 10
    embedder, sleeps = make(endpoint, max_retries=2)
    with pytest.raises(EmbeddingError, match=r"failed after 3 attempts \(last: HTTP 500"):
        embedder.embed(["orders"])
    assert len(endpoint.script.requests) == 3 and len(sleeps) == 2


def test_timeouts_are_retried_then_reported(endpoint: Endpoint) -> None:
    endpoint.script.hang_seconds = 0.5
    embedder, sleeps = make(endpoint, timeout=0.1, max_retries=1)
    with pytest.raises(EmbeddingError, match="failed after 2 attempts.*Timeout"):
        embedder.embed(["orders"])
    assert len(sleeps) == 1


def test_unreachable_server_is_reported_after_retries() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps: list[float] = []
    embedder = OpenAIEmbedder(API_KEY, base_url=f"http://127.0.0.1:{port}/v1", max_retries=1,
                              sleep=sleeps.append)
    with pytest.raises(EmbeddingError, match="failed after 2 attempts.*ConnectError"):
        embedder.embed(["orders"])


def test_bad_key_is_a_clear_error_without_retry_or_key(endpoint: Endpoint) -> None:
    endpoint.script.failures = [(401, {})]
    embedder, sleeps = make(endpoint)
    with pytest.raises(EmbeddingError, match="rejected the credentials.*OPENAI_API_KEY") as info:
        embedder.embed(["orders"])
    assert API_KEY not in str(info.value)
    assert sleeps == [] and len(endpoint.script.requests) == 1


def test_other_client_errors_are_not_retried(endpoint: Endpoint) -> None:
    endpoint.script.failures = [(400, {})]
    embedder, sleeps = make(endpoint)
    with pytest.raises(EmbeddingError, match="HTTP 400"):
        embedder.embed(["orders"])
    assert sleeps == []


def test_wrong_dimension_is_an_error(endpoint: Endpoint) -> None:
    endpoint.script.dimension = 3
    embedder, _ = make(endpoint)
    with pytest.raises(EmbeddingError, match="dimension 3, expected 1536"):
        embedder.embed(["orders"])


def test_unknown_model_learns_its_dimension_from_the_first_response(endpoint: Endpoint) -> None:
    endpoint.script.dimension = 256
    embedder, _ = make(endpoint, model="my-gateway-model")
    assert embedder.identity.dimension == 256
    assert endpoint.script.requests[0]["model"] == "my-gateway-model"


def test_base_url_from_settings_and_the_cache(endpoint: Endpoint, tmp_path: Path) -> None:
    settings = Settings.from_env({"NL2SQL_HOME": str(tmp_path), "EMBEDDING_PROVIDER": "openai",
                                  "OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": endpoint.base_url + "/"})
    service = build_embedding_service(settings)
    first = service.embed_documents(["orders", "customers"])
    second = build_embedding_service(settings).embed_documents(["orders", "customers", "payments"])
    assert (first.embedded, second.embedded, second.from_cache) == (2, 1, 2)
    assert len(endpoint.script.requests) == 2
    assert service.identity.key == "openai/text-embedding-3-small/1536"


def test_empty_key_is_refused() -> None:
    with pytest.raises(EmbeddingError, match="OPENAI_API_KEY"):
        OpenAIEmbedder("")


# The fake's own modes (tests/openai_fake.py), without a scripted handler.


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


@pytest.mark.parametrize(("count", "batch_size"), [(1, 4), (8, 4), (10, 4), (5, 1)])
def test_n_texts_take_ceil_n_over_batch_size_requests(fake: FakeOpenAI, count: int, batch_size: int) -> None:
    embedder = OpenAIEmbedder(API_KEY, base_url=fake.base_url, batch_size=batch_size)
    texts = [f"chunk {i}" for i in range(count)]
    vectors = embedder.embed(texts)
    assert vectors.shape == (count, 1536)
    assert fake.count(EMBEDDINGS) == math.ceil(count / batch_size)
    assert [text for body in fake.calls(EMBEDDINGS) for text in body["input"]] == texts


@pytest.mark.parametrize("echoed", [False, True])
def test_401_is_reported_without_the_key(fake: FakeOpenAI, echoed: bool) -> None:
    if echoed:  # a proxy that echoes the key it was given back in its error message
        fake.script(EMBEDDINGS, (401, {"error": {"message": f"Incorrect API key provided: {API_KEY}"}}))
    else:
        fake.mode = "unauthorized"
    sleeps: list[float] = []
    embedder = OpenAIEmbedder(API_KEY, base_url=fake.base_url, sleep=sleeps.append)
    with pytest.raises(EmbeddingError, match=r"rejected the credentials \(HTTP 401: Incorrect API key") as info:
        embedder.embed(["orders"])
    assert API_KEY not in str(info.value) and "check OPENAI_API_KEY" in str(info.value)
    assert fake.count(EMBEDDINGS) == 1 and sleeps == []


def test_wrong_dimension_names_expected_and_got(fake: FakeOpenAI) -> None:
    fake.mode = "wrong_dimension"
    embedder = OpenAIEmbedder(API_KEY, base_url=fake.base_url, model="text-embedding-3-large")
    with pytest.raises(EmbeddingError, match="'text-embedding-3-large' returned vectors of dimension 3, "
                                             "expected 3072"):
        embedder.embed(["orders"])


def test_429_with_retry_after_is_waited_for_then_succeeds(fake: FakeOpenAI) -> None:
    fake.rate_limit(EMBEDDINGS, times=2, retry_after="0.3")
    embedder = OpenAIEmbedder(API_KEY, base_url=fake.base_url, backoff=5.0)  # real waits, not the backoff
    started = time.perf_counter()
    assert embedder.embed(["orders", "customers"]).shape == (2, 1536)
    elapsed = time.perf_counter() - started
    assert fake.count(EMBEDDINGS) == 3
    assert 0.6 <= elapsed < 3.0


def test_server_errors_exhaust_the_retries(fake: FakeOpenAI) -> None:
    fake.mode = "server_error"
    sleeps: list[float] = []
    embedder = OpenAIEmbedder(API_KEY, base_url=fake.base_url, max_retries=2, sleep=sleeps.append)
    with pytest.raises(EmbeddingError, match=r"failed after 3 attempts \(last: HTTP 500: The server had an error"):
        embedder.embed(["orders"])
    assert fake.count(EMBEDDINGS) == 3 and len(sleeps) == 2


def test_a_hanging_endpoint_times_out_per_attempt(fake: FakeOpenAI) -> None:
    fake.mode = "hang"
    embedder = OpenAIEmbedder(API_KEY, base_url=fake.base_url, timeout=0.3, max_retries=1, sleep=lambda s: None)
    started = time.perf_counter()
    with pytest.raises(EmbeddingError, match="failed after 2 attempts.*APITimeoutError"):
        embedder.embed(["orders"])
    elapsed = time.perf_counter() - started
    assert fake.settled_count(EMBEDDINGS, 2) == 2
    assert elapsed < 5.0  # the 0.3 s timeout ended each attempt, not the client's default


def test_a_retriever_over_openai_asks_nothing_until_a_question_and_skips_the_query_adapter(
        endpoint: Endpoint, tmp_path: Path) -> None:
    """The local model's query adapter does not fit OpenAI vectors; finding that out needs the
    model's dimension, which an unknown model only tells by answering: not at construction."""
    from nl2sql_assets.retrieval.models import RetrieverConfig
    from nl2sql_assets.schema.models import Column, DatasourceInfo, SchemaSnapshot, Table
    from tests.retrieval_samples import CAPTURED, World

    endpoint.script.dimension = 64
    embedder, _ = make(endpoint, model="my-gateway-model")
    world = World(tmp_path / "w", embedder)
    try:
        world.add(SchemaSnapshot.create(DatasourceInfo(id="shop", dialect="sqlite"), [
            Table(name="orders", columns=[Column(name="order_id", type_family="integer"),
                                          Column(name="amount", type_family="decimal")])], CAPTURED))
        sent = len(endpoint.script.requests)
        retriever = world.retriever()
        assert len(endpoint.script.requests) == sent  # built without a request
        on = retriever.retrieve("total order amount", datasource="shop")
        off = world.retriever(RetrieverConfig(query_adapter=False)).retrieve("total order amount", datasource="shop")
        assert [t.name for t in on.tables] == ["orders"]
        assert [(t.name, t.score) for t in on.tables] == [(t.name, t.score) for t in off.tables]
    finally:
        world.close()
