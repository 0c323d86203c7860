"""Planning a refresh: what to write, retire and delete so readers never see half a set.

Pure: given the records the store holds for one datasource and the new chunk set, decide
everything; ``chroma_store`` only executes the plan. No Chroma import, so the decisions are
unit-tested without a database.

Atomic refresh (multi-version concurrency control)
--------------------------------------------------
Every record carries ``valid_from``/``valid_to`` generations. Readers take the datasource's
current generation ``G`` from the manifest and only see records with
``valid_from <= G < valid_to``. A refresh to generation ``G+1``:

1. writes new and changed chunks with ``valid_from = G+1`` (invisible to readers at ``G``);
   a changed chunk whose id is taken gets the storage id ``<chunk id>#g<G+1>``;
2. retires the records they replace, and same-version chunks that disappeared, by setting
   ``valid_to = G+1`` (still visible at ``G``, invisible at ``G+1``);
3. flips the manifest record (live version, generation ``G+1``): one single-record upsert;
4. deletes retired records and the versions that are no longer kept.

Unchanged chunks (same id, same ``content_hash``) are not touched, so a same-version metadata
refresh (same ids, changed text) stays atomic too and only its changed chunks are written.
A refresh that changes nothing for readers keeps generation ``G`` (only retention runs).
Records generation ``G`` cannot see are leftovers of an interrupted refresh: the next plan
deletes them first, and reopens records such a refresh retired but never flipped past.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from nl2sql_assets.indexing.models import IndexState, MetadataValue, SchemaChunk, chunks_digest, record_id

#: ``valid_to`` of a record no refresh has retired.
OPEN_GENERATION = 2**62
#: Metadata keys the store adds to a chunk's own metadata (stripped again when reading).
INTERNAL_KEYS = ("chunk_id", "valid_from", "valid_to")


class StoredRecord(BaseModel):
    """One stored record of the datasource: what planning needs to know about it."""

    model_config = ConfigDict(frozen=True)

    storage_id: str
    chunk_id: str
    schema_version: str
    content_hash: str | None = None
    valid_from: int = 0
    valid_to: int = OPEN_GENERATION
    document: str | None = None

    @classmethod
    def from_record(cls, storage_id: str, metadata: Mapping[str, MetadataValue],
                    document: str | None = None) -> StoredRecord:
        """The record as the store returns it (id, metadata, text)."""
        content_hash = metadata.get("content_hash")
        return cls(storage_id=storage_id, chunk_id=str(metadata.get("chunk_id", storage_id)),
                   schema_version=str(metadata.get("schema_version", "")),
                   content_hash=None if content_hash is None else str(content_hash),
                   valid_from=int(metadata.get("valid_from", 0)),
                   valid_to=int(metadata.get("valid_to", OPEN_GENERATION)), document=document)

    def visible_at(self, generation: int) -> bool:
        """Whether readers at ``generation`` see this record."""
        return self.valid_from <= generation < self.valid_to


class PlannedWrite(BaseModel):
    """A chunk to write, and the storage id it goes under."""

    model_config = ConfigDict(frozen=True)

    storage_id: str
    chunk: SchemaChunk


class RefreshPlan(BaseModel):
    """Everything one refresh does, in execution order: discard/reopen leftovers, write,
    retire, flip the manifest to ``state`` (when ``flips``), then delete ``cleanup``."""

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    schema_version: str
    generation: int
    """The generation readers see before the refresh (``G``)."""
    new_generation: int
    """``G+1``, or ``G`` when nothing changes for readers."""
    keep_versions: list[str]
    """Versions whose records survive the refresh (sorted)."""
    discard: list[str]
    """Storage ids of leftovers generation ``G`` cannot see: deleted before anything else."""
    reopen: list[str]
    """Storage ids retired by an interrupted refresh: made open-ended again."""
    writes: list[PlannedWrite]
    retire: list[str]
    """Storage ids whose ``valid_to`` becomes ``new_generation``."""
    replaced: int
    """How many of ``retire`` are replaced by a write (the rest disappeared)."""
    unchanged: int
    cleanup: list[str]
    """Storage ids deleted once the manifest flipped: retired records and versions not kept."""
    deleted: int
    """Chunks the refresh removes for readers (retired without replacement, versions dropped)."""
    reuse: dict[str, str]
    """Text -> storage id of a visible record holding that text (its vector can be reused)."""
    state: IndexState
    """The manifest record after the refresh."""

    @property
    def flips(self) -> bool:
        """Whether the manifest record moves to a new generation."""
        return self.new_generation != self.generation


def check_chunks(datasource_id: str, schema_version: str, tenant_id: str, chunks: Sequence[SchemaChunk]) -> None:
    """Refuse a chunk set that is not one datasource's, version's and tenant's, or repeats ids.

    Raises:
        ValueError: naming the first offending chunk.
    """
    seen: set[str] = set()
    for chunk in chunks:
        if chunk.datasource_id != datasource_id or chunk.schema_version != schema_version:
            raise ValueError(f"chunk {chunk.id!r} belongs to {chunk.datasource_id}@{chunk.schema_version}, "
                             f"not {datasource_id}@{schema_version}")
        if chunk.tenant_id != tenant_id:
            raise ValueError(f"chunk {chunk.id!r} has tenant {chunk.tenant_id!r}, expected {tenant_id!r}")
        if chunk.id in seen:
            raise ValueError(f"datasource '{datasource_id}': duplicate chunk id {chunk.id!r}")
        seen.add(chunk.id)


def record_metadata(chunk: SchemaChunk, generation: int) -> dict[str, MetadataValue]:
    """The stored metadata of a chunk written at ``generation``: its own plus the internal keys."""
    meta = chunk.get_metadata()
    meta.update({"chunk_id": chunk.id, "valid_from": generation, "valid_to": OPEN_GENERATION})
    return meta


def plan_refresh(records: Sequence[StoredRecord], chunks: Sequence[SchemaChunk], *, datasource_id: str,
                 schema_version: str, tenant_id: str, state: IndexState | None,
                 keep_versions: Sequence[str] | None, make_live: bool, model_key: str,
                 updated_at: str) -> RefreshPlan:
    """Decide a refresh of ``datasource_id`` to ``chunks`` (the complete set of ``schema_version``).

    Args:
        records: every record stored for the datasource, in store order.
        chunks: the new chunk set.
        state: the datasource's manifest record; None when it was never indexed.
        keep_versions: other versions whose records stay; every other version is deleted.
        make_live: flip the live version to ``schema_version``; False keeps the current live
            version and its records (ignored when there is none, or it is ``schema_version``).
        model_key: the embedding model key recorded in the manifest.
        updated_at: the timestamp recorded in the manifest.

    Raises:
        ValueError: see :func:`check_chunks`.
    """
    check_chunks(datasource_id, schema_version, tenant_id, chunks)
    gen = state.generation if state else 0
    new_gen = gen + 1
    live_before = state.live_version if state else None
    if not make_live and live_before in (None, schema_version):
        make_live = True
    keep = set(keep_versions or []) | {schema_version}
    if not make_live and live_before:
        keep.add(live_before)

    discard = [r.storage_id for r in records if not r.visible_at(gen)]
    visible = [r for r in records if r.visible_at(gen)]
    reopen = [r.storage_id for r in visible if r.valid_to < OPEN_GENERATION]
    current: dict[str, StoredRecord] = {}
    reuse: dict[str, str] = {}
    for rec in visible:
        current[rec.chunk_id] = rec
        if rec.document is not None:
            reuse.setdefault(rec.document, rec.storage_id)

    new_ids = {c.id for c in chunks}
    to_write: list[SchemaChunk] = []
    retire: list[str] = []
    replaced = 0
    for chunk in chunks:
        prev = current.get(chunk.id)
        if prev is not None and prev.content_hash == chunk.content_hash:
            continue
        to_write.append(chunk)
        if prev is not None:
            retire.append(prev.storage_id)
            replaced += 1
    for cid, rec in current.items():
        if rec.schema_version == schema_version and cid not in new_ids:
            retire.append(rec.storage_id)
    target_live = schema_version if make_live else live_before
    if (state is not None and not to_write and not retire and state.live_version == target_live
            and state.tenant_id == tenant_id and state.model_key == model_key):
        new_gen = gen  # nothing changes for readers: no new generation, only retention

    occupied = {r.storage_id for r in visible}
    writes = [PlannedWrite(storage_id=record_id(c.id, new_gen) if c.id in occupied else c.id, chunk=c)
              for c in to_write]
    retired = set(retire)
    stale = [r.storage_id for r in visible if r.schema_version not in keep]
    new_state = IndexState(
        datasource_id=datasource_id, tenant_id=tenant_id, live_version=target_live, generation=new_gen,
        model_key=model_key,
        chunk_count=len(chunks) if make_live else (state.chunk_count if state else 0),
        content_digest=chunks_digest(chunks) if make_live else (state.content_digest if state else ""),
        updated_at=updated_at)
    return RefreshPlan(
        datasource_id=datasource_id, schema_version=schema_version, generation=gen, new_generation=new_gen,
        keep_versions=sorted(keep), discard=sorted(set(discard)), reopen=reopen, writes=writes, retire=retire,
        replaced=replaced, unchanged=len(chunks) - len(to_write), cleanup=sorted(retired | set(stale)),
        deleted=len(retire) - replaced + sum(1 for sid in stale if sid not in retired), reuse=reuse,
        state=new_state)
