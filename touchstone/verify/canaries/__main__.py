"""python -m touchstone.verify.canaries build [--missing] | matrix [--naive] [--workers N]

build:  regenerate the canary trajectories from spec.py (real tool outputs;
        --missing: only those without a trajectory file yet).
matrix: verify every canary and print the confusion matrix per family:
        hacks rejected / total (and rejected for an expected reason),
        honest accepted / total; with --naive, also what the naive harness
        accepts. Exit 1 when any canary is misclassified."""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from touchstone.tasks.schema import load_task
from touchstone.verify.canaries import Canary, load_canaries


def right_reason(canary: Canary, report) -> bool:
    """A hack is rejected for the right reason when its first failing check
    (in verification order) is one the corpus names for it."""
    failed = report.failed_checks()
    return bool(failed) and failed[0] in canary.reasons


def _score(canary: Canary, naive: bool, replays: int) -> dict:
    from touchstone.verify.canaries.naive import naive_grade
    from touchstone.verify.verifier import verify_trajectory

    task = load_task(canary.task_dir)
    report = verify_trajectory(
        task, canary.messages, replays=replays, trajectory_id=canary.name, isolated=canary.isolated or None
    )
    row = {"canary": canary, "report": report, "naive": naive_grade(task, canary.messages) if naive else None}
    row["correct"] = report.verdict == canary.expected_verdict and (
        canary.expected_verdict == "accept" or right_reason(canary, report)
    )
    return row


def matrix(naive: bool = False, workers: int = 2, replays: int = 3) -> int:
    canaries = load_canaries()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        rows = list(tqdm(pool.map(lambda c: _score(c, naive, replays), canaries), total=len(canaries), desc="canaries"))
    per: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        fam = per[row["canary"].family + (" (isolated run)" if row["canary"].isolated else "")]
        fam["total"] += 1
        fam["ok"] += row["report"].verdict == row["canary"].expected_verdict
        fam["right"] += row["correct"]
        fam["naive"] += bool(row["naive"])
    table = Table(title="Verifier on the canary corpus")
    for col in ["family", "kind", "verifier correct", "right reason", *(["naive harness accepts"] if naive else [])]:
        table.add_column(col)
    for fam in sorted(per, key=lambda f: (f.startswith("honest"), f)):
        c = per[fam]
        kind = "honest accepted" if fam.startswith("honest") else "hacks rejected"
        cells = [fam, kind, f"{c['ok']}/{c['total']}", f"{c['right']}/{c['total']}"]
        table.add_row(*cells, *([f"{c['naive']}/{c['total']}"] if naive else []))
    console = Console()
    console.print(table)
    bad = [r for r in rows if not r["correct"]]
    for r in bad:
        console.print(
            f"[red]misclassified[/red] {r['canary'].name}: {r['report'].verdict}, failed {r['report'].failed_checks()}"
        )
    return 1 if bad else 0


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m touchstone.verify.canaries")
    parser.add_argument("command", choices=["build", "matrix"])
    parser.add_argument("--naive", action="store_true", help="also grade each canary with the naive harness")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--replays", type=int, default=3)
    parser.add_argument("--missing", action="store_true", help="build: record only canaries without a trajectory file")
    args = parser.parse_args()
    if args.command == "build":
        from touchstone.verify.canaries.build import build

        print(f"wrote {len(build(missing_only=args.missing))} canaries")
        return
    sys.exit(matrix(args.naive, args.workers, args.replays))


if __name__ == "__main__":
    main()
