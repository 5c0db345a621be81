"""One writer per data root, and interrupts that end cleanly, with real
`touchstone round run` processes and real signals: a second writer is refused
naming the first (or waits, --wait), SIGTERM and SIGINT end a round in one line
with its sandboxes stopped, a SIGKILLed writer's lock is taken over; on an S3
root (a moto server) the same through a conditional put and a heartbeat."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from orchestration.storage import RoundStore
from tests.assets.conftest import tiny_run_config
from tests.orchestration.test_object_storage import BUCKET, s3  # noqa: F401 (the moto server fixture)
from touchstone import writer_lock
from touchstone.interrupts import descendants
from touchstone.writer_lock import DataRootBusy

TOUCHSTONE = str(Path(sys.executable).with_name("touchstone"))


def _config(tmp_path: Path, backend: str = "bwrap") -> Path:
    """The tiny round on one seed: the sources start sandboxes within seconds."""
    config = tiny_run_config(sandbox={"backend": backend})
    config["ops"]["seed_sources"]["config"]["seeds"] = ["inflection"]
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


class _Run:
    """A `touchstone round run` in the background (its own session, as a service would start it)."""

    def __init__(self, tmp_path: Path, name: str, *args: str, env: dict | None = None):
        self.err = tmp_path / f"{name}.err"
        base = {"TOUCHSTONE_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dagster_home")}
        self.proc = subprocess.Popen(
            [TOUCHSTONE, "round", "run", *args],
            env={**os.environ, **base, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=self.err.open("w"),
            start_new_session=True,
        )

    @property
    def stderr(self) -> str:
        return self.err.read_text()

    def wait_for(self, text: str, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.stderr:
            assert self.proc.poll() is None, f"ended ({self.proc.returncode}) before {text!r}:\n{self.stderr}"
            assert time.monotonic() < deadline, f"no {text!r} after {timeout} s:\n{self.stderr}"
            time.sleep(0.2)

    def wait_until(self, found, what: str, timeout: float = 240):
        deadline = time.monotonic() + timeout
        while not (value := found()):
            assert self.proc.poll() is None, f"ended ({self.proc.returncode}) before {what}:\n{self.stderr}"
            assert time.monotonic() < deadline, f"no {what} after {timeout} s:\n{self.stderr}"
            time.sleep(0.1)
        return value

    def stop(self, sig: int, timeout: float = 90) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def _sandbox_processes(pid: int) -> list[int]:
    return [p for p in descendants(pid) if _name(p) == "bwrap"]


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _alive(pids: list[int]) -> list[int]:
    return [p for p in pids if Path(f"/proc/{p}").exists() and _state(p) != "Z"]


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def _assert_one_interrupt_line(run: _Run, signame: str) -> None:
    lines = [line for line in run.stderr.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and lines[0].startswith(f"interrupted ({signame})"), run.stderr
    assert "Traceback" not in run.stderr and "DagsterExecutionInterruptedError" not in run.stderr, run.stderr


@pytest.mark.slow
def test_a_second_writer_is_refused_naming_the_first_and_waits_when_asked(tmp_path):
    config = str(_config(tmp_path))
    first = _Run(tmp_path, "first", "-c", config)
    waiting = None
    try:
        first.wait_for("sources:")  # it holds the data root
        second = subprocess.run(
            [TOUCHSTONE, "round", "run", "-c", config],
            env={**os.environ, "TOUCHSTONE_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dh2")},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 1, second.stderr
        (line,) = second.stderr.strip().splitlines()
        for part in (f"pid {first.proc.pid}", socket.gethostname(), "`touchstone round run -c", "since 20", "--wait"):
            assert part in line, line

        waiting = _Run(tmp_path, "waiting", "--wait", "-c", config)
        waiting.wait_for(f"waiting: data root {tmp_path / 'home'} is being written by pid {first.proc.pid}")
        sandboxes = first.wait_until(lambda: _sandbox_processes(first.proc.pid), "a running bwrap sandbox")
        children = descendants(first.proc.pid)
        assert first.stop(signal.SIGTERM) == 143
        _assert_one_interrupt_line(first, "SIGTERM")
        assert not _alive(children), f"left running: {sandboxes} of {children}"

        waiting.wait_for("sources:")  # the lock passed to the waiting writer
        waiting.wait_until(lambda: _sandbox_processes(waiting.proc.pid), "a running bwrap sandbox")
        children = descendants(waiting.proc.pid)
        assert waiting.stop(signal.SIGINT) == 130
        _assert_one_interrupt_line(waiting, "SIGINT")
        assert not _alive(children)
    finally:
        first.kill()
        if waiting is not None:
            waiting.kill()


@pytest.mark.slow
def test_a_killed_writers_lock_is_taken_over(tmp_path):
    config = str(_config(tmp_path))
    killed = _Run(tmp_path, "killed", "-c", config)
    killed.wait_for("sources:")
    killed.kill()  # SIGKILL: no chance to release anything
    after = _Run(tmp_path, "after", "-c", config)
    try:
        after.wait_for("sources:")
        assert f"taking over the data root from a writer that is gone: pid {killed.proc.pid}" in after.stderr
        assert after.stop(signal.SIGTERM) == 143
    finally:
        after.kill()


@pytest.mark.slow
@pytest.mark.docker
def test_sigterm_removes_the_rounds_sandbox_containers(tmp_path):
    """The round's Docker sandboxes go with it, not at the next start's reap."""
    import docker

    client = docker.from_env()
    run = _Run(tmp_path, "docker", "-c", str(_config(tmp_path, backend="docker")))

    def owned() -> list:
        found = client.api.containers(all=True, filters={"label": "touchstone.owner"})
        return [c for c in found if c["Labels"]["touchstone.owner"].startswith(f"{run.proc.pid}:")]

    try:
        run.wait_until(owned, "a sandbox container of the round")
        assert run.stop(signal.SIGTERM) == 143
        _assert_one_interrupt_line(run, "SIGTERM")
        assert owned() == []
    finally:
        run.kill()


# --- S3 -------------------------------------------------------------------------

_HOLD = """
import sys, time
from orchestration.storage import RoundStore
lock = RoundStore(sys.argv[1]).writer_lock(*sys.argv[2:]).acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_an_s3_root_refuses_a_second_writer_and_a_dead_ones_lock_is_taken_over(s3, tmp_path):  # noqa: F811
    root = f"s3://{BUCKET}/one-writer"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, root], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        second = subprocess.run(
            [TOUCHSTONE, "round", "run"],
            env={**os.environ, "TOUCHSTONE_HOME": root, "TOUCHSTONE_LOCAL_HOME": str(tmp_path / "local")},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 1 and f"pid {holder.pid} on {socket.gethostname()}" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1, second.stderr
    finally:
        holder.kill()
        holder.wait()
    lock = RoundStore(root).writer_lock().acquire()  # its holder ran here and is gone: no wait for the heartbeat
    try:
        assert lock.took_over is not None and lock.took_over.pid == holder.pid
    finally:
        lock.release()
    assert RoundStore(root).writer_lock().busy() is None


def test_an_s3_lock_lives_by_its_heartbeat(s3, monkeypatch):  # noqa: F811
    monkeypatch.setattr(writer_lock, "HEARTBEAT_S", 0.3)
    monkeypatch.setattr(writer_lock, "STALE_AFTER_S", 2.0)
    store = RoundStore(f"s3://{BUCKET}/heartbeat")
    first = store.writer_lock().acquire()
    time.sleep(3.5)  # older than STALE_AFTER_S, but renewed meanwhile
    with pytest.raises(DataRootBusy, match=f"pid {os.getpid()}"):
        store.writer_lock().acquire()
    first._backend._stop.set()  # a hung holder: no more heartbeats, never released
    first._backend._beat.join()
    time.sleep(3.5)
    # Of several writers that find it stale at once, exactly one takes it over.
    takers = [store.writer_lock() for _ in range(6)]
    won: list = []

    def take(lock):
        try:
            won.append(lock.acquire())
        except DataRootBusy:
            pass

    threads = [threading.Thread(target=take, args=(lock,)) for lock in takers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and won[0].took_over.token == first.me.token
    won[0].release()


def test_a_dagster_run_is_refused_while_another_process_writes(tmp_path):
    """The UI, the schedule, the sensor and a deployment launch runs, not `round run`:
    their storage resource takes the same lock, and the run fails naming the writer."""
    import dagster as dg

    from orchestration.resources import StorageResource
    from orchestration.runner import describe_failures, materialize

    home = tmp_path / "home"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(home)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        result = materialize(
            dg.DagsterInstance.ephemeral(), ["seed_sources"], resources={"storage": StorageResource(root=str(home))}
        )
        assert not result.success
        assert any(f"is being written by pid {holder.pid}" in line for line in describe_failures(result))
        assert not (home / "seed_sources").exists()
    finally:
        holder.kill()
        holder.wait()
    done = materialize(
        dg.DagsterInstance.ephemeral(),
        ["seed_sources"],
        resources={"storage": StorageResource(root=str(home))},
        run_config={"ops": {"seed_sources": {"config": {"seeds": ["inflection"]}}}},
    )
    assert done.success and (home / "seed_sources").is_dir()  # the dead holder's lock was taken over
    assert RoundStore(str(home)).writer_lock().busy() is None  # and released when the run ended


@pytest.mark.parametrize("root", ["local", "s3"])
def test_another_step_of_the_same_run_writes_and_another_run_is_refused(s3, tmp_path, root):  # noqa: F811
    """Under the Docker executor each step runs in a container of its own, inheriting
    nothing from the step that holds the lock: the run id it names lets the run's
    other steps through, on a local root as on S3, while another run is refused."""
    root = str(tmp_path / "home") if root == "local" else f"s3://{BUCKET}/same-run"
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, root, "run-1"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert RoundStore(root).lock_for_run("run-1") is None  # writes under the step's lock
        with pytest.raises(DataRootBusy, match=f"pid {holder.pid} .*Dagster run run-1"):
            RoundStore(root).lock_for_run("run-2")
    finally:
        holder.kill()
        holder.wait()
