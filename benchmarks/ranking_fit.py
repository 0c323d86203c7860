"""The ranking fit as a library: question rows with the product's features, the four stacked
logistic stages, and the selection measured on given rows.

Shared by ``fit_ranking_weights.py`` (prints the shipped weights), ``heldout.py`` (fits per
database-grouped fold, measures on the held-out databases) and ``fit_confidence.py``.

A row is one question asked of one database: the product's column features
(``ranking.column_features``) computed from the indexed snapshot, with each query text's
similarities cut to its top ``dense_k`` chunks as retrieval sees them (:func:`as_retrieved`), the
gold labels, and (for the plain dense baselines) the question's cosine to one vector per table, of
its own database and of every database of its benchmark (routing).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

# one BLAS thread: on this shared 2-core machine threaded BLAS spins and runs the fits ~10x slower
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from nl2sql_assets.retrieval import ranking as R
from nl2sql_assets.retrieval.entity_kinds import EntityKinds
from nl2sql_assets.retrieval.mlp import MeanLogitModel, MLPModel
from nl2sql_assets.retrieval.query_adapter import QueryAdapter
from nl2sql_assets.retrieval.ranking import FLOOR_MARGIN, DenseScores
from nl2sql_assets.retrieval.word_association import Example, WordAssociation
from nl2sql_assets.retrieval.word_similarity import WordScores, question_words, word_scores

FOLDS = 3  # inner database-grouped folds for out-of-fold stacking
FREE = {"is_pk", "is_join_key", "degree", "out_degree", "log_columns", "neighbour_max", "neighbour_sum",
        "between_top2", "log_tables", "logit_log_tables"}
Row = dict[str, object]


def fit_logistic(x: np.ndarray, y: np.ndarray, nonneg: list[bool], c: float = 1.0, iters: int = 3000,
                 lr: float = 0.05) -> tuple[np.ndarray, float]:
    """L2 logistic regression (penalty 1/(C n)) with ``w[j] >= 0`` where ``nonneg[j]``; Adam + projection."""
    n, d = x.shape
    mu, sd = x.mean(0), x.std(0)
    sd[sd < 1e-9] = 1.0
    z = (x - mu) / sd
    w, b = np.zeros(d), 0.0
    m, v = np.zeros(d + 1), np.zeros(d + 1)
    lam = 1.0 / (c * n)
    mask = np.asarray(nonneg, bool)
    for t in range(1, iters + 1):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        g = np.empty(d + 1)
        g[:d] = z.T @ (p - y) / n + lam * w * sd ** 2
        g[d] = (p - y).mean()
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        step = lr * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
        w -= step[:d]
        b -= step[d]
        w[mask] = np.maximum(w[mask], 0.0)
    return w / sd, float(b - (mu / sd) @ w)


def top_k_with_floor(tables: np.ndarray, columns: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per query text, the ``k`` most similar table and column chunks keep their similarity and
    every other chunk gets the row's floor (the smallest kept one - ``FLOOR_MARGIN``): what the
    retriever builds from the vector store's top-``k`` hits (``SchemaRetriever._dense_scores``)."""
    both = np.concatenate([tables, columns], axis=1)
    out = both.copy()
    k = min(k, both.shape[1])
    for r in range(both.shape[0]):
        keep = np.argpartition(-both[r], k - 1)[:k]
        out[r].fill(both[r, keep].min() - FLOOR_MARGIN)
        out[r, keep] = both[r, keep]
    return out[:, :tables.shape[1]], out[:, tables.shape[1]:]


def as_retrieved(seg_tables: np.ndarray, seg_columns: np.ndarray, ent_tables: np.ndarray, ent_columns: np.ndarray,
                 k: int, kinds: EntityKinds | None = None, words: WordScores | None = None) -> DenseScores:
    """Exact similarities cut to what retrieval sees (:func:`top_k_with_floor`), as ``DenseScores``.

    The models are fitted on these, not on the exact similarities of every chunk: a chunk outside
    the top ``k`` reaches them only as the floor, and a model fitted on exact values over-trusts
    the second-best columns of a big table it will never see.
    """
    tables, columns = top_k_with_floor(seg_tables, seg_columns, k)
    entities = top_k_with_floor(ent_tables, ent_columns, k)[1] if ent_columns.shape[0] else ent_columns
    return DenseScores(tables=tables, columns=columns, entities=entities, kinds=kinds or EntityKinds.none(),
                       words=words)


