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

import dataclasses
import inspect
from pathlib import Path
from typing import Any, Callable, TypeVar

import yaml
from pydantic import BaseModel, Field, ValidationError
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


def library_fields(model: type) -> dict[str, FieldInfo]:
    """The fields of a pydantic model, or of a dataclass (a description in its
    field's `metadata`, if any)."""
    if not dataclasses.is_dataclass(model):
        return model.model_fields
    fields = {}
    for f in dataclasses.fields(model):
        described = {"description": f.metadata.get("description")}
        if f.default is not dataclasses.MISSING:
            fields[f.name] = Field(default=f.default, **described)
        elif f.default_factory is not dataclasses.MISSING:
            fields[f.name] = Field(default_factory=f.default_factory, **described)
        else:
            fields[f.name] = Field(**described)
    return fields


def default_of(model: type, name: str) -> Any:
    """The default a user of `model` (a pydantic model or a dataclass) gets for field `name`."""
    return library_fields(model)[name].get_default(call_default_factory=True)


def field_of(model: type, name: str, *, default: Any = _LIBRARY, description: str | None = None) -> FieldInfo:
    """`model`'s field `name` as a field of another model (a Dagster config or
    resource): its description and bounds, and its default unless the round
    gives its own `default` (the description then names both). `description`:
    the other model's wording, where the library's field has none. The other
    model writes the field's type; tests/test_defaults.py holds it to the library's."""
    info = library_fields(model)[name]
    library = default_of(model, name)
    description = info.description or description
    if default is not _LIBRARY:
        description = f"{description or name} (a round: {default!r}; library: {library!r})"
    return Field(default=library if default is _LIBRARY else default, description=description, **_bounds(info.metadata))


def _bounds(metadata: list) -> dict[str, Any]:
    """A field's constraints (annotated_types objects) as `Field` arguments."""
    bounds = {}
    for constraint in metadata:
        keys = [key for key in _BOUNDS if hasattr(constraint, key)]
        if len(keys) != 1:
            raise TypeError(f"cannot carry the constraint {constraint!r} into another config")
        bounds[keys[0]] = getattr(constraint, keys[0])
    return bounds


_BOUNDS = ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length")


def parameter_default(function: Callable, name: str) -> Any:
    """The default of `function`'s parameter `name`: where a library call, not a
    model, holds a setting (`solve(attempts=1)`), its callers' options read it."""
    return inspect.signature(function).parameters[name].default
