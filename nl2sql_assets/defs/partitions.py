"""The one partitions definition: ``datasource_versions``, keyed ``<datasource>@<schema_version>``.

A single ``DynamicPartitionsDefinition`` with composite keys, not a two-dimensional
``MultiPartitionsDefinition``: the latter would create every (datasource, version) cross
pair, and "materialize all" would build pairs that never existed. Keys are added only by
drift detection (:mod:`nl2sql_assets.defs.sensors`, ``nl2sql-assets index``), after the
structure was observed.
"""

from __future__ import annotations

import dagster as dg

from nl2sql_assets.config import DATASOURCE_ID_RE
from nl2sql_assets.errors import PartitionKeyError
from nl2sql_assets.schema.fingerprint import parse_schema_version

PARTITIONS_NAME = "datasource_versions"
KEY_SEPARATOR = "@"

datasource_versions_partitions = dg.DynamicPartitionsDefinition(name=PARTITIONS_NAME)


def partition_key(datasource_id: str, schema_version: str) -> str:
    """The partition key of a (datasource, schema_version) pair.

    >>> partition_key("sales", "20261130031522_3fa9c2e1")
    'sales@20261130031522_3fa9c2e1'

    Raises:
        PartitionKeyError: the id is not ``^[a-z0-9_]+$`` (so it cannot hold ``@`` or ``|``)
            or the version is not ``YYYYMMDDhhmmss_<fp8>``.
    """
    key = f"{datasource_id}{KEY_SEPARATOR}{schema_version}"
    _validate(key, datasource_id, schema_version)
    return key


def parse_partition_key(key: str) -> tuple[str, str]:
    """Split a partition key into (datasource_id, schema_version), validating both.

    >>> parse_partition_key("sales@20261130031522_3fa9c2e1")
    ('sales', '20261130031522_3fa9c2e1')
    >>> parse_partition_key("sales|x@20261130031522_3fa9c2e1")
    Traceback (most recent call last):
    ...
    nl2sql_assets.errors.PartitionKeyError: partition key 'sales|x@20261130031522_3fa9c2e1': datasource id 'sales|x' must match ^[a-z0-9_]+$
    """
    if key.count(KEY_SEPARATOR) != 1:
        raise PartitionKeyError(key, "expected exactly one '@' between datasource id and schema version")
    datasource_id, schema_version = key.split(KEY_SEPARATOR)
    _validate(key, datasource_id, schema_version)
    return datasource_id, schema_version


def _validate(key: str, datasource_id: str, schema_version: str) -> None:
    if not DATASOURCE_ID_RE.match(datasource_id):
        raise PartitionKeyError(key, f"datasource id {datasource_id!r} must match ^[a-z0-9_]+$")
    try:
        parse_schema_version(schema_version)
    except ValueError:
        raise PartitionKeyError(key, f"schema version {schema_version!r} must be YYYYMMDDhhmmss_<8 hex>") from None


def fingerprint_prefix(schema_version: str) -> str:
    """The ``fp8`` a version ends with.

    >>> fingerprint_prefix("20261130031522_3fa9c2e1")
    '3fa9c2e1'
    """
    return parse_schema_version(schema_version)[1]


def run_tags(datasource_id: str, schema_version: str, **extra: str) -> dict[str, str]:
    """Tags every index run carries, so runs filter by datasource and version in the UI
    and the run queue's per-datasource limit applies.

    >>> run_tags("sales", "20261130031522_3fa9c2e1")
    {'datasource': 'sales', 'schema_version': '20261130031522_3fa9c2e1'}
    """
    return {"datasource": datasource_id, "schema_version": schema_version, **extra}
