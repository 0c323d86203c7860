"""Executing a :class:`~nl2sql_assets.indexing.refresh_plan.RefreshPlan` against Chroma.

The plan says what to do; this module does it in the order that keeps readers safe: remove
leftovers, write, retire, flip the manifest, then delete. Anything failing before the flip is
rolled back (best effort) and re-raised, so the previous set keeps serving. Vectors of texts
already stored are copied from their records instead of being embedded again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from nl2sql_assets.errors import EmbeddingDimensionMismatchError, VectorStoreError
from nl2sql_assets.indexing.chroma_connection import ChromaConnection
from nl2sql_assets.indexing.chroma_queries import all_of
from nl2sql_assets.indexing.embeddings import Embeddings
from nl2sql_assets.indexing.manifest import GenerationManifest
from nl2sql_assets.indexing.refresh_plan import OPEN_GENERATION, RefreshPlan, record_metadata

if TYPE_CHECKING:
    from chromadb.api.models.Collection import Collection

log = logging.getLogger(__name__)


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
                metas = [record_metadata(w.chunk, gen) for w in batch]
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
            partial = self.conn.records(coll, all_of([{"datasource_id": datasource_id}, {"valid_from": new_gen}]))[0]
            self.conn.delete_ids(coll, partial, "remove partial chunks")
            if retired:
                self.conn.call("reopen retired chunks", lambda: coll.update(
                    ids=retired, metadatas=[{"valid_to": OPEN_GENERATION} for _ in retired]))
            log.warning("datasource %s: refresh failed; removed %d partial chunks, the previous set keeps serving",
                        datasource_id, len(partial))
        except Exception as exc:  # noqa: BLE001 - the original error is what the caller must see
            log.warning("datasource %s: refresh failed and its partial chunks could not be removed now (%s); "
                        "readers do not see them and the next refresh removes them", datasource_id, exc)
