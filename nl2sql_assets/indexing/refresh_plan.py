"""Planning a refresh: what to write, retire and delete so readers never see half a set.

Pure: given the records the store holds for one datasource and the new chunk set, decide
everything; ``chroma_store`` only executes the plan. No Chroma import, so the decisions are
unit-tested without a database.

Shared records (store layout 2)
-------------------------------
A record's Chroma id is content-addressed: ``<template>@<hash>``, where the template is the
chunk id with its version replaced by ``*`` (``shop:*:column:main.orders.total``) and the hash
covers datasource, tenant, template, content hash and embedding model. A chunk whose content
did not change between versions is therefore one record, shared by every version holding it;
the chunk id of a version is derived on reading (``ds:<version>:...`` from the template).

Generations (multi-version concurrency control)
-----------------------------------------------
Every refresh of a datasource that changes anything gets the next generation ``G+1`` (``G`` is
the manifest's ``generation``, the newest one written: the *head*). Every record carries the
range ``[valid_from, valid_to)`` of generations containing it, and the manifest maps each
retained version to the generation that wrote it (``versions``). Readers of version ``v`` see
exactly the records with ``valid_from <= versions[v] < valid_to``. A refresh to ``G+1``:

1. writes the chunks the head set lacks (new or changed content) with ``valid_from = G+1``;
   a content address already taken (content that left and came back while the older record is
   kept for an older version) gets ``<address>#g<G+1>``: a record is only ever one contiguous
   range, so content present in v1 and v3 but not v2 is two records;
2. retires the head records the new set lacks by setting ``valid_to = G+1`` (older versions
   still see them);
3. flips the manifest record (head, version map, live version): one single-record upsert;
4. deletes the records no retained version's generation falls into.

A chunk set equal to the head set gets no new generation: the version maps to ``G``. Records
with ``valid_from > G`` are leftovers of an interrupted refresh (deleted first); head records
retired past ``G`` were retired by one (reopened).

A manifest record without ``layout`` was written by the previous layout (one record per chunk
and version, versions told apart by ``schema_version``). Its refresh migrates: every chunk is
written as a shared record at ``G+1`` (vectors copied from the old records, nothing
re-embedded), the old records are retired at ``G+1`` (so the old live version keeps serving
until the flip) and deleted after it. The old layout's other retained versions are not carried
over.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.indexing.models import IndexState, MetadataValue, SchemaChunk
from nl2sql_assets.schema.fingerprint import canonical_json, sha256_hex

#: ``valid_to`` of a record no refresh has retired.
OPEN_GENERATION = 2**62
#: The store layout this code writes (shared, content-addressed records); absent means 1.
LAYOUT = 2
#: Metadata keys the store adds to a chunk's own metadata (stripped again when reading).
INTERNAL_KEYS = ("chunk_id", "chunk_key", "valid_from", "valid_to")
_ADDRESS_MARK = "@"
_GENERATION_MARK = "#g"
_VERSION_WILDCARD = "*"


class ManifestState(IndexState):
    """A manifest record: :class:`IndexState` plus the generation of every retained version.

    ``generation`` is the head (the newest generation written); ``layout`` 1 is the previous
    layout, whose readers filter on ``schema_version`` at ``generation``.
    """

    versions: dict[str, int] = Field(default_factory=dict)
    layout: int = 1

    @property
    def legacy(self) -> bool:
        """Written by the previous layout (one record per chunk and version)."""
        return self.layout < LAYOUT

    def generation_of(self, version: str) -> int | None:
        """The generation readers of ``version`` filter on; None when it is not retained."""
        return self.versions.get(version)

    def versions_json(self) -> str:
        return json.dumps(self.versions, sort_keys=True)


def as_manifest_state(state: IndexState | None) -> ManifestState | None:
    """``state`` as a :class:`ManifestState` (a plain :class:`IndexState` is the previous layout)."""
    if state is None or isinstance(state, ManifestState):
        return state
    return ManifestState(**state.model_dump())


def chunk_template(chunk: SchemaChunk) -> str:
    """The chunk id with its version replaced by ``*``; the id itself when it does not start with
    ``<datasource>:<version>:`` (then the record is not shared across versions)."""
    prefix = f"{chunk.datasource_id}:{chunk.schema_version}:"
    if chunk.id.startswith(prefix):
        return f"{chunk.datasource_id}:{_VERSION_WILDCARD}:{chunk.id[len(prefix):]}"
    return chunk.id


def chunk_id_for(template: str, datasource_id: str, schema_version: str) -> str:
    """The chunk id of ``template`` in ``schema_version``: derivable from (datasource, version, identity).

    >>> chunk_id_for("shop:*:column:main.orders.total", "shop", "v7")
    'shop:v7:column:main.orders.total'
    >>> chunk_id_for("custom-id", "shop", "v7")
    'custom-id'
    """
    prefix = f"{datasource_id}:{_VERSION_WILDCARD}:"
    return f"{datasource_id}:{schema_version}:{template[len(prefix):]}" if template.startswith(prefix) else template


def content_address(chunk: SchemaChunk, template: str, model_key: str, content_hash: str | None = None) -> str:
    """The shared record id of a chunk's content: equal for every version holding the same chunk."""
    digest = sha256_hex(canonical_json([chunk.datasource_id, chunk.tenant_id, template,
                                        content_hash or chunk.content_hash, model_key]))[:24]
    return f"{template}{_ADDRESS_MARK}{digest}"


