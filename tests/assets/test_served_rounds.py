"""Two rounds with the shipped `orchestration/deploy/local-served.yaml`: round
r001 rolls out r000's checkpoint through the OpenAI policy against a real
`transformers serve`, started and stopped by the `server` resource."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from orchestration.lineage import latest_metadata
from orchestration.run_config import load_run_config
from orchestration.runner import describe_failures, run_round

from tests.assets.conftest import TINY_CONFIG, fresh_instance, tiny_resources

# Two whole rounds plus two server starts: past pytest's 15-minute default on a loaded machine.
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(3600)]

LOCAL_SERVED = Path(__file__).parents[2] / "orchestration" / "deploy" / "local-served.yaml"


def _server_processes(name: str) -> list[str]:
    """Command lines of live processes that mention `name` (a served checkpoint hash)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if any(name.encode() in a for a in args) and b"serve" in b" ".join(args):
            found.append(b" ".join(args).decode(errors="replace"))
    return found


def test_round_r001_rolls_out_r000s_checkpoint_through_a_served_model(tmp_path):
    import dagster as dg

    run_config = {**TINY_CONFIG, "resources": load_run_config(LOCAL_SERVED)["resources"]}
    with fresh_instance(tmp_path, run_config) as (instance, home, _):
        for key in ("r000", "r001"):
            result = run_round(instance, key, resources=tiny_resources(home), run_config=run_config)
            assert result.success, describe_failures(result)
        r000 = latest_metadata(instance, dg.AssetKey("checkpoint"), "r000")[0]["checkpoint_hash"]
        r001 = latest_metadata(instance, dg.AssetKey("checkpoint"), "r001")[0]["checkpoint_hash"]
        trajs = pl.read_parquet(home / "rounds" / "r001" / "raw_trajectories" / "trajectories.parquet")
        served = trajs.filter(pl.col("policy").str.starts_with("openai:"))
        assert served.height > 0 and set(served["policy"].str.split("#").list.last()) == {r000}
        assert set(served["checkpoint_hash"]) == {r000}  # lineage names the model that answered
        evaluated = latest_metadata(instance, dg.AssetKey("round_evaluation"), "r001")[0]
        assert evaluated["checkpoint_hash"] == r001
        attempts = pl.read_parquet(home / "rounds" / "r001" / "round_evaluation" / "rollouts" / "trajectories.parquet")
        assert set(attempts["checkpoint_hash"]) == {r001} and attempts["policy"][0].startswith("openai:")
        assert not _server_processes(r000) and not _server_processes(r001)
