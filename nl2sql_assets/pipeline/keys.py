"""The partition-key codec ``<datasource>@<schema_version>`` and the run tags of an index run.

One codec for the code location, the sensor's planning, the in-process runner and the audit.
A key exists only for a structure drift detection observed (the partitions are dynamic and
composite rather than a datasource x version grid, whose cross pairs never existed).
"""

from __future__ import annotations

from nl2sql_assets.config import DATASOURCE_ID_RE
from nl2sql_assets.errors import PartitionKeyError
from nl2sql_assets.pipeline.names import DATASOURCE_TAG, SCHEMA_VERSION_TAG
from nl2sql_assets.schema.fingerprint import parse_schema_version

KEY_SEPARATOR = "@"


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


def versions_of(datasource_id: str, keys: list[str] | tuple[str, ...]) -> list[str]:
    """The versions of one datasource among partition keys (others' and malformed keys skipped).

    >>> versions_of("s", ["s@20261130031522_3fa9c2e1", "t@20261130031522_3fa9c2e1", "s@bad"])
    ['20261130031522_3fa9c2e1']
    """
    out = []
    for key in keys:
        try:
            ds, version = parse_partition_key(key)
        except PartitionKeyError:
            continue
        if ds == datasource_id:
            out.append(version)
    return out


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
    return {DATASOURCE_TAG: datasource_id, SCHEMA_VERSION_TAG: schema_version, **extra}
