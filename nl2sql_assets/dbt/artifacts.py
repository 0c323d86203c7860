"""Reading dbt's artifacts (``manifest.json``, ``catalog.json``) as JSON, into models of the parts used.

Only what :mod:`nl2sql_assets.dbt.extract` needs is modelled (extra keys are ignored), so
manifests of any recent dbt version read the same and dbt itself is not needed at run time.
Every way an artifact cannot be used (missing, unreadable, not JSON, not a dbt artifact, a
part of the wrong shape) is a :class:`~nl2sql_assets.errors.DatasourceError` naming the file.
Parsed artifacts are cached by path, size and modification time: a drift tick over an
unchanged manifest does not parse it again.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nl2sql_assets.dbt.config import DbtConfig
from nl2sql_assets.errors import DatasourceError

logger = logging.getLogger(__name__)

_CACHE_SIZE = 8


class _Loose(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


class ColumnDoc(_Loose):
    name: str
    description: str | None = ""
    meta: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)


class NodeConfig(_Loose):
    enabled: bool = True
    materialized: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] | str = Field(default_factory=list)


class TestMetadata(_Loose):
    name: str
    namespace: str | None = None
    kwargs: dict[str, Any] = Field(default_factory=dict)


class DependsOn(_Loose):
    nodes: list[str] = Field(default_factory=list)


class ManifestNode(_Loose):
    """A model, seed, snapshot, test (``nodes``) or a source (``sources``)."""

    unique_id: str
    resource_type: str
    name: str
    package_name: str | None = None
    database: str | None = None
    schema_name: str | None = Field(default=None, alias="schema")
    alias: str | None = None
    identifier: str | None = None  # sources
    source_name: str | None = None  # sources
    description: str | None = ""
    columns: dict[str, ColumnDoc] = Field(default_factory=dict)
    meta: dict[str, Any] = Field(default_factory=dict)
    tags: list[str] = Field(default_factory=list)
    config: NodeConfig = Field(default_factory=NodeConfig)
    test_metadata: TestMetadata | None = None
    attached_node: str | None = None
    column_name: str | None = None
    depends_on: DependsOn = Field(default_factory=DependsOn)

    @property
    def relation_identifier(self) -> str:
        """The relation's name in the database: a source's ``identifier``, a model's ``alias``."""
        return self.identifier or self.alias or self.name


class MetricInput(_Loose):
    name: str
    filter: Any = None
    alias: str | None = None


class MetricTypeParams(_Loose):
    measure: MetricInput | None = None
    numerator: MetricInput | None = None
    denominator: MetricInput | None = None
    expr: str | None = None
    metrics: list[MetricInput] | None = None


class ManifestMetric(_Loose):
    unique_id: str
    name: str
    description: str | None = ""
    label: str | None = None
    type: str = "simple"
    type_params: MetricTypeParams = Field(default_factory=MetricTypeParams)
    filter: Any = None


class Measure(_Loose):
    name: str
    agg: str
    expr: str | None = None
    description: str | None = None


class NodeRelation(_Loose):
    alias: str
    schema_name: str
    database: str | None = None


class SemanticModel(_Loose):
    unique_id: str
    name: str
    description: str | None = None
    node_relation: NodeRelation | None = None
    measures: list[Measure] = Field(default_factory=list)
    depends_on: DependsOn = Field(default_factory=DependsOn)


class Manifest(_Loose):
    nodes: dict[str, ManifestNode] = Field(default_factory=dict)
    sources: dict[str, ManifestNode] = Field(default_factory=dict)
    metrics: dict[str, ManifestMetric] = Field(default_factory=dict)
    semantic_models: dict[str, SemanticModel] = Field(default_factory=dict)


class CatalogColumn(_Loose):
    name: str
    type: str | None = None


class CatalogMetadata(_Loose):
    database: str | None = None
    schema_name: str | None = Field(default=None, alias="schema")
    name: str


class CatalogNode(_Loose):
    metadata: CatalogMetadata
    columns: dict[str, CatalogColumn] = Field(default_factory=dict)


class Catalog(_Loose):
    nodes: dict[str, CatalogNode] = Field(default_factory=dict)
    sources: dict[str, CatalogNode] = Field(default_factory=dict)

    def relation(self, unique_id: str) -> CatalogNode | None:
        return self.nodes.get(unique_id) or self.sources.get(unique_id)


class DbtArtifacts(_Loose):
    """A project's manifest (and catalog, when configured), as read from ``manifest_path``."""

    manifest_path: Path
    manifest: Manifest
    catalog: Catalog | None = None


_lock = threading.Lock()
_cache: dict[tuple[str, str], tuple[tuple[int, int], BaseModel]] = {}


def _read_json(path: Path, kind: str, datasource_id: str) -> tuple[tuple[int, int], dict[str, Any]]:
    where = f"dbt {kind} {path}"
    try:
        stat = path.stat()
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DatasourceError(datasource_id, f"{where}: file not found (run `dbt parse` or check the "
                                             "datasources file's dbt entry)") from None
    except IsADirectoryError:
        raise DatasourceError(datasource_id, f"{where}: is a folder, not a file") from None
    except OSError as exc:
        raise DatasourceError(datasource_id, f"{where}: cannot be read: {exc.strerror or exc}") from None
    try:
        data = json.loads(raw)
    except UnicodeDecodeError as exc:
        raise DatasourceError(datasource_id, f"{where}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DatasourceError(datasource_id, f"{where}: not valid JSON at line {exc.lineno}, column {exc.colno}: "
                                             f"{exc.msg}") from None
    version = data.get("metadata", {}).get("dbt_schema_version", "") if isinstance(data, dict) else ""
    if not isinstance(version, str) or f"/{kind}/" not in version:
        raise DatasourceError(datasource_id, f"{where}: not a dbt {kind} (its metadata.dbt_schema_version "
                                             f"is {version or 'missing'!s})")
    return (stat.st_mtime_ns, stat.st_size), data


def _parse(path: Path, kind: str, model: type[BaseModel], datasource_id: str) -> BaseModel:
    key = (str(path.absolute()), kind)
    try:
        stat = path.stat()
        stamp = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        stamp = None
    with _lock:
        hit = _cache.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    stamp, data = _read_json(path, kind, datasource_id)
    try:
        parsed = model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise DatasourceError(datasource_id, f"dbt {kind} {path}: malformed at '{loc}': {err['msg']}") from None
    with _lock:
        if len(_cache) >= _CACHE_SIZE:
            _cache.pop(next(iter(_cache)))
        _cache[key] = (stamp, parsed)
    logger.debug("datasource %s: read dbt %s (%d bytes)", datasource_id, kind, stamp[1])
    return parsed


def load_artifacts(config: DbtConfig, datasource_id: str) -> DbtArtifacts:
    """The configured manifest (and catalog).

    Raises:
        DatasourceError: an artifact is missing, unreadable, not JSON, not a dbt artifact of its
            kind, or malformed; the message names the file.
    """
    manifest = _parse(config.manifest, "manifest", Manifest, datasource_id)
    catalog = _parse(config.catalog, "catalog", Catalog, datasource_id) if config.catalog else None
    return DbtArtifacts(manifest_path=config.manifest, manifest=manifest, catalog=catalog)  # type: ignore[arg-type]
