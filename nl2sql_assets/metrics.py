"""Counters and timings for indexing and retrieval, exported in the Prometheus text format.

The first design emitted no metrics. Components take an optional :class:`MetricsRegistry`
(created by whoever composes them; no global registry) and record what an operator wants
to graph: chunks embedded vs cached, refresh and retrieval latencies, fallbacks, breaker
state changes. ``write_textfile`` writes the node-exporter textfile format, so a standard
Prometheus setup can scrape it without a server inside this process.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from time import perf_counter

LabelKey = tuple[tuple[str, str], ...]

# Latency buckets in seconds, from 1 ms to 60 s.
DEFAULT_BUCKETS: tuple[float, ...] = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                                      2.5, 5.0, 10.0, 30.0, 60.0)


def _key(labels: Mapping[str, str] | None) -> LabelKey:
    return tuple(sorted((k, str(v)) for k, v in (labels or {}).items()))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt_labels(key: LabelKey, extra: tuple[tuple[str, str], ...] = ()) -> str:
    items = key + extra
    if not items:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in items) + "}"


def _fmt_num(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class _Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.total += value
        self.count += 1
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1


class MetricsRegistry:
    """Thread-safe counters, gauges and histograms, keyed by name and labels.

    >>> m = MetricsRegistry(prefix="demo")
    >>> m.inc("chunks_embedded_total", 3, {"datasource": "sales"})
    >>> m.value("chunks_embedded_total", {"datasource": "sales"})
    3.0
    >>> "demo_chunks_embedded_total{datasource=\\"sales\\"} 3" in m.render()
    True
    """

    def __init__(self, prefix: str = "nl2sql") -> None:
        self.prefix = prefix
        self._lock = threading.Lock()
        self._counters: dict[str, dict[LabelKey, float]] = {}
        self._gauges: dict[str, dict[LabelKey, float]] = {}
        self._histograms: dict[str, dict[LabelKey, _Histogram]] = {}
        self._help: dict[str, str] = {}

    def describe(self, name: str, text: str) -> None:
        self._help[name] = text

    def inc(self, name: str, amount: float = 1.0, labels: Mapping[str, str] | None = None) -> None:
        if amount < 0:
            raise ValueError("counters only go up")
        with self._lock:
            series = self._counters.setdefault(name, {})
            key = _key(labels)
            series[key] = series.get(key, 0.0) + amount

    def set(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        with self._lock:
            self._gauges.setdefault(name, {})[_key(labels)] = float(value)

    def observe(self, name: str, seconds: float, labels: Mapping[str, str] | None = None,
                buckets: tuple[float, ...] = DEFAULT_BUCKETS) -> None:
        with self._lock:
            series = self._histograms.setdefault(name, {})
            key = _key(labels)
            if key not in series:
                series[key] = _Histogram(buckets)
            series[key].observe(seconds)

    @contextmanager
    def timer(self, name: str, labels: Mapping[str, str] | None = None) -> Iterator[None]:
        """Observe the duration of the block in seconds (also when it raises)."""
        start = perf_counter()
        try:
            yield
        finally:
            self.observe(name, perf_counter() - start, labels)

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """A counter's or gauge's current value (0 when never set); a histogram's count."""
        key = _key(labels)
        with self._lock:
            if name in self._counters:
                return self._counters[name].get(key, 0.0)
            if name in self._gauges:
                return self._gauges[name].get(key, 0.0)
            if name in self._histograms and key in self._histograms[name]:
                return float(self._histograms[name][key].count)
        return 0.0

    def as_dict(self) -> dict[str, object]:
        """Plain data for JSON output and Dagster metadata."""
        with self._lock:
            def flat(series: Mapping[LabelKey, float]) -> dict[str, float]:
                return {",".join(f"{k}={v}" for k, v in key) or "": val for key, val in series.items()}
            return {
                "counters": {n: flat(s) for n, s in sorted(self._counters.items())},
                "gauges": {n: flat(s) for n, s in sorted(self._gauges.items())},
                "histograms": {
                    n: {",".join(f"{k}={v}" for k, v in key) or "": {"count": h.count, "sum": h.total}
                        for key, h in s.items()}
                    for n, s in sorted(self._histograms.items())
                },
            }

    def render(self) -> str:
        """The Prometheus text exposition format (version 0.0.4)."""
        lines: list[str] = []
        with self._lock:
            for kind, store in (("counter", self._counters), ("gauge", self._gauges)):
                for name, series in sorted(store.items()):
                    full = f"{self.prefix}_{name}"
                    if name in self._help:
                        lines.append(f"# HELP {full} {self._help[name]}")
                    lines.append(f"# TYPE {full} {kind}")
                    for key, val in sorted(series.items()):
                        lines.append(f"{full}{_fmt_labels(key)} {_fmt_num(val)}")
            for name, hseries in sorted(self._histograms.items()):
                full = f"{self.prefix}_{name}"
                if name in self._help:
                    lines.append(f"# HELP {full} {self._help[name]}")
                lines.append(f"# TYPE {full} histogram")
                for key, hist in sorted(hseries.items()):
                    for bound, count in zip(hist.buckets, hist.counts, strict=True):
                        lines.append(f"{full}_bucket{_fmt_labels(key, (('le', _fmt_num(bound)),))} {count}")
                    lines.append(f"{full}_bucket{_fmt_labels(key, (('le', '+Inf'),))} {hist.count}")
                    lines.append(f"{full}_sum{_fmt_labels(key)} {_fmt_num(hist.total)}")
                    lines.append(f"{full}_count{_fmt_labels(key)} {hist.count}")
        return "\n".join(lines) + "\n"

    def write_textfile(self, path: Path) -> None:
        """Write :meth:`render` atomically (temp file + rename), for a textfile collector."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(self.render(), encoding="utf-8")
        os.replace(tmp, path)
