"""Settings from the environment and the datasources file.

Owns the one configuration schema (every variable of docs/configuration.md: ``NL2SQL_HOME``,
``NL2SQL_DATASOURCES``, ...), the datasources-file schema (docs/datasources-file.md),
``${VAR}`` expansion in URLs and credential redaction. Nothing here connects to anything,
and nothing here writes the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from nl2sql_assets.errors import ConfigError

DATASOURCE_ID_RE = re.compile(r"^[a-z0-9_]+$")
TENANT_ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
_VAR_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
DEFAULT_KEEP_VERSIONS = 3
_URL_PASSWORD_RE = re.compile(r"(?P<pre>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)(?P<pw>[^@\s]+)(?P<post>@)")


class Settings(BaseModel):
    """Everything the environment configures (docs/configuration.md), resolved once."""

    model_config = ConfigDict(frozen=True)

    home: Path
    datasources_path: Path
    dagster_home: Path
    embedding_provider: Literal["local", "openai"] = "local"
    embedding_model: str | None = None
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    enrichment: Literal["off", "openai"] = "off"
    chroma_host: str | None = None
    chroma_port: int = 8000
    schema_store_url: str
    keep_versions: int = DEFAULT_KEEP_VERSIONS

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read every variable of docs/configuration.md; an invalid value raises ConfigError naming it."""
        env = os.environ if env is None else env
        home = Path(env.get("NL2SQL_HOME") or ".nl2sql").expanduser().absolute()
        provider = (env.get("EMBEDDING_PROVIDER") or "local").strip().lower()
        if provider not in ("local", "openai"):
            raise ConfigError(f"must be 'local' or 'openai', got {provider!r}",
                              source="environment", field="EMBEDDING_PROVIDER")
        enrichment = (env.get("ENRICHMENT") or "off").strip().lower()
        if enrichment not in ("off", "openai"):
            raise ConfigError(f"must be 'off' or 'openai', got {enrichment!r}",
                              source="environment", field="ENRICHMENT")
        port_text = env.get("CHROMA_PORT") or "8000"
        try:
            port = int(port_text)
            if not 0 < port < 65536:
                raise ValueError
        except ValueError:
            raise ConfigError(f"must be a TCP port number, got {port_text!r}",
                              source="environment", field="CHROMA_PORT") from None
        key = env.get("OPENAI_API_KEY")
        keep_text = env.get("NL2SQL_KEEP_VERSIONS") or str(DEFAULT_KEEP_VERSIONS)
        try:
            keep = int(keep_text)
        except ValueError:
            keep = 0
        if keep < 1:
            raise ConfigError(f"must be a whole number >= 1, got {keep_text!r}", source="environment",
                              field="NL2SQL_KEEP_VERSIONS")
        return cls(
            home=home,
            datasources_path=Path(env.get("NL2SQL_DATASOURCES") or home / "datasources.yaml").expanduser().absolute(),
            dagster_home=Path(env.get("DAGSTER_HOME") or home / "dagster").expanduser().absolute(),
            embedding_provider=provider,  # type: ignore[arg-type]
            embedding_model=env.get("EMBEDDING_MODEL") or None,
            openai_api_key=SecretStr(key) if key else None,
            openai_base_url=env.get("OPENAI_BASE_URL") or None,
            enrichment=enrichment,  # type: ignore[arg-type]
            chroma_host=env.get("CHROMA_HOST") or None,
            chroma_port=port,
            schema_store_url=env.get("SCHEMA_STORE_URL") or f"sqlite:///{home / 'schema_store.db'}",
            keep_versions=keep,
        )

    @classmethod
    def of(cls, **values: object) -> Settings:
        """Settings from explicit values (a resource's fields), with the same defaults and checks
        as :meth:`from_env`; reads no environment. ``None`` means the default.

        >>> Settings.of(home="/tmp/h", keep_versions=2).schema_store_url
        'sqlite:////tmp/h/schema_store.db'
        """
        unknown = set(values) - set(_ENV_NAMES)
        if unknown:
            raise TypeError(f"unknown settings: {sorted(unknown)}")
        return cls.from_env({_ENV_NAMES[k]: str(v) for k, v in values.items() if v is not None})

    @property
    def chroma_path(self) -> Path:
        return self.home / "chroma"

    @property
    def cache_path(self) -> Path:
        return self.home / "cache"

    @property
    def metrics_path(self) -> Path:
        """Where ``nl2sql-assets index`` writes its metrics (Prometheus node-exporter textfile format)."""
        return self.home / "metrics.prom"


