"""The ``schema_store`` resource: the SchemaStore, built once per run (or per process) on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field, PrivateAttr

from nl2sql_assets.config import Settings
from resources._settings import resolve_settings

if TYPE_CHECKING:
    from nl2sql_assets.schema.store import SchemaStore


class SchemaStoreResource(dg.ConfigurableResource):
    """SQLAlchemy URL of the schema store; ``None`` means ``SCHEMA_STORE_URL`` or the SQLite default.

    The URL may carry a password: give it as ``dg.EnvVar("SCHEMA_STORE_URL")`` so the UI
    shows the variable's name, never its value.
    """

    url: str | None = Field(
        default=None,
        description="SQLAlchemy URL of the schema store. Default: SCHEMA_STORE_URL, else SQLite in NL2SQL_HOME.",
    )
    _store: SchemaStore | None = PrivateAttr(default=None)

    def settings(self) -> Settings:
        return resolve_settings(schema_store_url=self.url)

    def get_store(self) -> SchemaStore:
        """The store, built on first use and kept for the life of this resource."""
        if self._store is None:
            from nl2sql_assets.schema.store import build_schema_store

            self._store = build_schema_store(self.settings())
        return self._store

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()

    def close(self) -> None:
        store, self._store = self._store, None
        close = getattr(store, "close", None) or getattr(store, "dispose", None)
        if callable(close):
            close()
