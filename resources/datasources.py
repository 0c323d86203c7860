"""The ``datasources`` resource: the datasources file (docs/datasources-file.md), read when needed.

The file is re-read on every :meth:`DatasourcesResource.load`, so a sensor tick sees
datasources added since the last one; text already parsed is not parsed again (every run of an
``index`` over many datasources loads the file twice, and parsing costs as much as the file is
long). URLs keep their ``${VAR}`` references until an adapter opens them; nothing here resolves
or shows a credential.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field

from nl2sql_assets.config import DatasourceConfig, load_datasources
from nl2sql_assets.errors import UnknownDatasourceError

_PARSED: dict[tuple[str, bytes], list[DatasourceConfig]] = {}
_PARSED_KEPT = 4


class DatasourcesResource(dg.ConfigurableResource):
    """Where the datasources file is."""

    path: str = Field(description="Path of the datasources file (NL2SQL_DATASOURCES, default "
                                  "$NL2SQL_HOME/datasources.yaml).")

    def load(self) -> list[DatasourceConfig]:
        """Every datasource in the file. Raises ConfigError naming the entry and field."""
        path = Path(self.path)
        try:
            key = (str(path.absolute()), path.read_bytes())
        except OSError:
            return load_datasources(path)  # its error names what is wrong with the path
        if key in _PARSED:
            return list(_PARSED[key])
        configs = load_datasources(path)
        try:
            unchanged = path.read_bytes() == key[1]  # an edit in between: that parse is not this text's
        except OSError:
            unchanged = False
        if unchanged:
            while len(_PARSED) >= _PARSED_KEPT:
                _PARSED.pop(next(iter(_PARSED)))
            _PARSED[key] = configs
        return list(configs)

    def get(self, datasource_id: str) -> DatasourceConfig:
        """One datasource by id. Raises UnknownDatasourceError listing the known ones."""
        configs = self.load()
        for config in configs:
            if config.id == datasource_id:
                return config
        raise UnknownDatasourceError(datasource_id, [c.id for c in configs])
