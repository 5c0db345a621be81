"""`touchstone round new/list` and `touchstone db` on a fresh DAGSTER_HOME / TOUCHSTONE_HOME."""

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl

TOUCHSTONE = str(Path(sys.executable).with_name("touchstone"))


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "TOUCHSTONE_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dagster")}
    return subprocess.run([TOUCHSTONE, *args], env=env, capture_output=True, text=True, timeout=120)


def test_round_new_registers_keys_on_the_instance_and_names_bad_ones(tmp_path):
    assert "no rounds yet" in _run(["round", "list"], tmp_path).stdout
    assert _run(["round", "new"], tmp_path).stdout.strip() == "r000"
    assert _run(["round", "new"], tmp_path).stdout.strip() == "r001"
    listed = _run(["round", "list"], tmp_path).stdout.splitlines()
    assert [line.split()[0] for line in listed] == ["r000", "r001"]
    as_json = json.loads(_run(["round", "list", "--json"], tmp_path).stdout)
    assert as_json == [{"round": "r000", "materialized": []}, {"round": "r001", "materialized": []}]
    assert (tmp_path / "dagster" / "dagster.yaml").is_file()
    bad = _run(["round", "new", "--key", "round-7"], tmp_path)
    assert bad.returncode != 0 and "bad round key 'round-7'" in bad.stderr


def test_db_queries_views_across_rounds(tmp_path):
    for key, n in (("r000", 2), ("r001", 3)):
        folder = tmp_path / "home" / "rounds" / key / "training_data"
        folder.mkdir(parents=True)
        pl.DataFrame({"trajectory_id": [f"{key}-{i}" for i in range(n)], "round": [key] * n}).write_parquet(
            folder / "sft.parquet"
        )
    out = _run(["db", "SELECT round, count(*) AS n FROM sft GROUP BY ALL ORDER BY round"], tmp_path)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith("│ r0")]
    assert rows == [["│", "r000", "│", "2", "│"], ["│", "r001", "│", "3", "│"]]