#: Each setting's environment variable.
_ENV_NAMES = {
    "home": "NL2SQL_HOME", "datasources_path": "NL2SQL_DATASOURCES", "dagster_home": "DAGSTER_HOME",
    "embedding_provider": "EMBEDDING_PROVIDER", "embedding_model": "EMBEDDING_MODEL",
    "openai_api_key": "OPENAI_API_KEY", "openai_base_url": "OPENAI_BASE_URL", "enrichment": "ENRICHMENT",
    "chroma_host": "CHROMA_HOST", "chroma_port": "CHROMA_PORT", "schema_store_url": "SCHEMA_STORE_URL",
    "keep_versions": "NL2SQL_KEEP_VERSIONS",
}


class MetricConfig(BaseModel):
    """A business metric declared in the datasources file; emitted as a metric chunk."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    definition: str = Field(min_length=1)
    grain: str | None = None
    description: str | None = None


class Annotations(BaseModel):
    """A data dictionary for databases without comments (SQLite, say).

    ``tables`` maps a table name (or ``schema.table``) to its description, ``columns`` maps
    ``table.column`` (or ``schema.table.column``) to a description. They overlay the database's
    own comments and count toward the metadata hash, never the structural fingerprint.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tables: dict[str, str] = Field(default_factory=dict)
    columns: dict[str, str] = Field(default_factory=dict)
    synonyms: dict[str, list[str]] = Field(default_factory=dict)


