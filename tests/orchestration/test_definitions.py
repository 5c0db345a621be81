"""The code location loads: in-process, and through the `dagster` CLI with workspace.yaml."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from orchestration.definitions import defs

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["seed_sources", "base_model", "heldout_tasks", "base_evaluation"]
ROUND = [
    "proposed_tasks",
    "raw_trajectories",
    "verification_reports",
    "training_data",
    "checkpoint",
    "round_evaluation",
]
STAGES = SOURCES + ROUND
# the filter ablation and the credit study (docs/EXPERIMENTS.md)
EXPERIMENTS = ["ablation_setup", "ablation_round", "credit_study_data", "credit_study_arm"]
CONTROLS = ["control_evaluation"]  # a round's control arm, after its evaluation, outside the round job


def test_every_stage_is_an_asset_in_order():
    graph = defs.resolve_asset_graph()
    assert {k.to_user_string() for k in graph.get_all_asset_keys()} == set(STAGES + EXPERIMENTS + CONTROLS)
    assert dg.AssetKey("round_evaluation") in graph.get(dg.AssetKey("control_evaluation")).parent_keys
    assert "control_evaluation" not in {
        k.to_user_string() for k in defs.resolve_job_def("round").asset_layer.executable_asset_keys
    }
    base_evaluation = graph.get(dg.AssetKey("base_evaluation")).parent_keys
    assert base_evaluation == {dg.AssetKey("base_model"), dg.AssetKey("heldout_tasks")}
    assert "base_evaluation" in {
        k.to_user_string() for k in defs.resolve_job_def("sources").asset_layer.executable_asset_keys
    }
    chain = ROUND
    for upstream, downstream in zip(chain, chain[1:]):
        assert dg.AssetKey(upstream) in graph.get(dg.AssetKey(downstream)).parent_keys


def test_round_assets_are_partitioned_by_round_and_checks_block():
    graph = defs.resolve_asset_graph()
    for name in ROUND:
        partitions = graph.get(dg.AssetKey(name)).partitions_def
        assert isinstance(partitions, dg.DynamicPartitionsDefinition) and partitions.name == "rounds"
    checks = {key.name: graph.get_check_spec(key) for key in graph.asset_check_keys}
    assert set(checks) == {
        "canaries_caught",
        "only_accepted_trajectories",
        "no_heldout_tasks",
        "schema_and_rows",
        "promotion_gate",
    }  # blocking with WARN severity: not promoted never fails the run
    assert all(spec.blocking for spec in checks.values())


def test_the_filter_ablation_is_a_job_with_a_partition_per_arm_and_round():
    job = defs.resolve_job_def("filter_ablation")
    dims = {d.name: d.partitions_def for d in job.partitions_def.partitions_defs}
    assert dims["arm"].get_partition_keys() == ["naive", "touchstone"]
    assert isinstance(dims["round"], dg.DynamicPartitionsDefinition) and dims["round"].name == "ablation_rounds"
    graph = defs.resolve_asset_graph()
    assert dg.AssetKey("ablation_setup") in graph.get(dg.AssetKey("ablation_round")).parent_keys


def test_the_credit_study_is_a_job_with_a_partition_per_arm():
    job = defs.resolve_job_def("credit_study")
    assert job.partitions_def.get_partition_keys() == ["uniform", "progress", "shuffled", "outcome_rl"]
    graph = defs.resolve_asset_graph()
    assert dg.AssetKey("credit_study_data") in graph.get(dg.AssetKey("credit_study_arm")).parent_keys


def test_schedule_and_sensor_are_off_by_default():
    schedule = defs.resolve_schedule_def("nightly_round")
    sensor = defs.resolve_sensor_def("continuous_rounds")
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED


def test_dg_checks_the_project(tmp_path):
    """`dg check defs` (the project's `[tool.dg]` in pyproject.toml) loads every definition."""
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "DAGSTER_DISABLE_TELEMETRY": "1"}
    result = subprocess.run(
        [str(Path(sys.executable).with_name("dg")), "check", "defs"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "All definitions loaded successfully" in result.stderr + result.stdout
