"""How do drift checks, indexing, re-indexing and retrieval scale with the number of tables?

For every engine (SQLite, DuckDB, PostgreSQL) and size (default 100, 300, 1,000 and 3,000
tables of about 20 columns with realistic names, foreign keys and a few rows each), one
subprocess (so peak RSS is per case) generates the schema and runs the product's own path:

- ``full_index``: :func:`nl2sql_assets.pipeline.index.index_datasource` (adapter with statistics
  -> schema store -> chunks -> embeddings -> Chroma) into a fresh ``NL2SQL_HOME``; its steps:
  ``introspection_s`` (read with statistics), ``register_s``, ``chunk_s``, ``embedding_s`` (time
  inside the embedding service), ``vector_writes_s`` (the rest of the vector-store refresh),
  ``retention_s``; and ``plain_loop_s``: the same chunk texts through a plain onnxruntime loop
  (length-sorted batches of 32, as ``embed_throughput.py``'s baseline);
- ``drift_check_s``: :func:`nl2sql_assets.drift.check_drift` on the unchanged database (what a
  sensor tick costs), best of three;
- ``reindex``: 1% of the tables (at least one) get a new column, the drift check sees it, then
  ``index_datasource`` again: seconds, chunks embedded, and ``reindex_share`` = re-index / full;
  ``reindex_2``: the same with another 1% (after a first version whose statistics budget did not
  reach every table, the first re-index also reads those; the second shows the steady state);
  ``reindex_3``: a third 1%, whose version is the fourth: retention (3 versions kept) evicts the
  first, so this one includes deleting the records no kept version uses (``step_s.retention``);
- ``retrieval``: p50/p95 of :class:`~nl2sql_assets.retrieval.retriever.SchemaRetriever.retrieve`
  over generated questions (after one warm-up);
- ``peak_rss_mb``: the subprocess's peak resident memory; ``peak_rss_after_mb``: that peak after each stage.

Prints one JSON object and, unless ``--no-write``, writes ``benchmarks/RESULTS.md`` (the
command, a table of the figures, the targets) and ``benchmarks/scale.png`` (index and re-index
seconds against tables, per engine; needs the ``bench`` extra: matplotlib).

Usage::

    python benchmarks/scale.py [--sizes 100,300,1000,3000] [--engines sqlite,duckdb,postgres]
        [--workdir /tmp/nl2sql_scale] [--postgres-url postgresql+psycopg2://postgres@127.0.0.1:5432/test]
        [--no-write]
    python benchmarks/scale.py --render saved.json [--render more.json]   # RESULTS.md from saved output

PostgreSQL cases use a dedicated schema (``nl2sql_scale_<pid>``), dropped afterwards.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from scale_schema import AREAS, ENTITIES, SUFFIXES, Database, schema_statements, table_names  # noqa: E402
DEFAULT_SIZES = (100, 300, 1000, 3000)
ENGINES = ("sqlite", "duckdb", "postgres")
DEFAULT_PG = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
T0 = datetime(2026, 3, 2, 8, 0, 0, tzinfo=UTC)

# ---------------------------------------------------------------------------------- one case


class TimedEmbeddings:
    """The embedding service, with the seconds spent in ``embed_documents`` added up."""

    def __init__(self, service: Any) -> None:
        self._service = service
        self.seconds = 0.0

    def embed_documents(self, texts: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._service.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - started

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)


def questions(names: list[str], count: int = 30) -> list[str]:
    step = max(1, len(names) // count)
    out = []
    for k, name in enumerate(names[::step][:count]):
        words = name.replace("_", " ")
        out.append(("How many {} were created per month?", "Total amount of {} by status in 2025",
                    "Which {} are still active, with their city?")[k % 3].format(words))
    return out


def execute_apart(db: Database, statements: list[str]) -> None:
    """Run the generator's DDL and DML in a forked child: a database's own write buffers (DuckDB
    holds gigabytes while it writes thousands of tables) never count in the product's peak RSS."""
    child = multiprocessing.get_context("fork").Process(target=db.execute, args=(statements,))
    child.start()
    child.join()
    if child.exitcode != 0:
        raise RuntimeError(f"generating the {db.engine} schema failed (exit code {child.exitcode})")


