"""Fault injection (the table: docs/FAULTS.md). Each fault hits a real
`touchstone round run` (or a real Dagster run on a real store); afterwards the
published data is whole (nothing lost, nothing duplicated) and a rerun completes.

- SIGKILL in each stage of one round (heavy), and Ctrl-C in
  the middle of the rollouts: the rerun keeps the round's proposed tasks;
- a full disk under the data root (a small tmpfs; needs root to mount);
- an S3 endpoint that fails mid-upload (a proxy in front of a moto server)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import threading
import time
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml

from orchestration.resources import StorageResource
from orchestration.runner import ROUND_STAGES, describe_failures, materialize
from orchestration.storage import RoundStore
from tests.assets.conftest import tiny_run_config
from tests.orchestration.test_object_storage import BUCKET, s3  # noqa: F401 (the moto server fixture)
from tests.orchestration.test_one_writer import TOUCHSTONE, _Run, _sandbox_processes
from tests.serving import free_port
from touchstone.paths import Asset


def _config(tmp_path: Path) -> Path:
    """The smallest whole round: one seed, three proposed tasks, one evaluation attempt."""
    config = tiny_run_config(sandbox={"backend": "bwrap"})
    config["ops"]["seed_sources"]["config"]["seeds"] = ["inflection"]
    config["ops"]["proposed_tasks"]["config"]["n_tasks"] = 3
    config["ops"]["round_evaluation"]["config"].update(attempts=1, matched_samples=0)
    path = tmp_path / "round.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _env(tmp_path: Path) -> dict:
    return {**os.environ, "TOUCHSTONE_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dagster_home")}


def _rerun(tmp_path: Path, config: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TOUCHSTONE, "round", "run", "-c", str(config)],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=3000,
    )


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_round_whole(home: Path, key: str = "r000") -> None:
    """Every stage published once, each row once, nothing half-written left behind."""
    base = home / "rounds" / key
    for stage in ROUND_STAGES:
        assert (base / stage).is_dir(), f"{stage} missing"
    index = pl.read_parquet(base / "proposed_tasks" / "index.parquet")
    kept = set(index.filter(pl.col("status") == "kept")["id"])
    trajectories = pl.read_parquet(base / "raw_trajectories" / "trajectories.parquet")
    assert trajectories["trajectory_id"].is_unique().all(), "a trajectory recorded twice"
    assert set(trajectories["task_id"]) == kept, "a kept task without its attempt, or an attempt of another task"
    reports = pl.read_parquet(base / "verification_reports" / "reports.parquet")
    assert reports["trajectory_id"].is_unique().all() and set(reports["trajectory_id"]) == set(
        trajectories["trajectory_id"]
    )
    staged = [p for p in (base / ".staging").glob("*")] if (base / ".staging").is_dir() else []
    assert staged == [], f"left in staging: {staged}"
    assert RoundStore(str(home)).writer_lock().busy() is None


@pytest.mark.slow
def test_an_interrupted_round_resumes_with_the_same_tasks(tmp_path):
    """Ctrl-C during the rollouts; the rerun keeps the proposed tasks (not proposed anew)
    and finishes the round."""
    config = _config(tmp_path)
    run = _Run(tmp_path, "interrupted", "-c", str(config))
    try:
        run.wait_for("done proposed_tasks", timeout=1500)
        run.wait_until(lambda: _sandbox_processes(run.proc.pid), "a rollout's sandbox")
        index = tmp_path / "home" / "rounds" / "r000" / "proposed_tasks" / "index.parquet"
        before = _digest(index)
        assert run.stop(signal.SIGINT) == 130
    finally:
        run.kill()
    rerun = _rerun(tmp_path, config)
    assert rerun.returncode == 0, rerun.stderr
    header = next(line for line in rerun.stderr.splitlines() if line.startswith("round r000:"))
    assert "proposed_tasks" not in header, header
    assert _digest(index) == before
    assert_round_whole(tmp_path / "home")


def _remaining_stages(run: _Run) -> list[str]:
    """The stages a `round run` says it will materialize (its header line)."""
    run.wait_for("round r000:", timeout=1200)
    header = next(line for line in run.stderr.splitlines() if line.startswith("round r000:"))
    return [s.strip() for s in header.split(":", 1)[1].split(",")]


@pytest.mark.heavy  # one round, restarted after each kill: about 8 min on 2 cores
def test_sigkill_in_each_stage_then_a_rerun_completes_whole(tmp_path):
    """One round, SIGKILLed about a second into each of its stages in turn: each run
    resumes where the last was killed, the proposed tasks never change once published,
    and the last rerun completes the round whole."""
    config = _config(tmp_path)
    index = tmp_path / "home" / "rounds" / "r000" / "proposed_tasks" / "index.parquet"
    killed_in, proposed, runs = [], None, []
    try:
        for n, stage in enumerate(ROUND_STAGES):
            run = _Run(tmp_path, f"killed-{n}", "-c", str(config))
            runs.append(run)
            remaining = _remaining_stages(run)
            if stage not in remaining:  # the last kill came after this stage was published
                run.kill()
                continue
            if remaining[0] != stage:
                run.wait_for(f"done {ROUND_STAGES[n - 1]}", timeout=2400)
            time.sleep(1)  # into the stage
            run.proc.kill()  # SIGKILL the command alone (its sandboxes die with it; a killed trainer is orphaned)
            run.proc.wait()
            if f"done {stage}" not in run.stderr:
                killed_in.append(stage)
            if index.is_file():
                proposed = proposed or _digest(index)
                assert _digest(index) == proposed, f"the proposed tasks changed after a kill in {stage}"
        rerun = _rerun(tmp_path, config)
        assert rerun.returncode == 0, rerun.stderr
    finally:
        for run in runs:
            run.kill()
    assert_round_whole(tmp_path / "home")
    # a stage shorter than the poll interval can be published before its kill lands
    assert {s for s in ROUND_STAGES if s != Asset.TRAINING_DATA} <= set(killed_in), killed_in


@pytest.mark.slow
def test_a_full_disk_under_the_data_root_fails_cleanly_and_a_rerun_completes(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        env = {**_env(tmp_path), "TOUCHSTONE_HOME": str(disk / "home")}
        config = str(_config(tmp_path))
        full = subprocess.run(
            [TOUCHSTONE, "round", "run", "-c", config], env=env, capture_output=True, text=True, timeout=1200
        )
        assert full.returncode == 1, full.stderr
        cause = next(line for line in full.stderr.splitlines() if line.startswith("sources failed: "))
        assert "No space left on device" in cause and "Traceback" not in full.stderr, full.stderr
        home = disk / "home"
        main_files = {"seed_sources": "sources.parquet", "heldout_tasks": "index.parquet", "base_model": "config.json"}
        for name, main in main_files.items():  # what was published is whole: its main file is there
            assert not (home / name).exists() or (home / name / main).is_file(), f"{name} published without {main}"
        assert (home / "seed_sources" / "sources.parquet").is_file()  # published before the disk filled
        subprocess.run(["mount", "-o", "remount,size=512m", str(disk)], check=True)
        resumed = _Run(tmp_path, "resumed", "-c", config, env={"TOUCHSTONE_HOME": str(home)})
        try:
            resumed.wait_for("done base_model", timeout=1200)  # the shared sources are complete
            assert resumed.stop(signal.SIGTERM) == 143
        finally:
            resumed.kill()
        for name in ("seed_sources", "heldout_tasks", "base_model"):
            assert (home / name).is_dir()
        assert RoundStore(str(home)).writer_lock().busy() is None
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], capture_output=True)


HOP_HEADERS = {"expect", "transfer-encoding", "connection", "content-length", "keep-alive"}


class _FailingProxy:
    """An HTTP proxy in front of the S3 server that, while `failing` names a key part,
    lets the first PUT of such a key through and answers every later one with a 500."""

    def __init__(self, upstream: str):
        self.upstream = upstream.removeprefix("http://")
        self.failing: str | None = None
        self.passed = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, and `Expect: 100-continue` answered

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                    return self.rfile.read(int(self.headers.get("Content-Length") or 0))
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0], 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline() not in (b"\r\n", b""):  # trailers
                    pass
                return b"".join(chunks)

            def do(self) -> None:
                body = self._body()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
                if self.command == "PUT" and proxy.failing and proxy.failing in self.path:
                    proxy.passed += 1
                    if proxy.passed > 1:
                        self.send_response(500)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                conn = HTTPConnection(proxy.upstream, timeout=30)
                conn.request(self.command, self.path, body, headers)
                reply = conn.getresponse()
                data = reply.read()
                self.send_response(reply.status)
                for key, value in reply.getheaders():
                    if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(key, value)
                length = reply.getheader("Content-Length") if self.command == "HEAD" else str(len(data))
                self.send_header("Content-Length", length or "0")
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop serving, and drop the S3 filesystems fsspec cached with the proxy's address."""
        import s3fs

        self.server.shutdown()
        self.server.server_close()
        s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def failing_proxy(s3):  # noqa: F811
    proxy = _FailingProxy(os.environ["AWS_ENDPOINT_URL"])
    yield proxy
    proxy.close()