def template_of_record(storage_id: str) -> str | None:
    """The template in a shared record id; None for an id of the previous layout.

    >>> template_of_record("shop:*:table:orders@0123456789abcdef01234567#g4")
    'shop:*:table:orders'
    >>> template_of_record("shop:v1:table:orders") is None
    True
    """
    head, sep, tail = storage_id.rpartition(_GENERATION_MARK)
    base = head if sep and tail.isdigit() else storage_id
    template, sep, digest = base.rpartition(_ADDRESS_MARK)
    return template if sep and len(digest) == 24 else None


class StoredRecord(BaseModel):
    """One stored record of the datasource: what planning needs to know about it."""

    model_config = ConfigDict(frozen=True)

    storage_id: str
    chunk_id: str
    schema_version: str
    template: str | None = None
    """None for a record of the previous layout."""
    content_hash: str | None = None
    valid_from: int = 0
    valid_to: int = OPEN_GENERATION
    document: str | None = None

    @classmethod
    def from_record(cls, storage_id: str, metadata: Mapping[str, MetadataValue],
                    document: str | None = None) -> StoredRecord:
        """The record as the store returns it (id, metadata, text)."""
        content_hash = metadata.get("content_hash")
        key = metadata.get("chunk_key")
        return cls(storage_id=storage_id, chunk_id=str(metadata.get("chunk_id", storage_id)),
                   schema_version=str(metadata.get("schema_version", "")),
                   template=None if key is None else str(key),
                   content_hash=None if content_hash is None else str(content_hash),
                   valid_from=int(metadata.get("valid_from", 0)),
                   valid_to=int(metadata.get("valid_to", OPEN_GENERATION)), document=document)

    @property
    def address(self) -> str:
        """The storage id without a ``#g`` suffix."""
        head, sep, tail = self.storage_id.rpartition(_GENERATION_MARK)
        return head if sep and tail.isdigit() else self.storage_id

    def visible_at(self, generation: int) -> bool:
        """Whether readers at ``generation`` see this record."""
        return self.valid_from <= generation < self.valid_to


class PlannedWrite(BaseModel):
    """A chunk to write, the storage id it goes under and its template."""

    model_config = ConfigDict(frozen=True)

    storage_id: str
    chunk: SchemaChunk
    template: str


