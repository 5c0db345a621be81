"""The filter ablation as Dagster assets, materialized with real Dagster: the
setup, then the `filter_ablation` job for each arm and round (partition
arm|round). Round N of an arm must start from that arm's round N-1, and the
job's figures must tell the same story as the command's."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from assets.ablation import ablation_setup
from orchestration.definitions import defs
from orchestration.lineage import latest_metadata
from orchestration.partitions import ABLATION_ROUNDS_NAME
from tests.experiments.conftest import TINY, assert_filter_effect, assert_real_intervals
from touchstone.paths import Asset


ROUND = dg.AssetKey(Asset.ABLATION_ROUND)
FIGURES = ("kept_rows", "kept_hacks", "kept_hack_share", "hack_propensity", "imitation_nll")


def _config(out: Path, task_sets: tuple[Path, Path]) -> dict:
    settings = TINY.model_dump(exclude={"rounds"}, exclude_none=True)  # Dagster config holds no nulls
    return {"settings": settings, "directory": str(out), "tasks": str(task_sets[0]), "heldout": str(task_sets[1])}


def _step_errors(result: dg.ExecuteInProcessResult) -> str:
    return " ".join(e.step_failure_data.error.message for e in result.all_events if e.is_step_failure)


@pytest.mark.slow  # the tiny experiment twice: the command's (shared, 9 min) and the job's (7 min), at load 13
@pytest.mark.timeout(2700)
def test_the_job_materializes_each_arm_and_round_from_the_arms_previous_round(tmp_path, tiny_task_sets, cli_experiment):
    instance = dg.DagsterInstance.ephemeral()
    config = _config(tmp_path / "out", tiny_task_sets)
    setup = dg.materialize(
        [ablation_setup], instance=instance, run_config={"ops": {"ablation_setup": {"config": config}}}
    )
    assert setup.success
    base = latest_metadata(instance, dg.AssetKey(Asset.ABLATION_SETUP))[0]
    assert base["heldout_tasks"] == 2 and base["train_tasks"] == 3 and "hack_propensity" in base

    instance.add_dynamic_partitions(ABLATION_ROUNDS_NAME, ["r000", "r001"])
    job = defs.resolve_job_def("filter_ablation")

    def launch(arm: str, round_key: str) -> dg.ExecuteInProcessResult:
        return job.execute_in_process(
            instance=instance,
            partition_key=dg.MultiPartitionKey({"arm": arm, "round": round_key}),
            run_config={"ops": {"ablation_round": {"config": config}}},
            raise_on_error=False,
        )

    early = launch("naive", "r001")  # round 1 before round 0: refused, nothing computed
    assert not early.success and "naive|r000" in _step_errors(early) and "not been materialized" in _step_errors(early)
    assert not (tmp_path / "out" / "shared" / "r001").exists()

    runs, rows = {}, {}
    for round_key in ("r000", "r001"):
        for arm in ("naive", "touchstone"):
            result = launch(arm, round_key)
            assert result.success, _step_errors(result)
            partition = f"{arm}|{round_key}"
            metadata, runs[partition] = latest_metadata(instance, ROUND, partition)
            assert runs[partition] == result.run_id
            assert all(isinstance(metadata[k], float) for k in FIGURES), metadata
            rows[partition] = {"round": int(round_key[1:]), **metadata}
    for arm in ("naive", "touchstone"):  # r001 of an arm started from that arm's r000, as recorded
        child, parent = rows[f"{arm}|r001"], rows[f"{arm}|r000"]
        assert child["parent_partition"] == f"{arm}|r000" and child["parent_run"] == runs[f"{arm}|r000"]
        assert child["start_checkpoint_hash"] == parent["checkpoint_hash"]
    assert rows["naive|r000"]["checkpoint_hash"] != rows["touchstone|r000"]["checkpoint_hash"]

    job_arms = {arm: [rows[f"{arm}|r000"], rows[f"{arm}|r001"]] for arm in ("naive", "touchstone")}
    assert_filter_effect(base, job_arms["naive"], job_arms["touchstone"])
    assert_real_intervals([base, *rows.values()])
    cli, _ = cli_experiment  # the command, run from scratch elsewhere, shows the same direction
    assert_filter_effect(cli["base"], cli["arms"]["naive"], cli["arms"]["touchstone"])
