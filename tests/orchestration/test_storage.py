"""Parquet per asset and round, atomic replacement, and DuckDB views across rounds."""

import os
import signal
import subprocess
import sys

import duckdb
import polars as pl
import pytest

from orchestration.storage import RoundStore


def _write(store: RoundStore, round_key: str, rows: list[dict]) -> None:
    with store.publish("training_data", round_key) as out:
        pl.DataFrame(rows).write_parquet(out / "sft.parquet")


def test_rematerializing_replaces_rows_instead_of_appending(tmp_path):
    store = RoundStore(tmp_path)
    _write(store, "r000", [{"trajectory_id": "a"}, {"trajectory_id": "b"}])
    _write(store, "r000", [{"trajectory_id": "a"}, {"trajectory_id": "b"}])
    _write(store, "r001", [{"trajectory_id": "c"}])
    assert store.refresh_views() == ["sft"]
    con = duckdb.connect(str(store.db_path))
    rows = con.sql("SELECT round, trajectory_id FROM sft ORDER BY ALL").fetchall()
    assert rows == [("r000", "a"), ("r000", "b"), ("r001", "c")]


def test_a_failed_write_keeps_the_last_good_data(tmp_path):
    store = RoundStore(tmp_path)
    _write(store, "r000", [{"trajectory_id": "a"}])
    with pytest.raises(RuntimeError):
        with store.publish("training_data", "r000") as out:
            pl.DataFrame({"trajectory_id": ["partial"]}).write_parquet(out / "sft.parquet")
            raise RuntimeError("killed mid-write")
    assert pl.read_parquet(store.asset_dir("training_data", "r000") / "sft.parquet")["trajectory_id"].to_list() == ["a"]
    assert not list((tmp_path / "rounds" / "r000" / ".staging").iterdir())


def test_staging_left_by_a_killed_writer_is_removed_on_the_next_write(tmp_path):
    code = (
        "import os, sys, time\n"
        "from orchestration.storage import RoundStore\n"
        "with RoundStore(sys.argv[1]).publish('raw_trajectories', 'r000') as out:\n"
        "    (out / 'half.parquet').write_text('x'); print('ready', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    staging = tmp_path / "rounds" / "r000" / ".staging"
    assert len(list(staging.iterdir())) == 1
    store = RoundStore(tmp_path)
    with store.publish("raw_trajectories", "r000") as out:
        (out / "trajectories.parquet").write_text("complete")
    assert [p.name for p in store.asset_dir("raw_trajectories", "r000").iterdir()] == ["trajectories.parquet"]
    assert list(staging.iterdir()) == []


def test_views_skip_tables_without_files_and_keep_an_existing_round_column(tmp_path):
    store = RoundStore(tmp_path)
    assert store.refresh_views() == []
    _write(store, "r002", [{"trajectory_id": "x", "round": "r002"}])
    store.refresh_views()
    con = duckdb.connect(str(store.db_path))
    assert con.sql("SELECT round FROM sft").fetchall() == [("r002",)]


def test_missing_asset_data_names_the_asset_and_round(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoint has no data for round r004"):
        RoundStore(tmp_path).local_dir("checkpoint", "r004")


def test_an_object_store_root_works_through_upath(tmp_path, monkeypatch):
    monkeypatch.setenv("TOUCHSTONE_HOME", str(tmp_path))  # where the DuckDB file goes
    # fsspec's in-memory filesystem stands in for s3:// or gs:// (same UPath code path).
    store = RoundStore("memory://touchstone-test")
    _write(store, "r000", [{"trajectory_id": "a"}])
    _write(store, "r000", [{"trajectory_id": "a"}, {"trajectory_id": "b"}])
    assert not store.is_local
    local = store.local_dir("training_data", "r000")
    assert pl.read_parquet(local / "sft.parquet").height == 2
    assert store.refresh_views() == ["sft"]
    assert store.db_path == tmp_path / "touchstone.duckdb"
    with store.connect() as con:
        assert con.sql("SELECT round, count(*) FROM sft GROUP BY ALL").fetchall() == [("r000", 2)]
