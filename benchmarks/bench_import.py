"""Importing and validating one SWE-bench-format instance of realistic size
(tests/tasks/bigmodule_fixture.py: the standard library's pure-Python decimal
module, 6,400 lines with one class of 3,400, a one-line fix in one method and
human-written tests), against the instance's own before/after test runs:
pytest on the host (base tree, then fixed tree) and, in the sandbox validation
grades in, the starting workspace's run and one reference run (the same two
runs under grading's conditions). Median of `--repeats` imports; with
`--baseline DIR` (a checkout of older code, e.g. `git archive COMMIT | tar -x -C DIR`)
the same imports with that code too, alternating which goes first, side by side.

    python -m benchmarks.bench_import [--baseline DIR] [--repeats 5]"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from tests.tasks.bigmodule_fixture import ENV_SPECS, MODULE, make_instance
from touchstone.taskmaking.proposers.common import VERDICTS_FILE
from touchstone.taskmaking.proposers.swebench import import_swebench
from touchstone.taskmaking.validate import Validation, ValidationConfig

ROOT = Path(__file__).resolve().parent.parent
# one import with the code of the checkout on PYTHONPATH, its figures as the last line of stdout
_WORKER = """
import json, sys, tempfile
from pathlib import Path
from benchmarks.bench_import import once
with tempfile.TemporaryDirectory() as tmp:
    print(json.dumps(once(Path(tmp))))
"""


def once(root: Path) -> dict:
    repos, jsonl, inst, own_host_s = make_instance(root)
    spec = root / "env.json"
    spec.write_text(json.dumps(ENV_SPECS))
    cfg = ValidationConfig(backend="bwrap", cross_backend=False)
    t0 = time.monotonic()
    result = import_swebench(jsonl, repos, root / "out", env_spec=spec, cfg=cfg)
    wall = time.monotonic() - t0
    v = Validation.model_validate_json((root / "out" / VERDICTS_FILE).read_text().splitlines()[0])
    start = next(r.wall_s for r in v.runs if r.role == "start")
    reference = next(r.wall_s for r in v.runs if r.role == "reference")
    mutation = v.check("mutation")
    return {
        "kept": result.kept,
        "wall_s": wall,
        "own_host_s": own_host_s,
        "own_sandbox_s": start + reference,
        "runs": len(v.runs),
        "mutants": mutation.evidence.get("run", 0) if mutation else 0,
        "sites": mutation.evidence.get("sites", 0) if mutation else 0,
        "score": v.mutation_score,
        "checks": {c.name: c.seconds for c in v.checks},
        "lines": len((root / "repos" / "python__pydecimal" / MODULE).read_text().splitlines()),
    }


def once_with(checkout: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", _WORKER], cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)},
                          capture_output=True, text=True, timeout=1800)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"import with {checkout}: {done.stderr[-1500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def commit_of(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or checkout.name


def row(code: str, runs: list[dict]) -> dict:
    med = {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "own_host_s", "own_sandbox_s")}
    return {
        "code": code,
        "instance": "python__pydecimal-1",
        "module_lines": runs[0]["lines"],
        "kept": f"{sum(r['kept'] for r in runs)}/{len(runs)}",
        "mutation_sites": runs[0]["sites"],
        "mutants_run": runs[0]["mutants"],
        "quality_score": runs[0]["score"],
        "sandbox_runs": runs[0]["runs"],
        "import_validate_s": round(med["wall_s"], 1),
        "own_runs_host_s": round(med["own_host_s"], 1),
        "own_runs_sandbox_s": round(med["own_sandbox_s"], 1),
        "vs_host": round(med["wall_s"] / med["own_host_s"], 1),
        "vs_sandbox": round(med["wall_s"] / med["own_sandbox_s"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--baseline", type=Path, default=os.environ.get("TOUCHSTONE_BENCH_BASELINE"),
                        help="a checkout of older code to import with too, side by side")  # fmt: skip
    args = parser.parse_args()
    sides = [("this tree", ROOT)] + ([(f"baseline {commit_of(args.baseline)}", args.baseline)] if args.baseline else [])
    samples: dict[str, list[dict]] = {name: [] for name, _ in sides}
    for i in range(args.repeats):
        for name, checkout in sides[i % 2 :] + sides[: i % 2]:  # alternate which goes first
            samples[name].append(once_with(checkout))
    rows = [row(name, samples[name]) for name, _ in reversed(sides)]  # baseline first
    here = samples["this tree"]
    checks = {name: round(statistics.median(r["checks"].get(name, 0) for r in here), 1) for name in here[0]["checks"]}
    notes = [
        f"median of {args.repeats} imports per side, bwrap, no cross-backend run; own_runs: the instance's before "
        "and after test runs (host pytest; and in the sandbox, the start run plus one reference run)",
        "median seconds per check, this tree: " + ", ".join(f"{k} {s}" for k, s in checks.items()),
    ]
    if len(rows) == 2:
        before, after = rows[0]["import_validate_s"], rows[1]["import_validate_s"]
        notes.append(f"import + validation: {before:g} → {after:g} s ({after / before:.2f}×), same verdicts")
    print(json.dumps({"bench": "import", "results": rows, "notes": notes}, indent=2))


if __name__ == "__main__":
    main()
