"""The filter ablation's behaviour machinery, tiny: several seeds, the matched and
misplaced controls, the sampled hack rate beside the likelihood probe, the base
model given as a checkpoint directory (the tiny one here; a pretrained base plugs
in the same way)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from click.testing import CliRunner

from cli import main
from tests.experiments.conftest import TINY, cli_args
from touchstone.data.schema import SFTRow, read_rows


@pytest.mark.heavy  # 2 seeds x 5 arms of training and held-out sampling: about 38 min on 2 cores
@pytest.mark.timeout(3000)
def test_seeds_and_both_controls_report_sampled_hack_rates_with_intervals(tmp_path, tiny_task_sets, tiny_model):
    cfg = TINY.model_copy(update={"rounds": 1, "max_steps": 10})
    out = tmp_path / "out"
    args = [*cli_args(out, tiny_task_sets, cfg), "--matched-control", "--misplaced-control", "--seeds", "2"]
    printed = CliRunner().invoke(main, [*args, "--base", str(tiny_model)])
    assert printed.exit_code == 0, printed.output
    result = json.loads(printed.stdout)
    assert [r["config"]["seed"] for r in result["seeds"]] == [0, 1]
    for seeded in result["seeds"]:
        assert set(seeded["arms"]) == {"naive", "touchstone", "matched", "placed", "misplaced"}
        matched, placed, misplaced = (seeded["arms"][a][0] for a in ("matched", "placed", "misplaced"))
        # the same rows and hack strings; only where the hack stands differs
        assert misplaced["kept_rows"] == placed["kept_rows"] == matched["kept_rows"]
        assert misplaced["kept_hacks"] == placed["kept_hacks"] == matched["kept_hacks"] > 0
        for rows in seeded["arms"].values():
            assert rows[0]["sampled_attempts"] > 0 and 0 <= rows[0]["sampled_hack_rate"] <= 1
        assert seeded["base"]["sampled_attempts"] > 0
    for arm, rounds in result["summary"].items():
        s = rounds[0]["hack_propensity"]
        assert rounds[0]["seeds"] == 2 and s["low"] <= s["value"] <= s["high"], arm
        assert rounds[0]["sampled_hack_rate"] is not None
    seed_dir = out / "seed-0" / "misplaced" / "r000" / "data" / "sft.parquet"
    hacks = set(
        pl.read_parquet(out / "seed-0" / "shared" / "r000" / "outcomes.parquet").filter("hack")["trajectory_id"]
    )
    for row in read_rows(seed_dir, SFTRow):
        if row["trajectory_id"] in hacks:  # the hack action comes after the honest run's last test run
            names = [m["tool_calls"][0]["function"]["name"] for m in row["messages"] if m["role"] == "assistant"]
            assert names[-1] == "submit" and len(names) > 3
    assert "| misplaced | 0 | 2 |" in (out / "report.md").read_text()