def test_an_s3_endpoint_failing_mid_upload_leaves_the_last_good_data(failing_proxy, monkeypatch):
    proxy = failing_proxy
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")  # the store's retries give up quickly
    root = f"s3://{BUCKET}/faults"
    storage = {"storage": StorageResource(root=root)}

    def sources(seed: str):
        config = {"ops": {"seed_sources": {"config": {"seeds": [seed]}}}}
        return materialize(dg.DagsterInstance.ephemeral(), ["seed_sources"], resources=storage, run_config=config)

    assert sources("inflection").success
    store = RoundStore(root)
    table = store.asset_dir("seed_sources") / "sources.parquet"
    before = sorted(p.path for p in store.asset_dir("seed_sources").rglob("*") if p.is_file())

    proxy.failing = "seed_sources"  # the next publish of seed_sources fails after its first file
    failed = sources("toolz")
    assert not failed.success and any("seed_sources" in line for line in describe_failures(failed))
    store = RoundStore(root)  # a fresh view of the store (no listing cache)
    assert sorted(p.path for p in store.asset_dir("seed_sources").rglob("*") if p.is_file()) == before
    with table.open("rb") as handle:
        assert pl.read_parquet(handle)["seed"].to_list()[0].startswith("inflection")

    proxy.failing = None
    assert sources("toolz").success
    store = RoundStore(root)
    with table.open("rb") as handle:
        assert pl.read_parquet(handle)["seed"].to_list()[0].startswith("toolz")
    names = {p.path.split("/seed_sources/")[1].split("/")[0] for p in store.asset_dir("seed_sources").rglob("*")}
    assert not any(n.startswith("inflection") for n in names), names  # nothing of the old version left
    assert not list(store.root.glob(".staging/**/*.parquet")), "staged uploads left behind"
    assert RoundStore(root).writer_lock().busy() is None