class RefreshPlan(BaseModel):
    """Everything one refresh does, in execution order: discard/reopen leftovers, write,
    retire, flip the manifest to ``state`` (when ``flips``), then delete ``cleanup``."""

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    schema_version: str
    generation: int
    """The head generation before the refresh (``G``)."""
    new_generation: int
    """``G+1``, or ``G`` when the chunk set equals the head set."""
    keep_versions: list[str]
    """Versions whose records survive the refresh (sorted)."""
    discard: list[str]
    """Storage ids of leftovers of an interrupted refresh: deleted before anything else."""
    reopen: list[str]
    """Storage ids retired by an interrupted refresh: made open-ended again."""
    writes: list[PlannedWrite]
    retire: list[str]
    """Storage ids whose ``valid_to`` becomes ``new_generation``."""
    replaced: int
    """How many of ``retire`` are replaced by a write (the rest disappeared)."""
    unchanged: int
    cleanup: list[str]
    """Storage ids deleted once the manifest flipped: records no retained version uses."""
    deleted: int
    """Records the refresh deletes (``len(cleanup)``)."""
    reuse: dict[str, str]
    """Text -> storage id of a record holding that text (its vector can be reused): records read
    with their documents (a migration), and any record at a write's content address."""
    state: ManifestState
    """The manifest record after the refresh."""
    flips: bool
    """Whether the manifest record changes (anything but its timestamp)."""
    migrates: bool = False
    """The store held the previous layout: this refresh migrates the datasource."""


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


def record_metadata(chunk: SchemaChunk, generation: int, template: str | None = None) -> dict[str, MetadataValue]:
    """The stored metadata of a chunk written at ``generation``: its own plus the internal keys."""
    meta = chunk.get_metadata()
    meta.update({"chunk_id": chunk.id, "chunk_key": template if template is not None else chunk_template(chunk),
                 "valid_from": generation, "valid_to": OPEN_GENERATION})
    return meta


def _digest(chunks: Sequence[SchemaChunk], hashes: Sequence[str]) -> str:
    """:func:`~nl2sql_assets.indexing.models.chunks_digest` from hashes already computed."""
    return sha256_hex(canonical_json(sorted([c.id, h] for c, h in zip(chunks, hashes, strict=True))))


def unused_records(records: Iterable[StoredRecord], generations: Iterable[int], head: int) -> list[str]:
    """Storage ids of records no generation in ``generations`` sees (leftovers above ``head`` excluded)."""
    gens = sorted(set(generations))
    return sorted(r.storage_id for r in records
                  if r.valid_from <= head and not any(r.visible_at(g) for g in gens))


