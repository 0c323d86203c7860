"""A local HTTP server speaking the OpenAI wire protocol, for tests (OpenAI is unreachable here).

Routes are full paths (``/v1/embeddings``, ``/v1/chat/completions``); anything else is a 404,
so a client that builds a wrong URL fails the test. Each route takes a queue of scripted
answers, then falls back to a handler that builds the answer from the request. An answer is
``(status, body)`` or ``(status, body, headers)``. Every request is recorded.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EMBEDDINGS = "/v1/embeddings"
CHAT = "/v1/chat/completions"

Answer = tuple[int, dict[str, Any]] | tuple[int, dict[str, Any], dict[str, str]]


@dataclass(frozen=True)
class FakeRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]


Handler = Callable[[FakeRequest], Answer]


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A client that gave up (timeout tests) is expected; don't print its broken pipe."""


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: list[FakeRequest] = []
        self.scripted: dict[str, deque[Answer]] = {}
        self.handlers: dict[str, Handler] = {}
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length", "0"))
                request = FakeRequest(self.path, json.loads(self.rfile.read(length) or b"{}"), dict(self.headers))
                fake.requests.append(request)
                queue = fake.scripted.get(self.path)
                if queue:
                    answer = queue.popleft()
                elif self.path in fake.handlers:
                    answer = fake.handlers[self.path](request)
                else:
                    answer = (404, {"error": {"message": f"no route {self.path}"}})
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
        self.scripted.setdefault(path, deque()).extend(answers)

    def calls(self, path: str) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.path == path]

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def chat_answer(content: dict[str, Any] | str) -> dict[str, Any]:
    text = content if isinstance(content, str) else json.dumps(content)
    return {"id": "chatcmpl-test", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}]}
