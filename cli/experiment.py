"""`touchstone experiment ...`: experiments about the loop itself (docs/EXPERIMENTS.md)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Any

import click

from cli import options
from touchstone.config import default_of
from touchstone.experiments.credit_study import CREDIT_ARMS
from touchstone.experiments.filter_ablation import AblationConfig


def set_fields(overrides: tuple[str, ...]) -> dict[str, Any]:
    """`--set FIELD=VALUE` pairs; a VALUE that opens with `{` or `[` is JSON
    (`--set peft='{"r": 16, "top_layers": 16}'`), any other is validated by the config."""
    from training.model_options import ModelOptionError, check_peft

    fields: dict[str, Any] = {}
    for pair in overrides:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"expected FIELD=VALUE, got {pair!r}", param_hint="--set")
        try:
            fields[name] = json.loads(value) if value.lstrip()[:1] in ("{", "[") else value
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"{name}: not JSON ({exc})", param_hint="--set") from None
    try:
        check_peft(fields.get("peft"))
    except ModelOptionError as exc:
        raise click.BadParameter(str(exc), param_hint="--set") from None
    return fields


@click.group()
def experiment() -> None:
    """Experiments about the loop itself (docs/EXPERIMENTS.md)."""


@experiment.command("filter-ablation")
@options.option_of(AblationConfig, "rounds")
@options.option_of(
    AblationConfig,
    "hack_rate",
    help="P: share of hack-prone round-0 attempts that try a hack (an experimental instrument, never a default)",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="default: TOUCHSTONE_HOME/experiments/filter-ablation-P-R (a rerun resumes)",
)
@click.option(
    "--tasks",
    "tasks_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="training task set (default: proposed from the shipped seeds)",
)
@click.option(
    "--heldout",
    "heldout_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="held-out task set (with --tasks)",
)
@click.option(
    "--matched-control",
    is_flag=True,
    help="also train the row-matched control arm `matched`: the naive arm's rows, as many as the verifier keeps",
)
@click.option(
    "--splits",
    default=",".join(default_of(AblationConfig, "splits")),
    show_default=True,
    help="hack splits the hack-prone policy draws from (comma-separated; touchstone.agent.policies.hacks.SPLITS)",
)
@click.option(
    "--holdout-tests",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="held-out tests per task (DIR/<task_id>/test_*.py) for the ground-truth check; never given to the verifier",
)
@click.option(
    "--misplaced-control",
    is_flag=True,
    help="also train `placed` and `misplaced`: the matched control's hacks moved into honest runs, where a hack "
    "happens or after their tests pass (the same tokens, two places)",
)
@click.option("--seeds", default=1, show_default=True, type=click.IntRange(min=1),
              help="run every arm with this many seeds (OUT/seed-N) and report intervals over seeds")  # fmt: skip
@click.option("--filter-only", is_flag=True, help="round 0's filters and kept rows only: no training, no evaluation")
@click.option(
    "--base",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="base checkpoint directory every arm starts from (default: the tiny default model)",
)
@click.option(
    "--set", "overrides", multiple=True, metavar="FIELD=VALUE", help="any AblationConfig field, e.g. --set max_steps=10"
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help='print {"config", "base", "arms": {"naive": [ROW...], "touchstone": [ROW...]}} (and "matched")',
)
def filter_ablation(
    rounds, hack_rate, out, tasks_dir, heldout_dir, matched_control, splits, holdout_tests, misplaced_control, seeds,
    filter_only, base, overrides, as_json,
) -> None:  # fmt: skip
    """Train the same base model on what a naive harness keeps and on what the
    verifier + auditor keep, from the same hack-prone trajectories; report per arm
    and round the kept rows, their hack share, hack propensity, imitation NLL,
    valid tool calls, hack attempts and pass@1 (OUT/report.md, OUT/ablation.png)."""
    from pydantic import ValidationError

    from touchstone import paths
    from touchstone.experiments.filter_ablation import experiment_tasks
    from touchstone.experiments.report import ablation_table, plot_ablation, plot_seeds, plot_splits, seeds_table
    from touchstone.tasks.schema import TaskError, load_task_set
    from training.ablation import run_filter_ablation, run_seeds
    from training.common import TrainingError

    if (tasks_dir is None) != (heldout_dir is None):
        raise click.UsageError("--tasks and --heldout go together")
    fields = set_fields(overrides)
    try:
        flags = {"matched_control": True} if matched_control else {}
        flags |= {"filter_only": True} if filter_only else {}
        flags |= {"misplaced_control": True} if misplaced_control else {}
        flags |= {"holdout_tests": str(holdout_tests)} if holdout_tests else {}
        split_names = [s.strip() for s in splits.split(",") if s.strip()]
        cfg = AblationConfig.model_validate(
            {"splits": split_names, **fields, **flags, "rounds": rounds, "hack_rate": hack_rate}
        )
    except ValidationError as exc:
        raise click.BadParameter(str(exc), param_hint="--set") from None
    out = out or paths.home() / "experiments" / f"filter-ablation-{hack_rate:g}-{rounds}"
    log = (lambda m: click.echo(m, err=True)) if as_json else click.echo
    # With --json, stdout is the result alone: what the libraries print meanwhile
    # (the trainer prints its loss logs) goes to stderr.
    quiet = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
    try:
        with quiet:
            if tasks_dir is None:
                tasks, heldout = experiment_tasks(cfg, out / "tasks")
            else:
                tasks, heldout = load_task_set(tasks_dir), load_task_set(heldout_dir)
            if seeds > 1:
                result = run_seeds(cfg, seeds, tasks, heldout, out, base=base, log=log)
            else:
                result = run_filter_ablation(cfg, tasks, heldout, out, base=base, log=log)
    except (TaskError, TrainingError, ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    first = result["seeds"][0] if seeds > 1 else result
    plot_ablation(first, out / "ablation.png")
    plot_splits(first, out / "splits.png")
    over_seeds = ""
    if seeds > 1:
        plot_seeds(result, out / "seeds.png")
        over_seeds = seeds_table(result["summary"], result["base"]) + "\n![over seeds](seeds.png)\n\nFirst seed:\n\n"
    table = over_seeds + ablation_table(first)
    (out / "report.md").write_text(
        f"# Filter ablation\n\n{table}\n![filter ablation](ablation.png)\n\n![what each filter passed](splits.png)\n"
    )
    if as_json:
        json.dump(result, sys.stdout, indent=2)
        click.echo()
    else:
        click.echo(table + f"\nreport: {out / 'report.md'}  plot: {out / 'ablation.png'}")


# --quick: the tests' size, minutes on 2 cores (shipped seeds' tasks unless --tasks/--heldout)
CREDIT_QUICK = {
    "seeds": 2,
    "n_tasks": 3,
    "n_heldout": 2,
    "hack_rate": 0.5,
    "attempts": 4,
    "max_steps": 4,
    "eval_attempts": 1,
    "max_turns": 2,
    "max_tokens": 16,
    "action_states": 4,
    "action_samples": 2,
}


@experiment.command("credit")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="default: TOUCHSTONE_HOME/experiments/credit[-quick] (a rerun resumes)",
)
@click.option("--tasks", "tasks_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="training task set (default: proposed from the shipped seeds)")  # fmt: skip
@click.option("--heldout", "heldout_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="held-out task set (with --tasks)")  # fmt: skip
@click.option("--base", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="base checkpoint directory every arm starts from (default: the tiny default model)")  # fmt: skip
@click.option("--arms", default=",".join(CREDIT_ARMS), show_default=True,
              help="comma-separated arms")  # fmt: skip
@click.option("--quick", is_flag=True, help=f"a small configuration for tests: {CREDIT_QUICK}")
@click.option("--set", "overrides", multiple=True, metavar="FIELD=VALUE", help="any CreditStudyConfig field")
@click.option("--json", "as_json", is_flag=True, help='print {"config", "data", "arms": {ARM: {"rows", "summary"}}}')
def credit(out, tasks_dir, heldout_dir, base, arms, quick, overrides, as_json) -> None:
    """Train the same base on the same verified trajectories with uniform turn weights,
    progress-shaped weights, the same weights shuffled within each run, and outcome-only
    RL advantages, several seeds each; report held-out pass@k, NLL before / at / after
    the fix, sampled action types at matched states and mean progress, with intervals
    over seeds (OUT/report.md, OUT/credit.png, OUT/result.json)."""
    from touchstone import paths
    from touchstone.experiments.credit_study import CreditStudyConfig
    from touchstone.experiments.filter_ablation import experiment_tasks
    from touchstone.experiments.report import credit_table, plot_credit
    from touchstone.tasks.schema import TaskError, load_task_set
    from training.common import TrainingError
    from training.credit_study import run_credit_study

    if (tasks_dir is None) != (heldout_dir is None):
        raise click.UsageError("--tasks and --heldout go together")
    chosen = tuple(a.strip() for a in arms.split(",") if a.strip())
    if not chosen or set(chosen) - set(CREDIT_ARMS):
        raise click.BadParameter(f"expected some of {', '.join(CREDIT_ARMS)}", param_hint="--arms")
    fields = set_fields(overrides)
    try:
        cfg = CreditStudyConfig.model_validate({**(CREDIT_QUICK if quick else {}), **fields})
    except ValueError as exc:  # a field's ValidationError
        raise click.BadParameter(str(exc), param_hint="--set") from None
    out = out or paths.home() / "experiments" / ("credit-quick" if quick else "credit")
    log = (lambda m: click.echo(m, err=True)) if as_json else click.echo
    quiet = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
    try:
        with quiet:
            if tasks_dir is None:
                sizes = AblationConfig(n_tasks=cfg.n_tasks, n_heldout=cfg.n_heldout, seed=cfg.seed,
                                       backend=cfg.backend, workers=cfg.workers)  # fmt: skip
                tasks, heldout = experiment_tasks(sizes, out / "tasks")
            else:
                tasks, heldout = load_task_set(tasks_dir), load_task_set(heldout_dir)
            result = run_credit_study(cfg, tasks, heldout, out, base=base, arms=chosen, log=log)
    except (TaskError, TrainingError, ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    plot_credit(result, out / "credit.png")
    table = credit_table(result)
    (out / "report.md").write_text(f"# Credit-assignment study\n\n{table}\n![credit study](credit.png)\n")
    if as_json:
        json.dump(result, sys.stdout, indent=2)
        click.echo()
    else:
        click.echo(table + f"\nreport: {out / 'report.md'}  plot: {out / 'credit.png'}")
