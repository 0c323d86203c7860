"""Does one ``nl2sql-assets index`` of many small datasources run at the embedding model's pace?

Builds one empty SQLite database per schema of the public benchmarks' ``schemas.json``
(``../shared/bench/spider-train`` and ``../shared/bench/bird``, with their ``make_sqlite.py``),
writes a datasources file naming them all and runs one fresh ``nl2sql-assets index`` in
process (the CLI path: drift detection, one Dagster ``index_job`` run per datasource on a SQLite
instance), optionally under pyinstrument. Then it embeds the very texts the index embedded (the
chunk texts of every registered version) through a plain onnxruntime loop (tokenize, sort by
length, batches of 32, ``session.run``, mean pooling) on the same model and threads.

Prints one JSON object: ``index_seconds`` and ``index_cpu_seconds``, ``plain_loop_seconds`` and
``plain_loop_cpu_seconds``, ``ratio`` and ``cpu_ratio`` (index / plain loop; target <= 1.0; on a
shared machine the CPU ratio is the steadier one), the chunk count and, with ``--profile``,
``embed_seconds`` (time inside the model during the index), ``breakdown_seconds`` (run creation,
event writes, introspection, model load, Chroma, the schema store, ...) and the top cumulative
entries; the pyinstrument session is saved next to the text profile (``pyinstrument --load``).

Usage::

    python benchmarks/many_datasources.py --workdir /tmp/bench_many [--sources spider,bird]
        [--limit N] [--profile OUT.txt] [--no-plain] [--routed 300]

``--routed N`` then asks N of the benchmarks' questions (BIRD with its evidence), each routed over
every datasource indexed together, one at a time and warm: ``routed_retrieval`` holds p50/p95
milliseconds and routing top-1/top-5 over all of them.

Everything is written under ``--workdir`` (wiped first).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
BENCH = HERE.parent.parent / "shared" / "bench"
SOURCES = {"spider": BENCH / "spider-train", "bird": BENCH / "bird"}


def build_databases(workdir: Path, sources: list[str], limit: int | None) -> list[dict[str, str]]:
    """One SQLite file per schema (the benchmark's own ``make_sqlite.py``); datasource entries."""
    entries: list[dict[str, str]] = []
    for source in sources:
        folder = SOURCES[source]
        out = workdir / "db" / source
        subprocess.run([sys.executable, str(folder / "make_sqlite.py"), str(out)], check=True,
                       stdout=subprocess.DEVNULL)
        for path in sorted(out.glob("*.sqlite")):
            ds_id = re.sub(r"[^a-z0-9_]+", "_", f"{source}_{path.stem}".lower())
            entries.append({"id": ds_id, "url": f"sqlite:///{path}"})
    return entries[:limit] if limit else entries


def routed_latency(entries: list[dict[str, str]], sources: list[str], count: int) -> dict[str, object]:
    """``count`` questions of the benchmarks (evenly spaced), each routed over every indexed datasource
    one at a time after a warm-up: p50/p95 milliseconds and routing top-1/top-5."""
    from nl2sql_assets.config import Settings
    from nl2sql_assets.retrieval.retriever import SchemaRetriever

    known = {e["id"] for e in entries}
    asked = []
    for source in sources:
        for line in (SOURCES[source] / "questions.jsonl").read_text(encoding="utf-8").splitlines():
            q = json.loads(line) if line.strip() else None
            ds = re.sub(r"[^a-z0-9_]+", "_", f"{source}_{q['db_id']}".lower()) if q else None
            if q and ds in known:
                asked.append((q["question"], q.get("evidence") or None, ds))
    step = max(1, len(asked) // max(1, count))
    asked = asked[::step][:count]
    times, top1, top5 = [], 0, 0
    with SchemaRetriever.from_settings(Settings.from_env()) as retriever:
        for question, evidence, _ in asked[:20]:  # warm-up: model, caches, Chroma
            retriever.retrieve(question, evidence=evidence)
        for question, evidence, ds in asked:
            started = time.perf_counter()
            result = retriever.retrieve(question, evidence=evidence)
            times.append((time.perf_counter() - started) * 1000)
            ranked = [d.id for d in result.datasources]
            top1 += bool(ranked) and ranked[0] == ds
            top5 += ds in ranked[:5]
    times.sort()
    return {"questions": len(times), "datasources": len(known), "p50_ms": round(times[len(times) // 2], 2),
            "p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
            "routing_top1": round(top1 / len(times), 4), "routing_top5": round(top5 / len(times), 4)}


def top_cumulative(session: object, count: int = 25) -> list[dict[str, object]]:
    """pyinstrument's frame tree folded into seconds per function (each counted once per stack)."""
    totals: dict[str, float] = {}

    def walk(frame: object, seen: frozenset[str]) -> None:
        name = f"{frame.function} ({Path(frame.file_path or '?').name}:{frame.line_no})"  # type: ignore[attr-defined]
        if name not in seen:
            totals[name] = totals.get(name, 0.0) + frame.time  # type: ignore[attr-defined]
            seen = seen | {name}
        for child in frame.children:  # type: ignore[attr-defined]
            walk(child, seen)

    root = session.root_frame()  # type: ignore[attr-defined]
    if root is not None:
        walk(root, frozenset())
    ranked = sorted(totals.items(), key=lambda kv: kv[1], reverse=True)[:count]
    return [{"function": k, "seconds": round(v, 2)} for k, v in ranked]


def seconds_in(session: object, function: str, file_suffix: str) -> float:
    """Total time in the outermost frames of ``function`` defined in a file ending with ``file_suffix``."""
    total = 0.0

    def walk(frame: object) -> None:
        nonlocal total
        if frame.function == function and (frame.file_path or "").endswith(file_suffix):  # type: ignore[attr-defined]
            total += frame.time  # type: ignore[attr-defined]
            return
        for child in frame.children:  # type: ignore[attr-defined]
            walk(child)

    root = session.root_frame()  # type: ignore[attr-defined]
    if root is not None:
        walk(root)
    return total


#: Where a sample goes: the first category whose marker (a function name, or a path fragment
#: of a frame's file) is on its stack, in this order.
CATEGORIES = (
    ("model_load", ("onnx_minilm.py:load",)),
    ("embedding", ("onnx_minilm.py:embed",)),
    ("chroma", ("chromadb/",)),
    ("introspection", ("nl2sql_assets/adapters/",)),
    ("schema_store", ("nl2sql_assets/schema/store.py",)),
    ("drift_check", ("nl2sql_assets/drift.py",)),
    ("run_creation", ("run_domain.py:create_run",)),
    ("event_writes", ("sqlite_event_log.py:store_event", "event_methods.py:handle_new_event")),
    ("event_log_other", ("/storage/event_log/",)),
    ("run_storage", ("/storage/runs/",)),
    ("compute_logs", ("/execution/compute_logs.py", "/storage/local_compute_log_manager.py")),
    ("instance", ("prepare_instance",)),
)
#: Otherwise the innermost frame that is the product's or Dagster's decides.
OWNERS = (("product_other", ("/nl2sql_assets/", "/resources/")), ("dagster_other", ("dagster/",)))


def breakdown(session: object) -> dict[str, float]:
    """Seconds per category (:data:`CATEGORIES`), each sample counted once, innermost marker first."""
    out = {name: 0.0 for name, _ in (*CATEGORIES, *OWNERS)} | {"other": 0.0}

    def labels(frame: object) -> list[str]:
        path = frame.file_path or ""  # type: ignore[attr-defined]
        return [f"{Path(path).name}:{frame.function}", frame.function, path]  # type: ignore[attr-defined]

    def walk(frame: object, stack: list[list[str]]) -> None:
        stack = [*stack, labels(frame)]
        if not frame.children:  # type: ignore[attr-defined]
            out[_category(stack)] += frame.time  # type: ignore[attr-defined]
        for child in frame.children:  # type: ignore[attr-defined]
            walk(child, stack)

    root = session.root_frame()  # type: ignore[attr-defined]
    if root is not None:
        walk(root, [])
    return {k: round(v, 2) for k, v in out.items()}


def _category(stack: list[list[str]]) -> str:
    for name, markers in CATEGORIES:
        for frame in reversed(stack):
            short, function, path = frame
            if any(m == short or m == function or ("/" in m and m in path) for m in markers):
                return name
    for frame in reversed(stack):
        for name, markers in OWNERS:
            if any(m in frame[2] for m in markers):
                return name
    return "other"


def chunk_texts(datasource_ids: list[str]) -> list[str]:
    """The page content of every chunk of every datasource's latest version (what was embedded)."""
    from nl2sql_assets.config import Settings
    from nl2sql_assets.pipeline.steps import build_checked_chunks
    from nl2sql_assets.schema.store import SqlSchemaStore

    store = SqlSchemaStore(Settings.from_env().schema_store_url)
    texts: list[str] = []
    try:
        for ds in datasource_ids:
            snapshot = store.get_latest(ds)
            if snapshot is not None:
                texts += [c.get_page_content() for c in build_checked_chunks(snapshot).chunk_set.chunks]
    finally:
        store.close()
    return texts


def plain_loop_seconds(texts: list[str]) -> tuple[float, float]:
    """The baseline of the issue: raw onnxruntime, length-sorted fixed batches of 32."""
    sys.path.insert(0, str(HERE))
    from embed_throughput import RawOnnx

    from nl2sql_assets.indexing.onnx_minilm import OnnxMiniLMEmbedder

    raw = RawOnnx(OnnxMiniLMEmbedder(batch_size=32))
    started, cpu_started = time.perf_counter(), time.process_time()
    raw.embed(texts, sort=True, plan=False)
    return time.perf_counter() - started, time.process_time() - cpu_started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--sources", default="spider,bird", help="comma-separated: spider, bird")
    parser.add_argument("--limit", type=int, default=None, help="only the first N databases")
    parser.add_argument("--profile", type=Path, default=None, help="profile the index; write pyinstrument text here")
    parser.add_argument("--no-plain", action="store_true", help="skip the plain onnxruntime loop")
    parser.add_argument("--routed", type=int, default=0, metavar="N",
                        help="then time N benchmark questions routed over every datasource indexed (0: skip)")
    args = parser.parse_args(argv)

    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    unknown = sorted(set(sources) - set(SOURCES))
    if unknown:
        parser.error(f"--sources: unknown {unknown}; known: {sorted(SOURCES)}")
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    entries = build_databases(args.workdir, sources, args.limit)
    home = args.workdir / "home"
    home.mkdir()
    (home / "datasources.yaml").write_text(yaml.safe_dump({"datasources": entries}), encoding="utf-8")
    os.environ.update({"NL2SQL_HOME": str(home), "NL2SQL_DATASOURCES": str(home / "datasources.yaml"),
                       "DAGSTER_HOME": str(home / "dagster")})

    from nl2sql_assets.cli.environment import command_settings
    from nl2sql_assets.cli.index import index_and_report

    profiler = None
    if args.profile is not None:
        try:
            from pyinstrument import Profiler
        except ImportError:
            parser.error("--profile needs pyinstrument: .venv/bin/pip install pyinstrument")

        profiler = Profiler(interval=0.005)
        profiler.start()
    started, cpu_started = time.perf_counter(), time.process_time()
    real_stdout, sys.stdout = sys.stdout, open(os.devnull, "w")  # the command's per-datasource lines
    try:
        status = index_and_report(command_settings(), [])
    finally:
        sys.stdout.close()
        sys.stdout = real_stdout
    index_seconds = time.perf_counter() - started
    index_cpu = time.process_time() - cpu_started
    out: dict[str, object] = {
        "question": "one fresh `nl2sql-assets index` of many small datasources vs a plain onnxruntime loop",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "datasources": len(entries), "sources": sources, "exit_status": status,
        "index_seconds": round(index_seconds, 2), "index_cpu_seconds": round(index_cpu, 2),
    }
    if profiler is not None:
        profiler.stop()
        session = profiler.last_session
        args.profile.write_text(profiler.output_text(unicode=False, color=False, show_all=False), encoding="utf-8")
        session.save(str(args.profile.with_suffix(".pyisession")))  # re-render: pyinstrument --load
        embed = seconds_in(session, "embed", "onnx_minilm.py")
        out["embed_seconds"] = round(embed, 2)
        out["not_embedding_share"] = round(1 - embed / index_seconds, 3) if index_seconds else None
        out["breakdown_seconds"] = breakdown(session)
        out["top_cumulative"] = top_cumulative(session)
    texts = chunk_texts([e["id"] for e in entries])
    out["chunks"] = len(texts)
    if not args.no_plain:
        plain, plain_cpu = plain_loop_seconds(texts)
        out["plain_loop_seconds"] = round(plain, 2)
        out["plain_loop_cpu_seconds"] = round(plain_cpu, 2)
        out["ratio"] = round(index_seconds / plain, 3)
        out["cpu_ratio"] = round(index_cpu / plain_cpu, 3) if plain_cpu else None
    if args.routed:
        out["routed_retrieval"] = routed_latency(entries, sources, args.routed)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
