"""User config: reading config files into their pydantic models with errors a
person can act on (one line naming the file, each bad key's dotted path and
why), and the one way another config shows a library model's setting.

Every default lives once, on a field of a library model (`Sampling`,
`EpisodeLimits`, `WarmStartConfig`, ...): a Dagster config or resource field
is `field_of(model, name)` and a command-line option
`cli.options.option_of(model, name)`, so both take the field's default, bounds
and description from there. A round's laptop-CPU profile
(`touchstone.rounds.CPU_ROUND`) names the few values a round changes."""

from __future__ import annotations

import copy
import inspect
from pathlib import Path
from typing import Any, Callable, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A config file that does not fit its model."""


def describe(exc: ValidationError) -> str:
    """'credit.gamma: Input should be a valid number; keep_per_tsk: unknown key' from a ValidationError."""
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"{where}: unknown key" if err["type"] == "extra_forbidden" else f"{where}: {err['msg']}")
    return "; ".join(parts)


def load_config(model: type[M], path: str | Path | None) -> M:
    """`model` from a YAML (or JSON) file; no file = the model's defaults."""
    if path is None:
        return model()
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read it as YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of {model.__name__} fields, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe(exc)}") from None


_LIBRARY = object()  # no value of the round's own: the library's default


def default_of(model: type[BaseModel], name: str) -> Any:
    """The default a user of `model` gets for field `name`."""
    return model.model_fields[name].get_default(call_default_factory=True)


def field_of(model: type[BaseModel], name: str, *, default: Any = _LIBRARY) -> FieldInfo:
    """`model`'s field `name` as a field of another model (a Dagster config or
    resource): its description and bounds, and its default unless the round
    gives its own `default` (the description then names both). The other model writes
    the field's type; tests/test_defaults.py holds it to the library's."""
    info = model.model_fields[name]
    library = default_of(model, name)
    field = copy.copy(info)
    field.metadata = list(info.metadata)
    field.default, field.default_factory = (library if default is _LIBRARY else default), None
    if default is not _LIBRARY:
        field.description = f"{info.description or name} (a round: {default!r}; library: {library!r})"
    return field


def parameter_default(function: Callable, name: str) -> Any:
    """The default of `function`'s parameter `name`: where a library call, not a
    model, holds a setting (`solve(attempts=1)`), its callers' options read it."""
    return inspect.signature(function).parameters[name].default
