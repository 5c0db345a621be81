"""A task environment as the sandbox sees it: a built, read-only tree of
installed packages, mounted at the same place by both backends.

The tree replaces the root filesystem's `/usr/local`, which Debian's Python
already searches (`/usr/local/lib/python3.11/dist-packages` before the system
packages, `/usr/local/bin` first on every PATH). So every command sees the
packages, the harness's own `env -i ... python3 -s` ones too, with no
variable to set, and both backends run the very same bytes. Built by
`touchstone.envs` (docs/ENVIRONMENTS.md)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

# Where the tree appears inside every sandbox.
ENV_TARGET = "/usr/local"


class Environment(BaseModel):
    """`tree`: host directory mounted read-only at ENV_TARGET; `digest`: content
    id of what was built (spec + base image + packaging files); `top_level`:
    importable top-level names the tree installs (a workspace must not shadow them)."""

    model_config = ConfigDict(frozen=True)

    tree: Path
    digest: str
    top_level: frozenset[str] = frozenset()
