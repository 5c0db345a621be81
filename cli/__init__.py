"""The `touchstone` command line: the application layer, above the domain
library (`touchstone/`), `training/` and `orchestration/`, the one package
allowed to import all three. Each area registers its own subcommands in a
module of this package; this file only assembles them, lazily, so that
`touchstone sandbox ...` does not import torch."""

from __future__ import annotations

import importlib

import click

# command name -> "module:attribute" of a click command or group
_COMMANDS = {
    "sandbox": "cli.sandbox:sandbox",
    "env": "cli.env:env",
    "propose": "cli.tasks:propose",
    "task": "cli.tasks:task",
    "import": "cli.tasks:import_",
    "solve": "cli.agent:solve",
    "verify": "cli.verify:verify",
    "verify-batch": "cli.verify:verify_batch",
    "data": "cli.data:data",
    "train": "cli.train:train",
    "model": "cli.train:model",
    "round": "cli.rounds:round_",
    "db": "cli.rounds:db",
    "deploy": "cli.deploy:deploy",
    "eval": "cli.evaluate:evaluate",
    "experiment": "cli.experiment:experiment",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = _COMMANDS.get(name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:  # that area is not built yet
                return None
            raise
        return getattr(module, attr)

    def invoke(self, ctx: click.Context):
        """Errors end in one line (cli/errors.py); --debug lets them through with their traceback."""
        from cli.errors import debugging, unexpected

        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit, KeyboardInterrupt):
            raise
        except Exception as exc:
            if debugging(ctx):
                raise
            unexpected(exc)


@click.group(cls=_LazyGroup)
@click.version_option(package_name="touchstone")
@click.option("--debug", is_flag=True, help="On an error, show its traceback (and Dagster's full log for rounds).")
def main(debug: bool) -> None:
    """Touchstone: propose coding tasks, solve them in a sandbox, verify and
    audit every trajectory, and train only on what was verified."""