def peak_mb() -> float:
    """This process's peak resident memory so far, in MB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def drift_case(engine: str, size: int, work: Path, postgres_url: str) -> dict[str, Any]:
    """``--stages drift``: the drift check (best of 3, against an empty store, which reads the
    same structure) and the introspection with statistics, without indexing."""
    from nl2sql_assets.config import DatasourceConfig, Settings
    from nl2sql_assets.drift import check_drift
    from nl2sql_assets.pipeline.steps import read_snapshot
    from nl2sql_assets.schema.store import build_schema_store

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    db = Database(engine, work, postgres_url)
    out: dict[str, Any] = {"engine": engine, "tables": size, "stages": "drift"}
    try:
        statements, _ = schema_statements(size)
        started = time.perf_counter()
        execute_apart(db, statements)
        out["generate_s"] = round(time.perf_counter() - started, 2)
        store = build_schema_store(Settings.from_env({"NL2SQL_HOME": str(work / "home")}))
        config = DatasourceConfig(id="scale", url=db.url, schemas=db.schemas)
        runs = []
        for _ in range(3):
            started = time.perf_counter()
            check_drift([config], store, now=T0)
            runs.append(time.perf_counter() - started)
        out["drift_check_s"] = round(min(runs), 3)
        out["drift_check_runs_s"] = [round(r, 3) for r in runs]
        started = time.perf_counter()
        snapshot = read_snapshot(config, now=T0)
        out["introspection_s"] = round(time.perf_counter() - started, 2)
        out["columns"] = sum(len(t.columns) for t in snapshot.tables)
        store.close()
    finally:
        db.drop()
    out["peak_rss_mb"] = peak_mb()
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    return out


def run_case(engine: str, size: int, work: Path, postgres_url: str) -> dict[str, Any]:
    """One (engine, size) case, in this process; returns its figures."""
    from nl2sql_assets.config import DatasourceConfig, Settings
    from nl2sql_assets.drift import check_drift
    from nl2sql_assets.indexing.chunk_builder import build_chunks
    from nl2sql_assets.indexing.embeddings import build_embedding_service
    from nl2sql_assets.indexing.vector_store import build_vector_store
    from nl2sql_assets.pipeline.index import index_datasource
    from nl2sql_assets.retrieval.retriever import SchemaRetriever
    from nl2sql_assets.schema.store import build_schema_store

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    db = Database(engine, work, postgres_url)
    out: dict[str, Any] = {"engine": engine, "tables": size}
    try:
        statements, names = schema_statements(size)
        started = time.perf_counter()
        execute_apart(db, statements)
        out["generate_s"] = round(time.perf_counter() - started, 2)
        settings = Settings.from_env({"NL2SQL_HOME": str(work / "home")})
        config = DatasourceConfig(id="scale", url=db.url, schemas=db.schemas)
        store = build_schema_store(settings)
        service = build_embedding_service(settings)
        timed = TimedEmbeddings(service)
        vectors = build_vector_store(settings, timed)  # type: ignore[arg-type]
        service.embed_query("warm up")  # the model load is not part of any stage

        started = time.perf_counter()
        full = index_datasource(config, store, vectors, now=T0)
        full_s = time.perf_counter() - started
        steps = full.timings_ms
        embed_s = timed.seconds
        peaks = {"full_index": peak_mb()}
        out["peak_rss_after_mb"] = peaks
        out["chunks"] = full.refresh.total
        out["columns"] = full.chunk_counts.get("schema.column", 0)
        out["full_index"] = {
            "seconds": round(full_s, 2), "introspection_s": round(steps["read"] / 1000, 2),
            "register_s": round(steps["register"] / 1000, 2), "chunk_s": round(steps["chunk"] / 1000, 2),
            "embedding_s": round(embed_s, 2),
            "vector_writes_s": round(max(steps["refresh"] / 1000 - embed_s, 0.0), 2),
            "retention_s": round(steps.get("retention", 0.0) / 1000, 2), "embedded": full.refresh.embedded,
        }

        drift_runs = []
        for _ in range(3):
            started = time.perf_counter()
            result = check_drift([config], store, now=T0 + timedelta(minutes=5))[0]
            drift_runs.append(time.perf_counter() - started)
        out["drift_check_s"] = round(min(drift_runs), 3)
        out["drift_check_runs_s"] = [round(s, 3) for s in drift_runs]
        out["drift_unchanged_status"] = result.status

        first = store.get_snapshot("scale", full.schema_version)
        # the baseline's texts, kept on disk: retention evicts this version on the third re-index,
        # and holding them in memory would count in the product's peak
        texts_file = work / "full_index_texts.json"
        texts_file.write_text(json.dumps([c.get_page_content() for c in build_chunks(first).chunks]))
        out["full_index"]["stats_skipped_tables"] = sum(t.row_count_status == "skipped" for t in first.tables)
        del first
        step = max(1, round(size * 0.01))
        # three rounds of 1% drift: the second shows the steady state when the first version's
        # statistics budget did not reach every table (the first re-index reads those then); the
        # third makes the fourth version, so retention evicts the first
        for label, hours in (("reindex", 1), ("reindex_2", 2), ("reindex_3", 3)):
            changed = names[(hours - 1) * step:hours * step]
            execute_apart(db, [f"ALTER TABLE {n} ADD COLUMN loyalty_tier_{hours} VARCHAR(20)" for n in changed])
            started = time.perf_counter()
            drifted = check_drift([config], store, now=T0 + timedelta(hours=hours))[0]
            drift_changed_s = time.perf_counter() - started
            timed.seconds = 0.0
            started = time.perf_counter()
            again = index_datasource(config, store, vectors, now=T0 + timedelta(hours=hours))
            again_s = time.perf_counter() - started
            out[label] = {
                "tables_changed": len(changed), "drift_status": drifted.status,
                "drift_check_s": round(drift_changed_s, 3), "seconds": round(again_s, 2),
                "embedded": again.refresh.embedded, "chunks": again.refresh.total,
                "embedding_s": round(timed.seconds, 2),
                "step_s": {k: round(v / 1000, 2) for k, v in again.timings_ms.items()},
            }
            out[f"{label}_share"] = round(again_s / full_s, 3) if full_s else None
            peaks[label] = peak_mb()

        retriever = SchemaRetriever(store, vectors, service)
        asked = questions(names)
        retriever.retrieve(asked[0], datasource="scale")
        latencies = []
        for q in asked:
            started = time.perf_counter()
            retriever.retrieve(q, datasource="scale")
            latencies.append((time.perf_counter() - started) * 1000)
        out["retrieval_ms"] = {"questions": len(asked), "p50": round(percentile(latencies, 0.5), 1),
                               "p95": round(percentile(latencies, 0.95), 1)}
        # the product's peak: measured before the baseline below loads a second model session
        peaks["retrieval"] = out["peak_rss_mb"] = peak_mb()
        texts = json.loads(texts_file.read_text())
        out["full_index"]["plain_loop_s"] = round(plain_loop(texts), 2)
        vectors.close()
        store.close()
    finally:
        db.drop()
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)
    return out


def plain_loop(texts: list[str]) -> float:
    """Raw onnxruntime on the texts: the same baseline as ``embed_throughput.py``."""
    sys.path.insert(0, str(HERE))
    from embed_throughput import RawOnnx

    from nl2sql_assets.indexing.onnx_minilm import OnnxMiniLMEmbedder

    raw = RawOnnx(OnnxMiniLMEmbedder(batch_size=32))
    started = time.perf_counter()
    raw.embed(texts, sort=True, plan=False)
    return time.perf_counter() - started


# ---------------------------------------------------------------------------------- report


TARGETS = ("drift check for 1,000 tables < 1 s (SQLite, DuckDB), < 3 s (PostgreSQL); re-index after 1% "
           "drift <= 0.10 of the full index; peak RSS <= 1.5 GB at 3,000 tables; cost at most linear in tables")


def verdicts(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Each target, met or not, on the cases that ran."""
    out: dict[str, Any] = {}
    for c in [c for c in cases if "error" not in c]:
        if c["tables"] == 1000:
            limit = 3.0 if c["engine"] == "postgres" else 1.0
            out[f"drift_1000_{c['engine']}"] = {"seconds": c["drift_check_s"], "limit": limit,
                                                "met": c["drift_check_s"] < limit}
    ok = [c for c in cases if "error" not in c and "full_index" in c]
    for c in ok:
        key = f"{c['engine']}:{c['tables']}"
        out.setdefault("reindex_share", {})[key] = {"share": c["reindex_share"], "met": c["reindex_share"] <= 0.10}
        for later in ("reindex_2_share", "reindex_3_share"):
            if later in c:
                out.setdefault(later, {})[key] = {"share": c[later], "met": c[later] <= 0.10}
        if c["tables"] == 3000:
            out[f"rss_3000_{c['engine']}"] = {"mb": c["peak_rss_mb"], "met": c["peak_rss_mb"] <= 1536}
    for engine in {c["engine"] for c in ok}:
        runs = sorted((c["tables"], c["full_index"]["seconds"]) for c in ok if c["engine"] == engine)
        if len(runs) >= 2:
            (n0, s0), (n1, s1) = runs[0], runs[-1]
            growth = (s1 / s0) / (n1 / n0) if s0 and n0 else None
            out.setdefault("linear", {})[engine] = {
                "per_table_s": {n: round(s / n, 4) for n, s in runs},
                "growth_vs_linear": round(growth, 2) if growth else None,
                "met": growth is not None and growth <= 1.25}
    return out


