"""Structural diff between snapshots and table lists, its summary and markdown."""

from __future__ import annotations

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nl2sql_assets.schema.diff import SchemaDiff, diff_snapshots, diff_tables
from nl2sql_assets.schema.fingerprint import compute_fingerprint
from nl2sql_assets.schema.models import Column, ForeignKey, Table, UniqueConstraint
from tests.unit.schema.builders import customers, orders, rich_tables, snapshot, view


def _with(table: Table, **update: object) -> Table:
    return table.model_copy(update=update)


def _cols(table: Table, name: str, **update: object) -> Table:
    return _with(table, columns=[c.model_copy(update=update) if c.name == name else c for c in table.columns])


def test_first_snapshot_adds_every_table() -> None:
    new = snapshot()
    d = diff_snapshots(None, new)
    assert d.tables_added == ["main.customers", "main.orders", "main.paid_orders"]
    assert not d.is_empty and not d.tables_removed and not d.tables_changed
    assert d.old_fingerprint is None and d.new_fingerprint == new.fingerprint
    assert d.summary() == "+3 tables"
    assert "added table `main.orders`" in d.to_markdown()


def test_equal_snapshots_give_an_empty_diff() -> None:
    d = diff_snapshots(snapshot(), snapshot())
    assert d.is_empty and not d.metadata_changed and d.metadata_changes == []
    assert d.summary() == "no structural change"
    assert d.to_markdown() == "no structural change"


def test_statistics_only_change_is_empty_and_not_metadata() -> None:
    old = snapshot()
    new = snapshot([_with(orders(), row_count=7), view(), _cols(customers(), "email", stats=None)])
    d = diff_snapshots(old, new)
    assert d.is_empty and not d.metadata_changed


def test_tables_added_and_removed() -> None:
    old = snapshot([orders(), view()])
    new = snapshot([orders(), customers(), Table(name="refunds")])
    d = diff_snapshots(old, new)
    assert d.tables_added == ["refunds", "main.customers"]  # canonical (schema, name) order
    assert d.tables_removed == ["main.paid_orders"]
    assert d.summary() == "+2 tables, -1 table"
    md = d.to_markdown()
    assert md.splitlines()[0] == "**+2 tables, -1 table**"
    assert "- removed table `main.paid_orders`" in md


def test_column_changes_in_one_table() -> None:
    base = orders()
    cols = [c for c in base.columns if c.name != "status"] + [Column(name="note", ordinal=9, declared_type="TEXT")]
    changed = _cols(_with(base, columns=cols), "total", declared_type="DOUBLE", nullable=False)
    changed = _cols(changed, "customer_id", nullable=False)
    d = diff_snapshots(snapshot([base]), snapshot([changed]))
    (t,) = d.tables_changed
    assert t.table == "main.orders"
    assert t.columns_added == ["note"] and t.columns_removed == ["status"]
    by_name = {c.name: c for c in t.columns_changed}
    assert by_name["total"].old_type == "DECIMAL(10,2)" and by_name["total"].new_type == "DOUBLE"
    assert by_name["total"].retyped and by_name["total"].nullability_changed
    assert not by_name["customer_id"].retyped and by_name["customer_id"].nullability_changed
    assert d.summary() == "1 column added, 1 column removed, 1 retyped, 2 nullability changed"
    md = d.to_markdown()
    assert "`main.orders`: added column `note`" in md
    assert "`main.orders`: column `total` `DECIMAL(10,2)` → `DOUBLE`, NULL → NOT NULL" in md


def test_type_case_is_not_a_change() -> None:
    d = diff_tables([orders()], [_cols(orders(), "total", declared_type="decimal(10,2)")])
    assert d.is_empty


def test_keys_and_foreign_keys() -> None:
    base = orders()
    changed = _with(
        base, primary_key=["order_id", "customer_id"],
        unique_constraints=[UniqueConstraint(columns=["status", "total"])],
        foreign_keys=[ForeignKey(columns=["customer_id"], ref_schema="main", ref_table="people",
                                 ref_columns=["id"])],
    )
    d = diff_tables([base], [changed])
    (t,) = d.tables_changed
    assert t.primary_key_changed and t.old_primary_key == ["order_id"]
    assert t.new_primary_key == ["order_id", "customer_id"]
    assert t.uniques_added == [["status", "total"]] and t.uniques_removed == []
    assert [fk.ref_table for fk in t.foreign_keys_added] == ["people"]
    assert [fk.ref_table for fk in t.foreign_keys_removed] == ["customers"]
    assert d.summary() == "1 primary key changed, 1 unique constraint changed, 1 FK added, 1 FK removed"
    md = d.to_markdown()
    assert "primary key (`order_id`) → (`order_id`, `customer_id`)" in md
    assert "added FK (`customer_id`) → `main.people`(`id`)" in md
    assert "removed FK (`customer_id`) → `main.customers`(`customer_id`)" in md


def test_kind_change_and_reordering() -> None:
    base = orders()
    reordered = _cols(base, "order_id", ordinal=99)
    d = diff_tables([base, customers()], [reordered, _with(customers(), kind="view")])
    by_table = {t.table: t for t in d.tables_changed}
    assert by_table["main.orders"].columns_reordered
    assert by_table["main.customers"].kind_changed
    assert "1 table/view kind changed" in d.summary() and "1 table reordered" in d.summary()
    assert "`main.customers`: table → view" in d.to_markdown()


