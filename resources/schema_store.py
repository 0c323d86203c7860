"""The ``schema_store`` resource: the SchemaStore, built once per run (or per process) on first use."""

from __future__ import annotations

import dagster as dg
from pydantic import Field, PrivateAttr

from nl2sql_assets.schema.store import SqlSchemaStore


class SchemaStoreResource(dg.ConfigurableResource):
    """SQLAlchemy URL of the schema store.

    The URL may carry a password: :func:`resources.build_resources` binds it as
    ``dg.EnvVar("SCHEMA_STORE_URL")`` when the variable is set, so the UI shows the
    variable's name, never its value.
    """

    url: str = Field(description="SQLAlchemy URL of the schema store (SCHEMA_STORE_URL, default SQLite "
                                 "in NL2SQL_HOME).")
    _store: SqlSchemaStore | None = PrivateAttr(default=None)

    def get_store(self) -> SqlSchemaStore:
        """The store, built on first use and kept for the life of this resource."""
        if self._store is None:
            self._store = SqlSchemaStore(self.url)
        return self._store

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()
