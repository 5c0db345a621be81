"""The checkpoint step runs training as a Dagster Pipes subprocess: the
trainer's progress and metrics reach the asset, a trainer crash fails the step
with the trainer's error, and a config field TRL does not know is refused by name."""

from __future__ import annotations

import shutil

import dagster as dg
import polars as pl
import pytest

from assets.checkpoint import checkpoint
from orchestration.partitions import register_round
from orchestration.resources import StorageResource, TrainerResource
from tests.training.conftest import copy_as_round
from touchstone.checkpoint import checkpoint_hash, verify_checkpoint
from touchstone.paths import WARM_START_DATA
from training.warm_start import WARM_START_ROUND


def _round(tmp_path, tiny_model, data):
    """An instance where r000 can train: a base_model materialization and training data on disk."""
    instance = dg.DagsterInstance.ephemeral()
    register_round(instance, "r000")
    instance.report_runless_asset_event(
        dg.AssetMaterialization(
            "base_model", metadata={"path": str(tiny_model), "checkpoint_hash": checkpoint_hash(tiny_model)}
        )
    )
    storage = StorageResource(root=str(tmp_path / "home"))
    shutil.copytree(data, storage.store().asset_dir("training_data", "r000"))
    return instance, storage


def _train(instance, storage, trainer):
    return dg.materialize(
        [checkpoint],
        instance=instance,
        partition_key="r000",
        raise_on_error=False,
        resources={"storage": storage, "trainer": trainer, "pipes": dg.PipesSubprocessClient()},
    )


@pytest.mark.slow
def test_training_reports_progress_and_metrics_through_pipes(tmp_path, tiny_model, data_dir):
    instance, storage = _round(tmp_path, tiny_model, data_dir)
    result = _train(instance, storage, TrainerResource(max_steps=2, config={"logging_steps": 1}))
    assert result.success
    [mat] = result.asset_materializations_for_node("checkpoint")
    meta = {k: v.value for k, v in mat.metadata.items()}
    manifest = verify_checkpoint(storage.store().asset_dir("checkpoint", "r000"))
    assert meta["checkpoint_hash"] == manifest.content_hash and meta["steps"] == 2
    assert [p["step"] for p in meta["loss_curve"]] == [1.0, 2.0] and meta["tokens_per_s"] > 0
    rows = pl.read_parquet(storage.store().local_dir("training_data", "r000") / "sft.parquet")
    assert meta["rows_by_round"] == dict(rows["round"].value_counts().iter_rows())  # r000: no earlier round
    logs = [e.message for e in instance.all_logs(result.run_id) if e.user_message.startswith("train ")]
    assert any("loss=" in m for m in logs), "the trainer's steps were not logged through Pipes"


def test_a_trainer_crash_fails_the_step_with_the_trainers_error(tmp_path, tiny_model, data_dir):
    instance, storage = _round(tmp_path, tiny_model, data_dir)
    sft = storage.store().local_dir("training_data", "r000") / "sft.parquet"
    pl.read_parquet(sft).head(0).write_parquet(sft)  # nothing verified this round
    result = _train(instance, storage, TrainerResource(max_steps=1))
    assert not result.success
    [failure] = [e.step_failure_data for e in result.all_events if e.is_step_failure]
    assert "training failed: TrainingError" in failure.error.message and "no rows" in failure.error.message
    assert not storage.store().asset_dir("checkpoint", "r000").exists()


@pytest.mark.parametrize("method,bad", [("sft", "per_device_batch_size"), ("dpo", "betta"), ("rl", "max_lenght")])
def test_unknown_trainer_fields_are_refused_by_name_before_training(
    tmp_path,
    tiny_model,
    data_dir,
    method,
    bad,
):
    instance, storage = _round(tmp_path, tiny_model, data_dir)
    result = _train(instance, storage, TrainerResource(method=method, config={bad: 1}))
    [failure] = [e.step_failure_data for e in result.all_events if e.is_step_failure]
    assert not result.success and f"'{bad}'" in failure.error.message


@pytest.mark.slow
@pytest.mark.parametrize("replay_warm_start", [True, False])
def test_a_round_also_trains_on_the_warm_starts_rows(tmp_path, tiny_model, data_dir, replay_warm_start):
    instance, storage = _round(tmp_path, tiny_model, data_dir)
    n_warm = copy_as_round(data_dir, storage.store().asset_dir(WARM_START_DATA), WARM_START_ROUND)  # as base_model does
    trainer = TrainerResource(max_steps=1, replay_warm_start=replay_warm_start)
    result = _train(instance, storage, trainer)
    assert result.success
    [mat] = result.asset_materializations_for_node("checkpoint")
    rows = pl.read_parquet(storage.store().local_dir("training_data", "r000") / "sft.parquet")
    expected = {
        **dict(rows["round"].value_counts().iter_rows()),
        **({WARM_START_ROUND: n_warm} if replay_warm_start else {}),
    }
    assert mat.metadata["rows_by_round"].value == expected


def test_a_round_takes_steps_for_the_rows_it_verified_up_to_max_steps():
    trainer = TrainerResource(max_steps=60, steps_per_row=15)
    assert [trainer.round_config(n)["max_steps"] for n in (1, 2, 4, 9)] == [15, 30, 60, 60]
    assert TrainerResource(max_steps=60, steps_per_row=0).round_config(1)["max_steps"] == 60
    explicit = TrainerResource(steps_per_row=15, config={"max_steps": 7})  # the TRL config wins
    assert explicit.round_config(1)["max_steps"] == 7
    assert TrainerResource(method="dpo", max_steps=60).round_config(1)["max_steps"] == 60  # rows are SFT rows


@pytest.mark.slow
def test_the_checkpoint_step_trains_the_steps_its_rows_call_for(tmp_path, tiny_model, data_dir):
    instance, storage = _round(tmp_path, tiny_model, data_dir)
    rows = pl.read_parquet(data_dir / "sft.parquet").height
    result = _train(instance, storage, TrainerResource(max_steps=rows + 5, steps_per_row=1, replay_warm_start=False))
    assert result.success
    [mat] = result.asset_materializations_for_node("checkpoint")
    assert mat.metadata["steps"].value == mat.metadata["max_steps"].value == rows
