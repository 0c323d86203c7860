"""One root error for the whole core, with structured fields.

The core raises these and never logs-and-continues; the outer layers translate them
(assets raise ``dg.Failure``, the CLI exits non-zero naming the datasource, retrieval
sets ``fallback``). Messages never contain credentials: callers pass causes through
:func:`nl2sql_assets.config.redact_text` first.
"""

from __future__ import annotations


class Nl2SqlError(Exception):
    """Root of every error the core raises."""


class ConfigError(Nl2SqlError):
    """A settings value or datasources-file entry is wrong.

    Attributes:
        source: the file (or ``environment``) the value came from.
        entry: which entry (datasource id or position), when known.
        field: which field of the entry.
    """

    def __init__(self, message: str, *, source: str | None = None,
                 entry: str | None = None, field: str | None = None) -> None:
        where = ", ".join(
            part for part in (
                source and f"{source}",
                entry and f"entry {entry}",
                field and f"field '{field}'",
            ) if part
        )
        super().__init__(f"{where}: {message}" if where else message)
        self.source = source
        self.entry = entry
        self.field = field


class DatasourceError(Nl2SqlError):
    """A datasource could not be read. ``datasource_id`` names it; the text has no password."""

    def __init__(self, datasource_id: str, message: str) -> None:
        super().__init__(f"datasource '{datasource_id}': {message}")
        self.datasource_id = datasource_id
        self.reason = message


class DatasourceUnavailableError(DatasourceError):
    """Unreachable server, missing driver, bad credentials or permissions."""


class UnknownDatasourceError(Nl2SqlError):
    def __init__(self, datasource_id: str, known: list[str] | None = None) -> None:
        hint = f" (known: {', '.join(sorted(known))})" if known else ""
        super().__init__(f"unknown datasource '{datasource_id}'{hint}")
        self.datasource_id = datasource_id


class UnknownTenantError(Nl2SqlError):
    def __init__(self, tenant_id: str) -> None:
        super().__init__(f"unknown tenant '{tenant_id}': no datasource belongs to it")
        self.tenant_id = tenant_id


class SchemaStoreError(Nl2SqlError):
    """The schema store failed or holds something unexpected.

    ``store`` names the store (its URL with the password masked) when known.
    """

    def __init__(self, message: str, *, store: str | None = None) -> None:
        super().__init__(f"schema store {store}: {message}" if store else message)
        self.store = store


class SchemaVersionNotFoundError(SchemaStoreError):
    def __init__(self, datasource_id: str, schema_version: str | None) -> None:
        what = f"version '{schema_version}'" if schema_version else "any version"
        super().__init__(f"datasource '{datasource_id}' has no {what} in the schema store")
        self.datasource_id = datasource_id
        self.schema_version = schema_version


class SchemaDriftError(Nl2SqlError):
    """The live structure no longer matches the fingerprint a partition was created for."""

    def __init__(self, datasource_id: str, expected_fingerprint: str, actual_fingerprint: str) -> None:
        super().__init__(
            f"datasource '{datasource_id}' moved again since drift detection: expected "
            f"fingerprint {expected_fingerprint[:8]}, found {actual_fingerprint[:8]}; "
            "the next drift check will pick up the new version"
        )
        self.datasource_id = datasource_id
        self.expected_fingerprint = expected_fingerprint
        self.actual_fingerprint = actual_fingerprint


class EmbeddingError(Nl2SqlError):
    """Embedding failed (model missing, provider unreachable, bad response)."""


class EmbeddingModelUnavailableError(EmbeddingError):
    """The configured embedding model cannot be loaded (package missing, file corrupt)."""


class EmbeddingDimensionMismatchError(EmbeddingError):
    """Stored vectors were made by another model than the configured one."""

    def __init__(self, collection: str, expected: str, actual: str) -> None:
        super().__init__(
            f"vector collection '{collection}' holds vectors of {actual}, but the configured "
            f"embedding provider is {expected}; re-index (nl2sql-assets index) to rebuild it"
        )
        self.collection = collection
        self.expected = expected
        self.actual = actual


class VectorStoreError(Nl2SqlError):
    """The vector store failed."""


class VectorStoreUnavailableError(VectorStoreError):
    """The vector store cannot be reached, or its circuit breaker is open."""


class RetrievalError(Nl2SqlError):
    """A retrieval request is invalid (empty question, bad version, ...)."""


