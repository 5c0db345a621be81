"""Sandbox latency and throughput, per backend, against a bare subprocess measured
in the same run.

    python -m benchmarks.bench_sandbox [--runs 50] [--backends bwrap docker]

- lifecycle: open_sandbox → exec `true` → close, median and p95 over --runs;
- exec: `exec("true")` in an open sandbox, interleaved with bare
  `subprocess.run(["true"])`; overhead = difference of the medians, and their ratio;
- docker: cold create-to-first-exec, and warm-pool open-to-first-exec;
- throughput: lifecycles per second with 2 workers;
- with --baseline DIR (or TOUCHSTONE_BENCH_BASELINE): per-exec cost against the
  sandbox code of another checkout (e.g. one from before a hardening change): two
  worker processes, one per checkout, each holding an open sandbox (or a Docker
  warm pool), asked in alternation, so that both see the same machine load; the
  medians side by side.
Targets (issue 2): bwrap exec within 15 ms of bare at the median; Docker warm-pool
exec under 80 ms; Docker cold create-to-first-exec under 1 s."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from touchstone.sandbox import WarmPool, available_backends, open_sandbox
from touchstone.sandbox.image import ensure_rootfs

# What a change to the sandbox costs, per exec and per hand-out from a warm pool.
COMPARED = [("bwrap", "exec"), ("docker", "exec"), ("docker", "warm")]
TARGETS_MS = {
    ("bwrap", "exec overhead vs bare"): 15,
    ("docker", "warm-pool open → first exec"): 80,
    ("docker", "cold create → first exec"): 1000,
}


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def row(backend: str, measure: str, samples: list[float], **extra: object) -> dict:
    return {
        "backend": backend,
        "measure": measure,
        "n": len(samples),
        "median_ms": round(statistics.median(samples), 2),
        "p95_ms": round(statistics.quantiles(samples, n=100, method="inclusive")[94], 2),
        "vs_bare": extra.get("vs_bare", ""),
    }


def lifecycle(ws: Path, backend: str) -> None:
    with open_sandbox(ws, backend) as sb:
        sb.exec("true")


def bench_backend(ws: Path, backend: str, runs: int) -> list[dict]:
    rows = []
    cycles = [timed(lambda: lifecycle(ws, backend)) for _ in tqdm(range(runs), desc=f"{backend} lifecycle")]
    rows.append(row(backend, "open → exec true → close", cycles))
    bare, inside, floor = [], [], []
    # The floor: bwrap itself with nothing but a mount namespace, to tell the tool's
    # own cost (and the machine's load) from what our isolation adds on top.
    minimal = ["bwrap", "--ro-bind", str(ensure_rootfs(progress=False)), "/", "true"]
    with open_sandbox(ws, backend) as sb:
        sb.exec("true")  # warm caches
        for _ in tqdm(range(runs * 2), desc=f"{backend} exec"):
            bare.append(timed(lambda: subprocess.run(["true"])))
            inside.append(timed(lambda: sb.exec("true")))
            if backend == "bwrap":
                floor.append(timed(lambda: subprocess.run(minimal)))
    ratio = f"{statistics.median(inside) / statistics.median(bare):.1f}×"
    rows.append(row("bare", "subprocess.run(['true'])", bare))
    if floor:
        rows.append(
            row(
                "bare",
                "bwrap --ro-bind ROOT / true (floor)",
                floor,
                vs_bare=f"{statistics.median(floor) / statistics.median(bare):.1f}×",
            )
        )
    rows.append(row(backend, "exec true", inside, vs_bare=ratio))
    overhead = [i - b for i, b in zip(inside, bare)]
    rows.append(row(backend, "exec overhead vs bare", overhead))
    if backend == "docker":
        rows += bench_docker_start(ws, runs)
    return rows


def bench_docker_start(ws: Path, runs: int) -> list[dict]:
    cold = []
    for _ in tqdm(range(runs), desc="docker cold start"):
        started = time.perf_counter()
        with open_sandbox(ws, "docker") as sb:
            sb.exec("true")
            cold.append((time.perf_counter() - started) * 1000)
    warm = []
    with WarmPool(size=2) as pool:
        for _ in tqdm(range(runs), desc="docker warm pool"):
            while pool._ready.empty():  # measure a warm hand-out, not the refill
                time.sleep(0.05)
            started = time.perf_counter()
            with pool.open(ws) as sb:
                sb.exec("true")
                warm.append((time.perf_counter() - started) * 1000)
    return [row("docker", "cold create → first exec", cold), row("docker", "warm-pool open → first exec", warm)]


def throughput(ws: Path, backend: str, total: int) -> dict:
    started = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda _: lifecycle(ws, backend), range(total)))
    wall = time.perf_counter() - started
    return {
        "backend": backend,
        "workers": 2,
        "lifecycles": total,
        "wall_s": round(wall, 2),
        "lifecycles_per_s": round(total / wall, 2),
    }


def worker(backend: str) -> None:
    """Serve timing requests on stdin ("exec": `exec("true")` in an open sandbox;
    "warm": a warm-pool hand-out and its first exec), one millisecond figure per line."""
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "main.py").write_text("print('hello')\n")
        pool = WarmPool(size=2) if backend == "docker" else None

        def warm() -> None:
            with pool.open(ws) as box:
                box.exec("true")

        with open_sandbox(ws, backend) as sb:
            sb.exec("true")
            for request in sys.stdin:
                if request.strip() == "warm":
                    while pool._ready.empty():  # a warm hand-out, not the refill
                        time.sleep(0.05)
                    print(timed(warm), flush=True)
                else:
                    print(timed(lambda: sb.exec("true")), flush=True)
        if pool:
            pool.close()


def interleaved(checkout: Path, backends: list[str], runs: int) -> list[dict]:
    """Per-exec medians of `checkout`'s sandbox code and this tree's, sampled in turn."""
    commit = (
        subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        or checkout.name
    )
    rows = []
    for backend, measure in COMPARED:
        if backend not in backends:
            continue
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--worker", backend],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=cwd,
                env={**os.environ, "PYTHONPATH": str(cwd)},
            )
            for cwd in (checkout, Path(__file__).resolve().parents[1])
        ]
        samples: list[list[float]] = [[], []]
        for i in tqdm(range(runs), desc=f"{backend} {measure}: baseline vs this tree"):
            for k in (i % 2, 1 - i % 2):  # alternate which goes first
                procs[k].stdin.write(measure + "\n")
                procs[k].stdin.flush()
                samples[k].append(float(procs[k].stdout.readline()))
        for proc in procs:
            proc.stdin.close()
            proc.wait()
        before, after = (statistics.median(x) for x in samples)
        rows.append(
            {
                "backend": backend,
                "per exec": measure,
                f"baseline {commit} median_ms": round(before, 2),
                "this tree median_ms": round(after, 2),
                "cost_ms": round(after - before, 2),
            }
        )
    return rows


def notes(rows: list[dict]) -> list[str]:
    out = []
    by_measure = {r.get("measure"): r for r in rows}
    floor, bare = by_measure.get("bwrap --ro-bind ROOT / true (floor)"), by_measure.get("subprocess.run(['true'])")
    if floor and bare:
        out.append(
            f"bwrap alone (one mount namespace, no isolation) costs {floor['median_ms'] - bare['median_ms']:.1f} ms "
            "over a bare process in this run: the share of the overhead that is the machine, not the sandbox"
        )
    compared = [r for r in rows if "cost_ms" in r]
    if compared:
        out.append(
            "against the baseline checkout, sampled in alternation: "
            + "; ".join(f"{r['backend']} {r['per exec']} {r['cost_ms']:+.1f} ms" for r in compared)
        )
    for r in rows:
        target = TARGETS_MS.get((r["backend"], r.get("measure")))
        if target is not None:
            verdict = "met" if r["median_ms"] < target else "MISSED"
            out.append(f"target {r['backend']} {r['measure']} < {target} ms: {verdict} (median {r['median_ms']} ms)")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--backends", nargs="*", default=None, help="default: every available backend")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=os.environ.get("TOUCHSTONE_BENCH_BASELINE"),
        help="a checkout whose sandbox code to measure too, side by side",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # one side of a --baseline comparison
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker)
    backends = args.backends or available_backends()
    if not backends:
        raise SystemExit("no sandbox backend available: run `touchstone sandbox rootfs` (and build-image)")
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "main.py").write_text("print('hello')\n")
        rows = [r for backend in backends for r in bench_backend(ws, backend, args.runs)]
        rows += [throughput(ws, backend, args.runs) for backend in backends]
    if args.baseline:
        rows += interleaved(Path(args.baseline), backends, args.runs)
    print(json.dumps({"bench": "sandbox", "results": rows, "notes": notes(rows)}, indent=2))


if __name__ == "__main__":
    main()
