"""Task validation cost per task: the labeled adversarial corpus
(tests/tasks/adversarial.py) validated one task at a time, every check on, in
the sandbox (bwrap, `parallel` runs at once), per family: seconds and sandbox
runs per task, and whether every verdict matched its label.

    python -m benchmarks.bench_validation"""

from __future__ import annotations

import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from tests.tasks.adversarial import BENCHMARK, CASES
from touchstone.taskmaking.validate import ValidationConfig, validate_task


def main() -> None:
    cfg = ValidationConfig(backend="bwrap", contamination_sets=[BENCHMARK])
    by_family: dict[str, list[tuple[float, int, bool]]] = defaultdict(list)
    wrong: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            task = case.write(Path(tmp))
            t0 = time.monotonic()
            v = validate_task(task, cfg)
            got = "kept" if v.kept else v.reason
            by_family[case.family].append((time.monotonic() - t0, len(v.runs), got in case.expect))
            if got not in case.expect:
                wrong.append(f"{case.id}: {got} ({v.detail[:160]})")
    rows = []
    for family, items in by_family.items():
        rows.append(
            {
                "family": family,
                "tasks": len(items),
                "correct": sum(ok for *_, ok in items),
                "s_per_task": round(sum(s for s, *_ in items) / len(items), 2),
                "sandbox_runs_per_task": round(sum(n for _, n, _ in items) / len(items), 1),
                "max_s": round(max(s for s, *_ in items), 2),
            }
        )
    total = [x for items in by_family.values() for x in items]
    rows.append(
        {
            "family": "all",
            "tasks": len(total),
            "correct": sum(ok for *_, ok in total),
            "s_per_task": round(sum(s for s, *_ in total) / len(total), 2),
            "sandbox_runs_per_task": round(sum(n for _, n, _ in total) / len(total), 1),
            "max_s": round(max(s for s, *_ in total), 2),
        }
    )
    notes = [
        f"backend bwrap, {cfg.parallel} sandbox runs at once; reference: k={cfg.k} grading runs + "
        f"{cfg.extra_runs} random + {cfg.clock_runs} shifted-clock + 1 Docker run (when up), "
        f"+{cfg.nondeterminism_runs} when the clock/randomness is touched; up to {cfg.max_mutants} mutants, all run",
        "static families (leaks, contamination, cheating references) stop before any sandbox run; "
        "a kept task runs every check",
        "verdicts not matching their label: " + ("; ".join(wrong) or "none"),
    ]
    print(json.dumps({"bench": "validation", "results": rows, "notes": notes}, indent=2))


if __name__ == "__main__":
    main()
