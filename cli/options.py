"""Options several commands share, and the one way an option shows a library
setting: `option_of(model, field)` takes the default, type, bounds and help of
a library model's field (`Sampling`, `EpisodeLimits`, `AblationConfig`, ...),
so a default is written once, on the model (touchstone/config.py); a round's
Dagster config reads the same fields (`orchestration/resources.py`).
tests/test_defaults.py checks what each command and each round gets."""

from __future__ import annotations

import typing
from typing import Any, Literal

import annotated_types
import click
from pydantic import BaseModel

from touchstone.config import default_of
from touchstone.sandbox import BACKENDS, DEFAULT_BACKEND

# the models are imported where an option needs them, so `touchstone sandbox`
# does not load the agent

_UNSET = object()


def click_type(model: type[BaseModel], field: str) -> click.ParamType:
    """The field's type as click parses it: a choice for a Literal, a range for bounds."""
    info = model.model_fields[field]
    if typing.get_origin(info.annotation) is Literal:
        return click.Choice([str(v) for v in typing.get_args(info.annotation)])
    bounds = {}
    for bound in info.metadata:
        if isinstance(bound, (annotated_types.Ge, annotated_types.Gt)):
            bounds |= {"min": getattr(bound, "ge", getattr(bound, "gt", None)), "min_open": hasattr(bound, "gt")}
        if isinstance(bound, (annotated_types.Le, annotated_types.Lt)):
            bounds |= {"max": getattr(bound, "le", getattr(bound, "lt", None)), "max_open": hasattr(bound, "lt")}
    if info.annotation is int:
        return click.IntRange(**bounds) if bounds else click.INT
    if info.annotation is float:
        return click.FloatRange(**bounds) if bounds else click.FLOAT
    return click.STRING


def option_of(model: type[BaseModel], field: str, *decls: str, default: Any = _UNSET, **attrs):
    """A click option for `model`'s `field` (`--field-name` unless `decls` name it): the
    field's default, type and description, each overridable (`default`: a round's
    profile value where the command measures as a round does)."""
    name = "--" + field.replace("_", "-")
    attrs.setdefault("help", model.model_fields[field].description)
    attrs.setdefault("type", click_type(model, field))
    return click.option(
        *(decls or (name,)),
        default=default_of(model, field) if default is _UNSET else default,
        show_default=True,
        **attrs,
    )


backend = click.option("--backend", type=click.Choice(BACKENDS), default=DEFAULT_BACKEND, show_default=True)


def replays(help: str | None = None):
    from touchstone.verify.report import DEFAULT_REPLAYS

    return click.option("--replays", default=DEFAULT_REPLAYS, show_default=True, type=click.IntRange(min=1), help=help)


def sampling(fn):
    """--temperature, --top-p, --max-tokens, --context-window, --seed, --dtype: a `Sampling`."""
    from touchstone.episode.trajectory import Sampling

    for field in reversed(("temperature", "top_p", "max_tokens", "context_window", "seed", "dtype")):
        fn = option_of(Sampling, field)(fn)
    return fn


def limits(fn):
    """--max-turns, --time-budget: an `EpisodeLimits`."""
    from touchstone.agent.loop import EpisodeLimits

    fn = option_of(EpisodeLimits, "time_budget_s", "--time-budget")(fn)
    return option_of(EpisodeLimits, "max_turns")(fn)


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
