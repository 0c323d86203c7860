"""A local HTTP server speaking the OpenAI wire protocol, for tests (OpenAI is unreachable here).

Scripted: each endpoint takes a queue of (status, body) answers; when the queue is empty a
handler function builds the answer from the request. Every request is recorded.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Handler = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.scripted: dict[str, deque[tuple[int, dict[str, Any]]]] = {}
        self.handlers: dict[str, Handler] = {}
        fake = self

        class _Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                path = self.path.rstrip("/").rsplit("/", 1)[-1]
                fake.requests.append((path, body, dict(self.headers)))
                queue = fake.scripted.get(path)
                if queue:
                    status, answer = queue.popleft()
                elif path in fake.handlers:
                    status, answer = fake.handlers[path](body)
                else:
                    status, answer = 404, {"error": {"message": f"no handler for {path}"}}
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def script(self, path: str, *answers: tuple[int, dict[str, Any]]) -> None:
        self.scripted.setdefault(path, deque()).extend(answers)

    def calls(self, path: str) -> list[dict[str, Any]]:
        return [body for p, body, _ in self.requests if p == path]

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
