"""Executing a :class:`~nl2sql_assets.indexing.refresh_plan.RefreshPlan` against Chroma.

The plan says what to do; this module does it in the order that keeps readers safe: remove
leftovers, write, retire, flip the manifest, then delete the records no retained version uses.
Anything failing before the flip is rolled back (best effort) and re-raised, so the previous set
keeps serving. Vectors of texts already stored are copied from their records instead of being
embedded again. :func:`planning_records` reads what the planner needs, by id where it can;
:func:`drop_versions` is retention's delete, in the same safe order.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import numpy as np

from nl2sql_assets.errors import EmbeddingDimensionMismatchError, VectorStoreError
from nl2sql_assets.indexing.chroma_connection import ChromaConnection
from nl2sql_assets.indexing.chroma_queries import all_of, visible_at
from nl2sql_assets.indexing.embeddings import Embeddings
from nl2sql_assets.indexing.manifest import GenerationManifest
from nl2sql_assets.indexing.refresh_plan import (
    OPEN_GENERATION,
    ManifestState,
    RefreshPlan,
    StoredRecord,
    record_metadata,
    template_of_record,
    unused_records,
)

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

log = logging.getLogger(__name__)


def planning_records(conn: ChromaConnection, coll: Collection, datasource_id: str,
                     state: ManifestState | None) -> list[StoredRecord]:
    """What planning needs to know about the datasource's records.

    A shared-layout datasource is read as ids only (a record's id holds its template and content
    address; a few id-only queries tell its generations), which skips reading every record's
    metadata back (~0.5 ms a record: most of a small re-index). Each record gets the range that
    reproduces what matters: whether it is a leftover, whether the head and each retained
    generation see it, and whether an interrupted refresh retired it. A migration, or records
    without a manifest, are read in full (with texts, whose vectors a migration copies).
    """
    ds = {"datasource_id": datasource_id}
    if state is None or state.legacy:
        ids, metas, docs, _ = conn.records(coll, ds, documents=state is not None)
        docs = docs or [None] * len(ids)  # type: ignore[list-item]
        return [StoredRecord.from_record(sid, meta, doc) for sid, meta, doc in zip(ids, metas, docs, strict=False)]
    head = state.generation

    def ids_where(*clauses: dict[str, object]) -> set[str]:
        where = all_of([ds, *clauses])
        return set(conn.record_ids(coll, where))

    everything = ids_where()
    leftovers = ids_where({"valid_from": {"$gt": head}})
    seen_at = {g: ids_where(*visible_at(g)) for g in sorted({*state.versions.values(), head})}
    reopen = ids_where(*visible_at(head), {"valid_to": {"$lt": OPEN_GENERATION}})
    records = []
    for sid in sorted(everything):
        gens = [g for g, seen in seen_at.items() if sid in seen]
        if sid in leftovers:
            valid_from, valid_to = head + 1, OPEN_GENERATION
        elif not gens:
            valid_from, valid_to = 0, 0  # no generation sees it: an orphan
        elif sid in seen_at[head]:
            valid_from, valid_to = gens[0], head + 1 if sid in reopen else OPEN_GENERATION
        else:
            valid_from, valid_to = gens[0], gens[-1] + 1
        records.append(StoredRecord(storage_id=sid, chunk_id=sid, schema_version="", template=template_of_record(sid),
                                    valid_from=valid_from, valid_to=valid_to))
    return records


class PlanExecutor:
    """Carries out one refresh plan; made per refresh (it holds no state between refreshes).

    Args:
        connection: the client, collections and breaker.
        manifest: where the flip is written.
        embeddings: embeds the texts no stored record holds.
        write_batch_size: chunks embedded and upserted per batch.
    """

    def __init__(self, connection: ChromaConnection, manifest: GenerationManifest, embeddings: Embeddings, *,
                 write_batch_size: int) -> None:
        self.conn = connection
        self.manifest = manifest
        self.embeddings = embeddings
        self.write_batch_size = write_batch_size

    def run(self, coll: Collection, plan: RefreshPlan) -> tuple[int, int, int]:
        """Execute ``plan`` on the chunk collection ``coll``.

        Returns:
            (embedded, from_cache, reused) text counts for the report.

        Raises:
            EmbeddingError, VectorStoreError: before the flip (rolled back: the old set serves), or
                a VectorStoreError saying the new version is live and only the clean-up failed.
        """
        self._discard_leftovers(coll, plan)
        counts = self._write_and_flip(coll, plan)
        try:
            self.conn.delete_ids(coll, plan.cleanup, "delete old chunks")
        except VectorStoreError as exc:
            raise VectorStoreError(
                f"datasource '{plan.datasource_id}': version {plan.schema_version} is live, but deleting old "
                f"chunks failed ({exc}); the next refresh deletes them") from exc
        return counts

    def _discard_leftovers(self, coll: Collection, plan: RefreshPlan) -> None:
        """Remove what an interrupted refresh left: records readers cannot see, and reopen its retirements."""
        if plan.discard:
            log.info("datasource %s: removing %d chunks left by an interrupted refresh", plan.datasource_id,
                     len(plan.discard))
            self.conn.delete_ids(coll, plan.discard, "remove leftovers")
        if plan.reopen:
            self.conn.call("reopen retired chunks", lambda: coll.update(
                ids=plan.reopen, metadatas=[{"valid_to": OPEN_GENERATION} for _ in plan.reopen]))

    def _write_and_flip(self, coll: Collection, plan: RefreshPlan) -> tuple[int, int, int]:
        """Write, retire and flip the manifest; on failure roll back what was written, then re-raise."""
        gen = plan.new_generation
        embedded = from_cache = reused = 0
        wrote_any = False
        try:
            for start in range(0, len(plan.writes), self.write_batch_size):
                batch = plan.writes[start:start + self.write_batch_size]
                texts = [w.chunk.get_page_content() for w in batch]
                vectors, counts = self._vectors_for(coll, texts, plan.reuse)
                embedded, from_cache, reused = embedded + counts[0], from_cache + counts[1], reused + counts[2]
                ids = [w.storage_id for w in batch]
                metas = [record_metadata(w.chunk, gen, w.template) for w in batch]
                wrote_any = True
                self.conn.call("write chunks", lambda i=ids, v=vectors, m=metas, t=texts: coll.upsert(  # type: ignore[misc]
                    ids=i, embeddings=v, metadatas=m, documents=t))
            step = max(1, self.conn.max_batch())
            for start in range(0, len(plan.retire), step):
                part = plan.retire[start:start + step]
                wrote_any = True
                self.conn.call("retire replaced chunks", lambda p=part: coll.update(  # type: ignore[misc]
                    ids=p, metadatas=[{"valid_to": gen} for _ in p]))
            if plan.flips:
                self.manifest.write(plan.state)
        except BaseException:
            if wrote_any:
                self._roll_back(coll, plan.datasource_id, gen, plan.retire)
            raise
        return embedded, from_cache, reused

    def _vectors_for(self, coll: Collection, texts: list[str],
                     reuse: dict[str, str]) -> tuple[np.ndarray, tuple[int, int, int]]:
        """Vectors for ``texts``: reused from stored records with the same text, else embedded."""
        identity = self.embeddings.identity
        dim = identity.dimension
        out = np.zeros((len(texts), dim), dtype=np.float32)
        reuse_ids = sorted({reuse[t] for t in texts if t in reuse})
        stored: dict[str, np.ndarray] = {}
        if reuse_ids:
            res = self.conn.call("read stored vectors",
                                 lambda: coll.get(ids=reuse_ids, include=["embeddings", "documents"]))
            for doc, vec in zip(res["documents"] or [], res["embeddings"] if res["embeddings"] is not None else [],
                                strict=False):
                if doc is not None and len(vec) == dim:
                    stored[doc] = np.asarray(vec, dtype=np.float32)
        missing = sorted({t for t in texts if t not in stored})
        embedded = from_cache = 0
        if missing:
            result = self.embeddings.embed_documents(missing)
            vecs = np.asarray(result.vectors, dtype=np.float32)
            if vecs.shape != (len(missing), dim):
                raise EmbeddingDimensionMismatchError(self.conn.collection_name, identity.key,
                                                      f"vectors of shape {vecs.shape}")
            stored.update(zip(missing, vecs, strict=True))
            embedded, from_cache = result.embedded, result.from_cache
        for i, text in enumerate(texts):
            out[i] = stored[text]
        missing_set = set(missing)
        reused = sum(1 for t in texts if t not in missing_set)
        return out, (embedded, from_cache, reused)

    def _roll_back(self, coll: Collection, datasource_id: str, new_gen: int, retired: list[str]) -> None:
        """Best effort: drop the partial generation and reopen what it retired."""
        try:
            partial = self.conn.record_ids(coll, all_of([{"datasource_id": datasource_id}, {"valid_from": new_gen}]))
            self.conn.delete_ids(coll, partial, "remove partial chunks")
            if retired:
                self.conn.call("reopen retired chunks", lambda: coll.update(
                    ids=retired, metadatas=[{"valid_to": OPEN_GENERATION} for _ in retired]))
            log.warning("datasource %s: refresh failed; removed %d partial chunks, the previous set keeps serving",
                        datasource_id, len(partial))
        except Exception as exc:  # noqa: BLE001 - the original error is what the caller must see
            log.warning("datasource %s: refresh failed and its partial chunks could not be removed now (%s); "
                        "readers do not see them and the next refresh removes them", datasource_id, exc)


def drop_versions(conn: ChromaConnection, manifest: GenerationManifest, coll: Collection, datasource_id: str,
                  versions: list[str]) -> int:
    """Drop ``versions`` of the datasource; returns how many records went. Dropping the live version unsets it.

    Shared layout: the versions leave the manifest first (one upsert, so readers never see half a
    version), then the records no remaining version uses are deleted; records shared with a
    remaining version stay. The previous layout deletes the versions' records, then the pointer.
    """
    state = manifest.get(datasource_id)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    if state is None or state.legacy:
        ids = conn.record_ids(coll, all_of([{"datasource_id": datasource_id}, {"schema_version": {"$in": versions}}]))
        conn.delete_ids(coll, ids, "delete versions")
        if state is not None and state.live_version in versions:
            manifest.write(state.model_copy(update={"live_version": None, "chunk_count": 0, "content_digest": "",
                                                    "updated_at": now}))
        if ids:
            log.info("datasource %s: deleted %d chunks of versions %s", datasource_id, len(ids), ", ".join(versions))
        return len(ids)
    records = planning_records(conn, coll, datasource_id, state)  # ids only, before the manifest moves
    remaining = {v: g for v, g in state.versions.items() if v not in versions}
    update: dict[str, object] = {"versions": remaining}
    if state.live_version in versions:
        update.update({"live_version": None, "chunk_count": 0, "content_digest": ""})
    if remaining != state.versions or "live_version" in update:
        manifest.write(state.model_copy(update={**update, "updated_at": now}))
    unused = unused_records(records, remaining.values(), head=state.generation)
    conn.delete_ids(coll, unused, "delete versions")
    if unused:
        log.info("datasource %s: dropped versions %s, deleted %d records no retained version uses",
                 datasource_id, ", ".join(versions), len(unused))
    return len(unused)
