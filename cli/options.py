"""Options several commands share, with their defaults read from the library's
own models and constants (`Sampling`, `EpisodeLimits`, the verifier's replays,
the sandbox backends), so a default is written once: here it is only shown.
A round's Dagster config reads the same ones (`orchestration/resources.py`);
`tests/test_defaults.py` holds the two together."""

from __future__ import annotations

from typing import Any

import click
from pydantic import BaseModel

from touchstone.sandbox import BACKENDS, DEFAULT_BACKEND

# the models are imported where an option needs them, so `touchstone sandbox`
# does not load the agent


def default(model: type[BaseModel], field: str) -> Any:
    return model.model_fields[field].get_default(call_default_factory=True)


backend = click.option("--backend", type=click.Choice(BACKENDS), default=DEFAULT_BACKEND, show_default=True)


def replays(help: str | None = None):
    from touchstone.verify.report import DEFAULT_REPLAYS

    return click.option("--replays", default=DEFAULT_REPLAYS, show_default=True, type=click.IntRange(min=1), help=help)


def sampling(fn):
    """--temperature, --top-p, --max-tokens, --context-window, --seed: a `Sampling`."""
    from touchstone.episode.trajectory import Sampling

    for option in reversed(
        [
            click.option("--temperature", default=default(Sampling, "temperature"), show_default=True, type=float),
            click.option("--top-p", default=default(Sampling, "top_p"), show_default=True, type=float),
            click.option(
                "--max-tokens",
                default=default(Sampling, "max_tokens"),
                show_default=True,
                type=int,
                help="per assistant turn",
            ),
            click.option(
                "--context-window",
                default=default(Sampling, "context_window"),
                show_default=True,
                type=click.IntRange(min=0),
                help="hf: tokens per turn, prompt and completion (the latest kept); match the "
                "trainer's max_length; 0: the whole conversation",
            ),
            click.option(
                "--seed",
                default=default(Sampling, "seed"),
                show_default=True,
                type=int,
                help="base seed; attempt i uses seed+i",
            ),
        ]
    ):
        fn = option(fn)
    return fn


def limits(fn):
    """--max-turns, --time-budget: an `EpisodeLimits`."""
    from touchstone.agent.loop import EpisodeLimits

    fn = click.option(
        "--time-budget",
        default=default(EpisodeLimits, "time_budget_s"),
        show_default=True,
        type=float,
        help="seconds per episode",
    )(fn)
    return click.option(
        "--max-turns", default=default(EpisodeLimits, "max_turns"), show_default=True, type=click.IntRange(min=1)
    )(fn)


class PolicySpecParam(click.ParamType):
    """A `--policy` value, parsed here, where it enters, into a `PolicySpec`."""

    name = "policy"

    def convert(self, value, param, ctx):
        from touchstone.agent.policies.spec import PolicySpec, PolicySpecError

        if not isinstance(value, str):
            return value
        try:
            return PolicySpec.parse(value)
        except PolicySpecError as exc:
            self.fail(str(exc), param, ctx)


POLICY = PolicySpecParam()
