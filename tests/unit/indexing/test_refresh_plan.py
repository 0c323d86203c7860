"""The refresh planner without Chroma: what a refresh writes, retires and deletes.

``apply`` models what executing a plan leaves in the store, so several refreshes can be
chained; the Chroma-backed behaviour is covered in ``test_vector_store.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.models import ChunkSet, IndexState, chunks_digest, record_id
from nl2sql_assets.indexing.refresh_plan import (
    OPEN_GENERATION,
    RefreshPlan,
    StoredRecord,
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
    return kept + [StoredRecord.from_record(w.storage_id, record_metadata(w.chunk, p.new_generation),
                                            w.chunk.get_page_content()) for w in p.writes]


def refreshed(cs: ChunkSet, records: Sequence[StoredRecord] = (), state: IndexState | None = None,
              **kwargs: object) -> tuple[list[StoredRecord], IndexState]:
    p = plan(records, cs, state, **kwargs)  # type: ignore[arg-type]
    return apply(records, p), p.state


def test_first_refresh_writes_every_chunk_under_its_own_id_and_goes_live() -> None:
    cs = build_chunks(shop_snapshot())
    p = plan([], cs, None)
    assert [w.storage_id for w in p.writes] == [c.id for c in cs.chunks]
    assert (p.retire, p.cleanup, p.discard, p.reopen, p.deleted, p.unchanged) == ([], [], [], [], 0, 0)
    assert (p.generation, p.new_generation, p.flips) == (0, 1, True)
    assert p.state == IndexState(datasource_id="shop", tenant_id="acme", live_version=cs.schema_version,
                                 generation=1, model_key=MODEL_KEY, chunk_count=len(cs.chunks),
                                 content_digest=chunks_digest(cs.chunks), updated_at=NOW)
    meta = record_metadata(cs.chunks[0], 1)
    assert (meta["chunk_id"], meta["valid_from"], meta["valid_to"]) == (cs.chunks[0].id, 1, OPEN_GENERATION)


def test_unchanged_refresh_writes_nothing_and_keeps_the_generation() -> None:
    cs = build_chunks(shop_snapshot())
    records, state = refreshed(cs)
    p = plan(records, cs, state)
    assert (p.writes, p.retire, p.cleanup, p.deleted) == ([], [], [], 0)
    assert p.unchanged == len(cs.chunks)
    assert (p.new_generation, p.flips) == (state.generation, False)


def test_one_changed_chunk_is_written_under_a_generation_id_and_its_old_record_retired() -> None:
    cs = build_chunks(shop_snapshot())
    records, state = refreshed(cs)
    changed = cs.chunks[3].model_copy(update={"description": "Changed."})  # same id, new text
    assert changed.content_hash != cs.chunks[3].content_hash
    new = cs.model_copy(update={"chunks": [*cs.chunks[:3], changed, *cs.chunks[4:]]})
    p = plan(records, new, state)
    assert [(w.storage_id, w.chunk.id) for w in p.writes] == [(record_id(changed.id, 2), changed.id)]
    assert p.retire == [changed.id] and p.replaced == 1 and p.cleanup == [changed.id]
    assert (p.unchanged, p.deleted, p.new_generation) == (len(cs.chunks) - 1, 0, 2)
    assert p.reuse[cs.chunks[0].get_page_content()] == cs.chunks[0].id  # stored texts can lend their vectors


def test_metadata_only_refresh_of_the_same_version_rewrites_only_changed_texts() -> None:
    v1 = build_chunks(shop_snapshot())
    v1b = build_chunks(shop_snapshot(customer_comment="Buyers of the shop."))
    assert v1b.schema_version == v1.schema_version
    changed = {c.id for c, o in zip(v1b.chunks, v1.chunks, strict=True) if c.content_hash != o.content_hash}
    records, state = refreshed(v1)
    p = plan(records, v1b, state)
    assert {w.chunk.id for w in p.writes} == changed and len(changed) == 6
    assert all(w.storage_id == record_id(w.chunk.id, 2) for w in p.writes)  # old records still serve gen 1
    assert sorted(p.retire) == p.cleanup == sorted(changed)
    assert (p.unchanged, p.deleted, p.state.generation) == (20, 0, 2)
    # changing back reuses the plain ids, which the clean-up freed: no id growth over time
    records = apply(records, p)
    back = plan(records, v1, p.state)
    assert {w.storage_id for w in back.writes} == changed
    assert set(back.cleanup) == {record_id(c, 2) for c in changed}


def test_a_chunk_gone_from_the_same_version_is_retired_and_counted_as_deleted() -> None:
    cs = build_chunks(shop_snapshot())
    records, state = refreshed(cs)
    fewer = cs.model_copy(update={"chunks": cs.chunks[:-1]})
    p = plan(records, fewer, state)
    assert p.writes == [] and p.retire == p.cleanup == [cs.chunks[-1].id]
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
    records = apply(records, p2)
    p3 = plan(records, v3, p2.state, keep_versions=[v2.schema_version])
    assert p3.cleanup == sorted(c.id for c in v1.chunks) and p3.deleted == len(v1.chunks)
    assert {w.chunk.id for w in p3.writes} == {c.id for c in v3.chunks}
    # default retention keeps only the new version
    p3_default = plan(records, v3, p2.state)
    assert p3_default.deleted == len(v1.chunks) + len(v2.chunks)


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
