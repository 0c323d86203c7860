"""From drift results to index requests: shared by ``schema_drift_sensor`` and ``nl2sql-assets index``.

A new structure becomes a new partition ``<datasource>@<proposed_version>`` whose run key is
the partition key (so ticks are idempotent); a metadata-only change re-runs the current
partition under a run key that names the metadata hash; an unreachable datasource is
reported and skipped. The sensor's cursor remembers, per datasource, the fingerprint and
metadata hash it saw and the partition it requested, so a structure still waiting for its
run keeps its partition instead of minting a new one on every tick.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nl2sql_assets.drift import DriftResult
from nl2sql_assets.pipeline.keys import parse_partition_key, partition_key, run_tags
from nl2sql_assets.pipeline.names import DETECTED_FINGERPRINT_TAG, REQUEST_KIND_TAG

RequestKind = Literal["new_version", "metadata_refresh", "repair", "pending_refresh"]


class IndexRequest(BaseModel):
    """One run to launch: which partition, under which run key, and why."""

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    schema_version: str
    partition_key: str
    run_key: str
    kind: RequestKind
    fingerprint: str
    metadata_hash: str = ""

    def tags(self) -> dict[str, str]:
        """Run tags: ``datasource``, ``schema_version``, the observed fingerprint and the reason."""
        return run_tags(self.datasource_id, self.schema_version,
                        **{DETECTED_FINGERPRINT_TAG: self.fingerprint, REQUEST_KIND_TAG: self.kind})


class SeenState(BaseModel):
    """What the sensor last saw of one datasource."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    fingerprint: str
    metadata_hash: str = ""
    partition_key: str | None = None


class DriftCursor(BaseModel):
    """The sensor cursor: per datasource, the fingerprint + metadata hash seen and the partition requested."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    datasources: dict[str, SeenState] = Field(default_factory=dict)

    @classmethod
    def parse(cls, text: str | None) -> DriftCursor:
        """The cursor from its JSON text; an empty or unreadable cursor starts afresh.

        >>> DriftCursor.parse(None).datasources
        {}
        >>> DriftCursor.parse('{"datasources": {"s": {"fingerprint": "ab"}}}').datasources["s"].fingerprint
        'ab'
        """
        if not text:
            return cls()
        try:
            return cls.model_validate(json.loads(text))
        except (ValueError, ValidationError):
            return cls()

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json", exclude_none=True), sort_keys=True, separators=(",", ":"))


class Outcome(BaseModel):
    """A datasource that needs no run: unchanged, or failed (with the reason)."""

    model_config = ConfigDict(frozen=True)

    datasource_id: str
    status: Literal["unchanged", "failed"]
    schema_version: str | None = None
    error: str | None = None


class IndexPlan(BaseModel):
    model_config = ConfigDict(frozen=True)

    requests: list[IndexRequest]
    outcomes: list[Outcome]
    cursor: DriftCursor

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def partition_keys(self) -> list[str]:
        return sorted({r.partition_key for r in self.requests})


def plan_index(results: Iterable[DriftResult], cursor: DriftCursor | None = None) -> IndexPlan:
    """Turn drift results into runs to request.

    Args:
        results: one drift result per datasource (status new/changed/metadata_changed/unchanged/failed).
        cursor: what the previous tick saw; None for a one-shot plan (``nl2sql-assets index``).

    Returns:
        The requests, the datasources needing nothing (or failing), and the next cursor.
    """
    previous = cursor.datasources if cursor else {}
    seen: dict[str, SeenState] = dict(previous)
    requests: list[IndexRequest] = []
    outcomes: list[Outcome] = []
    for result in sorted(results, key=lambda r: r.datasource_id):
        ds = result.datasource_id
        fingerprint = result.fingerprint or ""
        metadata_hash = result.metadata_hash or ""
        if result.status == "failed" or not fingerprint:
            outcomes.append(Outcome(datasource_id=ds, status="failed",
                                    error=result.error or "drift check failed"))
            continue
        if result.status in ("new", "changed"):
            before = previous.get(ds)
            if before is not None and before.fingerprint == fingerprint and before.partition_key:
                key = before.partition_key  # still waiting for its run: same partition, same run key
                version = parse_partition_key(key)[1]
            else:
                version = _required(result.proposed_version, ds, "proposed_version")
                key = partition_key(ds, version)
            requests.append(IndexRequest(datasource_id=ds, schema_version=version, partition_key=key,
                                         run_key=key, kind="new_version", fingerprint=fingerprint,
                                         metadata_hash=metadata_hash))
            seen[ds] = SeenState(fingerprint=fingerprint, metadata_hash=metadata_hash, partition_key=key)
        elif result.status == "metadata_changed":
            version = _required(result.current_version, ds, "current_version")
            key = partition_key(ds, version)
            requests.append(IndexRequest(datasource_id=ds, schema_version=version, partition_key=key,
                                         run_key=metadata_run_key(key, metadata_hash), kind="metadata_refresh",
                                         fingerprint=fingerprint, metadata_hash=metadata_hash))
            seen[ds] = SeenState(fingerprint=fingerprint, metadata_hash=metadata_hash, partition_key=key)
        else:
            version = result.current_version
            outcomes.append(Outcome(datasource_id=ds, status="unchanged", schema_version=version))
            seen[ds] = SeenState(fingerprint=fingerprint, metadata_hash=metadata_hash,
                                 partition_key=partition_key(ds, version) if version else None)
    return IndexPlan(requests=requests, outcomes=outcomes, cursor=DriftCursor(datasources=seen))


def metadata_run_key(key: str, metadata_hash: str) -> str:
    """The run key of a metadata refresh: the partition key plus the metadata hash prefix.

    >>> metadata_run_key("sales@20261130031522_3fa9c2e1", "9c0ffee1" + "0" * 56)
    'sales@20261130031522_3fa9c2e1:meta:9c0ffee1'
    """
    return f"{key}:meta:{metadata_hash[:8]}"


def _required(value: str | None, datasource_id: str, field: str) -> str:
    if not value:
        raise ValueError(f"drift result of '{datasource_id}' has no {field}")
    return value


def describe(requests: Sequence[IndexRequest], outcomes: Sequence[Outcome]) -> str:
    """One short line for a tick's log or skip reason."""
    parts = [f"{r.datasource_id}: {r.kind.replace('_', ' ')} {r.schema_version}" for r in requests]
    parts += [f"{o.datasource_id}: {o.status}" + (f" ({o.error})" if o.error else "") for o in outcomes]
    return "; ".join(parts) if parts else "no datasources"
