"""Structural diff between two schema snapshots (or two table lists), as data and as markdown.

The diff covers exactly what the structural fingerprint covers (tables, kinds, columns with
their declared types, nullability and order, primary/unique/foreign keys the database
declares), so an empty diff means equal fingerprints. Documentary changes (descriptions,
comments, synonyms, the datasource's docs, and what a dbt project declares: joins from
``relationships`` tests, accepted values) are listed separately so that a metadata-only
change stays visible; a dbt join added or removed is one item naming both tables.
Used by ``drift`` output and Dagster materialization metadata.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field, computed_field

from nl2sql_assets.schema.fingerprint import compute_fingerprint, declared_values_of
from nl2sql_assets.schema.models import Column, DatasourceInfo, ForeignKey, SchemaSnapshot, Table

_TableKey = tuple[str, str]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class ColumnChange(_Frozen):
    """A column present on both sides whose declared type and/or nullability changed."""

    name: str
    old_type: str
    new_type: str
    old_nullable: bool
    new_nullable: bool

    @property
    def retyped(self) -> bool:
        return self.old_type.upper() != self.new_type.upper()

    @property
    def nullability_changed(self) -> bool:
        return self.old_nullable != self.new_nullable


class TableDiff(_Frozen):
    """Changes inside one table present on both sides (``table`` is the qualified name)."""

    table: str
    old_kind: str | None = None
    new_kind: str | None = None
    columns_added: list[str] = Field(default_factory=list)
    columns_removed: list[str] = Field(default_factory=list)
    columns_changed: list[ColumnChange] = Field(default_factory=list)
    columns_reordered: bool = False
    old_primary_key: list[str] | None = None
    new_primary_key: list[str] | None = None
    uniques_added: list[list[str]] = Field(default_factory=list)
    uniques_removed: list[list[str]] = Field(default_factory=list)
    foreign_keys_added: list[ForeignKey] = Field(default_factory=list)
    foreign_keys_removed: list[ForeignKey] = Field(default_factory=list)

    @property
    def kind_changed(self) -> bool:
        return self.old_kind != self.new_kind

    @property
    def primary_key_changed(self) -> bool:
        return self.old_primary_key != self.new_primary_key

    @computed_field  # type: ignore[prop-decorator]
    @property
    def is_empty(self) -> bool:
        return not (self.kind_changed or self.columns_added or self.columns_removed
                    or self.columns_changed or self.columns_reordered or self.primary_key_changed
                    or self.uniques_added or self.uniques_removed
                    or self.foreign_keys_added or self.foreign_keys_removed)


class MetadataChange(_Frozen):
    """One documentary item that changed.

    ``target`` is ``datasource``, a qualified table name, or ``table.column``; ``field`` is
    ``comment``, ``description``, ``synonyms``, or a datasource field (``domains``, ...).
    """

    target: str
    field: str
    old: str | None = None
    new: str | None = None


class SchemaDiff(_Frozen):
    """What changed from ``old`` to ``new``. ``is_empty`` is about structure only.

    ``metadata_changed`` compares the metadata hashes, which also move with table and column
    names, so a structural change usually sets it too; ``metadata_changes`` lists only the
    documentary items changed on the datasource and on tables/columns present on both sides.
    Tables are listed in canonical (schema, name) order.
    """

    datasource_id: str | None = None
    old_version: str | None = None
    new_version: str | None = None
    old_fingerprint: str | None = None
    new_fingerprint: str
    tables_added: list[str] = Field(default_factory=list)
    tables_removed: list[str] = Field(default_factory=list)
    tables_changed: list[TableDiff] = Field(default_factory=list)
    metadata_changed: bool = False
    metadata_changes: list[MetadataChange] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def is_empty(self) -> bool:
        """True when the structure is unchanged (metadata may still have changed)."""
        return not (self.tables_added or self.tables_removed or self.tables_changed)

    @property
    def counts(self) -> dict[str, int]:
        """Counts per kind of change (only non-zero ones), in a stable order."""
        t = self.tables_changed
        raw = {
            "tables_added": len(self.tables_added),
            "tables_removed": len(self.tables_removed),
            "kinds_changed": sum(d.kind_changed for d in t),
            "columns_added": sum(len(d.columns_added) for d in t),
            "columns_removed": sum(len(d.columns_removed) for d in t),
            "columns_retyped": sum(c.retyped for d in t for c in d.columns_changed),
            "nullability_changed": sum(c.nullability_changed for d in t for c in d.columns_changed),
            "columns_reordered": sum(d.columns_reordered for d in t),
            "primary_keys_changed": sum(d.primary_key_changed for d in t),
            "uniques_changed": sum(len(d.uniques_added) + len(d.uniques_removed) for d in t),
            "foreign_keys_added": sum(len(d.foreign_keys_added) for d in t),
            "foreign_keys_removed": sum(len(d.foreign_keys_removed) for d in t),
        }
        return {k: v for k, v in raw.items() if v}

    def summary(self) -> str:
        """One line, e.g. ``+2 tables, -1 table, 3 columns added, 1 retyped``.

        >>> SchemaDiff(new_fingerprint="0" * 64).summary()
        'no structural change'
        """
        labels = {
            "tables_added": ("+{n} table", "+{n} tables"),
            "tables_removed": ("-{n} table", "-{n} tables"),
            "kinds_changed": ("{n} table/view kind changed", "{n} table/view kinds changed"),
            "columns_added": ("{n} column added", "{n} columns added"),
            "columns_removed": ("{n} column removed", "{n} columns removed"),
            "columns_retyped": ("{n} retyped", "{n} retyped"),
            "nullability_changed": ("{n} nullability changed", "{n} nullability changed"),
            "columns_reordered": ("{n} table reordered", "{n} tables reordered"),
            "primary_keys_changed": ("{n} primary key changed", "{n} primary keys changed"),
            "uniques_changed": ("{n} unique constraint changed", "{n} unique constraints changed"),
            "foreign_keys_added": ("{n} FK added", "{n} FKs added"),
            "foreign_keys_removed": ("{n} FK removed", "{n} FKs removed"),
        }
        parts = [labels[k][n != 1].format(n=n) for k, n in self.counts.items()]
        line = ", ".join(parts) if parts else "no structural change"
        n = len(self.metadata_changes)
        if n:
            line += f"; metadata changed ({n} item{'s' if n != 1 else ''})"
        elif self.metadata_changed and not parts:
            line += "; metadata changed"
        return line

    def structural_items(self) -> list[str]:
        """One markdown bullet text per structural change, tables added first."""
        items = [f"added table {_code(name)}" for name in self.tables_added]
        items += [f"removed table {_code(name)}" for name in self.tables_removed]
        for d in self.tables_changed:
            where = _code(d.table)
            if d.kind_changed:
                items.append(f"{where}: {d.old_kind} → {d.new_kind}")
            items += [f"{where}: added column {_code(c)}" for c in d.columns_added]
            items += [f"{where}: removed column {_code(c)}" for c in d.columns_removed]
            for c in d.columns_changed:
                bits = []
                if c.retyped:
                    bits.append(f"{_code(c.old_type or '?')} → {_code(c.new_type or '?')}")
                if c.nullability_changed:
                    bits.append(f"{_null(c.old_nullable)} → {_null(c.new_nullable)}")
                items.append(f"{where}: column {_code(c.name)} " + ", ".join(bits))
            if d.columns_reordered:
                items.append(f"{where}: columns reordered")
            if d.primary_key_changed:
                items.append(f"{where}: primary key {_cols(d.old_primary_key or [])} → "
                             f"{_cols(d.new_primary_key or [])}")
            items += [f"{where}: added unique {_cols(u)}" for u in d.uniques_added]
            items += [f"{where}: removed unique {_cols(u)}" for u in d.uniques_removed]
            items += [f"{where}: added FK {_fk(fk)}" for fk in d.foreign_keys_added]
            items += [f"{where}: removed FK {_fk(fk)}" for fk in d.foreign_keys_removed]
        return items

    def to_markdown(self, max_items: int = 20) -> str:
        """Short markdown: the summary line, then at most ``max_items`` bullets per section.

        >>> print(SchemaDiff(new_fingerprint="0" * 64).to_markdown())
        no structural change
        """
        max_items = max(max_items, 0)
        lines = [f"**{self.summary()}**" if not self.is_empty else self.summary()]
        if not self.is_empty:
            lines += _bullets(self.structural_items(), max_items)
        if self.metadata_changed and self.metadata_changes:
            lines.append("")
            lines.append("metadata changes:")
            lines += _bullets([f"{_code(m.target)} {m.field}" for m in self.metadata_changes], max_items)
        if self.is_empty and not self.metadata_changed:
            return lines[0]
        return "\n".join(lines)


def diff_snapshots(old: SchemaSnapshot | None, new: SchemaSnapshot) -> SchemaDiff:
    """The diff from ``old`` (None: nothing registered yet, every table is added) to ``new``.

    ``metadata_changed`` compares the metadata hashes; ``metadata_changes`` lists the items.
    """
    if old is None:
        return SchemaDiff(
            datasource_id=new.datasource_id, new_version=new.schema_version,
            new_fingerprint=new.fingerprint,
            tables_added=[t.qualified_name for t in _sorted_tables(new.tables)],
        )
    base = _diff(old.tables, new.tables)
    changes = _datasource_changes(old.datasource, new.datasource) + base.metadata_changes
    return SchemaDiff(
        datasource_id=new.datasource_id,
        old_version=old.schema_version, new_version=new.schema_version,
        old_fingerprint=old.fingerprint, new_fingerprint=new.fingerprint,
        tables_added=base.tables_added, tables_removed=base.tables_removed,
        tables_changed=base.tables_changed,
        metadata_changed=old.metadata_hash != new.metadata_hash or bool(changes),
        metadata_changes=changes,
    )


def diff_tables(old_tables: Iterable[Table] | None, new_tables: Iterable[Table]) -> SchemaDiff:
    """The diff between two table lists (a stored snapshot's tables and a live structure read).

    ``metadata_changed`` is true when a table or column comment, description or synonym differs.

    >>> from nl2sql_assets.schema.models import Column, Table
    >>> old = [Table(name="orders", columns=[Column(name="id", declared_type="INTEGER")])]
    >>> new = [Table(name="orders", columns=[Column(name="id", declared_type="BIGINT")]),
    ...        Table(name="users")]
    >>> diff_tables(old, new).summary()
    '+1 table, 1 retyped'
    """
    new_list = list(new_tables)
    if old_tables is None:
        return SchemaDiff(new_fingerprint=compute_fingerprint(new_list),
                          tables_added=[t.qualified_name for t in _sorted_tables(new_list)])
    old_list = list(old_tables)
    base = _diff(old_list, new_list)
    return SchemaDiff(
        old_fingerprint=compute_fingerprint(old_list), new_fingerprint=compute_fingerprint(new_list),
        tables_added=base.tables_added, tables_removed=base.tables_removed,
        tables_changed=base.tables_changed,
        metadata_changed=bool(base.metadata_changes), metadata_changes=base.metadata_changes,
    )


# -- internals ---------------------------------------------------------------------------


def _key(t: Table) -> _TableKey:
    return (t.schema_name or "", t.name)


def _sorted_tables(tables: Iterable[Table]) -> list[Table]:
    return sorted(tables, key=_key)


def _ordered_columns(t: Table) -> list[Column]:
    return sorted(t.columns, key=lambda c: (c.ordinal, c.name))


def _fk_key(fk: ForeignKey) -> tuple[tuple[str, ...], str, str, tuple[str, ...]]:
    return (tuple(fk.columns), fk.ref_schema or "", fk.ref_table, tuple(fk.ref_columns))


class _TablesDiff(NamedTuple):
    tables_added: list[str]
    tables_removed: list[str]
    tables_changed: list[TableDiff]
    metadata_changes: list[MetadataChange]


def _diff(old_tables: Iterable[Table], new_tables: Iterable[Table]) -> _TablesDiff:
    old = {_key(t): t for t in old_tables}
    new = {_key(t): t for t in new_tables}
    added = [new[k].qualified_name for k in sorted(new.keys() - old.keys())]
    removed = [old[k].qualified_name for k in sorted(old.keys() - new.keys())]
    changed: list[TableDiff] = []
    meta: list[MetadataChange] = []
    for k in sorted(old.keys() & new.keys()):
        d = _diff_table(old[k], new[k])
        if not d.is_empty:
            changed.append(d)
        meta += _table_meta_changes(old[k], new[k])
    return _TablesDiff(added, removed, changed, meta)


def _diff_table(a: Table, b: Table) -> TableDiff:
    a_cols, b_cols = _ordered_columns(a), _ordered_columns(b)
    a_by, b_by = {c.name: c for c in a_cols}, {c.name: c for c in b_cols}
    col_added = [c.name for c in b_cols if c.name not in a_by]
    col_removed = [c.name for c in a_cols if c.name not in b_by]
    col_changed = []
    for c in a_cols:
        other = b_by.get(c.name)
        if other is None:
            continue
        if c.declared_type.upper() != other.declared_type.upper() or c.nullable != other.nullable:
            col_changed.append(ColumnChange(name=c.name, old_type=c.declared_type, new_type=other.declared_type,
                                            old_nullable=c.nullable, new_nullable=other.nullable))
    common_a = [c.name for c in a_cols if c.name in b_by]
    common_b = [c.name for c in b_cols if c.name in a_by]
    a_uniq = Counter(tuple(sorted(u.columns)) for u in a.unique_constraints)
    b_uniq = Counter(tuple(sorted(u.columns)) for u in b.unique_constraints)
    a_declared = [fk for fk in a.foreign_keys if fk.source == "foreign_key"]  # as the fingerprint
    b_declared = [fk for fk in b.foreign_keys if fk.source == "foreign_key"]
    a_fks = Counter(_fk_key(fk) for fk in a_declared)
    b_fks = Counter(_fk_key(fk) for fk in b_declared)
    fk_added = _fks_of(b_declared, b_fks - a_fks)
    fk_removed = _fks_of(a_declared, a_fks - b_fks)
    pk_changed = list(a.primary_key) != list(b.primary_key)
    return TableDiff(
        table=b.qualified_name,
        old_kind=a.kind, new_kind=b.kind,
        columns_added=col_added, columns_removed=col_removed, columns_changed=col_changed,
        columns_reordered=common_a != common_b,
        old_primary_key=list(a.primary_key) if pk_changed else None,
        new_primary_key=list(b.primary_key) if pk_changed else None,
        uniques_added=[list(u) for u in sorted((b_uniq - a_uniq).elements())],
        uniques_removed=[list(u) for u in sorted((a_uniq - b_uniq).elements())],
        foreign_keys_added=fk_added, foreign_keys_removed=fk_removed,
    )


def _fks_of(fks: list[ForeignKey], wanted: Counter) -> list[ForeignKey]:  # type: ignore[type-arg]
    remaining = Counter(wanted)
    out = []
    for fk in sorted(fks, key=_fk_key):
        k = _fk_key(fk)
        if remaining[k] > 0:
            remaining[k] -= 1
            out.append(fk)
    return out


def _text_field(target: str, field: str, old: str | None, new: str | None) -> list[MetadataChange]:
    return [] if old == new else [MetadataChange(target=target, field=field, old=old, new=new)]


def _table_meta_changes(a: Table, b: Table) -> list[MetadataChange]:
    name = b.qualified_name
    out = _text_field(name, "comment", a.comment, b.comment)
    out += _text_field(name, "description", a.description, b.description)
    a_by = {c.name: c for c in a.columns}
    for c in _ordered_columns(b):
        old = a_by.get(c.name)
        if old is None:
            continue
        target = f"{name}.{c.name}"
        out += _text_field(target, "comment", old.comment, c.comment)
        out += _text_field(target, "description", old.description, c.description)
        if sorted(old.synonyms) != sorted(c.synonyms):
            out.append(MetadataChange(target=target, field="synonyms", old=", ".join(sorted(old.synonyms)),
                                      new=", ".join(sorted(c.synonyms))))
        if _declared(old) != _declared(c):
            out.append(MetadataChange(target=target, field="accepted values (dbt)", old=_declared_text(old),
                                      new=_declared_text(c)))
    return out + _dbt_join_changes(a, b)


def _declared(c: Column) -> str | None:
    return declared_values_of(c.stats.note if c.stats else None)


def _declared_text(c: Column) -> str | None:
    return ", ".join(c.stats.top_values) if c.stats and _declared(c) else None


def _dbt_join_changes(a: Table, b: Table) -> list[MetadataChange]:
    """dbt ``relationships`` joins added or removed: documentation, but they move the join graph."""
    old = Counter(_fk_key(fk) for fk in a.foreign_keys if fk.source == "dbt")
    new = Counter(_fk_key(fk) for fk in b.foreign_keys if fk.source == "dbt")
    out = [MetadataChange(target=b.qualified_name, field=f"dbt join added {_fk(fk)}", new=_fk(fk))
           for fk in _fks_of([f for f in b.foreign_keys if f.source == "dbt"], new - old)]
    out += [MetadataChange(target=b.qualified_name, field=f"dbt join removed {_fk(fk)}", old=_fk(fk))
            for fk in _fks_of([f for f in a.foreign_keys if f.source == "dbt"], old - new)]
    return out


def _datasource_changes(a: DatasourceInfo, b: DatasourceInfo) -> list[MetadataChange]:
    out = _text_field("datasource", "description", a.description, b.description)
    out += _text_field("datasource", "tenant", a.tenant, b.tenant)
    for field in ("domains", "example_questions"):
        old, new = getattr(a, field), getattr(b, field)
        if old != new:
            out.append(MetadataChange(target="datasource", field=field, old="; ".join(old), new="; ".join(new)))
    if a.metrics != b.metrics:
        out.append(MetadataChange(target="datasource", field="metrics",
                                  old=", ".join(m.name for m in a.metrics),
                                  new=", ".join(m.name for m in b.metrics)))
    return out


def _code(text: str) -> str:
    """A markdown code span that survives backticks and newlines in identifiers.

    >>> _code("orders")
    '`orders`'
    >>> _code("we`ird")
    '`` we`ird ``'
    """
    flat = " ".join(str(text).splitlines()) if text else ""
    if "`" in flat:
        return f"`` {flat} ``"
    return f"`{flat}`"


def _cols(cols: list[str]) -> str:
    return "(" + ", ".join(_code(c) for c in cols) + ")"


def _null(nullable: bool) -> str:
    return "NULL" if nullable else "NOT NULL"


def _fk(fk: ForeignKey) -> str:
    ref = f"{fk.ref_schema}.{fk.ref_table}" if fk.ref_schema else fk.ref_table
    return f"{_cols(fk.columns)} → {_code(ref)}{_cols(fk.ref_columns)}"


def _bullets(items: list[str], max_items: int) -> list[str]:
    shown = [f"- {item}" for item in items[:max_items]]
    if len(items) > max_items:
        shown.append(f"- ... and {len(items) - max_items} more")
    return shown
