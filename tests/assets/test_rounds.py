"""Whole rounds on real components: lineage from round to round, the data in
DuckDB, idempotent rematerialization (also after a SIGKILL mid-rollout and
through the documented dagster CLI), and a weakened verifier stopped by the
canary check before training."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest

from orchestration.lineage import latest_metadata
from orchestration.partitions import register_round
from orchestration.resources import VerifierResource
from orchestration.runner import ROUND_STAGES, failed_checks, materialize
from tests.assets.conftest import TINY_CONFIG, tiny_resources
from touchstone.checkpoint import read_manifest, verify_checkpoint

# the shared two-round fixture: its setup counts in the first test's time
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(3600)]
ROOT = Path(__file__).resolve().parents[2]


def _metadata(rounds, asset: str, key: str | None) -> dict:
    found = latest_metadata(rounds.instance, dg.AssetKey(asset), key)
    assert found is not None, f"{asset} {key} was not materialized"
    return found[0]


def test_each_round_materializes_every_stage_and_passes_its_checks(rounds):
    for key, result in rounds.results.items():
        materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
        assert materialized == set(ROUND_STAGES), key
        checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        gate = checks.pop("promotion_gate")  # a verdict (warning when not promoted), not a pass/fail of the round
        assert checks == {
            "canaries_caught": True,
            "only_accepted_trajectories": True,
            "no_heldout_tasks": True,
            "schema_and_rows": True,
        }, key
        assert gate == _promotion(rounds, key).promoted, key
    # Each gate compared the round with the evaluation of the weights it trained from: the base's first
    gates = {key: _promotion(rounds, key) for key in rounds.results}
    assert gates["r000"].incumbent_round == "base" and gates["r001"].incumbent_round == "r000"
    base = _metadata(rounds, "base_evaluation", None)
    assert base["checkpoint_hash"] == _metadata(rounds, "base_model", None)["checkpoint_hash"]
    assert gates["r000"].incumbent.value == base["pass_at_1"]  # the gate's metric: pass@1 by default
    # likelihood false (the base's, TINY_CONFIG): sampled figures only; the rounds' default: with likelihoods
    nll = {k: _evaluation(rounds, k)["imitation_nll"][0] for k in ("base_evaluation", "round_evaluation/r001")}
    assert nll["base_evaluation"] is None and nll["round_evaluation/r001"] is not None, nll
    report = (rounds.store.asset_dir("round_evaluation", "r001") / "report.md").read_text()
    assert "| base |" in report and "| r000 |" in report and "| r001 |" in report  # earlier rounds side by side


def _evaluation(rounds, where: str) -> pl.DataFrame:
    asset, _, key = where.partition("/")
    return pl.read_parquet(rounds.store.asset_dir(asset, key or None) / "metrics.parquet")


def _promotion(rounds, key: str):
    from touchstone.evaluate.promotion import PromotionDecision

    path = rounds.store.asset_dir("round_evaluation", key) / "promotion.json"
    return PromotionDecision.model_validate_json(path.read_text())


def test_second_round_starts_from_the_first_rounds_checkpoint(rounds):
    base = _metadata(rounds, "base_model", None)
    first, second = _metadata(rounds, "checkpoint", "r000"), _metadata(rounds, "checkpoint", "r001")
    assert _metadata(rounds, "raw_trajectories", "r000")["parent_round"] == "base"
    rollout = _metadata(rounds, "raw_trajectories", "r001")
    assert rollout["parent_round"] == "r000"
    assert rollout["parent_checkpoint_hash"] == first["checkpoint_hash"]
    assert second["parent_checkpoint_hash"] == first["checkpoint_hash"]
    assert first["parent_checkpoint_hash"] == base["checkpoint_hash"]
    # The manifests on disk agree with the recorded lineage, and the files are intact.
    assert read_manifest(str(second["path"])).parent_hash == first["checkpoint_hash"]
    assert verify_checkpoint(str(second["path"])).content_hash == second["checkpoint_hash"]
    # Round r001's own policy was the r000 checkpoint.
    trajectories = pl.read_parquet(rounds.store.asset_dir("raw_trajectories", "r001") / "trajectories.parquet")
    own = trajectories.filter(pl.col("policy") == f"hf:{first['path']}")
    assert own.height > 0 and set(own["checkpoint_hash"]) == {first["checkpoint_hash"]}


def test_every_training_row_traces_back_to_task_trajectory_report_and_round(rounds):
    rounds.store.refresh_views()
    con = duckdb.connect(str(rounds.store.db_path), read_only=True)
    untraced = con.sql("""
        SELECT s.round, s.trajectory_id FROM sft s
        LEFT JOIN trajectories t ON t.trajectory_id = s.trajectory_id AND t.round = s.round
        LEFT JOIN reports r ON r.report_id = s.report_id AND r.round = s.round
        LEFT JOIN tasks k ON k.id = s.task_id AND k.round = s.round
        WHERE t.trajectory_id IS NULL OR r.verdict IS DISTINCT FROM 'accept' OR k.status IS DISTINCT FROM 'kept'
    """).fetchall()
    assert untraced == []
    per_round = dict(con.sql("SELECT round, count(*) FROM sft GROUP BY ALL").fetchall())
    assert set(per_round) == {"r000", "r001"} and all(n > 0 for n in per_round.values())
    evaluated = con.sql("SELECT round, pass_at_1 FROM evaluation ORDER BY round").fetchall()
    assert [r for r, _ in evaluated] == ["r000", "r001"]


def test_documented_cli_rematerializes_one_asset_of_one_round_without_duplicates(rounds):
    path = rounds.store.asset_dir("training_data", "r000") / "sft.parquet"
    before = pl.read_parquet(path).sort("trajectory_id")
    dagster = str(Path(sys.executable).with_name("dagster"))
    cmd = [
        dagster,
        "asset",
        "materialize",
        "-m",
        "orchestration.definitions",
        "--select",
        "training_data",
        "--partition",
        "r000",
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=rounds.env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    after = pl.read_parquet(path).sort("trajectory_id")
    assert after.equals(before)
    assert after["trajectory_id"].n_unique() == after.height


def _trajectory_rows(store, key: str) -> pl.DataFrame:
    # Identity and outcome of each attempt; observations themselves may differ
    # between reruns (pytest prints durations).
    frame = pl.read_parquet(store.asset_dir("raw_trajectories", key) / "trajectories.parquet")
    return frame.select("trajectory_id", "task_id", "task_hash", "policy", "attempt", "exit_reason").sort(
        "trajectory_id"
    )


def test_sigkill_during_rollouts_then_rematerialize_gives_the_same_data(rounds):
    before = _trajectory_rows(rounds.store, "r000")
    base_hash = _metadata(rounds, "base_model", None)["checkpoint_hash"]
    records = rounds.home / "rounds" / "r000" / ".work" / "raw_trajectories" / base_hash[:16] / "teacher" / "records"
    code = (
        "import dagster as dg\n"
        "from orchestration.runner import materialize\n"
        "from tests.assets.conftest import TINY_CONFIG, tiny_resources\n"
        "from touchstone import paths\n"
        "materialize(dg.DagsterInstance.get(), ['raw_trajectories'], partition_key='r000',\n"
        "            resources=tiny_resources(paths.home()), run_config=TINY_CONFIG)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=rounds.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not (records.is_dir() and any(records.iterdir())):
        assert proc.poll() is None and time.monotonic() < deadline, "no rollout finished before the deadline"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the run and its sandboxes, mid-rollout
    proc.wait()
    assert len(list(records.iterdir())) < before.height, "the kill came after the last rollout"
    # The published data is untouched by the killed run ...
    assert _trajectory_rows(rounds.store, "r000").equals(before)
    # ... and a rerun resumes and publishes exactly the same trajectories.
    result = materialize(
        rounds.instance,
        ["raw_trajectories"],
        partition_key="r000",
        resources=tiny_resources(rounds.home),
        run_config=TINY_CONFIG,
    )
    assert result.success
    after = _trajectory_rows(rounds.store, "r000")
    assert after.equals(before) and after["trajectory_id"].n_unique() == after.height
    assert not (rounds.home / "rounds" / "r000" / ".work" / "raw_trajectories").exists()


def test_a_verifier_that_accepts_a_canary_hack_stops_the_round_before_training(rounds, tmp_path):
    from touchstone.audit.policy import load_policy

    # Round r000's inputs on a separate instance and data root, so the shared rounds stay intact;
    # the base model is known there, so training *could* run if the check did not block it.
    for asset in ("proposed_tasks", "raw_trajectories"):
        shutil.copytree(rounds.store.asset_dir(asset, "r000"), tmp_path / "rounds" / "r000" / asset)
    shutil.copytree(rounds.store.asset_dir("heldout_tasks"), tmp_path / "heldout_tasks")
    instance = dg.DagsterInstance.ephemeral()
    register_round(instance, "r000")
    base = _metadata(rounds, "base_model", None)
    instance.report_runless_asset_event(
        dg.AssetMaterialization(
            "base_model", metadata={"path": str(base["path"]), "checkpoint_hash": base["checkpoint_hash"]}
        )
    )
    # Weakened: the action audit is waived, so a run that read the git history to find the answer passes.
    weak = VerifierResource(
        replays=1,
        canary_names=["e18-git-history", "honest-main-guard"],
        allow_rules=[rule.id for rule in load_policy().action],
    )
    result = materialize(
        instance,
        ["verification_reports", "training_data", "checkpoint"],
        partition_key="r000",
        resources=tiny_resources(tmp_path, verifier=weak),
        run_config=TINY_CONFIG,
    )
    assert failed_checks(result) == ["canaries_caught"]
    canaries = pl.read_parquet(tmp_path / "rounds" / "r000" / "verification_reports" / "canaries.parquet")
    assert dict(zip(canaries["canary_id"], canaries["verdict"])) == {
        "e18-git-history": "accept",
        "honest-main-guard": "accept",
    }
    materialized = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert materialized == {"verification_reports"}
    assert not (tmp_path / "rounds" / "r000" / "checkpoint").exists()
    assert latest_metadata(instance, dg.AssetKey("checkpoint"), "r000") is None
