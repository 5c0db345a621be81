"""`touchstone deploy up|run|status|down`: the Docker deployment (PostgreSQL,
Dagster daemon, webserver, code location; every run and step in a container)
on this host. Dagster is imported inside the commands; the deployment's record
(`Stack`, no Dagster) holds the defaults the options show."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from orchestration.deploy.stack import Stack
from touchstone.config import default_of

_ROOT = click.option(
    "--root",
    type=click.Path(path_type=Path),
    default=lambda: os.environ.get("TOUCHSTONE_DEPLOY_ROOT", "/var/lib/touchstone"),
    show_default="TOUCHSTONE_DEPLOY_ROOT or /var/lib/touchstone",
    help="Data, instance files and sandbox workspaces; mounted at the same path in every container.",
)


def _stack(root: Path):
    from orchestration.deploy.stack import DeployError

    try:
        return Stack.load(root)
    except DeployError as exc:
        raise click.ClickException(str(exc)) from None


@click.group()
def deploy() -> None:
    """Run rounds on a Docker deployment of Dagster (see docs/DEPLOY.md)."""


@deploy.command("build")
def build() -> None:
    """Build (if missing) the user-code and PostgreSQL images; print their tags."""
    from orchestration.deploy.images import build_images

    images = build_images(log=lambda m: click.echo(m, err=True))
    click.echo(f"{images.user_code}\n{images.postgres}")


@deploy.command("up")
@_ROOT
@click.option("--name", default=default_of(Stack, "name"), show_default=True, help="Container prefix and label value.")
@click.option(
    "--web-port", default=default_of(Stack, "web_port"), show_default=True, help="Webserver port on 127.0.0.1."
)
@click.option(
    "--pg-port", default=default_of(Stack, "pg_port"), show_default=True, help="PostgreSQL port on 127.0.0.1."
)
@click.option(
    "--sandbox-slots",
    default=default_of(Stack, "sandbox_slots"),
    show_default=True,
    help="Steps of pool `sandbox` at once.",
)
def up(root: Path, name: str, web_port: int, pg_port: int, sandbox_slots: int) -> None:
    """Build the images if needed and start the deployment (idempotent)."""
    from orchestration.deploy.stack import DeployError
    from orchestration.deploy.stack import up as start

    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    try:
        stack = Stack.load(root) if (root / "deploy.json").is_file() else Stack(root=root, name=name)
        stack.web_port, stack.pg_port, stack.sandbox_slots = web_port, pg_port, sandbox_slots
        start(stack, log=lambda m: click.echo(m, err=True))
    except DeployError as exc:
        raise click.ClickException(str(exc)) from None


@deploy.command("run")
@_ROOT
@click.option("--rounds", "n_rounds", default=1, show_default=True, help="Rounds to run, one run each.")
@click.option(
    "-c",
    "--config",
    "config_paths",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    multiple=True,
    help="Run config YAML (ops: and resources: sections), as in the launchpad; repeat it to lay one over "
    "another (later files win), as `touchstone round run -c` does.",
)
@click.option("--timeout", "timeout_s", default=7200, show_default=True, help="Seconds to wait per run.")
def run(root: Path, n_rounds: int, config_paths: tuple[Path, ...], timeout_s: int) -> None:
    """Launch rounds through the deployment's run queue and launcher; wait for each."""
    from orchestration.deploy.runs import run_rounds
    from orchestration.deploy.stack import DeployError
    from orchestration.run_config import RunConfigError, load_run_configs

    try:
        config = load_run_configs(list(config_paths))
    except RunConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--config") from None
    try:
        outcomes = run_rounds(
            _stack(root), n_rounds, config, timeout_s=timeout_s, log=lambda m: click.echo(m, err=True)
        )
    except DeployError as exc:
        raise click.ClickException(str(exc)) from None
    for o in outcomes:
        click.echo(f"{o.job} {o.partition or '-'} {o.status} {o.wall_s:.0f}s run={o.run_id}")
        for line in [*(f"check failed: {c}" for c in o.failed_checks), *o.failures]:
            click.echo(f"  {line}", err=True)
    if not all(o.success for o in outcomes):
        sys.exit(1)


@deploy.command("status")
@_ROOT
def status(root: Path) -> None:
    """The deployment's containers and its latest runs."""
    from orchestration.deploy.stack import containers, host_instance

    stack = _stack(root)
    click.echo(f"deployment {stack.name}: {stack.web_url}  root {stack.root}")
    for c in sorted(containers(stack), key=lambda c: c.name):
        click.echo(f"  {c.name:40s} {c.status}")
    try:
        with host_instance(stack) as instance:
            for r in instance.get_runs(limit=10):
                click.echo(
                    f"  run {r.run_id[:8]} {r.job_name:8s} {r.tags.get('dagster/partition', '-'):5s} {r.status.value}"
                )
    except Exception as exc:  # the database may be down: the container list above says why
        click.echo(f"  instance unreachable: {exc}", err=True)


@deploy.command("down")
@_ROOT
@click.option("--volumes", is_flag=True, help="Also delete the database volume (runs, events).")
def down(root: Path, volumes: bool) -> None:
    """Remove every container of the deployment (services, runs, steps, sandboxes)."""
    from orchestration.deploy.stack import down as stop

    stop(_stack(root), volumes=volumes, log=lambda m: click.echo(m, err=True))
