"""The round's assets proposed_tasks → raw_trajectories → verification_reports →
training_data materialized for real on a tiny config with self-proposal on,
the proposer replaying recorded model outputs (`self_policy: replay:FILE`)."""

from __future__ import annotations

import json

import dagster as dg
import polars as pl
import pytest

from orchestration.lineage import latest_metadata
from orchestration.partitions import register_round
from orchestration.runner import describe_failures, failed_checks, materialize
from tests.assets.conftest import fresh_instance, tiny_resources
from tests.tasks.test_selfplay import BY_LABEL
from tests.tasks.test_selfplay_round import EVENS

# Sources plus four stages of a round: 15 min on a loaded 2-core machine, like the other heavy round tests.
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(3600)]

STAGES = ["proposed_tasks", "raw_trajectories", "verification_reports", "training_data"]


def test_round_assets_with_self_proposal_on_recorded_outputs(tmp_path):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps([EVENS, BY_LABEL["malformed_json"], BY_LABEL["trivially_easy"], "no task"]))
    config = {
        "ops": {
            "seed_sources": {"config": {"seeds": ["inflection"]}},
            "heldout_tasks": {"config": {"n_tasks": 1}},
            "base_model": {"config": {"n_tasks": 0}},
            "proposed_tasks": {"config": {"n_tasks": 2, "self_proposals": 4, "self_group_size": 2,
                                          "self_kinds": ["standalone"], "self_policy": f"replay:{outputs}"}},
            "raw_trajectories": {"config": {"attempts": 1}},
        }
    }  # fmt: skip
    with fresh_instance(tmp_path, config) as (instance, home, _env):
        register_round(instance, "r000")
        result = materialize(instance, STAGES, partition_key="r000", resources=tiny_resources(home), run_config=config)
        assert result.success, describe_failures(result)
        # the proposer's rows never break the blocking checks on training data
        assert not {"only_accepted_trajectories", "no_heldout_tasks"} & set(failed_checks(result))
        meta = latest_metadata(instance, dg.AssetKey("proposed_tasks"), "r000")[0]
        assert meta["self_proposal"].startswith("1 of 4 self-proposals valid")
        assert meta["sources"]["self"]["rejected"] == {"malformed": 2, "already_solved": 1}
        tasks_dir = home / "rounds" / "r000" / "proposed_tasks"
        proposals = pl.read_parquet(tasks_dir / "proposals.parquet")
        assert proposals.height == 4 and set(proposals["policy"]) == {f"replay:{outputs}"}
        data = home / "rounds" / "r000" / "training_data"
        rewards = pl.read_parquet(data / "proposer_rewards.parquet")
        assert rewards.height == 4
        assert sorted(rewards["outcome"].to_list())[:3] == ["invalid", "invalid", "invalid"]
        summary = json.loads((data / "summary.json").read_text())
        assert summary["self_play"]["proposals"] == 4 and summary["self_play"]["valid"] == 1
        assert "1 of 4 self-proposals were valid" in (data / "selfplay.md").read_text()
        assert set(pl.read_parquet(data / "rl.parquet")["role"]) <= {"solver", "proposer"}
