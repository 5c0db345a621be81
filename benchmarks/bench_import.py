"""Importing and validating one SWE-bench-format instance of realistic size
(tests/tasks/bigmodule_fixture.py: the standard library's pure-Python decimal
module, 6,400 lines with one class of 3,400, a one-line fix in one method and
human-written tests), against the instance's own before/after test runs:
pytest on the host (base tree, then fixed tree) and, in the sandbox validation
grades in, the starting workspace's run and one reference run (the same two
runs under grading's conditions). Median of `REPEATS` imports.

    python -m benchmarks.bench_import"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from tests.tasks.bigmodule_fixture import ENV_SPECS, MODULE, make_instance
from touchstone.taskmaking.proposers.common import VERDICTS_FILE
from touchstone.taskmaking.proposers.swebench import import_swebench
from touchstone.taskmaking.validate import Validation, ValidationConfig

REPEATS = 3


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


def main() -> None:
    runs = []
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as tmp:
            runs.append(once(Path(tmp)))
    med = {k: statistics.median(r[k] for r in runs) for k in ("wall_s", "own_host_s", "own_sandbox_s")}
    row = {
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
    checks = {name: round(statistics.median(r["checks"].get(name, 0) for r in runs), 1) for name in runs[0]["checks"]}
    notes = [
        f"median of {REPEATS} imports, bwrap, no cross-backend run; own_runs: the instance's before and after "
        "test runs (host pytest; and in the sandbox, the start run plus one reference run)",
        "median seconds per check: " + ", ".join(f"{k} {s}" for k, s in checks.items()),
        "before issue 32 an instance like this did not finish in 20 min (mutants rendered and guard-analysed "
        "over the whole 3,400-line class before any was sampled)",
    ]
    print(json.dumps({"bench": "import", "results": [row], "notes": notes}, indent=2))


if __name__ == "__main__":
    main()
