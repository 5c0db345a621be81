"""`touchstone env ...`: build and list task environments (docs/ENVIRONMENTS.md)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click


@click.group("env")
def env() -> None:
    """Task environments: third-party packages installed once per digest, mounted read-only in every sandbox."""


@env.command("build")
@click.argument("target", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--workspace",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="for a SPEC file with setup commands: the tree they run in",
)
@click.option("--json", "as_json", is_flag=True, help="print the manifest as JSON")
def build(target: Path, workspace: Path | None, as_json: bool) -> None:
    """Build the environment of TARGET: a task directory, or an environment spec JSON file.
    Reused when the same digest is already built (the network is used only here)."""
    from touchstone.envs import EnvError, build_env, load_spec_file
    from touchstone.tasks.environment import task_spec
    from touchstone.tasks.schema import TaskError, load_task

    started = time.monotonic()
    try:
        if target.is_dir():
            task = load_task(target)
            spec = task_spec(task)
            if spec is None:
                click.echo(f"task {task.id} uses the base environment: nothing to build")
                return
            built = build_env(spec, task.workspace_dir if spec.setup else None)
        else:
            built = build_env(load_spec_file(target), workspace)
    except (EnvError, TaskError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(
            json.dumps(
                {**built.manifest.model_dump(mode="json"), "dir": str(built.dir), "reused": built.reused}, indent=2
            )
        )
        return
    how = "reused" if built.reused else f"built in {built.manifest.build_s:.1f} s"
    click.echo(f"{built.digest}  {how} ({time.monotonic() - started:.1f} s)  {built.dir}")
    for package in built.manifest.packages:
        click.echo(f"  {package}")


@env.command("list")
def list_() -> None:
    """Environments built in TOUCHSTONE_CACHE."""
    from touchstone import paths
    from touchstone.envs.build import MANIFEST, EnvManifest

    for path in sorted((paths.cache() / "envs").glob(f"*/{MANIFEST}")):
        m = EnvManifest.model_validate_json(path.read_text())
        click.echo(
            f"{m.digest[:23]}  {len(m.packages):3d} packages  {m.built_at[:19]}  {', '.join(m.spec.requirements)[:80]}"
        )
