"""Partition keys: ``<datasource>@<schema_version>``, validated both ways."""

from __future__ import annotations

import pytest

from nl2sql_assets.defs.partitions import datasource_versions_partitions
from nl2sql_assets.pipeline.keys import fingerprint_prefix, parse_partition_key, partition_key, run_tags
from nl2sql_assets.pipeline.names import PARTITIONS_NAME
from nl2sql_assets.errors import Nl2SqlError, PartitionKeyError

VERSION = "20261130031522_3fa9c2e1"


def test_round_trip() -> None:
    key = partition_key("sales_eu", VERSION)
    assert key == "sales_eu@20261130031522_3fa9c2e1"
    assert parse_partition_key(key) == ("sales_eu", VERSION)
    assert fingerprint_prefix(VERSION) == "3fa9c2e1"


def test_one_dynamic_definition_named_datasource_versions() -> None:
    assert datasource_versions_partitions.name == PARTITIONS_NAME == "datasource_versions"


@pytest.mark.parametrize("datasource_id", ["Sales", "sales|eu", "sales@eu", "sales-eu", "", "säles", "a b"])
def test_bad_datasource_ids_are_refused(datasource_id: str) -> None:
    with pytest.raises(PartitionKeyError, match="must match"):
        partition_key(datasource_id, VERSION)


@pytest.mark.parametrize("key", [
    "sales", "sales@", "@" + VERSION, "sales@x@" + VERSION, "sales|eu@" + VERSION,
    "sales@20261130031522_3fa9c2eZ", "sales@2026113003152_3fa9c2e1", "sales@20261130031522-3fa9c2e1",
])
def test_malformed_keys_are_refused_with_the_key_named(key: str) -> None:
    with pytest.raises(PartitionKeyError) as info:
        parse_partition_key(key)
    assert repr(key) in str(info.value)
    assert isinstance(info.value, Nl2SqlError)


def test_run_tags_carry_datasource_and_version() -> None:
    assert run_tags("sales", VERSION, extra="x") == {"datasource": "sales", "schema_version": VERSION, "extra": "x"}
