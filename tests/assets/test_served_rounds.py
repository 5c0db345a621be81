"""Two rounds through `touchstone round run --rounds 2 -c`, with the shipped
`orchestration/deploy/local-served.yaml` (the tests' tiny round settings added):
round r001 rolls out r000's checkpoint through the OpenAI policy against a real
`transformers serve`, started and stopped by the `server` resource, and when the
command exits no server is left running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from orchestration.lineage import latest_metadata
from orchestration.run_config import load_run_config

from tests.assets.conftest import tiny_run_config

# Sources, two whole rounds and three server starts: sources and r000 alone took 38 min at load 13-18 here.
pytestmark = [pytest.mark.slow, pytest.mark.heavy, pytest.mark.timeout(5400)]

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


def _served_run_config(path: Path) -> Path:
    """local-served.yaml's resources over the tiny settings, as a file for `-c`."""
    served = {k: v["config"] for k, v in load_run_config(LOCAL_SERVED)["resources"].items()}
    path.write_text(yaml.safe_dump(tiny_run_config(**served)))
    return path


def test_round_r001_rolls_out_r000s_checkpoint_through_a_served_model(tmp_path):
    import dagster as dg

    home, dagster_home = tmp_path / "touchstone", tmp_path / "dagster_home"
    env = {**os.environ, "TOUCHSTONE_HOME": str(home), "DAGSTER_HOME": str(dagster_home)}
    command = [
        str(Path(sys.executable).parent / "touchstone"),
        *("round", "run", "--rounds", "2", "-c", str(_served_run_config(tmp_path / "run.yaml"))),
    ]
    with (tmp_path / "round-run.log").open("w") as log:
        done = subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    assert done.returncode == 0, (tmp_path / "round-run.log").read_text()[-6000:]

    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        r000 = latest_metadata(instance, dg.AssetKey("checkpoint"), "r000")[0]["checkpoint_hash"]
        r001 = latest_metadata(instance, dg.AssetKey("checkpoint"), "r001")[0]["checkpoint_hash"]
        evaluated = latest_metadata(instance, dg.AssetKey("round_evaluation"), "r001")[0]
    trajs = pl.read_parquet(home / "rounds" / "r001" / "raw_trajectories" / "trajectories.parquet")
    served = trajs.filter(pl.col("policy").str.starts_with("openai:"))
    assert served.height > 0 and set(served["policy"].str.split("#").list.last()) == {r000}
    assert set(served["checkpoint_hash"]) == {r000}  # lineage names the model that answered
    assert evaluated["checkpoint_hash"] == r001
    attempts = pl.read_parquet(home / "rounds" / "r001" / "round_evaluation" / "rollouts" / "trajectories.parquet")
    assert set(attempts["checkpoint_hash"]) == {r001} and attempts["policy"][0].startswith("openai:")
    assert not _server_processes(r000) and not _server_processes(r001)
