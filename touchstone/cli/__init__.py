"""The `touchstone` command line. Each area registers its own subcommands in a
module of this package; this file only assembles them, lazily, so that
`touchstone sandbox ...` does not import torch."""

from __future__ import annotations

import importlib

import click

# command name -> "module:attribute" of a click command or group
_COMMANDS = {
    "sandbox": "touchstone.cli.sandbox:sandbox",
    "env": "touchstone.cli.env:env",
    "propose": "touchstone.cli.tasks:propose",
    "task": "touchstone.cli.tasks:task",
    "import": "touchstone.cli.tasks:import_",
    "solve": "touchstone.cli.agent:solve",
    "verify": "touchstone.cli.verify:verify",
    "verify-batch": "touchstone.cli.verify:verify_batch",
    "data": "touchstone.cli.data:data",
    "train": "touchstone.cli.train:train",
    "model": "touchstone.cli.train:model",
    "round": "touchstone.cli.rounds:round_",
    "db": "touchstone.cli.rounds:db",
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


@click.group(cls=_LazyGroup)
@click.version_option(package_name="touchstone")
def main() -> None:
    """Touchstone: propose coding tasks, solve them in a sandbox, verify and
    audit every trajectory, and train only on what was verified."""
