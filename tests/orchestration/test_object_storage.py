"""An object-store data root end to end, against a real S3-compatible server
(moto in server mode on loopback, started here): TOUCHSTONE_HOME=s3://bucket/prefix
is never turned into a local path, a whole round writes every asset there and
reads it back (checkpoints included), DuckDB views read the remote Parquet, and
rematerializing an asset there replaces its files without duplicates."""

import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest

from orchestration.resources import StorageResource
from orchestration.runner import (
    ROUND_STAGES,
    SOURCE_STAGES,
    ensure_sources,
    failed_checks,
    materialize,
    run_round,
)
from orchestration.storage import RoundStore, read_parquet
from tests.assets.conftest import TINY_CONFIG, tiny_resources
from tests.serving import free_port
from touchstone import paths

BUCKET = "touchstone-rounds"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server on 127.0.0.1 with one bucket; AWS_* variables pointing at it."""
    import boto3
    import s3fs

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    # fsspec caches S3 filesystems by their arguments, not the AWS_* environment: one made
    # for an earlier module's server (or a proxy in front of it) would outlive it
    s3fs.S3FileSystem.clear_instance_cache()
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        deadline = time.monotonic() + 30
        while True:
            try:
                boto3.client("s3").create_bucket(Bucket=BUCKET)
                break
            except Exception:
                if time.monotonic() > deadline or server.poll() is not None:
                    server.kill()
                    raise
                time.sleep(0.3)
        yield boto3.client("s3")
    server.kill()
    server.wait()
    s3fs.S3FileSystem.clear_instance_cache()


def _keys(client, prefix: str) -> set[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return {obj["Key"] for page in pages for obj in page.get("Contents", [])}


def test_a_url_home_is_kept_as_given_and_local_state_goes_elsewhere(monkeypatch, tmp_path):
    monkeypatch.setenv("TOUCHSTONE_HOME", "s3://bucket/some/prefix")
    monkeypatch.setenv("TOUCHSTONE_LOCAL_HOME", str(tmp_path))
    assert paths.data_root() == "s3://bucket/some/prefix"
    assert paths.home() == tmp_path
    store = StorageResource().store()
    assert str(store.root) == "s3://bucket/some/prefix" and not store.is_local
    assert store.db_path == tmp_path / "touchstone.duckdb"
    monkeypatch.setenv("TOUCHSTONE_HOME", "relative/dir")
    assert paths.data_root() == str(Path("relative/dir").resolve())


def test_credentials_come_from_env_vars_at_run_time(s3, monkeypatch):
    """EnvVar fields: the resource holds the variable's name, the store gets its value."""
    monkeypatch.setenv("TS_TEST_KEY", "testing")
    resource = StorageResource(
        root=f"s3://{BUCKET}/creds",
        access_key_id=dg.EnvVar("TS_TEST_KEY"),
        secret_access_key=dg.EnvVar("AWS_SECRET_ACCESS_KEY"),
    )

    @dg.asset
    def probe(storage: StorageResource) -> None:
        store = storage.store()
        assert store.options["key"] == "testing"
        with store.publish("probe") as out:
            pl.DataFrame({"x": [1]}).write_parquet(out / "x.parquet")

    assert dg.materialize([probe], resources={"storage": resource}).success
    assert _keys(s3, "creds/") == {"creds/probe/x.parquet"}


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.timeout(1800)
def test_a_round_lives_in_the_object_store_and_rematerializes_idempotently(s3, tmp_path, monkeypatch):
    root = f"s3://{BUCKET}/rounds-root"
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("TOUCHSTONE_HOME", root)
    monkeypatch.setenv("TOUCHSTONE_LOCAL_HOME", str(tmp_path / "local"))
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    monkeypatch.chdir(tmp_path)  # nothing may land in a cwd-relative "s3:" directory
    resources = tiny_resources(root)
    instance = dg.DagsterInstance.get()
    assert ensure_sources(instance, resources=resources, run_config=TINY_CONFIG).success
    result = run_round(instance, "r000", resources=resources, run_config=TINY_CONFIG)
    assert result.success and not failed_checks(result)

    keys = _keys(s3, "rounds-root/")
    for stage in ROUND_STAGES:
        assert any(k.startswith(f"rounds-root/rounds/r000/{stage}/") for k in keys), stage
    for stage in SOURCE_STAGES:
        assert any(k.startswith(f"rounds-root/{stage}/") for k in keys), stage
    assert "rounds-root/rounds/r000/checkpoint/checkpoint.json" in keys
    assert not (tmp_path / "s3:").exists()
    assert not any(".staging" in k or ".work" in k for k in keys)

    store = RoundStore(root)
    meta = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=dg.AssetKey("checkpoint")), limit=1)
    assert str(meta.records[0].asset_materialization.metadata["path"].value).startswith(f"{root}/rounds/r000/")

    # DuckDB views over the remote Parquet (fsspec registered on the connection).
    store.refresh_views()
    con = store.connect(read_only=True)
    sft_rows = con.execute("SELECT count(*) FROM sft WHERE round = 'r000'").fetchone()[0]
    assert sft_rows > 0
    assert (
        con.execute("SELECT count(*) FROM reports").fetchone()[0]
        == read_parquet(store.asset_dir("verification_reports", "r000") / "reports.parquet").height
    )
    con.close()

    # Rematerialize training_data there: same rows, no duplicates, no stray objects.
    path = store.asset_dir("training_data", "r000") / "sft.parquet"
    before = read_parquet(path).sort("trajectory_id")
    again = materialize(instance, ["training_data"], partition_key="r000", resources=resources, run_config=TINY_CONFIG)
    assert again.success
    after = read_parquet(path).sort("trajectory_id")
    assert after.equals(before) and after["trajectory_id"].n_unique() == after.height
    assert _keys(s3, "rounds-root/rounds/r000/training_data/") == {
        k for k in keys if k.startswith("rounds-root/rounds/r000/training_data/")
    }
    con = duckdb.connect(str(store.db_path), read_only=True)
    con.register_filesystem(store.root.fs)
    assert con.execute("SELECT count(*) FROM sft WHERE round = 'r000'").fetchone()[0] == sft_rows
