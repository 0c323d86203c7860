"""The store's kept record sets: read on a second search, bounded by records held, least recently
used dropped first, too large ones remembered."""

from __future__ import annotations

import numpy as np

from nl2sql_assets.indexing.exact_search import FIRST_READ, RecordSet, RecordSets


def record_set(n: int) -> RecordSet:
    return RecordSet([f"r{i}" for i in range(n)], [{} for _ in range(n)], [], np.ones((n, 2), dtype=np.float32))


def test_a_set_is_read_on_its_second_search_or_at_once_when_small_never_when_too_large() -> None:
    sets = RecordSets(max_set=1000, max_records=5000)
    key, small, huge, large = (("c1", f"ds{i} at g1") for i in range(4))
    assert not sets.wanted(key, 500) and sets.wanted(key, 500)  # a one-question process never reads it
    assert sets.wanted(small, FIRST_READ)  # unless it is about as cheap to read as to search
    assert not sets.wanted(huge, 1001) and not sets.wanted(huge, 1001)  # expected to be too large
    sets.put(large, record_set(1001))  # read and found too large: remembered, never read again
    assert sets.get(large) is None and not sets.wanted(large, 1)
    sets.mark_large(key)
    assert not sets.wanted(key, 500)
    sets.clear()
    assert not sets.wanted(large, 500) and sets.wanted(large, 500)


def test_sets_are_bounded_by_records_and_the_least_recently_used_goes_first() -> None:
    sets = RecordSets(max_set=40, max_records=100)
    keys = [("c1", f"ds{i} at g1") for i in range(4)]
    for key in keys[:3]:
        sets.put(key, record_set(30))
    assert sets.get(keys[0]) is not None  # used again: the second is now the oldest
    sets.put(keys[3], record_set(30))  # 120 held > 100
    assert sets.get(keys[1]) is None
    assert all(sets.get(k) is not None for k in (keys[0], keys[2], keys[3]))
    assert sets.get(("c2", "ds0 at g1")) is None  # another collection (recreated) never shares a set


def test_a_derived_set_holds_exactly_the_visible_records_of_the_scopes_datasources_in_order() -> None:
    from nl2sql_assets.indexing.chroma_queries import Scope

    # interleaved datasources, two chunk types, one record past its validity
    metas = [{"datasource_id": f"ds{i % 3}", "chunk_type": "schema.table" if i % 2 else "schema.column",
              "valid_from": 1, "valid_to": 2 if i == 7 else 9} for i in range(30)]
    base = RecordSet([f"r{i}" for i in range(30)], metas, [f"doc{i}" for i in range(30)],
                     np.arange(60, dtype=np.float32).reshape(30, 2))
    sets = RecordSets()
    sets.set_base("c1", {"ds0": "a", "ds1": "b", "ds2": "c"}, base)
    scope = Scope(where={}, versions={"ds0": "v", "ds1": "v"}, shared=frozenset(), broad={},
                  checks={"ds0": (3, None), "ds1": (3, None)}, stamps={"ds0": "a", "ds1": "b"},
                  types=frozenset({"schema.table"}))
    derived = sets.derive("c1", scope)
    assert derived is not None
    expected = [i for i, meta in enumerate(metas) if scope.visible(meta)]
    assert expected and all(metas[i]["datasource_id"] != "ds2" and i != 7 for i in expected)
    assert derived.ids == [f"r{i}" for i in expected] and derived.docs == [f"doc{i}" for i in expected]
    assert np.array_equal(derived.vectors, base.vectors[expected])
    stale = scope.model_copy(update={"stamps": {"ds0": "a", "ds1": "changed"}})
    assert sets.derive("c1", stale) is None  # read at another index state: not derived