def write_results(cases: list[dict[str, Any]], command: str, folder: Path) -> None:
    ok = [c for c in cases if "error" not in c and "full_index" in c]
    plot = folder / "scale.png"
    plotted = write_plot(ok, plot)
    lines = [
        "# Scale curve", "",
        "Produced by `benchmarks/scale.py` (one subprocess per case; the product's own path: adapters, "
        "`pipeline/index.py`, Chroma, the packaged ONNX model). Machine: "
        f"{os.cpu_count()} CPUs shared with other work, Python {platform.python_version()}, "
        f"written {datetime.now(UTC):%Y-%m-%d %H:%M} UTC.", "",
        "```bash", command, "```", "",
        f"Targets: {TARGETS}.", "",
        "| engine | tables | chunks | drift check s | introspection s | chunk s | embedding s | plain loop s "
        "| vector writes s | full index s | re-index s | re-index share | embedded on re-index "
        "| second re-index s (share; embedded) | retrieval p50 / p95 ms | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for c in cases:
        if "error" in c:
            lines.append(f"| {c['engine']} | {c['tables']} | failed: {c['error'][:80]} |" + " |" * 13)
            continue
        if "full_index" not in c:  # --stages drift
            lines.append(f"| {c['engine']} | {c['tables']} | (drift only) | {c['drift_check_s']} "
                         f"| {c['introspection_s']} |" + " |" * 10 + f" {c['peak_rss_mb']} |")
            continue
        f, r, r2 = c["full_index"], c["reindex"], c.get("reindex_2")
        second = f"{r2['seconds']} ({c['reindex_2_share']}; {r2['embedded']})" if r2 else "-"
        lines.append(
            f"| {c['engine']} | {c['tables']} | {c['chunks']} | {c['drift_check_s']} | {f['introspection_s']} "
            f"| {f['chunk_s']} | {f['embedding_s']} | {f['plain_loop_s']} | {f['vector_writes_s']} | {f['seconds']} "
            f"| {r['seconds']} | {c['reindex_share']} | {r['embedded']} of {r['chunks']} | {second} "
            f"| {c['retrieval_ms']['p50']} / {c['retrieval_ms']['p95']} | {c['peak_rss_mb']} |")
    lines += ["", "Targets on the cases that ran:", "", "```json", json.dumps(verdicts(cases), indent=2), "```", ""]
    if plotted:
        lines += [f"![index and re-index seconds against tables]({plot.name})", ""]
    lines += ["Columns: `drift check` = `check_drift` on the unchanged database (best of 3); `introspection` = "
              "the adapter's read with statistics; `embedding` = time inside the embedding service during "
              "the full index; `plain loop` = the same texts through raw onnxruntime (sorted, batches of 32); "
              "`vector writes` = the vector-store refresh minus embedding; `re-index` = `index_datasource` after "
              "1% of the tables got a new column; `second re-index` = the same for another 1%.", ""]
    replace_section(folder / "RESULTS.md", "\n".join(lines))


BEGIN, END = "<!-- scale.py: begin -->", "<!-- scale.py: end -->"


def replace_section(path: Path, body: str) -> None:
    """Write ``body`` between the markers of ``path``, keeping whatever else the file holds."""
    section = f"{BEGIN}\n{body}\n{END}"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = (text.rstrip() + "\n\n" if text.strip() else "") + section + "\n"
    path.write_text(text, encoding="utf-8")


def write_plot(cases: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (pip install -e '.[bench]'): no plot", file=sys.stderr)
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for engine in ENGINES:
        runs = sorted((c["tables"], c["full_index"]["seconds"], c["reindex"]["seconds"])
                      for c in cases if c["engine"] == engine)
        if not runs:
            continue
        xs = [r[0] for r in runs]
        line = ax.plot(xs, [r[1] for r in runs], marker="o", label=f"{engine}: full index")[0]
        ax.plot(xs, [r[2] for r in runs], marker="x", linestyle="--", color=line.get_color(),
                label=f"{engine}: re-index after 1% drift")
    ax.set_xlabel("tables (~20 columns each)")
    ax.set_ylabel("seconds")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("nl2sql-assets: index and re-index time against schema size")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/nl2sql_scale"))
    parser.add_argument("--postgres-url", default=DEFAULT_PG)
    parser.add_argument("--stages", choices=("all", "drift"), default="all",
                        help="drift: only the drift check and the introspection (quick, for large sizes)")
    parser.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md and the plot alone")
    parser.add_argument("--render", type=Path, default=None,
                        help="only rewrite RESULTS.md and the plot from this saved JSON output (merged: later files win)",
                        action="append")
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)  # engine:size, run in this process
    args = parser.parse_args(argv)

    if args.render:
        merged: dict[tuple[str, int], dict[str, Any]] = {}
        commands = []
        for path in args.render:
            saved = json.loads(path.read_text(encoding="utf-8"))
            commands.append(saved["command"])
            merged.update({(c["engine"], c["tables"]): c for c in saved["cases"]})
        cases = [merged[k] for k in sorted(merged, key=lambda k: (ENGINES.index(k[0]), k[1]))]
        write_results(cases, "\n".join(commands), HERE)
        print(json.dumps({"cases": len(cases), "targets": verdicts(cases)}, indent=2))
        return 0
    if args.case:
        engine, size = args.case.split(":")
        case = drift_case if args.stages == "drift" else run_case
        print(json.dumps(case(engine, int(size), args.workdir, args.postgres_url)))
        return 0
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes: expected comma-separated integers, got {args.sizes!r}")
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown or not engines:
        parser.error(f"--engines: unknown {unknown}; known: {list(ENGINES)}")
    if any(s < 1 or s > len(table_names(len(AREAS) * len(ENTITIES) * len(SUFFIXES))) for s in sizes):
        parser.error(f"--sizes: each within 1..{len(AREAS) * len(ENTITIES) * len(SUFFIXES)}")
    cases: list[dict[str, Any]] = []
    for engine in engines:
        for size in sizes:
            work = args.workdir / f"{engine}_{size}"
            proc = subprocess.run([sys.executable, __file__, "--case", f"{engine}:{size}", "--workdir", str(work),
                                   "--postgres-url", args.postgres_url, "--stages", args.stages],
                                  capture_output=True, text=True)
            if proc.returncode == 0:
                case = json.loads(proc.stdout.strip().splitlines()[-1])
            else:
                tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                case = {"engine": engine, "tables": size, "error": tail}
            cases.append(case)
            print(json.dumps(case), file=sys.stderr, flush=True)
            shutil.rmtree(work, ignore_errors=True)
    command = "python benchmarks/scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result = {"question": "scale curve: drift, index, re-index, retrieval and memory against tables",
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
              "command": command.strip(), "cases": cases, "targets": verdicts(cases)}
    if not args.no_write:
        write_results(cases, command.strip(), HERE)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
