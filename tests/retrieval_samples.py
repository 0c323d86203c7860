"""Generated schemas and a small retrieval world (real SQLite schema store, real embedded Chroma).

``generated_snapshot`` makes a random but readable schema: business-like table names, a
foreign-key tree (so bridge tables exist), descriptions on some columns. ``World`` registers
snapshots in a real :class:`SqlSchemaStore` and indexes their chunks in a real
:class:`ChromaVectorStore` (embedded); unit tests pass the HashEmbedder, end-to-end tests the
real model.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import chromadb
from chromadb.config import Settings as ChromaSettings

from nl2sql_assets.indexing.chunk_builder import build_chunks
from nl2sql_assets.indexing.embeddings import EmbeddingService
from nl2sql_assets.indexing.vector_store import ChromaVectorStore
from nl2sql_assets.retrieval.models import RetrieverConfig
from nl2sql_assets.retrieval.retriever import SchemaRetriever
from nl2sql_assets.schema.models import Column, ColumnStats, DatasourceInfo, ForeignKey, SchemaSnapshot, Table
from nl2sql_assets.schema.store import SqlSchemaStore

CAPTURED = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
ENTITIES = ("customer", "order", "invoice", "product", "supplier", "warehouse", "shipment", "employee",
            "department", "project", "ticket", "agent", "contract", "payment", "vehicle", "route", "patient",
            "doctor", "appointment", "course", "student", "teacher", "book", "author", "loan", "branch")
ATTRIBUTES = (("name", "TEXT", "text"), ("status", "TEXT", "text"), ("created_at", "TIMESTAMP", "datetime"),
              ("amount", "DECIMAL(10,2)", "decimal"), ("city", "TEXT", "text"), ("country", "TEXT", "text"),
              ("quantity", "INTEGER", "integer"), ("rating", "INTEGER", "integer"), ("email", "TEXT", "text"),
              ("start_date", "DATE", "date"), ("price", "DECIMAL(10,2)", "decimal"), ("title", "TEXT", "text"),
              ("weight_kg", "REAL", "float"), ("phone", "TEXT", "text"), ("notes", "TEXT", "text"))
CITIES = ("Alameda", "Rotterdam", "Fresno", "Lyon", "Osaka", "Porto")


def generated_snapshot(seed: int, *, datasource_id: str = "gen", tenant: str = "default", n_tables: int = 6,
                       entities: tuple[str, ...] | None = None) -> SchemaSnapshot:
    """A registered-looking snapshot: ``n_tables`` tables, each but the first referencing an earlier one."""
    rng = random.Random(seed)
    names = list(entities) if entities else rng.sample(ENTITIES, n_tables)
    tables = []
    for i, entity in enumerate(names[:n_tables]):
        cols = [Column(name=f"{entity}_id", ordinal=1, declared_type="INTEGER", type_family="integer",
                       nullable=False, is_primary_key=True)]
        fks = []
        if i:
            parent = names[rng.randrange(i)]
            cols.append(Column(name=f"{parent}_id", ordinal=2, declared_type="INTEGER", type_family="integer",
                               is_foreign_key=True))
            fks.append(ForeignKey(columns=[f"{parent}_id"], ref_table=f"{parent}s", ref_columns=[f"{parent}_id"]))
        for attr, declared, family in rng.sample(ATTRIBUTES, 4):
            stats = None
            if attr == "city":
                stats = ColumnStats(distinct_count=len(CITIES), top_values=list(CITIES))
            cols.append(Column(name=f"{entity}_{attr}", ordinal=len(cols) + 1, declared_type=declared,
                               type_family=family, stats=stats,  # type: ignore[arg-type]
                               description=f"{attr.replace('_', ' ')} of the {entity}" if rng.random() < 0.5 else None))
        tables.append(Table(name=f"{entity}s", primary_key=[f"{entity}_id"], columns=cols, foreign_keys=fks,
                            comment=f"One row per {entity}."))
    info = DatasourceInfo(id=datasource_id, dialect="sqlite", tenant=tenant,
                          description=f"{', '.join(names[:n_tables])} records")
    return SchemaSnapshot.create(info, tables, CAPTURED)


class World:
    """A schema store and a vector store in ``root``, filled by :meth:`add`."""

    def __init__(self, root: Path, provider: object) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.schema_store = SqlSchemaStore(f"sqlite:///{root / 'schema.db'}")
        self.embeddings = EmbeddingService(provider)  # type: ignore[arg-type]
        path = str(root / "chroma")
        self.vector_store = ChromaVectorStore(
            lambda: chromadb.PersistentClient(path=path, settings=ChromaSettings(anonymized_telemetry=False)),
            self.embeddings)

    def add(self, snapshot: SchemaSnapshot, *, index: bool = True, chunks_from: SchemaSnapshot | None = None) -> str:
        """Register ``snapshot``; index its chunks (or, to simulate a stale index, ``chunks_from``'s)."""
        registered = self.schema_store.register_snapshot(snapshot).snapshot
        version = str(registered.schema_version)
        if index:
            source = (chunks_from or snapshot).with_version(version)
            chunks = build_chunks(source)
            self.vector_store.refresh_schema_chunks(registered.datasource.id, version, chunks.chunks,
                                                    tenant_id=registered.datasource.tenant)
        return version

    def retriever(self, config: RetrieverConfig | None = None, *, vector_store: object | None = None) -> SchemaRetriever:
        return SchemaRetriever(self.schema_store, vector_store or self.vector_store, self.embeddings,  # type: ignore[arg-type]
                               config=config)

    def close(self) -> None:
        self.vector_store.close()
        self.schema_store.close()
