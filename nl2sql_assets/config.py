"""Settings from the environment and the datasources file.

Owns the one configuration schema (every variable of docs/configuration.md: ``NL2SQL_HOME``,
``NL2SQL_DATASOURCES``, ...) and the datasources-file schema (docs/datasources-file.md), read
strictly (UTF-8 text only, duplicate keys and absurd nesting refused, in-memory databases
refused). ``${VAR}`` resolution and credential redaction live in :mod:`nl2sql_assets.urls` and
are re-exported here. Nothing here connects to anything, and nothing here writes the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal, TypeVar, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, ValidationInfo, field_validator
from sqlalchemy.engine.url import URL, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from nl2sql_assets.dbt.config import DbtConfig
from nl2sql_assets.errors import ConfigError
from nl2sql_assets.urls import VAR_RE as _VAR_RE
from nl2sql_assets.urls import expand_env, redact_text, redact_url, resolve_url, url_password, url_secrets

__all__ = [
    "Annotations", "DatasourceConfig", "EvaluationConfig", "EvaluationQuestion", "MetricConfig", "Settings",
    "expand_env", "load_datasources",
    "parse_datasources", "redact_text", "redact_url", "url_password", "url_secrets",
]

DATASOURCE_ID_RE = re.compile(r"^[a-z0-9_]+$")
TENANT_ID_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
DEFAULT_KEEP_VERSIONS = 3
DEFAULT_ENRICHMENT_TIMEOUT_S = 30.0  # seconds one enrichment chat request may take (ENRICHMENT_TIMEOUT_S)
#: The Dagster asset group of the index assets (``pipeline.names.ASSET_GROUP``); ``NL2SQL_ASSET_GROUP`` overrides it.
DEFAULT_ASSET_GROUP = "schema_index"
V = TypeVar("V", int, float, str)
#: What Dagster accepts as an asset owner: an e-mail address, or a team name after ``team:``.
_OWNER_EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,7}")
#: Deeper YAML is refused before it is built (the parser's recursion would crash on it); a
#: datasources file needs about six levels.
MAX_YAML_DEPTH = 64


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
    enrichment_timeout_s: float = DEFAULT_ENRICHMENT_TIMEOUT_S
    chroma_host: str | None = None
    chroma_port: int = 8000
    schema_store_url: str
    keep_versions: int = DEFAULT_KEEP_VERSIONS
    asset_owners: tuple[str, ...] = ()
    asset_group: str = DEFAULT_ASSET_GROUP

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read every variable of docs/configuration.md; an invalid value raises ConfigError naming it."""
        env = os.environ if env is None else env
        home = Path(env.get("NL2SQL_HOME") or ".nl2sql").expanduser().absolute()
        provider = _value(env, "EMBEDDING_PROVIDER", "local", str.lower, {"local", "openai"}.__contains__,
                          "'local' or 'openai'")
        enrichment = _value(env, "ENRICHMENT", "off", str.lower, {"off", "openai"}.__contains__, "'off' or 'openai'")
        timeout = _value(env, "ENRICHMENT_TIMEOUT_S", DEFAULT_ENRICHMENT_TIMEOUT_S, float,
                         lambda v: 0 < v < float("inf"), "a number of seconds > 0")
        port = _value(env, "CHROMA_PORT", 8000, int, lambda v: 0 < v < 65536, "a TCP port number")
        keep = _value(env, "NL2SQL_KEEP_VERSIONS", DEFAULT_KEEP_VERSIONS, int, lambda v: v >= 1, "a whole number >= 1")
        key = env.get("OPENAI_API_KEY")
        return cls(
            home=home,
            datasources_path=Path(env.get("NL2SQL_DATASOURCES") or home / "datasources.yaml").expanduser().absolute(),
            dagster_home=Path(env.get("DAGSTER_HOME") or home / "dagster").expanduser().absolute(),
            embedding_provider=provider,  # type: ignore[arg-type]
            embedding_model=env.get("EMBEDDING_MODEL") or None,
            openai_api_key=SecretStr(key) if key else None,
            openai_base_url=env.get("OPENAI_BASE_URL") or None,
            enrichment=enrichment,  # type: ignore[arg-type]
            enrichment_timeout_s=timeout,
            chroma_host=env.get("CHROMA_HOST") or None,
            chroma_port=port,
            schema_store_url=env.get("SCHEMA_STORE_URL") or f"sqlite:///{home / 'schema_store.db'}",
            keep_versions=keep,
            asset_owners=_asset_owners(env),
            asset_group=_asset_group(env),
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
        return cls.from_env({_ENV_NAMES[k]: ",".join(v) if isinstance(v, (list, tuple)) else str(v)
                             for k, v in values.items() if v is not None})

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


def _value(env: Mapping[str, str], var: str, default: V, parse: Callable[[str], V], ok: Callable[[V], bool],
           what: str) -> V:
    """``var`` parsed (surrounding spaces ignored), or ``default`` when unset or empty; ConfigError
    ``must be <what>, got '<text>'``."""
    text = (env.get(var) or "").strip() or str(default)
    try:
        value = parse(text)
    except ValueError:
        value = None
    if value is None or not ok(value):
        raise ConfigError(f"must be {what}, got {text!r}", source="environment", field=var)
    return value


#: Each setting's environment variable.
_ENV_NAMES = {
    "home": "NL2SQL_HOME", "datasources_path": "NL2SQL_DATASOURCES", "dagster_home": "DAGSTER_HOME",
    "embedding_provider": "EMBEDDING_PROVIDER", "embedding_model": "EMBEDDING_MODEL",
    "openai_api_key": "OPENAI_API_KEY", "openai_base_url": "OPENAI_BASE_URL", "enrichment": "ENRICHMENT",
    "enrichment_timeout_s": "ENRICHMENT_TIMEOUT_S",
    "chroma_host": "CHROMA_HOST", "chroma_port": "CHROMA_PORT", "schema_store_url": "SCHEMA_STORE_URL",
    "keep_versions": "NL2SQL_KEEP_VERSIONS",
    "asset_owners": "NL2SQL_ASSET_OWNERS", "asset_group": "NL2SQL_ASSET_GROUP",
}


def _asset_owners(env: Mapping[str, str]) -> tuple[str, ...]:
    """``NL2SQL_ASSET_OWNERS`` checked here, so a typo names the variable instead of failing deep in Dagster.

    >>> _asset_owners({"NL2SQL_ASSET_OWNERS": " data@example.com, team:platform ,"})
    ('data@example.com', 'team:platform')
    """
    owners = tuple(o.strip() for o in (env.get("NL2SQL_ASSET_OWNERS") or "").split(",") if o.strip())
    for owner in owners:
        if not (_OWNER_EMAIL_RE.fullmatch(owner) or (owner.startswith("team:") and len(owner) > 5)):
            raise ConfigError(f"each owner must be an e-mail address or team:<name>, got {owner!r}",
                              source="environment", field="NL2SQL_ASSET_OWNERS")
    return owners


def _asset_group(env: Mapping[str, str]) -> str:
    group = (env.get("NL2SQL_ASSET_GROUP") or DEFAULT_ASSET_GROUP).strip()
    if not re.fullmatch(r"[A-Za-z0-9_]+", group):
        raise ConfigError(f"must be letters, digits and underscores (a Dagster group name), got {group!r}",
                          source="environment", field="NL2SQL_ASSET_GROUP")
    return group


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


class EvaluationQuestion(BaseModel):
    """A question with the tables (and columns) a good retrieval must send for it: a gold answer.

    Names are ``table`` (or ``schema.table``) and ``table.column``; a gold column's table must
    be one of the gold tables, so a typo cannot hide as a column nobody could find.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    question: str = Field(min_length=1)
    tables: list[str] = Field(min_length=1)
    columns: list[str] = Field(default_factory=list)

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value

    @field_validator("tables")
    @classmethod
    def _table_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name.strip() or any(not part for part in name.split(".")):
                raise ValueError(f"{name!r} is not a table name (table or schema.table)")
        return value

    @field_validator("columns")
    @classmethod
    def _column_names(cls, value: list[str], info: ValidationInfo) -> list[str]:
        tables = {t.lower() for t in info.data.get("tables") or []}
        for name in value:
            table, _, column = name.rpartition(".")
            if not table or not column.strip() or any(not part for part in table.split(".")):
                raise ValueError(f"{name!r} is not table.column")
            if tables and table.lower() not in tables:
                raise ValueError(f"{name!r}: its table {table!r} is not one of the question's tables")
        return value


class EvaluationConfig(BaseModel):
    """Retrieval-quality questions a datasource carries; the ``retrieval_quality`` check runs them
    against every version just made live, ``severity: error`` makes a regression an ERROR, and
    ``severity: block`` asks them before the version goes live and keeps a failing one out."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    severity: Literal["warn", "error", "block"] = "warn"
    min_table_recall: float = Field(default=0.8, ge=0.0, le=1.0)
    min_column_recall: float | None = Field(default=None, ge=0.0, le=1.0)
    questions: list[EvaluationQuestion] = Field(default_factory=list)


class StatisticsConfig(BaseModel):
    """How a new version reads statistics. Only a structural change makes a new version, and the
    tables it did not touch rarely change their data in the meantime: their statistics are taken
    from the previous version while younger than ``reuse_max_age_hours`` (0: always re-read), so
    a new version costs the tables that changed, not the whole schema. ``budget_seconds`` bounds
    one read; tables it does not reach are read by the next version."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reuse_max_age_hours: float = Field(default=168.0, ge=0.0)
    budget_seconds: float = Field(default=30.0, ge=0.0)


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
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    statistics: StatisticsConfig = Field(default_factory=StatisticsConfig)
    dbt: DbtConfig | None = None  # a dbt project's artifacts (nl2sql_assets/dbt/), read with the database

    def resolved_url(self, env: Mapping[str, str] | None = None) -> str:
        """The URL with ``${VAR}`` resolved from the environment, as text; the result holds secrets.

        For SQLAlchemy URLs each value goes into its parsed component and the text is
        re-rendered with the password percent-encoded, so any character in a value survives
        a later parse (:func:`nl2sql_assets.urls.resolve_url`).
        """
        if self.is_duckdb:
            return expand_env(self.url, env, entry=self.id)
        return self.sqlalchemy_url(env).render_as_string(hide_password=False)

    def sqlalchemy_url(self, env: Mapping[str, str] | None = None) -> URL:
        """The parsed URL with ``${VAR}`` values put into their components; holds secrets."""
        return resolve_url(self.url, env, entry=self.id)

    def secrets(self, env: Mapping[str, str] | None = None) -> list[str]:
        """Every credential of the URL (written or from the environment) to mask in messages."""
        found = url_secrets(self.url)
        if not self.is_duckdb:
            try:
                found += url_secrets(self.sqlalchemy_url(env))
            except ConfigError:
                pass  # an unset variable or bad URL: the error names it, and it holds no value
        return sorted(set(found), key=lambda v: (-len(v), v))

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


_KNOWN_NON_SQLALCHEMY = {"duckdb"}
_IN_MEMORY = ("an in-memory database is empty and private to one connection, so there is nothing to "
              "index; give a database file, e.g. {example}")


def _check_scheme(url: str, entry: str, source: str) -> None:
    if "://" not in url:
        raise ConfigError(f"not a URL (expected scheme://...): {redact_url(url)!r}",
                          source=source, entry=entry, field="url")
    scheme = url.split("://", 1)[0].lower()
    if scheme.split("+", 1)[0] in _KNOWN_NON_SQLALCHEMY:
        rest = url.split("://", 1)[1].split("?", 1)[0].strip("/")
        if rest in ("", ":memory:"):
            raise ConfigError(_IN_MEMORY.format(example="duckdb:///path/to/file.duckdb"),
                              source=source, entry=entry, field="url")
        return
    try:  # the dialect alone: the rest of the URL may still hold ${VAR} references
        make_url(f"{scheme}://").get_dialect()
    except (NoSuchModuleError, ArgumentError):
        raise ConfigError(f"unknown URL scheme '{scheme}' (no SQLAlchemy dialect or DuckDB)",
                          source=source, entry=entry, field="url") from None
    except ImportError as exc:  # a dialect whose driver module is missing still names a real scheme
        del exc
    try:  # then its shape, with every ${VAR} standing in as a digit (valid as host, port or password)
        parsed = make_url(_VAR_RE.sub("1", url))
    except (ArgumentError, ValueError) as exc:
        reason = redact_text(str(exc), url_secrets(url))
        raise ConfigError(f"malformed URL {redact_url(url)!r}: {reason}",
                          source=source, entry=entry, field="url") from None
    database = parsed.database or ""
    if parsed.get_backend_name() == "sqlite" and (
            database in ("", ":memory:") or database.startswith("file::memory:")
            or parsed.query.get("mode") == "memory"):
        raise ConfigError(_IN_MEMORY.format(example="sqlite:///path/to/file.db"),
                          source=source, entry=entry, field="url")


def _unknown_field(loc: tuple[int | str, ...]) -> str:
    """"unknown field (allowed: ...)" naming the fields of the model that holds ``loc``'s last key."""
    model: type[BaseModel] = DatasourceConfig
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        candidates = (field.annotation, *get_args(field.annotation)) if field is not None else ()
        nested = [t for t in candidates if isinstance(t, type) and issubclass(t, BaseModel)]
        if not nested:
            return "unknown field"
        model = nested[0]
    return f"unknown field (allowed: {', '.join(model.model_fields)})"


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
            message = _unknown_field(err["loc"]) if err["type"] == "extra_forbidden" else err["msg"]
            raise ConfigError(message, source=source, entry=label, field=field) from None
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


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing duplicate keys: YAML keeps the last one silently, so a
    second ``url:`` in an entry would quietly win over the first."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[object, object]:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # keys merged in with << may be overridden on purpose
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:
                continue  # an unhashable key: the base constructor reports it
            if first != key_node.start_mark.line + 1:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {first})", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _check_depth(text: str, source: str) -> None:
    """Refuse YAML nested deeper than MAX_YAML_DEPTH, from the parser's events (no recursion)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                mark = event.start_mark
                raise ConfigError(f"nested more than {MAX_YAML_DEPTH} levels deep at line {mark.line + 1}, "
                                  f"column {mark.column + 1} (a datasources file needs about 6)", source=source)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def _read_text(path: Path) -> str:
    """The file's text; every way it cannot be read is a ConfigError saying what to do."""
    source = str(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError("file not found (set NL2SQL_DATASOURCES or run `nl2sql-assets demo`)",
                          source=source) from None
    except IsADirectoryError:
        raise ConfigError("is a folder, not a file (set NL2SQL_DATASOURCES to the YAML file)",
                          source=source) from None
    except NotADirectoryError:
        raise ConfigError("a parent of this path is a file, not a folder (check NL2SQL_DATASOURCES "
                          "and NL2SQL_HOME)", source=source) from None
    except OSError as exc:
        raise ConfigError(f"cannot be read: {exc.strerror or exc}", source=source) from None
    if b"\x00" in raw:
        raise ConfigError("is a binary file, not YAML text (set NL2SQL_DATASOURCES to the YAML file)",
                          source=source)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at line {line} "
                          "(save the file as UTF-8)", source=source) from None


def load_datasources(path: Path | str) -> list[DatasourceConfig]:
    """Read and validate the datasources file.

    Raises:
        ConfigError: the file is missing, unreadable, not UTF-8 YAML text, nested absurdly deep,
            holds a duplicate key, or an entry is invalid.
    """
    path = Path(path)
    text = _read_text(path)
    try:
        _check_depth(text, str(path))
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"not valid YAML{where}: {getattr(exc, 'problem', None) or exc}",
                          source=str(path)) from None
    configs = parse_datasources(data, source=str(path))  # dbt artifact paths are relative to the file
    return [c.model_copy(update={"dbt": c.dbt.relative_to(path.parent)}) if c.dbt else c for c in configs]
