"""The ``datasources`` resource: the datasources file (docs/datasources-file.md), read when needed.

The file is re-read on every :meth:`DatasourcesResource.load`, so a sensor tick sees
datasources added since the last one. URLs keep their ``${VAR}`` references until an
adapter opens them; nothing here resolves or shows a credential.
"""

from __future__ import annotations

import dagster as dg
from pydantic import Field

from nl2sql_assets.config import DatasourceConfig, load_datasources
from nl2sql_assets.errors import UnknownDatasourceError


class DatasourcesResource(dg.ConfigurableResource):
    """Where the datasources file is."""

    path: str = Field(description="Path of the datasources file (NL2SQL_DATASOURCES, default "
                                  "$NL2SQL_HOME/datasources.yaml).")

    def load(self) -> list[DatasourceConfig]:
        """Every datasource in the file. Raises ConfigError naming the entry and field."""
        return load_datasources(self.path)

    def get(self, datasource_id: str) -> DatasourceConfig:
        """One datasource by id. Raises UnknownDatasourceError listing the known ones."""
        configs = self.load()
        for config in configs:
            if config.id == datasource_id:
                return config
        raise UnknownDatasourceError(datasource_id, [c.id for c in configs])
