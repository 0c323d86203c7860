"""Typed chunks, the model identity and the vector-search value types.

One pydantic class per chunk type, each with a ``Literal`` tag. Ids are deterministic:
``<datasource>:<schema_version>:<type>:<identity>``; the identity joins names with ``.`` and
double-quotes a name holding ``.``, ``:``, ``#`` or ``"`` (:func:`quote_name`), so any two objects
get two ids and plain names keep the ids they always had. Page content never contains the schema
version, so unchanged items keep the same text (and the same cached vector) across versions.
Metadata is Chroma-compatible: only str, int, float and bool values; lists are JSON strings.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.schema.fingerprint import canonical_json, sha256_hex

ChunkType = Literal["schema.datasource", "schema.table", "schema.column", "schema.relationship", "schema.metric"]
CHUNK_TYPES: tuple[ChunkType, ...] = (
    "schema.datasource", "schema.table", "schema.column", "schema.relationship", "schema.metric",
)
MetadataValue = str | int | float | bool

_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NON_WORD_RE = re.compile(r"[^0-9A-Za-z\u00C0-\uFFFF]+")


def split_identifier(name: str) -> str:
    """Identifier words in lower case, for matching plain-language questions.

    >>> split_identifier("customer_id")
    'customer id'
    >>> split_identifier("OrderDate")
    'order date'
    >>> split_identifier("HTTPStatusCode")
    'http status code'
    """
    spaced = _CAMEL_RE.sub(" ", name)
    return " ".join(w for w in _NON_WORD_RE.split(spaced) if w).lower()


def _words(name: str) -> str:
    """The split form alone (compact lists); the raw name when splitting leaves nothing."""
    return split_identifier(name) or name


def _sentence(text: str) -> str:
    """``text`` stripped and ending with punctuation.

    >>> _sentence(" Headcount per department "), _sentence("Who left?")
    ('Headcount per department.', 'Who left?')
    """
    text = text.strip()
    return text if not text or text[-1] in ".?!" else text + "."


def _named(name: str) -> str:
    """``name`` followed by its split form where that adds words."""
    split = split_identifier(name)
    return name if split == name.lower() else f"{name} ({split})"


# what would blur an identity: "." between parts, ":" between id fields, "#g" of a generation, '"'
ID_SEPARATORS = '.:#"'


def quote_name(name: str, separators: str = ID_SEPARATORS) -> str:
    """``name`` as one unambiguous part of an identity: as is, or double-quoted (``""`` inside)
    when it is empty or holds a separator.

    >>> quote_name("orders"), quote_name("Free Meal Count (K-12)"), quote_name("a.b"), quote_name('x"y')
    ('orders', 'Free Meal Count (K-12)', '"a.b"', '"x""y"')
    """
    if name and not any(ch in name for ch in separators):
        return name
    return '"' + name.replace('"', '""') + '"'


def qualified_identity(schema_name: str | None, *names: str) -> str:
    """``schema.table[.column]`` with each part quoted where needed (no schema part without one).

    Table ``a.b`` with column ``c`` and table ``a`` with column ``b.c`` stay apart:

    >>> qualified_identity("main", "a.b", "c"), qualified_identity("main", "a", "b.c"), qualified_identity(None, "t")
    ('main."a.b".c', 'main.a."b.c"', 't')
    """
    return ".".join(quote_name(p) for p in ([schema_name, *names] if schema_name else names))


class ModelIdentity(BaseModel):
    """Which model made a vector; recorded with everything embedded."""

    model_config = ConfigDict(frozen=True)

    provider: str
    model: str
    dimension: int

    @property
    def key(self) -> str:
        """``provider/model/dimension``.

        >>> ModelIdentity(provider="local", model="all-MiniLM-L6-v2", dimension=384).key
        'local/all-MiniLM-L6-v2/384'
        """
        return f"{self.provider}/{self.model}/{self.dimension}"


class _Chunk(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    datasource_id: str
    schema_version: str
    tenant_id: str = "default"

    def get_page_content(self) -> str:  # pragma: no cover - overridden by every chunk type
        raise TypeError(f"{type(self).__name__} has no page content")

    def _specific_metadata(self) -> dict[str, MetadataValue]:
        return {}

    def get_metadata(self) -> dict[str, MetadataValue]:
        meta: dict[str, MetadataValue] = {
            "datasource_id": self.datasource_id,
            "schema_version": self.schema_version,
            "tenant_id": self.tenant_id,
            "chunk_type": self.type,  # type: ignore[attr-defined]
            "schema_name": "",
            "table": "",
            "column": "",
            "dtype": "",
            "pii": False,
            "join_pairs": "",
        }
        meta.update(self._specific_metadata())
        meta["content_hash"] = self.content_hash
        return meta

    @property
    def content_hash(self) -> str:
        """Hash of the text and the version-independent metadata: equal hash, equal chunk."""
        specific = {k: v for k, v in self._specific_metadata().items()}
        return sha256_hex(canonical_json([self.tenant_id, self.get_page_content(), specific]))


class DatasourceChunk(_Chunk):
    type: Literal["schema.datasource"] = "schema.datasource"
    dialect: str
    description: str | None = None
    summary: str | None = None
    domains: list[str] = Field(default_factory=list)
    example_questions: list[str] = Field(default_factory=list)

    def get_page_content(self) -> str:
        parts = [f"Datasource {_named(self.datasource_id)}."]
        if self.description:
            parts.append(self.description.rstrip(".") + ".")
        if self.summary:
            parts.append(self.summary)
        if self.domains:
            parts.append("Domains: " + ", ".join(self.domains) + ".")
        if self.example_questions:
            parts.append("Questions: " + " ".join(_sentence(q) for q in self.example_questions if q.strip()))
        return " ".join(parts)

    def _specific_metadata(self) -> dict[str, MetadataValue]:
        return {"dialect": self.dialect}


class TableChunk(_Chunk):
    type: Literal["schema.table"] = "schema.table"
    schema_name: str | None = None
    table: str
    kind: Literal["table", "view"] = "table"
    description: str | None = None
    primary_key: list[str] = Field(default_factory=list)
    columns: list[tuple[str, str]] = Field(default_factory=list)
    foreign_keys: list[str] = Field(default_factory=list)
    row_count: int | None = None

    def get_page_content(self) -> str:
        head = f"{'View' if self.kind == 'view' else 'Table'} {_named(self.table)}"
        parts = [head + (f": {self.description.rstrip('.')}." if self.description else ".")]
        if self.primary_key:
            parts.append("Primary key: " + ", ".join(_words(k) for k in self.primary_key) + ".")
        if self.columns:
            parts.append("Columns: " + ", ".join(f"{_words(n)} {t}".rstrip() for n, t in self.columns) + ".")
        if self.foreign_keys:
            parts.append("References: " + "; ".join(self.foreign_keys) + ".")
        if self.row_count is not None:  # the builder rounds counts >= 100 to 2 significant digits
            parts.append(f"{self.row_count:,} rows." if self.row_count < 100 else f"About {self.row_count:,} rows.")
        return " ".join(parts)

    def _specific_metadata(self) -> dict[str, MetadataValue]:
        return {
            "schema_name": self.schema_name or "",
            "table": self.table,
            "kind": self.kind,
            "primary_key": json.dumps(self.primary_key),
            "columns": json.dumps([n for n, _ in self.columns]),
            "foreign_keys": json.dumps(self.foreign_keys),
            "row_count": -1 if self.row_count is None else self.row_count,
        }


class ColumnChunk(_Chunk):
    type: Literal["schema.column"] = "schema.column"
    schema_name: str | None = None
    table: str
    table_description: str | None = None
    column: str
    dtype: str = ""
    type_family: str = "other"
    description: str | None = None
    synonyms: list[str] = Field(default_factory=list)
    stats_text: str | None = None
    sample_values: list[str] = Field(default_factory=list)
    is_primary_key: bool = False
    references: str | None = None
    pii: bool = False

    def get_page_content(self) -> str:
        kind = self.type_family if self.type_family != "other" else (self.dtype.lower() or "other")
        parts = [f"Column {_named(self.column)} of table {_named(self.table)}, {kind}."]
        if self.description:
            parts.append(self.description.rstrip(".") + ".")
        if self.synonyms:
            parts.append("Also called: " + ", ".join(self.synonyms) + ".")
        if self.is_primary_key:
            parts.append("Primary key.")
        if self.references:
            parts.append(f"References {self.references}.")
        if self.stats_text:
            parts.append(self.stats_text)
        if self.sample_values and not self.pii:
            parts.append("Values: " + ", ".join(self.sample_values) + ".")
        if self.table_description:
            parts.append(f"Table: {_sentence(self.table_description)}")
        return " ".join(parts)

    def _specific_metadata(self) -> dict[str, MetadataValue]:
        return {
            "schema_name": self.schema_name or "",
            "table": self.table,
            "column": self.column,
            "dtype": self.dtype,
            "type_family": self.type_family,
            "pii": self.pii,
            "is_primary_key": self.is_primary_key,
        }


class RelationshipChunk(_Chunk):
    type: Literal["schema.relationship"] = "schema.relationship"
    from_schema: str | None = None
    from_table: str
    from_columns: list[str]
    to_schema: str | None = None
    to_table: str
    to_columns: list[str]
    cardinality: Literal["one-to-one", "many-to-one", "many-to-many"] = "many-to-one"

    def get_page_content(self) -> str:
        pairs = ", ".join(f"{self.from_table}.{a} = {self.to_table}.{b}"
                          for a, b in zip(self.from_columns, self.to_columns, strict=False))
        return (f"Join {_named(self.from_table)} to {_named(self.to_table)} on {pairs} "
                f"({self.cardinality}).")

    def _specific_metadata(self) -> dict[str, MetadataValue]:
        return {
            "schema_name": self.from_schema or "",
            "table": self.from_table,
            "ref_schema": self.to_schema or "",
            "ref_table": self.to_table,
            "join_pairs": json.dumps([list(p) for p in zip(self.from_columns, self.to_columns, strict=False)]),
            "cardinality": self.cardinality,
        }


class MetricChunk(_Chunk):
    type: Literal["schema.metric"] = "schema.metric"
    name: str
    definition: str
    grain: str | None = None
    description: str | None = None
    tables: list[str] = Field(default_factory=list)

    def get_page_content(self) -> str:
        parts = [f"Metric {_named(self.name)}: {self.definition}."]
        if self.description:
            parts.append(self.description.rstrip(".") + ".")
        if self.grain:
            parts.append(f"Grain: {self.grain}.")
        return " ".join(parts)

    def _specific_metadata(self) -> dict[str, MetadataValue]:
        return {"metric": self.name, "tables": json.dumps(self.tables)}


SchemaChunk = Annotated[
    DatasourceChunk | TableChunk | ColumnChunk | RelationshipChunk | MetricChunk,
    Field(discriminator="type"),
]


class ChunkSet(BaseModel):
    """All chunks of one (datasource, schema_version), in deterministic order."""

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    schema_version: str
    tenant_id: str
    chunks: list[SchemaChunk]

    def counts(self) -> dict[str, int]:
        out = {t: 0 for t in CHUNK_TYPES}
        for chunk in self.chunks:
            out[chunk.type] += 1
        return out


class SearchFilter(BaseModel):
    """Which chunks a vector search may return.

    ``versions`` maps datasource id to the schema version to search; a datasource absent
    from it is searched at its live version. ``datasource_ids`` None means every datasource
    the tenant (if given) can see. ``state_max_age_s`` is how old the live versions and
    generations the search filters on may be (0: read for this search; the retriever, which
    reuses live versions for ``RetrieverConfig.live_version_ttl_s``, passes that).
    """

    model_config = ConfigDict(frozen=True)

    tenant_id: str | None = None
    datasource_ids: list[str] | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    chunk_types: list[ChunkType] | None = None
    tables: list[str] | None = None
    state_max_age_s: float = Field(default=0.0, ge=0.0)


class StoredChunk(BaseModel):
    """A chunk as the vector store holds it: its text and its metadata (``get_metadata()``)."""

    model_config = ConfigDict(frozen=True)

    id: str
    chunk_type: ChunkType
    datasource_id: str
    schema_version: str
    document: str
    metadata: dict[str, MetadataValue]


class SearchHit(StoredChunk):
    """A stored chunk with its similarity to the query (``1 - cosine distance``)."""

    score: float


_GENERATION_MARK = "#g"


def record_id(chunk_id: str, generation: int) -> str:
    """The storage id of a chunk rewritten while its old record is still visible to readers.

    >>> record_id("shop:v1:column:orders.total", 7)
    'shop:v1:column:orders.total#g7'
    """
    return f"{chunk_id}{_GENERATION_MARK}{generation}"


class ChunkScore(BaseModel):
    """A stored record's id and its similarity to the query, without the chunk: what a caller that
    knows the chunks already (the retriever, from the snapshot) needs of a search.

    ``record_id`` is the chunk id, or ``<chunk id>#g<generation>`` for a chunk rewritten while its
    old row was still visible to readers; look it up as it is first (an identifier may itself end
    in ``#g1``), then as :attr:`chunk_id`.
    """

    model_config = ConfigDict(frozen=True)

    record_id: str
    score: float

    @property
    def chunk_id(self) -> str:
        """
        >>> ChunkScore(record_id="shop:v1:column:orders.total#g7", score=0.5).chunk_id
        'shop:v1:column:orders.total'
        >>> ChunkScore(record_id="shop:v1:table:orders", score=0.5).chunk_id
        'shop:v1:table:orders'
        """
        head, sep, tail = self.record_id.rpartition(_GENERATION_MARK)
        return head if sep and tail.isdigit() else self.record_id


class RefreshReport(BaseModel):
    """What one ``refresh_schema_chunks`` call did."""

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    schema_version: str
    total: int
    unchanged: int
    upserted: int
    deleted: int
    embedded: int
    from_cache: int
    model: ModelIdentity
    seconds: float
    reused: int = 0
    generation: int = 0
    waited_s: float = 0.0  # for another writer of an embedded store (writer_lock)


class IndexState(BaseModel):
    """The vector store's per-datasource pointer: which version readers see, and what it holds.

    ``generation`` increases with every refresh; readers see a record when its generation
    range covers the datasource's current generation (see ``refresh_plan``).
    ``content_digest`` is :func:`chunks_digest` of the live version's chunks, so an audit can
    compare it with chunks rebuilt from the schema store.
    """

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    tenant_id: str
    live_version: str | None
    generation: int
    model_key: str
    chunk_count: int
    content_digest: str
    updated_at: str


def chunks_digest(chunks: Iterable[_Chunk]) -> str:
    """Order-independent digest of (id, content_hash) pairs: equal digest, equal chunk set.

    >>> chunks_digest([]) == chunks_digest(())
    True
    """
    pairs = sorted([c.id, c.content_hash] for c in chunks)
    return sha256_hex(canonical_json(pairs))
