"""Task proposal throughput: validated tasks per minute per proposer, on this
machine's cores, with every test run in the sandbox (bwrap).

    python -m benchmarks.bench_tasks [--workers 2] [--n 20]

mutation: the shipped default seeds; problems and llm: the recorded fixtures of
tests/tasks/fixtures (a mix of good and bad candidates, as in real use)."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from touchstone.taskmaking.proposers.llm import propose_from_outputs
from touchstone.taskmaking.proposers.mutation import propose_mutation
from touchstone.taskmaking.proposers.problems import import_problems
from touchstone.taskmaking.validate import ValidationConfig

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "tasks" / "fixtures"


def _rate(proposer: str, started: float, kept: int, rejected: int, workers: int) -> dict:
    wall = time.monotonic() - started
    return {
        "proposer": proposer,
        "kept": kept,
        "rejected": rejected,
        "wall_s": round(wall, 1),
        "validated_tasks_per_minute": round(60 * kept / wall, 2),
        "candidates_per_minute": round(60 * (kept + rejected) / wall, 2),
        "workers": workers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--n", type=int, default=20, help="mutation tasks to keep")
    args = parser.parse_args()
    cfg = ValidationConfig(backend="bwrap")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.monotonic()
        m = propose_mutation(root / "mutation", n=args.n, workers=args.workers, cfg=cfg)
        results.append(_rate("mutation", t0, m.kept, m.rejected, args.workers))
        t0 = time.monotonic()
        p = import_problems(FIXTURES / "problems.jsonl", root / "problems", workers=args.workers, cfg=cfg)
        results.append(_rate("problems", t0, p.kept, p.rejected, args.workers))
        outputs = [o["output"] for o in json.loads((FIXTURES / "llm_outputs.json").read_text())]
        t0 = time.monotonic()
        rows, kept = propose_from_outputs(outputs, root / "llm", origin="recorded", workers=args.workers, cfg=cfg)
        results.append(_rate("llm (recorded outputs)", t0, len(kept), len(rows) - len(kept), args.workers))
    notes = [
        f"every test run in the sandbox (bwrap); task validation as in docs/formats/task.md (k={cfg.k} grading "
        f"runs plus randomized/shifted-clock runs, leak probes, trivial baselines, up to {cfg.max_mutants} "
        "mutants, all run); its cost per task: the validation section",
        "mutation: shipped seeds inflection 0.5.1 + toolz 1.0.0; problems / llm: the recorded fixtures "
        "(1 of 6 and 1 of 7 candidates are good, the rest are rejected for the reasons under test)",
    ]
    print(json.dumps({"bench": "tasks", "results": results, "notes": notes}, indent=2))


if __name__ == "__main__":
    main()
