"""A backfill of rounds, launched as the UI launches it, on a real instance with
the instance config `touchstone round` writes (cli.rounds.LOCAL_INSTANCE) and a
real `dagster-daemon`: the rounds run one after another, each starting after
the previous one finished and from its checkpoint, instead of all at once with
every round but the first failing for want of its parent checkpoint."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from cli.rounds import LOCAL_INSTANCE
from orchestration.lineage import latest_metadata
from orchestration.partitions import previous_round, register_round

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

ROOT = Path(__file__).parents[2]
LOCATION = "backfill_location"
TERMINAL = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}
LAUNCH = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message stack } } }"""


def _workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace.yaml"
    module = {"module_name": "tests.orchestration.backfill_location", "working_directory": str(ROOT)}
    path.write_text(yaml.safe_dump({"load_from": [{"python_module": {**module, "location_name": LOCATION}}]}))
    return path


def _launch(context, params: dict) -> str:
    """The UI's `launchPartitionBackfill` mutation; returns the backfill id."""
    from dagster_graphql.test.utils import execute_dagster_graphql

    result = execute_dagster_graphql(context.create_request_context(), LAUNCH, {"params": params})
    assert not result.errors, result.errors
    launched = result.data["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    return launched["backfillId"]


def _wait(instance: dg.DagsterInstance, backfill_id: str, daemon: subprocess.Popen, timeout_s: float = 900) -> None:
    deadline = time.monotonic() + timeout_s
    while (status := instance.get_backfill(backfill_id).status.value) not in TERMINAL:
        assert daemon.poll() is None, f"dagster-daemon exited with {daemon.returncode}"
        assert time.monotonic() < deadline, f"backfill {backfill_id} still {status} after {timeout_s:.0f} s"
        time.sleep(2)


def _runs_in_order(instance: dg.DagsterInstance, backfill_id: str) -> list:
    records = instance.get_run_records(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
    return sorted(records, key=lambda r: r.dagster_run.tags["dagster/partition"])


def _assert_sequential(instance: dg.DagsterInstance, backfill_id: str, keys: list[str]) -> None:
    runs = _runs_in_order(instance, backfill_id)
    assert [r.dagster_run.tags["dagster/partition"] for r in runs] == keys
    assert [r.dagster_run.status for r in runs] == [dg.DagsterRunStatus.SUCCESS] * len(keys), [
        (r.dagster_run.tags["dagster/partition"], r.dagster_run.status) for r in runs
    ]
    for earlier, later in zip(runs, runs[1:]):
        assert later.start_time >= earlier.end_time, "two rounds of one backfill ran at the same time"
    for key in keys:
        metadata = latest_metadata(instance, dg.AssetKey("checkpoint"), key)[0]
        assert metadata["parent_checkpoint_hash"] == f"h-{previous_round(key) or 'base'}"


def test_a_backfill_of_rounds_runs_them_one_after_another(tmp_path, monkeypatch):
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget

    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(LOCAL_INSTANCE)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    workspace = _workspace(tmp_path)
    instance = dg.DagsterInstance.get()
    from tests.orchestration.backfill_location import base_model

    assert dg.materialize([base_model], instance=instance).success
    for key in ("r000", "r001", "r002", "r003"):
        register_round(instance, key)
    log = (tmp_path / "daemon.log").open("wb")
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", str(workspace)],
        cwd=ROOT,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        with WorkspaceProcessContext(instance, WorkspaceFileTarget([str(workspace)])) as context:
            # From an asset's page: materialize `checkpoint` for two rounds (an asset backfill).
            from_asset = _launch(
                context, {"assetSelection": [{"path": ["checkpoint"]}], "partitionNames": ["r000", "r001"]}
            )
            _wait(instance, from_asset, daemon)
            _assert_sequential(instance, from_asset, ["r000", "r001"])
            # From the round job's page: a backfill of its partition set (a job backfill).
            repository = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__"}
            selector = {"partitionSetName": "round_partition_set", "repositorySelector": repository}
            from_job = _launch(context, {"selector": selector, "partitionNames": ["r002", "r003"]})
            _wait(instance, from_job, daemon)
            _assert_sequential(instance, from_job, ["r002", "r003"])
    except AssertionError:
        log.flush()
        print((tmp_path / "daemon.log").read_text(errors="replace")[-4000:])
        raise
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=60)
        log.close()
