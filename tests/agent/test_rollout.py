"""Batch rollouts: the Python API, the CLI, and resuming after a kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import polars as pl
from click.testing import CliRunner

from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.policies import make_policy
from touchstone.agent.rollout import plan_attempts, solve
from touchstone.episode.trajectory import read_messages_jsonl, read_tables
from cli import main
from touchstone.tasks.schema import load_task_set

from .conftest import MINILIB, minilib_task

BUGS = [("if x > hi:", "if x <= hi:"), ("a > 0 and b > 0", "a > 0 or b > 0"), ("total += 1", "total -= 1")]


def task_set(root, n=len(BUGS)):
    for i, (original, mutated) in enumerate(BUGS[:n]):
        minilib_task(root, f"bug-{i}", "A function of minilib is wrong.", MINILIB.replace(original, mutated))
    return root


def test_solve_writes_both_forms(tmp_path):
    tasks = task_set(tmp_path / "tasks", n=2)
    out = solve(
        tasks, PolicySpec.parse("teacher"), attempts=2, workers=2, out=tmp_path / "out", backend="bwrap", progress=False
    )
    trajs = read_tables(out)
    assert len(trajs) == 4 and {t.exit_reason for t in trajs} == {"submitted"}
    assert sorted((t.task_id, t.attempt, t.sampling.seed) for t in trajs) == [
        (f"bug-{i}", a, a) for i in range(2) for a in range(2)
    ]
    for t in trajs:
        assert read_messages_jsonl(out / "jsonl" / t.task_id / f"{t.trajectory_id}.jsonl") == t.messages
        assert t.backend == "bwrap" and t.image_digest.startswith("sha256:") and t.diff.modified == ["minilib/core.py"]
    steps = pl.read_parquet(out / "steps.parquet")
    assert steps.height == sum(len(t.steps) for t in trajs)
    assert steps.filter(pl.col("tool") == "bash")["exit_code"].null_count() == 0


def test_cli_reports_bad_input(tmp_path):
    runner = CliRunner()
    broken = tmp_path / "broken" / "t1"
    broken.mkdir(parents=True)
    (broken / "task.json").write_text("{")
    r = runner.invoke(main, ["solve", str(broken.parent), "--policy", "teacher", "--out", str(tmp_path / "o")])
    assert r.exit_code != 0 and "task.json: bad JSON" in r.output
    tasks = task_set(tmp_path / "tasks", n=1)
    r = runner.invoke(main, ["solve", str(tasks), "--policy", "nonsense", "--out", str(tmp_path / "o")])
    assert r.exit_code != 0 and "unknown policy spec 'nonsense'" in r.output


def test_killed_run_resumes_to_the_same_trajectories(tmp_path):
    tasks = task_set(tmp_path / "tasks")
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "cli.agent",
        str(tasks),
        "--policy",
        "teacher",
        "--attempts",
        "2",
        "--out",
        str(out),
        "--backend",
        "bwrap",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while not any((out / "records").glob("t-*.json")) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("t-*.json")}
    assert 1 <= len(done_before) < 6 and not (out / "trajectories.parquet").exists()

    r = CliRunner().invoke(
        main, ["solve", str(tasks), "--policy", "teacher", "--attempts", "2", "--out", str(out), "--backend", "bwrap"]
    )
    assert r.exit_code == 0, r.output
    expected = {
        a.trajectory_id for a in plan_attempts(load_task_set(tasks), make_policy(PolicySpec.parse("teacher")), 2)
    }
    ids = [t.trajectory_id for t in read_tables(out)]
    assert sorted(ids) == sorted(expected) and len(ids) == 6
    assert {p.stem for p in (out / "jsonl").rglob("*.jsonl")} == expected
    assert not list(out.glob("**/.*.tmp"))  # no half-written file survives
    # finished attempts were not run again
    assert all((out / "records" / name).stat().st_mtime_ns == m for name, m in done_before.items())


def test_attempts_the_sandbox_cut_off_are_redone_by_a_rerun(tmp_path):
    """A Docker daemon that does not answer fails every attempt in the sandbox: recorded as
    sandbox_error (infrastructure), and the rerun redoes exactly those, under the same ids."""
    from touchstone.agent.rollout import sandbox_failures

    tasks = task_set(tmp_path / "tasks", n=2)
    out = tmp_path / "out"
    nowhere = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-daemon.sock"}
    cmd = [sys.executable, "-m", "cli.agent", str(tasks), "--policy", "teacher", "--backend", "docker"]
    subprocess.run([*cmd, "--out", str(out)], env=nowhere, capture_output=True, timeout=300)
    cut_off = sandbox_failures(out)
    assert len(cut_off) == 2 and "does not answer" in cut_off[0].error

    solve(tasks, PolicySpec.parse("teacher"), out=out, backend="bwrap", progress=False)
    trajs = read_tables(out)
    assert sorted(t.trajectory_id for t in trajs) == sorted(t.trajectory_id for t in cut_off)
    assert {t.exit_reason for t in trajs} == {"submitted"} and sandbox_failures(out) == []
    done = {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("t-*.json")}
    solve(tasks, PolicySpec.parse("teacher"), out=out, backend="bwrap", progress=False)
    assert {p.name: p.stat().st_mtime_ns for p in (out / "records").glob("t-*.json")} == done  # nothing redone
