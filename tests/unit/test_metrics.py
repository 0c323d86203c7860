"""The metrics registry: values, Prometheus text format, atomic textfile export."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from nl2sql_assets.metrics import MetricsRegistry


def test_counters_gauges_histograms_render_in_prometheus_format() -> None:
    m = MetricsRegistry()
    m.describe("chunks_embedded_total", "Chunks sent to the embedding model")
    m.inc("chunks_embedded_total", 5, {"datasource": "sales"})
    m.inc("chunks_embedded_total", 2, {"datasource": "sales"})
    m.inc("chunks_embedded_total", 1, {"datasource": 'we"ird'})
    m.set("breaker_open", 1, {"name": "vector_store"})
    m.observe("retrieval_seconds", 0.004)
    m.observe("retrieval_seconds", 0.2)
    text = m.render()
    assert "# HELP nl2sql_chunks_embedded_total Chunks sent to the embedding model" in text
    assert "# TYPE nl2sql_chunks_embedded_total counter" in text
    assert 'nl2sql_chunks_embedded_total{datasource="sales"} 7' in text
    assert 'nl2sql_chunks_embedded_total{datasource="we\\"ird"} 1' in text
    assert 'nl2sql_breaker_open{name="vector_store"} 1' in text
    assert 'nl2sql_retrieval_seconds_bucket{le="0.005"} 1' in text
    assert 'nl2sql_retrieval_seconds_bucket{le="0.25"} 2' in text
    assert 'nl2sql_retrieval_seconds_bucket{le="+Inf"} 2' in text
    assert "nl2sql_retrieval_seconds_count 2" in text
    assert m.value("chunks_embedded_total", {"datasource": "sales"}) == 7
    assert m.value("retrieval_seconds") == 2
    assert m.as_dict()["counters"]["chunks_embedded_total"]["datasource=sales"] == 7  # type: ignore[index]


def test_counters_refuse_to_go_down() -> None:
    with pytest.raises(ValueError):
        MetricsRegistry().inc("x", -1)


def test_timer_observes_even_when_the_block_raises() -> None:
    m = MetricsRegistry()
    with pytest.raises(RuntimeError), m.timer("refresh_seconds", {"datasource": "a"}):
        raise RuntimeError("boom")
    assert m.value("refresh_seconds", {"datasource": "a"}) == 1


def test_thread_safe_increments() -> None:
    m = MetricsRegistry()

    def work() -> None:
        for _ in range(1000):
            m.inc("n")

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert m.value("n") == 4000


def test_write_textfile_is_atomic_and_readable(tmp_path: Path) -> None:
    m = MetricsRegistry()
    m.inc("runs_total")
    target = tmp_path / "metrics" / "nl2sql.prom"
    m.write_textfile(target)
    assert target.read_text() == m.render()
    assert [p.name for p in target.parent.iterdir()] == ["nl2sql.prom"]
