"""Task environments: build time (cold, with an empty cache; cached, reused by
digest) and the per-task overhead of running in a non-base environment.

    python -m benchmarks.bench_envs [--repeats 10]

The environment is attrs 23.2.0 + sortedcontainers 2.4.0 (pure Python, from
PyPI). "cold" builds into a fresh TOUCHSTONE_CACHE (fresh pip cache too: the
wheels are downloaded); "cached" is a second build_env of the same spec. The
per-task overhead is one sandbox open + a pytest run of a small test file that
imports attrs + close, with the base environment vs the built one mounted."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from touchstone import paths
from touchstone.envs import EnvSpec, build_env
from touchstone.sandbox import available_backends, open_sandbox
from touchstone.sandbox.image import ensure_rootfs

SPEC = EnvSpec(requirements=["attrs==23.2.0", "sortedcontainers==2.4.0"])
TEST = "import attrs\n\ndef test_attrs():\n    assert attrs.has(attrs.make_class('P', ['x']))\n"


def _build_times() -> list[dict]:
    rootfs = ensure_rootfs(progress=False)
    with tempfile.TemporaryDirectory(prefix="bench-envs-") as tmp:
        os.symlink(rootfs, Path(tmp) / rootfs.name)  # the base root filesystem is not what is measured
        previous = os.environ.get("TOUCHSTONE_CACHE")
        os.environ["TOUCHSTONE_CACHE"] = tmp
        try:
            t0 = time.monotonic()
            cold = build_env(SPEC)
            cold_s = time.monotonic() - t0
            t0 = time.monotonic()
            again = build_env(SPEC)
            cached_s = time.monotonic() - t0
        finally:
            if previous is None:
                os.environ.pop("TOUCHSTONE_CACHE")
            else:
                os.environ["TOUCHSTONE_CACHE"] = previous
    assert again.reused and not cold.reused
    return [
        {"build": "cold (empty cache, wheels downloaded)", "seconds": round(cold_s, 3)},
        {"build": "cached (same digest, reused)", "seconds": round(cached_s, 4)},
    ]


def _task_run(backend: str, environment, ws: Path) -> float:
    t0 = time.monotonic()
    with open_sandbox(ws, backend=backend, environment=environment) as sb:
        r = sb.exec("python3 -m pytest -q -p no:cacheprovider test_env.py")
    assert r.exit_code == 0, r.stdout + r.stderr
    return time.monotonic() - t0


def _overheads(repeats: int) -> list[dict]:
    env = build_env(SPEC).sandbox_environment()  # in the real cache: built once, then reused
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-envs-ws-") as tmp:
        ws = Path(tmp)
        (ws / "test_env.py").write_text(TEST)
        for backend in available_backends():
            _task_run(backend, None, ws), _task_run(backend, env, ws)  # warm-up
            base, with_env = [], []
            for _ in range(repeats):  # interleaved, so load changes hit both alike
                base.append(_task_run(backend, None, ws))
                with_env.append(_task_run(backend, env, ws))
            b, e = statistics.median(base), statistics.median(with_env)
            rows.append(
                {
                    "backend": backend,
                    "base_ms": round(1000 * b, 1),
                    "with_env_ms": round(1000 * e, 1),
                    "overhead_ms": round(1000 * (e - b), 1),
                    "repeats": repeats,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    results = _build_times() + _overheads(args.repeats)
    notes = [
        f"environment: {', '.join(SPEC.requirements)}; built in a bwrap build sandbox (network on), "
        f"mounted read-only at /usr/local in every run (network off); cache {paths.cache()}",
        "per-task run = sandbox open + `python3 -m pytest` of one test importing attrs + close (median)",
    ]
    print(json.dumps({"bench": "envs", "results": results, "notes": notes}, indent=2))


if __name__ == "__main__":
    main()
