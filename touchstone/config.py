"""Reading user config files into their pydantic models with errors a person
can act on: one line naming the file, each bad key's dotted path and why."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

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
