"""`touchstone eval`: any checkpoints against any held-out task set, side by
side (the figures of `round_evaluation`, outside a round)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cli import options
from touchstone.agent.loop import EpisodeLimits
from touchstone.episode.trajectory import Sampling
from touchstone.rounds import CPU_ROUND


@click.command("eval")
@click.option(
    "--checkpoint",
    "checkpoints",
    multiple=True,
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A checkpoint directory; repeat to compare several (reported in the order given).",
)
@click.option(
    "--tasks",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Held-out task set (a directory of task directories).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where rollouts, reports and the report go.",
)
@click.option(
    "--attempts",
    default=CPU_ROUND["eval_attempts"],
    show_default=True,
    type=click.IntRange(min=1),
    help="k: attempts per task (as a laptop round's evaluation)",
)
@click.option(
    "--workers",
    default=CPU_ROUND["workers"],
    show_default=True,
    type=click.IntRange(min=1),
    help="concurrent sandboxes",
)
@options.backend
# 8, not a laptop round's 6 (CPU_ROUND["max_turns"]): the rounds' limit when this command was
# written, left as it is (moving defaults' homes changes no default); a round's evaluation runs 6
@options.option_of(EpisodeLimits, "max_turns", default=8)
@options.option_of(Sampling, "max_tokens", default=CPU_ROUND["max_tokens"])
@options.option_of(
    Sampling,
    "context_window",
    default=CPU_ROUND["context_window"],
    help="tokens per turn, prompt and completion (the latest kept): the max_length the checkpoints "
    f"were trained with (the laptop rounds': {CPU_ROUND['context_window']}); 0: the whole conversation",
)
@options.option_of(Sampling, "temperature")
@options.option_of(Sampling, "top_p")
@options.option_of(Sampling, "seed")
@options.option_of(Sampling, "dtype")
@click.option(
    "--likelihood/--no-likelihood",
    default=True,
    show_default=True,
    help="the likelihood figures (teacher reference runs, imitation NLL, hack propensity); "
    "--no-likelihood: the sampled figures only, as a round with `likelihood: false`",
)
@click.option("--json", "as_json", is_flag=True, help="print the metrics as a JSON list, one object per checkpoint")
def evaluate(
    checkpoints, tasks, out, attempts, workers, backend, max_turns, likelihood, as_json, **sampling_fields
) -> None:
    """Sampled attempts graded by the verifier (pass@1/pass@k, hack attempts, valid
    tool calls, exit reasons, progress) and likelihoods on the held-out teacher runs
    (imitation NLL, hack propensity). Writes OUT/<n>-<name>/ per checkpoint and
    OUT/report.md + OUT/rounds.png for all of them."""
    from touchstone.evaluate import markdown_report, plot_rounds
    from touchstone.tasks.schema import TaskError, load_task_set
    from training.common import TrainingError
    from training.evaluation import evaluate_checkpoint

    try:
        task_list = load_task_set(tasks)
        if not task_list:
            raise click.BadParameter(f"{tasks} holds no task", param_hint="--tasks")
        results = [
            evaluate_checkpoint(
                ckpt,
                task_list,
                out / f"{i}-{ckpt.name}",
                label=ckpt.name,
                attempts=attempts,
                backend=backend,
                workers=workers,
                sampling=Sampling(**sampling_fields),  # --temperature ... --dtype
                limits=EpisodeLimits(max_turns=max_turns),
                likelihood=likelihood,
            )
            for i, ckpt in enumerate(checkpoints)
        ]
    except (TaskError, TrainingError, ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    plot_rounds(results, out / "rounds.png")
    report = markdown_report(results, plot_file="rounds.png")
    (out / "report.md").write_text(report)
    click.echo(json.dumps([m.model_dump() for m in results], indent=2) if as_json else report)
