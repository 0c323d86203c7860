"""A local HTTP server speaking the OpenAI wire protocol, for tests (OpenAI is unreachable here).

Routes are full paths (``/v1/embeddings``, ``/v1/chat/completions``); anything else is a 404,
so a client that builds a wrong URL fails the test. A request is answered by, in order:

1. the route's queue of scripted answers (:meth:`FakeOpenAI.script`, :meth:`FakeOpenAI.rate_limit`);
2. the route's mode, unless it is ``ok`` (:data:`Mode`; ``mode`` for every route, ``modes`` per route);
3. the test's handler for the route (``handlers``), else the built-in one: embeddings get a
   deterministic vector per text (float or base64, as the request asks), chat completions get a
   JSON document describing every table and column named in the user message.

An answer is ``(status, body)`` or ``(status, body, headers)``. Every request is recorded
before it is answered, so a hanging request is counted too. ``python -m tests.openai_fake
--mode hang`` serves one on its own and prints its base URL (for measuring by hand).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import numpy as np

EMBEDDINGS = "/v1/embeddings"
CHAT = "/v1/chat/completions"

Answer = tuple[int, dict[str, Any]] | tuple[int, dict[str, Any], dict[str, str]]
#: ``unauthorized``: 401; ``server_error``: 500; ``hang``: accept and never answer (until the
#: server stops); ``wrong_dimension``: embeddings of :attr:`FakeOpenAI.wrong_dimension`.
Mode = Literal["ok", "unauthorized", "server_error", "hang", "wrong_dimension"]


@dataclass(frozen=True)
class FakeRequest:
    path: str
    body: dict[str, Any]
    #: The request's headers; ``get`` ignores case (an ``http.client.HTTPMessage``).
    headers: Mapping[str, str]


Handler = Callable[[FakeRequest], Answer]


def fake_vector(text: str, dimension: int) -> list[float]:
    """A deterministic pseudo-random vector for ``text`` (what the fake embeds it as)."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(dimension).round(6).tolist()


def embeddings_answer(request: FakeRequest, dimension: int, *, shuffle: bool = True) -> Answer:
    """The embeddings endpoint's answer: one vector per input, in the encoding the request asks for."""
    inputs = request.body["input"]
    inputs = [inputs] if isinstance(inputs, str) else inputs
    as_base64 = request.body.get("encoding_format") == "base64"
    data = []
    for i, text in enumerate(inputs):
        vector = fake_vector(text, dimension)
        encoded: object = (base64.b64encode(np.asarray(vector, dtype=np.float32).tobytes()).decode()
                           if as_base64 else vector)
        data.append({"object": "embedding", "index": i, "embedding": encoded})
    if shuffle:
        data.reverse()  # the API does not promise order: a client must sort by index
    return 200, {"object": "list", "data": data, "model": request.body.get("model", ""),
                 "usage": {"prompt_tokens": 1, "total_tokens": 1}}


def chat_answer(content: dict[str, Any] | str) -> dict[str, Any]:
    """A chat completion whose assistant message is ``content`` (a dict is sent as JSON text)."""
    text = content if isinstance(content, str) else json.dumps(content)
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}]}


def describe_everything(request: FakeRequest) -> Answer:
    """The built-in chat answer: a description for every table and column of the request, a
    synonym per column, and a datasource description, as enrichment's JSON schema asks."""
    try:
        payload = json.loads(request.body["messages"][-1]["content"])
        tables = payload["tables"]
    except (KeyError, IndexError, TypeError, ValueError):
        return 400, {"error": {"message": "expected a JSON user message with 'tables'"}}
    return 200, chat_answer({
        "datasource": {"description": f"Fake description of {payload.get('datasource', {}).get('id', '?')}",
                       "example_questions": ["How many rows are there?"]},
        "tables": [{"name": t["name"], "description": f"Fake description of table {t['name']}",
                    "columns": [{"name": c["name"], "description": f"Fake description of column {c['name']}",
                                 "synonyms": [f"{c['name']} synonym"]} for c in t.get("columns", [])]}
                   for t in tables],
    })


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that gave up (timeout tests) is expected; don't print its broken pipe."""


