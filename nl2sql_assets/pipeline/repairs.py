"""Work the vector store did not finish: found by ``nl2sql-assets index`` and by every sensor tick.

Drift detection compares the database with the schema store, and a run registers the new
snapshot before it writes Chroma. So when the Chroma step fails (killed, server down), the
schema store is ahead and the next drift check says ``unchanged``: without this module the
vector store would keep serving the old version, or the old texts of a documentation
change, forever. Here every unchanged datasource is checked against the vector store: the
latest version must be live and its live texts must be the ones the stored snapshot implies
(``content_digest``); otherwise a repair run of the current partition is requested.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from nl2sql_assets.errors import Nl2SqlError
from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.vector_store import VectorStore
from nl2sql_assets.pipeline.keys import partition_key
from nl2sql_assets.pipeline.planning import IndexRequest, Outcome
from nl2sql_assets.pipeline.verify import chunk_set_hash
from nl2sql_assets.schema.models import SchemaSnapshot
from nl2sql_assets.schema.protocol import SchemaStore

RepairKind = Literal["repair", "pending_refresh"]


def repair_kind(vectors: VectorStore, snapshot: SchemaSnapshot) -> tuple[RepairKind | None, str]:
    """Whether the vector store serves the registered ``snapshot`` as the schema store holds it.

    Returns ``(None, digest)`` when it does, ``("repair", digest)`` when the version is not
    live, ``("pending_refresh", digest)`` when it is live with other texts; ``digest`` is the
    expected chunk-set hash.

    Raises:
        VectorStoreError: the vector store cannot be read (never taken for "unchanged").
    """
    state = vectors.index_state(snapshot.datasource_id)
    expected = chunk_set_hash(build_chunks(snapshot))
    if state is None or state.live_version != snapshot.schema_version:
        return "repair", expected
    if state.content_digest != expected:
        return "pending_refresh", expected
    return None, expected


def find_repairs(unchanged: Sequence[Outcome], store: SchemaStore, vectors: VectorStore, *,
                 attempt: str | None = None) -> tuple[list[IndexRequest], list[Outcome]]:
    """Repair runs for unchanged datasources the vector store does not serve as registered.

    Args:
        unchanged: the plan's ``unchanged`` outcomes.
        attempt: the run-key suffix; None uses the expected digest, so a sensor asks once per
            state (the CLI passes a timestamp to retry a repair that failed before).

    Returns:
        The requests, and a ``failed`` outcome for each datasource whose stores cannot be read.
    """
    requests: list[IndexRequest] = []
    failed: list[Outcome] = []
    for outcome in unchanged:
        ds, version = outcome.datasource_id, outcome.schema_version
        if outcome.status != "unchanged" or not version:
            continue
        try:
            snapshot = store.get_snapshot(ds, version)
            kind, expected = repair_kind(vectors, snapshot)
            if kind is None:
                continue
        except Nl2SqlError as exc:
            failed.append(Outcome(datasource_id=ds, status="failed", schema_version=version, error=str(exc)))
            continue
        key = partition_key(ds, version)
        requests.append(IndexRequest(datasource_id=ds, schema_version=version, partition_key=key,
                                     run_key=f"{key}:repair:{attempt or expected[:8]}", kind=kind,
                                     fingerprint=snapshot.fingerprint, metadata_hash=snapshot.metadata_hash))
    return requests, failed
