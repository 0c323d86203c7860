"""The Dagster UI, for real: ``dg dev`` (webserver + daemon) on 127.0.0.1, as the README starts it.

One server per module, in its own process group with its own DAGSTER_HOME and NL2SQL_HOME:
- GraphQL shows the four assets, their ``datasource_versions`` partitions and the metadata of
  a materialized partition, and the drift sensor has ticked;
- headless Chromium (Debian's package, driven over the DevTools protocol) opens the asset's
  page and shows the partition and its metadata; a screenshot goes to ``test-artifacts/``;
- the run queue of the embedded dagster.yaml runs one run per datasource at a time (real daemon);
- the graph starts at the datasources (external assets with engine, tenant and last fingerprint)
  and ends at ``index_status`` (the live version of each datasource); owners, code versions and
  kinds are the configured ones; screenshots of the graph and of the status go to ``test-artifacts/``;
- ``dg dev`` started from the repository root as the README says prints no warning.
Everything started here is stopped by process group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.conftest import IN_CI
from tests.dagster.cdp import CHROMIUM, Browser, free_port, stop_group
from tests.dagster.conftest import make_shop_db, write_datasources

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
BIN = Path(sys.executable).parent
READY_TIMEOUT_S = 180
OWNERS = ["data@example.com", "team:nl2sql"]
RUN_TIMEOUT_S = 300

pytestmark = pytest.mark.slow


@dataclass
class UIServer:
    port: int
    env: dict[str, str]
    keys: dict[str, str]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def graphql(self, query: str, variables: dict[str, object] | None = None) -> dict[str, object]:
        reply = httpx.post(f"{self.url}/graphql", json={"query": query, "variables": variables or {}}, timeout=60)
        reply.raise_for_status()
        body = reply.json()
        assert "errors" not in body, body["errors"]
        return body["data"]


def _wait_ready(server: UIServer, proc: subprocess.Popen[bytes]) -> None:
    """Until the webserver answers and the code location is loaded."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    query = "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dg dev exited:\n{server.log.read_text(errors='replace')[-3000:]}")
        try:
            entries = server.graphql(query)["workspaceOrError"]["locationEntries"]  # type: ignore[index]
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                return
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            pass
        time.sleep(1.0)
    raise RuntimeError(f"dg dev not ready in {READY_TIMEOUT_S}s:\n{server.log.read_text(errors='replace')[-3000:]}")


