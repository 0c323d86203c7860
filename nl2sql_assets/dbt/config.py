"""The ``dbt`` entry of a datasource: where the project's artifacts are.

Paths are taken relative to the datasources file (``load_datasources`` resolves them), so a
file and its dbt project can move together. The artifacts are read when the datasource is,
not when the file is loaded: a missing manifest fails that datasource alone, naming the file.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict


class DbtConfig(BaseModel):
    """``manifest`` (required: ``target/manifest.json`` of ``dbt parse``/``build``) and an optional
    ``catalog`` (``target/catalog.json`` of ``dbt docs generate``: relation names as the
    database spells them)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    manifest: Path
    catalog: Path | None = None

    def relative_to(self, base: Path) -> DbtConfig:
        """The same entry with relative paths taken from ``base`` (the datasources file's folder).

        >>> DbtConfig(manifest="t/manifest.json").relative_to(Path("/etc/ds")).manifest.as_posix()
        '/etc/ds/t/manifest.json'
        >>> DbtConfig(manifest="/abs/m.json").relative_to(Path("/etc")).manifest.as_posix()
        '/abs/m.json'
        """
        def resolve(path: Path | None) -> Path | None:
            if path is None:
                return None
            path = path.expanduser()
            return path if path.is_absolute() else base / path

        return DbtConfig(manifest=resolve(self.manifest), catalog=resolve(self.catalog))  # type: ignore[arg-type]
