"""A minimal Chrome DevTools Protocol driver for headless Chromium (Debian's package).

Just what the UI test needs: start Chromium in its own process group with a fresh profile,
open a page, evaluate JavaScript, wait for text, take a screenshot, stop everything.
Uses ``websocket-client``; nothing is downloaded (no ``playwright install``).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import websocket

CHROMIUM = "/usr/bin/chromium"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1440,1000")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stop_group(proc: subprocess.Popen[bytes], first: int = signal.SIGTERM, timeout: float = 20.0) -> None:
    """Signal the process group started with ``proc`` (``start_new_session``), wait, then SIGKILL
    whatever is left of the group: nothing it started outlives the test."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, first)
            proc.wait(timeout=timeout)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc.poll() is None:
        proc.wait(timeout=10)


class Browser:
    """Headless Chromium driven over CDP. Use as a context manager."""

    def __init__(self, executable: str = CHROMIUM) -> None:
        self.port = free_port()
        self.profile = tempfile.TemporaryDirectory(prefix="chromium-profile-")
        self.proc = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile.name}", f"--remote-debugging-port={self.port}",
             "--remote-debugging-address=127.0.0.1", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self._ids = itertools.count(1)
        self.ws = self._connect()

    def _connect(self) -> websocket.WebSocket:
        deadline = time.monotonic() + 30
        while True:
            try:
                targets = httpx.get(f"http://127.0.0.1:{self.port}/json/list", timeout=2).json()
                page = next(t for t in targets if t.get("type") == "page")
                return websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60,
                                                   suppress_origin=True)
            except (httpx.HTTPError, StopIteration, OSError):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("chromium did not open its DevTools endpoint") from None
                time.sleep(0.3)

    def call(self, method: str, **params: object) -> dict[str, object]:
        msg_id = next(self._ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == msg_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def goto(self, url: str) -> None:
        self.call("Page.enable")
        self.call("Page.navigate", url=url)

    def text(self) -> str:
        result = self.call("Runtime.evaluate", expression="document.body ? document.body.innerText : ''",
                           returnByValue=True)
        return str(result.get("result", {}).get("value", ""))  # type: ignore[union-attr]

    def wait_for_text(self, needles: list[str], timeout: float = 90.0) -> str:
        """Poll the page text until every needle is there; returns the text (raises on timeout)."""
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if all(n in text for n in needles):
                return text
            time.sleep(1.0)
        missing = [n for n in needles if n not in text]
        raise AssertionError(f"page never showed {missing}; it showed: {text[:1500]!r}")

    def click_text(self, label: str) -> bool:
        """Click the first element whose own text is ``label``; False when there is none."""
        expression = (
            "(() => { const want = %s; const all = [...document.querySelectorAll('a,button,[role=tab],span,div')];"
            " const el = all.find(e => e.childElementCount === 0 && e.textContent.trim() === want);"
            " if (!el) return false; el.click(); return true; })()" % json.dumps(label))
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return bool(result.get("result", {}).get("value"))  # type: ignore[union-attr]

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(str(data)))
        return path

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except Exception:  # noqa: BLE001 - shutting down anyway
            pass
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001
            pass
        stop_group(self.proc)  # type: ignore[arg-type]
        self.profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
