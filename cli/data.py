"""`touchstone data ...`: build a round's training datasets from verified trajectories."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from touchstone.config import parameter_default
from touchstone.data.release import release_dataset


def _print_summary(summary: dict) -> None:
    console = Console()
    console.print(f"inputs: {summary['inputs']}  verdicts: {summary['verdicts']}  hacks: {summary['hacks']}")
    if summary["reject_reasons"]:
        console.print(
            "reject reasons (failed check: runs): "
            + ", ".join(f"{k}: {v}" for k, v in summary["reject_reasons"].items())
        )
    table = Table("dataset", "rows", "tokens", "tasks", "dropped")
    for name, d in summary["datasets"].items():
        dropped = ", ".join(f"{k}={v}" for k, v in d["dropped"].items()) or "-"
        table.add_row(name, str(d["rows"]), "-" if d["tokens"] is None else str(d["tokens"]), str(d["tasks"]), dropped)
    console.print(table)


@click.group()
def data() -> None:
    """Training datasets built only from what the verifier vouched for."""


@data.command("build")
@click.option(
    "--reports",
    type=click.Path(exists=True, path_type=Path),
    required=True,
    help="reports.parquet (or its directory) from verify-batch.",
)
@click.option(
    "--trajectories",
    type=click.Path(exists=True, path_type=Path),
    required=True,
    help="trajectories.parquet (or its directory) from solve.",
)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option("--round", "round_key", default=None, help="Round key recorded in the lineage columns.")
@click.option(
    "--config",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="YAML with DataConfig fields (keep_per_task, max_tokens, credit: {gamma, ...}).",
)
@click.option(
    "--proposals",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="The round's task set holding proposals.parquet: add the proposer's rows (self-play).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the build summary as JSON.")
def build(
    reports: Path,
    trajectories: Path,
    out: Path,
    round_key: str | None,
    config: Path | None,
    proposals: Path | None,
    as_json: bool,
) -> None:
    """Write OUT/{sft,rl,dpo,kto}.parquet and OUT/summary.json."""
    from touchstone.config import ConfigError, load_config
    from touchstone.data.build import build_datasets
    from touchstone.data.schema import DataConfig

    try:
        cfg = load_config(DataConfig, config)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        summary = build_datasets(reports, trajectories, out, round_key=round_key, config=cfg, proposals=proposals)
    except ValueError as exc:  # DataError, or a report inconsistent with its trajectory (credit)
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(summary.model_dump_json(indent=2))
    else:
        _print_summary(summary.model_dump())


@data.command("summary")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
def summary(directory: Path) -> None:
    """Print the summary of a built dataset directory."""
    from touchstone.data.build import read_summary

    _print_summary(read_summary(directory).model_dump())


def expand_rounds(spec: str) -> list[str]:
    """'r000..r003' -> r000, r001, r002, r003; 'r000,r002' as listed."""
    import re

    out = []
    for part in spec.split(","):
        lo, sep, hi = part.strip().partition("..")
        if not sep:
            out.append(lo)
            continue
        a, b = re.fullmatch(r"(\D*)(\d+)", lo), re.fullmatch(r"(\D*)(\d+)", hi)
        if not a or not b or a.group(1) != b.group(1):
            raise click.BadParameter(
                f"{part!r}: a range is PREFIX<n>..PREFIX<m>, e.g. r000..r004", param_hint="--rounds"
            )
        if int(b.group(2)) < int(a.group(2)):
            raise click.BadParameter(
                f"{part!r} runs backwards: write {hi}..{lo} (ranges go from the first round to the last)",
                param_hint="--rounds",
            )
        width = len(a.group(2))
        out += [f"{a.group(1)}{i:0{width}d}" for i in range(int(a.group(2)), int(b.group(2)) + 1)]
    return out


@data.command("release")
@click.option("--rounds", required=True, help="Rounds to publish: r000..r004 or r000,r002.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), required=True)
@click.option(
    "--home",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Data root holding rounds/ (default: TOUCHSTONE_HOME).",
)
@click.option("--redact", is_flag=True, help="Replace absolute host paths and NAME=value environment settings.")
@click.option("--license", "license_", default=parameter_default(release_dataset, "license"), show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the release summary as JSON.")
def release(rounds: str, out: Path, home: Path | None, redact: bool, license_: str, as_json: bool) -> None:
    """Write a Hugging Face dataset directory of the rounds' successful AND
    failed runs (held-out tasks excluded), with a generated dataset card."""
    from cli.errors import storage_errors, storage_problem
    from touchstone import paths

    keys = expand_rounds(rounds)
    root = str(home) if home else paths.data_root()  # the data root every command of this home uses
    try:
        local = _local_release_inputs(root, keys) if paths.is_url(root) else Path(root)
        summary = release_dataset(local, keys, out, scrub=redact, license=license_)
    except FileNotFoundError as exc:
        raise click.ClickException(str(exc)) from None
    except storage_errors() as exc:
        raise click.ClickException(storage_problem(root, exc)) from None
    if as_json:
        click.echo(summary.model_dump_json(indent=2))
        return
    click.echo(
        f"released {sum(summary.rows.values())} runs to {out}: "
        + ", ".join(f"{s}={n}" for s, n in summary.rows.items())
        + f"; held-out runs excluded: {summary.excluded_heldout}"
    )


def _local_release_inputs(root: str, keys: list[str]) -> Path:
    """What a release reads from an object-store root (the rounds' trajectories and
    reports, the held-out index), downloaded into a local directory of the same layout."""
    import shutil
    import tempfile

    from orchestration.resources import StorageResource
    from touchstone.paths import Asset

    store = StorageResource(root=root).store()
    local = Path(tempfile.mkdtemp(prefix="touchstone-release-"))
    wanted = [(Asset.HELDOUT_TASKS, None)] if store.asset_dir(Asset.HELDOUT_TASKS).exists() else []
    wanted += [(a, k) for k in keys for a in (Asset.RAW_TRAJECTORIES, Asset.VERIFICATION_REPORTS)]
    for asset, key in wanted:
        dest = local / "rounds" / key / asset if key else local / asset
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(store.local_dir(asset, key), dest)
    return local


@data.command("export")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["trl", "openai", "sharegpt"]), required=True)
@click.option("--dataset", default="sft", show_default=True, type=click.Choice(["sft", "rl", "dpo", "kto"]))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="JSONL file to write")
def export(directory: Path, fmt: str, dataset: str, out: Path) -> None:
    """Write a built dataset as JSONL for other tools (TRL, OpenAI fine-tuning, ShareGPT/LLaMA-Factory)."""
    from touchstone.data.export import ExportError, export_dataset

    try:
        n = export_dataset(directory, dataset, fmt, out)
    except ExportError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {n} {dataset} rows as {fmt} to {out}")