def plan_refresh(records: Sequence[StoredRecord], chunks: Sequence[SchemaChunk], *, datasource_id: str,
                 schema_version: str, tenant_id: str, state: IndexState | None,
                 keep_versions: Sequence[str] | None, make_live: bool, model_key: str,
                 updated_at: str) -> RefreshPlan:
    """Decide a refresh of ``datasource_id`` to ``chunks`` (the complete set of ``schema_version``).

    Args:
        records: every record stored for the datasource, in store order.
        chunks: the new chunk set.
        state: the datasource's manifest record; None when it was never indexed.
        keep_versions: other versions whose records stay; every other version is dropped.
        make_live: flip the live version to ``schema_version``; False keeps the current live
            version and its records (ignored when there is none, or it is ``schema_version``,
            or the store is migrated).
        model_key: the embedding model key (part of every content address, recorded in the manifest).
        updated_at: the timestamp recorded in the manifest.

    Raises:
        ValueError: see :func:`check_chunks`.
    """
    check_chunks(datasource_id, schema_version, tenant_id, chunks)
    prior = as_manifest_state(state)
    migrates = prior is not None and prior.legacy
    head = prior.generation if prior else 0
    new_gen = head + 1
    live_before = prior.live_version if prior else None
    if migrates or (not make_live and live_before in (None, schema_version)):
        make_live = True
    keep = set(keep_versions or []) | {schema_version}
    if not make_live and live_before:
        keep.add(live_before)

    discard = [r.storage_id for r in records if r.valid_from > head]
    present = [r for r in records if r.valid_from <= head]
    at_head = [r for r in present if r.visible_at(head)]
    reopen = [] if migrates else [r.storage_id for r in at_head if r.valid_to < OPEN_GENERATION]
    current: dict[str, StoredRecord] = {} if migrates else {r.template: r for r in at_head if r.template}
    reuse: dict[str, str] = {}
    for rec in present if not migrates else at_head:
        if rec.document is not None:
            reuse.setdefault(rec.document, rec.storage_id)

    taken = {r.storage_id for r in present}
    by_address = {r.address: r.storage_id for r in present if r.template}
    writes: list[PlannedWrite] = []
    retire: list[str] = [r.storage_id for r in at_head] if migrates else []
    templates: set[str] = set()
    replaced = 0
    hashes = [c.content_hash for c in chunks]  # hashing the text is most of planning: once per chunk
    for chunk, content_hash in zip(chunks, hashes, strict=True):
        template = chunk_template(chunk)
        templates.add(template)
        address = content_address(chunk, template, model_key, content_hash)
        prev = current.get(template)
        if prev is not None and prev.address == address:
            continue
        sid = address if address not in taken else f"{address}{_GENERATION_MARK}{new_gen}"
        if address in by_address:  # content that came back: its older record lends the vector
            reuse.setdefault(chunk.get_page_content(), by_address[address])
        writes.append(PlannedWrite(storage_id=sid, chunk=chunk, template=template))
        if prev is not None:
            retire.append(prev.storage_id)
            replaced += 1
    retire += [r.storage_id for t, r in current.items() if t not in templates]
    if prior is not None and not migrates and not writes and not retire:
        new_gen = head  # the chunk set is the head set: the version shares its generation

    target_live = schema_version if make_live else live_before
    versions = {} if migrates or prior is None else {v: g for v, g in prior.versions.items() if v in keep}
    versions[schema_version] = new_gen
    new_state = ManifestState(
        datasource_id=datasource_id, tenant_id=tenant_id, live_version=target_live, generation=new_gen,
        model_key=model_key,
        chunk_count=len(chunks) if make_live else (prior.chunk_count if prior else 0),
        content_digest=_digest(chunks, hashes) if make_live else (prior.content_digest if prior else ""),
        updated_at=updated_at, versions=versions, layout=LAYOUT)
    flips = prior is None or new_state.model_dump(exclude={"updated_at"}) != prior.model_dump(exclude={"updated_at"})

    retired, reopened = set(retire), set(reopen)
    after = [r.model_copy(update={"valid_to": new_gen if r.storage_id in retired
                                  else OPEN_GENERATION if r.storage_id in reopened else r.valid_to})
             for r in present]
    cleanup = unused_records(after, versions.values(), head=new_gen)
    return RefreshPlan(
        datasource_id=datasource_id, schema_version=schema_version, generation=head, new_generation=new_gen,
        keep_versions=sorted(keep), discard=sorted(set(discard)), reopen=reopen, writes=writes, retire=retire,
        replaced=replaced, unchanged=len(chunks) - len(writes), cleanup=cleanup, deleted=len(cleanup),
        reuse=reuse, state=new_state, flips=flips, migrates=migrates)


class RecordCheck(BaseModel):
    """What an audit needs to know about one datasource's records beyond its chunk sets."""

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    legacy: bool = False
    """The manifest is of the previous layout (the next refresh migrates it)."""
    records: int = 0
    orphaned: list[str] = Field(default_factory=list)
    """Records no retained version's generation sees: retention should have deleted them."""
    leftovers: list[str] = Field(default_factory=list)
    """Records above the head generation: a refresh in flight, or one that failed (the next removes them)."""


def check_records(datasource_id: str, records: Sequence[StoredRecord], state: IndexState | None) -> RecordCheck:
    """Orphans and leftovers among a datasource's records (every record is orphaned without a manifest)."""
    prior = as_manifest_state(state)
    if prior is None:
        return RecordCheck(datasource_id=datasource_id, records=len(records),
                           orphaned=sorted(r.storage_id for r in records))
    head = prior.generation
    leftovers = sorted(r.storage_id for r in records if r.valid_from > head)
    if prior.legacy:  # previous layout: versions are told apart by schema_version at the head generation
        orphaned = sorted(r.storage_id for r in records if r.valid_from <= head and not r.visible_at(head))
    else:
        orphaned = unused_records(records, prior.versions.values(), head)
    return RecordCheck(datasource_id=datasource_id, legacy=prior.legacy, records=len(records), orphaned=orphaned,
                       leftovers=leftovers)
