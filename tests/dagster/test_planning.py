"""Drift results -> index requests and the sensor cursor (pure planning, no Dagster run)."""

from __future__ import annotations

from datetime import UTC, datetime

from nl2sql_assets.pipeline.planning import DriftCursor, metadata_run_key, plan_index
from nl2sql_assets.drift import DriftResult

NOW = datetime(2026, 11, 30, 3, 15, 22, tzinfo=UTC)
FP_A = "3fa9c2e1" + "a" * 56
FP_B = "b0b0b0b0" + "b" * 56
MH_1 = "11111111" + "1" * 56
MH_2 = "22222222" + "2" * 56


def result(ds: str, status: str, **kw: object) -> DriftResult:
    base: dict[str, object] = {"datasource_id": ds, "tenant": "default", "status": status, "checked_at": NOW}
    if status != "failed":
        base.update(fingerprint=FP_A, metadata_hash=MH_1)
    base.update(kw)
    return DriftResult.model_validate(base)


def test_new_structure_becomes_a_partition_whose_run_key_is_the_key() -> None:
    plan = plan_index([result("sales", "new", proposed_version="20261130031522_3fa9c2e1")])
    (req,) = plan.requests
    assert req.partition_key == req.run_key == "sales@20261130031522_3fa9c2e1"
    assert req.kind == "new_version"
    assert req.tags() == {"datasource": "sales", "schema_version": "20261130031522_3fa9c2e1",
                          "nl2sql/fingerprint": FP_A, "nl2sql/request": "new_version"}
    assert plan.partition_keys == ["sales@20261130031522_3fa9c2e1"]
    assert plan.cursor.datasources["sales"].partition_key == req.partition_key


def test_pending_structure_keeps_its_partition_on_the_next_tick() -> None:
    first = plan_index([result("sales", "changed", current_version="20261129000000_b0b0b0b0",
                               proposed_version="20261130031522_3fa9c2e1")])
    later = plan_index([result("sales", "changed", current_version="20261129000000_b0b0b0b0",
                               proposed_version="20261130031622_3fa9c2e1")], first.cursor)
    assert later.requests[0].partition_key == "sales@20261130031522_3fa9c2e1"
    assert later.requests[0].run_key == first.requests[0].run_key


def test_another_structure_gets_a_new_partition() -> None:
    first = plan_index([result("sales", "new", proposed_version="20261130031522_3fa9c2e1")])
    moved = plan_index([result("sales", "new", fingerprint=FP_B, proposed_version="20261130031622_b0b0b0b0")],
                       first.cursor)
    assert moved.requests[0].partition_key == "sales@20261130031622_b0b0b0b0"


def test_metadata_change_reruns_the_current_partition_under_another_run_key() -> None:
    plan = plan_index([result("sales", "metadata_changed", current_version="20261130031522_3fa9c2e1",
                              metadata_hash=MH_2)])
    (req,) = plan.requests
    assert req.partition_key == "sales@20261130031522_3fa9c2e1"
    assert req.run_key == metadata_run_key(req.partition_key, MH_2) == req.partition_key + ":meta:22222222"
    assert req.kind == "metadata_refresh"


def test_failed_and_unchanged_request_nothing_and_failure_keeps_the_previous_cursor() -> None:
    first = plan_index([result("sales", "unchanged", current_version="20261130031522_3fa9c2e1")])
    assert first.requests == [] and first.outcomes[0].status == "unchanged"
    plan = plan_index([result("sales", "failed", error="unreachable"),
                       result("hr", "new", proposed_version="20261130031522_3fa9c2e1")], first.cursor)
    assert [r.datasource_id for r in plan.requests] == ["hr"]
    assert [(o.datasource_id, o.error) for o in plan.failed] == [("sales", "unreachable")]
    assert plan.cursor.datasources["sales"] == first.cursor.datasources["sales"]


def test_cursor_round_trips_and_tolerates_garbage() -> None:
    plan = plan_index([result("sales", "new", proposed_version="20261130031522_3fa9c2e1")])
    text = plan.cursor.to_json()
    assert DriftCursor.parse(text) == plan.cursor
    assert DriftCursor.parse("not json").datasources == {}
    assert DriftCursor.parse('{"datasources": 3}').datasources == {}
