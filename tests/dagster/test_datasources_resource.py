"""The datasources resource: every load sees the file as it is now, parsed once per text."""

from __future__ import annotations

from pathlib import Path

import pytest

from nl2sql_assets.errors import ConfigError, UnknownDatasourceError
from resources.datasources import DatasourcesResource


def test_each_load_sees_the_file_as_it_is_now(tmp_path: Path) -> None:
    path = tmp_path / "datasources.yaml"
    path.write_text("datasources:\n  - id: crm\n    url: sqlite:///crm.db\n", encoding="utf-8")
    resource = DatasourcesResource(path=str(path))
    first = resource.load()
    assert [c.id for c in first] == ["crm"]
    again = resource.load()
    assert again == first and again is not first  # the same parse, in a list of its own
    again.clear()
    assert [c.id for c in resource.load()] == ["crm"]  # a caller's list is not the cached one

    path.write_text("datasources:\n  - id: crm\n    url: sqlite:///crm.db\n  - id: hr\n    url: sqlite:///hr.db\n",
                    encoding="utf-8")
    assert [c.id for c in resource.load()] == ["crm", "hr"]
    assert resource.get("hr").url == "sqlite:///hr.db"
    with pytest.raises(UnknownDatasourceError, match="crm, hr"):
        resource.get("sales")

    path.write_text("datasources:\n  - id: crm\n    url: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid YAML"):
        resource.load()
    path.unlink()
    with pytest.raises(ConfigError, match="file not found"):
        resource.load()
