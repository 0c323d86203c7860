"""``retrieve --batch`` against bad input (issue 13, item 7): one bad line costs one error line.

A lone surrogate (``"\\ud800"``) or bytes that are not UTF-8 once stopped the whole batch with
exit 1 and nothing written; a 650 KB line with 20,000 evidence clauses took 89 s and 3.9 GB. On
the indexed demo, through the real CLI.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nl2sql_assets.cli import main
from nl2sql_assets.cli.retrieve import run_batch
from nl2sql_assets.config import Settings
from nl2sql_assets.retrieval.models import QueryHints, RetrievalRequest, RetrievalResult
from nl2sql_assets.retrieval.query import MAX_QUERY_TEXTS, MAX_TEXT_CHARS, build_semantic_query
from tests.chunk_samples import model_provider  # noqa: F401 - fixture
from tests.integration.test_cli_retrieve import demo_env  # noqa: F401 - fixture
from tests.integration.test_retriever import demo_settings  # noqa: F401 - fixture

pytestmark = pytest.mark.slow

GOOD = [{"id": "q1", "question": "Headcount per department", "datasource": "hr"},
        {"id": "q2", "question": "Revenue per month in 2025?"}]


def _run_batch(tmp_path: Path, payload: bytes) -> tuple[int, list[dict[str, object]], str]:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(payload)
    code = main(["retrieve", "--batch", str(source), "--out", str(out)])
    return code, [json.loads(line) for line in out.read_text(encoding="ascii").splitlines()], str(out)


def _line(obj: dict[str, object]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def test_lone_surrogates_and_bad_bytes_cost_their_own_line_only(demo_env: Settings, tmp_path: Path,  # noqa: F811
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    payload = b"".join([
        _line(GOOD[0]),
        b'{"id": "sur", "question": "Headcount \\ud800 per department"}\n',  # a lone surrogate escape
        b'{"id": "raw", "question": "Headcount \xff\xfe per department"}\n',  # not UTF-8
        b'\xff\xfe{"id": 7}\n',                                                 # not UTF-8, not JSON either
        b'{"id": "ev", "question": "Payroll", "evidence": "x \\udcff"}\n',     # in another field
        _line(GOOD[1]),
        b'{"id": "id\\ud800", "question": "Headcount per office"}\n',           # the id is only echoed
    ])
    code, results, _ = _run_batch(tmp_path, payload)
    assert code == 0
    assert [r["id"] for r in results] == ["q1", "sur", "raw", None, "ev", "q2", "id\ud800"]
    assert results[0]["datasource"] == "hr" and results[5]["datasource"] == "commerce"
    assert results[6]["tables"] and "error" not in results[6]
    assert results[1] == {"id": "sur", "line": 2, "error": "line 2: 'question' is not valid text: lone surrogate "
                          "U+D800 at character 10 (an undecodable byte or an unpaired \\u escape)"}
    assert results[2] == {"id": "raw", "line": 3, "error": "line 3: not valid UTF-8 (byte 0xff at byte 37)"}
    assert results[3]["line"] == 4 and "not valid UTF-8 (byte 0xff at byte 0)" in str(results[3]["error"])
    assert results[4]["line"] == 5 and "'evidence' is not valid text" in str(results[4]["error"])
    assert "3 answered, 4 error lines" in capsys.readouterr().err


def test_a_byte_order_mark_and_crlf_line_ends_are_read(demo_env: Settings, tmp_path: Path) -> None:  # noqa: F811
    payload = b"\xef\xbb\xbf" + _line(GOOD[0]).replace(b"\n", b"\r\n") + _line(GOOD[1]).replace(b"\n", b"\r\n")
    code, results, _ = _run_batch(tmp_path, payload)
    assert code == 0 and [r.get("datasource") for r in results] == ["hr", "commerce"]


def test_output_path_that_is_a_directory_is_one_clear_error(demo_env: Settings, tmp_path: Path,  # noqa: F811
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(_line(GOOD[0]))
    assert main(["retrieve", "--batch", str(source), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"nl2sql-assets retrieve: error: batch output {tmp_path} is a directory\n"
    assert main(["retrieve", "--batch", str(source), "--out", str(tmp_path / "missing" / "out.jsonl")]) == 2
    assert "cannot be written (No such file or directory)" in capsys.readouterr().err


def _cli_env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CHROMA_HOST", "CHROMA_PORT", "SCHEMA_STORE_URL", "EMBEDDING_PROVIDER", "EMBEDDING_MODEL")}
    env.update(NL2SQL_HOME=str(settings.home), NL2SQL_DATASOURCES=str(settings.datasources_path))
    return env


def test_a_question_of_undecodable_bytes_on_the_command_line(demo_env: Settings) -> None:  # noqa: F811
    """argv bytes that are not UTF-8 reach Python as surrogates: one error line, exit 2, no traceback."""
    script = "import sys; from nl2sql_assets.cli import main; sys.exit(main())"
    for argv in ([b"retrieve", b"Headcount \xff\xfe"], [b"retrieve", b"Headcount", b"--tenant", b"acme\xff"]):
        done = subprocess.run([sys.executable.encode(), b"-c", script.encode(), *argv], env=_cli_env(demo_env),
                              capture_output=True, timeout=120)
        err = done.stderr.decode("utf-8", errors="replace")
        assert done.returncode == 2, err
        assert "Traceback" not in err and err.count("\n") == 1, err
        assert err.startswith("nl2sql-assets retrieve: error: the ") and "is not valid text: lone surrogate" in err


# the peak RSS of this process's own memory (VmHWM): getrusage's ru_maxrss is preserved across
# exec on Linux, so a child of a large pytest worker reported the worker's 1.7 GB, not its own 0.4 GB
_MEASURE = """
import json, re, sys, time
from pathlib import Path
from nl2sql_assets.cli import main
started = time.perf_counter()
code = main(["retrieve", "--batch", sys.argv[1], "--out", sys.argv[2]])
peak_kb = int(re.search(r"VmHWM:\\s+(\\d+) kB", Path("/proc/self/status").read_text()).group(1))
print(json.dumps({"code": code, "seconds": time.perf_counter() - started, "rss_mb": peak_kb / 1024}))
"""


def test_a_huge_line_is_bounded_in_time_and_memory(demo_env: Settings, tmp_path: Path) -> None:  # noqa: F811
    """650 KB, 20,000 evidence clauses: once 89 s and 3.9 GB; now a few seconds, with a warning."""
    evidence = "; ".join(f"clause {i} means column_{i % 97} = value {i}" for i in range(20_000))
    huge = {"id": "huge", "question": "Revenue per month in 2025?", "evidence": evidence[:650_000]}
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_bytes(_line(GOOD[0]) + _line(huge) + _line(GOOD[1]))
    assert source.stat().st_size > 640_000
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(source), str(out)], env=_cli_env(demo_env),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    assert measured["code"] == 0
    assert measured["seconds"] < 20 and measured["rss_mb"] < 1536, measured
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in results] == ["q1", "huge", "q2"]
    for good in (results[0], results[2]):  # the huge line's caps do not spill over to its neighbours
        assert good["tables"] and not any("only the first" in w or "characters" in w for w in good["warnings"]), good
    assert results[1]["datasource"] == "commerce" and results[1]["tables"]
    assert any(f"only the first {MAX_QUERY_TEXTS} are used" in w for w in results[1]["warnings"])


def test_query_texts_are_capped_in_number_and_length_with_warnings() -> None:
    long_question = "Revenue per month " * 200
    many = "; ".join(f"clause {i}" for i in range(100))
    hints = QueryHints(filters=[f"filter {i}" for i in range(10)])
    query = build_semantic_query(RetrievalRequest(question=long_question, evidence=many, hints=hints))
    assert query.n_segments == MAX_QUERY_TEXTS and len(query.texts) <= MAX_QUERY_TEXTS + 6
    assert all(len(t) <= MAX_TEXT_CHARS for t in query.texts)
    assert query.texts[0] == long_question.strip()[:MAX_TEXT_CHARS]
    assert query.warnings == [f"1 query text(s) longer than {MAX_TEXT_CHARS} characters cut to {MAX_TEXT_CHARS}",
                              f"the question, its evidence clauses and hints make 111 distinct query texts; "
                              f"only the first {MAX_QUERY_TEXTS} are used"]
    normal = build_semantic_query(RetrievalRequest(question="Revenue per month?", evidence="a = b; c = d"))
    assert normal.texts == ["Revenue per month?", "a = b", "c = d"] and normal.warnings == []


class _FlakyRetriever:
    """Fails with a non-product error whenever the batch holds the question 'boom'."""

    def retrieve_batch(self, requests: list[RetrievalRequest]) -> list[object]:
        if any(r.question == "boom" for r in requests):
            raise TypeError("unforeseen input")
        return [RetrievalResult(question=r.question, datasources=[], datasource=None, schema_version=None,
                                tables=[], relationships=[], fallback=None) for r in requests]


def test_an_unforeseen_failure_costs_its_own_line_only() -> None:
    source = [_line({"id": 1, "question": "fine"}), _line({"id": 2, "question": "boom"}),
              _line({"id": 3, "question": "fine too"})]
    sink = io.StringIO()
    assert run_batch(_FlakyRetriever(), source, sink) == (2, 1)
    lines = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert [r["id"] for r in lines] == [1, 2, 3] and lines[0]["question"] == "fine"
    assert lines[1] == {"id": 2, "line": 2, "error": "retrieval failed (TypeError: unforeseen input)"}
