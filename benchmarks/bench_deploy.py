"""The Docker deployment against in-process on the same tiny round.

    python -m benchmarks.bench_deploy [--skip-docker]

Both run the shared sources then round r000 with the tests' tiny settings
(tests/assets/conftest.py). Per mode: the round's wall time (submission to
finish), the time its steps spent computing (STEP_START -> STEP_SUCCESS, summed),
Dagster's overhead per step (the rest of the wall time, divided by the steps:
run and step launch, code loading, event writes) and peak memory, sampled every
half second during the round: `peak_one_mb` is the largest single unit (in-process:
one process of the round's tree, the run's own or a trainer's; Docker: one
container, from its cgroup, less inactive file cache as `docker stats` counts it)
and `peak_total_mb` the largest sum at one time (in-process: the run's process
and all its descendants, sandboxes and trainer included; Docker: every container
of the deployment, services, runs, steps and sandboxes)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _timings(instance, run_id: str) -> dict:
    import dagster as dg

    starts, compute = {}, 0.0
    steps = 0
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.STEP_START:
            starts[event.step_key] = record.timestamp
        elif event.event_type == dg.DagsterEventType.STEP_SUCCESS:
            compute += record.timestamp - starts[event.step_key]
            steps += 1
    return {"steps": steps, "compute_s": compute}


def _row(mode: str, wall: float, timing: dict, **memory) -> dict:
    return {
        "mode": mode,
        "round_wall_s": round(wall, 1),
        "steps": timing["steps"],
        "step_compute_s": round(timing["compute_s"], 1),
        "overhead_per_step_s": round((wall - timing["compute_s"]) / max(timing["steps"], 1), 2),
        **memory,
    }


def in_process_child(home: Path) -> None:
    """Runs in its own process (fresh peak RSS): sources, then the timed round."""
    import os

    import dagster as dg

    os.environ["TOUCHSTONE_HOME"], os.environ["DAGSTER_HOME"] = str(home), str(home / "dagster_home")
    (home / "dagster_home").mkdir(parents=True)
    (home / "dagster_home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    from orchestration.runner import ensure_sources, run_round
    from tests.assets.conftest import TINY_CONFIG, tiny_resources

    instance = dg.DagsterInstance.get()
    assert ensure_sources(instance, resources=tiny_resources(home), run_config=TINY_CONFIG).success
    started = time.monotonic()
    with _Peaks(_process_tree_bytes) as peaks:
        result = run_round(instance, "r000", resources=tiny_resources(home), run_config=TINY_CONFIG)
    wall = time.monotonic() - started
    assert result.success, "the in-process round failed"
    print(
        json.dumps(
            {
                "wall": wall,
                "timing": _timings(instance, result.run_id),
                "peak_one": peaks.one,
                "peak_total": peaks.total,
            }
        )
    )


def in_process() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_deploy", "--child", tmp],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"in-process round failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return _row(
        "in_process",
        out["wall"],
        out["timing"],
        peak_one_mb=round(out["peak_one"] / 2**20),
        peak_total_mb=round(out["peak_total"] / 2**20),
        up_s="",
    )


class _Peaks:
    """Samples `measure()` (the memory of each unit, a list of bytes) every half
    second in a thread: the largest unit and the largest sum seen."""

    def __init__(self, measure):
        self.measure, self.one, self.total = measure, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            sizes = self.measure()
            self.one, self.total = max(self.one, *sizes, 0), max(self.total, sum(sizes))


def _process_tree_bytes() -> list[int]:
    """RSS of this process and of each of its descendants (sandboxes, trainer)."""
    import psutil

    me = psutil.Process()
    sizes = []
    for proc in [me, *me.children(recursive=True)]:
        try:
            sizes.append(proc.memory_info().rss)
        except psutil.Error:  # ended between listing and reading
            continue
    return sizes


def _container_bytes(label: str):
    import docker

    client = docker.from_env()
    return lambda: [_cgroup_bytes(c["Id"]) for c in client.api.containers(filters={"label": label})]


def _cgroup_bytes(container_id: str) -> int:
    """A container's memory as `docker stats` counts it: usage less inactive file cache (cgroup v1 or v2)."""
    for base, usage, inactive in (
        (f"/sys/fs/cgroup/memory/docker/{container_id}", "memory.usage_in_bytes", "total_inactive_file"),
        (f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope", "memory.current", "inactive_file"),
    ):
        try:
            used = int(Path(base, usage).read_text())
            stat = dict(line.split() for line in Path(base, "memory.stat").read_text().splitlines())
        except OSError:
            continue
        return max(used - int(stat.get(inactive, 0)), 0)
    return 0


def docker_deployment() -> dict:
    from orchestration.deploy.runs import run_rounds
    from orchestration.deploy.stack import LABEL, Stack, down, host_instance, up
    from tests.assets.conftest import tiny_run_config
    from tests.serving import free_port

    with tempfile.TemporaryDirectory() as tmp:
        stack = Stack(
            root=Path(tmp), name=f"tsbench-{free_port()}", web_port=free_port(), pg_port=free_port(), sandbox_slots=2
        )
        try:
            up_started = time.monotonic()
            up(stack, log=lambda m: print(m, file=sys.stderr))
            up_s = time.monotonic() - up_started
            (sources,) = run_rounds(stack, 0, tiny_run_config(), log=lambda m: print(m, file=sys.stderr))
            assert sources.success, sources.failures
            with _Peaks(_container_bytes(f"{LABEL}={stack.name}")) as peaks:
                (outcome,) = run_rounds(stack, 1, tiny_run_config(), log=lambda m: print(m, file=sys.stderr))
            assert outcome.success, outcome.failures
            with host_instance(stack) as instance:
                timing = _timings(instance, outcome.run_id)
        finally:
            down(stack, volumes=True, log=lambda m: print(m, file=sys.stderr))
    return _row(
        "docker",
        outcome.wall_s,
        timing,
        peak_one_mb=round(peaks.one / 2**20),
        peak_total_mb=round(peaks.total / 2**20),
        up_s=round(up_s, 1),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-docker", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        in_process_child(Path(args.child))
        return
    rows = [in_process()]
    if not args.skip_docker:
        rows.append(docker_deployment())
    notes = [
        (
            "same round (sources first, not timed), tiny settings; Docker: `up` with images already built "
            "(up_s), every step in its own container, sandboxes as sibling containers"
        ),
        "overhead_per_step_s = (round wall time - summed step compute) / steps",
    ]
    print(json.dumps({"bench": "deploy", "results": rows, "notes": notes}))


if __name__ == "__main__":
    main()
