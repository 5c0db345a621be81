"""Two rounds through `touchstone round run --rounds 2 -c`, with the shipped
`orchestration/deploy/local-served.yaml` (the tests' tiny round settings added):
round r001 rolls out r000's checkpoint through the OpenAI policy against a real
`transformers serve`, started and stopped by the `server` resource, and when the
command exits no server is left running.

r001 runs the served tiny model alone (no teacher attempts): the 0.9M-parameter
model writes no tool call that passes (docs/EXPERIMENTS.md), so the verifier
rejects every run, r001 has nothing to train on, and the run must still finish:
r001 records "no update" and hands r000's checkpoint to the next round, visible
in metadata and in `touchstone round list`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from orchestration.lineage import latest_metadata, starting_checkpoint
from orchestration.run_config import load_run_config

from tests.assets.conftest import tiny_run_config

# The shared tiny settings (8 tasks: fewer and the teacher may solve none in r000, which then
# trains nothing and r001 would serve the base weights, proving nothing about serving a new
# checkpoint). r001 runs without the teacher and, training nothing, evaluates nothing: two server
# starts (r000's evaluation, r001's rollouts). Passed in 35 min at load 12-18 on 2 cores
# (sources 5.5, r000 16.5, r001 13); before (teacher in r001, three starts) sources and r000
# alone took 38 min at load 13-18. With 4 tasks it took 19 min, but r000 then trained nothing.
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
    """local-served.yaml's resources over the tiny settings, r001 without the teacher, as a file for `-c`."""
    served = {k: v["config"] for k, v in load_run_config(LOCAL_SERVED)["resources"].items()}
    served["policy"] = {**served["policy"], "teacher_attempts": 0}
    path.write_text(yaml.safe_dump(tiny_run_config(**served)))
    return path


def test_round_r001_rolls_out_r000s_checkpoint_through_a_served_model(tmp_path):
    import dagster as dg

    home, dagster_home = tmp_path / "touchstone", tmp_path / "dagster_home"
    env = {**os.environ, "TOUCHSTONE_HOME": str(home), "DAGSTER_HOME": str(dagster_home)}
    touchstone = str(Path(sys.executable).parent / "touchstone")
    command = [touchstone, "round", "run", "--rounds", "2", "-c", str(_served_run_config(tmp_path / "run.yaml"))]
    with (tmp_path / "round-run.log").open("w") as log:
        done = subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    output = (tmp_path / "round-run.log").read_text()
    assert done.returncode == 0, output[-6000:]
    assert "round r001: no update this round (no sft row to train on" in output

    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        base = latest_metadata(instance, dg.AssetKey("base_model"))[0]["checkpoint_hash"]
        r000 = latest_metadata(instance, dg.AssetKey("checkpoint"), "r000")[0]
        r001 = latest_metadata(instance, dg.AssetKey("checkpoint"), "r001")[0]
        evaluated = latest_metadata(instance, dg.AssetKey("round_evaluation"), "r001")[0]
        r002_start = starting_checkpoint(instance, "r002")
    r000_hash = r000["checkpoint_hash"]
    trajs = pl.read_parquet(home / "rounds" / "r001" / "raw_trajectories" / "trajectories.parquet")
    assert trajs.height > 0 and trajs["policy"].str.starts_with("openai:http://127.0.0.1:").all()
    assert set(trajs["policy"].str.split("#").list.last()) == {r000_hash}
    assert set(trajs["checkpoint_hash"]) == {r000_hash}  # lineage names the model that answered

    # r001 verified nothing to train on: it keeps r000's weights, says so, and r002 starts from them
    assert (r001["updated"], r001["checkpoint_hash"], r001["parent_round"]) == (False, r000_hash, "r000")
    assert f"{trajs.height} runs verified (" in r001["no_update"]  # the cause, named
    assert (evaluated["updated"], evaluated["promoted"], evaluated["next_checkpoint_round"]) == (False, False, "r000")
    assert not (home / "rounds" / "r001" / "round_evaluation" / "rollouts").exists()
    assert (r002_start.round, r002_start.checkpoint_hash) == ("r000", r000_hash)
    listed = subprocess.run([touchstone, "round", "list"], env=env, capture_output=True, text=True, check=True)
    assert "r001" in listed.stdout and "no update this round" in listed.stdout, listed.stdout

    # r000's teacher runs trained a new checkpoint, served by r000's evaluation and by r001
    assert r000["updated"] and r000_hash != base, r000.get("no_update")
    attempts = pl.read_parquet(home / "rounds" / "r000" / "round_evaluation" / "rollouts" / "trajectories.parquet")
    assert set(attempts["checkpoint_hash"]) == {r000_hash} and attempts["policy"][0].startswith("openai:")
    assert not _server_processes(r000_hash) and not _server_processes(base)
