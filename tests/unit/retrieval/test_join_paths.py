"""Join paths: bridge tables over generated foreign-key graphs, inferred keys, relationships."""

from __future__ import annotations

import itertools
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nl2sql_assets.retrieval.join_paths import JoinGraph
from nl2sql_assets.schema.models import Column, DatasourceInfo, ForeignKey, SchemaSnapshot, Table
from tests.retrieval_samples import CAPTURED, generated_snapshot


def snapshot(tables: list[Table]) -> SchemaSnapshot:
    return SchemaSnapshot.create(DatasourceInfo(id="g", dialect="sqlite"), tables, CAPTURED)


def table(name: str, refs: tuple[str, ...] = (), pk: list[str] | None = None, extra: tuple[str, ...] = ()) -> Table:
    cols = [Column(name="id")] + [Column(name=f"{r}_id") for r in refs] + [Column(name=e) for e in extra]
    fks = [ForeignKey(columns=[f"{r}_id"], ref_table=r, ref_columns=["id"]) for r in refs]
    return Table(name=name, primary_key=["id"] if pk is None else pk, columns=cols, foreign_keys=fks)


def idx(graph: JoinGraph, *names: str) -> list[int]:
    return [graph.names.index(n) for n in names]


def test_bridge_table_joins_two_selected_tables() -> None:
    # circuits <- races <- results -> drivers
    graph = JoinGraph(snapshot([table("circuits"), table("races", ("circuits",)),
                                table("results", ("races", "drivers")), table("drivers")]))
    connected = graph.connect(idx(graph, "circuits", "drivers"))
    assert [graph.names[i] for i in connected] == ["circuits", "drivers", "races", "results"]
    rels = {(r.from_table, r.to_table) for r in graph.relationships(connected)}
    assert rels == {("races", "circuits"), ("results", "races"), ("results", "drivers")}


def test_among_equal_paths_the_better_scored_bridge_wins() -> None:
    graph = JoinGraph(snapshot([table("drivers"), table("races"), table("laps", ("drivers", "races")),
                                table("results", ("drivers", "races"))]))
    by_name = {"drivers": 0.9, "races": 0.9, "laps": 0.1, "results": 0.6}
    scores = [by_name[n] for n in graph.names]
    connected = graph.connect(idx(graph, "drivers", "races"), scores)
    assert [graph.names[i] for i in connected] == ["drivers", "races", "results"]
    by_name["laps"] = 0.8
    scores = [by_name[n] for n in graph.names]
    assert [graph.names[i] for i in graph.connect(idx(graph, "drivers", "races"), scores)][-1] == "laps"


def test_a_link_table_joins_two_tables_that_share_only_a_parent() -> None:
    # client -> district <- account: joining through district pairs every client with every
    # account of the district; disp links them
    graph = JoinGraph(snapshot([table("district"), table("client", ("district",)), table("account", ("district",)),
                                table("disp", ("client", "account")), table("card", ("disp",))]))
    connected = graph.connect(idx(graph, "district", "client", "account"))
    assert [graph.names[i] for i in connected] == ["district", "client", "account", "disp"]
    rels = {(r.from_table, r.to_table) for r in graph.relationships(connected)}
    assert {("disp", "client"), ("disp", "account")} <= rels
    # already there, or no shared parent selected: nothing added
    assert len(graph.connect(idx(graph, "district", "client", "account", "disp"))) == 4
    assert [graph.names[i] for i in graph.connect(idx(graph, "client", "card"))] == ["client", "card", "disp"]


def test_a_table_holding_pairs_of_one_entity_is_not_a_link_table() -> None:
    # atom -> molecule <- bond; connected references atom twice (a pair of atoms) and bond once
    atom, bond = table("atom", ("molecule",)), table("bond", ("molecule",))
    pairs = Table(name="connected", primary_key=["atom_id", "atom_id2"],
                  columns=[Column(name="atom_id"), Column(name="atom_id2"), Column(name="bond_id")],
                  foreign_keys=[ForeignKey(columns=["atom_id"], ref_table="atom", ref_columns=["id"]),
                                ForeignKey(columns=["atom_id2"], ref_table="atom", ref_columns=["id"]),
                                ForeignKey(columns=["bond_id"], ref_table="bond", ref_columns=["id"])])
    graph = JoinGraph(snapshot([table("molecule"), atom, bond, pairs]))
    assert [graph.names[i] for i in graph.connect(idx(graph, "molecule", "atom", "bond"))] == ["molecule", "atom", "bond"]


def test_unreachable_tables_are_kept_without_bridges() -> None:
    graph = JoinGraph(snapshot([table("a"), table("b", ("a",)), table("island")]))
    assert [graph.names[i] for i in graph.connect(idx(graph, "island", "b"))] == ["island", "b"]