@pytest.fixture(scope="module")
def ui_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UIServer]:
    base = tmp_path_factory.mktemp("ui")
    home, dagster_home = base / "nl2sql", base / "dagster"
    home.mkdir()
    write_datasources(home / "datasources.yaml", [
        {"id": "shop", "url": make_shop_db(home / "data" / "shop.db"), "description": "The web shop"},
        {"id": "crm", "url": make_shop_db(home / "data" / "crm.db", rows=False), "tenant": "globex"},
    ])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NL2SQL_", "DAGSTER_", "CHROMA_", "SCHEMA_STORE"))}
    env.update({"NL2SQL_HOME": str(home), "DAGSTER_HOME": str(dagster_home), "PYTHONPATH": str(ROOT),
                "NL2SQL_ASSET_OWNERS": ",".join(OWNERS)})
    # materialize the partitions through the product's own command, on the same instance
    index = subprocess.run([str(BIN / "nl2sql-assets"), "index"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=600)
    assert index.returncode == 0, index.stdout + index.stderr
    keys = {line.split(":")[0]: f"{line.split(':')[0]}@{line.split()[3]}" for line in index.stdout.splitlines()}
    log = base / "dagster-dev.log"
    port = free_port()
    with log.open("wb") as sink:
        proc = subprocess.Popen([str(BIN / "dg"), "dev", "-h", "127.0.0.1", "-p", str(port)],
                                cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    server = UIServer(port=port, env=env, keys=keys, log=log)
    try:
        _wait_ready(server, proc)
        yield server
    finally:
        stop_group(proc, first=signal.SIGINT, timeout=30)


ASSET_QUERY = """
query Asset($path: [String!]!, $partition: String!) {
  assetOrError(assetKey: {path: $path}) {
    ... on Asset {
      definition { groupName partitionKeys partitionDefinition { name type } }
      assetMaterializations(limit: 1, partitions: [$partition]) {
        partition runId
        metadataEntries {
          label __typename
          ... on TextMetadataEntry { text }
          ... on IntMetadataEntry { intValue }
          ... on MarkdownMetadataEntry { mdStr }
        }
      }
    }
  }
}
"""

SENSOR_QUERY = """
{ sensorOrError(sensorSelector: {repositoryLocationName: "nl2sql_assets", repositoryName: "__repository__",
                                 sensorName: "schema_drift_sensor"}) {
    ... on Sensor { sensorState { status ticks(limit: 5) { status skipReason } } } } }
"""


def _metadata(entries: list[dict[str, object]]) -> dict[str, object]:
    return {e["label"]: e.get("text", e.get("intValue", e.get("mdStr"))) for e in entries}  # type: ignore[misc]


@pytest.mark.browser
def test_assets_partitions_and_metadata_in_graphql_and_the_browser(ui_server: UIServer) -> None:
    key = ui_server.keys["shop"]
    version = key.split("@")[1]
    data = ui_server.graphql(ASSET_QUERY, {"path": ["chroma_collection"], "partition": key})["assetOrError"]
    definition = data["definition"]  # type: ignore[index]
    assert definition["groupName"] == "schema_index"
    assert definition["partitionDefinition"] == {"name": "datasource_versions", "type": "DYNAMIC"}
    assert sorted(definition["partitionKeys"]) == sorted(ui_server.keys.values())
    (materialization,) = data["assetMaterializations"]  # type: ignore[index]
    meta = _metadata(materialization["metadataEntries"])
    assert meta["datasource"] == "shop" and meta["schema_version"] == version
    assert meta["embedding_model"] == "all-MiniLM-L6-v2-int8" and meta["embedding_dimension"] == 384
    assert 0 < meta["chunks_embedded"] <= meta["chunks_total"] == 17  # type: ignore[operator]
    snapshot = ui_server.graphql(ASSET_QUERY, {"path": ["schema_snapshot"], "partition": key})["assetOrError"]
    snap_meta = _metadata(snapshot["assetMaterializations"][0]["metadataEntries"])  # type: ignore[index]
    assert snap_meta["tables"] == 3 and "+3 tables" in str(snap_meta["diff"])
    # the daemon runs the drift sensor (default status RUNNING); nothing changed since `index`
    deadline = time.monotonic() + 120
    ticks: list[dict[str, object]] = []
    while time.monotonic() < deadline and (not ticks or ticks[0]["status"] == "STARTED"):  # a tick in flight
        state = ui_server.graphql(SENSOR_QUERY)["sensorOrError"]["sensorState"]  # type: ignore[index]
        assert state["status"] == "RUNNING"
        ticks = state["ticks"]
        time.sleep(2)
    assert ticks and ticks[0]["status"] == "SKIPPED" and "unchanged" in str(ticks[0]["skipReason"])

    if not Path(CHROMIUM).exists():
        message = f"{CHROMIUM} is not installed (apt-get install chromium)"
        if IN_CI:
            pytest.fail(f"{message}; CI=true requires it")
        pytest.skip(message)
    with Browser() as browser:
        browser.goto(f"{ui_server.url}/assets/chroma_collection?view=partitions&partition={quote(key)}")
        text = browser.wait_for_text([key, "Materialized", "chunks_embedded", "embedding_model",
                                      "all-MiniLM-L6-v2-int8", "live_version"])
        assert version in text
        shot = browser.screenshot(ARTIFACTS / f"ui_chroma_collection_{key.replace('@', '_')}.png")
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
  }
}
"""
RUNS = """query Runs($ids: [String!]) { runsOrError(filter: {runIds: $ids}) {
  ... on Runs { results { runId status startTime endTime tags { key value }
    eventConnection { events { __typename ... on MessageEvent { timestamp } } } } } } }"""


def _launched_at(run: dict[str, object]) -> float:
    """When the queue launched the run (its RUN_STARTING event): unlike ``startTime``, which the run's
    own process sets once it is up, this does not depend on how fast a worker process starts."""
    events = run["eventConnection"]["events"]  # type: ignore[index]
    (stamp,) = [e["timestamp"] for e in events if e["__typename"] == "RunStartingEvent"]  # type: ignore[index]
    return float(stamp)


def _launch(server: UIServer, key: str) -> str:
    ds = key.split("@")[0]
    params = {
        "selector": {"repositoryLocationName": "nl2sql_assets", "repositoryName": "__repository__",
                     "jobName": "index_job"},
        "runConfigData": {},
        "executionMetadata": {"tags": [{"key": "datasource", "value": ds}, {"key": "dagster/partition", "value": key}]},
    }
    result = server.graphql(LAUNCH, {"params": params})["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result  # type: ignore[index]
    return str(result["run"]["runId"])  # type: ignore[index]


def test_run_queue_runs_one_run_per_datasource_at_a_time(ui_server: UIServer) -> None:
    shop, crm = ui_server.keys["shop"], ui_server.keys["crm"]
    ids = [_launch(ui_server, shop), _launch(ui_server, shop), _launch(ui_server, crm)]
    deadline = time.monotonic() + RUN_TIMEOUT_S
    in_progress_shop_max = 0
    runs: list[dict[str, object]] = []
    while time.monotonic() < deadline:
        runs = ui_server.graphql(RUNS, {"ids": ids})["runsOrError"]["results"]  # type: ignore[index]
        active_shop = [r for r in runs if r["status"] in ("STARTING", "STARTED")
                       and {"key": "datasource", "value": "shop"} in r["tags"]]  # type: ignore[operator]
        in_progress_shop_max = max(in_progress_shop_max, len(active_shop))
        if all(r["status"] in ("SUCCESS", "FAILURE", "CANCELED") for r in runs):
            break
        time.sleep(1.0)
    by_id = {r["runId"]: r for r in runs}
    assert [by_id[i]["status"] for i in ids] == ["SUCCESS"] * 3, ui_server.log.read_text(errors="replace")[-3000:]
    assert in_progress_shop_max == 1
    first, second = sorted((by_id[i] for i in ids[:2]), key=lambda r: r["startTime"])  # type: ignore[arg-type,return-value]
    assert first["endTime"] <= second["startTime"], (first, second)  # type: ignore[operator]
    # the limit is per datasource, not global: crm, queued while a shop run was still queued or in
    # progress, ran beside one of them. (Whether it launched before the second shop run depends on how
    # fast the launches reach a loaded webserver; under a global limit of 1 no two runs overlap.)
    crm_run = by_id[ids[2]]
    crm_span = (_launched_at(crm_run) / 1000, float(crm_run["endTime"]))  # type: ignore[arg-type]
    shop_spans = [(_launched_at(r) / 1000, float(r["endTime"])) for r in (first, second)]  # type: ignore[arg-type]
    assert any(start < crm_span[1] and crm_span[0] < end for start, end in shop_spans), (crm_span, shop_spans)


GRAPH_QUERY = """
{ assetNodes {
    assetKey { path } groupName kinds opVersion isExecutable isPartitioned
    owners { __typename ... on UserAssetOwner { email } ... on TeamAssetOwner { team } }
    dependencyKeys { path } dependedByKeys { path }
    metadataEntries { label ... on TextMetadataEntry { text } }
} }
"""
STATUS_QUERY = """
query Status($path: [String!]!) {
  assetOrError(assetKey: {path: $path}) {
    ... on Asset {
      assetMaterializations(limit: 1) { runId metadataEntries {
        label ... on MarkdownMetadataEntry { mdStr } ... on TextMetadataEntry { text } ... on IntMetadataEntry { intValue } } }
      assetObservations(limit: 1) { metadataEntries {
        label ... on TextMetadataEntry { text } ... on IntMetadataEntry { intValue } } }
    }
  }
}
"""


def _owner(entry: dict[str, object]) -> str:
    return str(entry.get("email") or f"team:{entry.get('team')}")


def test_dg_dev_from_the_repository_root_starts_without_a_warning(ui_server: UIServer) -> None:
    log = ui_server.log.read_text(errors="replace")
    assert "Serving dagster-webserver" in log
    assert "dagster instance configuration" not in log and "will not be used to configure Dagster" not in log
    assert "Warning" not in log and "does not match the virtual environment" not in log, log


@pytest.mark.browser
def test_datasources_feed_the_graph_and_index_status_names_the_live_versions(ui_server: UIServer) -> None:
    nodes = {"/".join(n["assetKey"]["path"]): n for n in ui_server.graphql(GRAPH_QUERY)["assetNodes"]}  # type: ignore[index,union-attr]
    assert set(nodes) == {"datasource/shop", "datasource/crm", "schema_snapshot", "enriched_snapshot",
                          "schema_chunks", "chroma_collection", "index_status"}
    for ds, engine, tenant in (("shop", "sqlite", "default"), ("crm", "sqlite", "globex")):
        source = nodes[f"datasource/{ds}"]
        assert not source["isExecutable"] and not source["isPartitioned"] and source["kinds"] == [engine]
        assert source["dependedByKeys"] == [{"path": ["schema_snapshot"]}] and source["dependencyKeys"] == []
        meta = {e["label"]: e.get("text") for e in source["metadataEntries"]}  # type: ignore[union-attr]
        assert meta["engine"] == engine and meta["tenant"] == tenant
    assert sorted(k["path"][-1] for k in nodes["schema_snapshot"]["dependencyKeys"]) == ["crm", "shop"]  # type: ignore[index,union-attr]
    assert nodes["index_status"]["dependencyKeys"] == [{"path": ["chroma_collection"]}]
    assert not nodes["index_status"]["isExecutable"]
    for name, node in nodes.items():
        assert node["groupName"] == "schema_index" and [_owner(o) for o in node["owners"]] == OWNERS, name  # type: ignore[union-attr]
    assert {n: nodes[n]["kinds"] for n in ("schema_snapshot", "enriched_snapshot", "schema_chunks",
                                          "chroma_collection")} == {
        "schema_snapshot": ["sql"], "enriched_snapshot": ["python"], "schema_chunks": ["python"],
        "chroma_collection": ["chroma"]}  # ENRICHMENT is off: no openai kind
    versions = {n: str(nodes[n]["opVersion"]) for n in ("schema_snapshot", "schema_chunks", "chroma_collection")}
    assert all(v.startswith("0.1.0+") for v in versions.values()) and len(set(versions.values())) == 3

    live = {ds: key.split("@")[1] for ds, key in ui_server.keys.items()}
    status = ui_server.graphql(STATUS_QUERY, {"path": ["index_status"]})["assetOrError"]
    (materialization,) = status["assetMaterializations"]  # type: ignore[index]
    meta = _metadata(materialization["metadataEntries"])
    assert meta["shop/live_version"] == live["shop"] and meta["crm/live_version"] == live["crm"]
    assert f"| shop | `{live['shop']}` | **live** |" in str(meta["status"])
    source = ui_server.graphql(STATUS_QUERY, {"path": ["datasource", "shop"]})["assetOrError"]
    (observation,) = source["assetObservations"]  # type: ignore[index]
    seen = _metadata(observation["metadataEntries"])
    assert str(seen["fingerprint8"]) == live["shop"].split("_")[1] and seen["schema_version"] == live["shop"]

    if not Path(CHROMIUM).exists():
        message = f"{CHROMIUM} is not installed (apt-get install chromium)"
        if IN_CI:
            pytest.fail(f"{message}; CI=true requires it")
        pytest.skip(message)
    with Browser() as browser:
        browser.goto(f"{ui_server.url}/asset-groups")
        browser.wait_for_text(["shop", "crm", "schema_snapshot", "chroma_collection", "index_status"])
        time.sleep(2)  # the graph lays out after its labels are in the page
        graph = browser.screenshot(ARTIFACTS / "ui_asset_graph_with_datasources.png")
        browser.goto(f"{ui_server.url}/assets/index_status")
        browser.wait_for_text(["index_status", "shop/live_version", "crm/live_version", live["shop"], "live"])
        status_shot = browser.screenshot(ARTIFACTS / "ui_index_status_live_versions.png")
        browser.goto(f"{ui_server.url}/assets/datasource/shop")
        browser.wait_for_text(["fingerprint", live["shop"].split("_")[1], "sqlite", "schema_snapshot"])
        source_shot = browser.screenshot(ARTIFACTS / "ui_datasource_shop.png")
    for shot in (graph, status_shot, source_shot):
        assert shot.stat().st_size > 10_000
        print(f"screenshot: {shot}")