def test_metadata_only_change_is_visible() -> None:
    old = snapshot()
    new = snapshot([_with(orders(), description="Every order"), view(),
                    _cols(customers(comment=None), "email", comment="Contact", synonyms=["mail"])])
    d = diff_snapshots(old, new)
    assert d.is_empty
    assert d.metadata_changed
    items = {(m.target, m.field): (m.old, m.new) for m in d.metadata_changes}
    assert items == {
        ("main.orders", "description"): ("One row per order", "Every order"),
        ("main.customers", "comment"): ("People who buy", None),
        ("main.customers.email", "comment"): ("Login e-mail", "Contact"),
        ("main.customers.email", "synonyms"): ("", "mail"),
    }
    assert d.summary() == "no structural change; metadata changed (4 items)"
    md = d.to_markdown()
    assert md.startswith("no structural change")
    assert "- `main.customers.email` comment" in md


def test_datasource_level_metadata() -> None:
    d = diff_snapshots(snapshot(), snapshot(tenant="acme", description=None))
    assert d.is_empty and d.metadata_changed
    assert {(m.target, m.field) for m in d.metadata_changes} == {("datasource", "tenant"),
                                                                 ("datasource", "description")}


def test_diff_carries_versions_and_fingerprints() -> None:
    old = snapshot([orders()]).with_version("20260101000000_aaaaaaaa")
    new = snapshot([orders(), view()]).with_version("20260101000001_bbbbbbbb")
    d = diff_snapshots(old, new)
    assert (d.datasource_id, d.old_version, d.new_version) == ("sales", old.schema_version, new.schema_version)
    assert (d.old_fingerprint, d.new_fingerprint) == (old.fingerprint, new.fingerprint)


def test_markdown_truncates_long_lists() -> None:
    new = [Table(name=f"t{i:02d}") for i in range(30)]
    d = diff_tables([], new)
    md = d.to_markdown(max_items=5)
    bullets = [line for line in md.splitlines() if line.startswith("- ")]
    assert len(bullets) == 6
    assert bullets[-1] == "- ... and 25 more"
    assert d.summary() == "+30 tables"
    assert len(d.to_markdown(max_items=100).splitlines()) == 31


def test_markdown_survives_hostile_identifiers() -> None:
    hostile = 'x"; DROP TABLE y; --'
    weird = Table(name="we`ird\nname", columns=[Column(name=hostile, declared_type="TEXT")])
    d = diff_tables([], [weird, Table(name=hostile)])
    md = d.to_markdown()
    assert md.count("\n") == 2  # the summary line and one bullet per table: no identifier breaks a line
    assert "`` we`ird name ``" in md
    assert f"`{hostile}`" in md


def test_diff_tables_without_old_side() -> None:
    d = diff_tables(None, rich_tables())
    assert d.tables_added == ["main.customers", "main.orders", "main.paid_orders"]
    assert d.new_fingerprint == compute_fingerprint(rich_tables())


def test_diff_tables_agrees_with_diff_snapshots() -> None:
    old, new = snapshot([orders()]), snapshot([_cols(orders(), "total", declared_type="REAL"), view()])
    a, b = diff_snapshots(old, new), diff_tables(old.tables, new.tables)
    assert (a.tables_added, a.tables_changed) == (b.tables_added, b.tables_changed)
    assert a.new_fingerprint == b.new_fingerprint


def test_diff_is_frozen_and_round_trips_json() -> None:
    d = diff_tables([orders()], [_with(orders(), primary_key=[]), view()])
    with pytest.raises(pydantic.ValidationError):
        d.tables_added = []  # type: ignore[misc]
    data = d.model_dump(mode="json")
    assert data["is_empty"] is False
    assert SchemaDiff.model_validate_json(d.model_dump_json()) == d


# -- property: the diff is empty exactly when the fingerprints are equal --------------------

_MUTATIONS = [
    lambda t: t,
    lambda t: _with(t, comment="x"),
    lambda t: _with(t, kind="view" if t.kind == "table" else "table"),
    lambda t: _with(t, columns=t.columns[:-1]),
    lambda t: _with(t, columns=t.columns + [Column(name="zz", ordinal=100, declared_type="INT")]),
    lambda t: _with(t, columns=[c.model_copy(update={"declared_type": "BLOB"}) if i == 0 else c
                                for i, c in enumerate(t.columns)]),
    lambda t: _with(t, columns=[c.model_copy(update={"nullable": not c.nullable}) if i == 0 else c
                                for i, c in enumerate(t.columns)]),
    lambda t: _with(t, columns=[c.model_copy(update={"ordinal": 50 - c.ordinal}) for c in t.columns]),
    lambda t: _with(t, primary_key=list(reversed(t.primary_key)) + ["extra"]),
    lambda t: _with(t, unique_constraints=t.unique_constraints + [UniqueConstraint(columns=["a", "b"])]),
    lambda t: _with(t, foreign_keys=[]),
    lambda t: _with(t, foreign_keys=t.foreign_keys + [ForeignKey(columns=["q"], ref_table="r", ref_columns=["s"])]),
    lambda t: _cols(t, t.columns[0].name, description="doc", stats=None),
]


@settings(max_examples=150, deadline=None)
@given(
    picks=st.lists(st.integers(min_value=0, max_value=len(_MUTATIONS) - 1), min_size=3, max_size=3),
    drop=st.sets(st.integers(min_value=0, max_value=2), max_size=2),
)
def test_diff_is_empty_iff_fingerprints_match(picks: list[int], drop: set[int]) -> None:
    old = rich_tables()
    new = [_MUTATIONS[p](t) for i, (p, t) in enumerate(zip(picks, old, strict=True)) if i not in drop]
    d = diff_tables(old, new)
    assert d.is_empty == (compute_fingerprint(old) == compute_fingerprint(new))
    assert d.is_empty == (d.summary().startswith("no structural change"))


def test_doctests_of_the_schema_helpers_pass() -> None:
    import doctest

    from nl2sql_assets.schema import diff, fingerprint

    for module in (diff, fingerprint):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
