"""The broad search's own visibility check (pure: no Chroma): what ``Scope.visible`` and
``visible_rows`` keep must be what the exact ``where`` filter would have selected."""

from __future__ import annotations

from nl2sql_assets.indexing.chroma_queries import BROAD_FILTER_MIN, search_scope, visible_rows
from nl2sql_assets.indexing.models import SearchFilter
from nl2sql_assets.indexing.refresh_plan import LAYOUT, ManifestState


def state(ds: str, *, tenant: str = "default", live: str = "v2", versions: dict[str, int] | None = None,
          layout: int = LAYOUT, generation: int = 2) -> ManifestState:
    return ManifestState(datasource_id=ds, tenant_id=tenant, live_version=live, generation=generation,
                         model_key="local:test:64", chunk_count=3, content_digest="0" * 64, updated_at="2026-12-01",
                         versions={"v1": 1, "v2": 2} if versions is None else versions, layout=layout)


def meta(ds: str, valid_from: int, valid_to: int, chunk_type: str = "schema.table", **extra: object) -> dict:
    return {"datasource_id": ds, "valid_from": valid_from, "valid_to": valid_to, "chunk_type": chunk_type, **extra}


def many(n: int = BROAD_FILTER_MIN + 1, **kwargs: object) -> dict[str, ManifestState]:
    return {f"ds{i}": state(f"ds{i}", **kwargs) for i in range(n)}  # type: ignore[arg-type]


def test_a_few_datasources_keep_the_exact_filter_and_many_get_a_broad_one() -> None:
    few = search_scope(many(BROAD_FILTER_MIN), SearchFilter())
    assert few is not None and few.broad is None
    typed = {"chunk_type": {"$in": ["schema.table"]}}
    all_of_them = search_scope(many(), SearchFilter(chunk_types=["schema.table"]), complete=True)
    assert all_of_them is not None and all_of_them.first == {} and all_of_them.broad == typed  # whole store
    some = search_scope(many(), SearchFilter(chunk_types=["schema.table"]), complete=False)
    assert some is not None and some.first == some.broad == {"$and": [{"datasource_id": {"$in": sorted(many())}},
                                                                      typed]}


def test_visible_selects_the_generation_range_the_exact_filter_selects() -> None:
    scope = search_scope(many(), SearchFilter(chunk_types=["schema.table"]), complete=True)
    assert scope is not None
    assert scope.visible(meta("ds0", 1, 2**62))          # shared by v1 and v2 (live)
    assert scope.visible(meta("ds0", 2, 3))              # v2's own
    assert not scope.visible(meta("ds0", 1, 2))          # v1 only: retained, not live
    assert not scope.visible(meta("ds0", 3, 2**62))      # a refresh in flight (generation 3)
    assert not scope.visible(meta("elsewhere", 1, 2**62))  # a datasource the search does not cover
    assert not scope.visible(meta("ds0", 1, 2**62, chunk_type="schema.relationship"))
    assert not scope.visible(None) and not scope.visible({"datasource_id": "ds0"})
    asked = search_scope(many(), SearchFilter(versions={"ds0": "v1"}), complete=True)
    assert asked is not None and asked.visible(meta("ds0", 1, 2)) and not asked.visible(meta("ds0", 2, 3))
    other_tenant = search_scope({**many(), "t": state("t", tenant="globex")}, SearchFilter(tenant_id="default"),
                                complete=True)
    assert other_tenant is not None and other_tenant.broad and not other_tenant.visible(meta("t", 1, 2**62))


def test_visible_checks_the_tables_asked_for_and_a_few_datasources_too() -> None:
    """A search of some tables over the whole store queries Chroma with no filter at all: the
    tables are checked here, as the exact filter would (a record's table or referenced table)."""
    scope = search_scope(many(), SearchFilter(tables=["orders"]), complete=True)
    assert scope is not None and scope.first == {}
    assert scope.visible(meta("ds0", 2, 3, table="orders")) and scope.visible(meta("ds0", 2, 3, ref_table="orders"))
    assert not scope.visible(meta("ds0", 2, 3, table="customers"))
    few = search_scope(many(2), SearchFilter(chunk_types=["schema.column"]))
    assert few is not None and few.broad is None  # the exact filter, and the same check for kept sets
    assert few.visible(meta("ds1", 2, 3, chunk_type="schema.column")) and not few.visible(meta("ds1", 1, 2))


def test_the_stamps_name_each_datasources_index_state() -> None:
    before = search_scope(many(), SearchFilter(), complete=True)
    after = search_scope({**many(), "ds3": state("ds3", generation=3, versions={"v2": 2, "v3": 3}, live="v3")},
                         SearchFilter(), complete=True)
    assert before is not None and after is not None and before.stamp != after.stamp
    assert {ds for ds in before.stamps if before.stamps[ds] != after.stamps[ds]} == {"ds3"}
    assert before.key() != after.key() and before.size == 3 * len(many())


def test_a_store_of_the_previous_layout_is_checked_on_its_version() -> None:
    scope = search_scope(many(layout=1, versions={}), SearchFilter(), complete=True)
    assert scope is not None
    assert scope.visible(meta("ds1", 0, 2**62, schema_version="v2"))
    assert not scope.visible(meta("ds1", 0, 2**62, schema_version="v1"))


def test_visible_rows_cuts_to_the_visible_hits_or_asks_again() -> None:
    scope = search_scope(many(), SearchFilter(), complete=True)
    assert scope is not None
    metas = [meta("ds0", 1, 2), meta("ds1", 2, 3), meta("ds2", 3, 9), meta("ds3", 1, 9)]
    res = {"ids": [["a", "b", "c", "d"]], "distances": [[0.1, 0.2, 0.3, 0.4]], "metadatas": [metas],
           "documents": None, "embeddings": None}
    rows = visible_rows(res, 0, scope, n=1, fetched=4)
    assert rows is not None and rows["ids"] == [["b"]] and rows["distances"] == [[0.2]] and rows["documents"] is None
    assert visible_rows(res, 0, scope, n=3, fetched=4) is None  # 2 visible of a full answer: maybe more below
    rows = visible_rows(res, 0, scope, n=3, fetched=10)         # fewer came back than asked: that is all
    assert rows is not None and rows["ids"] == [["b", "d"]]
