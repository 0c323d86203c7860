"""What the asset graph says about the assets beyond computing them: sources, owners, versions, kinds.

- Each datasource of the datasources file is an external asset ``datasource/<id>`` (no
  materialization function) upstream of ``schema_snapshot``, with its engine and tenant, so
  the lineage graph shows which database feeds the index. Its observations (the drift sensor,
  each ``schema_snapshot`` run) carry the fingerprint last seen. Never its URL.
- Group (``NL2SQL_ASSET_GROUP``) and owners (``NL2SQL_ASSET_OWNERS``) come from the settings
  when the code location loads; the assets modules keep the defaults.
- ``code_version`` = package version + a hash of the code that shapes the asset's data, so the
  UI flags partitions built by an older chunk builder (or adapter) as stale.
- ``enriched_snapshot`` has the ``openai`` kind only when ``ENRICHMENT=openai``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from importlib import metadata as importlib_metadata
from pathlib import Path

import dagster as dg

from nl2sql_assets.config import DatasourceConfig, Settings
from nl2sql_assets.drift import DriftResult
from nl2sql_assets.pipeline import names
from nl2sql_assets.pipeline.planning import DriftCursor

PACKAGE = "nl2sql-assets"
#: Dagster refuses longer tag values.
MAX_TAG_VALUE = 63
_PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: The modules (files or folders, under nl2sql_assets/) whose code decides each asset's data.
CODE_FILES: dict[str, tuple[str, ...]] = {
    names.SCHEMA_SNAPSHOT: ("adapters", "schema", "dbt"),
    names.ENRICHED_SNAPSHOT: ("indexing/enrichment.py",),
    names.SCHEMA_CHUNKS: ("indexing/chunk_builder.py", "indexing/models.py"),
    names.CHROMA_COLLECTION: ("indexing/chunk_builder.py", "indexing/models.py", "indexing/refresh_plan.py"),
}


def datasource_key(datasource_id: str) -> dg.AssetKey:
    return dg.AssetKey([names.DATASOURCE_KEY_PREFIX, datasource_id])


def engine(config: DatasourceConfig) -> str:
    """The database engine, from the URL scheme alone (no connection, no secret).

    >>> engine(DatasourceConfig(id="crm", url="postgresql+psycopg2://u:${PW}@db/crm"))
    'postgresql'
    """
    return config.scheme.split("+", 1)[0] or "unknown"


def datasource_spec(config: DatasourceConfig, settings: Settings) -> dg.AssetSpec:
    """The external asset of one datasource: what the file says about it, never its URL."""
    metadata: dict[str, object] = {"engine": engine(config), "tenant": config.tenant,
                                   "datasources_file": str(settings.datasources_path)}
    if config.domains:
        metadata["domains"] = ", ".join(config.domains)
    if config.schemas:
        metadata["schemas"] = ", ".join(config.schemas)
    return dg.AssetSpec(
        datasource_key(config.id), group_name=settings.asset_group, owners=list(settings.asset_owners),
        kinds={engine(config)}, metadata=metadata,
        tags={"tenant": config.tenant} if len(config.tenant) <= MAX_TAG_VALUE else {},  # filterable in the catalog
        description=(config.description or f"The {engine(config)} database '{config.id}'").rstrip(". ")
        + ". Observed by schema_drift_sensor and every schema_snapshot run: the fingerprint last seen.",
    )


def observation(datasource_id: str, *, fingerprint: str, schema_version: str | None, observed_by: str,
                checked_at: datetime, extra: dict[str, object] | None = None) -> dg.AssetObservation:
    """What was last seen of a datasource's structure, for its external asset."""
    return dg.AssetObservation(asset_key=datasource_key(datasource_id), metadata={
        "fingerprint": fingerprint, "fingerprint8": fingerprint[:8], "schema_version": schema_version or "",
        "observed_by": observed_by, "observed_at": checked_at.isoformat(timespec="seconds"), **(extra or {})})


def drift_observations(results: Sequence[DriftResult], previous: DriftCursor) -> list[dg.AssetObservation]:
    """The sensor's observations: only for a datasource whose fingerprint or metadata hash differs
    from what the cursor last saw (a tick every minute must not add an event per datasource)."""
    out = []
    for result in results:
        seen = previous.datasources.get(result.datasource_id)
        if not result.fingerprint or (seen is not None and seen.fingerprint == result.fingerprint
                                      and seen.metadata_hash == (result.metadata_hash or "")):
            continue
        out.append(observation(
            result.datasource_id, fingerprint=result.fingerprint, observed_by=names.DRIFT_SENSOR,
            schema_version=result.proposed_version or result.current_version, checked_at=result.checked_at,
            extra={"drift": result.status, "metadata_hash8": (result.metadata_hash or "")[:8],
                   "tables": result.table_count if result.table_count is not None else -1}))
    return out


@cache
def package_version() -> str:
    try:
        return importlib_metadata.version(PACKAGE)
    except importlib_metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"


@cache
def code_version(asset: str) -> str:
    """``<package version>+<sha256[:10] of the asset's CODE_FILES>``."""
    digest = hashlib.sha256()
    for entry in CODE_FILES[asset]:
        path = _PACKAGE_DIR / entry
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(file.relative_to(_PACKAGE_DIR).as_posix().encode())
            digest.update(file.read_bytes())
    return f"{package_version()}+{digest.hexdigest()[:10]}"


def decorate(assets: Sequence[dg.AssetsDefinition | dg.AssetSpec], settings: Settings,
             configs: Sequence[DatasourceConfig]) -> list[dg.AssetsDefinition | dg.AssetSpec]:
    """The index assets with the configured group and owners, code versions, accurate kinds, and
    every datasource as an upstream of ``schema_snapshot``."""
    sources = [dg.AssetDep(datasource_key(c.id)) for c in configs]

    def spec(s: dg.AssetSpec) -> dg.AssetSpec:
        name = s.key.to_user_string()
        changes: dict[str, object] = {"group_name": settings.asset_group, "owners": list(settings.asset_owners)}
        if name in CODE_FILES:
            changes["code_version"] = code_version(name)
        if name == names.ENRICHED_SNAPSHOT:
            changes["kinds"] = {"openai"} if settings.enrichment == "openai" else {"python"}
        if name == names.SCHEMA_SNAPSHOT and sources:
            changes["deps"] = [*s.deps, *sources]
        return s.replace_attributes(**changes)  # type: ignore[arg-type]

    return list(dg.map_asset_specs(spec, assets))
