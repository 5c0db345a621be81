"""How `solve` and `verify-batch` scale with the number of trajectories.

    python -m benchmarks.bench_scale [--counts 10 100 1000] [--workers 2] [--backend bwrap]

The scripted teacher on the canary corpus's tiny tasks (attempts = N / tasks),
then verify-batch (one replay) on those N trajectories. Each measurement runs in
a fresh process, so its peak RSS (the harness process: policy, threads, tables;
sandboxes are separate processes) is its own. Linear cost means a constant time
per trajectory; flat memory means a peak RSS that does not grow with N (both
stages stream: records are read and written a row group at a time, reports are
spooled to disk; what stays per trajectory is its sort key and file name)."""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from touchstone.verify.canaries import TASKS


def _one(stage: str, count: int, out: Path, workers: int, backend: str) -> dict:
    """One measurement in this process; prints its JSON row."""
    from touchstone.agent.policies.spec import TEACHER
    from touchstone.agent.rollout import solve
    from touchstone.verify.batch import verify_batch

    started = time.monotonic()
    if stage == "solve":
        n_tasks = len([p for p in TASKS.iterdir() if p.is_dir()])
        solve(
            TASKS,
            TEACHER,
            attempts=math.ceil(count / n_tasks),
            workers=workers,
            out=out / "trajectories",
            backend=backend,
            progress=False,
        )
    else:
        verify_batch(
            TASKS, out / "trajectories", workers, out / "reports", replays=1, backend=backend, progress_bar=False
        )
    wall = time.monotonic() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"wall_s": wall, "peak_rss_mb": peak_mb}


def measure(stage: str, count: int, out: Path, workers: int, backend: str) -> dict:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_scale",
            "--one",
            stage,
            str(count),
            str(out),
            "--workers",
            str(workers),
            "--backend",
            backend,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{stage} x{count} failed:\n{done.stderr[-2000:]}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    n = _trajectories(out) if stage == "solve" else _reports(out)
    return {
        "stage": stage,
        "trajectories": n,
        "workers": workers,
        "wall_s": round(row["wall_s"], 1),
        "per_trajectory_s": round(row["wall_s"] / max(n, 1), 3),
        "per_minute": round(60 * n / row["wall_s"], 1),
        "peak_rss_mb": round(row["peak_rss_mb"]),
        "load_1m": round(os.getloadavg()[0], 1),  # other work on the machine inflates per_trajectory_s
    }


def _trajectories(out: Path) -> int:
    import polars as pl

    return pl.read_parquet(out / "trajectories" / "trajectories.parquet").height


def _reports(out: Path) -> int:
    import polars as pl

    return pl.read_parquet(out / "reports" / "reports.parquet").height


def notes(rows: list[dict]) -> list[str]:
    """Where per-trajectory time or peak memory grows with N (more than 1.5x from
    the smallest to the largest batch)."""
    out = []
    for stage in ("solve", "verify"):
        mine = sorted((r for r in rows if r["stage"] == stage), key=lambda r: r["trajectories"])
        if len(mine) < 2:
            continue
        small, large = mine[0], mine[-1]
        time_growth = large["per_trajectory_s"] / small["per_trajectory_s"]
        mem_growth = large["peak_rss_mb"] / small["peak_rss_mb"]
        out.append(
            f"{stage}: per-trajectory time x{time_growth:.2f} and peak RSS x{mem_growth:.2f} from "
            f"{small['trajectories']} to {large['trajectories']} trajectories: "
            + ("linear cost" if time_growth <= 1.5 else "NOT linear (per-trajectory time grows)")
            + (
                ", flat memory"
                if mem_growth <= 1.5
                else f", memory GROWS with the batch (~{_kb_per_trajectory(small, large):.0f} KB per trajectory)"
            )
        )
    return out


def _kb_per_trajectory(small: dict, large: dict) -> float:
    return 1024 * (large["peak_rss_mb"] - small["peak_rss_mb"]) / (large["trajectories"] - small["trajectories"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--one", nargs=3, metavar=("STAGE", "COUNT", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        stage, count, out = args.one
        print(json.dumps(_one(stage, int(count), Path(out), args.workers, args.backend)))
        return
    rows = []
    for count in args.counts:
        with tempfile.TemporaryDirectory() as tmp:
            for stage in ("solve", "verify"):
                rows.append(measure(stage, count, Path(tmp), args.workers, args.backend))
                print(f"{rows[-1]}", file=sys.stderr, flush=True)
    print(
        json.dumps(
            {
                "bench": "scale",
                "results": rows,
                "notes": [f"backend {args.backend}, teacher policy, one replay per verification", *notes(rows)],
            }
        )
    )


if __name__ == "__main__":
    main()
