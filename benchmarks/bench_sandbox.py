"""Sandbox latency and throughput, per backend, against a bare subprocess measured
in the same run.

    python -m benchmarks.bench_sandbox [--runs 50] [--backends bwrap docker]

- lifecycle: open_sandbox → exec `true` → close, median and p95 over --runs;
- exec: `exec("true")` in an open sandbox, interleaved with bare
  `subprocess.run(["true"])`; overhead = difference of the medians, and their ratio;
- docker: cold create-to-first-exec, and warm-pool open-to-first-exec;
- throughput: lifecycles per second with 2 workers;
- with --baseline DIR (or TOUCHSTONE_BENCH_BASELINE): the same measures run with the
  sandbox code of another checkout (e.g. one from before a hardening change) in a
  subprocess right after, and the per-exec medians side by side.
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

# What a hardening change costs per exec (and per hand-out from a warm pool).
COMPARED = [("bwrap", "exec true"), ("bwrap", "exec overhead vs bare"), ("docker", "exec true"),
            ("docker", "warm-pool open → first exec"), ("docker", "cold create → first exec")]
TARGETS_MS = {("bwrap", "exec overhead vs bare"): 15, ("docker", "warm-pool open → first exec"): 80,
              ("docker", "cold create → first exec"): 1000}


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def row(backend: str, measure: str, samples: list[float], **extra: object) -> dict:
    return {"backend": backend, "measure": measure, "n": len(samples),
            "median_ms": round(statistics.median(samples), 2),
            "p95_ms": round(statistics.quantiles(samples, n=100, method="inclusive")[94], 2),
            "vs_bare": extra.get("vs_bare", "")}


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
        rows.append(row("bare", "bwrap --ro-bind ROOT / true (floor)", floor,
                        vs_bare=f"{statistics.median(floor) / statistics.median(bare):.1f}×"))
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
    return {"backend": backend, "workers": 2, "lifecycles": total, "wall_s": round(wall, 2),
            "lifecycles_per_s": round(total / wall, 2)}


def baseline_rows(checkout: Path, backends: list[str], runs: int) -> list[dict]:
    """The per-backend rows measured with the sandbox code of `checkout` (this
    script, with that checkout first on the import path)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    done = subprocess.run([sys.executable, __file__, "--rows-only", "--runs", str(runs), "--backends", *backends],
                          env=env, capture_output=True, text=True, check=True, cwd=checkout)
    return json.loads(done.stdout)


def side_by_side(checkout: Path, base: list[dict], rows: list[dict]) -> list[dict]:
    commit = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or checkout.name
    before = {(r["backend"], r["measure"]): r["median_ms"] for r in base if "measure" in r}
    after = {(r["backend"], r["measure"]): r["median_ms"] for r in rows if "measure" in r}
    return [{"backend": b, "per exec": m, f"baseline {commit} median_ms": before[b, m], "this tree median_ms": after[b, m],
             "cost_ms": round(after[b, m] - before[b, m], 2)}
            for b, m in COMPARED if (b, m) in before and (b, m) in after]


def notes(rows: list[dict]) -> list[str]:
    out = []
    by_measure = {r.get("measure"): r for r in rows}
    floor, bare = by_measure.get("bwrap --ro-bind ROOT / true (floor)"), by_measure.get("subprocess.run(['true'])")
    if floor and bare:
        out.append(f"bwrap alone (one mount namespace, no isolation) costs {floor['median_ms'] - bare['median_ms']:.1f} ms "
                   "over a bare process in this run: the share of the overhead that is the machine, not the sandbox")
    compared = [r for r in rows if "cost_ms" in r]
    if compared:
        out.append("against the baseline checkout, measured right after in the same run: "
                   + "; ".join(f"{r['backend']} {r['per exec']} {r['cost_ms']:+.1f} ms" for r in compared))
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
    parser.add_argument("--baseline", type=Path, default=os.environ.get("TOUCHSTONE_BENCH_BASELINE"),
                        help="a checkout whose sandbox code to measure too, side by side")
    parser.add_argument("--rows-only", action="store_true", help=argparse.SUPPRESS)  # a baseline's subprocess
    args = parser.parse_args()
    backends = args.backends or available_backends()
    if not backends:
        raise SystemExit("no sandbox backend available: run `touchstone sandbox rootfs` (and build-image)")
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp)
        (ws / "main.py").write_text("print('hello')\n")
        rows = [r for backend in backends for r in bench_backend(ws, backend, args.runs)]
        if args.rows_only:
            print(json.dumps(rows))
            return
        rows += [throughput(ws, backend, args.runs) for backend in backends]
        if args.baseline:
            rows += side_by_side(args.baseline, baseline_rows(args.baseline, backends, args.runs), rows)
    print(json.dumps({"bench": "sandbox", "results": rows, "notes": notes(rows)}, indent=2))


if __name__ == "__main__":
    main()