class DatasourceConfig(BaseModel):
    """One entry of the datasources file (docs/datasources-file.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    url: str
    description: str | None = None
    domains: list[str] = Field(default_factory=list)
    example_questions: list[str] = Field(default_factory=list)
    tenant: str = "default"
    schemas: list[str] | None = None
    metrics: list[MetricConfig] = Field(default_factory=list)
    annotations: Annotations = Field(default_factory=Annotations)

    def resolved_url(self, env: Mapping[str, str] | None = None) -> str:
        """The URL with ``${VAR}`` expanded from the environment; the result holds secrets."""
        return expand_env(self.url, env, entry=self.id)

    @property
    def safe_url(self) -> str:
        """The URL as written, with any literal password masked; safe to log."""
        return redact_url(self.url)

    @property
    def scheme(self) -> str:
        return self.url.split("://", 1)[0].lower() if "://" in self.url else ""

    @property
    def is_duckdb(self) -> bool:
        return self.scheme.split("+", 1)[0] == "duckdb"


def expand_env(text: str, env: Mapping[str, str] | None = None, *, entry: str | None = None) -> str:
    """Replace ``${VAR}`` with the variable's value; a missing variable raises ConfigError.

    >>> expand_env("postgresql://u:${PW}@h/db", {"PW": "s3cret"})
    'postgresql://u:s3cret@h/db'
    """
    env = os.environ if env is None else env

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in env:
            raise ConfigError(f"environment variable {name} is not set", entry=entry, field="url")
        return env[name]

    return _VAR_RE.sub(sub, text)


def redact_url(url: str) -> str:
    """Mask the password of a URL.

    >>> redact_url("postgresql://bob:hunter2@db:5432/x")
    'postgresql://bob:***@db:5432/x'
    """
    return _URL_PASSWORD_RE.sub(lambda m: f"{m.group('pre')}***{m.group('post')}", url)


def redact_text(text: str, secrets: list[str] | tuple[str, ...] = ()) -> str:
    """Remove every given secret and every URL password from free text (error messages)."""
    out = redact_url(text)
    for secret in secrets:
        if secret and len(secret) >= 1:
            out = out.replace(secret, "***")
    return out


def url_password(url: str) -> str | None:
    """The password part of a URL, for redaction; None when it has none."""
    match = _URL_PASSWORD_RE.search(url)
    return match.group("pw") if match else None


_KNOWN_NON_SQLALCHEMY = {"duckdb"}


def _check_scheme(url: str, entry: str, source: str) -> None:
    if "://" not in url:
        raise ConfigError(f"not a URL (expected scheme://...): {redact_url(url)!r}",
                          source=source, entry=entry, field="url")
    scheme = url.split("://", 1)[0].lower()
    if scheme.split("+", 1)[0] in _KNOWN_NON_SQLALCHEMY:
        return
    from sqlalchemy.engine.url import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:  # the dialect alone: the rest of the URL may still hold ${VAR} references
        make_url(f"{scheme}://").get_dialect()
    except (NoSuchModuleError, ArgumentError):
        raise ConfigError(f"unknown URL scheme '{scheme}' (no SQLAlchemy dialect or DuckDB)",
                          source=source, entry=entry, field="url") from None
    except ImportError as exc:  # a dialect whose driver module is missing still names a real scheme
        del exc
    try:  # then its shape, with every ${VAR} standing in as a digit (valid as host, port or password)
        make_url(_VAR_RE.sub("1", url))
    except (ArgumentError, ValueError) as exc:
        reason = redact_text(str(exc), [p for p in (url_password(url),) if p])
        raise ConfigError(f"malformed URL {redact_url(url)!r}: {reason}",
                          source=source, entry=entry, field="url") from None


def parse_datasources(data: object, source: str = "datasources file") -> list[DatasourceConfig]:
    """Validate a loaded datasources document; every error names the entry and the field."""
    if not isinstance(data, dict) or "datasources" not in data:
        raise ConfigError("expected a mapping with a 'datasources' list", source=source)
    entries = data["datasources"]
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise ConfigError("'datasources' must be a list", source=source, field="datasources")
    result: list[DatasourceConfig] = []
    seen: set[str] = set()
    for position, raw in enumerate(entries, start=1):
        label = f"#{position}"
        if not isinstance(raw, dict):
            raise ConfigError("must be a mapping", source=source, entry=label)
        if isinstance(raw.get("id"), str) and raw["id"]:
            label = f"#{position} ({raw['id']})"
        for required in ("id", "url"):
            if not raw.get(required):
                raise ConfigError("is missing", source=source, entry=label, field=required)
        try:
            config = DatasourceConfig.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = ".".join(str(p) for p in err["loc"]) or None
            raise ConfigError(err["msg"], source=source, entry=label, field=field) from None
        if not DATASOURCE_ID_RE.match(config.id):
            raise ConfigError(f"{config.id!r} must match ^[a-z0-9_]+$", source=source, entry=label, field="id")
        if not TENANT_ID_RE.match(config.tenant):
            raise ConfigError(f"{config.tenant!r} must match ^[A-Za-z0-9_.-]+$", source=source,
                              entry=label, field="tenant")
        if config.id in seen:
            raise ConfigError(f"duplicate id {config.id!r}", source=source, entry=label, field="id")
        seen.add(config.id)
        _check_scheme(config.url, label, source)
        names = [m.name for m in config.metrics]
        if len(names) != len(set(names)):
            raise ConfigError("metric names must be unique", source=source, entry=label, field="metrics")
        result.append(config)
    return result


def load_datasources(path: Path | str) -> list[DatasourceConfig]:
    """Read and validate the datasources file.

    Raises:
        ConfigError: the file is missing, is not YAML, or an entry is invalid.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found (set NL2SQL_DATASOURCES or run `nl2sql-assets demo`)",
                          source=str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"not valid YAML{where}: {getattr(exc, 'problem', exc)}", source=str(path)) from None
    return parse_datasources(data, source=str(path))
