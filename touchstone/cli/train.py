"""`touchstone train ...` (fine-tune a checkpoint on a round's datasets) and
`touchstone model ...` (the default model). Heavy imports (torch, TRL) happen
inside the commands so `touchstone --help` stays fast."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def model() -> None:
    """The default tiny model."""


@model.command("init")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Checkpoint directory to create.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--pretrain-steps", type=int, default=100, show_default=True,
              help="Brief next-token pass over the code corpus (0 = random weights).")
def init(out: Path, seed: int, pretrain_steps: int) -> None:
    """Build the default tiny Qwen2 model and code tokenizer, offline and deterministically."""
    from training.model_init import init_model

    if out.exists() and any(out.iterdir()):
        raise click.UsageError(f"{out} exists and is not empty; choose a new directory")
    init_model(out, seed=seed, pretrain_steps=pretrain_steps)
    click.echo(f"model written to {out}")
