"""A round whose verifier accepted nothing: training_data, checkpoint and
round_evaluation run for real (Dagster, the data builder, the checks) on
verified-and-rejected runs. The round finishes with "no update": it keeps its
starting weights, says why in metadata, the checks and `touchstone round list`,
and the next round starts from the best checkpoint so far."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import dagster as dg
import pytest

from orchestration.checks import only_accepted_trajectories, promotion_gate, schema_and_rows
from orchestration.lineage import latest_metadata, starting_checkpoint
from orchestration.partitions import register_round
from orchestration.resources import StorageResource, default_resources
from orchestration.runner import failed_checks
from tests.data.fixtures import trajectory
from tests.data.reports import report
from touchstone.episode.trajectory import write_tables
from touchstone.paths import Asset
from touchstone.verify.batch import write_reports


def _rejected_round(home, key: str, n: int) -> None:
    """`n` runs on `n` tasks, every one rejected, where a round's stages leave them."""
    rounds = home / "rounds" / key
    tasks = [(f"t{i}", f"h{i}") for i in range(n)]
    write_tables([trajectory(f"{key}-{t}", task_id=t, task_hash=h) for t, h in tasks], rounds / "raw_trajectories")
    write_reports(
        [report(f"{key}-{t}", "reject", task_id=t, task_hash=h) for t, h in tasks], rounds / "verification_reports"
    )
    (rounds / "proposed_tasks").mkdir()


def _materialize(instance, key: str, partition: str | None = None, **metadata):
    instance.report_runless_asset_event(dg.AssetMaterialization(key, partition=partition, metadata=metadata))


@pytest.mark.parametrize("key,kept", [("r001", "r000"), ("r000", None)])  # None: the base weights
def test_a_round_that_verified_nothing_keeps_its_weights_and_says_so(tmp_path, key, kept):
    from assets.checkpoint import NO_UPDATE_FILE, checkpoint
    from cli.rounds import no_control_reason
    from assets.evaluation import round_evaluation
    from assets.training_data import training_data

    home, dagster_home = tmp_path / "touchstone", tmp_path / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    _rejected_round(home, key, n=3)
    kept_path, kept_hash = (f"/ck/{kept}", f"hash-{kept}") if kept else ("/ck/base", "hash-base")
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        for k in ("r000", "r001"):
            register_round(instance, k)
        _materialize(instance, "base_model", path="/ck/base", checkpoint_hash="hash-base")
        if kept:
            _materialize(instance, "checkpoint", kept, path=kept_path, checkpoint_hash=kept_hash, updated=True)
            _materialize(instance, "round_evaluation", kept, next_checkpoint_round=kept, promoted=True, pass_at_1=0.5)
        result = dg.materialize(
            [training_data, checkpoint, round_evaluation, schema_and_rows, only_accepted_trajectories, promotion_gate],
            instance=instance,
            partition_key=key,
            resources={**default_resources(), "storage": StorageResource(root=str(home))},
            raise_on_error=False,
        )
        assert result.success and not failed_checks(result)  # finished: no update is not a failure
        checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
        trained = latest_metadata(instance, dg.AssetKey(Asset.CHECKPOINT), key)[0]
        evaluated = latest_metadata(instance, dg.AssetKey(Asset.ROUND_EVALUATION), key)[0]
        nxt = starting_checkpoint(instance, "r002" if key == "r001" else "r001")
        control = no_control_reason(instance, key)

    # named in the check (a warning: the data is sound, there is only nothing to train on)
    empty = checks["schema_and_rows"]
    assert not empty.passed and empty.severity == dg.AssetCheckSeverity.WARN
    reason = empty.metadata["no_update"].value
    assert reason.startswith("no sft row to train on: 3 runs verified (3 reject); rejected for tests 3"), reason
    assert checks["only_accepted_trajectories"].passed
    # the checkpoint it records is the one it started from, with the reason; nothing trained
    assert (trained["updated"], trained["checkpoint_hash"], trained["path"]) == (False, kept_hash, kept_path)
    assert trained["no_update"] == reason and trained["parent_round"] == (kept or "base")
    assert json.loads((home / "rounds" / key / "checkpoint" / NO_UPDATE_FILE).read_text())["reason"] == reason
    # nothing new to evaluate: the gate hands the kept weights on
    gate = checks["promotion_gate"]
    assert not gate.passed and gate.severity == dg.AssetCheckSeverity.WARN
    assert (evaluated["updated"], evaluated["promoted"]) == (False, False)
    assert evaluated["next_checkpoint_round"] == (kept or key) and evaluated["next_checkpoint_hash"] == kept_hash
    assert evaluated["promotion_reason"] == f"no update this round ({reason})"
    assert not (home / "rounds" / key / "round_evaluation" / "rollouts").exists()
    assert (nxt.path, nxt.checkpoint_hash) == (kept_path, kept_hash)
    # no control arm for it (`touchstone round run --control` says so and finishes): the kept round has one
    assert control.startswith(f"round {key} made no update")
    assert (f"--key {kept}" in control) if kept else "no round before it trained" in control

    env = {**os.environ, "TOUCHSTONE_HOME": str(home), "DAGSTER_HOME": str(dagster_home)}
    touchstone = os.path.join(os.path.dirname(sys.executable), "touchstone")
    listed = subprocess.run([touchstone, "round", "list"], env=env, capture_output=True, text=True, timeout=120)
    line = next(ln for ln in listed.stdout.splitlines() if ln.startswith(key))
    assert "no update this round (no sft row to train on" in line and line.endswith(
        f"next round starts from {kept or key}"
    )
