"""Agent rollout throughput: trajectories per minute for the teacher and the tiny
hf policy, and the share of episode wall time spent in the sandbox vs the policy.

    python -m benchmarks.bench_agent [--workers 2] [--tasks 6]

Tasks are single-bug mutants of a small library (the agent tests' fixture)."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.rollout import read_records, solve
from touchstone.episode.trajectory import Sampling

from tests.agent.conftest import MINILIB, minilib_task

BUGS = [
    ("if x > hi:", "if x <= hi:"),
    ("a > 0 and b > 0", "a > 0 or b > 0"),
    ("total += 1", "total -= 1"),
    ("sum(xs) / len(xs)", "sum(xs) * len(xs)"),
    ("range(len(xs) - 1)", "range(len(xs) - 1 + 1)"),
    ("return [xs[i:i + n] for i in range(0, len(xs), n)]", "return None"),
]


def bench(policy: str, tasks: Path, out: Path, workers: int, sampling: Sampling, limits: EpisodeLimits) -> dict:
    started = time.monotonic()
    solve(
        tasks,
        PolicySpec.parse(policy),
        attempts=1,
        workers=workers,
        out=out,
        sampling=sampling,
        backend="bwrap",
        limits=limits,
    )
    wall = time.monotonic() - started
    trajs = read_records(out)
    episode_wall = sum(t.wall_s for t in trajs)
    return {
        "policy": policy.split(":", 1)[0],
        "trajectories": len(trajs),
        "trajectories_per_minute": round(60 * len(trajs) / wall, 2),
        "sandbox_share": round(sum(t.sandbox_s for t in trajs) / episode_wall, 3),
        "policy_share": round(sum(t.policy_s for t in trajs) / episode_wall, 3),
        "mean_turns": round(sum(len(t.turns) for t in trajs) / len(trajs), 1),
        "workers": workers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=len(BUGS))
    args = parser.parse_args()
    from training.model_init import default_model

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i, (original, mutated) in enumerate(BUGS[: args.tasks]):
            minilib_task(
                root / "tasks", f"bench-{i}", "A function of minilib is wrong.", MINILIB.replace(original, mutated)
            )
        results = [
            bench("teacher", root / "tasks", root / "teacher", args.workers, Sampling(), EpisodeLimits()),
            bench(
                f"hf:{default_model()}",
                root / "tasks",
                root / "hf",
                args.workers,
                Sampling(temperature=1.0, max_tokens=64),
                EpisodeLimits(max_turns=4),
            ),
        ]
    notes = [
        "Tasks: single-bug mutants of a small library, one attempt each, bwrap sandbox, "
        f"{args.workers} workers; trajectories/minute counts wall time of the whole `solve` call.",
        "sandbox_share / policy_share: summed tool-execution and policy time over summed episode wall time.",
        "The hf row is the untrained default tiny model (64 tokens per turn, 4 turns): it measures "
        "generation cost, not skill.",
    ]
    print(json.dumps({"bench": "agent", "results": results, "notes": notes}))


if __name__ == "__main__":
    main()