class PartitionKeyError(Nl2SqlError):
    """A partition key is not ``<datasource>@<schema_version>`` with valid parts."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"partition key {key!r}: {message}")
        self.key = key


class UnobservedVersionError(Nl2SqlError):
    """A (datasource, schema_version) pair that neither the schema store nor drift detection knows."""

    def __init__(self, datasource_id: str, schema_version: str, reason: str) -> None:
        super().__init__(
            f"datasource '{datasource_id}' has no observed version '{schema_version}': {reason}; "
            "only versions found by drift detection (schema_drift_sensor or `nl2sql-assets index`) "
            "can be materialized"
        )
        self.datasource_id = datasource_id
        self.schema_version = schema_version


class RedundantVersionError(Nl2SqlError):
    """A partition whose structure is already registered under another version (a race lost)."""

    def __init__(self, datasource_id: str, schema_version: str, registered_as: str) -> None:
        super().__init__(
            f"datasource '{datasource_id}': this structure is already registered as version "
            f"'{registered_as}' (another run got there first); partition '{schema_version}' "
            "is redundant and was not registered"
        )
        self.datasource_id = datasource_id
        self.schema_version = schema_version
        self.registered_as = registered_as


class StaleVersionError(Nl2SqlError):
    """A version older than the latest registered one: it is never made live again."""

    def __init__(self, datasource_id: str, schema_version: str, latest_version: str) -> None:
        super().__init__(
            f"datasource '{datasource_id}': version '{schema_version}' is not the latest registered "
            f"version ('{latest_version}'); an older version is never made live again"
        )
        self.datasource_id = datasource_id
        self.schema_version = schema_version
        self.latest_version = latest_version


class VersionRefusedError(Nl2SqlError):
    """A version that publishing refuses to make live; the message says why."""

    def __init__(self, datasource_id: str, schema_version: str, message: str) -> None:
        super().__init__(f"datasource '{datasource_id}' version '{schema_version}': {message}")
        self.datasource_id = datasource_id
        self.schema_version = schema_version


class UncheckedChunksError(VersionRefusedError):
    """A chunk set the blocking checks would refuse, or one other than the set they approved."""


class QualityGateError(VersionRefusedError):
    """A version whose gold questions fail under ``severity: block``: it is not made live."""


class InstanceStorageError(Nl2SqlError):
    """A Dagster instance database that cannot be used; the message says how to recover."""

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(
            f"Dagster instance database {path}: {reason}. Move the instance folder aside (DAGSTER_HOME) and "
            "run the command again: run history is lost, the indexes are not (they live in the schema "
            "store and Chroma)"
        )
        self.path = path


class PersonalDataInSnapshotError(Nl2SqlError):
    """A snapshot that records values the PII check refuses; it is not registered.

    Names the datasource and the columns, never a value.
    """

    def __init__(self, datasource_id: str, columns: list[str]) -> None:
        super().__init__(
            f"datasource '{datasource_id}': the snapshot records values that look like personal data in "
            f"{len(columns)} column(s): {', '.join(columns)}; it was not registered (nothing was stored)"
        )
        self.datasource_id = datasource_id
        self.columns = columns


class VectorStoreCorruptError(VectorStoreError):
    """The vector store's files are damaged: every call fails until it is rebuilt.

    It holds only derived data (the chunks and vectors of snapshots the schema store keeps),
    so the remedy is always the same: set it aside and index again.

    Attributes:
        where: the store (path or host:port).
        problem: what is damaged.
        folder: the embedded store's folder; None for a server.
    """

    def __init__(self, where: str, problem: str, *, folder: str | None = None) -> None:
        if folder:
            how = f"move the folder aside (mv {folder} {folder}.corrupt) and run `nl2sql-assets index`"
        else:
            how = "restore or recreate the Chroma server's data and run `nl2sql-assets index`"
        super().__init__(
            f"vector store ({where}) is corrupt: {problem}. It holds only derived data: {how}; every "
            "datasource is then re-indexed from the schema store, which holds every snapshot"
        )
        self.where = where
        self.problem = problem
        self.folder = folder


class SchemaStoreCorruptError(SchemaStoreError):
    """The schema store's SQLite file is damaged. It is the only copy of every snapshot."""

    def __init__(self, path: str, problem: str, *, store: str | None = None) -> None:
        super().__init__(
            f"the SQLite file {path} is corrupt ({problem}). It holds every schema snapshot and nothing "
            "can rebuild it: stop every nl2sql-assets and Dagster process and restore the file from a "
            "backup (moving it aside instead starts an empty store: every datasource is registered "
            "again as a new version and the version history is lost)", store=store)
        self.path = path
        self.problem = problem


class StorageError(Nl2SqlError):
    """A folder a command writes to is unusable: a file stands in its place, it is read-only, or
    its disk is full. Checked before any work starts, so nothing is half done.

    ``full`` tells a full disk (the machine's state, exit status 1) from a wrong path (2).
    """

    def __init__(self, variable: str, path: object, reason: str, fix: str, *, full: bool = False) -> None:
        super().__init__(f"{variable} {path}: {reason}; {fix}")
        self.variable = variable
        self.path = path
        self.full = full


class DatasourceNotVisibleError(UnknownDatasourceError):
    """The datasource exists, but belongs to another tenant: said without naming that tenant or
    listing its datasources."""

    def __init__(self, datasource_id: str, tenant_id: str) -> None:
        Nl2SqlError.__init__(self, f"datasource '{datasource_id}' is not visible to tenant '{tenant_id}'")
        self.datasource_id = datasource_id
        self.tenant_id = tenant_id
