"""Join paths over the foreign-key graph: bridge tables and the join column pairs between tables.

Selected tables are often not adjacent: "circuits" and "results" join through "races". The
graph has one edge per foreign key: declared by the database or dbt, or inferred at snapshot
time (:mod:`nl2sql_assets.schema.join_inference`: warehouse surrogate keys such as
``FACT_X.BUILDING_KEY`` -> ``DIM_BUILDING.BUILDING_KEY``, checked on sampled values), each
once. Optionally, where the snapshot has none, keys are also inferred here from names: a column
named exactly like another table's single-column primary key, or like a column some other table
declares as a foreign key (``cards.setCode`` joins ``sets.code`` when ``set_translations.setCode``
is declared to). Inferred joins only ever point at the table whose key the column is (a
dimension), never from one fact to another, so a key shared by many fact tables makes its
dimension the hub that bridges them.
:meth:`JoinGraph.connect` adds the tables on the shortest paths that connect the selection
(a greedy Steiner tree; among equally short paths the one through better-scored tables), then
the link tables that keep joins out of a fan trap: "client" and "account" both reference
"district", and joining them through it pairs every client with every account of the district;
when a link table references each of them once ("disp"), that is the relationship meant. A table
referencing one of them twice (``connected`` with two keys into ``atom``) stores pairs of that
entity, not a link, and is not added.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from nl2sql_assets.indexing.chunk_builder import infer_cardinality
from nl2sql_assets.retrieval.models import Relationship
from nl2sql_assets.schema.models import ForeignKey, SchemaSnapshot


@dataclass(frozen=True)
class JoinEdge:
    """A join from ``child`` (holding the key columns) to ``parent``; indexes into snapshot.tables."""

    child: int
    parent: int
    child_columns: tuple[str, ...]
    parent_columns: tuple[str, ...]
    cardinality: str
    inferred: bool = False
    source: str = "foreign_key"


class JoinGraph:
    """The join graph of one snapshot (build once per version and reuse)."""

    def __init__(self, snapshot: SchemaSnapshot, *, infer: bool = True) -> None:
        self.names = [t.name for t in snapshot.tables]
        self.edges: list[JoinEdge] = []
        by_name: dict[str, int] = {}
        for i, t in enumerate(snapshot.tables):
            by_name.setdefault(t.name, i)
            by_name.setdefault(t.name.lower(), i)
            by_name.setdefault(t.qualified_name, i)
        declared: set[tuple[int, str]] = set()
        seen: set[tuple[int, int, tuple[str, ...], tuple[str, ...]]] = set()
        # declared and dbt keys before inferred ones: a join both declared and inferred is one edge
        for ci, table in enumerate(snapshot.tables):
            for fk in sorted(table.foreign_keys, key=lambda fk: fk.source == "inferred"):
                ref = f"{fk.ref_schema}.{fk.ref_table}" if fk.ref_schema else fk.ref_table
                pi = by_name.get(ref, by_name.get(fk.ref_table, by_name.get(fk.ref_table.lower())))
                identity = (ci, pi if pi is not None else -1, tuple(c.lower() for c in fk.columns),
                            tuple(c.lower() for c in fk.ref_columns))
                if pi is None or identity in seen:
                    continue
                seen.add(identity)
                self.edges.append(JoinEdge(ci, pi, tuple(fk.columns), tuple(fk.ref_columns),
                                           infer_cardinality(table, fk), inferred=fk.source == "inferred",
                                           source=fk.source))
                declared.update((ci, c.lower()) for c in fk.columns)
        if infer:
            self._infer(snapshot, declared)
        self.adjacent: list[set[int]] = [set() for _ in self.names]
        references: dict[tuple[int, int], int] = {}
        for e in self.edges:
            if e.child != e.parent:
                self.adjacent[e.child].add(e.parent)
                self.adjacent[e.parent].add(e.child)
                references[(e.child, e.parent)] = references.get((e.child, e.parent), 0) + 1
        self.parents: list[set[int]] = [{p for (c, p) in references if c == t} for t in range(len(self.names))]
        # per table, the tables it references exactly once: what a link table links
        self._linked: list[set[int]] = [{p for (c, p), n in references.items() if c == t and n == 1}
                                        for t in range(len(self.names))]

    def _infer(self, snapshot: SchemaSnapshot, declared: set[tuple[int, str]]) -> None:
        # column name -> (parent, parent columns): a single-column primary key, or a column some
        # table declares as a single-column foreign key (the same name elsewhere means the same key)
        keys: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
        for i, t in enumerate(snapshot.tables):
            if len(t.primary_key) == 1:
                keys.setdefault(t.primary_key[0].lower(), []).append((i, tuple(t.primary_key)))
        for e in list(self.edges):
            if len(e.child_columns) == 1 and not e.inferred:  # one inference does not license another
                targets = keys.setdefault(e.child_columns[0].lower(), [])
                if all(p != e.parent for p, _ in targets):
                    targets.append((e.parent, e.parent_columns))
        linked = {(e.child, e.parent) for e in self.edges} | {(e.parent, e.child) for e in self.edges}
        for ci, table in enumerate(snapshot.tables):
            own_key = [c.lower() for c in table.primary_key]
            for col in table.columns:
                name = col.name.lower()
                if (ci, name) in declared or own_key == [name]:
                    continue
                for pi, ref_columns in keys.get(name, []):
                    if pi == ci or (ci, pi) in linked:
                        continue
                    parent = snapshot.tables[pi]
                    fk = ForeignKey(columns=[col.name], ref_table=parent.name, ref_columns=list(ref_columns))
                    self.edges.append(JoinEdge(ci, pi, (col.name,), ref_columns,
                                               infer_cardinality(table, fk), inferred=True, source="inferred"))
                    linked.update({(ci, pi), (pi, ci)})

    def connect(self, selected: Sequence[int], scores: Sequence[float] | None = None) -> list[int]:
        """The selection plus its bridge tables and link tables (out of fan traps), selection order first.

        Tables in another connected component than the first are kept without a bridge.

        Args:
            selected: table indexes, best first.
            scores: per-table scores; among equally short paths the higher-scored one wins.
        """
        order = list(dict.fromkeys(selected))
        if len(order) < 2:
            return order
        tree = {order[0]}
        added: list[int] = []
        for target in order[1:]:
            if target in tree:
                continue
            path = self._shortest_to(target, tree, scores)
            tree.add(target)
            for node in path:
                if node not in tree:
                    tree.add(node)
                    added.append(node)
        tables = order + [n for n in added if n not in order]
        return tables + self._link_tables(tables, scores)

    def _link_tables(self, tables: list[int], scores: Sequence[float] | None) -> list[int]:
        """Link tables for pairs of ``tables`` that are joined only through a parent they share.

        ``a`` and ``b`` do not reference each other but both reference a table of ``tables`` (a
        fan trap): the best-scored table referencing each of them once is added, unless one is
        already there.
        """
        inside = set(tables)
        added: list[int] = []
        for i, a in enumerate(tables):
            for b in tables[i + 1:]:
                if b in self.adjacent[a] or not (self.parents[a] & self.parents[b] & inside):
                    continue
                if any({a, b} <= self._linked[j] for j in inside.union(added)):
                    continue
                links = [j for j in range(len(self.names)) if j not in inside and {a, b} <= self._linked[j]]
                if links:
                    added.append(max(links, key=lambda j: (float(scores[j]) if scores is not None else 0.0, -j)))
        return added

    def _shortest_to(self, start: int, tree: set[int], scores: Sequence[float] | None) -> list[int]:
        """Nodes strictly between ``start`` and the nearest tree node (empty when none is reachable).

        Fewest hops first; among equally short paths, the fewest fan traps (a step up to a shared
        parent and back down to another of its children: two facts through the date dimension
        every fact references), then the best-scored tables. A hub dimension thus bridges only
        where no path of the same length runs through the keys themselves.
        """
        # state: (node, whether the last step went up to a parent); cost: (hops, fan traps, -scores)
        origin = (start, False)
        best: dict[tuple[int, bool], tuple[int, int, float]] = {origin: (0, 0, 0.0)}
        prev: dict[tuple[int, bool], tuple[int, bool] | None] = {origin: None}
        heap: list[tuple[int, int, float, int, bool]] = [(0, 0, 0.0, start, False)]
        while heap:
            hops, traps, penalty, node, went_up = heapq.heappop(heap)
            state = (node, went_up)
            if (hops, traps, penalty) != best[state]:
                continue
            if node in tree and node != start:
                path = []
                cur = prev[state]
                while cur is not None and cur[0] != start:
                    path.append(cur[0])
                    cur = prev[cur]
                return path
            for nxt in sorted(self.adjacent[node]):
                up = nxt in self.parents[node]
                trap = int(went_up and not up)
                cost = (hops + 1, traps + trap, penalty - (float(scores[nxt]) if scores is not None else 0.0))
                key = (nxt, up)
                if key not in best or cost < best[key]:
                    best[key] = cost
                    prev[key] = state
                    heapq.heappush(heap, (*cost, nxt, up))
        return []

    def edges_within(self, tables: Sequence[int]) -> list[JoinEdge]:
        """Every edge whose both ends are in ``tables``."""
        inside = set(tables)
        return [e for e in self.edges if e.child in inside and e.parent in inside]

    def relationships(self, tables: Sequence[int]) -> list[Relationship]:
        """The join column pairs among ``tables`` as the result's relationship objects."""
        return [Relationship(from_table=self.names[e.child], from_columns=list(e.child_columns),
                             to_table=self.names[e.parent], to_columns=list(e.parent_columns),
                             cardinality=e.cardinality,  # type: ignore[arg-type]
                             inferred=e.inferred, source=e.source)  # type: ignore[arg-type]
                for e in sorted(self.edges_within(tables), key=lambda e: e.inferred)]  # declared first

    def join_columns(self, tables: Sequence[int]) -> dict[int, set[str]]:
        """Per table, the columns used by joins among ``tables``."""
        out: dict[int, set[str]] = {}
        for e in self.edges_within(tables):
            out.setdefault(e.child, set()).update(e.child_columns)
            out.setdefault(e.parent, set()).update(e.parent_columns)
        return out
