"""`touchstone sandbox ...`: build the environment, run a command in a sandbox."""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path

import click

from cli import options
from touchstone.config import default_of
from touchstone.sandbox import Limits, SandboxError, open_sandbox, parse_size
from touchstone.sandbox.base import GiB


@click.group()
def sandbox() -> None:
    """Build the sandbox environment and run commands in it."""


@sandbox.command("rootfs")
def rootfs() -> None:
    """Build (if missing) the bwrap root filesystem and print its path."""
    from touchstone.sandbox.image import ensure_rootfs

    try:
        click.echo(ensure_rootfs())
    except SandboxError as exc:
        raise click.ClickException(str(exc)) from exc


@sandbox.command("build-image")
def build_image() -> None:
    """Build (if missing) the Docker image from sandbox_images/ and print its tag."""
    from touchstone.sandbox.docker import ensure_image

    try:
        click.echo(ensure_image())
    except SandboxError as exc:
        raise click.ClickException(str(exc)) from exc


@sandbox.command("run", context_settings={"ignore_unknown_options": True})
@options.backend
@click.option("--workspace", type=click.Path(path_type=Path), help="directory copied in as /workspace (default: empty)")
@options.option_of(Limits, "timeout_s", "--timeout", help="seconds before the command is killed")
@click.option(
    "--memory",
    default=f"{default_of(Limits, 'memory_bytes') // GiB}g",
    show_default=True,
    help="memory limit, e.g. 512m",
)
@click.option("--json", "as_json", is_flag=True, help="print the ExecResult as JSON")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(
    backend: str, workspace: Path | None, timeout: float, memory: str, as_json: bool, command: tuple[str, ...]
) -> None:
    """Run COMMAND (after --) in a fresh sandbox; exits with its exit code.
    Asked for explicitly, the docker backend first builds its image if missing."""
    try:
        limits = Limits(timeout_s=timeout, memory_bytes=parse_size(memory))
        if backend == "docker":
            from touchstone.sandbox.docker import ensure_image

            ensure_image()
        with tempfile.TemporaryDirectory(prefix="touchstone-empty-ws-") as empty:
            with open_sandbox(workspace or empty, backend, limits=limits) as sb:
                result = sb.exec(list(command))
    except (SandboxError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
        notes = [f"timed out after {timeout:g}s"] * result.timed_out + ["killed: out of memory"] * result.oom_killed
        notes += [
            f"{name} truncated: {getattr(result, name + '_bytes')} bytes in all"
            for name in ("stdout", "stderr")
            if getattr(result, name + "_truncated")
        ]
        for note in notes:
            click.echo(f"touchstone sandbox: {shlex.join(command)}: {note}", err=True)
    sys.exit(result.exit_code)