def test_inferred_joins_on_same_named_keys_when_none_are_declared() -> None:
    tx = Table(name="transactions", primary_key=["TransactionID"],
               columns=[Column(name="TransactionID"), Column(name="CustomerID"), Column(name="Amount")])
    customers = Table(name="customers", primary_key=["CustomerID"], columns=[Column(name="CustomerID")])
    graph = JoinGraph(snapshot([tx, customers]))
    (edge,) = graph.edges
    assert edge.inferred and graph.names[edge.child] == "transactions" and edge.child_columns == ("CustomerID",)
    assert JoinGraph(snapshot([tx, customers]), infer=False).edges == []
    rel = graph.relationships([0, 1])[0]
    assert rel.cardinality == "many-to-one" and rel.to_columns == ["CustomerID"]


def test_a_column_named_like_a_declared_foreign_key_joins_the_same_parent() -> None:
    # set_translations.setCode is declared to reference sets.code; cards.setCode is not declared
    sets = Table(name="sets", primary_key=["id"], columns=[Column(name="id"), Column(name="code")])
    translations = Table(name="set_translations", primary_key=["id"],
                         columns=[Column(name="id"), Column(name="setCode"), Column(name="language")],
                         foreign_keys=[ForeignKey(columns=["setCode"], ref_table="sets", ref_columns=["code"])])
    cards = Table(name="cards", primary_key=["id"], columns=[Column(name="id"), Column(name="setCode")])
    graph = JoinGraph(snapshot([sets, translations, cards]))
    inferred = [e for e in graph.edges if e.inferred]
    assert [(graph.names[e.child], e.child_columns, graph.names[e.parent], e.parent_columns) for e in inferred] == [
        ("cards", ("setCode",), "sets", ("code",))]
    # the declaring table gets no second edge, and without inference only the declared key is there
    assert len(JoinGraph(snapshot([sets, translations, cards]), infer=False).edges) == 1
    assert [graph.names[i] for i in graph.connect(idx(graph, "cards", "set_translations"))] == [
        "cards", "set_translations", "sets"]


def test_one_to_one_and_multiple_keys_between_the_same_tables() -> None:
    profiles = Table(name="profiles", primary_key=["user_id"], columns=[Column(name="user_id")],
                     foreign_keys=[ForeignKey(columns=["user_id"], ref_table="users", ref_columns=["id"])])
    matches = Table(name="matches", primary_key=["id"],
                    columns=[Column(name="id"), Column(name="home_id"), Column(name="away_id")],
                    foreign_keys=[ForeignKey(columns=["home_id"], ref_table="users", ref_columns=["id"]),
                                  ForeignKey(columns=["away_id"], ref_table="users", ref_columns=["id"])])
    graph = JoinGraph(snapshot([table("users"), profiles, matches]))
    rels = graph.relationships(list(range(3)))
    assert {(r.from_table, tuple(r.from_columns), r.cardinality) for r in rels} == {
        ("profiles", ("user_id",), "one-to-one"), ("matches", ("home_id",), "many-to-one"),
        ("matches", ("away_id",), "many-to-one")}
    assert graph.join_columns(idx(graph, "users", "matches"))[graph.names.index("matches")] == {"home_id", "away_id"}


def bfs_distance(graph: JoinGraph, a: int, b: int) -> int:
    seen = {a: 0}
    queue = deque([a])
    while queue:
        node = queue.popleft()
        for nxt in graph.adjacent[node]:
            if nxt not in seen:
                seen[nxt] = seen[node] + 1
                queue.append(nxt)
    return seen[b]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(3, 10), data=st.data())
def test_connected_selection_is_a_connected_subgraph_with_shortest_bridges(seed: int, n: int, data: st.DataObject) -> None:
    graph = JoinGraph(generated_snapshot(seed, n_tables=n))   # a tree: every pair is connected
    picked = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=4, unique=True))
    connected = graph.connect(picked)
    assert connected[: len(picked)] == picked and len(set(connected)) == len(connected)
    inside = set(connected)
    start = connected[0]
    reached, queue = {start}, deque([start])
    while queue:
        for nxt in graph.adjacent[queue.popleft()] & inside:
            if nxt not in reached:
                reached.add(nxt)
                queue.append(nxt)
    assert reached == inside
    if len(picked) == 2:
        assert len(connected) == bfs_distance(graph, picked[0], picked[1]) + 1
    for a, b in itertools.combinations(connected, 2):
        if b in graph.adjacent[a]:
            assert any({e.child, e.parent} == {a, b} for e in graph.edges_within(connected))


@pytest.mark.parametrize("n", [1, 2])
def test_tiny_selections(n: int) -> None:
    graph = JoinGraph(generated_snapshot(1, n_tables=3))
    assert graph.connect(list(range(n))[:1]) == [0]
