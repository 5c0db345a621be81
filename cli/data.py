"""`touchstone data ...`: build a round's training datasets from verified trajectories."""

from __future__ import annotations

import json
from pathlib import Path

import click
import yaml
from rich.console import Console
from rich.table import Table


def _print_summary(summary: dict) -> None:
    console = Console()
    console.print(f"inputs: {summary['inputs']}  verdicts: {summary['verdicts']}  hacks: {summary['hacks']}")
    if summary["reject_reasons"]:
        console.print("reject reasons (failed check: runs): " +
                      ", ".join(f"{k}: {v}" for k, v in summary["reject_reasons"].items()))
    table = Table("dataset", "rows", "tokens", "tasks", "dropped")
    for name, d in summary["datasets"].items():
        dropped = ", ".join(f"{k}={v}" for k, v in d["dropped"].items()) or "-"
        table.add_row(name, str(d["rows"]), "-" if d["tokens"] is None else str(d["tokens"]), str(d["tasks"]), dropped)
    console.print(table)


@click.group()
def data() -> None:
    """Training datasets built only from what the verifier vouched for."""


@data.command("build")
@click.option("--reports", type=click.Path(exists=True, path_type=Path), required=True,
              help="reports.parquet (or its directory) from verify-batch.")
@click.option("--trajectories", type=click.Path(exists=True, path_type=Path), required=True,
              help="trajectories.parquet (or its directory) from solve.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--round", "round_key", default=None, help="Round key recorded in the lineage columns.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="YAML with DataConfig fields (keep_per_task, max_tokens, credit: {gamma, ...}).")
def build(reports: Path, trajectories: Path, out: Path, round_key: str | None, config: Path | None) -> None:
    """Write OUT/{sft,rl,dpo,kto}.parquet and OUT/summary.json."""
    from touchstone.data.build import build_datasets
    from touchstone.data.schema import DataConfig

    cfg = DataConfig.model_validate(yaml.safe_load(config.read_text()) or {}) if config else DataConfig()
    try:
        summary = build_datasets(reports, trajectories, out, round_key=round_key, config=cfg)
    except ValueError as exc:  # DataError, or a report inconsistent with its trajectory (credit)
        raise click.ClickException(str(exc)) from None
    _print_summary(summary.model_dump())


@data.command("summary")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
def summary(directory: Path) -> None:
    """Print the summary of a built dataset directory."""
    from touchstone.data.build import SUMMARY_FILE

    _print_summary(json.loads((directory / SUMMARY_FILE).read_text()))