def load_questions(dataset: Path, bench: str, *, blank_evidence: bool = False) -> list[Row]:
    """The benchmark's questions with ``bench``, ``wording`` and ``db`` (``bench/db_id``) set.

    BIRD rows have no ``wording``: they get ``evidence`` (or ``no_evidence`` with the evidence
    blanked, how most users ask); Spider rows keep theirs (``original`` / ``synonyms``).
    """
    out = []
    for line in (dataset / "questions.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        q = json.loads(line)
        q["bench"] = bench
        q["datasource"] = str(q["db_id"]).lower()
        q["db"] = f"{bench}/{q['datasource']}"
        if "wording" not in q:
            q["wording"] = "no_evidence" if blank_evidence or not q.get("evidence") else "evidence"
        if blank_evidence:
            q["evidence"] = ""
        out.append(q)
    return out


def every_wording(dataset: Path, bench: str) -> list[Row]:
    """The benchmark's questions as the fits use them: BIRD's also with the evidence blanked."""
    questions = load_questions(dataset, bench)
    if any(q.get("evidence") for q in questions):
        questions += load_questions(dataset, bench, blank_evidence=True)
    return questions


def _embed_all(embed, texts: Iterable[str], batch: int = 256) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    unique = list(dict.fromkeys(texts))
    out: dict[str, np.ndarray] = {}
    for start in range(0, len(unique), batch):
        part = unique[start:start + batch]
        for text, vec in zip(part, embed.embed_documents(part).vectors, strict=True):
            out[text] = vec
    return out


def load_databases(store, embed, bench: str) -> dict[str, Row]:  # type: ignore[no-untyped-def]
    """Per indexed snapshot (key ``bench/datasource``): schema index, chunk vectors, names."""
    from nl2sql_assets.indexing.chunk_builder import build_chunks

    dbs: dict[str, Row] = {}
    for ds in store.list_datasources():
        snap = store.get_snapshot(ds)
        chunks = build_chunks(snap).chunks
        ttext = {c.table: c.get_page_content() for c in chunks if c.type == "schema.table"}
        ctext = {(c.table, c.column): c.get_page_content() for c in chunks if c.type == "schema.column"}
        index = R.build_schema_index(snap)
        dbs[f"{bench}/{ds}"] = {
            "index": index,
            "wv": embed.embed_documents(list(index.words.tokens)).vectors if index.words.tokens else np.zeros((0, 1)),
            "tv": embed.embed_documents([ttext[t.name] for t in snap.tables]).vectors,
            "cv": embed.embed_documents([ctext[(t.name, c.name)] for t in snap.tables for c in t.columns]).vectors,
            "keys": [f"{t.name}.{c.name}".lower() for t in snap.tables for c in t.columns],
            "tables": [t.name.lower() for t in snap.tables],
        }
    return dbs


def build_rows(questions: list[Row], dbs: dict[str, Row], embed,  # type: ignore[no-untyped-def]
               word_meaning: bool = True) -> list[Row]:
    """One row per question: terms, dense scores as retrieved, column features, labels, baseline cosines.

    ``word_meaning`` False leaves the word-meaning features at zero (``RetrieverConfig.word_meaning``)."""
    from nl2sql_assets.retrieval.entity_kinds import EntityKindScorer
    from nl2sql_assets.retrieval.lexical import build_query_terms
    from nl2sql_assets.retrieval.models import RetrieverConfig

    kinds = EntityKindScorer(embed.embed_queries)
    k = RetrieverConfig().dense_k
    names = sorted(dbs)
    all_tables = np.vstack([dbs[n]["tv"] for n in names])  # type: ignore[misc]
    owner = np.repeat(np.arange(len(names)), [len(dbs[n]["tv"]) for n in names])  # type: ignore[arg-type]
    terms = [build_query_terms(str(q["question"]), str(q.get("evidence") or "") or None) for q in questions]
    vec = _embed_all(embed, (s for t in terms for s in (*t.segments, *t.entities, *question_words(t))))
    rows = []
    for q, t in zip(questions, terms, strict=True):
        d = dbs[str(q["db"])]
        qw = question_words(t) if word_meaning else []
        words = word_scores(d["index"].words, d["wv"], np.vstack([vec[w] for w in qw]) if qw  # type: ignore[union-attr]
                            else np.zeros((0, 1)), qw)
        seg = np.vstack([vec[s] for s in t.segments])
        ent = np.vstack([vec[e] for e in t.entities]) if t.entities else np.zeros((0, seg.shape[1]), np.float32)
        raw = (ent @ d["tv"].T, ent @ d["cv"].T, kinds.scores(ent) if len(ent) else None, words)  # type: ignore[union-attr]
        dense = as_retrieved(seg @ d["tv"].T, seg @ d["cv"].T, raw[0], raw[1], k, raw[2], raw[3])  # type: ignore[union-attr]
        gold_t = {str(g).lower() for g in q["gold_tables"]}  # type: ignore[union-attr]
        gold_c = {str(g).lower() for g in q["gold_columns"]}  # type: ignore[union-attr]
        rows.append({"db": q["db"], "bench": q["bench"], "wording": q["wording"], "d": d, "terms": t,
                     "seg": seg, "raw": raw, "dense": dense, "cx": R.column_features(d["index"], t, dense),  # type: ignore[arg-type]
                     "cy": np.array([c in gold_c for c in d["keys"]], float),  # type: ignore[union-attr]
                     "ty": np.array([n in gold_t for n in d["tables"]], float),  # type: ignore[union-attr]
                     "plain": seg[0] @ d["tv"].T,  # type: ignore[union-attr]
                     "plain_route": plain_route_rank(seg[0] @ all_tables.T, owner, names.index(str(q["db"]))),
                     "gold_tables": gold_t, "gold_columns": gold_c})
    return rows


def with_adapter(rows: list[Row], adapter: QueryAdapter | None) -> None:
    """Recompute the rows' dense scores and column features with the query texts mapped by
    ``adapter`` (None: unmapped), as the retriever would search with it."""
    k = _dense_k()
    for r in rows:
        d, seg = r["d"], r["seg"]
        seg = adapter.apply(seg) if adapter is not None else seg  # type: ignore[arg-type]
        ent_t, ent_c, kinds, words = r["raw"]  # type: ignore[misc]
        r["dense"] = as_retrieved(seg @ d["tv"].T, seg @ d["cv"].T, ent_t, ent_c, k, kinds, words)  # type: ignore[index,operator]
        r["cx"] = R.column_features(d["index"], r["terms"], r["dense"])  # type: ignore[index,arg-type]


def _dense_k() -> int:
    from nl2sql_assets.retrieval.models import RetrieverConfig

    return RetrieverConfig().dense_k


#: the query adapter's fit: softmax temperature, L2 penalty, weight of the column softmax, Adam steps
#: and rate (chosen on plain dense ranking held out by database, 2026-12-02: 100 and 300 steps gave
#: about the same, an L2 penalty of 1e-4 about a point less, a temperature of 0.03 the same)
ADAPTER_TAU, ADAPTER_L2, ADAPTER_COLUMNS, ADAPTER_STEPS, ADAPTER_LR = 0.05, 1e-3, 0.5, 150, 0.01


#: a folder where fitted adapters are kept by what they were fitted on (``heldout.py --adapter-cache``):
#: the fit depends only on its rows and settings, and it is most of a held-out run's time
ADAPTER_CACHE: Path | None = None


def fit_adapter(rows: list[Row], model: str, steps: int = ADAPTER_STEPS) -> QueryAdapter:
    """The query map (``query_adapter.QueryAdapter``) that makes each query text's softmax over its
    database's table chunks, and over its column chunks, put its mass on the question's gold ones
    (the log of the gold chunks' total probability; L2 toward no change; full-batch Adam); from
    :data:`ADAPTER_CACHE` when one fitted on the same rows with the same settings is kept there."""
    if ADAPTER_CACHE is None:
        return _fit_adapter(rows, model, steps)
    path = ADAPTER_CACHE / f"adapter-{_adapter_key(rows, model, steps)}.npy"
    if path.is_file():
        return QueryAdapter(model=model, delta=np.load(path))
    adapter = _fit_adapter(rows, model, steps)
    ADAPTER_CACHE.mkdir(parents=True, exist_ok=True)
    np.save(path, adapter.delta)
    return adapter


def _adapter_key(rows: list[Row], model: str, steps: int) -> str:
    """A digest of everything an adapter fit reads: the settings, each row's query vectors and gold
    labels, and its database's chunk vectors (a change of chunk texts is a new key)."""
    digest = hashlib.sha256(json.dumps([model, steps, ADAPTER_TAU, ADAPTER_L2, ADAPTER_COLUMNS,
                                        ADAPTER_LR]).encode())
    seen: set[str] = set()
    for r in sorted(rows, key=lambda r: (str(r["db"]), str(r["wording"]), str(r["terms"].segments))):  # type: ignore[union-attr]
        digest.update(str(r["db"]).encode())
        if r["db"] not in seen:
            seen.add(str(r["db"]))
            digest.update(np.ascontiguousarray(r["d"]["tv"]).tobytes())  # type: ignore[index]
            digest.update(np.ascontiguousarray(r["d"]["cv"]).tobytes())  # type: ignore[index]
        for key in ("seg", "ty", "cy"):
            digest.update(np.ascontiguousarray(r[key]).tobytes())  # type: ignore[call-overload]
    return digest.hexdigest()[:24]


def _fit_adapter(rows: list[Row], model: str, steps: int) -> QueryAdapter:
    by_db: dict[str, list[Row]] = {}
    for r in rows:
        by_db.setdefault(str(r["db"]), []).append(r)
    packs = []
    for part in by_db.values():
        d = part[0]["d"]
        reps = [len(r["seg"]) for r in part]  # type: ignore[arg-type]
        packs.append((np.vstack([r["seg"] for r in part]),  # type: ignore[misc]
                      ((d["tv"], np.repeat(np.vstack([r["ty"] for r in part]), reps, 0), 1.0),  # type: ignore[index,misc]
                       (d["cv"], np.repeat(np.vstack([r["cy"] for r in part]), reps, 0), ADAPTER_COLUMNS))))  # type: ignore[index,misc]
    count = sum(len(q) for q, _ in packs)
    dim = packs[0][0].shape[1]
    delta = np.zeros((dim, dim))
    first, second = np.zeros_like(delta), np.zeros_like(delta)
    for t in range(1, steps + 1):
        grad = np.zeros_like(delta)
        for q, parts in packs:
            mapped = q + q @ delta
            norm = np.linalg.norm(mapped, axis=1, keepdims=True)
            unit = mapped / norm
            g_unit = np.zeros_like(unit)
            for chunks, gold, weight in parts:
                s = unit @ chunks.T / ADAPTER_TAU
                p = np.exp(s - s.max(1, keepdims=True))
                p /= p.sum(1, keepdims=True)
                hit = (p * gold).sum(1, keepdims=True)
                ds = np.where(gold.sum(1, keepdims=True) > 0, p - p * gold / np.maximum(hit, 1e-12), 0.0)
                g_unit += weight * ds @ chunks / ADAPTER_TAU
            grad += q.T @ ((g_unit - (g_unit * unit).sum(1, keepdims=True) * unit) / norm)
        grad = grad / count + 2 * ADAPTER_L2 * delta
        first = 0.9 * first + 0.1 * grad
        second = 0.999 * second + 0.001 * grad * grad
        delta -= ADAPTER_LR * (first / (1 - 0.9 ** t)) / (np.sqrt(second / (1 - 0.999 ** t)) + 1e-8)
    return QueryAdapter(model=model, delta=delta.astype(np.float32))


def cross_fit_adapters(rows: list[Row], model: str, apply: list[Row] | None = None, folds: int = FOLDS) -> None:
    """Give every row of ``apply`` (default: ``rows``) dense scores mapped by an adapter fitted on
    ``rows`` without its database (database-grouped folds), as a database the shipped adapter never
    saw gets them: what the ranking stages are fitted on."""
    names = sorted({str(r["db"]) for r in rows})
    random.Random(1).shuffle(names)
    targets = rows if apply is None else apply
    for part in (set(names[i::folds]) for i in range(folds)):
        with_adapter([r for r in targets if r["db"] in part],
                     fit_adapter([r for r in rows if r["db"] not in part], model))


def plain_route_rank(table_sims: np.ndarray, owner: np.ndarray, own: int) -> int:
    """The plain dense routing baseline: the rank (0 = first) of the question's own database when
    every database of the benchmark is scored by its best table vector's cosine to the question."""
    best = np.full(int(owner.max()) + 1, -np.inf)
    np.maximum.at(best, owner, table_sims)
    return int((best > best[own]).sum())


def plain_routing(rows: list[Row]) -> dict[str, float]:
    """Top-1 / top-5 of :func:`plain_route_rank` over ``rows`` (nothing fitted: nothing to hold out)."""
    n = max(1, len(rows))
    return {"top1": round(sum(r["plain_route"] == 0 for r in rows) / n, 4),
            "top5": round(sum(int(r["plain_route"]) < 5 for r in rows) / n, 4)}  # type: ignore[call-overload]


#: the within-table network: hidden units, L2 penalty, full-batch Adam steps (heldout.py, 2026-12-01)
MLP_HIDDEN, MLP_L2, MLP_STEPS = 32, 1e-4, 400


def fit_mlp(names: tuple[str, ...], x: np.ndarray, y: np.ndarray, hidden: int = MLP_HIDDEN, l2: float = MLP_L2,
            steps: int = MLP_STEPS, lr: float = 0.01, seed: int = 0) -> MLPModel:
    """A one-hidden-layer ReLU network, log-loss, full-batch Adam (what ``mlp.MLPModel`` runs)."""
    rng = np.random.default_rng(seed)
    mean, scale = x.mean(0), x.std(0)
    scale[scale < 1e-9] = 1.0
    z = (x - mean) / scale
    n, d = z.shape
    rate = float(np.clip(y.mean(), 1e-6, 1 - 1e-6))
    params = [rng.normal(0, 1 / np.sqrt(d), (d, hidden)), np.zeros(hidden),
              rng.normal(0, 1 / np.sqrt(hidden), hidden), np.array([math.log(rate / (1 - rate))])]
    first = [np.zeros_like(q) for q in params]  # Adam's moment estimates
    second = [np.zeros_like(q) for q in params]
    for t in range(1, steps + 1):
        h = np.maximum(z @ params[0] + params[1], 0.0)
        p = 1.0 / (1.0 + np.exp(-np.clip(h @ params[2] + params[3][0], -30, 30)))
        g = (p - y) / n
        gh = np.outer(g, params[2]) * (h > 0)
        grads = (z.T @ gh + l2 * params[0], gh.sum(0), h.T @ g + l2 * params[2], np.array([g.sum()]))
        for i, gr in enumerate(grads):
            first[i] = 0.9 * first[i] + 0.1 * gr
            second[i] = 0.999 * second[i] + 0.001 * gr * gr
            params[i] -= lr * (first[i] / (1 - 0.9 ** t)) / (np.sqrt(second[i] / (1 - 0.999 ** t)) + 1e-8)
    return MLPModel(features=names, mean=mean, scale=scale, w1=params[0], b1=params[1], w2=params[2],
                    b2=float(params[3][0]))


def _fit(names: tuple[str, ...], xs: list[np.ndarray], ys: list[np.ndarray], iters: int) -> R.LinearModel:
    w, b = fit_logistic(np.vstack(xs), np.concatenate(ys), [n not in FREE for n in names], iters=iters)
    return R.LinearModel(tuple(float(v) for v in w), b)


def association_examples(rows: list[Row]) -> Iterator[Example]:
    """The rows as word-association examples (:func:`nl2sql_assets.retrieval.word_association.fit`)."""
    for r in rows:
        lex = r["d"]["index"].lexical  # type: ignore[index]
        yield Example(database=str(r["db"]), question_words=frozenset(r["terms"].words),  # type: ignore[attr-defined]
                      column_words=[c.name_words for c in lex.columns], needed=(r["cy"] > 0).tolist())  # type: ignore[operator]


def pipeline(train: list[Row], apply: list[Row], iters: int = 3000,
             association: WordAssociation | None = None) -> dict[str, R.LinearModel | MLPModel | MeanLogitModel]:
    """Fit the four stages on ``train`` and write their outputs (``cl``, ``tx``, ``tp``, ``wp``)
    into ``apply`` (the context stage is a logistic model and a network, their logits averaged).
    Each stage is fitted on out-of-fold outputs of the stages before it (the column model's
    logits for a training question come from a model fitted without its database, :data:`FOLDS`
    database-grouped folds): on a new database the later stages see estimates that were not
    fitted on it."""
    vh = R.COLUMN_FEATURES.index("value_hit")
    names = sorted({str(r["db"]) for r in train})
    random.Random(0).shuffle(names)
    folds = [set(names[i::FOLDS]) for i in range(FOLDS)]

    def column_logit(model: R.LinearModel, r: Row) -> np.ndarray:
        return model.logit(r["cx"]) + R.VALUE_HIT_WEIGHT * r["cx"][:, vh]  # type: ignore[index,call-overload,arg-type]

    def stage(feats: tuple[str, ...], x: str, y: str, out: str, predict: Callable[[Any, Row], np.ndarray],
              blend: bool = False) -> R.LinearModel | MeanLogitModel:
        def fit(rows: list[Row]) -> R.LinearModel | MeanLogitModel:
            linear = _fit(feats, [r[x] for r in rows], [r[y] for r in rows], iters)  # type: ignore[misc]
            if not blend:
                return linear
            net = fit_mlp(feats, np.vstack([r[x] for r in rows]), np.concatenate([r[y] for r in rows]))  # type: ignore[misc]
            return MeanLogitModel((linear, net))

        model = fit(train)
        for r in apply:
            r[out] = predict(model, r)
        for fold in folds:
            inner = [r for r in train if r["db"] not in fold]
            held = fit(inner)
            for r in train:
                if r["db"] in fold:
                    r[out] = predict(held, r)
        return model

    seen = {id(r) for r in train}
    both = train + [r for r in apply if id(r) not in seen]
    models = {"column": stage(R.COLUMN_FEATURES, "cx", "cy", "cl", column_logit)}
    for r in both:
        r["tx"] = R.table_features(r["d"]["index"], r["terms"], r["dense"], r["cx"], r["cl"])  # type: ignore[index,arg-type]
    models["table"] = stage(R.TABLE_FEATURES, "tx", "ty", "first", lambda m, r: m.prob(r["tx"]))  # type: ignore[arg-type]
    for r in both:
        r["xx"] = R.context_features(r["d"]["index"], r["first"], r["tx"], r["terms"],  # type: ignore[index,arg-type]
                                     r["dense"].words)  # type: ignore[union-attr]
    models["context"] = stage(R.CONTEXT_FEATURES + R.TABLE_FEATURES, "xx", "ty", "tp",
                              lambda m, r: m.prob(r["xx"]), blend=True)  # type: ignore[arg-type]
    for r in both:
        r["wx"] = R.within_features(r["d"]["index"], r["cx"], r["cl"], r["tp"], r["terms"])  # type: ignore[index,arg-type]
    in_gold = [np.isin(r["d"]["index"].lexical.column_table_arr, np.flatnonzero(r["ty"])) for r in train]  # type: ignore[index,arg-type]
    models["within"] = fit_mlp(R.WITHIN_FEATURES, np.vstack([r["wx"][m] for r, m in zip(train, in_gold)]),  # type: ignore[index]
                               np.concatenate([r["cy"][m] for r, m in zip(train, in_gold)]))  # type: ignore[index]
    for r in apply:
        r["wp"] = R.within_prob(models["within"], r["wx"], r["d"]["index"], r["terms"], association)  # type: ignore[arg-type,index]
    return models


def selection_sets(r: Row, **cut: object) -> tuple[set[str], set[str]]:
    """The tables and ``table.column`` keys ``ranking.select`` sends for a row with fitted outputs.

    ``cut`` holds ``recall_target`` / ``column_recall_target`` (the budget) or ``table_threshold``
    / ``column_cost`` (fixed cut-offs); missing ones come from ``RetrieverConfig()``.
    """
    from nl2sql_assets.retrieval.models import RetrieverConfig

    cfg = RetrieverConfig().model_copy(update=cut)
    d = r["d"]
    n = len(d["keys"])  # type: ignore[index]
    scores = R.SchemaScores(table_prob=r["tp"], column_logit=r["cl"], column_prob=r["cl"],  # type: ignore[arg-type]
                            within_prob=r["wp"], column_features=r["cx"], table_features=r["tx"])  # type: ignore[arg-type]
    sel = R.select(d["index"], scores, table_threshold=cfg.table_threshold, max_tables=cfg.max_tables,  # type: ignore[index]
                   column_threshold=1 - math.exp(-cfg.column_cost / n), min_columns=cfg.min_columns_per_table,
                   primary_keys=True, recall_target=cfg.recall_target, column_recall_target=cfg.column_recall_target,
                   column_share_cost=cfg.column_share_cost,
                   min_columns_sent=cfg.min_columns_sent, budget_sharpness=cfg.budget_sharpness,
                   sharpen_max_tables=cfg.sharpen_max_tables,
                   whole_rows=cfg.whole_rows and r["terms"].whole_rows)  # type: ignore[attr-defined]
    tables = {d["tables"][t] for t in sel.tables}  # type: ignore[index]
    columns = {d["keys"][c] for cs in sel.columns.values() for c in cs}  # type: ignore[index]
    return tables, columns


def measure(rows: list[Row], **cut: object) -> dict[str, float]:
    """Every gold table / column found, tables sent and the share of columns sent, averaged."""
    ok_t = ok_c = sent = share = 0.0
    for r in rows:
        tables, columns = selection_sets(r, **cut)
        ok_t += r["gold_tables"] <= tables  # type: ignore[operator]
        ok_c += r["gold_columns"] <= columns  # type: ignore[operator]
        sent += len(tables)
        share += len(columns) / len(r["d"]["keys"])  # type: ignore[index]
    k = max(1, len(rows))
    return {"every_gold_table": round(ok_t / k, 4), "avg_tables_sent": round(sent / k, 3),
            "every_gold_column": round(ok_c / k, 4), "avg_column_share_sent": round(share / k, 4)}


def plain_dense(rows: list[Row], k: int) -> dict[str, float]:
    """The baseline: the ``k`` tables whose one vector is most like the question's, all their columns."""
    ok_t = ok_c = sent = share = 0.0
    for r in rows:
        d = r["d"]
        top = np.argsort(-r["plain"], kind="stable")[:k]  # type: ignore[call-overload]
        tables = {d["tables"][t] for t in top}  # type: ignore[index]
        columns = {key for key in d["keys"] if key.split(".", 1)[0] in tables}  # type: ignore[union-attr,attr-defined]
        ok_t += r["gold_tables"] <= tables  # type: ignore[operator]
        ok_c += r["gold_columns"] <= columns  # type: ignore[operator]
        sent += len(tables)
        share += len(columns) / len(d["keys"])  # type: ignore[index]
    n = max(1, len(rows))
    return {"every_gold_table": round(ok_t / n, 4), "avg_tables_sent": round(sent / n, 3),
            "every_gold_column": round(ok_c / n, 4), "avg_column_share_sent": round(share / n, 4)}
