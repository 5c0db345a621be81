"""`touchstone solve`: batch rollouts of a policy on tasks."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cli import options
from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.rollout import read_records, solve as run_solve
from touchstone.config import parameter_default
from touchstone.episode.trajectory import Sampling
from touchstone.tasks.schema import TaskError


@click.command()
@click.argument("tasks", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--policy", "policy_spec", required=True, type=options.POLICY, help="teacher | hf:PATH | openai:BASE_URL#MODEL"
)
@click.option(
    "--attempts",
    default=parameter_default(run_solve, "attempts"),
    show_default=True,
    type=click.IntRange(min=1),
    help="attempts per task",
)
@click.option(
    "--workers",
    default=parameter_default(run_solve, "workers"),
    show_default=True,
    type=click.IntRange(min=1),
    help="concurrent sandboxes",
)
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
@options.backend
@options.sampling
@options.limits
@click.option("--json", "as_json", is_flag=True, help="print the result as one JSON object")
def solve(
    tasks, policy_spec, attempts, workers, out, backend, max_turns, time_budget, as_json, **sampling_fields
) -> None:
    """Solve TASKS (a task directory or a task-set directory) with a policy.

    Writes OUT/trajectories.parquet, OUT/steps.parquet and
    OUT/jsonl/<task id>/<trajectory id>.jsonl. Rerun the same command to resume."""
    try:
        sampling = Sampling(**sampling_fields)  # options.sampling's fields
        limits = EpisodeLimits(max_turns=max_turns, time_budget_s=time_budget)
        run_solve(tasks, policy_spec, attempts, workers, out, sampling, backend, limits)
    except (TaskError, ValueError, RuntimeError) as exc:  # bad input, bad spec, crashed attempts
        raise click.ClickException(str(exc)) from exc
    records = read_records(out)
    reasons: dict[str, int] = {}
    for t in records:
        reasons[t.exit_reason] = reasons.get(t.exit_reason, 0) + 1
    if as_json:
        click.echo(
            json.dumps({"trajectories": len(records), "out": str(out), "exit_reasons": dict(sorted(reasons.items()))})
        )
        return
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items()))
    click.echo(f"{len(records)} trajectories in {out} ({summary})")


if __name__ == "__main__":  # `python -m cli.agent`, used to run it as a killable process
    solve()