class FakeOpenAI:
    """The server; start and stop it with ``with``. ``base_url`` ends in ``/v1``."""

    def __init__(self, mode: Mode = "ok", *, dimension: int = 1536, wrong_dimension: int = 3) -> None:
        self.requests: list[FakeRequest] = []
        self.scripted: dict[str, deque[Answer]] = {}
        self.handlers: dict[str, Handler] = {}
        self.mode: Mode = mode
        self.modes: dict[str, Mode] = {}
        self.dimension = dimension
        self.wrong_dimension = wrong_dimension
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length", "0"))
                request = FakeRequest(self.path, json.loads(self.rfile.read(length) or b"{}"), self.headers)
                answer = fake._answer(request)
                if answer is None:  # hang: the client's timeout is what ends this request
                    fake._stopping.wait()
                    return
                status, body = answer[0], answer[1]
                headers = answer[2] if len(answer) > 2 else {}  # type: ignore[misc]
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

        self._server = _QuietServer(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, path: str, *answers: Answer) -> None:
        """Answer the next requests to ``path`` with ``answers``, in order, before anything else."""
        with self._lock:
            self.scripted.setdefault(path, deque()).extend(answers)

    def rate_limit(self, path: str, times: int = 1, retry_after: str = "1") -> None:
        """The next ``times`` requests to ``path`` get 429 with ``Retry-After``; then as usual."""
        self.script(path, *[(429, {"error": {"message": "Rate limit reached", "type": "requests"}},
                             {"Retry-After": retry_after})] * times)

    def calls(self, path: str) -> list[dict[str, Any]]:
        """The bodies of the requests to ``path``, in arrival order."""
        return [r.body for r in self.requests if r.path == path]

    def count(self, path: str) -> int:
        return len(self.calls(path))

    def settled_count(self, path: str, at_least: int = 1, *, within_s: float = 10.0, quiet_s: float = 0.3) -> int:
        """The count of ``path`` once at least ``at_least`` arrived and no other came for ``quiet_s``.

        A client that timed out may return before this server's thread has read its request on a
        loaded machine (CI once counted 0 where 1 had been sent); waiting for the count to settle
        keeps "exactly n" meaningful without a race.
        """
        deadline = time.monotonic() + within_s
        seen, since = self.count(path), time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.02)
            now = self.count(path)
            if now != seen:
                seen, since = now, time.monotonic()
            elif seen >= at_least and time.monotonic() - since >= quiet_s:
                break
        return seen

    def _answer(self, request: FakeRequest) -> Answer | None:
        """What to send back; None to hang."""
        with self._lock:
            self.requests.append(request)
            queue = self.scripted.get(request.path)
            scripted = queue.popleft() if queue else None
        if scripted is not None:
            return scripted
        if request.path not in (EMBEDDINGS, CHAT):
            return 404, {"error": {"message": f"no route {request.path}"}}
        mode = self.modes.get(request.path, self.mode)
        if mode == "hang":
            return None
        if mode == "unauthorized":
            return 401, {"error": {"message": "Incorrect API key provided: sk-test-***",
                                   "type": "invalid_request_error", "code": "invalid_api_key"}}
        if mode == "server_error":
            return 500, {"error": {"message": "The server had an error while processing your request.",
                                   "type": "server_error"}}
        if request.path in self.handlers:
            return self.handlers[request.path](request)
        if request.path == EMBEDDINGS:
            return embeddings_answer(request, self.wrong_dimension if mode == "wrong_dimension" else self.dimension)
        return describe_everything(request)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()  # releases hanging requests
        self._server.shutdown()
        self._server.server_close()


def main(argv: list[str] | None = None) -> None:
    """Serve a fake on its own until interrupted (for measuring clients by hand)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="ok", choices=["ok", "unauthorized", "server_error", "hang",
                                                         "wrong_dimension"])
    args = parser.parse_args(argv)
    with FakeOpenAI(args.mode) as fake:
        print(fake.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        finally:
            print(json.dumps({"embeddings": fake.count(EMBEDDINGS), "chat": fake.count(CHAT)}), flush=True)


if __name__ == "__main__":
    main()
