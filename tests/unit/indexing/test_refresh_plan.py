"""The refresh planner without Chroma: what a refresh writes, retires and deletes.

``apply`` models what executing a plan leaves in the store, so several refreshes can be
chained; the Chroma-backed behaviour is covered in ``test_vector_store.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.models import ChunkSet, IndexState, chunks_digest
from nl2sql_assets.indexing.refresh_plan import (
    LAYOUT,
    OPEN_GENERATION,
    ManifestState,
    RefreshPlan,
    StoredRecord,
    chunk_template,
    content_address,
    plan_refresh,
    record_metadata,
)
from tests.chunk_samples import shop_snapshot

MODEL_KEY = "hash_test_64"
NOW = "2026-01-01T00:00:00+00:00"


def plan(records: Sequence[StoredRecord], cs: ChunkSet, state: IndexState | None, *,
         keep_versions: list[str] | None = None, make_live: bool = True) -> RefreshPlan:
    return plan_refresh(records, cs.chunks, datasource_id=cs.datasource_id, schema_version=cs.schema_version,
                        tenant_id=cs.tenant_id, state=state, keep_versions=keep_versions, make_live=make_live,
                        model_key=MODEL_KEY, updated_at=NOW)


def apply(records: Sequence[StoredRecord], p: RefreshPlan) -> list[StoredRecord]:
    """What the store holds once ``p`` ran: leftovers and clean-up gone, writes added."""
    gone = set(p.discard) | set(p.cleanup)
    kept = [r.model_copy(update={"valid_to": OPEN_GENERATION}) if r.storage_id in p.reopen else r
            for r in records if r.storage_id not in gone]
    kept = [r.model_copy(update={"valid_to": p.new_generation}) if r.storage_id in p.retire else r for r in kept]
    return kept + [StoredRecord.from_record(w.storage_id, record_metadata(w.chunk, p.new_generation, w.template),
                                            w.chunk.get_page_content()) for w in p.writes]


def address(chunk: object) -> str:
    return content_address(chunk, chunk_template(chunk), MODEL_KEY)  # type: ignore[arg-type]


def refreshed(cs: ChunkSet, records: Sequence[StoredRecord] = (), state: IndexState | None = None,
              **kwargs: object) -> tuple[list[StoredRecord], IndexState]:
    p = plan(records, cs, state, **kwargs)  # type: ignore[arg-type]
    return apply(records, p), p.state


def test_first_refresh_writes_every_chunk_under_its_content_address_and_goes_live() -> None:
    cs = build_chunks(shop_snapshot())
    p = plan([], cs, None)
    assert [w.storage_id for w in p.writes] == [address(c) for c in cs.chunks]
    assert all(w.storage_id.startswith("shop:*:") and cs.schema_version not in w.storage_id for w in p.writes)
    assert (p.retire, p.cleanup, p.discard, p.reopen, p.deleted, p.unchanged) == ([], [], [], [], 0, 0)
    assert (p.generation, p.new_generation, p.flips) == (0, 1, True)
    assert p.state == ManifestState(datasource_id="shop", tenant_id="acme", live_version=cs.schema_version,
                                    generation=1, model_key=MODEL_KEY, chunk_count=len(cs.chunks),
                                    content_digest=chunks_digest(cs.chunks), updated_at=NOW,
                                    versions={cs.schema_version: 1}, layout=LAYOUT)
    meta = record_metadata(cs.chunks[0], 1)
    assert (meta["chunk_id"], meta["valid_from"], meta["valid_to"]) == (cs.chunks[0].id, 1, OPEN_GENERATION)
    assert meta["chunk_key"] == cs.chunks[0].id.replace(cs.schema_version, "*")


def test_unchanged_refresh_writes_nothing_and_keeps_the_generation() -> None:
    cs = build_chunks(shop_snapshot())
    records, state = refreshed(cs)
    p = plan(records, cs, state)
    assert (p.writes, p.retire, p.cleanup, p.deleted) == ([], [], [], 0)
    assert p.unchanged == len(cs.chunks)
    assert (p.new_generation, p.flips) == (state.generation, False)


def test_one_changed_chunk_gets_a_new_address_and_its_old_record_retired() -> None:
    cs = build_chunks(shop_snapshot())
    records, state = refreshed(cs)
    changed = cs.chunks[3].model_copy(update={"description": "Changed."})  # same id, new text
    assert changed.content_hash != cs.chunks[3].content_hash
    new = cs.model_copy(update={"chunks": [*cs.chunks[:3], changed, *cs.chunks[4:]]})
    p = plan(records, new, state)
    assert [(w.storage_id, w.chunk.id) for w in p.writes] == [(address(changed), changed.id)]
    assert p.retire == [address(cs.chunks[3])] and p.replaced == 1 and p.cleanup == [address(cs.chunks[3])]
    assert (p.unchanged, p.deleted, p.new_generation) == (len(cs.chunks) - 1, 1, 2)
    assert p.reuse[cs.chunks[0].get_page_content()] == address(cs.chunks[0])  # stored texts lend their vectors


def test_metadata_only_refresh_of_the_same_version_rewrites_only_changed_texts() -> None:
    v1 = build_chunks(shop_snapshot())
    v1b = build_chunks(shop_snapshot(customer_comment="Buyers of the shop."))
    assert v1b.schema_version == v1.schema_version
    changed = {c.id for c, o in zip(v1b.chunks, v1.chunks, strict=True) if c.content_hash != o.content_hash}
    records, state = refreshed(v1)
    p = plan(records, v1b, state)
    assert {w.chunk.id for w in p.writes} == changed and len(changed) == 6
    old = {address(c) for c in v1.chunks if c.id in changed}
    assert sorted(p.retire) == p.cleanup == sorted(old)  # old records serve gen 1 until the flip
    assert (p.unchanged, p.deleted, p.state.generation, p.state.versions) == (20, 6, 2, {v1.schema_version: 2})
    # changing back reuses the addresses the clean-up freed: no id growth over time
    records = apply(records, p)
    back = plan(records, v1, p.state)
    assert {w.storage_id for w in back.writes} == old
    assert set(back.cleanup) == {address(c) for c in v1b.chunks if c.id in changed}


def test_a_chunk_gone_from_the_same_version_is_retired_and_counted_as_deleted() -> None:
    cs = build_chunks(shop_snapshot())
    records, state = refreshed(cs)
    fewer = cs.model_copy(update={"chunks": cs.chunks[:-1]})
    p = plan(records, fewer, state)
    assert p.writes == [] and p.retire == p.cleanup == [address(cs.chunks[-1])]
    assert (p.replaced, p.deleted, p.flips) == (0, 1, True)
    assert p.state.chunk_count == len(cs.chunks) - 1


def test_retention_keeps_listed_versions_and_drops_the_rest() -> None:
    v1 = build_chunks(shop_snapshot())
    v2 = build_chunks(shop_snapshot(extra_order_column=True))
    v3 = build_chunks(shop_snapshot(extra_order_column=True, metrics=False, customer_comment=None,
                                    captured_at=shop_snapshot().captured_at.replace(year=2027)))
    records, state = refreshed(v1)
    p2 = plan(records, v2, state, keep_versions=[v1.schema_version])
    assert p2.cleanup == [] and p2.deleted == 0 and p2.keep_versions == sorted([v1.schema_version, v2.schema_version])
    assert len(p2.writes) == 2 and p2.unchanged == len(v2.chunks) - 2  # only table:orders and the new column
    records = apply(records, p2)
    assert len(records) == len(v1.chunks) + 2  # two versions, one record per distinct content
    p3 = plan(records, v3, p2.state, keep_versions=[v2.schema_version])
    v1_only = {address(c) for c in v1.chunks} - {address(c) for c in v2.chunks} - {address(c) for c in v3.chunks}
    assert set(p3.cleanup) == v1_only and p3.deleted == len(v1_only) == 1
    assert {w.chunk.id for w in p3.writes} == {c.id for c in v3.chunks if address(c) not in
                                               {address(o) for o in v2.chunks}}
    assert set(p3.state.versions) == {v2.schema_version, v3.schema_version}
    # default retention keeps only the new version: every record v3 does not hold goes
    p3_default = plan(records, v3, p2.state)
    assert p3_default.deleted == len({r.storage_id for r in records} - {address(c) for c in v3.chunks})


def test_make_live_false_keeps_the_live_version_and_its_records() -> None:
    v1, v2 = build_chunks(shop_snapshot()), build_chunks(shop_snapshot(extra_order_column=True))
    records, state = refreshed(v2)
    p = plan(records, v1, state, make_live=False)
    assert p.state.live_version == v2.schema_version and p.state.chunk_count == len(v2.chunks)
    assert p.cleanup == [] and v2.schema_version in p.keep_versions
    first = plan([], v1, None, make_live=False)  # nothing live yet: goes live anyway
    assert first.state.live_version == v1.schema_version


def test_leftovers_of_an_interrupted_refresh_are_discarded_or_reopened() -> None:
    cs = build_chunks(shop_snapshot())
    records, state = refreshed(cs)
    ghost = StoredRecord.from_record(cs.chunks[1].id + "#ghost", record_metadata(cs.chunks[1], 2), "GHOST")
    half_retired = records[2].model_copy(update={"valid_to": 2})
    records = [*records[:2], half_retired, *records[3:], ghost]
    p = plan(records, cs, state)
    assert p.discard == [ghost.storage_id] and p.reopen == [half_retired.storage_id]
    assert "GHOST" not in p.reuse and p.writes == [] and p.unchanged == len(cs.chunks)


def test_chunks_of_another_datasource_tenant_or_repeated_ids_are_refused() -> None:
    cs = build_chunks(shop_snapshot())
    with pytest.raises(ValueError, match="tenant"):
        plan_refresh([], cs.chunks, datasource_id="shop", schema_version=cs.schema_version, tenant_id="other",
                     state=None, keep_versions=None, make_live=True, model_key=MODEL_KEY, updated_at=NOW)
    with pytest.raises(ValueError, match="belongs to"):
        plan_refresh([], cs.chunks, datasource_id="elsewhere", schema_version=cs.schema_version,
                     tenant_id="acme", state=None, keep_versions=None, make_live=True, model_key=MODEL_KEY,
                     updated_at=NOW)
    with pytest.raises(ValueError, match="duplicate"):
        plan(([]), cs.model_copy(update={"chunks": [cs.chunks[0], cs.chunks[0]]}), None)


def test_content_that_comes_back_while_its_old_record_is_kept_gets_a_second_record() -> None:
    """v1 and v3 hold the same orders table, v2 another: one range cannot cover v1 and v3 but not
    v2, so v3 writes ``<address>#g3`` and every version's generation sees exactly its chunks."""
    v1 = build_chunks(shop_snapshot())
    v2 = build_chunks(shop_snapshot(extra_order_column=True, captured_at=shop_snapshot().captured_at.replace(day=2)))
    v3 = build_chunks(shop_snapshot(captured_at=shop_snapshot().captured_at.replace(day=3)))
    records, state = refreshed(v1)
    records, state = refreshed(v2, records, state, keep_versions=[v1.schema_version])
    p3 = plan(records, v3, state, keep_versions=[v1.schema_version, v2.schema_version])
    back = [w for w in p3.writes if w.storage_id.endswith("#g3")]
    assert len(back) == 1 and len(p3.writes) == 1 and p3.cleanup == []
    assert p3.reuse[back[0].chunk.get_page_content()] == address(back[0].chunk)  # its vector is copied
    records = apply(records, p3)
    for cs in (v1, v2, v3):
        seen = {r.address for r in records if r.visible_at(p3.state.versions[cs.schema_version])}
        assert seen == {address(c) for c in cs.chunks}


def test_a_manifest_of_the_previous_layout_is_migrated_in_one_new_generation() -> None:
    v1 = build_chunks(shop_snapshot())
    legacy = [StoredRecord.from_record(c.id, {**c.get_metadata(), "chunk_id": c.id, "valid_from": 1,
                                               "valid_to": OPEN_GENERATION}, c.get_page_content())
              for c in v1.chunks]
    old_state = IndexState(datasource_id="shop", tenant_id="acme", live_version=v1.schema_version, generation=1,
                           model_key=MODEL_KEY, chunk_count=len(v1.chunks), content_digest="", updated_at=NOW)
    p = plan(legacy, v1, old_state, keep_versions=["older"])
    assert p.migrates and p.new_generation == 2 and p.state.layout == LAYOUT
    assert [w.storage_id for w in p.writes] == [address(c) for c in v1.chunks]
    assert sorted(p.retire) == p.cleanup == sorted(c.id for c in v1.chunks)  # retired before, deleted after the flip
    assert all(p.reuse[c.get_page_content()] == c.id for c in v1.chunks)  # vectors copied, nothing re-embedded
    assert p.state.versions == {v1.schema_version: 2}
