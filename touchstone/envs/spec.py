"""What a task environment is made of, and its content digest.

A task declares its environment in task.json (`"environment"`): either an
`EnvSpec` object or the name of a spec shared by a task set, a file
`environments/NAME.json` in the task's directory or one of its ancestors (or
one shipped in `touchstone/envs/specs/`). Format: docs/ENVIRONMENTS.md."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

# The one interpreter both backends ship (sandbox_images/rootfs.json: Debian bookworm).
SANDBOX_PYTHON = "3.11"
SPECS_DIR = "environments"
SHIPPED_SPECS = Path(__file__).with_name("specs")
# Files at the workspace root that decide what a setup command (`pip install -e .`)
# installs; source files do not, so every mutant of one project shares its environment.
PACKAGING_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "MANIFEST.in")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class EnvError(ValueError):
    """An environment spec is malformed, cannot be found, or failed to build."""


class EnvSpec(BaseModel):
    """`requirements`: pip requirement specifiers installed at build time;
    `setup`: shell commands run after them, in /workspace (a copy of the task's
    workspace), with `pip` on PATH and the network on; `python`: must be the
    sandbox's own Python."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requirements: list[str] = Field(default_factory=list)
    setup: list[str] = Field(default_factory=list)
    python: str = SANDBOX_PYTHON

    @field_validator("requirements")
    @classmethod
    def _requirements(cls, value: list[str]) -> list[str]:
        for req in value:
            if not req.strip() or req.lstrip().startswith("-"):
                raise ValueError(f"requirement {req!r} must be a package specifier (options go in `setup`)")
        return value

    @field_validator("python")
    @classmethod
    def _python(cls, value: str) -> str:
        if value != SANDBOX_PYTHON:
            raise ValueError(f"python {value!r} is not available: the sandbox runs Python {SANDBOX_PYTHON} only")
        return value


def load_spec_file(path: Path) -> EnvSpec:
    try:
        return EnvSpec.model_validate_json(path.read_text())
    except OSError as exc:
        raise EnvError(f"{path}: cannot read environment spec: {exc.strerror}") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'spec'}: {e['msg']}" for e in exc.errors())
        raise EnvError(f"{path}: {problems}") from None


def find_named_spec(name: str, start: Path) -> Path:
    """`environments/NAME.json` in `start` or an ancestor, else a shipped spec."""
    if not _NAME_RE.match(name):
        raise EnvError(f"environment name {name!r} must match {_NAME_RE.pattern}")
    for directory in [start, *start.parents]:
        candidate = directory / SPECS_DIR / f"{name}.json"
        if candidate.is_file():
            return candidate
    shipped = SHIPPED_SPECS / f"{name}.json"
    if shipped.is_file():
        return shipped
    raise EnvError(f"environment {name!r} not found: no {SPECS_DIR}/{name}.json above {start} and none shipped")


def resolve(ref: EnvSpec | str | None, task_dir: Path) -> EnvSpec | None:
    """The spec a task's `environment` field names (None: the base environment)."""
    if ref is None or isinstance(ref, EnvSpec):
        return ref
    return load_spec_file(find_named_spec(ref, task_dir))


def packaging_digest(workspace: Path | None) -> str:
    """sha256 over the packaging files and the top-level entries of a workspace."""
    h = hashlib.sha256()
    if workspace is None:
        return h.hexdigest()
    h.update("\0".join(sorted(p.name for p in workspace.iterdir() if not p.name.startswith("."))).encode())
    for name in PACKAGING_FILES:
        if (workspace / name).is_file():
            h.update(f"\0{name}\0".encode() + (workspace / name).read_bytes())
    return h.hexdigest()


def digest(spec: EnvSpec, base_image: str, workspace: Path | None) -> str:
    """Content id of an environment: the spec, the base image it is built on,
    and (only when it has setup commands, which see the workspace) the
    workspace's packaging files."""
    payload = {
        "spec": spec.model_dump(mode="json"),
        "base": base_image,
        "packaging": packaging_digest(workspace) if spec.setup else None,
    }
    return "sha256:" + hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
