"""From a dbt manifest to what a retriever can use, before any table is matched.

Pure functions over :class:`~nl2sql_assets.dbt.artifacts.DbtArtifacts`: the documented
relations (models, seeds, snapshots, sources) with their descriptions, column descriptions,
tags and ``meta`` domains; the ``relationships`` tests (declared joins); the ``accepted_values``
tests (value domains); and metrics with the semantic-model measures they are built on.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.dbt.artifacts import DbtArtifacts, Manifest, ManifestMetric, ManifestNode, MetricInput

#: Node kinds that are relations in the database (tests, analyses and operations are not).
RELATION_KINDS = frozenset({"model", "seed", "snapshot", "source"})
_REF_RE = re.compile(r"""ref\(\s*['"]([^'"]+)['"]\s*(?:,\s*['"]([^'"]+)['"])?""")
_SOURCE_RE = re.compile(r"""source\(\s*['"]([^'"]+)['"]\s*,\s*['"]([^'"]+)['"]""")
_TEMPLATE_RE = re.compile(r"\{\{\s*(?:Dimension|TimeDimension|Entity|Metric)\(\s*['\"]([^'\"]+)['\"][^}]*\}\}")
_AGGREGATES = {"average": "avg", "count_distinct": "count(distinct {x})", "sum_boolean": "sum",
               "percentile": "percentile", "median": "median"}
_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class DbtRelation(_Frozen):
    """A relation dbt documents; ``database``/``schema``/``identifier`` as the catalog (or manifest) spells them."""

    unique_id: str
    kind: str
    database: str | None = None
    schema_name: str | None = None
    identifier: str
    description: str | None = None
    columns: dict[str, str] = Field(default_factory=dict)
    domains: list[str] = Field(default_factory=list)

    @property
    def label(self) -> str:
        return ".".join(p for p in (self.database, self.schema_name, self.identifier) if p)


class DbtRelationship(_Frozen):
    """A ``relationships`` test: ``child.column`` references ``parent.field``."""

    test: str
    child: str
    column: str
    parent: str
    field: str


class DbtValues(_Frozen):
    """An ``accepted_values`` test: the values ``relation.column`` may take."""

    relation: str
    column: str
    values: list[str]


class DbtMeasure(_Frozen):
    """A semantic-model measure, on the relation its semantic model reads."""

    name: str
    relation: str | None
    agg: str
    expr: str
    description: str | None = None
    model: str


class DbtProject(_Frozen):
    """What one manifest says about the database, keyed by dbt unique ids."""

    relations: list[DbtRelation] = Field(default_factory=list)
    relationships: list[DbtRelationship] = Field(default_factory=list)
    values: list[DbtValues] = Field(default_factory=list)
    measures: list[DbtMeasure] = Field(default_factory=list)
    metrics: list[ManifestMetric] = Field(default_factory=list)


def _text(value: object) -> str | None:
    text = " ".join(str(value).split()) if value is not None else ""
    return text or None


def _domains(node: ManifestNode) -> list[str]:
    """Tags and ``meta.domain``/``meta.domains`` of a model (node-level or under ``config``)."""
    found: list[str] = []
    for meta in (node.meta, node.config.meta):
        for key in ("domain", "domains"):
            value: Any = meta.get(key)
            found += [value] if isinstance(value, str) else [str(v) for v in value or [] if isinstance(v, str)]
    tags = node.config.tags if isinstance(node.config.tags, list) else [node.config.tags]
    found += list(node.tags) + [t for t in tags if isinstance(t, str)]
    return sorted({d.strip() for d in found if d and d.strip()})


def _relation(node: ManifestNode, artifacts: DbtArtifacts) -> DbtRelation:
    cat = artifacts.catalog.relation(node.unique_id) if artifacts.catalog else None
    meta = cat.metadata if cat else None
    return DbtRelation(
        unique_id=node.unique_id, kind=node.resource_type,
        database=(meta.database if meta else None) or node.database,
        schema_name=(meta.schema_name if meta else None) or node.schema_name,
        identifier=meta.name if meta else node.relation_identifier,
        description=_text(node.description),
        columns={name: text for name, col in node.columns.items() if (text := _text(col.description))},
        domains=_domains(node),
    )


def _resolve(text: str, deps: list[str], manifest: Manifest) -> str | None:
    """The unique id (among ``deps``) that ``ref('x')`` or ``source('s', 't')`` in ``text`` names."""
    if (m := _SOURCE_RE.search(text)) is not None:
        for uid in deps:
            src = manifest.sources.get(uid)
            if src is not None and (src.source_name, src.name) == (m.group(1), m.group(2)):
                return uid
    elif (m := _REF_RE.search(text)) is not None:
        name = m.group(2) or m.group(1)
        for uid in deps:
            ref = manifest.nodes.get(uid)
            if ref is not None and ref.resource_type in RELATION_KINDS and name in (ref.name, ref.alias):
                return uid
    return None


def _tested(node: ManifestNode, manifest: Manifest) -> tuple[str | None, str | None]:
    """The relation and column a generic test is on: its ``attached_node``, or (tests on sources)
    the relation its ``model`` argument names."""
    kwargs = node.test_metadata.kwargs if node.test_metadata else {}
    deps = node.depends_on.nodes
    child = node.attached_node or _resolve(str(kwargs.get("model") or ""), deps, manifest)
    if child is None and len(deps) == 1:
        child = deps[0]
    column = kwargs.get("column_name") or node.column_name
    return child, column if isinstance(column, str) else None


def _tests(manifest: Manifest) -> tuple[list[DbtRelationship], list[DbtValues]]:
    joins: list[DbtRelationship] = []
    values: list[DbtValues] = []
    for node in manifest.nodes.values():
        meta = node.test_metadata
        if node.resource_type != "test" or meta is None or meta.namespace not in (None, "dbt"):
            continue
        child, column = _tested(node, manifest)
        if child is None or column is None:
            continue
        if meta.name == "relationships":
            to, field = meta.kwargs.get("to"), meta.kwargs.get("field")
            parent = _resolve(str(to or ""), node.depends_on.nodes, manifest)
            others = [uid for uid in node.depends_on.nodes if uid != child]
            if parent is None and len(others) <= 1:  # ``to`` in a form not parsed: the one other relation
                parent = others[0] if others else child
            if parent is not None and isinstance(field, str):
                joins.append(DbtRelationship(test=node.name, child=child, column=column, parent=parent, field=field))
        elif meta.name == "accepted_values" and isinstance(meta.kwargs.get("values"), list):
            declared = [str(v) for v in meta.kwargs["values"] if v is not None]
            if declared:
                values.append(DbtValues(relation=child, column=column, values=declared))
    key = lambda r: (r.child, r.column, r.parent, r.field)  # noqa: E731
    return sorted(joins, key=key), sorted(values, key=lambda v: (v.relation, v.column))


def _measures(manifest: Manifest) -> list[DbtMeasure]:
    out: list[DbtMeasure] = []
    for model in manifest.semantic_models.values():
        relation = next((uid for uid in model.depends_on.nodes if uid in manifest.nodes), None)
        for m in model.measures:
            out.append(DbtMeasure(name=m.name, relation=relation, agg=m.agg.lower(), expr=m.expr or m.name,
                                  description=_text(m.description), model=model.name))
    return sorted(out, key=lambda m: m.name)


def read_project(artifacts: DbtArtifacts) -> DbtProject:
    """Everything :mod:`nl2sql_assets.dbt.apply` matches against a datasource's tables."""
    manifest = artifacts.manifest
    relations = [_relation(n, artifacts) for n in [*manifest.nodes.values(), *manifest.sources.values()]
                 if n.resource_type in RELATION_KINDS and n.config.enabled and n.config.materialized != "ephemeral"]
    joins, values = _tests(manifest)
    return DbtProject(relations=sorted(relations, key=lambda r: r.unique_id), relationships=joins, values=values,
                      measures=_measures(manifest), metrics=sorted(manifest.metrics.values(), key=lambda m: m.name))


def render_filter(value: object) -> str | None:
    """A metric filter as readable SQL: ``{{ Dimension('order__status') }} = 'paid'`` -> ``status = 'paid'``.

    >>> render_filter({"where_filters": [{"where_sql_template": "{{ Dimension('order__status') }} = 'paid'"}]})
    "status = 'paid'"
    >>> render_filter(None) is None
    True
    """
    if isinstance(value, dict):
        parts = [f.get("where_sql_template") for f in value.get("where_filters") or [] if isinstance(f, dict)]
    elif isinstance(value, list):
        parts = [render_filter(v) for v in value]
    else:
        parts = [value] if isinstance(value, str) else []
    texts = [_TEMPLATE_RE.sub(lambda m: m.group(1).rsplit("__", 1)[-1], p) for p in parts if p]
    return " and ".join(texts) if texts else None


def render_measure(measure: DbtMeasure, table: str) -> str:
    """``sum(orders.amount)`` for a column expression, ``sum(<expr>) from orders`` otherwise.

    >>> m = DbtMeasure(name="n", relation=None, agg="count_distinct", expr="customer_id", model="o")
    >>> render_measure(m, "orders")
    'count(distinct orders.customer_id)'
    """
    pattern = _AGGREGATES.get(measure.agg, measure.agg)
    column = _IDENTIFIER_RE.fullmatch(measure.expr) is not None
    inner = f"{table}.{measure.expr}" if column else measure.expr
    text = pattern.format(x=inner) if "{x}" in pattern else f"{pattern}({inner})"
    return text if column else f"{text} from {table}"


def render_metric(metric: ManifestMetric, measure_sql: dict[str, str], metrics: dict[str, ManifestMetric],
                  depth: int = 0) -> str | None:
    """A metric's definition in SQL-like words, built from its measures (None when it names none known)."""
    params = metric.type_params

    def sub(ref: MetricInput | None) -> str | None:
        target = metrics.get(ref.name) if ref else None
        if target is None or depth > 4:
            return None
        text = render_metric(target, measure_sql, metrics, depth + 1)
        where = render_filter(ref.filter) if ref else None
        return f"{text} where {where}" if text and where else text

    if metric.type in ("simple", "cumulative") and params.measure is not None:
        text = measure_sql.get(params.measure.name)
        where = render_filter(params.measure.filter)
        text = f"{text} where {where}" if text and where else text
    elif metric.type == "ratio":
        num, den = sub(params.numerator), sub(params.denominator)
        text = f"({num}) / ({den})" if num and den else None
    elif metric.type == "derived" and params.expr:
        parts = [f"{m.alias or m.name} = {s}" for m in params.metrics or [] if (s := sub(m))]
        text = f"{params.expr} with " + "; ".join(parts) if parts else None
    else:
        text = None
    where = render_filter(metric.filter)
    return f"{text} where {where}" if text and where else text
