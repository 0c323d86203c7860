"""A real ``chroma run`` server on 127.0.0.1 for tests: own process group, free port, stopped after."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import IN_CI


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def chroma_binary() -> str | None:
    beside = Path(sys.executable).parent / "chroma"
    return str(beside) if beside.exists() else shutil.which("chroma")


class ChromaServer:
    """``chroma run --host 127.0.0.1 --port PORT --path PATH``; ``stop``/``start`` keep port and data."""

    def __init__(self, path: Path, port: int | None = None) -> None:
        self.path = path
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.log_path = path.parent / f"chroma-{self.port}.log"
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout_s: float = 30.0) -> None:
        binary = chroma_binary()
        if binary is None:
            raise RuntimeError("the chroma command is not installed")
        self.path.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(  # noqa: S603 - fixed argv, loopback only
                [binary, "run", "--host", self.host, "--port", str(self.port), "--path", str(self.path)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"chroma run exited with {self._proc.returncode}; see {self.log_path}")
            try:
                if httpx.get(f"http://{self.host}:{self.port}/api/v2/heartbeat", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"chroma run did not answer within {timeout_s}s; see {self.log_path}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def start_or_skip(server: ChromaServer) -> ChromaServer:
    """Start the server; skip the test when impossible, except under CI=true, where that fails."""
    try:
        server.start()
    except (RuntimeError, OSError) as exc:
        message = f"Chroma server could not start: {exc}"
        if IN_CI:
            pytest.fail(f"{message} (CI=true requires it)")
        pytest.skip(message)
    return server
